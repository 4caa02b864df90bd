//! ironlun's own initiator with `--multipath` over two ALUA gateways
//! (issue 37 item 5): two `ironlun target` daemons on loopback serving
//! one target name with `[target.alua]` (group 1 on gateway 1, group 2
//! on gateway 2) over RAM LUNs, and `ironlun bench --multipath` over
//! both portals. The gateways' per-session command counters (`ironlun
//! admin --json sessions`) show which path the I/O takes: only the
//! active/optimized one; after `ironlun admin alua set` swaps the states
//! on both gateways, only the other; and when the optimized gateway is
//! killed (SIGKILL) mid-run, the survivor, with no failed command. The
//! LUNs are RAM, different on each gateway, so only completions and
//! errors are checked, not content.
//!
//! The time from the kill to the first command through the survivor is
//! printed, not asserted; `IRONLUN_ALUA_FAILOVER_TRIALS=N` repeats that
//! run N times (default 1) for a measurement.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::alua::{self, Gateway};
use support::{first_workload, run};

const NAME: &str = "iqn.2026-11.test:alua-mp";
const INITIATOR: &str = "iqn.2026-11.test:init";

/// Commands a path gets at login before any I/O: TEST UNIT READY for
/// the unit attention (twice), INQUIRY, VPD 83h, REPORT TARGET PORT
/// GROUPS, READ CAPACITY (the first path), and room for one more read of
/// the groups.
const SETUP_COMMANDS: u64 = 10;

/// Group 1 active/optimized and preferred, group 2 active/non-optimized.
const NORMAL: [&str; 2] = ["active/optimized", "active/non-optimized"];

/// Gateway `tag` with groups 1 (preferred) and 2 in `states`, implicit
/// ALUA.
fn gateway(dir: &Path, tag: u16, states: [&str; 2]) -> Gateway {
    alua::gateway(dir, NAME, tag, "implicit", states, "ram:32MiB")
}

fn admin(sock: &Path, args: &[&str]) -> String {
    let mut all = vec!["admin", "--socket", sock.to_str().unwrap()];
    all.extend_from_slice(args);
    let (rc, out) = run(support::ironlun_bin(), &all);
    assert_eq!(rc, 0, "ironlun {all:?}: {out}");
    out
}

/// Commands the gateway has had on the bench's session to the target
/// (none before it logs in).
fn commands(g: &Gateway) -> u64 {
    let out = admin(&g.sock, &["--json", "sessions"]);
    let list: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    list.iter()
        .filter(|s| s["target"] == NAME && s["initiator"] == INITIATOR)
        .map(|s| s["commands"].as_u64().unwrap())
        .sum()
}

/// Polls `what` until `done` holds of it, for at most 30 s; its value.
fn wait_for(what: &str, mut f: impl FnMut() -> u64, done: impl Fn(u64) -> bool) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = f();
        if done(v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: still {v} after 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `ironlun bench --multipath` over both gateways for `time`: random
/// 4 KiB, half writes, QD 16; no verification (each gateway has its own
/// RAM LUN).
fn bench(a: &Gateway, b: &Gateway, json: &Path, time: &str) -> Child {
    let url = |g: &Gateway| format!("iscsi://{}/{NAME}/0", g.t.addr);
    Command::new(support::ironlun_bin())
        .args(["--log", "info", "bench", &url(a), &url(b)])
        .args(["--multipath", "--path-policy", "round-robin"])
        .args(["--initiator-name", INITIATOR])
        .args([
            "--bs", "4k", "--read", "50", "--random", "100", "--qd", "16",
        ])
        .args(["--time", time, "--ramp", "0", "--seek-range", "16MiB"])
        .args(["--json", json.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (bounded) for the bench: its output, after checking it
/// succeeded with no failed command and I/O to the end.
fn finish(child: Child, json: &Path) -> String {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(out) = rx.recv_timeout(Duration::from_secs(90)) else {
        // SAFETY: kill(2) on the child we spawned.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        panic!("bench did not finish within 90 s");
    };
    let out = out.unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "bench failed:\n{log}");
    let w = first_workload(json);
    assert_eq!(w["errors"], 0, "{log}");
    let series = w["series"].as_array().unwrap();
    assert!(
        series.last().unwrap()["iops"].as_f64().unwrap() > 0.0,
        "no I/O in the last second: {series:?}\n{log}"
    );
    log
}

/// Both gateways up: I/O only through gateway 1 (active/optimized, the
/// other active/non-optimized). The count on each when gateway 1 has
/// had `n` more.
fn only_through_first(a: &Gateway, b: &Gateway, n: u64) -> (u64, u64) {
    let a0 = wait_for("gateway 1's commands", || commands(a), |c| c >= n);
    let b0 = commands(b);
    assert!(
        b0 <= SETUP_COMMANDS,
        "gateway 2 (non-optimized) got {b0} commands"
    );
    let a1 = wait_for("gateway 1's commands", || commands(a), |c| c >= a0 + n);
    assert_eq!(commands(b), b0, "no I/O through the non-optimized path");
    (a1, b0)
}

#[test]
fn io_follows_the_optimized_gateway_when_the_states_swap() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        gateway(dir.path(), 1, NORMAL),
        gateway(dir.path(), 2, NORMAL),
    );
    let json = dir.path().join("r.json");
    let child = bench(&a, &b, &json, "10s");
    let (_, b0) = only_through_first(&a, &b, 300);
    // Group 2 active/optimized on both gateways first, then group 1
    // standby (the order docs/ha.md gives: never no active group).
    for (g, args) in [
        (&b, ["2", "active/optimized"]),
        (&a, ["2", "active/optimized"]),
        (&a, ["1", "standby"]),
        (&b, ["1", "standby"]),
    ] {
        admin(&g.sock, &["alua", "set", NAME, args[0], args[1]]);
    }
    let b1 = wait_for("gateway 2's commands", || commands(&b), |c| c >= b0 + 300);
    // Settled: media access only through gateway 2; gateway 1 (standby)
    // gets none.
    let a1 = commands(&a);
    wait_for("gateway 2's commands", || commands(&b), |c| c >= b1 + 300);
    let a2 = commands(&a);
    assert!(
        a2 - a1 <= 2,
        "gateway 1 is standby: {} commands reached it while gateway 2 had 300",
        a2 - a1
    );
    let log = finish(child, &json);
    // Learnt from the sense of a refused command, or from the report.
    assert!(
        log.contains("ALUA: path 0 active/optimized -> standby (its sense said so)")
            || log.contains("ALUA: path 0 (group 1) active/optimized -> standby"),
        "{log}"
    );
    assert!(
        log.contains("ALUA: path 1 (group 2) active/non-optimized -> active/optimized"),
        "{log}"
    );
}

/// A LU no path may take media access through yet (group 1
/// transitioning, group 2 standby): the bench's commands, its READ
/// CAPACITY first, wait while the initiator reads the states again and
/// again; once `alua set` makes group 1 active/optimized they go through
/// gateway 1, with no failed command.
#[test]
fn commands_wait_out_a_transition_and_go_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let states = ["transitioning", "standby"];
    let (a, b) = (
        gateway(dir.path(), 1, states),
        gateway(dir.path(), 2, states),
    );
    let json = dir.path().join("r.json");
    // Long enough that, on a loaded machine, the 300 commands after the
    // transition still fall inside the run (4 s once ran out first).
    let child = bench(&a, &b, &json, "10s");
    // Logged in, then REPORT TARGET PORT GROUPS read again while the
    // commands wait: more commands than the setup, none of them I/O.
    let waiting = wait_for(
        "gateway 1's commands",
        || commands(&a),
        |c| c > SETUP_COMMANDS + 2,
    );
    for g in [&a, &b] {
        admin(&g.sock, &["alua", "set", NAME, "1", "active/optimized"]);
    }
    wait_for(
        "gateway 1's commands",
        || commands(&a),
        |c| c >= waiting + 300,
    );
    let log = finish(child, &json);
    assert!(
        log.contains("ALUA: path 0 (group 1) transitioning -> active/optimized"),
        "{log}"
    );
}

/// One kill of the optimized gateway mid-run: the run completes through
/// the other with no failed command. Returns the time from the kill to
/// the poll of the survivor's counter that first saw a command, and how
/// long one poll takes (the measurement's resolution).
fn failover_once() -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let (mut a, b) = (
        gateway(dir.path(), 1, NORMAL),
        gateway(dir.path(), 2, NORMAL),
    );
    let json = dir.path().join("r.json");
    let child = bench(&a, &b, &json, "8s");
    let (_, b0) = only_through_first(&a, &b, 300);
    a.t.child.kill().unwrap();
    let killed = Instant::now();
    let mut polls = 0u32;
    let counted = || {
        polls += 1;
        commands(&b)
    };
    wait_for("gateway 2's commands", counted, |c| c > b0);
    let failover = killed.elapsed();
    let per_poll = failover / polls.max(1);
    wait_for("gateway 2's commands", || commands(&b), |c| c >= b0 + 300);
    let log = finish(child, &json);
    assert!(log.contains("handed to the other paths"), "{log}");
    (failover, per_poll)
}

#[test]
fn a_killed_optimized_gateway_fails_over_with_no_failed_command() {
    let trials: usize = std::env::var("IRONLUN_ALUA_FAILOVER_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let runs: Vec<(Duration, Duration)> = (0..trials).map(|_| failover_once()).collect();
    let mut ms: Vec<u128> = runs.iter().map(|r| r.0.as_millis()).collect();
    let poll: Vec<u128> = runs.iter().map(|r| r.1.as_millis()).collect();
    eprintln!(
        "failover (kill -9 to the first command seen through the survivor), ms: {ms:?}; \
         one poll of its counter took about {poll:?} ms"
    );
    ms.sort_unstable();
    eprintln!(
        "failover over {trials} trials: median {} ms, worst {} ms",
        ms[ms.len() / 2],
        ms[ms.len() - 1]
    );
}
