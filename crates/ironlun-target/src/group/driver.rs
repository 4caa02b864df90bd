//! One target's group at work: a task that sends heartbeats to the other
//! gateways every interval, takes theirs, asks [`Group`] what to do, and
//! does it: lock calls on tokio's blocking pool (they wait on the
//! cluster), ALUA states on the target's LUs (raising ASYMMETRIC ACCESS
//! STATE CHANGED, as `ironlun admin alua set` does).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ironlun_backend::ImageLock;
use ironlun_scsi::{AccessState, LogicalUnit};
use tokio::net::UdpSocket;
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use super::peer::Peers;
use super::state::{Action, Group, Member, Outcome, Role, Setup, Timing};
use super::wire::{self, MAX_DATAGRAM};
use super::{lock_running, GatewayView, GroupView, LunView};
use crate::config::GroupConfig;
use crate::registry::Registry;

/// A group running in this process.
pub struct Running {
    target: String,
    cfg: GroupConfig,
    group: Mutex<Group>,
    registry: Arc<Registry>,
    outcomes: mpsc::UnboundedSender<Outcome>,
    runtime: Handle,
    /// The group key (`key_file`): heartbeats' HMAC, the peers' CHAP.
    key: Option<Arc<Vec<u8>>>,
    /// The sessions to the other gateways (forwarding).
    pub(super) peers: Peers,
    /// When each LUN's takeover started (for the log's timing).
    started: Mutex<HashMap<u16, Instant>>,
    /// When a refused datagram was last logged: at most one line per
    /// [`REFUSED_LOG_EVERY`], so that a flood cannot fill the log.
    refused_logged: Mutex<Option<Instant>>,
    /// The heartbeat socket and the last heartbeat's sequence number (counting up from a random start per process, so
    /// that a restarted peer's first heartbeats are not taken for
    /// replays of old ones).
    socket: UdpSocket,
    seq: AtomicU64,
    /// Per member (none for this gateway, or where one could not be
    /// made): a socket connected to its heartbeat address that heartbeats
    /// go out from, so that the kernel reports its ICMP port unreachable
    /// ([`Running::watch_refusals`]).
    senders: Vec<Option<Arc<UdpSocket>>>,
    /// When a forwarding failure was last logged (as `refused_logged`).
    forward_logged: Mutex<Option<Instant>>,
}

/// See [`Running::refused_logged`].
const REFUSED_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Starts `target`'s group (its heartbeat socket bound now, so that an
/// address in use is a start-up error). Must be called inside the
/// runtime.
pub fn start(
    registry: Arc<Registry>,
    target: &str,
    cfg: &GroupConfig,
) -> Result<Arc<Running>, String> {
    let key = match &cfg.key_file {
        Some(p) => Some(Arc::new(std::fs::read(p).map_err(|e| {
            format!("target {target} group.key_file {}: {e}", p.display())
        })?)),
        None => None,
    };
    let local = cfg.local().heartbeat;
    let std_socket = std::net::UdpSocket::bind(local)
        .map_err(|e| format!("target {target} group heartbeat {local}: {e}"))?;
    std_socket
        .set_nonblocking(true)
        .map_err(|e| format!("heartbeat socket: {e}"))?;
    let socket = UdpSocket::from_std(std_socket).map_err(|e| format!("heartbeat socket: {e}"))?;
    let senders = cfg
        .gateways
        .iter()
        .enumerate()
        .map(|(i, g)| {
            (i != cfg.local)
                .then(|| connected(local, g.heartbeat))
                .flatten()
        })
        .collect();
    let luns: Vec<u16> = registry
        .find(target)
        .map(|t| t.luns.iter().map(|(n, _)| *n).collect())
        .unwrap_or_default();
    let members = cfg
        .gateways
        .iter()
        .map(|g| Member {
            name: g.name.clone(),
            tpg: g.tpg,
        })
        .collect();
    let timing = Timing {
        interval: cfg.interval,
        dead_after: cfg.dead_after,
    };
    let setup = Setup {
        members,
        me: cfg.local,
        preferred: cfg.preferred,
        others: cfg.others,
        timing,
        failback: cfg.failback,
    };
    let group = Group::new(setup, &luns, Instant::now());
    let (tx, rx) = mpsc::unbounded_channel();
    let running = Arc::new(Running {
        target: target.to_owned(),
        cfg: cfg.clone(),
        group: Mutex::new(group),
        registry,
        outcomes: tx,
        runtime: Handle::current(),
        peers: Peers::new(target, cfg, key.as_deref().map(Vec::as_slice)),
        key: key.clone(),
        started: Mutex::new(HashMap::new()),
        refused_logged: Mutex::new(None),
        socket,
        senders,
        seq: AtomicU64::new(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1),
        ),
        forward_logged: Mutex::new(None),
    });
    info!(
        "target {target}: gateway {} of group {} ({} LUNs), heartbeats on udp {local} every {} ms, \
         a peer silent {} ms is presumed dead",
        cfg.local().name,
        cfg.name,
        luns.len(),
        cfg.interval.as_millis(),
        cfg.dead_after.as_millis()
    );
    lock_running().insert(target.to_owned(), running.clone());
    let (gone_tx, gone_rx) = mpsc::unbounded_channel();
    running.watch_refusals(&gone_tx);
    let r = running.clone();
    running
        .runtime
        .spawn(async move { r.serve(rx, gone_rx).await });
    Ok(running)
}

/// A socket on `local`'s address connected to `peer` (the receiver takes
/// a heartbeat by its source address, not its port); `None` when the
/// system refuses one (heartbeats then go from the group's socket and a
/// dead peer is noticed by its silence alone).
fn connected(local: SocketAddr, peer: SocketAddr) -> Option<Arc<UdpSocket>> {
    let s = std::net::UdpSocket::bind(SocketAddr::new(local.ip(), 0)).ok()?;
    s.connect(peer).ok()?;
    s.set_nonblocking(true).ok()?;
    UdpSocket::from_std(s).ok().map(Arc::new)
}

impl Running {
    /// The group key, if the group has one.
    pub(super) fn key(&self) -> Option<Arc<Vec<u8>>> {
        self.key.clone()
    }

    pub(super) fn runtime(&self) -> &Handle {
        &self.runtime
    }

    pub(super) fn target(&self) -> &str {
        &self.target
    }

    pub(super) fn gateway_count(&self) -> usize {
        self.cfg.gateways.len()
    }

    pub(super) fn local_index(&self) -> usize {
        self.cfg.local
    }

    /// The name of gateway `i`.
    pub(super) fn gateway_name(&self, i: usize) -> &str {
        self.cfg.gateways.get(i).map_or("?", |g| g.name.as_str())
    }

    /// The owner of LUN `lun` as an index into the gateways, when it is
    /// another gateway.
    pub(super) fn owner_index(&self, lun: u16, now: Instant) -> Option<usize> {
        let owner = self.group().owner(lun, now)?;
        let i = self.cfg.gateways.iter().position(|g| g.name == owner)?;
        (i != self.cfg.local).then_some(i)
    }

    fn group(&self) -> std::sync::MutexGuard<'_, Group> {
        self.group.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One task per connected sender: a datagram to a peer whose host
    /// answers "port unreachable" comes back as a refused receive; the
    /// peer's index goes to `gone`.
    fn watch_refusals(self: &Arc<Self>, gone: &mpsc::UnboundedSender<usize>) {
        for (i, s) in self.senders.iter().enumerate() {
            let (Some(s), gone) = (s.clone(), gone.clone()) else {
                continue;
            };
            self.runtime.spawn(async move {
                let mut buf = [0u8; 16];
                loop {
                    match s.recv(&mut buf).await {
                        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                            if gone.send(i).is_err() {
                                return;
                            }
                        }
                        // Nothing is sent to this socket; other errors
                        // are not about the peer's process.
                        Ok(_) => {}
                        Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
                    }
                }
            });
        }
    }

    /// Member `i`'s heartbeat port refused: presumed dead now.
    fn refused_by(self: &Arc<Self>, i: usize) {
        if self.group().unreachable(i, Instant::now()) {
            warn!(
                "target {}: gateway {}'s heartbeat port refused a datagram (its host answers, its \
                 process is gone): presumed dead without waiting {} ms",
                self.target,
                self.cfg
                    .gateways
                    .get(i)
                    .map(|g| g.name.as_str())
                    .unwrap_or("?"),
                self.cfg.dead_after.as_millis()
            );
            self.step();
        }
    }

    async fn serve(
        self: Arc<Self>,
        mut outcomes: mpsc::UnboundedReceiver<Outcome>,
        mut gone: mpsc::UnboundedReceiver<usize>,
    ) {
        let mut ticker = tokio::time::interval(self.cfg.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_seq: HashMap<usize, (u64, Instant)> = HashMap::new();
        let mut buf = vec![0u8; MAX_DATAGRAM + 1];
        loop {
            tokio::select! {
                _ = ticker.tick() => self.beat().await,
                got = self.socket.recv_from(&mut buf) => {
                    if let Ok((n, from)) = got {
                        let bytes = buf.get(..n).unwrap_or_default();
                        self.take(bytes, from, &mut last_seq);
                    }
                }
                Some(i) = gone.recv() => self.refused_by(i),
                Some(o) = outcomes.recv() => {
                    self.note(&o);
                    self.group().outcome(o, Instant::now());
                    self.step();
                }
            }
        }
    }

    /// One interval: heartbeats out, fences noticed, decisions made.
    async fn beat(self: &Arc<Self>) {
        let now = Instant::now();
        let seq = self.seq.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        let hb = self.group().heartbeat(&self.cfg.name, seq, now);
        let bytes = wire::encode(&hb, self.key.as_deref().map(Vec::as_slice));
        for (i, g) in self.cfg.gateways.iter().enumerate() {
            if i == self.cfg.local {
                continue;
            }
            // A peer that is down refuses; the next beat tries again.
            match self.senders.get(i).and_then(Option::as_ref) {
                Some(s) => drop(s.send(&bytes).await),
                None => drop(self.socket.send_to(&bytes, g.heartbeat).await),
            }
        }
        self.step();
    }

    /// A datagram from `from`: taken only from a member's configured
    /// heartbeat address, for this group, newer than the last.
    fn take(&self, bytes: &[u8], from: SocketAddr, last: &mut HashMap<usize, (u64, Instant)>) {
        let hb = match wire::decode(bytes, self.key.as_deref().map(Vec::as_slice)) {
            Ok(hb) => hb,
            Err(e) => {
                self.refused(from, &e.to_string());
                return;
            }
        };
        let member = self
            .cfg
            .gateways
            .iter()
            .position(|g| g.name == hb.from && g.heartbeat.ip() == from.ip());
        let (Some(i), true) = (member, hb.group == self.cfg.name) else {
            let why = format!("not a gateway of group {} at that address", self.cfg.name);
            self.refused(from, &why);
            return;
        };
        let now = Instant::now();
        // Older than the last one taken: a replay or a reordered datagram,
        // unless the sender was silent long enough to have restarted.
        if let Some((s, at)) = last.get(&i) {
            if hb.seq <= *s && now.saturating_duration_since(*at) < self.cfg.dead_after {
                return;
            }
        }
        last.insert(i, (hb.seq, now));
        self.group().heard(i, &hb, now);
    }

    /// Whether a forwarding failure may be logged now: at most once per
    /// [`REFUSED_LOG_EVERY`] (every write fails alike while the owner is
    /// away).
    pub(super) fn may_log_forward(&self) -> bool {
        let mut last = self
            .forward_logged
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < REFUSED_LOG_EVERY) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    /// Logs a refused datagram, at most once per [`REFUSED_LOG_EVERY`].
    fn refused(&self, from: SocketAddr, why: &str) {
        let mut last = self
            .refused_logged
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < REFUSED_LOG_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        warn!(
            "target {}: heartbeat from {from} refused: {why} (such refusals are logged once per \
             {} s)",
            self.target,
            REFUSED_LOG_EVERY.as_secs()
        );
    }

    /// Fences noticed, then the group's decisions carried out.
    fn step(self: &Arc<Self>) {
        let now = Instant::now();
        let numbers: Vec<u16> = self.group().luns().collect();
        for n in numbers {
            if self
                .lu(n)
                .is_some_and(|lu| lu.backend().image_lock().is_some_and(|l| l.fenced()))
            {
                let was = self.group().role(n);
                if !matches!(was, Some(Role::Fenced | Role::Rejoining)) {
                    error!(
                        "target {} LUN {n}: this gateway's client was blocklisted (fenced by \
                         another gateway's takeover): serving nothing until `ironlun admin group \
                         rejoin {}`",
                        self.target, self.target
                    );
                    self.group().fenced(n);
                }
            }
        }
        let mut actions = self.group().tick(now);
        // States first: a LUN being handed over is transitioning before
        // its release starts draining it.
        actions.sort_by_key(|a| !matches!(a, Action::Alua { .. }));
        for a in actions {
            self.run(a);
        }
    }

    /// The LU of LUN `n`, if its store has a lock (`None`: gone, or not
    /// a store a group can own).
    fn lu(&self, n: u16) -> Option<Arc<LogicalUnit>> {
        let t = self.registry.find(&self.target)?;
        let lu = t.luns.get(n)?.clone();
        lu.backend().image_lock()?;
        Some(lu)
    }

    fn run(self: &Arc<Self>, a: Action) {
        match a {
            Action::Alua { lun, states } => self.set_states(lun, &states),
            Action::Acquire { lun, break_owner } => {
                self.started
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(lun, Instant::now());
                self.blocking(lun, move |l, _| acquire(l, lun, break_owner.as_deref()));
            }
            Action::Release { lun } => {
                info!(
                    "target {} LUN {lun}: handing over to the preferred gateway (failback): \
                     draining, flushing, releasing the lock",
                    self.target
                );
                self.blocking(lun, move |l, lu| {
                    match lu.backend().flush().and_then(|()| l.release()) {
                        Ok(()) => Outcome::Released { lun },
                        Err(_) => Outcome::Failed { lun },
                    }
                });
            }
            Action::Verify { lun } => {
                let ours = self.group().address(lun);
                self.blocking(lun, move |l, _| match l.owners() {
                    Ok(owners) => Outcome::Holder {
                        lun,
                        ours: ours.is_some_and(|a| owners.contains(&a)) && l.holds(),
                    },
                    Err(_) if l.fenced() => Outcome::Fenced { lun },
                    Err(_) => Outcome::Holder { lun, ours: true },
                });
            }
            Action::Rejoin { lun } => {
                self.blocking(lun, move |l, _| match l.rejoin() {
                    Ok(()) => Outcome::Rejoined { lun },
                    Err(_) => Outcome::Failed { lun },
                });
            }
        }
    }

    /// Runs `f` on LUN `lun`'s lock on the blocking pool; its outcome
    /// comes back to the task.
    fn blocking(
        self: &Arc<Self>,
        lun: u16,
        f: impl FnOnce(&dyn ImageLock, &LogicalUnit) -> Outcome + Send + 'static,
    ) {
        let tx = self.outcomes.clone();
        let Some(lu) = self.lu(lun) else {
            let _ = tx.send(Outcome::Failed { lun });
            return;
        };
        drop(self.runtime.spawn_blocking(move || {
            let outcome = match lu.backend().image_lock() {
                Some(l) => f(l, &lu),
                None => Outcome::Failed { lun },
            };
            let _ = tx.send(outcome);
        }));
    }

    fn set_states(&self, n: u16, states: &[(u16, AccessState)]) {
        let Some(t) = self.registry.find(&self.target) else {
            return;
        };
        let Some(lu) = t.luns.get(n) else { return };
        let now = lu.alua_config();
        let mut groups = now.groups.clone();
        for g in groups.iter_mut() {
            if let Some((_, s)) = states.iter().find(|(id, _)| *id == g.id) {
                g.state = *s;
            }
        }
        match lu.set_alua_groups(&groups, now.transition_time) {
            Ok(true) => {
                let shown: Vec<String> = states.iter().map(|(g, s)| format!("{g} {s}")).collect();
                info!(
                    "target {} LUN {n}: ALUA groups {} (gateway group {})",
                    self.target,
                    shown.join(", "),
                    self.cfg.name
                );
            }
            Ok(false) => {}
            Err(e) => warn!("target {} LUN {n}: ALUA states not set: {e}", self.target),
        }
    }

    /// Logs what an outcome means.
    fn note(&self, o: &Outcome) {
        let t = &self.target;
        match o {
            Outcome::Acquired { lun, address } => {
                let took = self
                    .started
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(lun)
                    .map(|s| s.elapsed().as_millis())
                    .unwrap_or(0);
                info!(
                    "target {t} LUN {lun}: this gateway owns it now (lock held as {address}, \
                     taken in {took} ms): active/optimized"
                );
            }
            Outcome::NotAcquired { lun, holder } => info!(
                "target {t} LUN {lun}: the lock is held ({}): standby",
                holder.as_deref().unwrap_or("by another client")
            ),
            Outcome::Released { lun } => info!("target {t} LUN {lun}: lock released: standby"),
            Outcome::Holder { lun, ours: false } => {
                warn!("target {t} LUN {lun}: another gateway holds the lock now: standby")
            }
            Outcome::Fenced { lun } => {
                error!("target {t} LUN {lun}: fenced (this gateway's client was blocklisted)")
            }
            Outcome::Rejoined { lun } => info!(
                "target {t} LUN {lun}: rejoined with a fresh client: standby until the group \
                 gives it the LUN"
            ),
            Outcome::Failed { lun } => warn!("target {t} LUN {lun}: group step failed"),
            Outcome::Holder { .. } => {}
        }
    }

    /// An orderly stop (SIGTERM, before the sessions are asked to log
    /// out): the LUNs this gateway owns go transitioning (initiators
    /// retry, dm-multipath moves), are flushed and their locks released,
    /// and the peers are told it left, so that one takes each LUN at once
    /// instead of breaking its lock after `dead_after` (and blocklisting
    /// this client). Bounded by the cluster's operation timeout per LUN.
    pub(super) async fn leave(self: &Arc<Self>) {
        let owned = self.group().leave();
        self.step();
        let mut released = 0;
        for n in &owned {
            let Some(lu) = self.lu(*n) else { continue };
            let done = tokio::task::spawn_blocking(move || {
                let lock = lu.backend().image_lock()?;
                lu.backend().flush().and_then(|()| lock.release()).ok()
            })
            .await;
            match done {
                Ok(Some(())) => released += 1,
                _ => warn!(
                    "target {} LUN {n}: lock not released at the stop: the other gateways \
                     break it after {} ms",
                    self.target,
                    self.cfg.dead_after.as_millis()
                ),
            }
        }
        self.group().left();
        // Three datagrams a few ms apart: one lost is not a takeover lost.
        for _ in 0..3 {
            self.beat().await;
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        info!(
            "target {}: gateway {} left group {}: {released} of {} owned LUN(s) released, the \
             others told",
            self.target,
            self.cfg.local().name,
            self.cfg.name,
            owned.len()
        );
    }

    /// `admin group rejoin`.
    pub(super) fn rejoin(self: &Arc<Self>) -> Vec<u16> {
        let actions = self.group().rejoin();
        let luns = actions
            .iter()
            .filter_map(|a| match a {
                Action::Rejoin { lun } => Some(*lun),
                _ => None,
            })
            .collect();
        for a in actions {
            self.run(a);
        }
        luns
    }

    pub(super) fn view(&self) -> GroupView {
        let now = Instant::now();
        let g = self.group();
        GroupView {
            target: self.target.clone(),
            group: self.cfg.name.clone(),
            gateway: self.cfg.local().name.clone(),
            gateways: g
                .member_views(now)
                .into_iter()
                .map(|m| GatewayView {
                    name: m.name,
                    tpg: m.tpg,
                    local: m.local,
                    health: m.health,
                })
                .collect(),
            luns: g
                .luns()
                .map(|n| LunView {
                    lun: n,
                    owner: g.owner(n, now),
                    role: g.role(n).map(Role::name).unwrap_or("?").to_owned(),
                })
                .collect(),
        }
    }
}

/// Takes LUN `lun`'s lock: breaks `break_owner`'s first if RADOS still
/// shows that one (and only that one) holding it; leaves a lock anyone
/// else holds alone. Blocks on the cluster.
fn acquire(lock: &dyn ImageLock, lun: u16, break_owner: Option<&str>) -> Outcome {
    let fail = |lock: &dyn ImageLock| {
        if lock.fenced() {
            Outcome::Fenced { lun }
        } else {
            Outcome::NotAcquired { lun, holder: None }
        }
    };
    let Ok(owners) = lock.owners() else {
        return fail(lock);
    };
    match (owners.as_slice(), break_owner) {
        ([], _) => {}
        ([o], Some(dead)) if o == dead => {
            if let Err(e) = lock.break_owner(o) {
                warn!("LUN {lun}: breaking the lock of {o}: {e}");
                return fail(lock);
            }
            info!("LUN {lun}: broke the lock of {o} (its client is blocklisted)");
        }
        ([o], _) => {
            return Outcome::NotAcquired {
                lun,
                holder: Some(o.clone()),
            }
        }
        _ => return Outcome::NotAcquired { lun, holder: None },
    }
    if lock.acquire().is_err() {
        return fail(lock);
    }
    match lock.owners() {
        Ok(now) => match now.as_slice() {
            [mine] if lock.holds() => Outcome::Acquired {
                lun,
                address: mine.clone(),
            },
            _ => Outcome::NotAcquired { lun, holder: None },
        },
        Err(_) => fail(lock),
    }
}
