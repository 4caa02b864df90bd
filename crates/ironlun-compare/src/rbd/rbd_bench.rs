//! `rbd bench`, Ceph's own tool: librbd in the client process, no iSCSI.
//!
//! It runs a byte count, not a time, and prints one progress line a
//! second with the operations done so far. It is asked for far more than
//! it can do in the run ([`IO_TOTAL`]) and stopped with SIGINT once the
//! measured time has passed: on SIGINT it stops its I/O, prints its
//! summary, closes the image and exits 0 (checked: no watcher is left on
//! the image, and the next writer takes the exclusive lock at once). A
//! client that were killed instead would leave its watch for the OSDs'
//! watch timeout (30 s), and the gateways' writes would wait for it. The
//! measured interval runs from the first progress line (the first second
//! is warm-up) to the first one at least the measured time later.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use ironlun_bench::cpu::{process_cpu_seconds, HostCpu};

use super::image::OsdCpu;
use super::Cluster;
use crate::clients::{self, Sample, Shape};

/// Bytes asked for: more than any run here gets through (1 TiB; a
/// sequential run wraps around at the image's end).
pub const IO_TOTAL: u64 = 1 << 40;
/// A run that has not measured this long after the measured time is
/// stopped and failed, and so is a client that has not exited this long
/// after SIGINT.
const OVERRUN: Duration = Duration::from_secs(30);

/// How much earlier than the measured time a progress line may come and
/// still end it.
const EARLY: Duration = Duration::from_millis(200);

pub struct Ctx<'a> {
    pub cluster: &'a Cluster,
    pub image: &'a str,
    pub measure: Duration,
    pub osd: &'a [u32],
}

/// Seconds and operations so far from one line of `rbd bench`: a progress
/// line (`    1      9280   9495.93    37 MiB/s`) or the closing one
/// (`elapsed: 4   ops: 51200   ops/sec: 10509   bytes/sec: 41 MiB/s`).
pub fn line_ops(line: &str) -> Option<(u64, u64)> {
    let mut it = line.split_whitespace();
    let first = it.next()?;
    if first == "elapsed:" {
        let sec = it.next()?.parse().ok()?;
        (it.next()? == "ops:").then_some(())?;
        return Some((sec, it.next()?.parse().ok()?));
    }
    let sec = first.parse().ok()?;
    let ops = it.next()?.parse().ok()?;
    it.next()?.parse::<f64>().ok()?;
    Some((sec, ops))
}

/// The client's and host's CPU at the start of the measured interval.
struct Start {
    ops: u64,
    client_cpu: Option<f64>,
    host: Option<HostCpu>,
    at: Instant,
}

impl Start {
    fn now(ops: u64, client: u32) -> Start {
        Start {
            ops,
            client_cpu: process_cpu_seconds(client),
            host: HostCpu::sample(),
            at: Instant::now(),
        }
    }

    /// The sample from here to now, at `ops` operations done.
    fn close(&self, ops: u64, client: u32, shape: &Shape) -> Sample {
        let seconds = self.at.elapsed().as_secs_f64();
        let ios = ops.saturating_sub(self.ops) as f64;
        let iops = if seconds > 0.0 { ios / seconds } else { 0.0 };
        let cpu = match (self.client_cpu, process_cpu_seconds(client)) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        Sample {
            iops,
            mb_per_s: iops * f64::from(shape.block_size) / 1e6,
            // Little's law: every thread keeps one request in flight.
            mean_latency_us: if iops > 0.0 {
                f64::from(shape.queue_depth) * 1e6 / iops
            } else {
                0.0
            },
            client_cpu_us_per_io: cpu.filter(|_| ios > 0.0).map(|c| c * 1e6 / ios),
            client_cores: cpu.filter(|_| seconds > 0.0).map(|c| c / seconds),
            steal_pct: clients::steal_between(self.host, HostCpu::sample()),
            seconds,
            ..Sample::default()
        }
    }
}

/// One `rbd bench` run of `shape`.
pub fn run(ctx: &Ctx, shape: &Shape) -> Result<Sample, String> {
    let osd = OsdCpu::start(ctx.osd);
    let mut child = spawn(ctx, shape)?;
    let err = child.stderr.take().map(|e| thread::spawn(move || tail(e)));
    let deadline = Instant::now() + ctx.measure + OVERRUN;
    let result = measure(&mut child, ctx.measure, shape, deadline);
    let status = interrupt(&mut child);
    // The client has exited (or was killed): its stderr is at its end.
    let why = || {
        err.and_then(|h| h.join().ok())
            .map(|v| String::from_utf8_lossy(&v).trim().to_owned())
            .unwrap_or_default()
    };
    let mut s = match (result, status) {
        (Ok(s), Some(st)) if st.success() => s,
        (Ok(_), Some(st)) => return Err(format!("rbd bench: {st}: {}", why())),
        (Ok(_), None) => return Err(format!("rbd bench ignored SIGINT for {OVERRUN:?}")),
        (Err(e), _) => return Err(format!("{e}: {}", why())),
    };
    s.backend_cores = osd.cores();
    Ok(s)
}

fn spawn(ctx: &Ctx, shape: &Shape) -> Result<Child, String> {
    let mut cmd = ctx.cluster.rbd();
    cmd.args([
        "bench",
        "--io-type",
        if shape.read { "read" } else { "write" },
    ])
    .args(["--io-pattern", if shape.random { "rand" } else { "seq" }])
    .args(["--io-size", &shape.block_size.to_string()])
    .args(["--io-threads", &shape.queue_depth.to_string()])
    .args(["--io-total", &IO_TOTAL.to_string()])
    .arg(ctx.cluster.image_spec(ctx.image));
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run rbd bench (Debian package ceph-common): {e}"))
}

/// Reads the progress lines until the measured time has passed; the
/// sample, or why there is none. The output is read to its end on a
/// thread of its own, so the client never blocks on a full pipe or dies
/// of a closed one.
fn measure(
    child: &mut Child,
    measure: Duration,
    shape: &Shape,
    deadline: Instant,
) -> Result<Sample, String> {
    let pid = child.id();
    let out = child.stdout.take().ok_or("rbd bench: no stdout")?;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut r = BufReader::new(out);
        let mut bytes = Vec::new();
        loop {
            bytes.clear();
            // Lines are short; a longer one is not rbd bench's and is cut.
            match (&mut r).take(4096).read_until(b'\n', &mut bytes) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&bytes);
            let closing = line.starts_with("elapsed:");
            if let Some((_, ops)) = line_ops(&line) {
                if tx.send((ops, closing)).is_err() {
                    break;
                }
            }
        }
    });
    let mut start: Option<Start> = None;
    while let Some(wait) = deadline.checked_duration_since(Instant::now()) {
        let Ok((ops, closing)) = rx.recv_timeout(wait) else {
            break;
        };
        match &start {
            None => start = Some(Start::now(ops, pid)),
            // Lines come about a second apart: one a little early still
            // ends the measured time.
            Some(s) if s.at.elapsed() + EARLY >= measure || closing => {
                return Ok(s.close(ops, pid, shape));
            }
            Some(_) => {}
        }
    }
    Err("rbd bench ended before a second was measured".into())
}

/// The last few KiB a stream carries, read to its end.
fn tail(mut r: impl Read) -> Vec<u8> {
    const KEEP: usize = 4096;
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = r.read(&mut buf) {
        let Some(chunk) = buf.get(..n).filter(|c| !c.is_empty()) else {
            break;
        };
        kept.extend_from_slice(chunk);
        if kept.len() > KEEP {
            kept.drain(..kept.len() - KEEP);
        }
    }
    kept
}

/// SIGINT to the client, then its exit status once it exits, or `None`
/// (having killed it) when it is still running [`OVERRUN`] later.
fn interrupt(child: &mut Child) -> Option<ExitStatus> {
    clients::signal(child, rustix::process::Signal::INT);
    let deadline = Instant::now() + OVERRUN;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}
