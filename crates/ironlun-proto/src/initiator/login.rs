//! The initiator's side of a login (RFC 7143 §6.3): it builds the Login
//! Requests, answers the target's keys and checks the target's answers to
//! ours through the shared [`Negotiator`], and ends with the values the
//! full feature phase runs on.
//!
//! The stages are walked in order: security (`AuthMethod=None`, or CHAP
//! alone when [`LoginConfig::auth`] is set, RFC 7143 §12.1.3), then
//! operational, where every operational key the caller configured in
//! [`Offers`] is proposed explicitly, whatever its default.

use bytes::Bytes;
use ironlun_wire::text::{encode_pairs, parse_pairs, TextAccumulator};
use ironlun_wire::{Frame, LoginRequest, LoginResponse, Pdu};

use crate::chap::{draw_from, split_keys, ChapError, InitiatorAuth, InitiatorChap, RANDOM_BYTES};
use crate::keys::{KeyId, Value};
use crate::login::{LoginStatus, LOGIN_SEGMENT_MAX};
use crate::negotiate::{NegotiationError, Negotiator, Role, Stage};
use crate::params::{ConnParams, Offers, SessionParams};
use crate::OutPdu;

const CSG_SECURITY: u8 = 0;
const CSG_OPERATIONAL: u8 = 1;
const CSG_FULL_FEATURE: u8 = 3;

/// Login PDUs we send before giving up on a target that never completes
/// (a bound on a peer that keeps us talking).
const MAX_LOGIN_ROUNDS: u32 = 32;

/// Largest login text we accept from the target (all PDUs of one response).
const LOGIN_TEXT_LIMIT: usize = 64 << 10;

/// What the initiator asks for.
#[derive(Clone, Debug)]
pub struct LoginConfig {
    pub initiator_name: String,
    pub initiator_alias: Option<String>,
    /// The target to log in to; `None` logs in to a discovery session.
    pub target_name: Option<String>,
    /// The initiator part of the session identifier (RFC 7143 §11.12.5).
    pub isid: [u8; 6],
    /// 0 for a new session; a session's TSIH to add a connection to it.
    pub tsih: u16,
    pub cid: u16,
    /// Operational values proposed (RFC 7143 §13).
    pub offers: Offers,
    /// CmdSN of the login, and of the first command after it.
    pub initial_cmd_sn: u32,
    /// CHAP credentials; `None` logs in without authentication. With
    /// credentials only CHAP is offered, so a target cannot talk us down
    /// to no authentication.
    pub auth: Option<InitiatorAuth>,
}

impl LoginConfig {
    /// A normal session to `target` with ironlun's default offers.
    pub fn normal(initiator_name: &str, target: &str) -> Self {
        LoginConfig {
            initiator_name: initiator_name.to_owned(),
            initiator_alias: None,
            target_name: Some(target.to_owned()),
            isid: default_isid(0),
            tsih: 0,
            cid: 0,
            offers: Offers::default(),
            initial_cmd_sn: 1,
            auth: None,
        }
    }

    /// A discovery session.
    pub fn discovery(initiator_name: &str) -> Self {
        LoginConfig {
            target_name: None,
            ..LoginConfig::normal(initiator_name, "")
        }
    }
}

/// An ISID of the "random" type (T=10b, RFC 7143 §11.12.5) whose low bits
/// carry `n`, so each session of one initiator gets its own.
pub fn default_isid(n: u32) -> [u8; 6] {
    let b = n.to_be_bytes();
    [0x80, 0x1e, 0x0a, b[1], b[2], b[3]]
}

/// What a completed login leaves for the full feature phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginOutcome {
    pub tsih: u16,
    pub session: SessionParams,
    pub conn: ConnParams,
    /// CmdSN of the first full-feature command.
    pub cmd_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub target_alias: Option<String>,
    pub target_portal_group_tag: Option<u64>,
    /// Negotiated values as `Key=Value` text.
    pub summary: String,
}

/// Why a login did not complete.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// The target answered with a non-zero status (RFC 7143 §11.13.5).
    #[error("login refused: {status}")]
    Refused {
        status: LoginStatus,
        /// TargetAddress of a redirection (class 1).
        redirect: Option<String>,
    },
    /// The target broke a login rule.
    #[error("target broke the login protocol: {0}")]
    Protocol(String),
    /// The CHAP exchange failed on our side (for mutual CHAP: the target
    /// did not prove it knows its secret).
    #[error("CHAP: {0}")]
    Chap(#[from] ChapError),
    #[error(transparent)]
    Negotiation(#[from] NegotiationError),
}

/// The target broke a login rule.
fn protocol(msg: String) -> LoginError {
    LoginError::Protocol(msg)
}

/// What to do after a Login Response.
#[derive(Clone, Debug)]
pub enum LoginProgress {
    /// Send this request and wait for the next response.
    Send(OutPdu),
    /// Full feature phase begins.
    Done(Box<LoginOutcome>),
}

/// One connection's login, initiator side.
#[derive(Debug)]
pub struct InitiatorLogin {
    cfg: LoginConfig,
    neg: Negotiator,
    stage: u8,
    itt: u32,
    exp_stat_sn: u32,
    rounds: u32,
    rx: TextAccumulator,
    proposed_operational: bool,
    chap: Option<InitiatorChap>,
    /// Random bytes for our mutual CHAP identifier and challenge.
    nonce: [u8; RANDOM_BYTES],
}

impl InitiatorLogin {
    /// `nonce` must be unpredictable (from the OS) when mutual CHAP is
    /// configured: it becomes our challenge to the target.
    pub fn new(cfg: LoginConfig, nonce: [u8; RANDOM_BYTES]) -> Self {
        let mut neg = Negotiator::new(Role::Initiator);
        neg.load_offers(&cfg.offers);
        neg.set_discovery(cfg.target_name.is_none());
        neg.set_leading(cfg.tsih == 0);
        let chap = cfg.auth.clone().map(InitiatorChap::new);
        InitiatorLogin {
            cfg,
            neg,
            stage: CSG_SECURITY,
            itt: 0,
            exp_stat_sn: 0,
            rounds: 0,
            rx: TextAccumulator::new(LOGIN_TEXT_LIMIT),
            proposed_operational: false,
            chap,
            nonce,
        }
    }

    /// The first Login Request: names, session type and the
    /// authentication methods, in the security stage.
    pub fn start(&mut self) -> OutPdu {
        let mut pairs = vec![("InitiatorName".to_owned(), self.cfg.initiator_name.clone())];
        if let Some(alias) = &self.cfg.initiator_alias {
            pairs.push(("InitiatorAlias".to_owned(), alias.clone()));
        }
        match &self.cfg.target_name {
            Some(t) => {
                pairs.push(("SessionType".to_owned(), "Normal".to_owned()));
                pairs.push(("TargetName".to_owned(), t.clone()));
            }
            None => pairs.push(("SessionType".to_owned(), "Discovery".to_owned())),
        }
        let method = if self.chap.is_some() { "CHAP" } else { "None" };
        self.neg
            .set_ours(KeyId::AUTH_METHOD, Value::Text(method.to_owned()));
        pairs.push(self.neg.propose(KeyId::AUTH_METHOD));
        // With CHAP the stage cannot end before the exchange does.
        self.request(self.chap.is_none(), CSG_OPERATIONAL, &pairs)
    }

    fn request(&mut self, transit: bool, nsg: u8, pairs: &[(String, String)]) -> OutPdu {
        self.rounds = self.rounds.saturating_add(1);
        let text = encode_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        OutPdu {
            pdu: Pdu::LoginRequest(LoginRequest {
                transit,
                cont: false,
                csg: self.stage,
                nsg: if transit { nsg } else { 0 },
                version_max: 0,
                version_min: 0,
                isid: self.cfg.isid,
                tsih: self.cfg.tsih,
                itt: self.itt,
                cid: self.cfg.cid,
                cmd_sn: self.cfg.initial_cmd_sn,
                exp_stat_sn: self.exp_stat_sn,
            }),
            data: Bytes::from(text).into(),
        }
    }

    /// The operational proposals (RFC 7143 §13): every key we care about,
    /// offered explicitly.
    fn operational_proposals(&mut self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let discovery = self.cfg.target_name.is_none();
        out.push(self.neg.propose(KeyId::HEADER_DIGEST));
        out.push(self.neg.propose(KeyId::DATA_DIGEST));
        let mrdsl = self.neg.ours(KeyId::MAX_RECV_DATA_SEGMENT_LENGTH);
        out.push(self.neg.declare(KeyId::MAX_RECV_DATA_SEGMENT_LENGTH, mrdsl));
        if discovery || self.cfg.tsih != 0 {
            return out;
        }
        for id in [
            KeyId::MAX_CONNECTIONS,
            KeyId::INITIAL_R2T,
            KeyId::IMMEDIATE_DATA,
            KeyId::MAX_BURST_LENGTH,
            KeyId::FIRST_BURST_LENGTH,
            KeyId::DEFAULT_TIME2WAIT,
            KeyId::DEFAULT_TIME2RETAIN,
            KeyId::MAX_OUTSTANDING_R2T,
            KeyId::DATA_PDU_IN_ORDER,
            KeyId::DATA_SEQUENCE_IN_ORDER,
            KeyId::ERROR_RECOVERY_LEVEL,
        ] {
            out.push(self.neg.propose(id));
        }
        out
    }

    /// Handles one PDU received in the login phase: anything but a Login
    /// Response breaks the login protocol.
    pub fn handle_frame(&mut self, frame: &Frame) -> Result<LoginProgress, LoginError> {
        match Pdu::decode(&frame.bhs) {
            Ok(Pdu::LoginResponse(resp)) => self.handle_response(&resp, &frame.data),
            Ok(other) => Err(LoginError::Protocol(format!(
                "{} during login",
                other.opcode()
            ))),
            Err(e) => Err(LoginError::Protocol(format!("login response: {e}"))),
        }
    }

    /// Handles one Login Response.
    fn handle_response(
        &mut self,
        resp: &LoginResponse,
        data: &[u8],
    ) -> Result<LoginProgress, LoginError> {
        self.check_header(resp, data)?;
        // RFC 7143 §11.13.4: StatSN is valid from the first response on.
        self.exp_stat_sn = resp.stat_sn.wrapping_add(1);
        let text = match self.rx.push(data, resp.cont) {
            Ok(Some(t)) => t,
            // The target's text continues: ask for the rest (RFC 7143 §6.3).
            Ok(None) => return Ok(LoginProgress::Send(self.request(false, 0, &[]))),
            Err(e) => return Err(protocol(e.to_string())),
        };
        let pairs = parse_pairs(&text).map_err(|e| protocol(e.to_string()))?;
        let (mut answers, hold) = self.answer_keys(pairs)?;
        if resp.transit {
            self.check_security_exit()?;
            if resp.nsg == CSG_FULL_FEATURE {
                // Proposals the target did not answer keep their
                // defaults (RFC 7143 §6.2).
                self.neg.drop_unanswered();
                self.check_digests()?;
                return Ok(LoginProgress::Done(Box::new(self.outcome(resp))));
            }
            if resp.nsg != CSG_OPERATIONAL || self.stage != CSG_SECURITY {
                let msg = format!(
                    "target moved from stage {} to stage {}",
                    self.stage, resp.nsg
                );
                return Err(protocol(msg));
            }
            self.stage = CSG_OPERATIONAL;
        }
        if self.stage == CSG_OPERATIONAL && !self.proposed_operational {
            self.proposed_operational = true;
            answers.extend(self.operational_proposals());
        }
        let text_len = answers
            .iter()
            .map(|(k, v)| k.len().saturating_add(v.len()).saturating_add(2))
            .fold(0usize, usize::saturating_add);
        if text_len > LOGIN_SEGMENT_MAX {
            return Err(protocol("our login text outgrew one PDU".into()));
        }
        let nsg = if self.stage == CSG_SECURITY {
            CSG_OPERATIONAL
        } else {
            CSG_FULL_FEATURE
        };
        Ok(LoginProgress::Send(self.request(!hold, nsg, &answers)))
    }

    /// A refusal (with a redirection's TargetAddress), and the header
    /// rules a response must keep: our ITT, ISID and stage, T and C not
    /// both set, and a bound on the number of rounds.
    fn check_header(&self, resp: &LoginResponse, data: &[u8]) -> Result<(), LoginError> {
        if !resp.status.is_success() {
            let redirect = parse_pairs(data).ok().and_then(|pairs| {
                pairs
                    .into_iter()
                    .find(|(k, _)| k == "TargetAddress")
                    .map(|(_, v)| v)
            });
            return Err(LoginError::Refused {
                status: resp.status,
                redirect,
            });
        }
        if resp.itt != self.itt {
            return Err(protocol(format!(
                "Login Response ITT 0x{:08x}, expected 0x{:08x}",
                resp.itt, self.itt
            )));
        }
        if resp.isid != self.cfg.isid {
            return Err(protocol("Login Response carries another ISID".into()));
        }
        if resp.csg != self.stage {
            return Err(protocol(format!(
                "Login Response in stage {}, we are in stage {}",
                resp.csg, self.stage
            )));
        }
        if resp.transit && resp.cont {
            return Err(protocol("T and C both set (RFC 7143 §11.13.1)".into()));
        }
        if self.rounds >= MAX_LOGIN_ROUNDS {
            return Err(protocol(format!(
                "login did not complete in {MAX_LOGIN_ROUNDS} exchanges"
            )));
        }
        Ok(())
    }

    /// Our answers to the target's keys, and whether a CHAP exchange
    /// needs more rounds (our requests then keep T=0).
    fn answer_keys(
        &mut self,
        pairs: Vec<(String, String)>,
    ) -> Result<(Vec<(String, String)>, bool), LoginError> {
        let (chap_keys, pairs) = split_keys(pairs);
        let stage = if self.stage == CSG_SECURITY {
            Stage::Security
        } else {
            Stage::Operational
        };
        let mut answers = self.neg.respond(&pairs, stage)?;
        if self.stage != CSG_SECURITY {
            if !chap_keys.is_empty() {
                return Err(protocol("CHAP keys outside the security stage".into()));
            }
            return Ok((answers, false));
        }
        let (chap_answers, more) = self.chap_round(&chap_keys)?;
        answers.extend(chap_answers);
        Ok((answers, more))
    }

    /// The digests in effect are ones we offered: a default left by a
    /// proposal the target did not answer may not be (DataDigest=None
    /// when we offered only CRC32C), and a target must not switch off a
    /// digest we require by ignoring it.
    fn check_digests(&self) -> Result<(), LoginError> {
        for id in [KeyId::HEADER_DIGEST, KeyId::DATA_DIGEST] {
            let ours = self.neg.ours(id);
            let ours = ours.as_text().unwrap_or_default();
            let effective = self.neg.effective(id);
            let Some(v) = effective.as_ref().and_then(Value::as_text) else {
                continue;
            };
            if !ours.split(',').any(|o| o.trim() == v) {
                return Err(protocol(format!(
                    "{}={v} in effect, but we offered {ours}",
                    id.name()
                )));
            }
        }
        Ok(())
    }

    /// The target leaves the security stage: only with the method we
    /// offered, and with CHAP only once it completed.
    fn check_security_exit(&self) -> Result<(), LoginError> {
        if self.stage != CSG_SECURITY {
            return Ok(());
        }
        let method = self.neg.effective(KeyId::AUTH_METHOD);
        let method = method.as_ref().and_then(Value::as_text).unwrap_or("None");
        match (&self.chap, method) {
            (None, "None") => Ok(()),
            (Some(c), "CHAP") if c.done() => Ok(()),
            (Some(_), "CHAP") => Err(protocol(
                "target left the security stage before CHAP completed".into(),
            )),
            _ => Err(protocol(
                "target chose an authentication method we did not offer".into(),
            )),
        }
    }

    /// The CHAP part of one security-stage response: after the target
    /// agrees to CHAP, propose the algorithms; on its challenge, respond
    /// (and challenge it for mutual CHAP); on its mutual response, check
    /// it. Returns our keys and whether more rounds are needed before the
    /// stage may end.
    fn chap_round(
        &mut self,
        keys: &[(String, String)],
    ) -> Result<(Vec<(String, String)>, bool), LoginError> {
        let agreed_chap =
            self.neg.agreed(KeyId::AUTH_METHOD).and_then(Value::as_text) == Some("CHAP");
        let Some(chap) = self.chap.as_mut() else {
            if keys.is_empty() {
                return Ok((Vec::new(), false));
            }
            return Err(LoginError::Protocol(
                "CHAP keys, but we did not offer CHAP".into(),
            ));
        };
        if !agreed_chap {
            // Our only offer was CHAP; anything else is a refusal.
            return Err(LoginError::Protocol(
                "the target did not agree to AuthMethod=CHAP".into(),
            ));
        }
        if keys.is_empty() {
            if chap.offered() {
                // Nothing new: the transit check decides whether the
                // target may end the stage here.
                return Ok((Vec::new(), false));
            }
            // AuthMethod=CHAP was just agreed: the algorithms go next.
            return Ok((chap.offer(), true));
        }
        let out = chap.step(keys, &mut draw_from(&self.nonce))?;
        Ok((out, false))
    }

    fn outcome(&self, resp: &LoginResponse) -> LoginOutcome {
        let text = |id: KeyId| {
            self.neg
                .agreed(id)
                .and_then(|v| v.as_text().map(str::to_owned))
        };
        LoginOutcome {
            tsih: resp.tsih,
            session: self.neg.session_params(),
            conn: self.neg.conn_params(),
            cmd_sn: self.cfg.initial_cmd_sn,
            exp_cmd_sn: resp.exp_cmd_sn,
            max_cmd_sn: resp.max_cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
            target_alias: text(KeyId::TARGET_ALIAS),
            target_portal_group_tag: self
                .neg
                .agreed(KeyId::TARGET_PORTAL_GROUP_TAG)
                .and_then(Value::as_number),
            summary: self.neg.summary(),
        }
    }
}
