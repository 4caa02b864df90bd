//! The target's side of a LU's sanitize: its medium rate and store, what
//! it does at start with a record an earlier process left (SBC-4
//! §4.11.2: resume, or failure mode), and stopping at shutdown.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::pace;
use super::record::{self, Offered, Record, SanitizeRecord, SanitizeRestore, SanitizeStore};
use super::run::{begin, geometry};
use crate::lu::LogicalUnit;

/// Configuring, restoring and stopping a LU's sanitize operations (the
/// target's side).
impl LogicalUnit {
    /// The medium rate sanitize operations keep to, in bytes per second
    /// (`None`: as fast as the backend goes).
    pub fn set_sanitize_rate(&mut self, bytes_per_second: Option<u64>) {
        self.sanitize.rate = bytes_per_second.filter(|r| *r > 0);
    }

    /// Where the LU records a sanitize under way or failed.
    pub fn set_sanitize_store(&mut self, store: Arc<dyn SanitizeStore>) {
        self.sanitize.store = Some(store);
    }

    /// Takes up the record the store held when the target started:
    /// resumes an interrupted operation (SBC-4 §4.11.2), or enters
    /// failure mode if it cannot. (A record that does not decode is the
    /// target's to handle: it takes the LU offline, `crate::offline`.)
    pub fn restore_sanitize(
        lu: &Arc<LogicalUnit>,
        saved: Option<SanitizeRecord>,
    ) -> SanitizeRestore {
        let Some(SanitizeRecord(saved)) = saved else {
            return SanitizeRestore::Nothing;
        };
        let offered = Offered {
            overwrite: lu.sanitize_allowed() && !lu.write_protected(),
            block_erase: lu.sanitize_allowed() && lu.thin() && !lu.write_protected(),
        };
        let plan = record::resume_plan(saved, geometry(lu), offered);
        let job = match plan {
            Ok(job) => job,
            Err(why) => return lu.enter_failure_mode(why),
        };
        let progress = pace::progress(job.done, job.work());
        match begin(lu, job, None) {
            Ok(_) => SanitizeRestore::Resumed { progress },
            Err(_) => lu.enter_failure_mode("the sanitize could not be resumed".into()),
        }
    }

    fn enter_failure_mode(&self, why: String) -> SanitizeRestore {
        let st = &self.sanitize;
        st.failed.store(true, Ordering::Release);
        let _ = st.save(&Record::Failed { lu: geometry(self) });
        SanitizeRestore::FailureMode { why }
    }

    /// The target is stopping: a running operation stops at its next
    /// step, recording where it was, and the LU stays NOT READY, SANITIZE
    /// IN PROGRESS until the process ends. The progress it had, if one
    /// was running, and whether it was recorded (it resumes when the
    /// target starts again).
    pub fn stop_sanitize(&self) -> Option<(u16, bool)> {
        let st = &self.sanitize;
        st.ctl().stop = true;
        st.changed.notify_all();
        st.running
            .load(Ordering::Acquire)
            .then(|| (st.progress.load(Ordering::Relaxed), st.store.is_some()))
    }
}
