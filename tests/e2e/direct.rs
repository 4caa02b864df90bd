//! A `file:…,direct` LUN under 4 KiB random writes at 512-byte offsets
//! mixed with aligned ones (`ironlun bench --align sector`, QD 64): every
//! block read back is what was written, and the target's flush at
//! shutdown succeeds. Before ironlun-backend's `file/direct.rs` the
//! unaligned writes went through a buffered descriptor beside the direct
//! one; under this load Linux logged "Page cache invalidation failure on
//! direct I/O" and the shutdown flush failed with EIO.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::time::Duration;

use support::{bench_first_workload, Target};

const NAME: &str = "iqn.2026-11.test:t";

#[test]
fn sector_aligned_random_writes_to_a_direct_file_verify_and_flush() {
    // O_DIRECT needs a disk file system; /tmp may be tmpfs.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let spec = format!(
        "file:{},size=256MiB,direct",
        dir.path().join("lun.img").display()
    );
    let mut t = Target::start(&["--name", NAME, "--lun", &spec]);
    let url = t.url(NAME, 0);
    let w = bench_first_workload(
        dir.path(),
        &[
            &url, "--verify", "--align", "sector", "--bs", "4k", "--read", "30", "--random", "100",
            "--qd", "64", "--time", "3s", "--ramp", "0",
        ],
    );
    assert_eq!(w["errors"], 0, "{w}");
    assert!(w["verify"]["checked_blocks"].as_u64().unwrap() > 0, "{w}");
    assert_eq!(w["verify"]["mismatch_count"], 0, "{}", w["verify"]);
    // The shutdown flush (fdatasync) reports no lost write.
    let code = t.terminate(Duration::from_secs(60));
    let log = t.log();
    assert_eq!(code, Some(0), "target exit:\n{log}");
    assert!(!log.contains("flush of"), "{log}");
}
