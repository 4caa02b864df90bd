//! One TCP connection: the login phase, then full feature phase.
//!
//! # Runtime model
//!
//! One tokio task per connection owns the socket and the connection's
//! logic without IO ([`ConnCore`]: the sans-IO [`TargetConnection`] and
//! the target's LUs), and does what the core hands out ([`Action`]). It
//! waits on socket readiness, completions from the
//! blocking pool, the protocol's next timer, shutdown and reinstatement,
//! and does non-blocking reads and vectored writes itself, so reading and
//! writing never block each other and no task hop is paid per command.
//! Commands on RAM and null LUNs execute inline (they never block). On
//! file and block LUNs, READ, WRITE and SYNCHRONIZE CACHE are staged by
//! the device and their medium access goes on the connection's io_uring
//! (crate::ring), submitted once per batch of PDUs and reaped on this
//! task; the other commands there, and those whose work is not bounded
//! by their transfer (EXTENDED COPY, WRITE SAME, UNMAP), execute on
//! tokio's blocking pool, as everything did before the ring (and still
//! does with `--io-engine pool` or without io_uring). On RBD LUNs the same
//! three commands are staged, and each medium access is a librbd
//! operation awaited on a task of its own, woken by librbd's completion
//! (ironlun_backend::aio); it reports back like the blocking pool.
//! Outgoing PDUs queue as segments (headers from a reused arena, data shared with the backend's
//! buffers) up to a high-water mark, past which the task stops reading: a
//! client that does not read its responses cannot make us buffer without
//! bound. Large reads from a file on a memory file system queue as file
//! ranges, which [`SocketSink`] hands to the kernel with `sendfile`: the
//! page-cache pages go to the socket without a copy in user space
//! (measured on 512 KiB reads from tmpfs with iscsi-perf: 1.4 → 4.5 GB/s,
//! more than iperf3's one-stream rate, which copies on both sides;
//! docs/performance.md).
//!
//! ## Why tokio's multi-thread runtime
//!
//! The daemon runs these tasks on tokio's multi-thread runtime, one worker
//! per core. Three models were measured against each other on the 2-core
//! development VM, with `ironlun bench` on the same machine: 4 KiB random
//! reads from a tmpfs file LUN, five alternating repetitions of 5 s,
//! median (range) in thousands of IOPS:
//!
//! | model | 1 session, QD 64 | 8 sessions, QD 64 | 64 sessions, QD 16 |
//! |---|---:|---:|---:|
//! | multi-thread, 2 workers | 117 (70–147) | 165 (143–180) | 165 (155–181) |
//! | one current-thread runtime per core, connections to the least loaded | 121 (85–139) | 175 (146–185) | 162 (150–177) |
//! | one current-thread runtime | 106 (76–165) | 184 (181–216) | 156 (145–194) |
//!
//! The differences are smaller than the spread between repetitions, so
//! the measurement gives no reason to leave the simplest model that uses
//! every core. A single thread did best at 8 sessions because the client
//! needed the other core; on a machine of its own the target would lose
//! half its cores that way. The per-core variant was built and is in the
//! history (commit 6d7eef8) should a larger machine show a difference.
//! io_uring carries the disk I/O of file and block LUNs (crate::ring), not
//! the sockets: at these rates the socket time goes to the kernel's copies
//! and TCP work, not to readiness system calls.
//! `IRONLUN_RUNTIME=current-thread` runs the daemon on one thread, to
//! repeat the comparison.
//!
//! With `busy_poll` set (latency mode, crate::busy_poll), a connection
//! about to wait for its next PDU or its ring first polls them itself
//! for up to that long ([`Driver::spin`]); off by default.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ironlun_backend::ring::Completion as RingCompletion;
use ironlun_net::{read_marking_drained, Read};
use ironlun_payload::FILL;
use ironlun_proto::login::LOGIN_SEGMENT_MAX;
use ironlun_proto::target::login::{LoginResult, LoginStep, TargetLogin};
use ironlun_proto::target::{CloseReason, FfpConfig, TargetConnection};
use ironlun_proto::timer::TimerSlot;
use ironlun_proto::OutPdu;
use ironlun_scsi::{ItNexus, LunMap};
use ironlun_target_core::{Action, ConnCore, Dispatch, Done, Lus, Recipients, Staged, Wake};
use ironlun_wire::{encode_frame, Digests, FileRange, Frame, FrameDecoder, Opcode, Outbox, Sink};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use crate::busy_poll::{self, BusyPollCounters, Idle};
use crate::config::IoEngine;
use crate::metrics::LoginOutcome;
use crate::registry::{
    LoginCtx, PortalDirectory, Registry, SessionHandle, SessionSignal, SessionSignals,
};
use crate::ring::RingSlot;
use crate::store_io::StoreIos;

/// Stop reading new PDUs while this many bytes wait to be sent.
const OUT_HIGH_WATER: usize = 4 << 20;
/// Socket reads per readiness wakeup before responses get their turn.
const READS_PER_WAKEUP: usize = 16;
/// How long a closing connection may take to flush and finish its tasks.
const CLOSE_GRACE: Duration = Duration::from_secs(10);
/// Command window of discovery sessions (text and logout only).
const DISCOVERY_QUEUE_DEPTH: u32 = 8;

fn isid_hex(isid: &[u8; 6]) -> String {
    isid.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs a connection to the end. Never panics on peer input; every way
/// out is logged.
pub async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    registry: Arc<Registry>,
    mut shutdown: watch::Receiver<bool>,
    initial_stat_sn: u32,
) {
    let _ = stream.set_nodelay(registry.tcp.nodelay);
    let local = stream.local_addr().unwrap_or(peer);
    let mut link = Link {
        stream,
        rbuf: BytesMut::with_capacity(16 << 10),
        peer,
    };
    let login = login_phase(&mut link, &registry, &mut shutdown, initial_stat_sn).await;
    let Some((result, session)) = login else {
        return;
    };
    let (mut driver, done_rx) = Driver::start(link, local, &registry, &result, session);
    let reason = driver.run(&mut shutdown, done_rx).await;
    // Other sessions' task management must not wait for this one.
    driver.session.signals.close();
    let stats = &driver.core.conn().stats;
    info!(
        %peer,
        initiator = %result.initiator_name,
        isid = %isid_hex(&result.isid),
        tsih = result.tsih,
        cid = result.cid,
        commands = stats.commands,
        read_bytes = stats.read_bytes,
        zero_copy_bytes = driver.zero_copy_bytes,
        ring_commands = driver.ring_commands,
        async_commands = driver.async_commands,
        write_bytes = stats.write_bytes,
        rejects = stats.rejects,
        "logout: {reason}"
    );
}

/// A connection's socket before full feature phase: what login reads
/// from, and what the driver takes over (bytes already buffered
/// included).
struct Link {
    stream: TcpStream,
    rbuf: BytesMut,
    peer: SocketAddr,
}

/// The login phase (RFC 7143 §6.3): the session it created and the
/// negotiated result, or `None` when the login failed, timed out, the
/// initiator left or the target shuts down (each logged).
async fn login_phase(
    link: &mut Link,
    registry: &Arc<Registry>,
    shutdown: &mut watch::Receiver<bool>,
    initial_stat_sn: u32,
) -> Option<(Box<LoginResult>, SessionHandle)> {
    let limits = &registry.limits;
    let peer = link.peer;
    let mut login = TargetLogin::new(
        initial_stat_sn,
        DISCOVERY_QUEUE_DEPTH,
        limits.login_text_limit,
    );
    let mut ctx = LoginCtx {
        registry: registry.clone(),
        peer,
        created: None,
        refusal: None,
    };
    let decoder = FrameDecoder::new(LOGIN_SEGMENT_MAX as u32);
    let deadline = tokio::time::Instant::now() + limits.login_timeout;
    let result = loop {
        let frame = tokio::select! {
            r = read_frame(&mut link.stream, &mut link.rbuf, &decoder) => r,
            _ = tokio::time::sleep_until(deadline) => {
                info!(%peer, "login timed out after {:?}", limits.login_timeout);
                registry.metrics.login(LoginOutcome::Failure);
                return None;
            }
            _ = shutdown.changed() => return None,
        };
        let frame = match frame {
            Ok(Some(f)) => f,
            Ok(None) => {
                debug!(%peer, "connection closed during login");
                return None;
            }
            Err(e) => {
                info!(%peer, "login connection dropped: {e}");
                registry.metrics.login(LoginOutcome::Failure);
                return None;
            }
        };
        match login.handle_frame(&frame, &mut ctx) {
            LoginStep::Continue(resp) => send_plain(&mut link.stream, &resp).await.ok()?,
            LoginStep::Failed {
                response,
                status,
                reason,
            } => {
                registry.metrics.login_refused(status);
                let why = ctx.refusal.take().map(|w| format!(" ({w})"));
                warn!(
                    %peer,
                    initiator = login.initiator_name().unwrap_or("?"),
                    "login rejected: {status}: {reason}{}",
                    why.unwrap_or_default()
                );
                let _ = send_plain(&mut link.stream, &response).await;
                let _ = link.stream.shutdown().await;
                return None;
            }
            LoginStep::Complete { response, result } => {
                old_session_ended(&mut ctx, peer).await;
                send_plain(&mut link.stream, &response).await.ok()?;
                break result;
            }
        }
    };
    let Some(session) = ctx.created.take() else {
        warn!(%peer, "login completed without a session");
        return None;
    };
    registry.metrics.logged_in(session.reinstated);
    Some((result, session))
}

/// A reinstating login completes only once the session it replaces has
/// ended (RFC 7143 §6.3.5: the old session's tasks are terminated):
/// otherwise the new nexus could meet the old one's SCSI-2 reservation,
/// or a write of the old session could land after the new session's.
/// The wait is bounded by the old connection's own close grace.
async fn old_session_ended(ctx: &mut LoginCtx, peer: SocketAddr) {
    let Some(end) = ctx.created.as_mut().and_then(|s| s.replaced_end.take()) else {
        return;
    };
    if !end.wait(CLOSE_GRACE + Duration::from_secs(5)).await {
        warn!(%peer, "the reinstated session has not ended; the new one goes on");
    }
}

/// Reads until one whole PDU is buffered. `Ok(None)` at a clean EOF.
async fn read_frame(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    decoder: &FrameDecoder,
) -> io::Result<Option<ironlun_wire::Frame>> {
    loop {
        match decoder.decode(buf) {
            Ok(Some(f)) => return Ok(Some(f)),
            Ok(None) => {}
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 << 10);
        }
        if stream.read_buf(buf).await? == 0 {
            return Ok(None);
        }
    }
}

/// Sends one PDU without digests (login phase, RFC 7143 §13.1: digests
/// start after login).
async fn send_plain(stream: &mut TcpStream, p: &OutPdu) -> io::Result<()> {
    let mut out = BytesMut::new();
    encode_frame(
        &p.pdu.encode(),
        &[],
        &p.data.to_bytes()?,
        Digests::default(),
        &mut out,
    )
    .map_err(|e| io::Error::other(e.to_string()))?;
    stream.write_all(&out).await
}

/// What a busy-poll spin found.
enum Found {
    /// PDUs read, a completion taken, a signal or the shutdown: the
    /// loop goes round again.
    Work,
    /// The initiator closed the connection.
    Closed,
    /// The socket failed.
    Failed(io::Error),
}

struct Driver {
    /// The protocol and the LUs, joined without IO.
    core: ConnCore,
    /// Where commands finished on the blocking pool report back.
    done_tx: mpsc::UnboundedSender<Done>,
    /// Set when the driver itself cannot go on (data it cannot send).
    broken: Option<String>,
    /// A LUN file shorter than the data being sent was logged once.
    warned_short_file: bool,
    /// Data-In bytes the kernel sent straight from a LUN file's pages.
    zero_copy_bytes: u64,
    stream: TcpStream,
    rbuf: BytesMut,
    decoder: FrameDecoder,
    out: Outbox,
    session: SessionHandle,
    in_flight_blocking: usize,
    /// The io_uring for staged commands on file and block LUNs.
    ring: RingSlot,
    /// Ring completions being handed to the protocol (kept for its
    /// allocation).
    ring_done: Vec<RingCompletion<Staged>>,
    /// The session's command window: how many commands can be in flight.
    queue_depth: u32,
    /// Commands whose medium access ran on the ring.
    ring_commands: u64,
    /// Commands whose medium access ran on a store's asynchronous path.
    async_commands: u64,
    /// Those still waiting for their store, polled by this task.
    store_ios: StoreIos,
    peer: SocketAddr,
    /// Time initiators get to log out when the target shuts down.
    grace: Duration,
    /// Re-arm TCP_QUICKACK after each read (Linux clears it).
    quickack: bool,
    /// Latency mode: how long to poll before sleeping (zero: off;
    /// crate::busy_poll).
    busy_poll: Duration,
    /// The daemon's counts of spins, shared.
    spins: BusyPollCounters,
}

impl Driver {
    /// Takes a logged-in connection into full feature phase; the
    /// receiver is where commands run on the blocking pool report back.
    fn start(
        link: Link,
        local: SocketAddr,
        registry: &Arc<Registry>,
        result: &LoginResult,
        mut session: SessionHandle,
    ) -> (Driver, mpsc::UnboundedReceiver<Done>) {
        let limits = &registry.limits;
        let peer = link.peer;
        let target = session.target.clone();
        let queue_depth = target
            .as_ref()
            .map_or(DISCOVERY_QUEUE_DEPTH, |t| t.cfg.queue_depth);
        info!(
            %peer,
            initiator = %result.initiator_name,
            isid = %isid_hex(&result.isid),
            tsih = result.tsih,
            cid = result.cid,
            target = target.as_ref().map_or("(discovery)", |t| t.cfg.name.as_str()),
            reinstated = session.reinstated,
            "login: {} QueueDepth={queue_depth}",
            result.summary
        );
        let _ = session.info.negotiated.set(result.summary.clone());
        session.view = session.current_view();
        // The nexus's target port, as the LUs name it (VPD 83h, READ
        // FULL STATUS): its relative port identifier.
        let port = target.as_ref().map_or(1, |t| t.cfg.relative_port);
        let lus = session.view.clone().map(|map| Lus {
            map,
            nexus: session.nexus,
            identity: ItNexus::new(&result.initiator_name, result.isid, port),
            replaced: session.reinstated,
        });
        let ffp = FfpConfig {
            queue_depth,
            max_write_transfer_length: limits.max_transfer_bytes,
            nop_interval: limits.nop_interval,
            nop_timeout: limits.nop_timeout,
            text_limit: limits.login_text_limit,
            ..FfpConfig::default()
        };
        let directory = Box::new(PortalDirectory {
            registry: registry.clone(),
            local,
            peer,
        });
        let mut conn = TargetConnection::new(result, ffp, directory, Instant::now());
        conn.set_observer(registry.metrics.clone());
        let stage = registry.io_engine == IoEngine::Uring;
        let digests = Digests {
            header: result.conn.header_digest,
            data: result.conn.data_digest,
        };
        let (done_tx, done_rx) = mpsc::unbounded_channel::<Done>();
        let mut core = ConnCore::new(conn, lus, Dispatch::Inline, stage);
        if registry.metrics.latency_measured() {
            core.measure_latency();
        }
        let driver = Driver {
            core,
            done_tx,
            broken: None,
            warned_short_file: false,
            zero_copy_bytes: 0,
            stream: link.stream,
            rbuf: link.rbuf,
            decoder: FrameDecoder {
                digests,
                max_data_segment_len: result.conn.max_recv_data_segment_length,
            },
            out: Outbox::new(digests),
            session,
            in_flight_blocking: 0,
            ring: RingSlot::new(registry.io_engine),
            ring_done: Vec::new(),
            queue_depth,
            ring_commands: 0,
            async_commands: 0,
            store_ios: StoreIos::default(),
            peer,
            grace: limits.shutdown_grace,
            quickack: registry.tcp.quickack,
            busy_poll: registry.tcp.busy_poll,
            spins: registry.metrics.busy_poll.clone(),
        };
        (driver, done_rx)
    }

    /// Queues a PDU for the socket. Our PDUs are bounded by the negotiated
    /// MaxRecvDataSegmentLength, so encoding cannot fail; if it ever does,
    /// the PDU is dropped and logged. With data digests on, a file range
    /// is read into memory first, so the digest covers the bytes sent; if
    /// that read fails, the data cannot be sent and the connection ends
    /// (the initiator's recovery retries the command); nothing queued
    /// after that is sent, so the initiator never sees a gap.
    fn push_out(&mut self, p: OutPdu) {
        if self.broken.is_some() {
            return;
        }
        let data = if self.out.digests.data {
            match p.data.into_mem() {
                Ok(d) => d,
                Err(e) => {
                    warn!(peer = %self.peer, "reading Data-In from the LUN's file failed: {e}");
                    self.broken
                        .get_or_insert_with(|| format!("Data-In could not be read: {e}"));
                    return;
                }
            }
        } else {
            p.data
        };
        if let Err(e) = self.out.push(&p.pdu, data) {
            warn!(peer = %self.peer, "dropping an unencodable PDU: {e}");
        }
    }

    /// Writes what the socket takes now: `Ok(true)` when everything queued
    /// is written.
    fn flush_some(&mut self) -> io::Result<bool> {
        if self.broken.is_some() {
            return Ok(false);
        }
        self.out.write_to(&mut SocketSink {
            stream: &self.stream,
            peer: self.peer,
            warned_short_file: &mut self.warned_short_file,
            file_bytes: &mut self.zero_copy_bytes,
        })
    }

    async fn run(
        &mut self,
        shutdown: &mut watch::Receiver<bool>,
        mut done_rx: mpsc::UnboundedReceiver<Done>,
    ) -> String {
        let signals = self.session.signals.clone();
        // One timer for the connection's life, moved only when the
        // protocol's deadline comes nearer (ironlun_proto::timer).
        let keepalive = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(keepalive);
        let mut slot = TimerSlot::default();
        let mut shutting_down = *shutdown.borrow();
        if shutting_down {
            self.core.request_logout(Instant::now(), self.grace());
        }
        loop {
            // What other sessions sent acts before any PDU read after it.
            if signals.is_pending() {
                if let Some(why) = self.take_signals() {
                    self.wait_blocking(&mut done_rx).await;
                    return why.into();
                }
            }
            // The Logout Response, queued, goes out in pump().
            if matches!(self.core.close_reason(), Some(CloseReason::LoggedOut)) {
                self.end_nexus_before_logout_response().await;
            }
            self.pump();
            if let Some(why) = self.broken.take() {
                self.wait_blocking(&mut done_rx).await;
                return why;
            }
            if let Some(reason) = self.core.close_reason() {
                let reason = format!("{reason:?}");
                self.finish(&mut done_rx).await;
                return reason;
            }
            let want_read = self.out.queued_bytes() < OUT_HIGH_WATER;
            let want_write = !self.out.is_empty();
            let interest = match (want_read, want_write) {
                (true, true) => Some(Interest::READABLE | Interest::WRITABLE),
                (true, false) => Some(Interest::READABLE),
                (false, true) => Some(Interest::WRITABLE),
                (false, false) => None,
            };
            if let Some(t) = slot.update(self.core.poll_timeout()) {
                keepalive.as_mut().reset(tokio::time::Instant::from_std(t));
            }
            // Off by default: then nothing of the below is asked.
            if !self.busy_poll.is_zero() && self.may_spin(want_read, want_write, &signals, shutdown)
            {
                match self.spin(&signals, shutdown, &mut done_rx) {
                    None => {}
                    Some(Found::Closed) => {
                        self.wait_blocking(&mut done_rx).await;
                        return "connection closed by initiator".into();
                    }
                    Some(Found::Failed(e)) => {
                        self.wait_blocking(&mut done_rx).await;
                        return format!("read failed: {e}");
                    }
                    // Sent, started or handled at the top of the loop.
                    Some(Found::Work) => continue,
                }
            }
            tokio::select! {
                ready = self.stream.ready(interest.unwrap_or(Interest::WRITABLE)), if interest.is_some() => {
                    let ready = match ready {
                        Ok(r) => r,
                        Err(e) => return format!("socket error: {e}"),
                    };
                    if ready.is_writable() {
                        if let Err(e) = self.flush_some() {
                            return format!("write failed: {e}");
                        }
                    }
                    // A signal that arrived meanwhile is handled at the top
                    // of the loop, before these PDUs.
                    if ready.is_readable() && want_read && !signals.is_pending() {
                        match self.read_some() {
                            Ok(true) => {}
                            Ok(false) => {
                                self.wait_blocking(&mut done_rx).await;
                                return "connection closed by initiator".into();
                            }
                            Err(e) => {
                                self.wait_blocking(&mut done_rx).await;
                                return format!("read failed: {e}");
                            }
                        }
                    }
                }
                Some(done) = done_rx.recv() => {
                    self.in_flight_blocking -= 1;
                    self.core.completed(done);
                    // Collect every completion that is already waiting.
                    while let Ok(done) = done_rx.try_recv() {
                        self.in_flight_blocking -= 1;
                        self.core.completed(done);
                    }
                }
                done = self.store_ios.next(), if !self.store_ios.is_empty() => {
                    self.core.completed(done);
                    while let Some(done) = self.store_ios.ready() {
                        self.core.completed(done);
                    }
                }
                ready = self.ring.completions(), if self.ring.in_flight() > 0 => {
                    if let Err(e) = ready {
                        self.ring_failed(&e);
                    }
                    // Taken in pump() at the top of the loop.
                }
                _ = &mut keepalive, if slot.is_armed() => {
                    slot.fired();
                    self.core.handle_timeout(Instant::now());
                }
                _ = shutdown.changed(), if !shutting_down => {
                    shutting_down = true;
                    self.core.request_logout(Instant::now(), self.grace());
                }
                // Handled at the top of the loop.
                _ = signals.wait() => {}
            }
        }
    }

    fn grace(&self) -> Duration {
        self.grace
    }

    /// Reads what is available and feeds every whole PDU to the protocol.
    /// Ok(false) at EOF.
    fn read_some(&mut self) -> io::Result<bool> {
        // A bounded number of reads per wakeup, so a client that keeps
        // sending cannot keep us from writing responses.
        for _ in 0..READS_PER_WAKEUP {
            let most = self.decoder.make_room(&mut self.rbuf);
            let drained = match read_marking_drained(&self.stream, &mut self.rbuf, most) {
                Ok(Read::Eof) => return Ok(false),
                Ok(Read::Bytes { drained }) => drained,
                Ok(Read::Nothing) => return Ok(true),
                Err(e) => return Err(e),
            };
            if !self.take_frames() {
                return Ok(true);
            }
            // Stop reading while a client leaves its responses unread.
            if drained || self.out.queued_bytes() >= OUT_HIGH_WATER {
                return Ok(true);
            }
        }
        Ok(true)
    }

    /// Feeds every whole PDU read to the protocol; false once the
    /// connection is closing (what follows is not read).
    fn take_frames(&mut self) -> bool {
        if self.quickack {
            let _ = socket2::SockRef::from(&self.stream).set_quickack(true);
        }
        // The PDUs of one read arrived together: one clock reading for
        // all of them (their arrival for the latency histogram, and the
        // protocol's timers), not one each.
        let arrived = Instant::now();
        loop {
            match self.decoder.decode(&mut self.rbuf) {
                Ok(Some(frame)) => {
                    self.count(&frame);
                    // The core does the PDU's work before the next PDU
                    // is seen, so a task management request finds
                    // commands in the state their order on the wire
                    // implies.
                    self.core.handle_frame(frame, arrived);
                    self.take_actions();
                    self.queue_transmit();
                }
                Ok(None) => return true,
                Err(e) => {
                    self.core.handle_frame_error(&e);
                    self.take_actions();
                }
            }
            if self.core.is_closing() {
                return false;
            }
        }
    }

    /// Whether the connection, about to sleep, may spin first.
    fn may_spin(
        &self,
        want_read: bool,
        want_write: bool,
        signals: &SessionSignals,
        shutdown: &watch::Receiver<bool>,
    ) -> bool {
        Idle {
            want_read,
            want_write,
            store_ios: !self.store_ios.is_empty(),
            interrupted: signals.is_pending() || shutdown.has_changed().unwrap_or(false),
        }
        .may_spin()
    }

    /// Latency mode (crate::busy_poll): polls the socket, the ring and
    /// the blocking pool's channel until one has something, another
    /// session signals, the target shuts down or the budget is spent;
    /// what it read or took is handed to the protocol here. `None`: the
    /// budget ran out, and the connection sleeps as usual.
    fn spin(
        &mut self,
        signals: &SessionSignals,
        shutdown: &watch::Receiver<bool>,
        done_rx: &mut mpsc::UnboundedReceiver<Done>,
    ) -> Option<Found> {
        let start = Instant::now();
        let (found, end) = busy_poll::spin(start, self.busy_poll, Instant::now, || {
            self.poll_once(signals, shutdown, done_rx)
        });
        self.spins.record(found.is_some(), end - start);
        found
    }

    /// One turn of a spin.
    fn poll_once(
        &mut self,
        signals: &SessionSignals,
        shutdown: &watch::Receiver<bool>,
        done_rx: &mut mpsc::UnboundedReceiver<Done>,
    ) -> Option<Found> {
        if signals.is_pending() || shutdown.has_changed().unwrap_or(false) {
            return Some(Found::Work);
        }
        if self.ring.in_flight() > 0 && self.drive_ring() {
            return Some(Found::Work);
        }
        if self.in_flight_blocking > 0 {
            if let Ok(done) = done_rx.try_recv() {
                self.in_flight_blocking -= 1;
                self.core.completed(done);
                return Some(Found::Work);
            }
        }
        let most = self.decoder.make_room(&mut self.rbuf);
        match busy_poll::recv_now(&self.stream, &mut self.rbuf, most) {
            Ok(Read::Nothing) => None,
            Ok(Read::Bytes { .. }) => {
                self.take_frames();
                Some(Found::Work)
            }
            Ok(Read::Eof) => Some(Found::Closed),
            Err(e) => Some(Found::Failed(e)),
        }
    }

    /// Does what the core handed out: commands for the blocking pool,
    /// medium access for the ring, signals for other sessions.
    #[inline]
    fn take_actions(&mut self) {
        if !self.core.has_actions() {
            return;
        }
        while let Some(action) = self.core.poll_action() {
            match action {
                Action::Run(cmd) => self.run_blocking(move || cmd.run()),
                Action::Stage(staged) => self.stage(staged),
                Action::Signal { to, signal } => self.send_signal(&to, signal),
            }
        }
    }

    /// Delivers a signal to other sessions. One that carries a wait is
    /// set to wake this connection when the last recipient releases it
    /// (the core then lets its task management response go).
    fn send_signal(&self, to: &Recipients, signal: SessionSignal) {
        if let SessionSignal::Abort {
            hold: Some(hold), ..
        } = &signal
        {
            let me = Arc::downgrade(&self.session.signals);
            let wake: Wake = Arc::new(move || {
                if let Some(s) = me.upgrade() {
                    s.wake();
                }
            });
            hold.on_release(wake);
        }
        self.session.signal_others(|n| to.includes(n), signal);
    }

    /// While the connection closes, commands it releases are not started
    /// (the initiator's recovery retries them); signals still go out.
    fn signals_at_close(&mut self) {
        while let Some(action) = self.core.poll_action() {
            if let Action::Signal { to, signal } = action {
                self.send_signal(&to, signal);
            }
        }
    }

    /// Queues the protocol's PDUs for the socket.
    fn queue_transmit(&mut self) {
        while let Some(p) = self.core.poll_transmit() {
            self.push_out(p);
        }
    }

    /// Takes the core's actions, drives the ring (submits what commands
    /// queued on it, finishes those it completed, which may hand out
    /// more) and queues the protocol's PDUs for sending.
    fn pump(&mut self) {
        loop {
            self.take_actions();
            if !self.drive_ring() {
                break;
            }
        }
        self.queue_transmit();
        // Before the write: a client that has its status has been timed.
        self.core.statuses_sent(Instant::now);
        if !self.out.is_empty() {
            // Opportunistic write: most responses fit the socket buffer.
            let _ = self.flush_some();
        }
    }

    /// Puts a staged command's medium access on the ring; a full ring, or
    /// none (io_uring refused: staging stops), sends it to the blocking
    /// pool.
    fn stage(&mut self, staged: Staged) {
        if let Some(io) = staged.start_async() {
            return self.run_async(staged, io);
        }
        let Some(ring) = self.ring.get(self.queue_depth) else {
            self.core.set_staging(false);
            return self.run_blocking(move || staged.run_here());
        };
        match ring.push(staged) {
            None => self.ring_commands += 1,
            Some(staged) => self.run_blocking(move || staged.run_here()),
        }
    }

    /// Awaits a store's own asynchronous request (RBD) on this task: no
    /// thread waits, and the store's completion wakes the connection
    /// itself (crate::store_io). A closing connection waits for it like
    /// for the blocking pool's commands.
    fn run_async(&mut self, staged: Staged, io: ironlun_backend::aio::MediumFuture) {
        self.async_commands += 1;
        self.store_ios.push(staged, io);
    }

    /// Runs work that may block on the blocking pool; its result comes
    /// back on the completion channel.
    fn run_blocking(&mut self, work: impl FnOnce() -> Done + Send + 'static) {
        self.in_flight_blocking += 1;
        let tx = self.done_tx.clone();
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(work());
        });
    }

    /// Submits what waits on the ring and finishes the commands it
    /// completed; whether any finished.
    fn drive_ring(&mut self) -> bool {
        let Some(ring) = self.ring.made() else {
            return false;
        };
        let mut done = std::mem::take(&mut self.ring_done);
        if let Err(e) = ring.drive(&mut done) {
            self.ring_failed(&e);
        }
        let any = !done.is_empty();
        for c in done.drain(..) {
            self.core.completed(c.job.finish(c.result));
        }
        self.ring_done = done;
        any
    }

    /// The ring cannot go on (the kernel refused a submission): the
    /// connection ends, and the initiator's recovery retries its commands.
    fn ring_failed(&mut self, e: &io::Error) {
        warn!(peer = %self.peer, "io_uring failed: {e}");
        self.broken
            .get_or_insert_with(|| format!("io_uring failed: {e}"));
    }

    /// Acts on what other sessions sent; returns why to close, if one of
    /// them ends this session (the signals after it are dropped, which
    /// releases any wait they carry).
    fn take_signals(&mut self) -> Option<&'static str> {
        for sig in self.session.signals.take() {
            match sig {
                SessionSignal::Close(why) => return Some(why),
                SessionSignal::Remap => self.remap(),
                SessionSignal::Logout(why) => {
                    info!(peer = %self.peer, "asking the initiator to log out: {why}");
                    self.core.request_logout(Instant::now(), self.grace());
                }
                SessionSignal::Abort { lun, cleared, hold } => {
                    let n = self.core.abort_for_other(lun, cleared, hold);
                    debug!(peer = %self.peer, ?lun, "{n} tasks ended by another initiator's task management");
                }
            }
        }
        None
    }

    /// Takes the LUN map the running configuration now gives this
    /// session's initiator (its target gone: no LUN at all; the operator
    /// logs such sessions out).
    fn remap(&mut self) {
        if self.session.view.is_none() {
            return;
        }
        let view = self
            .session
            .current_view()
            .unwrap_or_else(|| Arc::new(LunMap::default()));
        if self.core.set_map(view.clone()) {
            info!(peer = %self.peer, luns = ?view.numbers(), "LUN map changed");
        }
        self.session.view = Some(view);
    }

    /// Counts a SCSI command for the session listing: one command, and
    /// the bytes it asks to move (its Expected Data Transfer Length).
    #[inline]
    fn count(&self, frame: &Frame) {
        let b = frame.bhs.as_bytes();
        if frame.bhs.opcode() != Opcode::SCSI_COMMAND {
            return;
        }
        let info = &self.session.info;
        info.commands.fetch_add(1, Ordering::Relaxed);
        let edtl = u64::from(u32::from_be_bytes([b[20], b[21], b[22], b[23]]));
        // Flags byte: R (0x40) and W (0x20), RFC 7143 §11.3.1.
        if b[1] & 0x40 != 0 {
            info.read_bytes.fetch_add(edtl, Ordering::Relaxed);
        }
        if b[1] & 0x20 != 0 {
            info.write_bytes.fetch_add(edtl, Ordering::Relaxed);
        }
    }

    /// Waits for commands running on the blocking pool or the ring, so
    /// that a write the initiator issued finishes before the connection is
    /// gone. Other sessions' aborts still end this session's tasks
    /// meanwhile, and their waits are released as those tasks end.
    async fn wait_blocking(&mut self, done_rx: &mut mpsc::UnboundedReceiver<Done>) {
        let deadline = tokio::time::Instant::now() + CLOSE_GRACE;
        self.core.connection_ending();
        let _ = self.take_signals();
        self.drive_ring();
        self.signals_at_close();
        while self.in_flight() > 0 {
            let ring_busy = self.ring.in_flight() > 0;
            let store_busy = !self.store_ios.is_empty();
            let next = tokio::time::timeout_at(deadline, async {
                tokio::select! {
                    c = done_rx.recv() => c.map(|d| (d, true)),
                    d = self.store_ios.next(), if store_busy => Some((d, false)),
                    _ = self.ring.completions(), if ring_busy => None,
                }
            })
            .await;
            match next {
                Ok(Some((done, pooled))) => {
                    if pooled {
                        self.in_flight_blocking -= 1;
                    }
                    self.core.completed(done);
                }
                Ok(None) => {
                    self.drive_ring();
                }
                Err(_) => {
                    warn!(
                        peer = %self.peer,
                        "{} commands still running at close",
                        self.in_flight()
                    );
                    self.ring.abandon();
                    self.store_ios.abandon();
                    return;
                }
            }
            if self.session.signals.is_pending() {
                let _ = self.take_signals();
            }
            self.signals_at_close();
        }
    }

    /// Commands whose medium access has not come back yet.
    fn in_flight(&self) -> usize {
        self.in_flight_blocking + self.ring.in_flight() + self.store_ios.len()
    }

    /// A Logout Response says the session's cleanup is done (RFC 7143
    /// §11.14): the nexus leaves its LUs before it goes out, and the
    /// SPC-2 reservations it held in stores shared with other gateways
    /// are cleared there first (waited for off this thread, at most
    /// [`CLOSE_GRACE`]), so that the initiator's next command through
    /// another gateway finds them gone (SPC-2 §5.5.1). The session's end
    /// detaches the nexus again, which then finds nothing.
    async fn end_nexus_before_logout_response(&mut self) {
        let Some(view) = &self.session.view else {
            return;
        };
        let releases = view.end_nexus(self.session.nexus);
        if releases.is_empty() {
            return;
        }
        let wait = tokio::task::spawn_blocking(move || releases.wait());
        if tokio::time::timeout(CLOSE_GRACE, wait).await.is_err() {
            warn!(
                peer = %self.peer,
                "logout answered before the shared store had the release of its SPC-2 reservation (waited {CLOSE_GRACE:?})"
            );
        }
    }

    /// Flushes queued PDUs (the logout response, a Reject) and lets
    /// running commands end, then closes.
    async fn finish(&mut self, done_rx: &mut mpsc::UnboundedReceiver<Done>) {
        self.wait_blocking(done_rx).await;
        self.queue_transmit();
        self.core.statuses_sent(Instant::now);
        let deadline = tokio::time::Instant::now() + CLOSE_GRACE;
        while !self.out.is_empty() {
            match self.flush_some() {
                Ok(true) => break,
                Ok(false) => {
                    let writable = tokio::time::timeout_at(deadline, self.stream.writable()).await;
                    if !matches!(writable, Ok(Ok(()))) {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = self.stream.shutdown().await;
    }
}

/// The connection's socket as the outbox's [`Sink`]: vectored writes, and
/// `sendfile` for file ranges, so that the kernel hands page-cache pages
/// to the socket and user space never copies them.
struct SocketSink<'a> {
    stream: &'a TcpStream,
    peer: SocketAddr,
    warned_short_file: &'a mut bool,
    file_bytes: &'a mut u64,
}

impl Sink for SocketSink<'_> {
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.stream.try_write_vectored(bufs)
    }

    fn send_file(&mut self, range: &FileRange) -> io::Result<usize> {
        let mut offset = range.offset();
        let sent = self.stream.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(self.stream, range.file(), Some(&mut offset), range.len())
                .map_err(io::Error::from)
        })?;
        if sent > 0 || range.is_empty() {
            *self.file_bytes += sent as u64;
            return Ok(sent);
        }
        // The file ends before the range: it shrank behind the target's
        // back. The PDU's length is on the wire already, so the rest of
        // its data goes as zeros, as reading the range would give.
        if !std::mem::replace(self.warned_short_file, true) {
            warn!(
                peer = %self.peer,
                offset = range.offset(),
                "the LUN's file ends before the data being sent (shrunk behind the target's back?); sending zeros"
            );
        }
        let fill = FILL.get(..range.len().min(FILL.len())).unwrap_or(&[]);
        self.stream.try_write(fill)
    }
}
