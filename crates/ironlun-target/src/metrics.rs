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
//!   LUs' own counters and latency histograms, ironlun-scsi's `stats`):
//!   a LUN that is gone is simply not in the next scrape.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ironlun_proto::login::LoginStatus;
use ironlun_proto::target::{CloseReason, DigestKind, Observer};
use ironlun_scsi::{IoKind, IoSnapshot, LatencySnapshot, LogicalUnit};
use ironlun_wire::{TmfFunction, TmfResponse};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry as Exposition;

use crate::registry::Registry;

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
/// the targets, LUNs, sessions and connections that exist at this moment.
pub fn render(registry: &Arc<Registry>) -> Result<String, fmt::Error> {
    let mut out = String::with_capacity(16 << 10);
    encode_registry(&mut out, &registry.metrics.exposition)?;
    let mut now = Exposition::with_prefix(PREFIX);
    now.register_collector(Box::new(Now(registry.clone())));
    encode_registry(&mut out, &now)?;
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
        enc.encode_descriptor(
            "connections",
            "TCP connections open now, logged in or not.",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&(r.open_connections() as u64))?;
        encode_luns(&mut enc, &luns_now(r))
    }
}

/// One LUN as a scrape sees it.
struct LunNow {
    target: String,
    lun: String,
    io: IoSnapshot,
    /// By [`IoKind::ALL`].
    latency: [LatencySnapshot; 3],
    /// Held offline by its state files (`lu_state.rs`).
    offline: bool,
}

impl LunNow {
    fn of(target: &str, lun: u16, lu: &LogicalUnit) -> LunNow {
        LunNow {
            target: target.to_owned(),
            lun: lun.to_string(),
            io: lu.io_stats(),
            latency: IoKind::ALL.map(|k| lu.latency(k)),
            offline: lu.offline_reason().is_some(),
        }
    }

    fn labels<'a>(&'a self, op: Option<&'static str>) -> Vec<(&'static str, &'a str)> {
        let mut l = vec![("target", self.target.as_str()), ("lun", self.lun.as_str())];
        l.extend(op.map(|op| ("op", op)));
        l
    }
}

/// Every LUN of every target that exists now.
fn luns_now(r: &Registry) -> Vec<LunNow> {
    let mut out = Vec::new();
    for t in r.targets().iter() {
        for (n, lu) in t.luns.iter() {
            out.push(LunNow::of(&t.cfg.name, *n, lu));
        }
    }
    out
}

fn op_label(k: IoKind) -> &'static str {
    match k {
        IoKind::Read => "read",
        IoKind::Write => "write",
        IoKind::Other => "other",
    }
}

/// One family of per-LUN counters: its descriptor, then a sample per LUN
/// (and per op, where `values` gives several).
fn lun_counters(
    enc: &mut DescriptorEncoder,
    (name, help): (&str, &str),
    luns: &[LunNow],
    values: impl Fn(&IoSnapshot) -> Vec<(Option<&'static str>, u64)>,
) -> Result<(), fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for l in luns {
        for (op, v) in values(&l.io) {
            m.encode_family(&l.labels(op))?
                .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
        }
    }
    Ok(())
}

fn encode_luns(enc: &mut DescriptorEncoder, luns: &[LunNow]) -> Result<(), fmt::Error> {
    lun_counters(
        enc,
        (
            "lun_commands",
            "SCSI commands per LUN by op: read, write (including WRITE SAME, UNMAP, ...) or other.",
        ),
        luns,
        |io| {
            vec![
                (Some("read"), io.read_commands),
                (Some("write"), io.write_commands),
                (Some("other"), io.other_commands),
            ]
        },
    )?;
    lun_counters(
        enc,
        (
            "lun_bytes",
            "Data moved per LUN: returned by reads, received with writes.",
        ),
        luns,
        |io| {
            vec![
                (Some("read"), io.read_bytes),
                (Some("write"), io.write_bytes),
            ]
        },
    )?;
    lun_counters(
        enc,
        (
            "lun_failed_commands",
            "SCSI commands per LUN that ended with a status other than GOOD.",
        ),
        luns,
        |io| vec![(None, io.failed_commands)],
    )?;
    let mut m = enc.encode_descriptor(
        "lun_offline",
        "1 while the LUN is offline because its state files do not parse (ironlun admin state says why), else 0.",
        None,
        MetricType::Gauge,
    )?;
    for l in luns {
        m.encode_family(&l.labels(None))?
            .encode_gauge(&u64::from(l.offline))?;
    }
    let mut m = enc.encode_descriptor(
        "lun_command_duration_seconds",
        "Time from a SCSI command's arrival to its status being sent, per LUN and op.",
        None,
        MetricType::Histogram,
    )?;
    for l in luns {
        for (k, h) in IoKind::ALL.iter().zip(&l.latency) {
            let labels = l.labels(Some(op_label(*k)));
            encode_latency(&mut m.encode_family(&labels)?, h)?;
        }
    }
    Ok(())
}

/// One latency histogram in seconds.
fn encode_latency(m: &mut MetricEncoder, h: &LatencySnapshot) -> Result<(), fmt::Error> {
    let bounds = ironlun_scsi::stats::LATENCY_BOUNDS_NS
        .iter()
        .map(|ns| *ns as f64 / 1e9)
        .chain([f64::INFINITY]);
    let buckets: Vec<(f64, u64)> = bounds.zip(h.buckets).collect();
    m.encode_histogram::<NoLabelSet>(h.sum_ns as f64 / 1e9, h.count(), &buckets, None)
}

#[cfg(test)]
mod tests;
