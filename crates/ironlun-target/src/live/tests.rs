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

/// A live daemon whose configuration file is `text`, in `dir`.
fn from_file(dir: &std::path::Path, text: &str) -> (Live, std::path::PathBuf) {
    let path = dir.join("ironlun.toml");
    std::fs::write(&path, text).unwrap();
    let o = Overrides {
        config: Some(path.clone()),
        ..Overrides::default()
    };
    let cfg = Config::load(&o).unwrap();
    (
        Live::new(registry(&cfg), cfg, &o, Vec::new()).unwrap(),
        path,
    )
}

/// Issue 42: changes made through the API and not saved are counted (in
/// /metrics too), a reload says what applying the file changes and then
/// counts nothing, and `config save` to the daemon's file ends the count.
#[test]
fn unsaved_live_changes_are_counted_until_saved_or_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let (live, path) = from_file(dir.path(), ONE);
    let add_b =
        |d: &mut DocumentMut| edit::add_target(d, "iqn.2026-11.test:b", &["ram:1MiB".into()]);
    live.apply_edit(add_b, true, false).unwrap();
    assert_eq!(live.unsaved(), 0, "a dry run changes nothing");
    live.apply_edit(add_b, false, false).unwrap();
    assert_eq!(live.unsaved(), 1);
    let metrics = crate::metrics::render(&live.registry).unwrap();
    assert!(
        metrics.contains("ironlun_config_unsaved_changes 1"),
        "{metrics}"
    );

    // What SIGHUP would do: remove b again.
    let plan = live.reload_file(true, false).unwrap();
    assert_eq!(plan.changes.len(), 1, "{:?}", plan.changes);
    assert!(plan.changes[0].to_string().contains("iqn.2026-11.test:b"));
    assert_eq!(live.unsaved(), 1, "a dry run changes nothing");
    assert_eq!(live.config().targets.len(), 2);
    live.reload_file(false, false).unwrap();
    assert_eq!(live.unsaved(), 0);
    assert_eq!(live.config().targets.len(), 1);
    let metrics = crate::metrics::render(&live.registry).unwrap();
    assert!(
        metrics.contains("ironlun_config_unsaved_changes 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ironlun_config_reloads_total{result=\"applied\"} 1"),
        "{metrics}"
    );

    live.apply_edit(add_b, false, false).unwrap();
    assert_eq!(live.unsaved(), 1);
    // Saved elsewhere, the daemon's file still lacks it.
    live.save(Some(dir.path().join("copy.toml"))).unwrap();
    assert_eq!(live.unsaved(), 1);
    assert_eq!(live.save(None).unwrap(), path);
    assert_eq!(live.unsaved(), 0);
    live.reload_file(false, false).unwrap();
    assert_eq!(live.config().targets.len(), 2, "the file has b now");
}

/// With `save_on_change`, every API change is in the file at once: a
/// reload keeps it.
#[test]
fn save_on_change_writes_every_api_change_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (live, path) = from_file(dir.path(), &format!("save_on_change = true\n{ONE}"));
    let add_b =
        |d: &mut DocumentMut| edit::add_target(d, "iqn.2026-11.test:b", &["ram:1MiB".into()]);
    live.apply_edit(add_b, false, false).unwrap();
    assert_eq!(live.unsaved(), 0);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("iqn.2026-11.test:b"), "{text}");
    assert!(
        text.starts_with("save_on_change = true\n"),
        "the file's own text is kept: {text}"
    );
    let plan = live.reload_file(true, false).unwrap();
    assert!(plan.changes.is_empty(), "{:?}", plan.changes);
}
