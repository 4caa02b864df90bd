//! The effective configuration loads back to the configuration it was
//! written from, shows every default, marks what flags set and shows no
//! secret.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};

use super::super::{Config, Overrides};

/// Every secret in these tests is its user's name and this: the user is
/// shown, so the secret can be put back where `<hidden>` stands.
const SECRET_TAIL: &str = "-S3CRET-0123";

/// A file with every section, and keys away from their defaults.
const RICH: &str = r#"
listen = ["127.0.0.1:3261", "[::1]:3261"]
log = "debug"
stats = "127.0.0.1:9300"
io_engine = "pool"
save_on_change = true

[defaults]
queue_depth = 64
header_digest = ["CRC32C"]

[limits]
max_sessions = 10
nop_interval_secs = 0
max_transfer_length = "1MiB"

[tcp]
send_buffer = "512KiB"
quickack = true

[discovery]
chap = "disc-S3CRET-0123"
mutual_chap = "dtgt:dtgt-S3CRET-0123"

[[target]]
name = "iqn.2026-11.test:a"
alias = "store \"one\""
portal_group_tag = 7
default_map = "none"
allow = ["iqn.2026-11.test:init", "10.1.0.0/16", "192.0.2.7", "iqn.2026-11.test:B"]
chap = "alice:alice-S3CRET-0123"
mutual_chap = "tgt:tgt-S3CRET-0123"
[target.params]
max_burst_length = 262144
first_burst_length = 65536
initial_r2t = true
[[target.lun]]
spec = "ram:16MiB,thin,sanitize,sanitize_rate=64MiB/s"
[[target.lun]]
number = 5
spec = "file:/srv/a b.img,size=10G,grow,direct,bs=4096,rotation=7200"
snapshot_every = "90m"
snapshot_keep = 48
[[target.initiator]]
name = "iqn.2026-11.test:init"
luns = [{ lun = 0, target_lun = 5, read_only = true }, { lun = 1, target_lun = 0 }]
chap = "bob:bob-S3CRET-0123"
[[target.initiator]]
name = "iqn.2026-11.test:b"
luns = []

[[target]]
name = "iqn.2026-11.test:z"
[target.params]
queue_depth = 1
[[target.lun]]
spec = "rbd:pool/img,conf=/etc/ceph/ceph.conf,id=gw,timeout=30"
snapshot_every = "1500ms"
snapshot_keep = 1
snapshot_prefix = "rbd.hourly"
"#;

/// The discovery secret above has no user: make it one.
fn rich() -> String {
    RICH.replace("\"disc-S3CRET-0123\"", "\"disc:disc-S3CRET-0123\"")
}

/// `shown` with every `USER:<hidden>` given its secret back.
fn with_secrets(shown: &str) -> String {
    let mut out = String::new();
    let mut rest = shown;
    while let Some(at) = rest.find(":<hidden>\"") {
        let (before, after) = rest.split_at(at);
        let user = &before[before.rfind('"').unwrap() + 1..];
        out.push_str(before);
        out.push_str(&format!(":{user}{SECRET_TAIL}\""));
        rest = &after[":<hidden>\"".len()..];
    }
    out.push_str(rest);
    out
}

/// What the text leaves to defaults that the effective form writes
/// out, made equal.
fn normal(mut c: Config) -> Config {
    c.source = None;
    c.admin_socket = c.admin_socket();
    c.log = Some(c.log.unwrap_or_else(|| "info".to_owned()));
    c
}

fn file(dir: &Path, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("ironlun.toml");
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

fn load(o: &Overrides) -> Config {
    Config::load(o).unwrap_or_else(|e| panic!("{e}"))
}

/// The effective text, its secrets put back, loaded.
fn reloaded(shown: &str) -> Config {
    Config::from_toml(&with_secrets(shown), None).unwrap_or_else(|e| panic!("{e}\n{shown}"))
}

#[test]
fn the_effective_form_loads_back_to_the_same_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let o = Overrides {
        config: Some(file(dir.path(), &rich())),
        ..Overrides::default()
    };
    let cfg = load(&o);
    let shown = cfg.effective_toml(&o, None);
    assert_eq!(normal(reloaded(&shown)), normal(cfg.clone()), "{shown}");
    // Written once more from what it loaded to: the same text.
    let again = reloaded(&shown).effective_toml(&Overrides::default(), None);
    let body = |s: &str| s.lines().skip(3).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&again), body(&shown));
}

#[test]
fn no_secret_is_shown_and_every_user_is() {
    let dir = tempfile::tempdir().unwrap();
    let o = Overrides {
        config: Some(file(dir.path(), &rich())),
        ..Overrides::default()
    };
    let shown = load(&o).effective_toml(&o, None);
    assert!(!shown.contains("S3CRET"), "{shown}");
    for user in ["disc", "dtgt", "alice", "tgt", "bob"] {
        assert!(
            shown.contains(&format!("\"{user}:<hidden>\"")),
            "{user}: {shown}"
        );
    }
    // As shown, it cannot be applied: the placeholder is refused.
    let e = Config::from_toml(&shown, None).err().unwrap().to_string();
    assert!(e.contains("config show"), "{e}");
}

#[test]
fn every_default_is_written_out() {
    let dir = tempfile::tempdir().unwrap();
    let minimal = "[[target]]\nname = \"iqn.2026-11.test:t\"\nlun = [{ spec = \"ram:1G\" }]\n";
    let path = file(dir.path(), minimal);
    let o = Overrides {
        config: Some(path.clone()),
        ..Overrides::default()
    };
    let shown = load(&o).effective_toml(&o, None);
    let state = dir.path().join("ironlun.state");
    for line in [
        "listen = [\"127.0.0.1:3260\"]",
        "log = \"info\"",
        &format!("state_dir = \"{}\"", state.display()),
        &format!("admin_socket = \"{}\"", state.join("admin.sock").display()),
        "io_engine = \"uring\"",
        "save_on_change = false",
        "max_sessions = 256",
        "nop_interval_secs = 30",
        "max_transfer_length = \"8MiB\"",
        "nodelay = true",
        "quickack = false",
        "portal_group_tag = 1",
        "default_map = \"all\"",
        "allow = []",
        "queue_depth = 128",
        "header_digest = [\"None\", \"CRC32C\"]",
        "first_burst_length = 524288",
        "number = 0",
        "spec = \"ram:1GiB\"",
    ] {
        assert!(shown.lines().any(|l| l == line), "{line}:\n{shown}");
    }
    assert!(shown.starts_with(&format!(
        "# The effective configuration of {}:",
        path.display()
    )));
    // No flag given: nothing marked.
    assert!(!shown.lines().skip(3).any(|l| l.contains(" # ")), "{shown}");
}

#[test]
fn what_flags_set_is_marked_and_loads_back() {
    let dir = tempfile::tempdir().unwrap();
    let o = Overrides {
        config: Some(file(dir.path(), &rich())),
        listen: vec!["127.0.0.1:3999".into()],
        state_dir: Some(dir.path().join("st")),
        tcp_window: Some("1MiB".into()),
        tcp_nagle: true,
        chap: Some("flag:flag-S3CRET-0123".into()),
        allow: vec!["iqn.2026-11.test:init".into(), "iqn.2026-11.test:b".into()],
        queue_depth: Some(32),
        ..Overrides::default()
    };
    let cfg = load(&o);
    let shown = cfg.effective_toml(&o, Some("warn"));
    for line in [
        "listen = [\"127.0.0.1:3999\"] # --listen",
        "log = \"warn\" # --log",
        &format!(
            "state_dir = \"{}\" # --state-dir",
            dir.path().join("st").display()
        ),
        "send_buffer = \"1MiB\" # --tcp-window",
        "nodelay = false # --tcp-nagle",
        "chap = \"flag:<hidden>\" # --chap",
        "allow = [\"iqn.2026-11.test:init\", \"iqn.2026-11.test:b\"] # --allow",
        "queue_depth = 32 # --queue-depth",
        // An initiator entry's own CHAP is the file's.
        "chap = \"bob:<hidden>\"",
    ] {
        assert!(shown.lines().any(|l| l == line), "{line}:\n{shown}");
    }
    // What the file says and no flag changed is not marked.
    assert!(
        shown.lines().any(|l| l == "io_engine = \"pool\""),
        "{shown}"
    );
    let mut back = normal(reloaded(&shown));
    back.log = normal(cfg.clone()).log;
    assert_eq!(back, normal(cfg), "{shown}");
}

#[test]
fn without_a_file_the_name_and_luns_are_flags() {
    let o = Overrides {
        name: Some("iqn.2026-11.test:t".into()),
        luns: vec!["file:/srv/x.img,size=1G".into(), "ram:1M,ro".into()],
        ..Overrides::default()
    };
    let cfg = load(&o);
    let shown = cfg.effective_toml(&o, None);
    assert!(shown.starts_with("# The effective configuration of the command line:"));
    for line in [
        "name = \"iqn.2026-11.test:t\" # --name",
        "spec = \"file:/srv/x.img,size=1GiB\" # --lun",
        "spec = \"ram:1MiB,ro\" # --lun",
    ] {
        assert!(shown.lines().any(|l| l == line), "{line}:\n{shown}");
    }
    // No state directory without a file or --state-dir, so no socket.
    assert!(!shown.contains("state_dir") && !shown.contains("admin_socket"));
    assert_eq!(normal(reloaded(&shown)), normal(cfg), "{shown}");
}
