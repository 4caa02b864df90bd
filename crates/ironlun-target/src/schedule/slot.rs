//! One scheduled LUN's state and one run of its schedule, over a
//! [`Store`] so that the tests can run them on a store in memory with
//! the time passed in.

use std::time::Duration;

use serde::Serialize;

use super::rules;
use crate::config::{every_text, SnapshotSchedule};

/// What a run needs of the LUN's snapshots (the daemon's is the
/// management API's own operations, ironlun-target-admin's `snapshots`).
pub trait Store {
    /// The names of the snapshots the LUN keeps.
    fn names(&mut self) -> Result<Vec<String>, String>;
    /// Takes snapshot `name` of the LUN, held still; answers the pause.
    fn create(&mut self, name: &str) -> Result<Duration, String>;
    fn delete(&mut self, name: &str) -> Result<(), String>;
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The first run of a schedule found the newest of its own snapshots
    /// younger than an interval: nothing taken, the next is due then.
    Waits { next: u64 },
    /// Snapshot `name` taken at Unix second `stamped`; retention deleted
    /// `deleted` and left `kept` of the schedule's own; `error`: a
    /// deletion that failed.
    Took {
        name: String,
        stamped: u64,
        paused: Duration,
        deleted: Vec<String>,
        kept: u64,
        error: Option<String>,
    },
    /// Nothing taken (`stamped`: the second the run began).
    Failed { error: String, stamped: u64 },
}

/// A run a tick handed out: when it was due (`None`: the schedule's
/// first, whose time the run finds), and for which schedule.
#[derive(Clone, Debug)]
pub struct Claim {
    pub due: Option<u64>,
    pub schedule: SnapshotSchedule,
}

/// One run of schedule `claim` begun at `now_ms` (Unix milliseconds).
pub fn run(claim: &Claim, now_ms: u64, store: &mut dyn Store) -> Outcome {
    let s = &claim.schedule;
    let stamped = now_ms / 1000;
    let failed = |error: String| Outcome::Failed { error, stamped };
    let names = match store.names() {
        Ok(n) => n,
        Err(e) => return failed(format!("listing snapshots: {e}")),
    };
    if claim.due.is_none() {
        let due = rules::first_due(s, &names, now_ms);
        if due > now_ms {
            return Outcome::Waits { next: due };
        }
    }
    let name = rules::stamp_name(&s.prefix, stamped);
    let paused = match store.create(&name) {
        Ok(p) => p,
        Err(e) => return failed(e),
    };
    let mut after = names;
    after.push(name.clone());
    let mut deleted = Vec::new();
    let mut error = None;
    for old in rules::to_delete(&s.prefix, s.keep, &after) {
        match store.delete(&old) {
            Ok(()) => deleted.push(old),
            Err(e) => {
                error = Some(format!("retention: deleting {old}: {e}"));
                break;
            }
        }
    }
    let kept = rules::own(&s.prefix, &after).len() - deleted.len();
    Outcome::Took {
        name,
        stamped,
        paused,
        deleted,
        kept: kept as u64,
        error,
    }
}

/// The last run's result, as `ironlun admin` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LastRun {
    /// When it began, seconds since the Unix epoch.
    pub at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_ms: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One scheduled LUN: its schedule, when it runs next, and what its runs
/// did.
#[derive(Clone, Debug)]
pub struct Slot {
    pub schedule: SnapshotSchedule,
    /// Unix ms the next run is due; `None`: the first run finds it.
    next: Option<u64>,
    running: bool,
    pub last: Option<LastRun>,
    /// Snapshots taken, and runs that failed (a deletion that failed
    /// included), since the daemon started.
    pub taken: u64,
    pub failures: u64,
    /// The schedule's own snapshots the LUN keeps, as the last run left.
    pub kept: Option<u64>,
    /// The Unix second of the last snapshot taken.
    pub last_success: Option<u64>,
}

impl Slot {
    pub fn new(schedule: SnapshotSchedule) -> Slot {
        Slot {
            schedule,
            next: None,
            running: false,
            last: None,
            taken: 0,
            failures: 0,
            kept: None,
            last_success: None,
        }
    }

    /// The configuration's schedule now: a changed one starts again
    /// (its first run finds when), the counters stay.
    pub fn set(&mut self, s: &SnapshotSchedule) {
        if self.schedule != *s {
            self.schedule = s.clone();
            self.next = None;
        }
    }

    pub fn running(&self) -> bool {
        self.running
    }

    /// Unix ms of the next run, once known.
    pub fn next(&self) -> Option<u64> {
        self.next
    }

    /// The run due at `now_ms`, if one is and none is under way.
    pub fn claim(&mut self, now_ms: u64) -> Option<Claim> {
        if self.running || self.next.is_some_and(|n| now_ms < n) {
            return None;
        }
        self.running = true;
        Some(Claim {
            due: self.next,
            schedule: self.schedule.clone(),
        })
    }

    /// A claimed run that never started: claimed again at the next tick.
    pub fn release(&mut self) {
        self.running = false;
    }

    /// Run `claim`, begun at `now_ms`, ended with `outcome`.
    pub fn finish(&mut self, claim: &Claim, now_ms: u64, outcome: Outcome) {
        self.running = false;
        let due = claim.due.unwrap_or(now_ms);
        let next = |stamped| rules::next_due(&claim.schedule, due, now_ms, stamped);
        let next = match outcome {
            Outcome::Waits { next } => next,
            Outcome::Took {
                name,
                stamped,
                paused,
                deleted,
                kept,
                error,
            } => {
                self.taken += 1;
                self.failures += u64::from(error.is_some());
                self.kept = Some(kept);
                self.last_success = Some(stamped);
                self.last = Some(LastRun {
                    at: stamped,
                    snapshot: Some(name),
                    paused_ms: Some(paused.as_secs_f64() * 1e3),
                    deleted,
                    error,
                });
                next(stamped)
            }
            Outcome::Failed { error, stamped } => {
                self.failures += 1;
                self.last = Some(LastRun {
                    at: stamped,
                    snapshot: None,
                    paused_ms: None,
                    deleted: Vec::new(),
                    error: Some(error),
                });
                next(stamped)
            }
        };
        // A schedule changed meanwhile starts again.
        if self.schedule == claim.schedule {
            self.next = Some(next);
        }
    }

    pub fn view(&self) -> ScheduleView {
        ScheduleView {
            every: every_text(self.schedule.every),
            keep: self.schedule.keep,
            prefix: self.schedule.prefix.clone(),
            next: self.next.map(|ms| ms / 1000),
            running: self.running,
            taken: self.taken,
            failures: self.failures,
            kept: self.kept,
            last_success: self.last_success,
            last: self.last.clone(),
        }
    }
}

/// A LUN's schedule and its last result, as the API shows them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScheduleView {
    pub every: String,
    pub keep: u32,
    pub prefix: String,
    /// When the next run is due, seconds since the Unix epoch.
    pub next: Option<u64>,
    pub running: bool,
    pub taken: u64,
    pub failures: u64,
    pub kept: Option<u64>,
    pub last_success: Option<u64>,
    pub last: Option<LastRun>,
}
