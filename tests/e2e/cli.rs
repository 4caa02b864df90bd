//! The command line: bad flags and bad configuration print one line and
//! exit 2, failed operations exit 1, nothing panics (a closed output
//! pipe included); help, versions, completions and manual pages.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};

use support::Target;

fn ironlun(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(support::ironlun_bin())
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_usage_error(args: &[&str], needle: &str) {
    let (code, _, err) = ironlun(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    assert!(
        err.contains(needle),
        "{args:?}: '{err}' should mention '{needle}'"
    );
}

#[test]
fn bad_flags_and_specs_exit_2_with_one_line() {
    assert_usage_error(&["target", "--bogus"], "--bogus");
    assert_usage_error(&["target"], "no LUN");
    assert_usage_error(&["target", "--lun", "ram:1X"], "unknown unit");
    assert_usage_error(&["target", "--lun", "disk:1G"], "unknown backend");
    assert_usage_error(&["target", "--lun", "ram:1G,bs=1024"], "bs=1024");
    assert_usage_error(
        &["target", "--lun", "ram:1G", "--listen", "nowhere"],
        "ADDR:PORT",
    );
    assert_usage_error(
        &["target", "--lun", "ram:1G", "--name", "not an iqn"],
        "--name",
    );
    assert_usage_error(
        &["target", "--lun", "ram:1G", "--queue-depth", "0"],
        "queue-depth",
    );
    assert_usage_error(&["target", "--lun", "file:/nonexistent/dir/x.img"], "size=");
    assert_usage_error(
        &["target", "--config", "/nonexistent.toml"],
        "/nonexistent.toml",
    );
}

#[test]
fn bad_config_files_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.toml");
    std::fs::write(&p, "[[target]]\nname = \"iqn.2026-11.x:y\"\nqueue_dpeth = 4\n[[target.lun]]\nspec = \"ram:1M\"\n").unwrap();
    assert_usage_error(&["target", "--config", p.to_str().unwrap()], "queue_dpeth");
    std::fs::write(&p, "[[target]]\nname = \"iqn.2026-11.x:y\"\n[target.params]\nmax_burst_length = 10\n[[target.lun]]\nspec = \"ram:1M\"\n").unwrap();
    assert_usage_error(
        &["target", "--config", p.to_str().unwrap()],
        "MaxBurstLength",
    );
    assert_usage_error(
        &["target", "--config", p.to_str().unwrap(), "--lun", "ram:1G"],
        "--config",
    );
}

#[test]
fn port_in_use_is_a_clear_error() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    assert_usage_error(&["target", "--lun", "ram:1M", "--listen", &addr], &addr);
}

#[test]
fn help_and_version_exit_0() {
    let (code, out, _) = ironlun(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("target"));
    let (code, out, _) = ironlun(&["target", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("--lun"));
    let (code, out, _) = ironlun(&["--version"]);
    assert_eq!(code, 0);
    assert!(out.contains(env!("CARGO_PKG_VERSION")));
}

/// Runs ironlun with standard output a socket whose other end is
/// already closed, so that its first write fails with EPIPE (closing it
/// before the start leaves nothing to timing): status and stderr.
fn with_closed_stdout(args: &[&str]) -> (i32, String) {
    let (write_end, read_end) = std::os::unix::net::UnixStream::pair().unwrap();
    drop(read_end);
    let out = Command::new(support::ironlun_bin())
        .args(args)
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(write_end)))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const NAME: &str = "iqn.2026-11.test:t";

/// A target with a RAM LUN and a management socket in `dir`.
fn target(dir: &Path) -> (Target, String) {
    let sock = dir.join("admin.sock").to_str().unwrap().to_owned();
    let t = Target::start(&["--name", NAME, "--lun", "ram:8MiB", "--admin-socket", &sock]);
    (t, sock)
}

/// Output into a pipe whose reader has gone (`ironlun admin state | head
/// -0`) ends every command that prints quietly with status 0, instead of
/// a panic (status 101) after the work was done.
#[test]
fn a_closed_stdout_pipe_is_a_quiet_exit() {
    let dir = tempfile::tempdir().unwrap();
    let (t, sock) = target(dir.path());
    let portal = t.addr.to_string();
    let url = t.url(NAME, 0);
    let man = dir.path().join("man");
    let spec = "ram:1MiB";
    let commands: Vec<Vec<&str>> = vec![
        vec!["bench", "--list"],
        vec!["target", "--lun", "ram:1M", "--check"],
        vec!["admin", "--socket", &sock, "state"],
        vec!["admin", "--socket", &sock, "--json", "state"],
        vec!["admin", "--socket", &sock, "sessions"],
        vec!["admin", "--socket", &sock, "config", "show"],
        vec!["admin", "--socket", &sock, "lun", "add", NAME, spec],
        vec![
            "admin", "--socket", &sock, "lun", "add", NAME, spec, "--diff",
        ],
        vec!["discover", &portal],
        vec!["discover", "--json", &portal],
        vec!["inquiry", &url],
        vec!["inquiry", "--json", &url],
        vec!["readcap", &url],
        vec!["readcap", "--json", &url],
        vec!["completions", "bash"],
        vec!["man", "--out", man.to_str().unwrap()],
    ];
    for args in &commands {
        let (code, err) = with_closed_stdout(args);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    // The change was made before the output failed.
    let (code, out, err) = ironlun(&["admin", "--socket", &sock, "--json", "state"]);
    assert_eq!(code, 0, "{err}");
    let state: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(state["targets"][0]["luns"].as_array().unwrap().len(), 2);
}

/// 2 for what the user typed or configured, 1 for an operation that
/// failed: removing what is not there is a failure that says so.
#[test]
fn exit_statuses_tell_usage_from_failure() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, sock) = target(dir.path());
    let admin = |args: &[&str]| {
        let mut all = vec!["admin", "--socket", &sock];
        all.extend_from_slice(args);
        ironlun(&all)
    };
    for (args, code, needle) in [
        (vec!["lun", "remove", NAME, "7"], 1, "has no LUN 7"),
        (
            vec!["target", "remove", "iqn.2026-11.test:nope"],
            1,
            "no target iqn.2026-11.test:nope",
        ),
        (
            vec!["initiator", "remove", NAME, "iqn.2026-11.test:init"],
            1,
            "no initiator entry",
        ),
        (
            vec!["portal", "remove", "127.0.0.1:9"],
            1,
            "no portal 127.0.0.1:9",
        ),
        (
            vec!["lun", "remove", NAME, "7", "--diff"],
            1,
            "has no LUN 7",
        ),
        (vec!["lun", "add", NAME, "ram:1X"], 2, "unknown unit"),
        (
            vec!["lun", "add", NAME, "ram:1.1KiB"],
            2,
            "not a whole number of bytes",
        ),
        (vec!["target", "add", "not a name"], 2, "not a name"),
        (
            vec![
                "initiator",
                "set",
                NAME,
                "iqn.2026-11.test:init",
                "--map",
                "x",
            ],
            2,
            "--map x",
        ),
        (vec!["state", "--diff"], 2, "--diff"),
        (vec!["--diff", "state"], 2, "changes nothing"),
        (vec!["--force", "config", "show"], 2, "changes nothing"),
        (vec!["lun", "resize", NAME, "0"], 2, "<SIZE>"),
    ] {
        let (c, out, err) = admin(&args);
        assert_eq!(c, code, "{args:?}: {out}{err}");
        assert!(
            err.contains(needle),
            "{args:?}: '{err}' should mention '{needle}'"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // Nothing was removed or added by any of them.
    let (_, out, _) = admin(&["--json", "state"]);
    let state: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(state["targets"].as_array().unwrap().len(), 1, "{state}");
    assert_eq!(state["targets"][0]["luns"].as_array().unwrap().len(), 1);
    // An operation that fails (no daemon there): 1; no way to find one: 2.
    let (c, _, err) = ironlun(&["admin", "--socket", "/nonexistent/admin.sock", "state"]);
    assert_eq!(c, 1, "{err}");
    let (c, _, err) = ironlun(&["admin", "--config", "/nonexistent.toml", "state"]);
    assert_eq!(c, 2, "{err}");
}

/// A log level that names no level would silence the log: refused (flag,
/// environment and file), with the levels; filters with levels pass.
#[test]
fn a_log_level_typo_is_an_error() {
    assert_usage_error(
        &["--log", "infoo", "target", "--lun", "ram:1M", "--check"],
        "'infoo' is not a level",
    );
    assert_usage_error(
        &["target", "--lun", "ram:1M", "--check", "--log", "infoo"],
        "debug, trace",
    );
    let out = Command::new(support::ironlun_bin())
        .args(["target", "--lun", "ram:1M", "--check"])
        .env("IRONLUN_LOG", "infoo")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("IRONLUN_LOG") && err.contains("'infoo'"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.toml");
    std::fs::write(&p, format!("log = \"ironlun_target=verbose\"\n[[target]]\nname = \"{NAME}\"\n[[target.lun]]\nspec = \"ram:1M\"\n")).unwrap();
    assert_usage_error(
        &["target", "--config", p.to_str().unwrap(), "--check"],
        "log: log filter",
    );
    for good in [
        "ironlun_target=debug,info",
        "warn",
        "ironlun_target::conn=trace,error",
    ] {
        let (code, _, err) = ironlun(&["--log", good, "target", "--lun", "ram:1M", "--check"]);
        assert_eq!(code, 0, "{good}: {err}");
    }
}

/// Missing arguments are named, typos get a suggestion, every command
/// has --version, and sizes, portals and access entries are checked for
/// what they are.
#[test]
fn errors_name_what_to_fix() {
    // A command group alone lists its commands, on stderr, status 2.
    let (code, out, err) = ironlun(&["admin", "lun"]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("resize") && err.contains("read-only"), "{err}");
    assert_usage_error(&["inquiry"], "<URL>");
    assert_usage_error(&["admin", "lun", "add"], "<TARGET>");
    assert_usage_error(&["targt"], "'target'");
    assert_usage_error(&["target", "--chekc"], "'--check'");
    assert_usage_error(
        &["target", "--lun", "ram:1M", "--listen", "localhost:3260"],
        "only IP addresses",
    );
    assert_usage_error(
        &["target", "--lun", "ram:1M", "--allow", "10.0.0.0/33"],
        "is not a network",
    );
    assert_usage_error(
        &["target", "--lun", "ram:1000"],
        "whole number of 512-byte blocks",
    );
    // The initiator tools check their flags and URLs before connecting:
    // a mistake there is 2, a target that does not answer is 1.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let nowhere = &format!("iscsi://{closed}/iqn.2026-11.test:t/0");
    let closed = &closed.to_string();
    assert_usage_error(&["bench", nowhere, "--bs", "4q"], "unknown unit 'q'");
    assert_usage_error(&["inquiry", "iscsi://nowhere"], "bad iSCSI URL");
    assert_usage_error(&["readcap", nowhere, "--max-burst", "8GiB"], "--max-burst");
    assert_usage_error(
        &["dd", "--if", "/dev/zero", "--of", nowhere, "--bs", "0"],
        "--bs",
    );
    assert_usage_error(&["discover", "a b:c"], "bad portal");
    for args in [
        &["bench", nowhere, "--time", "1s"][..],
        &["readcap", nowhere],
        &["discover", closed],
    ] {
        let (code, _, err) = ironlun(args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains("Connection refused"), "{args:?}: {err}");
    }
    let (code, out, err) = ironlun(&["target", "--lun", "ram:1.5MiB", "--check"]);
    assert_eq!(code, 0, "{err}");
    // 1572864 bytes, written back exactly.
    assert!(out.contains("spec = \"ram:1536KiB\" # --lun"), "{out}");
    for cmd in [
        &["target"][..],
        &["admin", "lun", "add"],
        &["bench"],
        &["discover"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--version");
        let (code, out, _) = ironlun(&args);
        assert_eq!(code, 0, "{args:?}");
        assert!(out.contains(env!("CARGO_PKG_VERSION")), "{args:?}: {out}");
    }
}

/// discover, inquiry and readcap print one JSON object of the shape
/// their help gives.
#[test]
fn initiator_tools_print_json() {
    let dir = tempfile::tempdir().unwrap();
    let (t, _) = target(dir.path());
    let json = |args: &[&str]| -> serde_json::Value {
        let (code, out, err) = ironlun(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(out.lines().count(), 1, "{out}");
        serde_json::from_str(&out).unwrap()
    };
    let portal = t.addr.to_string();
    let d = json(&["discover", "--json", &portal]);
    assert_eq!(d["targets"][0]["name"], NAME, "{d}");
    let p = &d["targets"][0]["portals"][0];
    assert_eq!(p["address"], portal.as_str(), "{d}");
    assert_eq!(p["portal_group_tag"], 1, "{d}");
    let url = t.url(NAME, 0);
    let i = json(&["inquiry", "--json", &url]);
    assert_eq!(i["peripheral_device_type"], 0, "{i}");
    assert_eq!(i["lun"], 0, "{i}");
    for key in ["vendor", "product", "revision", "unit_serial_number"] {
        assert!(i[key].is_string(), "{key}: {i}");
    }
    let r = json(&["readcap", "--json", &url]);
    assert_eq!(r["bytes"], 8 << 20, "{r}");
    assert_eq!(r["block_size"], 512, "{r}");
    assert_eq!(r["logical_blocks"], (8 << 20) / 512, "{r}");
    assert_eq!(r["thin_provisioned"], false, "{r}");
}

/// Completion scripts and manual pages come from the definitions.
#[test]
fn completions_and_manual_pages() {
    for (shell, needle) in [
        ("bash", "_ironlun"),
        ("zsh", "#compdef ironlun"),
        ("fish", "complete -c ironlun"),
    ] {
        let (code, out, err) = ironlun(&["completions", shell]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(needle), "{shell}");
        assert!(
            out.contains("readcap") && out.contains("read-only"),
            "{shell}"
        );
    }
    assert_usage_error(&["completions", "tcsh"], "tcsh");
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("man1");
    let (code, out, err) = ironlun(&["man", "--out", out_dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for page in ["ironlun.1", "ironlun-target.1", "ironlun-admin-lun-add.1"] {
        let text = std::fs::read_to_string(out_dir.join(page)).unwrap();
        assert!(text.starts_with(".ie") || text.contains(".TH"), "{page}");
        assert!(out.contains(page), "{out}");
    }
    let add = std::fs::read_to_string(out_dir.join("ironlun-admin-lun-add.1")).unwrap();
    assert!(add.contains("rbd:POOL/IMAGE"), "{add}");
}
