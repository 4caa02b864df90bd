//! Latency mode (`--busy-poll`, `[tcp] busy_poll`): a target whose
//! connections spin before they sleep serves I/O as one that does not,
//! on a RAM LUN (commands inline) and a file LUN (the io_uring), and says
//! so in its statistics; a budget over the bound is refused at start. No
//! assertion here is about speed: docs/performance.md, "Latency mode",
//! has the measurements.

use crate::support;
use support::{bench_first_workload, http_get, target_refused, Target};

const NAME: &str = "iqn.2026-11.test:t";

/// `GET /stats`'s `busy_poll` object.
fn busy_poll_stats(t: &Target) -> serde_json::Value {
    let (code, body) = http_get(t.stats_addr(), "/stats");
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["busy_poll"].clone()
}

/// A verifying mixed run at queue depth `qd` on `url`; no error and no
/// mismatch.
fn verified_run(url: &str, qd: &str) {
    let dir = tempfile::tempdir().unwrap();
    let w = bench_first_workload(
        dir.path(),
        &[
            url, "--verify", "--bs", "4k", "--read", "50", "--random", "100", "--qd", qd, "--time",
            "1s", "--ramp", "0",
        ],
    );
    assert_eq!(w["errors"], 0, "{url} QD {qd}: {w}");
    assert!(w["ios"].as_u64().unwrap() > 0, "{url} QD {qd}: {w}");
    assert!(
        w["verify"]["checked_blocks"].as_u64().unwrap() > 0,
        "{url} QD {qd}: {}",
        w["verify"]
    );
    assert_eq!(
        w["verify"]["mismatch_count"], 0,
        "{url} QD {qd}: {}",
        w["verify"]
    );
}

#[test]
fn a_busy_polling_target_serves_ram_and_file_luns_and_counts_its_spins() {
    // On disk, not tmpfs: commands there go on the ring (or the blocking
    // pool where io_uring is unavailable), not inline.
    let dir = tempfile::Builder::new()
        .prefix("busy-poll")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let file = format!("file:{},size=16MiB", dir.path().join("lun1.img").display());
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:16MiB",
        "--lun",
        &file,
        "--busy-poll",
        "1ms",
        "--stats",
        "127.0.0.1:0",
    ]);
    let before = busy_poll_stats(&t);
    assert_eq!(before["budget_us"], 1000.0, "{before}");
    for lun in [0, 1] {
        for qd in ["1", "4"] {
            verified_run(&t.url(NAME, lun), qd);
        }
    }
    let after = busy_poll_stats(&t);
    // Every connection that has answered and waits for its next command
    // spins once before it sleeps: found work or not is up to the
    // scheduler, that it spun is not.
    let spins = after["found_work"].as_u64().unwrap() + after["timed_out"].as_u64().unwrap();
    assert!(spins > 0, "{after}");
    assert!(after["spin_s"].as_f64().unwrap() > 0.0, "{after}");
}

#[test]
fn without_the_option_no_connection_spins() {
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:16MiB",
        "--stats",
        "127.0.0.1:0",
    ]);
    verified_run(&t.url(NAME, 0), "1");
    let s = busy_poll_stats(&t);
    assert_eq!(s["budget_us"], 0.0, "{s}");
    assert_eq!(s["found_work"], 0, "{s}");
    assert_eq!(s["timed_out"], 0, "{s}");
    assert_eq!(s["spin_s"], 0.0, "{s}");
}

#[test]
fn a_budget_over_a_millisecond_is_refused_at_start() {
    let (code, out) = target_refused(&["--lun", "ram:1MiB", "--busy-poll", "5ms"]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("--busy-poll 5ms: must be 0 (off) ..= 1ms"),
        "{out}"
    );
}
