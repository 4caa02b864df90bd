//! A thin file LU whose file system fills up: writes are refused with
//! DATA PROTECT / SPACE ALLOCATION FAILED WRITE PROTECT (27h/07h, SBC-4
//! §4.7.3.6), not MEDIUM ERROR; reads and the target's other LUN go on;
//! the daemon logs the condition once for the episode, with the LUN and
//! the space left. The file system is a 1 MiB tmpfs mounted for the test
//! (needs root, as scripts/test runs in CI).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::time::Duration;

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

#[test]
fn a_full_file_system_refuses_writes_with_data_protect_and_logs_once() {
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
    let _mounted = Mount(dir.path().to_owned());

    let lu = format!("file:{},size=8M,thin", dir.path().join("lu").display());
    let t = Target::start(&["--name", NAME, "--lun", &lu, "--lun", "ram:1M"]);
    let mut c = Raw::connect(t.addr);
    let (r, _) = c.login(NAME, [0x80, 0, 0, 0, 0, 1], &[]);
    assert_eq!((r.status_class, r.status_detail), (0, 0));
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
    assert_eq!((r.status_class, r.status_detail), (0, 0));
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
