//! scripts/ceph-cluster, the single-node Ceph for the RBD tests and the
//! lab (issue 25 item 3): two clusters side by side, an image written and
//! read back through librbd's own tools, and nothing left behind by stop,
//! nor by a start that fails halfway.
//!
//! Needs Debian's Ceph 16 packages; the script installs them when missing
//! (scripts/deps.sh install_ceph). Where they cannot be installed the
//! tests skip, loudly, and scripts/test's summary lists them; under
//! CI=true or `--require-all` they fail (tests/support/skip.rs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;
use crate::support::ceph;

use ceph::{cluster_script, daemons_of, skipped, Ceph};
use support::random_file;

const MIB: usize = 1 << 20;

/// The monitor's address from `ceph mon dump`.
fn mon_addr(c: &Ceph) -> String {
    let dump = c.ceph(&["mon", "dump"]);
    dump.lines()
        .find(|l| l.contains("mon.a"))
        .unwrap_or_else(|| panic!("no mon.a in: {dump}"))
        .to_owned()
}

/// `rbd bench` ops from its last line ("elapsed: S  ops: N  ops/sec: ...").
fn bench_ops(out: &str) -> u64 {
    let last = out
        .lines()
        .rev()
        .find(|l| l.contains("ops:"))
        .unwrap_or_default();
    let mut words = last.split_whitespace();
    while let Some(w) = words.next() {
        if w == "ops:" {
            return words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        }
    }
    panic!("no ops count in rbd bench's output: {out}");
}

/// Stops `c` and checks it left no daemon and no directory behind; stop
/// again is a no-op that succeeds.
fn stop_clean(mut c: Ceph) {
    assert_eq!(
        daemons_of(&c.conf).len(),
        3,
        "a running cluster has a mon, a mgr and an OSD"
    );
    c.stop();
    assert_eq!(
        daemons_of(&c.conf),
        Vec::<u32>::new(),
        "daemons left running"
    );
    assert!(!c.dir.exists(), "{} is still there", c.dir.display());
    c.stop();
}

#[test]
fn two_clusters_side_by_side_an_image_round_trip_and_a_clean_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let (da, db) = (tmp.path().join("a"), tmp.path().join("b"));
    let second = std::thread::spawn(move || Ceph::start(&db));
    let Some(a) = Ceph::start(&da) else { return };
    let Some(b) = second.join().unwrap() else {
        return;
    };
    assert_ne!(mon_addr(&a), mon_addr(&b), "two clusters on one monitor");

    // The pool the script promises: rbd, one copy, initialised for RBD.
    assert_eq!(
        a.ceph(&["osd", "pool", "get", "rbd", "size"]).trim(),
        "size: 1"
    );
    assert_eq!(
        a.ceph(&["osd", "pool", "get", "rbd", "min_size"]).trim(),
        "min_size: 1"
    );
    assert!(a
        .ceph(&["osd", "pool", "application", "get", "rbd"])
        .contains("\"rbd\""));
    assert_eq!(a.ceph(&["health"]).trim(), "HEALTH_OK");

    // A 64 MiB image, written at random by rbd bench (16 threads of 4 KiB).
    a.rbd(&["create", "--size", "64M", "rbd/made"]);
    assert!(a.rbd(&["info", "rbd/made"]).contains("size 64 MiB"));
    let bench = a.rbd(&[
        "bench",
        "--io-type",
        "write",
        "--io-pattern",
        "rand",
        "--io-size",
        "4K",
        "--io-threads",
        "16",
        "--io-total",
        "8M",
        "rbd/made",
    ]);
    assert_eq!(bench_ops(&bench), 2048, "{bench}");

    // Bytes in and the same bytes out.
    let src = tmp.path().join("src.bin");
    let data = random_file(&src, 64 * MIB);
    a.rbd(&["import", "--no-progress", src.to_str().unwrap(), "rbd/data"]);
    let back = tmp.path().join("back.bin");
    a.rbd(&[
        "export",
        "--no-progress",
        "rbd/data",
        back.to_str().unwrap(),
    ]);
    let got = std::fs::read(&back).unwrap();
    assert_eq!(got.len(), data.len());
    assert!(got == data, "rbd export differs from what rbd import wrote");

    // The other cluster has its own pool.
    assert_eq!(
        a.rbd(&["ls", "rbd"]).split_whitespace().collect::<Vec<_>>(),
        ["data", "made"]
    );
    assert_eq!(b.rbd(&["ls", "rbd"]).trim(), "");

    stop_clean(a);
    stop_clean(b);
}

#[test]
fn a_start_that_fails_halfway_says_why_and_leaves_no_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("small");
    // Too small for BlueFS: the OSD's mkfs fails after the mon and the mgr
    // have started.
    let o = cluster_script("start", &dir, &[("CEPH_CLUSTER_OSD_SIZE", "1M")]);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if skipped(&out) {
        return;
    }
    assert!(!o.status.success(), "started with a 1 MiB OSD:\n{out}");
    assert!(out.contains("ceph-osd --mkfs failed"), "{out}");
    assert!(out.contains("bluefs"), "the OSD log's error lines: {out}");
    assert!(!out.contains("CEPH_CONF="), "{out}");
    let conf = dir.join("ceph.conf");
    assert_eq!(
        daemons_of(&conf),
        Vec::<u32>::new(),
        "daemons left running:\n{out}"
    );
    assert!(
        dir.join("log/mon.a.log").exists(),
        "the logs are kept:\n{out}"
    );
    let o = cluster_script("stop", &dir, &[]);
    assert!(o.status.success());
    assert!(!dir.exists());
}

#[test]
fn a_directory_with_files_of_its_own_is_refused_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mine");
    std::fs::create_dir_all(dir.join("log")).unwrap();
    std::fs::write(dir.join("notes.txt"), b"keep me").unwrap();
    for verb in ["start", "stop"] {
        let o = cluster_script(verb, &dir, &[]);
        let out = String::from_utf8_lossy(&o.stderr).into_owned();
        if skipped(&out) {
            return;
        }
        assert!(
            !o.status.success(),
            "{verb} accepted a directory of someone else's:\n{out}"
        );
        assert!(
            out.contains("holds notes.txt, which no cluster made"),
            "{out}"
        );
        assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"keep me");
        assert!(dir.join("log").is_dir(), "{verb} removed log/");
    }
}
