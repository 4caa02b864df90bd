//! The targets a change puts in place: the running ones where nothing
//! changed, new ones over the running logical units where something did.

use super::*;
use crate::live::diff;
use crate::server::test_registry as registry;

fn cfg(text: &str) -> Config {
    Config::from_toml(text, None).unwrap()
}

fn target(name: &str, luns: &[&str]) -> String {
    let mut s = format!("[[target]]\nname = \"{name}\"\n");
    for l in luns {
        s.push_str(&format!("[[target.lun]]\nspec = \"{l}\"\n"));
    }
    s
}

/// The targets `new` gives on a daemon running `old`.
fn next(old: &Config, new: &Config) -> (Arc<Vec<Arc<Target>>>, Vec<Arc<Target>>) {
    let r = registry(old);
    let plan = diff::plan(old, new);
    let lus = open_lus(new, &plan).unwrap();
    (r.targets(), targets(&r, new, &lus))
}

#[test]
fn unchanged_targets_are_the_running_ones() {
    let a = target("iqn.2026-11.test:a", &["null:1GiB"]);
    let b = target("iqn.2026-11.test:b", &["ram:1MiB"]);
    let old = cfg(&format!("{a}{b}"));
    let new = cfg(&format!(
        "{a}{}",
        target("iqn.2026-11.test:b", &["ram:1MiB", "null:1GiB"])
    ));
    let (before, after) = next(&old, &new);
    assert!(Arc::ptr_eq(&before[0], &after[0]), "a did not change");
    assert!(!Arc::ptr_eq(&before[1], &after[1]), "b has a new LUN");
    let kept = (before[1].luns.get(0), after[1].luns.get(0));
    assert!(
        matches!(kept, (Some(x), Some(y)) if Arc::ptr_eq(x, y)),
        "LUN 0 stays"
    );
    assert!(after[1].luns.get(1).is_some(), "LUN 1 is added");
    assert_eq!(after[1].cfg, new.targets[1]);
}

#[test]
fn a_target_written_another_way_takes_the_new_settings() {
    let old = cfg(&target("iqn.2026-11.test:a", &["null:1GiB"]));
    let new = cfg(&target("IQN.2026-11.TEST:A", &["null:1GiB"])
        .replace("[[target.lun]]", "alias = \"renamed\"\n[[target.lun]]"));
    let (before, after) = next(&old, &new);
    assert!(!Arc::ptr_eq(&before[0], &after[0]));
    // Names are kept in their normal form (RFC 3722).
    assert_eq!(after[0].cfg.name, "iqn.2026-11.test:a");
    assert_eq!(after[0].cfg.alias.as_deref(), Some("renamed"));
    let lus = (before[0].luns.get(0), after[0].luns.get(0));
    assert!(matches!(lus, (Some(x), Some(y)) if Arc::ptr_eq(x, y)));
}
