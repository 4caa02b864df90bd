//! The login/text keys of RFC 7143 §12–§13 as a table: one row per key with
//! its result function, domain, default, scope, where it may be used and the
//! section that defines it. Negotiation code reads the table; it holds no
//! per-key special cases beyond the few the RFC itself states (noted where
//! they are implemented).

use std::fmt;

/// How the outcome of a key is computed (RFC 7143 §6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultFn {
    /// The responder picks the first value of the proposer's list that it
    /// supports (RFC 7143 §6.2.1).
    List,
    /// Numerical minimum of the two values (RFC 7143 §6.2.2).
    Min,
    /// Numerical maximum of the two values.
    Max,
    /// Boolean AND (RFC 7143 §6.2.2).
    And,
    /// Boolean OR.
    Or,
    /// Each side declares its own value; there is no negotiated outcome
    /// (RFC 7143 §6.2: "declarative").
    Declarative,
}

/// The values a key can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    Bool,
    /// Inclusive numeric range.
    Number {
        min: u64,
        max: u64,
    },
    /// A list of literal constants (for `List` keys: the ones defined).
    Literals(&'static [&'static str]),
    /// Free text up to a length (iSCSI names are at most 223 bytes,
    /// RFC 7143 §4.2.7.1).
    Text {
        max_len: usize,
    },
}

/// Whether a key belongs to the session or to one connection
/// (RFC 7143 §13: "Scope: SW / CO").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Session,
    Connection,
}

/// Where a key may appear (RFC 7143 §13: "Use").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    /// Leading-only: the login of the first connection of a session.
    LeadingOnly,
    /// Initialize-only: any login, never in full feature phase.
    InitializeOnly,
    /// Login or full feature phase text negotiation.
    All,
    /// Full feature phase only (SendTargets).
    FullFeatureOnly,
    /// Security negotiation stage only (RFC 7143 §12).
    SecurityOnly,
}

/// Which side may send (originate) the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sender {
    Initiator,
    Target,
    Both,
}

/// One row of the key table.
#[derive(Clone, Copy, Debug)]
pub struct KeyDef {
    pub name: &'static str,
    pub result: ResultFn,
    pub domain: Domain,
    /// The RFC default, used when the key is never negotiated.
    pub default: &'static str,
    pub scope: Scope,
    pub usage: Usage,
    pub sender: Sender,
    /// Whether the key means anything in a discovery session; otherwise it
    /// is answered `Irrelevant` there (RFC 7143 §13, "Irrelevant when:
    /// SessionType=Discovery").
    pub in_discovery: bool,
    pub rfc: &'static str,
}

/// Keys are identified by their row in [`KEYS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub usize);

impl KeyId {
    pub fn def(self) -> &'static KeyDef {
        // Every KeyId is made by `KeyId::of` or by the constants below, so
        // the index is in range; fall back to the first row defensively.
        KEYS.get(self.0).unwrap_or(&KEYS[0])
    }

    /// Looks a key up by its exact (case-sensitive, RFC 7143 §6.1) name.
    pub fn of(name: &str) -> Option<KeyId> {
        KEYS.iter().position(|k| k.name == name).map(KeyId)
    }

    pub fn name(self) -> &'static str {
        self.def().name
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

const NAME_MAX: usize = 223;
const LEN_MAX: u64 = (1 << 24) - 1;

macro_rules! key_ids {
    ($($id:ident = $idx:expr;)*) => {
        impl KeyId { $(pub const $id: KeyId = KeyId($idx);)* }
    };
}

key_ids! {
    HEADER_DIGEST = 0;
    DATA_DIGEST = 1;
    MAX_CONNECTIONS = 2;
    SEND_TARGETS = 3;
    TARGET_NAME = 4;
    INITIATOR_NAME = 5;
    TARGET_ALIAS = 6;
    INITIATOR_ALIAS = 7;
    TARGET_ADDRESS = 8;
    TARGET_PORTAL_GROUP_TAG = 9;
    INITIAL_R2T = 10;
    IMMEDIATE_DATA = 11;
    MAX_RECV_DATA_SEGMENT_LENGTH = 12;
    MAX_BURST_LENGTH = 13;
    FIRST_BURST_LENGTH = 14;
    DEFAULT_TIME2WAIT = 15;
    DEFAULT_TIME2RETAIN = 16;
    MAX_OUTSTANDING_R2T = 17;
    DATA_PDU_IN_ORDER = 18;
    DATA_SEQUENCE_IN_ORDER = 19;
    ERROR_RECOVERY_LEVEL = 20;
    SESSION_TYPE = 21;
    TASK_REPORTING = 22;
    ISCSI_PROTOCOL_LEVEL = 23;
    AUTH_METHOD = 24;
}

/// Number of rows in [`KEYS`].
pub const KEY_COUNT: usize = 25;

/// The table. Row order is fixed by the `KeyId` constants above.
pub static KEYS: [KeyDef; KEY_COUNT] = [
    KeyDef {
        name: "HeaderDigest",
        result: ResultFn::List,
        domain: Domain::Literals(&["CRC32C", "None"]),
        default: "None",
        scope: Scope::Connection,
        usage: Usage::InitializeOnly,
        sender: Sender::Both,
        in_discovery: true,
        rfc: "RFC 7143 §13.1",
    },
    KeyDef {
        name: "DataDigest",
        result: ResultFn::List,
        domain: Domain::Literals(&["CRC32C", "None"]),
        default: "None",
        scope: Scope::Connection,
        usage: Usage::InitializeOnly,
        sender: Sender::Both,
        in_discovery: true,
        rfc: "RFC 7143 §13.1",
    },
    KeyDef {
        name: "MaxConnections",
        result: ResultFn::Min,
        domain: Domain::Number { min: 1, max: 65535 },
        default: "1",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.2",
    },
    KeyDef {
        name: "SendTargets",
        result: ResultFn::Declarative,
        domain: Domain::Text { max_len: NAME_MAX },
        default: "",
        scope: Scope::Session,
        usage: Usage::FullFeatureOnly,
        sender: Sender::Initiator,
        in_discovery: true,
        rfc: "RFC 7143 §13.3",
    },
    KeyDef {
        name: "TargetName",
        result: ResultFn::Declarative,
        domain: Domain::Text { max_len: NAME_MAX },
        default: "",
        scope: Scope::Session,
        usage: Usage::InitializeOnly,
        sender: Sender::Initiator,
        in_discovery: true,
        rfc: "RFC 7143 §13.4",
    },
    KeyDef {
        name: "InitiatorName",
        result: ResultFn::Declarative,
        domain: Domain::Text { max_len: NAME_MAX },
        default: "",
        scope: Scope::Session,
        usage: Usage::InitializeOnly,
        sender: Sender::Initiator,
        in_discovery: true,
        rfc: "RFC 7143 §13.5",
    },
    KeyDef {
        name: "TargetAlias",
        result: ResultFn::Declarative,
        domain: Domain::Text { max_len: 255 },
        default: "",
        scope: Scope::Session,
        usage: Usage::All,
        sender: Sender::Target,
        in_discovery: true,
        rfc: "RFC 7143 §13.6",
    },
    KeyDef {
        name: "InitiatorAlias",
        result: ResultFn::Declarative,
        domain: Domain::Text { max_len: 255 },
        default: "",
        scope: Scope::Session,
        usage: Usage::All,
        sender: Sender::Initiator,
        in_discovery: true,
        rfc: "RFC 7143 §13.7",
    },
    KeyDef {
        name: "TargetAddress",
        result: ResultFn::Declarative,
        domain: Domain::Text { max_len: 255 },
        default: "",
        scope: Scope::Session,
        usage: Usage::All,
        sender: Sender::Target,
        in_discovery: true,
        rfc: "RFC 7143 §13.8",
    },
    KeyDef {
        name: "TargetPortalGroupTag",
        result: ResultFn::Declarative,
        domain: Domain::Number { min: 0, max: 65535 },
        default: "1",
        scope: Scope::Session,
        usage: Usage::InitializeOnly,
        sender: Sender::Target,
        in_discovery: true,
        rfc: "RFC 7143 §13.9",
    },
    KeyDef {
        name: "InitialR2T",
        result: ResultFn::Or,
        domain: Domain::Bool,
        default: "Yes",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.10",
    },
    KeyDef {
        name: "ImmediateData",
        result: ResultFn::And,
        domain: Domain::Bool,
        default: "Yes",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.11",
    },
    KeyDef {
        name: "MaxRecvDataSegmentLength",
        result: ResultFn::Declarative,
        domain: Domain::Number {
            min: 512,
            max: LEN_MAX,
        },
        default: "8192",
        scope: Scope::Connection,
        usage: Usage::All,
        sender: Sender::Both,
        in_discovery: true,
        rfc: "RFC 7143 §13.12",
    },
    KeyDef {
        name: "MaxBurstLength",
        result: ResultFn::Min,
        domain: Domain::Number {
            min: 512,
            max: LEN_MAX,
        },
        default: "262144",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.13",
    },
    KeyDef {
        name: "FirstBurstLength",
        result: ResultFn::Min,
        domain: Domain::Number {
            min: 512,
            max: LEN_MAX,
        },
        default: "65536",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.14",
    },
    KeyDef {
        name: "DefaultTime2Wait",
        result: ResultFn::Max,
        domain: Domain::Number { min: 0, max: 3600 },
        default: "2",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.15",
    },
    KeyDef {
        name: "DefaultTime2Retain",
        result: ResultFn::Min,
        domain: Domain::Number { min: 0, max: 3600 },
        default: "20",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.16",
    },
    KeyDef {
        name: "MaxOutstandingR2T",
        result: ResultFn::Min,
        domain: Domain::Number { min: 1, max: 65535 },
        default: "1",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.17",
    },
    KeyDef {
        name: "DataPDUInOrder",
        result: ResultFn::Or,
        domain: Domain::Bool,
        default: "Yes",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.18",
    },
    KeyDef {
        name: "DataSequenceInOrder",
        result: ResultFn::Or,
        domain: Domain::Bool,
        default: "Yes",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.19",
    },
    KeyDef {
        name: "ErrorRecoveryLevel",
        result: ResultFn::Min,
        domain: Domain::Number { min: 0, max: 2 },
        default: "0",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: true,
        rfc: "RFC 7143 §13.20",
    },
    KeyDef {
        name: "SessionType",
        result: ResultFn::Declarative,
        domain: Domain::Literals(&["Discovery", "Normal"]),
        default: "Normal",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Initiator,
        in_discovery: true,
        rfc: "RFC 7143 §13.21",
    },
    KeyDef {
        name: "TaskReporting",
        result: ResultFn::List,
        domain: Domain::Literals(&["RFC3720", "ResponseFence", "FastAbort"]),
        default: "RFC3720",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.23",
    },
    KeyDef {
        name: "iSCSIProtocolLevel",
        result: ResultFn::Min,
        domain: Domain::Number { min: 0, max: 31 },
        default: "1",
        scope: Scope::Session,
        usage: Usage::LeadingOnly,
        sender: Sender::Both,
        in_discovery: false,
        rfc: "RFC 7143 §13.24",
    },
    KeyDef {
        name: "AuthMethod",
        result: ResultFn::List,
        domain: Domain::Literals(&["None", "CHAP"]),
        default: "None",
        scope: Scope::Connection,
        usage: Usage::SecurityOnly,
        sender: Sender::Both,
        in_discovery: true,
        rfc: "RFC 7143 §12.1",
    },
];

/// Negotiated keys the target answers when offered but never proposes
/// itself. iSCSIProtocolLevel (RFC 7143 §13.24; RFC 7144 defines level 2): the
/// initiator offers the level it can use and the minimum is the outcome;
/// an initiator that does not offer the key stays at the default (1)
/// whatever the target proposed, so a proposal would only cost a login
/// round with every initiator that does not know the key.
pub const ANSWERED_ONLY: &[KeyId] = &[KeyId::ISCSI_PROTOCOL_LEVEL];

/// Keys obsoleted by RFC 7143 §13.25 (markers). IFMarker and OFMarker MAY
/// be answered `No`; IFMarkInt and OFMarkInt MUST be answered `Reject`.
pub fn obsolete_key_answer(name: &str) -> Option<&'static str> {
    match name {
        "IFMarker" | "OFMarker" => Some("No"),
        "IFMarkInt" | "OFMarkInt" => Some(REJECT),
        _ => None,
    }
}

/// Reserved answer constants (RFC 7143 §6.2).
pub const REJECT: &str = "Reject";
pub const IRRELEVANT: &str = "Irrelevant";
pub const NOT_UNDERSTOOD: &str = "NotUnderstood";
pub const NONE: &str = "None";

/// A typed key value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Bool(bool),
    Number(u64),
    /// A literal, text or list value as sent.
    Text(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(true) => f.write_str("Yes"),
            Value::Bool(false) => f.write_str("No"),
            Value::Number(n) => write!(f, "{n}"),
            Value::Text(s) => f.write_str(s),
        }
    }
}

impl Value {
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<u64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }
}

/// Why a value does not belong to a key's domain.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("{key}: '{value}' is not Yes or No")]
    NotBool { key: &'static str, value: String },
    #[error("{key}: '{value}' is not a number")]
    NotNumber { key: &'static str, value: String },
    #[error("{key}: {value} is outside {min}..={max}")]
    OutOfRange {
        key: &'static str,
        value: u64,
        min: u64,
        max: u64,
    },
    #[error("{key}: value longer than {max_len} bytes")]
    TooLong { key: &'static str, max_len: usize },
    #[error("{key}: '{value}' is not one of the defined values")]
    UnknownLiteral { key: &'static str, value: String },
}

/// Parses a numerical value: decimal or `0x` hex (RFC 7143 §6.1,
/// "regular-numerical-value"; base64 numbers are allowed by the grammar but
/// used by no key with a numeric domain, and are refused).
pub fn parse_number(s: &str) -> Option<u64> {
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if hex.is_empty() || hex.len() > 16 {
            return None;
        }
        u64::from_str_radix(hex, 16).ok()
    } else {
        if s.is_empty() || s.len() > 20 || !s.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    }
}

impl KeyDef {
    /// Parses a single (non-list) value in this key's domain.
    pub fn parse(&self, s: &str) -> Result<Value, ValueError> {
        match self.domain {
            Domain::Bool => match s {
                "Yes" => Ok(Value::Bool(true)),
                "No" => Ok(Value::Bool(false)),
                _ => Err(ValueError::NotBool {
                    key: self.name,
                    value: s.to_owned(),
                }),
            },
            Domain::Number { min, max } => {
                let n = parse_number(s).ok_or_else(|| ValueError::NotNumber {
                    key: self.name,
                    value: s.to_owned(),
                })?;
                if n < min || n > max {
                    return Err(ValueError::OutOfRange {
                        key: self.name,
                        value: n,
                        min,
                        max,
                    });
                }
                Ok(Value::Number(n))
            }
            Domain::Literals(lits) => {
                if lits.contains(&s) {
                    Ok(Value::Text(s.to_owned()))
                } else {
                    Err(ValueError::UnknownLiteral {
                        key: self.name,
                        value: s.to_owned(),
                    })
                }
            }
            Domain::Text { max_len } => {
                if s.len() > max_len {
                    Err(ValueError::TooLong {
                        key: self.name,
                        max_len,
                    })
                } else {
                    Ok(Value::Text(s.to_owned()))
                }
            }
        }
    }

    /// The RFC default as a typed value.
    pub fn default_value(&self) -> Option<Value> {
        if self.default.is_empty() {
            return None;
        }
        self.parse(self.default).ok()
    }
}

/// What the acceptor answers to one offered key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The negotiated value, sent back as the answer.
    Value(Value),
    /// `Reject`: offer not admissible (RFC 7143 §6.2.1, §6.2.2).
    Reject,
    /// `Irrelevant` (RFC 7143 §6.2).
    Irrelevant,
}

impl Answer {
    pub fn wire(&self) -> String {
        match self {
            Answer::Value(v) => v.to_string(),
            Answer::Reject => REJECT.to_owned(),
            Answer::Irrelevant => IRRELEVANT.to_owned(),
        }
    }
}

/// The acceptor's result function for one key (RFC 7143 §6.2.1, §6.2.2).
///
/// `offered` is the value text from the proposer; `ours` is what the
/// acceptor would choose on its own. For list keys `ours` is the acceptor's
/// list of supported values, in its preference order. Declarative keys have
/// no result; they are answered by the caller, not here.
pub fn accept(def: &KeyDef, offered: &str, ours: &Value) -> Answer {
    match def.result {
        ResultFn::List => {
            let supported: Vec<&str> = ours.as_text().map(split_list).unwrap_or_default();
            // First value in the proposer's order that we support; values we
            // do not understand are ignored (RFC 7143 §6.2.1).
            split_list(offered)
                .into_iter()
                .find(|v| supported.contains(v) && def.parse(v).is_ok())
                .map(|v| Answer::Value(Value::Text(v.to_owned())))
                .unwrap_or(Answer::Reject)
        }
        ResultFn::Min | ResultFn::Max => match (def.parse(offered), ours.as_number()) {
            (Ok(Value::Number(theirs)), Some(mine)) => {
                Answer::Value(Value::Number(if def.result == ResultFn::Min {
                    theirs.min(mine)
                } else {
                    theirs.max(mine)
                }))
            }
            _ => Answer::Reject,
        },
        ResultFn::And | ResultFn::Or => match (def.parse(offered), ours.as_bool()) {
            (Ok(Value::Bool(theirs)), Some(mine)) => {
                Answer::Value(Value::Bool(if def.result == ResultFn::And {
                    theirs && mine
                } else {
                    theirs || mine
                }))
            }
            _ => Answer::Reject,
        },
        ResultFn::Declarative => match def.parse(offered) {
            Ok(v) => Answer::Value(v),
            Err(_) => Answer::Reject,
        },
    }
}

/// The proposer's check of an answer (the initiator side of a login, or a
/// target that proposed a key). Returns the outcome or why the answer is a
/// protocol error ("selection of a value not admissible", RFC 7143 §6.2.2).
pub fn check_answer(def: &KeyDef, offered: &Value, answer: &str) -> Result<Option<Value>, String> {
    if answer == REJECT || answer == IRRELEVANT || answer == NOT_UNDERSTOOD {
        // The key keeps its default.
        return Ok(None);
    }
    match def.result {
        ResultFn::List => {
            let offered_list = offered.as_text().map(split_list).unwrap_or_default();
            if offered_list.contains(&answer) {
                Ok(Some(Value::Text(answer.to_owned())))
            } else {
                Err(format!("{}: answer '{answer}' was not offered", def.name))
            }
        }
        ResultFn::Min | ResultFn::Max => {
            let v = def.parse(answer).map_err(|e| e.to_string())?;
            let (Some(a), Some(o)) = (v.as_number(), offered.as_number()) else {
                return Err(format!("{}: not numeric", def.name));
            };
            let ok = if def.result == ResultFn::Min {
                a <= o
            } else {
                a >= o
            };
            if ok {
                Ok(Some(v))
            } else {
                Err(format!(
                    "{}: answer {a} is not admissible against offer {o}",
                    def.name
                ))
            }
        }
        ResultFn::And | ResultFn::Or => {
            let v = def.parse(answer).map_err(|e| e.to_string())?;
            let (Some(a), Some(o)) = (v.as_bool(), offered.as_bool()) else {
                return Err(format!("{}: not boolean", def.name));
            };
            // AND can only lower Yes to No; OR can only raise No to Yes.
            let ok = if def.result == ResultFn::And {
                !a || o
            } else {
                a || !o
            };
            if ok {
                Ok(Some(v))
            } else {
                Err(format!(
                    "{}: answer {v} impossible for offer {offered}",
                    def.name
                ))
            }
        }
        ResultFn::Declarative => def.parse(answer).map(Some).map_err(|e| e.to_string()),
    }
}

fn split_list(s: &str) -> Vec<&str> {
    s.split(',').filter(|v| !v.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> &'static KeyDef {
        KeyId::of(name).unwrap().def()
    }

    #[test]
    fn table_rows_match_ids_and_defaults_parse() {
        assert_eq!(KeyId::HEADER_DIGEST.name(), "HeaderDigest");
        assert_eq!(KeyId::AUTH_METHOD.name(), "AuthMethod");
        assert_eq!(KeyId::ISCSI_PROTOCOL_LEVEL.name(), "iSCSIProtocolLevel");
        assert_eq!(
            KeyId::MAX_RECV_DATA_SEGMENT_LENGTH.name(),
            "MaxRecvDataSegmentLength"
        );
        for (i, k) in KEYS.iter().enumerate() {
            assert_eq!(KeyId::of(k.name), Some(KeyId(i)));
            if !k.default.is_empty() {
                assert!(k.default_value().is_some(), "{} default must parse", k.name);
            }
            assert!(k.rfc.starts_with("RFC 7143 §"));
        }
        // Key names are case-sensitive (RFC 7143 §6.1).
        assert_eq!(KeyId::of("headerdigest"), None);
    }

    #[test]
    fn every_key_of_section_13_is_in_the_table() {
        for name in [
            "HeaderDigest",
            "DataDigest",
            "MaxConnections",
            "SendTargets",
            "TargetName",
            "InitiatorName",
            "TargetAlias",
            "InitiatorAlias",
            "TargetAddress",
            "TargetPortalGroupTag",
            "InitialR2T",
            "ImmediateData",
            "MaxRecvDataSegmentLength",
            "MaxBurstLength",
            "FirstBurstLength",
            "DefaultTime2Wait",
            "DefaultTime2Retain",
            "MaxOutstandingR2T",
            "DataPDUInOrder",
            "DataSequenceInOrder",
            "ErrorRecoveryLevel",
            "SessionType",
            "TaskReporting",
            "iSCSIProtocolLevel",
        ] {
            assert!(KeyId::of(name).is_some(), "{name} missing");
        }
    }

    fn num(n: u64) -> Value {
        Value::Number(n)
    }

    fn text(s: &str) -> Value {
        Value::Text(s.into())
    }

    #[test]
    fn list_keys_pick_first_supported_in_proposer_order() {
        let hd = key("HeaderDigest");
        assert_eq!(
            accept(hd, "CRC32C,None", &text("None,CRC32C")),
            Answer::Value(text("CRC32C"))
        );
        assert_eq!(
            accept(hd, "None,CRC32C", &text("CRC32C,None")),
            Answer::Value(text("None"))
        );
        assert_eq!(accept(hd, "CRC32C", &text("None")), Answer::Reject);
        // Unknown values in the list are ignored.
        assert_eq!(
            accept(hd, "MD5,None", &text("None")),
            Answer::Value(text("None"))
        );
        let dd = key("DataDigest");
        assert_eq!(
            accept(dd, "CRC32C", &text("CRC32C,None")),
            Answer::Value(text("CRC32C"))
        );
        let am = key("AuthMethod");
        assert_eq!(
            accept(am, "CHAP,None", &text("None")),
            Answer::Value(text("None"))
        );
        assert_eq!(accept(am, "KRB5", &text("None")), Answer::Reject);
        let tr = key("TaskReporting");
        assert_eq!(
            accept(tr, "FastAbort,RFC3720", &text("RFC3720")),
            Answer::Value(text("RFC3720"))
        );
    }

    #[test]
    fn min_keys() {
        for (name, lo, hi) in [
            ("MaxConnections", 1, 65535),
            ("MaxBurstLength", 512, (1 << 24) - 1),
            ("FirstBurstLength", 512, (1 << 24) - 1),
            ("DefaultTime2Retain", 0, 3600),
            ("MaxOutstandingR2T", 1, 65535),
            ("ErrorRecoveryLevel", 0, 2),
            ("iSCSIProtocolLevel", 0, 31),
        ] {
            let k = key(name);
            assert_eq!(k.result, ResultFn::Min, "{name}");
            assert_eq!(
                accept(k, &hi.to_string(), &num(lo)),
                Answer::Value(num(lo)),
                "{name}"
            );
            assert_eq!(
                accept(k, &lo.to_string(), &num(hi)),
                Answer::Value(num(lo)),
                "{name}"
            );
            // Out of range is answered Reject (RFC 7143 §6.2.2).
            assert_eq!(
                accept(k, &(hi + 1).to_string(), &num(lo)),
                Answer::Reject,
                "{name}"
            );
            if lo > 0 {
                assert_eq!(
                    accept(k, &(lo - 1).to_string(), &num(lo)),
                    Answer::Reject,
                    "{name}"
                );
            }
            assert_eq!(accept(k, "lots", &num(lo)), Answer::Reject, "{name}");
        }
        // Hex values are numbers too (RFC 7143 §6.1).
        assert_eq!(
            accept(key("MaxBurstLength"), "0x10000", &num(262144)),
            Answer::Value(num(65536))
        );
    }

    #[test]
    fn max_key_default_time2wait() {
        let k = key("DefaultTime2Wait");
        assert_eq!(k.result, ResultFn::Max);
        assert_eq!(accept(k, "0", &num(2)), Answer::Value(num(2)));
        assert_eq!(accept(k, "10", &num(2)), Answer::Value(num(10)));
        assert_eq!(accept(k, "3601", &num(2)), Answer::Reject);
    }

    #[test]
    fn and_or_keys() {
        let imm = key("ImmediateData");
        assert_eq!(imm.result, ResultFn::And);
        let t = Value::Bool(true);
        let f = Value::Bool(false);
        assert_eq!(accept(imm, "Yes", &t), Answer::Value(t.clone()));
        assert_eq!(accept(imm, "Yes", &f), Answer::Value(f.clone()));
        assert_eq!(accept(imm, "No", &t), Answer::Value(f.clone()));
        assert_eq!(accept(imm, "Maybe", &t), Answer::Reject);
        for name in ["InitialR2T", "DataPDUInOrder", "DataSequenceInOrder"] {
            let k = key(name);
            assert_eq!(k.result, ResultFn::Or, "{name}");
            assert_eq!(accept(k, "No", &f), Answer::Value(f.clone()));
            assert_eq!(accept(k, "No", &t), Answer::Value(t.clone()));
            assert_eq!(accept(k, "Yes", &f), Answer::Value(t.clone()));
            assert_eq!(
                accept(k, "yes", &f),
                Answer::Reject,
                "values are case-sensitive"
            );
        }
    }

    #[test]
    fn declarative_keys() {
        for name in [
            "TargetName",
            "InitiatorName",
            "TargetAlias",
            "InitiatorAlias",
            "TargetAddress",
            "SendTargets",
            "MaxRecvDataSegmentLength",
            "TargetPortalGroupTag",
            "SessionType",
        ] {
            assert_eq!(key(name).result, ResultFn::Declarative, "{name}");
        }
        let mrdsl = key("MaxRecvDataSegmentLength");
        assert_eq!(
            accept(mrdsl, "262144", &num(8192)),
            Answer::Value(num(262144))
        );
        assert_eq!(accept(mrdsl, "511", &num(8192)), Answer::Reject);
        assert_eq!(accept(mrdsl, "16777216", &num(8192)), Answer::Reject);
        let st = key("SessionType");
        assert_eq!(
            accept(st, "Discovery", &text("")),
            Answer::Value(text("Discovery"))
        );
        assert_eq!(accept(st, "Other", &text("")), Answer::Reject);
        let name = "iqn.".to_string() + &"a".repeat(220);
        assert_eq!(
            accept(key("InitiatorName"), &name, &text("")),
            Answer::Reject
        );
    }

    #[test]
    fn proposer_checks_answers() {
        let mbl = key("MaxBurstLength");
        assert_eq!(
            check_answer(mbl, &num(262144), "65536"),
            Ok(Some(num(65536)))
        );
        assert!(check_answer(mbl, &num(65536), "262144").is_err());
        let t2w = key("DefaultTime2Wait");
        assert!(check_answer(t2w, &num(2), "1").is_err());
        assert_eq!(check_answer(t2w, &num(2), "5"), Ok(Some(num(5))));
        let imm = key("ImmediateData");
        assert!(check_answer(imm, &Value::Bool(false), "Yes").is_err());
        assert_eq!(
            check_answer(imm, &Value::Bool(true), "No"),
            Ok(Some(Value::Bool(false)))
        );
        let r2t = key("InitialR2T");
        assert!(check_answer(r2t, &Value::Bool(true), "No").is_err());
        let hd = key("HeaderDigest");
        assert_eq!(
            check_answer(hd, &text("CRC32C,None"), "None"),
            Ok(Some(text("None")))
        );
        assert!(check_answer(hd, &text("None"), "CRC32C").is_err());
        assert_eq!(check_answer(hd, &text("CRC32C"), "Reject"), Ok(None));
    }

    #[test]
    fn obsolete_marker_keys() {
        assert_eq!(obsolete_key_answer("IFMarker"), Some("No"));
        assert_eq!(obsolete_key_answer("OFMarkInt"), Some("Reject"));
        assert_eq!(obsolete_key_answer("MaxBurstLength"), None);
    }

    #[test]
    fn number_parsing() {
        assert_eq!(parse_number("0"), Some(0));
        assert_eq!(parse_number("0x1F"), Some(31));
        assert_eq!(parse_number("0x"), None);
        assert_eq!(parse_number("-1"), None);
        assert_eq!(parse_number("99999999999999999999999"), None);
        assert_eq!(parse_number(""), None);
    }
}
