//! The data-integrity soak: `ironlun bench --verify` with 16 sessions at
//! once (8 on a file LUN with 512-byte blocks, 8 on a RAM LUN with
//! 4096-byte blocks), the `verify-soak` mix of 4 KiB to 1 MiB transfers,
//! half writes. Each session drives its own slice of its LUN, so every
//! block read is checked against the last write to it; zero mismatches
//! and zero errors are required.
//!
//! CI runs it for 20 s. A long soak:
//!
//! ```sh
//! IRONLUN_SOAK_TIME=1h cargo test --release --test e2e -- --nocapture soak::
//! ```
//!
//! or against any target, by hand:
//! `ironlun bench iscsi://HOST/IQN/0 --verify --sessions 16 --profile verify-soak --time 1h`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::time::Duration;

use support::{ironlun_ok, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:soak";

#[test]
fn sixteen_verifying_sessions_of_mixed_sizes_see_no_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lun0.img");
    let lun0 = format!("file:{},size=256MiB", file.display());
    let mut t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        &lun0,
        "--lun",
        "ram:128MiB,bs=4096",
    ]);
    let json = dir.path().join("soak.json");
    let time = std::env::var("IRONLUN_SOAK_TIME").unwrap_or_else(|_| "20s".into());
    let out = ironlun_ok(&[
        "bench",
        &t.url(NAME, 0),
        &t.url(NAME, 1),
        "--sessions",
        "8",
        "--verify",
        "--profile",
        "verify-soak",
        "--time",
        &time,
        "--ramp",
        "0",
        "--json",
        json.to_str().unwrap(),
    ]);
    println!("{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let w = &v["workloads"][0];
    assert_eq!(w["name"], "verify-soak");
    let luns: Vec<&str> = w["luns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(luns.len(), 16, "{luns:?}");
    for k in 1..=8 {
        for lun in [0, 1] {
            let label = format!("{} [session {k}/8]", t.url(NAME, lun));
            assert!(luns.contains(&label.as_str()), "no {label} in {luns:?}");
        }
    }
    assert_eq!(w["errors"], 0, "{w}");
    assert!(w["read_iops"].as_f64().unwrap() > 0.0, "{w}");
    assert!(w["write_iops"].as_f64().unwrap() > 0.0, "{w}");
    let checked = w["verify"]["checked_blocks"].as_u64().unwrap();
    assert!(checked > 10_000, "only {checked} blocks checked");
    assert_eq!(w["verify"]["mismatch_count"], 0, "{}", w["verify"]);

    // 16 sessions logged in, each its own nexus, and all logged out.
    let log = t.log();
    assert_eq!(log.matches(" login: ").count(), 16, "{log}");
    assert!(t.wait_log("commands=", Duration::from_secs(5)));
    let logouts = || t.log().matches("logout: ").count();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while logouts() < 16 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(logouts(), 16, "{}", t.log());
    assert_eq!(t.terminate(Duration::from_secs(10)), Some(0));
}
