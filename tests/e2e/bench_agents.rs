//! `ironlun bench agent` and `ironlun bench --agents`: three agents
//! against one target on loopback and in network namespaces (joined to
//! the host by veth pairs), the merge checked against the agents' own
//! counts and histograms, and an agent's refusals (a wrong token, an
//! oversized frame, a world-readable token file).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ironlun_bench::hdr;
use serde_json::Value;
use support::Target;

const IQN: &str = "iqn.2026-11.test:agents";
const TOKEN: &str = "agents-test-token-0123456789";

/// A running agent, killed on drop.
struct Agent {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl Agent {
    /// `ironlun bench agent` on 127.0.0.1.
    fn start(token: &Path) -> Agent {
        Agent::spawn(&[], "127.0.0.1", token)
    }

    /// The agent, its command line prefixed by `wrap` (e.g. `ip netns
    /// exec NS`), listening on `ip`.
    fn spawn(wrap: &[&str], ip: &str, token: &Path) -> Agent {
        let bin = support::ironlun_bin();
        let mut cmd = match wrap.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let listen = format!("{ip}:0");
        cmd.args(["--log", "info", "bench", "agent", "--listen", &listen])
            .arg("--token-file")
            .arg(token)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn the agent");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(pos) = line.find("listening on ") {
                    let _ = tx.send(line[pos + 13..].trim().to_owned());
                }
                let mut l = log2.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let Ok(addr) = rx.recv_timeout(Duration::from_secs(20)) else {
            let _ = child.kill();
            panic!("the agent did not start: {}", log.lock().unwrap());
        };
        Agent {
            child,
            addr: addr.parse().unwrap(),
            log,
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits (bounded) until the log contains `needle`.
    fn wait_log(&self, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.log().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A token file of mode 0600 holding `token`.
fn token_file(dir: &Path, name: &str, token: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, token).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

fn null_target(listen: Option<&str>) -> Target {
    let lun = ["--name", IQN, "--lun", "null:1G"];
    match listen {
        None => Target::start(&lun),
        Some(l) => {
            let mut args = lun.to_vec();
            args.extend(["--listen", l]);
            Target::start_with(&args, false)
        }
    }
}

/// Runs the controller; returns (exit status, output, the JSON result
/// when it wrote one).
fn control(agents: &[String], token: &Path, url: &str, extra: &[&str]) -> (i32, String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let list = agents.join(",");
    let mut args = vec![
        "bench",
        "--agents",
        &list,
        "--token-file",
        token.to_str().unwrap(),
        url,
        "--bs",
        "4k",
        "--read",
        "70",
        "--random",
        "100",
        "--qd",
        "4",
        "--ramp",
        "0",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (rc, out) = support::run(support::ironlun_bin(), &args);
    let v = std::fs::read_to_string(&json)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    (rc, out, v)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The merged result is the agents' sum: counts exactly, rates as sums,
/// the histogram as the sum of theirs and the percentiles from it.
fn check_merged(v: &Value, agents: usize, out: &str) {
    let w = &v["workloads"][0];
    let parts = w["agents"].as_array().expect("a per-agent breakdown");
    assert_eq!(parts.len(), agents, "{w}");
    let sum = |k: &str| parts.iter().map(|a| u(&a[k])).sum::<u64>();
    assert!(u(&w["ios"]) > 0, "no I/O: {out}");
    assert_eq!(u(&w["ios"]), sum("ios"));
    assert_eq!(u(&w["read_ios"]), sum("read_ios"));
    assert_eq!(u(&w["write_ios"]), sum("write_ios"));
    assert_eq!(u(&w["errors"]), 0, "{out}");
    let iops: f64 = parts.iter().map(|a| f(&a["iops"])).sum();
    assert!((f(&w["iops"]) - iops).abs() <= 1e-9 * iops, "{w}");
    let mb: f64 = parts.iter().map(|a| f(&a["mb_per_s"])).sum();
    assert!((f(&w["mb_per_s"]) - mb).abs() <= 1e-9 * mb, "{w}");
    let mut sum_h = hdr::empty().unwrap();
    for a in parts {
        assert!(u(&a["ios"]) > 0, "an agent did no I/O: {a}");
        let h = hdr::decode(a["hdr"]["all"].as_str().unwrap()).unwrap();
        assert_eq!(h.len(), u(&a["ios"]));
        sum_h.add(&h).unwrap();
        assert!(a["cpu"]["initiator_process_pct"].as_f64().is_some(), "{a}");
        assert!(a["clock_offset_ms"].as_f64().is_some());
        assert!(out.contains(&format!("agent {}", a["agent"].as_str().unwrap())));
    }
    let merged = hdr::decode(w["hdr"]["all"].as_str().unwrap()).unwrap();
    assert_eq!(
        merged, sum_h,
        "the merged histogram is the sum of the agents'"
    );
    assert_eq!(merged.len(), u(&w["ios"]));
    for (q, k) in [(0.5, "p50"), (0.99, "p99"), (0.999, "p999")] {
        let want = merged.value_at_quantile(q) as f64 / 1000.0;
        assert_eq!(f(&w["latency_us"][k]), want, "{k}");
    }
    assert_eq!(f(&w["latency_us"]["max"]), merged.max() as f64 / 1000.0);
}

#[test]
fn three_agents_on_loopback_merge_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let tok = token_file(dir.path(), "token", TOKEN);
    let t = null_target(None);
    let agents: Vec<Agent> = (0..3).map(|_| Agent::start(&tok)).collect();
    let addrs: Vec<String> = agents.iter().map(|a| a.addr.to_string()).collect();
    let (rc, out, v) = control(&addrs, &tok, &t.url(IQN, 0), &["--time", "2s"]);
    assert_eq!(rc, 0, "{out}");
    check_merged(&v, 3, &out);
    for a in &agents {
        assert!(a.log().contains("starting workload 0"), "{}", a.log());
    }
}

#[test]
fn three_agents_verify_each_its_own_part_of_the_lun() {
    let dir = tempfile::tempdir().unwrap();
    let tok = token_file(dir.path(), "token", TOKEN);
    let lun = format!("ram:{}", 16 << 20);
    let t = Target::start(&["--name", IQN, "--lun", &lun]);
    let agents: Vec<Agent> = (0..3).map(|_| Agent::start(&tok)).collect();
    let addrs: Vec<String> = agents.iter().map(|a| a.addr.to_string()).collect();
    let (rc, out, v) = control(&addrs, &tok, &t.url(IQN, 0), &["--time", "2s", "--verify"]);
    assert_eq!(rc, 0, "{out}");
    check_merged(&v, 3, &out);
    let verify = &v["workloads"][0]["verify"];
    assert!(u(&verify["checked_blocks"]) > 0, "{verify}");
    assert_eq!(u(&verify["mismatch_count"]), 0, "{verify}");
}

#[test]
fn a_wrong_token_is_refused_and_the_agent_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let good = token_file(dir.path(), "good", TOKEN);
    let bad = token_file(dir.path(), "bad", "another-token-0123456789");
    let t = null_target(None);
    let agent = Agent::start(&good);
    let addr = agent.addr.to_string();
    let (rc, out, _) = control(
        std::slice::from_ref(&addr),
        &bad,
        &t.url(IQN, 0),
        &["--time", "1s"],
    );
    assert_ne!(rc, 0, "{out}");
    assert!(
        out.contains(&format!("agent {addr}: refused: wrong token")),
        "{out}"
    );
    assert!(agent.wait_log("wrong token", Duration::from_secs(10)));
    let (rc, out, v) = control(&[addr], &good, &t.url(IQN, 0), &["--time", "1s"]);
    assert_eq!(rc, 0, "{out}");
    check_merged(&v, 1, &out);
}

/// Reads one frame of the agent's (4-byte length, JSON).
fn read_frame(s: &mut TcpStream) -> Value {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn an_oversized_frame_is_refused_and_the_agent_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let tok = token_file(dir.path(), "token", TOKEN);
    let agent = Agent::start(&tok);
    let mut s = TcpStream::connect(agent.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(read_frame(&mut s)["type"], "challenge");
    // A frame announced at 1 GiB, before authenticating.
    s.write_all(&(1u32 << 30).to_be_bytes()).unwrap();
    let answer = read_frame(&mut s);
    assert_eq!(answer["type"], "refused", "{answer}");
    let reason = answer["reason"].as_str().unwrap();
    assert!(reason.contains("over the limit"), "{reason}");
    assert_eq!(s.read(&mut [0u8; 1]).unwrap(), 0, "the agent closes");
    // The agent still answers the next controller.
    let mut s = TcpStream::connect(agent.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(read_frame(&mut s)["type"], "challenge");
}

#[test]
fn a_world_readable_token_file_stops_the_agent_and_the_controller() {
    let dir = tempfile::tempdir().unwrap();
    let tok = token_file(dir.path(), "token", TOKEN);
    std::fs::set_permissions(&tok, std::fs::Permissions::from_mode(0o644)).unwrap();
    let tok = tok.to_str().unwrap();
    let bin = support::ironlun_bin();
    let (rc, out) = support::run(
        bin,
        &[
            "bench",
            "agent",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            tok,
        ],
    );
    assert_ne!(rc, 0);
    assert!(out.contains("world-readable"), "{out}");
    let url = "iscsi://127.0.0.1:1/iqn.x:y/0";
    let (rc, out) = support::run(
        bin,
        &["bench", "--agents", "127.0.0.1:1", "--token-file", tok, url],
    );
    assert_ne!(rc, 0);
    assert!(out.contains("world-readable"), "{out}");
}

#[test]
fn an_agent_that_leaves_fails_the_run_and_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let tok = token_file(dir.path(), "token", TOKEN);
    let t = null_target(None);
    // An address nothing listens on.
    let dead = format!("127.0.0.1:{}", support::free_port());
    let live = Agent::start(&tok);
    let addrs = [live.addr.to_string(), dead.clone()];
    let (rc, out, _) = control(&addrs, &tok, &t.url(IQN, 0), &["--time", "1s"]);
    assert_ne!(rc, 0);
    assert!(out.contains(&format!("agent {dead}: connecting")), "{out}");
    // An agent killed during the run.
    let (a, mut b) = (Agent::start(&tok), Agent::start(&tok));
    let list = format!("{},{}", a.addr, b.addr);
    let url = t.url(IQN, 0);
    let tok_s = tok.to_str().unwrap();
    let args = [
        "bench",
        "--agents",
        &list,
        "--token-file",
        tok_s,
        &url,
        "--time",
        "60s",
        "--ramp",
        "0",
    ];
    let mut ctl = Command::new(support::ironlun_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        b.wait_log("starting workload 0", Duration::from_secs(30)),
        "{}",
        b.log()
    );
    let b_addr = b.addr;
    b.child.kill().unwrap();
    let _ = b.child.wait();
    let deadline = Instant::now() + Duration::from_secs(50);
    let status = loop {
        if let Some(s) = ctl.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the controller did not notice");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    ctl.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(!status.success());
    assert!(err.contains(&format!("agent {b_addr}:")), "{err}");
    // The other agent's run ends with the controller's leaving.
    assert!(
        a.wait_log(
            "the controller left during the run",
            Duration::from_secs(30)
        ),
        "{}",
        a.log()
    );
}

/// Network namespaces, each joined to the host by a veth pair; removed
/// on drop (deleting a namespace deletes its end of the pair, and so the
/// pair), even when the test fails half-way.
struct Namespaces {
    names: Vec<String>,
    /// The host's address every namespace reaches the target at.
    target_ip: String,
    /// Each namespace's own address.
    ips: Vec<String>,
}

impl Namespaces {
    /// `n` namespaces, or None without the privileges (a skip:
    /// tests/support/skip.rs; where every test is required, a failure).
    fn create(n: usize) -> Option<Namespaces> {
        let tag = std::process::id() % 100_000;
        let net = 20 + std::process::id() % 200;
        let mut ns = Namespaces {
            names: Vec::new(),
            target_ip: format!("10.{net}.0.1"),
            ips: Vec::new(),
        };
        for k in 0..n {
            let name = format!("il{tag}n{k}");
            let _ = ip(&["netns", "del", &name]);
            if let Err(e) = ip(&["netns", "add", &name]) {
                support::skip::skip(
                    "three agents in network namespaces",
                    &format!("cannot create one (needs root and iproute2): {e}"),
                );
                return None;
            }
            ns.names.push(name.clone());
            ns.ips.push(ns.link(k, &name, net, tag));
        }
        Some(ns)
    }

    /// Joins namespace `k` to the host; returns its address. The first
    /// pair's host end also holds the target's address, reached from
    /// every namespace by its default route.
    fn link(&self, k: usize, name: &str, net: u32, tag: u32) -> String {
        let (host, inner) = (format!("il{tag}h{k}"), format!("il{tag}v{k}"));
        let (host_ip, ns_ip) = (
            format!("10.{net}.{}.1", k + 1),
            format!("10.{net}.{}.2", k + 1),
        );
        let ok = |args: &[&str]| ip(args).unwrap_or_else(|e| panic!("ip {args:?}: {e}"));
        ok(&["link", "add", &host, "type", "veth", "peer", "name", &inner]);
        ok(&["link", "set", &inner, "netns", name]);
        ok(&["addr", "add", &format!("{host_ip}/24"), "dev", &host]);
        if k == 0 {
            ok(&[
                "addr",
                "add",
                &format!("{}/32", self.target_ip),
                "dev",
                &host,
            ]);
        }
        ok(&["link", "set", &host, "up"]);
        let inside = |args: &[&str]| {
            let mut a = vec!["netns", "exec", name, "ip"];
            a.extend_from_slice(args);
            ok(&a);
        };
        inside(&["addr", "add", &format!("{ns_ip}/24"), "dev", &inner]);
        inside(&["link", "set", &inner, "up"]);
        inside(&["link", "set", "lo", "up"]);
        inside(&["route", "add", "default", "via", &host_ip]);
        ns_ip
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = ip(&["netns", "del", n]);
        }
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

#[test]
fn three_agents_in_network_namespaces_merge_exactly() {
    let Some(ns) = Namespaces::create(3) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tok = token_file(dir.path(), "token", TOKEN);
    let t = null_target(Some(&format!("{}:0", ns.target_ip)));
    let agents: Vec<Agent> = ns
        .names
        .iter()
        .zip(&ns.ips)
        .map(|(name, addr)| Agent::spawn(&["ip", "netns", "exec", name], addr, &tok))
        .collect();
    let addrs: Vec<String> = agents.iter().map(|a| a.addr.to_string()).collect();
    for (a, ip) in addrs.iter().zip(&ns.ips) {
        assert!(a.starts_with(ip.as_str()), "{a} is not in its namespace");
    }
    let (rc, out, v) = control(&addrs, &tok, &t.url(IQN, 0), &["--time", "2s"]);
    assert_eq!(rc, 0, "{out}");
    check_merged(&v, 3, &out);
    drop(agents);
    drop(ns);
}

/// Writes one frame (4-byte length, JSON).
fn write_frame(s: &mut TcpStream, v: &Value) {
    let body = serde_json::to_vec(v).unwrap();
    s.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
    s.write_all(&body).unwrap();
}

#[test]
fn the_controller_refuses_an_agent_that_does_not_know_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let tok = token_file(dir.path(), "token", TOKEN);
    // A pretend agent: it challenges, takes the answer, and welcomes the
    // controller with a made-up proof.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let hello = serde_json::json!({"type": "challenge", "version": 1, "challenge": "c"});
        write_frame(&mut s, &hello);
        let auth = read_frame(&mut s);
        assert_eq!(auth["type"], "auth", "{auth}");
        assert!(auth["challenge"].as_str().unwrap().len() >= 64, "{auth}");
        let welcome = serde_json::json!({"type": "welcome", "host": "h", "proof": "00"});
        write_frame(&mut s, &welcome);
        // The controller sends nothing more (no spec): it closes.
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        rest
    });
    let url = "iscsi://127.0.0.1:1/iqn.x:y/0";
    let (rc, out, _) = control(std::slice::from_ref(&addr), &tok, url, &["--time", "1s"]);
    assert_ne!(rc, 0);
    assert!(
        out.contains(&format!("agent {addr}: it does not know the token")),
        "{out}"
    );
    assert!(
        fake.join().unwrap().is_empty(),
        "the controller sent a spec"
    );
}
