//! Several sessions to one target through several portals (multipath
//! I/O): a path is chosen per command by a [`ChoosePath`]
//! (ironlun-initiator-core's hook: round-robin, the fewest commands in
//! flight, or the caller's own). Opened for a LU
//! ([`Multipath::connect_lun`]), it follows the LU's asymmetric access
//! (ALUA, SPC-5 §5.16; the rules are ironlun-initiator-core's `alua`):
//! active/optimized paths first, then active/non-optimized, standby,
//! unavailable and transitioning ones only for the commands every state
//! serves, commands refused for a path's state sent again on another,
//! and REPORT TARGET PORT GROUPS read again when a path reports a
//! change (`alua.rs`). A path whose connection drops hands the commands
//! it held to the others at once; one whose connection cannot be
//! re-established is retired (`router.rs`).

mod alua;
mod router;

use std::sync::Arc;

use ironlun_initiator_core::alua::Decision;
use ironlun_initiator_core::{ChoosePath, LeastQueueDepth, PathState, PathView, RoundRobin};
use ironlun_proto::initiator::{ScsiReply, ScsiRequest};
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use self::alua::Alua;
use self::router::Router;
use crate::error::{Error, Result};
use crate::isid::isid_for;
use crate::session::{Orphan, PathHook, PathNote, Responder, Session, SessionOptions, WeakSession};

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
    /// The LU's asymmetric access, when opened for a LU.
    alua: Option<Arc<Alua>>,
    /// To the router: commands that wait for a path.
    router: mpsc::UnboundedSender<PathNote>,
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

/// What a chooser sees of each of `paths` (`None`: a path that has
/// ended).
fn views(paths: &[Option<Session>]) -> Vec<PathView> {
    let gone = PathView {
        state: PathState::Retired,
        in_flight: 0,
    };
    paths
        .iter()
        .map(|p| p.as_ref().map_or(gone, view))
        .collect()
}

/// Where `req` goes among the paths `views` shows: the ALUA decision
/// when the multipath follows a LU's asymmetric access, else `chooser`'s.
fn decide(
    views: &[PathView],
    chooser: &dyn ChoosePath,
    alua: Option<&Alua>,
    req: &ScsiRequest,
) -> Decision {
    match alua {
        Some(a) => a.lock().decide(req, views, chooser),
        None => chooser
            .choose(req, views)
            .map_or(Decision::NoPath, Decision::Send),
    }
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
        Self::open(portals, target, opts, chooser, None).await
    }

    /// As [`Multipath::connect_with_chooser`], for LU `lun`: each path's
    /// unit attention is cleared, then the LU's asymmetric access is read
    /// through each (INQUIRY's TPGS, VPD 83h, REPORT TARGET PORT GROUPS)
    /// and followed from then on. A LU without asymmetric access (TPGS
    /// 00b) has every path alike.
    pub async fn connect_lun(
        portals: &[String],
        target: &str,
        lun: u16,
        opts: &SessionOptions,
        chooser: Arc<dyn ChoosePath>,
    ) -> Result<Multipath> {
        let alua = Arc::new(Alua::new(lun, portals.len()));
        let m = Self::open(portals, target, opts, chooser, Some(alua.clone())).await?;
        for (i, p) in m.paths.iter().enumerate() {
            let _ = p.clear_unit_attention(lun).await;
            if let Err(e) = alua.read_path(i, p).await {
                warn!(portal = %p.info().portal, "ALUA states not read: {e}");
            }
        }
        Ok(m)
    }

    async fn open(
        portals: &[String],
        target: &str,
        opts: &SessionOptions,
        chooser: Arc<dyn ChoosePath>,
        alua: Option<Arc<Alua>>,
    ) -> Result<Multipath> {
        let (tx, notes) = mpsc::unbounded_channel::<PathNote>();
        let mut paths = Vec::new();
        let mut errors = Vec::new();
        for (i, portal) in portals.iter().enumerate() {
            let mut o = opts.clone();
            o.isid = isid_for(opts.isid, i);
            // A path's index is its place in `paths`, as ALUA keeps it.
            let hook = PathHook {
                tx: tx.clone(),
                index: paths.len(),
            };
            match Session::connect_with_failover(portal, Some(target), &o, Some(hook)).await {
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
        let reread = alua.as_ref().map(|a| {
            let (ask, asks) = mpsc::channel(1);
            tokio::spawn(alua::reread(weak.clone(), a.clone(), asks));
            ask
        });
        let router = Router::new(weak, chooser.clone(), alua.clone(), reread);
        tokio::spawn(router.run(notes));
        Ok(Multipath {
            paths,
            chooser,
            alua,
            router: tx,
        })
    }

    pub fn paths(&self) -> &[Session] {
        &self.paths
    }

    /// Paths still in service.
    pub fn live_paths(&self) -> usize {
        self.paths.iter().filter(|s| s.is_alive()).count()
    }

    /// Queues a command on the chosen path, or with the router while no
    /// path can take it.
    pub async fn submit(&self, req: ScsiRequest, responder: Responder) -> Result<()> {
        let views: Vec<PathView> = self.paths.iter().map(view).collect();
        let decision = decide(&views, self.chooser.as_ref(), self.alua.as_deref(), &req);
        match decision {
            Decision::Send(i) => match self.paths.get(i) {
                Some(p) if self.alua.is_some() => p.submit_routed(req, responder).await,
                Some(p) => p.submit(req, responder).await,
                None => self.wait(req, responder),
            },
            Decision::Hold => self.wait(req, responder),
            Decision::NoPath => {
                responder.send_error(Error::NoPath("every path is retired".into()));
                Err(Error::NoPath("every path is retired".into()))
            }
        }
    }

    fn wait(&self, request: ScsiRequest, responder: Responder) -> Result<()> {
        let note = PathNote::Orphan(Orphan { request, responder });
        self.router.send(note).map_err(|e| {
            if let PathNote::Orphan(o) = e.0 {
                o.responder.send_error(Error::Closed);
            }
            Error::Closed
        })
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
