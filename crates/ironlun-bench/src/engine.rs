//! Runs a [`Workload`] against LUNs.
//!
//! # Runtime model
//! One task drives every worker: each worker keeps its queue depth of I/Os
//! in flight through the shared completion channel of
//! [`Responder::Stream`], so a batch of completions costs one wakeup and
//! no per-I/O task or oneshot. Write data (when not verifying) is a slice
//! of one pre-filled buffer: no allocation per I/O in steady state.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use ironlun_initiator::scsi;
use ironlun_initiator::{Capacity, Multipath, Responder, ScsiReply, ScsiRequest, Session};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;

use crate::cpu::{self, HostCpu};
use crate::result::{Cpu, Latency, Second, VerifyReport, WorkloadResult, ZoneRate};
use crate::spec::{AccessLine, Workload};
use crate::timer::{PreciseTimer, NEAR};
use crate::verify::VerifyMap;

/// A way to reach a LUN: one session, or several paths.
#[derive(Clone, Debug)]
pub enum Path {
    Single(Session),
    Multi(Arc<Multipath>),
}

impl Path {
    async fn submit(&self, req: ScsiRequest, r: Responder) -> Result<(), ironlun_initiator::Error> {
        match self {
            Path::Single(s) => s.submit(req, r).await,
            Path::Multi(m) => m.submit(req, r).await,
        }
    }
}

/// One LUN under test.
#[derive(Clone, Debug)]
pub struct LunTarget {
    pub label: String,
    pub path: Path,
    pub lun: u16,
    pub capacity: Capacity,
    /// The part of the seek range this target drives.
    pub slice: Slice,
}

/// Slice `index` of `count` equal, block-aligned parts of the seek range.
/// Several sessions to one LUN each take their own slice, so that one
/// session's verification never sees another's writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    pub index: u32,
    pub count: u32,
}

impl Slice {
    /// The whole seek range.
    pub const WHOLE: Slice = Slice { index: 0, count: 1 };
}

/// One sample of a target's cumulative CPU seconds (`None`: unknown).
pub type CpuSample = std::pin::Pin<Box<dyn std::future::Future<Output = Option<f64>> + Send>>;

/// Reads the target's cumulative CPU seconds (for `cpu.target_pct`):
/// from /proc for a local PID ([`cpu::pid_probe`]), from an in-process
/// target's threads ([`cpu::threads_probe`]) or from an ironlun target's
/// statistics endpoint ([`crate::target_stats::probe`]).
pub type TargetCpuProbe = Arc<dyn Fn() -> CpuSample + Send + Sync>;

async fn target_cpu(opts: &RunOptions) -> Option<f64> {
    match &opts.target_cpu {
        Some(probe) => probe().await,
        None => None,
    }
}

/// Progress callback: (elapsed s, IOPS, MB/s, p99 µs).
pub type ProgressFn = Arc<dyn Fn(f64, f64, f64, f64) + Send + Sync>;

/// How a run is carried out beyond the workload itself.
#[derive(Clone, Default)]
pub struct RunOptions {
    pub verify: bool,
    pub target_cpu: Option<TargetCpuProbe>,
    /// Called about once a second with (elapsed s, IOPS, MB/s, p99 µs).
    pub progress: Option<ProgressFn>,
    /// Time allowed for outstanding I/O to finish after the run.
    pub drain_timeout: Option<Duration>,
    /// This process's threads whose names start with this are left out
    /// of the initiator's CPU figures (a link emulator's keep-awake
    /// spinners, which only run when the CPU would otherwise idle).
    pub exclude_threads: Option<&'static str>,
}

/// Histogram bounds: 1 µs .. 100 s, in nanoseconds.
const HIST_LOW_NS: u64 = 1_000;
const HIST_HIGH_NS: u64 = 100_000_000_000;
/// Error messages kept for the report (all are counted).
const KEEP_ERRORS: usize = 20;

struct Worker {
    lun: usize,
    qd: u32,
    in_flight: u32,
    rng: SmallRng,
    range_start: u64,
    range_len: u64,
    /// Where the previous I/O ended: the next sequential I/O starts here.
    last_end: u64,
    line: usize,
    burst_left: u32,
    not_before: Option<Instant>,
    next_intended: Option<Instant>,
    interval: Option<Duration>,
    /// A zone sweep wrapped around: the pass is complete.
    swept: bool,
}

struct InFlight {
    worker: u32,
    start: Instant,
    read: bool,
    bytes: u32,
    lba: u64,
    blocks: u32,
    /// Writes: the generation written. Reads: the verify mark at issue.
    generation: u64,
}

struct Lun {
    target: LunTarget,
    verify: Option<VerifyMap>,
}

#[derive(Default)]
struct Counters {
    reads: u64,
    writes: u64,
    read_bytes: u64,
    write_bytes: u64,
}

/// Runs one workload; returns its measurement.
///
/// The loop runs as a task of its own rather than as the caller's future:
/// on a current-thread runtime, a completion that wakes the future given
/// to `block_on` makes tokio poll the I/O driver once more before it
/// returns to that future (one `epoll_wait` with a zero timeout per
/// completion batch: one per I/O at queue depth 1, seen with strace),
/// while waking a task only queues it.
pub async fn run(
    w: &Workload,
    targets: &[LunTarget],
    opts: &RunOptions,
) -> Result<WorkloadResult, String> {
    let (w, targets, opts) = (w.clone(), targets.to_vec(), opts.clone());
    let mut task = AbortOnDrop(tokio::spawn(
        async move { run_here(&w, &targets, &opts).await },
    ));
    (&mut task.0)
        .await
        .map_err(|e| format!("the load generator's task failed: {e}"))?
}

/// Ends the run's task if the caller stops waiting for it.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn run_here(
    w: &Workload,
    targets: &[LunTarget],
    opts: &RunOptions,
) -> Result<WorkloadResult, String> {
    w.validate()?;
    if targets.is_empty() {
        return Err("no LUN to run against".into());
    }
    let mut luns = Vec::new();
    for t in targets {
        let bs = u64::from(t.capacity.block_size);
        for l in &w.lines {
            if u64::from(l.size) % bs != 0 {
                return Err(format!(
                    "{}: transfer size {} is not a multiple of the {bs}-byte block",
                    t.label, l.size
                ));
            }
        }
        let (start, len) = range(w, &t.capacity, t.slice)?;
        let verify = if opts.verify {
            Some(VerifyMap::new(start / bs, len / bs, t.capacity.block_size)?)
        } else {
            None
        };
        luns.push(Lun {
            target: t.clone(),
            verify,
        });
    }
    let mut workers = Vec::new();
    for (li, lun) in luns.iter().enumerate() {
        let (start, len) = range(w, &lun.target.capacity, lun.target.slice)?;
        for k in 0..w.workers {
            let seed = 0x1b0d_5eed ^ ((li as u64) << 20) ^ u64::from(k);
            // Workers of one LUN start their sequential streams apart.
            let stagger = (len / u64::from(w.workers)) * u64::from(k);
            let bs = u64::from(lun.target.capacity.block_size);
            workers.push(Worker {
                lun: li,
                qd: w.queue_depth,
                in_flight: 0,
                rng: SmallRng::seed_from_u64(seed),
                range_start: start,
                range_len: len,
                last_end: start + stagger / bs * bs,
                line: 0,
                burst_left: 0,
                not_before: None,
                next_intended: None,
                interval: w.rate_iops.map(|r| Duration::from_secs_f64(1.0 / r)),
                swept: false,
            });
        }
    }
    // Shared write payload: one buffer as large as the largest transfer.
    let payload = {
        let mut rng = SmallRng::seed_from_u64(7);
        let v: Vec<u8> = (0..w.max_size()).map(|_| rng.gen()).collect();
        Bytes::from(v)
    };
    let total_qd: usize = workers.iter().map(|k| k.qd as usize).sum();
    let mut slots: Vec<Option<InFlight>> = Vec::with_capacity(total_qd);
    let mut free: Vec<u32> = Vec::with_capacity(total_qd);
    for i in (0..total_qd as u32).rev() {
        slots.push(None);
        free.push(i);
    }
    // Without a timerfd (not Linux), tokio's timer serves every deadline.
    let timer = match PreciseTimer::new() {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::debug!("no precise timer ({e}): near deadlines use tokio's");
            None
        }
    };
    let (tx, mut rx) =
        mpsc::unbounded_channel::<(u64, Result<ScsiReply, ironlun_initiator::Error>)>();

    let mk_hist = || Histogram::<u64>::new_with_bounds(HIST_LOW_NS, HIST_HIGH_NS, 3);
    let mut hist_all = mk_hist().map_err(|e| e.to_string())?;
    let mut hist_read = hist_all.clone();
    let mut hist_write = hist_all.clone();
    let mut hist_second = hist_all.clone();
    let mut counts = Counters::default();
    let mut errors = 0u64;
    let mut error_samples = Vec::new();
    let mut series: Vec<Second> = Vec::new();
    let mut sec_counts = Counters::default();
    let zones = w.zones.map(|n| n.max(1));
    let mut zone_acc: Vec<(u64, Option<Instant>, Option<Instant>)> =
        vec![(0, None, None); zones.unwrap_or(0) as usize];

    let began = Instant::now();
    let ramp_end = began + w.ramp();
    let end = ramp_end + w.run_time();
    let mut measuring = w.ramp().is_zero();
    let excluded = || opts.exclude_threads.and_then(cpu::threads_cpu_seconds);
    let mut cpu_start = (
        HostCpu::sample(),
        process_cpu(),
        target_cpu(opts).await,
        excluded(),
    );
    let mut measure_start = began;
    let mut next_second = ramp_end + Duration::from_secs(1);
    let mut measured_ios = 0u64;
    let mut stop = false;
    // When issuing stopped: the end of the measured interval.
    let mut stopped_at: Option<Instant> = None;
    let deadline_timer = tokio::time::sleep_until(tokio::time::Instant::from_std(end));
    tokio::pin!(deadline_timer);
    let mut armed_for: Option<Instant> = None;
    // Set when issuing stops: outstanding I/O must finish by then.
    let mut drain_deadline: Option<Instant> = None;

    loop {
        let now = Instant::now();
        if !measuring && now >= ramp_end {
            measuring = true;
            measure_start = now;
            cpu_start = (
                HostCpu::sample(),
                process_cpu(),
                target_cpu(opts).await,
                excluded(),
            );
            hist_all.reset();
            hist_read.reset();
            hist_write.reset();
            hist_second.reset();
            counts = Counters::default();
            sec_counts = Counters::default();
            errors = 0;
            error_samples.clear();
            next_second = now + Duration::from_secs(1);
        }
        if !stop
            && (now >= end
                || w.ios.is_some_and(|n| measured_ios >= n)
                || (zones.is_some() && workers.iter().all(|k| k.swept)))
        {
            stop = true;
            stopped_at = Some(now.min(end));
            drain_deadline = Some(now + opts.drain_timeout.unwrap_or(Duration::from_secs(30)));
        }
        if measuring && now >= next_second {
            let t = series.len() as u32;
            let ops = (sec_counts.reads + sec_counts.writes) as f64;
            series.push(Second {
                t,
                iops: ops,
                read_iops: sec_counts.reads as f64,
                write_iops: sec_counts.writes as f64,
                mb_per_s: (sec_counts.read_bytes + sec_counts.write_bytes) as f64 / 1e6,
                p99_us: hist_second.value_at_quantile(0.99) as f64 / 1000.0,
            });
            if let Some(p) = &opts.progress {
                let el = (now - measure_start).as_secs_f64();
                let total = (counts.reads + counts.writes) as f64;
                let bytes = (counts.read_bytes + counts.write_bytes) as f64;
                p(
                    el,
                    total / el.max(1e-9),
                    bytes / el.max(1e-9) / 1e6,
                    hist_all.value_at_quantile(0.99) as f64 / 1000.0,
                );
            }
            sec_counts = Counters::default();
            hist_second.reset();
            next_second += Duration::from_secs(1);
        }

        // Issue.
        let mut wake: Option<Instant> = None;
        if !stop {
            for (wi, k) in workers.iter_mut().enumerate() {
                while k.in_flight < k.qd && !k.swept {
                    if let Some(t) = k.not_before {
                        if now < t {
                            wake = Some(wake.map_or(t, |x| x.min(t)));
                            break;
                        }
                        k.not_before = None;
                    }
                    let intended = match (k.interval, k.next_intended) {
                        (Some(iv), next) => {
                            let t = next.unwrap_or(now);
                            if now < t {
                                wake = Some(wake.map_or(t, |x| x.min(t)));
                                break;
                            }
                            k.next_intended = Some(t + iv);
                            t
                        }
                        (None, _) => now,
                    };
                    let Some(lun) = luns.get_mut(k.lun) else {
                        break;
                    };
                    let Some(slot) = free.pop() else { break };
                    let (req, inflight) = next_io(w, k, wi as u32, lun, &payload, intended);
                    k.in_flight += 1;
                    if let Some(s) = slots.get_mut(slot as usize) {
                        *s = Some(inflight);
                    }
                    let r = Responder::Stream {
                        tx: tx.clone(),
                        tag: u64::from(slot),
                    };
                    if let Err(e) = lun.target.path.submit(req, r).await {
                        return Err(format!("{}: {e}", lun.target.label));
                    }
                }
            }
        }
        let outstanding: u32 = workers.iter().map(|k| k.in_flight).sum();
        if stop && outstanding == 0 {
            break;
        }

        // Wait for completions (or the next timed event).
        let deadline = if stop {
            drain_deadline
        } else {
            let mut d = if measuring { next_second } else { ramp_end };
            d = d.min(end);
            if let Some(x) = wake {
                d = d.min(x);
            }
            Some(d)
        };
        let first = match (deadline, &timer) {
            // A near deadline (a burst delay, a rate-limited issue time)
            // needs better than tokio's millisecond slots.
            (Some(d), Some(timer))
                if !stop && d.saturating_duration_since(Instant::now()) < NEAR =>
            {
                tokio::select! {
                    v = rx.recv() => v,
                    r = timer.sleep_until(d) => {
                        r.map_err(|e| format!("timer: {e}"))?;
                        continue;
                    }
                }
            }
            (Some(d), _) => {
                // The deadline (the next second, the end) changes about
                // once a second: the one timer moves only then, not per
                // wait.
                if armed_for != Some(d) {
                    deadline_timer
                        .as_mut()
                        .reset(tokio::time::Instant::from_std(d));
                    armed_for = Some(d);
                }
                tokio::select! {
                    biased;
                    v = rx.recv() => v,
                    _ = &mut deadline_timer => {
                        armed_for = None;
                        if stop {
                            return Err(format!("{outstanding} I/Os did not complete after the run"));
                        }
                        continue;
                    }
                }
            }
            (None, _) => rx.recv().await,
        };
        let mut next = first;
        while let Some((tag, result)) = next.take() {
            let done = Instant::now();
            let Some(io) = slots.get_mut(tag as usize).and_then(Option::take) else {
                next = rx.try_recv().ok();
                continue;
            };
            free.push(tag as u32);
            let Some(k) = workers.get_mut(io.worker as usize) else {
                next = rx.try_recv().ok();
                continue;
            };
            k.in_flight -= 1;
            let Some(lun) = luns.get_mut(k.lun) else {
                next = rx.try_recv().ok();
                continue;
            };
            let ok = match result
                .map_err(|e| e.to_string())
                .and_then(|r| scsi::check(r).map_err(|e| e.to_string()))
            {
                Ok(data) => {
                    if let Some(v) = &mut lun.verify {
                        if io.read {
                            v.check_read(io.lba, &data, io.generation);
                        }
                    }
                    true
                }
                Err(e) => {
                    errors += 1;
                    if error_samples.len() < KEEP_ERRORS {
                        error_samples.push(format!(
                            "{} {} LBA {}: {e}",
                            lun.target.label,
                            if io.read { "read" } else { "write" },
                            io.lba
                        ));
                    }
                    false
                }
            };
            if let (Some(v), false) = (&mut lun.verify, io.read) {
                v.end_write(io.lba, io.blocks, io.generation as u32, ok);
            }
            if let Some(n) = zones {
                let rel = io.lba * u64::from(lun.target.capacity.block_size) - k.range_start;
                let z = (rel * u64::from(n) / k.range_len.max(1)) as usize;
                if let Some(acc) = zone_acc.get_mut(z) {
                    acc.0 += u64::from(io.bytes);
                    acc.1 = Some(acc.1.map_or(io.start, |s: Instant| s.min(io.start)));
                    acc.2 = Some(done);
                }
            }
            // IOMeter counts what completes inside the measured interval,
            // whenever it was issued: leaving out I/Os issued during the
            // ramp would under-count by latency × rate (14 % at 0.4 s
            // latency over 3 s). I/Os drained after the end are not
            // counted (the interval is not stretched for them either).
            if measuring && done >= measure_start && !stopped_at.is_some_and(|t| done > t) && ok {
                let ns = done.saturating_duration_since(io.start).as_nanos() as u64;
                let ns = ns.clamp(HIST_LOW_NS, HIST_HIGH_NS);
                let _ = hist_all.record(ns);
                let _ = hist_second.record(ns);
                measured_ios += 1;
                if io.read {
                    let _ = hist_read.record(ns);
                    counts.reads += 1;
                    counts.read_bytes += u64::from(io.bytes);
                    sec_counts.reads += 1;
                    sec_counts.read_bytes += u64::from(io.bytes);
                } else {
                    let _ = hist_write.record(ns);
                    counts.writes += 1;
                    counts.write_bytes += u64::from(io.bytes);
                    sec_counts.writes += 1;
                    sec_counts.write_bytes += u64::from(io.bytes);
                }
            }
            next = rx.try_recv().ok();
        }
    }

    let measure_end = stopped_at.unwrap_or(end).max(measure_start);
    let elapsed = (measure_end - measure_start).as_secs_f64().max(1e-9);
    let cpu_end = (
        HostCpu::sample(),
        process_cpu(),
        target_cpu(opts).await,
        excluded(),
    );
    let excluded_s = match (cpu_start.3, cpu_end.3) {
        (Some(a), Some(b)) => (b - a).max(0.0),
        _ => 0.0,
    };
    let ios = counts.reads + counts.writes;
    let iops = ios as f64 / elapsed;
    let ncpu = cpu::cpus() as f64;
    let initiator_pct = match (cpu_start.0, cpu_end.0) {
        (Some(a), Some(b)) => a
            .busy_pct(&b)
            .map(|p| (p - excluded_s * 100.0 / elapsed / ncpu).max(0.0)),
        _ => None,
    };
    let proc_s = match (cpu_start.1, cpu_end.1) {
        (Some(a), Some(b)) => Some((b - a - excluded_s).max(0.0)),
        _ => None,
    };
    let target_s = match (cpu_start.2, cpu_end.2) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let per_io = |s: Option<f64>| s.filter(|_| ios > 0).map(|s| s * 1e6 / ios as f64);
    let cpu = Cpu {
        initiator_pct,
        target_pct: target_s.map(|s| s * 100.0 / elapsed / ncpu),
        initiator_process_pct: proc_s.map(|s| s * 100.0 / elapsed / ncpu),
        iops_per_cpu_pct: initiator_pct.filter(|p| *p > 0.0).map(|p| iops / p),
        initiator_us_per_io: per_io(proc_s),
        target_us_per_io: per_io(target_s),
    };
    let verify =
        luns.iter()
            .filter_map(|l| l.verify.as_ref())
            .fold(None, |acc: Option<VerifyReport>, v| {
                let mut r = acc.unwrap_or_default();
                r.checked_blocks += v.checked_blocks;
                r.mismatch_count += v.mismatch_count;
                r.mismatches.extend(v.mismatches.iter().cloned());
                Some(r)
            });
    let (zone_start, zone_len) = targets
        .first()
        .and_then(|t| range(w, &t.capacity, t.slice).ok())
        .unwrap_or((0, 0));
    let zones = zones.map(|n| {
        zone_acc
            .iter()
            .enumerate()
            .map(|(i, (bytes, first, last))| {
                let secs = match (first, last) {
                    (Some(a), Some(b)) => (*b - *a).as_secs_f64(),
                    _ => 0.0,
                };
                ZoneRate {
                    zone: i as u32,
                    start_byte: zone_start + zone_len * i as u64 / u64::from(n),
                    mb_per_s: if secs > 0.0 {
                        *bytes as f64 / secs / 1e6
                    } else {
                        0.0
                    },
                }
            })
            .collect()
    });
    let bytes = (counts.read_bytes + counts.write_bytes) as f64;
    let latency = Latency::from_histogram(&hist_all);
    Ok(WorkloadResult {
        name: w.name.clone(),
        description: w.description.clone(),
        luns: targets.iter().map(|t| t.label.clone()).collect(),
        elapsed_s: elapsed,
        ios,
        read_ios: counts.reads,
        write_ios: counts.writes,
        iops,
        read_iops: counts.reads as f64 / elapsed,
        write_iops: counts.writes as f64 / elapsed,
        mb_per_s: bytes / elapsed / 1e6,
        mib_per_s: bytes / elapsed / (1u64 << 20) as f64,
        read_mb_per_s: counts.read_bytes as f64 / elapsed / 1e6,
        write_mb_per_s: counts.write_bytes as f64 / elapsed / 1e6,
        transaction_time_us: latency.mean,
        latency_us: latency,
        read_latency_us: Latency::from_histogram(&hist_read),
        write_latency_us: Latency::from_histogram(&hist_write),
        cpu,
        errors,
        error_samples,
        verify,
        series,
        histogram_us: log_buckets(&hist_all),
        zones,
        workload: w.clone(),
    })
}

fn process_cpu() -> Option<f64> {
    cpu::process_cpu_seconds(std::process::id())
}

/// The seek range in bytes (start, length), whole blocks.
fn range(w: &Workload, cap: &Capacity, slice: Slice) -> Result<(u64, u64), String> {
    let bs = u64::from(cap.block_size);
    let size = cap.bytes();
    let start = w.seek.start / bs * bs;
    if start >= size {
        return Err(format!(
            "seek range starts at {start}, beyond the LUN's {size} bytes"
        ));
    }
    let len = if w.seek.length == 0 {
        size - start
    } else {
        w.seek.length.min(size - start)
    } / bs
        * bs;
    let count = u64::from(slice.count.max(1));
    let index = u64::from(slice.index).min(count - 1);
    let part = len / count / bs * bs;
    let (start, len) = if count == 1 {
        (start, len)
    } else if index == count - 1 {
        (start + part * index, len - part * index)
    } else {
        (start + part * index, part)
    };
    if len < u64::from(w.max_size()) {
        return Err(format!(
            "seek range of {len} bytes{} is smaller than a {}-byte transfer",
            if count > 1 {
                format!(" (one of {count} sessions' slices)")
            } else {
                String::new()
            },
            w.max_size()
        ));
    }
    Ok((start, len))
}

/// Picks the next I/O of a worker by the IOMeter rules.
fn next_io(
    w: &Workload,
    k: &mut Worker,
    worker: u32,
    lun: &mut Lun,
    payload: &Bytes,
    start: Instant,
) -> (ScsiRequest, InFlight) {
    if k.burst_left == 0 {
        k.line = pick_line(&w.lines, &mut k.rng);
        k.burst_left = w.lines.get(k.line).map_or(1, |l| l.burst);
    }
    let line = w
        .lines
        .get(k.line)
        .or(w.lines.first())
        .cloned()
        .unwrap_or(AccessLine {
            size: 512,
            share: 100,
            read: 100,
            random: 0,
            align: 0,
            burst: 1,
            delay_ms: 0,
        });
    k.burst_left -= 1;
    if k.burst_left == 0 && line.delay_ms > 0 {
        k.not_before = Some(Instant::now() + Duration::from_millis(u64::from(line.delay_ms)));
    }
    let bs = u64::from(lun.target.capacity.block_size);
    let align = (u64::from(line.align).max(bs)).div_ceil(bs) * bs;
    let size = u64::from(line.size);
    let read = k.rng.gen_range(0..100) < line.read;
    let random = k.rng.gen_range(0..100) < line.random;
    let end = k.range_start + k.range_len;
    let offset = if random {
        let slots = (k.range_len - size) / align + 1;
        k.range_start + k.rng.gen_range(0..slots) * align
    } else {
        let o = k.last_end.div_ceil(bs) * bs;
        if o + size > end || o < k.range_start {
            if w.zones.is_some() && o > k.range_start {
                k.swept = true;
            }
            k.range_start
        } else {
            o
        }
    };
    k.last_end = offset + size;
    let lba = offset / bs;
    let blocks = (size / bs) as u32;
    let (req, generation) = if read {
        let mark = lun.verify.as_ref().map_or(0, VerifyMap::read_mark);
        let mut req = scsi::read(lun.target.lun, lba, blocks, lun.target.capacity.block_size);
        // Unverified reads are counted, not kept (as IOMeter does).
        req.discard_data = lun.verify.is_none();
        (req, mark)
    } else {
        let (data, g) = match &mut lun.verify {
            Some(v) => v.start_write(lba, blocks),
            None => (payload.slice(..size as usize), 0),
        };
        (scsi::write(lun.target.lun, lba, blocks, data), u64::from(g))
    };
    (
        req,
        InFlight {
            worker,
            start,
            read,
            bytes: line.size,
            lba,
            blocks,
            generation,
        },
    )
}

fn pick_line(lines: &[AccessLine], rng: &mut SmallRng) -> usize {
    let mut x = rng.gen_range(0..100u32);
    for (i, l) in lines.iter().enumerate() {
        if x < l.share {
            return i;
        }
        x -= l.share;
    }
    lines.len().saturating_sub(1)
}

/// Counts per power-of-√2 latency bucket, for the report's histogram.
fn log_buckets(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    if h.is_empty() {
        return out;
    }
    let mut lo = HIST_LOW_NS as f64;
    let max = h.max() as f64;
    while lo <= max {
        let hi = lo * std::f64::consts::SQRT_2;
        let n = h.count_between(lo as u64, hi as u64 - 1);
        out.push((hi / 1000.0, n));
        lo = hi;
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn slices_split_the_seek_range_without_overlap() {
        let cap = Capacity {
            blocks: 1000,
            block_size: 512,
            lbppbe: 0,
            thin: false,
        };
        let mut w = Workload::simple("t", "", AccessLine::simple(4096, 50, 100), 1);
        w.seek.start = 1024;
        let whole = range(&w, &cap, Slice::WHOLE).unwrap();
        assert_eq!(whole, (1024, 998 * 512));
        let parts: Vec<(u64, u64)> = (0..7)
            .map(|index| range(&w, &cap, Slice { index, count: 7 }).unwrap())
            .collect();
        let mut at = whole.0;
        for (start, len) in &parts {
            assert_eq!(*start, at, "slices are contiguous: {parts:?}");
            assert_eq!(start % 512, 0);
            at += len;
        }
        assert_eq!(at, whole.0 + whole.1, "slices cover the range");
        // Too many slices for the transfer size.
        let err = range(
            &w,
            &cap,
            Slice {
                index: 0,
                count: 200,
            },
        )
        .unwrap_err();
        assert!(err.contains("one of 200 sessions' slices"), "{err}");
    }
}
