//! Listening, accepting, and stopping cleanly.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ironlun_backend::{
    Backend, ClusterConfig, FileBackend, NullBackend, RamBackend, RbdBackend, RbdOptions, Severity,
};
use ironlun_scsi::{
    AluaEvent, AluaNotify, LogicalUnit, LuConfig, LunMap, ThresholdEvent, ThresholdNotify,
};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{error, info, warn};

use crate::config::{BackendSpec, Config, LunConfig, Overrides, RbdSpec, TargetConfig, TcpTuning};
use crate::conn;
use crate::live::Live;
use crate::lu_state::{self, StateDir};
use crate::registry::{Registry, Target};
use crate::sanitize_store;
use crate::shared_pr;
use crate::stats;

/// Why [`Server::bind`] failed: a LUN that cannot be opened or a portal
/// or endpoint that cannot listen. Each names the LUN or address.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The backend (file, block device) of a LUN did not open.
    #[error("target {target} LUN {lun}: {source}")]
    OpenBackend {
        target: String,
        lun: u16,
        source: std::io::Error,
    },
    /// The logical unit refused its settings. (A state file that cannot
    /// be read takes its LU offline instead, `lu_state.rs`.)
    #[error("target {target} LUN {lun}: {problem}")]
    SetUpLun {
        target: String,
        lun: u16,
        problem: String,
    },
    /// The state directory is there but is not a directory one can
    /// look into.
    #[error("state directory {}: {problem}", path.display())]
    StateDir {
        path: std::path::PathBuf,
        problem: String,
    },
    /// A portal's socket could not be created, bound or put to listen.
    #[error("listen {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// A socket option (`SO_SNDBUF`, `SO_RCVBUF`) of a portal was refused.
    #[error("listen {addr}: {option}: {source}")]
    SocketOption {
        addr: SocketAddr,
        option: &'static str,
        source: std::io::Error,
    },
    /// The management API's socket could not be made.
    #[error("management socket {}: {source}", path.display())]
    Admin {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The management API over HTTP could not listen, or its token file
    /// could not be read or is unfit.
    #[error("management API on http://{addr}: {problem}")]
    AdminHttp { addr: SocketAddr, problem: String },
    /// The running state could not be set up from the configuration.
    #[error("{0}")]
    Config(String),
    /// The statistics endpoint could not listen.
    #[error("statistics endpoint {addr}: {source}")]
    Stats {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Stable 64-bit FNV-1a, for serial numbers and NAA identifiers that must
/// not change across restarts.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Opens the store of an LU; `grouped`: its target is served by a gateway
/// group. An RBD image of a group, or with shared reservations
/// (`pr=rados`: served by several gateways), acknowledges writes only
/// once the OSDs have them ([`RbdOptions::write_through`]).
fn open_backend(
    spec: &BackendSpec,
    read_only: bool,
    grouped: bool,
) -> std::io::Result<Arc<dyn Backend>> {
    Ok(match spec {
        BackendSpec::Null { size } => Arc::new(NullBackend::new(*size)),
        BackendSpec::Ram { size } => Arc::new(RamBackend::new(*size)),
        BackendSpec::File { path, .. } => {
            Arc::new(FileBackend::open_file(path, &spec.file_options(read_only))?)
        }
        BackendSpec::Block { path, .. } => Arc::new(FileBackend::open_block(
            path,
            &spec.file_options(read_only),
        )?),
        // Shared reservations mean several gateways on the image, each
        // a path to it: a write one acknowledged from librbd's cache
        // must not die with it under a flush another one answers.
        BackendSpec::Rbd(rbd) => Arc::new(RbdBackend::open(&RbdOptions {
            write_through: grouped || rbd.shared_pr,
            grouped,
            ..rbd_options(rbd, read_only)
        })?),
    })
}

fn rbd_options(spec: &RbdSpec, read_only: bool) -> RbdOptions {
    RbdOptions {
        pool: spec.pool.clone(),
        image: spec.image.clone(),
        cluster: ClusterConfig {
            conf: spec.conf.clone(),
            client_id: spec.client_id.clone(),
            keyring: spec.keyring.clone(),
            options: spec
                .timeout_secs
                .map(|s| {
                    ["rados_osd_op_timeout", "rados_mon_op_timeout"]
                        .map(|k| (k.to_owned(), s.to_string()))
                        .to_vec()
                })
                .unwrap_or_default(),
            ..ClusterConfig::default()
        },
        read_only,
        reconnect: spec.reconnect,
        write_through: false,
        grouped: false,
    }
}

/// A store whose size changes behind the target's back (an RBD image
/// resized in Ceph): each change reaches the LU, which tells every nexus
/// CAPACITY DATA HAS CHANGED (SBC-4 §4.6.3.2). The task ends with the LU.
fn follow_size(lu: &Arc<LogicalUnit>, target: &str, number: u16) {
    let Some(mut sizes) = lu.backend().size_watch() else {
        return;
    };
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak = Arc::downgrade(lu);
    let target = target.to_owned();
    rt.spawn(async move {
        while sizes.changed().await.is_some() {
            let Some(lu) = weak.upgrade() else { return };
            match lu.rescan() {
                Ok(Some((old, new))) => {
                    info!(target = %target, lun = number, old_blocks = old, new_blocks = new, "the store was resized: capacity changed")
                }
                Ok(None) => {}
                Err(e) => warn!(target = %target, lun = number, "size after a resize: {e}"),
            }
        }
    });
}

/// What a store has to tell the operator as it runs (an RBD client
/// fenced or reconnected, acknowledged writes lost), logged with the
/// target and LUN it serves. The task ends with the store.
fn follow_events(lu: &LogicalUnit, target: &str, number: u16) {
    let Some(mut events) = lu.backend().events() else {
        return;
    };
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let target = target.to_owned();
    rt.spawn(async move {
        while let Some(e) = events.next().await {
            let m = &e.message;
            match e.severity {
                Severity::Info => info!(target = %target, lun = number, "{m}"),
                Severity::Warning => warn!(target = %target, lun = number, "{m}"),
                Severity::Error => error!(target = %target, lun = number, "{m}"),
            }
        }
    });
}

/// The LU's NAA identifier and serial number (as 16 hex digits): from
/// the store's own name where it has one shared by every process that
/// opens it (an RBD image's pool and id: every gateway of a group then
/// reports the same identity, whatever its target name, portal group or
/// LUN number), else from the target's name and the LUN number. Stable
/// across restarts either way.
fn lu_id(t: &TargetConfig, l: &LunConfig, backend: &dyn Backend) -> u64 {
    match backend.identity() {
        Some(store) => fnv1a(&[store.as_bytes()]),
        None => fnv1a(&[
            t.name.to_ascii_lowercase().as_bytes(),
            &l.number.to_be_bytes(),
        ]),
    }
}

pub(crate) fn build_lu(
    t: &TargetConfig,
    l: &LunConfig,
    max_transfer_bytes: u32,
    state: Option<StateDir<'_>>,
) -> Result<Arc<LogicalUnit>, BindError> {
    let set_up = |problem| BindError::SetUpLun {
        target: t.name.clone(),
        lun: l.number,
        problem,
    };
    let backend =
        open_backend(&l.spec.backend, l.spec.read_only, t.group.is_some()).map_err(|source| {
            BindError::OpenBackend {
                target: t.name.clone(),
                lun: l.number,
                source,
            }
        })?;
    let id = lu_id(t, l, backend.as_ref());
    let cfg = LuConfig {
        block_size: l.spec.block_size,
        physical_block_size: l.spec.physical_block_size,
        read_only: l.spec.read_only,
        product: format!("ironlun {}", backend.kind()),
        revision: env!("CARGO_PKG_VERSION")
            .chars()
            .filter(|c| *c != '.')
            .take(4)
            .collect(),
        serial: format!("{id:016x}"),
        naa_id: id,
        target_name: t.name.clone(),
        portal_group_tag: t.portal_group_tag,
        relative_port: t.relative_port,
        alua: t.alua.clone(),
        max_transfer_bytes,
        thin: l.spec.thin,
        sanitize: l.spec.sanitize,
        rotation: l.spec.rotation,
    };
    let mut lu = LogicalUnit::new(cfg, backend).map_err(set_up)?;
    // REGISTER AND MOVE names an initiator: the login's rule for names.
    lu.set_name_rule(|n| ironlun_proto::names::normalize(n).ok());
    lu.set_sanitize_rate(l.spec.sanitize_rate);
    set_threshold(&mut lu, t, l).map_err(set_up)?;
    if t.alua.mode.explicit() {
        lu.set_alua_notify(log_alua(t.name.clone(), l.number));
    }
    // A gateway of a group with a key forwards the writes it cannot do
    // to the owner (docs/ha.md, "Forwarding").
    if t.group.as_ref().is_some_and(|g| g.key_file.is_some()) {
        let f = crate::group::forward::LunForwarder::new(&t.name, l.number);
        lu.set_forwarder(Arc::new(f)).map_err(set_up)?;
    }
    // Reservations shared through RADOS (pr=rados) instead of a file.
    let shared = match &l.spec.backend {
        BackendSpec::Rbd(r) if r.shared_pr => Some(open_shared_pr(&mut lu).map_err(set_up)?),
        _ => None,
    };
    // What the state files held, or why the LU must stay offline: never
    // an error of the daemon (lu_state.rs).
    let found = state.map(|d| {
        let opened = lu_state::open(d, &t.name, l.number);
        if shared.is_none() {
            lu.set_pr_store(Arc::new(opened.pr), None);
        }
        lu.set_sanitize_store(Arc::new(opened.sanitize));
        opened.found
    });
    let lu = Arc::new(lu);
    if let Some(found) = found {
        lu_state::take_up(&lu, found, &t.name, l.number);
    }
    if let Some((store, watch)) = shared {
        let label = format!("target {} LUN {}", t.name, l.number);
        shared_pr::follow(store, watch, Arc::downgrade(&lu), label)
            .map_err(|e| set_up(format!("pr=rados: starting its watch thread: {e}")))?;
    }
    follow_size(&lu, &t.name, l.number);
    follow_events(&lu, &t.name, l.number);
    Ok(lu)
}

/// `pr=rados`: the image's reservations object, at the group's power on
/// cleared or kept by its APTPL ([`shared_pr::RadosPr::power_on`]),
/// reached through the image's own client (one fence for both),
/// watched, read and handed to the LU. Blocks (cluster round trips).
fn open_shared_pr(
    lu: &mut LogicalUnit,
) -> Result<(Arc<shared_pr::RadosPr>, ironlun_backend::rbd::SharedWatch), String> {
    let identity = lu.backend().identity().unwrap_or_default();
    let id = shared_pr::image_id(&identity)
        .ok_or("pr=rados needs an image of format 2 (it has an id; this one has none)")?
        .to_owned();
    let fail = |e: std::io::Error| format!("pr=rados: {}: {e}", shared_pr::object_name(&id));
    let lock = lu
        .backend()
        .image_lock()
        .ok_or("pr=rados needs an rbd: store")?;
    let store = shared_pr::RadosPr::open(lock, &id).map_err(fail)?;
    store.power_on().map_err(fail)?;
    let (watch, now) = shared_pr::start(&store).map_err(fail)?;
    let store = Arc::new(store);
    lu.set_shared_pr(store.clone(), now);
    info!(
        "{}: persistent reservations shared through {}",
        identity,
        shared_pr::object_name(&id)
    );
    Ok((store, watch))
}

/// Logs the states an initiator's SET TARGET PORT GROUPS set (SPC-5
/// §6.44). They hold on this gateway alone, until the operator's `alua
/// set` or a change of the configuration sets them again.
fn log_alua(target: String, lun: u16) -> AluaNotify {
    Box::new(move |event| match event {
        AluaEvent::SetByInitiator { initiator, changes } => {
            for (group, from, to) in changes {
                info!(
                    lun,
                    initiator = %initiator,
                    "target {target}: SET TARGET PORT GROUPS: ALUA group {group} {from} -> {to} (on this gateway)"
                );
            }
        }
    })
}

/// What the log says when a LUN's soft threshold is reached, and when it
/// is armed again.
const THRESHOLD_REACHED: &str = "soft threshold reached: the file system under this thin LUN has less space left than its soft threshold; initiators are told (THIN PROVISIONING SOFT THRESHOLD REACHED), writes go on until it is full";
const THRESHOLD_REARMED: &str = "soft threshold armed again: space is back above it";

/// Sets the LUN's soft threshold, if it has one, with its crossings
/// logged.
fn set_threshold(lu: &mut LogicalUnit, t: &TargetConfig, l: &LunConfig) -> Result<(), String> {
    let Some(threshold) = l.spec.soft_threshold else {
        return Ok(());
    };
    lu.set_soft_threshold(threshold, Some(log_threshold(t.name.clone(), l.number)))?;
    info!(
        "target {} LUN {}: soft threshold: initiators are warned when the file system's free space drops below {threshold}",
        t.name, l.number
    );
    Ok(())
}

/// Logs a LUN's soft threshold crossings, once each: initiators have
/// THIN PROVISIONING SOFT THRESHOLD REACHED (SBC-4 §4.7.3.7) as a unit
/// attention; the operator has this line.
fn log_threshold(target: String, lun: u16) -> ThresholdNotify {
    Box::new(move |event| match event {
        ThresholdEvent::Reached {
            free_bytes,
            threshold_bytes,
        } => warn!(
            lun,
            free_bytes, threshold_bytes, "target {target}: {THRESHOLD_REACHED}"
        ),
        ThresholdEvent::Rearmed {
            free_bytes,
            threshold_bytes,
        } => info!(
            lun,
            free_bytes, threshold_bytes, "target {target}: {THRESHOLD_REARMED}"
        ),
    })
}

/// A registry of `cfg`'s targets, their backends open, with no portal
/// bound and no discovery CHAP, and `cfg`'s I/O engine as written (not
/// probed): what the management API's tests and this crate's drive.
pub fn unbound_registry(cfg: &Config) -> Result<Arc<Registry>, BindError> {
    Ok(Registry::new(
        build_targets(cfg)?,
        cfg.limits.clone(),
        cfg.tcp.clone(),
        Vec::new(),
        None,
        cfg.io_engine,
    ))
}

/// [`unbound_registry`] for tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn test_registry(cfg: &Config) -> Arc<Registry> {
    unbound_registry(cfg).unwrap()
}

/// Opens every backend and builds the targets.
pub fn build_targets(cfg: &Config) -> Result<Vec<Arc<Target>>, BindError> {
    if let Some(d) = &cfg.state_dir {
        check_state_dir(d)?;
    }
    let mut out = Vec::new();
    let names = cfg.state_dir.as_deref().map(lu_state::LegacyNames::read);
    let state = lu_state::state_dir(cfg).map(|d| match &names {
        Some(n) => d.with_names(n),
        None => d,
    });
    for t in &cfg.targets {
        let mut luns = Vec::new();
        for l in &t.luns {
            let lu = build_lu(t, l, cfg.limits.max_transfer_bytes, state)?;
            luns.push((l.number, lu));
        }
        out.push(Arc::new(Target::new(
            t.clone(),
            Arc::new(LunMap::new(luns)),
        )));
    }
    Ok(out)
}

/// A state directory that is there is a directory (one that is not is
/// made on the first save): otherwise every LU would go offline for it.
fn check_state_dir(d: &std::path::Path) -> Result<(), BindError> {
    let problem = match std::fs::metadata(d) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => "not a directory".to_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => e.to_string(),
    };
    Err(BindError::StateDir {
        path: d.to_owned(),
        problem,
    })
}

/// SIGHUP: looks at every backend's size again. A LUN whose capacity
/// changed raises CAPACITY DATA HAS CHANGED for its initiators
/// (SBC-3 §4.10).
pub fn rescan(registry: &Registry) {
    for t in registry.targets().iter() {
        for (n, lu) in t.luns.iter() {
            match lu.rescan() {
                Ok(Some((old, new))) => info!(
                    "target {} LUN {n}: capacity changed from {old} to {new} blocks",
                    t.cfg.name
                ),
                Ok(None) => {}
                Err(e) => warn!("target {} LUN {n}: cannot read its size: {e}", t.cfg.name),
            }
        }
    }
}

/// One portal: a socket with the configured buffers, bound and
/// listening.
pub(crate) fn listen(addr: SocketAddr, tcp: &TcpTuning) -> Result<TcpListener, BindError> {
    let failed = |source| BindError::Listen { addr, source };
    let option = |option| {
        move |source| BindError::SocketOption {
            addr,
            option,
            source,
        }
    };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(failed)?;
    let _ = socket.set_reuseaddr(true);
    // Accepted sockets inherit the buffers; set before listen so the
    // window scale matches (RFC 7323 §2.2).
    if let Some(n) = tcp.send_buffer {
        socket
            .set_send_buffer_size(n)
            .map_err(option("SO_SNDBUF"))?;
    }
    if let Some(n) = tcp.recv_buffer {
        socket
            .set_recv_buffer_size(n)
            .map_err(option("SO_RCVBUF"))?;
    }
    socket.bind(addr).map_err(failed)?;
    socket.listen(1024).map_err(failed)
}

/// What runs beside the data path and changes it: the management API
/// and the snapshot schedules (ironlun-target-admin's `Control`, bound
/// after [`Server::bind`] and given with [`Server::with_control`]).
/// [`Server::run`] starts it once the portals serve, and stops it, off
/// the async threads, before it asks initiators to log out.
pub trait Control: Send {
    /// Starts serving `live`; dropping what it returns stops it (and
    /// may wait, bounded, for an operation under way).
    fn start(self: Box<Self>, live: Arc<Live>) -> Result<Box<dyn Send>, String>;
}

/// A bound, not yet running target daemon.
pub struct Server {
    registry: Arc<Registry>,
    live: Arc<Live>,
    /// The management API and the snapshot schedules, if given.
    control: Option<Box<dyn Control>>,
    /// The statistics endpoint, if configured.
    stats: Option<TcpListener>,
    started: std::time::Instant,
}

impl Server {
    /// Opens backends and binds every portal.
    /// A configuration built in code has no document to edit, so its
    /// [`Live`] refuses every change (the lab's embedded target).
    pub async fn bind(cfg: &Config) -> Result<Server, BindError> {
        Self::bind_from(cfg, None).await
    }

    /// As [`Server::bind`], for a configuration read from `overrides`
    /// (the file SIGHUP reads again, the flags that stay on top of it).
    pub async fn bind_with(cfg: &Config, overrides: &Overrides) -> Result<Server, BindError> {
        Self::bind_from(cfg, Some(overrides)).await
    }

    async fn bind_from(cfg: &Config, overrides: Option<&Overrides>) -> Result<Server, BindError> {
        let targets = build_targets(cfg)?;
        let mut bound = Vec::new();
        for addr in &cfg.listen {
            bound.push((*addr, listen(*addr, &cfg.tcp)?));
        }
        let portals = bound
            .iter()
            .filter_map(|(_, l)| l.local_addr().ok())
            .collect();
        let stats = match cfg.stats {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|source| BindError::Stats { addr, source })?,
            ),
            None => None,
        };
        let registry = Registry::new(
            targets,
            cfg.limits.clone(),
            cfg.tcp.clone(),
            portals,
            cfg.discovery_chap.clone(),
            crate::ring::probe(cfg.io_engine),
        );
        let live = match overrides {
            Some(o) => Live::new(registry.clone(), cfg.clone(), o, bound),
            None => Ok(Live::fixed(registry.clone(), cfg.clone(), bound)),
        }
        .map_err(|e| BindError::Config(e.to_string()))?;
        Ok(Server {
            registry,
            live: Arc::new(live),
            control: None,
            stats,
            started: std::time::Instant::now(),
        })
    }

    /// The same server, which [`Server::run`] runs with `control`
    /// beside it.
    pub fn with_control(mut self, control: impl Control + 'static) -> Server {
        self.control = Some(Box::new(control));
        self
    }

    /// The running configuration, for the management API.
    pub fn live(&self) -> Arc<Live> {
        self.live.clone()
    }

    /// Where the statistics endpoint listens (port 0 resolved).
    pub fn stats_addr(&self) -> Option<SocketAddr> {
        self.stats.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Addresses actually bound (port 0 resolved).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.registry.portals()
    }

    /// Serves until `stop` resolves, then stops accepting, asks every
    /// initiator to log out, waits for connections to end (bounded), and
    /// flushes every logical unit.
    pub async fn run(self, stop: impl Future<Output = ()>) -> Result<(), String> {
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let mut conns: JoinSet<()> = JoinSet::new();
        let stat_sn_seed = AtomicU32::new(0x1000);
        let (accept_tx, mut accept_rx) = tokio::sync::mpsc::channel(64);
        let mut acceptors = JoinSet::new();
        self.live.start_accepting(accept_tx);
        // SIGHUP's handler is in place before the portals are announced:
        // its default action would end the process.
        let mut hangup =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        for a in &self.registry.portals() {
            info!("listening on {a}");
        }
        if let Some(l) = self.stats {
            self.registry.metrics.measure_latency();
            if let Ok(a) = l.local_addr() {
                info!("statistics on http://{a}/stats");
            }
            acceptors.spawn(stats::serve(l, self.registry.clone(), self.started));
        }
        let control = match self.control {
            Some(c) => Some(c.start(self.live.clone())?),
            None => None,
        };
        // Gateway groups (docs/ha.md): their heartbeats and lock calls.
        for t in self.registry.targets().iter() {
            if let Some(g) = &t.cfg.group {
                crate::group::start(self.registry.clone(), &t.cfg.name, g)?;
            }
        }
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                Some(()) = async { match hangup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => {
                    let live = self.live.clone();
                    // Opening backends may block: off the serving loop,
                    // which keeps accepting (and pinging systemd's
                    // watchdog) meanwhile. Reloads take the live state's
                    // lock, so two SIGHUPs apply one after the other.
                    drop(tokio::task::spawn_blocking(move || live.reload()));
                }
                Some((stream, peer)) = accept_rx.recv() => {
                    while conns.try_join_next().is_some() {}
                    if conns.len() >= self.registry.limits.max_connections {
                        warn!(%peer, "connection refused: {} connections open", conns.len());
                        self.registry.metrics.connection_refused();
                        drop(stream);
                        continue;
                    }
                    let stat_sn = stat_sn_seed.fetch_add(0x1000, Ordering::Relaxed);
                    let open = self.registry.connection_opened();
                    let serve = conn::serve(stream, peer, self.registry.clone(), shutdown_rx.clone(), stat_sn);
                    conns.spawn(async move {
                        serve.await;
                        drop(open);
                    });
                }
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        acceptors.abort_all();
        if let Some(c) = control {
            // Joins its threads, which wait (bounded) for an operation
            // under way: off the async threads.
            let _ = tokio::task::spawn_blocking(move || drop(c)).await;
        }
        self.live.stop_accepting();
        sanitize_store::stop_all(&self.registry);
        // A gateway hands its LUNs over before its initiators go.
        crate::group::leave_all().await;
        info!(
            "shutting down: asking {} connection(s) to log out",
            conns.len()
        );
        let _ = shutdown_tx.send(true);
        let wait = self.registry.limits.shutdown_grace + Duration::from_secs(15);
        let drained =
            tokio::time::timeout(wait, async { while conns.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            warn!(
                "{} connection(s) did not close in time; dropping them",
                conns.len()
            );
            conns.abort_all();
        }
        let mut result = Ok(());
        for t in self.registry.targets().iter() {
            for (n, lu) in t.luns.iter() {
                if let Err(e) = lu.flush() {
                    warn!("flush of {} LUN {n} failed: {e}", t.cfg.name);
                    result = Err(format!("flush of {} LUN {n} failed: {e}", t.cfg.name));
                }
            }
        }
        info!("stopped");
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Overrides;

    fn config(lun: &str) -> Config {
        Config::load(&Overrides {
            name: Some("iqn.2026-11.test:bind".into()),
            luns: vec![lun.into()],
            listen: vec!["127.0.0.1:0".into()],
            ..Overrides::default()
        })
        .unwrap()
    }

    /// REGISTER AND MOVE names its destination as a login names itself:
    /// a name the login would refuse (`_` is outside RFC 3722's set) is
    /// INVALID FIELD IN PARAMETER LIST; one in upper case is the same
    /// initiator as its lower-case login.
    #[test]
    fn a_lus_move_destination_is_a_name_a_login_could_have() {
        use ironlun_scsi::{DataOutBuffer, ItNexus, NexusId};
        let targets = build_targets(&config("ram:1MiB")).unwrap();
        let map = targets[0].luns.clone();
        const GOOD: u8 = 0;
        let (a, b) = (NexusId(1), NexusId(2));
        let isid = [0x80, 0, 0, 0, 0, 1];
        map.attach_nexus(a, &ItNexus::new("iqn.2026-11.test:a", isid, 1), false);
        let run = |n, cdb: &[u8], data: &[u8]| {
            map.execute(Some(0), n, cdb, &DataOutBuffer::copy_from_slice(data))
        };
        let _ = run(a, &[0; 6], &[]);
        let prout = |sa: u8, ty: u8, len: u8| [0x5f, sa, ty, 0, 0, 0, 0, 0, len, 0];
        let mut p = [0u8; 24];
        p[15] = 1;
        assert_eq!(run(a, &prout(0, 0, 24), &p).status.0, GOOD);
        let mut p = [0u8; 24];
        p[7] = 1;
        assert_eq!(run(a, &prout(1, 1, 24), &p).status.0, GOOD);
        let mv = |name: &str| {
            let mut tid = format!("{name},i,0x800000000009").into_bytes();
            tid.resize(tid.len().div_ceil(4) * 4 + 4, 0);
            let mut p = vec![0u8; 24];
            p[7] = 1;
            p[15] = 2;
            p[17] = 0x02; // UNREG
            p[19] = 1;
            p[20..24].copy_from_slice(&(tid.len() as u32 + 4).to_be_bytes());
            p.extend_from_slice(&[0x45, 0]);
            p.extend_from_slice(&(tid.len() as u16).to_be_bytes());
            p.extend_from_slice(&tid);
            run(a, &prout(7, 0, p.len() as u8), &p)
        };
        let r = mv("iqn.2026-11.test:bad_name");
        assert_eq!((r.sense[2], r.sense[12]), (0x05, 0x26), "{:02x?}", r.sense);
        assert_eq!(mv("IQN.2026-11.TEST:B").status.0, GOOD);
        let id = ItNexus::new("iqn.2026-11.test:b", [0x80, 0, 0, 0, 0, 9], 1);
        map.attach_nexus(b, &id, false);
        let _ = run(b, &[0; 6], &[]);
        let write = [0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0];
        assert_eq!(
            run(b, &write, &[0; 512]).status.0,
            GOOD,
            "b holds the reservation"
        );
    }

    async fn bind_error(cfg: &Config) -> (String, BindError) {
        match Server::bind(cfg).await {
            Ok(_) => panic!("bind should fail"),
            Err(e) => (e.to_string(), e),
        }
    }

    #[tokio::test]
    async fn a_lun_that_does_not_open_names_target_and_lun() {
        let cfg = config("file:/nonexistent/dir/x.img");
        let (m, e) = bind_error(&cfg).await;
        assert!(matches!(e, BindError::OpenBackend { lun: 0, .. }), "{e:?}");
        assert!(m.starts_with("target iqn.2026-11.test:bind LUN 0: "), "{m}");
        assert!(m.contains("/nonexistent/dir/x.img"), "{m}");

        let not_a_dir = tempfile::NamedTempFile::new().unwrap();
        let mut cfg = config("ram:1MiB");
        cfg.state_dir = Some(not_a_dir.path().to_owned());
        let (m, e) = bind_error(&cfg).await;
        assert!(matches!(e, BindError::StateDir { .. }), "{e:?}");
        assert!(m.ends_with("not a directory"), "{m}");
    }

    #[tokio::test]
    async fn an_address_in_use_is_named() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let mut cfg = config("ram:1MiB");
        cfg.listen = vec![addr];
        let (m, e) = bind_error(&cfg).await;
        assert!(
            matches!(e, BindError::Listen { addr: a, .. } if a == addr),
            "{e:?}"
        );
        assert!(m.starts_with(&format!("listen {addr}: ")), "{m}");

        let mut cfg = config("ram:1MiB");
        cfg.stats = Some(addr);
        let (m, e) = bind_error(&cfg).await;
        assert!(matches!(e, BindError::Stats { .. }), "{e:?}");
        assert!(
            m.starts_with(&format!("statistics endpoint {addr}: ")),
            "{m}"
        );
    }

    /// A store with a name of its own (an RBD image's pool and id) gives
    /// the LU the same identity whatever the target's name, portal group
    /// and LUN number; one without gives each target and LUN its own.
    #[test]
    fn an_lu_is_named_after_its_store_when_the_store_has_a_name() {
        struct Named(RamBackend, &'static str);
        impl Backend for Named {
            fn kind(&self) -> &'static str {
                "named"
            }
            fn identity(&self) -> Option<String> {
                Some(self.1.into())
            }
            fn size_bytes(&self) -> u64 {
                self.0.size_bytes()
            }
            fn read(&self, offset: u64, len: usize) -> std::io::Result<bytes::Bytes> {
                self.0.read(offset, len)
            }
            fn write(&self, offset: u64, data: &[u8], durable: bool) -> std::io::Result<()> {
                self.0.write(offset, data, durable)
            }
            fn flush(&self) -> std::io::Result<()> {
                Ok(())
            }
            fn may_block(&self) -> bool {
                false
            }
        }
        let gateway = |name: &str, tag: u16, lun: u16| {
            let mut c = config("ram:1MiB");
            let t = Arc::make_mut(&mut c.targets[0]);
            t.name = name.into();
            t.portal_group_tag = tag;
            t.luns[0].number = lun;
            (t.clone(), t.luns[0].clone())
        };
        let (a, la) = gateway("iqn.2026-11.test:ha", 1, 0);
        let (b, lb) = gateway("iqn.2026-11.test:other", 2, 3);
        let image = |id| Named(RamBackend::new(1 << 20), id);
        let same = lu_id(&a, &la, &image("rbd:rbd/id:1234abcd"));
        assert_eq!(same, lu_id(&b, &lb, &image("rbd:rbd/id:1234abcd")));
        assert_ne!(same, lu_id(&a, &la, &image("rbd:rbd/id:1234abce")));
        let ram = RamBackend::new(1 << 20);
        assert_ne!(lu_id(&a, &la, &ram), lu_id(&b, &lb, &ram));
        // The default is as before: FNV-1a of the target's name and LUN.
        assert_eq!(
            lu_id(&a, &la, &ram),
            fnv1a(&[b"iqn.2026-11.test:ha", &0u16.to_be_bytes()])
        );
    }

    #[test]
    fn a_refused_socket_option_is_named() {
        let e = BindError::SocketOption {
            addr: "127.0.0.1:3260".parse().unwrap(),
            option: "SO_SNDBUF",
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert_eq!(
            e.to_string(),
            "listen 127.0.0.1:3260: SO_SNDBUF: permission denied"
        );
    }
}
