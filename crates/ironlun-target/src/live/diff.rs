//! The difference between two configurations as changes the daemon can
//! make while it runs, and the ones it cannot (each with its reason).
//! Pure: no I/O, no registry; `apply` carries the plan out.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use super::shared::{middle, shared_ends};
use crate::config::{
    BackendSpec, Config, LunConfig, LunSpec, NameKey, SnapshotSchedule, TargetConfig,
};
use ironlun_scsi::AluaMode;

/// One change to the running state.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    AddPortal(SocketAddr),
    RemovePortal(SocketAddr),
    AddTarget(String),
    RemoveTarget(String),
    /// Settings of a target that stays: alias, negotiation offers, queue
    /// depth, CHAP, access list, initiator maps (`what` names them).
    /// Sessions already logged in keep what they negotiated; LUN maps
    /// and the access list apply to them at once.
    Target {
        name: String,
        what: Vec<&'static str>,
    },
    AddLun {
        target: String,
        lun: u16,
    },
    RemoveLun {
        target: String,
        lun: u16,
    },
    /// The medium grows or shrinks to `bytes`.
    Resize {
        target: String,
        lun: u16,
        bytes: u64,
    },
    ReadOnly {
        target: String,
        lun: u16,
        on: bool,
    },
    /// The LUN's snapshot schedule set, changed or removed (`None`): the
    /// scheduler reads it from the running targets at its next tick
    /// (`crate::schedule`); nothing else changes.
    Schedule {
        target: String,
        lun: u16,
        schedule: Option<SnapshotSchedule>,
    },
    /// The target's ALUA groups (states, ports, preference, a gateway
    /// added or gone) or implicit transition time: every LU of the target
    /// takes the configured ones, and its initiators are told
    /// ASYMMETRIC ACCESS STATE CHANGED (SPC-5 §5.16.2.7).
    Alua {
        target: String,
        what: Vec<String>,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::AddPortal(a) => write!(f, "+ portal {a}"),
            Change::RemovePortal(a) => write!(f, "- portal {a}"),
            Change::AddTarget(t) => write!(f, "+ target {t}"),
            Change::RemoveTarget(t) => write!(f, "- target {t}"),
            Change::Target { name, what } => write!(f, "~ target {name}: {}", what.join(", ")),
            Change::AddLun { target, lun } => write!(f, "+ target {target} LUN {lun}"),
            Change::RemoveLun { target, lun } => write!(f, "- target {target} LUN {lun}"),
            Change::Resize { target, lun, bytes } => {
                write!(f, "~ target {target} LUN {lun}: size {bytes} bytes")
            }
            Change::ReadOnly { target, lun, on } => write!(
                f,
                "~ target {target} LUN {lun}: {}",
                if *on { "read-only" } else { "read-write" }
            ),
            Change::Schedule {
                target,
                lun,
                schedule,
            } => match schedule {
                Some(s) => write!(f, "~ target {target} LUN {lun}: snapshot schedule {s}"),
                None => write!(f, "~ target {target} LUN {lun}: no snapshot schedule"),
            },
            Change::Alua { target, what } => {
                write!(f, "~ target {target}: ALUA {}", what.join(", "))
            }
        }
    }
}

/// What applying a configuration would do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub changes: Vec<Change>,
    /// Differences that need a restart (or a remove and add), each with
    /// its reason. A plan with any is applied not at all.
    pub refused: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.refused.is_empty()
    }
}

/// The plan that takes the running `old` to `new`.
pub fn plan(old: &Config, new: &Config) -> Plan {
    let mut p = Plan::default();
    settings(old, new, &mut p.refused);
    for a in &new.listen {
        if !old.listen.contains(a) {
            p.changes.push(Change::AddPortal(*a));
        }
    }
    for a in &old.listen {
        if !new.listen.contains(a) {
            p.changes.push(Change::RemovePortal(*a));
        }
    }
    // Targets shared at both ends are unchanged, and no other target has
    // their names: only the ones between need a look.
    let ends = shared_ends(&old.targets, &new.targets, Arc::ptr_eq);
    let (old_t, new_t) = (middle(&old.targets, ends), middle(&new.targets, ends));
    let (old_by_name, new_by_name) = (by_name(old_t), by_name(new_t));
    for t in new_t {
        match old_by_name.get(&NameKey(&t.name)) {
            None => p.changes.push(Change::AddTarget(t.name.clone())),
            // The same target, or one written the same.
            Some(o) if Arc::ptr_eq(o, t) || o == &t => {}
            Some(o) => target(o, t, &mut p),
        }
    }
    for t in old_t {
        if !new_by_name.contains_key(&NameKey(&t.name)) {
            p.changes.push(Change::RemoveTarget(t.name.clone()));
        }
    }
    p
}

/// Targets by name: a lookup per target, not a search, so a plan over a
/// thousand targets takes linear time.
fn by_name(targets: &[Arc<TargetConfig>]) -> HashMap<NameKey<'_>, &Arc<TargetConfig>> {
    targets.iter().map(|t| (NameKey(&t.name), t)).collect()
}

/// Daemon-wide settings the running daemon keeps until a restart.
fn settings(old: &Config, new: &Config, refused: &mut Vec<String>) {
    let mut differs = |what: &str, same: bool| {
        if !same {
            refused.push(format!("{what}: changing it needs a restart"));
        }
    };
    differs("limits", old.limits == new.limits);
    differs("tcp", old.tcp == new.tcp);
    differs("io_engine", old.io_engine == new.io_engine);
    differs("state_dir", old.state_dir == new.state_dir);
    differs("stats", old.stats == new.stats);
    differs("log", old.log == new.log);
    differs("discovery CHAP", old.discovery_chap == new.discovery_chap);
    differs("admin_socket", old.admin_socket() == new.admin_socket());
    differs("admin_http", old.admin_http == new.admin_http);
    differs("admin_save_dir", old.admin_save_dir == new.admin_save_dir);
}

/// A target in both: its settings and its LUNs.
fn target(old: &TargetConfig, new: &TargetConfig, p: &mut Plan) {
    let name = &new.name;
    if old.portal_group_tag != new.portal_group_tag {
        p.refused.push(format!(
            "target {name}: portal_group_tag: the LUs' relative port identifiers depend on it; remove the target and add it again"
        ));
    }
    alua(old, new, p);
    let what = changed_settings(old, new);
    if !what.is_empty() {
        p.changes.push(Change::Target {
            name: name.clone(),
            what,
        });
    }
    for l in &new.luns {
        match old.luns.iter().find(|o| o.number == l.number) {
            None => p.changes.push(Change::AddLun {
                target: name.clone(),
                lun: l.number,
            }),
            Some(o) => lun(name, o, l, p),
        }
    }
    for o in &old.luns {
        if !new.luns.iter().any(|l| l.number == o.number) {
            p.changes.push(Change::RemoveLun {
                target: name.clone(),
                lun: o.number,
            });
        }
    }
}

/// A target's ALUA: its groups and transition time change live; what
/// INQUIRY and VPD 83h show (the mode, this gateway's group and relative
/// port), which initiators read once when they find the LU, does not.
fn alua(old: &TargetConfig, new: &TargetConfig, p: &mut Plan) {
    let name = &new.name;
    let (o, n) = (&old.alua, &new.alua);
    if old.relative_port != new.relative_port
        || o.mode != n.mode
        || (o.mode != AluaMode::Off && o.local_group != n.local_group)
    {
        p.refused.push(format!(
            "target {name}: alua mode, local_group and relative_port: initiators read them once (INQUIRY, VPD 83h); remove the target and add it again"
        ));
        return;
    }
    let mut what = Vec::new();
    for g in &n.groups {
        match o.groups.iter().find(|x| x.id == g.id) {
            None => what.push(format!("+ group {} {}", g.id, g.state)),
            Some(x) if x.state != g.state => {
                what.push(format!("group {} {} -> {}", g.id, x.state, g.state));
            }
            Some(x) if x != g => what.push(format!("group {} ports or preferred", g.id)),
            Some(_) => {}
        }
    }
    for x in &o.groups {
        if !n.groups.iter().any(|g| g.id == x.id) {
            what.push(format!("- group {}", x.id));
        }
    }
    if o.transition_time != n.transition_time {
        what.push(format!("transition_time {} s", n.transition_time));
    }
    // The same groups in another order report differently.
    if what.is_empty() && o.groups != n.groups {
        what.push("group order".into());
    }
    if !what.is_empty() {
        p.changes.push(Change::Alua {
            target: name.clone(),
            what,
        });
    }
}

fn changed_settings(old: &TargetConfig, new: &TargetConfig) -> Vec<&'static str> {
    let mut what = Vec::new();
    let mut check = |name, same: bool| {
        if !same {
            what.push(name);
        }
    };
    check("alias", old.alias == new.alias);
    check("params", old.offers == new.offers);
    check("queue_depth", old.queue_depth == new.queue_depth);
    check("CHAP", old.chap == new.chap);
    check("allow", old.acl == new.acl);
    check("initiators", old.initiators == new.initiators);
    check("default_map", old.default_map == new.default_map);
    what
}

/// A LUN in both: a resize, a read-only switch and its snapshot
/// schedule go live; any other change of its medium or settings is
/// refused.
fn lun(target: &str, old: &LunConfig, new: &LunConfig, p: &mut Plan) {
    let n = new.number;
    if old.schedule != new.schedule {
        p.changes.push(Change::Schedule {
            target: target.to_owned(),
            lun: n,
            schedule: new.schedule.clone(),
        });
    }
    if medium(&old.spec) != medium(&new.spec) {
        p.refused.push(format!(
            "target {target} LUN {n}: its backend or settings changed: remove the LUN and add it again (the initiators then see a new LU)"
        ));
        return;
    }
    match (size(&old.spec), size(&new.spec)) {
        (_, Some(b)) if size(&old.spec) != Some(b) => p.changes.push(Change::Resize {
            target: target.to_owned(),
            lun: n,
            bytes: b,
        }),
        _ => {}
    }
    if old.spec.read_only != new.spec.read_only {
        if old.spec.read_only && opened_read_only(&old.spec) {
            p.refused.push(format!(
                "target {target} LUN {n}: its file was opened read-only: to make it writable, remove the LUN and add it again"
            ));
        } else {
            p.changes.push(Change::ReadOnly {
                target: target.to_owned(),
                lun: n,
                on: new.spec.read_only,
            });
        }
    }
}

/// The spec without what can change live (size, read-only, grow).
fn medium(s: &LunSpec) -> LunSpec {
    let mut m = s.clone();
    m.read_only = false;
    m.backend = match m.backend {
        BackendSpec::Null { .. } => BackendSpec::Null { size: 0 },
        BackendSpec::Ram { .. } => BackendSpec::Ram { size: 0 },
        // `grow` matters only when the file is opened.
        BackendSpec::File {
            path,
            direct,
            preallocate,
            ..
        } => BackendSpec::File {
            path,
            size: None,
            grow: false,
            direct,
            preallocate,
        },
        b @ (BackendSpec::Block { .. } | BackendSpec::Rbd(_)) => b,
    };
    m
}

/// The size a spec asks for (`None`: the store's own).
fn size(s: &LunSpec) -> Option<u64> {
    match &s.backend {
        BackendSpec::Null { size } | BackendSpec::Ram { size } => Some(*size),
        BackendSpec::File { size, .. } => *size,
        BackendSpec::Block { .. } | BackendSpec::Rbd(_) => None,
    }
}

/// Files and devices of a read-only LUN are opened read-only.
fn opened_read_only(s: &LunSpec) -> bool {
    matches!(
        s.backend,
        BackendSpec::File { .. } | BackendSpec::Block { .. } | BackendSpec::Rbd(_)
    )
}

#[cfg(test)]
mod tests;
