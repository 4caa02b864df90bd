//! What the initiator knows of each path's asymmetric access, and the
//! choice made from it: [`AluaPaths`] learns each path's group from VPD
//! 83h and its state from REPORT TARGET PORT GROUPS read through that
//! path, or from sense that path answered with, and
//! [`decide`](AluaPaths::decide)s per command between sending it on a
//! path, holding it for a path that can take it, and failing it.

use std::time::Duration;

use ironlun_proto::initiator::ScsiRequest;

use super::report::{AccessState, PortIdentity, Report};
use super::rules::{hold_limit, rank, AluaSignal};
use crate::path::{best_state, ChoosePath, PathState, PathView};

/// One path's asymmetric access as last learnt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathAlua {
    /// The target port the path logged in through (VPD 83h).
    pub port: PortIdentity,
    /// `None`: not known, or the LU has no asymmetric access (TPGS 00b).
    pub state: Option<AccessState>,
    /// PREF of the path's group.
    pub preferred: bool,
}

/// What to do with a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Send it on path `i`.
    Send(usize),
    /// No live path may take it now, but a live path's state may change
    /// (transitioning, standby, unavailable): wait and decide again,
    /// for at most [`AluaPaths::hold_limit`].
    Hold,
    /// Every path is retired.
    NoPath,
}

/// The asymmetric access of one LU's paths, by path index.
#[derive(Clone, Debug, Default)]
pub struct AluaPaths {
    paths: Vec<PathAlua>,
    transition_time: Option<Duration>,
}

impl AluaPaths {
    /// `n` paths, nothing known yet (symmetric access until read).
    pub fn new(n: usize) -> AluaPaths {
        AluaPaths {
            paths: vec![PathAlua::default(); n],
            transition_time: None,
        }
    }

    pub fn path(&self, i: usize) -> Option<&PathAlua> {
        self.paths.get(i)
    }

    /// Path `i` logged in through this target port (VPD 83h).
    pub fn set_port(&mut self, i: usize, port: PortIdentity) {
        if let Some(p) = self.paths.get_mut(i) {
            p.port = port;
        }
    }

    /// REPORT TARGET PORT GROUPS as read through path `i`: the path takes
    /// the state of its own group (by VPD 83h's group, else by its
    /// relative port in a group's port list). Each gateway of a group is
    /// the authority on its own port: another may not have heard of a
    /// change yet. Returns the path's state before and after, when it
    /// changed.
    pub fn apply_report(
        &mut self,
        i: usize,
        report: &Report,
    ) -> Option<(Option<AccessState>, AccessState)> {
        if report.transition_time.is_some() {
            self.transition_time = report.transition_time;
        }
        let p = self.paths.get_mut(i)?;
        let g = report.group(p.port.group, p.port.relative_port)?;
        let old = p.state;
        p.state = Some(g.state);
        p.preferred = g.preferred;
        (old != Some(g.state)).then_some((old, g.state))
    }

    /// Path `i` answered with `signal`: the state its sense names, until
    /// the report read again says more. Returns the path's state before
    /// and after, when it changed.
    pub fn apply_signal(
        &mut self,
        i: usize,
        signal: AluaSignal,
    ) -> Option<(Option<AccessState>, AccessState)> {
        let (p, new) = (self.paths.get_mut(i)?, signal.state()?);
        let old = p.state.replace(new);
        (old != Some(new)).then_some((old, new))
    }

    /// How long a held command may wait ([`hold_limit`]).
    pub fn hold_limit(&self) -> Duration {
        hold_limit(self.transition_time)
    }

    /// The path for `request` among `views` (the same paths, by index):
    /// of the paths that may take it ([`rank`]), the best connected
    /// first (a path between connections is used only when no other
    /// can take the command, so a lost optimized path does not hold
    /// commands while a non-optimized one is up), then the best rank;
    /// `inner` (round-robin, least queue depth) chooses among equals.
    pub fn decide(
        &self,
        request: &ScsiRequest,
        views: &[PathView],
        inner: &dyn ChoosePath,
    ) -> Decision {
        let ranks: Vec<Option<u8>> = views
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let state = self.paths.get(i).and_then(|p| p.state);
                rank(state, &request.cdb).filter(|_| v.state != PathState::Retired)
            })
            .collect();
        let eligible = |i: usize| ranks.get(i).copied().flatten();
        let candidates: Vec<PathView> = mask(views, |i| eligible(i).is_some());
        let Some(conn) = best_state(&candidates) else {
            return if best_state(views).is_some() {
                Decision::Hold
            } else {
                Decision::NoPath
            };
        };
        let best = (0..views.len())
            .filter(|&i| candidates.get(i).is_some_and(|v| v.state == conn))
            .filter_map(eligible)
            .min();
        let chosen = mask(&candidates, |i| {
            candidates.get(i).is_some_and(|v| v.state == conn) && eligible(i) == best
        });
        match inner.choose(request, &chosen) {
            Some(i) => Decision::Send(i),
            None => Decision::NoPath,
        }
    }
}

/// `views` with every path but those `keep` names shown as retired.
fn mask(views: &[PathView], keep: impl Fn(usize) -> bool) -> Vec<PathView> {
    views
        .iter()
        .enumerate()
        .map(|(i, v)| PathView {
            state: if keep(i) { v.state } else { PathState::Retired },
            in_flight: v.in_flight,
        })
        .collect()
}
