//! Targets and sessions: what the login state machine asks of the daemon
//! (target lookup, discovery, a new session) and what SendTargets
//! reports. The session table's rules (TSIH assignment, session
//! reinstatement) are ironlun-proto's [`SessionTable`]; the registry holds
//! it behind its lock with each session's nexus and signal inbox.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwap;

use crate::group::peer::PeerLogin;
use ironlun_proto::chap::ChapPolicy;
use ironlun_proto::login::LoginStatus;
use ironlun_proto::params::Offers;
use ironlun_proto::sessions::{SessionName, SessionTable};
use ironlun_proto::target::login::{LoginContext, NewSession, TargetInfo};
use ironlun_proto::target::{Directory, SendTargetsQuery, TargetListing};
use ironlun_scsi::{LunMap, NexusId};
pub use ironlun_target_core::SessionSignal;
use tokio::sync::{watch, Notify};

use crate::config::{DefaultMap, IoEngine, Limits, TargetConfig, TcpTuning};
use crate::metrics::Metrics;
use crate::replay::{ChallengeMemory, REMEMBERED_CHALLENGES};

/// A configured target and its logical units, as one version of the
/// running configuration has them: a change makes a new `Target` sharing
/// the logical units that stay.
pub struct Target {
    /// Shared with the running configuration.
    pub cfg: Arc<TargetConfig>,
    /// The LUNs as the target numbers them (the default map).
    pub luns: Arc<LunMap>,
    /// Initiators with maps of their own, by lower-case name.
    views: HashMap<String, Arc<LunMap>>,
    /// What initiators without an entry see.
    default_view: Arc<LunMap>,
}

impl Target {
    /// The target of `cfg` over `luns`, with each initiator's view built.
    pub fn new(cfg: Arc<TargetConfig>, luns: Arc<LunMap>) -> Target {
        let views = cfg
            .initiators
            .iter()
            .filter_map(|e| {
                let map = e.luns.as_ref()?;
                let mapped = map
                    .iter()
                    .filter_map(|m| Some((m.lun, luns.get(m.target_lun)?.clone(), m.read_only)))
                    .collect();
                Some((e.name.clone(), Arc::new(LunMap::mapped(mapped))))
            })
            .collect();
        let default_view = match cfg.default_map {
            DefaultMap::All => luns.clone(),
            DefaultMap::None => Arc::new(LunMap::default()),
        };
        Target {
            cfg,
            luns,
            views,
            default_view,
        }
    }

    /// The LUNs `initiator` sees (REPORT LUNS and every command obey it).
    pub fn view_for(&self, initiator: &str) -> Arc<LunMap> {
        // Another gateway of the group (authenticated at login) forwards
        // to every LUN.
        if self.cfg.group.is_some() && crate::group::peer::is_peer_name(&self.cfg.name, initiator) {
            return self.luns.clone();
        }
        let name = initiator.to_ascii_lowercase();
        if let Some(v) = self.views.get(&name) {
            return v.clone();
        }
        if self.cfg.initiators.iter().any(|e| e.name == name) {
            return self.luns.clone();
        }
        self.default_view.clone()
    }

    /// The CHAP `initiator` must use: its entry's, else the target's.
    pub fn chap_for(&self, initiator: &str) -> Option<ChapPolicy> {
        let name = initiator.to_ascii_lowercase();
        self.cfg
            .initiators
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.chap.clone())
            .or_else(|| self.cfg.chap.clone())
    }
}

/// What the daemon keeps per session in the table.
struct SessionEntry {
    nexus: NexusId,
    signals: Arc<SessionSignals>,
    info: Arc<SessionInfo>,
    /// Closed once the session's handle is gone, its nexus detached.
    ended: SessionEnd,
}

/// Resolves when a session has ended: its connection is closed, its
/// commands have finished and its nexus is detached from its LUs (SCSI-2
/// reservations released). A session that reinstates it waits for this
/// before its login completes, so the old session's tasks are over
/// before the new one's begin (RFC 7143 §6.3.5).
#[derive(Clone)]
pub struct SessionEnd(watch::Receiver<()>);

impl SessionEnd {
    /// Waits for the end, at most `within`; false if it did not come.
    pub async fn wait(mut self, within: std::time::Duration) -> bool {
        // No value is ever sent: `changed` returns when the sender drops.
        tokio::time::timeout(within, self.0.changed()).await.is_ok()
    }
}

/// A session as the operator sees it: who, from where, what was
/// negotiated, and what it has done.
#[derive(Debug)]
pub struct SessionInfo {
    pub initiator: String,
    pub isid: [u8; 6],
    /// `None` for discovery.
    pub target: Option<String>,
    pub peer: SocketAddr,
    pub started: std::time::SystemTime,
    /// The negotiated keys, as the login log line has them.
    pub negotiated: OnceLock<String>,
    /// SCSI commands received.
    pub commands: AtomicU64,
    /// Bytes the initiator asked to read and to write.
    pub read_bytes: AtomicU64,
    pub write_bytes: AtomicU64,
}

/// A session's inbox of signals and the wakeup of its connection task.
/// Equal signals collapse, so the inbox holds at most a few entries per
/// LUN however often other sessions reset; an abort another session's
/// task management response waits for is one entry per waiting request,
/// and each such request waits a bounded time
/// ([`ironlun_target_core::OTHERS_WAIT_LIMIT`]).
#[derive(Default)]
pub struct SessionSignals {
    pending: Mutex<Vec<SessionSignal>>,
    /// Set while `pending` is not empty: the per-PDU check is one load.
    any: AtomicBool,
    /// The connection no longer takes signals: they are dropped as they
    /// come (which releases any wait they carry).
    closed: AtomicBool,
    wake: Notify,
}

impl SessionSignals {
    pub fn send(&self, sig: SessionSignal) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        if !p.contains(&sig) {
            p.push(sig);
        }
        self.any.store(true, Ordering::Release);
        drop(p);
        self.wake.notify_one();
    }

    /// Wakes the connection task without a signal (a wait it holds may be
    /// over).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Takes no more signals and drops the pending ones: the connection
    /// is gone, and other sessions must not wait for it.
    pub fn close(&self) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        self.closed.store(true, Ordering::Release);
        self.any.store(false, Ordering::Release);
        let dropped = std::mem::take(&mut *p);
        drop(p);
        drop(dropped);
    }

    /// Waits until a signal has been sent (a signal sent before the wait
    /// is not lost: the wakeup is stored).
    pub async fn wait(&self) {
        self.wake.notified().await;
    }

    pub fn is_pending(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    pub fn take(&self) -> Vec<SessionSignal> {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        self.any.store(false, Ordering::Release);
        std::mem::take(&mut *p)
    }
}

/// Everything connections share.
pub struct Registry {
    /// The running targets; replaced whole by a change (readers never
    /// wait for one).
    targets: ArcSwap<Vec<Arc<Target>>>,
    pub limits: Limits,
    pub tcp: TcpTuning,
    portals: Mutex<Vec<SocketAddr>>,
    /// CHAP required of discovery sessions.
    pub discovery_chap: Option<ChapPolicy>,
    /// How commands on file and block LUNs reach the kernel (as probed at
    /// start: io_uring only where it works).
    pub io_engine: IoEngine,
    sessions: Mutex<SessionTable<SessionEntry>>,
    /// Mutual CHAP challenges of recent logins (replays are refused).
    challenges: Mutex<ChallengeMemory>,
    next_nexus: AtomicU64,
    /// Open TCP connections, logged in or not.
    connections: AtomicUsize,
    /// Event counters for `GET /metrics` (crate::metrics).
    pub metrics: Arc<Metrics>,
    /// What scheduled snapshots did, per LUN (crate::schedule).
    pub schedules: crate::schedule::Record,
}

/// Counts one open connection for as long as it lives.
pub struct ConnectionGuard(Arc<Registry>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A session created by a login; dropping it removes the session and its
/// I_T nexus from the logical units.
pub struct SessionHandle {
    registry: Arc<Registry>,
    pub tsih: u16,
    pub nexus: NexusId,
    /// The target as it was at login (its name does not change).
    pub target: Option<Arc<Target>>,
    /// The LUNs this session sees now: the nexus is detached from them
    /// when the session ends.
    pub view: Option<Arc<LunMap>>,
    pub signals: Arc<SessionSignals>,
    pub info: Arc<SessionInfo>,
    /// This session replaced an older one with the same ISID.
    pub reinstated: bool,
    /// The replaced session's end, for the login to wait for.
    pub replaced_end: Option<SessionEnd>,
    /// Dropped after the nexus is detached (fields drop after
    /// `Drop::drop`): what [`SessionEnd`] waits for.
    _alive: watch::Sender<()>,
}

impl Drop for SessionHandle {
    fn drop(&mut self) {
        let nexus = self.nexus;
        self.registry
            .table()
            .remove_if(self.tsih, |e| e.nexus == nexus);
        if let Some(view) = &self.view {
            view.detach_nexus(self.nexus);
        }
    }
}

impl SessionHandle {
    /// Sends `sig` to the other sessions of this session's target whose
    /// nexus satisfies `pred`.
    pub fn signal_others(&self, pred: impl Fn(NexusId) -> bool, sig: SessionSignal) {
        if let Some(t) = &self.target {
            let me = self.nexus;
            self.registry
                .signal(&t.cfg.name, |n| n != me && pred(n), sig);
        }
    }

    /// What this session's initiator sees of its target now (`None`:
    /// discovery, or the target is gone).
    pub fn current_view(&self) -> Option<Arc<LunMap>> {
        let t = self
            .registry
            .find(self.target.as_ref()?.cfg.name.as_str())?;
        Some(t.view_for(&self.info.initiator))
    }
}

impl Registry {
    pub fn new(
        targets: Vec<Arc<Target>>,
        limits: Limits,
        tcp: TcpTuning,
        portals: Vec<SocketAddr>,
        discovery_chap: Option<ChapPolicy>,
        io_engine: IoEngine,
    ) -> Arc<Registry> {
        let max_sessions = limits.max_sessions;
        Arc::new(Registry {
            targets: ArcSwap::from_pointee(targets),
            limits,
            tcp,
            portals: Mutex::new(portals),
            discovery_chap,
            io_engine,
            sessions: Mutex::new(SessionTable::new(max_sessions)),
            challenges: Mutex::new(ChallengeMemory::new(REMEMBERED_CHALLENGES)),
            next_nexus: AtomicU64::new(1),
            connections: AtomicUsize::new(0),
            metrics: Arc::new(Metrics::new()),
            schedules: crate::schedule::Record::default(),
        })
    }

    /// Registers an open connection until the guard is dropped.
    pub fn connection_opened(self: &Arc<Self>) -> ConnectionGuard {
        self.connections.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self.clone())
    }

    pub fn open_connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    /// Sessions now: (normal, discovery).
    pub fn session_counts(&self) -> (usize, usize) {
        self.table().counts()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, SessionTable<SessionEntry>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// iSCSI names compare case-insensitively (RFC 7143 §4.2.7.1, names
    /// are normalised to lower case).
    pub fn find(&self, name: &str) -> Option<Arc<Target>> {
        self.targets
            .load()
            .iter()
            .find(|t| t.cfg.name.eq_ignore_ascii_case(name))
            .cloned()
    }

    /// The running targets (a snapshot).
    pub fn targets(&self) -> Arc<Vec<Arc<Target>>> {
        self.targets.load_full()
    }

    /// Puts a new version of the targets in place (the operator's
    /// change; see `live`).
    pub(crate) fn replace_targets(&self, targets: Vec<Arc<Target>>) {
        self.targets.store(Arc::new(targets));
    }

    /// The portals listening now.
    pub fn portals(&self) -> Vec<SocketAddr> {
        self.portals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn set_portals(&self, portals: Vec<SocketAddr>) {
        *self.portals.lock().unwrap_or_else(|e| e.into_inner()) = portals;
    }

    /// Every session now, by TSIH.
    pub fn sessions(&self) -> Vec<(u16, Arc<SessionInfo>)> {
        self.table()
            .iter()
            .map(|(tsih, _, e)| (tsih, e.info.clone()))
            .collect()
    }

    /// Sends `sig` to the session `tsih`; whether there is one.
    pub fn signal_session(&self, tsih: u16, sig: SessionSignal) -> bool {
        match self.table().get(tsih) {
            Some((_, e)) => {
                e.signals.send(sig);
                true
            }
            None => false,
        }
    }

    /// Sends `sig` to the sessions of `target` whose initiator satisfies
    /// `pred`; how many.
    pub fn signal_initiators(
        &self,
        target: &str,
        pred: impl Fn(&str, SocketAddr) -> bool,
        sig: SessionSignal,
    ) -> usize {
        let mut n = 0;
        for e in self.table().of_target(target) {
            if pred(&e.info.initiator, e.info.peer) {
                e.signals.send(sig.clone());
                n += 1;
            }
        }
        n
    }

    /// Sends `sig` to the sessions of `target` whose nexus satisfies
    /// `pred`.
    pub fn signal(&self, target: &str, pred: impl Fn(NexusId) -> bool, sig: SessionSignal) {
        for e in self.table().of_target(target) {
            if pred(e.nexus) {
                e.signals.send(sig.clone());
            }
        }
    }

    fn info(t: &Target) -> TargetInfo {
        TargetInfo {
            name: t.cfg.name.clone(),
            alias: t.cfg.alias.clone(),
            portal_group_tag: t.cfg.portal_group_tag,
            offers: t.cfg.offers.clone(),
            queue_depth: t.cfg.queue_depth,
            chap: t.cfg.chap.clone(),
        }
    }
}

/// One login's view of the registry.
pub struct LoginCtx {
    pub registry: Arc<Registry>,
    /// Where the connection comes from (access lists match on it).
    pub peer: SocketAddr,
    /// Set when the login created a session.
    pub created: Option<SessionHandle>,
    /// Why the access list refused the last lookup (for the log line;
    /// the initiator only sees status 0x0202).
    pub refusal: Option<String>,
}

impl LoginContext for LoginCtx {
    fn find_target(
        &mut self,
        target_name: &str,
        initiator_name: &str,
    ) -> Result<TargetInfo, LoginStatus> {
        let t = self
            .registry
            .find(target_name)
            .ok_or(LoginStatus::NOT_FOUND)?;
        // A gateway's peer name logs in only with the group's CHAP for
        // it, whatever the target's own CHAP and access list (docs/ha.md,
        // "Forwarding").
        let peer = crate::group::peer_login(&t.cfg.name, t.cfg.group.as_ref(), initiator_name);
        if let PeerLogin::Refused(why) = peer {
            self.refusal = Some(why);
            return Err(LoginStatus::AUTHENTICATION_FAILURE);
        }
        let mut info = Registry::info(&t);
        info.chap = match peer {
            PeerLogin::Chap(policy) => Some(policy),
            _ => {
                if let Err(why) = t.cfg.acl.check(initiator_name, self.peer.ip()) {
                    self.refusal = Some(why);
                    return Err(LoginStatus::AUTHORIZATION_FAILURE);
                }
                t.chap_for(initiator_name)
            }
        };
        Ok(info)
    }

    fn discovery_offers(&self) -> Result<Offers, LoginStatus> {
        Ok(Offers::default())
    }

    fn discovery_chap(&self) -> Option<ChapPolicy> {
        self.registry.discovery_chap.clone()
    }

    fn random(&mut self, buf: &mut [u8]) -> Result<(), LoginStatus> {
        getrandom::fill(buf).map_err(|_| LoginStatus::TARGET_ERROR)
    }

    fn challenge_seen_before(&mut self, challenge: &[u8]) -> bool {
        let seen = self
            .registry
            .challenges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .seen_before(challenge);
        if seen {
            self.refusal = Some("mutual CHAP challenge replayed from an earlier login".into());
        }
        seen
    }

    fn create_session(&mut self, s: &NewSession) -> Result<u16, LoginStatus> {
        let target = match &s.target_name {
            Some(n) => Some(self.registry.find(n).ok_or(LoginStatus::NOT_FOUND)?),
            None => None,
        };
        let name = SessionName {
            initiator: s.initiator_name.clone(),
            isid: s.isid,
            target: target.as_ref().map(|t| t.cfg.name.clone()),
        };
        let nexus = NexusId(self.registry.next_nexus.fetch_add(1, Ordering::Relaxed));
        let signals = Arc::new(SessionSignals::default());
        let info = Arc::new(SessionInfo {
            initiator: s.initiator_name.clone(),
            isid: s.isid,
            target: target.as_ref().map(|t| t.cfg.name.clone()),
            peer: self.peer,
            started: std::time::SystemTime::now(),
            negotiated: OnceLock::new(),
            commands: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
        });
        let (alive, ended) = watch::channel(());
        let entry = SessionEntry {
            nexus,
            signals: signals.clone(),
            info: info.clone(),
            ended: SessionEnd(ended),
        };
        // A session of the same name is replaced (RFC 7143 §6.3.5): it
        // closes, whether or not the new one fits.
        let closed = |old: Option<SessionEntry>| {
            old.map(|old| {
                let why = "session reinstated by a new login with the same ISID";
                old.signals.send(SessionSignal::Close(why));
                old.ended
            })
        };
        let admitted = self.registry.table().admit(name, entry);
        let (tsih, replaced_end) = match admitted {
            Ok(a) => (a.tsih, closed(a.replaced)),
            Err(full) => {
                closed(full.replaced);
                return Err(LoginStatus::OUT_OF_RESOURCES);
            }
        };
        self.created = Some(SessionHandle {
            registry: self.registry.clone(),
            tsih,
            nexus,
            target,
            view: None,
            signals,
            info,
            reinstated: replaced_end.is_some(),
            replaced_end,
            _alive: alive,
        });
        Ok(tsih)
    }
}

/// SendTargets answers for one connection: portals bound to a wildcard
/// address are reported with the address the initiator reached us on.
pub struct PortalDirectory {
    pub registry: Arc<Registry>,
    pub local: SocketAddr,
    /// The initiator's address: SendTargets lists only targets its access
    /// lists let this initiator log in to.
    pub peer: SocketAddr,
}

impl PortalDirectory {
    fn addresses(&self, tpgt: u16) -> Vec<String> {
        let mut out: Vec<String> = self
            .registry
            .portals()
            .iter()
            .map(|p| {
                let addr = if p.ip().is_unspecified() {
                    SocketAddr::new(self.local.ip(), p.port())
                } else {
                    *p
                };
                // RFC 7143 §13.8: domainname[:port][,portal-group-tag],
                // IPv6 literals in brackets.
                format!("{addr},{tpgt}")
            })
            .collect();
        out.dedup();
        out
    }
}

impl Directory for PortalDirectory {
    fn send_targets(&self, initiator: &str, query: SendTargetsQuery<'_>) -> Vec<TargetListing> {
        self.registry
            .targets()
            .iter()
            .filter(|t| match query {
                SendTargetsQuery::All => true,
                SendTargetsQuery::Named(n) => t.cfg.name.eq_ignore_ascii_case(n),
            })
            .filter(|t| t.cfg.acl.check(initiator, self.peer.ip()).is_ok())
            // A target that shows this initiator no LUN is not listed.
            .filter(|t| !t.view_for(initiator).numbers().is_empty())
            .map(|t| TargetListing {
                name: t.cfg.name.clone(),
                addresses: self.addresses(t.cfg.portal_group_tag),
            })
            .collect()
    }
}
