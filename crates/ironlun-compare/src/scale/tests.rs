use super::table::{judged_by_cpu, label, markdown};
use super::*;

#[test]
fn rows_sweep_threads_then_sessions_at_equal_in_flight() {
    let s = specs(8, &[], &[1, 8, 64]);
    let threads: Vec<u32> = s.iter().take(4).map(|x| x.threads).collect();
    assert_eq!(threads, [1, 2, 4, 8]);
    assert!(s
        .iter()
        .take(4)
        .all(|x| x.sessions == x.threads && x.qd == 32));
    let sessions: Vec<(u32, u32, u32)> = s
        .iter()
        .skip(4)
        .map(|x| (x.threads, x.sessions, x.qd))
        .collect();
    assert_eq!(sessions, [(1, 1, 128), (8, 8, 32), (8, 64, 4)]);
    assert_eq!(s[5].in_flight(), s[6].in_flight());
    // Two cores: one client CPU, one thread.
    let two = specs(1, &[], &[8, 64]);
    assert_eq!(
        two.iter()
            .map(|x| (x.threads, x.sessions, x.qd))
            .collect::<Vec<_>>(),
        [(1, 1, 32), (1, 8, 32), (1, 64, 4)]
    );
    // Six client CPUs: 1, 2, 4, 6.
    let six: Vec<u32> = specs(6, &[], &[]).iter().map(|x| x.threads).collect();
    assert_eq!(six, [1, 2, 4, 6]);
    assert_eq!(specs(4, &[3], &[]).len(), 1);
}

fn sample(iops: f64, target_us: f64, client_us: f64) -> Sample {
    Sample {
        iops,
        mb_per_s: iops * 4096.0 / 1e6,
        target_cpu_us_per_io: Some(target_us),
        client_cpu_us_per_io: Some(client_us),
        steal_pct: 1.0,
        ..Sample::default()
    }
}

fn row(sessions: u32, qd: u32, ironlun: Sample, tgt: Sample) -> Row {
    Row {
        spec: Spec {
            threads: 1,
            sessions,
            qd,
        },
        tgt: vec![tgt],
        ironlun: vec![ironlun],
    }
}

fn report(rows: Vec<Row>) -> Report {
    Report {
        date: "2026-11-28T05:00:00Z".into(),
        host: crate::test_host(),
        load_average: "3.10 2.50 2.00".into(),
        split: Split::halves(2),
        versions: vec![("ironlun".into(), "ironlun 0.1.0".into())],
        reps: 1,
        measure_s: 1.0,
        rows,
        failures: Vec::new(),
        elapsed_s: 30.0,
    }
}

/// A client at a full core against both targets makes the row one
/// judged by CPU per I/O; at a full core against one only, not.
#[test]
fn a_client_at_a_full_core_against_both_is_judged_by_cpu() {
    // 100 K IOPS at 9.5 µs of client CPU: 0.95 cores.
    let both = row(1, 32, sample(100e3, 5.0, 9.5), sample(95e3, 10.0, 10.0));
    assert!(judged_by_cpu(&both));
    let one = row(1, 32, sample(100e3, 5.0, 9.5), sample(30e3, 10.0, 10.0));
    assert!(!judged_by_cpu(&one));
    let md = markdown(&report(vec![both, one]));
    assert_eq!(md.matches("judged by CPU per I/O").count(), 2, "{md}");
    assert!(
        md.contains("the client was at a full core against both"),
        "{md}"
    );
}

#[test]
fn the_table_names_the_machine_pinning_and_the_sessions_goal() {
    let rows = vec![
        row(8, 32, sample(200e3, 5.0, 2.0), sample(90e3, 10.0, 2.0)),
        row(64, 4, sample(150e3, 6.0, 2.0), sample(85e3, 11.0, 2.0)),
    ];
    let md = markdown(&report(rows));
    assert!(
        md.contains("Test CPU @ 2.0GHz (2 CPUs, kernel 6.1.0-test)"),
        "{md}"
    );
    assert!(md.contains("load average 3.10 2.50 2.00"), "{md}");
    assert!(md.contains("the target on CPUs 0 (1), the client (ironlun bench) on CPUs 1 (1)"));
    assert!(md.contains("| 1 thread × 8 sessions × QD 32 | ironlun | 200.0K | 819 | 5.0 | 1.00 | 200.0K | 0.40 | 1.0 |"), "{md}");
    assert!(
        md.contains("ironlun/tgt: 2.22× IOPS, 0.50× CPU per I/O"),
        "{md}"
    );
    // 150 K of 200 K: 75 %; tgt 85 of 90: 94 %.
    assert!(
        md.contains("ironlun 75 %, tgt 94 % of the IOPS; the goal (≥ 85 % for ironlun) is not met"),
        "{md}"
    );
    assert_eq!(
        label(&Spec {
            threads: 2,
            sessions: 64,
            qd: 4
        }),
        "2 threads × 64 sessions × QD 4"
    );
}
