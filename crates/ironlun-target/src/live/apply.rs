//! Carrying a [`Plan`] out on the running daemon: what can fail first
//! (backends, portals, resizes), then the new targets put in place in
//! one step, then the sessions told.

use std::collections::HashMap;
use std::sync::Arc;

use ironlun_scsi::{LogicalUnit, LunMap};
use ironlun_units::format_size;
use tracing::{info, warn};

use super::diff::{Change, Plan};
use super::portals::Portals;
use super::shared::{middle, shared_ends};
use crate::config::{Config, ConfigError, NameKey, TargetConfig};
use crate::registry::{Registry, SessionSignal, Target};
use crate::server::{build_lu, listen, BindError};
use crate::state_file::StateFile;

/// Why a configuration was not applied. Nothing of it was.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The document does not check (names the line and key).
    #[error("{0}")]
    Config(ConfigError),
    /// An API operation's edit does not fit the document.
    #[error("{0}")]
    Edit(super::edit::EditError),
    /// Differences that cannot be applied live, each with its reason.
    #[error("cannot be applied while running: {}", .0.join("; "))]
    Refused(Vec<String>),
    /// A removal would end sessions, and `force` was not given.
    #[error("target {target} has {sessions} session(s): log them out first, or use --force")]
    InUse { target: String, sessions: usize },
    /// A resize would shrink a LUN, and `force` was not given.
    #[error("{}", shrink_refused(target, *lun, *from, *to, *sessions))]
    Shrink {
        target: String,
        lun: u16,
        from: u64,
        to: u64,
        sessions: usize,
    },
    /// A backend did not open, a portal did not bind.
    #[error("{0}")]
    Bind(#[from] BindError),
    /// The store refused a resize.
    #[error("target {target} LUN {lun}: resize: {source}")]
    Resize {
        target: String,
        lun: u16,
        source: std::io::Error,
    },
}

/// Why a shrink without `force` is refused, and how to do it.
fn shrink_refused(target: &str, lun: u16, from: u64, to: u64, sessions: usize) -> String {
    let cut = from.saturating_sub(to);
    let logged_in = match sessions {
        0 => String::new(),
        1 => " (1 session of the target is logged in)".to_owned(),
        n => format!(" ({n} sessions of the target are logged in)"),
    };
    format!(
        "target {target} LUN {lun}: shrinking it from {} to {} discards its last {}{logged_in}: give --force to shrink it (ironlun admin --force, or \"force\": true)",
        format_size(from),
        format_size(to),
        format_size(cut)
    )
}

/// The logical units a change opens, by target (lower case) and LUN.
type NewLus = HashMap<(String, u16), Arc<LogicalUnit>>;

pub(super) fn apply(
    registry: &Arc<Registry>,
    portals: &mut Portals,
    old: &Config,
    new: &Config,
    plan: &Plan,
    force: bool,
) -> Result<(), ApplyError> {
    check_forced(registry, plan, force)?;
    let lus = open_lus(new, plan)?;
    let bound = bind_portals(new, plan)?;
    resize(registry, plan)?;
    for c in &plan.changes {
        if let Change::ReadOnly { target, lun, on } = c {
            if let Some(lu) = running_lu(registry, target, *lun) {
                lu.set_read_only(*on);
            }
        }
    }
    let removed = removed_lus(registry, plan);
    registry.replace_targets(targets(registry, new, &lus));
    alua(registry, new, plan);
    for (configured, l) in bound {
        portals.add(configured, l);
    }
    for c in &plan.changes {
        if let Change::RemovePortal(a) = c {
            portals.remove(*a);
        }
    }
    registry.set_portals(portals.bound());
    tell_sessions(registry, old, new, plan);
    forget(new, removed);
    Ok(())
}

/// What needs `force`: removing a target with sessions, and shrinking a
/// LUN (with sessions or not: the blocks past the new end are gone, the
/// file truncated, and an initiator that has not read the capacity again
/// may still write there; the sessions are told CAPACITY DATA HAS
/// CHANGED, SBC-4 §4.6.3.2, when it is done).
fn check_forced(registry: &Registry, plan: &Plan, force: bool) -> Result<(), ApplyError> {
    if force {
        return Ok(());
    }
    for c in &plan.changes {
        match c {
            Change::RemoveTarget(name) => {
                let sessions = sessions_of(registry, name);
                if sessions > 0 {
                    return Err(ApplyError::InUse {
                        target: name.clone(),
                        sessions,
                    });
                }
            }
            Change::Resize { target, lun, bytes } => {
                let Some(lu) = running_lu(registry, target, *lun) else {
                    continue;
                };
                let from = lu.backend().size_bytes();
                if *bytes < from {
                    return Err(ApplyError::Shrink {
                        target: target.clone(),
                        lun: *lun,
                        from,
                        to: *bytes,
                        sessions: sessions_of(registry, target),
                    });
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The sessions logged in to target `name`.
fn sessions_of(registry: &Registry, name: &str) -> usize {
    registry
        .sessions()
        .iter()
        .filter(|(_, s)| {
            s.target
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case(name))
        })
        .count()
}

/// Opens the backends of added targets and LUNs.
fn open_lus(new: &Config, plan: &Plan) -> Result<NewLus, ApplyError> {
    let mut out = NewLus::new();
    let names = new
        .state_dir
        .as_deref()
        .map(crate::lu_state::LegacyNames::read);
    let state = crate::lu_state::state_dir(new).map(|d| match &names {
        Some(n) => d.with_names(n),
        None => d,
    });
    let max = new.limits.max_transfer_bytes;
    for c in &plan.changes {
        let (t, only) = match c {
            Change::AddTarget(name) => (target_cfg(new, name), None),
            Change::AddLun { target, lun } => (target_cfg(new, target), Some(*lun)),
            _ => continue,
        };
        let Some(t) = t else { continue };
        for l in t.luns.iter().filter(|l| only.is_none_or(|n| n == l.number)) {
            let lu = build_lu(t, l, max, state)?;
            out.insert((t.name.to_ascii_lowercase(), l.number), lu);
        }
    }
    Ok(out)
}

fn target_cfg<'a>(cfg: &'a Config, name: &str) -> Option<&'a TargetConfig> {
    cfg.targets
        .iter()
        .find(|t| t.name.eq_ignore_ascii_case(name))
        .map(|t| &**t)
}

/// Binds added portals (all or none).
fn bind_portals(
    new: &Config,
    plan: &Plan,
) -> Result<Vec<(std::net::SocketAddr, tokio::net::TcpListener)>, ApplyError> {
    let mut out = Vec::new();
    for c in &plan.changes {
        if let Change::AddPortal(a) = c {
            out.push((*a, listen(*a, &new.tcp)?));
        }
    }
    Ok(out)
}

fn running_lu(registry: &Registry, target: &str, lun: u16) -> Option<Arc<LogicalUnit>> {
    registry.find(target)?.luns.get(lun).cloned()
}

/// Resizes; if one fails, those done are undone.
fn resize(registry: &Registry, plan: &Plan) -> Result<(), ApplyError> {
    let mut done: Vec<(Arc<LogicalUnit>, u64)> = Vec::new();
    for c in &plan.changes {
        let Change::Resize { target, lun, bytes } = c else {
            continue;
        };
        let Some(lu) = running_lu(registry, target, *lun) else {
            continue;
        };
        let before = lu.backend().size_bytes();
        if let Err(source) = lu.resize(*bytes) {
            for (lu, size) in done {
                if let Err(e) = lu.resize(size) {
                    warn!("undoing a resize failed: {e}");
                }
            }
            return Err(ApplyError::Resize {
                target: target.clone(),
                lun: *lun,
                source,
            });
        }
        done.push((lu, before));
    }
    Ok(())
}

/// The new targets: a target whose configuration is the same is the
/// running one, unchanged (its LUN maps are not built again); in the
/// others, logical units that stay are the running ones.
fn targets(registry: &Registry, new: &Config, opened: &NewLus) -> Vec<Arc<Target>> {
    let snapshot = registry.targets();
    // The running targets share their configurations with the running
    // configuration: those `new` shares at both ends stay as they are.
    let ends = shared_ends(&snapshot, &new.targets, |r, t| Arc::ptr_eq(&r.cfg, t));
    let (head, tail) = ends;
    let running: HashMap<NameKey<'_>, &Arc<Target>> = middle(&snapshot, ends)
        .iter()
        .map(|t| (NameKey(&t.cfg.name), t))
        .collect();
    let changed =
        middle(&new.targets, ends)
            .iter()
            .map(|t| match running.get(&NameKey(&t.name)).copied() {
                Some(r) if Arc::ptr_eq(&r.cfg, t) || r.cfg == *t => r.clone(),
                r => Arc::new(rebuilt(t, r, opened)),
            });
    let first = snapshot.iter().take(head).cloned();
    let last = snapshot.iter().skip(snapshot.len() - tail).cloned();
    first.chain(changed).chain(last).collect()
}

/// Target `t` over the LUs opened for it and the running ones it keeps.
fn rebuilt(t: &Arc<TargetConfig>, running: Option<&Arc<Target>>, opened: &NewLus) -> Target {
    let luns = t
        .luns
        .iter()
        .filter_map(|l| {
            let key = (t.name.to_ascii_lowercase(), l.number);
            let lu = opened
                .get(&key)
                .cloned()
                .or_else(|| running?.luns.get(l.number).cloned())?;
            Some((l.number, lu))
        })
        .collect();
    Target::new(t.clone(), Arc::new(LunMap::new(luns)))
}

/// Targets whose ALUA groups changed: every LU of theirs takes the
/// configured groups (those an initiator's SET TARGET PORT GROUPS moved
/// too), telling its initiators if anything they see changed.
fn alua(registry: &Registry, new: &Config, plan: &Plan) {
    for c in &plan.changes {
        let Change::Alua { target, .. } = c else {
            continue;
        };
        let (Some(t), Some(cfg)) = (registry.find(target), target_cfg(new, target)) else {
            continue;
        };
        for (n, lu) in t.luns.iter() {
            // The configuration was checked: only a bug refuses here.
            if let Err(e) = lu.set_alua_groups(&cfg.alua.groups, cfg.alua.transition_time) {
                warn!("target {target} LUN {n}: ALUA groups not changed: {e}");
            }
        }
    }
}

/// The logical units a change removes, with their target and number.
fn removed_lus(registry: &Registry, plan: &Plan) -> Vec<(String, u16, Arc<LogicalUnit>)> {
    let mut out = Vec::new();
    for c in &plan.changes {
        match c {
            Change::RemoveLun { target, lun } => {
                if let Some(lu) = running_lu(registry, target, *lun) {
                    out.push((target.clone(), *lun, lu));
                }
            }
            Change::RemoveTarget(name) => {
                if let Some(t) = registry.find(name) {
                    out.extend(t.luns.iter().map(|(n, lu)| (name.clone(), *n, lu.clone())));
                }
            }
            _ => {}
        }
    }
    out
}

/// Sessions of changed targets take their new LUN maps; sessions of
/// removed targets, and initiators the access list no longer admits, are
/// asked to log out.
fn tell_sessions(registry: &Registry, old: &Config, new: &Config, plan: &Plan) {
    for c in &plan.changes {
        match c {
            Change::RemoveTarget(name) => {
                let n = registry.signal_initiators(
                    name,
                    |_, _| true,
                    SessionSignal::Logout("its target was removed"),
                );
                info!("target {name} removed: {n} session(s) asked to log out");
            }
            Change::Target { name, .. }
            | Change::AddLun { target: name, .. }
            | Change::RemoveLun { target: name, .. } => {
                registry.signal_initiators(name, |_, _| true, SessionSignal::Remap);
                let (Some(o), Some(t)) = (target_cfg(old, name), target_cfg(new, name)) else {
                    continue;
                };
                if o.acl != t.acl {
                    let n = registry.signal_initiators(
                        name,
                        |i, peer| t.acl.check(i, peer.ip()).is_err(),
                        SessionSignal::Logout("the access list no longer admits its initiator"),
                    );
                    if n > 0 {
                        info!("target {name}: {n} session(s) no longer admitted asked to log out");
                    }
                }
            }
            _ => {}
        }
    }
}

/// Removed logical units: data flushed, state files removed (a LUN added
/// later under the same number starts without their reservations). Only
/// their own files: the names are one-to-one (`state_name.rs`), and a
/// file kept aside for a person (`lu_state.rs`) stays.
fn forget(new: &Config, removed: Vec<(String, u16, Arc<LogicalUnit>)>) {
    for (target, lun, lu) in removed {
        if let Err(e) = lu.flush() {
            warn!("target {target} LUN {lun}: flush on removal failed: {e}");
        }
        if let Some(dir) = &new.state_dir {
            for kind in ["pr", "sanitize"] {
                let _ = StateFile::for_lu(dir, kind, &target, lun).remove();
            }
        }
    }
}

#[cfg(test)]
mod tests;
