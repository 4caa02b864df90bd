//! [`InitiatorCore`]: the inputs and outputs of a session, and what it
//! does with the protocol's output after every input.

use std::collections::VecDeque;
use std::time::Instant;

use ironlun_proto::chap::RANDOM_BYTES;
use ironlun_proto::initiator::{
    Completed, InitiatorLogin, InitiatorSession, LoginProgress, Refused, ScsiRequest, SessionEvent,
    SubmitError, TaskError,
};
use ironlun_proto::login::LOGIN_SEGMENT_MAX;
use ironlun_proto::OutPdu;
use ironlun_wire::{AsyncEvent, Digests, Frame, FrameDecoder, LogoutReason, WireError};

use crate::config::{CoreConfig, LOGOUT_WAIT};
use crate::event::{End, Event, LoginFailure, Phase};
use crate::request::Request;

/// The tasks on a connection: the callers', and the session's own.
#[derive(Debug)]
pub(crate) enum Tok<T> {
    User(T),
    /// A logout the core sends itself: the target asked for it, or the
    /// session is being closed.
    Logout,
}

/// The connection the session is on, or why it is on none. The session
/// is inline, not boxed: it is the state every command goes through, and
/// there is one `Link` per session.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Link<T> {
    Up(InitiatorSession<Tok<T>>),
    /// Back-off before the next connection.
    Waiting {
        at: Instant,
    },
    Connecting {
        deadline: Instant,
    },
    LoggingIn {
        login: Box<InitiatorLogin>,
        deadline: Instant,
    },
    Ended,
}

/// Where a logout on the current connection stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Logout {
    None,
    /// The target asked for one (RFC 7143 §11.9.1): it goes out once the
    /// tasks in flight have ended, and at `by` at the latest.
    Requested {
        by: Instant,
    },
    /// Sent: the connection closes at its response, or at `deadline`.
    Sent {
        deadline: Instant,
    },
}

/// One initiator session, from its first connection to its end, without
/// IO. `T` is the caller's token for each request, handed back with its
/// completion (or with the command, [`poll_orphan`](Self::poll_orphan)).
///
/// Every request handed in comes out exactly once, through
/// `poll_completion` or `poll_orphan`, whether the session took it or
/// not.
#[derive(Debug)]
pub struct InitiatorCore<T> {
    pub(crate) cfg: CoreConfig,
    pub(crate) link: Link<T>,
    pub(crate) logout: Logout,
    /// The session ends when the current connection does (our own
    /// logout, or the driver closing it), with this reason.
    pub(crate) closing: Option<End>,
    pub(crate) logged_in_once: bool,
    /// Reconnection attempts since the connection was lost.
    pub(crate) attempts: u32,
    /// Why the last connection ended; what commands fail with at the end.
    pub(crate) lost_why: String,
    /// SCSI commands taken back from a lost connection, for the next.
    pub(crate) held: Vec<(ScsiRequest, T)>,
    /// Commands are handed back rather than failed (the session gave up
    /// with failover on).
    pub(crate) orphaning: bool,
    pub(crate) decoder: FrameDecoder,
    /// Login PDUs; full feature phase PDUs come straight from the session.
    pub(crate) transmit: VecDeque<OutPdu>,
    pub(crate) done: VecDeque<Completed<T>>,
    pub(crate) orphans: VecDeque<(ScsiRequest, T)>,
    pub(crate) events: VecDeque<Event>,
}

/// How Login Responses are framed: no digests, the login's segment limit.
pub(crate) fn login_decoder() -> FrameDecoder {
    FrameDecoder::new(LOGIN_SEGMENT_MAX as u32)
}

impl<T> InitiatorCore<T> {
    /// A session that asks for its first connection at once
    /// ([`Event::Connect`]).
    pub fn new(cfg: CoreConfig, now: Instant) -> Self {
        let deadline = now + cfg.login_timeout;
        InitiatorCore {
            cfg,
            link: Link::Connecting { deadline },
            logout: Logout::None,
            closing: None,
            logged_in_once: false,
            attempts: 0,
            lost_why: String::new(),
            held: Vec::new(),
            orphaning: false,
            decoder: login_decoder(),
            transmit: VecDeque::new(),
            done: VecDeque::new(),
            orphans: VecDeque::new(),
            events: VecDeque::from([Event::Connect]),
        }
    }

    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    pub fn phase(&self) -> Phase {
        match self.link {
            Link::Up(_) => Phase::FullFeature,
            Link::Waiting { .. } => Phase::Waiting,
            Link::Connecting { .. } => Phase::Connecting,
            Link::LoggingIn { .. } => Phase::LoggingIn,
            Link::Ended => Phase::Ended,
        }
    }

    pub fn is_ended(&self) -> bool {
        matches!(self.link, Link::Ended)
    }

    /// Whether the connection the driver holds is still the core's (it
    /// is logging in or in full feature phase on it). A driver stops
    /// reading one the core has left; [`Event::Disconnect`] says to
    /// close it.
    pub fn uses_connection(&self) -> bool {
        matches!(self.link, Link::Up(_) | Link::LoggingIn { .. })
    }

    /// How what the target sends is framed now (the login's limits, then
    /// the negotiated digests and MaxRecvDataSegmentLength).
    pub fn decoder(&self) -> &FrameDecoder {
        &self.decoder
    }

    /// The digests of the PDUs [`poll_transmit`](Self::poll_transmit)
    /// returns now.
    pub fn digests(&self) -> Digests {
        self.decoder.digests
    }

    /// Whether [`handle_request`](Self::handle_request) takes a request
    /// now: in full feature phase, with a free task tag, and no logout
    /// on its way. A driver holds its callers' requests otherwise.
    pub fn accepts_requests(&self) -> bool {
        match &self.link {
            Link::Up(s) => {
                s.has_capacity() && self.logout == Logout::None && self.closing.is_none()
            }
            _ => false,
        }
    }

    /// Task tags the current connection holds.
    pub fn tasks_in_use(&self) -> usize {
        match &self.link {
            Link::Up(s) => s.tasks_in_use(),
            _ => 0,
        }
    }

    /// SCSI commands taken back from a lost connection, waiting for the
    /// next login.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The next PDU to write, in order.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<OutPdu> {
        if let Some(p) = self.transmit.pop_front() {
            return Some(p);
        }
        match &mut self.link {
            Link::Up(s) => s.poll_transmit(),
            _ => None,
        }
    }

    /// A finished request, with its token.
    #[must_use]
    pub fn poll_completion(&mut self) -> Option<Completed<T>> {
        if let Some(c) = self.done.pop_front() {
            return Some(c);
        }
        // Straight from the session: what the core acts on has come as
        // an event already (settle), so completions need no second queue.
        let Link::Up(s) = &mut self.link else {
            return None;
        };
        loop {
            let Completed { token, result } = s.poll_completion()?;
            if let Tok::User(token) = token {
                return Some(Completed { token, result });
            }
        }
    }

    /// A SCSI command handed back unfinished, for another path: with
    /// [`CoreConfig::failover`] once reconnection gave up, and those
    /// [`hand_back_held`](Self::hand_back_held) gives back.
    #[must_use]
    pub fn poll_orphan(&mut self) -> Option<(ScsiRequest, T)> {
        self.orphans.pop_front()
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) wants to run next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.link {
            Link::Up(s) => {
                let own = match self.logout {
                    Logout::None => None,
                    Logout::Requested { by } => Some(by),
                    Logout::Sent { deadline } => Some(deadline),
                };
                match (s.poll_timeout(), own) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
            Link::Waiting { at } => Some(*at),
            Link::Connecting { deadline } | Link::LoggingIn { deadline, .. } => Some(*deadline),
            Link::Ended => None,
        }
    }

    /// The connection asked for by [`Event::Connect`] is open: the login
    /// begins. `nonce` must be unpredictable (from the OS): with mutual
    /// CHAP it becomes our challenge to the target.
    pub fn handle_connected(&mut self, nonce: [u8; RANDOM_BYTES]) {
        let Link::Connecting { deadline } = self.link else {
            return;
        };
        let mut login = InitiatorLogin::new(self.cfg.login.clone(), nonce);
        self.transmit.push_back(login.start());
        self.decoder = login_decoder();
        self.link = Link::LoggingIn {
            login: Box::new(login),
            deadline,
        };
    }

    /// One whole PDU from the target, framed with [`decoder`](Self::decoder).
    pub fn handle_frame(&mut self, frame: Frame, now: Instant) {
        match &mut self.link {
            Link::Up(s) => {
                if let Err(e) = s.handle_frame(frame, now) {
                    // The connection cannot go on (RFC 7143 §7.8).
                    return self.lose(format!("undecodable PDU from the target: {e}"), now);
                }
                self.settle(now);
            }
            Link::LoggingIn { login, .. } => match login.handle_frame(&frame) {
                Ok(LoginProgress::Send(p)) => self.transmit.push_back(p),
                Ok(LoginProgress::Done(outcome)) => self.logged_in(outcome, now),
                Err(e) => self.login_failed(LoginFailure::Login(e), now),
            },
            // Bytes of a connection already given up.
            _ => {}
        }
    }

    /// What the target sent did not frame: a digest error or an
    /// oversize segment. At ErrorRecoveryLevel 0 the connection cannot
    /// recover (RFC 7143 §7.8).
    pub fn handle_frame_error(&mut self, err: &WireError, now: Instant) {
        match self.link {
            Link::Up(_) => self.lose(format!("bad PDU from the target: {err}"), now),
            Link::LoggingIn { .. } => {
                self.login_failed(LoginFailure::Malformed(err.to_string()), now)
            }
            _ => {}
        }
    }

    /// The connection could not be opened, or it closed or failed; `why`
    /// in the driver's words. Ignored when the core has no connection
    /// (it gave that one up already).
    pub fn handle_connection_lost(&mut self, why: String, now: Instant) {
        match self.link {
            Link::Up(_) => self.lose(why, now),
            Link::Connecting { .. } | Link::LoggingIn { .. } => {
                self.login_failed(LoginFailure::Connection(why), now)
            }
            Link::Waiting { .. } | Link::Ended => {}
        }
    }

    /// Time passed: keep-alive, the login's and the logout's deadlines,
    /// the end of a back-off. Early calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        match &mut self.link {
            Link::Up(s) => {
                s.handle_timeout(now);
                self.settle(now);
                self.logout_overdue(now);
            }
            Link::Waiting { at } if *at <= now => {
                self.link = Link::Connecting {
                    deadline: now + self.cfg.login_timeout,
                };
                self.events.push_back(Event::Connect);
            }
            Link::Connecting { deadline } | Link::LoggingIn { deadline, .. }
                if *deadline <= now =>
            {
                self.login_failed(LoginFailure::Timeout(self.cfg.login_timeout), now)
            }
            _ => {}
        }
    }

    /// A caller's request. Returns the task tag it went out with, or why
    /// it was refused; either way its completion (or, for a SCSI command
    /// when the session has given up with failover on, the command
    /// itself) comes out of a poll.
    pub fn handle_request(
        &mut self,
        request: Request,
        token: T,
        now: Instant,
    ) -> Result<u32, SubmitError> {
        let Link::Up(s) = &mut self.link else {
            return self.refuse_offline(request, token);
        };
        if self.logout != Logout::None || self.closing.is_some() {
            return self.during_logout(request, token, now);
        }
        let token = Tok::User(token);
        let result = match request {
            Request::Scsi(req) => s.submit(req, token),
            Request::Text(pairs) => {
                let refs: Vec<(&str, &str)> = pairs
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                s.submit_text(&refs, token)
            }
            Request::TaskMgmt {
                function,
                lun,
                referenced_itt,
            } => s.submit_task_mgmt(function, lun, referenced_itt, token),
            Request::Ping => s.submit_ping(token),
            Request::Logout => s
                .submit_logout(LogoutReason::CLOSE_SESSION, 0, token)
                .inspect(|_| {
                    self.closing = Some(End::LoggedOut);
                    self.logout = Logout::Sent {
                        deadline: now + LOGOUT_WAIT,
                    };
                }),
        };
        match result {
            Ok(itt) => Ok(itt),
            Err(Refused {
                error,
                token: Tok::User(t),
            }) => self.refuse(error, t),
            Err(Refused { error, .. }) => Err(error),
        }
    }

    /// The driver closes the session (every handle of it is gone): it
    /// logs out, and ends at the Logout Response or [`LOGOUT_WAIT`]
    /// later; without a connection it ends at once.
    pub fn handle_close(&mut self, now: Instant) {
        if self.closing.is_some() {
            return;
        }
        self.closing = Some(End::Closed);
        match &mut self.link {
            Link::Up(s) => {
                if matches!(self.logout, Logout::Sent { .. }) {
                    return; // the target's logout is on its way
                }
                match s.submit_logout(LogoutReason::CLOSE_SESSION, 0, Tok::Logout) {
                    Ok(_) => {
                        self.logout = Logout::Sent {
                            deadline: now + LOGOUT_WAIT,
                        }
                    }
                    Err(_) => self.lose("the session was closed".into(), now),
                }
            }
            Link::Ended => {}
            Link::Connecting { .. } | Link::LoggingIn { .. } | Link::Waiting { .. } => {
                if !matches!(self.link, Link::Waiting { .. }) {
                    self.events.push_back(Event::Disconnect);
                }
                self.lost_why = "the session was closed".into();
                self.end(End::Closed);
            }
        }
    }

    /// A request while a logout is under way: nothing new is taken, but
    /// a caller's Logout is the one sent if the target's is still
    /// waiting, and otherwise ends the session after the one on its way
    /// (the caller asked for the end, not for a new login).
    fn during_logout(
        &mut self,
        request: Request,
        token: T,
        now: Instant,
    ) -> Result<u32, SubmitError> {
        let is_logout = matches!(request, Request::Logout);
        if is_logout && self.closing.is_none() {
            if matches!(self.logout, Logout::Requested { .. }) {
                self.logout = Logout::None;
                return self.handle_request(request, token, now);
            }
            self.closing = Some(End::LoggedOut);
        }
        self.refuse(SubmitError::LoggingOut, token)
    }

    fn refuse(&mut self, error: SubmitError, token: T) -> Result<u32, SubmitError> {
        self.done.push_back(Completed {
            token,
            result: Err(TaskError::Refused(error.clone())),
        });
        Err(error)
    }

    /// A request with no connection to take it: after the end, a SCSI
    /// command goes where the session's commands went; anything else is
    /// refused.
    fn refuse_offline(&mut self, request: Request, token: T) -> Result<u32, SubmitError> {
        let why = match self.link {
            Link::Ended => format!("the session has ended: {}", self.lost_why),
            _ => "the session is not logged in".to_owned(),
        };
        match request {
            Request::Scsi(req) if self.is_ended() => {
                self.dispose(req, token);
                Err(SubmitError::Failed(why))
            }
            _ => self.refuse(SubmitError::Failed(why), token),
        }
    }

    /// Acts on what the protocol reported for an input, and passes on
    /// what is for the driver (completions it takes straight from the
    /// session, `poll_completion`).
    pub(crate) fn settle(&mut self, now: Instant) {
        let Link::Up(s) = &mut self.link else {
            return;
        };
        let mut logged_out = None;
        let mut failed = None;
        let mut requested = None;
        while let Some(e) = s.poll_event() {
            match e {
                SessionEvent::LoggedOut { response } => logged_out = Some(response),
                SessionEvent::Failed(why) => failed = Some(why),
                SessionEvent::UnitAttention { lun, sense } => {
                    self.events.push_back(Event::UnitAttention { lun, sense })
                }
                SessionEvent::Async {
                    event,
                    parameters,
                    data,
                } => {
                    match event {
                        // RFC 7143 §11.9.1: Parameter3 is the time the
                        // target gives us to log out.
                        AsyncEvent::LOGOUT_REQUEST => requested = Some(parameters[2]),
                        AsyncEvent::CONNECTION_DROP | AsyncEvent::SESSION_DROP
                            if failed.is_none() =>
                        {
                            failed = Some(format!(
                                "target asynchronous event {event} ({}, parameters {parameters:?})",
                                event.0
                            ));
                        }
                        _ => {}
                    }
                    self.events.push_back(Event::Async {
                        event,
                        parameters,
                        data,
                    });
                }
            }
        }
        if let Some(response) = logged_out {
            return self.logged_out(response, now);
        }
        if let Some(why) = failed {
            return self.lose(why, now);
        }
        if let Some(secs) = requested {
            self.logout_requested(secs, now);
        }
        self.send_requested_logout(now);
    }
}
