//! The target side of the login phase (RFC 7143 §6.3, §11.12, §11.13).
//!
//! [`TargetLogin`] consumes Login Request PDUs and produces Login Responses.
//! It owns stage transitions (CSG/NSG, the T and C bits), the first-PDU
//! checks (version, InitiatorName, SessionType, TargetName), text
//! continuation in both directions, and negotiation through
//! [`Negotiator`]. What only the daemon knows (which targets exist, who may
//! reach them, the session table for TSIH assignment and reinstatement) is
//! asked of a [`LoginContext`].

use bytes::Bytes;

use crate::chap::{draw_from, split_keys, ChapPolicy, TargetChap, RANDOM_BYTES};
use crate::keys::{KeyId, Value};
use crate::login::{
    LoginStatus, CSG_FULL_FEATURE, CSG_OPERATIONAL, CSG_SECURITY, LOGIN_SEGMENT_MAX,
};
use crate::names::{loggable, normalize};
use crate::negotiate::{NegotiationError, Negotiator, Role, Stage};
use crate::params::{ConnParams, Offers, SessionParams};
use crate::OutPdu;
use ironlun_wire::text::{encode_pairs, parse_pairs, TextAccumulator, TextChunker};
use ironlun_wire::{Frame, LoginRequest, LoginResponse, Pdu};

/// What the login needs to know about the target it is reaching.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetInfo {
    pub name: String,
    pub alias: Option<String>,
    pub portal_group_tag: u16,
    pub offers: Offers,
    /// Commands a session may hold at once: sets MaxCmdSN from the first
    /// response on.
    pub queue_depth: u32,
    /// CHAP is required to log in (RFC 7143 §12.1.3); `None`: no
    /// authentication (AuthMethod=None).
    pub chap: Option<ChapPolicy>,
}

/// A login that has completed negotiation and asks to become a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSession {
    pub initiator_name: String,
    pub isid: [u8; 6],
    pub target_name: Option<String>,
    pub discovery: bool,
    pub cid: u16,
    /// TSIH from the Login Request: 0 for a new session, otherwise the
    /// session a connection wants to join (RFC 7143 §6.3.1).
    pub tsih: u16,
}

/// The daemon's side of a login: lookups and the session table.
pub trait LoginContext {
    /// The target a normal session names, checked against its access rules
    /// for this initiator. Errors are login statuses (0x0203 not found,
    /// 0x0202 authorization failure, ...).
    fn find_target(
        &mut self,
        target_name: &str,
        initiator_name: &str,
    ) -> Result<TargetInfo, LoginStatus>;

    /// Offers for discovery sessions, or an error if discovery is refused.
    fn discovery_offers(&self) -> Result<Offers, LoginStatus>;

    /// CHAP required of discovery sessions, if any.
    fn discovery_chap(&self) -> Option<ChapPolicy>;

    /// Fills `buf` with unpredictable bytes (CHAP identifiers and
    /// challenges). An error fails the login with that status.
    fn random(&mut self, buf: &mut [u8]) -> Result<(), LoginStatus>;

    /// Remembers an initiator's mutual CHAP challenge and says whether an
    /// earlier login already used it (a replay: the login is refused
    /// before our response goes out). The default remembers nothing.
    fn challenge_seen_before(&mut self, challenge: &[u8]) -> bool {
        let _ = challenge;
        false
    }

    /// Creates (or, with the same InitiatorName+ISID, reinstates) a session
    /// and returns its TSIH (RFC 7143 §6.3.5).
    fn create_session(&mut self, s: &NewSession) -> Result<u16, LoginStatus>;
}

/// The outcome of a successful login, handed to full feature phase.
#[derive(Clone, Debug)]
pub struct LoginResult {
    pub initiator_name: String,
    pub initiator_alias: Option<String>,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub cid: u16,
    pub discovery: bool,
    pub target: Option<TargetInfo>,
    pub session: SessionParams,
    pub conn: ConnParams,
    /// CmdSN of the first full-feature command (the Login's CmdSN).
    pub exp_cmd_sn: u32,
    /// StatSN for the first full-feature response.
    pub next_stat_sn: u32,
    /// Negotiated values as `Key=Value` text, for the log line.
    pub summary: String,
}

/// What to do after one Login Request.
#[derive(Clone, Debug)]
pub enum LoginStep {
    /// Send the response and wait for the next request.
    Continue(OutPdu),
    /// Send the response, then close the connection (RFC 7143 §6.3: a
    /// rejected login ends the connection).
    Failed {
        response: OutPdu,
        status: LoginStatus,
        reason: String,
    },
    /// Send the response; the connection is now in full feature phase.
    Complete {
        response: OutPdu,
        result: Box<LoginResult>,
    },
}

/// Why a login fails: the status for the response and the reason for the
/// log.
type Refusal = (LoginStatus, String);

/// A request that breaks a login rule (status 0x0200, RFC 7143 §11.13.5).
fn initiator_error(msg: &str) -> Refusal {
    (LoginStatus::INITIATOR_ERROR, msg.to_owned())
}

/// Keys that say who logs in to what: declared in the first request
/// (RFC 7143 §13.4–§13.6, §13.21).
const IDENTITY_KEYS: [KeyId; 4] = [
    KeyId::INITIATOR_NAME,
    KeyId::TARGET_NAME,
    KeyId::SESSION_TYPE,
    KeyId::INITIATOR_ALIAS,
];

/// The identity keys of the first request, as sent.
fn identity_of(pairs: &[(String, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .filter(|(k, _)| IDENTITY_KEYS.iter().any(|id| id.name() == k))
        .cloned()
        .collect()
}

/// Whether `again` declares identity key `key` as `first` did: names in
/// their normal form (RFC 3722), other keys exactly.
fn same_identity(key: &str, first: &str, again: &str) -> bool {
    if first == again {
        return true;
    }
    let is_name = key == KeyId::INITIATOR_NAME.name() || key == KeyId::TARGET_NAME.name();
    is_name && matches!((normalize(first), normalize(again)), (Ok(a), Ok(b)) if a == b)
}

/// The target's login state machine for one connection.
#[derive(Debug)]
pub struct TargetLogin {
    stage: u8,
    started: bool,
    first: Option<LoginRequest>,
    stat_sn: u32,
    queue_depth: u32,
    neg: Negotiator,
    rx: TextAccumulator,
    tx: TextChunker,
    initiator_name: Option<String>,
    initiator_alias: Option<String>,
    /// The identity keys of the first request ([`IDENTITY_KEYS`]).
    identity: Vec<(String, String)>,
    target: Option<TargetInfo>,
    discovery: bool,
    declared_operational: bool,
    awaiting_proposal_answers: bool,
    /// The CHAP exchange, when the target requires one.
    chap: Option<TargetChap>,
}

impl TargetLogin {
    /// `initial_stat_sn` seeds the connection's StatSN; `queue_depth` is
    /// the command window of discovery sessions (a normal session takes its
    /// target's); `text_limit` bounds the login text an initiator can make
    /// us collect.
    pub fn new(initial_stat_sn: u32, queue_depth: u32, text_limit: usize) -> Self {
        TargetLogin {
            stage: CSG_SECURITY,
            started: false,
            first: None,
            stat_sn: initial_stat_sn,
            queue_depth: queue_depth.max(1),
            neg: Negotiator::new(Role::Target),
            rx: TextAccumulator::new(text_limit),
            tx: TextChunker::default(),
            initiator_name: None,
            initiator_alias: None,
            identity: Vec::new(),
            target: None,
            discovery: false,
            declared_operational: false,
            awaiting_proposal_answers: false,
            chap: None,
        }
    }

    /// Handles one PDU received in the login phase: a Login Request is
    /// stepped; anything else, or a header that does not decode, fails the
    /// login (RFC 7143 §6.3: "Invalid during login", 0x020b).
    pub fn handle_frame(&mut self, frame: &Frame, ctx: &mut dyn LoginContext) -> LoginStep {
        match Pdu::decode(&frame.bhs) {
            Ok(Pdu::LoginRequest(req)) => self.handle_request(&req, &frame.data, ctx),
            Ok(other) => self.reject_non_login(other.opcode()),
            Err(_) => self.reject_non_login(frame.bhs.opcode()),
        }
    }

    /// Handles one Login Request and its data segment.
    fn handle_request(
        &mut self,
        req: &LoginRequest,
        data: &[u8],
        ctx: &mut dyn LoginContext,
    ) -> LoginStep {
        match self.step(req, data, ctx) {
            Ok(step) => step,
            Err((status, reason)) => self.fail(req, status, reason),
        }
    }

    /// A PDU other than a Login Request arrived before full feature phase
    /// (RFC 7143 §6.3: "Invalid during login", 0x020b).
    fn reject_non_login(&mut self, opcode: ironlun_wire::Opcode) -> LoginStep {
        let req = self.first.clone().unwrap_or_default();
        self.fail(
            &req,
            LoginStatus::INVALID_DURING_LOGIN,
            format!("{opcode} received during login"),
        )
    }

    fn step(
        &mut self,
        req: &LoginRequest,
        data: &[u8],
        ctx: &mut dyn LoginContext,
    ) -> Result<LoginStep, Refusal> {
        self.check_header(req)?;
        // Our own text continues (C=1 on our last response): the initiator
        // asks for the next piece with an empty request.
        if !self.tx.is_empty() {
            if !data.is_empty() {
                return Err(initiator_error(
                    "text sent while our response was continuing",
                ));
            }
            let (chunk, more) = self.tx.next_chunk(LOGIN_SEGMENT_MAX);
            return Ok(LoginStep::Continue(self.response(req, false, more, chunk)));
        }
        let text = match self.rx.push(data, req.cont) {
            Ok(Some(text)) => text,
            // More text follows: acknowledge with an empty response.
            Ok(None) => {
                let ack = self.response(req, false, false, Bytes::new());
                return Ok(LoginStep::Continue(ack));
            }
            Err(e) => return Err(initiator_error(&e.to_string())),
        };
        let pairs = parse_pairs(&text).map_err(|e| initiator_error(&e.to_string()))?;
        let mut answers = self.negotiate(pairs, ctx)?;
        let transit = req.transit && self.may_leave_security(req)?;
        self.answer(req, &mut answers, transit, ctx)
    }

    /// The header rules of every Login Request: version, stages and their
    /// transitions, and the identifiers that stay fixed for the login.
    fn check_header(&mut self, req: &LoginRequest) -> Result<(), Refusal> {
        // RFC 7143 §11.12.4: Version-min above what we speak (0x00).
        if req.version_min > 0 {
            return Err((
                LoginStatus::UNSUPPORTED_VERSION,
                format!("Version-min {} is above 0", req.version_min),
            ));
        }
        match &self.first {
            None => {
                if req.tsih != 0 {
                    // Adding a connection to an existing session (MC/S) is
                    // not offered: MaxConnections is 1.
                    return Err((
                        LoginStatus::SESSION_DOES_NOT_EXIST,
                        format!("TSIH 0x{:04x}: no multi-connection sessions", req.tsih),
                    ));
                }
                // The first request may start in either stage: without
                // security negotiation the initiator begins operational
                // negotiation at once (RFC 7143 §6.3).
                if req.csg != CSG_SECURITY && req.csg != CSG_OPERATIONAL {
                    let msg = format!("login cannot start in stage {}", req.csg);
                    return Err(initiator_error(&msg));
                }
                self.stage = req.csg;
                self.first = Some(req.clone());
            }
            Some(first) => {
                // ISID, TSIH and CID stay the same throughout one login
                // (RFC 7143 §11.12.5–§11.12.7).
                if first.isid != req.isid || first.tsih != req.tsih || first.cid != req.cid {
                    return Err(initiator_error("ISID, TSIH or CID changed during login"));
                }
            }
        }
        if req.transit && req.cont {
            return Err(initiator_error("T and C both set (RFC 7143 §11.12.2)"));
        }
        if req.csg != self.stage {
            return Err(initiator_error(&format!(
                "CSG {} does not match the current stage {}",
                req.csg, self.stage
            )));
        }
        let valid_next = match self.stage {
            CSG_SECURITY => req.nsg == CSG_OPERATIONAL || req.nsg == CSG_FULL_FEATURE,
            CSG_OPERATIONAL => req.nsg == CSG_FULL_FEATURE,
            _ => false,
        };
        if req.transit && !valid_next {
            return Err(initiator_error(&format!(
                "transition from stage {} to {} is not allowed",
                req.csg, req.nsg
            )));
        }
        Ok(())
    }

    /// The answers to one request's keys: the first request's checks
    /// ([`TargetLogin::begin`]), negotiation in the current stage, and the
    /// CHAP exchange (CHAP keys belong to authentication, not to
    /// negotiation: RFC 7143 §12.1.3).
    fn negotiate(
        &mut self,
        pairs: Vec<(String, String)>,
        ctx: &mut dyn LoginContext,
    ) -> Result<Vec<(String, String)>, Refusal> {
        let (chap_keys, mut pairs) = split_keys(pairs);
        let mut answers: Vec<(String, String)> = Vec::new();
        if self.started {
            pairs = self.drop_repeated_identity(pairs)?;
        } else {
            self.started = true;
            self.identity = identity_of(&pairs);
            self.begin(&pairs, ctx, &mut answers)?;
            if self.chap.is_some() && self.stage != CSG_SECURITY {
                return Err((
                    LoginStatus::AUTHENTICATION_FAILURE,
                    "CHAP is required, but the login skipped the security stage".to_owned(),
                ));
            }
        }
        let stage = if self.stage == CSG_SECURITY {
            Stage::Security
        } else {
            Stage::Operational
        };
        answers.extend(self.neg.respond(&pairs, stage).map_err(|e| match e {
            NegotiationError::RepeatedKey(_)
            | NegotiationError::SecurityKeyOutsideSecurityStage(_)
            | NegotiationError::BadAnswer(_) => (LoginStatus::INITIATOR_ERROR, e.to_string()),
        })?);
        if self.awaiting_proposal_answers {
            // The initiator had one round to answer our proposals.
            self.neg.drop_unanswered();
            self.awaiting_proposal_answers = false;
        }
        if !chap_keys.is_empty() {
            answers.extend(self.chap_step(&chap_keys, ctx)?);
        }
        Ok(answers)
    }

    /// The request's keys without the login's identity declared again
    /// with the value it was first declared with. libiscsi (and so qemu)
    /// declares InitiatorName and SessionType again at the start of the
    /// operational stage when it offered CHAP and the target chose None;
    /// LIO and tgt accept that. A declaration is made once per login (RFC
    /// 7143 §6.2), so an identity key with another value is an initiator
    /// error, as is one that was not declared in the first request.
    fn drop_repeated_identity(
        &self,
        pairs: Vec<(String, String)>,
    ) -> Result<Vec<(String, String)>, Refusal> {
        let mut kept = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            if !IDENTITY_KEYS.iter().any(|id| id.name() == k) {
                kept.push((k, v));
                continue;
            }
            match self.identity.iter().find(|(ik, _)| *ik == k) {
                Some((_, first)) if same_identity(&k, first, &v) => {}
                Some(_) => return Err(initiator_error(&format!("{k} changed during login"))),
                // Not declared first: negotiation reports what is wrong.
                None => kept.push((k, v)),
            }
        }
        Ok(kept)
    }

    /// Whether a request asking to leave the current stage may: leaving
    /// the security stage needs the method the target requires (CHAP,
    /// completed; or None when nothing is required). While a CHAP
    /// exchange is still under way the answer keeps T=0.
    fn may_leave_security(&self, req: &LoginRequest) -> Result<bool, Refusal> {
        if self.stage != CSG_SECURITY || !req.transit {
            return Ok(true);
        }
        let method = self.neg.effective(KeyId::AUTH_METHOD);
        let method = method.as_ref().and_then(|v| v.as_text()).unwrap_or("None");
        let refused = |why: &str| Err((LoginStatus::AUTHENTICATION_FAILURE, why.to_owned()));
        match (&self.chap, method) {
            (None, "None") => Ok(true),
            (Some(c), "CHAP") => Ok(c.done()),
            (Some(_), _) => refused("CHAP is required; the initiator did not offer it"),
            (None, _) => refused("no acceptable AuthMethod"),
        }
    }

    /// Sends the round's answers: with our own proposals when full
    /// feature phase is near, in pieces when they are long, and with the
    /// stage transition (or the login's completion) when it is allowed.
    fn answer(
        &mut self,
        req: &LoginRequest,
        answers: &mut Vec<(String, String)>,
        req_transit: bool,
        ctx: &mut dyn LoginContext,
    ) -> Result<LoginStep, Refusal> {
        let entering_ffp = req_transit && req.nsg == CSG_FULL_FEATURE;
        if (self.stage == CSG_OPERATIONAL || entering_ffp) && !self.declared_operational {
            self.declared_operational = true;
            self.declare_operational(answers);
        }
        let mut transit = req_transit;
        if entering_ffp {
            let proposals = self.neg.proposals();
            if !proposals.is_empty() {
                // Keys we need but the initiator did not offer: propose them
                // and stay in this stage for one more round (RFC 7143 §6.2).
                // Security stage proposals would be answered in the
                // operational stage: move there.
                answers.extend(proposals);
                self.awaiting_proposal_answers = true;
                transit = self.stage == CSG_SECURITY;
            }
        }
        let text = encode_pairs(answers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        self.tx = TextChunker::new(text);
        let (chunk, more) = self.tx.next_chunk(LOGIN_SEGMENT_MAX);
        if more {
            // Our answer continues: no transition until it has all gone out.
            return Ok(LoginStep::Continue(self.response(req, false, true, chunk)));
        }
        if transit && entering_ffp && !self.awaiting_proposal_answers {
            return self.complete(req, chunk, ctx);
        }
        if !transit {
            return Ok(LoginStep::Continue(self.response(req, false, false, chunk)));
        }
        let next = if self.awaiting_proposal_answers {
            CSG_OPERATIONAL
        } else {
            req.nsg
        };
        let response = self.response_transit(req, next, chunk);
        self.stage = next;
        Ok(LoginStep::Continue(response))
    }

    /// One round of the CHAP exchange: only in the security stage, only
    /// after AuthMethod=CHAP was agreed.
    fn chap_step(
        &mut self,
        keys: &[(String, String)],
        ctx: &mut dyn LoginContext,
    ) -> Result<Vec<(String, String)>, (LoginStatus, String)> {
        let ierr = |msg: &str| (LoginStatus::INITIATOR_ERROR, msg.to_owned());
        if self.stage != CSG_SECURITY {
            return Err(ierr("CHAP keys outside the security stage"));
        }
        let method = self.neg.agreed(KeyId::AUTH_METHOD);
        if method.and_then(|v| v.as_text()) != Some("CHAP") {
            return Err(ierr("CHAP keys before AuthMethod=CHAP was agreed"));
        }
        let Some(chap) = self.chap.as_mut() else {
            return Err(ierr("CHAP keys, but this target does not use CHAP"));
        };
        let mut pool = [0u8; RANDOM_BYTES];
        ctx.random(&mut pool)
            .map_err(|s| (s, "no random bytes for a CHAP challenge".to_owned()))?;
        let answers = chap.step(keys, &mut draw_from(&pool)).map_err(|e| {
            let status = if e.is_protocol_error() {
                LoginStatus::INITIATOR_ERROR
            } else {
                LoginStatus::AUTHENTICATION_FAILURE
            };
            (status, format!("CHAP: {e}"))
        })?;
        if let Some(c) = chap.initiator_challenge() {
            if ctx.challenge_seen_before(c) {
                return Err((
                    LoginStatus::AUTHENTICATION_FAILURE,
                    "CHAP: the initiator's mutual challenge was used by an earlier login (replay)"
                        .to_owned(),
                ));
            }
        }
        Ok(answers)
    }

    /// First-PDU checks: who is logging in, to what, and with which offers.
    fn begin(
        &mut self,
        pairs: &[(String, String)],
        ctx: &mut dyn LoginContext,
        answers: &mut Vec<(String, String)>,
    ) -> Result<(), (LoginStatus, String)> {
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let initiator = get("InitiatorName").ok_or((
            LoginStatus::MISSING_PARAMETER,
            "InitiatorName missing from the first Login Request (RFC 7143 §13.5)".to_owned(),
        ))?;
        // Names are checked and put in their normal form where they enter
        // (RFC 7143 §4.2.7, RFC 3722): only that form is compared, stored
        // (session table, reservations) or logged.
        let initiator = normalize(initiator)
            .map_err(|e| (LoginStatus::INITIATOR_ERROR, format!("InitiatorName: {e}")))?;
        self.initiator_name = Some(initiator.clone());
        let initiator = initiator.as_str();
        // Free text (RFC 7143 §13.6), shown in logs and the session list:
        // kept with its control characters escaped.
        self.initiator_alias = get("InitiatorAlias").map(|a| loggable(a).into_owned());
        let session_type = get("SessionType").unwrap_or("Normal");
        let offers = match session_type {
            "Normal" => {
                let name = get("TargetName").ok_or((
                    LoginStatus::MISSING_PARAMETER,
                    "TargetName missing from a normal session login (RFC 7143 §13.4)".to_owned(),
                ))?;
                let name = &normalize(name)
                    .map_err(|e| (LoginStatus::INITIATOR_ERROR, format!("TargetName: {e}")))?;
                let t = ctx
                    .find_target(name, initiator)
                    .map_err(|s| (s, format!("target {name}: {}", s.describe())))?;
                let offers = t.offers.clone();
                self.queue_depth = t.queue_depth.max(1);
                // RFC 7143 §13.9: the first response of a normal session
                // carries the TargetPortalGroupTag.
                answers.push((
                    KeyId::TARGET_PORTAL_GROUP_TAG.name().to_owned(),
                    t.portal_group_tag.to_string(),
                ));
                self.chap = t.chap.clone().map(TargetChap::from);
                self.target = Some(t);
                offers
            }
            "Discovery" => {
                self.discovery = true;
                self.neg.set_discovery(true);
                self.chap = ctx.discovery_chap().map(TargetChap::from);
                ctx.discovery_offers()
                    .map_err(|s| (s, format!("discovery refused: {}", s.describe())))?
            }
            other => {
                return Err((
                    LoginStatus::SESSION_TYPE_NOT_SUPPORTED,
                    format!("SessionType {other}"),
                ))
            }
        };
        self.neg.load_offers(&offers);
        if self.chap.is_some() {
            // The only method offered when CHAP is required.
            self.neg
                .set_ours(KeyId::AUTH_METHOD, Value::Text("CHAP".to_owned()));
        }
        Ok(())
    }

    /// Declarations the target makes once operational negotiation begins:
    /// its receive limit (RFC 7143 §13.12) and alias (§13.6).
    fn declare_operational(&mut self, answers: &mut Vec<(String, String)>) {
        let mrdsl = self.neg.ours(KeyId::MAX_RECV_DATA_SEGMENT_LENGTH);
        answers.push(self.neg.declare(KeyId::MAX_RECV_DATA_SEGMENT_LENGTH, mrdsl));
        if let Some(alias) = self.target.as_ref().and_then(|t| t.alias.clone()) {
            answers.push(self.neg.declare(KeyId::TARGET_ALIAS, Value::Text(alias)));
        }
    }

    fn complete(
        &mut self,
        req: &LoginRequest,
        text: Bytes,
        ctx: &mut dyn LoginContext,
    ) -> Result<LoginStep, (LoginStatus, String)> {
        let initiator_name = self.initiator_name.clone().unwrap_or_default();
        let new = NewSession {
            initiator_name: initiator_name.clone(),
            isid: req.isid,
            target_name: self.target.as_ref().map(|t| t.name.clone()),
            discovery: self.discovery,
            cid: req.cid,
            tsih: req.tsih,
        };
        let tsih = ctx
            .create_session(&new)
            .map_err(|s| (s, format!("session not created: {}", s.describe())))?;
        let mut response = self.response_transit(req, CSG_FULL_FEATURE, text);
        if let Pdu::LoginResponse(r) = &mut response.pdu {
            r.tsih = tsih;
        }
        let result = LoginResult {
            initiator_name,
            initiator_alias: self.initiator_alias.clone(),
            isid: req.isid,
            tsih,
            cid: req.cid,
            discovery: self.discovery,
            target: self.target.clone(),
            session: self.neg.session_params(),
            conn: self.neg.conn_params(),
            exp_cmd_sn: req.cmd_sn,
            next_stat_sn: self.stat_sn,
            summary: self.neg.summary(),
        };
        Ok(LoginStep::Complete {
            response,
            result: Box::new(result),
        })
    }

    fn header(&mut self, req: &LoginRequest) -> LoginResponse {
        let stat_sn = self.stat_sn;
        self.stat_sn = self.stat_sn.wrapping_add(1);
        LoginResponse {
            transit: false,
            cont: false,
            csg: self.stage,
            nsg: 0,
            version_max: 0,
            version_active: 0,
            isid: req.isid,
            tsih: 0,
            itt: req.itt,
            stat_sn,
            // Login requests are immediate: CmdSN does not advance
            // (RFC 7143 §11.12.8).
            exp_cmd_sn: req.cmd_sn,
            max_cmd_sn: req.cmd_sn.wrapping_add(self.queue_depth.saturating_sub(1)),
            status: LoginStatus::SUCCESS,
        }
    }

    fn response(&mut self, req: &LoginRequest, transit: bool, cont: bool, data: Bytes) -> OutPdu {
        let mut h = self.header(req);
        h.transit = transit;
        h.cont = cont;
        OutPdu {
            pdu: Pdu::LoginResponse(h),
            data: data.into(),
        }
    }

    fn response_transit(&mut self, req: &LoginRequest, next: u8, data: Bytes) -> OutPdu {
        let mut h = self.header(req);
        h.transit = true;
        h.nsg = next;
        OutPdu {
            pdu: Pdu::LoginResponse(h),
            data: data.into(),
        }
    }

    fn fail(&mut self, req: &LoginRequest, status: LoginStatus, reason: String) -> LoginStep {
        let mut h = self.header(req);
        h.status = status;
        LoginStep::Failed {
            response: OutPdu {
                pdu: Pdu::LoginResponse(h),
                data: Bytes::new().into(),
            },
            status,
            // Reasons quote what the initiator sent (keys, values, names):
            // escaped, they cannot end or forge a log line.
            reason: loggable(&reason).into_owned(),
        }
    }

    /// InitiatorName once known (for logging a failed login).
    pub fn initiator_name(&self) -> Option<&str> {
        self.initiator_name.as_deref()
    }
}
