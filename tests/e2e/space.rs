//! A thin file LU whose file system fills up: writes are refused with
//! DATA PROTECT / SPACE ALLOCATION FAILED WRITE PROTECT (27h/07h, SBC-4
//! §4.7.3.6), not MEDIUM ERROR; reads and the target's other LUN go on;
//! the daemon logs the condition once for the episode, with the LUN and
//! the space left. With a soft threshold (SBC-4 §4.7.3.7), initiators
//! are warned before: each session's next command after the crossing gets
//! THIN PROVISIONING SOFT THRESHOLD REACHED once, writes go on, LOG SENSE
//! counts the space down, and freeing space arms the threshold again. The
//! file system is a 1 MiB tmpfs mounted for the test (needs root, as
//! scripts/test runs in CI).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;
use crate::support::nexus;

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use ironlun_initiator::{isid_for, scsi};
use ironlun_scsi_codes::{opcode, Asc, SenseKey};
use nexus::{got, request, ua, Got, Nexus};
use support::{run, tool, Raw, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:e2e-space";
const TUR: [u8; 6] = [0; 6];

/// A tmpfs mount, unmounted on drop.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

fn cdb10(op: u8, lba: u32, blocks: u16) -> [u8; 10] {
    let l = lba.to_be_bytes();
    let b = blocks.to_be_bytes();
    [op, 0, l[0], l[1], l[2], l[3], 0, b[0], b[1], 0]
}

/// TEST UNIT READY until the power-on unit attention is gone.
fn settle(c: &mut Raw) {
    let _ = c.scsi(&TUR, 0, &[]);
    let (st, _, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(st, 0);
}

/// A 1 MiB tmpfs on a new directory; unmounted (then removed) on drop.
fn small_tmpfs() -> (tempfile::TempDir, Mount) {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test mounts a small tmpfs and needs root (scripts/test runs as root)"
    );
    let mount = tool("mount", "mount");
    let dir = tempfile::tempdir().unwrap();
    let (rc, out) = run(
        &mount,
        &[
            "-t",
            "tmpfs",
            "-o",
            "size=1m",
            "tmpfs",
            dir.path().to_str().unwrap(),
        ],
    );
    assert_eq!(rc, 0, "mount: {out}");
    let mounted = Mount(dir.path().to_owned());
    (dir, mounted)
}

#[test]
fn a_full_file_system_refuses_writes_with_data_protect_and_logs_once() {
    let (dir, _mounted) = small_tmpfs();

    let lu = format!("file:{},size=8M,thin", dir.path().join("lu").display());
    let t = Target::start(&["--name", NAME, "--lun", &lu, "--lun", "ram:1M"]);
    let mut c = Raw::connect(t.addr);
    let (r, _) = c.login(NAME, [0x80, 0, 0, 0, 0, 1], &[]);
    assert_eq!((r.status.class(), r.status.detail()), (0, 0));
    settle(&mut c);

    // 4 KiB writes across the 8 MiB LU until the 1 MiB file system is full.
    let block = [0x5au8; 4096];
    let mut refused = Vec::new();
    let mut written = 0u32;
    for i in 0..2048u32 {
        let (st, sense, _) = c.scsi(&cdb10(0x2a, i * 8, 8), 0, &block);
        if st == 0 {
            written += 1;
            continue;
        }
        assert_eq!(st, 0x02, "write {i}: status {st:#x}");
        refused.push((i, sense));
        if refused.len() == 5 {
            break;
        }
    }
    assert!(
        written > 0 && written <= 256,
        "{written} 4 KiB writes fit in 1 MiB"
    );
    assert_eq!(refused.len(), 5, "the file system never filled");
    for (i, sense) in &refused {
        // Fixed format: key in byte 2, ASC/ASCQ in bytes 12 and 13.
        let (key, asc, ascq) = (sense[2] & 0x0f, sense[12], sense[13]);
        assert_eq!((key, asc, ascq), (0x07, 0x27, 0x07), "write {i}: {sense:?}");
    }
    // Reads go on, on this LU and on the other one.
    let (st, _, data) = c.scsi(&cdb10(0x28, 0, 8), 4096, &[]);
    assert_eq!((st, &data[..]), (0, &block[..]));
    let mut other = Raw::connect(t.addr);
    other.lun = 1;
    let (r, _) = other.login(NAME, [0x80, 0, 0, 0, 0, 2], &[]);
    assert_eq!((r.status.class(), r.status.detail()), (0, 0));
    settle(&mut other);
    let (st, _, _) = other.scsi(&cdb10(0x2a, 0, 8), 0, &block);
    assert_eq!(st, 0, "the RAM LUN refused a write");

    // One log line for the episode, however many writes were refused.
    assert!(
        t.wait_log("out of space", Duration::from_secs(5)),
        "{}",
        t.log()
    );
    let log = t.log();
    assert_eq!(log.matches("out of space").count(), 1, "{log}");
    assert!(log.contains("lun=0") && log.contains("free_bytes"), "{log}");
}

/// Long enough for any answer on a loaded machine; a hang fails the test.
const THRESHOLD_NAME: &str = "iqn.2026-11.io.ironlun:e2e-threshold";
/// The LU's soft threshold, and the most a crossing can be seen late: a
/// look at the space every 1/16 of the threshold written (at least
/// 64 KiB), plus the write in flight.
const THRESHOLD: u64 = 512 << 10;
const SEEN_WITHIN: u64 = (64 << 10) + 4096;
/// A 4 KiB threshold set: the tmpfs allocates 4 KiB pages, which are
/// eight of the LU's 512-byte blocks (THRESHOLD EXPONENT 3).
const SET: u64 = 4096;

const SOFT_THRESHOLD: Got = Got::Check(
    SenseKey::UNIT_ATTENTION,
    Asc::THIN_PROVISIONING_SOFT_THRESHOLD_REACHED,
);

// The session a test drives comes from tests/support/nexus.rs; these are
// this test's own commands on it.

impl Nexus {
    /// Logs in with ISID `n` and takes the power-on unit attention.
    fn connect(rt: &tokio::runtime::Runtime, t: &Target, label: &'static str, n: usize) -> Nexus {
        let nexus = Nexus::login(
            rt,
            &t.addr.to_string(),
            THRESHOLD_NAME,
            "iqn.2026-11.test:threshold-host",
            isid_for([0x80, 0x0c, 0, 0, 0, 0], n),
            label.to_owned(),
        );
        assert_eq!(
            nexus.tur(),
            ua(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET),
            "{label}"
        );
        assert_eq!(nexus.tur(), Got::Good, "{label}");
        nexus
    }

    /// 4 KiB (one page of the tmpfs) at 4 KiB page `page` of the LU.
    fn write_page(&self, page: u32) -> Got {
        let data = Bytes::from(vec![0x5a; 4096]);
        got(&self.run(scsi::write10(0, page * 8, 8, data)))
    }

    /// Data of a command that must succeed.
    fn data(&self, cdb: &[u8], alloc: u32) -> Bytes {
        let r = self.run(request(cdb, alloc, Bytes::new()));
        assert_eq!(got(&r), Got::Good, "{}: {cdb:02x?}", self.label);
        r.data
    }

    /// LOG SENSE's Logical Block Provisioning page (0Ch): the available
    /// and used LBA mapping resource counts, in threshold sets.
    fn resource_counts(&self) -> (u32, u32) {
        let d = self.data(&[opcode::LOG_SENSE, 0, 0x0c, 0, 0, 0, 0, 0, 64, 0], 64);
        assert_eq!(&d[..4], &[0x8c, 0, 0, 24], "{}: page header", self.label);
        assert_eq!(&d[4..6], &[0, 1], "available LBA mapping resource count");
        assert_eq!(&d[16..18], &[0, 2], "used LBA mapping resource count");
        let be32 = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap());
        (be32(&d[8..12]), be32(&d[20..24]))
    }
}

/// Bytes the file system at `dir` has left (statvfs f_bavail × f_frsize,
/// what the target reads).
fn fs_free(dir: &Path) -> u64 {
    let (rc, out) = run("stat", &["-f", "-c", "%a %S", dir.to_str().unwrap()]);
    assert_eq!(rc, 0, "stat -f: {out}");
    let mut it = out.split_whitespace().map(|n| n.parse::<u64>().unwrap());
    it.next().unwrap() * it.next().unwrap()
}

/// 4 KiB pages allocated to the LU's file (st_blocks counts 512 bytes).
fn file_pages(file: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    (std::fs::metadata(file).unwrap().blocks() / 8) as u32
}

/// Writes pages from `from` on until the soft threshold's unit attention
/// comes back instead of GOOD; returns the refused page, which was not
/// written. None of the writes may fail otherwise.
fn write_until_warned(a: &Nexus, from: u32) -> u32 {
    for page in from..2048 {
        match a.write_page(page) {
            Got::Good => continue,
            g if g == SOFT_THRESHOLD => return page,
            other => panic!("page {page}: {other:?}"),
        }
    }
    panic!("the soft threshold was never reported")
}

#[test]
fn a_soft_threshold_warns_each_session_once_and_rearms_when_space_returns() {
    let (dir, _mounted) = small_tmpfs();
    let file = dir.path().join("lu");
    let lu = format!("file:{},size=8M,thin,soft_threshold=512KiB", file.display());
    let t = Target::start(&["--name", THRESHOLD_NAME, "--lun", &lu]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let a = Nexus::connect(&rt, &t, "session a", 1);
    let b = Nexus::connect(&rt, &t, "session b", 2);

    // What an initiator finds: THRESHOLD EXPONENT 3 (VPD B2h byte 4), one
    // enabled soft threshold, armed decreasing, on available resources,
    // of 128 sets (mode page 1Ch/02h), and the count of free sets.
    let vpd = a.data(&[opcode::INQUIRY, 1, 0xb2, 0, 64, 0], 64);
    assert_eq!(vpd[4], 3, "THRESHOLD EXPONENT: {vpd:02x?}");
    let mode = a.data(
        &[opcode::MODE_SENSE_10, 0x08, 0x1c, 0x02, 0, 0, 0, 0, 255, 0],
        255,
    );
    let page = &mode[8..];
    assert_eq!(&page[..4], &[0x5c, 0x02, 0, 0x14], "{mode:02x?}");
    assert_eq!(&page[16..24], &[0x80, 0x01, 0, 0, 0, 0, 0, 128]);
    let (free_sets, used_sets) = a.resource_counts();
    assert_eq!(u64::from(free_sets), fs_free(dir.path()) / SET);
    assert_eq!(used_sets, 0, "a new thin file is empty");

    // Writes cross it: the write after the crossing is seen gets the unit
    // attention instead of running; the space left is then below the
    // threshold by at most how late a crossing can be seen.
    let refused = write_until_warned(&a, 0);
    let free = fs_free(dir.path());
    assert!(
        free < THRESHOLD && free + SEEN_WITHIN >= THRESHOLD,
        "warned at {free} bytes free (page {refused})"
    );
    // It is written when sent again; each session was told once.
    assert_eq!(a.write_page(refused), Got::Good);
    assert_eq!(a.tur(), Got::Good, "session a: told once");
    assert_eq!(
        b.tur(),
        SOFT_THRESHOLD,
        "session b: told on its next command"
    );
    assert_eq!(b.tur(), Got::Good, "session b: told once");

    // Writes below the hard limit go on, and no one is told again.
    for page in refused + 1..refused + 17 {
        assert_eq!(a.write_page(page), Got::Good, "page {page}");
    }
    assert_eq!((a.tur(), b.tur()), (Got::Good, Got::Good));
    // LOG SENSE counts the space down, as the file system sees it.
    let (free_now, used_now) = b.resource_counts();
    assert!(free_now < free_sets, "{free_now} after {free_sets}");
    assert_eq!(u64::from(free_now), fs_free(dir.path()) / SET);
    assert_eq!(used_now, file_pages(&file));
    assert_eq!(used_now, refused + 17, "every page written, once");
    assert!(
        logged_times(&t, "soft threshold reached", 1),
        "one line for the crossing:\n{}",
        t.log()
    );
    let log = t.log();
    assert!(
        log.contains("lun=0") && log.contains("free_bytes="),
        "{log}"
    );

    // UNMAP gives the pages back; the next writes see the space above the
    // threshold and its margin, which arms it again; writing on crosses
    // it a second time, and both sessions are told again.
    let unmap = scsi::unmap(0, &[(0, (refused + 17) * 8)]);
    assert_eq!(got(&a.run(unmap)), Got::Good);
    for page in 0..16 {
        assert_eq!(a.write_page(page), Got::Good, "page {page}");
    }
    assert!(
        t.wait_log("soft threshold armed again", Duration::from_secs(10)),
        "{}",
        t.log()
    );
    let again = write_until_warned(&a, 16);
    assert!(fs_free(dir.path()) < THRESHOLD, "page {again}");
    assert_eq!(b.tur(), SOFT_THRESHOLD);
    assert_eq!((a.tur(), b.tur()), (Got::Good, Got::Good));
    assert!(
        logged_times(&t, "soft threshold reached", 2),
        "one line per crossing:\n{}",
        t.log()
    );
}

/// Waits (bounded) until the log has `needle` `n` times; whether it has
/// it exactly that often.
fn logged_times(t: &Target, needle: &str, n: usize) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while t.log().matches(needle).count() < n && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    t.log().matches(needle).count() == n
}
