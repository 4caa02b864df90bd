//! The initiator tools and the load generator end to end: `ironlun
//! discover/inquiry/readcap/dd/bench/report/lab` against ironlun's own
//! target and against tgt (Debian `tgt`, installed by scripts/test) on
//! loopback.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{random_file, run, tool, Target};

fn ironlun() -> &'static str {
    env!("CARGO_BIN_EXE_ironlun")
}

fn ok(args: &[&str]) -> String {
    let (rc, out) = run(ironlun(), args);
    assert_eq!(rc, 0, "ironlun {args:?} failed:\n{out}");
    out
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
    let mut args = vec![
        "bench",
        url,
        "--verify",
        "--bs",
        "8k",
        "--read",
        "50",
        "--random",
        "60",
        "--qd",
        "16",
        "--time",
        "2s",
        "--ramp",
        "0",
        "--seek-range",
        "16MiB",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ok(&args);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
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
    let t = Target::start(&["--name", "iqn.2026-11.test:disk", "--lun", "ram:64MiB"]);
    let portal = t.addr.to_string();
    let url = t.url("iqn.2026-11.test:disk", 0);
    tools_round_trip(&portal, &url, "iqn.2026-11.test:disk");
    // Target CPU comes from its /proc entry.
    let pid = t.child.id().to_string();
    let v = bench_verify(&url, &["--target-pid", &pid]);
    assert!(v["workloads"][0]["cpu"]["target_pct"].as_f64().is_some());
    // Solicited writes only, with digests: the same run must still verify.
    bench_verify(
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
        ],
    );
}

#[test]
fn verify_catches_a_corrupted_block() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("lun.img");
    let spec = format!("file:{},size=8MiB", img.display());
    let t = Target::start(&["--name", "iqn.2026-11.test:disk", "--lun", &spec]);
    let url = t.url("iqn.2026-11.test:disk", 0);
    // Fill the first MiB with verifiable blocks.
    ok(&[
        "bench",
        &url,
        "--verify",
        "--bs",
        "64k",
        "--read",
        "0",
        "--random",
        "0",
        "--qd",
        "4",
        "--seek-range",
        "1MiB",
        "--ios",
        "64",
        "--time",
        "10s",
        "--ramp",
        "0",
    ]);
    // A clean read pass first: nothing to report.
    let read = [
        "bench",
        &url,
        "--verify",
        "--bs",
        "64k",
        "--read",
        "100",
        "--random",
        "0",
        "--qd",
        "4",
        "--seek-range",
        "1MiB",
        "--ios",
        "64",
        "--time",
        "10s",
        "--ramp",
        "0",
    ];
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
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("lab.json")).unwrap()).unwrap();
    let w = &json["workloads"][0];
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

/// tgtd on a loopback port with a tmpfs file LUN; killed on drop.
struct Tgt {
    child: Child,
    control: String,
}

impl Tgt {
    fn start(port: u16, control: u16, img: &str) -> Tgt {
        let tgtd = tool("tgtd", "tgt");
        let tgtadm = tool("tgtadm", "tgt");
        let control = control.to_string();
        let child = Command::new(&tgtd)
            .args([
                "-f",
                "-C",
                &control,
                "--iscsi",
                &format!("portal=127.0.0.1:{port}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tgtd");
        let t = Tgt { child, control };
        let adm = |args: &[&str]| {
            let mut a = vec!["-C", t.control.as_str(), "--lld", "iscsi"];
            a.extend_from_slice(args);
            run(&tgtadm, &a)
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (rc, out) = adm(&[
                "--op",
                "new",
                "--mode",
                "target",
                "--tid",
                "1",
                "-T",
                "iqn.2026-11.test:tgt",
            ]);
            if rc == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "tgtd did not come up: {out}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let (rc, out) = adm(&[
            "--op",
            "new",
            "--mode",
            "logicalunit",
            "--tid",
            "1",
            "--lun",
            "1",
            "-b",
            img,
        ]);
        assert_eq!(rc, 0, "{out}");
        let (rc, out) = adm(&[
            "--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL",
        ]);
        assert_eq!(rc, 0, "{out}");
        t
    }
}

impl Drop for Tgt {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn tools_and_bench_against_tgt() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let img = dir.path().join("tgt.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let port = free_port();
    let control = 20000 + (std::process::id() % 10000) as u16;
    let _tgt = Tgt::start(port, control, img.to_str().unwrap());
    let portal = format!("127.0.0.1:{port}");
    let url = format!("iscsi://{portal}/iqn.2026-11.test:tgt/1");
    tools_round_trip(&portal, &url, "iqn.2026-11.test:tgt");
    bench_verify(&url, &[]);
}
