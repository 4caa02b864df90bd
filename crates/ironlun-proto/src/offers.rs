//! One side's own values for the operational keys ([`Offers`]) and the
//! table that declares each of them once ([`OFFER_KEYS`]): the RFC key
//! (its rules are in [`crate::keys::KEYS`]), the field, which is also the
//! key's name in a configuration file's `[target.params]`, and the
//! initiator commands' flag. Everything that names an offered key reads
//! this table: checking ([`Offers::validate`]), loading a negotiator
//! (`Negotiator::load_offers`), the configuration file's merge and its
//! rendering, and the command-line flags.

use crate::keys::{KeyId, Value};

/// A digest a side supports (RFC 7143 §13.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestKind {
    None,
    Crc32c,
}

impl std::str::FromStr for DigestKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "None" | "none" => Ok(DigestKind::None),
            "CRC32C" | "crc32c" => Ok(DigestKind::Crc32c),
            other => Err(format!(
                "unknown digest '{other}' (expected None or CRC32C)"
            )),
        }
    }
}

impl DigestKind {
    pub fn wire_name(self) -> &'static str {
        match self {
            DigestKind::None => "None",
            DigestKind::Crc32c => "CRC32C",
        }
    }
}

/// The form an offered key's value takes, in a file and on a command
/// line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OfferKind {
    /// A preference list of digests (`["CRC32C", "None"]`, `CRC32C,None`).
    Digests,
    /// Yes or No (`true`/`false` in a file, `yes|no` as a flag).
    Bool,
    /// A number up to 65535.
    U16,
    /// A length in bytes (a size such as `256KiB` as a flag).
    Bytes,
}

/// A field type of [`Offers`]: how it converts to and from a key
/// [`Value`] (digest lists as their wire text, `CRC32C,None`).
pub trait OfferValue: Sized {
    const KIND: OfferKind;
    fn to_value(&self) -> Value;
    /// The field from a value; the error says what is wrong with it.
    fn from_value(v: &Value) -> Result<Self, String>;
}

impl OfferValue for bool {
    const KIND: OfferKind = OfferKind::Bool;
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
    fn from_value(v: &Value) -> Result<bool, String> {
        v.as_bool().ok_or_else(|| format!("'{v}' is not Yes or No"))
    }
}

fn number<T: TryFrom<u64>>(v: &Value) -> Result<T, String> {
    let n = v
        .as_number()
        .ok_or_else(|| format!("'{v}' is not a number"))?;
    T::try_from(n).map_err(|_| format!("{n} is too large"))
}

macro_rules! number_offer {
    ($($ty:ty => $kind:ident),*) => {$(
        impl OfferValue for $ty {
            const KIND: OfferKind = OfferKind::$kind;
            fn to_value(&self) -> Value {
                Value::Number(u64::from(*self))
            }
            fn from_value(v: &Value) -> Result<$ty, String> {
                number(v)
            }
        }
    )*};
}
number_offer!(u16 => U16, u32 => Bytes);

impl OfferValue for Vec<DigestKind> {
    const KIND: OfferKind = OfferKind::Digests;
    fn to_value(&self) -> Value {
        let names: Vec<&str> = self.iter().map(|d| d.wire_name()).collect();
        Value::Text(names.join(","))
    }
    fn from_value(v: &Value) -> Result<Vec<DigestKind>, String> {
        let text = v.as_text().ok_or_else(|| format!("'{v}' is not a list"))?;
        if text.trim().is_empty() {
            return Err("digest list is empty".into());
        }
        text.split(',').map(|d| d.trim().parse()).collect()
    }
}

/// An initiator command's flag for an offered key.
#[derive(Clone, Copy, Debug)]
pub struct Flag {
    /// The long name, without `--`.
    pub long: &'static str,
    pub value_name: &'static str,
    /// One line, without a final full stop (as clap shows help).
    pub help: &'static str,
    /// Where the flag stands among the others in `--help`.
    pub rank: u8,
}

/// One offered key: the one place it is declared.
#[derive(Clone, Copy)]
pub struct OfferKey {
    /// The RFC 7143 key.
    pub id: KeyId,
    /// The [`Offers`] field, and the key in a configuration file.
    pub field: &'static str,
    pub kind: OfferKind,
    /// The initiator commands' flag, where there is one.
    pub flag: Option<Flag>,
    /// The field's value.
    pub get: fn(&Offers) -> Value,
    /// Sets the field; the error says what is wrong with the value.
    pub set: fn(&mut Offers, &Value) -> Result<(), String>,
}

impl std::fmt::Debug for OfferKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfferKey")
            .field("id", &self.id)
            .field("field", &self.field)
            .finish_non_exhaustive()
    }
}

impl OfferKey {
    /// The row of a configuration file key (an [`Offers`] field name).
    pub fn by_field(field: &str) -> Option<&'static OfferKey> {
        OFFER_KEYS.iter().find(|k| k.field == field)
    }

    /// Checks a value against the key's domain (RFC 7143 §13): each
    /// element of a list, the number's range.
    fn check(&self, v: &Value) -> Result<(), String> {
        let def = self.id.def();
        let text = v.to_string();
        let items: Vec<&str> = match self.kind {
            OfferKind::Digests => text.split(',').filter(|s| !s.is_empty()).collect(),
            _ => vec![text.as_str()],
        };
        if items.is_empty() {
            return Err("digest lists must not be empty".into());
        }
        for item in items {
            def.parse(item).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

const fn flag(
    rank: u8,
    long: &'static str,
    value_name: &'static str,
    help: &'static str,
) -> Option<Flag> {
    Some(Flag {
        long,
        value_name,
        help,
        rank,
    })
}

/// Declares [`Offers`] and [`OFFER_KEYS`] from one list: each field with
/// its type, its key and its flag.
macro_rules! offers {
    ($($(#[$doc:meta])* $field:ident: $ty:ty = $id:ident, $flag:expr;)*) => {
        /// One side's own values for the operational keys: what a target
        /// accepts (configurable per target) or what an initiator
        /// proposes.
        ///
        /// DataPDUInOrder, DataSequenceInOrder and ErrorRecoveryLevel are
        /// not here: ironlun supports in-order data and ERL 0 only, and
        /// always offers `Yes`/`Yes`/`0` ([`fixed_offers`]), which the
        /// OR/OR/Min result functions turn into the outcome whatever the
        /// peer offers (RFC 7143 §13.18–§13.20).
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Offers {
            $($(#[$doc])* pub $field: $ty,)*
        }

        /// Every offered key, in the order files show them.
        pub const OFFER_KEYS: &[OfferKey] = &[$(OfferKey {
            id: KeyId::$id,
            field: stringify!($field),
            kind: <$ty as OfferValue>::KIND,
            flag: $flag,
            get: |o| o.$field.to_value(),
            set: |o, v| {
                o.$field = OfferValue::from_value(v)?;
                Ok(())
            },
        },)*];
    };
}

offers! {
    /// Digests in preference order.
    header_digest: Vec<DigestKind> = HEADER_DIGEST,
        flag(0, "header-digest", "LIST", "HeaderDigest offer: None, CRC32C, or a preference list \"CRC32C,None\"");
    data_digest: Vec<DigestKind> = DATA_DIGEST,
        flag(1, "data-digest", "LIST", "DataDigest offer, as --header-digest");
    max_connections: u16 = MAX_CONNECTIONS, None;
    initial_r2t: bool = INITIAL_R2T,
        flag(2, "initial-r2t", "yes|no", "InitialR2T offer (yes: every write waits for an R2T)");
    immediate_data: bool = IMMEDIATE_DATA,
        flag(3, "immediate-data", "yes|no", "ImmediateData offer");
    max_recv_data_segment_length: u32 = MAX_RECV_DATA_SEGMENT_LENGTH,
        flag(6, "max-recv-dsl", "SIZE", "MaxRecvDataSegmentLength we declare");
    max_burst_length: u32 = MAX_BURST_LENGTH,
        flag(5, "max-burst", "SIZE", "MaxBurstLength offer");
    first_burst_length: u32 = FIRST_BURST_LENGTH,
        flag(4, "first-burst", "SIZE", "FirstBurstLength offer (bytes; 64k, 256KiB ...)");
    default_time2wait: u16 = DEFAULT_TIME2WAIT, None;
    default_time2retain: u16 = DEFAULT_TIME2RETAIN, None;
    max_outstanding_r2t: u16 = MAX_OUTSTANDING_R2T,
        flag(7, "max-outstanding-r2t", "N", "MaxOutstandingR2T offer");
}

/// The keys ironlun always offers the same value for, loaded into every
/// negotiator beside [`OFFER_KEYS`].
pub fn fixed_offers() -> [(KeyId, Value); 6] {
    [
        (KeyId::DATA_PDU_IN_ORDER, Value::Bool(true)),
        (KeyId::DATA_SEQUENCE_IN_ORDER, Value::Bool(true)),
        (KeyId::ERROR_RECOVERY_LEVEL, Value::Number(0)),
        (KeyId::TASK_REPORTING, Value::Text("RFC3720".into())),
        // RFC 7144 (iSCSIProtocolLevel 2): the SAM-5 task management
        // functions it adds (QUERY TASK, QUERY TASK SET, I_T NEXUS RESET,
        // QUERY ASYNCHRONOUS EVENT) are answered.
        (KeyId::ISCSI_PROTOCOL_LEVEL, Value::Number(2)),
        (KeyId::AUTH_METHOD, Value::Text("None".into())),
    ]
}

impl Default for Offers {
    /// ironlun's defaults: accept either digest, allow unsolicited and
    /// immediate data, 256 KiB segments, 1 MiB bursts, and writes of up to
    /// 512 KiB sent whole without waiting for an R2T.
    ///
    /// FirstBurstLength is 512 KiB rather than the RFC's 64 KiB because
    /// 512 KiB is the largest request the Linux block layer commonly
    /// builds (`max_sectors_kb`): such a write then costs one round trip,
    /// not two. Measured with `ironlun bench`, 512 KiB sequential writes at
    /// QD 8 to a tmpfs file LUN on 2 vCPUs: 3140 → 3608 IOPS (medians of 3
    /// alternating runs), the R2T wait gone. The price is memory: a
    /// session may hold queue depth × FirstBurstLength of unsolicited data
    /// (128 × 512 KiB = 64 MiB at the default depth), the same bound as
    /// the solicited-data budget (docs/security.md).
    fn default() -> Self {
        Offers {
            header_digest: vec![DigestKind::None, DigestKind::Crc32c],
            data_digest: vec![DigestKind::None, DigestKind::Crc32c],
            max_connections: 1,
            initial_r2t: false,
            immediate_data: true,
            max_recv_data_segment_length: 262_144,
            max_burst_length: 1_048_576,
            first_burst_length: 524_288,
            default_time2wait: 2,
            default_time2retain: 20,
            max_outstanding_r2t: 8,
        }
    }
}

impl Offers {
    /// Checks every value against the key table's domain (RFC 7143 §13) and
    /// the relations the RFC states between keys.
    pub fn validate(&self) -> Result<(), String> {
        for k in OFFER_KEYS {
            k.check(&(k.get)(self))?;
        }
        if self.max_connections != 1 {
            return Err(
                "MaxConnections: only 1 is supported (no multi-connection sessions yet)".into(),
            );
        }
        if self.first_burst_length > self.max_burst_length {
            return Err(format!(
                "FirstBurstLength {} exceeds MaxBurstLength {} (RFC 7143 §13.14)",
                self.first_burst_length, self.max_burst_length
            ));
        }
        Ok(())
    }

    /// Sets the key of `field` (a file key) to `v`.
    pub fn set(&mut self, field: &str, v: &Value) -> Result<(), String> {
        let k = OfferKey::by_field(field).ok_or_else(|| format!("unknown key {field}"))?;
        (k.set)(self, v)
    }
}

#[cfg(test)]
mod tests;
