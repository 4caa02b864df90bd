//! The command line: bad flags and bad configuration print one line and
//! exit 2.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::process::Command;

fn ironlun(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ironlun"))
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

/// Output into a pipe whose reader has gone (`ironlun bench --list | head
/// -0`) ends the command quietly with status 0, instead of a panic.
#[test]
fn a_closed_stdout_pipe_is_a_quiet_exit() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ironlun"))
        .args(["bench", "--list"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before the child gets to write.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}
