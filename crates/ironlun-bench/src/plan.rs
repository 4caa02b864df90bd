//! A run's plan: how every load thread reaches the LUNs. The URLs
//! (through relays when a link is emulated) and their session options,
//! or the local files and devices and their engine, are settled once by
//! the caller (the CLI turns its flags into a [`LunPlan`]); every thread
//! then opens its own sessions (or files) from them.

use std::path::PathBuf;
use std::sync::Arc;

use crate::local::{self, Engine};
use crate::luns::{self, Route};
use crate::threads::plan::{thread_slice, Opening};
use crate::{LunTarget, Opener, Slice};
use ironlun_initiator::{isid_for, IscsiUrl, PathPolicy, SessionOptions};

/// The LUNs of a run, as every thread opens them.
pub struct LunPlan {
    /// Each URL with its session options and label.
    pub urls: Vec<(IscsiUrl, SessionOptions, String)>,
    /// Local files or block devices, driven by an engine (no URLs then).
    pub local: Vec<PathBuf>,
    pub engine: Engine,
    /// Local targets through the page cache (default: `O_DIRECT`).
    pub buffered: bool,
    /// Sessions per URL, each its own slice of the seek range.
    pub sessions: u32,
    /// The URLs are one LUN's paths, chosen by this policy.
    pub multipath: Option<PathPolicy>,
    /// Each thread verifies its own slice of every session's slice.
    pub verify: bool,
    pub threads: u32,
}

impl LunPlan {
    /// LUNs under test per thread.
    pub fn targets(&self) -> usize {
        if self.multipath.is_some() {
            1
        } else {
            self.urls.len() * self.sessions as usize + self.local.len()
        }
    }

    /// The opener of each thread's LUNs.
    pub fn opener(self) -> Opener {
        let plan = Arc::new(self);
        Arc::new(move |t, openings| {
            let plan = plan.clone();
            Box::pin(async move { plan.open(t, &openings).await })
        })
    }

    /// Thread `t`'s share of the LUNs: target `j` is session `j mod
    /// sessions` of URL `j / sessions` (or local path `j`). Every session
    /// has its own ISID (RFC 7143 §11.12.5): the same ISID would
    /// reinstate, and so end, the session before it, another thread's
    /// included.
    async fn open(&self, t: u32, openings: &[Opening]) -> Result<Vec<LunTarget>, String> {
        if let Some(policy) = self.multipath {
            return self.open_paths(policy).await.map(|l| vec![l]);
        }
        let mut out = Vec::new();
        for o in openings {
            let lun = if self.local.is_empty() {
                self.open_session(t, o).await?
            } else {
                self.open_local(o)?
            };
            out.push(lun);
        }
        Ok(out)
    }

    /// The slice `o`'s thread drives of a target whose own slice is `s`:
    /// with verification and several threads on the target, its own part.
    fn slice(&self, s: Slice, o: &Opening) -> Slice {
        if self.verify {
            thread_slice(s, o.rank, o.of)
        } else {
            s
        }
    }

    async fn open_session(&self, t: u32, o: &Opening) -> Result<LunTarget, String> {
        let sessions = self.sessions.max(1) as usize;
        let (u, opts, label) = self
            .urls
            .get(o.target / sessions)
            .ok_or_else(|| format!("no target {}", o.target))?;
        let k = (o.target % sessions) as u32;
        let mut opts = opts.clone();
        opts.isid = isid_for(opts.isid, t as usize * self.targets() + o.target);
        let name = session_label(label, k, self.sessions);
        let slice = self.slice(Slice::WHOLE.part(k, self.sessions), o);
        let route = Route::Portal(&u.portal());
        luns::open(route, &u.target, u.lun, &opts, name, slice).await
    }

    fn open_local(&self, o: &Opening) -> Result<LunTarget, String> {
        let p = self
            .local
            .get(o.target)
            .ok_or_else(|| format!("no target {}", o.target))?;
        let label = format!("{} ({})", p.display(), self.engine.name());
        let slice = self.slice(Slice::WHOLE, o);
        local::open(p, self.engine, self.buffered, label, slice)
    }

    /// The one LUN whose paths the URLs are (one thread only).
    async fn open_paths(&self, policy: PathPolicy) -> Result<LunTarget, String> {
        let (first, o, _) = self.urls.first().ok_or("no URL")?;
        let portals: Vec<String> = self.urls.iter().map(|(u, ..)| u.portal()).collect();
        let mut o = o.clone();
        o.reconnect.attempts = o.reconnect.attempts.min(2);
        let label = format!("{first} ({} paths)", portals.len());
        let route = Route::Paths(&portals, policy);
        luns::open(route, &first.target, first.lun, &o, label, Slice::WHOLE).await
    }
}

/// The label of session `k` of a URL's `n`: the URL's own when it has one.
pub fn session_label(label: &str, k: u32, n: u32) -> String {
    if n > 1 {
        format!("{label} [session {}/{n}]", k.saturating_add(1))
    } else {
        label.to_owned()
    }
}

impl LunPlan {
    /// The load threads: `asked` when given, else one per worker up to
    /// the cores (one with a multipath set, whose paths one thread
    /// drives).
    pub fn load_threads(&self, asked: Option<u32>, ws: &[crate::Workload]) -> Result<u32, String> {
        let workers = ws.iter().map(|w| w.workers).max().unwrap_or(1);
        let n = match asked {
            Some(n) => n,
            None if self.multipath.is_some() => 1,
            None => crate::default_threads(self.targets(), workers, crate::cpu::cpus()) as u32,
        };
        if self.multipath.is_some() && n > 1 {
            return Err("--multipath runs on one thread (--threads 1)".into());
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_split_a_part_into_disjoint_parts() {
        // An agent's part 1 of 2, three sessions: parts 3, 4, 5 of 6.
        let part = Slice { index: 1, count: 2 };
        let got: Vec<_> = (0..3).map(|k| part.part(k, 3)).collect();
        let want: Vec<_> = (3..6).map(|index| Slice { index, count: 6 }).collect();
        assert_eq!(got, want);
        assert_eq!(Slice::WHOLE.part(2, 4), Slice { index: 2, count: 4 });
    }

    #[test]
    fn a_lone_session_keeps_its_label() {
        assert_eq!(session_label("u", 0, 1), "u");
        assert_eq!(session_label("u", 1, 3), "u [session 2/3]");
    }
}
