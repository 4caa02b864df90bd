//! The edit of one target checked alone gives what the whole document
//! gives, or leaves the answer to it.

use toml_edit::value;

use super::*;
use crate::config::{ConfigError, Overrides};
use crate::live::edit::{self, parse, Mapping};
use crate::live::portals::Portals;

/// Three targets, comments, defaults, an initiator entry and a file LUN.
const DOC: &str = r#"# the lab
listen = ["127.0.0.1:3260"]

[defaults]
queue_depth = 64

[[target]]
name = "iqn.2026-11.test:a"  # first
[[target.lun]]
spec = "null:1GiB"

# the middle one
[[target]]
name = "iqn.2026-11.test:b"
alias = "bee"
[[target.lun]]
spec = "file:/srv/b.img,size=1MiB"
[[target.lun]]
number = 3
spec = "ram:8MiB"
[[target.initiator]]
name = "iqn.2026-11.test:host"
luns = [{ lun = 0, target_lun = 3 }]

[[target]]
name = "iqn.2026-11.test:c"
[[target.lun]]
spec = "ram:4MiB"
"#;

const B: &str = "iqn.2026-11.test:b";

type Edit = Box<dyn Fn(&mut DocumentMut) -> Result<(), EditError>>;

fn state(text: &str) -> State {
    State {
        config: Config::from_toml(text, None).unwrap(),
        doc: parse(text).unwrap(),
        path: None,
        overrides: Overrides::default(),
        portals: Portals::new(Vec::new()),
        unsaved: 0,
    }
}

/// The whole document edited and checked: its text and configuration.
fn whole(st: &State, f: &Edit) -> Result<(String, Config), String> {
    let mut doc = st.doc.clone();
    f(&mut doc).map_err(|e| e.to_string())?;
    let cfg = st.check(&doc).map_err(|e| e.to_string())?;
    Ok((doc.to_string(), cfg))
}

/// Staged alone, when it is: its text and configuration.
fn alone(st: &State, name: &str, f: &Edit) -> Option<(String, Config)> {
    let s = stage(st, name, f.as_ref())?;
    let mut doc = st.doc.clone();
    s.splice.splice(&mut doc);
    Some((doc.to_string(), s.config))
}

/// `f` on target `name` is staged alone, with the whole check's result.
fn same(text: &str, name: &str, f: Edit) {
    let st = state(text);
    let expected = whole(&st, &f).unwrap();
    let got = alone(&st, name, &f).expect("staged alone");
    assert_eq!(got.0, expected.0);
    assert_eq!(got.1, expected.1);
}

/// `f` is left to the whole check, which refuses it.
fn left_to_whole(text: &str, name: &str, f: Edit) -> String {
    let st = state(text);
    assert!(alone(&st, name, &f).is_none());
    whole(&st, &f).unwrap_err()
}

#[test]
fn targets_added_and_removed_alone_as_whole() {
    let luns = vec!["null:2GiB".to_owned(), "ram:1MiB".to_owned()];
    same(
        DOC,
        "iqn.2026-11.test:d",
        Box::new(move |d| edit::add_target(d, "iqn.2026-11.test:d", &luns)),
    );
    same(
        DOC,
        B,
        Box::new(|d| edit::add_target(d, B, &["file:/srv/b.img,size=1MiB".into()])),
    );
    same(
        DOC,
        "IQN.2026-11.TEST:B",
        Box::new(|d| edit::remove_target(d, "IQN.2026-11.TEST:B")),
    );
    same(
        DOC,
        "iqn.2026-11.test:a",
        Box::new(|d| edit::remove_target(d, "iqn.2026-11.test:a")),
    );
    let missing = left_to_whole(
        DOC,
        "iqn.2026-11.test:z",
        Box::new(|d| edit::remove_target(d, "iqn.2026-11.test:z")),
    );
    assert!(missing.contains("no target"), "{missing}");
    let no_targets = "listen = [\"127.0.0.1:3260\"]\n";
    let st = State {
        doc: parse(no_targets).unwrap(),
        ..state(DOC)
    };
    // The running configuration does not match the document: not alone.
    let f: Edit = Box::new(|d| edit::add_target(d, "iqn.2026-11.test:d", &["ram:1MiB".into()]));
    assert!(alone(&st, "iqn.2026-11.test:d", &f).is_none());
}

#[test]
fn luns_and_settings_changed_alone_as_whole() {
    same(
        DOC,
        B,
        Box::new(|d| edit::add_lun(d, B, None, "null:1GiB").map(drop)),
    );
    same(
        DOC,
        B,
        Box::new(|d| edit::add_lun(d, B, Some(9), "ram:1MiB").map(drop)),
    );
    same(DOC, B, Box::new(|d| edit::remove_lun(d, B, 0)));
    let missing = left_to_whole(DOC, B, Box::new(|d| edit::remove_lun(d, B, 7)));
    assert!(missing.contains("has no LUN 7"), "{missing}");
    same(
        DOC,
        B,
        Box::new(|d| edit::edit_lun_spec(d, B, 3, |s| edit::spec_with_size(s, "16MiB"))),
    );
    same(
        DOC,
        B,
        Box::new(|d| edit::edit_lun_spec(d, B, 3, |s| Ok(edit::spec_with_read_only(s, true)))),
    );
    same(
        DOC,
        B,
        Box::new(|d| edit::set_target_key(d, B, "alias", Some(value("hive")))),
    );
    same(
        DOC,
        B,
        Box::new(|d| edit::set_target_key(d, B, "alias", None)),
    );
    let map = [Mapping {
        lun: 0,
        target_lun: 0,
        read_only: true,
    }];
    same(
        DOC,
        B,
        Box::new(move |d| edit::set_initiator(d, B, "iqn.2026-11.test:other", Some(&map), None)),
    );
    same(
        DOC,
        B,
        Box::new(|d| edit::remove_initiator(d, B, "iqn.2026-11.test:host")),
    );
}

#[test]
fn mistakes_are_left_to_the_whole_check() {
    let bad = left_to_whole(
        DOC,
        "disk 2",
        Box::new(|d| edit::add_target(d, "disk 2", &["ram:1MiB".into()])),
    );
    assert!(bad.contains("target[3].name"), "{bad}");
    let missing = left_to_whole(
        DOC,
        "iqn.2026-11.test:z",
        Box::new(|d| edit::add_lun(d, "iqn.2026-11.test:z", None, "ram:1MiB").map(drop)),
    );
    assert!(missing.contains("no target"), "{missing}");
    let last = left_to_whole(
        DOC,
        "iqn.2026-11.test:a",
        Box::new(|d| edit::remove_lun(d, "iqn.2026-11.test:a", 0)),
    );
    assert!(last.contains("has no [[target.lun]]"), "{last}");
    let shared = left_to_whole(
        DOC,
        "iqn.2026-11.test:c",
        Box::new(|d| edit::add_lun(d, "iqn.2026-11.test:c", None, "file:/srv/b.img").map(drop)),
    );
    assert!(
        shared.contains("already the store of target iqn.2026-11.test:b LUN 0"),
        "{shared}"
    );
    let rbd = format!(
        "{DOC}[[target]]\nname = \"iqn.2026-11.test:r\"\n[[target.lun]]\nspec = \"rbd:rbd/disk\"\n"
    );
    for (target, spec) in [
        (
            "iqn.2026-11.test:c",
            "rbd:rbd/disk,conf=/etc/ceph/other.conf",
        ),
        ("iqn.2026-11.test:r", "rbd:rbd/disk,id=iscsi"),
    ] {
        let again = left_to_whole(
            &rbd,
            target,
            Box::new(move |d| edit::add_lun(d, target, None, spec).map(drop)),
        );
        // Both LUNs named, whichever the check meets first.
        for part in [
            "RBD image rbd/disk is already the store of target",
            "iqn.2026-11.test:r LUN 0",
            &format!("{target} LUN "),
        ] {
            assert!(again.contains(part), "{again}");
        }
    }
    let one = "[[target]]\nname = \"iqn.2026-11.test:a\"\n[[target.lun]]\nspec = \"ram:1MiB\"\n";
    let none = left_to_whole(
        one,
        "iqn.2026-11.test:a",
        Box::new(|d| edit::remove_target(d, "iqn.2026-11.test:a")),
    );
    assert_eq!(none, ConfigError::NoTargets.to_string());
}

#[test]
fn a_name_the_document_gives_another_way_is_left_to_the_whole_check() {
    // An unnamed target is called by the default name: a target added
    // with that name is one twice, which only the whole check sees.
    let unnamed = "[[target]]\n[[target.lun]]\nspec = \"ram:1MiB\"\n";
    let name = crate::config::default_target_name();
    let n = name.clone();
    let twice = left_to_whole(
        unnamed,
        &name,
        Box::new(move |d| edit::add_target(d, &n, &["ram:1MiB".into()])),
    );
    assert!(twice.contains("defined twice"), "{twice}");
}
