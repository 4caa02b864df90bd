//! `ironlun bench --threads`: the workers spread over load threads, each
//! with its own sessions, against ironlun's own target on loopback; the
//! merged result must be the exact sum of what the threads counted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use support::{http_get, ironlun_ok as ok, Target};

const NAME: &str = "iqn.2026-11.test:threads";

fn stats(t: &Target) -> serde_json::Value {
    let (code, body) = http_get(t.stats_addr(), "/stats");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Runs `ironlun bench` with `args` and `--json`; the first workload.
fn bench(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", json.to_str().unwrap()]);
    let out = ok(&all);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let w = v["workloads"][0].clone();
    let n = w["threads"].as_u64().unwrap();
    let plural = if n == 1 { "" } else { "s" };
    assert!(out.contains(&format!("{n} load thread{plural}")), "{out}");
    w
}

/// The run's totals are the sums of the threads' totals, and there is
/// one thread's totals per thread asked for.
fn check_sums(w: &serde_json::Value, threads: u64, bs: u64) {
    assert_eq!(w["threads"].as_u64(), Some(threads), "{w}");
    let parts = w["per_thread"].as_array().unwrap();
    assert_eq!(parts.len() as u64, threads, "{w}");
    let sum = |k: &str| parts.iter().map(|p| p[k].as_u64().unwrap()).sum::<u64>();
    let ios = w["ios"].as_u64().unwrap();
    assert!(ios > 0, "nothing measured: {w}");
    assert_eq!(sum("ios"), ios);
    assert_eq!(sum("read_ios"), w["read_ios"].as_u64().unwrap());
    assert_eq!(sum("write_ios"), w["write_ios"].as_u64().unwrap());
    assert_eq!(sum("bytes"), ios * bs, "every I/O is {bs} bytes");
    assert_eq!(sum("errors"), 0);
    assert_eq!(w["errors"], 0);
    for p in parts {
        assert!(p["ios"].as_u64().unwrap() > 0, "a thread did nothing: {w}");
    }
    // The series' seconds are merged from every thread's: none counts
    // more than the run.
    let in_series: f64 = w["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["iops"].as_f64().unwrap())
        .sum();
    assert!(
        in_series > 0.0 && in_series <= ios as f64,
        "{in_series} of {ios}"
    );
}

#[test]
fn threads_against_a_null_lun_add_up() {
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "null:1GiB,bs=4096",
        "--stats",
        "127.0.0.1:0",
    ]);
    let url = t.url(NAME, 0);
    for threads in ["1", "2"] {
        let before = stats(&t);
        let w = bench(&[
            &url,
            "--threads",
            threads,
            "--workers",
            "2",
            "--qd",
            "8",
            "--bs",
            "4k",
            "--read",
            "70",
            "--time",
            "2s",
            "--ramp",
            "300ms",
        ]);
        check_sums(&w, threads.parse().unwrap(), 4096);
        // The target saw at least what the bench measured.
        let after = stats(&t);
        let delta = |k: &str| after["io"][k].as_u64().unwrap() - before["io"][k].as_u64().unwrap();
        let (reads, writes) = (
            w["read_ios"].as_u64().unwrap(),
            w["write_ios"].as_u64().unwrap(),
        );
        assert!(
            delta("read_commands") >= reads,
            "{} < {reads}",
            delta("read_commands")
        );
        assert!(
            delta("write_commands") >= writes,
            "{} < {writes}",
            delta("write_commands")
        );
    }
}

#[test]
fn threads_verify_their_own_slices() {
    let t = Target::start(&["--name", NAME, "--lun", "ram:32MiB"]);
    let url = t.url(NAME, 0);
    let w = bench(&[
        &url,
        "--threads",
        "2",
        "--workers",
        "2",
        "--sessions",
        "2",
        "--verify",
        "--qd",
        "8",
        "--bs",
        "8k",
        "--read",
        "50",
        "--random",
        "70",
        "--time",
        "2s",
        "--ramp",
        "0",
    ]);
    // Two sessions per URL, two workers each: four pairs on two threads.
    check_sums(&w, 2, 8192);
    assert!(w["verify"]["checked_blocks"].as_u64().unwrap() > 0, "{w}");
    assert_eq!(w["verify"]["mismatch_count"], 0, "{}", w["verify"]);
}

/// The counts by op are merged from the threads' histograms: every op's
/// I/Os add up to the run's, and so do the HDR buckets.
#[test]
fn threads_with_a_command_mix_count_every_op() {
    let t = Target::start(&["--name", NAME, "--lun", "ram:64MiB,thin"]);
    let url = t.url(NAME, 0);
    let w = bench(&[
        &url,
        "--threads",
        "2",
        "--workers",
        "2",
        "--qd",
        "4",
        "--bs",
        "4k",
        "--mix",
        "read=50,write=30,unmap=10,writesame=10",
        "--ios",
        "3000",
        "--time",
        "60s",
        "--ramp",
        "0",
    ]);
    assert_eq!(w["threads"], 2, "{w}");
    let ios = w["ios"].as_u64().unwrap();
    assert!(ios >= 3000, "{w}");
    let ops = w["ops"].as_object().unwrap();
    for op in ["read", "write", "unmap", "writesame"] {
        assert!(ops[op]["ios"].as_u64().unwrap() > 0, "no {op}: {w}");
    }
    let by_op: u64 = ops.values().map(|o| o["ios"].as_u64().unwrap()).sum();
    assert_eq!(by_op, ios, "{}", w["ops"]);
    let parts = w["per_thread"].as_array().unwrap();
    let by_thread: u64 = parts.iter().map(|p| p["ios"].as_u64().unwrap()).sum();
    assert_eq!(by_thread, ios);
    let buckets: u64 = w["latency_buckets_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[1].as_u64().unwrap())
        .sum();
    assert_eq!(buckets, ios, "the buckets come from the merged histogram");
    assert_eq!(w["errors"], 0, "{w}");
}

/// One latency log for all threads: two LUNs, each on a thread of its
/// own, log one line per measured I/O between them (no thread writes
/// over another's lines) with each LUN's own number. A steady-state rule
/// on two threads is judged once, on the merged seconds, and stops both.
#[test]
fn one_lat_log_for_every_thread_and_steady_stops_every_thread() {
    let t = Target::start(&["--name", NAME, "--lun", "ram:32MiB", "--lun", "ram:32MiB"]);
    let (url, url1) = (t.url(NAME, 0), t.url(NAME, 1));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lat.log");
    let w = bench(&[
        &url,
        &url1,
        "--threads",
        "2",
        "--workers",
        "1",
        "--bs",
        "4k",
        "--ios",
        "2000",
        "--time",
        "60s",
        "--lat-log",
        log.to_str().unwrap(),
    ]);
    // Under a second: no closed second to check (check_sums would).
    assert_eq!(w["threads"], 2, "{w}");
    let parts = w["per_thread"].as_array().unwrap();
    assert!(parts.iter().all(|p| p["ios"].as_u64().unwrap() > 0), "{w}");
    let text = std::fs::read_to_string(&log).unwrap();
    let luns: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(' ').nth(2).unwrap())
        .collect();
    assert_eq!(luns.len() as u64, w["ios"].as_u64().unwrap());
    for lun in ["0", "1"] {
        assert!(luns.contains(&lun), "no line of LUN {lun}");
    }
    assert!(luns.iter().all(|l| *l == "0" || *l == "1"), "{luns:?}");

    let w = bench(&[
        &url,
        "--threads",
        "2",
        "--workers",
        "2",
        "--bs",
        "4k",
        "--ramp",
        "0",
        "--time",
        "60s",
        "--steady",
        "iops_slope:50%@3s",
    ]);
    check_sums(&w, 2, 4096);
    assert_eq!(w["steady"]["reached"], true, "{}", w["steady"]);
    // Judged once on the merged seconds: reached no earlier than its
    // window, and the run (both threads) went on at least that long and
    // stopped well within its 60 s budget.
    let at = w["steady"]["at_s"].as_u64().unwrap();
    let elapsed = w["elapsed_s"].as_f64().unwrap();
    assert!(at >= 3 && elapsed >= at as f64 && elapsed < 60.0, "{w}");
    let merged = w["series"].as_array().unwrap().len() as u64;
    assert!(merged >= at, "{merged} merged seconds, steady at {at}");
}
