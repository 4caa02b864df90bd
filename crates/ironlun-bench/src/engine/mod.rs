//! Runs a [`Workload`] against LUNs.
//!
//! # Runtime model
//! One task drives every worker: each worker keeps its queue depth of I/Os
//! in flight through the shared completion channel of
//! [`Responder::Stream`], so a batch of completions costs one wakeup and
//! no per-I/O task or oneshot. Write data (when not verifying) is a slice
//! of one pre-filled buffer: no allocation per I/O in steady state.
//!
//! # Layout
//! This module holds the public types and the run's loop (`run_here`),
//! which ties the parts together: `issuer` keeps each worker's I/O in
//! flight, `meter` measures what completes, `wait` waits for the next
//! completion or timed event, `cpu_mark` reads CPU time at the start and
//! the end of the measured interval, and `summary` makes the
//! [`WorkloadResult`].

mod cpu_mark;
mod issuer;
mod meter;
mod shaped;
mod summary;
mod wait;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ironlun_initiator::{Capacity, Multipath, Responder, ScsiRequest, Session};
use tokio::sync::mpsc;

use crate::iolog::LatLogSpec;
use crate::result::WorkloadResult;
use crate::spec::Workload;
use cpu_mark::CpuMark;
use issuer::{Completion, Issuer};
use meter::Meter;
pub(crate) use meter::{HIST_HIGH_NS, HIST_LOW_NS, HIST_SIGFIG};
pub(crate) use shaped::buckets;
use shaped::Extras;
pub(crate) use summary::log_buckets;
use wait::Waiter;

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
/// from /proc for a local PID ([`cpu::pid_probe`](crate::cpu::pid_probe)), from an in-process
/// target's threads ([`cpu::threads_probe`](crate::cpu::threads_probe)) or from an ironlun target's
/// statistics endpoint ([`crate::target_stats::probe`]).
pub type TargetCpuProbe = Arc<dyn Fn() -> CpuSample + Send + Sync>;

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
    /// Log every measured I/O's latency ([`crate::iolog`]).
    pub lat_log: Option<LatLogSpec>,
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

/// Runs one workload on this task (see [`run`]).
async fn run_here(
    w: &Workload,
    targets: &[LunTarget],
    opts: &RunOptions,
) -> Result<WorkloadResult, String> {
    w.validate()?;
    if targets.is_empty() {
        return Err("no LUN to run against".into());
    }
    let mut issuer = Issuer::new(w, targets, opts.verify)?;
    if let Some(naa) = shaped::designators(w, targets).await? {
        issuer.set_designators(naa);
    }
    let mut extras = Extras::new(w, opts)?;
    let precise = wait::precise_timer();
    let (tx, mut rx) = mpsc::unbounded_channel::<Completion>();
    let mut meter = Meter::new(w)?;
    let mut phase = Phase::new(w);
    let mut cpu_start = CpuMark::take(opts).await;
    let deadline_timer = tokio::time::sleep_until(tokio::time::Instant::from_std(phase.end));
    tokio::pin!(deadline_timer);
    let mut waiter = Waiter::new(precise, deadline_timer);

    loop {
        let now = Instant::now();
        if phase.ramp_ends(now) {
            cpu_start = CpuMark::take(opts).await;
            meter.reset();
            extras.ramp_over();
        }
        if !phase.stop && should_stop(w, &phase, &meter, &issuer, now) {
            phase.stop_at(now, opts.drain_timeout);
        }
        if phase.measuring && now >= phase.next_second {
            let elapsed = (now - phase.measure_start).as_secs_f64();
            meter.close_second(elapsed, opts.progress.as_ref());
            phase.next_second += Duration::from_secs(1);
            let iops = meter.series.last().map_or(0.0, |s| s.iops);
            if extras.second_closed(iops) && !phase.stop {
                phase.stop_at(now, opts.drain_timeout);
            }
        }
        let wake = if phase.stop {
            None
        } else {
            issuer.issue(w, now, &tx).await?
        };
        let outstanding = issuer.outstanding();
        if phase.stop && outstanding == 0 {
            break;
        }
        let deadline = phase.deadline(wake);
        let mut next = waiter
            .wait(&mut rx, deadline, phase.stop, outstanding)
            .await?;
        while let Some((tag, result)) = next.take() {
            let done = Instant::now();
            if let Some(c) = issuer.complete(tag, result) {
                let counted = phase.counts(done);
                meter.completed(&c, done, counted);
                if counted {
                    extras.completed(&c, done, phase.measure_start)?;
                }
            }
            next = rx.try_recv().ok();
        }
    }

    let measure_end = phase
        .stopped_at
        .unwrap_or(phase.end)
        .max(phase.measure_start);
    let elapsed = (measure_end - phase.measure_start).as_secs_f64().max(1e-9);
    let cpu_end = CpuMark::take(opts).await;
    let ios = meter.counts.reads + meter.counts.writes;
    let cpu = cpu_start.until(&cpu_end, elapsed, ios);
    let all = meter.all.clone();
    let mut r = summary::workload_result(w, targets, &issuer, meter, cpu, elapsed);
    extras.finish(&mut r, &all)?;
    Ok(r)
}

/// Issuing stops: the run's time is up, the workload's I/O count is
/// measured, or every worker has swept its zones.
fn should_stop(w: &Workload, phase: &Phase, meter: &Meter, issuer: &Issuer, now: Instant) -> bool {
    now >= phase.end
        || w.ios.is_some_and(|n| meter.measured_ios >= n)
        || (meter.zones.is_some() && issuer.all_swept())
}

/// Where a run is in time: the ramp, the measured interval, the drain.
struct Phase {
    ramp_end: Instant,
    /// The end of the run's time.
    end: Instant,
    /// Past the ramp: completions are measured.
    measuring: bool,
    measure_start: Instant,
    next_second: Instant,
    /// Issuing has stopped; outstanding I/O drains.
    stop: bool,
    /// When issuing stopped: the end of the measured interval.
    stopped_at: Option<Instant>,
    /// Set when issuing stops: outstanding I/O must finish by then.
    drain_deadline: Option<Instant>,
}

impl Phase {
    /// A run starting now.
    fn new(w: &Workload) -> Phase {
        let began = Instant::now();
        let ramp_end = began + w.ramp();
        Phase {
            ramp_end,
            end: ramp_end + w.run_time(),
            measuring: w.ramp().is_zero(),
            measure_start: began,
            next_second: ramp_end + Duration::from_secs(1),
            stop: false,
            stopped_at: None,
            drain_deadline: None,
        }
    }

    /// Ends the ramp if it is over at `now`; true when it just did.
    fn ramp_ends(&mut self, now: Instant) -> bool {
        if self.measuring || now < self.ramp_end {
            return false;
        }
        self.measuring = true;
        self.measure_start = now;
        self.next_second = now + Duration::from_secs(1);
        true
    }

    /// Stops issuing at `now`, allowing outstanding I/O `drain_timeout`
    /// (30 s by default) to finish.
    fn stop_at(&mut self, now: Instant, drain_timeout: Option<Duration>) {
        self.stop = true;
        self.stopped_at = Some(now.min(self.end));
        self.drain_deadline = Some(now + drain_timeout.unwrap_or(Duration::from_secs(30)));
    }

    /// How long to wait at most: until the drain limit while draining,
    /// else until the next second (or the ramp's end), the end, or `wake`,
    /// whichever is first.
    fn deadline(&self, wake: Option<Instant>) -> Option<Instant> {
        if self.stop {
            return self.drain_deadline;
        }
        let mut d = if self.measuring {
            self.next_second
        } else {
            self.ramp_end
        };
        d = d.min(self.end);
        if let Some(x) = wake {
            d = d.min(x);
        }
        Some(d)
    }

    /// An I/O completed at `done` counts in the measured interval.
    ///
    /// IOMeter counts what completes inside the measured interval,
    /// whenever it was issued: leaving out I/Os issued during the ramp
    /// would under-count by latency × rate (14 % at 0.4 s latency over
    /// 3 s). I/Os drained after the end are not counted (the interval is
    /// not stretched for them either).
    fn counts(&self, done: Instant) -> bool {
        self.measuring && done >= self.measure_start && !self.stopped_at.is_some_and(|t| done > t)
    }
}
