//! A configuration built in code refuses changes; one read from flags
//! takes them.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::server::test_registry as registry;

const ONE: &str =
    "[[target]]\nname = \"iqn.2026-11.test:a\"\n[[target.lun]]\nspec = \"ram:1MiB\"\n";

#[test]
fn a_configuration_built_in_code_refuses_every_change() {
    let cfg = Config::from_toml(ONE, None).unwrap();
    let live = Live::fixed(registry(&cfg), cfg.clone(), Vec::new());
    let two = format!("{ONE}{}", ONE.replace(":a", ":b"));
    let same = |_: &mut DocumentMut| -> Result<(), edit::EditError> { Ok(()) };
    for r in [
        live.apply_text(&two, true, false),
        live.apply_edit(same, false, false),
        live.apply_target_edit("iqn.2026-11.test:a", same, false, true),
    ] {
        let e = r.err().unwrap().to_string();
        assert!(e.contains("built in code"), "{e}");
    }
    assert_eq!(live.config().targets.len(), 1);
}

#[test]
fn a_configuration_from_a_document_takes_changes() {
    let path = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(path.path(), ONE).unwrap();
    let o = Overrides {
        config: Some(path.path().to_owned()),
        ..Overrides::default()
    };
    let cfg = Config::load(&o).unwrap();
    let live = Live::new(registry(&cfg), cfg, &o, Vec::new()).unwrap();
    let two = format!("{ONE}{}", ONE.replace(":a", ":b"));
    let out = live.apply_text(&two, true, false).unwrap();
    assert_eq!(out.changes.len(), 1);
}
