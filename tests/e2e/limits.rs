//! Limits under pressure, against the real daemon with short timers
//! (docs/security.md, "Limits"): a flood of connections beyond
//! `max_connections` while a verifying session works, and a slow-loris
//! that dribbles one PDU after login.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::{closed_within, ironlun_ok, Raw, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:limits";
const MAX_CONNECTIONS: usize = 40;

/// A daemon with 40 connections at most, 2 s to log in, and pings after
/// 1 s of silence that must be answered within 1 s.
fn daemon(dir: &std::path::Path) -> Target {
    let config = dir.join("limits.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[limits]
max_connections = {MAX_CONNECTIONS}
login_timeout_secs = 2
nop_interval_secs = 1
nop_timeout_secs = 1

[[target]]
name = "{NAME}"
[[target.lun]]
spec = "ram:64MiB"
"#
        ),
    )
    .unwrap();
    Target::start(&["--config", config.to_str().unwrap()])
}

fn count_in_log(t: &Target, needle: &str, at_least: usize, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let n = t.log().matches(needle).count();
        if n >= at_least || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_connection_flood_beyond_the_limit_is_refused_and_clears() {
    let dir = tempfile::tempdir().unwrap();
    let t = daemon(dir.path());
    let url = t.url(NAME, 0);
    let json = dir.path().join("r.json");

    // A verifying session that must keep working through the flood.
    let bench = {
        let (url, json) = (url.clone(), json.clone());
        std::thread::spawn(move || {
            ironlun_ok(&[
                "bench",
                &url,
                "--verify",
                "--bs",
                "4k",
                "--read",
                "50",
                "--qd",
                "4",
                "--time",
                "6s",
                "--ramp",
                "0",
                "--seek-range",
                "8MiB",
                "--json",
                json.to_str().unwrap(),
            ])
        })
    };
    assert!(
        t.wait_log(" login: ", Duration::from_secs(10)),
        "{}",
        t.log()
    );

    // 100 connections that never send a byte.
    let started = Instant::now();
    let mut flood: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(t.addr).unwrap())
        .collect();
    // The bench holds one connection: 39 of the flood are let in, the
    // rest are refused at once; those let in end at the login timeout.
    let refused = count_in_log(
        &t,
        "connection refused: 40 connections open",
        100 - MAX_CONNECTIONS + 1,
        Duration::from_secs(5),
    );
    assert_eq!(refused, 100 - MAX_CONNECTIONS + 1, "{}", t.log());
    for s in flood.iter_mut() {
        assert!(
            closed_within(s, Duration::from_secs(6)),
            "a half-open connection outlived the login timeout"
        );
    }
    println!(
        "{refused} of 100 refused at once; all closed {:?} after the flood began",
        started.elapsed()
    );
    assert!(t.wait_log("login timed out after 2s", Duration::from_secs(5)));

    // New logins work again while the flood's sockets are still held.
    let out = ironlun_ok(&["inquiry", &url]);
    assert!(out.contains("ironlun"), "{out}");
    drop(flood);

    let out = bench.join().unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let w = &v["workloads"][0];
    assert_eq!(w["errors"], 0, "{out}");
    assert_eq!(w["verify"]["mismatch_count"], 0, "{out}");
    assert!(w["verify"]["checked_blocks"].as_u64().unwrap() > 0, "{out}");
    assert!(!t.log().contains("panicked"));
}

#[test]
fn a_slow_loris_after_login_is_dropped_by_the_ping_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let t = daemon(dir.path());
    let mut c = Raw::connect(t.addr);
    let (r, _) = c.login(NAME, [0x80, 0, 0, 0, 0, 9], &[]);
    assert_eq!((r.status.class(), r.status.detail()), (0, 0));

    // Half a header, then one byte every 200 ms: the PDU never completes,
    // so the ping sent after 1 s of silence cannot be answered.
    c.send_bytes(&[0x01; 20]).unwrap();
    let started = Instant::now();
    let mut dropped = false;
    while started.elapsed() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(200));
        if c.stream.write_all(&[0x01]).is_err() {
            dropped = true;
            break;
        }
        if t.log().contains("logout: NopTimeout") {
            dropped = true;
            break;
        }
    }
    let after = started.elapsed();
    assert!(dropped, "the slow client is still connected:\n{}", t.log());
    assert!(
        after >= Duration::from_millis(1800),
        "dropped before a ping could time out ({after:?})"
    );
    println!("slow-loris dropped after {after:?}");
    assert!(
        t.wait_log("logout: NopTimeout", Duration::from_secs(3)),
        "{}",
        t.log()
    );
    // The target still serves.
    let out = ironlun_ok(&["inquiry", &t.url(NAME, 0)]);
    assert!(out.contains("ironlun"), "{out}");
}
