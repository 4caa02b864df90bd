//! An operation on one target, checked alone: the document's other
//! targets are not copied, written out, parsed or checked again, so an
//! operation costs about the same at ten targets or a thousand (docs/
//! admin.md, "Control-plane speed").
//!
//! The result must be exactly what editing and checking the whole
//! document gives (the tests compare the two). Whatever this cannot
//! settle alone (any error, a document of a shape it does not expect) it
//! leaves to the whole check, which then gives the answer and the error
//! message; so this path only ever succeeds.

use std::sync::Arc;

use toml_edit::{ArrayOfTables, DocumentMut, Item, Table};

use super::edit::{name_is, EditError};
use super::State;
use crate::config::{check_stores_unshared, Config, TargetConfig};

/// A checked edit of one target: the configuration it gives, and what to
/// put in the document if it is applied.
pub(super) struct Staged {
    pub config: Config,
    pub splice: Splice,
}

/// One target's table to put in the document.
pub(super) struct Splice {
    /// The target's place in the document's `[[target]]` array (`None`:
    /// it was not there).
    index: Option<usize>,
    /// Its table after the edit (`None`: removed or still absent).
    table: Option<Table>,
}

/// `f` done to target `name` of the running document, checked alone;
/// `None` when the whole document must be edited and checked instead.
pub(super) fn stage(
    st: &State,
    name: &str,
    f: &dyn Fn(&mut DocumentMut) -> Result<(), EditError>,
) -> Option<Staged> {
    let (mut mini, index) = excerpt(&st.doc, name, &st.config.targets)?;
    f(&mut mini).ok()?;
    let table = match mini.get("target").and_then(Item::as_array_of_tables) {
        None => None,
        Some(a) if a.len() > 1 => return None,
        Some(a) => a.get(0).cloned(),
    };
    let checked = match &table {
        Some(_) => Some(only_target(st.check(&mini).ok()?)?),
        None => None,
    };
    let config = spliced(&st.config, index, checked)?;
    Some(Staged {
        config,
        splice: Splice { index, table },
    })
}

impl Splice {
    /// Puts the edited target in the running document.
    pub(super) fn splice(self, doc: &mut DocumentMut) {
        if doc.get("target").is_none() {
            doc.insert("target", Item::ArrayOfTables(ArrayOfTables::new()));
        }
        let Some(all) = doc.get_mut("target").and_then(Item::as_array_of_tables_mut) else {
            return;
        };
        match (self.index, self.table) {
            (Some(i), Some(t)) => {
                if let Some(slot) = all.get_mut(i) {
                    *slot = t;
                }
            }
            (Some(i), None) => all.remove(i),
            (None, Some(t)) => all.push(t),
            (None, None) => {}
        }
    }
}

/// The document's settings with only target `name`'s table (if it has
/// one) under `target`, and that table's place. The running
/// configuration's targets are the document's tables in order, so the
/// place is found among their names (a table without a name, which the
/// default name stands for, leaves the edit to the whole document).
/// `None` too when `target` is not an array of `running.len()` tables.
fn excerpt(
    doc: &DocumentMut,
    name: &str,
    running: &[Arc<TargetConfig>],
) -> Option<(DocumentMut, Option<usize>)> {
    let all = match doc.get("target") {
        Some(t) => t.as_array_of_tables()?,
        None if running.is_empty() => &ArrayOfTables::new(),
        None => return None,
    };
    if all.len() != running.len() {
        return None;
    }
    let index = running
        .iter()
        .position(|t| t.name.eq_ignore_ascii_case(name));
    let mut only = ArrayOfTables::new();
    if let Some(i) = index {
        let t = all.get(i).filter(|t| name_is(t, name))?;
        only.push(t.clone());
    }
    let mut mini = DocumentMut::new();
    for (key, item) in doc.iter() {
        if key == "target" {
            mini.insert("target", Item::ArrayOfTables(only.clone()));
        } else {
            mini.insert(key, item.clone());
        }
    }
    Some((mini, index))
}

fn only_target(mut cfg: Config) -> Option<Arc<TargetConfig>> {
    if cfg.targets.len() != 1 {
        return None;
    }
    cfg.targets.pop()
}

/// The running configuration with the edited target in its place; `None`
/// if the result breaks a rule across targets (a name twice, a store
/// served twice, no target left).
fn spliced(
    old: &Config,
    index: Option<usize>,
    target: Option<Arc<TargetConfig>>,
) -> Option<Config> {
    let mut new = old.clone();
    let place = match (index, target) {
        (Some(i), Some(t)) => {
            *new.targets.get_mut(i)? = t;
            Some(i)
        }
        (Some(i), None) => {
            if i >= new.targets.len() {
                return None;
            }
            new.targets.remove(i);
            None
        }
        (None, Some(t)) => {
            new.targets.push(t);
            Some(new.targets.len() - 1)
        }
        (None, None) => None,
    };
    if let Some(p) = place {
        let name = &new.targets.get(p)?.name;
        let twice = new
            .targets
            .iter()
            .enumerate()
            .any(|(j, o)| j != p && o.name.eq_ignore_ascii_case(name));
        if twice {
            return None;
        }
    }
    if new.targets.is_empty() || check_stores_unshared(&new.targets).is_err() {
        return None;
    }
    Some(new)
}

#[cfg(test)]
mod tests;
