//! The daemon's metrics for Prometheus: `GET /metrics` on the statistics
//! address, in the OpenMetrics text format (prometheus-client's encoder;
//! Prometheus scrapes it natively). The names are listed in
//! docs/admin.md ("Metrics").
//!
//! Two kinds of metric, so that nothing is counted twice and nothing
//! outlives what it describes:
//!
//! - events only the daemon sees (logins by result, task management,
//!   aborted commands, digest errors, ping timeouts, reinstatements) are
//!   counters here, kept in [`Metrics`], which the registry holds and
//!   every connection reports to ([`Observer`]);
//! - everything per target and LUN, and the sessions and connections open
//!   now, is read at scrape time from whatever targets exist then (the
//!   LUs' own counters and latency histograms, ironlun-scsi's `stats`;
//!   `luns`): a LUN that is gone is simply not in the next scrape;
//! - the process itself (CPU, memory, file descriptors, start time) under
//!   the standard `process_*` names, and `ironlun_build_info`, are read at
//!   scrape time too (`process`).
//!
//! Per SCSI command the LUs only count (a few relaxed atomic adds, and a
//! latency histogram's when there is a statistics address); everything
//! else is read when a scrape comes.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ironlun_proto::login::LoginStatus;
use ironlun_proto::target::{CloseReason, DigestKind, Observer};
use ironlun_wire::{TmfFunction, TmfResponse};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry as Exposition;

use crate::busy_poll::BusyPollCounters;
use crate::registry::Registry;

mod luns;
mod process;

/// Every metric's name starts with this.
const PREFIX: &str = "ironlun";

/// The Content-Type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How a login ended, the `result` of `ironlun_logins_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginOutcome {
    /// A session was created or a connection joined one.
    Success,
    /// CHAP failed (status 0x0201, RFC 7143 §11.13.5).
    AuthFailure,
    /// The target's access list refused the initiator (status 0x0202).
    AclRefused,
    /// The session limit (status 0x0302) or the connection limit (the
    /// connection is closed before its login).
    LimitReached,
    /// Any other refusal, a login that timed out, or one whose PDUs could
    /// not be read.
    Failure,
}

impl LoginOutcome {
    const ALL: [LoginOutcome; 5] = [
        LoginOutcome::Success,
        LoginOutcome::AuthFailure,
        LoginOutcome::AclRefused,
        LoginOutcome::LimitReached,
        LoginOutcome::Failure,
    ];

    /// A login the target answered with `status`.
    pub fn of(status: LoginStatus) -> LoginOutcome {
        match status {
            LoginStatus::SUCCESS => LoginOutcome::Success,
            LoginStatus::AUTHENTICATION_FAILURE => LoginOutcome::AuthFailure,
            LoginStatus::AUTHORIZATION_FAILURE => LoginOutcome::AclRefused,
            LoginStatus::OUT_OF_RESOURCES | LoginStatus::TOO_MANY_CONNECTIONS => {
                LoginOutcome::LimitReached
            }
            _ => LoginOutcome::Failure,
        }
    }

    fn label(self) -> &'static str {
        match self {
            LoginOutcome::Success => "success",
            LoginOutcome::AuthFailure => "auth_failure",
            LoginOutcome::AclRefused => "acl_refused",
            LoginOutcome::LimitReached => "limit_reached",
            LoginOutcome::Failure => "failure",
        }
    }
}

type Labels1 = [(&'static str, &'static str); 1];

/// How a reload of the configuration file ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReloadResult {
    /// Changes were applied.
    Applied,
    /// The file describes what runs.
    Unchanged,
    /// The file was not read, did not check, or a change was refused or
    /// failed: nothing changed.
    Failed,
}

impl ReloadResult {
    const ALL: [ReloadResult; 3] = [
        ReloadResult::Applied,
        ReloadResult::Unchanged,
        ReloadResult::Failed,
    ];

    fn label(self) -> &'static str {
        match self {
            ReloadResult::Applied => "applied",
            ReloadResult::Unchanged => "unchanged",
            ReloadResult::Failed => "failed",
        }
    }
}
type TmfLabels = [(&'static str, String); 2];

/// The daemon's event counters, and their exposition.
pub struct Metrics {
    logins: Family<Labels1, Counter>,
    task_management: Family<TmfLabels, Counter>,
    aborted: Counter,
    digest_errors: Family<Labels1, Counter>,
    nop_timeouts: Counter,
    reinstatements: Counter,
    /// Live changes made through the management API and not in the
    /// configuration file (SIGHUP or a restart would undo them).
    unsaved_changes: Gauge,
    /// Reloads of the configuration file (SIGHUP, `config reload`) by
    /// result, and when the last one ended.
    reloads: Family<Labels1, Counter>,
    last_reload: Gauge,
    /// Latency mode's spins (`tcp.busy_poll`): by outcome, and their time.
    pub busy_poll: BusyPollCounters,
    /// Connections time their commands (only when someone can scrape).
    latency: AtomicBool,
    /// The counters above, registered under their names.
    exposition: Exposition,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut m = Metrics {
            logins: Family::default(),
            task_management: Family::default(),
            aborted: Counter::default(),
            digest_errors: Family::default(),
            nop_timeouts: Counter::default(),
            reinstatements: Counter::default(),
            unsaved_changes: Gauge::default(),
            reloads: Family::default(),
            last_reload: Gauge::default(),
            busy_poll: BusyPollCounters::default(),
            latency: AtomicBool::new(false),
            exposition: Exposition::with_prefix(PREFIX),
        };
        // Every result and digest from the start, at 0: a rate over a
        // series that appears only at its first event misses that event.
        for o in LoginOutcome::ALL {
            drop(m.logins.get_or_create(&[("result", o.label())]));
        }
        for d in ["header", "data"] {
            drop(m.digest_errors.get_or_create(&[("digest", d)]));
        }
        for r in ReloadResult::ALL {
            drop(m.reloads.get_or_create(&[("result", r.label())]));
        }
        m.register();
        m
    }

    fn register(&mut self) {
        let e = &mut self.exposition;
        e.register(
            "logins",
            "Logins by result: success, auth_failure (CHAP), acl_refused (access list), limit_reached (sessions or connections), failure (anything else)",
            self.logins.clone(),
        );
        e.register(
            "task_management",
            "Task management responses by function and response (RFC 7143 11.5, 11.6)",
            self.task_management.clone(),
        );
        e.register(
            "aborted_commands",
            "Commands aborted by task management (this session's or another's) or by a logout",
            self.aborted.clone(),
        );
        e.register(
            "digest_errors",
            "PDUs that failed their header or data digest (the connection closes)",
            self.digest_errors.clone(),
        );
        e.register(
            "nop_timeouts",
            "Connections closed because a NOP-In ping went unanswered",
            self.nop_timeouts.clone(),
        );
        e.register(
            "session_reinstatements",
            "Sessions that replaced an older session of the same initiator and ISID (RFC 7143 6.3.5)",
            self.reinstatements.clone(),
        );
        e.register(
            "busy_poll_found_work",
            "Busy-poll spins (tcp.busy_poll, latency mode) that found a PDU or a completion before their budget ran out",
            self.busy_poll.found.clone(),
        );
        e.register(
            "busy_poll_timed_out",
            "Busy-poll spins that used their whole budget and then slept",
            self.busy_poll.timed_out.clone(),
        );
        e.register(
            "busy_poll_spin_seconds",
            "Time connections spent busy-polling (the CPU latency mode costs); 0 with busy_poll off",
            self.busy_poll.seconds.clone(),
        );
        e.register(
            "config_unsaved_changes",
            "Live changes made through the management API since the configuration file was last read or saved: a SIGHUP or a restart would undo them (0: the running configuration is the file's)",
            self.unsaved_changes.clone(),
        );
        e.register(
            "config_reloads",
            "Reloads of the configuration file (SIGHUP, ironlun admin config reload) by result: applied, unchanged, failed (nothing changed)",
            self.reloads.clone(),
        );
        e.register(
            "config_last_reload_timestamp_seconds",
            "When the last reload of the configuration file ended (Unix time); 0 before the first",
            self.last_reload.clone(),
        );
    }

    /// The number of live changes not in the configuration file now.
    pub fn unsaved_changes(&self, n: usize) {
        self.unsaved_changes
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// A reload of the configuration file ended with `result`.
    pub fn reloaded(&self, result: ReloadResult) {
        self.reloads
            .get_or_create(&[("result", result.label())])
            .inc();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.last_reload.set(i64::try_from(now).unwrap_or(i64::MAX));
    }

    pub fn login(&self, outcome: LoginOutcome) {
        self.logins
            .get_or_create(&[("result", outcome.label())])
            .inc();
    }

    /// The target refused a login with `status`.
    pub fn login_refused(&self, status: LoginStatus) {
        self.login(LoginOutcome::of(status));
    }

    /// A login created a session (which replaced an older one, if
    /// `reinstated`).
    pub fn logged_in(&self, reinstated: bool) {
        self.login(LoginOutcome::Success);
        if reinstated {
            self.reinstatements.inc();
        }
    }

    /// Connections opened from now on time their commands (the daemon
    /// has a statistics address; without one nobody reads the
    /// histograms, and their cost per command is not paid).
    pub fn measure_latency(&self) {
        self.latency.store(true, Ordering::Relaxed);
    }

    pub fn latency_measured(&self) -> bool {
        self.latency.load(Ordering::Relaxed)
    }

    /// A connection was closed on accept: the connection limit.
    pub fn connection_refused(&self) {
        self.login(LoginOutcome::LimitReached);
    }
}

impl Observer for Metrics {
    fn task_management(&self, function: TmfFunction, response: TmfResponse) {
        let labels = [
            ("function", label_of(function.name())),
            ("response", label_of(response.name())),
        ];
        self.task_management.get_or_create(&labels).inc();
    }

    fn tasks_aborted(&self, n: usize) {
        self.aborted.inc_by(n as u64);
    }

    fn digest_error(&self, kind: DigestKind) {
        let digest = match kind {
            DigestKind::Header => "header",
            DigestKind::Data => "data",
        };
        self.digest_errors
            .get_or_create(&[("digest", digest)])
            .inc();
    }

    fn closing(&self, reason: &CloseReason) {
        if *reason == CloseReason::NopTimeout {
            self.nop_timeouts.inc();
        }
    }
}

/// A code's RFC name as a label value ("ABORT TASK" → `abort_task`); a
/// code without a name is `other`, so a peer cannot make new series.
fn label_of(name: Option<&str>) -> String {
    let Some(name) = name else {
        return "other".into();
    };
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The whole exposition now: the event counters, then what is read from
/// the targets, LUNs, sessions and connections that exist at this moment,
/// and the process's own `process_*` families (without the prefix).
pub fn render(registry: &Arc<Registry>) -> Result<String, fmt::Error> {
    let mut out = String::with_capacity(16 << 10);
    encode_registry(&mut out, &registry.metrics.exposition)?;
    let mut now = Exposition::with_prefix(PREFIX);
    now.register_collector(Box::new(Now(registry.clone())));
    encode_registry(&mut out, &now)?;
    let mut own = Exposition::default();
    own.register_collector(Box::new(process::Process));
    encode_registry(&mut out, &own)?;
    encode_eof(&mut out)?;
    Ok(out)
}

/// Reads the registry at scrape time.
struct Now(Arc<Registry>);

impl fmt::Debug for Now {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Now")
    }
}

impl Collector for Now {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), fmt::Error> {
        let r = &self.0;
        process::encode_build_info(&mut enc)?;
        let (normal, discovery) = r.session_counts();
        let mut m = enc.encode_descriptor(
            "sessions",
            "Sessions open now, by type.",
            None,
            MetricType::Gauge,
        )?;
        for (kind, n) in [("normal", normal), ("discovery", discovery)] {
            m.encode_family(&[("type", kind)])?
                .encode_gauge(&(n as u64))?;
        }
        encode_initiator_sessions(&mut enc, r)?;
        enc.encode_descriptor(
            "connections",
            "TCP connections open now, logged in or not.",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&(r.open_connections() as u64))?;
        luns::encode_luns(&mut enc, &luns::luns_now(r))
    }
}

/// Normal sessions open now per (target, initiator name). As many series
/// as there are such pairs with a session, so the session limit
/// (`limits.max_sessions`) bounds them; a pair whose sessions have all
/// ended is not in the next scrape, and without sessions the family is
/// left out (a family without samples trips strict parsers).
fn encode_initiator_sessions(enc: &mut DescriptorEncoder, r: &Registry) -> Result<(), fmt::Error> {
    let mut pairs: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (_, s) in r.sessions() {
        if let Some(target) = &s.target {
            *pairs
                .entry((target.clone(), s.initiator.clone()))
                .or_default() += 1;
        }
    }
    if pairs.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(
        "initiator_sessions",
        "Normal sessions open now, by target and initiator name.",
        None,
        MetricType::Gauge,
    )?;
    for ((target, initiator), n) in &pairs {
        let labels = [
            ("target", target.as_str()),
            ("initiator", initiator.as_str()),
        ];
        m.encode_family(&labels)?.encode_gauge(n)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
