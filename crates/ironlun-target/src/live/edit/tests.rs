use super::*;

const DOC: &str = "# my target\nlisten = [\"127.0.0.1:3260\"]\n\n[[target]]\nname = \"iqn.2026-11.test:a\" # the disk\n[[target.lun]]\nspec = \"ram:8MiB\"\n";

fn doc() -> DocumentMut {
    parse(DOC).unwrap()
}

#[test]
fn edits_are_idempotent_and_keep_comments() {
    let mut d = doc();
    assert_eq!(
        add_lun(&mut d, "iqn.2026-11.test:a", None, "ram:4MiB"),
        Ok(1)
    );
    let once = d.to_string();
    assert_eq!(
        add_lun(&mut d, "iqn.2026-11.test:a", None, "ram:4MiB"),
        Ok(1)
    );
    assert_eq!(d.to_string(), once);
    assert!(once.starts_with("# my target\n"), "{once}");
    assert!(once.contains("# the disk"), "{once}");
    add_target(&mut d, "iqn.2026-11.test:b", &["null:1GiB".into()]).unwrap();
    let twice = d.to_string();
    add_target(&mut d, "iqn.2026-11.test:b", &["null:1GiB".into()]).unwrap();
    assert_eq!(d.to_string(), twice);
    remove_target(&mut d, "iqn.2026-11.test:b").unwrap();
    assert!(!d.to_string().contains("test:b"));
}

/// Removing what is not there says so (HTTP 404), and changes nothing:
/// a mistyped name or number is not taken for done.
#[test]
fn removing_what_is_not_there_is_not_found() {
    let mut d = doc();
    let (a, h) = ("iqn.2026-11.test:a", "iqn.2026-11.test:h");
    set_initiator(&mut d, a, h, None, None).unwrap();
    let before = d.to_string();
    let missing = [
        remove_target(&mut d, "iqn.2026-11.test:b"),
        remove_lun(&mut d, a, 1),
        remove_lun(&mut d, "iqn.2026-11.test:b", 0),
        remove_initiator(&mut d, a, "iqn.2026-11.test:g"),
        remove_portal(&mut d, "127.0.0.1:3261".parse().unwrap()),
    ];
    for r in missing {
        assert!(matches!(r, Err(EditError::NotFound(_))), "{r:?}");
    }
    let mut again = parse(&before).unwrap();
    remove_initiator(&mut again, a, h).unwrap();
    assert_eq!(
        remove_initiator(&mut again, a, h),
        Err(EditError::NotFound(format!(
            "target {a} has no initiator entry {h}"
        )))
    );
    let mut d2 = parse(&before).unwrap();
    remove_lun(&mut d2, a, 0).unwrap();
    assert_eq!(
        remove_lun(&mut d2, a, 0),
        Err(EditError::NotFound(format!("target {a} has no LUN 0")))
    );
}

#[test]
fn a_taken_lun_number_is_a_conflict_and_a_missing_target_not_found() {
    let mut d = doc();
    assert!(matches!(
        add_lun(&mut d, "iqn.2026-11.test:a", Some(0), "ram:1MiB"),
        Err(EditError::Conflict(_))
    ));
    assert!(matches!(
        add_lun(&mut d, "iqn.2026-11.test:zz", None, "ram:1MiB"),
        Err(EditError::NotFound(_))
    ));
}

#[test]
fn removing_a_lun_keeps_the_numbers_of_the_others_and_drops_its_mappings() {
    let mut d = doc();
    add_lun(&mut d, "iqn.2026-11.test:a", None, "ram:4MiB").unwrap();
    add_lun(&mut d, "iqn.2026-11.test:a", None, "ram:2MiB").unwrap();
    let m = [
        Mapping {
            lun: 0,
            target_lun: 1,
            read_only: true,
        },
        Mapping {
            lun: 1,
            target_lun: 2,
            read_only: false,
        },
    ];
    set_initiator(
        &mut d,
        "iqn.2026-11.test:a",
        "iqn.2026-11.test:h",
        Some(&m),
        None,
    )
    .unwrap();
    remove_lun(&mut d, "iqn.2026-11.test:a", 1).unwrap();
    let cfg = crate::config::Config::from_toml(&d.to_string(), None).unwrap();
    let t = &cfg.targets[0];
    assert_eq!(t.luns.iter().map(|l| l.number).collect::<Vec<_>>(), [0, 2]);
    let map = t.initiators[0].luns.as_ref().unwrap();
    assert_eq!(
        map,
        &[crate::config::MappedLun {
            lun: 1,
            target_lun: 2,
            read_only: false
        }]
    );
}

#[test]
fn specs_are_resized_and_made_read_only() {
    assert_eq!(
        spec_with_size("ram:8MiB,bs=4096", "1GiB").unwrap(),
        "ram:1GiB,bs=4096"
    );
    assert_eq!(
        spec_with_size("file:/x,size=1G,direct", "2G").unwrap(),
        "file:/x,direct,size=2G"
    );
    assert!(spec_with_size("block:/dev/sdb", "1G").is_err());
    assert_eq!(spec_with_read_only("ram:1MiB", true), "ram:1MiB,ro");
    assert_eq!(spec_with_read_only("ram:1MiB,ro", false), "ram:1MiB");
}

#[test]
fn the_last_portal_stays() {
    let mut d = doc();
    let a: SocketAddr = "127.0.0.1:3261".parse().unwrap();
    add_portal(&mut d, a).unwrap();
    add_portal(&mut d, a).unwrap();
    assert_eq!(d.to_string().matches("3261").count(), 1);
    remove_portal(&mut d, a).unwrap();
    assert!(remove_portal(&mut d, "127.0.0.1:3260".parse().unwrap()).is_err());
}

#[test]
fn an_initiator_set_again_stays_where_it_stands_with_its_comment() {
    let text = format!(
        "{DOC}# the host\n[[target.initiator]]\nname = \"iqn.2026-11.test:h\"\n\n[[target.initiator]]\nname = \"iqn.2026-11.test:g\"\n"
    );
    let mut d = parse(&text).unwrap();
    let (a, h) = ("iqn.2026-11.test:a", "iqn.2026-11.test:h");
    set_initiator(&mut d, a, h, None, Some("secret-of-h-0123")).unwrap();
    let out = d.to_string();
    let (at_h, at_g) = (out.find("test:h").unwrap(), out.find("test:g").unwrap());
    assert!(at_h < at_g, "h moved after g:\n{out}");
    assert!(
        out.contains("# the host\n[[target.initiator]]\nname = \"iqn.2026-11.test:h\"\nchap"),
        "{out}"
    );
    assert_eq!(out.matches("test:h").count(), 1, "{out}");
}

/// A group's state is set where it is written, inline or as a table,
/// and the rest of the line stays as it was.
#[test]
fn an_alua_state_is_set_in_either_shape() {
    let t = "iqn.2026-11.test:a";
    let inline = "[[target]]\nname = \"iqn.2026-11.test:a\"\n[target.alua]\nmode = \"both\"\nlocal_group = 1\ngroups = [\n  { id = 1, state = \"active/optimized\" }, # here\n  { id = 2, state = \"standby\", ports = [2] },\n]\n";
    let mut d = parse(inline).unwrap();
    set_alua_state(&mut d, t, 2, "active/non-optimized").unwrap();
    assert_eq!(
        d.to_string(),
        inline.replace(
            "id = 2, state = \"standby\"",
            "id = 2, state = \"active/non-optimized\""
        )
    );
    let tables = "[[target]]\nname = \"iqn.2026-11.test:a\"\n[target.alua]\nmode = \"both\"\nlocal_group = 1\n[[target.alua.groups]]\nid = 1\nstate = \"active/optimized\"\n[[target.alua.groups]]\nid = 2\nstate = \"standby\"\n";
    let mut d = parse(tables).unwrap();
    set_alua_state(&mut d, t, 1, "transitioning").unwrap();
    assert_eq!(
        d.to_string(),
        tables.replace("state = \"active/optimized\"", "state = \"transitioning\"")
    );
    for (doc, group) in [(inline, 3), (DOC, 1)] {
        let mut d = parse(doc).unwrap();
        assert_eq!(
            set_alua_state(&mut d, t, group, "standby"),
            Err(EditError::NotFound(format!(
                "target {t} has no ALUA group {group}"
            )))
        );
    }
}
