//! The network lab end to end: the netem relay in front of a real target,
//! bench and tcpbench over emulated links, and sweeps with the model.
//! Assertions use only bounds a correct emulator cannot break (nothing
//! is faster than the round trip or the link rate); timings against
//! settings are checked in crates/ironlun-netem/tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use support::{free_port, ironlun_ok as ok, Target};

fn ironlun() -> &'static str {
    support::ironlun_bin()
}

#[test]
fn netem_relays_a_session_and_bench_sees_the_round_trip() {
    let t = Target::start(&["--name", "iqn.2026-11.test:lab", "--lun", "ram:64MiB"]);
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut relay = Command::new(ironlun())
        .args([
            "netem",
            "--listen",
            &listen,
            "--connect",
            &t.addr.to_string(),
            "--rtt",
            "20ms",
            "--rate",
            "100Mbit",
            "--time",
            "30s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until it listens.
    let mut up = false;
    for _ in 0..100 {
        if std::net::TcpStream::connect(&listen).is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(up, "netem did not listen");
    let text = ok(&[
        "inquiry",
        &format!("iscsi://{listen}/iqn.2026-11.test:lab/0"),
    ]);
    assert!(text.contains("ironlun"), "{text}");
    let _ = relay.kill();
    let _ = relay.wait();

    // bench with a built-in link: nothing completes faster than the round
    // trip, and nothing moves faster than the link.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("b.json");
    ok(&[
        "bench",
        &t.url("iqn.2026-11.test:lab", 0),
        "--bs",
        "64k",
        "--read",
        "100",
        "--random",
        "0",
        "--qd",
        "4",
        "--time",
        "1s",
        "--ramp",
        "0.2s",
        "--rtt",
        "20ms",
        "--link-rate",
        "100Mbit",
        "--json",
        json.to_str().unwrap(),
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let w = &v["workloads"][0];
    assert_eq!(w["errors"], 0);
    assert!(w["latency_us"]["p50"].as_f64().unwrap() >= 20_000.0, "{w}");
    let mbs = w["mb_per_s"].as_f64().unwrap();
    assert!(
        mbs > 0.0 && mbs <= 12.5 * 1.02,
        "{mbs} MB/s over a 100 Mbit/s link"
    );
    // The link is its own field (the report's header shows it apart from
    // the target's URL): RTT and rate as given.
    let link = v["link"].as_str().unwrap_or("");
    assert!(
        link.contains("RTT 20ms") && link.contains("100 Mbit/s"),
        "link: {}",
        v["link"]
    );
}

#[test]
fn tcpbench_reports_both_directions_within_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let text = ok(&[
        "tcpbench",
        "--time",
        "500ms",
        "--repeat",
        "1",
        "--link-rate",
        "50Mbit",
        "--rtt",
        "4ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(text.contains("up") && text.contains("down"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["tcpbench"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        let mbs = r["mb_per_s"].as_f64().unwrap();
        assert!(mbs > 0.0 && mbs <= 6.25 * 1.02, "{r}");
        assert_eq!(r["model_mb_per_s"].as_f64().unwrap(), 6.25);
    }
}

#[test]
fn sweep_writes_a_record_per_cell_with_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let html = dir.path().join("s.html");
    let text = ok(&[
        "sweep",
        "--set",
        "op=read",
        "--set",
        "bs=64KiB",
        "--set",
        "link_rate=100Mbit",
        "--vary",
        "rtt=0ms,20ms",
        "--vary",
        "qd=1,4",
        "--time",
        "0.5s",
        "--lun-size",
        "64MiB",
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(text.contains("model in parentheses"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        let mbs = c["mb_per_s"].as_f64().unwrap();
        let model = c["model"]["mb_per_s"].as_f64().unwrap();
        assert!(mbs > 0.0 && mbs <= 12.5 * 1.02, "{c}");
        assert!(model > 0.0 && model <= 12.5, "{c}");
        if c["params"]["rtt"] == "20ms" {
            assert!(c["latency_p50_us"].as_f64().unwrap() >= 20_000.0, "{c}");
        }
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("model"));

    // Bad sweeps are refused with the reason.
    let out = Command::new(ironlun())
        .args(["sweep", "--vary", "connections=2"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("MC/S"));
    let list = ok(&["reproduce", "--list"]);
    assert!(list.contains("wan-tuning"));
}

#[test]
fn the_other_reproductions_run_end_to_end_and_write_reports() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["target-backends", "ramdisk-target", "app-profiles"] {
        let text = ok(&[
            "reproduce",
            name,
            "--time",
            "0.2s",
            "--lun-size",
            "32MiB",
            // The VM rows run in tests/kernel_initiator.rs.
            "--vm",
            "off",
            "--initiators",
            "quick",
            // With the VM off, its rows must say so.
            "--kernel-initiator",
            "quick",
            "--out",
            dir.path().to_str().unwrap(),
        ]);
        assert!(text.contains("took"), "{text}");
        let json = std::fs::read_to_string(dir.path().join(format!("{name}.json"))).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["reproduction"], name);
        let cells = v["cells"].as_array().map_or(0, Vec::len);
        let workloads = v["workloads"].as_array().map_or(0, Vec::len);
        assert!(cells + workloads > 0, "{name}: nothing measured");
        for c in v["measured_cells"].as_array().unwrap() {
            assert!(c["measured_mb_per_s"].as_f64().unwrap() > 0.0, "{c}");
        }
        published_beside_measured(name, &v, &text);
        let html = std::fs::read_to_string(dir.path().join(format!("{name}.html"))).unwrap();
        assert!(html.contains("<html"));
    }
    initiator_rows_beside_the_line(dir.path());
    // The run over two paths, one of them pulled mid-run, went on.
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("ramdisk-target.json")).unwrap(),
    )
    .unwrap();
    let sets = v["workloads"].as_array().unwrap();
    let paths = sets
        .iter()
        .find(|s| s["title"].as_str().unwrap().contains("pulled"))
        .expect("the two-path run");
    let pulled = &paths["results"][1];
    assert_eq!(pulled["errors"], 0, "{pulled}");
    assert!(pulled["iops"].as_f64().unwrap() > 0.0);
    // h2benchw ran under all three tunings, and the NIC team's mixes (both
    // read shares) ran: each of their published cells has a measured value
    // (connections per second are not measured).
    for c in v["cells"].as_array().unwrap() {
        let place = c["where"].as_str().unwrap();
        let tables = ["h2benchw summary table", "Intel NIC team"];
        if tables.iter().any(|t| place.contains(t)) && c["metric"] != "connections" {
            assert_eq!(c["status"], "compared", "{c}");
        }
    }
    peer_rows_are_measured_or_say_why(dir.path());
}

/// target-backends' tgt and istgt rows: each measured or skipped with a
/// reason (a peer that is not installed is skipped, never dropped), istgt's
/// null rows "not supported", and a measured row under a memory limit
/// unless the notes say the limit was not applied.
fn peer_rows_are_measured_or_say_why(dir: &std::path::Path) {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("target-backends.json")).unwrap())
            .unwrap();
    let rows = v["peer_rows"].as_array().unwrap();
    for peer in ["tgt", "istgt"] {
        assert!(rows.iter().any(|r| r["target"] == peer), "{peer}: no rows");
    }
    let notes = v["notes"].to_string();
    let limited = !notes.contains("NOT applied");
    for r in rows {
        match r["skipped"].as_str() {
            Some(why) => assert!(!why.is_empty(), "{r}"),
            None => {
                assert!(r["mb_per_s"].as_f64().unwrap() > 0.0, "{r}");
                assert_eq!(r["memory_limit"].is_u64(), limited, "{r} {notes}");
            }
        }
        if r["target"] == "istgt" && r["backend"] == "null" {
            let why = r["skipped"].as_str().unwrap();
            assert!(why.starts_with("not supported by istgt"), "{r}");
        }
    }
}

/// app-profiles' quick initiator slice: both clients measured on the
/// large read spec with CPU per I/O and a verdict; iscsi-perf refused
/// the write-only spec with its reason; offload rows published only.
fn initiator_rows_beside_the_line(dir: &std::path::Path) {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("app-profiles.json")).unwrap())
            .unwrap();
    let i = &v["initiators"];
    assert_eq!(i["line"]["pct"], 8.0, "{i}");
    let rows = i["rows"].as_array().unwrap();
    let row = |spec: &str, who: &str| {
        rows.iter()
            .find(|r| r["spec"] == spec && r["initiator"] == who)
            .unwrap_or_else(|| panic!("no {spec} row for {who}: {i}"))
    };
    for who in ["ironlun bench", "libiscsi iscsi-perf"] {
        let r = row("dss-1m", who);
        assert_eq!(r["source"], "measured", "{r}");
        assert!(r["iops"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["cpu_us_per_io"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["verdict"].is_string(), "{r}");
    }
    let refused = row("sql-server-log-64k", "libiscsi iscsi-perf");
    assert!(
        refused["cannot"].as_str().unwrap().contains("only reads"),
        "{refused}"
    );
    let hba = row("dss-1m", "hba-broadcom");
    assert_eq!(
        (&hba["source"], &hba["in_lab"]),
        (&"published".into(), &false.into())
    );
    assert!(hba["this_host_cpu_pct"].is_null(), "{hba}");
    // Only the quick slice ran.
    assert!(rows.iter().all(|r| r["spec"] != "os-drive-8k"), "{i}");
    // The kernel initiator's rows, asked for with the VM off: each says
    // why it did not run, with no number.
    let kernel: Vec<_> = rows
        .iter()
        .filter(|r| r["initiator"] == "Linux kernel (VM)")
        .collect();
    assert_eq!(kernel.len(), 3, "{i}");
    for r in kernel {
        assert!(r["cannot"].as_str().unwrap().contains("--vm off"), "{r}");
        assert!(r["cpu_us_per_io"].is_null() && r["iops"].is_null(), "{r}");
        assert_eq!(r["estimate"], true, "{r}");
    }
    assert!(i["kernel_calibration"].is_null(), "{i}");
}

/// Every cell of a reproduction's JSON has `published`, `measured` and
/// `model` (numbers or null) and `where`; each published cell is either
/// compared (with its ratio and flag) or said to be not measured, and
/// the share counts only compared cells.
fn published_beside_measured(name: &str, v: &serde_json::Value, text: &str) {
    let cells = v["cells"].as_array().unwrap();
    let a = &v["agreement"];
    let published = a["published_cells"].as_u64().unwrap();
    assert!(published > 0, "{name}: {a}");
    let (mut compared, mut within, mut listed) = (0, 0, 0);
    for c in cells {
        for k in ["published", "measured", "model"] {
            assert!(c[k].is_number() || c[k].is_null(), "{name}: {k} in {c}");
        }
        assert!(c["where"].as_str().is_some_and(|w| !w.is_empty()), "{c}");
        assert!(c["unit"].is_string(), "{c}");
        match c["status"].as_str().unwrap() {
            "compared" => {
                compared += 1;
                let r = c["measured"].as_f64().unwrap() / c["published"].as_f64().unwrap();
                assert!((c["ratio"].as_f64().unwrap() - r).abs() < 1e-9, "{c}");
                let w = c["within_25pct"].as_bool().unwrap();
                assert_eq!(w, (r - 1.0).abs() <= 0.25 + 1e-12, "{c}");
                within += usize::from(w);
                listed += 1;
            }
            "not-measured" => {
                assert!(c["published"].is_number() && c["measured"].is_null(), "{c}");
                assert!(c["note"].as_str().unwrap().contains("not measured"), "{c}");
                listed += 1;
            }
            "not-published" => {
                assert!(c["published"].is_null() && c["ratio"].is_null(), "{c}");
                assert_eq!(c["where"], "not published");
            }
            s => panic!("{name}: status {s}"),
        }
    }
    assert_eq!(listed, published, "{name}: every published cell is listed");
    assert_eq!(a["compared"], compared, "{name}");
    assert_eq!(a["within_25pct"], within, "{name}");
    assert!(compared > 0, "{name}: no published cell was measured");
    let share = a["share_within_25pct"].as_f64().unwrap();
    assert!((share - within as f64 / compared as f64).abs() < 1e-9);
    assert!(
        text.contains("Published | measured | model | ratio"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{within} of {compared} compared cells within")),
        "{text}"
    );
    fitted_profile(name, v, text);
}

/// The fitted testbed profile: `fit` names its parameters with units,
/// counts its training cells, and gives the agreement of the profile in
/// and out of sample, each consistent with the cells' own `training`,
/// `profile` and `profile_within_25pct`.
fn fitted_profile(name: &str, v: &serde_json::Value, text: &str) {
    let f = &v["fit"];
    let params = f["parameters"].as_object().unwrap();
    for (k, p) in params {
        assert!(
            p["value"].is_number() && p["unit"].is_string(),
            "{name}: {k} {p}"
        );
    }
    assert!(params.contains_key("link_payload_rate"), "{name}: {f}");
    let cells = v["cells"].as_array().unwrap();
    let training = cells.iter().filter(|c| c["training"] == true).count();
    assert_eq!(f["training_cells"], training, "{name}");
    assert!(training > 0, "{name}: no training cell");
    for (key, t) in [("in_sample", true), ("out_of_sample", false)] {
        let flags: Vec<bool> = cells
            .iter()
            .filter(|c| c["training"] == t && c["published"].is_number())
            .filter_map(|c| c["profile_within_25pct"].as_bool())
            .collect();
        let a = &f[key];
        assert_eq!(a["compared"], flags.len(), "{name}: {key}");
        assert_eq!(
            a["within_25pct"],
            flags.iter().filter(|w| **w).count(),
            "{name}: {key}"
        );
    }
    assert!(
        text.contains("Fitted testbed profile") && text.contains("out-of-sample"),
        "{text}"
    );
}

#[test]
fn tcp_knobs_on_both_ends_keep_data_intact() {
    let t = Target::start(&[
        "--name",
        "iqn.2026-11.test:knobs",
        "--lun",
        "ram:32MiB",
        "--tcp-window",
        "256KiB",
        "--tcp-quickack",
        "--tcp-nagle",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("k.json");
    ok(&[
        "bench",
        &t.url("iqn.2026-11.test:knobs", 0),
        "--verify",
        "--bs",
        "16k",
        "--read",
        "50",
        "--qd",
        "8",
        "--time",
        "1s",
        "--ramp",
        "0",
        "--seek-range",
        "8MiB",
        "--tcp-window",
        "128KiB",
        "--tcp-quickack",
        "--json",
        json.to_str().unwrap(),
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let w = &v["workloads"][0];
    assert_eq!(w["errors"], 0);
    assert!(w["verify"]["checked_blocks"].as_u64().unwrap() > 0);
    assert_eq!(w["verify"]["mismatch_count"], 0);
    // A window outside the allowed range is refused at start.
    let out = Command::new(ironlun())
        .args(["target", "--lun", "ram:1MiB", "--tcp-window", "1k"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tcp-window"));
}
