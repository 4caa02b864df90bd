//! Secrets hidden from `config show` ([`redacted`]) and the way back: a
//! secret it printed as `USER:<hidden>` and applied again (`ironlun admin
//! apply`) means "the secret the running configuration has there", so
//! the shown configuration, edited, can be applied. A hidden secret with
//! nothing to stand for (a new target, another user) stays as it is, and
//! the configuration check refuses it with its own message.
//!
//! "There" is the same key in the same table, tables in arrays (targets,
//! initiator entries) matched by their `name`, in its normal form
//! (RFC 3722), else by position.

use toml_edit::{DocumentMut, Item, TableLike, Value};

use crate::config::{normalize_iscsi_name, HIDDEN_SECRET, SECRET_KEYS};

/// Replaces every `USER:<hidden>` secret of `new` with `running`'s
/// secret at the same place, when that secret has the same user.
/// Returns how many were restored.
pub(super) fn restore(new: &mut DocumentMut, running: &DocumentMut) -> usize {
    in_table(new.as_table_mut(), Some(running.as_table()))
}

fn in_table(new: &mut dyn TableLike, old: Option<&dyn TableLike>) -> usize {
    let mut n = 0;
    for (k, item) in new.iter_mut() {
        let old_item = old.and_then(|o| o.get(k.get()));
        if SECRET_KEYS.contains(&k.get()) {
            n += usize::from(restore_secret(item, old_item));
        } else {
            n += in_item(item, old_item);
        }
    }
    n
}

fn in_item(new: &mut Item, old: Option<&Item>) -> usize {
    match new {
        Item::Table(t) => in_table(t, old.and_then(Item::as_table_like)),
        Item::ArrayOfTables(a) => {
            let olds: Vec<&dyn TableLike> = old
                .and_then(Item::as_array_of_tables)
                .map(|o| o.iter().map(|t| t as &dyn TableLike).collect())
                .unwrap_or_default();
            let mut n = 0;
            for (i, t) in a.iter_mut().enumerate() {
                let old = counterpart(t, i, &olds);
                n += in_table(t, old);
            }
            n
        }
        Item::Value(v) => in_value(v, old.and_then(Item::as_value)),
        Item::None => 0,
    }
}

fn in_value(new: &mut Value, old: Option<&Value>) -> usize {
    match new {
        Value::InlineTable(t) => in_table(t, old.and_then(Value::as_inline_table).map(|t| t as _)),
        Value::Array(a) => {
            let olds: Vec<&dyn TableLike> = old
                .and_then(Value::as_array)
                .map(|o| {
                    o.iter()
                        .filter_map(Value::as_inline_table)
                        .map(|t| t as &dyn TableLike)
                        .collect()
                })
                .unwrap_or_default();
            let mut n = 0;
            for (i, v) in a.iter_mut().enumerate() {
                if let Value::InlineTable(t) = v {
                    let old = counterpart(t, i, &olds);
                    n += in_table(t, old);
                }
            }
            n
        }
        _ => 0,
    }
}

/// The table of `olds` that `t` (the `i`th of its array) stands for: the
/// one with the same name, or for tables without names the `i`th.
fn counterpart<'a>(
    t: &dyn TableLike,
    i: usize,
    olds: &[&'a dyn TableLike],
) -> Option<&'a dyn TableLike> {
    match name_of(t) {
        Some(name) => olds
            .iter()
            .find(|o| name_of(**o).as_deref() == Some(name.as_str()))
            .copied(),
        None => olds.get(i).copied(),
    }
}

fn name_of(t: &dyn TableLike) -> Option<String> {
    let raw = t.get("name")?.as_str()?;
    Some(normalize_iscsi_name(raw).unwrap_or_else(|_| raw.to_owned()))
}

/// Puts `old`'s secret in place of a hidden one of the same user, keeping
/// the new value's comments; whether it did.
fn restore_secret(item: &mut Item, old: Option<&Item>) -> bool {
    let Some(user) = item.as_str().and_then(hidden_user) else {
        return false;
    };
    let Some(secret) = old.and_then(Item::as_str) else {
        return false;
    };
    let same_user = secret
        .split_once(':')
        .is_some_and(|(u, s)| u == user && s != HIDDEN_SECRET);
    if !same_user {
        return false;
    }
    let mut v = Value::from(secret);
    if let Some(shown) = item.as_value() {
        *v.decor_mut() = shown.decor().clone();
    }
    *item = Item::Value(v);
    true
}

/// The user of a `USER:<hidden>` value.
fn hidden_user(s: &str) -> Option<&str> {
    s.split_once(':')
        .filter(|(_, secret)| *secret == HIDDEN_SECRET)
        .map(|(u, _)| u)
}

/// The document with every secret replaced by `USER:<hidden>` (the
/// user kept, [`HIDDEN_SECRET`] for the rest), wherever it is: a key of
/// [`SECRET_KEYS`] at any depth, in tables, arrays of tables, inline
/// tables and arrays of inline tables. `_env` keys name a variable and
/// are shown as they are. Comments are shown as written.
pub fn redacted(text: &str) -> String {
    let Ok(mut doc) = text.parse::<DocumentMut>() else {
        return String::new();
    };
    hide_in_table(doc.as_table_mut());
    doc.to_string()
}

fn hide_in_table(t: &mut dyn TableLike) {
    for (k, item) in t.iter_mut() {
        if SECRET_KEYS.contains(&k.get()) {
            conceal(item);
        } else {
            hide_in_item(item);
        }
    }
}

fn hide_in_item(item: &mut Item) {
    match item {
        Item::Table(t) => hide_in_table(t),
        Item::ArrayOfTables(a) => a.iter_mut().for_each(|t| hide_in_table(t)),
        Item::Value(v) => hide_in_value(v),
        Item::None => {}
    }
}

fn hide_in_value(v: &mut Value) {
    match v {
        Value::InlineTable(t) => hide_in_table(t),
        Value::Array(a) => a.iter_mut().for_each(hide_in_value),
        _ => {}
    }
}

/// Replaces a secret's value, whatever its form, keeping the user name
/// of a `USER:SECRET` string and the comments around the value.
fn conceal(item: &mut Item) {
    let user = item
        .as_str()
        .and_then(|s| s.split_once(':'))
        .map_or("", |(u, _)| u);
    let mut hidden = Value::from(format!("{user}:{HIDDEN_SECRET}"));
    if let Some(old) = item.as_value() {
        *hidden.decor_mut() = old.decor().clone();
    }
    *item = Item::Value(hidden);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const RUNNING: &str = r#"
[discovery]
chap = "finder:finder-secret-89"
[[target]]
name = "iqn.2026-11.test:a"
chap = "alice:alice-secret-0123"   # a's own
[[target.initiator]]
name = "iqn.2026-11.test:host"
chap = "host:host-secret-45678"
[[target]]
name = "iqn.2026-11.test:b"
initiator = [{ name = "iqn.2026-11.test:other", chap = "other:other-secret-901" }]
"#;

    #[test]
    fn shown_secrets_come_back_where_they_were() {
        let running: DocumentMut = RUNNING.parse().unwrap();
        let shown = redacted(RUNNING);
        assert!(!shown.contains("secret-"), "{shown}");
        // The same target in another spelling is the same target.
        let edited = shown.replace("iqn.2026-11.test:a", "IQN.2026-11.TEST:A");
        let mut doc: DocumentMut = edited.parse().unwrap();
        assert_eq!(restore(&mut doc, &running), 4);
        let back = doc.to_string();
        for s in [
            "finder-secret-89",
            "alice-secret-0123\"   # a's own",
            "host-secret-45678",
            "other-secret-901",
        ] {
            assert!(back.contains(s), "{s} not restored:\n{back}");
        }
        assert!(!back.contains(HIDDEN_SECRET), "{back}");
    }

    #[test]
    fn a_hidden_secret_with_nothing_to_stand_for_stays_hidden() {
        let running: DocumentMut = RUNNING.parse().unwrap();
        let shown = redacted(RUNNING)
            .replace("iqn.2026-11.test:b", "iqn.2026-11.test:new")
            .replace("alice:<hidden>", "mallory:<hidden>");
        let mut doc: DocumentMut = shown.parse().unwrap();
        assert_eq!(restore(&mut doc, &running), 2, "discovery and host only");
        let back = doc.to_string();
        assert!(back.contains("mallory:<hidden>") && back.contains("other:<hidden>"));
    }
}
