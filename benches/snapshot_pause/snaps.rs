//! Snapshots taken with `ironlun admin snapshot create`, each timed from
//! the command's start to its exit, with the pause its answer prints
//! (`I/O paused 0.3 ms (in-flight drained in 0.0 ms, flushed in 0.1 ms)`,
//! docs/snapshots.md), and deleted again with `snapshot delete`.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::daemon::{Daemon, TARGET};

/// How long after the bench's login and ramp a window's first snapshot
/// starts.
const LEAD: Duration = Duration::from_millis(500);

/// One snapshot taken.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Snap {
    pub name: String,
    /// Seconds into its series.
    pub at_s: f64,
    /// `ironlun admin snapshot create`, process start to exit.
    pub wall_ms: f64,
    /// How long the LU's I/O waited, as the daemon measured it, and the
    /// parts of it the answer names.
    pub paused_ms: f64,
    pub drained_ms: f64,
    pub flushed_ms: f64,
    /// Whether it returned before the bench's measured time ended (at
    /// least half a second before, by the series' own clock), so that
    /// its pause is in the bench's latencies; true outside windows.
    pub in_window: bool,
}

/// A series of snapshots of LUN 0 of `daemon`'s target.
pub struct Series<'a> {
    pub ironlun: &'a Path,
    pub daemon: &'a Daemon,
    /// In the snapshots' names, so that windows differ.
    pub tag: String,
    /// How far apart the snapshots start (zero: one after another).
    pub every: Duration,
    /// Kept at most; the oldest is deleted after each new one past it.
    pub keep: usize,
}

impl Series<'_> {
    /// After `wait` (the bench's login and ramp), one snapshot every
    /// [`Series::every`] for `during`; all of them deleted at the end.
    pub fn run(&self, wait: Duration, during: Duration) -> Result<Vec<Snap>, String> {
        std::thread::sleep(wait + LEAD);
        let start = Instant::now();
        let mut kept = VecDeque::new();
        let mut taken: Vec<Snap> = Vec::new();
        // The bench's measured time began about LEAD before `start`.
        let end = during.saturating_sub(LEAD).as_secs_f64();
        // The last one starts two seconds before the series' end, so
        // that its pause falls inside the bench's measured time.
        let last = during.saturating_sub(Duration::from_secs(2));
        while start.elapsed() <= last {
            let due = start + self.every * taken.len() as u32;
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            let mut snap = self.create(taken.len(), start)?;
            snap.in_window = snap.at_s + snap.wall_ms / 1e3 <= end;
            kept.push_back(snap.name.clone());
            taken.push(snap);
            while kept.len() > self.keep {
                if let Some(old) = kept.pop_front() {
                    self.delete(&old)?;
                }
            }
        }
        for name in kept {
            self.delete(&name)?;
        }
        Ok(taken)
    }

    /// `n` snapshots one after another.
    pub fn some(&self, n: usize) -> Result<Vec<Snap>, String> {
        let start = Instant::now();
        (0..n).map(|k| self.create(k, start)).collect()
    }

    pub fn delete_all(&self, taken: &[Snap]) -> Result<(), String> {
        taken.iter().try_for_each(|s| self.delete(&s.name))
    }

    fn create(&self, k: usize, series_start: Instant) -> Result<Snap, String> {
        let name = format!("{}-{k}", self.tag);
        let at_s = series_start.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let out = self.admin(&["snapshot", "create", TARGET, "0", &name])?;
        let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        let (paused_ms, drained_ms, flushed_ms) = pause(&out)
            .ok_or_else(|| format!("snapshot create {name}: no pause in its answer: {out}"))?;
        Ok(Snap {
            name,
            at_s,
            wall_ms,
            paused_ms,
            drained_ms,
            flushed_ms,
            in_window: true,
        })
    }

    fn delete(&self, name: &str) -> Result<(), String> {
        self.admin(&["snapshot", "delete", TARGET, "0", name])
            .map(drop)
    }

    /// `ironlun admin ARGS` on the daemon's socket: its stdout.
    fn admin(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(self.ironlun)
            .arg("admin")
            .arg("--socket")
            .arg(&self.daemon.socket)
            .args(args)
            .output()
            .map_err(|e| format!("ironlun admin: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "ironlun admin {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The pause, drain and flush in milliseconds from an answer's
/// `I/O paused P ms (in-flight drained in D ms, flushed in F ms)`.
fn pause(answer: &str) -> Option<(f64, f64, f64)> {
    let after = |key: &str| -> Option<f64> {
        let (_, rest) = answer.split_once(key)?;
        rest.split_once(" ms")?.0.trim().parse().ok()
    };
    Some((
        after("I/O paused ")?,
        after("drained in ")?,
        after("flushed in ")?,
    ))
}
