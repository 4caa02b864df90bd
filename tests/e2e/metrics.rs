//! `GET /metrics` end to end: the daemon with `--stats 127.0.0.1:0`, a
//! real `ironlun bench` run whose reads and writes are counted exactly,
//! refused logins from ironlun's initiator and libiscsi's `iscsi-inq`,
//! task management and a reinstatement from a raw session, each scrape
//! parsed by a strict OpenMetrics parser (openmetrics-parser).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ironlun_wire::{Pdu, TmfFunction, TmfResponse};
use openmetrics_parser::openmetrics::parse_openmetrics;
use openmetrics_parser::{MetricsExposition, OpenMetricsType, OpenMetricsValue};
use support::{run, tool, Raw, Target};

const NAME: &str = "iqn.2026-11.test:metrics";
/// The one initiator the CHAP target's access list lets in.
const ALLOWED: &str = "iqn.2026-11.test:metrics-bench";
const USER: &str = "bench";
const SECRET: &str = "bench-secret-0123";
/// Measured I/Os of the bench run (QD 1: nothing is left in flight when
/// it stops, so the target sees exactly these).
const IOS: u64 = 2000;
const BS: u64 = 4096;

type Scrape = MetricsExposition<OpenMetricsType, OpenMetricsValue>;

/// `GET path`: (status, Content-Type, body).
fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(head.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_default();
    (status, content_type, body.to_owned())
}

fn scrape(addr: SocketAddr) -> Scrape {
    let (status, content_type, body) = get(addr, "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    parse_openmetrics(&body).unwrap_or_else(|e| panic!("not OpenMetrics: {e}\n{body}"))
}

/// The value of the family's sample with exactly these labels.
fn value<'a>(s: &'a Scrape, family: &str, labels: &[(&str, &str)]) -> &'a OpenMetricsValue {
    let f = s
        .families
        .get(family)
        .unwrap_or_else(|| panic!("no family {family}"));
    f.iter_samples()
        .find(|sample| {
            let set = sample.get_labelset().unwrap();
            set.iter().count() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| set.get_label_value(k) == Some(*v))
        })
        .map(|sample| &sample.value)
        .unwrap_or_else(|| panic!("no sample {family}{labels:?}"))
}

fn counter(s: &Scrape, family: &str, labels: &[(&str, &str)]) -> u64 {
    match value(s, family, labels) {
        OpenMetricsValue::Counter(c) => c.value.as_f64() as u64,
        other => panic!("{family}{labels:?} is not a counter: {other:?}"),
    }
}

fn gauge(s: &Scrape, family: &str, labels: &[(&str, &str)]) -> u64 {
    match value(s, family, labels) {
        OpenMetricsValue::Gauge(g) => g.as_f64() as u64,
        other => panic!("{family}{labels:?} is not a gauge: {other:?}"),
    }
}

fn lun<'a>(n: &'a str, op: &'a str) -> [(&'a str, &'a str); 3] {
    [("target", NAME), ("lun", n), ("op", op)]
}

fn logins(s: &Scrape, result: &str) -> u64 {
    counter(s, "ironlun_logins", &[("result", result)])
}

/// The latency histogram's count, checked against its +Inf bucket.
fn timed(s: &Scrape, n: &str, op: &str) -> u64 {
    let OpenMetricsValue::Histogram(h) =
        value(s, "ironlun_lun_command_duration_seconds", &lun(n, op))
    else {
        panic!("not a histogram");
    };
    let count = h.count.expect("a count");
    let inf = h.buckets.iter().find(|b| b.upper_bound == f64::INFINITY);
    assert_eq!(inf.map(|b| b.count.as_f64() as u64), Some(count));
    count
}

/// A QD 1 mixed run of exactly [`IOS`] 4 KiB I/Os against LUN 1:
/// (reads, writes) as the bench measured them.
fn bench(t: &Target) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let url = format!("iscsi://{USER}%{SECRET}@{}/{NAME}/1", t.addr);
    let ios = IOS.to_string();
    support::ironlun_ok(&[
        "bench",
        &url,
        "--initiator-name",
        ALLOWED,
        "--bs",
        "4k",
        "--read",
        "50",
        "--random",
        "100",
        "--qd",
        "1",
        "--workers",
        "1",
        "--ios",
        &ios,
        "--time",
        "300s",
        "--ramp",
        "0",
        "--seek-range",
        "8MiB",
        "--json",
        json.to_str().unwrap(),
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let w = &v["workloads"][0];
    assert_eq!(w["errors"], 0, "{w}");
    let (reads, writes) = (
        w["read_ios"].as_u64().unwrap(),
        w["write_ios"].as_u64().unwrap(),
    );
    assert_eq!(reads + writes, IOS, "{w}");
    assert!(reads > 0 && writes > 0, "a mixed run: {w}");
    (reads, writes)
}

#[test]
fn counters_agree_with_a_bench_run_and_refused_logins_are_counted() {
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:8MiB",
        "--lun",
        "ram:8MiB",
        "--stats",
        "127.0.0.1:0",
        "--chap",
        &format!("{USER}:{SECRET}"),
        "--allow",
        ALLOWED,
    ]);
    let stats = t.stats_addr();
    let before = scrape(stats);
    let (reads, writes) = bench(&t);
    let after = scrape(stats);
    let delta = |family: &str, labels: &[(&str, &str)]| {
        counter(&after, family, labels) - counter(&before, family, labels)
    };
    // Exactly what the bench measured, on LUN 1 only.
    assert_eq!(delta("ironlun_lun_commands", &lun("1", "read")), reads);
    assert_eq!(delta("ironlun_lun_commands", &lun("1", "write")), writes);
    assert_eq!(delta("ironlun_lun_bytes", &lun("1", "read")), reads * BS);
    assert_eq!(delta("ironlun_lun_bytes", &lun("1", "write")), writes * BS);
    for op in ["read", "write"] {
        assert_eq!(
            delta("ironlun_lun_commands", &lun("0", op)),
            0,
            "LUN 0 {op}"
        );
    }
    // Every command answered with a status was timed, under its op.
    for op in ["read", "write", "other"] {
        let commands = counter(&after, "ironlun_lun_commands", &lun("1", op));
        assert_eq!(timed(&after, "1", op), commands, "LUN 1 {op}");
    }
    assert!(delta("ironlun_logins", &[("result", "success")]) >= 1);

    // A wrong CHAP secret (libiscsi's iscsi-inq), then an initiator the
    // access list does not know (ironlun's initiator).
    let inq = tool("iscsi-inq", "libiscsi-bin");
    let bad = format!("iscsi://{USER}%wrong-secret-0000@{}/{NAME}/1", t.addr);
    let (rc, out) = run(&inq, &["-i", ALLOWED, &bad]);
    assert_ne!(rc, 0, "a wrong secret logged in: {out}");
    let chap = scrape(stats);
    assert!(logins(&chap, "auth_failure") > logins(&after, "auth_failure"));
    assert_eq!(logins(&chap, "acl_refused"), logins(&after, "acl_refused"));
    assert_eq!(logins(&chap, "success"), logins(&after, "success"));

    let good = format!("iscsi://{USER}%{SECRET}@{}/{NAME}/1", t.addr);
    let (rc, out) = run(
        support::ironlun_bin(),
        &[
            "inquiry",
            "--initiator-name",
            "iqn.2026-11.test:stranger",
            &good,
        ],
    );
    assert_ne!(rc, 0, "a stranger logged in: {out}");
    let acl = scrape(stats);
    assert!(logins(&acl, "acl_refused") > logins(&chap, "acl_refused"));
    assert_eq!(logins(&acl, "auth_failure"), logins(&chap, "auth_failure"));
    assert_eq!(logins(&acl, "success"), logins(&chap, "success"));

    // /stats still answers its JSON, with the same counters.
    let (status, content_type, body) = get(stats, "/stats");
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let lun1 = json["luns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lun"] == 1)
        .unwrap();
    assert_eq!(
        lun1["io"]["read_commands"].as_u64().unwrap(),
        counter(&acl, "ironlun_lun_commands", &lun("1", "read"))
    );
}

/// Waits (bounded) until a scrape satisfies `ok`; the last scrape.
fn scrape_until(addr: SocketAddr, ok: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = scrape(addr);
        if ok(&s) || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sessions_task_management_aborts_and_reinstatement() {
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:8MiB",
        "--stats",
        "127.0.0.1:0",
    ]);
    let stats = t.stats_addr();
    let isid = [0x80, 0, 0, 0, 0x4d, 1];
    let mut a = Raw::connect(t.addr);
    assert_eq!(a.login(NAME, isid, &[]).0.status.class(), 0);
    let s = scrape(stats);
    assert_eq!(gauge(&s, "ironlun_sessions", &[("type", "normal")]), 1);
    assert_eq!(gauge(&s, "ironlun_sessions", &[("type", "discovery")]), 0);
    assert_eq!(gauge(&s, "ironlun_connections", &[]), 1);

    // Commands are timed as their statuses go out, not when the session
    // ends: the first gets the new nexus's unit attention, then three
    // 512-byte reads.
    let read_10 = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];
    a.scsi(&[0; 6], 0, &[]);
    for _ in 0..3 {
        assert_eq!(a.scsi(&read_10, 512, &[]).0, 0, "READ(10)");
    }
    let s = scrape(stats);
    assert_eq!(counter(&s, "ironlun_lun_commands", &lun("0", "read")), 3);
    assert_eq!(counter(&s, "ironlun_lun_commands", &lun("0", "other")), 1);
    assert_eq!(timed(&s, "0", "read"), 3);
    assert_eq!(timed(&s, "0", "other"), 1);

    // A write waiting for the rest of its data (64 KiB came with it, the
    // target asks for the other 64 KiB), then ABORT TASK for it.
    // WRITE(10) of 256 blocks of 512 bytes: 128 KiB.
    let write_128k = [0x2a, 0, 0, 0, 0, 0, 0, 1, 0, 0];
    let itt = a.command(&write_128k, 0, 128 << 10, &[0x5a; 64 << 10]);
    match a.recv().expect("an R2T").0 {
        Pdu::R2t(r) => assert_eq!(r.itt, itt),
        other => panic!("expected an R2T, got {other:?}"),
    }
    assert_eq!(
        a.tmf(TmfFunction::ABORT_TASK, itt),
        TmfResponse::FUNCTION_COMPLETE
    );
    assert_eq!(
        a.tmf(TmfFunction::LOGICAL_UNIT_RESET, 0),
        TmfResponse::FUNCTION_COMPLETE
    );
    let s = scrape(stats);
    let tmf = |f, r| {
        counter(
            &s,
            "ironlun_task_management",
            &[("function", f), ("response", r)],
        )
    };
    assert_eq!(tmf("abort_task", "function_complete"), 1);
    assert_eq!(tmf("logical_unit_reset", "function_complete"), 1);
    assert_eq!(counter(&s, "ironlun_aborted_commands", &[]), 1);
    assert_eq!(counter(&s, "ironlun_session_reinstatements", &[]), 0);

    // The same initiator and ISID again: the session is reinstated.
    let mut b = Raw::connect(t.addr);
    assert_eq!(b.login(NAME, isid, &[]).0.status.class(), 0);
    let s = scrape_until(stats, |s| gauge(s, "ironlun_connections", &[]) == 1);
    assert_eq!(counter(&s, "ironlun_session_reinstatements", &[]), 1);
    assert_eq!(counter(&s, "ironlun_logins", &[("result", "success")]), 2);
    assert_eq!(gauge(&s, "ironlun_sessions", &[("type", "normal")]), 1);
    assert_eq!(
        gauge(&s, "ironlun_connections", &[]),
        1,
        "the old one closed"
    );
    drop((a, b));
    let s = scrape_until(stats, |s| gauge(s, "ironlun_connections", &[]) == 0);
    assert_eq!(gauge(&s, "ironlun_connections", &[]), 0);
    assert_eq!(gauge(&s, "ironlun_sessions", &[("type", "normal")]), 0);
}

/// A LUN added and removed at run time (`ironlun admin`): its series
/// appear with it, starting at zero, and are gone from the next scrape
/// after it is removed.
#[test]
fn a_lun_removed_at_run_time_leaves_the_exposition() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("admin.sock");
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:8MiB",
        "--stats",
        "127.0.0.1:0",
        "--admin-socket",
        sock.to_str().unwrap(),
    ]);
    let stats = t.stats_addr();
    let admin = |args: &[&str]| {
        let mut all = vec!["admin", "--socket", sock.to_str().unwrap()];
        all.extend_from_slice(args);
        support::ironlun_ok(&all)
    };
    let has_lun1 = |s: &Scrape| {
        let f = &s.families["ironlun_lun_commands"];
        f.iter_samples()
            .any(|x| x.get_labelset().unwrap().get_label_value("lun") == Some("1"))
    };
    assert!(!has_lun1(&scrape(stats)));
    let out = admin(&["lun", "add", NAME, "ram:4MiB"]);
    assert!(out.contains(&format!("+ target {NAME} LUN 1")), "{out}");
    let s = scrape(stats);
    assert!(has_lun1(&s), "the new LUN has series");
    assert_eq!(counter(&s, "ironlun_lun_commands", &lun("1", "read")), 0);
    assert_eq!(timed(&s, "1", "read"), 0);
    let (rc, out) = run(support::ironlun_bin(), &["inquiry", &t.url(NAME, 1)]);
    assert_eq!(rc, 0, "{out}");
    assert!(counter(&scrape(stats), "ironlun_lun_commands", &lun("1", "other")) > 0);
    admin(&["lun", "remove", NAME, "1"]);
    let s = scrape(stats);
    assert!(!has_lun1(&s), "a removed LUN's series are gone");
    assert!(s.families["ironlun_lun_command_duration_seconds"]
        .iter_samples()
        .all(|x| x.get_labelset().unwrap().get_label_value("lun") == Some("0")));
    assert_eq!(counter(&s, "ironlun_lun_commands", &lun("0", "read")), 0);
}

/// `ironlun_lun_failed_commands_total` of one LUN of [`NAME`], by
/// (status, sense_key).
fn failed_by_class(s: &Scrape, n: &str) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for sample in s.families["ironlun_lun_failed_commands"].iter_samples() {
        let set = sample.get_labelset().unwrap();
        if set.get_label_value("target") != Some(NAME) || set.get_label_value("lun") != Some(n) {
            continue;
        }
        let label = |k| set.get_label_value(k).unwrap().to_owned();
        let OpenMetricsValue::Counter(c) = &sample.value else {
            panic!("not a counter: {:?}", sample.value);
        };
        out.insert(
            (label("status"), label("sense_key")),
            c.value.as_f64() as u64,
        );
    }
    out
}

/// What a healthy initiator meets is not what an operator alerts on:
/// `qemu-img info` logs in, gets the unit attention every new I_T nexus
/// gets (SPC-4 §5.14) and reads the capacity. Its failed commands are all
/// unit attentions or illegal requests, none a medium or hardware error,
/// and their sum is what /stats reports as failed, the series' meaning
/// before the split.
#[test]
fn a_healthy_qemu_img_info_fails_no_command_an_operator_alerts_on() {
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:8MiB",
        "--stats",
        "127.0.0.1:0",
    ]);
    let stats = t.stats_addr();
    let qemu_img = tool("qemu-img", "qemu-utils");
    let (rc, out) = run(&qemu_img, &["info", &t.url(NAME, 0)]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("virtual size: 8 MiB"), "{out}");
    let s = scrape(stats);
    let failed = failed_by_class(&s, "0");
    let cc = |key: &str| failed[&("check_condition".to_owned(), key.to_owned())];
    assert!(
        cc("unit_attention") >= 1,
        "the new nexus's unit attention is counted: {failed:?}"
    );
    assert_eq!((cc("medium_error"), cc("hardware_error")), (0, 0));
    for ((status, key), n) in &failed {
        let ordinary = status == "check_condition"
            && matches!(key.as_str(), "unit_attention" | "illegal_request");
        assert!(*n == 0 || ordinary, "{status} {key}: {n} in {failed:?}");
    }
    let (code, body) = support::http_get(stats, "/stats");
    assert_eq!(code, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        json["luns"][0]["io"]["failed_commands"].as_u64(),
        Some(failed.values().sum::<u64>())
    );
}

/// `ironlun_initiator_sessions`: normal sessions per target and
/// initiator, gone from the scrape once an initiator's last session is.
#[test]
fn sessions_are_counted_by_target_and_initiator() {
    const ALICE: &str = "iqn.2026-11.test:alice";
    const BOB: &str = "iqn.2026-11.test:bob";
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:8MiB",
        "--stats",
        "127.0.0.1:0",
    ]);
    let stats = t.stats_addr();
    let login = |initiator: &str, isid_low: u8| {
        let mut c = Raw::connect(t.addr);
        let isid = [0x80, 0, 0, 0, 0x4d, isid_low];
        let (r, _) = c.login(NAME, isid, &[("InitiatorName", initiator)]);
        assert_eq!(r.status.class(), 0, "{initiator}");
        c
    };
    let alice = [login(ALICE, 1), login(ALICE, 2)];
    let bob = login(BOB, 1);
    let of = |s: &Scrape, initiator: &str| {
        gauge(
            s,
            "ironlun_initiator_sessions",
            &[("target", NAME), ("initiator", initiator)],
        )
    };
    let s = scrape(stats);
    assert_eq!((of(&s, ALICE), of(&s, BOB)), (2, 1));
    assert_eq!(gauge(&s, "ironlun_sessions", &[("type", "normal")]), 3);
    drop(alice);
    let alice_gone = |s: &Scrape| {
        s.families["ironlun_initiator_sessions"]
            .iter_samples()
            .all(|x| x.get_labelset().unwrap().get_label_value("initiator") != Some(ALICE))
    };
    let s = scrape_until(stats, alice_gone);
    assert!(alice_gone(&s), "ALICE's sessions ended");
    assert_eq!(of(&s, BOB), 1);
    drop(bob);
}
