//! Authentication and access end to end: CHAP (one-way and mutual, for
//! normal and discovery sessions) and access lists (initiator names,
//! source networks), against the real daemon on loopback, with ironlun's
//! own initiator and with libiscsi's tools (URLs carrying credentials).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use support::{run, tool, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:secure";
const USER: &str = "alice";
const SECRET: &str = "alice-secret-0123";
const TARGET_USER: &str = "disk";
const TARGET_SECRET: &str = "disk-secret-4567";

fn ironlun(args: &[&str]) -> (i32, String) {
    run(support::ironlun_bin(), args)
}

fn url(t: &Target, creds: Option<(&str, &str)>) -> String {
    match creds {
        Some((u, p)) => format!("iscsi://{u}%{p}@{}/{NAME}/0", t.addr),
        None => t.url(NAME, 0),
    }
}

fn chap_target() -> Target {
    Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:8MiB",
        "--chap",
        &format!("{USER}:{SECRET}"),
        "--mutual-chap",
        &format!("{TARGET_USER}:{TARGET_SECRET}"),
    ])
}

#[test]
fn chap_admits_the_right_secret_and_refuses_others() {
    let t = chap_target();
    // Right credentials, one-way.
    let (rc, out) = ironlun(&["inquiry", &url(&t, Some((USER, SECRET)))]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("IRONLUN"), "{out}");
    // Wrong secret, unknown user, no credentials at all.
    for creds in [
        Some((USER, "wrong-secret-000")),
        Some(("mallory", SECRET)),
        None,
    ] {
        let (rc, out) = ironlun(&["inquiry", &url(&t, creds)]);
        assert_ne!(rc, 0, "{creds:?} logged in: {out}");
        assert!(out.contains("0x0201"), "{creds:?}: {out}");
    }
    assert!(t.wait_log("CHAP: wrong CHAP response", Duration::from_secs(5)));
    assert!(t.wait_log("unknown CHAP user \"mallory\"", Duration::from_secs(5)));
    let log = t.log();
    // Refusals name the peer; secrets never reach the log.
    assert!(
        log.lines()
            .any(|l| l.contains("login rejected: 0x0201") && l.contains("peer=127.0.0.1:")),
        "{log}"
    );
    for s in [SECRET, TARGET_SECRET, "wrong-secret-000"] {
        assert!(!log.contains(s), "a secret is in the log:\n{log}");
    }
}

#[test]
fn mutual_chap_proves_the_target_to_the_initiator() {
    let t = chap_target();
    let right = format!("{TARGET_USER}:{TARGET_SECRET}");
    let (rc, out) = ironlun(&[
        "inquiry",
        "--mutual-chap",
        &right,
        &url(&t, Some((USER, SECRET))),
    ]);
    assert_eq!(rc, 0, "{out}");
    // The initiator expects another secret: the target cannot prove
    // itself and the initiator refuses it.
    let (rc, out) = ironlun(&[
        "inquiry",
        "--mutual-chap",
        &format!("{TARGET_USER}:not-the-target-secret"),
        &url(&t, Some((USER, SECRET))),
    ]);
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("mutual CHAP response is wrong"), "{out}");
    // Credentials from the environment instead of flags.
    let out = std::process::Command::new(support::ironlun_bin())
        .args(["inquiry", &url(&t, None)])
        .env("IRONLUN_INITIATOR_CHAP", format!("{USER}:{SECRET}"))
        .env("IRONLUN_INITIATOR_MUTUAL_CHAP", &right)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn discovery_requires_chap_too() {
    let t = chap_target();
    let portal = t.addr.to_string();
    let (rc, out) = ironlun(&["discover", &portal]);
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("0x0201"), "{out}");
    let (rc, out) = ironlun(&["discover", "--chap", &format!("{USER}:{SECRET}"), &portal]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains(NAME), "{out}");
}

/// libiscsi's own CHAP implementation against ours (MD5), with the
/// credentials in the URL as its tools take them.
#[test]
fn libiscsi_tools_log_in_with_chap_and_fail_with_wrong_credentials() {
    let t = chap_target();
    let inq = tool("iscsi-inq", "libiscsi-bin");
    let (rc, out) = run(&inq, &[&url(&t, Some((USER, SECRET)))]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("DIRECT_ACCESS"), "{out}");
    let (rc, out) = run(&inq, &[&url(&t, Some((USER, "wrong-secret-000")))]);
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("Authentication failure"), "{out}");
    let (rc, out) = run(&inq, &[&url(&t, None)]);
    assert_ne!(rc, 0, "{out}");
    let ls = tool("iscsi-ls", "libiscsi-bin");
    let (rc, out) = run(&ls, &[&format!("iscsi://{USER}%{SECRET}@{}", t.addr)]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains(NAME), "{out}");
    let (rc, out) = run(
        &ls,
        &[&format!("iscsi://{USER}%bad-secret-0000@{}", t.addr)],
    );
    assert_ne!(rc, 0, "{out}");
}

/// An initiator that has credentials offers CHAP everywhere; a target or
/// discovery that needs none must still let it in (issue 42: libiscsi and
/// qemu declare InitiatorName again after the security stage, which LIO
/// and tgt accept). One daemon, one target with CHAP and one without,
/// discovery open: libiscsi's tools and qemu-img with credentials in the
/// URL reach both, and the CHAP target still refuses a wrong secret.
#[test]
fn initiators_with_credentials_reach_targets_without_chap() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("t.toml");
    let open = "iqn.2026-11.io.ironlun:open";
    std::fs::write(
        &cfg,
        format!(
            "[[target]]\nname = \"{NAME}\"\nchap = \"{USER}:{SECRET}\"\n\
             [[target.lun]]\nspec = \"ram:8MiB\"\n\
             [[target]]\nname = \"{open}\"\n\
             [[target.lun]]\nspec = \"ram:8MiB\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o600)).unwrap();
    let t = Target::start(&["--config", cfg.to_str().unwrap()]);
    let creds = format!("{USER}%{SECRET}@{}", t.addr);
    let ls = tool("iscsi-ls", "libiscsi-bin");
    // Discovery needs no CHAP; the initiator offers it anyway.
    let (rc, out) = run(&ls, &["-s", &format!("iscsi://{creds}")]);
    assert_eq!(rc, 0, "{out}\n{}", t.log());
    assert!(out.contains(NAME) && out.contains(open), "{out}");
    let inq = tool("iscsi-inq", "libiscsi-bin");
    for target in [open, NAME] {
        let (rc, out) = run(&inq, &[&format!("iscsi://{creds}/{target}/0")]);
        assert_eq!(rc, 0, "{target}: {out}\n{}", t.log());
        assert!(out.contains("DIRECT_ACCESS"), "{out}");
    }
    let (rc, out) = run(
        &inq,
        &[&format!(
            "iscsi://{USER}%wrong-secret-000@{}/{NAME}/0",
            t.addr
        )],
    );
    assert_ne!(
        rc, 0,
        "a wrong secret still fails on the CHAP target: {out}"
    );
    // qemu's iSCSI driver is libiscsi too: a write and a read back
    // through the target without CHAP, credentials in the URL.
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let src = dir.path().join("src.img");
    std::fs::write(&src, &data).unwrap();
    support::qemu_round_trip(
        dir.path(),
        &src,
        &data,
        &format!("iscsi://{creds}/{open}/0"),
    );
    assert!(
        !t.log().contains("negotiated more than once"),
        "{}",
        t.log()
    );
}

#[test]
fn access_lists_refuse_unknown_initiators_and_networks() {
    let allowed = "iqn.2026-11.org.example:allowed";
    let t = Target::start(&["--name", NAME, "--lun", "ram:8MiB", "--allow", allowed]);
    let (rc, out) = ironlun(&["inquiry", "--initiator-name", allowed, &t.url(NAME, 0)]);
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = ironlun(&[
        "inquiry",
        "--initiator-name",
        "iqn.2026-11.org.example:stranger",
        &t.url(NAME, 0),
    ]);
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("0x0202"), "{out}");
    assert!(
        t.wait_log("is not on the access list", Duration::from_secs(5)),
        "{}",
        t.log()
    );
    // Discovery lists only what the initiator may log in to.
    let portal = t.addr.to_string();
    let out = support::ironlun_ok(&["discover", "--initiator-name", allowed, &portal]);
    assert!(out.contains(NAME), "{out}");
    let out = support::ironlun_ok(&[
        "discover",
        "--initiator-name",
        "iqn.2026-11.org.example:stranger",
        &portal,
    ]);
    assert!(!out.contains(NAME), "a stranger sees the target: {out}");

    // Networks: loopback is not in 10/8, and is in 127/8.
    let t = Target::start(&["--name", NAME, "--lun", "ram:8MiB", "--allow", "10.0.0.0/8"]);
    let (rc, out) = ironlun(&["inquiry", &t.url(NAME, 0)]);
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("0x0202"), "{out}");
    assert!(t.wait_log("not in an allowed network", Duration::from_secs(5)));
    let inq = tool("iscsi-inq", "libiscsi-bin");
    let (rc, out) = run(&inq, &[&t.url(NAME, 0)]);
    assert_ne!(rc, 0, "{out}");
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:8MiB",
        "--allow",
        "127.0.0.0/8",
    ]);
    let (rc, out) = ironlun(&["inquiry", &t.url(NAME, 0)]);
    assert_eq!(rc, 0, "{out}");
    // An unknown target is 0x0203, not an authorization failure.
    let (rc, out) = ironlun(&["inquiry", &t.url("iqn.2026-11.io.ironlun:nothing", 0)]);
    assert_ne!(rc, 0);
    assert!(out.contains("0x0203"), "{out}");
}

/// Per-target CHAP and access lists from the configuration file; a file
/// with secrets must not be world-readable; secrets can come from the
/// environment instead.
#[test]
fn config_file_sets_chap_and_access_per_target() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("t.toml");
    let open = "iqn.2026-11.io.ironlun:open";
    std::fs::write(
        &cfg,
        format!(
            "[[target]]\nname = \"{NAME}\"\nchap = \"{USER}:{SECRET}\"\nallow = [\"127.0.0.0/8\"]\n\
             [[target.lun]]\nspec = \"ram:8MiB\"\n\
             [[target]]\nname = \"{open}\"\nallow = [\"iqn.2026-11.org.example:only\"]\n\
             [[target.lun]]\nspec = \"ram:8MiB\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (rc, out) = ironlun(&["target", "--config", cfg.to_str().unwrap()]);
    assert_eq!(rc, 2, "{out}");
    assert!(out.contains("world-readable"), "{out}");
    assert!(!out.contains(SECRET), "{out}");

    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o600)).unwrap();
    let t = Target::start(&["--config", cfg.to_str().unwrap()]);
    let (rc, out) = ironlun(&["inquiry", &url(&t, Some((USER, SECRET)))]);
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = ironlun(&["inquiry", &url(&t, None)]);
    assert!(rc != 0 && out.contains("0x0201"), "{out}");
    // Discovery is open here, and lists only the target this initiator
    // may reach.
    let out = support::ironlun_ok(&["discover", &t.addr.to_string()]);
    assert!(out.contains(NAME) && !out.contains(open), "{out}");

    // The secret from the environment: the file holds only a variable
    // name, so its mode does not matter.
    let env_cfg = dir.path().join("env.toml");
    std::fs::write(
        &env_cfg,
        format!(
            "[discovery]\nchap_env = \"TEST_DISCOVERY_CHAP\"\n\
             [[target]]\nname = \"{NAME}\"\nchap_env = \"TEST_TARGET_CHAP\"\n\
             [[target.lun]]\nspec = \"ram:8MiB\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&env_cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (rc, out) = ironlun(&["target", "--config", env_cfg.to_str().unwrap()]);
    assert_eq!(rc, 2, "{out}");
    assert!(out.contains("TEST_DISCOVERY_CHAP is not set"), "{out}");
    let target_creds = format!("{USER}:{SECRET}");
    let t = Target::start_env(
        &["--config", env_cfg.to_str().unwrap()],
        1,
        &[
            ("TEST_DISCOVERY_CHAP", "finder:finder-secret-89"),
            ("TEST_TARGET_CHAP", &target_creds),
        ],
    );
    let (rc, out) = ironlun(&["inquiry", &url(&t, Some((USER, SECRET)))]);
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = ironlun(&["discover", "--chap", &target_creds, &t.addr.to_string()]);
    assert!(rc != 0 && out.contains("0x0201"), "{out}");
    let out = support::ironlun_ok(&[
        "discover",
        "--chap",
        "finder:finder-secret-89",
        &t.addr.to_string(),
    ]);
    assert!(out.contains(NAME), "{out}");
}
