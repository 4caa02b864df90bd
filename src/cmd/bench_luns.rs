//! How `ironlun bench` reaches its LUNs from each load thread: the URLs
//! (through relays when a link is emulated) and their session options,
//! or the local files and devices and their engine, are settled once;
//! every thread then opens its own sessions (or files) from them.

use std::path::PathBuf;
use std::sync::Arc;

use ironlun_bench::local::{self, Engine};
use ironlun_bench::luns::{self, Route};
use ironlun_bench::threads::plan::thread_slice;
use ironlun_bench::{LunTarget, Opener, Slice};
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
        Arc::new(move |t| {
            let plan = plan.clone();
            Box::pin(async move { plan.open(t).await })
        })
    }

    /// Thread `t`'s LUNs. Every session has its own ISID (RFC 7143
    /// §11.12.5): the same ISID would reinstate, and so end, the session
    /// before it, another thread's included.
    async fn open(&self, t: u32) -> Result<Vec<LunTarget>, String> {
        if let Some(policy) = self.multipath {
            return self.open_paths(policy).await.map(|l| vec![l]);
        }
        if !self.local.is_empty() {
            return self.open_local(t);
        }
        let per_thread = self.urls.len() * self.sessions as usize;
        let mut out = Vec::new();
        for (u, opts, label) in &self.urls {
            for k in 0..self.sessions {
                let mut o = opts.clone();
                o.isid = isid_for(opts.isid, t as usize * per_thread + out.len());
                let name = if self.sessions > 1 {
                    format!("{label} [session {}/{}]", k + 1, self.sessions)
                } else {
                    label.clone()
                };
                let mut slice = Slice {
                    index: k,
                    count: self.sessions,
                };
                if self.verify {
                    slice = thread_slice(slice, t, self.threads);
                }
                let route = Route::Portal(&u.portal());
                out.push(luns::open(route, &u.target, u.lun, &o, name, slice).await?);
            }
        }
        Ok(out)
    }

    /// Thread `t`'s own descriptors of the local files and devices.
    fn open_local(&self, t: u32) -> Result<Vec<LunTarget>, String> {
        let slice = if self.verify {
            thread_slice(Slice::WHOLE, t, self.threads)
        } else {
            Slice::WHOLE
        };
        let label = |p: &PathBuf| format!("{} ({})", p.display(), self.engine.name());
        self.local
            .iter()
            .map(|p| local::open(p, self.engine, self.buffered, label(p), slice))
            .collect()
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
