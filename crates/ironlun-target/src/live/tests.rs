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

/// A daemon started from `text` in a file of `dir`.
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

fn target_with_lun(name: &str) -> String {
    format!("[[target]]\nname = \"{name}\"\n[[target.lun]]\nspec = \"ram:1MiB\"\n")
}

/// Two targets whose state files had one name before (`state_name.rs`)
/// keep their own; removing one's LUN leaves the other's file.
#[test]
fn targets_that_shared_a_file_name_keep_their_own_state() {
    use ironlun_scsi::reservations::{ItNexus, PrState, Registration};
    let (a, b) = (
        "iqn.2026-11.test:disk-\u{e9}",
        "iqn.2026-11.test:disk-\u{fc}",
    );
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let st = |key| PrState {
        generation: 0,
        registrations: vec![Registration {
            nexus: ItNexus::new("iqn.2026-11.test:i", [0x80, 0, 0, 0, 0, 1], 1),
            key,
            all_tg_pt: false,
        }],
        reservation: None,
        aptpl: true,
    };
    let file = |t| state.join(crate::state_name::file_name("pr", t, 0));
    std::fs::write(file(a), st(1).encode()).unwrap();
    std::fs::write(file(b), st(2).encode()).unwrap();
    let head = format!("state_dir = \"{}\"\n", state.display());
    let lun1 = "[[target.lun]]\nnumber = 1\nspec = \"null:1GiB\"\n";
    let live = live_from(
        dir.path(),
        &format!("{head}{}{}{lun1}", target_with_lun(a), target_with_lun(b)),
    );
    let pr = |t: &str| {
        live.registry
            .find(t)
            .unwrap()
            .luns
            .get(0)
            .unwrap()
            .pr_state()
    };
    assert_eq!((pr(a), pr(b)), (st(1), st(2)));
    // b keeps its LUN 1 only.
    let b_lun1 = format!("[[target]]\nname = \"{b}\"\n{lun1}");
    let out = live
        .apply_text(
            &format!("{head}{}{b_lun1}", target_with_lun(a)),
            false,
            true,
        )
        .unwrap();
    assert_eq!(out.changes.len(), 1, "{:?}", out.changes);
    assert!(
        out.changes[0].to_string().contains("LUN 0"),
        "{:?}",
        out.changes
    );
    assert!(file(a).exists(), "a's state stays");
    assert!(!file(b).exists(), "b's state goes with its LUN");
}

/// SIGHUP reads the state files of an offline LU again.
#[test]
fn sighup_brings_back_a_lu_whose_file_was_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let t = "iqn.2026-11.test:a";
    let pr = state.join(crate::state_name::file_name("pr", t, 0));
    std::fs::write(&pr, "ironlun-pr 2\nnonsense\n").unwrap();
    let live = live_from(
        dir.path(),
        &format!(
            "state_dir = \"{}\"\n{}",
            state.display(),
            target_with_lun(t)
        ),
    );
    let lu = live.registry.find(t).unwrap().luns.get(0).unwrap().clone();
    assert!(lu.offline_reason().is_some());
    live.reload();
    assert!(lu.offline_reason().is_some(), "the marker holds it");
    assert!(live.bring_back(t, 0).is_err());
    std::fs::remove_file(&pr).unwrap();
    live.reload();
    assert_eq!(lu.offline_reason(), None);
    assert_eq!(live.bring_back(t, 0), Ok(BroughtBack::WasOnline));
    assert!(live.bring_back(t, 5).is_err());
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

/// An API change that would leave a bad configuration says so, without
/// naming the daemon's file, which it did not touch (issue 42); a reload
/// of a bad file names the file.
#[test]
fn an_api_change_error_names_the_change_not_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (live, path) = from_file(dir.path(), ONE);
    let e = live
        .apply_edit(
            |d| edit::remove_target(d, "iqn.2026-11.test:a"),
            true,
            false,
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("the configuration this change leaves: "),
        "{e}"
    );
    assert!(!e.contains(&*path.to_string_lossy()), "{e}");
    std::fs::write(&path, "[[target]]\n").unwrap();
    let e = live.reload_file(true, false).unwrap_err().to_string();
    assert!(e.contains(&*path.to_string_lossy()), "{e}");
}
