//! Several sessions to one target through several portals (multipath
//! I/O): a path is chosen per command by a [`ChoosePath`]
//! (ironlun-initiator-core's hook: round-robin, the fewest commands in
//! flight, or the caller's own); a path whose connection cannot be
//! re-established is retired and the commands it held are re-issued on
//! the others.

use std::sync::Arc;

use ironlun_initiator_core::{ChoosePath, LeastQueueDepth, PathState, PathView, RoundRobin};
use ironlun_proto::initiator::{ScsiReply, ScsiRequest};
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};

use crate::error::{Error, Result};
use crate::isid::isid_for;
use crate::session::{Orphan, Responder, Session, SessionOptions, WeakSession};

/// How a path is chosen for each command, as the CLI names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathPolicy {
    RoundRobin,
    LeastQueueDepth,
}

impl std::str::FromStr for PathPolicy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "round-robin" | "rr" => Ok(PathPolicy::RoundRobin),
            "least-queue-depth" | "lqd" => Ok(PathPolicy::LeastQueueDepth),
            _ => Err(format!(
                "unknown path policy '{s}' (round-robin or least-queue-depth)"
            )),
        }
    }
}

impl PathPolicy {
    /// The chooser that applies the policy.
    pub fn chooser(self) -> Arc<dyn ChoosePath> {
        match self {
            PathPolicy::RoundRobin => Arc::new(RoundRobin::default()),
            PathPolicy::LeastQueueDepth => Arc::new(LeastQueueDepth),
        }
    }
}

/// Sessions to one target over several portals.
#[derive(Debug)]
pub struct Multipath {
    paths: Arc<Vec<Session>>,
    chooser: Arc<dyn ChoosePath>,
}

/// What a chooser sees of a session.
fn view(s: &Session) -> PathView {
    let state = if s.is_connected() {
        PathState::Connected
    } else if s.is_alive() {
        PathState::Reconnecting
    } else {
        PathState::Retired
    };
    PathView {
        state,
        in_flight: s.in_flight(),
    }
}

/// The path `chooser` picks among `paths` for `req`; `None` when every
/// path is retired.
fn pick<'a>(
    paths: &'a [Session],
    chooser: &dyn ChoosePath,
    req: &ScsiRequest,
) -> Option<&'a Session> {
    let views: Vec<PathView> = paths.iter().map(view).collect();
    chooser.choose(req, &views).and_then(|i| paths.get(i))
}

impl Multipath {
    /// Logs in to `target` through each portal, one session per portal
    /// (path `i` with the ISID [`isid_for`]`(opts.isid, i)`). Fails if no
    /// portal can be reached; paths that fail at login are reported and
    /// left out.
    pub async fn connect(
        portals: &[String],
        target: &str,
        opts: &SessionOptions,
        policy: PathPolicy,
    ) -> Result<Multipath> {
        Self::connect_with_chooser(portals, target, opts, policy.chooser()).await
    }

    /// As [`Multipath::connect`], with the caller's choice of path.
    pub async fn connect_with_chooser(
        portals: &[String],
        target: &str,
        opts: &SessionOptions,
        chooser: Arc<dyn ChoosePath>,
    ) -> Result<Multipath> {
        let (fail_tx, fail_rx) = mpsc::unbounded_channel::<Orphan>();
        let mut paths = Vec::new();
        let mut errors = Vec::new();
        for (i, portal) in portals.iter().enumerate() {
            let mut o = opts.clone();
            o.isid = isid_for(opts.isid, i);
            match Session::connect_with_failover(portal, Some(target), &o, Some(fail_tx.clone()))
                .await
            {
                Ok(s) => paths.push(s),
                Err(e) => {
                    warn!(portal, "path not usable: {e}");
                    errors.push(format!("{portal}: {e}"));
                }
            }
        }
        if paths.is_empty() {
            return Err(Error::NoPath(errors.join("; ")));
        }
        let paths = Arc::new(paths);
        let weak: Vec<WeakSession> = paths.iter().map(Session::downgrade).collect();
        tokio::spawn(failover(weak, chooser.clone(), fail_rx));
        Ok(Multipath { paths, chooser })
    }

    pub fn paths(&self) -> &[Session] {
        &self.paths
    }

    /// Paths still in service.
    pub fn live_paths(&self) -> usize {
        self.paths.iter().filter(|s| s.is_alive()).count()
    }

    /// Queues a command on the chosen path.
    pub async fn submit(&self, req: ScsiRequest, responder: Responder) -> Result<()> {
        let Some(path) = pick(&self.paths, self.chooser.as_ref(), &req) else {
            responder.send_error(Error::NoPath("every path is retired".into()));
            return Err(Error::NoPath("every path is retired".into()));
        };
        path.submit(req, responder).await
    }

    pub async fn execute(&self, req: ScsiRequest) -> Result<ScsiReply> {
        let (tx, rx) = oneshot::channel();
        self.submit(req, Responder::Once(tx)).await?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// Logs every path out.
    pub async fn logout(&self) {
        for p in self.paths.iter() {
            let _ = p.logout().await;
        }
    }
}

/// Re-issues commands that a retired path gave back.
async fn failover(
    paths: Vec<WeakSession>,
    chooser: Arc<dyn ChoosePath>,
    mut rx: mpsc::UnboundedReceiver<Orphan>,
) {
    let mut reissued = 0u64;
    while let Some(mut orphan) = rx.recv().await {
        let live: Vec<Session> = paths.iter().filter_map(WeakSession::upgrade).collect();
        loop {
            let Some(path) = pick(&live, chooser.as_ref(), &orphan.request) else {
                orphan
                    .responder
                    .send_error(Error::NoPath("every path is retired".into()));
                break;
            };
            match path.try_resubmit(orphan) {
                Ok(()) => {
                    reissued += 1;
                    break;
                }
                Err(back) => {
                    orphan = back;
                    if !live.iter().any(Session::is_alive) {
                        orphan
                            .responder
                            .send_error(Error::NoPath("every path is retired".into()));
                        break;
                    }
                    // The chosen path's queue is full: wait a little.
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
        }
    }
    info!(reissued, "multipath failover ended");
}
