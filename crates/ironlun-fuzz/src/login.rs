//! The target's login state machine (`ironlun-proto::target::login`),
//! with CHAP.
//!
//! Input: one byte of world settings ([`WorldSettings`]: CHAP for normal
//! and discovery sessions, mutual credentials, a full session table), then
//! records whose payloads are socket reads: the bytes are framed with the
//! login-phase limits and every PDU goes to the state machine, as the
//! daemon does.
//!
//! Checked beyond "does not panic":
//! - every answer is a Login Response within the login segment limit, with
//!   parseable text; a failure's status class is not success;
//! - a login that requires CHAP never completes unless a request carried
//!   the right CHAP_R for the challenge the target issued (the harness
//!   recomputes it from the secret), and never completes with a reflected
//!   challenge;
//! - a mutual CHAP answer from the target is the right response to the
//!   initiator's challenge;
//! - a completed login ends in full feature phase with RFC-valid
//!   connection values.

use bytes::BytesMut;
use ironlun_proto::chap::{decode_binary, Algorithm, Secret};
use ironlun_proto::login::LOGIN_SEGMENT_MAX;
use ironlun_proto::target::login::{LoginResult, LoginStep, TargetLogin};
use ironlun_proto::OutPdu;
use ironlun_wire::text::parse_pairs;
use ironlun_wire::{Frame, FrameDecoder, Pdu};

use crate::input::Records;
use crate::world::{World, WorldSettings, INITIATOR_SECRET, TARGET_SECRET};

/// What one input exercised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoginRun {
    pub requests: usize,
    pub completed: bool,
    pub failed: bool,
    pub authenticated: bool,
}

/// Where a login stands after one PDU.
pub(crate) enum Phase {
    Continue,
    Failed,
    Complete(Box<LoginResult>),
}

/// The login phase of one connection, with the harness's own account of
/// the CHAP exchange.
pub(crate) struct LoginDriver {
    login: TargetLogin,
    pub(crate) world: World,
    /// Request text collected across C=1 PDUs.
    rx: Vec<u8>,
    /// Response text collected across C=1 PDUs.
    tx: Vec<u8>,
    /// The target's challenge: algorithm, identifier, bytes.
    challenge: Option<(Algorithm, u8, Vec<u8>)>,
    /// The initiator's challenge of the last complete request.
    their_challenge: Option<(u8, Vec<u8>)>,
    reflected: bool,
    pub(crate) authenticated: bool,
    pub(crate) requests: usize,
}

/// The value of `key` in a login text.
pub(crate) fn get<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

impl LoginDriver {
    pub(crate) fn new(settings: WorldSettings) -> Self {
        LoginDriver {
            login: TargetLogin::new(1000, 8, 64 << 10),
            world: World::new(settings),
            rx: Vec::new(),
            tx: Vec::new(),
            challenge: None,
            their_challenge: None,
            reflected: false,
            authenticated: false,
            requests: 0,
        }
    }

    /// One PDU of the login phase; returns the response to send.
    pub(crate) fn handle(&mut self, frame: &Frame) -> (OutPdu, Phase) {
        self.requests += 1;
        if let Ok(Pdu::LoginRequest(req)) = Pdu::decode(&frame.bhs) {
            self.watch_request(&frame.data, req.cont);
        }
        let step = self.login.handle_frame(frame, &mut self.world);
        let (out, phase) = match step {
            LoginStep::Continue(out) => (out, Phase::Continue),
            LoginStep::Failed {
                response, status, ..
            } => {
                assert_ne!(status.class(), 0, "a failed login with a success status");
                match &response.pdu {
                    Pdu::LoginResponse(r) => assert_eq!(
                        r.status, status,
                        "the response does not carry the failure's status"
                    ),
                    other => panic!("login failure answered with {other:?}"),
                }
                (response, Phase::Failed)
            }
            LoginStep::Complete { response, result } => (response, Phase::Complete(result)),
        };
        let Pdu::LoginResponse(resp) = &out.pdu else {
            panic!("login answered with {:?}", out.pdu);
        };
        assert!(
            out.data.len() <= LOGIN_SEGMENT_MAX,
            "login response of {} bytes",
            out.data.len()
        );
        if let Phase::Continue = phase {
            assert!(
                resp.status.is_success(),
                "a continuing login with a failure"
            );
        }
        let Some(data) = out.data.as_mem() else {
            panic!("a login response's data is a file range");
        };
        self.watch_response(data, resp.cont);
        if let Phase::Complete(result) = &phase {
            assert!(resp.transit && resp.nsg == 3, "completed without T=1 NSG=3");
            let required = if result.discovery {
                self.world.settings.discovery_chap
            } else {
                self.world.settings.chap
            };
            assert!(
                !required || self.authenticated,
                "a login that requires CHAP completed without the right CHAP_R"
            );
            assert!(!self.reflected, "completed with a reflected challenge");
            for n in [
                result.conn.max_recv_data_segment_length,
                result.conn.max_xmit_data_segment_length,
            ] {
                assert!((512..1 << 24).contains(&n), "MaxRecvDataSegmentLength {n}");
            }
        }
        (out, phase)
    }

    fn watch_request(&mut self, data: &[u8], cont: bool) {
        self.rx.extend_from_slice(data);
        if cont {
            return;
        }
        let text = std::mem::take(&mut self.rx);
        let Ok(pairs) = parse_pairs(&text) else {
            return;
        };
        if let (Some((alg, id, challenge)), Some(r)) = (&self.challenge, get(&pairs, "CHAP_R")) {
            let secret = Secret::new(INITIATOR_SECRET).ok();
            let right = secret.map(|s| alg.response(*id, &s, challenge));
            if right.is_some() && decode_binary(r, "CHAP_R").ok() == right {
                self.authenticated = true;
            }
        }
        self.their_challenge = match (get(&pairs, "CHAP_I"), get(&pairs, "CHAP_C")) {
            (Some(i), Some(c)) => match (i.trim().parse::<u8>(), decode_binary(c, "CHAP_C")) {
                (Ok(i), Ok(c)) => {
                    if self
                        .challenge
                        .as_ref()
                        .is_some_and(|(_, _, ours)| *ours == c)
                    {
                        self.reflected = true;
                    }
                    Some((i, c))
                }
                _ => None,
            },
            _ => None,
        };
    }

    fn watch_response(&mut self, data: &[u8], cont: bool) {
        self.tx.extend_from_slice(data);
        if cont {
            return;
        }
        let text = std::mem::take(&mut self.tx);
        let pairs = match parse_pairs(&text) {
            Ok(p) => p,
            Err(e) => panic!("the target's login text does not parse: {e}"),
        };
        if let (Some(a), Some(i), Some(c)) = (
            get(&pairs, "CHAP_A"),
            get(&pairs, "CHAP_I"),
            get(&pairs, "CHAP_C"),
        ) {
            let parsed = (
                Algorithm::from_code(a),
                i.parse::<u8>().ok(),
                decode_binary(c, "CHAP_C").ok(),
            );
            let (Some(alg), Some(id), Some(challenge)) = parsed else {
                panic!("the target sent a malformed challenge: {pairs:?}");
            };
            self.challenge = Some((alg, id, challenge));
        }
        if let Some(r) = get(&pairs, "CHAP_R") {
            let Some((alg, _, _)) = &self.challenge else {
                panic!("the target sent CHAP_R without a CHAP exchange");
            };
            let Some((id, c)) = &self.their_challenge else {
                panic!("the target sent CHAP_R to no challenge");
            };
            let right = Secret::new(TARGET_SECRET)
                .ok()
                .map(|s| alg.response(*id, &s, c));
            assert_eq!(
                decode_binary(r, "CHAP_R").ok(),
                right,
                "the target's mutual CHAP response is wrong"
            );
        }
    }
}

pub fn login(data: &[u8]) -> LoginRun {
    let (settings, rest) = data.split_first().unwrap_or((&0, &[]));
    let mut driver = LoginDriver::new(WorldSettings::from_byte(*settings));
    let decoder = FrameDecoder::new(LOGIN_SEGMENT_MAX as u32);
    let mut buf = BytesMut::new();
    let mut run = LoginRun::default();
    'reads: for (_, read) in Records::new(rest) {
        buf.extend_from_slice(read);
        loop {
            let frame = match decoder.decode(&mut buf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                // The daemon drops the connection.
                Err(_) => break 'reads,
            };
            match driver.handle(&frame).1 {
                Phase::Continue => {}
                Phase::Failed => {
                    run.failed = true;
                    break 'reads;
                }
                Phase::Complete(_) => {
                    run.completed = true;
                    break 'reads;
                }
            }
        }
    }
    run.requests = driver.requests;
    run.authenticated = driver.authenticated;
    run
}
