use super::*;

fn cfg(text: &str) -> Config {
    Config::from_toml(text, None).unwrap()
}

const BASE: &str =
    "[[target]]\nname = \"iqn.2026-11.test:a\"\n[[target.lun]]\nspec = \"ram:8MiB\"\n";

#[test]
fn the_same_configuration_plans_nothing() {
    assert!(plan(&cfg(BASE), &cfg(BASE)).is_empty());
}

#[test]
fn added_and_removed_luns_targets_and_portals() {
    let more = format!(
        "listen = [\"127.0.0.1:3260\", \"127.0.0.1:3261\"]\n{BASE}[[target.lun]]\nspec = \"ram:4MiB\"\n[[target]]\nname = \"iqn.2026-11.test:b\"\n[[target.lun]]\nspec = \"null:1GiB\"\n"
    );
    let p = plan(&cfg(BASE), &cfg(&more));
    assert!(p.refused.is_empty(), "{p:?}");
    let lines: Vec<String> = p.changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "+ portal 127.0.0.1:3261",
            "+ target iqn.2026-11.test:a LUN 1",
            "+ target iqn.2026-11.test:b",
        ]
    );
    let back = plan(&cfg(&more), &cfg(BASE));
    let lines: Vec<String> = back.changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "- portal 127.0.0.1:3261",
            "- target iqn.2026-11.test:a LUN 1",
            "- target iqn.2026-11.test:b",
        ]
    );
}

#[test]
fn size_and_read_only_go_live_other_changes_are_refused() {
    let bigger = BASE.replace("ram:8MiB", "ram:16MiB,ro");
    let p = plan(&cfg(BASE), &cfg(&bigger));
    assert_eq!(p.refused, Vec::<String>::new());
    assert_eq!(
        p.changes,
        [
            Change::Resize {
                target: "iqn.2026-11.test:a".into(),
                lun: 0,
                bytes: 16 << 20
            },
            Change::ReadOnly {
                target: "iqn.2026-11.test:a".into(),
                lun: 0,
                on: true
            },
        ]
    );
    let other_kind = BASE.replace("ram:8MiB", "null:8MiB");
    let p = plan(&cfg(BASE), &cfg(&other_kind));
    assert_eq!(p.refused.len(), 1, "{p:?}");
    assert!(
        p.refused[0].contains("remove the LUN and add it again"),
        "{p:?}"
    );
    let limits = format!("[limits]\nmax_sessions = 7\n{BASE}");
    let p = plan(&cfg(BASE), &cfg(&limits));
    assert_eq!(p.refused, ["limits: changing it needs a restart"]);
}

#[test]
fn a_file_opened_read_only_is_not_made_writable_live() {
    let ro = BASE.replace("ram:8MiB", "file:/tmp/x.img,size=1MiB,ro");
    let rw = BASE.replace("ram:8MiB", "file:/tmp/x.img,size=1MiB");
    let p = plan(&cfg(&ro), &cfg(&rw));
    assert_eq!(p.refused.len(), 1, "{p:?}");
    assert!(p.changes.is_empty());
    let p = plan(&cfg(&rw), &cfg(&ro));
    assert!(p.refused.is_empty(), "{p:?}");
}

#[test]
fn target_settings_are_named() {
    let alias = BASE.replace(
        "name = \"iqn.2026-11.test:a\"",
        "name = \"iqn.2026-11.test:a\"\nalias = \"x\"\nallow = [\"10.0.0.0/8\"]",
    );
    let p = plan(&cfg(BASE), &cfg(&alias));
    assert_eq!(
        p.changes,
        [Change::Target {
            name: "iqn.2026-11.test:a".into(),
            what: vec!["alias", "allow"]
        }]
    );
}
