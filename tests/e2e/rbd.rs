//! RBD LUNs (`rbd:POOL/IMAGE`, issue 25) against a real single-node Ceph
//! started by scripts/ceph-cluster, one cluster for the whole binary,
//! stopped at the end: libiscsi's required families (and the thin
//! provisioning and atomic ones an RBD LUN offers) with no failures,
//! WRITE SAME through librbd's writesame read back, COMPARE AND WRITE
//! offered only as far as librbd's is atomic, every command that must
//! be durable before GOOD flushing librbd (its own counter), a
//! qemu-img round trip, a verifying `ironlun bench`, SIGKILL of the target
//! mid-write with every acknowledged and flushed write surviving, a resize
//! made in Ceph reported as CAPACITY DATA HAS CHANGED, a blocklisted
//! client: fenced for good by default, and with `reconnect=on` a new
//! client whose first SYNCHRONIZE CACHE reports the writes the old one
//! lost, and a lost cluster answered with NOT READY while the session
//! lives on; and `ironlun lab --rbd` on the same cluster.
//!
//! Where Ceph cannot be installed the test skips loudly (listed in
//! scripts/test's summary); under CI=true or `--require-all` it
//! fails (tests/support/ceph.rs). IRONLUN_RBD_LONG=1 runs the whole
//! families of the commands an RBD LUN adds (one test of each by
//! default), the verifying bench for 60 s instead of 3 s and the crash
//! phase ten times longer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;
use crate::support::ceph;
use crate::support::cu;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ceph::Ceph;
use support::{
    first_workload, ironlun_ok, qemu_round_trip, random_file, run, tool, verify_mix_flags, Raw,
    Target,
};

const NAME: &str = "iqn.2026-11.io.ironlun:rbd";
const TUR: [u8; 6] = [0; 6];
const SYNC10: [u8; 10] = [0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0];

fn long() -> bool {
    std::env::var("IRONLUN_RBD_LONG").is_ok_and(|v| v == "1")
}

/// `rbd:rbd/IMAGE` on this cluster (its conf named in the spec).
fn spec(ceph: &Ceph, image: &str, extra: &str) -> String {
    format!("rbd:rbd/{image},conf={}{extra}", ceph.conf.display())
}

fn target(ceph: &Ceph, image: &str, extra: &str) -> Target {
    Target::start(&["--name", NAME, "--lun", &spec(ceph, image, extra)])
}

fn case(name: &str, f: impl FnOnce()) {
    let t = Instant::now();
    eprintln!("case: {name}");
    f();
    eprintln!("case: {name}: ok ({:.1} s)", t.elapsed().as_secs_f64());
}

#[test]
fn rbd_luns_against_a_real_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut ceph) = Ceph::start(&dir.path().join("ceph")) else {
        return; // skipped loudly (locally, without Ceph) by Ceph::start
    };
    // One image per case: a target killed at the end of a case leaves the
    // image's exclusive lock to a dead client until the OSD drops its
    // watch (30 s), and the next writer would wait for that.
    let images = [
        ("cu", "128M"),
        ("qemu", "64M"),
        ("bench", "128M"),
        ("crash", "64M"),
        ("grow", "64M"),
        ("cutoff", "64M"),
        ("fenced", "64M"),
        ("lost", "64M"),
        ("same", "64M"),
        ("caw", "16M"),
        ("caw4k", "16M"),
        ("durable", "16M"),
        ("gateways", "16M"),
    ];
    for (image, size) in images {
        ceph.rbd(&["create", "--size", size, &format!("rbd/{image}")]);
    }
    case("required families with no failures", || families(&ceph));
    case(
        "WRITE SAME through librbd reads back as the pattern",
        || write_same(&ceph),
    );
    case(
        "COMPARE AND WRITE offered only as far as librbd's is atomic",
        || compare_and_write(&ceph),
    );
    case(
        "every command that must be durable flushes librbd before GOOD",
        || durability(&ceph, dir.path()),
    );
    case(
        "gateways on one image report one identity, kept across a rename",
        || identity(&ceph),
    );
    case("qemu-img round trip", || qemu(&ceph, dir.path()));
    case("verifying bench", || bench(&ceph));
    case("SIGKILL mid-write keeps every flushed write", || {
        crash(&ceph)
    });
    case("a resize in Ceph is CAPACITY DATA HAS CHANGED", || {
        resize(&ceph)
    });
    case(
        "a blocklisted client stays fenced: no reconnect by default",
        || fenced(&ceph),
    );
    case(
        "reconnect=on: the first SYNC after a blocklist reports the lost writes",
        || cut_off(&ceph),
    );
    case("ironlun lab --rbd on the cluster CEPH_CONF names", || {
        lab(&ceph, dir.path())
    });
    case("a lost cluster is NOT READY, the session lives", || {
        lost_cluster(&mut ceph)
    });
}

/// The families the core target must pass, and those an RBD LUN adds:
/// thin provisioning, WRITE SAME, COMPARE AND WRITE, ORWRITE.
fn families(ceph: &Ceph) {
    let cu_bin = tool("iscsi-test-cu", "libiscsi-bin");
    let expected = cu::expected_skips(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/conformance/expected-skips.txt"),
        )
        .unwrap(),
    )
    .unwrap();
    let t = target(ceph, "cu", "");
    let silent = cu::silent_skips(&cu::lu_facts(t.addr, NAME, 0));
    assert!(silent.is_empty(), "{silent:?}");
    let url = t.url(NAME, 0);
    // The whole WRITE SAME and COMPARE AND WRITE families (librbd's
    // writesame; MAXIMUM COMPARE AND WRITE LENGTH read from the Block
    // Limits page), one test of each other command an RBD LUN adds in
    // the default run (their whole families: IRONLUN_RBD_LONG=1).
    let rbd_families: &[&str] = if long() {
        &[
            "ALL.Unmap",
            "ALL.WriteSame10",
            "ALL.WriteSame16",
            "ALL.GetLBAStatus",
            "ALL.CompareAndWrite",
            "ALL.OrWrite",
            "ALL.WriteVerify10",
        ]
    } else {
        &[
            "ALL.Unmap",
            "ALL.WriteSame10",
            "ALL.WriteSame16",
            "ALL.GetLBAStatus.Simple",
            "ALL.CompareAndWrite",
        ]
    };
    for fam in cu::REQUIRED_FAMILIES.iter().chain(rbd_families) {
        let (_, out) = run(
            &cu_bin,
            &["--dataloss", "-V", &format!("--test={fam}"), &url],
        );
        let (problems, clean) = cu::check_family(&expected, fam, &out);
        assert!(
            problems.is_empty(),
            "{fam}:\n{}\n{out}\ntarget log:\n{}",
            problems.join("\n"),
            t.log()
        );
        eprintln!("  {fam}: {clean} passed without skips");
    }
}

/// Two gateways serving one image report the same NAA identifier,
/// serial number and capacity (issue 37): all come from the image's pool
/// and id (`rbd_get_id`), not from the target, so two targets of
/// different names agree, a rename keeps them, and another image has its
/// own.
fn identity(ceph: &Ceph) {
    let seen = |name: &str, image: &str| {
        let t = Target::start(&["--name", name, "--lun", &spec(ceph, image, "")]);
        let mut c = Raw::connect(t.addr);
        let (r, _) = c.login(name, [0x80, 0, 0, 0, 0x0e, 0x30], &[]);
        assert_eq!((r.status.class(), r.status.detail()), (0, 0));
        let _ = c.scsi(&TUR, 0, &[]); // the power-on unit attention
        let (st, _, ids) = c.scsi(&[0x12, 1, 0x83, 0, 255, 0], 255, &[]);
        assert_eq!(st, 0);
        // The first designator: NAA, binary, 8 bytes.
        assert_eq!(&ids[4..8], &[0x01, 0x03, 0, 8]);
        let (_, _, serial) = c.scsi(&[0x12, 1, 0x80, 0, 255, 0], 255, &[]);
        let mut rc16 = [0u8; 16];
        rc16[0] = 0x9e;
        rc16[1] = 0x10;
        rc16[13] = 32;
        let (_, _, cap) = c.scsi(&rc16, 32, &[]);
        (
            ids[8..16].to_vec(),
            serial[4..].to_vec(),
            cap[..12].to_vec(),
        )
    };
    let a = seen(NAME, "gateways");
    let b = seen("iqn.2026-11.io.ironlun:rbd-b", "gateways");
    assert_eq!(a, b, "two gateways, one image");
    ceph.rbd(&["mv", "rbd/gateways", "rbd/gateways-renamed"]);
    assert_eq!(seen(NAME, "gateways-renamed"), a, "kept across a rename");
    let other = seen(NAME, "caw");
    assert_ne!((&other.0, &other.1), (&a.0, &a.1), "another image");
}

fn ws16(lba: u64, blocks: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x93;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&blocks.to_be_bytes());
    c
}

fn read16(lba: u64, blocks: u32) -> [u8; 16] {
    let mut c = ws16(lba, blocks);
    c[0] = 0x88;
    c
}

/// `blocks` 512-byte blocks from `lba`, 128 at a time.
fn read_blocks(c: &mut Raw, lba: u64, blocks: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = lba;
    while at < lba + blocks {
        let n = (lba + blocks - at).min(128) as u32;
        let (st, _, d) = c.scsi(&read16(at, n), n * 512, &[]);
        assert_eq!((st, d.len()), (0, n as usize * 512));
        out.extend_from_slice(&d);
        at += u64::from(n);
    }
    out
}

/// GET LBA STATUS's first descriptor: (blocks, provisioning status).
fn lba_status(c: &mut Raw, lba: u64) -> (u32, u8) {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x9e;
    cdb[1] = 0x12;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[13] = 24;
    let (st, _, d) = c.scsi(&cdb, 24, &[]);
    assert_eq!(st, 0);
    assert_eq!(u64::from_be_bytes(d[8..16].try_into().unwrap()), lba);
    (
        u32::from_be_bytes(d[16..20].try_into().unwrap()),
        d[20] & 0x0f,
    )
}

/// WRITE SAME(16) without UNMAP, which librbd's writesame carries: the
/// pattern reads back over a range that crosses an object boundary and
/// not a block beyond it; an all-zero block zeroes written data (less
/// than a discard granule: librbd must not skip it) and maps fresh
/// blocks rather than discarding them (SBC-4: no UNMAP, a write).
fn write_same(ceph: &Ceph) {
    let t = target(ceph, "same", "");
    let mut c = login(t.addr, 6);
    let object = (4u64 << 20) / 512;
    let (lba, n) = (object - 100, 300u64);
    let pattern: Vec<u8> = (0..512u32).map(|i| (i * 7 + 3) as u8).collect();
    let (st, _, _) = c.scsi(&ws16(lba, n as u32), 0, &pattern);
    assert_eq!(st, 0, "{}", t.log());
    let back = read_blocks(&mut c, lba - 1, n + 2);
    let (before, rest) = back.split_at(512);
    let (body, after) = rest.split_at(n as usize * 512);
    assert!(before.iter().chain(after).all(|&b| b == 0), "spilled over");
    for (i, block) in body.chunks(512).enumerate() {
        assert_eq!(block, &pattern[..], "block {} of the range", i);
    }
    // Zeros over 8 written blocks inside the range.
    let (st, _, _) = c.scsi(&ws16(lba + 10, 8), 0, &[0; 512]);
    assert_eq!(st, 0);
    let back = read_blocks(&mut c, lba + 9, 10);
    assert_eq!(&back[..512], &pattern[..]);
    assert!(back[512..9 * 512].iter().all(|&b| b == 0), "not zeroed");
    assert_eq!(&back[9 * 512..], &pattern[..]);
    // Zeros on blocks never written: mapped now, and reading as zeros.
    let fresh = 3 * object;
    assert_eq!(lba_status(&mut c, fresh).1, 1, "fresh blocks deallocated");
    let (st, _, _) = c.scsi(&ws16(fresh, 16), 0, &[0; 512]);
    assert_eq!(st, 0);
    let (blocks, status) = lba_status(&mut c, fresh);
    assert_eq!(status, 0, "WRITE SAME without UNMAP left them unmapped");
    assert!(blocks >= 16, "{blocks} blocks mapped");
    assert!(read_blocks(&mut c, fresh, 16).iter().all(|&b| b == 0));
}

/// COMPARE AND WRITE: Block Limits' MAXIMUM COMPARE AND WRITE LENGTH is
/// what librbd does atomically for every client (one 512-byte sector
/// with Ceph 16: one block, none with 4096-byte blocks), and a longer one
/// is INVALID FIELD IN CDB (SBC-4 §5.3), not compared and written under
/// this gateway's lock alone.
fn compare_and_write(ceph: &Ceph) {
    let max_caw = |c: &mut Raw| {
        let (st, _, d) = c.scsi(&[0x12, 1, 0xb0, 0, 64, 0], 64, &[]);
        assert_eq!(st, 0);
        d[5]
    };
    let caw = |lba: u64, blocks: u8| {
        let mut cdb = [0u8; 16];
        cdb[0] = 0x89;
        cdb[2..10].copy_from_slice(&lba.to_be_bytes());
        cdb[13] = blocks;
        cdb
    };
    let t = target(ceph, "caw", "");
    let mut c = login(t.addr, 7);
    assert_eq!(max_caw(&mut c), 1);
    let (st, _, _) = c.scsi(&caw(5, 1), 0, &[[0u8; 512], [b'B'; 512]].concat());
    assert_eq!(st, 0, "{}", t.log());
    assert!(read_blocks(&mut c, 5, 1).iter().all(|&b| b == b'B'));
    let two = [[0u8; 1024], [b'C'; 1024]].concat();
    let (st, sense, _) = c.scsi(&caw(20, 2), 0, &two);
    assert_eq!(st, 2);
    assert_eq!((sense[2] & 0x0f, sense[12], sense[13]), (0x05, 0x24, 0x00));
    assert!(read_blocks(&mut c, 20, 2).iter().all(|&b| b == 0));
    drop(c);
    drop(t);
    let t = target(ceph, "caw4k", ",bs=4096");
    let mut c = login(t.addr, 8);
    assert_eq!(max_caw(&mut c), 0, "no 4096-byte block is atomic in librbd");
    let one = [[0u8; 4096], [1u8; 4096]].concat();
    let (st, sense, _) = c.scsi(&caw(0, 1), 0, &one);
    assert_eq!(st, 2);
    assert_eq!((sense[2] & 0x0f, sense[12], sense[13]), (0x05, 0x24, 0x00));
}

/// librbd's own count of flushes of every image the gateway has open,
/// read from its admin socket (`ceph --admin-daemon SOCK perf dump`,
/// the `flush` counter of each `librbd-…` section).
fn librbd_flushes(ceph: &Ceph, sock: &Path) -> u64 {
    let dump = ceph.ceph(&["--admin-daemon", sock.to_str().unwrap(), "perf", "dump"]);
    let v: serde_json::Value = serde_json::from_str(&dump).unwrap();
    let images: Vec<u64> = v
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("librbd-"))
        .map(|(k, c)| {
            c["flush"]
                .as_u64()
                .unwrap_or_else(|| panic!("{k}: no flush counter"))
        })
        .collect();
    assert_eq!(images.len(), 1, "one image open: {dump}");
    images[0]
}

/// Durability on the real RBD path (issue 36 item 5): during every
/// command that must be on stable storage before its GOOD (FUA, the
/// write cache off, WRITE AND VERIFY, COMPARE AND WRITE with FUA,
/// SYNCHRONIZE CACHE), librbd was asked to flush, as its own counter
/// says; during a plain write with the write cache on it was not. The
/// commands take each path an RBD LUN has: staged (READ, WRITE,
/// SYNCHRONIZE CACHE through the connection's task) and the blocking
/// pool (a partial last block, WRITE SAME, COMPARE AND WRITE, UNMAP).
fn durability(ceph: &Ceph, dir: &Path) {
    let sock = dir.join("gateway.asok");
    let conf = dir.join("gateway.conf");
    let mut text = std::fs::read_to_string(&ceph.conf).unwrap();
    text.push_str(&format!("\n[client]\nadmin socket = {}\n", sock.display()));
    std::fs::write(&conf, text).unwrap();
    let lun = format!("rbd:rbd/durable,conf={}", conf.display());
    let t = Target::start(&["--name", NAME, "--lun", &lun]);
    let mut c = login(t.addr, 9);
    let lba = |op: u8, flags: u8, blocks: u8| [op, flags, 0, 0, 0, 64, 0, 0, blocks, 0];
    let ws16 = |flags: u8| {
        let mut c = ws16(64, 8);
        c[1] = flags;
        c
    };
    let caw = |flags: u8| {
        let mut cdb = [0u8; 16];
        cdb[0] = 0x89;
        cdb[1] = flags;
        cdb[2..10].copy_from_slice(&200u64.to_be_bytes());
        cdb[13] = 1;
        cdb
    };
    let mut unmap = vec![0, 22, 0, 16, 0, 0, 0, 0];
    unmap.extend_from_slice(&512u64.to_be_bytes());
    unmap.extend_from_slice(&[0, 0, 0, 128, 0, 0, 0, 0]);
    let block = |b: u8| vec![b; 512];
    let blocks = |b: u8| vec![b; 8 * 512];
    // The first write takes the image's exclusive lock: out of the count.
    assert_eq!(c.scsi(&lba(0x2a, 0, 8), 0, &blocks(1)).0, 0, "{}", t.log());
    let check = |c: &mut Raw, wce: bool, name: &str, cdb: &[u8], data: &[u8], durable: bool| {
        let before = librbd_flushes(ceph, &sock);
        let (st, sense, _) = c.scsi(cdb, 0, data);
        assert_eq!(st, 0, "{name}: {sense:02x?}\n{}", t.log());
        let flushed = librbd_flushes(ceph, &sock) - before;
        assert_eq!(
            flushed > 0,
            durable,
            "{name} with WCE={}: {flushed} librbd flushes",
            u8::from(wce)
        );
    };
    for wce in [true, false] {
        if !wce {
            // MODE SELECT(10), PF: the caching page with WCE = 0.
            let mut param = vec![0u8; 8];
            param.extend_from_slice(&[0x08, 0x12]);
            param.resize(8 + 20, 0);
            let select = [0x55, 0x10, 0, 0, 0, 0, 0, 0, param.len() as u8, 0];
            assert_eq!(c.scsi(&select, 0, &param).0, 0);
        }
        let off = !wce;
        // Each COMPARE AND WRITE compares with what the last one wrote.
        let old = if wce { 0 } else { 2 };
        let two = |a: u8, b: u8| [block(a), block(b)].concat();
        check(&mut c, wce, "WRITE(10)", &lba(0x2a, 0, 8), &blocks(2), off);
        check(
            &mut c,
            wce,
            "WRITE(10) FUA",
            &lba(0x2a, 0x08, 8),
            &blocks(3),
            true,
        );
        check(
            &mut c,
            wce,
            "WRITE(10) ending inside a block",
            &lba(0x2a, 0x08, 8),
            &blocks(4)[..700],
            true,
        );
        check(
            &mut c,
            wce,
            "WRITE AND VERIFY(10)",
            &lba(0x2e, 0, 8),
            &blocks(5),
            true,
        );
        check(&mut c, wce, "WRITE SAME(16)", &ws16(0), &block(6), off);
        check(
            &mut c,
            wce,
            "COMPARE AND WRITE",
            &caw(0),
            &two(old, old + 1),
            off,
        );
        check(
            &mut c,
            wce,
            "COMPARE AND WRITE FUA",
            &caw(0x08),
            &two(old + 1, old + 2),
            true,
        );
        check(
            &mut c,
            wce,
            "UNMAP",
            &[0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0],
            &unmap,
            off,
        );
        check(&mut c, wce, "SYNCHRONIZE CACHE(10)", &SYNC10, &[], true);
    }
}

fn qemu(ceph: &Ceph, dir: &Path) {
    let t = target(ceph, "qemu", "");
    let src = dir.join("qemu-src.img");
    let data = random_file(&src, 8 << 20);
    qemu_round_trip(dir, &src, &data, &t.url(NAME, 0));
    assert!(
        t.log().contains("async_commands="),
        "the staged path was not used: {}",
        t.log()
    );
}

fn bench(ceph: &Ceph) {
    let t = target(ceph, "bench", "");
    let json = tempfile::NamedTempFile::new().unwrap();
    let time = if long() { "60s" } else { "3s" };
    let url = t.url(NAME, 0);
    let mut args = vec!["bench", url.as_str()];
    args.extend(verify_mix_flags(time, "32MiB"));
    args.extend_from_slice(&["--json", json.path().to_str().unwrap()]);
    let out = ironlun_ok(&args);
    let w = &first_workload(json.path());
    assert_eq!(w["errors"], 0, "{out}");
    assert!(w["write_iops"].as_f64().unwrap() > 0.0, "{w}");
    let checked = w["verify"]["checked_blocks"].as_u64().unwrap();
    assert!(checked > 0, "verification checked nothing: {w}");
    assert_eq!(w["verify"]["mismatch_count"], 0, "{}", w["verify"]);
    eprintln!("  {checked} blocks checked, iops {}", w["iops"]);
}

/// Block `n` (4 KiB, 8 LBAs) at generation `gen`: names both.
fn content(n: u64, gen: u64) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[..8].copy_from_slice(b"IRLNRBD!");
    b[8..16].copy_from_slice(&n.to_be_bytes());
    b[16..24].copy_from_slice(&gen.to_be_bytes());
    for (i, x) in b[24..].iter_mut().enumerate() {
        *x = (n as usize * 31 + gen as usize * 7 + i) as u8;
    }
    b
}

fn cdb10(op: u8, n: u64) -> [u8; 10] {
    let l = ((n * 8) as u32).to_be_bytes();
    [op, 0, l[0], l[1], l[2], l[3], 0, 0, 8, 0]
}

fn login(addr: std::net::SocketAddr, tail: u8) -> Raw {
    let mut c = Raw::connect(addr);
    let (r, _) = c.login(NAME, [0x80, 0, 0, 0, 0x0e, tail], &[]);
    assert_eq!((r.status.class(), r.status.detail()), (0, 0));
    let _ = c.scsi(&TUR, 0, &[]); // the power-on unit attention
    c
}

/// A command's status, or `None` when the connection died first.
fn try_scsi(c: &mut Raw, cdb: &[u8], write: &[u8]) -> Option<u8> {
    let itt = c.command(cdb, 0, write.len() as u32, write);
    loop {
        match c.recv()?.0 {
            ironlun_wire::Pdu::ScsiResponse(r) if r.itt == itt => return Some(r.status.0),
            _ => continue,
        }
    }
}

/// What the writer knows when the target dies.
#[derive(Default)]
struct Ledger {
    /// Block → generation acknowledged and then flushed.
    flushed: HashMap<u64, u64>,
    /// Block → the newest generation sent (acknowledged or not).
    sent: HashMap<u64, u64>,
    writes: u64,
}

/// Writes generations over 256 blocks, SYNCHRONIZE CACHE after every 8,
/// until the connection dies.
fn writer(addr: std::net::SocketAddr, ledger: Arc<Mutex<Ledger>>) {
    let mut c = login(addr, 1);
    let _ = c.stream.set_read_timeout(Some(Duration::from_secs(60)));
    let mut unflushed = Vec::new();
    for gen in 1u64.. {
        let n = (gen * 97) % 256;
        ledger.lock().unwrap().sent.insert(n, gen);
        let Some(st) = try_scsi(&mut c, &cdb10(0x2a, n), &content(n, gen)) else {
            return;
        };
        assert_eq!(st, 0, "write failed");
        unflushed.push((n, gen));
        ledger.lock().unwrap().writes += 1;
        if unflushed.len() == 8 {
            let Some(st) = try_scsi(&mut c, &SYNC10, &[]) else {
                return;
            };
            assert_eq!(st, 0, "SYNCHRONIZE CACHE failed");
            let mut l = ledger.lock().unwrap();
            for (n, g) in unflushed.drain(..) {
                l.flushed.insert(n, g);
            }
        }
    }
}

fn crash(ceph: &Ceph) {
    let mut t = target(ceph, "crash", "");
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let w = {
        let (addr, ledger) = (t.addr, ledger.clone());
        std::thread::spawn(move || writer(addr, ledger))
    };
    let want = if long() { 3000 } else { 300 };
    let deadline = Instant::now() + Duration::from_secs(120);
    while ledger.lock().unwrap().writes < want {
        assert!(Instant::now() < deadline, "writes too slow: {}", t.log());
        assert!(!w.is_finished(), "the writer stopped: {}", t.log());
        std::thread::sleep(Duration::from_millis(5));
    }
    t.child.kill().unwrap(); // SIGKILL
    t.child.wait().unwrap();
    w.join().unwrap();
    let t = target(ceph, "crash", "");
    let mut c = login(t.addr, 2);
    let l = ledger.lock().unwrap();
    assert!(
        l.flushed.len() > 100,
        "only {} blocks flushed",
        l.flushed.len()
    );
    for (&n, &flushed) in &l.flushed {
        let (st, _, data) = c.scsi(&cdb10(0x28, n), 4096, &[]);
        assert_eq!(st, 0);
        let gen = u64::from_be_bytes(data[16..24].try_into().unwrap());
        let newest = l.sent[&n];
        assert!(
            (flushed..=newest).contains(&gen) && data == content(n, gen),
            "block {n}: flushed generation {flushed}, newest sent {newest}, found {gen}"
        );
    }
    eprintln!(
        "  {} writes, {} flushed blocks intact",
        l.writes,
        l.flushed.len()
    );
}

fn resize(ceph: &Ceph) {
    let t = target(ceph, "grow", "");
    let mut c = login(t.addr, 3);
    let capacity = |c: &mut Raw| {
        let (st, _, d) = c.scsi(
            &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0],
            32,
            &[],
        );
        assert_eq!(st, 0);
        u64::from_be_bytes(d[..8].try_into().unwrap()) + 1
    };
    assert_eq!(capacity(&mut c), (64 << 20) / 512);
    ceph.rbd(&["resize", "--size", "96M", "rbd/grow"]);
    assert!(
        t.wait_log("capacity changed", Duration::from_secs(30)),
        "the resize was not noticed: {}",
        t.log()
    );
    let (st, sense, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(st, 2, "CHECK CONDITION expected");
    // Fixed format: sense key, ASC, ASCQ (SBC-4 §4.6.3.2: 2Ah/09h).
    assert_eq!(
        (sense[2] & 0x0f, sense[12], sense[13]),
        (0x06, 0x2a, 0x09),
        "{sense:02x?}"
    );
    assert_eq!(capacity(&mut c), (96 << 20) / 512);
}

/// A session whose commands go to LUN 1, its power-on unit attention
/// taken.
fn login_lun1(addr: std::net::SocketAddr, tail: u8) -> Raw {
    let mut c = login(addr, tail);
    c.lun = 1;
    let _ = c.scsi(&TUR, 0, &[]);
    c
}

/// Sense key, ASC and ASCQ of fixed-format sense data; zeros without
/// sense (GOOD).
fn code(sense: &[u8]) -> (u8, u8, u8) {
    if sense.len() < 14 {
        return (0, 0, 0);
    }
    (sense[2] & 0x0f, sense[12], sense[13])
}

const NOT_READY_BECOMING_READY: (u8, u8, u8) = (0x02, 0x04, 0x01);
const NOT_READY_MANUAL_INTERVENTION: (u8, u8, u8) = (0x02, 0x04, 0x03);
const MEDIUM_ERROR_WRITE_ERROR: (u8, u8, u8) = (0x03, 0x0c, 0x00);

/// WRITE(10) of block `n` with FUA.
fn fua_write(n: u64) -> [u8; 10] {
    let mut c = cdb10(0x2a, n);
    c[1] = 0x08;
    c
}

/// The target's librados client address, from the line it logs on
/// opening the image (librados' own `rados_getaddrs`), checked against
/// the image's watchers in `rbd status`: what `ceph osd blocklist add`
/// takes.
fn client_address(ceph: &Ceph, t: &Target, image: &str) -> String {
    const OPENED: &str = "opened as client ";
    assert!(
        t.wait_log(OPENED, Duration::from_secs(30)),
        "no client address logged: {}",
        t.log()
    );
    let log = t.log();
    let address = log
        .split(OPENED)
        .nth(1)
        .and_then(|rest| rest.split([';', ' ', '\n']).next())
        .unwrap()
        .to_owned();
    let status = ceph.rbd(&["status", &format!("rbd/{image}")]);
    assert!(
        status.contains(&format!("watcher={address} ")),
        "{address} is not among the watchers: {status}"
    );
    address
}

/// Block 1 written and flushed, block 2 written (acknowledged, not
/// flushed): what a blocklist then takes.
fn write_flush_write(c: &mut Raw) {
    let (st, _, _) = c.scsi(&cdb10(0x2a, 1), 0, &content(1, 1));
    assert_eq!(st, 0);
    let (st, _, _) = c.scsi(&SYNC10, 0, &[]);
    assert_eq!(st, 0, "the first SYNCHRONIZE CACHE");
    let (st, _, _) = c.scsi(&cdb10(0x2a, 2), 0, &content(2, 1));
    assert_eq!(st, 0);
}

/// Reads block 1 until the target stops answering GOOD (it learns of the
/// blocklist from the OSDs' answers); the sense it then answers.
fn first_refusal(c: &mut Raw, t: &Target) -> (u8, u8, u8) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(Instant::now() < deadline, "never refused: {}", t.log());
        let (st, sense, _) = c.scsi(&cdb10(0x28, 1), 4096, &[]);
        if st != 0 {
            return code(&sense);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `ceph osd blocklist add` of the target's client with `reconnect` off
/// (the default): the LU is fenced for good. Commands and TEST UNIT
/// READY answer NOT READY, MANUAL INTERVENTION REQUIRED, except
/// SYNCHRONIZE CACHE and FUA writes, which report the acknowledged write
/// no flush covered (MEDIUM ERROR, WRITE ERROR); lifting the blocklist brings
/// nothing back; the LUN removed and added again through the admin
/// socket (an operator's act) serves the image, the flushed block intact.
fn fenced(ceph: &Ceph) {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("admin.sock");
    let sock_arg = sock.to_str().unwrap();
    let spec = spec(ceph, "fenced", ",timeout=3");
    let cfg = dir.path().join("ironlun.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = [\"127.0.0.1:0\"]\nadmin_socket = \"{sock_arg}\"\n[[target]]\n\
             name = \"{NAME}\"\n[[target.lun]]\nnumber = 0\nspec = \"ram:1MiB\"\n\
             [[target.lun]]\nnumber = 1\nspec = \"{spec}\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cfg, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let t = Target::start_with(&["--config", cfg.to_str().unwrap()], false);
    let mut c = login_lun1(t.addr, 6);
    write_flush_write(&mut c);
    let address = client_address(ceph, &t, "fenced");
    ceph.ceph(&["osd", "blocklist", "add", &address]);
    let _ = c.stream.set_read_timeout(Some(Duration::from_secs(60)));
    assert_eq!(first_refusal(&mut c, &t), NOT_READY_MANUAL_INTERVENTION);
    let (st, sense, _) = c.scsi(&SYNC10, 0, &[]);
    assert_eq!(
        (st, code(&sense)),
        (2, MEDIUM_ERROR_WRITE_ERROR),
        "the unflushed write must be reported lost: {}",
        t.log()
    );
    for (what, cdb, data, want) in [
        // The initiator's retry sees the report too.
        (
            "SYNC again",
            SYNC10.to_vec(),
            vec![],
            MEDIUM_ERROR_WRITE_ERROR,
        ),
        (
            "FUA WRITE",
            fua_write(3).to_vec(),
            content(3, 1),
            MEDIUM_ERROR_WRITE_ERROR,
        ),
        (
            "WRITE",
            cdb10(0x2a, 3).to_vec(),
            content(3, 1),
            NOT_READY_MANUAL_INTERVENTION,
        ),
        (
            "TEST UNIT READY",
            TUR.to_vec(),
            vec![],
            NOT_READY_MANUAL_INTERVENTION,
        ),
    ] {
        let (st, sense, _) = c.scsi(&cdb, 0, &data);
        assert_eq!(st, 2, "{what}: CHECK CONDITION expected");
        assert_eq!(code(&sense), want, "{what}");
    }
    let log = t.log();
    assert!(
        log.contains("fenced") && log.contains("reconnect is off") && log.contains(&address),
        "the log must say the LU was fenced and how to bring it back: {log}"
    );
    // Lifting the blocklist does not bring the LU back by itself.
    ceph.ceph(&["osd", "blocklist", "rm", &address]);
    let (st, sense, _) = c.scsi(&cdb10(0x28, 1), 4096, &[]);
    assert_eq!((st, code(&sense)), (2, NOT_READY_MANUAL_INTERVENTION));
    assert!(!log.contains("reconnected as client"), "{log}");
    // The operator brings it back: the LUN removed and added again opens
    // the image with a new client.
    let admin = |args: &[&str]| {
        let mut all = vec!["admin", "--socket", sock_arg, "lun"];
        all.extend_from_slice(args);
        ironlun_ok(&all)
    };
    admin(&["remove", NAME, "1"]);
    admin(&["add", NAME, &spec]);
    let mut c = login_lun1(t.addr, 7);
    let _ = c.stream.set_read_timeout(Some(Duration::from_secs(120)));
    // Past the new LU's unit attentions: the flushed block.
    let mut answers = Vec::new();
    let data = loop {
        let (st, sense, data) = c.scsi(&cdb10(0x28, 1), 4096, &[]);
        if st == 0 {
            break data;
        }
        answers.push((st, code(&sense)));
        assert!(
            answers.len() < 4,
            "the re-added LUN does not serve: {answers:02x?}: {}",
            t.log()
        );
    };
    assert!(data == content(1, 1), "the flushed block");
    let (st, _, _) = c.scsi(&cdb10(0x2a, 3), 0, &content(3, 2));
    assert_eq!(st, 0, "a write through the new client");
    let (st, _, _) = c.scsi(&SYNC10, 0, &[]);
    assert_eq!(st, 0, "a SYNC through the new client");
}

/// `ceph osd blocklist add` of the target's client with `reconnect=on`:
/// commands answer NOT READY (retried) until the target has opened the
/// image again with a new client, on the same session. The write the old
/// client acknowledged after the last flush is lost with it, so the
/// first SYNCHRONIZE CACHE through the new client answers MEDIUM ERROR,
/// WRITE ERROR (and a FUA write before it too), never GOOD, and so does
/// its retry (the report lasts a minute: ironlun-backend's ledger tests
/// show it ending); the LU serves reads and writes meanwhile.
fn cut_off(ceph: &Ceph) {
    let t = target(ceph, "cutoff", ",timeout=3,reconnect=on");
    let mut c = login(t.addr, 5);
    write_flush_write(&mut c);
    let address = client_address(ceph, &t, "cutoff");
    ceph.ceph(&["osd", "blocklist", "add", &address]);
    let _ = c.stream.set_read_timeout(Some(Duration::from_secs(60)));
    assert_eq!(first_refusal(&mut c, &t), NOT_READY_BECOMING_READY);
    let mut refused = 1;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(Instant::now() < deadline, "never reconnected: {}", t.log());
        let (st, sense, data) = c.scsi(&cdb10(0x28, 1), 4096, &[]);
        if st == 0 {
            assert!(data == content(1, 1), "the flushed block must read back");
            break;
        }
        assert_eq!(code(&sense), NOT_READY_BECOMING_READY, "while cut off");
        refused += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    let (st, _, _) = c.scsi(&cdb10(0x2a, 4), 0, &content(4, 1));
    assert_eq!(st, 0, "a write without FUA goes on");
    let (st, sense, _) = c.scsi(&fua_write(5), 0, &content(5, 1));
    assert_eq!(
        (st, code(&sense)),
        (2, MEDIUM_ERROR_WRITE_ERROR),
        "a FUA write before the loss is reported"
    );
    let (st, sense, _) = c.scsi(&SYNC10, 0, &[]);
    assert_eq!(
        (st, code(&sense)),
        (2, MEDIUM_ERROR_WRITE_ERROR),
        "the second SYNCHRONIZE CACHE must report the write lost: {}",
        t.log()
    );
    let (st, sense, _) = c.scsi(&SYNC10, 0, &[]);
    assert_eq!(
        (st, code(&sense)),
        (2, MEDIUM_ERROR_WRITE_ERROR),
        "a retry of that SYNCHRONIZE CACHE must not answer GOOD"
    );
    let (st, _, _) = c.scsi(&cdb10(0x2a, 5), 0, &content(5, 1));
    assert_eq!(st, 0, "writes without FUA go on");
    for n in [1, 4, 5] {
        let (st, _, data) = c.scsi(&cdb10(0x28, n), 4096, &[]);
        assert_eq!((st, data == content(n, 1)), (0, true), "block {n}");
    }
    let log = t.log();
    assert!(
        log.contains("reconnected as client")
            && log.contains("lost with it: 1 write it acknowledged"),
        "{log}"
    );
    ceph.ceph(&["osd", "blocklist", "rm", &address]);
    eprintln!("  {refused} commands refused while cut off");
}

/// `ironlun lab --rbd` makes an image on `$CEPH_CONF`'s cluster, runs
/// its workloads there without errors, and removes the image.
fn lab(ceph: &Ceph, dir: &Path) {
    let out = dir.join("lab");
    let o = std::process::Command::new(support::ironlun_bin())
        .env("CEPH_CONF", &ceph.conf)
        .args(["lab", "--rbd", "--size", "64MiB", "--time", "1s"])
        .args(["--profile", "db-oltp-8k", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("LUN rbd:rbd/ironlun-lab-"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("lab.json")).unwrap()).unwrap();
    let w = &v["workloads"][0];
    assert_eq!(w["errors"], 0, "{w}");
    assert!(w["iops"].as_f64().unwrap() > 0.0, "{w}");
    let images = ceph.rbd(&["ls", "rbd"]);
    assert!(!images.contains("ironlun-lab-"), "image left: {images}");
}

/// With the cluster gone, a read fails within the LUN's timeout with
/// NOT READY (not MEDIUM ERROR), and the session still answers.
fn lost_cluster(ceph: &mut Ceph) {
    let t = target(ceph, "lost", ",timeout=3");
    let mut c = login(t.addr, 4);
    let (st, _, _) = c.scsi(&cdb10(0x28, 1), 4096, &[]);
    assert_eq!(st, 0);
    ceph.stop();
    let _ = c.stream.set_read_timeout(Some(Duration::from_secs(60)));
    let (st, sense, _) = c.scsi(&cdb10(0x28, 2000), 4096, &[]);
    assert_eq!(st, 2, "CHECK CONDITION expected: {}", t.log());
    assert_eq!(
        (sense[2] & 0x0f, sense[12], sense[13]),
        (0x02, 0x04, 0x01),
        "NOT READY / BECOMING READY expected: {sense:02x?}"
    );
    let (st, _, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(st, 0, "the session must go on");
}
