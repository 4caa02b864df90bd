//! The clients both targets are measured with, each run as the program a
//! user would run: libiscsi's `iscsi-perf`, `qemu-img bench` over
//! `iscsi://`, `ironlun bench`, and `iperf3` for the wire's own rate.
//! Every run excludes its warm-up and measures the target daemon's CPU
//! over the same interval as the I/Os it counts.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use serde::Serialize;

use ironlun_bench::cpu::{process_cpu_seconds, HostCpu};

use crate::procfs::rss_bytes;
use crate::workloads::Workload;

/// LUN block size of both targets' LUNs (iscsi-perf counts in blocks).
const LUN_BLOCK: u32 = 512;
/// A run that takes this much longer than asked is stopped and failed.
const OVERRUN: Duration = Duration::from_secs(30);

/// One measured run of one client against one target.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Sample {
    pub iops: f64,
    pub mb_per_s: f64,
    pub mean_latency_us: f64,
    /// Target daemon CPU (all threads) per I/O over the measured interval.
    pub target_cpu_us_per_io: Option<f64>,
    /// The client's own CPU time (all its threads) per I/O.
    pub client_cpu_us_per_io: Option<f64>,
    /// The client's CPU time over the run's wall time, in cores. Every
    /// client here drives its I/O from one thread, so near 1.0 the client,
    /// not the target, set the rate.
    pub client_cores: Option<f64>,
    /// Peak target resident memory seen during the run, bytes.
    pub target_rss_peak: Option<u64>,
    /// Hypervisor steal over the run, percent of all CPU time.
    pub steal_pct: f64,
    /// CPU of the storage behind the target (Ceph's OSDs in
    /// `compare-rbd`), in cores over the whole run; `None` elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_cores: Option<f64>,
    pub seconds: f64,
    /// Which repetition measured it (0-based), so that samples of one
    /// repetition can be compared with each other.
    pub rep: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Client {
    IscsiPerf,
    QemuImg,
    IronlunBench,
}

/// Parameters shared by every run.
pub struct RunCtx {
    /// The ironlun binary (for `ironlun bench`).
    pub exe: PathBuf,
    /// Measured time per run.
    pub measure: Duration,
    /// Scratch directory for result files.
    pub scratch: PathBuf,
}

impl Client {
    pub const ALL: [Client; 3] = [Client::IscsiPerf, Client::QemuImg, Client::IronlunBench];

    pub fn name(self) -> &'static str {
        match self {
            Client::IscsiPerf => "iscsi-perf",
            Client::QemuImg => "qemu-img bench",
            Client::IronlunBench => "ironlun bench",
        }
    }

    pub fn parse(s: &str) -> Result<Client, String> {
        match s {
            "iscsi-perf" => Ok(Client::IscsiPerf),
            "qemu-img" | "qemu-img-bench" => Ok(Client::QemuImg),
            "ironlun" | "ironlun-bench" => Ok(Client::IronlunBench),
            _ => Err(format!(
                "unknown client '{s}' (iscsi-perf, qemu-img, ironlun)"
            )),
        }
    }

    /// Whether this client can run `w`, and how it deviates from it.
    /// `Err` says why it cannot.
    pub fn fit(self, w: &Workload) -> Result<Option<&'static str>, &'static str> {
        match self {
            // Debian 12's iscsi-perf (0.1) only reads.
            Client::IscsiPerf if !w.read => Err("iscsi-perf only reads"),
            // qemu-img bench steps through the image; it has no random mode.
            Client::QemuImg if w.random => {
                Ok(Some("sequential: qemu-img bench has no random mode"))
            }
            _ => Ok(None),
        }
    }

    pub fn run(self, ctx: &RunCtx, w: &Workload, url: &str, target: u32) -> Result<Sample, String> {
        match self {
            Client::IscsiPerf => iscsi_perf(ctx, &w.shape(), url, target),
            Client::QemuImg => qemu_img(w, url, target, ctx.measure),
            Client::IronlunBench => ironlun_bench(ctx, w, &[url.to_owned()], target),
        }
    }
}

/// Target (and, when it is running, client) CPU and host steal at one
/// instant.
struct Mark {
    pid: u32,
    client: Option<u32>,
    cpu: Option<f64>,
    client_cpu: Option<f64>,
    host: Option<HostCpu>,
    at: Instant,
}

impl Mark {
    fn now(pid: u32, client: Option<u32>) -> Mark {
        Mark {
            pid,
            client,
            cpu: process_cpu_seconds(pid),
            client_cpu: client.and_then(process_cpu_seconds),
            host: HostCpu::sample(),
            at: Instant::now(),
        }
    }

    /// Fills CPU per I/O, steal and seconds of `s` for the interval since
    /// this mark, in which `ios` I/Os completed.
    fn close(&self, ios: f64, s: &mut Sample) {
        let end = Mark::now(self.pid, self.client);
        s.seconds = (end.at - self.at).as_secs_f64();
        s.steal_pct = steal_between(self.host, end.host);
        s.target_cpu_us_per_io = per_io(self.cpu, end.cpu, ios);
        s.client_cpu_us_per_io = per_io(self.client_cpu, end.client_cpu, ios);
        s.client_cores = match (self.client_cpu, end.client_cpu) {
            (Some(a), Some(b)) if s.seconds > 0.0 => Some((b - a) / s.seconds),
            _ => None,
        };
    }
}

/// CPU seconds from `a` to `b` per I/O, in microseconds.
fn per_io(a: Option<f64>, b: Option<f64>, ios: f64) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if ios > 0.0 => Some((b - a) * 1e6 / ios),
        _ => None,
    }
}

/// Steal between two host samples, percent (0 when either is missing).
pub(crate) fn steal_between(a: Option<HostCpu>, b: Option<HostCpu>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) => a.steal_pct(&b).unwrap_or(0.0),
        _ => 0.0,
    }
}

fn fill_rates(s: &mut Sample, iops: f64, w: &Shape) {
    s.iops = iops;
    s.mb_per_s = iops * f64::from(w.block_size) / 1e6;
    // Little's law: a full window of `queue_depth` commands.
    s.mean_latency_us = if iops > 0.0 {
        f64::from(w.queue_depth) * 1e6 / iops
    } else {
        0.0
    };
}

/// Sends `sig` to a child. The `Child` is borrowed, so it has not been
/// reaped and its PID still names it. A child that has exited already
/// (a zombie) takes the signal harmlessly; an error is ignored as before.
pub(crate) fn signal(child: &Child, sig: Signal) {
    let _ = rustix::process::kill_process(Pid::from_child(child), sig);
}

/// Stops a child that outlives its run: SIGINT first (iscsi-perf prints
/// its summary and logs out), then SIGKILL.
pub(crate) fn stop(child: &mut Child) {
    signal(child, Signal::INT);
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The "iops current N" of one iscsi-perf progress line.
pub fn iscsi_perf_current(line: &str) -> Option<u64> {
    let rest = line.get(line.find("iops current ")? + "iops current ".len()..)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// libiscsi's `iscsi-perf` running `w` against `url`, with the CPU of
/// process `pid` (the target's) and its own over the measured seconds.
/// It reads only (Debian 12's version 0.1 has no write mode), one
/// transfer size at one queue depth, sequential or random: a shape that
/// writes is refused.
///
/// iscsi-perf prints one line per second (ending in '\r'). The first
/// second is warm-up; CPU is marked when it arrives and again after the
/// last measured line, and the I/Os are the sum of those lines' counts.
pub fn iscsi_perf(ctx: &RunCtx, w: &Shape, url: &str, pid: u32) -> Result<Sample, String> {
    if !w.read {
        return Err("iscsi-perf only reads".into());
    }
    let blocks = w.block_size / LUN_BLOCK;
    let mut cmd = Command::new("iscsi-perf");
    cmd.args(["-m", &w.queue_depth.to_string(), "-b", &blocks.to_string()]);
    if w.random {
        cmd.arg("-r");
    }
    let mut child = cmd
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run iscsi-perf (Debian package libiscsi-bin): {e}"))?;
    let Some(mut out) = child.stdout.take() else {
        stop(&mut child);
        return Err("iscsi-perf: no stdout".into());
    };
    let seconds = ctx.measure.as_secs().max(1);
    let deadline = Instant::now() + ctx.measure + OVERRUN;
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    let mut lines_seen = 0usize;
    let mut start: Option<Mark> = None;
    let mut ios = 0u64;
    let mut result = Err("iscsi-perf ended before its measured seconds".to_owned());
    while Instant::now() < deadline {
        let n = match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        text.push_str(&String::from_utf8_lossy(buf.get(..n).unwrap_or(&[])));
        // Whole lines only; keep a partial one for the next read.
        while let Some(end) = text.find(['\r', '\n']) {
            let line: String = text.drain(..=end).collect();
            let Some(current) = iscsi_perf_current(&line) else {
                continue;
            };
            lines_seen += 1;
            if lines_seen == 1 {
                start = Some(Mark::now(pid, Some(child.id())));
                continue;
            }
            ios += current;
            if lines_seen as u64 > seconds {
                let mut s = Sample::default();
                if let Some(m) = &start {
                    m.close(ios as f64, &mut s);
                }
                fill_rates(&mut s, ios as f64 / (lines_seen - 1) as f64, w);
                result = Ok(s);
                break;
            }
        }
        if result.is_ok() {
            break;
        }
    }
    stop(&mut child);
    result
}

/// "Run completed in X seconds." from qemu-img bench.
pub fn qemu_img_seconds(out: &str) -> Option<f64> {
    let rest = out.get(out.find("Run completed in ")? + "Run completed in ".len()..)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// One qemu-img bench run: its rate and its CPU seconds and wall time.
struct QemuRun {
    iops: f64,
    cpu_s: f64,
    wall: Duration,
}

fn qemu_img_once(w: &Workload, url: &str, count: u64) -> Result<QemuRun, String> {
    let mut cmd = Command::new("qemu-img");
    cmd.args(["bench", "-f", "raw", "-c", &count.to_string()]);
    cmd.args([
        "-d",
        &w.queue_depth.to_string(),
        "-s",
        &w.block_size.to_string(),
    ]);
    if !w.read {
        cmd.arg("-w");
    }
    let began = Instant::now();
    let (out, cpu_s) = output_with_cpu(cmd.arg(url))
        .map_err(|e| format!("cannot run qemu-img (Debian package qemu-utils): {e}"))?;
    let wall = began.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    match qemu_img_seconds(&text) {
        Some(s) if out.status.success() && s > 0.0 => Ok(QemuRun {
            iops: count as f64 / s,
            cpu_s,
            wall,
        }),
        _ => Err(format!(
            "qemu-img bench failed: {}{}",
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// Runs `cmd` to completion with its output captured, and returns its CPU
/// time (user + system, all threads) from wait4(2)'s resource usage.
fn output_with_cpu(cmd: &mut Command) -> std::io::Result<(Output, f64)> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let mut stderr = child.stderr.take();
    let err_reader = thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(e) = stderr.as_mut() {
            let _ = e.read_to_end(&mut v);
        }
        v
    });
    // A read error leaves the output short, which the caller reports; the
    // child is reaped either way.
    let mut stdout = Vec::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_end(&mut stdout);
    }
    let stderr = err_reader.join().unwrap_or_default();
    // libc: rustix (1.1) has no wait4, the one call that returns a
    // child's exit status and its resource usage together.
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4(2) on the PID of a child we spawned and have not
        // reaped (so the PID cannot belong to another process), with
        // pointers to a live int and a live rusage that it fills.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = secs(usage.ru_utime) + secs(usage.ru_stime);
    let status = std::os::unix::process::ExitStatusExt::from_raw(status);
    Ok((
        Output {
            status,
            stdout,
            stderr,
        },
        cpu,
    ))
}

/// qemu-img bench runs a count of requests, not a time: a warm-up run of
/// 64 MiB (excluded) sets the count for about the measured time. Its CPU
/// windows, the target's and its own, are the whole measured process,
/// login included, which the length of the run makes small.
fn qemu_img(w: &Workload, url: &str, pid: u32, measure: Duration) -> Result<Sample, String> {
    let warm = ((64u64 << 20) / u64::from(w.block_size)).max(u64::from(w.queue_depth) * 4);
    let rate = qemu_img_once(w, url, warm)?.iops;
    let count = ((rate * measure.as_secs_f64()) as u64).max(warm);
    let mark = Mark::now(pid, None);
    let run = qemu_img_once(w, url, count)?;
    let mut s = Sample::default();
    mark.close(count as f64, &mut s);
    // The client's own CPU comes from wait4 when it exits.
    s.client_cpu_us_per_io = Some(run.cpu_s * 1e6 / count as f64);
    s.client_cores = (run.wall > Duration::ZERO).then(|| run.cpu_s / run.wall.as_secs_f64());
    fill_rates(&mut s, run.iops, &w.shape());
    Ok(s)
}

/// Polls a process's resident memory until told to stop; returns the peak.
struct RssWatch {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<Option<u64>>,
}

impl RssWatch {
    fn start(pid: u32) -> RssWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::spawn(move || {
            let mut peak = None;
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(rss_bytes(pid));
                thread::sleep(Duration::from_millis(100));
            }
            peak.max(rss_bytes(pid))
        });
        RssWatch { stop, handle }
    }

    fn finish(self) -> Option<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().ok().flatten()
    }
}

/// What a client is asked to do: transfer size, direction, pattern,
/// queue depth, and where offsets may fall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shape {
    pub block_size: u32,
    pub read: bool,
    pub random: bool,
    pub queue_depth: u32,
    /// Offset alignment in bytes; `None`: the client's default (for
    /// `ironlun bench`, the LUN's block size).
    pub align: Option<u32>,
}

impl Workload {
    pub fn shape(&self) -> Shape {
        Shape {
            block_size: self.block_size,
            read: self.read,
            random: self.random,
            queue_depth: self.queue_depth,
            align: None,
        }
    }
}

/// `ironlun bench` against one or more URLs (one session each), with a
/// one-second ramp excluded and the target's CPU read from /proc over
/// the measured interval (`--target-pid`).
pub fn ironlun_bench(
    ctx: &RunCtx,
    w: &Workload,
    urls: &[String],
    pid: u32,
) -> Result<Sample, String> {
    bench(ctx, &w.shape(), urls, pid)
}

/// Where and how wide `ironlun bench` runs: on the CPUs `cpus` (a
/// `taskset -c` list; `None`: anywhere), on `threads` load threads
/// (`None`: its default).
#[derive(Clone, Debug, Default)]
pub struct Load {
    pub cpus: Option<String>,
    pub threads: Option<u32>,
}

/// `ironlun bench` running `shape` (see [`ironlun_bench()`]).
pub fn bench(ctx: &RunCtx, shape: &Shape, urls: &[String], pid: u32) -> Result<Sample, String> {
    bench_on(ctx, shape, urls, pid, &Load::default())
}

/// [`bench()`] as `load` says.
pub fn bench_on(
    ctx: &RunCtx,
    shape: &Shape,
    urls: &[String],
    pid: u32,
    load: &Load,
) -> Result<Sample, String> {
    let pct = |b: bool| if b { "100" } else { "0" };
    let mut args: Vec<String> = vec!["--bs".into(), shape.block_size.to_string()];
    for (k, v) in [("--read", pct(shape.read)), ("--random", pct(shape.random))] {
        args.extend([k.to_owned(), v.to_owned()]);
    }
    args.extend(["--qd".into(), shape.queue_depth.to_string()]);
    if let Some(a) = shape.align {
        args.extend(["--align".into(), a.to_string()]);
    }
    run_bench(ctx, &args, urls, pid, load)
}

/// `ironlun bench --profile NAME` (one of its built-in workloads, with
/// its mix of reads and writes, random share and queue depth as the
/// profile defines them) against `urls`, measured as [`bench()`] measures.
pub fn bench_profile(
    ctx: &RunCtx,
    profile: &str,
    urls: &[String],
    pid: u32,
) -> Result<Sample, String> {
    let args = ["--profile".to_owned(), profile.to_owned()];
    run_bench(ctx, &args, urls, pid, &Load::default())
}

/// Runs `ironlun bench` with the workload arguments `what`, a one-second
/// ramp, the measured time of `ctx` and the target's CPU from process
/// `pid`; reads its JSON report.
fn run_bench(
    ctx: &RunCtx,
    what: &[String],
    urls: &[String],
    pid: u32,
    load: &Load,
) -> Result<Sample, String> {
    let json = ctx.scratch.join("bench.json");
    let _ = std::fs::remove_file(&json);
    let watch = RssWatch::start(pid);
    let host = HostCpu::sample();
    let mut cmd = crate::pin::command(&ctx.exe, load.cpus.as_deref());
    cmd.args(["bench", "--log", "warn"])
        .args(what)
        .args(["--ramp", "1s"]);
    if let Some(t) = load.threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    let out = cmd
        .arg("--time")
        .arg(format!("{}ms", ctx.measure.as_millis()))
        .args(["--target-pid", &pid.to_string(), "--json"])
        .arg(&json)
        .args(urls)
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run ironlun bench: {e}"))?;
    let steal = steal_between(host, HostCpu::sample());
    let rss = watch.finish();
    if !out.status.success() {
        return Err(format!(
            "ironlun bench failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let r = read_bench_json(&json);
    // The scratch directory must be empty for LunFiles to remove it.
    let _ = std::fs::remove_file(&json);
    let r = r?;
    if r.errors > 0 {
        return Err(format!("ironlun bench: {} I/O errors", r.errors));
    }
    Ok(Sample {
        iops: r.iops,
        mb_per_s: r.mb_per_s,
        mean_latency_us: r.latency_us.mean,
        target_cpu_us_per_io: r.cpu.target_us_per_io,
        client_cpu_us_per_io: r.cpu.initiator_us_per_io,
        client_cores: r
            .cpu
            .initiator_process_pct
            .map(|p| p * ironlun_bench::cpu::cpus() as f64 / 100.0),
        target_rss_peak: rss,
        steal_pct: steal,
        backend_cores: None,
        seconds: r.elapsed_s,
        rep: 0,
    })
}

fn read_bench_json(path: &Path) -> Result<ironlun_bench::WorkloadResult, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let report: ironlun_bench::RunReport =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    report
        .workloads
        .into_iter()
        .next()
        .ok_or_else(|| "ironlun bench wrote no result".to_owned())
}

/// iperf3's single-stream TCP rate over loopback, MB/s (one second of
/// warm-up omitted).
pub fn iperf3(measure: Duration) -> Result<f64, String> {
    let addr = crate::daemons::free_loopback_addr()?;
    let port = addr.port().to_string();
    let mut server = Command::new("iperf3")
        .args(["-s", "-1", "-B", "127.0.0.1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run iperf3 (Debian package iperf3): {e}"))?;
    let secs = measure.as_secs().max(1) + 1;
    let mut result = Err("iperf3 client could not connect".to_owned());
    // The server needs a moment to listen.
    for _ in 0..50 {
        thread::sleep(Duration::from_millis(100));
        let out = Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "-O", "1", "-J"])
            .args(["-t", &secs.to_string()])
            .output()
            .map_err(|e| format!("cannot run iperf3: {e}"))?;
        if out.status.success() {
            result = iperf3_mb_per_s(&String::from_utf8_lossy(&out.stdout));
            break;
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    result
}

/// The received rate of an iperf3 JSON report, MB/s.
pub fn iperf3_mb_per_s(json: &str) -> Result<f64, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("iperf3 JSON: {e}"))?;
    v.pointer("/end/sum_received/bits_per_second")
        .and_then(|b| b.as_f64())
        .map(|b| b / 8e6)
        .ok_or_else(|| "iperf3 JSON has no end.sum_received.bits_per_second".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iscsi_perf_progress_lines() {
        let l = "00:00:02 - lba 1349744, iops current 153891 (601 MB/s), iops average 118639 (463 MB/s), in_flight 64, busy 0        \r";
        assert_eq!(iscsi_perf_current(l), Some(153_891));
        assert_eq!(
            iscsi_perf_current("performing RANDOM READ with 64 parallel requests"),
            None
        );
        assert_eq!(iscsi_perf_current("iops current x"), None);
    }

    #[test]
    fn qemu_img_bench_summary() {
        let out = "Sending 100000 read requests, 4096 bytes each, 64 in parallel (starting at offset 0, step size 4096)\nRun completed in 1.353 seconds.\n";
        assert_eq!(qemu_img_seconds(out), Some(1.353));
        assert_eq!(qemu_img_seconds("Sending 1 read requests"), None);
    }

    #[test]
    fn a_childs_output_and_cpu_time_are_collected() {
        // A shell loop that burns some CPU, then prints on both streams.
        let (out, cpu) = output_with_cpu(Command::new("sh").args([
            "-c",
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo out; echo err >&2; exit 3",
        ]))
        .unwrap();
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.code(), Some(3));
        assert!(cpu > 0.0, "the loop's CPU time was not counted: {cpu}");
    }

    #[test]
    fn iperf3_report() {
        let j = r#"{"end":{"sum_received":{"bits_per_second":26838915687.2}}}"#;
        assert!((iperf3_mb_per_s(j).unwrap() - 3354.86).abs() < 0.01);
        assert!(iperf3_mb_per_s("{}").is_err());
        assert!(iperf3_mb_per_s("not json").is_err());
    }

    #[test]
    fn clients_say_which_workloads_they_cannot_run_as_given() {
        let ws = crate::workloads::all();
        let write = ws.iter().find(|w| !w.read).unwrap();
        assert!(Client::IscsiPerf.fit(write).is_err());
        let random = ws.iter().find(|w| w.random).unwrap();
        assert!(Client::QemuImg.fit(random).unwrap().is_some());
        assert!(ws.iter().all(|w| Client::IronlunBench.fit(w) == Ok(None)));
    }

    #[test]
    fn little_law_latency() {
        let w = crate::workloads::all()
            .into_iter()
            .find(|w| w.queue_depth == 1)
            .unwrap();
        let mut s = Sample::default();
        fill_rates(&mut s, 20_000.0, &w.shape());
        assert!((s.mean_latency_us - 50.0).abs() < 1e-9);
        assert!((s.mb_per_s - 81.92).abs() < 1e-9);
    }
}
