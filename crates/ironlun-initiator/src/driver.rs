//! The session's tokio task: a thin loop around ironlun-initiator-core's
//! [`InitiatorCore`]. It opens the connections the core asks for, reads
//! the socket into [`InitiatorCore::handle_frame`], writes what
//! [`InitiatorCore::poll_transmit`] gives in one vectored write, runs the
//! core's timer, hands callers' requests in while the core takes them,
//! and answers callers from its completions. Every protocol decision
//! (what to send, when to log out, whether to reconnect, what happens to
//! unfinished commands) is the core's; this file only does IO and
//! reports.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use ironlun_initiator_core::alua::AluaSignal;
use ironlun_initiator_core::{CoreConfig, End, Event, InitiatorCore, LoginFailure, Request};
use ironlun_net::{read_marking_drained, Read};
use ironlun_proto::chap::RANDOM_BYTES;
use ironlun_proto::initiator::{
    Completed, LoginConfig, LoginOutcome, Reply, ScsiReply, ScsiRequest, TaskError,
};
use ironlun_proto::timer::TimerSlot;
use ironlun_scsi_codes::{SenseCode, Status};
use ironlun_wire::{AsyncEvent, Digests, Outbox, ServiceResponse};
use tokio::io::Interest;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Sleep;
use tracing::{debug, info, warn};

use crate::error::{Error, Result};
use crate::session::{
    Orphan, PathHook, PathNote, Queued, Responder, SessionInfo, SessionOptions, Shared, TcpOptions,
    Token,
};

/// Socket reads per readiness wakeup before queued requests get a turn.
const READS_PER_WAKEUP: usize = 8;
/// Stop taking requests while this many bytes wait to be written.
const OUT_HIGH_WATER: usize = 8 << 20;

/// One open connection.
struct Link {
    stream: TcpStream,
    peer: SocketAddr,
    rbuf: BytesMut,
    out: Outbox,
}

/// The session's task.
pub(crate) struct Driver {
    portal: String,
    target: Option<String>,
    tcp: TcpOptions,
    core: InitiatorCore<Token>,
    link: Option<Link>,
    rx: mpsc::Receiver<Queued>,
    /// False once every handle is gone.
    rx_open: bool,
    /// The multipath this session is a path of.
    failover: Option<PathHook>,
    /// Set at the first login.
    shared: Option<Arc<Shared>>,
    /// Told the outcome of the first login.
    ready: Option<oneshot::Sender<Result<Arc<Shared>>>>,
}

/// What the core logs in with, from the session's options.
fn core_config(target: Option<&str>, opts: &SessionOptions, failover: bool) -> CoreConfig {
    CoreConfig {
        login: LoginConfig {
            initiator_name: opts.initiator_name.clone(),
            initiator_alias: opts.initiator_alias.clone(),
            target_name: target.map(str::to_owned),
            isid: opts.isid,
            tsih: 0,
            cid: 0,
            offers: opts.offers.clone(),
            initial_cmd_sn: 1,
            auth: opts.auth.clone(),
        },
        limits: opts.limits.clone(),
        login_timeout: opts.login_timeout,
        reconnect: opts.reconnect.clone(),
        failover,
    }
}

impl Driver {
    pub(crate) fn new(
        portal: &str,
        target: Option<&str>,
        opts: &SessionOptions,
        rx: mpsc::Receiver<Queued>,
        failover: Option<PathHook>,
        ready: oneshot::Sender<Result<Arc<Shared>>>,
    ) -> Self {
        let cfg = core_config(target, opts, failover.is_some());
        Driver {
            portal: portal.to_owned(),
            target: target.map(str::to_owned),
            tcp: opts.tcp.clone(),
            core: InitiatorCore::new(cfg, Instant::now()),
            link: None,
            rx,
            rx_open: true,
            failover,
            shared: None,
            ready: Some(ready),
        }
    }

    pub(crate) async fn run(mut self) {
        // One timer for the session's life, moved only when the core's
        // deadline comes nearer (ironlun_proto::timer).
        let timer = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(timer);
        let mut slot = TimerSlot::default();
        loop {
            self.settle().await;
            if self.core.is_ended() {
                return self.finish();
            }
            if let Some(t) = slot.update(self.core.poll_timeout()) {
                timer.as_mut().reset(tokio::time::Instant::from_std(t));
            }
            self.wait(timer.as_mut(), &mut slot).await;
        }
    }

    /// Acts on all the core has for the driver: answers, events, PDUs.
    async fn settle(&mut self) {
        loop {
            self.deliver();
            let mut acted = false;
            while let Some(e) = self.core.poll_event() {
                acted = true;
                self.event(e).await;
            }
            if let Err(why) = self.flush() {
                self.core.handle_connection_lost(why, Instant::now());
                acted = true;
            }
            if !acted {
                return;
            }
        }
    }

    /// Waits for the socket, a caller's request or the core's timer.
    async fn wait(&mut self, timer: Pin<&mut Sleep>, slot: &mut TimerSlot) {
        let take = self.rx_open
            && self.core.accepts_requests()
            && self
                .link
                .as_ref()
                .is_some_and(|l| l.out.queued_bytes() < OUT_HIGH_WATER);
        let interest = match &self.link {
            Some(l) if !l.out.is_empty() => Some(Interest::READABLE | Interest::WRITABLE),
            Some(_) => Some(Interest::READABLE),
            None => None,
        };
        tokio::select! {
            biased;
            ready = ready_opt(self.link.as_ref(), interest) => match ready {
                // Writable: the write is made in settle().
                Ok(r) if r.is_readable() => self.read(),
                Ok(_) => {}
                Err(e) => self
                    .core
                    .handle_connection_lost(format!("socket error: {e}"), Instant::now()),
            },
            r = self.rx.recv(), if take => match r {
                Some(q) => self.take_requests(q),
                None => {
                    // Every handle is gone: the core logs out.
                    self.rx_open = false;
                    self.core.handle_close(Instant::now());
                }
            },
            _ = timer, if slot.is_armed() => {
                slot.fired();
                self.core.handle_timeout(Instant::now());
            }
        }
    }

    /// Hands a request, and what else is queued while the core takes
    /// more, to the core, so they leave in the same write.
    fn take_requests(&mut self, first: Queued) {
        let now = Instant::now();
        self.hand_in(first, now);
        while self.core.accepts_requests() {
            match self.rx.try_recv() {
                Ok(q) => self.hand_in(q, now),
                Err(_) => break,
            }
        }
    }

    fn hand_in(&mut self, (request, token): Queued, now: Instant) {
        if let Err(e) = self.core.handle_request(request, token, now) {
            debug!(portal = %self.portal, "request refused: {e}");
        }
    }

    /// Reads what the socket has and hands every whole PDU to the core.
    /// PDUs that arrived before an end of stream are handled first.
    fn read(&mut self) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let now = Instant::now();
        let mut end = None;
        for _ in 0..READS_PER_WAKEUP {
            // Whole PDUs leave the buffer before each read, so that
            // make_room sees the unfinished one at its head.
            decode_all(&mut self.core, &mut link.rbuf, now);
            if !self.core.uses_connection() {
                return;
            }
            let most = self.core.decoder().make_room(&mut link.rbuf);
            match read_marking_drained(&link.stream, &mut link.rbuf, most) {
                Ok(Read::Eof) => {
                    end = Some("connection closed by the target".to_owned());
                    break;
                }
                Ok(Read::Bytes { drained }) => {
                    if self.tcp.quickack {
                        let _ = socket2::SockRef::from(&link.stream).set_quickack(true);
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
        decode_all(&mut self.core, &mut link.rbuf, now);
        if let Some(why) = end {
            self.core.handle_connection_lost(why, now);
        }
    }

    /// Encodes what the core sends and writes as much as the socket takes.
    fn flush(&mut self) -> std::result::Result<(), String> {
        let Some(link) = self.link.as_mut() else {
            return Ok(());
        };
        link.out.digests = self.core.digests();
        while let Some(p) = self.core.poll_transmit() {
            link.out
                .push(&p.pdu, p.data)
                .map_err(|e| format!("cannot encode a PDU: {e}"))?;
        }
        if !link.out.is_empty() {
            let stream = &link.stream;
            link.out
                .write_with(|iov| stream.try_write_vectored(iov))
                .map_err(|e| format!("write failed: {e}"))?;
        }
        Ok(())
    }

    /// Hands finished requests, and commands for other paths, to callers.
    fn deliver(&mut self) {
        while let Some(Completed { token, result }) = self.core.poll_completion() {
            match token {
                Token::Routed(request, responder) => self.routed(*request, responder, result),
                token => token.answer(result, self.shared.as_deref()),
            }
        }
        while let Some((request, token)) = self.core.poll_orphan() {
            let (Token::Scsi(responder) | Token::Routed(_, responder)) = token else {
                continue;
            };
            self.uncount();
            self.to_multipath(PathNote::Orphan(Orphan { request, responder }));
        }
    }

    /// A multipath command's outcome: refused for this path's ALUA state
    /// (NOT READY with an ALUA qualifier, SPC-5 §5.16.2.4), it goes back
    /// to the multipath for another path; anything else to its caller.
    fn routed(
        &mut self,
        request: ScsiRequest,
        responder: Responder,
        result: std::result::Result<Reply, TaskError>,
    ) {
        let bounce = match &result {
            Ok(Reply::Scsi(r)) => alua_refusal(r).zip(self.failover.as_ref().map(|h| h.index)),
            _ => None,
        };
        let (Some((signal, path)), Ok(Reply::Scsi(reply))) = (bounce, result.as_ref()) else {
            return Token::Scsi(responder).answer(result, self.shared.as_deref());
        };
        self.uncount();
        debug!(portal = %self.portal, ?signal, "command refused for the path's ALUA state; to another path");
        let note = PathNote::Bounced {
            path,
            orphan: Orphan { request, responder },
            signal,
            reply: reply.clone(),
        };
        self.to_multipath(note);
    }

    /// One command less on this path.
    fn uncount(&self) {
        if let Some(s) = &self.shared {
            s.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Tells the multipath; a command it cannot take fails.
    fn to_multipath(&self, note: PathNote) {
        let back = match &self.failover {
            Some(f) => f.tx.send(note).err().map(|e| e.0),
            None => Some(note),
        };
        let fail = |o: Orphan| {
            o.responder
                .send_error(Error::NoPath("no other path takes the command".into()))
        };
        match back {
            Some(PathNote::Orphan(o)) => fail(o),
            Some(PathNote::Bounced { orphan, reply, .. }) => orphan.responder.send(Ok(reply)),
            _ => {}
        }
    }

    async fn event(&mut self, e: Event) {
        match e {
            Event::Connect => self.connect().await,
            Event::Disconnect => {
                self.link = None;
                self.set_connected(false);
            }
            Event::LoggedIn {
                outcome,
                reinstated,
                reissued,
            } => self.logged_in(&outcome, reinstated, reissued),
            Event::LoginFailed(f) => debug!(portal = %self.portal, "reconnect failed: {f}"),
            Event::ConnectionFailed { why, .. } => {
                warn!(portal = %self.portal, "connection failed: {why}");
                if self.failover.is_some() {
                    self.hand_over();
                }
            }
            Event::LoggedOut { response } => {
                debug!(portal = %self.portal, %response, "logged out");
            }
            Event::Async {
                event, parameters, ..
            } => match event {
                AsyncEvent::LOGOUT_REQUEST => info!(
                    portal = %self.portal,
                    "the target asks for a logout within {} s (RFC 7143 §11.9.1); logging out",
                    parameters[2]
                ),
                _ => debug!(portal = %self.portal, %event, ?parameters, "asynchronous message"),
            },
            Event::UnitAttention { lun, sense } => {
                let asc = SenseCode::parse(&sense).unwrap_or_default().asc_ascq();
                info!(portal = %self.portal, lun = lun.index(), "unit attention ({asc}); command sent again");
                if let (Some(signal), Some(hook)) = (AluaSignal::of(&sense), &self.failover) {
                    let index = hook.index;
                    self.to_multipath(PathNote::Signal {
                        path: index,
                        signal,
                    });
                }
            }
            Event::Ended(end) => self.ended(end),
        }
    }

    /// The connection is lost and this session is a multipath's path:
    /// the commands it held, and those queued for it, go to the other
    /// paths now rather than after reconnection (the session still
    /// reconnects; a request of another kind gets the core's answer).
    fn hand_over(&mut self) {
        let held = self.core.hand_back_held();
        let now = Instant::now();
        let mut queued = 0;
        while let Ok((request, token)) = self.rx.try_recv() {
            match (request, token) {
                (Request::Scsi(request), Token::Scsi(responder) | Token::Routed(_, responder)) => {
                    queued += 1;
                    self.uncount();
                    self.to_multipath(PathNote::Orphan(Orphan { request, responder }));
                }
                q => self.hand_in(q, now),
            }
        }
        info!(portal = %self.portal, "{held} commands sent and {queued} queued handed to the other paths");
    }

    /// Opens the connection the core asked for, within the login's
    /// deadline.
    async fn connect(&mut self) {
        let deadline = self.core.poll_timeout();
        let open = connect_tcp(&self.portal, &self.tcp);
        let opened = match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), open).await.ok(),
            None => Some(open.await),
        };
        let now = Instant::now();
        match opened.map(|r| r.and_then(|(stream, peer)| Ok((stream, peer, nonce()?)))) {
            None => self.core.handle_timeout(now),
            Some(Ok((stream, peer, nonce))) => {
                self.link = Some(Link {
                    stream,
                    peer,
                    rbuf: BytesMut::with_capacity(64 << 10),
                    out: Outbox::new(Digests::default()),
                });
                self.core.handle_connected(nonce);
            }
            Some(Err(e)) => self.core.handle_connection_lost(e.to_string(), now),
        }
    }

    fn logged_in(&mut self, outcome: &LoginOutcome, reinstated: bool, reissued: usize) {
        self.set_connected(true);
        if reinstated {
            info!(portal = %self.portal, "session reinstated; re-issuing {reissued} commands");
        }
        let Some(ready) = self.ready.take() else {
            return;
        };
        let Some(link) = &self.link else {
            return;
        };
        debug!(portal = %self.portal, tsih = outcome.tsih, "logged in: {}", outcome.summary);
        let shared = Arc::new(Shared {
            info: SessionInfo {
                portal: self.portal.clone(),
                peer: link.peer,
                target: self.target.clone(),
                tsih: outcome.tsih,
                session: outcome.session.clone(),
                conn: outcome.conn.clone(),
                summary: outcome.summary.clone(),
            },
            in_flight: 0.into(),
            alive: true.into(),
            connected: true.into(),
        });
        self.shared = Some(shared.clone());
        if ready.send(Ok(shared)).is_err() {
            // The caller stopped waiting: nobody will use the session.
            self.core.handle_close(Instant::now());
        }
    }

    fn ended(&mut self, end: End) {
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Err(match end {
                End::LoginFailed(f) => self.login_error(f),
                _ => Error::Closed,
            }));
            return;
        }
        if let End::GaveUp { attempts, .. } = end {
            warn!(
                portal = %self.portal,
                "reconnection failed after {attempts} attempts; {}",
                if self.failover.is_some() {
                    "path retired, its commands go to the other paths"
                } else {
                    "session ended, its commands fail"
                }
            );
        }
    }

    /// The caller's error for a first login that failed.
    fn login_error(&self, f: LoginFailure) -> Error {
        let portal = self.portal.clone();
        match f {
            LoginFailure::Connection(why) => {
                Error::io(format!("login to {portal}"), std::io::Error::other(why))
            }
            LoginFailure::Malformed(why) => Error::Malformed(format!("login response: {why}")),
            LoginFailure::Login(source) => Error::Login { portal, source },
            LoginFailure::Timeout(d) => Error::LoginTimeout {
                portal,
                secs: d.as_secs(),
            },
        }
    }

    fn set_connected(&self, on: bool) {
        if let Some(s) = &self.shared {
            s.connected.store(on, Ordering::Relaxed);
        }
    }

    /// The session is over: requests still queued get the answer the
    /// core gives them, and the handles see it gone.
    fn finish(mut self) {
        if let Some(s) = &self.shared {
            s.alive.store(false, Ordering::Relaxed);
            s.connected.store(false, Ordering::Relaxed);
        }
        self.rx.close();
        let now = Instant::now();
        while let Ok((request, token)) = self.rx.try_recv() {
            let _ = self.core.handle_request(request, token, now);
        }
        self.deliver();
        debug!(portal = %self.portal, "session ended");
    }
}

/// The ALUA signal of a reply that refused its command for the path's
/// state (so it was not run and may go elsewhere).
fn alua_refusal(r: &ScsiReply) -> Option<AluaSignal> {
    if r.response != ServiceResponse::COMMAND_COMPLETED || r.status != Status::CHECK_CONDITION {
        return None;
    }
    AluaSignal::of(&r.sense).filter(|s| s.reissue())
}

/// Hands every whole PDU in the receive buffer to the core.
fn decode_all(core: &mut InitiatorCore<Token>, rbuf: &mut BytesMut, now: Instant) {
    while core.uses_connection() {
        match core.decoder().decode(rbuf) {
            Ok(Some(f)) => core.handle_frame(f, now),
            Ok(None) => return,
            Err(e) => {
                rbuf.clear();
                return core.handle_frame_error(&e, now);
            }
        }
    }
}

/// Readiness of the connection's socket; pending without one.
async fn ready_opt(
    link: Option<&Link>,
    interest: Option<Interest>,
) -> std::io::Result<tokio::io::Ready> {
    match (link, interest) {
        (Some(l), Some(i)) => l.stream.ready(i).await,
        _ => std::future::pending().await,
    }
}

/// Fresh for every login: a mutual CHAP challenge is never reused.
fn nonce() -> Result<[u8; RANDOM_BYTES]> {
    let mut nonce = [0u8; RANDOM_BYTES];
    getrandom::fill(&mut nonce).map_err(|e| {
        Error::io(
            "drawing random bytes for CHAP",
            std::io::Error::other(e.to_string()),
        )
    })?;
    Ok(nonce)
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
