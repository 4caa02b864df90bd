//! `ironlun bench` on a local file with the io_uring and psync engines:
//! the same workloads, results and verification as over iSCSI. The file
//! lives under the target directory (a disk file system: `O_DIRECT`
//! fails on tmpfs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::path::Path;

use support::{bench_first_workload, ironlun_ok as ok, run, tool, verify_pass_args};

const ENGINES: [&str; 2] = ["io_uring", "psync"];

fn disk_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("bench-local")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

fn image(dir: &Path, len: u64) -> String {
    let p = dir.join("disk.img");
    std::fs::File::create(&p).unwrap().set_len(len).unwrap();
    p.to_str().unwrap().to_owned()
}

/// A run with `args` plus `--json`; the first workload.
fn bench(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    bench_first_workload(dir.path(), args)
}

#[test]
fn both_engines_read_write_and_verify_a_file() {
    let dir = disk_dir();
    let img = image(dir.path(), 64 << 20);
    for engine in ENGINES {
        for (threads, buffered) in [("1", false), ("2", false), ("2", true)] {
            let mut args = vec![
                img.as_str(),
                "--engine",
                engine,
                "--threads",
                threads,
                "--workers",
                "2",
                "--verify",
                "--bs",
                "8k",
                "--read",
                "50",
                "--random",
                "70",
                "--qd",
                "8",
                "--time",
                "1s",
                "--ramp",
                "0",
            ];
            if buffered {
                args.push("--buffered");
            }
            let w = bench(&args);
            let what = format!("{engine}, {threads} threads, buffered {buffered}");
            assert_eq!(w["errors"], 0, "{what}: {w}");
            assert_eq!(
                w["threads"].as_u64(),
                Some(threads.parse().unwrap()),
                "{what}"
            );
            let (r, wr) = (
                w["read_ios"].as_u64().unwrap(),
                w["write_ios"].as_u64().unwrap(),
            );
            assert!(r > 0 && wr > 0, "{what}: reads {r}, writes {wr}");
            assert_eq!(w["ios"].as_u64(), Some(r + wr));
            assert!(w["latency_us"]["p99"].as_f64().unwrap() > 0.0, "{what}");
            assert!(
                w["cpu"]["initiator_us_per_io"].as_f64().unwrap() > 0.0,
                "{what}"
            );
            let per: u64 = w["per_thread"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["ios"].as_u64().unwrap())
                .sum();
            assert_eq!(per, r + wr, "{what}");
            assert!(
                w["verify"]["checked_blocks"].as_u64().unwrap() > 0,
                "{what}"
            );
            assert_eq!(w["verify"]["mismatch_count"], 0, "{what}: {}", w["verify"]);
            assert!(w["luns"][0].as_str().unwrap().contains(engine), "{what}");
        }
    }
}

/// Fills the first MiB with verifiable blocks, reads it back clean,
/// flips a byte of block 100 behind the engine's back: the next read
/// pass must fail and name the block.
#[test]
fn verify_catches_a_corrupted_block_in_a_file() {
    for engine in ENGINES {
        let dir = disk_dir();
        let img = image(dir.path(), 8 << 20);
        let pass = |read: &'static str| -> Vec<&str> {
            [verify_pass_args(&img, read), vec!["--engine", engine]].concat()
        };
        ok(&pass("0"));
        ok(&pass("100"));
        let mut bytes = std::fs::read(&img).unwrap();
        // Files are driven in 4096-byte blocks.
        bytes[100 * 4096 + 200] ^= 0x5a;
        std::fs::write(&img, &bytes).unwrap();
        let (rc, out) = run(support::ironlun_bin(), &pass("100"));
        assert_ne!(
            rc, 0,
            "{engine}: a corrupted block must fail the run:\n{out}"
        );
        assert!(
            out.contains("LBA 100: checksum mismatch"),
            "{engine}: {out}"
        );
    }
}

/// The write data patterns are data, not SCSI: a local file written
/// 75 % compressible gzips to about a quarter, by either engine.
#[test]
fn compressible_writes_reach_a_local_file() {
    let gzip = tool("gzip", "gzip");
    for engine in ENGINES {
        let dir = disk_dir();
        let img = image(dir.path(), 4 << 20);
        bench(&[
            &img,
            "--engine",
            engine,
            "--bs",
            "64k",
            "--read",
            "0",
            "--random",
            "0",
            "--ios",
            "64",
            "--compress",
            "75",
        ]);
        let (rc, out) = run(&gzip, &["-k", &img]);
        assert_eq!(rc, 0, "{out}");
        let packed = std::fs::metadata(format!("{img}.gz")).unwrap().len();
        let ratio = packed as f64 / (4 << 20) as f64;
        // 25 % random bytes, the rest zeros that gzip removes.
        assert!(
            (0.24..0.29).contains(&ratio),
            "{engine}: gzip ratio {ratio}"
        );
    }
}

#[test]
fn local_targets_refuse_iscsi_only_flags_and_unknown_engines() {
    let dir = disk_dir();
    let img = image(dir.path(), 1 << 20);
    let bin = support::ironlun_bin();
    let (rc, out) = run(bin, &["bench", &img, "--engine", "aio", "--time", "1s"]);
    assert_ne!(rc, 0);
    assert!(out.contains("unknown engine \"aio\""), "{out}");
    let (rc, out) = run(bin, &["bench", &img, "--sessions", "2", "--time", "1s"]);
    assert_ne!(rc, 0);
    assert!(out.contains("are for iscsi:// URLs"), "{out}");
    // The local engines do reads and writes, not the SCSI commands of a
    // mix.
    let (rc, out) = run(
        bin,
        &["bench", &img, "--mix", "read=50,unmap=50", "--time", "1s"],
    );
    assert_ne!(rc, 0);
    assert!(out.contains("the local engines (io_uring, psync)"), "{out}");
    let (rc, out) = run(bin, &["bench", "/nonexistent/disk.img", "--time", "1s"]);
    assert_ne!(rc, 0);
    assert!(out.contains("/nonexistent/disk.img"), "{out}");
}
