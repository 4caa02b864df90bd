//! An iperf-like TCP throughput test: bulk data over one or more streams,
//! in either direction, measured where it is received (the sender's count
//! would include what still sits in buffers). With a relay in between it
//! measures the emulated link, which is the TCP baseline of every study.
//!
//! Wire format: the client opens a connection and sends a 12-byte hello
//! (`ILTB`, direction 0 = up / 1 = down, three zero bytes, duration in ms
//! as u32 BE). For up the client sends until the duration ends and
//! half-closes; the server answers with the byte count and the
//! nanoseconds from first to last byte (two u64 BE). For down the server
//! sends and half-closes and the client measures.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use socket2::{Domain, Socket, Type};
use tracing::debug;

use crate::spec::LinkSpec;

const MAGIC: &[u8; 4] = b"ILTB";
/// Longest test a server accepts.
pub const MAX_DURATION: Duration = Duration::from_secs(600);
/// Streams a server serves at once.
pub const MAX_STREAMS: usize = 64;
const BUF: usize = 128 << 10;

/// Which way the data flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client to server (initiator to target: writes).
    Up,
    /// Server to client (target to initiator: reads).
    Down,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
        }
    }
}

/// Bytes received and the time from first to last byte.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Received {
    pub bytes: u64,
    pub seconds: f64,
}

impl Received {
    pub fn mb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / self.seconds / 1e6
        } else {
            0.0
        }
    }
}

/// A socket with both buffers set to `window` (the TCP window), set
/// before connect/listen so the window scale matches.
fn socket_for(addr: SocketAddr, window: Option<u32>) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    if let Some(w) = window {
        s.set_send_buffer_size(w as usize)?;
        s.set_recv_buffer_size(w as usize)?;
    }
    Ok(s)
}

/// A listening socket for [`serve`].
pub fn listen(addr: SocketAddr, window: Option<u32>) -> io::Result<TcpListener> {
    let s = socket_for(addr, window)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(64)?;
    Ok(s.into())
}

/// Reads until EOF: what arrived and over how long.
fn receive(s: &mut TcpStream) -> io::Result<Received> {
    let mut buf = vec![0u8; BUF];
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut bytes = 0u64;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let now = Instant::now();
                first.get_or_insert(now);
                last = now;
                bytes += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let seconds = first.map_or(0.0, |f| (last - f).as_secs_f64());
    Ok(Received { bytes, seconds })
}

/// Writes for `time`, then half-closes.
fn send_for(s: &mut TcpStream, time: Duration) -> io::Result<()> {
    let buf = vec![0x49u8; BUF];
    let end = Instant::now() + time;
    while Instant::now() < end {
        s.write_all(&buf)?;
    }
    s.shutdown(Shutdown::Write)
}

fn serve_one(mut s: TcpStream) -> io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut hello = [0u8; 12];
    s.read_exact(&mut hello)?;
    let (magic, rest) = hello.split_at(4);
    if magic != MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a tcpbench client",
        ));
    }
    let ms = rest
        .get(4..8)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map_or(0, u32::from_be_bytes);
    let time = Duration::from_millis(u64::from(ms)).min(MAX_DURATION);
    match rest.first() {
        Some(0) => {
            s.set_read_timeout(Some(MAX_DURATION + Duration::from_secs(30)))?;
            let r = receive(&mut s)?;
            let mut answer = [0u8; 16];
            answer[..8].copy_from_slice(&r.bytes.to_be_bytes());
            let ns = (r.seconds * 1e9) as u64;
            answer[8..].copy_from_slice(&ns.to_be_bytes());
            s.write_all(&answer)
        }
        Some(1) => send_for(&mut s, time),
        _ => Err(io::Error::new(io::ErrorKind::InvalidData, "bad direction")),
    }
}

/// Serves tcpbench clients on `listener` until `stop` is set.
pub fn serve(listener: TcpListener, stop: Arc<AtomicBool>) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, peer)) => {
                if active.load(Ordering::Relaxed) >= MAX_STREAMS {
                    debug!(%peer, "tcpbench: too many streams");
                    continue;
                }
                s.set_nonblocking(false)?;
                let _ = s.set_nodelay(true);
                active.fetch_add(1, Ordering::Relaxed);
                let a = active.clone();
                std::thread::spawn(move || {
                    if let Err(e) = serve_one(s) {
                        debug!(%peer, "tcpbench stream: {e}");
                    }
                    a.fetch_sub(1, Ordering::Relaxed);
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One stream to a tcpbench server.
pub fn stream(
    addr: SocketAddr,
    dir: Direction,
    time: Duration,
    window: Option<u32>,
) -> io::Result<Received> {
    let sock = socket_for(addr, window)?;
    sock.connect_timeout(&addr.into(), Duration::from_secs(10))?;
    let mut s: TcpStream = sock.into();
    s.set_nodelay(true)?;
    let ms = u32::try_from(time.as_millis()).unwrap_or(u32::MAX);
    let mut hello = [0u8; 12];
    hello[..4].copy_from_slice(MAGIC);
    hello[4] = match dir {
        Direction::Up => 0,
        Direction::Down => 1,
    };
    hello[8..].copy_from_slice(&ms.to_be_bytes());
    s.write_all(&hello)?;
    match dir {
        Direction::Up => {
            send_for(&mut s, time)?;
            let mut answer = [0u8; 16];
            s.read_exact(&mut answer)?;
            let (b, ns) = answer.split_at(8);
            let get = |x: &[u8]| <[u8; 8]>::try_from(x).map_or(0, u64::from_be_bytes);
            Ok(Received {
                bytes: get(b),
                seconds: get(ns) as f64 / 1e9,
            })
        }
        Direction::Down => receive(&mut s),
    }
}

/// `streams` parallel streams; the aggregate is total bytes over the
/// longest stream's time.
pub fn run(
    addr: SocketAddr,
    dir: Direction,
    streams: usize,
    time: Duration,
    window: Option<u32>,
) -> io::Result<Received> {
    let handles: Vec<_> = (0..streams.clamp(1, MAX_STREAMS))
        .map(|_| std::thread::spawn(move || stream(addr, dir, time, window)))
        .collect();
    let mut total = Received::default();
    for h in handles {
        let r = h
            .join()
            .map_err(|_| io::Error::other("tcpbench stream panicked"))??;
        total.bytes += r.bytes;
        total.seconds = total.seconds.max(r.seconds);
    }
    Ok(total)
}

/// A server on a free loopback port, in a thread of its own: the far
/// end of a measurement that needs no remote host. Stopped when dropped.
pub struct LocalServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl LocalServer {
    /// Listens on 127.0.0.1 with both socket buffers at `window`.
    pub fn start(window: Option<u32>) -> io::Result<LocalServer> {
        let l = listen((std::net::Ipv4Addr::LOCALHOST, 0).into(), window)?;
        let addr = l.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = Some(std::thread::spawn(move || serve(l, s2)));
        Ok(LocalServer { addr, stop, thread })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One direction's result: the median of repeated runs, beside what the
/// link model predicts.
#[derive(Serialize, Debug, Clone)]
pub struct TcpResult {
    pub direction: &'static str,
    pub streams: usize,
    pub window: Option<u32>,
    pub link: Option<String>,
    pub mb_per_s: f64,
    pub mib_per_s: f64,
    pub mbit_per_s: f64,
    /// What the link model predicts (rate, or window per round trip).
    pub model_mb_per_s: Option<f64>,
    /// Every repetition, MB/s.
    pub runs_mb_per_s: Vec<f64>,
}

/// Measures each of `dirs` `repeat` times ([`run`] with `streams` and
/// `window`) against the server at `addr`, reached over `link` when there
/// is one, and reports the medians. Blocking: call from a thread that
/// may block.
pub fn measure(
    addr: SocketAddr,
    dirs: &[Direction],
    streams: usize,
    time: Duration,
    window: Option<u32>,
    repeat: u32,
    link: Option<&LinkSpec>,
) -> Result<Vec<TcpResult>, String> {
    let mut out = Vec::new();
    for &dir in dirs {
        let mut all = Vec::new();
        for _ in 0..repeat.max(1) {
            let r = run(addr, dir, streams, time, window)
                .map_err(|e| format!("tcpbench {}: {e}", dir.name()))?;
            all.push(r.mb_per_s());
        }
        let mut sorted = all.clone();
        sorted.sort_by(f64::total_cmp);
        let mb = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
        out.push(TcpResult {
            direction: dir.name(),
            streams,
            window,
            link: link.map(LinkSpec::describe),
            mb_per_s: mb,
            mib_per_s: mb * 1e6 / 1048576.0,
            mbit_per_s: mb * 8.0,
            model_mb_per_s: link
                .and_then(LinkSpec::tcp_model_bytes_per_s)
                .map(|b| b / 1e6),
            runs_mb_per_s: all,
        });
    }
    Ok(out)
}

/// The results file `ironlun tcpbench --json` writes:
/// `{"tcpbench": [TcpResult, ...]}`.
pub fn json(results: &[TcpResult]) -> Result<String, String> {
    serde_json::to_string_pretty(&serde_json::json!({ "tcpbench": results }))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_move_data_on_loopback() {
        let server = LocalServer::start(None).unwrap();
        for dir in [Direction::Up, Direction::Down] {
            let r = run(
                server.addr(),
                dir,
                2,
                Duration::from_millis(200),
                Some(256 << 10),
            )
            .unwrap();
            assert!(r.bytes > 1 << 20, "{dir:?}: {r:?}");
            assert!(r.seconds > 0.05 && r.seconds < 5.0, "{dir:?}: {r:?}");
        }
    }

    #[test]
    fn measure_reports_the_median_of_each_direction() {
        let server = LocalServer::start(None).unwrap();
        let link = LinkSpec::default();
        let dirs = [Direction::Up, Direction::Down];
        let time = Duration::from_millis(50);
        let r = measure(server.addr(), &dirs, 1, time, None, 3, Some(&link)).unwrap();
        assert_eq!(r.len(), 2);
        for (t, dir) in r.iter().zip(dirs) {
            assert_eq!(t.direction, dir.name());
            assert_eq!(t.runs_mb_per_s.len(), 3);
            let mut runs = t.runs_mb_per_s.clone();
            runs.sort_by(f64::total_cmp);
            assert_eq!(t.mb_per_s, runs[1]);
            assert_eq!(t.mbit_per_s, t.mb_per_s * 8.0);
            // A transparent link bounds nothing.
            assert_eq!(t.model_mb_per_s, None);
        }
        assert!(json(&r).unwrap().starts_with("{\n  \"tcpbench\": ["));
    }
}
