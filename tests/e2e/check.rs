//! `ironlun target --check` as `nginx -t`, with the real binary: the
//! effective configuration on standard output (TOML that loads back once
//! its secrets are put back), then on standard error every problem of
//! each class the daemon would meet at start, and the verdict, exit 0 or
//! 2. It binds nothing and creates, grows and locks nothing, so it runs
//! beside the daemon it checks.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::{run, tool, Target};

const NAME: &str = "iqn.2026-11.test:t";
const INIT: &str = "iqn.2026-11.test:init";

/// What `--check` said: exit status, standard output, standard error.
struct Checked {
    rc: i32,
    toml: String,
    said: String,
}

impl Checked {
    /// The one line of standard error that contains `needle`.
    fn line(&self, needle: &str) -> &str {
        let hits: Vec<&str> = self.said.lines().filter(|l| l.contains(needle)).collect();
        assert_eq!(hits.len(), 1, "{needle}:\n{}", self.said);
        hits[0]
    }

    fn ok(&self) -> &Self {
        assert_eq!(self.rc, 0, "{}\n{}", self.toml, self.said);
        assert!(self.said.contains("configuration OK"), "{}", self.said);
        self
    }

    fn refused(&self) -> &Self {
        assert_eq!(self.rc, 2, "{}\n{}", self.toml, self.said);
        assert!(!self.said.contains("configuration OK"), "{}", self.said);
        self
    }
}

fn check(args: &[&str]) -> Checked {
    let out = Command::new(support::ironlun_bin())
        .args(["target", "--check"])
        .args(args)
        .output()
        .unwrap();
    Checked {
        rc: out.status.code().unwrap_or(-1),
        toml: String::from_utf8(out.stdout).unwrap(),
        said: String::from_utf8(out.stderr).unwrap(),
    }
}

/// A configuration file, owner-only (it may hold secrets).
fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every `USER:<hidden>` of `shown` with its secret back: in these tests
/// a user's secret is its name and "-secret-0123".
fn with_secrets(shown: &str) -> String {
    let mut out = String::new();
    let mut rest = shown;
    while let Some(at) = rest.find(":<hidden>\"") {
        let (before, after) = rest.split_at(at);
        let user = &before[before.rfind('"').unwrap() + 1..];
        out.push_str(before);
        out.push_str(&format!(":{user}-secret-0123\""));
        rest = &after[":<hidden>\"".len()..];
    }
    out.push_str(rest);
    out
}

/// The TOML without its header comment and the marks of flags.
fn body(toml: &str) -> String {
    toml.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(" # --").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// CHAP, an access list, an initiator's map, the file's defaults and
/// flags on top: printed in the file's own terms with every default and
/// the flags' effects, secrets hidden; with the secrets put back it is
/// a configuration that checks to the same text.
#[test]
fn the_effective_configuration_loads_back() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("a.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(4 << 20)
        .unwrap();
    let text = format!(
        r#"
listen = ["127.0.0.1:0"]
[defaults]
queue_depth = 32
[discovery]
chap_env = "E2E_DISCOVERY_CHAP"
[[target]]
name = "{NAME}"
allow = ["{INIT}", "10.0.0.0/8"]
chap = "alice:alice-secret-0123"
mutual_chap = "tgt:tgt-secret-0123"
default_map = "none"
[[target.lun]]
spec = "file:{},thin,sanitize"
[[target.lun]]
number = 3
spec = "ram:16777216,ro"
[[target.initiator]]
name = "{INIT}"
luns = [{{ lun = 0, target_lun = 3, read_only = true }}]
chap = "bob:bob-secret-0123"
"#,
        img.display()
    );
    let config = file(dir.path(), "ironlun.toml", &text);
    let first = Command::new(support::ironlun_bin())
        .args(["--log", "warn", "target", "--check", "--config", s(&config)])
        .args(["--stats", "127.0.0.1:0", "--tcp-window", "1MiB"])
        .env("E2E_DISCOVERY_CHAP", "disc:disc-secret-0123")
        .output()
        .unwrap();
    let said = String::from_utf8(first.stderr).unwrap();
    let toml = String::from_utf8(first.stdout).unwrap();
    assert_eq!(first.status.code(), Some(0), "{toml}\n{said}");
    assert!(!toml.contains("secret-0123"), "a secret shown:\n{toml}");
    for line in [
        "log = \"warn\" # --log",
        "stats = \"127.0.0.1:0\" # --stats",
        "send_buffer = \"1MiB\" # --tcp-window",
        "chap = \"disc:<hidden>\"",
        "chap = \"alice:<hidden>\"",
        "mutual_chap = \"tgt:<hidden>\"",
        "chap = \"bob:<hidden>\"",
        "allow = [\"iqn.2026-11.test:init\", \"10.0.0.0/8\"]",
        "default_map = \"none\"",
        "queue_depth = 32",
        &format!("spec = \"file:{},thin,sanitize\"", img.display()),
        "spec = \"ram:16MiB,ro\"",
        "number = 3",
        "luns = [{ lun = 0, target_lun = 3, read_only = true }]",
        "max_sessions = 256",
        &format!(
            "state_dir = \"{}\"",
            dir.path().join("ironlun.state").display()
        ),
    ] {
        assert!(toml.lines().any(|l| l == line), "{line}:\n{toml}");
    }
    // Shown, its placeholders are refused; with the secrets back it
    // checks, and prints the same configuration.
    let shown = file(dir.path(), "shown.toml", &toml);
    check(&["--config", s(&shown)]).refused();
    let back = file(dir.path(), "back.toml", &with_secrets(&toml));
    let again = check(&["--config", s(&back)]);
    again.ok();
    assert_eq!(body(&again.toml), body(&toml));
}

/// Directories that are missing: a file LUN's is an error (the file
/// cannot be made); a state directory's parent is a warning (it would
/// be made, with its parents, at the first save: a typo?); a socket
/// directory under a regular file is an error. Nothing is made.
#[test]
fn missing_directories() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "x").unwrap();
    let lun = format!("file:{}/no/dir/x.img,size=1MiB", dir.path().display());
    let state = dir.path().join("typo/state");
    let sock = blocker.join("admin.sock");
    let c = check(&[
        "--name",
        NAME,
        "--lun",
        &lun,
        "--state-dir",
        s(&state),
        "--admin-socket",
        s(&sock),
    ]);
    c.refused();
    assert!(
        c.line("LUN 0").starts_with(&format!(
            "error: target {NAME} LUN 0: {}/no/dir/x.img: cannot create it: {}/no/dir does not exist",
            dir.path().display(),
            dir.path().display()
        )),
        "{}",
        c.said
    );
    assert!(c.line("state_dir").starts_with("warning: "), "{}", c.said);
    assert!(c.line("admin_socket").starts_with("error: "), "{}", c.said);
    assert!(c.said.contains("2 problems"), "{}", c.said);
    assert!(
        !dir.path().join("typo").exists(),
        "--check made a directory"
    );
}

/// `block:` on a regular file or a device that is not there.
#[test]
fn block_on_a_file_or_a_missing_device() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("disk.img");
    std::fs::File::create(&f).unwrap().set_len(1 << 20).unwrap();
    let on_file = format!("block:{}", f.display());
    let missing = format!("block:{}/sdz", dir.path().display());
    let c = check(&["--name", NAME, "--lun", &on_file, "--lun", &missing]);
    c.refused();
    assert_eq!(
        c.line("LUN 0"),
        format!(
            "error: target {NAME} LUN 0: {}: not a block device (use file: for files)",
            f.display()
        )
    );
    assert!(
        c.line("LUN 1").ends_with("sdz: no such device"),
        "{}",
        c.said
    );
}

/// `file:` with a size the open would refuse; `,grow` is a note, and
/// the file is left as it is.
#[test]
fn file_size_rules() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("a.img");
    std::fs::File::create(&f).unwrap().set_len(8 << 20).unwrap();
    let smaller = format!("file:{},size=4MiB", f.display());
    let c = check(&["--name", NAME, "--lun", &smaller]);
    c.refused();
    assert!(
        c.line("LUN 0")
            .contains("the file is 8MiB, larger than size=4MiB"),
        "{}",
        c.said
    );
    let larger = format!("file:{},size=16MiB", f.display());
    let c = check(&["--name", NAME, "--lun", &larger]);
    c.refused();
    assert!(
        c.line("LUN 0").contains("add ,grow to the spec"),
        "{}",
        c.said
    );
    let grow = format!("{larger},grow");
    let c = check(&["--name", NAME, "--lun", &grow]);
    c.ok();
    assert_eq!(
        c.line("LUN 0"),
        format!("note: target {NAME} LUN 0: the file grows from 8MiB to 16MiB (,grow)")
    );
    assert_eq!(
        std::fs::metadata(&f).unwrap().len(),
        8 << 20,
        "grown by --check"
    );
}

/// Two listeners on one address: the statistics endpoint on a portal's
/// address, a portal listed twice, a wildcard over another portal.
#[test]
fn two_listeners_on_one_address() {
    let c = check(&[
        "--name",
        NAME,
        "--lun",
        "ram:1MiB",
        "--listen",
        "127.0.0.1:39261",
        "--stats",
        "127.0.0.1:39261",
    ]);
    c.refused();
    assert_eq!(
        c.line("stats"),
        "error: listen 127.0.0.1:39261: stats is 127.0.0.1:39261 too: two listeners on one address (the second would fail: address in use)"
    );
    let c = check(&[
        "--name",
        NAME,
        "--lun",
        "ram:1MiB",
        "--listen",
        "0.0.0.0:39262",
        "--listen",
        "127.0.0.2:39262",
    ]);
    c.refused();
    assert!(c
        .line("127.0.0.2:39262")
        .starts_with("error: listen 0.0.0.0:39262"));
    // [::] takes IPv4 too where IPv6 sockets are dual-stack (Linux's
    // default, net.ipv6.bindv6only = 0): beside 0.0.0.0 it cannot listen.
    let dual =
        std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only").map_or(true, |v| v.trim() == "0");
    let args = [
        "--name",
        NAME,
        "--lun",
        "ram:1MiB",
        "--listen",
        "0.0.0.0:39264",
        "--listen",
        "[::]:39264",
    ];
    let c = check(&args);
    if dual {
        c.refused();
        assert!(
            c.line("[::]:39264")
                .ends_with("list [::]:39264 alone for every address"),
            "{}",
            c.said
        );
    } else {
        c.ok();
    }
}

/// A state directory on a read-only file system (as root: a read-only
/// tmpfs; otherwise one without write permission) is an error: the LUNs'
/// reservations could not be kept.
#[test]
fn an_unwritable_state_directory() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let _mounted = if root {
        let mount = tool("mount", "mount");
        let (rc, out) = run(
            &mount,
            &["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", s(&state)],
        );
        assert_eq!(rc, 0, "mount: {out}");
        Some(Unmount(state.clone()))
    } else {
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o555)).unwrap();
        None
    };
    let c = check(&[
        "--name",
        NAME,
        "--lun",
        "ram:1MiB",
        "--state-dir",
        s(&state),
    ]);
    c.refused();
    assert!(
        c.line("state_dir").starts_with(&format!(
            "error: state_dir {}: cannot write in it:",
            state.display()
        )),
        "{}",
        c.said
    );
}

/// Unmounts on drop.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The HTTP management API's token file by ironlun-token's rules: one
/// others may read is refused.
#[test]
fn a_token_file_others_can_read() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "e2e-check-token-0123456789").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let args = [
        "--name",
        NAME,
        "--lun",
        "ram:1MiB",
        "--admin-http",
        "127.0.0.1:39263",
        "--admin-token-file",
        s(&token),
    ];
    let c = check(&args);
    c.refused();
    assert!(
        c.line("admin_token_file").starts_with("error: "),
        "{}",
        c.said
    );
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    check(&args).ok();
}

/// A secret that authenticates initiators also authenticating the target
/// (here: the discovery secret is a target's mutual one).
#[test]
fn a_chap_secret_in_both_directions() {
    let dir = tempfile::tempdir().unwrap();
    let config = file(
        dir.path(),
        "ironlun.toml",
        &format!(
            r#"
[discovery]
chap = "disc:shared-secret-0123"
[[target]]
name = "{NAME}"
chap = "alice:alice-secret-0123"
mutual_chap = "tgt:shared-secret-0123"
lun = [{{ spec = "ram:1MiB" }}]
"#
        ),
    );
    let c = check(&["--config", s(&config)]);
    c.refused();
    assert_eq!(
        c.line("RFC 7143"),
        format!("error: discovery chap: its secret is also target {NAME} mutual_chap's: a secret that authenticates initiators must not authenticate the target (RFC 7143 §9.2.1)")
    );
    assert!(!c.toml.contains("shared-secret") && !c.said.contains("shared-secret"));
}

/// An RBD LUN's ceph.conf that is not there.
#[test]
fn rbd_configuration_files() {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("rbd:pool/image,conf={}/ceph.conf", dir.path().display());
    let c = check(&["--name", NAME, "--lun", &spec]);
    c.refused();
    assert!(
        c.said
            .lines()
            .any(|l| l.starts_with(&format!("error: target {NAME} LUN 0: conf="))),
        "{}",
        c.said
    );
}

/// Beside the daemon it checks: the served file is in use by that
/// daemon (information, not an error), its portal is listened on (a
/// warning), its socket answers (a note); the check exits 0 and the
/// daemon serves on, its lock and socket its own.
#[test]
fn beside_the_running_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("a.img");
    let sock = dir.path().join("admin.sock");
    let spec = format!("file:{},size=4MiB", img.display());
    let mut t = Target::start(&["--name", NAME, "--lun", &spec, "--admin-socket", s(&sock)]);
    let portal = t.addr.to_string();
    let c = check(&[
        "--name",
        NAME,
        "--lun",
        &spec,
        "--listen",
        &portal,
        "--admin-socket",
        s(&sock),
    ]);
    c.ok();
    assert_eq!(
        c.line("in use by"),
        format!(
            "note: target {NAME} LUN 0: in use by process {} (ironlun), which holds its lock (the daemon of this configuration, if it runs: another daemon would be refused it)",
            t.child.id()
        )
    );
    assert!(c
        .line("something listens on")
        .starts_with(&format!("warning: listen {portal}")));
    assert!(c.line("a daemon answers").starts_with("note: admin_socket"));
    // The daemon goes on: its socket answers and its file stays locked.
    let (rc, out) = run(
        support::ironlun_bin(),
        &["admin", "--socket", s(&sock), "--json", "state"],
    );
    assert_eq!(rc, 0, "{out}");
    let flock = tool("flock", "util-linux");
    let (rc, _) = run(&flock, &["-n", s(&img), "true"]);
    assert_ne!(rc, 0, "the served file's lock was lost");
    assert_eq!(t.terminate(Duration::from_secs(30)), Some(0), "{}", t.log());
}

/// Standard output closed before the configuration is written (`--check
/// | head -1` once head has gone): the problems and exit status 2 still
/// come.
#[test]
fn a_closed_output_does_not_hide_the_verdict() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: pipe(2) just made both descriptors; each is owned once.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    let out = Command::new(support::ironlun_bin())
        .args([
            "target",
            "--check",
            "--name",
            NAME,
            "--lun",
            "block:/nonexistent/sdz",
        ])
        .stdout(std::process::Stdio::from(write))
        .output()
        .unwrap();
    let said = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("sdz: no such device"), "{said}");
    assert!(said.contains("1 problem"), "{said}");
}
