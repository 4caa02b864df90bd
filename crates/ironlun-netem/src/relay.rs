//! The relay: accepts TCP connections, connects each to the upstream
//! address, and moves bytes both ways through the link model.
//!
//! Threads, not async tasks: a delivery is due at a time with
//! microsecond meaning (a 1 ms one-way delay, a 64 KiB chunk at 1 Gbit/s
//! is 0.5 ms), and a thread sleeping until an instant is accurate to the
//! kernel's timer slack (~50 µs), where a tokio timer rounds up to whole
//! milliseconds. Each connection has a reader and a writer per direction;
//! they meet in a queue bounded by the window (or the relay buffer).

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};
use tracing::{debug, info, warn};

use crate::host::{cuts, HostTime, Messages};
use crate::model::{Shaper, Window};
use crate::spec::LinkSpec;

/// Connections relayed at once; more are refused (closed on accept).
pub const MAX_CONNECTIONS: usize = 256;
/// How often waiting threads look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// Counters since the relay started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RelayStats {
    /// Connections accepted in all.
    pub connections: u64,
    /// Connections open now.
    pub active: usize,
    /// Bytes delivered client → server.
    pub bytes_up: u64,
    /// Bytes delivered server → client.
    pub bytes_down: u64,
}

struct Shared {
    spec: LinkSpec,
    upstream: SocketAddr,
    stop: AtomicBool,
    connections: AtomicU64,
    active: AtomicUsize,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    /// Open connections' sockets, to close them on `cut`.
    sockets: Mutex<HashMap<u64, [TcpStream; 2]>>,
}

impl Shared {
    fn sockets(&self) -> MutexGuard<'_, HashMap<u64, [TcpStream; 2]>> {
        self.sockets.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running relay. Dropping it cuts every connection.
pub struct Relay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    _awake: Option<crate::awake::AwakeGuard>,
}

impl Relay {
    /// A relay for this host's initiators: listens on a free loopback
    /// port of `upstream`'s family (127.0.0.1 or ::1), as [`Relay::start`].
    pub fn start_on_loopback(upstream: SocketAddr, spec: LinkSpec) -> io::Result<Relay> {
        let ip: IpAddr = if upstream.is_ipv4() {
            Ipv4Addr::LOCALHOST.into()
        } else {
            Ipv6Addr::LOCALHOST.into()
        };
        Relay::start(SocketAddr::new(ip, 0), upstream, spec)
    }

    /// Listens on `listen` (port 0: the kernel picks) and relays each
    /// connection to `upstream` through `spec`.
    pub fn start(listen: SocketAddr, upstream: SocketAddr, spec: LinkSpec) -> io::Result<Relay> {
        let sock = Socket::new(Domain::for_address(listen), Type::STREAM, None)?;
        sock.set_reuse_address(true)?;
        sock.bind(&listen.into())?;
        sock.listen(128)?;
        let listener: TcpListener = sock.into();
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            spec,
            upstream,
            stop: AtomicBool::new(false),
            connections: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            bytes_up: AtomicU64::new(0),
            bytes_down: AtomicU64::new(0),
            sockets: Mutex::new(HashMap::new()),
        });
        let s = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("netem-accept".into())
            .spawn(move || accept_loop(listener, s))?;
        info!(%addr, %upstream, "netem relay: {}", shared.spec.describe());
        let awake = shared.spec.keep_awake.then(crate::awake::acquire);
        Ok(Relay {
            addr,
            shared,
            acceptor: Some(acceptor),
            _awake: awake,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn spec(&self) -> &LinkSpec {
        &self.shared.spec
    }

    pub fn stats(&self) -> RelayStats {
        RelayStats {
            connections: self.shared.connections.load(Ordering::Relaxed),
            active: self.shared.active.load(Ordering::Relaxed),
            bytes_up: self.shared.bytes_up.load(Ordering::Relaxed),
            bytes_down: self.shared.bytes_down.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting (new connections are refused by the kernel) and
    /// closes every relayed connection: a pulled cable, as far as the
    /// endpoints can tell.
    pub fn cut(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        for [a, b] in self.shared.sockets().drain().map(|(_, v)| v) {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut next_id = 0u64;
    while !shared.stop.load(Ordering::SeqCst) {
        let (client, peer) = match listener.accept() {
            Ok(pair) => pair,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(e) => {
                warn!("netem accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if shared.active.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            warn!(%peer, "netem: refusing a connection, {MAX_CONNECTIONS} open");
            continue;
        }
        next_id += 1;
        if let Err(e) = start_connection(next_id, client, &shared) {
            warn!(%peer, "netem: cannot relay to {}: {e}", shared.upstream);
        }
    }
}

fn connect_upstream(shared: &Shared) -> io::Result<TcpStream> {
    let sock = Socket::new(Domain::for_address(shared.upstream), Type::STREAM, None)?;
    sock.connect_timeout(&shared.upstream.into(), Duration::from_secs(5))?;
    Ok(sock.into())
}

/// Counts an open connection; the last of its four threads to finish
/// ends it.
struct ConnGuard {
    id: u64,
    shared: Arc<Shared>,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.shared.active.fetch_sub(1, Ordering::Relaxed);
        self.shared.sockets().remove(&self.id);
        debug!(id = self.id, "netem connection closed");
    }
}

fn start_connection(id: u64, client: TcpStream, shared: &Arc<Shared>) -> io::Result<()> {
    client.set_nonblocking(false)?;
    let server = connect_upstream(shared)?;
    for s in [&client, &server] {
        s.set_nodelay(true)?;
    }
    shared.connections.fetch_add(1, Ordering::Relaxed);
    shared.active.fetch_add(1, Ordering::Relaxed);
    shared
        .sockets()
        .insert(id, [client.try_clone()?, server.try_clone()?]);
    let guard = Arc::new(ConnGuard {
        id,
        shared: shared.clone(),
    });
    let spec = &shared.spec;
    // Credit comes back when the bytes arrive, plus the ACK's trip when a
    // window is emulated.
    let (ack_up, ack_down) = match spec.window {
        Some(_) => (spec.delay_down, spec.delay_up),
        None => (Duration::ZERO, Duration::ZERO),
    };
    // Throughput through the credit loop is credit per round trip; what
    // the relay's small receive buffer holds while credit is exhausted
    // does not add to it, so the credit is the window itself.
    let window_bytes = spec.buffer_bytes();
    let seed = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let up = Arc::new(Direction::new(window_bytes));
    let down = Arc::new(Direction::new(window_bytes));
    let sizes = (spec.chunk_bytes(), spec.piece_bytes());
    // The hosts' time per command is held before the link, client to
    // server: a command's cycle gains it whichever end spends it.
    let host_up = spec.host.as_ref().map(|h| Host {
        messages: Messages::new(h.framer.clone()),
        time: HostTime::new(h.delay, h.busy, h.servers),
        then: h.then.map(|s| s.times()),
    });
    let mut hosts = [host_up, None].into_iter();
    let plan = [
        (
            "up",
            client.try_clone()?,
            server.try_clone()?,
            up,
            Shaper::new(spec.rate_bps, spec.delay_up, spec.jitter, seed),
            ack_up,
        ),
        (
            "down",
            server,
            client,
            down,
            Shaper::new(spec.rate_bps, spec.delay_down, spec.jitter, seed ^ 1),
            ack_down,
        ),
    ];
    for (name, src, dst, dir, shaper, ack) in plan {
        let host = hosts.next().flatten();
        let counter = if name == "up" {
            Counter::Up
        } else {
            Counter::Down
        };
        let (src2, dst2) = (src.try_clone()?, dst.try_clone()?);
        let (d1, d2) = (dir.clone(), dir);
        let (g1, g2) = (guard.clone(), guard.clone());
        let s1 = shared.clone();
        std::thread::Builder::new()
            .name(format!("netem-{name}-r"))
            .spawn(move || {
                read_side(src, dst2, &d1, (shaper, host), sizes, &s1);
                drop(g1);
            })?;
        let s2 = shared.clone();
        std::thread::Builder::new()
            .name(format!("netem-{name}-w"))
            .spawn(move || {
                write_side(dst, src2, &d2, ack, counter, &s2);
                drop(g2);
            })?;
    }
    Ok(())
}

/// How long before a delivery the writer stops sleeping. A thread that
/// sleeps wakes a little late (timer slack, and on a virtual machine the
/// vCPU's own wake-up); the last stretch is a busy wait so deliveries are
/// on time. Until the final [`SPIN_HARD`] it yields, so the initiator and
/// target (on the same two cores, when the relay is in-process) get the
/// CPU whenever they want it.
const SPIN: Duration = Duration::from_micros(300);
/// The final stretch, spun without yielding: a yield can cost a whole
/// scheduler slice when another thread takes the CPU.
const SPIN_HARD: Duration = Duration::from_micros(40);

/// Returns at `due`: sleeps while it is far, spins when it is near.
fn wait_until(due: Instant) {
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else if left > SPIN_HARD {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Asks the kernel to wake this thread's sleeps within a microsecond
/// instead of the default 50 µs timer slack: deliveries are due at
/// precise instants.
fn fine_timers() {
    // Best effort: where refused, sleeps keep the default slack.
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1000));
}

#[derive(Clone, Copy)]
enum Counter {
    Up,
    Down,
}

/// One direction of one connection: chunks on the link, and the credit.
struct Direction {
    state: Mutex<DirState>,
    cv: Condvar,
}

struct DirState {
    window: Window,
    queue: VecDeque<(Instant, Vec<u8>)>,
    /// The source ended cleanly: deliver what is queued, then half-close.
    eof: bool,
    /// Something failed: close both ways.
    failed: bool,
}

impl Direction {
    fn new(limit: usize) -> Direction {
        Direction {
            state: Mutex::new(DirState {
                window: Window::new(limit),
                queue: VecDeque::new(),
                eof: false,
                failed: false,
            }),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, DirState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fail(&self) {
        self.lock().failed = true;
        self.cv.notify_all();
    }
}

/// The host time one direction imposes: where its marked messages begin,
/// and the host that holds them.
struct Host {
    messages: Messages,
    time: HostTime,
    /// The stage after the host (a disk), if any.
    then: Option<HostTime>,
}

impl Host {
    /// When a marked message that arrived `now` leaves both stages.
    fn release(&mut self, now: Instant) -> Instant {
        let t = self.time.schedule(now);
        match &mut self.then {
            Some(stage) => stage.schedule(t),
            None => t,
        }
    }
}

/// Reads from `src` while the window allows and queues each chunk with
/// its due time (after the host's time and any disk stage, for a piece
/// that begins a marked message).
fn read_side(
    mut src: TcpStream,
    dst: TcpStream,
    dir: &Direction,
    (mut shaper, mut host): (Shaper, Option<Host>),
    (chunk, piece): (usize, usize),
    shared: &Shared,
) {
    fine_timers();
    let piece = piece.max(1);
    let mut buf = vec![0u8; chunk];
    let min_read = chunk.min(dir.lock().window.limit() / 8).max(1);
    loop {
        let allowed = {
            let mut g = dir.lock();
            loop {
                if g.failed || shared.stop.load(Ordering::Relaxed) {
                    drop(g);
                    let _ = dst.shutdown(Shutdown::Both);
                    return;
                }
                let now = Instant::now();
                let a = g.window.available(now);
                // When credit is short, wait for a useful amount rather
                // than cut the stream into slivers the writer must
                // schedule one by one.
                if a >= min_read {
                    break a;
                }
                let left = g
                    .window
                    .next_return()
                    .map(|t| t.saturating_duration_since(now));
                if left.is_some_and(|l| l <= SPIN) {
                    // Credit is due soon: spin for it (see SPIN).
                    drop(g);
                    std::thread::yield_now();
                    g = dir.lock();
                    continue;
                }
                let wait = left.map_or(POLL, |l| (l - SPIN).min(POLL));
                g = dir
                    .cv
                    .wait_timeout(g, wait)
                    .map_or_else(|e| e.into_inner().0, |r| r.0);
            }
        };
        let want = allowed.min(buf.len());
        let n = match src.read(buf.get_mut(..want).unwrap_or_default()) {
            Ok(0) => {
                dir.lock().eof = true;
                dir.cv.notify_all();
                return;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                dir.fail();
                let _ = dst.shutdown(Shutdown::Both);
                return;
            }
        };
        // Each piece leaves the link when its own bytes are serialised,
        // not when the whole chunk is; one that begins a marked message
        // enters the link when the host (and any disk stage) is done with
        // it.
        let now = Instant::now();
        let data = buf.get(..n).unwrap_or_default();
        let marks = host
            .as_mut()
            .map_or_else(Vec::new, |h| h.messages.marks(data));
        {
            let mut g = dir.lock();
            g.window.take(n);
            for (from, to, marked) in cuts(n, piece, &marks) {
                let arrival = match host.as_mut() {
                    Some(h) if marked => h.release(now),
                    _ => now,
                };
                let due = shaper.schedule(arrival, to - from);
                let p = data.get(from..to).unwrap_or_default();
                g.queue.push_back((due, p.to_vec()));
            }
        }
        dir.cv.notify_all();
    }
}

/// Pieces due within this long go out together, early by at most this
/// much. A real link's receiver takes packets in bursts too
/// (interrupt coalescing); one write per piece at tens of thousands of
/// small PDUs a second would make the relay, not the link, the limit.
pub const COALESCE: Duration = Duration::from_micros(25);
/// At most this many bytes per coalesced write.
const COALESCE_BYTES: usize = 1 << 20;

/// Delivers queued pieces when they are due and gives their credit back.
fn write_side(
    mut dst: TcpStream,
    src: TcpStream,
    dir: &Direction,
    ack_delay: Duration,
    counter: Counter,
    shared: &Shared,
) {
    fine_timers();
    let mut batch: Vec<Vec<u8>> = Vec::new();
    loop {
        let next = {
            let mut g = dir.lock();
            loop {
                if g.failed || shared.stop.load(Ordering::Relaxed) {
                    break None;
                }
                if let Some(&(due, _)) = g.queue.front() {
                    break Some(due);
                }
                if g.eof {
                    break None;
                }
                g = dir
                    .cv
                    .wait_timeout(g, POLL)
                    .map_or_else(|e| e.into_inner().0, |r| r.0);
            }
        };
        let Some(due) = next else {
            let clean = {
                let g = dir.lock();
                g.eof && !g.failed && !shared.stop.load(Ordering::Relaxed)
            };
            if clean {
                let _ = dst.shutdown(Shutdown::Write);
            } else {
                let _ = dst.shutdown(Shutdown::Both);
                let _ = src.shutdown(Shutdown::Both);
            }
            return;
        };
        // A piece may leave up to COALESCE early: waiting out a few
        // microseconds costs a spin per piece, while the rate over any
        // longer span is kept (due times come from the shaper, not from
        // when pieces left).
        wait_until(due.checked_sub(COALESCE).unwrap_or(due));
        // Everything due by now (the relay may be behind) or within the
        // coalescing slack goes out in one write.
        let horizon = Instant::now() + COALESCE;
        let mut n = 0usize;
        {
            let mut g = dir.lock();
            while n < COALESCE_BYTES {
                match g.queue.front() {
                    Some((at, _)) if *at <= horizon => {}
                    _ => break,
                }
                if let Some((_, data)) = g.queue.pop_front() {
                    n += data.len();
                    batch.push(data);
                }
            }
        }
        if write_batch(&mut dst, &batch).is_err() {
            dir.fail();
            let _ = src.shutdown(Shutdown::Both);
            return;
        }
        batch.clear();
        let total = match counter {
            Counter::Up => &shared.bytes_up,
            Counter::Down => &shared.bytes_down,
        };
        total.fetch_add(n as u64, Ordering::Relaxed);
        dir.lock().window.give_back(Instant::now() + ack_delay, n);
        dir.cv.notify_all();
    }
}

/// Writes every piece of `batch`, in order, with as few system calls as
/// the socket takes.
fn write_batch(dst: &mut TcpStream, batch: &[Vec<u8>]) -> io::Result<()> {
    let (mut first, mut offset) = (0usize, 0usize);
    loop {
        // Skip what is written (and empty pieces).
        while batch.get(first).is_some_and(|b| offset >= b.len()) {
            first += 1;
            offset = 0;
        }
        if first >= batch.len() {
            return Ok(());
        }
        let slices: Vec<io::IoSlice<'_>> = batch
            .iter()
            .skip(first)
            .take(64)
            .enumerate()
            .map(|(i, b)| {
                let from = if i == 0 { offset } else { 0 };
                io::IoSlice::new(b.get(from..).unwrap_or_default())
            })
            .collect();
        let mut written = match dst.write_vectored(&slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(w) => w,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        while written > 0 {
            let Some(len) = batch.get(first).map(Vec::len) else {
                break;
            };
            let used = written.min(len.saturating_sub(offset));
            offset += used;
            written -= used;
            if offset >= len {
                first += 1;
                offset = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces of many sizes (empty ones too) arrive whole and in order.
    #[test]
    fn write_batch_writes_every_byte_in_order() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        let batch: Vec<Vec<u8>> = (0..200u32)
            .map(|i| (0..(i % 7) * 1000).map(|j| (i + j) as u8).collect())
            .collect();
        let want: Vec<u8> = batch.concat();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            got
        });
        write_batch(&mut a, &batch).unwrap();
        drop(a);
        let got = reader.join().unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes differ");
    }
}
