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

/// ALUA groups and the transition time change live; what initiators read
/// once (mode, local group, relative port) is refused.
#[test]
fn alua_groups_go_live_the_layout_seen_at_discovery_does_not() {
    let alua = |mode: &str, local: u16, g1: &str, extra: &str| {
        format!(
            "[[target]]\nname = \"iqn.2026-11.test:a\"\n[target.alua]\nmode = \"{mode}\"\nlocal_group = {local}\ngroups = [{{ id = 1, state = \"{g1}\" }}, {{ id = 2, state = \"standby\" }}{extra}]\n[[target.lun]]\nspec = \"ram:8MiB\"\n"
        )
    };
    let base = alua("implicit", 1, "active/optimized", "");
    let lines = |p: &Plan| {
        p.changes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    let p = plan(&cfg(&base), &cfg(&alua("implicit", 1, "standby", "")));
    assert!(p.refused.is_empty(), "{p:?}");
    assert_eq!(
        lines(&p),
        ["~ target iqn.2026-11.test:a: ALUA group 1 active/optimized -> standby"]
    );
    let third = ", { id = 3, state = \"unavailable\" }";
    let p = plan(
        &cfg(&base),
        &cfg(&alua("implicit", 1, "active/optimized", third)),
    );
    assert_eq!(
        lines(&p),
        ["~ target iqn.2026-11.test:a: ALUA + group 3 unavailable"]
    );
    let p = plan(
        &cfg(&alua("implicit", 1, "active/optimized", third)),
        &cfg(&base),
    );
    assert_eq!(lines(&p), ["~ target iqn.2026-11.test:a: ALUA - group 3"]);
    for (what, new) in [
        ("mode", alua("both", 1, "active/optimized", "")),
        (
            "local group",
            alua("implicit", 2, "active/optimized", "").replace("id = 1,", "id = 1, ports = [5],"),
        ),
        ("off", BASE.to_owned()),
        (
            "relative port",
            base.replace("local_group = 1", "local_group = 1\nrelative_port = 5")
                .replace("id = 1,", "id = 1, ports = [5],"),
        ),
    ] {
        let p = plan(&cfg(&base), &cfg(&new));
        assert!(p.changes.is_empty(), "{what}: {p:?}");
        assert_eq!(p.refused.len(), 1, "{what}: {p:?}");
        assert!(p.refused[0].contains("remove the target and add it again"));
    }
}

#[test]
fn a_snapshot_schedule_goes_live_when_set_changed_or_removed() {
    let file =
        "[[target]]\nname = \"iqn.2026-11.test:a\"\n[[target.lun]]\nspec = \"file:/srv/a.img\"\n";
    let every = |e: &str, keep: u32| {
        file.replace(
            "spec = \"file:/srv/a.img\"\n",
            &format!(
                "spec = \"file:/srv/a.img\"\nsnapshot_every = \"{e}\"\nsnapshot_keep = {keep}\n"
            ),
        )
    };
    let lines = |a: &str, b: &str| -> Vec<String> {
        let p = plan(&cfg(a), &cfg(b));
        assert!(p.refused.is_empty(), "{p:?}");
        p.changes.iter().map(ToString::to_string).collect()
    };
    let t = "~ target iqn.2026-11.test:a LUN 0";
    assert_eq!(
        lines(file, &every("1h", 24)),
        [format!(
            "{t}: snapshot schedule every 1h, keep 24, prefix auto"
        )]
    );
    assert_eq!(
        lines(&every("1h", 24), &every("10m", 3)),
        [format!(
            "{t}: snapshot schedule every 10m, keep 3, prefix auto"
        )]
    );
    assert_eq!(
        lines(&every("1h", 24), file),
        [format!("{t}: no snapshot schedule")]
    );
    assert!(lines(&every("1h", 24), &every("60m", 24)).is_empty());
}
