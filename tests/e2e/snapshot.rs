//! Snapshots and clones (issue 39, docs/snapshots.md) with the real
//! binary, real stores and real clients: a `file:` LUN on an XFS made
//! with reflink (a loop device the test formats and mounts) and an
//! `rbd:` LUN on a single-node Ceph (tests/support/ceph.rs). Each writes
//! pattern A, takes a snapshot, writes B, exports the snapshot as a LUN
//! of its own and reads A there while LUN 0 holds B; rolls back (refused
//! while a session has the LUN, then forced: the session is told
//! CAPACITY DATA HAS CHANGED and MEDIUM MAY HAVE CHANGED) and reads A;
//! clones the snapshot and writes the clone, which diverges alone; and
//! deletes the snapshot, which frees it. A verifying `ironlun bench`
//! runs while a snapshot is taken every second and ends with no error
//! and no mismatch.
//!
//! Without root or loop devices, or without Ceph, the tests skip loudly
//! (tests/support/skip.rs: they fail instead where every test is
//! required).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;
use crate::support::ceph;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::xfs::Xfs;
use support::{run, Raw, Target};

const NAME: &str = "iqn.2026-11.test:t";
const INIT: &str = "iqn.2026-11.test:init";
const LUN_BYTES: usize = 16 << 20;
const TUR: [u8; 6] = [0; 6];

fn ironlun(args: &[&str]) -> (i32, String) {
    run(support::ironlun_bin(), args)
}

/// `ironlun admin --socket SOCK ARGS`: exit status and output.
fn admin_rc(sock: &Path, args: &[&str]) -> (i32, String) {
    let mut all = vec!["admin", "--socket", sock.to_str().unwrap()];
    all.extend_from_slice(args);
    ironlun(&all)
}

fn admin(sock: &Path, args: &[&str]) -> String {
    let (rc, out) = admin_rc(sock, args);
    assert_eq!(rc, 0, "ironlun admin {args:?}: {out}");
    out
}

/// `len` bytes that differ with `seed` and along the LUN.
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i / 512) as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn write_lun(t: &Target, lun: u16, dir: &Path, data: &[u8]) {
    let src = dir.join("src.bin");
    std::fs::write(&src, data).unwrap();
    let (rc, out) = ironlun(&[
        "dd",
        "--quiet",
        "--if",
        src.to_str().unwrap(),
        "--of",
        &t.url(NAME, lun),
        "--initiator-name",
        INIT,
    ]);
    assert_eq!(rc, 0, "write LUN {lun}: {out}");
}

fn read_lun(t: &Target, lun: u16, dir: &Path) -> Vec<u8> {
    let back = dir.join("back.bin");
    let _ = std::fs::remove_file(&back);
    let (rc, out) = ironlun(&[
        "dd",
        "--quiet",
        "--if",
        &t.url(NAME, lun),
        "--of",
        back.to_str().unwrap(),
        "--initiator-name",
        INIT,
    ]);
    assert_eq!(rc, 0, "read LUN {lun}: {out}");
    std::fs::read(&back).unwrap()
}

fn same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(at) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: first difference at byte {at}");
    }
}

/// ASC/ASCQ of fixed or descriptor sense data.
fn asc(sense: &[u8]) -> (u8, u8) {
    match sense.first().map(|b| b & 0x7f) {
        Some(0x72 | 0x73) => (sense[2], sense[3]),
        _ => (sense[12], sense[13]),
    }
}

/// A session of its own on LUN 0, its pending unit attentions read.
fn session(t: &Target) -> Raw {
    let mut raw = Raw::connect(t.addr);
    raw.login(NAME, [0x40, 0, 0, 0, 0x39, 1], &[("InitiatorName", INIT)]);
    drain(&mut raw);
    raw
}

/// Sends TEST UNIT READY until GOOD; the unit attentions seen before.
fn drain(raw: &mut Raw) -> Vec<(u8, u8)> {
    let mut seen = Vec::new();
    for _ in 0..16 {
        let (status, sense, _) = raw.scsi(&TUR, 0, &[]);
        if status == 0 {
            return seen;
        }
        seen.push(asc(&sense));
    }
    panic!("TEST UNIT READY never GOOD: {seen:x?}");
}

/// The store-specific part of the life cycle: how a LUN, its snapshot
/// and a clone are named.
struct Store {
    /// The spec that exports snapshot `s1` read-only.
    snapshot: String,
    /// The spec that serves clone `c1`.
    clone: String,
}

/// Snapshot, export, rollback, clone and delete on LUN 0 of a target
/// serving `store.lun` with its management socket at `sock`.
fn life_cycle(t: &Target, sock: &Path, dir: &Path, store: &Store) {
    let (a, b, c) = (
        pattern(0xa1, LUN_BYTES),
        pattern(0xb2, LUN_BYTES),
        pattern(0xc3, LUN_BYTES),
    );
    write_lun(t, 0, dir, &a);
    let out = admin(sock, &["snapshot", "create", NAME, "0", "s1"]);
    assert!(
        out.contains(&format!("+ snapshot s1 of target {NAME} LUN 0")),
        "{out}"
    );
    assert!(out.contains("I/O paused"), "{out}");
    assert!(out.contains("export read-only as: "), "{out}");
    write_lun(t, 0, dir, &b);
    let list = admin(sock, &["snapshot", "list"]);
    assert!(
        list.contains(" s1 ") && list.contains(&LUN_BYTES.to_string()),
        "{list}"
    );

    // The snapshot as a read-only LUN of its own, while B is on LUN 0.
    admin(sock, &["lun", "add", NAME, &store.snapshot, "--lun", "1"]);
    same(&read_lun(t, 1, dir), &a, "the exported snapshot");
    same(&read_lun(t, 0, dir), &b, "LUN 0 after the snapshot");
    let (rc, out) = ironlun(&[
        "dd",
        "--quiet",
        "--if",
        dir.join("src.bin").to_str().unwrap(),
        "--of",
        &t.url(NAME, 1),
        "--count",
        "1",
        "--initiator-name",
        INIT,
    ]);
    assert_ne!(rc, 0, "the exported snapshot took a write: {out}");
    assert!(
        out.contains("0x27/0x00"),
        "refused as WRITE PROTECTED: {out}"
    );

    // Rollback: refused while a session has the LUN, then forced, and
    // the session is told (SBC-4 §4.6.3.2, SPC-5 §5.14).
    let mut raw = session(t);
    let (rc, out) = admin_rc(sock, &["snapshot", "rollback", NAME, "0", "s1"]);
    assert_eq!(rc, 1, "{out}");
    assert!(
        out.contains("1 session(s) have the LUN open") && out.contains("--force"),
        "{out}"
    );
    same(
        &read_lun(t, 0, dir),
        &b,
        "a refused rollback changed nothing",
    );
    drain(&mut raw);
    let out = admin(sock, &["--force", "snapshot", "rollback", NAME, "0", "s1"]);
    assert!(out.contains("rolled back to snapshot s1"), "{out}");
    let told = drain(&mut raw);
    assert!(
        told.contains(&(0x2a, 0x09)) && told.contains(&(0x28, 0x00)),
        "unit attentions after the rollback: {told:x?}"
    );
    same(&read_lun(t, 0, dir), &a, "LUN 0 after the rollback");

    // A clone is an ordinary writable LUN that diverges alone.
    let out = admin(sock, &["snapshot", "clone", NAME, "0", "s1", "c1"]);
    assert!(out.contains("+ clone c1 of snapshot s1"), "{out}");
    admin(sock, &["lun", "add", NAME, &store.clone, "--lun", "2"]);
    same(&read_lun(t, 2, dir), &a, "the clone as made");
    write_lun(t, 2, dir, &c);
    same(&read_lun(t, 2, dir), &c, "the clone after its write");
    same(&read_lun(t, 0, dir), &a, "LUN 0 after the clone's write");
    same(
        &read_lun(t, 1, dir),
        &a,
        "the snapshot after the clone's write",
    );

    // Deleting the snapshot (its export removed first) frees it.
    admin(sock, &["lun", "remove", NAME, "1"]);
    let out = admin(sock, &["snapshot", "delete", NAME, "0", "s1"]);
    assert!(out.contains("- snapshot s1"), "{out}");
    let list = admin(sock, &["snapshot", "list"]);
    assert!(!list.contains(" s1 "), "{list}");
    let (rc, out) = admin_rc(sock, &["snapshot", "delete", NAME, "0", "s1"]);
    assert_eq!(rc, 1, "a second delete finds nothing: {out}");
    drop(raw);
}

fn target(sock: &Path, luns: &[&str]) -> Target {
    let mut args = vec!["--name", NAME, "--admin-socket", sock.to_str().unwrap()];
    for l in luns {
        args.extend(["--lun", l]);
    }
    Target::start(&args)
}

#[test]
fn file_snapshots_on_a_reflink_xfs() {
    let Some(xfs) = Xfs::make() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("admin.sock");
    let img = xfs.mnt.join("lun.img");
    let spec = format!("file:{},size=16MiB", img.display());
    // LUN 3 is a RAM LUN; LUN 4 a file on the test's own directory,
    // whatever file system that is.
    let plain = dir.path().join("plain.img");
    let plain_spec = format!("file:{},size=1MiB", plain.display());
    let t = target(&sock, &[&spec]);
    admin(&sock, &["lun", "add", NAME, "ram:1MiB", "--lun", "3"]);
    let store = Store {
        snapshot: format!("file:{}/lun.img.snapshots/s1,ro", xfs.mnt.display()),
        clone: format!("file:{}/c1", xfs.mnt.display()),
    };
    life_cycle(&t, &sock, dir.path(), &store);
    assert!(!xfs.mnt.join("lun.img.snapshots/s1").exists());

    // A snapshot whose blocks nothing else shares frees them when
    // deleted: B overwrites every block after it.
    admin(&sock, &["snapshot", "create", NAME, "0", "s2"]);
    write_lun(&t, 0, dir.path(), &pattern(0xd4, LUN_BYTES));
    let before = xfs.free_bytes();
    admin(&sock, &["snapshot", "delete", NAME, "0", "s2"]);
    // XFS frees an unlinked file's blocks in the background (its inode
    // garbage collection): wait for it, within a bound far above it.
    let freed = |after: u64| after >= before + (LUN_BYTES as u64) / 2;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut after = xfs.free_bytes();
    while !freed(after) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        after = xfs.free_bytes();
    }
    assert!(
        freed(after),
        "deleting s2 freed {} bytes",
        after.saturating_sub(before)
    );

    // A consistency group: both LUNs at one instant, or neither.
    let two = format!("file:{},size=1MiB", xfs.mnt.join("two.img").display());
    admin(&sock, &["lun", "add", NAME, &two, "--lun", "5"]);
    let out = admin(&sock, &["snapshot", "create", NAME, "0,5", "g1"]);
    assert!(out.contains("LUN 0") && out.contains("LUN 5"), "{out}");
    assert!(xfs.mnt.join("lun.img.snapshots/g1").exists());
    assert!(xfs.mnt.join("two.img.snapshots/g1").exists());
    let (rc, out) = admin_rc(&sock, &["snapshot", "create", NAME, "0,3", "g2"]);
    assert_eq!(rc, 1, "a group with a RAM LUN: {out}");
    assert!(
        !xfs.mnt.join("lun.img.snapshots/g2").exists(),
        "half a group"
    );

    // What cannot take a snapshot says why.
    let (rc, out) = admin_rc(&sock, &["snapshot", "create", NAME, "3", "x"]);
    assert_eq!(rc, 1, "{out}");
    assert!(
        out.contains("a ram LUN has no snapshots: its blocks live in the daemon's memory"),
        "{out}"
    );
    admin(&sock, &["lun", "add", NAME, &plain_spec, "--lun", "4"]);
    let (rc, out) = admin_rc(&sock, &["snapshot", "create", NAME, "4", "x"]);
    let fs = run("stat", &["-f", "-c", "%T", dir.path().to_str().unwrap()]).1;
    if fs.trim() == "xfs" || fs.trim() == "btrfs" {
        assert_eq!(rc, 0, "{fs}: {out}");
    } else {
        assert_eq!(rc, 1, "{out}");
        assert!(
            out.contains("cannot share a file's blocks")
                && out.contains("XFS with reflink=1 or btrfs"),
            "{out}"
        );
        // A group whose second LUN fails keeps nothing of the first.
        let (rc, out) = admin_rc(&sock, &["snapshot", "create", NAME, "0,4", "g3"]);
        assert_eq!(rc, 1, "{out}");
        assert!(
            !xfs.mnt.join("lun.img.snapshots/g3").exists(),
            "half a group"
        );
    }
    // Names that could reach another path are refused (exit status 2).
    for bad in ["../x", "a/b", ".x", "-x", &"n".repeat(65)] {
        let (rc, out) = admin_rc(&sock, &["snapshot", "create", "--", NAME, "0", bad]);
        assert_eq!(rc, 2, "{bad}: {out}");
        assert!(out.contains("snapshot name"), "{out}");
    }
    drop(t);
}

/// The bench's self-checking block (crates/ironlun-bench/src/verify.rs):
/// magic "ILVB", crc32c of the rest, LBA, generation, all big-endian.
const VERIFY_MAGIC: u32 = 0x494c_5642;

/// The generation of each 512-byte block of a snapshot of a LUN the
/// bench wrote: 0 for a block it never wrote (all zeros); a panic for a
/// block that is neither zeros nor a whole, valid block of its own LBA
/// (a torn or misplaced write caught by the snapshot).
fn generations(snapshot: &[u8], what: &str) -> Vec<u64> {
    let be = |b: &[u8], at: usize, n: usize| {
        b[at..at + n]
            .iter()
            .fold(0u64, |v, x| (v << 8) | u64::from(*x))
    };
    snapshot
        .chunks(512)
        .enumerate()
        .map(|(lba, b)| {
            if be(b, 0, 4) != u64::from(VERIFY_MAGIC) {
                assert!(
                    b.iter().all(|x| *x == 0),
                    "{what}: LBA {lba} is neither zeros nor a bench block"
                );
                return 0;
            }
            assert_eq!(
                be(b, 4, 4),
                u64::from(crc32c::crc32c(&b[8..])),
                "{what}: LBA {lba}: torn block"
            );
            assert_eq!(
                be(b, 8, 8),
                lba as u64,
                "{what}: LBA {lba}: misplaced block"
            );
            be(b, 16, 8)
        })
        .collect()
}

/// `CLOCK_MONOTONIC` now in ns: the clock of the bench's write log
/// (crates/ironlun-bench/src/verify_log.rs), which every process shares.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) },
        0
    );
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One write of the bench's write log, for one block.
#[derive(Clone, Copy)]
struct Write {
    issued: u64,
    acked: u64,
    generation: u64,
    ok: bool,
}

/// The bench's write log (`--verify-log`) by 512-byte block: every write
/// that covered it, oldest generation first.
fn writes_by_block(log: &str, blocks: usize) -> Vec<Vec<Write>> {
    assert!(!log.contains("not logged"), "the write log was cut");
    let mut by: Vec<Vec<Write>> = vec![Vec::new(); blocks];
    for line in log.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
        let w = Write {
            issued: f[0],
            acked: f[1],
            generation: f[5],
            ok: f[6] == 1,
        };
        for b in f[3]..f[3] + f[4] {
            by[b as usize].push(w);
        }
    }
    for ws in &mut by {
        ws.sort_by_key(|w| w.generation);
    }
    by
}

/// The oldest generation block `ws`'s content may have once write `w`
/// is acknowledged: `w`'s, unless an older write was in flight with it
/// (the target may have applied that one last, SAM-5 §8.6).
fn floor_after(ws: &[Write], w: &Write) -> u64 {
    ws.iter()
        .filter(|x| x.generation < w.generation && x.acked > w.issued)
        .map(|x| x.generation)
        .fold(w.generation, u64::min)
}

/// Snapshot `what`, taken by a create call that began at `from` and
/// returned at `to` (CLOCK_MONOTONIC ns), is one point in time of the
/// bench's writes: each block holds a generation the bench had issued
/// for that block by `to`, no older than what it had acknowledged there
/// before `from` (zeros only where it had acknowledged nothing).
/// Returns how many blocks had such a floor.
fn one_instant(gens: &[u64], writes: &[Vec<Write>], (from, to): (u64, u64), what: &str) -> usize {
    let mut floors = 0;
    for (lba, (g, ws)) in gens.iter().zip(writes).enumerate() {
        let floor = ws
            .iter()
            .filter(|w| w.ok && w.acked < from)
            .map(|w| floor_after(ws, w))
            .max()
            .unwrap_or(0);
        floors += usize::from(floor > 0);
        assert!(
            *g >= floor,
            "{what}: LBA {lba} holds generation {g}, older than {floor}, which the bench had acknowledged before the snapshot began"
        );
        if *g > 0 {
            assert!(
                ws.iter().any(|w| w.generation == *g && w.issued < to),
                "{what}: LBA {lba} holds generation {g}, which the bench had not issued there when the snapshot ended"
            );
        }
    }
    floors
}

/// Snapshots taken one after another of a LUN the bench writes, each
/// with the instants its create call began and returned: each holds
/// whole, valid blocks, each is one point in time of the bench's
/// writes as its write log has them ([`one_instant`]), and no block of
/// a snapshot is newer than the same block of a later one.
fn points_in_time(snapshots: &[Vec<u8>], windows: &[(u64, u64)], log: &str) {
    let gens: Vec<Vec<u64>> = snapshots
        .iter()
        .enumerate()
        .map(|(k, s)| generations(s, &format!("b{k}")))
        .collect();
    let writes = writes_by_block(log, gens.first().map_or(0, Vec::len));
    assert!(
        writes.iter().any(|w| !w.is_empty()),
        "the write log has no write"
    );
    let floors: usize = gens
        .iter()
        .zip(windows)
        .enumerate()
        .map(|(k, (g, window))| one_instant(g, &writes, *window, &format!("b{k}")))
        .sum();
    assert!(
        floors > 0,
        "no snapshot began after a write was acknowledged"
    );
    for (k, pair) in gens.windows(2).enumerate() {
        for (lba, (a, b)) in pair[0].iter().zip(&pair[1]).enumerate() {
            assert!(
                a <= b,
                "LBA {lba}: generation {a} in b{k}, {b} in b{}",
                k + 1
            );
        }
    }
    let written: usize = gens
        .last()
        .map_or(0, |g| g.iter().filter(|x| **x > 0).count());
    assert!(
        written > 0,
        "the last snapshot holds no block the bench wrote"
    );
}

/// A verifying bench on LUN 0 of `t` while a snapshot is taken every
/// second: no error, no mismatch, every snapshot listed; each one's
/// pause printed. Returns, for each snapshot taken (`b0`, `b1`, …), the
/// instants its create call began and returned, and the bench's write
/// log.
fn bench_under_snapshots(t: &Target, sock: &Path, dir: &Path) -> (Vec<(u64, u64)>, String) {
    let json = dir.join("bench.json");
    let wlog = dir.join("writes.log");
    let mut bench = Command::new(support::ironlun_bin())
        .args(["bench", &t.url(NAME, 0), "--verify"])
        .args(["--verify-log", wlog.to_str().unwrap()])
        .args([
            "--bs", "4k", "--read", "50", "--random", "100", "--qd", "16",
        ])
        .args([
            "--time",
            "6s",
            "--ramp",
            "0",
            "--json",
            json.to_str().unwrap(),
        ])
        .args(["--initiator-name", INIT])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The snapshots start once the bench is logged in, and go on, one a
    // second, until it ends: however slow the machine, at least the
    // first is taken while the bench runs.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !admin(sock, &["sessions"]).contains(INIT) {
        assert!(Instant::now() < deadline, "the bench never logged in");
        assert!(bench.try_wait().unwrap().is_none(), "the bench ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The first snapshot waits for acknowledged writes (the log's first
    // buffer reaching the file), so that it has some to hold, however
    // slowly a loaded machine gets the bench going.
    while std::fs::metadata(&wlog).map_or(0, |m| m.len()) == 0
        && bench.try_wait().unwrap().is_none()
    {
        assert!(Instant::now() < deadline, "the bench acknowledged no write");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut windows = Vec::new();
    let start = Instant::now();
    while windows.is_empty() || (bench.try_wait().unwrap().is_none() && windows.len() < 30) {
        let name = format!("b{}", windows.len());
        let from = monotonic_ns();
        let out = admin(sock, &["snapshot", "create", NAME, "0", &name]);
        windows.push((from, monotonic_ns()));
        let pause = out.lines().find(|l| l.contains("I/O paused")).unwrap_or("");
        let pause = pause.split(';').next().unwrap_or("");
        eprintln!("{name} at {:.1} s: {pause}", start.elapsed().as_secs_f64());
        std::thread::sleep(Duration::from_secs(1));
    }
    let st = bench.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(bench.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(st.success(), "bench: {err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let w = &v["workloads"][0];
    assert_eq!(w["errors"], 0, "{w}");
    assert!(w["verify"]["checked_blocks"].as_u64().unwrap() > 0, "{w}");
    assert_eq!(w["verify"]["mismatch_count"], 0, "{}", w["verify"]);
    let list = admin(sock, &["snapshot", "list"]);
    let rows = list.lines().filter(|l| l.contains(" b")).count();
    assert_eq!(rows, windows.len(), "{list}");
    assert!(
        t.log().contains("snapshot b0 of target"),
        "the pause is logged"
    );
    (windows, std::fs::read_to_string(&wlog).unwrap())
}

#[test]
fn a_verifying_bench_runs_on_while_a_snapshot_is_taken_every_second() {
    let Some(xfs) = Xfs::make() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("admin.sock");
    let spec = format!("file:{},size=64MiB", xfs.mnt.join("lun.img").display());
    let t = target(&sock, &[&spec]);
    let (windows, log) = bench_under_snapshots(&t, &sock, dir.path());
    let snaps: Vec<Vec<u8>> = (0..windows.len())
        .map(|k| std::fs::read(xfs.mnt.join(format!("lun.img.snapshots/b{k}"))).unwrap())
        .collect();
    points_in_time(&snaps, &windows, &log);
}

#[test]
fn rbd_snapshots_against_a_real_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ceph) = ceph::Ceph::start(&dir.path().join("ceph")) else {
        return; // skipped loudly by Ceph::start
    };
    ceph.rbd(&["create", "--size", "16M", "rbd/snapped"]);
    let conf = format!(",conf={}", ceph.conf.display());
    let sock = dir.path().join("admin.sock");
    let spec = format!("rbd:rbd/snapped{conf}");
    let t = target(&sock, &[&spec]);
    let store = Store {
        snapshot: format!("rbd:rbd/snapped@s1{conf},ro"),
        clone: format!("rbd:rbd/c1{conf}"),
    };
    life_cycle(&t, &sock, dir.path(), &store);
    let snaps = ceph.rbd(&["snap", "ls", "rbd/snapped"]);
    assert!(!snaps.contains("s1"), "rbd snap ls: {snaps}");
    let info = ceph.rbd(&["info", "rbd/c1"]);
    assert!(
        info.contains("parent: rbd/snapped@"),
        "a format-2 clone: {info}"
    );
    drop(t);
    ceph.rbd(&["create", "--size", "64M", "rbd/busy"]);
    let t = target(&sock, &[&format!("rbd:rbd/busy{conf}")]);
    let (windows, log) = bench_under_snapshots(&t, &sock, dir.path());
    let snaps: Vec<Vec<u8>> = (0..windows.len())
        .map(|k| {
            let out = dir.path().join(format!("b{k}.img"));
            ceph.rbd(&["export", &format!("rbd/busy@b{k}"), out.to_str().unwrap()]);
            std::fs::read(&out).unwrap()
        })
        .collect();
    points_in_time(&snaps, &windows, &log);
}

/// The configuration of the schedule test: one file LUN, with
/// `schedule` (TOML keys) under it.
fn schedule_config(img: &Path, schedule: &str) -> String {
    format!(
        "[[target]]\nname = \"{NAME}\"\n[[target.lun]]\nspec = \"file:{},size=4MiB\"\n{schedule}",
        img.display()
    )
}

/// The names in a LUN's `.snapshots` directory, sorted.
fn snapshot_files(img: &Path) -> Vec<String> {
    let dir = PathBuf::from(format!("{}.snapshots", img.display()));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// LUN 0's `snapshot_schedule` in `admin --json state` (null without).
fn schedule_state(sock: &Path) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(&admin(sock, &["--json", "state"])).unwrap();
    v["targets"][0]["luns"][0]["snapshot_schedule"].clone()
}

/// The scheduled snapshots the log says were taken, in order.
fn taken_in_log(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.split("scheduled snapshot ").nth(1))
        .filter_map(|rest| rest.split(' ').next())
        .filter(|n| n.starts_with("auto-"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_schedule_takes_snapshots_keeps_its_newest_and_stops_on_a_live_change() {
    let Some(xfs) = Xfs::make() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("admin.sock");
    let img = xfs.mnt.join("sched.img");
    let cfg = dir.path().join("t.toml");
    let every = "snapshot_every = \"1s\"\nsnapshot_keep = 2\n";
    std::fs::write(&cfg, schedule_config(&img, every)).unwrap();
    let (rc, out) = ironlun(&["target", "--config", cfg.to_str().unwrap(), "--check"]);
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("snapshot_every = \"1s\"") && out.contains("snapshot_keep = 2"),
        "--check writes the schedule back: {out}"
    );
    let t = Target::start(&[
        "--config",
        cfg.to_str().unwrap(),
        "--admin-socket",
        sock.to_str().unwrap(),
        "--stats",
        "127.0.0.1:0",
    ]);
    admin(&sock, &["snapshot", "create", NAME, "0", "by-hand"]);

    // Snapshots appear, one a second; once four are taken, the oldest
    // two are gone (retention after the third and the fourth), the
    // newest two and the hand-made one are there.
    let deadline = Instant::now() + Duration::from_secs(120);
    while schedule_state(&sock)["taken"].as_u64().unwrap_or(0) < 4 {
        assert!(Instant::now() < deadline, "{}", t.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let state = schedule_state(&sock);
    assert_eq!(state["failures"], 0, "{state}");
    assert_eq!(state["kept"], 2, "{state}");
    let last = state["last"]["snapshot"].as_str().unwrap().to_owned();
    assert!(state["last"]["paused_ms"].as_f64().is_some(), "{state}");
    // Later runs may go on meanwhile: the files hold two of the
    // schedule's, or three while a run is between its snapshot and its
    // retention, and never the first two it took.
    let files = snapshot_files(&img);
    assert!(files.contains(&"by-hand".to_owned()), "{files:?}");
    let autos: Vec<&String> = files.iter().filter(|n| n.starts_with("auto-")).collect();
    assert!((2..=3).contains(&autos.len()), "{files:?}");
    for name in autos.iter().copied().chain([&last]) {
        let logged = format!("scheduled snapshot {name} of target {NAME} LUN 0");
        assert!(t.wait_log(&logged, Duration::from_secs(30)), "{}", t.log());
    }
    let taken = taken_in_log(&t.log());
    assert!(taken.len() >= 4, "{taken:?}");
    for gone in &taken[..2] {
        assert!(!files.contains(gone), "{gone} kept: {files:?}");
    }
    let shown = admin(&sock, &["state"]);
    assert!(
        shown.contains("snapshots every 1s, keep 2 (auto-…): last auto-"),
        "{shown}"
    );
    let list = admin(&sock, &["snapshot", "list"]);
    assert!(
        list.contains(&format!("{NAME} LUN 0: snapshots every 1s, keep 2")),
        "{list}"
    );
    let (status, metrics) = support::http_get(t.stats_addr(), "/metrics");
    assert_eq!(status, 200);
    let series = format!("{{target=\"{NAME}\",lun=\"0\"}}");
    let sample = |name: &str| -> f64 {
        let line = metrics
            .lines()
            .find(|l| l.starts_with(&format!("{name}{series} ")))
            .unwrap_or_else(|| panic!("no {name}: {metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(sample("ironlun_lun_snapshot_schedule_taken_total") >= 4.0);
    assert_eq!(sample("ironlun_lun_snapshot_schedule_failures_total"), 0.0);
    assert_eq!(sample("ironlun_lun_snapshot_schedule_kept"), 2.0);
    assert!(sample("ironlun_lun_snapshot_schedule_last_success_timestamp_seconds") > 1.7e9);

    // A live change removes the schedule: once its last run has ended
    // (the state no longer shows it), no snapshot is taken.
    std::fs::write(&cfg, schedule_config(&img, "")).unwrap();
    let out = admin(&sock, &["config", "reload"]);
    assert!(
        out.contains(&format!("~ target {NAME} LUN 0: no snapshot schedule")),
        "{out}"
    );
    while !schedule_state(&sock).is_null() {
        assert!(Instant::now() < deadline, "{}", t.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let before = snapshot_files(&img);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        snapshot_files(&img),
        before,
        "a snapshot after the schedule went"
    );
    assert!(before.contains(&"by-hand".to_owned()), "{before:?}");
    drop(t);
}
