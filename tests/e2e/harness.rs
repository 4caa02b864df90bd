//! The test harness's own checks: the helpers that decide "closed",
//! "skipped" and "ran" must not pass on silence. Against stub peers on
//! loopback and fabricated inputs, never the daemon.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ironlun_wire::{encode_frame, Digests, NopIn, Pdu};
use support::{closed_within, End, Raw, Target};

/// A raw client connected to a stub that has accepted it: the stub's end
/// of the connection is the test's to hold, write to or drop.
fn stub_pair(read_timeout: Duration) -> (Raw, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = Raw::connect(l.local_addr().unwrap());
    c.stream.set_read_timeout(Some(read_timeout)).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

fn nop_in() -> Vec<u8> {
    let mut out = BytesMut::new();
    let pdu = Pdu::NopIn(NopIn {
        itt: 0xffff_ffff,
        ttt: 7,
        ..Default::default()
    });
    encode_frame(&pdu.encode(), &[], &[], Digests::default(), &mut out).unwrap();
    out.to_vec()
}

#[test]
fn a_peer_that_goes_silent_has_not_closed() {
    let (mut c, held) = stub_pair(Duration::from_millis(300));
    let started = Instant::now();
    assert_eq!(c.end(), End::TimedOut);
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert!(!c.closed(), "a read timeout counted as a close");
    // Even after a PDU.
    let (mut c, mut held2) = stub_pair(Duration::from_millis(300));
    held2.write_all(&nop_in()).unwrap();
    assert!(!c.closed());
    drop((held, held2));
}

#[test]
fn eof_and_reset_are_closed_even_after_pdus() {
    let (mut c, s) = stub_pair(Duration::from_secs(5));
    drop(s);
    assert_eq!(c.end(), End::Closed);

    let (mut c, mut s) = stub_pair(Duration::from_secs(5));
    s.write_all(&nop_in()).unwrap();
    s.write_all(&nop_in()).unwrap();
    drop(s);
    assert!(c.closed());

    // SO_LINGER with a zero timeout: close(2) sends a reset.
    let (mut c, s) = stub_pair(Duration::from_secs(5));
    reset(s);
    assert_eq!(c.end(), End::Closed);
}

fn reset(s: TcpStream) {
    use std::os::unix::io::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt(2) on a socket we own, with a valid linger value
    // and its size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::addr_of!(linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    drop(s);
}

#[test]
fn bytes_that_are_not_a_pdu_are_not_a_close() {
    let (mut c, mut s) = stub_pair(Duration::from_secs(5));
    let mut junk = [0u8; 48];
    junk[0] = 0x1e; // no such opcode
    s.write_all(&junk).unwrap();
    assert!(matches!(c.end(), End::Undecodable(_)));
    let (mut c, mut s) = stub_pair(Duration::from_secs(5));
    s.write_all(&junk).unwrap();
    assert!(!c.closed());
}

#[test]
fn a_peer_that_keeps_talking_is_reported_within_a_bound() {
    let (mut c, mut s) = stub_pair(Duration::from_millis(300));
    let talker = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until && s.write_all(&nop_in()).is_ok() {
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let started = Instant::now();
    assert_eq!(c.end(), End::StillSending);
    assert!(started.elapsed() < Duration::from_secs(3));
    drop(c);
    talker.join().unwrap();
}

#[test]
fn closed_within_counts_only_eof_or_reset() {
    let (c, held) = stub_pair(Duration::from_secs(5));
    let mut c = c.stream;
    assert!(!closed_within(&mut c, Duration::from_millis(200)));
    let (c2, mut s2) = stub_pair(Duration::from_secs(5));
    let mut c2 = c2.stream;
    s2.write_all(b"x").unwrap();
    assert!(!closed_within(&mut c2, Duration::from_secs(5)));
    drop(held);
    assert!(closed_within(&mut c, Duration::from_secs(5)));
    reset(s2);
    assert!(closed_within(&mut c2, Duration::from_secs(5)));
}

// --- a target's log when it stops ----------------------------------------

/// A stand-in target: says where it listens, then writes `lines` to its
/// log, then waits to be killed.
fn fake_target(lines: &[&str]) -> Target {
    let script = "echo 'listening on 127.0.0.1:9' >&2; \
                  for l in \"$@\"; do echo \"$l\" >&2; done; exec sleep 60";
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", script, "fake-target"]).args(lines);
    let t = Target::spawn(cmd, 1);
    let last = lines.last().unwrap();
    assert!(t.wait_log(last, Duration::from_secs(10)), "{}", t.log());
    t
}

#[test]
fn a_target_that_panicked_fails_the_test_when_it_stops_showing_the_panic() {
    let t = fake_target(&[
        "INFO a session",
        "thread 'tokio-runtime-worker' panicked at src/x.rs:1:2:",
        "index out of bounds",
        "INFO the end",
    ]);
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(t)));
    let payload = stopped.expect_err("a panicked target passed");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    for want in [
        "the target panicked (1 time(s))",
        "panicked at src/x.rs:1:2:",
        "index out of bounds",
        "INFO the end",
    ] {
        assert!(msg.contains(want), "{want:?} not in:\n{msg}");
    }
    // A clean log stops quietly.
    drop(fake_target(&["INFO a session", "INFO the end"]));
    assert_eq!(support::panics_in("a\nb\n"), None);
}

// --- scripts/verdicts.sh ------------------------------------------------

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `script` in bash from the repository root with
/// scripts/verdicts.sh (and scripts/deps.sh) sourced, the environment's CI
/// removed and `env` added.
fn bash(script: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("/bin/bash");
    cmd.current_dir(repo())
        .arg("-c")
        .arg(format!(
            "set -euo pipefail\n. scripts/deps.sh\n. scripts/verdicts.sh\n{script}"
        ))
        .env_remove("CI")
        .env_remove("REQUIRE_ALL")
        .env_remove("IRONLUN_REQUIRE_ALL")
        .env_remove("IRONLUN_SKIP_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A PATH of links to every program in the system directories except
/// QEMU, cargo, cargo-deb and Ceph's, with apt-get and sudo replaced by
/// stubs that fail: a machine where neither qemu-system-x86, cargo-deb
/// nor Ceph is installed or installable.
fn path_without_qemu(dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for sys in [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ] {
        let Ok(entries) = std::fs::read_dir(sys) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let n = name.to_string_lossy();
            if n.starts_with("qemu-system")
                || n.starts_with("ceph")
                || ["apt-get", "sudo", "cargo", "cargo-deb", "rbd", "monmaptool"].contains(&&*n)
            {
                continue;
            }
            let link = bin.join(&name);
            if !link.exists() {
                let _ = std::os::unix::fs::symlink(e.path(), link);
            }
        }
    }
    for stub in ["apt-get", "sudo"] {
        let p: PathBuf = bin.join(stub);
        std::fs::write(
            &p,
            "#!/bin/sh\necho \"E: $0 is a test stub\" >&2\nexit 100\n",
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin.display().to_string()
}

#[test]
fn the_vm_tier_without_qemu_fails_under_ci_and_is_listed_locally() {
    let dir = tempfile::tempdir().unwrap();
    let path = path_without_qemu(dir.path());
    let script = "vm_tier\necho REACHED-THE-END\nsummary";
    for env in [
        vec![("PATH", path.as_str()), ("CI", "true")],
        vec![("PATH", path.as_str()), ("REQUIRE_ALL", "1")],
    ] {
        let o = bash(script, &env);
        let out = text(&o);
        assert!(!o.status.success(), "{env:?}: passed without QEMU:\n{out}");
        assert!(!out.contains("REACHED-THE-END"), "{out}");
        assert!(
            out.contains("FAILED: kernel initiator VM tests cannot run here"),
            "{out}"
        );
        assert!(out.contains("qemu-system-x86"), "{out}");
    }
    // Locally: skipped, said at once and again in the summary.
    let o = bash(script, &[("PATH", path.as_str())]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("*** SKIPPED: kernel initiator VM tests"),
        "{out}"
    );
    assert!(!out.contains("all tests passed"), "{out}");
    assert!(
        out.contains("1 tier(s) did NOT run:\n  SKIPPED kernel initiator VM tests"),
        "{out}"
    );
}

#[test]
fn the_package_tier_without_cargo_deb_fails_under_ci_and_is_listed_locally() {
    let dir = tempfile::tempdir().unwrap();
    let path = path_without_qemu(dir.path());
    let script = "deb_tier\necho REACHED-THE-END\nsummary";
    let o = bash(script, &[("PATH", path.as_str()), ("CI", "true")]);
    let out = text(&o);
    assert!(!o.status.success(), "passed without cargo-deb:\n{out}");
    assert!(!out.contains("REACHED-THE-END"), "{out}");
    assert!(
        out.contains("FAILED: Debian package cannot run here: cargo-deb is not installable here: cargo install cargo-deb failed"),
        "{out}"
    );
    let o = bash(script, &[("PATH", path.as_str())]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("*** SKIPPED: Debian package"), "{out}");
    assert!(
        out.contains("1 tier(s) did NOT run:\n  SKIPPED Debian package"),
        "{out}"
    );
}

#[test]
fn without_ceph_the_packages_step_fails_under_ci_and_the_cluster_script_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = path_without_qemu(dir.path());
    let script = "ceph_packages\necho REACHED-THE-END\nsummary";
    let o = bash(script, &[("PATH", path.as_str()), ("CI", "true")]);
    let out = text(&o);
    assert!(!o.status.success(), "passed without Ceph:\n{out}");
    assert!(!out.contains("REACHED-THE-END"), "{out}");
    assert!(
        out.contains("FAILED: Ceph RBD tests (tests/e2e/ceph_cluster.rs, tests/e2e/rbd.rs) cannot run here: Ceph is not installable here: could not install ceph-mon ceph-mgr ceph-osd ceph-common"),
        "{out}"
    );
    let o = bash(script, &[("PATH", path.as_str())]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("*** SKIPPED: Ceph RBD tests"), "{out}");
    assert!(
        out.contains("1 tier(s) did NOT run:\n  SKIPPED Ceph RBD tests"),
        "{out}"
    );

    // tests/support/ceph.rs tells "cannot install" from a failed start
    // by this sentence; nothing is left in DIR.
    let cluster = dir.path().join("cluster");
    let o = Command::new(repo().join("scripts/ceph-cluster"))
        .arg("start")
        .arg(&cluster)
        .env("PATH", &path)
        .output()
        .unwrap();
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("Ceph could not be installed"), "{out}");
    assert!(!cluster.exists(), "{out}");
}

#[test]
fn the_summary_says_all_passed_only_when_nothing_was_skipped() {
    let o = bash("summary", &[]);
    assert_eq!(text(&o), "all tests passed\n");
    let o = bash(
        "skip_tier a 'no x'\nSKIPPED_TIERS+=(\"b: --quick\")\nsummary",
        &[],
    );
    let out = text(&o);
    assert!(o.status.success());
    assert!(
        out.ends_with("2 tier(s) did NOT run:\n  SKIPPED a: no x\n  SKIPPED b: --quick\n"),
        "{out}"
    );
}

#[test]
fn every_tier_required_is_exported_to_cargo_tests_with_a_log_for_their_skips() {
    let show = "echo \"req=${IRONLUN_REQUIRE_ALL:-unset} log=$IRONLUN_SKIP_LOG\"";
    for (env, req) in [
        (vec![("REQUIRE_ALL", "1")], "req=1"),
        (vec![("CI", "true")], "req=1"),
        (vec![], "req=unset"),
    ] {
        let out = text(&bash(show, &env));
        assert!(out.contains(req), "{env:?}: {out}");
        let log = out.trim().rsplit_once("log=").unwrap().1;
        assert!(
            log.starts_with(repo().join("target/test-skips.").to_str().unwrap()),
            "{out}"
        );
    }
    // A script the run starts keeps the run's log.
    let out = text(&bash(show, &[("IRONLUN_SKIP_LOG", "/x/y")]));
    assert!(out.contains("log=/x/y"), "{out}");
}

#[test]
fn the_summary_lists_the_cargo_tests_that_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skips");
    let env = [("IRONLUN_SKIP_LOG", log.to_str().unwrap())];
    // An empty or missing log: nothing skipped.
    assert_eq!(text(&bash("summary", &env)), "all tests passed\n");
    std::fs::write(&log, "").unwrap();
    assert_eq!(text(&bash("summary", &env)), "all tests passed\n");
    std::fs::write(
        &log,
        "e2e x::a_test: a test needing Ceph: not installable\n",
    )
    .unwrap();
    let out = text(&bash("summary", &env));
    assert!(!out.contains("all tests passed"), "{out}");
    assert!(
        out.ends_with(
            "1 cargo test(s) skipped their work:\n  SKIPPED e2e x::a_test: a test needing Ceph: not installable\n"
        ),
        "{out}"
    );
    let out = text(&bash("skip_tier t 'no t'\nsummary", &env));
    assert!(
        out.ends_with(
            "1 tier(s) did NOT run:\n  SKIPPED t: no t\n1 cargo test(s) skipped their work:\n  SKIPPED e2e x::a_test: a test needing Ceph: not installable\n"
        ),
        "{out}"
    );
}

/// Run by [`a_skip_in_a_cargo_test_is_logged_or_fails_when_required`] as
/// a child process (it does nothing otherwise): one skip.
#[test]
#[ignore = "a child of a_skip_in_a_cargo_test_is_logged_or_fails_when_required"]
fn skipping_child() {
    if std::env::var_os("IRONLUN_SKIPPING_CHILD").is_some() {
        support::skip::skip("a stand-in test", "a reason\nin two lines");
    }
}

#[test]
fn a_skip_in_a_cargo_test_is_logged_or_fails_when_required() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skips");
    let child = |env: &[(&str, &str)]| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "harness::skipping_child",
            "--include-ignored",
            "--nocapture",
        ])
        .env("IRONLUN_SKIPPING_CHILD", "1")
        .env("IRONLUN_SKIP_LOG", &log)
        .env_remove("IRONLUN_REQUIRE_ALL")
        .env_remove("CI")
        .envs(env.iter().copied());
        cmd.output().unwrap()
    };
    let o = child(&[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("*** SKIPPED: a stand-in test: a reason"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "e2e harness::skipping_child: a stand-in test: a reason in two lines\n"
    );
    for env in [("IRONLUN_REQUIRE_ALL", "1"), ("CI", "true")] {
        let o = child(&[env]);
        assert!(
            !o.status.success(),
            "{env:?}: a required skip passed: {}",
            text(&o)
        );
        assert!(
            text(&o).contains("a stand-in test cannot run here: a reason"),
            "{}",
            text(&o)
        );
    }
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 1);
    // A skip line stays one line of bounded length.
    let long = "x ".repeat(1000);
    let line = support::skip::verdict("t", "w", &long, false).unwrap();
    assert!(line.len() <= 400 && !line.contains('\n'), "{line}");
}

#[test]
fn scripts_test_refuses_quick_when_every_tier_is_required() {
    for (args, env) in [
        (&["--quick", "--require-all"][..], vec![]),
        (&["--quick"][..], vec![("CI", "true")]),
    ] {
        let o = Command::new(repo().join("scripts/test"))
            .args(args)
            .env_remove("CI")
            .envs(env)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("requires every tier"), "{}", text(&o));
    }
}

#[test]
fn a_fuzz_target_that_ran_nothing_is_not_ok() {
    let dir = tempfile::tempdir().unwrap();
    let log = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.display().to_string()
    };
    let ran = log(
        "ran.log",
        "#2 INITED cov: 10\nDone 1234 runs in 20 second(s)\nstat::number_of_executed_units: 1234\nstat::average_exec_per_sec:     61\n",
    );
    let zero = log(
        "zero.log",
        "INFO: 0 files found\nstat::number_of_executed_units: 0\n",
    );
    let none = log("none.log", "INFO: Seed: 1\n");
    let o = bash(&format!("fuzz_runs {ran}"), &[]);
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "1234\n");
    for bad in [
        zero,
        none,
        dir.path().join("missing.log").display().to_string(),
    ] {
        let o = bash(&format!("fuzz_runs {bad}"), &[]);
        assert!(!o.status.success(), "{bad}: {}", text(&o));
    }
}
