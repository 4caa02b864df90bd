//! An iSCSI session: the handles callers hold, and what it is opened
//! with.
//!
//! # Runtime model
//! [`Session::connect`] spawns one tokio task per session (the driver,
//! `driver.rs`), which owns the socket and the session's sans-IO core
//! (ironlun-initiator-core's `InitiatorCore`: logins, logouts, the
//! target's asynchronous events, taking commands back and reconnecting),
//! and returns once the first login has completed. Callers talk to the
//! task through a bounded channel; each request carries a [`Responder`]
//! (a oneshot for one-off calls, or a shared stream channel that load
//! generators drain in batches, so a completion costs no extra wakeup).
//!
//! If the connection drops, the core logs in again with the same ISID
//! (session reinstatement, RFC 7143 §6.3.5) with a bounded exponential
//! back-off and re-issues the commands that had not completed; after the
//! last attempt they go to a failover channel (multipath) or fail.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ironlun_initiator_core::alua::AluaSignal;
use ironlun_initiator_core::Request;
use ironlun_proto::chap::InitiatorAuth;
use ironlun_proto::initiator::{
    default_isid, Reply, ScsiReply, ScsiRequest, SessionLimits, TaskError,
};
use ironlun_proto::params::{ConnParams, Offers, SessionParams};
use ironlun_wire::{LogoutResult, Lun, TmfFunction, TmfResponse};
use tokio::sync::{mpsc, oneshot};

pub use ironlun_initiator_core::ReconnectPolicy;

use crate::driver::Driver;
use crate::error::{Error, Result};

/// Requests queued to a session's task before callers wait.
const REQUEST_QUEUE: usize = 1024;

/// Socket settings of a connection (the "TCP window" of the studies is
/// the buffer sizes).
#[derive(Clone, Debug)]
pub struct TcpOptions {
    pub nodelay: bool,
    pub send_buffer: Option<u32>,
    pub recv_buffer: Option<u32>,
    /// Re-arm TCP_QUICKACK after every read: ACK at once (Linux).
    pub quickack: bool,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            nodelay: true,
            send_buffer: None,
            recv_buffer: None,
            quickack: false,
        }
    }
}

/// Everything a session is opened with.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    pub initiator_name: String,
    pub initiator_alias: Option<String>,
    /// Operational keys offered (RFC 7143 §13).
    pub offers: Offers,
    pub limits: SessionLimits,
    pub tcp: TcpOptions,
    pub login_timeout: Duration,
    pub reconnect: ReconnectPolicy,
    /// Session identifier; sessions of one initiator to one target need
    /// different ISIDs ([`crate::isid_for`] numbers them).
    pub isid: [u8; 6],
    /// CHAP credentials (and the target's, for mutual CHAP); `None` logs
    /// in without authentication.
    pub auth: Option<InitiatorAuth>,
}

/// ironlun's default initiator name.
pub const DEFAULT_INITIATOR_NAME: &str = "iqn.2026-11.org.ironlun:initiator";

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            initiator_name: DEFAULT_INITIATOR_NAME.to_owned(),
            initiator_alias: None,
            offers: Offers::default(),
            // Unit attentions (power on, nexus loss after a reconnect) are
            // absorbed by retrying, as the Linux SCSI layer does; tools
            // that must see them set 0.
            limits: SessionLimits {
                unit_attention_retries: 3,
                ..SessionLimits::default()
            },
            tcp: TcpOptions::default(),
            login_timeout: Duration::from_secs(10),
            reconnect: ReconnectPolicy::default(),
            isid: default_isid(std::process::id()),
            auth: None,
        }
    }
}

/// Where a command's outcome goes.
#[derive(Debug)]
pub enum Responder {
    Once(oneshot::Sender<Result<ScsiReply>>),
    /// A shared channel: the tag tells the receiver which command ended.
    Stream {
        tx: mpsc::UnboundedSender<(u64, Result<ScsiReply>)>,
        tag: u64,
    },
}

impl Responder {
    /// Ends the command with an error.
    pub fn send_error(self, e: Error) {
        self.send(Err(e));
    }

    pub(crate) fn send(self, r: Result<ScsiReply>) {
        match self {
            Responder::Once(tx) => {
                let _ = tx.send(r);
            }
            Responder::Stream { tx, tag } => {
                let _ = tx.send((tag, r));
            }
        }
    }
}

/// A SCSI command with the place its outcome goes.
#[derive(Debug)]
pub struct Orphan {
    pub request: ScsiRequest,
    pub responder: Responder,
}

/// What a multipath session tells its multipath (`multipath/`).
#[derive(Debug)]
pub(crate) enum PathNote {
    /// A command the path gave back (lost connection, or retired) or
    /// that waits for a path.
    Orphan(Orphan),
    /// A command path `path` refused for its asymmetric access state
    /// (SPC-5 §5.16.2.4): sent again elsewhere, or answered with `reply`
    /// if no path takes it in time.
    Bounced {
        path: usize,
        orphan: Orphan,
        signal: AluaSignal,
        reply: ScsiReply,
    },
    /// Path `path` reported an asymmetric access change in a unit
    /// attention it retried itself.
    Signal { path: usize, signal: AluaSignal },
}

/// How a session of a multipath reports to it.
#[derive(Clone, Debug)]
pub(crate) struct PathHook {
    pub(crate) tx: mpsc::UnboundedSender<PathNote>,
    /// The session's index among the multipath's paths.
    pub(crate) index: usize,
}

/// Where the outcome of each kind of request goes: the core's token.
#[derive(Debug)]
pub(crate) enum Token {
    Scsi(Responder),
    /// A multipath command kept whole, so that it can go to another path
    /// if this one refuses it for its ALUA state.
    Routed(Box<ScsiRequest>, Responder),
    Text(oneshot::Sender<Result<Vec<(String, String)>>>),
    TaskMgmt(oneshot::Sender<Result<TmfResponse>>),
    Logout(oneshot::Sender<Result<LogoutResult>>),
}

/// A caller's request on its way to the session's task.
pub(crate) type Queued = (Request, Token);

/// Takes the reply of one kind, or gives the reply back.
macro_rules! want {
    ($kind:path) => {
        |r| match r {
            $kind(v) => Ok(v),
            other => Err(other),
        }
    };
}

impl Token {
    /// Hands a finished request's outcome to its caller.
    pub(crate) fn answer(self, result: Result<Reply, TaskError>, shared: Option<&Shared>) {
        match self {
            Token::Scsi(r) | Token::Routed(_, r) => {
                if let Some(s) = shared {
                    s.in_flight.fetch_sub(1, Ordering::Relaxed);
                }
                r.send(pick(result, want!(Reply::Scsi)));
            }
            Token::Text(tx) => {
                let _ = tx.send(pick(result, want!(Reply::Text)));
            }
            Token::TaskMgmt(tx) => {
                let _ = tx.send(pick(result, want!(Reply::TaskMgmt)));
            }
            Token::Logout(tx) => {
                let _ = tx.send(pick(result, want!(Reply::Logout)));
            }
        }
    }
}

/// The reply a request asked for, or why there is none.
fn pick<V>(
    result: Result<Reply, TaskError>,
    want: impl FnOnce(Reply) -> Result<V, Reply>,
) -> Result<V> {
    match result {
        Ok(r) => want(r).map_err(|other| Error::Malformed(format!("unexpected reply {other:?}"))),
        Err(e) => Err(Error::Task(e)),
    }
}

/// What a login established, for display and for tools.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    pub portal: String,
    pub peer: SocketAddr,
    pub target: Option<String>,
    pub tsih: u16,
    pub session: SessionParams,
    pub conn: ConnParams,
    /// Negotiated keys as `Key=Value` text.
    pub summary: String,
}

/// What the handles and the session's task share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) info: SessionInfo,
    /// Commands submitted and not yet answered (for least-queue-depth).
    pub(crate) in_flight: AtomicUsize,
    /// False once the session has ended for good.
    pub(crate) alive: AtomicBool,
    /// False while the connection is down and being re-established.
    pub(crate) connected: AtomicBool,
}

/// A handle to a logged-in session. Cheap to clone; when the last clone
/// is dropped the session logs out.
#[derive(Clone, Debug)]
pub struct Session {
    tx: mpsc::Sender<Queued>,
    shared: Arc<Shared>,
}

impl Session {
    /// Connects to `portal` (`host:port`) and logs in to `target`, or to a
    /// discovery session when `target` is `None`.
    pub async fn connect(
        portal: &str,
        target: Option<&str>,
        opts: &SessionOptions,
    ) -> Result<Self> {
        Self::connect_with_failover(portal, target, opts, None).await
    }

    /// As [`Session::connect`], as path `hook.index` of a multipath:
    /// commands taken back from a lost connection, or left when
    /// reconnection gives up, go to the multipath instead of waiting or
    /// failing, and so does what the path learns of ALUA.
    pub(crate) async fn connect_with_failover(
        portal: &str,
        target: Option<&str>,
        opts: &SessionOptions,
        failover: Option<PathHook>,
    ) -> Result<Self> {
        let (tx, rx) = mpsc::channel(REQUEST_QUEUE);
        let (ready, logged_in) = oneshot::channel();
        let driver = Driver::new(portal, target, opts, rx, failover, ready);
        tokio::spawn(driver.run());
        let shared = logged_in.await.map_err(|_| Error::Closed)??;
        Ok(Session { tx, shared })
    }

    pub fn info(&self) -> &SessionInfo {
        &self.shared.info
    }

    /// Commands sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::Relaxed)
    }

    /// False once the session's connection is gone for good.
    pub fn is_alive(&self) -> bool {
        self.shared.alive.load(Ordering::Relaxed) && !self.tx.is_closed()
    }

    /// True while the connection is up (not between a failure and a
    /// reconnect).
    pub fn is_connected(&self) -> bool {
        self.is_alive() && self.shared.connected.load(Ordering::Relaxed)
    }

    /// A handle that does not keep the session open.
    #[must_use = "this returns a new WeakSession and leaves the session as it is"]
    pub fn downgrade(&self) -> WeakSession {
        WeakSession {
            tx: self.tx.downgrade(),
            shared: self.shared.clone(),
        }
    }

    /// Runs one SCSI command and returns its reply, whatever its status.
    pub async fn execute(&self, req: ScsiRequest) -> Result<ScsiReply> {
        let (tx, rx) = oneshot::channel();
        self.submit(req, Responder::Once(tx)).await?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// Queues a command; its outcome goes to `responder`. Waits only while
    /// the request queue is full.
    pub async fn submit(&self, req: ScsiRequest, responder: Responder) -> Result<()> {
        self.shared.in_flight.fetch_add(1, Ordering::Relaxed);
        self.tx
            .send((Request::Scsi(req), Token::Scsi(responder)))
            .await
            .map_err(|e| {
                self.shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                if let (_, Token::Scsi(r)) = e.0 {
                    r.send(Err(Error::Closed));
                }
                Error::Closed
            })
    }

    /// Queues a multipath command kept whole ([`Token::Routed`]).
    pub(crate) async fn submit_routed(&self, req: ScsiRequest, responder: Responder) -> Result<()> {
        self.shared.in_flight.fetch_add(1, Ordering::Relaxed);
        let queued = (
            Request::Scsi(req.clone()),
            Token::Routed(Box::new(req), responder),
        );
        self.tx.send(queued).await.map_err(|e| {
            self.shared.in_flight.fetch_sub(1, Ordering::Relaxed);
            if let (_, Token::Routed(_, r)) = e.0 {
                r.send(Err(Error::Closed));
            }
            Error::Closed
        })
    }

    /// Re-queues a command that another path gave back; kept whole
    /// ([`Token::Routed`]) when `routed`.
    pub(crate) fn try_resubmit(&self, o: Orphan, routed: bool) -> std::result::Result<(), Orphan> {
        self.shared.in_flight.fetch_add(1, Ordering::Relaxed);
        let token = if routed {
            Token::Routed(Box::new(o.request.clone()), o.responder)
        } else {
            Token::Scsi(o.responder)
        };
        match self.tx.try_send((Request::Scsi(o.request), token)) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                let (mpsc::error::TrySendError::Full(q) | mpsc::error::TrySendError::Closed(q)) = e;
                match q {
                    (
                        Request::Scsi(request),
                        Token::Scsi(responder) | Token::Routed(_, responder),
                    ) => Err(Orphan { request, responder }),
                    _ => Ok(()),
                }
            }
        }
    }

    /// Sends a request that answers through a oneshot and waits for it.
    async fn ask<V>(
        &self,
        request: Request,
        token: impl FnOnce(oneshot::Sender<Result<V>>) -> Token,
    ) -> Result<V> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send((request, token(tx)))
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// A text exchange (RFC 7143 §11.10), e.g. `SendTargets=All`.
    pub async fn text(&self, pairs: &[(&str, &str)]) -> Result<Vec<(String, String)>> {
        let pairs = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.ask(Request::Text(pairs), Token::Text).await
    }

    /// A task management function (RFC 7143 §11.5); returns its response
    /// (RFC 7143 §11.6.1).
    pub async fn task_mgmt(
        &self,
        function: TmfFunction,
        lun: u16,
        referenced_itt: u32,
    ) -> Result<TmfResponse> {
        let request = Request::TaskMgmt {
            function,
            lun: Lun::from_index(lun),
            referenced_itt,
        };
        self.ask(request, Token::TaskMgmt).await
    }

    /// Logs the session out (RFC 7143 §11.14) and ends its task.
    pub async fn logout(&self) -> Result<()> {
        match self.ask(Request::Logout, Token::Logout).await? {
            LogoutResult::CLOSED => Ok(()),
            code => Err(Error::Malformed(format!(
                "logout answered with response {} ({code}, RFC 7143 §11.15.1)",
                code.0
            ))),
        }
    }
}

/// A [`Session`] reference that lets the session log out when every
/// strong handle is dropped.
#[derive(Clone, Debug)]
pub struct WeakSession {
    tx: mpsc::WeakSender<Queued>,
    shared: Arc<Shared>,
}

impl WeakSession {
    /// A strong handle, unless the session has ended.
    #[must_use = "the session stays open only while the returned handle lives"]
    pub fn upgrade(&self) -> Option<Session> {
        Some(Session {
            tx: self.tx.upgrade()?,
            shared: self.shared.clone(),
        })
    }
}
