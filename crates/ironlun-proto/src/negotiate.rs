//! Text-mode negotiation of one login or one full-feature text exchange
//! (RFC 7143 §6.2), for either role. The rules per key come from
//! [`crate::keys::KEYS`]; this module applies them to a stream of
//! `key=value` pairs and keeps the outcome.

use crate::keys::{
    accept, check_answer, obsolete_key_answer, Answer, KeyId, ResultFn, Sender, Usage, Value,
    ANSWERED_ONLY, IRRELEVANT, KEYS, KEY_COUNT, NOT_UNDERSTOOD, REJECT,
};
use crate::offers::{fixed_offers, Offers, OFFER_KEYS};
use crate::params::{ConnParams, SessionParams};

/// Which side of the exchange we are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Initiator,
    Target,
}

/// The stage a negotiation happens in (RFC 7143 §6.3; CSG values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Security,
    Operational,
    /// Text negotiation in full feature phase (RFC 7143 §6.2, §11.10).
    FullFeature,
}

/// A negotiation rule broken by the peer, fatal to a login (RFC 7143 §6.2,
/// §6.3: "Login reject (initiator error)").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NegotiationError {
    #[error("key {0} negotiated more than once in one login (RFC 7143 §6.2)")]
    RepeatedKey(&'static str),
    #[error("security key {0} outside the security stage (RFC 7143 §6.3)")]
    SecurityKeyOutsideSecurityStage(&'static str),
    #[error("inadmissible answer to our proposal: {0} (RFC 7143 §6.2.2)")]
    BadAnswer(String),
}

/// One side's state across the PDUs of a login (or one FFP text exchange).
#[derive(Clone, Debug)]
pub struct Negotiator {
    role: Role,
    /// What we would choose on our own, per key: for list keys the values we
    /// support, for declarative keys our declaration. `None`: the RFC
    /// default.
    ours: [Option<Value>; KEY_COUNT],
    /// Outcome per key: negotiated result, or the peer's declaration for
    /// declarative keys. `None`: the RFC default applies.
    agreed: [Option<Value>; KEY_COUNT],
    /// Keys the peer has sent as offers in this negotiation.
    peer_offered: [bool; KEY_COUNT],
    /// Keys we proposed that still await an answer.
    proposed: [Option<Value>; KEY_COUNT],
    /// Keys we have proposed at some point: each is proposed once.
    ever_proposed: [bool; KEY_COUNT],
    /// Set after we made proposals: a peer that answers by re-sending its
    /// whole offer (libiscsi does) is re-answered instead of failed for
    /// repeating keys.
    tolerate_repeats: bool,
    discovery: bool,
    leading: bool,
}

impl Negotiator {
    pub fn new(role: Role) -> Self {
        Negotiator {
            role,
            ours: Default::default(),
            agreed: Default::default(),
            peer_offered: [false; KEY_COUNT],
            proposed: Default::default(),
            ever_proposed: [false; KEY_COUNT],
            tolerate_repeats: false,
            discovery: false,
            leading: true,
        }
    }

    /// Sets our own value for a key (what we support / would choose).
    pub fn set_ours(&mut self, key: KeyId, value: Value) {
        if let Some(slot) = self.ours.get_mut(key.0) {
            *slot = Some(value);
        }
    }

    /// Loads one side's offers as "ours": every key of [`OFFER_KEYS`]
    /// and the keys ironlun always offers the same way.
    pub fn load_offers(&mut self, offers: &Offers) {
        for k in OFFER_KEYS {
            self.set_ours(k.id, (k.get)(offers));
        }
        for (id, v) in fixed_offers() {
            self.set_ours(id, v);
        }
    }

    pub fn ours(&self, key: KeyId) -> Value {
        self.ours
            .get(key.0)
            .cloned()
            .flatten()
            .or_else(|| key.def().default_value())
            .unwrap_or(Value::Text(String::new()))
    }

    /// Marks the session as a discovery session: keys that mean nothing
    /// there are answered `Irrelevant`.
    pub fn set_discovery(&mut self, discovery: bool) {
        self.discovery = discovery;
    }

    pub fn is_discovery(&self) -> bool {
        self.discovery
    }

    /// Marks a non-leading connection login: leading-only keys are
    /// answered `Irrelevant`.
    pub fn set_leading(&mut self, leading: bool) {
        self.leading = leading;
    }

    /// The outcome for a key, if it was negotiated or declared by the peer.
    pub fn agreed(&self, key: KeyId) -> Option<&Value> {
        self.agreed.get(key.0).and_then(Option::as_ref)
    }

    /// The value in effect: the outcome, or the RFC default.
    pub fn effective(&self, key: KeyId) -> Option<Value> {
        self.agreed(key)
            .cloned()
            .or_else(|| key.def().default_value())
    }

    /// Whether the peer sent this key in the current negotiation.
    pub fn peer_offered(&self, key: KeyId) -> bool {
        self.peer_offered.get(key.0).copied().unwrap_or(false)
    }

    /// Answers the peer's pairs, in their order. Returns the answer pairs;
    /// keys that need no answer (declarations, answers to our proposals)
    /// produce none.
    pub fn respond(
        &mut self,
        pairs: &[(String, String)],
        stage: Stage,
    ) -> Result<Vec<(String, String)>, NegotiationError> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (name, value) in pairs {
            let Some(id) = KeyId::of(name) else {
                let answer = obsolete_key_answer(name).unwrap_or(NOT_UNDERSTOOD);
                out.push((name.clone(), answer.to_owned()));
                continue;
            };
            if let Some(answer) = self.respond_one(id, value, stage)? {
                out.push((name.clone(), answer));
            }
        }
        self.apply_irrelevance_rules(&mut out);
        Ok(out)
    }

    fn respond_one(
        &mut self,
        id: KeyId,
        value: &str,
        stage: Stage,
    ) -> Result<Option<String>, NegotiationError> {
        let def = id.def();

        // An answer to something we proposed.
        if let Some(offer) = self.proposed.get_mut(id.0).and_then(Option::take) {
            let outcome = check_answer(def, &offer, value).map_err(NegotiationError::BadAnswer)?;
            if let Some(v) = outcome {
                self.set_agreed(id, v);
            }
            return Ok(None);
        }

        let already = self.peer_offered.get(id.0).copied().unwrap_or(false);
        if already && !self.tolerate_repeats && stage != Stage::FullFeature {
            return Err(NegotiationError::RepeatedKey(def.name));
        }
        if let Some(seen) = self.peer_offered.get_mut(id.0) {
            *seen = true;
        }

        if def.usage == Usage::SecurityOnly && stage != Stage::Security {
            return Err(NegotiationError::SecurityKeyOutsideSecurityStage(def.name));
        }
        // A key only the other role may send.
        let peer_may_send = matches!(
            (def.sender, self.role),
            (Sender::Both, _)
                | (Sender::Initiator, Role::Target)
                | (Sender::Target, Role::Initiator)
        );
        if !peer_may_send {
            return Ok(Some(REJECT.to_owned()));
        }
        let usable_here = match (def.usage, stage) {
            (Usage::FullFeatureOnly, Stage::FullFeature) => true,
            (Usage::FullFeatureOnly, _) => false,
            (Usage::All, _) => true,
            (_, Stage::FullFeature) => false,
            (Usage::LeadingOnly, _) => self.leading,
            _ => true,
        };
        if !usable_here {
            return Ok(Some(if stage == Stage::FullFeature {
                REJECT.to_owned()
            } else {
                IRRELEVANT.to_owned()
            }));
        }
        if self.discovery && !def.in_discovery {
            return Ok(Some(IRRELEVANT.to_owned()));
        }

        if def.result == ResultFn::Declarative {
            return Ok(match def.parse(value) {
                Ok(v) => {
                    self.set_agreed(id, v);
                    None
                }
                Err(_) => Some(REJECT.to_owned()),
            });
        }
        let answer = accept(def, value, &self.ours(id));
        if let Answer::Value(v) = &answer {
            self.set_agreed(id, v.clone());
        }
        Ok(Some(answer.wire()))
    }

    /// RFC 7143 §13.14: FirstBurstLength is irrelevant when InitialR2T=Yes
    /// and ImmediateData=No (no unsolicited data can flow).
    fn apply_irrelevance_rules(&mut self, out: &mut [(String, String)]) {
        let r2t = self.effective(KeyId::INITIAL_R2T).and_then(|v| v.as_bool());
        let imm = self
            .effective(KeyId::IMMEDIATE_DATA)
            .and_then(|v| v.as_bool());
        if r2t == Some(true) && imm == Some(false) {
            for (k, v) in out.iter_mut() {
                if k == KeyId::FIRST_BURST_LENGTH.name() && v != REJECT {
                    *v = IRRELEVANT.to_owned();
                }
            }
        }
    }

    fn set_agreed(&mut self, id: KeyId, v: Value) {
        if let Some(slot) = self.agreed.get_mut(id.0) {
            *slot = Some(v);
        }
    }

    /// Records our own declaration of a declarative key (e.g. the target's
    /// MaxRecvDataSegmentLength) and returns the pair to send.
    pub fn declare(&mut self, id: KeyId, v: Value) -> (String, String) {
        let text = v.to_string();
        self.set_ours(id, v);
        (id.name().to_owned(), text)
    }

    /// Proposals for leading-only negotiated keys the peer did not offer and
    /// for which our value differs from the RFC default: without a proposal
    /// the default would silently apply (RFC 7143 §6.2). Each key is
    /// proposed once; [`ANSWERED_ONLY`] keys never are.
    pub fn proposals(&mut self) -> Vec<(String, String)> {
        if self.discovery || !self.leading {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (i, def) in KEYS.iter().enumerate() {
            let id = KeyId(i);
            let negotiable = def.result != ResultFn::Declarative
                && def.usage == Usage::LeadingOnly
                && def.sender == Sender::Both;
            let already = self.ever_proposed.get(i).copied().unwrap_or(true);
            if !negotiable
                || already
                || ANSWERED_ONLY.contains(&id)
                || self.peer_offered(id)
                || self.agreed(id).is_some()
            {
                continue;
            }
            let Some(mine) = self.ours.get(i).cloned().flatten() else {
                continue;
            };
            if Some(&mine) == def.default_value().as_ref() {
                continue;
            }
            out.push((def.name.to_owned(), mine.to_string()));
            if let Some(slot) = self.proposed.get_mut(i) {
                *slot = Some(mine);
            }
            if let Some(slot) = self.ever_proposed.get_mut(i) {
                *slot = true;
            }
        }
        if !out.is_empty() {
            self.tolerate_repeats = true;
        }
        out
    }

    /// Proposes our value of one negotiated key explicitly, whatever the
    /// default (the initiator side offers every key it cares about, RFC
    /// 7143 §6.2). Returns the pair to send; the peer's answer is checked
    /// against it in [`Negotiator::respond`].
    pub fn propose(&mut self, id: KeyId) -> (String, String) {
        let mine = self.ours(id);
        let pair = (id.name().to_owned(), mine.to_string());
        if let Some(slot) = self.proposed.get_mut(id.0) {
            *slot = Some(mine);
        }
        if let Some(slot) = self.ever_proposed.get_mut(id.0) {
            *slot = true;
        }
        self.tolerate_repeats = true;
        pair
    }

    /// True while proposals of ours await answers.
    pub fn awaiting_answers(&self) -> bool {
        self.proposed.iter().any(Option::is_some)
    }

    /// Gives up waiting: unanswered proposals leave their keys at the
    /// default (a peer that ignores a proposal has not agreed to it).
    pub fn drop_unanswered(&mut self) {
        self.proposed = Default::default();
    }

    /// Session-wide operational values in effect.
    pub fn session_params(&self) -> SessionParams {
        SessionParams::from_values(|id| self.effective(id))
    }

    /// Connection values in effect. `our_mrdsl` is what we declared (the
    /// largest data segment we accept); the peer's declaration bounds what
    /// we send.
    pub fn conn_params(&self) -> ConnParams {
        let crc = |id: KeyId| {
            self.effective(id)
                .and_then(|v| v.as_text().map(|s| s == "CRC32C"))
        };
        let mrdsl = |v: Option<Value>| {
            v.and_then(|v| v.as_number())
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(8192)
        };
        ConnParams {
            header_digest: crc(KeyId::HEADER_DIGEST).unwrap_or(false),
            data_digest: crc(KeyId::DATA_DIGEST).unwrap_or(false),
            max_recv_data_segment_length: mrdsl(Some(
                self.ours(KeyId::MAX_RECV_DATA_SEGMENT_LENGTH),
            )),
            max_xmit_data_segment_length: mrdsl(
                self.effective(KeyId::MAX_RECV_DATA_SEGMENT_LENGTH),
            ),
        }
    }

    /// One line summary of every key in effect, for the login log line.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for (i, def) in KEYS.iter().enumerate() {
            if matches!(
                def.name,
                "SendTargets"
                    | "TargetName"
                    | "InitiatorName"
                    | "InitiatorAlias"
                    | "TargetAlias"
                    | "TargetAddress"
                    | "AuthMethod"
            ) {
                continue;
            }
            if let Some(v) = self.effective(KeyId(i)) {
                parts.push(format!("{}={}", def.name, v));
            }
        }
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn target() -> Negotiator {
        let mut n = Negotiator::new(Role::Target);
        n.set_ours(KeyId::HEADER_DIGEST, Value::Text("None,CRC32C".into()));
        n.set_ours(KeyId::DATA_DIGEST, Value::Text("None,CRC32C".into()));
        n.set_ours(KeyId::INITIAL_R2T, Value::Bool(false));
        n.set_ours(KeyId::IMMEDIATE_DATA, Value::Bool(true));
        n.set_ours(KeyId::MAX_BURST_LENGTH, Value::Number(1 << 20));
        n.set_ours(KeyId::FIRST_BURST_LENGTH, Value::Number(65536));
        n.set_ours(KeyId::MAX_RECV_DATA_SEGMENT_LENGTH, Value::Number(262144));
        n.set_ours(KeyId::MAX_OUTSTANDING_R2T, Value::Number(8));
        n
    }

    #[test]
    fn libiscsi_style_offer_is_answered() {
        let mut n = target();
        let offer = pairs(&[
            ("HeaderDigest", "None,CRC32C"),
            ("DataDigest", "None"),
            ("InitialR2T", "No"),
            ("ImmediateData", "Yes"),
            ("MaxBurstLength", "262144"),
            ("FirstBurstLength", "262144"),
            ("DefaultTime2Wait", "2"),
            ("DefaultTime2Retain", "0"),
            ("MaxOutstandingR2T", "1"),
            ("ErrorRecoveryLevel", "0"),
            ("IFMarker", "No"),
            ("OFMarker", "No"),
            ("MaxConnections", "1"),
            ("MaxRecvDataSegmentLength", "262144"),
            ("DataPDUInOrder", "Yes"),
            ("DataSequenceInOrder", "Yes"),
            ("X-com.example.Foo", "1"),
        ]);
        let out = n.respond(&offer, Stage::Operational).unwrap();
        let get = |k: &str| out.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("HeaderDigest"), Some("None"));
        assert_eq!(get("InitialR2T"), Some("No"));
        assert_eq!(get("MaxBurstLength"), Some("262144"));
        assert_eq!(get("FirstBurstLength"), Some("65536"));
        assert_eq!(get("MaxOutstandingR2T"), Some("1"));
        assert_eq!(get("DefaultTime2Retain"), Some("0"));
        assert_eq!(get("IFMarker"), Some("No"));
        assert_eq!(get("X-com.example.Foo"), Some("NotUnderstood"));
        // Declarations get no answer.
        assert_eq!(get("MaxRecvDataSegmentLength"), None);
        let s = n.session_params();
        assert!(!s.initial_r2t);
        assert!(s.immediate_data);
        assert_eq!(s.first_burst_length, 65536);
        assert_eq!(s.max_burst_length, 262144);
        let c = n.conn_params();
        assert_eq!(c.max_xmit_data_segment_length, 262144);
        assert_eq!(c.max_recv_data_segment_length, 262144);
        assert!(!c.header_digest);
        // Nothing left to propose: the peer offered every key we care about.
        assert!(n.proposals().is_empty());
    }

    #[test]
    fn repeated_key_in_one_login_is_an_error() {
        let mut n = target();
        n.respond(&pairs(&[("MaxBurstLength", "65536")]), Stage::Operational)
            .unwrap();
        assert_eq!(
            n.respond(&pairs(&[("MaxBurstLength", "65536")]), Stage::Operational),
            Err(NegotiationError::RepeatedKey("MaxBurstLength"))
        );
    }

    #[test]
    fn security_keys_only_in_security_stage() {
        let mut n = target();
        n.set_ours(KeyId::AUTH_METHOD, Value::Text("None".into()));
        let out = n
            .respond(&pairs(&[("AuthMethod", "CHAP,None")]), Stage::Security)
            .unwrap();
        assert_eq!(out, pairs(&[("AuthMethod", "None")]));
        let mut n = target();
        assert!(matches!(
            n.respond(&pairs(&[("AuthMethod", "None")]), Stage::Operational),
            Err(NegotiationError::SecurityKeyOutsideSecurityStage(_))
        ));
    }

    #[test]
    fn discovery_sessions_answer_irrelevant_for_session_keys() {
        let mut n = target();
        n.set_discovery(true);
        let out = n
            .respond(
                &pairs(&[
                    ("MaxBurstLength", "65536"),
                    ("HeaderDigest", "None"),
                    ("InitialR2T", "No"),
                ]),
                Stage::Operational,
            )
            .unwrap();
        assert_eq!(
            out,
            pairs(&[
                ("MaxBurstLength", "Irrelevant"),
                ("HeaderDigest", "None"),
                ("InitialR2T", "Irrelevant")
            ])
        );
        assert!(n.proposals().is_empty());
    }

    #[test]
    fn first_burst_length_irrelevant_without_unsolicited_data() {
        let mut n = target();
        n.set_ours(KeyId::INITIAL_R2T, Value::Bool(true));
        let out = n
            .respond(
                &pairs(&[
                    ("InitialR2T", "Yes"),
                    ("ImmediateData", "No"),
                    ("FirstBurstLength", "65536"),
                ]),
                Stage::Operational,
            )
            .unwrap();
        assert_eq!(out[2], ("FirstBurstLength".into(), "Irrelevant".into()));
    }

    #[test]
    fn leading_only_keys_on_a_non_leading_login() {
        let mut n = target();
        n.set_leading(false);
        let out = n
            .respond(
                &pairs(&[("MaxBurstLength", "65536"), ("DataDigest", "None")]),
                Stage::Operational,
            )
            .unwrap();
        assert_eq!(
            out,
            pairs(&[("MaxBurstLength", "Irrelevant"), ("DataDigest", "None")])
        );
    }

    #[test]
    fn target_only_keys_from_the_initiator_are_rejected() {
        let mut n = target();
        let out = n
            .respond(
                &pairs(&[("TargetAlias", "x"), ("TargetPortalGroupTag", "1")]),
                Stage::Operational,
            )
            .unwrap();
        assert_eq!(
            out,
            pairs(&[
                ("TargetAlias", "Reject"),
                ("TargetPortalGroupTag", "Reject")
            ])
        );
    }

    #[test]
    fn out_of_range_and_garbage_values_are_rejected_and_keep_defaults() {
        let mut n = target();
        let out = n
            .respond(
                &pairs(&[
                    ("MaxBurstLength", "100"),
                    ("ErrorRecoveryLevel", "7"),
                    ("MaxRecvDataSegmentLength", "1"),
                ]),
                Stage::Operational,
            )
            .unwrap();
        assert_eq!(
            out,
            pairs(&[
                ("MaxBurstLength", "Reject"),
                ("ErrorRecoveryLevel", "Reject"),
                ("MaxRecvDataSegmentLength", "Reject")
            ])
        );
        assert_eq!(n.session_params().max_burst_length, 262144);
        assert_eq!(n.conn_params().max_xmit_data_segment_length, 8192);
    }

    #[test]
    fn obsolete_marker_interval_keys_are_rejected() {
        let mut n = target();
        let out = n
            .respond(&pairs(&[("OFMarkInt", "2048~8192")]), Stage::Operational)
            .unwrap();
        assert_eq!(out, pairs(&[("OFMarkInt", "Reject")]));
    }

    #[test]
    fn target_proposes_non_default_values_not_offered() {
        let mut n = target();
        n.respond(&pairs(&[("MaxBurstLength", "262144")]), Stage::Operational)
            .unwrap();
        let props = n.proposals();
        // InitialR2T=No and MaxOutstandingR2T=8 differ from the defaults.
        assert!(props.contains(&("InitialR2T".into(), "No".into())));
        assert!(props.contains(&("MaxOutstandingR2T".into(), "8".into())));
        // FirstBurstLength 65536 equals the default: not proposed.
        assert!(!props.iter().any(|(k, _)| k == "FirstBurstLength"));
        assert!(n.awaiting_answers());
        // The initiator answers; OR(No, Yes) = Yes is admissible.
        n.respond(
            &pairs(&[("InitialR2T", "Yes"), ("MaxOutstandingR2T", "4")]),
            Stage::Operational,
        )
        .unwrap();
        assert!(!n.awaiting_answers());
        let s = n.session_params();
        assert!(s.initial_r2t);
        assert_eq!(s.max_outstanding_r2t, 4);
        // An inadmissible answer (Min can't go up) is a protocol error.
        let mut n = target();
        n.proposals();
        assert!(matches!(
            n.respond(&pairs(&[("MaxOutstandingR2T", "9")]), Stage::Operational),
            Err(NegotiationError::BadAnswer(_))
        ));
    }

    /// RFC 7144: level 2 when the initiator offers it (or more), its own
    /// level when lower, and no proposal when it does not offer the key.
    #[test]
    fn protocol_level_2_is_answered_and_never_proposed() {
        let target = || {
            let mut n = Negotiator::new(Role::Target);
            n.load_offers(&Offers::default());
            n
        };
        for (offer, answer) in [("2", "2"), ("5", "2"), ("1", "1")] {
            let mut n = target();
            let out = n
                .respond(&pairs(&[("iSCSIProtocolLevel", offer)]), Stage::Operational)
                .unwrap();
            assert_eq!(
                out,
                pairs(&[("iSCSIProtocolLevel", answer)]),
                "offer {offer}"
            );
        }
        let mut n = target();
        n.respond(&pairs(&[("MaxBurstLength", "262144")]), Stage::Operational)
            .unwrap();
        assert!(!n.proposals().iter().any(|(k, _)| k == "iSCSIProtocolLevel"));
    }

    #[test]
    fn a_peer_that_resends_its_offer_after_proposals_is_tolerated() {
        let mut n = target();
        n.respond(&pairs(&[("MaxBurstLength", "262144")]), Stage::Operational)
            .unwrap();
        n.proposals();
        assert!(n
            .respond(&pairs(&[("MaxBurstLength", "262144")]), Stage::Operational)
            .is_ok());
    }

    #[test]
    fn full_feature_text_negotiation_limits_keys() {
        let mut n = target();
        let out = n
            .respond(
                &pairs(&[
                    ("MaxRecvDataSegmentLength", "65536"),
                    ("MaxBurstLength", "65536"),
                ]),
                Stage::FullFeature,
            )
            .unwrap();
        assert_eq!(out, pairs(&[("MaxBurstLength", "Reject")]));
        assert_eq!(n.conn_params().max_xmit_data_segment_length, 65536);
    }

    #[test]
    fn first_burst_is_clamped_to_max_burst() {
        let mut n = target();
        n.set_ours(KeyId::FIRST_BURST_LENGTH, Value::Number(1 << 20));
        n.respond(
            &pairs(&[("MaxBurstLength", "16384"), ("FirstBurstLength", "65536")]),
            Stage::Operational,
        )
        .unwrap();
        let s = n.session_params();
        assert_eq!(s.max_burst_length, 16384);
        assert_eq!(s.first_burst_length, 16384);
    }

    #[test]
    fn initiator_role_checks_target_answers() {
        let mut n = Negotiator::new(Role::Initiator);
        n.set_ours(KeyId::MAX_BURST_LENGTH, Value::Number(262144));
        // An initiator receiving a target-only declaration records it.
        let out = n
            .respond(
                &pairs(&[("TargetAlias", "disk"), ("InitiatorName", "x")]),
                Stage::Operational,
            )
            .unwrap();
        assert_eq!(
            n.agreed(KeyId::TARGET_ALIAS),
            Some(&Value::Text("disk".into()))
        );
        // ...and rejects keys only initiators send.
        assert_eq!(out, pairs(&[("InitiatorName", "Reject")]));
    }

    #[test]
    fn summary_lists_effective_values() {
        let n = target();
        let s = n.summary();
        assert!(s.contains("MaxBurstLength=262144"));
        assert!(s.contains("HeaderDigest=None"));
        assert!(!s.contains("InitiatorName"));
    }
}
