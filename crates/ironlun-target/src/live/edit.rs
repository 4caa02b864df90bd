//! The operator's operations as edits of the configuration document
//! (`toml_edit`, so the file's comments and layout survive a save). An
//! addition or a setting is idempotent: doing it again leaves the
//! document as it is; an edit that contradicts what is there (a LUN
//! number taken by another spec) is a [`EditError::Conflict`]. A removal
//! of what is not there is [`EditError::NotFound`] (HTTP 404): a name or
//! number mistyped is said, not taken for done.

use std::net::SocketAddr;

use toml_edit::{value, Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

use crate::config::{ConfigError, DEFAULT_LISTEN, LUN_NUMBER_LIMIT};

/// Why an operation does not fit the document.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EditError {
    /// What was asked contradicts what exists (HTTP 409).
    #[error("{0}")]
    Conflict(String),
    /// What was asked for does not exist (HTTP 404).
    #[error("{0}")]
    NotFound(String),
    /// The document's shape is not one the editor knows (a `target` that
    /// is not an array of tables, say).
    #[error("{0}")]
    Shape(String),
}

/// A document, with the line of a syntax error.
pub fn parse(text: &str) -> Result<DocumentMut, ConfigError> {
    text.parse::<DocumentMut>()
        .map_err(|e| ConfigError::Syntax {
            line: crate::config::error_line(text, e.span(), &e.to_string()),
            message: e.message().trim().replace('\n', "; "),
        })
}

fn targets_mut(doc: &mut DocumentMut) -> Result<&mut ArrayOfTables, EditError> {
    if doc.get("target").is_none() {
        doc.insert("target", Item::ArrayOfTables(ArrayOfTables::new()));
    }
    doc.get_mut("target")
        .and_then(Item::as_array_of_tables_mut)
        .ok_or_else(|| EditError::Shape("`target` is not an array of tables ([[target]])".into()))
}

/// Whether target table `t` is the one named `name`: names are equal in
/// their normal form (RFC 3722), which the file need not be written in.
pub(super) fn name_is(t: &Table, name: &str) -> bool {
    t.get("name").and_then(Item::as_str).is_some_and(|n| {
        n.eq_ignore_ascii_case(name)
            || crate::config::normalize_iscsi_name(n).is_ok_and(|n| n == name)
    })
}

fn target_mut<'a>(doc: &'a mut DocumentMut, name: &str) -> Result<&'a mut Table, EditError> {
    targets_mut(doc)?
        .iter_mut()
        .find(|t| name_is(t, name))
        .ok_or_else(|| EditError::NotFound(format!("no target {name}")))
}

/// Adds target `name` with `luns` (specs, numbered from 0). If it exists,
/// its LUNs must be these.
pub fn add_target(doc: &mut DocumentMut, name: &str, luns: &[String]) -> Result<(), EditError> {
    if target_mut(doc, name).is_ok() {
        for (i, spec) in luns.iter().enumerate() {
            add_lun(doc, name, Some(i as u16), spec)?;
        }
        return Ok(());
    }
    let mut t = Table::new();
    t.insert("name", value(name));
    let mut lt = ArrayOfTables::new();
    for (i, spec) in luns.iter().enumerate() {
        lt.push(lun_table(i as u16, spec));
    }
    t.insert("lun", Item::ArrayOfTables(lt));
    targets_mut(doc)?.push(t);
    Ok(())
}

fn lun_table(number: u16, spec: &str) -> Table {
    let mut l = Table::new();
    l.insert("number", value(i64::from(number)));
    l.insert("spec", value(spec));
    l
}

/// Removes target `name`; NotFound if there is none.
pub fn remove_target(doc: &mut DocumentMut, name: &str) -> Result<(), EditError> {
    target_mut(doc, name)?;
    targets_mut(doc)?.retain(|t| !name_is(t, name));
    Ok(())
}

/// Sets (`Some(Some)`), removes (`Some(None)`) or leaves (`None`) a key
/// of target `name`.
pub fn set_target_key(
    doc: &mut DocumentMut,
    name: &str,
    key: &str,
    v: Option<Item>,
) -> Result<(), EditError> {
    let t = target_mut(doc, name)?;
    match v {
        Some(item) => {
            t.insert(key, item);
        }
        None => {
            t.remove(key);
        }
    }
    Ok(())
}

/// A list of strings as a TOML array.
pub fn strings(list: &[String]) -> Item {
    let mut a = Array::new();
    for s in list {
        a.push(s.as_str());
    }
    value(a)
}

fn luns_mut<'a>(
    doc: &'a mut DocumentMut,
    target: &str,
) -> Result<&'a mut ArrayOfTables, EditError> {
    let t = target_mut(doc, target)?;
    if t.get("lun").is_none() {
        t.insert("lun", Item::ArrayOfTables(ArrayOfTables::new()));
    }
    t.get_mut("lun")
        .and_then(Item::as_array_of_tables_mut)
        .ok_or_else(|| EditError::Shape(format!("target {target}: `lun` is not [[target.lun]]")))
}

/// The numbers of a target's LUNs: as written, or their place in the file.
fn numbered(luns: &ArrayOfTables) -> Vec<(u16, usize)> {
    luns.iter()
        .enumerate()
        .map(|(i, l)| {
            let n = l
                .get("number")
                .and_then(Item::as_integer)
                .and_then(|n| u16::try_from(n).ok())
                .unwrap_or(i as u16);
            (n, i)
        })
        .collect()
}

/// Adds LUN `number` (the lowest free one with `None`) to `target`;
/// returns its number. The same spec at that number already: nothing.
pub fn add_lun(
    doc: &mut DocumentMut,
    target: &str,
    number: Option<u16>,
    spec: &str,
) -> Result<u16, EditError> {
    let luns = luns_mut(doc, target)?;
    let taken = numbered(luns);
    let spec_of = |i: usize| {
        luns.get(i)
            .and_then(|l| l.get("spec"))
            .and_then(Item::as_str)
    };
    if number.is_none() {
        // Added before: the same LUN, not a second one on the same store.
        if let Some((n, _)) = taken.iter().find(|(_, i)| spec_of(*i) == Some(spec)) {
            return Ok(*n);
        }
    }
    let n = match number {
        Some(n) => n,
        None => (0..LUN_NUMBER_LIMIT)
            .find(|n| !taken.iter().any(|(t, _)| t == n))
            .ok_or_else(|| {
                EditError::Conflict(format!("target {target}: every LUN number is taken"))
            })?,
    };
    if let Some((_, i)) = taken.iter().find(|(t, _)| *t == n) {
        let existing = luns
            .get(*i)
            .and_then(|l| l.get("spec"))
            .and_then(Item::as_str);
        return match existing {
            Some(s) if s == spec => Ok(n),
            _ => Err(EditError::Conflict(format!(
                "target {target} LUN {n} exists with spec {}: remove it first",
                existing.unwrap_or("?")
            ))),
        };
    }
    luns.push(lun_table(n, spec));
    Ok(n)
}

/// Removes LUN `number` of `target` (NotFound if there is none), and the
/// initiator mappings of it. Later LUNs keep their numbers: each is
/// written out.
pub fn remove_lun(doc: &mut DocumentMut, target: &str, number: u16) -> Result<(), EditError> {
    let numbers = numbered(luns_mut(doc, target)?);
    if !numbers.iter().any(|(n, _)| *n == number) {
        return Err(EditError::NotFound(format!(
            "target {target} has no LUN {number}"
        )));
    }
    unmap(target_mut(doc, target)?, number);
    let luns = luns_mut(doc, target)?;
    for (n, i) in &numbers {
        if let Some(l) = luns.get_mut(*i) {
            l.insert("number", value(i64::from(*n)));
        }
    }
    luns.retain(|l| {
        l.get("number")
            .and_then(Item::as_integer)
            .is_none_or(|x| x != i64::from(number))
    });
    Ok(())
}

/// Drops every initiator mapping of the target's LUN `number`.
fn unmap(t: &mut Table, number: u16) {
    let Some(list) = t
        .get_mut("initiator")
        .and_then(Item::as_array_of_tables_mut)
    else {
        return;
    };
    for e in list.iter_mut() {
        if let Some(a) = e.get_mut("luns").and_then(Item::as_array_mut) {
            a.retain(|m| {
                m.as_inline_table()
                    .and_then(|m| m.get("target_lun"))
                    .and_then(Value::as_integer)
                    .is_none_or(|n| n != i64::from(number))
            });
        }
    }
}

/// Rewrites LUN `number`'s spec with `f` (a resize, read-only on or off).
pub fn edit_lun_spec(
    doc: &mut DocumentMut,
    target: &str,
    number: u16,
    f: impl FnOnce(&str) -> Result<String, EditError>,
) -> Result<(), EditError> {
    let luns = luns_mut(doc, target)?;
    let i = numbered(luns)
        .into_iter()
        .find(|(n, _)| *n == number)
        .map(|(_, i)| i)
        .ok_or_else(|| EditError::NotFound(format!("target {target} has no LUN {number}")))?;
    let l = luns
        .get_mut(i)
        .ok_or_else(|| EditError::NotFound(format!("target {target} has no LUN {number}")))?;
    let spec = l
        .get("spec")
        .and_then(Item::as_str)
        .ok_or_else(|| EditError::Shape(format!("target {target} LUN {number} has no spec")))?;
    let new = f(spec)?;
    l.insert("spec", value(new));
    Ok(())
}

/// `spec` with its size set to `size` (as written: `2GiB`).
pub fn spec_with_size(spec: &str, size: &str) -> Result<String, EditError> {
    let mut parts: Vec<String> = spec.split(',').map(str::to_owned).collect();
    let head = parts.first().cloned().unwrap_or_default();
    let (kind, _) = head.split_once(':').unwrap_or((head.as_str(), ""));
    match kind {
        "ram" | "null" => {
            if let Some(h) = parts.first_mut() {
                *h = format!("{kind}:{size}");
            }
        }
        "file" => {
            parts.retain(|p| !p.starts_with("size="));
            parts.push(format!("size={size}"));
        }
        _ => {
            return Err(EditError::Conflict(format!(
                "a {kind} LUN's size is its device's: resize the device, then rescan"
            )))
        }
    }
    Ok(parts.join(","))
}

/// `spec` with `,ro` on or off.
pub fn spec_with_read_only(spec: &str, on: bool) -> String {
    let mut parts: Vec<&str> = spec.split(',').filter(|p| *p != "ro").collect();
    if on {
        parts.push("ro");
    }
    parts.join(",")
}

/// The portals written in the document (the default when none is).
fn listen_mut(doc: &mut DocumentMut) -> Result<&mut Array, EditError> {
    if doc.get("listen").is_none() {
        let mut a = Array::new();
        a.push(DEFAULT_LISTEN);
        doc.insert("listen", value(a));
    }
    doc.get_mut("listen")
        .and_then(Item::as_array_mut)
        .ok_or_else(|| EditError::Shape("`listen` is not an array".into()))
}

fn addr_is(v: &Value, a: SocketAddr) -> bool {
    v.as_str()
        .and_then(|s| s.parse::<SocketAddr>().ok())
        .is_some_and(|x| x == a)
}

pub fn add_portal(doc: &mut DocumentMut, a: SocketAddr) -> Result<(), EditError> {
    let l = listen_mut(doc)?;
    if !l.iter().any(|v| addr_is(v, a)) {
        l.push(a.to_string());
    }
    Ok(())
}

/// Removes portal `a`; NotFound if the daemon does not listen there.
pub fn remove_portal(doc: &mut DocumentMut, a: SocketAddr) -> Result<(), EditError> {
    let l = listen_mut(doc)?;
    if !l.iter().any(|v| addr_is(v, a)) {
        return Err(EditError::NotFound(format!("no portal {a}")));
    }
    l.retain(|v| !addr_is(v, a));
    if l.is_empty() {
        return Err(EditError::Conflict(
            "the last portal cannot be removed".into(),
        ));
    }
    Ok(())
}

/// One mapping of an initiator's LUN map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct Mapping {
    pub lun: u16,
    pub target_lun: u16,
    #[serde(default)]
    pub read_only: bool,
}

/// Sets initiator `name`'s entry on `target`: its LUN map (`None`: the
/// target's LUNs) and CHAP (`USER:SECRET`, or none).
pub fn set_initiator(
    doc: &mut DocumentMut,
    target: &str,
    name: &str,
    luns: Option<&[Mapping]>,
    chap: Option<&str>,
) -> Result<(), EditError> {
    let t = target_mut(doc, target)?;
    if t.get("initiator").is_none() {
        t.insert("initiator", Item::ArrayOfTables(ArrayOfTables::new()));
    }
    let list = t
        .get_mut("initiator")
        .and_then(Item::as_array_of_tables_mut)
        .ok_or_else(|| {
            EditError::Shape(format!(
                "target {target}: `initiator` is not [[target.initiator]]"
            ))
        })?;
    let mut e = Table::new();
    e.insert("name", value(name));
    if let Some(m) = luns {
        let mut a = Array::new();
        for x in m {
            let mut it = InlineTable::new();
            it.insert("lun", i64::from(x.lun).into());
            it.insert("target_lun", i64::from(x.target_lun).into());
            if x.read_only {
                it.insert("read_only", true.into());
            }
            a.push(it);
        }
        e.insert("luns", value(a));
    }
    if let Some(c) = chap {
        e.insert("chap", value(c));
    }
    // An entry that exists is replaced where it stands, with the comment
    // above it; a new one goes last.
    let at = list.iter().position(|old| name_is(old, name));
    match at.and_then(|i| list.get_mut(i)) {
        Some(old) => {
            e.decor_mut().clone_from(old.decor());
            *old = e;
        }
        None => list.push(e),
    }
    Ok(())
}

/// Removes initiator `name`'s entry on `target`; NotFound if it has none.
pub fn remove_initiator(doc: &mut DocumentMut, target: &str, name: &str) -> Result<(), EditError> {
    let t = target_mut(doc, target)?;
    let list = t
        .get_mut("initiator")
        .and_then(Item::as_array_of_tables_mut)
        .filter(|list| list.iter().any(|e| name_is(e, name)))
        .ok_or_else(|| {
            EditError::NotFound(format!("target {target} has no initiator entry {name}"))
        })?;
    list.retain(|e| !name_is(e, name));
    Ok(())
}

/// Sets the state of group `group` in target `target`'s `[target.alua]`
/// groups, written as an array of inline tables (`groups = [{ id = 1,
/// … }]`) or of tables (`[[target.alua.groups]]`). NotFound if the
/// target has no such group.
pub fn set_alua_state(
    doc: &mut DocumentMut,
    target: &str,
    group: u16,
    state: &str,
) -> Result<(), EditError> {
    let not_found = || EditError::NotFound(format!("target {target} has no ALUA group {group}"));
    let is = |id: Option<i64>| id == Some(i64::from(group));
    let groups = target_mut(doc, target)?
        .get_mut("alua")
        .and_then(Item::as_table_like_mut)
        .and_then(|a| a.get_mut("groups"))
        .ok_or_else(not_found)?;
    match groups {
        Item::ArrayOfTables(a) => {
            let g = a
                .iter_mut()
                .find(|g| is(g.get("id").and_then(Item::as_integer)))
                .ok_or_else(not_found)?;
            g.insert("state", value(state));
        }
        Item::Value(Value::Array(a)) => {
            let g = a
                .iter_mut()
                .filter_map(Value::as_inline_table_mut)
                .find(|g| is(g.get("id").and_then(Value::as_integer)))
                .ok_or_else(not_found)?;
            match g.get_mut("state") {
                // The new value in the old one's place and spacing.
                Some(v) => {
                    let decor = v.decor().clone();
                    *v = Value::from(state);
                    *v.decor_mut() = decor;
                }
                None => {
                    g.insert("state", Value::from(state));
                }
            }
        }
        _ => {
            return Err(EditError::Shape(format!(
                "target {target}: `alua.groups` is not an array of tables"
            )))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
