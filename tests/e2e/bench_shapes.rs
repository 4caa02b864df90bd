//! `ironlun bench`'s workload shapes end to end against `ironlun target`
//! on loopback: a command mix with UNMAP, WRITE SAME, COMPARE AND WRITE
//! and EXTENDED COPY on a thin RAM LUN, a hot spot seen in the latency
//! log, the steady-state stop, compressible write data on a file LUN,
//! and a mix run by two agents whose merge adds their ops (see
//! docs/bench-shapes.md).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use support::{bench_first_workload, first_workload, ironlun_ok as ok, run, tool, Target};

const NAME: &str = "iqn.2026-11.test:shapes";

/// `ironlun bench URL ARGS --json`, the first workload's result.
fn bench(dir: &Path, url: &str, args: &[&str]) -> Value {
    bench_first_workload(dir, &[&[url, "--ramp", "0"][..], args].concat())
}

fn ios(w: &Value, op: &str) -> u64 {
    w["ops"][op]["ios"].as_u64().unwrap_or(0)
}

#[test]
fn a_mix_of_every_command_on_a_thin_ram_lun() {
    let dir = tempfile::tempdir().unwrap();
    let t = Target::start(&["--name", NAME, "--lun", "ram:64MiB,thin"]);
    let url = t.url(NAME, 0);
    let region = ["--bs", "512", "--seek-range", "1MiB"];
    let caw = ["--random", "100", "--mix", "read=50,caw=50", "--ios", "400"];
    let caw = [&region[..], &caw[..]].concat();
    // Nothing written yet: every COMPARE AND WRITE miscompares, which is
    // the command's outcome, not an error.
    let w = bench(dir.path(), &url, &caw);
    assert_eq!(w["errors"], 0, "{w}");
    assert!(ios(&w, "caw") > 100, "{}", w["ops"]);
    assert_eq!(
        w["ops"]["caw"]["miscompares"].as_u64(),
        Some(ios(&w, "caw"))
    );
    // Once the region holds the bench's data, none does.
    let fill = ["--read", "0", "--random", "0", "--ios", "2048", "--qd", "8"];
    bench(dir.path(), &url, &[&region[..], &fill[..]].concat());
    let w = bench(dir.path(), &url, &caw);
    assert_eq!(w["errors"], 0, "{w}");
    assert!(ios(&w, "caw") > 100);
    assert!(w["ops"]["caw"].get("miscompares").is_none(), "{}", w["ops"]);
    // Every command at once, each counted by op.
    let mix = "read=40,write=20,unmap=10,writesame=10,caw=10,xcopy=10";
    let args = ["--bs", "4k", "--random", "100", "--seek-range", "16MiB"];
    let w = bench(
        dir.path(),
        &url,
        &[&args[..], &["--mix", mix, "--ios", "3000"]].concat(),
    );
    assert_eq!(w["errors"], 0, "{w}");
    let total: u64 = ["read", "write", "unmap", "writesame", "caw", "xcopy"]
        .iter()
        .map(|op| ios(&w, op))
        .sum();
    assert_eq!(total, w["ios"].as_u64().unwrap(), "{}", w["ops"]);
    // 3,000 draws: a 10 % share has sd 16; 60 is beyond 3.5 sd.
    for (op, share) in [
        ("read", 40),
        ("unmap", 10),
        ("writesame", 10),
        ("xcopy", 10),
    ] {
        let want = total * share / 100;
        assert!(
            ios(&w, op).abs_diff(want) < 60 + want / 10,
            "{op}: {} of {total}",
            ios(&w, op)
        );
    }
    // Verification refuses commands whose effect it cannot check.
    let (rc, out) = run(
        support::ironlun_bin(),
        &[
            "bench",
            &url,
            "--verify",
            "--mix",
            "read=50,unmap=50",
            "--time",
            "1s",
        ],
    );
    assert_ne!(rc, 0);
    assert!(out.contains("cannot be combined"), "{out}");
}

#[test]
fn a_hot_spot_in_the_latency_log_and_a_steady_stop() {
    let dir = tempfile::tempdir().unwrap();
    let t = Target::start(&["--name", NAME, "--lun", "ram:64MiB"]);
    let url = t.url(NAME, 0);
    let log = dir.path().join("lat.log");
    let args = [
        "--bs",
        "4k",
        "--read",
        "100",
        "--random",
        "100",
        "--access",
        "hotspot:90/10",
        "--ios",
        "4000",
        "--time",
        "60s",
        "--lat-log",
        log.to_str().unwrap(),
    ];
    let w = bench(dir.path(), &url, &args);
    let text = std::fs::read_to_string(&log).unwrap();
    let offsets: Vec<u64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(' ').nth(3).unwrap().parse().unwrap())
        .collect();
    assert_eq!(offsets.len() as u64, w["ios"].as_u64().unwrap());
    let hot = offsets.iter().filter(|o| **o < (64 << 20) / 10).count();
    // 4,000 draws at 90 %: sd 0.005; the tolerance is 0.03.
    let share = hot as f64 / offsets.len() as f64;
    assert!((share - 0.9).abs() < 0.03, "hot share {share}");
    assert!(!w["latency_buckets_ns"].as_array().unwrap().is_empty());

    // A loose slope rule is met within a few seconds of a 60 s budget.
    let w = bench(
        dir.path(),
        &url,
        &["--time", "60s", "--steady", "iops_slope:50%@3s"],
    );
    assert_eq!(w["steady"]["reached"], true, "{}", w["steady"]);
    let at = w["steady"]["at_s"].as_u64().unwrap();
    assert!(at >= 3 && w["elapsed_s"].as_f64().unwrap() < 60.0, "{w}");
}

#[test]
fn compressible_writes_compress_by_their_share() {
    let gzip = tool("gzip", "gzip");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("lun.img");
    let spec = format!("file:{},size=4MiB", img.display());
    let t = Target::start(&["--name", NAME, "--lun", &spec]);
    let url = t.url(NAME, 0);
    let args = [
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
    ];
    bench(dir.path(), &url, &args);
    let (rc, _) = run(&gzip, &["-k", img.to_str().unwrap()]);
    assert_eq!(rc, 0);
    let packed = std::fs::metadata(dir.path().join("lun.img.gz"))
        .unwrap()
        .len();
    let ratio = packed as f64 / (4 << 20) as f64;
    // 25 % random bytes, the rest zeros that gzip removes.
    assert!((0.24..0.29).contains(&ratio), "gzip ratio {ratio}");
    // Verification writes blocks of its own and says so.
    let (rc, out) = run(
        support::ironlun_bin(),
        &["bench", &url, "--verify", "--dedupe", "50", "--time", "1s"],
    );
    assert_ne!(rc, 0);
    assert!(out.contains("cannot be combined"), "{out}");
}

/// `ironlun bench agent` on loopback, killed on drop.
struct Agent(Child, String);

impl Agent {
    fn start(token: &Path) -> Agent {
        let mut child = Command::new(support::ironlun_bin())
            .args(["--log", "info", "bench", "agent", "--listen", "127.0.0.1:0"])
            .arg("--token-file")
            .arg(token)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                l.split_once("listening on ")
                    .map(|(_, a)| a.trim().to_owned())
            })
            .expect("the agent did not say where it listens");
        // Keep draining its log so it never blocks on a full pipe.
        std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
        Agent(child, addr)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn two_agents_run_one_mix_and_the_merge_adds_their_ops() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "shapes-agents-token-0123456789").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let t = Target::start(&["--name", NAME, "--lun", "ram:64MiB,thin"]);
    let url = t.url(NAME, 0);
    let agents = [Agent::start(&token), Agent::start(&token)];
    let list = format!("{},{}", agents[0].1, agents[1].1);
    let json = dir.path().join("r.json");
    let (tok, out) = (token.to_str().unwrap(), json.to_str().unwrap());
    let mix = "read=50,write=20,unmap=10,writesame=10,xcopy=10";
    ok(&[
        "bench",
        "--agents",
        &list,
        "--token-file",
        tok,
        &url,
        "--bs",
        "4k",
        "--random",
        "100",
        "--mix",
        mix,
        "--access",
        "pareto:0.2",
        "--ios",
        "1500",
        "--ramp",
        "0",
        "--json",
        out,
    ]);
    let w = &first_workload(&json);
    assert_eq!(w["errors"], 0, "{w}");
    assert_eq!(w["workload"]["shape"]["mix"], mix);
    let ops: u64 = w["ops"]
        .as_object()
        .unwrap()
        .values()
        .map(|o| o["ios"].as_u64().unwrap())
        .sum();
    let total = w["ios"].as_u64().unwrap();
    assert_eq!(ops, total, "{}", w["ops"]);
    let parts: u64 = w["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ios"].as_u64().unwrap())
        .sum();
    assert_eq!(parts, total);
    let buckets: u64 = w["latency_buckets_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[1].as_u64().unwrap())
        .sum();
    assert_eq!(buckets, total);
    // The latency log is this host's; with agents it is refused.
    let log = dir.path().join("lat.log");
    let (rc, out) = run(
        support::ironlun_bin(),
        &[
            "bench",
            "--agents",
            &list,
            "--token-file",
            tok,
            &url,
            "--lat-log",
            log.to_str().unwrap(),
        ],
    );
    assert_ne!(rc, 0);
    assert!(out.contains("it runs on the agents"), "{out}");
}
