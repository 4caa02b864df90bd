//! An iSCSI session over one TCP connection, driven by one tokio task.
//!
//! # Runtime model
//! [`Session::connect`] logs in, then spawns a task that owns the socket
//! and the sans-IO [`InitiatorSession`]. Callers talk to it through a
//! bounded channel; each request carries a [`Responder`] (a oneshot for
//! one-off calls, or a shared stream channel that load generators drain in
//! batches, so a completion costs no extra wakeup). The task reads and
//! writes with non-blocking calls on readiness, batching every queued PDU
//! into one vectored write, so requests submitted together leave in one
//! system call.
//!
//! If the connection drops, the task logs in again with the same ISID
//! (session reinstatement, RFC 7143 §6.3.5) with a bounded exponential
//! back-off and re-issues the commands that had not completed; after the
//! last attempt it hands them to a failover channel (multipath) or fails
//! them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ironlun_net::{read_marking_drained, Read};
use ironlun_proto::chap::{InitiatorAuth, RANDOM_BYTES};
use ironlun_proto::initiator::{
    default_isid, Completed, InitiatorLogin, InitiatorSession, LoginConfig, LoginOutcome,
    LoginProgress, Reply, ScsiReply, ScsiRequest, SessionEvent, SessionLimits, TaskError,
};
use ironlun_proto::login::LOGIN_SEGMENT_MAX;
use ironlun_proto::params::{ConnParams, Offers, SessionParams};
use ironlun_proto::timer::TimerSlot;
use ironlun_proto::OutPdu;
use ironlun_scsi_codes::SenseCode;
use ironlun_wire::{AsyncEvent, Digests, FrameDecoder, Lun, Outbox, TmfFunction, TmfResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use crate::error::{Error, Result};

/// Requests queued to a session's task before callers wait.
const REQUEST_QUEUE: usize = 1024;
/// Socket reads per readiness wakeup before queued requests get a turn.
const READS_PER_WAKEUP: usize = 8;
/// Stop taking requests while this many bytes wait to be written.
const OUT_HIGH_WATER: usize = 8 << 20;
/// How long a logout may take before the socket is simply closed.
const LOGOUT_WAIT: Duration = Duration::from_secs(5);

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

/// Reconnection after a dropped connection: attempts with exponential
/// back-off from `first_delay`, capped at `max_delay`.
#[derive(Clone, Debug)]
pub struct ReconnectPolicy {
    /// 0 disables reconnection.
    pub attempts: u32,
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            attempts: 5,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
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

    fn send(self, r: Result<ScsiReply>) {
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

#[derive(Debug)]
enum Request {
    Scsi(ScsiRequest, Responder),
    Text(
        Vec<(String, String)>,
        oneshot::Sender<Result<Vec<(String, String)>>>,
    ),
    TaskMgmt {
        function: TmfFunction,
        lun: Lun,
        referenced_itt: u32,
        reply: oneshot::Sender<Result<TmfResponse>>,
    },
    Logout(oneshot::Sender<Result<u8>>),
}

#[derive(Debug)]
enum Token {
    Scsi(Responder),
    Text(oneshot::Sender<Result<Vec<(String, String)>>>),
    TaskMgmt(oneshot::Sender<Result<TmfResponse>>),
    Logout(oneshot::Sender<Result<u8>>),
    /// Our own logout when every handle was dropped.
    QuietLogout,
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

#[derive(Debug)]
struct Shared {
    info: SessionInfo,
    /// Commands submitted and not yet answered (for least-queue-depth).
    in_flight: AtomicUsize,
    /// False once the session has ended for good.
    alive: AtomicBool,
    /// False while the connection is down and being re-established.
    connected: AtomicBool,
}

/// A handle to a logged-in session. Cheap to clone; when the last clone
/// is dropped the session logs out.
#[derive(Clone, Debug)]
pub struct Session {
    tx: mpsc::Sender<Request>,
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

    /// As [`Session::connect`]; commands left when reconnection gives up go
    /// to `failover` instead of failing.
    pub async fn connect_with_failover(
        portal: &str,
        target: Option<&str>,
        opts: &SessionOptions,
        failover: Option<mpsc::UnboundedSender<Orphan>>,
    ) -> Result<Self> {
        let cfg = login_config(target, opts);
        let (stream, rbuf, outcome, peer) = login(portal, &cfg, opts).await?;
        let info = SessionInfo {
            portal: portal.to_owned(),
            peer,
            target: target.map(str::to_owned),
            tsih: outcome.tsih,
            session: outcome.session.clone(),
            conn: outcome.conn.clone(),
            summary: outcome.summary.clone(),
        };
        debug!(
            portal,
            tsih = outcome.tsih,
            "logged in: {}",
            outcome.summary
        );
        let shared = Arc::new(Shared {
            info,
            in_flight: AtomicUsize::new(0),
            alive: AtomicBool::new(true),
            connected: AtomicBool::new(true),
        });
        let (tx, rx) = mpsc::channel(REQUEST_QUEUE);
        let conn = Conn::new(
            stream,
            rbuf,
            &outcome,
            opts.limits.clone(),
            opts.tcp.quickack,
        );
        let task = Task {
            portal: portal.to_owned(),
            cfg,
            opts: opts.clone(),
            rx,
            failover,
            shared: shared.clone(),
        };
        tokio::spawn(task.run(conn));
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
            .send(Request::Scsi(req, responder))
            .await
            .map_err(|e| {
                self.shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                if let Request::Scsi(_, r) = e.0 {
                    r.send(Err(Error::Closed));
                }
                Error::Closed
            })
    }

    /// Re-queues a command that another path gave back.
    pub(crate) fn try_resubmit(&self, o: Orphan) -> std::result::Result<(), Orphan> {
        self.shared.in_flight.fetch_add(1, Ordering::Relaxed);
        match self.tx.try_send(Request::Scsi(o.request, o.responder)) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                let (mpsc::error::TrySendError::Full(r) | mpsc::error::TrySendError::Closed(r)) = e;
                match r {
                    Request::Scsi(request, responder) => Err(Orphan { request, responder }),
                    _ => Ok(()),
                }
            }
        }
    }

    /// A text exchange (RFC 7143 §11.10), e.g. `SendTargets=All`.
    pub async fn text(&self, pairs: &[(&str, &str)]) -> Result<Vec<(String, String)>> {
        let (tx, rx) = oneshot::channel();
        let pairs = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.tx
            .send(Request::Text(pairs, tx))
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// A task management function (RFC 7143 §11.5); returns its response
    /// (RFC 7143 §11.6.1).
    pub async fn task_mgmt(
        &self,
        function: TmfFunction,
        lun: u16,
        referenced_itt: u32,
    ) -> Result<TmfResponse> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Request::TaskMgmt {
                function,
                lun: Lun::from_index(lun),
                referenced_itt,
                reply,
            })
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// Logs the session out (RFC 7143 §11.14) and ends its task.
    pub async fn logout(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Request::Logout(tx))
            .await
            .map_err(|_| Error::Closed)?;
        match rx.await.map_err(|_| Error::Closed)?? {
            0 => Ok(()),
            code => Err(Error::Malformed(format!(
                "logout answered with response {code} (RFC 7143 §11.15.1)"
            ))),
        }
    }
}

/// A [`Session`] reference that lets the session log out when every
/// strong handle is dropped.
#[derive(Clone, Debug)]
pub struct WeakSession {
    tx: mpsc::WeakSender<Request>,
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

fn login_config(target: Option<&str>, opts: &SessionOptions) -> LoginConfig {
    LoginConfig {
        initiator_name: opts.initiator_name.clone(),
        initiator_alias: opts.initiator_alias.clone(),
        target_name: target.map(str::to_owned),
        isid: opts.isid,
        tsih: 0,
        cid: 0,
        offers: opts.offers.clone(),
        initial_cmd_sn: 1,
        auth: opts.auth.clone(),
    }
}

async fn connect_tcp(portal: &str, tcp: &TcpOptions) -> Result<(TcpStream, SocketAddr)> {
    let addrs = tokio::net::lookup_host(portal)
        .await
        .map_err(|e| Error::io(format!("resolving {portal}"), e))?;
    let mut last = None;
    for addr in addrs {
        let sock = if addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }
        .map_err(|e| Error::io("creating a socket", e))?;
        // Buffer sizes must be set before connect to shape the window
        // scale the kernel advertises.
        if let Some(n) = tcp.send_buffer {
            sock.set_send_buffer_size(n)
                .map_err(|e| Error::io("setting SO_SNDBUF", e))?;
        }
        if let Some(n) = tcp.recv_buffer {
            sock.set_recv_buffer_size(n)
                .map_err(|e| Error::io("setting SO_RCVBUF", e))?;
        }
        match sock.connect(addr).await {
            Ok(s) => {
                s.set_nodelay(tcp.nodelay)
                    .map_err(|e| Error::io("setting TCP_NODELAY", e))?;
                return Ok((s, addr));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(Error::io(
        format!("connecting to {portal}"),
        last.unwrap_or_else(|| std::io::Error::other("no address")),
    ))
}

/// Connects and runs the login phase.
async fn login(
    portal: &str,
    cfg: &LoginConfig,
    opts: &SessionOptions,
) -> Result<(TcpStream, BytesMut, LoginOutcome, SocketAddr)> {
    let run = async {
        let (mut stream, peer) = connect_tcp(portal, &opts.tcp).await?;
        // Fresh for every login: a mutual CHAP challenge is never reused.
        let mut nonce = [0u8; RANDOM_BYTES];
        getrandom::getrandom(&mut nonce).map_err(|e| {
            Error::io(
                "drawing random bytes for CHAP",
                std::io::Error::other(e.to_string()),
            )
        })?;
        let mut login = InitiatorLogin::new(cfg.clone(), nonce);
        let decoder = FrameDecoder::new(LOGIN_SEGMENT_MAX as u32);
        let mut rbuf = BytesMut::with_capacity(64 << 10);
        let mut next = login.start();
        loop {
            send_plain(&mut stream, &next)
                .await
                .map_err(|e| Error::io(format!("login to {portal}"), e))?;
            let frame = loop {
                match decoder.decode(&mut rbuf) {
                    Ok(Some(f)) => break f,
                    Ok(None) => {}
                    Err(e) => return Err(Error::Malformed(format!("login response: {e}"))),
                }
                if rbuf.capacity() - rbuf.len() < 4096 {
                    rbuf.reserve(16 << 10);
                }
                let n = stream
                    .read_buf(&mut rbuf)
                    .await
                    .map_err(|e| Error::io(format!("login to {portal}"), e))?;
                if n == 0 {
                    return Err(Error::io(
                        format!("login to {portal}"),
                        std::io::ErrorKind::UnexpectedEof.into(),
                    ));
                }
            };
            match login.handle_frame(&frame) {
                Ok(LoginProgress::Send(p)) => next = p,
                Ok(LoginProgress::Done(outcome)) => return Ok((stream, rbuf, *outcome, peer)),
                Err(source) => {
                    return Err(Error::Login {
                        portal: portal.to_owned(),
                        source,
                    })
                }
            }
        }
    };
    match tokio::time::timeout(opts.login_timeout, run).await {
        Ok(r) => r,
        Err(_) => Err(Error::LoginTimeout {
            portal: portal.to_owned(),
            secs: opts.login_timeout.as_secs(),
        }),
    }
}

async fn send_plain(stream: &mut TcpStream, p: &OutPdu) -> std::io::Result<()> {
    let mut out = BytesMut::new();
    ironlun_wire::encode_frame(
        &p.pdu.encode(),
        &[],
        &p.data.to_bytes()?,
        Digests::default(),
        &mut out,
    )
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    stream.write_all(&out).await
}

/// One logged-in connection.
struct Conn {
    stream: TcpStream,
    rbuf: BytesMut,
    decoder: FrameDecoder,
    out: Outbox,
    proto: InitiatorSession<Token>,
    /// Re-arm TCP_QUICKACK after each read.
    quickack: bool,
}

impl Conn {
    fn new(
        stream: TcpStream,
        rbuf: BytesMut,
        outcome: &LoginOutcome,
        limits: SessionLimits,
        quickack: bool,
    ) -> Self {
        let digests = Digests {
            header: outcome.conn.header_digest,
            data: outcome.conn.data_digest,
        };
        let mut decoder = FrameDecoder::new(outcome.conn.max_recv_data_segment_length);
        decoder.digests = digests;
        Conn {
            stream,
            rbuf,
            decoder,
            out: Outbox::new(digests),
            proto: InitiatorSession::new(outcome, limits, Instant::now()),
            quickack,
        }
    }
}

/// How a connection's drive loop ended.
enum Exit {
    /// Logged out, or every handle dropped: the session is over.
    Done,
    /// The connection failed; the session may be reinstated.
    Failed(String),
}

struct Task {
    portal: String,
    cfg: LoginConfig,
    opts: SessionOptions,
    rx: mpsc::Receiver<Request>,
    failover: Option<mpsc::UnboundedSender<Orphan>>,
    shared: Arc<Shared>,
}

impl Task {
    async fn run(mut self, mut conn: Conn) {
        loop {
            let why = match self.drive(&mut conn).await {
                Exit::Done => break,
                Exit::Failed(why) => why,
            };
            let orphans = conn.proto.take_unfinished(&why);
            self.deliver(&mut conn);
            warn!(portal = %self.portal, "connection failed: {why}");
            self.shared.connected.store(false, Ordering::Relaxed);
            let reconnected = self.reconnect().await;
            self.shared
                .connected
                .store(reconnected.is_some(), Ordering::Relaxed);
            match reconnected {
                Some(new) => {
                    info!(portal = %self.portal, "session reinstated; re-issuing {} commands", orphans.len());
                    conn = new;
                    for (req, token) in orphans {
                        self.submit_scsi(&mut conn, req, token);
                    }
                }
                None => {
                    warn!(
                        portal = %self.portal,
                        "reconnection failed after {} attempts; {}",
                        self.opts.reconnect.attempts,
                        if self.failover.is_some() {
                            "path retired, its commands go to the other paths"
                        } else {
                            "session ended, its commands fail"
                        }
                    );
                    self.shared.alive.store(false, Ordering::Relaxed);
                    self.rx.close();
                    let mut orphans: Vec<(ScsiRequest, Token)> = orphans;
                    while let Ok(r) = self.rx.try_recv() {
                        if let Request::Scsi(req, responder) = r {
                            orphans.push((req, Token::Scsi(responder)));
                        }
                    }
                    for (request, token) in orphans {
                        self.shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                        let Token::Scsi(responder) = token else {
                            continue;
                        };
                        let orphan = Orphan { request, responder };
                        match &self.failover {
                            Some(f) => {
                                if let Err(e) = f.send(orphan) {
                                    e.0.responder.send(Err(Error::NoPath(why.clone())));
                                }
                            }
                            None => orphan
                                .responder
                                .send(Err(Error::Task(TaskError::ConnectionFailed(why.clone())))),
                        }
                    }
                    return;
                }
            }
        }
        self.shared.alive.store(false, Ordering::Relaxed);
    }

    async fn reconnect(&self) -> Option<Conn> {
        let policy = &self.opts.reconnect;
        let mut delay = policy.first_delay;
        for attempt in 1..=policy.attempts {
            tokio::time::sleep(delay).await;
            // Same ISID, TSIH 0: the target reinstates the session (RFC
            // 7143 §6.3.5), ending whatever of the old one it still holds.
            match login(&self.portal, &self.cfg, &self.opts).await {
                Ok((stream, rbuf, outcome, _)) => {
                    return Some(Conn::new(
                        stream,
                        rbuf,
                        &outcome,
                        self.opts.limits.clone(),
                        self.opts.tcp.quickack,
                    ))
                }
                Err(e) => {
                    debug!(portal = %self.portal, attempt, "reconnect failed: {e}");
                }
            }
            delay = (delay * 2).min(policy.max_delay);
        }
        None
    }

    fn submit_scsi(&self, conn: &mut Conn, req: ScsiRequest, token: Token) {
        if let Err(e) = conn.proto.submit(req, token) {
            // has_capacity() was checked; this is a failed connection, which
            // the drive loop reports next.
            debug!("submit refused: {e}");
        }
    }

    fn handle_request(&mut self, conn: &mut Conn, r: Request) {
        let result = match r {
            Request::Scsi(req, responder) => conn.proto.submit(req, Token::Scsi(responder)),
            Request::Text(pairs, reply) => {
                let refs: Vec<(&str, &str)> = pairs
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                conn.proto.submit_text(&refs, Token::Text(reply))
            }
            Request::TaskMgmt {
                function,
                lun,
                referenced_itt,
                reply,
            } => conn
                .proto
                .submit_task_mgmt(function, lun, referenced_itt, Token::TaskMgmt(reply)),
            Request::Logout(reply) => conn.proto.submit_logout(0, 0, Token::Logout(reply)),
        };
        if let Err(e) = result {
            debug!("request refused: {e}");
        }
    }

    /// Hands finished tasks to their callers. Returns true once a logout
    /// has completed.
    fn deliver(&self, conn: &mut Conn) -> bool {
        let mut logged_out = false;
        while let Some(Completed { token, result }) = conn.proto.poll_completion() {
            match token {
                Token::Scsi(r) => {
                    self.shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                    r.send(match result {
                        Ok(Reply::Scsi(s)) => Ok(s),
                        Ok(other) => Err(Error::Malformed(format!("unexpected reply {other:?}"))),
                        Err(e) => Err(Error::Task(e)),
                    });
                }
                Token::Text(tx) => {
                    let _ = tx.send(match result {
                        Ok(Reply::Text(p)) => Ok(p),
                        Ok(other) => Err(Error::Malformed(format!("unexpected reply {other:?}"))),
                        Err(e) => Err(Error::Task(e)),
                    });
                }
                Token::TaskMgmt(tx) => {
                    let _ = tx.send(match result {
                        Ok(Reply::TaskMgmt(c)) => Ok(c),
                        Ok(other) => Err(Error::Malformed(format!("unexpected reply {other:?}"))),
                        Err(e) => Err(Error::Task(e)),
                    });
                }
                Token::Logout(tx) => {
                    logged_out = true;
                    let _ = tx.send(match result {
                        Ok(Reply::Logout(c)) => Ok(c),
                        Ok(other) => Err(Error::Malformed(format!("unexpected reply {other:?}"))),
                        Err(e) => Err(Error::Task(e)),
                    });
                }
                Token::QuietLogout => logged_out = true,
            }
        }
        logged_out
    }

    async fn drive(&mut self, conn: &mut Conn) -> Exit {
        let mut closing: Option<tokio::time::Instant> = None;
        // One keep-alive timer, moved only when the protocol's deadline
        // comes nearer (ironlun_proto::timer).
        let keepalive = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(keepalive);
        let mut slot = TimerSlot::default();
        loop {
            if self.deliver(conn) {
                return Exit::Done;
            }
            while let Some(ev) = conn.proto.poll_event() {
                match ev {
                    SessionEvent::Failed(why) => return Exit::Failed(why),
                    SessionEvent::Async {
                        event, parameters, ..
                    } => match event {
                        // RFC 7143 §11.9.1: the target wants a logout, or
                        // drops the connection or the session.
                        AsyncEvent::LOGOUT_REQUEST
                        | AsyncEvent::CONNECTION_DROP
                        | AsyncEvent::SESSION_DROP => {
                            return Exit::Failed(format!(
                                "target asynchronous event {event} ({}, parameters {parameters:?})",
                                event.0
                            ))
                        }
                        _ => debug!(%event, "asynchronous message ignored"),
                    },
                    SessionEvent::UnitAttention { lun, sense } => {
                        let asc = SenseCode::parse(&sense).unwrap_or_default().asc_ascq();
                        info!(portal = %self.portal, lun = lun.index(), "unit attention ({asc}); command sent again");
                    }
                }
            }
            while let Some(p) = conn.proto.poll_transmit() {
                if let Err(e) = conn.out.push(&p.pdu, p.data) {
                    return Exit::Failed(format!("cannot encode a PDU: {e}"));
                }
            }
            if !conn.out.is_empty() {
                let stream = &conn.stream;
                if let Err(e) = conn.out.write_with(|iov| stream.try_write_vectored(iov)) {
                    return Exit::Failed(format!("write failed: {e}"));
                }
            }
            let interest = if conn.out.is_empty() {
                Interest::READABLE
            } else {
                Interest::READABLE | Interest::WRITABLE
            };
            if let Some(t) = slot.update(conn.proto.poll_timeout()) {
                keepalive.as_mut().reset(tokio::time::Instant::from_std(t));
            }
            let take_requests = closing.is_none()
                && conn.proto.has_capacity()
                && conn.out.queued_bytes() < OUT_HIGH_WATER;
            tokio::select! {
                biased;
                ready = conn.stream.ready(interest) => {
                    let ready = match ready {
                        Ok(r) => r,
                        Err(e) => return Exit::Failed(format!("socket error: {e}")),
                    };
                    if ready.is_readable() {
                        if let Err(why) = read_some(conn) {
                            // The target closes after answering a logout:
                            // that is the end, not a failure.
                            if self.deliver(conn) {
                                return Exit::Done;
                            }
                            return Exit::Failed(why);
                        }
                    }
                }
                r = self.rx.recv(), if take_requests => match r {
                    Some(r) => {
                        self.handle_request(conn, r);
                        // Take what else is queued, up to capacity, so it
                        // leaves in the same write.
                        while conn.proto.has_capacity() {
                            match self.rx.try_recv() {
                                Ok(r) => self.handle_request(conn, r),
                                Err(_) => break,
                            }
                        }
                    }
                    None => {
                        // Every handle is gone: log out quietly.
                        closing = Some(tokio::time::Instant::now() + LOGOUT_WAIT);
                        if conn.proto.submit_logout(0, 0, Token::QuietLogout).is_err() {
                            return Exit::Done;
                        }
                    }
                },
                _ = &mut keepalive, if slot.is_armed() => {
                    slot.fired();
                    conn.proto.handle_timeout(Instant::now());
                }
                _ = sleep_until_opt(closing) => return Exit::Done,
            }
        }
    }
}

async fn sleep_until_opt(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Reads what the socket has and hands every whole PDU to the protocol.
/// PDUs that arrived before an end of stream are handled first.
fn read_some(conn: &mut Conn) -> std::result::Result<(), String> {
    let mut end = None;
    for _ in 0..READS_PER_WAKEUP {
        // Whole PDUs leave the buffer before each read, so that make_room
        // sees the unfinished one at its head.
        handle_buffered(conn)?;
        let most = conn.decoder.make_room(&mut conn.rbuf);
        match read_marking_drained(&conn.stream, &mut conn.rbuf, most) {
            Ok(Read::Eof) => {
                end = Some("connection closed by the target".to_owned());
                break;
            }
            Ok(Read::Bytes { drained }) => {
                if conn.quickack {
                    let _ = socket2::SockRef::from(&conn.stream).set_quickack(true);
                }
                if drained {
                    break;
                }
            }
            Ok(Read::Nothing) => break,
            Err(e) => {
                end = Some(format!("read failed: {e}"));
                break;
            }
        }
    }
    handle_buffered(conn)?;
    match end {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// Hands every whole PDU in the receive buffer to the protocol.
fn handle_buffered(conn: &mut Conn) -> std::result::Result<(), String> {
    let now = Instant::now();
    loop {
        match conn.decoder.decode(&mut conn.rbuf) {
            Ok(Some(f)) => conn
                .proto
                .handle_frame(f, now)
                .map_err(|e| format!("undecodable PDU from the target: {e}"))?,
            Ok(None) => break,
            // A digest error or an oversize segment: at ERL 0 the
            // connection cannot recover (RFC 7143 §7.8).
            Err(e) => return Err(format!("bad PDU from the target: {e}")),
        }
    }
    Ok(())
}
