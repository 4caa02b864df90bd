//! Snapshots on a schedule (docs/snapshots.md, "Schedules"): each LUN
//! whose configuration has `snapshot_every` gets a snapshot every
//! interval, taken as `ironlun admin snapshot create` takes one (the LU
//! held still; the management API's operations, given as [`Snapshots`]
//! by ironlun-target-admin), and keeps the newest `snapshot_keep` of the
//! schedule's own.
//!
//! The [`Scheduler`] thread ticks four times a second and reads the
//! schedules from the running targets, so a schedule set, changed or
//! removed by a live change (SIGHUP, `config reload`, `apply`) is
//! followed at the next tick. A run blocks (a file system, the cluster):
//! each runs on a thread of its own, at most one per LUN and
//! [`MAX_RUNNING`] at once, so a LUN whose store hangs holds up no
//! other. A run that fails is logged and counted and tried again at the
//! next interval. What the runs did is kept in the registry's
//! [`Record`], which `ironlun admin` and /metrics read. `rules` makes
//! the decisions and `slot` keeps each LUN's state, both without clocks
//! or threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use crate::live::Live;

pub mod rules;
pub mod slot;

pub(crate) use slot::Slot;
use slot::{Claim, Store};
pub use slot::{LastRun, ScheduleView};

/// How often the scheduler looks at the schedules.
const TICK: Duration = Duration::from_millis(250);
/// Runs under way at once, over every LUN.
pub const MAX_RUNNING: usize = 8;

/// A scheduled LUN: its target's name (lower case, as names compare)
/// and number.
type Key = (String, u16);

/// Every scheduled LUN's state; a LUN whose schedule is gone leaves it
/// at the first tick with no run of its under way (so it holds at most
/// the LUNs there are).
#[derive(Default)]
pub struct Record {
    slots: Mutex<HashMap<Key, Slot>>,
}

fn key(target: &str, lun: u16) -> Key {
    (target.to_ascii_lowercase(), lun)
}

impl Record {
    fn slots(&self) -> MutexGuard<'_, HashMap<Key, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts `slot` in for LUN `lun` of `target` (tests of what reads
    /// the record).
    #[cfg(test)]
    pub(crate) fn put(&self, target: &str, lun: u16, slot: Slot) {
        self.slots().insert(key(target, lun), slot);
    }

    /// LUN `lun` of `target`'s schedule and last result, if it has one.
    pub fn view(&self, target: &str, lun: u16) -> Option<ScheduleView> {
        self.slots().get(&key(target, lun)).map(Slot::view)
    }
}

/// A LUN's snapshots as the schedules take and delete them: the
/// management API's operations (ironlun-target-admin), the same that
/// `ironlun admin snapshot` runs. Each answers an error as its message.
pub trait Snapshots: Send + Sync {
    /// The names of LUN `lun` of `target`'s snapshots.
    fn names(&self, live: &Live, target: &str, lun: u16) -> Result<Vec<String>, String>;
    /// Takes snapshot `name` of the LUN, held still; how long it was.
    fn create(&self, live: &Live, target: &str, lun: u16, name: &str) -> Result<Duration, String>;
    /// Deletes snapshot `name` of the LUN.
    fn delete(&self, live: &Live, target: &str, lun: u16, name: &str) -> Result<(), String>;
}

/// The thread that takes scheduled snapshots; stopped when dropped.
pub struct Scheduler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Scheduler {
    pub fn start(live: Arc<Live>, snapshots: Arc<dyn Snapshots>) -> std::io::Result<Scheduler> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ironlun-snapsched".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    tick(&live, &snapshots, now_ms());
                    std::thread::sleep(TICK);
                }
            })?;
        Ok(Scheduler {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One look at the schedules: the record follows the configuration, and
/// each LUN whose run is due (and that has none under way) gets one,
/// [`MAX_RUNNING`] at most at once.
fn tick(live: &Arc<Live>, snapshots: &Arc<dyn Snapshots>, now: u64) {
    let mut wanted: HashMap<Key, (String, crate::config::SnapshotSchedule)> = HashMap::new();
    for t in live.registry.targets().iter() {
        for l in &t.cfg.luns {
            if let Some(s) = &l.schedule {
                wanted.insert(key(&t.cfg.name, l.number), (t.cfg.name.clone(), s.clone()));
            }
        }
    }
    let mut due = Vec::new();
    {
        let mut slots = live.registry.schedules.slots();
        // A run under way stays shown until it ends; its LUN gets no
        // other.
        slots.retain(|k, s| wanted.contains_key(k) || s.running());
        let mut running = slots.values().filter(|s| s.running()).count();
        for (k, (_, s)) in &wanted {
            let slot = slots
                .entry(k.clone())
                .or_insert_with(|| Slot::new(s.clone()));
            slot.set(s);
            if running >= MAX_RUNNING {
                continue;
            }
            if let Some(c) = slot.claim(now) {
                running += 1;
                due.push((k.clone(), c));
            }
        }
    }
    for (k, claim) in due {
        let target = wanted.get(&k).map_or_else(String::new, |(n, _)| n.clone());
        let (run_live, run_snapshots, lun) = (live.clone(), snapshots.clone(), k.1);
        let spawned = std::thread::Builder::new()
            .name("ironlun-snaprun".into())
            .spawn(move || run_one(&run_live, &*run_snapshots, &target, lun, &claim));
        if let Err(e) = spawned {
            // Claimed again at the next tick.
            warn!("snapshot schedule: no thread for a run: {e}");
            if let Some(s) = live.registry.schedules.slots().get_mut(&k) {
                s.release();
            }
        }
    }
}

/// One run on LUN `lun` of `target`: taken, logged, recorded.
fn run_one(live: &Live, snapshots: &dyn Snapshots, target: &str, lun: u16, claim: &Claim) {
    let started = now_ms();
    let mut store = LiveStore {
        live,
        snapshots,
        target,
        lun,
    };
    // A panic below is a run that failed, not a schedule that never
    // runs again (its slot would stay claimed).
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        slot::run(claim, started, &mut store)
    }))
    .unwrap_or_else(|_| slot::Outcome::Failed {
        error: "the run panicked (a bug: see the log)".into(),
        stamped: started / 1000,
    });
    let what = format!("target {target} LUN {lun}");
    match &outcome {
        slot::Outcome::Waits { next } => info!(
            "snapshot schedule of {what} ({}): the newest of its snapshots is recent; the next at {}",
            claim.schedule,
            rules::stamp(next / 1000)
        ),
        slot::Outcome::Took {
            name,
            deleted,
            error,
            ..
        } => {
            info!(
                "scheduled snapshot {name} of {what}; retention deleted {}",
                if deleted.is_empty() {
                    "none".to_owned()
                } else {
                    deleted.join(", ")
                }
            );
            if let Some(e) = error {
                warn!("snapshot schedule of {what}: {e}; tried again after the next snapshot");
            }
        }
        slot::Outcome::Failed { error, .. } => {
            warn!("scheduled snapshot of {what} failed: {error}; tried again at the next interval");
        }
    }
    if let Some(s) = live.registry.schedules.slots().get_mut(&key(target, lun)) {
        s.finish(claim, started, outcome);
    }
}

/// The running daemon's LUN, through the management API's operations.
struct LiveStore<'a> {
    live: &'a Live,
    snapshots: &'a dyn Snapshots,
    target: &'a str,
    lun: u16,
}

impl Store for LiveStore<'_> {
    fn names(&mut self) -> Result<Vec<String>, String> {
        self.snapshots.names(self.live, self.target, self.lun)
    }

    fn create(&mut self, name: &str) -> Result<Duration, String> {
        self.snapshots
            .create(self.live, self.target, self.lun, name)
    }

    fn delete(&mut self, name: &str) -> Result<(), String> {
        self.snapshots
            .delete(self.live, self.target, self.lun, name)
    }
}

#[cfg(test)]
mod tests;
