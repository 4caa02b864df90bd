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

/// A daemon's live state from `text`, read from a file in `dir`.
fn live_from(dir: &std::path::Path, text: &str) -> Live {
    let path = dir.join("ironlun.toml");
    std::fs::write(&path, text).unwrap();
    let o = Overrides {
        config: Some(path),
        ..Overrides::default()
    };
    let cfg = Config::load(&o).unwrap();
    Live::new(registry(&cfg), cfg, &o, Vec::new()).unwrap()
}

fn lun_bytes(live: &Live, target: &str, lun: u16) -> u64 {
    let t = live.registry.find(target).unwrap();
    t.luns.get(lun).unwrap().backend().size_bytes()
}

/// A shrink is refused without `force`, whatever asks for it (the API's
/// resize, `admin apply`, SIGHUP), and nothing changes; a grow needs no
/// `force`, and with it a shrink is done.
#[test]
fn a_shrink_needs_force() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("a.img");
    let spec = format!("file:{},size=1MiB", img.display());
    let text = ONE.replace("ram:1MiB", &spec);
    let live = live_from(dir.path(), &text);
    let t = "iqn.2026-11.test:a";
    let resize = |size: &'static str, force: bool| {
        live.apply_target_edit(
            t,
            |d| edit::edit_lun_spec(d, t, 0, |s| edit::spec_with_size(s, size)),
            false,
            force,
        )
    };
    let e = resize("512KiB", false).unwrap_err();
    assert!(matches!(e, ApplyError::Shrink { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "target iqn.2026-11.test:a LUN 0: shrinking it from 1MiB to 512KiB discards its last 512KiB: give --force to shrink it (ironlun admin --force, or \"force\": true)"
    );
    let e = live
        .apply_text(&text.replace("1MiB", "768KiB"), false, false)
        .unwrap_err();
    assert!(matches!(e, ApplyError::Shrink { .. }), "{e:?}");
    assert_eq!(lun_bytes(&live, t, 0), 1 << 20);
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 1 << 20);
    assert!(live.document().contains("size=1MiB"));
    resize("2MiB", false).unwrap();
    assert_eq!(lun_bytes(&live, t, 0), 2 << 20);
    resize("512KiB", true).unwrap();
    assert_eq!(lun_bytes(&live, t, 0), 512 << 10);
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 512 << 10);
}

/// The lock lives with the open store: a live add-lun of a file another
/// LUN serves (through a link, which the configuration's own check by
/// path does not see) is refused at open; a resize keeps the lock; a
/// change that removes the LUN and adds the file elsewhere in one step
/// is refused (the old LUN still holds it); once it is removed, the file
/// can be added again.
#[test]
fn a_served_file_is_locked_from_add_to_remove() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("a.img");
    let link = dir.path().join("link.img");
    std::os::unix::fs::symlink(&img, &link).unwrap();
    let spec = format!("file:{},size=1MiB", img.display());
    let text = ONE.replace("ram:1MiB", &spec);
    let live = live_from(dir.path(), &text);
    let t = "iqn.2026-11.test:a";
    let add = |spec: String| {
        live.apply_target_edit(
            t,
            move |d| edit::add_lun(d, t, Some(1), &spec).map(drop),
            false,
            false,
        )
    };
    let by_link = format!("file:{}", link.display());
    let e = add(by_link.clone()).unwrap_err().to_string();
    let held = format!("{}: in use: this daemon already serves it", link.display());
    assert!(e.contains(&held), "{e}");
    live.apply_target_edit(
        t,
        |d| edit::edit_lun_spec(d, t, 0, |s| edit::spec_with_size(s, "2MiB")),
        false,
        false,
    )
    .unwrap();
    assert!(add(by_link.clone())
        .unwrap_err()
        .to_string()
        .contains(&held));
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 2 << 20);
    // Target a keeps a RAM LUN 1 and target b takes the file: in one
    // step, refused; in two, done.
    let a_ram = ONE.replace("[[target.lun]]", "[[target.lun]]\nnumber = 1");
    let b_file = text.replace(":a", ":b").replace(&spec, &by_link);
    let e = live
        .apply_text(&format!("{a_ram}{b_file}"), false, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&held), "{e}");
    live.apply_text(&a_ram, false, false).unwrap();
    live.apply_text(&format!("{a_ram}{b_file}"), false, false)
        .unwrap();
    assert_eq!(lun_bytes(&live, "iqn.2026-11.test:b", 0), 2 << 20);
}
