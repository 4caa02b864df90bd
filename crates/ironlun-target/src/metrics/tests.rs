use std::time::Duration;

use ironlun_payload::DataOutBuffer;
use ironlun_scsi::{Failure, IoKind, LunMap, NexusId};
use ironlun_scsi_codes::{SenseKey, Status};
use openmetrics_parser::{
    openmetrics::parse_openmetrics, MetricNumber, MetricsExposition, OpenMetricsType,
    OpenMetricsValue,
};

use super::*;
use crate::config::IoEngine;
use crate::registry::Target;
use crate::{Config, Overrides};

const TARGET: &str = "iqn.2026-11.test:metrics";

/// A registry with one target of `luns` RAM LUNs (numbered from 0).
fn registry(luns: usize) -> Arc<Registry> {
    registry_of(vec!["ram:1MiB".into(); luns])
}

/// A registry with one target of these LUNs (`--lun` specs).
fn registry_of(luns: Vec<String>) -> Arc<Registry> {
    let cfg = Config::load(&Overrides {
        name: Some(TARGET.into()),
        luns,
        listen: vec!["127.0.0.1:0".into()],
        ..Overrides::default()
    })
    .unwrap();
    let targets = crate::server::build_targets(&cfg).unwrap();
    Registry::new(
        targets,
        cfg.limits.clone(),
        cfg.tcp.clone(),
        Vec::new(),
        None,
        IoEngine::Pool,
    )
}

type Scrape = MetricsExposition<OpenMetricsType, OpenMetricsValue>;

/// Renders and parses with a strict OpenMetrics parser.
fn scrape(r: &Arc<Registry>) -> Scrape {
    let text = render(r).unwrap();
    parse_openmetrics(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"))
}

/// The value of the family's sample with exactly these labels.
fn value<'a>(s: &'a Scrape, family: &str, labels: &[(&str, &str)]) -> Option<&'a OpenMetricsValue> {
    let f = s.families.get(family)?;
    f.iter_samples().find_map(|sample| {
        let set = sample.get_labelset().ok()?;
        let names = set.iter().count();
        let all = labels
            .iter()
            .all(|(k, v)| set.get_label_value(k) == Some(*v));
        (all && names == labels.len()).then_some(&sample.value)
    })
}

fn number(n: &MetricNumber) -> f64 {
    n.as_f64()
}

fn counter(s: &Scrape, family: &str, labels: &[(&str, &str)]) -> f64 {
    match value(s, family, labels) {
        Some(OpenMetricsValue::Counter(c)) => number(&c.value),
        other => panic!("{family} {labels:?}: {other:?}"),
    }
}

fn gauge(s: &Scrape, family: &str, labels: &[(&str, &str)]) -> f64 {
    match value(s, family, labels) {
        Some(OpenMetricsValue::Gauge(g)) => number(g),
        other => panic!("{family} {labels:?}: {other:?}"),
    }
}

const INQUIRY: [u8; 6] = [0x12, 0, 0, 0, 36, 0];
/// READ(10) of one block at LBA 0.
const READ_1: [u8; 10] = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];

fn run(r: &Registry, lun: u16, cdb: &[u8]) -> ironlun_scsi::Response {
    r.targets()[0]
        .luns
        .execute(Some(lun), NexusId(7), cdb, &DataOutBuffer::new())
}

#[test]
fn per_lun_counters_come_from_the_lus_at_scrape_time() {
    let r = registry(2);
    for _ in 0..2 {
        assert_eq!(run(&r, 1, &INQUIRY).counted, Some(IoKind::Other));
    }
    let read = run(&r, 1, &READ_1);
    assert_eq!(read.counted, Some(IoKind::Read), "{read:?}");
    let s = scrape(&r);
    let lun1 = |op| [("target", TARGET), ("lun", "1"), ("op", op)];
    assert_eq!(counter(&s, "ironlun_lun_commands", &lun1("other")), 2.0);
    assert_eq!(counter(&s, "ironlun_lun_commands", &lun1("read")), 1.0);
    assert_eq!(counter(&s, "ironlun_lun_commands", &lun1("write")), 0.0);
    assert_eq!(counter(&s, "ironlun_lun_bytes", &lun1("read")), 512.0);
    let lun0 = [("target", TARGET), ("lun", "0"), ("op", "other")];
    assert_eq!(counter(&s, "ironlun_lun_commands", &lun0), 0.0);
    assert_eq!(failed_sum(&s, "1"), 0.0);
}

/// `ironlun_lun_failed_commands` of one LUN under these status and
/// sense_key labels.
fn failed(s: &Scrape, lun: &str, status: &str, key: &str) -> Option<f64> {
    let labels = [
        ("target", TARGET),
        ("lun", lun),
        ("status", status),
        ("sense_key", key),
    ];
    match value(s, "ironlun_lun_failed_commands", &labels)? {
        OpenMetricsValue::Counter(c) => Some(number(&c.value)),
        other => panic!("not a counter: {other:?}"),
    }
}

/// The sum of `ironlun_lun_failed_commands` over every series of one LUN:
/// what the family counted before it had status and sense_key.
fn failed_sum(s: &Scrape, lun: &str) -> f64 {
    let f = &s.families["ironlun_lun_failed_commands"];
    f.iter_samples()
        .filter(|x| {
            let set = x.get_labelset().unwrap();
            set.get_label_value("target") == Some(TARGET) && set.get_label_value("lun") == Some(lun)
        })
        .map(|x| match &x.value {
            OpenMetricsValue::Counter(c) => number(&c.value),
            other => panic!("not a counter: {other:?}"),
        })
        .sum()
}

/// TEST UNIT READY.
const TUR: [u8; 6] = [0; 6];

#[test]
fn failed_commands_are_split_by_status_and_sense_key() {
    let r = registry(2);
    // An opcode the LU does not know, a read past the end, and a write
    // to the LUN once it is read-only.
    assert_eq!(run(&r, 1, &TUR).status, Status::GOOD);
    run(&r, 1, &[0xff, 0, 0, 0, 0, 0]);
    run(&r, 1, &[0x28, 0, 0xff, 0, 0, 0, 0, 0, 1, 0]);
    r.targets()[0].luns.get(1).unwrap().set_read_only(true);
    let write = [0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0];
    let data = DataOutBuffer::copy_from_slice(&[7; 512]);
    let w = r.targets()[0]
        .luns
        .execute(Some(1), NexusId(7), &write, &data);
    assert_eq!(w.status, Status::CHECK_CONDITION, "{w:?}");
    let s = scrape(&r);
    let cc = "check_condition";
    assert_eq!(failed(&s, "1", cc, "illegal_request"), Some(2.0));
    assert_eq!(failed(&s, "1", cc, "data_protect"), Some(1.0));
    assert_eq!(failed(&s, "1", cc, "unit_attention"), Some(0.0));
    // What an operator alerts on is there at 0, on every LUN.
    for lun in ["0", "1"] {
        assert_eq!(failed(&s, lun, cc, "medium_error"), Some(0.0), "{lun}");
        assert_eq!(failed(&s, lun, cc, "hardware_error"), Some(0.0), "{lun}");
        assert_eq!(failed(&s, lun, "busy", "none"), Some(0.0), "{lun}");
        assert_eq!(failed(&s, lun, "task_set_full", "none"), Some(0.0));
        assert_eq!(failed(&s, lun, "reservation_conflict", "none"), Some(0.0));
    }
    // Rare classes only once they count.
    assert_eq!(failed(&s, "1", cc, "no_sense"), None);
    assert_eq!(failed(&s, "1", "other", "none"), None);
    // The sum is the old meaning, and what /stats says.
    assert_eq!(failed_sum(&s, "1"), 3.0);
    assert_eq!(failed_sum(&s, "0"), 0.0);
    let stats = crate::stats::collect(&r, std::time::Instant::now());
    let lun1 = stats.luns.iter().find(|l| l.lun == 1).unwrap();
    assert_eq!(lun1.io.failed_commands, 3);
}

#[test]
fn every_failure_class_has_its_own_labels() {
    let labels: Vec<(String, String)> = Failure::all().map(luns::failure_labels).collect();
    let distinct: std::collections::HashSet<_> = labels.iter().collect();
    assert_eq!(distinct.len(), labels.len(), "{labels:?}");
    let ua = luns::failure_labels(Failure::CheckCondition(Some(SenseKey::UNIT_ATTENTION)));
    assert_eq!(ua, ("check_condition".into(), "unit_attention".into()));
    let none = luns::failure_labels(Failure::CheckCondition(None));
    assert_eq!(none, ("check_condition".into(), "none".into()));
    let other = luns::failure_labels(Failure::OtherStatus);
    assert_eq!(other, ("other".into(), "none".into()));
}

#[test]
fn size_for_every_lun_and_allocation_for_thin_ones() {
    let r = registry_of(vec!["ram:1MiB".into(), "ram:2MiB,thin".into()]);
    let lun = |n| [("target", TARGET), ("lun", n)];
    let s = scrape(&r);
    assert_eq!(gauge(&s, "ironlun_lun_size_bytes", &lun("0")), 1048576.0);
    assert_eq!(gauge(&s, "ironlun_lun_size_bytes", &lun("1")), 2097152.0);
    assert!(value(&s, "ironlun_lun_allocated_bytes", &lun("0")).is_none());
    assert_eq!(gauge(&s, "ironlun_lun_allocated_bytes", &lun("1")), 0.0);
    // WRITE(10) of one block: one 64 KiB chunk of RAM.
    let write = [0x2a, 0, 0, 0, 0, 0x10, 0, 0, 1, 0];
    let data = DataOutBuffer::copy_from_slice(&[7; 512]);
    run(&r, 1, &TUR); // the new nexus's unit attention
    let w = r.targets()[0]
        .luns
        .execute(Some(1), NexusId(7), &write, &data);
    assert_eq!(w.status, Status::GOOD, "{w:?}");
    let s = scrape(&r);
    assert_eq!(gauge(&s, "ironlun_lun_allocated_bytes", &lun("1")), 65536.0);
}

#[test]
fn build_info_and_the_process_are_exposed() {
    let s = scrape(&registry(1));
    let build = s.families.get("ironlun_build_info").expect("build info");
    let sample = build.iter_samples().next().unwrap();
    let labels = sample.get_labelset().unwrap();
    assert_eq!(
        labels.get_label_value("version"),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert!(matches!(&sample.value, OpenMetricsValue::Gauge(g) if number(g) == 1.0));
    assert!(counter(&s, "process_cpu_seconds", &[]) > 0.0);
    assert!(gauge(&s, "process_resident_memory_bytes", &[]) > 0.0);
    let vsz = gauge(&s, "process_virtual_memory_bytes", &[]);
    assert!(vsz >= gauge(&s, "process_resident_memory_bytes", &[]));
    assert!(gauge(&s, "process_open_fds", &[]) >= 3.0);
    let start = gauge(&s, "process_start_time_seconds", &[]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(start > 1.5e9 && start <= now + 1.0, "{start}");
}

#[test]
fn an_offline_lun_is_counted_as_such() {
    let r = registry(2);
    let lun = |n| [("target", TARGET), ("lun", n)];
    assert_eq!(gauge(&scrape(&r), "ironlun_lun_offline", &lun("1")), 0.0);
    r.targets()[0]
        .luns
        .get(1)
        .unwrap()
        .set_offline("why".into());
    let s = scrape(&r);
    assert_eq!(gauge(&s, "ironlun_lun_offline", &lun("1")), 1.0);
    assert_eq!(gauge(&s, "ironlun_lun_offline", &lun("0")), 0.0);
}

#[test]
fn a_lun_that_is_removed_has_no_series_in_the_next_scrape() {
    let r = registry(2);
    run(&r, 1, &READ_1);
    let lun1 = [("target", TARGET), ("lun", "1"), ("op", "read")];
    assert_eq!(counter(&scrape(&r), "ironlun_lun_commands", &lun1), 1.0);
    // The running configuration changes: the target keeps LUN 0 only.
    let old = r.targets();
    let lu0 = old[0].luns.get(0).unwrap().clone();
    let smaller = Target::new(old[0].cfg.clone(), Arc::new(LunMap::new(vec![(0, lu0)])));
    r.replace_targets(vec![Arc::new(smaller)]);
    let s = scrape(&r);
    assert!(value(&s, "ironlun_lun_commands", &lun1).is_none());
    let lun1_timed = [("target", TARGET), ("lun", "1"), ("op", "read")];
    assert!(value(&s, "ironlun_lun_command_duration_seconds", &lun1_timed).is_none());
    let lun0 = [("target", TARGET), ("lun", "0"), ("op", "read")];
    assert!(value(&s, "ironlun_lun_commands", &lun0).is_some());
}

#[test]
fn latency_histograms_are_in_seconds_with_cumulative_buckets() {
    let r = registry(1);
    let targets = r.targets();
    let lu = targets[0].luns.get(0).unwrap();
    lu.record_latency(IoKind::Write, Duration::from_micros(40));
    lu.record_latency(IoKind::Write, Duration::from_millis(3));
    lu.record_latency(IoKind::Write, Duration::from_secs(20));
    let s = scrape(&r);
    let labels = [("target", TARGET), ("lun", "0"), ("op", "write")];
    let Some(OpenMetricsValue::Histogram(h)) =
        value(&s, "ironlun_lun_command_duration_seconds", &labels)
    else {
        panic!("no histogram: {s:?}");
    };
    assert_eq!(h.count, Some(3));
    let sum = h.sum.as_ref().map(number).unwrap();
    assert!((sum - 20.003_04).abs() < 1e-9, "sum {sum}");
    let at = |bound: f64| {
        let b = h.buckets.iter().find(|b| b.upper_bound == bound);
        b.map(|b| number(&b.count))
            .unwrap_or_else(|| panic!("no bucket {bound}: {h:?}"))
    };
    assert_eq!(at(1e-5), 0.0);
    assert_eq!(at(5e-5), 1.0);
    assert_eq!(at(0.0025), 1.0);
    assert_eq!(at(0.005), 2.0);
    assert_eq!(at(10.0), 2.0);
    assert_eq!(at(f64::INFINITY), 3.0);
    let reads = [("target", TARGET), ("lun", "0"), ("op", "read")];
    let Some(OpenMetricsValue::Histogram(h)) =
        value(&s, "ironlun_lun_command_duration_seconds", &reads)
    else {
        panic!("no read histogram");
    };
    assert_eq!(h.count, Some(0));
}

#[test]
fn events_are_counted_under_their_labels() {
    let r = registry(1);
    let m = &r.metrics;
    m.logged_in(false);
    m.logged_in(true);
    m.login_refused(LoginStatus::AUTHENTICATION_FAILURE);
    m.login_refused(LoginStatus::AUTHORIZATION_FAILURE);
    m.login_refused(LoginStatus::OUT_OF_RESOURCES);
    m.connection_refused();
    m.login_refused(LoginStatus::NOT_FOUND);
    m.task_management(TmfFunction::ABORT_TASK, TmfResponse::FUNCTION_COMPLETE);
    m.task_management(TmfFunction::ABORT_TASK, TmfResponse::FUNCTION_COMPLETE);
    m.task_management(TmfFunction(0x55), TmfResponse::NOT_SUPPORTED);
    m.tasks_aborted(3);
    m.digest_error(DigestKind::Data);
    m.closing(&CloseReason::NopTimeout);
    m.closing(&CloseReason::LoggedOut);
    let s = scrape(&r);
    let login = |result| counter(&s, "ironlun_logins", &[("result", result)]);
    assert_eq!(login("success"), 2.0);
    assert_eq!(login("auth_failure"), 1.0);
    assert_eq!(login("acl_refused"), 1.0);
    assert_eq!(login("limit_reached"), 2.0);
    assert_eq!(login("failure"), 1.0);
    assert_eq!(counter(&s, "ironlun_session_reinstatements", &[]), 1.0);
    let tmf = |f, r| {
        counter(
            &s,
            "ironlun_task_management",
            &[("function", f), ("response", r)],
        )
    };
    assert_eq!(tmf("abort_task", "function_complete"), 2.0);
    assert_eq!(tmf("other", "task_management_function_not_supported"), 1.0);
    assert_eq!(counter(&s, "ironlun_aborted_commands", &[]), 3.0);
    assert_eq!(
        counter(&s, "ironlun_digest_errors", &[("digest", "data")]),
        1.0
    );
    assert_eq!(
        counter(&s, "ironlun_digest_errors", &[("digest", "header")]),
        0.0
    );
    assert_eq!(counter(&s, "ironlun_nop_timeouts", &[]), 1.0);
    assert_eq!(gauge(&s, "ironlun_connections", &[]), 0.0);
    assert_eq!(gauge(&s, "ironlun_sessions", &[("type", "normal")]), 0.0);
}

#[test]
fn login_statuses_map_to_results() {
    use LoginOutcome::*;
    let cases = [
        (LoginStatus::SUCCESS, Success),
        (LoginStatus::AUTHENTICATION_FAILURE, AuthFailure),
        (LoginStatus::AUTHORIZATION_FAILURE, AclRefused),
        (LoginStatus::OUT_OF_RESOURCES, LimitReached),
        (LoginStatus::TOO_MANY_CONNECTIONS, LimitReached),
        (LoginStatus::NOT_FOUND, Failure),
        (LoginStatus::TARGET_ERROR, Failure),
        (LoginStatus::INITIATOR_ERROR, Failure),
    ];
    for (status, want) in cases {
        assert_eq!(LoginOutcome::of(status), want, "{status}");
    }
}

#[test]
fn code_names_become_label_values() {
    assert_eq!(
        label_of(TmfFunction::I_T_NEXUS_RESET.name()),
        "i_t_nexus_reset"
    );
    assert_eq!(
        label_of(TmfResponse::LUN_DOES_NOT_EXIST.name()),
        "lun_does_not_exist"
    );
    assert_eq!(label_of(TmfFunction(0x7f).name()), "other");
}

#[test]
fn the_exposition_ends_with_eof_once() {
    let text = render(&registry(1)).unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert_eq!(text.matches("# EOF").count(), 1);
}

#[test]
fn a_scheduled_lun_has_its_schedules_series_and_the_others_none() {
    use crate::schedule::slot::Outcome;
    let r = registry(2);
    let lun = |n| [("target", TARGET), ("lun", n)];
    let s = scrape(&r);
    assert!(!s
        .families
        .contains_key("ironlun_lun_snapshot_schedule_taken"));
    let mut slot = crate::schedule::Slot::new(crate::config::SnapshotSchedule {
        every: std::time::Duration::from_secs(60),
        keep: 2,
        prefix: "auto".into(),
    });
    let t0 = 1_795_841_400;
    for (k, ok) in [(0, true), (1, false), (2, true)] {
        let now = (t0 + 60 * k) * 1000;
        let c = slot.claim(now).unwrap();
        let o = if ok {
            Outcome::Took {
                name: format!("auto-{k}"),
                stamped: now / 1000,
                paused: std::time::Duration::from_millis(2),
                deleted: Vec::new(),
                kept: 2,
                error: None,
            }
        } else {
            Outcome::Failed {
                error: "full".into(),
                stamped: now / 1000,
            }
        };
        slot.finish(&c, now, o);
    }
    r.schedules.put(TARGET, 1, slot);
    let s = scrape(&r);
    let family = |f: &str| format!("ironlun_lun_snapshot_schedule_{f}");
    assert_eq!(counter(&s, &family("taken"), &lun("1")), 2.0);
    assert_eq!(counter(&s, &family("failures"), &lun("1")), 1.0);
    assert_eq!(gauge(&s, &family("kept"), &lun("1")), 2.0);
    assert_eq!(
        gauge(&s, &family("last_success_timestamp_seconds"), &lun("1")),
        (t0 + 120) as f64
    );
    assert!(value(&s, &family("taken"), &lun("0")).is_none());
}
