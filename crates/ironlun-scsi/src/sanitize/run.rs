//! An operation's life: it is recorded and started on a thread of its
//! own, a SANITIZE command (IMMED=0) waits for it unless task management
//! ends the wait, it keeps its pace and stops when the target does, it
//! records checkpoints, and its end leaves the LU ready or in failure mode.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use super::job::{self, Job, Outcome};
use super::pace;
use super::record::{Geometry, Record};
use super::SanitizeState;
use crate::lu::LogicalUnit;
use crate::sense::Sense;
use crate::NexusId;
use ironlun_scsi_codes::{Asc, SenseKey};

/// What the operation's thread, a command waiting for it, and the
/// target's shutdown tell each other.
#[derive(Default)]
pub(super) struct Ctl {
    /// Operations started and finished so far.
    pub(super) started: u64,
    pub(super) finished: u64,
    /// The outcome of the operation that finished last, by number.
    pub(super) outcome: Option<(u64, Result<(), Sense>)>,
    /// The nexus whose SANITIZE (IMMED=0) waits for the operation.
    pub(super) waiter: Option<NexusId>,
    /// The waiting command's task was aborted: it stops waiting.
    pub(super) released: bool,
    /// The target is stopping: the operation stops at a checkpoint.
    pub(super) stop: bool,
}

impl SanitizeState {
    pub(super) fn ctl(&self) -> MutexGuard<'_, Ctl> {
        self.ctl.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn rate(&self) -> Option<u64> {
        self.rate
    }

    /// Waits until `deadline` unless the target stops first: whether to
    /// go on. The operation's pace; holds no lock while it waits.
    pub(crate) fn pause_until(&self, deadline: Instant) -> bool {
        let mut c = self.ctl();
        loop {
            if c.stop {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            c = self
                .changed
                .wait_timeout(c, deadline.saturating_duration_since(now))
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        }
    }

    /// Whether the target asked the operation to stop.
    pub(crate) fn stopping(&self) -> bool {
        self.ctl().stop
    }

    /// Ends the wait of the SANITIZE command `nexus` (any with `None`)
    /// has waiting for the operation: its task was aborted.
    pub(crate) fn release(&self, nexus: Option<NexusId>) {
        let mut c = self.ctl();
        if c.waiter.is_some() && (nexus.is_none() || c.waiter == nexus) {
            c.released = true;
            self.changed.notify_all();
        }
    }

    /// Waits for operation `n` to finish (or for the command to be
    /// released, or the target to stop): the command's outcome.
    pub(super) fn wait(&self, n: u64) -> Result<(), Sense> {
        let mut c = self.ctl();
        loop {
            if c.finished >= n {
                c.waiter = None;
                return match &c.outcome {
                    Some((m, r)) if *m == n => *r,
                    _ => Ok(()),
                };
            }
            if c.released || c.stop {
                c.waiter = None;
                c.released = false;
                return Err(self.in_progress());
            }
            c = self.changed.wait(c).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub(super) fn save(&self, r: &Record) -> std::io::Result<()> {
        self.store.as_ref().map_or(Ok(()), |s| s.save(&r.encode()))
    }

    pub(super) fn forget(&self) {
        if let Some(s) = &self.store {
            // A record left behind puts the LU in failure mode after a
            // restart; the store reports the error itself.
            let _ = s.clear();
        }
    }

    /// Records how far `job` got, once what it wrote is stable. A flush
    /// that fails fails the operation.
    pub(crate) fn checkpoint(&self, lu: &LogicalUnit, job: &Job) -> Result<(), Sense> {
        if self.store.is_none() {
            return Ok(());
        }
        lu.backend.flush().map_err(|_| job::failed())?;
        let _ = self.save(&Record::Running {
            lu: geometry(lu),
            job: job.clone(),
        });
        Ok(())
    }
}

pub(super) fn geometry(lu: &LogicalUnit) -> Geometry {
    Geometry {
        naa: lu.cfg.naa_id,
        block_size: lu.block_size(),
        blocks: lu.num_blocks(),
    }
}

pub(super) fn internal_failure() -> Sense {
    Sense::new(SenseKey::HARDWARE_ERROR, Asc::INTERNAL_TARGET_FAILURE)
}

/// Starts `job` on a thread of its own, recorded first; `waiter` is the
/// nexus whose command will wait for it. The operation's number.
pub(super) fn begin(
    lu: &Arc<LogicalUnit>,
    job: Job,
    waiter: Option<NexusId>,
) -> Result<u64, Sense> {
    let st = &lu.sanitize;
    if st.running.swap(true, Ordering::AcqRel) {
        return Err(st.in_progress());
    }
    st.progress
        .store(pace::progress(job.done, job.work()), Ordering::Relaxed);
    let record = Record::Running {
        lu: geometry(lu),
        job: job.clone(),
    };
    if st.save(&record).is_err() {
        // Not recorded, not started: a restart could not resume it.
        st.running.store(false, Ordering::Release);
        return Err(internal_failure());
    }
    let n = {
        let mut c = st.ctl();
        // One per SANITIZE started: a u64 does not run out.
        c.started = c.started.saturating_add(1);
        c.waiter = waiter;
        c.released = false;
        c.started
    };
    let held = Arc::clone(lu);
    let spawned = std::thread::Builder::new()
        .name("sanitize".into())
        .spawn(move || {
            let outcome = job::run(&held, job);
            finish(&held, n, outcome);
        });
    if spawned.is_err() {
        finish(lu, n, Outcome::Finished(Err(internal_failure())));
        return Err(internal_failure());
    }
    Ok(n)
}

/// Leaves the state an operation's end leaves: failure mode on error, the
/// record cleared on success, and, when the target stopped it, still
/// running (the record says where it resumes).
fn finish(lu: &LogicalUnit, n: u64, outcome: Outcome) {
    let st = &lu.sanitize;
    let result = match outcome {
        Outcome::Stopped => {
            st.changed.notify_all();
            return;
        }
        Outcome::Finished(r) => r,
    };
    match &result {
        Ok(()) => st.forget(),
        Err(_) => {
            let _ = st.save(&Record::Failed { lu: geometry(lu) });
        }
    }
    st.failed.store(result.is_err(), Ordering::Release);
    st.progress.store(u16::MAX, Ordering::Relaxed);
    st.running.store(false, Ordering::Release);
    let mut c = st.ctl();
    c.finished = n;
    c.outcome = Some((n, result));
    st.changed.notify_all();
}
