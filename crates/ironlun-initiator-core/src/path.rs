//! Several paths to one target: the hook that chooses which takes a
//! command, and what it sees of each path.
//!
//! A path is one session, so one [`InitiatorCore`] of its own: each logs
//! in with its own ISID (RFC 7143 §4.4.3: one session per ISID and
//! target portal group), and they share nothing. A command moves from
//! one path to another as an orphan: a path hands back what it holds
//! ([`InitiatorCore::poll_orphan`], after
//! [`hand_back_held`](InitiatorCore::hand_back_held) or when its
//! reconnection gives up with failover), and the caller hands it to the
//! path [`ChoosePath`] picks with
//! [`handle_request`](InitiatorCore::handle_request).
//!
//! This module owns the choice's rules and the two policies the CLI
//! offers; it does not own the set of paths, their connections or where
//! a command waits for one (the driver's multipath does). A policy that
//! knows more (ALUA access states per LU, SPC-5 §5.16) implements
//! [`ChoosePath`] with the same view.

use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};

use ironlun_proto::initiator::ScsiRequest;

use crate::core::InitiatorCore;
use crate::event::Phase;

/// Whether a path can take a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathState {
    /// Logged in: the command goes out now.
    Connected,
    /// Between a lost connection and the next login: the command waits
    /// for the login (or comes back as an orphan if there is none).
    Reconnecting,
    /// Ended for good: takes nothing.
    Retired,
}

impl PathState {
    /// The state of a session in `phase`.
    pub fn of(phase: Phase) -> PathState {
        match phase {
            Phase::FullFeature => PathState::Connected,
            Phase::Waiting | Phase::Connecting | Phase::LoggingIn => PathState::Reconnecting,
            Phase::Ended => PathState::Retired,
        }
    }
}

/// What a chooser sees of one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathView {
    pub state: PathState,
    /// Commands handed to the path and not answered yet.
    pub in_flight: usize,
}

impl<T> InitiatorCore<T> {
    /// This session as a path: its state, and the commands it holds (on
    /// its connection or taken back from a lost one).
    pub fn path_view(&self) -> PathView {
        PathView {
            state: PathState::of(self.phase()),
            in_flight: self.tasks_in_use().saturating_add(self.held()),
        }
    }
}

/// Chooses the path for a command: an index into `paths`, or `None`
/// when no path may take it (the caller fails the command).
pub trait ChoosePath: Debug + Send + Sync {
    fn choose(&self, request: &ScsiRequest, paths: &[PathView]) -> Option<usize>;
}

/// The best state any path is in: connected paths are used before
/// reconnecting ones; `None` when every path is retired.
pub fn best_state(paths: &[PathView]) -> Option<PathState> {
    paths
        .iter()
        .map(|p| p.state)
        .filter(|s| *s != PathState::Retired)
        .min()
}

/// Each path of the best state in turn.
#[derive(Debug, Default)]
pub struct RoundRobin {
    next: AtomicUsize,
}

impl ChoosePath for RoundRobin {
    fn choose(&self, _request: &ScsiRequest, paths: &[PathView]) -> Option<usize> {
        let best = best_state(paths)?;
        let n = paths.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..n)
            .map(|i| start.wrapping_add(i) % n)
            .find(|&i| paths.get(i).is_some_and(|p| p.state == best))
    }
}

/// The path of the best state with the fewest commands in flight (the
/// first of equals).
#[derive(Debug, Default)]
pub struct LeastQueueDepth;

impl ChoosePath for LeastQueueDepth {
    fn choose(&self, _request: &ScsiRequest, paths: &[PathView]) -> Option<usize> {
        let best = best_state(paths)?;
        paths
            .iter()
            .enumerate()
            .filter(|(_, p)| p.state == best)
            .min_by_key(|(_, p)| p.in_flight)
            .map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PathState::*;

    fn paths(v: &[(PathState, usize)]) -> Vec<PathView> {
        v.iter()
            .map(|&(state, in_flight)| PathView { state, in_flight })
            .collect()
    }

    fn choices(c: &dyn ChoosePath, p: &[PathView], n: usize) -> Vec<Option<usize>> {
        let req = ScsiRequest::default();
        (0..n).map(|_| c.choose(&req, p)).collect()
    }

    #[test]
    fn round_robin_takes_connected_paths_in_turn() {
        let p = paths(&[(Connected, 0), (Reconnecting, 0), (Connected, 0)]);
        let c = RoundRobin::default();
        assert_eq!(
            choices(&c, &p, 4),
            [Some(0), Some(2), Some(2), Some(0)],
            "path 1 is skipped while others are connected"
        );
    }

    #[test]
    fn reconnecting_paths_serve_when_none_is_connected_and_retired_never() {
        let p = paths(&[(Retired, 0), (Reconnecting, 5)]);
        assert_eq!(choices(&RoundRobin::default(), &p, 2), [Some(1), Some(1)]);
        assert_eq!(choices(&LeastQueueDepth, &p, 1), [Some(1)]);
        let p = paths(&[(Retired, 0), (Retired, 0)]);
        assert_eq!(choices(&RoundRobin::default(), &p, 1), [None]);
        assert_eq!(choices(&LeastQueueDepth, &p, 1), [None]);
        assert_eq!(choices(&LeastQueueDepth, &[], 1), [None]);
        assert_eq!(choices(&RoundRobin::default(), &[], 1), [None]);
    }

    #[test]
    fn least_queue_depth_takes_the_least_busy_connected_path() {
        let p = paths(&[
            (Connected, 3),
            (Reconnecting, 0),
            (Connected, 1),
            (Connected, 1),
        ]);
        assert_eq!(choices(&LeastQueueDepth, &p, 1), [Some(2)]);
    }

    #[test]
    fn a_session_is_a_path_in_the_state_of_its_phase() {
        assert_eq!(PathState::of(Phase::FullFeature), Connected);
        for p in [Phase::Waiting, Phase::Connecting, Phase::LoggingIn] {
            assert_eq!(PathState::of(p), Reconnecting);
        }
        assert_eq!(PathState::of(Phase::Ended), Retired);
    }
}
