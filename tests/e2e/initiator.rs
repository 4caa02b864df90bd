//! The initiator tools and the load generator end to end: `ironlun
//! discover/inquiry/readcap/dd/bench/report/lab` against ironlun's own
//! target and against tgt (Debian `tgt`, installed by scripts/test) on
//! loopback.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ironlun_compare::daemons::Daemon;
use ironlun_compare::workloads::LunKind;
use support::{
    first_workload, free_port, ironlun_ok as ok, random_file, read_json, run, tool,
    verify_mix_flags, verify_pass_args, Target,
};

fn ironlun() -> &'static str {
    support::ironlun_bin()
}

/// discover, inquiry, readcap and a dd round trip against one LUN URL.
fn tools_round_trip(portal: &str, url: &str, expect_target: &str) {
    let out = ok(&["discover", portal]);
    assert!(out.contains(expect_target), "{out}");
    let out = ok(&["inquiry", url]);
    assert!(out.contains("Peripheral device type: 0x00"), "{out}");
    let out = ok(&["readcap", url]);
    assert!(out.contains("Block size:"), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    let back = dir.path().join("back.bin");
    // Not a multiple of the transfer size: the tail is a short command.
    let data = random_file(&src, 3 * 1024 * 1024 + 4096);
    ok(&[
        "dd",
        "--if",
        src.to_str().unwrap(),
        "--of",
        url,
        "--bs",
        "256k",
        "--quiet",
    ]);
    let count = (data.len() / 4096).to_string();
    ok(&[
        "dd",
        "--if",
        url,
        "--of",
        back.to_str().unwrap(),
        "--bs",
        "4k",
        "--count",
        &count,
        "--qd",
        "16",
        "--quiet",
    ]);
    let got = std::fs::read(&back).unwrap();
    assert_eq!(got.len(), data.len());
    assert!(got == data, "data read back differs from data written");
}

/// A short verifying mixed run; returns the JSON result.
fn bench_verify(url: &str, extra: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut args = vec!["bench", url];
    args.extend(verify_mix_flags("2s", "16MiB"));
    args.extend_from_slice(&["--json", json.to_str().unwrap()]);
    args.extend_from_slice(extra);
    ok(&args);
    let v = read_json(&json);
    let w = &v["workloads"][0];
    for key in [
        "name",
        "iops",
        "read_iops",
        "write_iops",
        "mb_per_s",
        "mib_per_s",
        "errors",
    ] {
        assert!(!w[key].is_null(), "JSON lacks {key}: {w}");
    }
    for key in ["mean", "p50", "p99", "p999", "max"] {
        assert!(w["latency_us"][key].as_f64().is_some(), "latency_us.{key}");
    }
    assert!(w["cpu"]["initiator_pct"].as_f64().is_some());
    assert!(w["cpu"].get("target_pct").is_some());
    assert_eq!(w["errors"], 0);
    assert!(w["read_iops"].as_f64().unwrap() > 0.0 && w["write_iops"].as_f64().unwrap() > 0.0);
    let checked = w["verify"]["checked_blocks"].as_u64().unwrap();
    assert!(checked > 0, "verification checked nothing");
    assert_eq!(w["verify"]["mismatch_count"], 0, "{}", w["verify"]);
    v
}

#[test]
fn tools_and_bench_against_ironlun() {
    let t = Target::start(&[
        "--name",
        "iqn.2026-11.test:disk",
        "--lun",
        "ram:64MiB",
        "--stats",
        "127.0.0.1:0",
    ]);
    let portal = t.addr.to_string();
    let url = t.url("iqn.2026-11.test:disk", 0);
    tools_round_trip(&portal, &url, "iqn.2026-11.test:disk");
    // Target CPU comes from its /proc entry.
    let pid = t.child.id().to_string();
    let v = bench_verify(&url, &["--target-pid", &pid]);
    assert!(v["workloads"][0]["cpu"]["target_pct"].as_f64().is_some());
    // Solicited writes only, with digests: the same run must still
    // verify. Target CPU from its statistics endpoint this time.
    let stats = t.stats_addr();
    let before = stats_json(stats);
    let v = bench_verify(
        &url,
        &[
            "--initial-r2t",
            "yes",
            "--immediate-data",
            "no",
            "--header-digest",
            "CRC32C",
            "--data-digest",
            "CRC32C",
            "--target-stats",
            &stats.to_string(),
        ],
    );
    let w = &v["workloads"][0];
    let target_pct = w["cpu"]["target_pct"].as_f64().unwrap();
    assert!(target_pct > 0.0, "target CPU from the endpoint: {w}");
    // The target counted at least the I/Os the bench measured, split the
    // same way.
    let after = stats_json(stats);
    let delta = |k: &str| after["io"][k].as_u64().unwrap() - before["io"][k].as_u64().unwrap();
    let elapsed = w["elapsed_s"].as_f64().unwrap();
    let bench_reads = (w["read_iops"].as_f64().unwrap() * elapsed).round() as u64;
    let bench_writes = (w["write_iops"].as_f64().unwrap() * elapsed).round() as u64;
    assert!(
        delta("read_commands") >= bench_reads && delta("write_commands") >= bench_writes,
        "target saw {} reads / {} writes, bench measured {bench_reads} / {bench_writes}",
        delta("read_commands"),
        delta("write_commands")
    );
    assert!(delta("write_bytes") >= bench_writes * 8192);
    assert_eq!(after["pid"].as_u64().unwrap(), u64::from(t.child.id()));
    assert!(after["cpu"]["total_s"].as_f64().unwrap() > 0.0);
    assert_eq!(after["luns"][0]["backend"], "ram");
    assert_eq!(after["luns"][0]["size_bytes"], 64 << 20);
    // Wrong paths, wrong methods and an oversized head get HTTP errors;
    // the endpoint keeps answering.
    assert_eq!(support::http_get(stats, "/nope").0, 404);
    let post = "POST /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(support::http_request(stats, post).0, 405);
    let huge = format!(
        "GET /stats HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(64 << 10)
    );
    // 431 Request Header Fields Too Large (RFC 6585 §5); no answer at
    // all (0) fails too.
    let (code, body) = support::http_request(stats, &huge);
    assert_eq!(code, 431, "oversized request head: {body:?}\n{}", t.log());
    assert_eq!(support::http_get(stats, "/stats").0, 200);
}

fn stats_json(addr: std::net::SocketAddr) -> serde_json::Value {
    let (code, body) = support::http_get(addr, "/stats");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn verify_catches_a_corrupted_block() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("lun.img");
    let spec = format!("file:{},size=8MiB", img.display());
    let t = Target::start(&["--name", "iqn.2026-11.test:disk", "--lun", &spec]);
    let url = t.url("iqn.2026-11.test:disk", 0);
    // Fill the first MiB with verifiable blocks.
    ok(&verify_pass_args(&url, "0"));
    // A clean read pass first: nothing to report.
    let read = verify_pass_args(&url, "100");
    ok(&read);
    // Flip one byte inside block 100 behind the target's back.
    let mut bytes = std::fs::read(&img).unwrap();
    bytes[100 * 512 + 200] ^= 0x5a;
    std::fs::write(&img, &bytes).unwrap();
    let (rc, out) = run(ironlun(), &read);
    assert_ne!(rc, 0, "a corrupted block must fail the run:\n{out}");
    assert!(out.contains("LBA 100: checksum mismatch"), "{out}");
}

#[test]
fn report_and_lab_write_html_with_charts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lab");
    let text = ok(&[
        "lab",
        "--time",
        "0.5s",
        "--size",
        "64MiB",
        "--profile",
        "web-file-server-4k",
        "--profile",
        "dd-write-512k",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(text.contains("report:"), "{text}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.matches("<svg").count() >= 4, "charts missing");
    assert!(html.contains("web-file-server-4k") && html.contains("dd-write-512k"));
    let w = &first_workload(&out.join("lab.json"));
    assert!(w["iops"].as_f64().unwrap() > 0.0);
    // The in-process target's threads are measured apart from the client.
    assert!(w["cpu"]["target_pct"].as_f64().is_some(), "{}", w["cpu"]);
    // `ironlun report` renders the same file again.
    let again = dir.path().join("again.html");
    ok(&[
        "report",
        out.join("lab.json").to_str().unwrap(),
        "-o",
        again.to_str().unwrap(),
    ]);
    assert!(std::fs::read_to_string(again).unwrap().contains("<svg"));
}

#[test]
fn bench_lists_every_profile_and_rejects_bad_workloads() {
    let out = ok(&["bench", "--list"]);
    for name in [
        "web-file-server-4k",
        "dss-1m",
        "media-streaming-64k",
        "sql-server-log-64k",
        "os-paging-64k",
        "web-server-log-8k",
        "db-oltp-8k",
        "exchange-email-4k",
        "os-drive-8k",
        "video-on-demand-512k",
        "file-server",
        "file-server-50",
        "dd-read-512k",
        "dd-write-512k",
        "seq-read-64k-delay",
        "core-read-64k",
        "zones-read-64k",
        "access-time-read",
    ] {
        assert!(out.contains(name), "{name} missing from --list");
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("w.toml");
    std::fs::write(&f, "[[workload]]\nname = \"x\"\nqueue_depth = 4\nlines = [{ size = 4096, share = 50, read = 100, random = 0 }]\n").unwrap();
    let (rc, out) = run(
        ironlun(),
        &[
            "bench",
            "iscsi://127.0.0.1:1/iqn.x:y/0",
            "--workload",
            f.to_str().unwrap(),
        ],
    );
    assert_ne!(rc, 0);
    assert!(out.contains("sum to 50%"), "{out}");
}

#[test]
fn tools_and_bench_against_tgt() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let img = dir.path().join("tgt.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    // The comparison's own tgtd set-up (ironlun-compare): the file LUN on
    // target 1, LUN 1.
    tool("tgtd", "tgt");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let tgt = Daemon::start_tgt(addr, &img).unwrap();
    let url = tgt.url(LunKind::File);
    let portal = addr.to_string();
    let iqn = url.split('/').nth(3).unwrap().to_owned();
    tools_round_trip(&portal, &url, &iqn);
    bench_verify(&url, &[]);
}

/// Starts `ironlun bench` with `--verify` in the background, logging at
/// info so reconnects and failovers show on stderr.
fn spawn_verifying_bench(urls: &[&str], json: &std::path::Path, extra: &[&str]) -> Child {
    let mut cmd = Command::new(ironlun());
    cmd.args(["--log", "info", "bench"])
        .args(urls)
        .args(verify_mix_flags("6s", "16MiB"))
        .args(["--json", json.to_str().unwrap()]);
    cmd.args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (bounded) for a background bench: (success, stdout + stderr).
fn finish_bench(child: Child) -> (bool, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(deadline - Instant::now()) {
        Ok(r) => r.unwrap(),
        Err(_) => {
            // SAFETY: kill(2) on the child we spawned.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("bench did not finish within 60 s");
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The run's JSON: no errors, verification checked blocks and found no
/// mismatch, and I/O went on to the last second.
fn assert_clean_run(json: &std::path::Path, log: &str) {
    let w = &first_workload(json);
    assert_eq!(w["errors"], 0, "{log}");
    assert!(w["verify"]["checked_blocks"].as_u64().unwrap() > 0);
    assert_eq!(w["verify"]["mismatch_count"], 0, "{}", w["verify"]);
    let series = w["series"].as_array().unwrap();
    let last = series.last().unwrap();
    assert!(
        last["iops"].as_f64().unwrap() > 0.0,
        "no I/O in the last second: {series:?}"
    );
}

#[test]
fn bench_reconnects_when_the_target_restarts() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let img = dir.path().join("disk.img");
    let lun = format!("file:{},size=64MiB", img.display());
    let listen = format!("127.0.0.1:{}", free_port());
    let args = [
        "--name",
        "iqn.2026-11.test:restart",
        "--lun",
        lun.as_str(),
        "--listen",
        listen.as_str(),
    ];
    let first = Target::start_with(&args, false);
    let url = format!("iscsi://{listen}/iqn.2026-11.test:restart/0");
    let json = dir.path().join("r.json");
    let bench = spawn_verifying_bench(&[&url], &json, &[]);
    std::thread::sleep(Duration::from_secs(2));
    // A crash, not a clean shutdown: no logout request, connections reset.
    drop(first);
    std::thread::sleep(Duration::from_millis(200));
    let second = Target::start_with(&args, false);
    let (ok, log) = finish_bench(bench);
    assert!(ok, "bench failed across a target restart:\n{log}");
    assert!(log.contains("connection failed"), "{log}");
    assert!(log.contains("session reinstated"), "{log}");
    // The restarted target gives the new nexus a unit attention (power
    // on); the initiator retried the command instead of failing it.
    assert!(log.contains("unit attention"), "{log}");
    assert!(second.log().contains("login:"), "{}", second.log());
    assert_clean_run(&json, &log);
}

#[test]
fn multipath_bench_survives_a_path_cut_mid_run() {
    let target = "iqn.2026-11.test:mpio";
    let t = Target::start_portals(&["--name", target, "--lun", "ram:64MiB"], 2);
    let mut relay = support::Relay::start(t.addrs[0]);
    let url_a = format!("iscsi://{}/{target}/0", relay.addr);
    let url_b = format!("iscsi://{}/{target}/0", t.addrs[1]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let bench = spawn_verifying_bench(
        &[&url_a, &url_b],
        &json,
        &["--multipath", "--path-policy", "round-robin"],
    );
    std::thread::sleep(Duration::from_secs(2));
    relay.cut();
    let (ok, log) = finish_bench(bench);
    assert!(ok, "bench failed when a path was cut:\n{log}");
    assert!(log.contains("path retired"), "{log}");
    assert_clean_run(&json, &log);
}
