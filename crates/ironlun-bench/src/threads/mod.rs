//! Running a workload's workers on several OS threads.
//!
//! Each thread has its own current-thread runtime and opens its own
//! sessions to the LUNs whose workers it runs (`plan::openings`; through
//! the caller's opener, on the thread), then waits for workloads. For each workload the workers are shared
//! out (`plan::assign`); every thread runs its part with the engine's
//! own loop from one common start instant, so the threads' seconds fall
//! on the same instants. Nothing is shared between the threads while
//! they run: each counts into its own histograms and sends each closed
//! second (once a second) and its whole measurement (at the end) to the
//! caller's task, which merges them exactly (`merge`) and takes the CPU
//! marks. A steady-state rule is judged there too, on the merged seconds;
//! the one thing the threads read while running is its stop flag.

pub(crate) mod merge;
pub mod plan;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::sync::{mpsc, oneshot};

use crate::engine::cpu_mark::CpuMark;
use crate::engine::measured::Measured;
use crate::engine::meter::Counters;
use crate::engine::{run_part, summary, Part};
use crate::iolog::{LatLog, SharedLatLog};
use crate::result::WorkloadResult;
use crate::spec::Workload;
use crate::steady::Tracker;
use crate::{LunTarget, RunOptions};
use merge::SeriesMerger;
use plan::Opening;

/// Opens, on thread `t` (so its sessions run on its runtime), the
/// targets of its openings, in their order.
pub type Opener = Arc<
    dyn Fn(u32, Vec<Opening>) -> Pin<Box<dyn Future<Output = Result<Vec<LunTarget>, String>>>>
        + Send
        + Sync,
>;

/// Time from handing out a workload to its common start: every thread
/// has its job by then.
const START_DELAY: Duration = Duration::from_millis(20);

/// A closed second of one thread: its index, counts and latencies.
type SecondMsg = (u32, Counters, Histogram<u64>);

/// One workload for one thread.
struct Job {
    w: Workload,
    opts: RunOptions,
    share: Vec<Vec<u32>>,
    start: Instant,
    ios: Option<u64>,
    seconds: mpsc::UnboundedSender<SecondMsg>,
    /// Set when the run's steady state holds: stop issuing.
    stop: Arc<AtomicBool>,
    /// The run's latency log, when several threads write it.
    log: Option<SharedLatLog>,
    /// The run's number of each of the thread's targets.
    luns: Vec<usize>,
    reply: oneshot::Sender<Result<Measured, String>>,
}

struct Thread {
    /// The targets it opened (their numbers, in its order).
    opened: Vec<usize>,
    jobs: mpsc::UnboundedSender<Job>,
    /// Resolves when the thread has logged out and ends.
    done: oneshot::Receiver<()>,
    join: std::thread::JoinHandle<()>,
}

/// Threads with their sessions open, ready to run workloads.
pub struct Threads {
    threads: Vec<Thread>,
    /// Every target, as the first thread that opened it has it: labels
    /// and capacities name the run's LUNs in results.
    targets: Vec<LunTarget>,
    /// Workers per target the threads were planned for.
    stride: u32,
}

impl Threads {
    /// Starts `n` threads for `targets` targets of up to `stride` workers
    /// each; each thread opens its share of the targets with `open`.
    pub async fn start(
        n: u32,
        targets: usize,
        stride: u32,
        open: Opener,
    ) -> Result<Threads, String> {
        let stride = stride.max(1);
        let mut threads = Vec::new();
        let mut ready = Vec::new();
        for (t, openings) in (0..).zip(plan::openings(targets, stride, n.max(1) as usize)) {
            let (jobs, rx) = mpsc::unbounded_channel();
            let (ready_tx, ready_rx) = oneshot::channel();
            let (done_tx, done) = oneshot::channel();
            let open = open.clone();
            let opened = openings.iter().map(|o| o.target).collect();
            let join = std::thread::Builder::new()
                .name(format!("ironlun-bench-{t}"))
                .spawn(move || thread_main(t, open, openings, rx, ready_tx, done_tx))
                .map_err(|e| format!("cannot start a load thread: {e}"))?;
            threads.push(Thread {
                opened,
                jobs,
                done,
                join,
            });
            ready.push(ready_rx);
        }
        let mut found: Vec<Option<LunTarget>> = vec![None; targets];
        let mut first_error = None;
        for (r, th) in ready.into_iter().zip(&threads) {
            match r.await {
                Ok(Ok(ts)) => {
                    for (j, lun) in th.opened.iter().zip(ts) {
                        if let Some(slot @ None) = found.get_mut(*j) {
                            *slot = Some(lun);
                        }
                    }
                }
                Ok(Err(e)) => first_error = first_error.or(Some(e)),
                Err(_) => first_error = first_error.or(Some("a load thread failed".into())),
            }
        }
        if first_error.is_none() && found.iter().any(Option::is_none) {
            first_error = Some("a target was opened by no thread".into());
        }
        let pool = Threads {
            threads,
            targets: found.into_iter().flatten().collect(),
            stride,
        };
        if let Some(e) = first_error {
            pool.close().await;
            return Err(e);
        }
        Ok(pool)
    }

    /// The number of threads.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// The LUNs the threads run against (the first thread's sessions).
    pub fn targets(&self) -> &[LunTarget] {
        &self.targets
    }

    /// Runs `w` on every thread with work in it and merges the parts.
    pub async fn run(&self, w: &Workload, opts: &RunOptions) -> Result<WorkloadResult, String> {
        w.validate()?;
        if w.workers > self.stride {
            return Err(format!(
                "{}: {} workers per LUN, the load threads were planned for {}",
                w.name, w.workers, self.stride
            ));
        }
        let plan = plan::assign(
            self.targets.len(),
            w.workers,
            self.threads.len(),
            self.stride,
        );
        // Each thread's share by its own targets' order.
        let plan: Vec<Vec<Vec<u32>>> = plan
            .into_iter()
            .zip(&self.threads)
            .map(|(p, th)| {
                th.opened
                    .iter()
                    .map(|j| p.get(*j).cloned().unwrap_or_default())
                    .collect()
            })
            .collect();
        let active = plan::active(&plan);
        let busy = active.iter().filter(|a| **a).count();
        // On several threads, the steady-state rule is judged here on the
        // merged seconds, and every thread is told to stop when it holds.
        let mut steady = w.shape.steady.filter(|_| busy > 1).map(Tracker::new);
        let mut job_w = w.clone();
        if steady.is_some() {
            job_w.shape.steady = None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        // On several threads, one latency log written by all of them.
        let shared_log = match (&opts.lat_log, busy > 1) {
            (Some(spec), true) => Some(SharedLatLog::new(LatLog::create(spec)?)),
            _ => None,
        };
        let ios = plan::split_ios(w.ios, &active);
        let start = Instant::now() + START_DELAY;
        let (seconds, mut seconds_rx) = mpsc::unbounded_channel();
        let mut replies = Vec::new();
        let thread_opts = RunOptions {
            progress: None,
            target_cpu: None,
            lat_log: opts.lat_log.clone().filter(|_| shared_log.is_none()),
            ..opts.clone()
        };
        for (((t, share), on), ios) in self.threads.iter().zip(plan).zip(&active).zip(ios) {
            if !on {
                continue;
            }
            let (reply, rx) = oneshot::channel();
            let job = Job {
                w: job_w.clone(),
                stop: stop.clone(),
                log: shared_log.clone(),
                luns: t.opened.clone(),
                opts: thread_opts.clone(),
                share,
                start,
                ios,
                seconds: seconds.clone(),
                reply,
            };
            t.jobs
                .send(job)
                .map_err(|_| "a load thread has ended".to_owned())?;
            replies.push(rx);
        }
        drop(seconds);
        let mut merger = SeriesMerger::new(replies.len())?;
        let ramp_end = start + w.ramp();
        let judge = Judge {
            steady: &mut steady,
            stop: &stop,
        };
        let (parts, cpu_start) =
            collect(replies, &mut seconds_rx, &mut merger, opts, ramp_end, judge).await?;
        while let Ok((t, c, h)) = seconds_rx.try_recv() {
            merger.add(t, &c, &h)?;
        }
        let cpu_end = CpuMark::take(opts).await;
        let totals: Vec<_> = parts.iter().map(summary::thread_totals).collect();
        let mut m = merge::merge(parts)?;
        m.series = merger.finish()?;
        if let Some(l) = &shared_log {
            l.finish().map_err(|e| format!("latency log: {e}"))?;
        }
        if let Some(t) = &steady {
            m.steady = Some(t.result());
        }
        let cpu = cpu_start.until(&cpu_end, m.elapsed(), m.counts.ios());
        Ok(summary::workload_result(w, &self.targets, m, cpu, totals))
    }

    /// Logs every thread's sessions out and ends the threads.
    pub async fn close(self) {
        let mut done = Vec::new();
        for t in self.threads {
            drop(t.jobs);
            done.push((t.done, t.join));
        }
        for (d, join) in done {
            let _ = d.await;
            let _ = join.join();
        }
    }
}

/// Waits for every thread's measurement while merging the seconds they
/// close (reporting progress as each completes) and taking the CPU mark
/// when the measured interval starts.
async fn collect(
    replies: Vec<oneshot::Receiver<Result<Measured, String>>>,
    seconds: &mut mpsc::UnboundedReceiver<SecondMsg>,
    merger: &mut SeriesMerger,
    opts: &RunOptions,
    ramp_end: Instant,
    mut judge: Judge<'_>,
) -> Result<(Vec<Measured>, CpuMark), String> {
    let ramp = tokio::time::sleep_until(tokio::time::Instant::from_std(ramp_end));
    tokio::pin!(ramp);
    let mut cpu_start = None;
    let mut parts = Vec::new();
    for mut reply in replies {
        let part = loop {
            tokio::select! {
                () = &mut ramp, if cpu_start.is_none() => {
                    cpu_start = Some(CpuMark::take(opts).await);
                }
                Some((t, c, h)) = seconds.recv() => {
                    if merger.add(t, &c, &h)? {
                        progress(opts, merger, t);
                        judge.second_closed(merger.last);
                    }
                }
                r = &mut reply => {
                    break r.map_err(|_| "a load thread ended during the run".to_owned())??;
                }
            }
        };
        parts.push(part);
    }
    let cpu_start = match cpu_start {
        Some(c) => c,
        None => CpuMark::take(opts).await,
    };
    Ok((parts, cpu_start))
}

/// The steady-state rule over the merged seconds, and the flag that
/// stops every thread when it holds.
struct Judge<'a> {
    steady: &'a mut Option<Tracker>,
    stop: &'a AtomicBool,
}

impl Judge<'_> {
    /// A merged second closed with (IOPS, mean latency µs).
    fn second_closed(&mut self, (iops, mean_us): (f64, f64)) {
        if let Some(t) = self.steady.as_mut() {
            if t.push(iops, mean_us) {
                self.stop.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Reports the merged progress after second `t` closed on every thread.
fn progress(opts: &RunOptions, merger: &SeriesMerger, t: u32) {
    if let Some(p) = &opts.progress {
        let elapsed = f64::from(t + 1);
        let total = &merger.total;
        p(
            elapsed,
            total.ios() as f64 / elapsed,
            total.bytes() as f64 / elapsed / 1e6,
            merger.total_latency.value_at_quantile(0.99) as f64 / 1000.0,
        );
    }
}

/// A load thread: opens its LUNs, runs the jobs it is given, and logs out
/// when the job channel closes.
fn thread_main(
    t: u32,
    open: Opener,
    openings: Vec<Opening>,
    mut jobs: mpsc::UnboundedReceiver<Job>,
    ready: oneshot::Sender<Result<Vec<LunTarget>, String>>,
    done: oneshot::Sender<()>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(format!("load thread {t}: no runtime: {e}")));
            return;
        }
    };
    rt.block_on(async move {
        let targets = match open(t, openings).await {
            Ok(targets) => targets,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(targets.clone()));
        while let Some(job) = jobs.recv().await {
            let seconds = job.seconds;
            let part = Part {
                share: Some(job.share),
                start: Some(job.start),
                ios: job.ios,
                sink: Some(Box::new(move |t, c, h| {
                    let _ = seconds.send((t, *c, h.clone()));
                })),
                stop: Some(job.stop),
                log: job.log,
                luns: Some(job.luns),
                cpu: false,
            };
            let r = run_part(&job.w, &targets, &job.opts, part).await;
            let _ = job.reply.send(r.map(|(m, _)| m));
        }
        crate::luns::close(&targets).await;
    });
    let _ = done.send(());
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::steady::Rule;

    #[test]
    fn the_merged_seconds_stop_every_thread_once_the_rule_holds() {
        let rule: Rule = "iops:5%@3s".parse().unwrap();
        let mut steady = Some(Tracker::new(rule));
        let stop = AtomicBool::new(false);
        let mut judge = Judge {
            steady: &mut steady,
            stop: &stop,
        };
        // One thread's 50 IOPS would look steady from the start; the
        // merged seconds (both threads) are not until the third flat one.
        for iops in [60.0, 100.0, 100.0, 100.0] {
            assert!(!stop.load(Ordering::Relaxed), "stopped before {iops}");
            judge.second_closed((iops, 80.0));
        }
        assert!(stop.load(Ordering::Relaxed));
        let r = steady.unwrap().result();
        assert!(r.reached);
        assert_eq!(r.at_s, Some(4));
    }
}
