//! The `initiator` harness's account of the login phase: every Login
//! Request the core sends is checked against the rules of RFC 7143
//! §11.12 and the credentials and offers it was given, and the values a
//! completed login leaves against what was offered (§13).

use ironlun_proto::chap::{decode_binary, Algorithm, Secret};
use ironlun_proto::initiator::{LoginConfig, LoginOutcome};
use ironlun_proto::login::LOGIN_SEGMENT_MAX;
use ironlun_proto::params::{DigestKind, SessionParams};
use ironlun_proto::OutPdu;
use ironlun_wire::text::parse_pairs;
use ironlun_wire::{Digests, Frame, LoginResponse, Outbox, Pdu};

use super::{InitiatorRun, LOGIN_ROUNDS};
use crate::login::get;
use crate::session::encode_into;
use crate::world::TARGET_SECRET;

/// The login phase, as the harness accounts for it.
pub(super) struct LoginSide {
    pub(super) cfg: LoginConfig,
    /// The first request: its ITT, ISID, TSIH, CID and CmdSN hold
    /// throughout the login.
    pub(super) first: Option<ironlun_wire::LoginRequest>,
    stage: u8,
    requests: usize,
    /// The last Login Response, and text collected across C=1.
    pub(super) last: Option<LoginResponse>,
    rx: Vec<u8>,
    algorithm: Option<Algorithm>,
    /// CHAP_I and CHAP_C of the initiator's challenge (mutual CHAP).
    our_challenge: Option<(u8, Vec<u8>)>,
    answered_challenge: bool,
    target_proved: bool,
}

impl LoginSide {
    pub(super) fn new(cfg: LoginConfig) -> Self {
        LoginSide {
            cfg,
            first: None,
            stage: 0,
            requests: 0,
            last: None,
            rx: Vec::new(),
            algorithm: None,
            our_challenge: None,
            answered_challenge: false,
            target_proved: false,
        }
    }

    /// Checks one Login Request and puts it on the wire.
    pub(super) fn send(&mut self, p: OutPdu, run: &mut InitiatorRun, sent: &mut Vec<u8>) {
        let Pdu::LoginRequest(r) = &p.pdu else {
            panic!("the initiator sent {:?} during login", p.pdu.opcode());
        };
        self.requests += 1;
        run.login_requests = self.requests;
        run.pdus_out += 1;
        assert!(
            self.requests <= LOGIN_ROUNDS,
            "{} Login Requests: the login is unbounded",
            self.requests
        );
        match &self.first {
            None => {
                assert_eq!(r.tsih, 0, "a new session's login with a TSIH: {r:?}");
                self.first = Some(r.clone());
            }
            Some(f) => assert_eq!(
                (r.itt, r.isid, r.tsih, r.cid, r.cmd_sn),
                (f.itt, f.isid, f.tsih, f.cid, f.cmd_sn),
                "ITT, ISID, TSIH, CID or CmdSN changed during the login (RFC 7143 §11.12)"
            ),
        }
        assert!(!(r.transit && r.cont), "T and C both set: {r:?}");
        assert!(
            r.csg >= self.stage && r.csg <= 1,
            "stage {} after stage {}: {r:?}",
            r.csg,
            self.stage
        );
        self.stage = r.csg;
        if r.transit {
            assert!(
                r.nsg > r.csg && (r.nsg == 1 || r.nsg == 3),
                "transit from stage {} to {}: {r:?}",
                r.csg,
                r.nsg
            );
        }
        if let Some(last) = &self.last {
            assert_eq!(
                r.exp_stat_sn,
                last.stat_sn.wrapping_add(1),
                "ExpStatSN does not acknowledge the last Login Response: {r:?}"
            );
        }
        assert!(
            p.data.len() <= LOGIN_SEGMENT_MAX,
            "a Login Request of {} bytes",
            p.data.len()
        );
        let Some(text) = p.data.as_mem() else {
            panic!("a Login Request's data is a file range");
        };
        let pairs = match parse_pairs(text) {
            Ok(p) => p,
            Err(e) => panic!("the initiator's login text does not parse: {e}"),
        };
        if self.cfg.auth.is_some() {
            // CHAP, or a refusal of the target's offer: never agreeing to
            // another method.
            if let Some(m) = get(&pairs, "AuthMethod") {
                assert!(
                    m == "CHAP" || m == "Reject",
                    "AuthMethod={m} with CHAP configured"
                );
            }
        }
        if get(&pairs, "CHAP_R").is_some() {
            self.answered_challenge = true;
        }
        if let (Some(i), Some(c)) = (get(&pairs, "CHAP_I"), get(&pairs, "CHAP_C")) {
            let parsed = (i.parse::<u8>().ok(), decode_binary(c, "CHAP_C").ok());
            let (Some(i), Some(c)) = parsed else {
                panic!("the initiator sent a malformed challenge: {pairs:?}");
            };
            self.our_challenge = Some((i, c));
        }
        encode_into(&mut Outbox::new(Digests::default()), p, sent);
    }

    /// Notes one Login Response before the initiator sees it.
    pub(super) fn received(&mut self, frame: &Frame) {
        let Ok(Pdu::LoginResponse(r)) = Pdu::decode(&frame.bhs) else {
            return;
        };
        if self.rx.len() + frame.data.len() > 64 << 10 {
            self.rx.clear();
        }
        self.rx.extend_from_slice(&frame.data);
        if !r.cont {
            let text = std::mem::take(&mut self.rx);
            if let Ok(pairs) = parse_pairs(&text) {
                self.watch_chap(&pairs);
            }
        }
        self.last = Some(r);
    }

    fn watch_chap(&mut self, pairs: &[(String, String)]) {
        if let Some(a) = get(pairs, "CHAP_A").and_then(Algorithm::from_code) {
            self.algorithm = Some(a);
        }
        let Some(r) = get(pairs, "CHAP_R") else {
            return;
        };
        let (Some(alg), Some((id, challenge))) = (self.algorithm, &self.our_challenge) else {
            return;
        };
        let right = Secret::new(TARGET_SECRET)
            .ok()
            .map(|s| alg.response(*id, &s, challenge));
        if right.is_some() && decode_binary(r, "CHAP_R").ok() == right {
            self.target_proved = true;
        }
    }

    /// The login completed: on the right response, with the right
    /// authentication, and with values inside what was offered.
    pub(super) fn done(&self, outcome: &LoginOutcome, run: &mut InitiatorRun) {
        let Some(r) = &self.last else {
            panic!("a login completed without a Login Response");
        };
        assert!(
            r.status.is_success() && r.transit && !r.cont && r.nsg == 3,
            "the login completed on {r:?}"
        );
        if let Some(auth) = &self.cfg.auth {
            assert!(
                self.answered_challenge,
                "a login with CHAP configured completed without answering a challenge"
            );
            if auth.mutual.is_some() {
                assert!(
                    self.target_proved,
                    "a mutual CHAP login completed without the target's right CHAP_R"
                );
            }
        }
        run.authenticated = self.answered_challenge;
        run.target_authenticated = self.target_proved;
        let offers = &self.cfg.offers;
        let c = &outcome.conn;
        assert_eq!(
            c.max_recv_data_segment_length, offers.max_recv_data_segment_length,
            "our MaxRecvDataSegmentLength is our declaration"
        );
        assert!(
            (512..1 << 24).contains(&c.max_xmit_data_segment_length),
            "the target's MaxRecvDataSegmentLength {}",
            c.max_xmit_data_segment_length
        );
        let crc = offers.header_digest == [DigestKind::Crc32c];
        assert_eq!(
            (c.header_digest, c.data_digest),
            (crc, crc),
            "digests other than the only one offered"
        );
        if self.cfg.target_name.is_none() {
            return; // the session keys are not negotiated (RFC 7143 §13)
        }
        let s = &outcome.session;
        // A proposal the target leaves unanswered keeps the RFC default:
        // no answer is no agreement (the negotiator's rule, RFC 7143 §6.2).
        let d = SessionParams::default();
        assert!(
            s.max_burst_length >= 512
                && (s.max_burst_length <= offers.max_burst_length
                    || s.max_burst_length == d.max_burst_length),
            "MaxBurstLength {} for an offer of {}",
            s.max_burst_length,
            offers.max_burst_length
        );
        // Irrelevant when no unsolicited data can flow (RFC 7143 §13.14).
        let unsolicited = !s.initial_r2t || s.immediate_data;
        let first = s.first_burst_length;
        assert!(
            !unsolicited
                || ((512..=s.max_burst_length).contains(&first)
                    && (first <= offers.first_burst_length
                        || first == d.first_burst_length.min(s.max_burst_length))),
            "FirstBurstLength {first} (offered {}, MaxBurstLength {})",
            offers.first_burst_length,
            s.max_burst_length
        );
        assert!(
            s.initial_r2t || !offers.initial_r2t,
            "InitialR2T is an OR (RFC 7143 §13.10)"
        );
        assert_eq!(
            s.error_recovery_level, 0,
            "ErrorRecoveryLevel above offered"
        );
        assert!(s.max_connections <= offers.max_connections);
    }
}
