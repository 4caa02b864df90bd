//! Runs a [`Workload`] against LUNs.
//!
//! # Runtime model
//! One task drives every worker of a run (or of one thread's part of a
//! threaded run, see [`crate::threads`]): each worker keeps its queue
//! depth of I/Os in flight through the shared completion channel of
//! [`Responder::Stream`], so a batch of completions costs one wakeup and
//! no per-I/O task or oneshot. Local targets complete into the same loop
//! (the io_uring engine is reaped here, psync's threads send to the same
//! channel, see [`crate::local`]). Write data (when not verifying) is a
//! slice of one pre-filled buffer: no allocation per I/O in steady state.
//!
//! # Layout
//! This module holds the public types and the run's loop (`run_here`),
//! which ties the parts together: `issuer` keeps each worker's I/O in
//! flight, `sources` delivers completions, `meter` measures what
//! completes, `wait` waits for the next completion or timed event,
//! `cpu_mark` reads CPU time at the start and the end of the measured
//! interval, `measured` holds what a run or a thread measured, and
//! `summary` makes the [`WorkloadResult`].

pub(crate) mod cpu_mark;
mod issuer;
pub(crate) mod measured;
pub(crate) mod meter;
mod shaped;
mod sources;
pub(crate) mod summary;
mod wait;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ironlun_initiator::{Capacity, Multipath, Responder, ScsiRequest, Session};

use crate::iolog::{LatLogSpec, SharedLatLog};
use crate::local::LocalDev;
use crate::result::WorkloadResult;
use crate::spec::Workload;
use cpu_mark::CpuMark;
use issuer::Issuer;
use measured::Measured;
use meter::{Meter, SecondSink};
pub(crate) use meter::{HIST_HIGH_NS, HIST_LOW_NS, HIST_SIGFIG};
pub(crate) use shaped::buckets;
use shaped::Extras;
pub(crate) use summary::log_buckets;
use wait::Waiter;

/// A way to reach a LUN: one session, several paths, or (no iSCSI) a
/// local file or block device.
#[derive(Clone, Debug)]
pub enum Path {
    Single(Session),
    Multi(Arc<Multipath>),
    Local(Arc<LocalDev>),
}

impl Path {
    async fn submit(&self, req: ScsiRequest, r: Responder) -> Result<(), ironlun_initiator::Error> {
        match self {
            Path::Single(s) => s.submit(req, r).await,
            Path::Multi(m) => m.submit(req, r).await,
            Path::Local(_) => Err(ironlun_initiator::Error::Malformed(
                "a SCSI command for a local target".into(),
            )),
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

    /// Part `k` of `n` equal parts of this slice: session `k` of a URL's
    /// `n` sessions drives this part of the range its thread or agent has.
    pub fn part(self, k: u32, n: u32) -> Slice {
        Slice {
            index: self.index.saturating_mul(n).saturating_add(k),
            count: self.count.saturating_mul(n),
        }
    }
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
    /// Log every write of a verifying run with its times
    /// ([`crate::verify_log`]); one log for every thread of the run.
    pub verify_log: Option<crate::verify_log::WriteLog>,
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
    let part = Part {
        cpu: true,
        ..Part::default()
    };
    let (m, cpu_start) = run_part(w, targets, opts, part).await?;
    let cpu_end = CpuMark::take(opts).await;
    let cpu = cpu_start.until(&cpu_end, m.elapsed(), m.counts.ios());
    let totals = vec![summary::thread_totals(&m)];
    Ok(summary::workload_result(w, targets, m, cpu, totals))
}

/// One part of a run: which workers run here, from when, and what the
/// run's other parts need from this one.
#[derive(Default)]
pub(crate) struct Part {
    /// The workers of each target that run here (`None`: all).
    pub(crate) share: Option<Vec<Vec<u32>>>,
    /// When the run starts (`None`: now); parts of one run share it, so
    /// their seconds fall on the same instants.
    pub(crate) start: Option<Instant>,
    /// This part's share of the workload's I/O count.
    pub(crate) ios: Option<u64>,
    /// Where each closed second goes.
    pub(crate) sink: Option<SecondSink>,
    /// Set by the caller to stop issuing (a threaded run's steady state,
    /// judged on the merged series).
    pub(crate) stop: Option<Arc<AtomicBool>>,
    /// The run's latency log, when several threads write it (else each
    /// part opens `opts.lat_log` itself).
    pub(crate) log: Option<SharedLatLog>,
    /// The run's number of each target of this part, in its order
    /// (`None`: the same as the part's).
    pub(crate) luns: Option<Vec<usize>>,
    /// Take the CPU mark at the start of the measured interval here (a
    /// threaded run takes its marks where it waits for its threads).
    pub(crate) cpu: bool,
}

/// Runs one part of a workload on a task of its own (see [`run`]);
/// returns what it measured and, when it took CPU marks, the mark at the
/// start of the measured interval.
pub(crate) async fn run_part(
    w: &Workload,
    targets: &[LunTarget],
    opts: &RunOptions,
    part: Part,
) -> Result<(Measured, CpuMark), String> {
    let (w, targets, opts) = (w.clone(), targets.to_vec(), opts.clone());
    let mut task = AbortOnDrop(tokio::spawn(async move {
        run_here(&w, &targets, &opts, part).await
    }));
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

/// Runs one part of a workload on this task (see [`run`]).
async fn run_here(
    w: &Workload,
    targets: &[LunTarget],
    opts: &RunOptions,
    part: Part,
) -> Result<(Measured, CpuMark), String> {
    w.validate()?;
    if targets.is_empty() {
        return Err("no LUN to run against".into());
    }
    let mut issuer = Issuer::new(w, targets, opts.verify, part.share.as_deref())?;
    if let (Some(log), true) = (&opts.verify_log, opts.verify) {
        issuer.set_write_log(log.clone(), part.luns.clone());
    }
    if let Some(naa) = shaped::designators(w, targets).await? {
        issuer.set_designators(naa);
    }
    let mut extras = Extras::new(w, opts, part.log.clone(), part.luns.clone())?;
    let precise = wait::precise_timer();
    let mut sources = issuer.sources(targets, w)?;
    let mut meter = Meter::new(w)?;
    meter.sink = part.sink;
    if let Some(t0) = part.start {
        tokio::time::sleep_until(tokio::time::Instant::from_std(t0)).await;
    }
    let mut phase = Phase::new(w, part.start.unwrap_or_else(Instant::now));
    let ios_limit = part.ios.or(w.ios);
    let mut cpu_start = if part.cpu {
        CpuMark::take(opts).await
    } else {
        CpuMark::default()
    };
    let deadline_timer = tokio::time::sleep_until(tokio::time::Instant::from_std(phase.end));
    tokio::pin!(deadline_timer);
    let mut waiter = Waiter::new(precise, deadline_timer);

    loop {
        let now = Instant::now();
        if phase.ramp_ends(now) {
            if part.cpu {
                cpu_start = CpuMark::take(opts).await;
            }
            meter.reset();
            extras.ramp_over();
        }
        let told = part
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed));
        if !phase.stop && (told || should_stop(ios_limit, &phase, &meter, &issuer, now)) {
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
            issuer.issue(w, now, &mut sources).await?
        };
        let outstanding = issuer.outstanding();
        if phase.stop && outstanding == 0 {
            break;
        }
        let deadline = phase.deadline(wake);
        let mut next = waiter
            .wait(&mut sources, deadline, phase.stop, outstanding)
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
            next = sources.try_next();
        }
    }

    let measure_end = phase
        .stopped_at
        .unwrap_or(phase.end)
        .max(phase.measure_start);
    let mut m = meter.finish(issuer.verify_report(), phase.measure_start, measure_end);
    (m.ops, m.steady) = extras.finish()?;
    Ok((m, cpu_start))
}

/// Issuing stops: the run's time is up, the workload's I/O count is
/// measured, or every worker has swept its zones.
fn should_stop(
    ios: Option<u64>,
    phase: &Phase,
    meter: &Meter,
    issuer: &Issuer,
    now: Instant,
) -> bool {
    now >= phase.end
        || ios.is_some_and(|n| meter.measured_ios >= n)
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
    /// A run starting at `began`.
    fn new(w: &Workload, began: Instant) -> Phase {
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

    /// Ends the ramp if it is over at `now`; true when it just did. The
    /// measured interval starts at the ramp's planned end, not when it is
    /// noticed, so that the parts of a threaded run count the same
    /// seconds.
    fn ramp_ends(&mut self, now: Instant) -> bool {
        if self.measuring || now < self.ramp_end {
            return false;
        }
        self.measuring = true;
        self.measure_start = self.ramp_end;
        self.next_second = self.ramp_end + Duration::from_secs(1);
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
        self.measuring && done >= self.measure_start && self.stopped_at.is_none_or(|t| done <= t)
    }
}
