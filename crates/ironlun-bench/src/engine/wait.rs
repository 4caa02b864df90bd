//! Waiting for the next completion or timed event: a precise timer for
//! near deadlines (a burst delay, a rate-limited issue time), one tokio
//! timer for the others (the next second, the end, the drain limit).

use std::pin::Pin;
use std::time::Instant;

use tokio::time::Sleep;

use super::issuer::Completion;
use super::sources::Sources;
use crate::timer::{PreciseTimer, NEAR};

/// The timers a run waits with.
pub(super) struct Waiter<'t> {
    /// `None` without a timerfd (not Linux): tokio's timer serves every
    /// deadline.
    precise: Option<PreciseTimer>,
    /// The one tokio timer, moved only when its deadline changes.
    deadline_timer: Pin<&'t mut Sleep>,
    /// The deadline `deadline_timer` is set for, while it has not fired.
    armed_for: Option<Instant>,
}

impl<'t> Waiter<'t> {
    pub(super) fn new(precise: Option<PreciseTimer>, deadline_timer: Pin<&'t mut Sleep>) -> Self {
        Waiter {
            precise,
            deadline_timer,
            armed_for: None,
        }
    }

    /// The first completion, or `None` when `deadline` came first (or the
    /// channel closed). While draining (`stop`), the deadline is the
    /// drain limit, and reaching it with `outstanding` I/Os is an error.
    pub(super) async fn wait(
        &mut self,
        rx: &mut Sources,
        deadline: Option<Instant>,
        stop: bool,
        outstanding: u32,
    ) -> Result<Option<Completion>, String> {
        Ok(match (deadline, &self.precise) {
            // A near deadline (a burst delay, a rate-limited issue time)
            // needs better than tokio's millisecond slots.
            (Some(d), Some(timer))
                if !stop && d.saturating_duration_since(Instant::now()) < NEAR =>
            {
                tokio::select! {
                    v = rx.recv() => v,
                    r = timer.sleep_until(d) => {
                        r.map_err(|e| format!("timer: {e}"))?;
                        None
                    }
                }
            }
            (Some(d), _) => {
                // The deadline (the next second, the end) changes about
                // once a second: the one timer moves only then, not per
                // wait.
                if self.armed_for != Some(d) {
                    self.deadline_timer
                        .as_mut()
                        .reset(tokio::time::Instant::from_std(d));
                    self.armed_for = Some(d);
                }
                tokio::select! {
                    biased;
                    v = rx.recv() => v,
                    _ = &mut self.deadline_timer => {
                        self.armed_for = None;
                        if stop {
                            return Err(format!("{outstanding} I/Os did not complete after the run"));
                        }
                        None
                    }
                }
            }
            (None, _) => rx.recv().await,
        })
    }
}

/// The precise timer, when this system has one.
pub(super) fn precise_timer() -> Option<PreciseTimer> {
    match PreciseTimer::new() {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::debug!("no precise timer ({e}): near deadlines use tokio's");
            None
        }
    }
}
