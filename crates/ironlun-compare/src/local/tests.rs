use std::cell::Cell;

use super::table::verdict;
use super::*;

/// The parts of fio 3.33's JSON report that are read (trimmed from a
/// real run: `fio --output-format=json`, io_uring, 4 KiB random reads).
const FIO_JSON: &str = r#"fio: a warning fio prints before its report
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "local",
      "read" : { "iops" : 57387.225549, "bw_bytes" : 235058075, "runtime" : 501,
                 "lat_ns" : { "min" : 21000, "max" : 900000, "mean" : 68600.810476 } },
      "write" : { "iops" : 0.0, "bw_bytes" : 0, "runtime" : 0,
                  "lat_ns" : { "mean" : 0.0 } },
      "job_runtime" : 500,
      "usr_cpu" : 6.8,
      "sys_cpu" : 64.8
    }
  ]
}"#;

#[test]
fn fio_reports_are_read() {
    let s = parse_fio(FIO_JSON, true).unwrap();
    assert!((s.iops - 57387.2).abs() < 0.1);
    assert!((s.mb_per_s - 235.058).abs() < 0.001);
    assert!((s.mean_latency_us - 68.6).abs() < 0.01);
    assert!((s.client_cores.unwrap() - 0.716).abs() < 1e-9);
    let per_io = s.client_cpu_us_per_io.unwrap();
    assert!((per_io - 0.716e6 / 57387.225549).abs() < 1e-6);
    assert_eq!(s.seconds, 0.5);
    // The other direction ran nothing.
    assert_eq!(parse_fio(FIO_JSON, false).unwrap().iops, 0.0);
    assert!(parse_fio("no report", true).is_err());
    assert!(parse_fio(r#"{"jobs":[]}"#, true).is_err());
}

#[test]
fn the_issues_workloads_and_goals() {
    let ws = workloads();
    let goal = |n: &str| ws.iter().find(|w| w.name == n).unwrap().goal;
    for rw in ["randread", "randwrite"] {
        assert_eq!(goal(&format!("4k-{rw}-qd64")), Goal::Share(0.85));
        assert_eq!(goal(&format!("4k-{rw}-qd1")), Goal::LatencyPlus(25.0));
        assert_eq!(goal(&format!("4k-{rw}-qd16")), Goal::None);
    }
    assert_eq!(goal("512k-seqread-qd8"), Goal::Share(0.9));
    assert_eq!(goal("512k-seqwrite-qd8"), Goal::Share(0.9));
    // Offsets aligned to the transfer size, as fio's are.
    assert!(ws.iter().all(|w| w.shape.align == Some(w.shape.block_size)));
}

fn sample(iops: f64, lat: f64, target: f64, client: f64, cores: f64) -> Sample {
    Sample {
        iops,
        mb_per_s: iops * 0.524288,
        mean_latency_us: lat,
        target_cpu_us_per_io: Some(target),
        client_cpu_us_per_io: Some(client),
        client_cores: Some(cores),
        ..Sample::default()
    }
}

fn row(name: &str, runs: [(Server, Sample); 4]) -> Row {
    let workload = workloads().into_iter().find(|w| w.name == name).unwrap();
    Row {
        device: Device::File,
        workload,
        samples: runs.into_iter().map(|(k, s)| (k, vec![s])).collect(),
    }
}

#[test]
fn rows_are_judged_against_local_fio() {
    let r = row(
        "4k-randread-qd64",
        [
            (Server::Fio, sample(100_000.0, 640.0, 0.0, 6.0, 0.6)),
            (Server::Ironlun, sample(86_000.0, 744.0, 7.0, 9.0, 0.77)),
            (Server::TgtRdwr, sample(20_000.0, 3200.0, 30.0, 10.0, 0.2)),
            (Server::TgtAio, sample(30_000.0, 2100.0, 20.0, 10.0, 0.3)),
        ],
    );
    let v = verdict(&r);
    assert_eq!(v.met, Some(true), "{}", v.reason);
    assert!((v.of(Server::Ironlun).vs_local.unwrap() - 0.86).abs() < 1e-9);
    assert!((v.of(Server::TgtRdwr).vs_local.unwrap() - 0.2).abs() < 1e-9);
    assert!(!v.client_bound);
    // 84 % misses the 85 % goal.
    let mut miss = r.clone();
    miss.samples[1].1[0].iops = 84_000.0;
    assert_eq!(verdict(&miss).met, Some(false));
    // Large transfers by MB/s; QD 1 by added latency.
    let l = row(
        "4k-randread-qd1",
        [
            (Server::Fio, sample(10_000.0, 100.0, 0.0, 6.0, 0.1)),
            (Server::Ironlun, sample(8_000.0, 124.0, 7.0, 9.0, 0.1)),
            (Server::TgtRdwr, sample(5_000.0, 200.0, 30.0, 10.0, 0.1)),
            (Server::TgtAio, sample(5_000.0, 200.0, 20.0, 10.0, 0.1)),
        ],
    );
    let v = verdict(&l);
    assert_eq!(v.met, Some(true), "{}", v.reason);
    assert!((v.of(Server::Ironlun).vs_local.unwrap() - 24.0).abs() < 1e-9);
    let mut slow = l;
    slow.samples[1].1[0].mean_latency_us = 126.0;
    assert_eq!(verdict(&slow).met, Some(false));
}

#[test]
fn each_run_is_compared_with_fio_in_its_own_repetition() {
    // The device's speed changes between repetitions: fio 100K, 200K,
    // 150K; ironlun 90K, 180K, 100K. The pairs are 90 %, 90 %, 67 %:
    // median 90 %. Medians divided (100K / 150K) would say 67 %.
    let at = |iops: f64, rep: usize| Sample {
        rep,
        ..sample(iops, 640.0, 7.0, 9.0, 0.5)
    };
    let mut r = row(
        "4k-randread-qd64",
        [
            (Server::Fio, at(100_000.0, 0)),
            (Server::Ironlun, at(90_000.0, 0)),
            (Server::TgtRdwr, at(20_000.0, 0)),
            (Server::TgtAio, at(30_000.0, 0)),
        ],
    );
    r.samples[0].1.push(at(200_000.0, 1));
    r.samples[1].1.push(at(180_000.0, 1));
    r.samples[0].1.push(at(150_000.0, 2));
    r.samples[1].1.push(at(100_000.0, 2));
    let v = verdict(&r);
    assert!((v.of(Server::Ironlun).vs_local.unwrap() - 0.9).abs() < 1e-9);
    assert_eq!(v.met, Some(true));
    // A run whose repetition has no fio run is left out of the pairs.
    r.samples[1].1.push(at(1.0, 7));
    assert!((verdict(&r).of(Server::Ironlun).vs_local.unwrap() - 0.9).abs() < 1e-9);
}

#[test]
fn a_client_at_a_full_core_against_both_targets_is_judged_by_cpu() {
    let mk = |il_target: f64, il_client: f64| {
        row(
            "4k-randwrite-qd64",
            [
                (Server::Fio, sample(100_000.0, 640.0, 0.0, 6.0, 0.6)),
                (
                    Server::Ironlun,
                    sample(60_000.0, 1000.0, il_target, il_client, 0.95),
                ),
                (Server::TgtRdwr, sample(40_000.0, 1600.0, 12.0, 24.0, 0.96)),
                (Server::TgtAio, sample(40_000.0, 1600.0, 12.0, 24.0, 0.5)),
            ],
        )
    };
    // 60 % of fio, but the client set both rates: ironlun spends less
    // per I/O than tgt and costs the client less, so the row holds.
    let v = verdict(&mk(6.0, 16.0));
    assert!(v.client_bound);
    assert_eq!(v.met, Some(true));
    assert!(v.reason.starts_with("client-bound"), "{}", v.reason);
    // More target CPU per I/O than tgt: missed, for that reason.
    assert_eq!(verdict(&mk(13.0, 16.0)).met, Some(false));
    // More client CPU per I/O against ironlun than against tgt: missed.
    assert_eq!(verdict(&mk(6.0, 25.0)).met, Some(false));
}

#[test]
fn runs_with_steal_are_repeated_and_the_least_stolen_kept() {
    let steals = [30.0, 12.0, 20.0];
    let calls = Cell::new(0);
    let once = || {
        let i = calls.get();
        calls.set(i + 1);
        Ok(Sample {
            steal_pct: steals[i],
            iops: i as f64,
            ..Sample::default()
        })
    };
    let (s, tries) = least_steal(STEAL_REDO_PCT, once).unwrap();
    assert_eq!((tries, calls.get()), (3, 3));
    assert_eq!(s.steal_pct, 12.0);
    assert_eq!(s.iops, 1.0);
    // A quiet first run is kept as it is.
    let (s, tries) = least_steal(STEAL_REDO_PCT, || {
        Ok(Sample {
            steal_pct: 1.0,
            ..Sample::default()
        })
    })
    .unwrap();
    assert_eq!((tries, s.steal_pct), (1, 1.0));
    assert!(least_steal(STEAL_REDO_PCT, || Err("down".into())).is_err());
    // Redos off: one run, whatever its steal.
    let (s, tries) = least_steal(f64::INFINITY, || {
        Ok(Sample {
            steal_pct: 40.0,
            ..Sample::default()
        })
    })
    .unwrap();
    assert_eq!((tries, s.steal_pct), (1, 40.0));
}

#[test]
fn the_file_is_made_once_with_allocated_random_blocks() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let f = dir.path().join("d.img");
    prepare_file(&f, 3 << 20).unwrap();
    let m = std::fs::metadata(&f).unwrap();
    assert_eq!(m.len(), 3 << 20);
    assert!(m.blocks() * 512 >= 3 << 20, "not allocated");
    let data = std::fs::read(&f).unwrap();
    let zeros = data.iter().filter(|&&b| b == 0).count();
    assert!(zeros < data.len() / 100, "not random: {zeros} zero bytes");
    // Kept when it has the size asked for.
    let t = m.mtime_nsec();
    prepare_file(&f, 3 << 20).unwrap();
    assert_eq!(std::fs::metadata(&f).unwrap().mtime_nsec(), t);
}

/// A report that reaches every part of the table: file and block rows, a
/// share, a latency and an unjudged goal, a row judged by CPU (the client
/// at a full core), one by MB/s, an unmeasured one, and failed runs.
fn sample_report() -> super::Report {
    let on = |device, r: Row| Row { device, ..r };
    let mut unmeasured = row(
        "4k-randwrite-qd1",
        [
            (Server::Fio, sample(9_000.0, 110.0, 0.0, 6.0, 0.1)),
            (Server::Ironlun, sample(8_000.0, 125.0, 7.0, 9.0, 0.1)),
            (Server::TgtRdwr, sample(5_000.0, 200.0, 30.0, 10.0, 0.1)),
            (Server::TgtAio, sample(5_000.0, 200.0, 20.0, 10.0, 0.1)),
        ],
    );
    unmeasured.samples[1].1.clear();
    unmeasured.samples[3].1.clear();
    super::Report {
        date: "2026-01-02T03:04:05Z".into(),
        host: crate::test_host(),
        versions: vec![
            ("ironlun".into(), "ironlun 0.1.0".into()),
            ("fio".into(), "fio-3.33".into()),
        ],
        reps: 3,
        measure_s: 5.0,
        size: 1 << 30,
        file: PathBuf::from("/var/tmp/ironlun-compare-local.img"),
        block_device: Ok("/dev/loop7".into()),
        rows: vec![
            row(
                "4k-randread-qd64",
                [
                    (Server::Fio, sample(100_000.0, 640.0, 0.0, 6.0, 0.6)),
                    (Server::Ironlun, sample(86_000.0, 744.0, 7.0, 9.0, 0.77)),
                    (Server::TgtRdwr, sample(20_000.0, 3200.0, 30.0, 10.0, 0.2)),
                    (Server::TgtAio, sample(30_000.0, 2100.0, 20.0, 10.0, 0.3)),
                ],
            ),
            row(
                "4k-randread-qd1",
                [
                    (Server::Fio, sample(10_000.0, 100.0, 0.0, 6.0, 0.1)),
                    (Server::Ironlun, sample(8_000.0, 126.0, 7.0, 9.0, 0.1)),
                    (Server::TgtRdwr, sample(5_000.0, 200.0, 30.0, 10.0, 0.1)),
                    (Server::TgtAio, sample(5_000.0, 180.0, 20.0, 10.0, 0.1)),
                ],
            ),
            row(
                "4k-randread-qd16",
                [
                    (Server::Fio, sample(60_000.0, 260.0, 0.0, 6.0, 0.4)),
                    (Server::Ironlun, sample(50_000.0, 320.0, 7.5, 9.5, 0.6)),
                    (Server::TgtRdwr, sample(18_000.0, 880.0, 28.0, 10.0, 0.2)),
                    (Server::TgtAio, sample(24_000.0, 660.0, 21.0, 10.0, 0.3)),
                ],
            ),
            unmeasured,
            on(
                Device::Block,
                row(
                    "4k-randwrite-qd64",
                    [
                        (Server::Fio, sample(100_000.0, 640.0, 0.0, 6.0, 0.6)),
                        (Server::Ironlun, sample(60_000.0, 1000.0, 6.0, 16.0, 0.95)),
                        (Server::TgtRdwr, sample(40_000.0, 1600.0, 12.0, 24.0, 0.96)),
                        (Server::TgtAio, sample(40_000.0, 1600.0, 12.0, 24.0, 0.5)),
                    ],
                ),
            ),
            on(
                Device::Block,
                row(
                    "512k-seqread-qd8",
                    [
                        (Server::Fio, sample(2_000.0, 4000.0, 0.0, 30.0, 0.2)),
                        (Server::Ironlun, sample(1_700.0, 4700.0, 40.0, 60.0, 0.3)),
                        (Server::TgtRdwr, sample(900.0, 8800.0, 90.0, 70.0, 0.2)),
                        (Server::TgtAio, sample(1_100.0, 7200.0, 80.0, 70.0, 0.2)),
                    ],
                ),
            ),
        ],
        failures: vec!["file 4k-randwrite-qd1 ironlun: connection refused".into()],
        redone: 2,
        steal_redo_pct: STEAL_REDO_PCT,
        elapsed_s: 431.7,
    }
}

/// The same report without the block rows (and why), versions or
/// failures.
fn bare_report() -> super::Report {
    let mut r = sample_report();
    r.block_device = Err("not asked for".into());
    r.rows.retain(|row| row.device == Device::File);
    r.rows.truncate(2);
    r.versions.clear();
    r.failures.clear();
    r.redone = 0;
    r
}

/// The whole table, as printed for [`sample_report`].
const SAMPLE_MARKDOWN: &str = r#"Measured 2026-01-02T03:04:05Z on Test CPU @ 2.0GHz (2 CPUs, kernel 6.1.0-test); 3 alternating repetitions of 5.0 s (one second of ramp excluded); a 1024 MiB file of random data at /var/tmp/ironlun-compare-local.img; 2 runs repeated for steal ≥ 5 %; 432 s in all.

- ironlun: ironlun 0.1.0
- fio: fio-3.33

Medians. fio: io_uring, O_DIRECT, on the file or device itself. The targets export the same file or device with O_DIRECT (ironlun `file:…,direct` / `block:…,direct`; tgt rdwr with `bsoflags direct`, and aio) and one client, ironlun bench, drives each over loopback with offsets aligned to the transfer size. In brackets: the share of local fio's rate, or the latency added to fio's, each run against fio's run of the same repetition (median of those pairs: the device's speed drifts over minutes). CPU: target daemon µs per I/O; client: ironlun bench's µs per I/O and cores (fio's own for the local run). the block rows ran on /dev/loop7.

| device | workload | fio (local) | ironlun | tgt rdwr | tgt aio | CPU µs/IO ironlun / tgt rdwr / aio | client µs/IO (cores) ironlun / tgt rdwr | steal % | verdict |
|---|---|---:|---:|---:|---:|---:|---:|---:|---|
| file | 4k-randread-qd64 | 100.0K IOPS | 86.0K IOPS (86 %) | 20.0K IOPS (20 %) | 30.0K IOPS (30 %) | 7.0 / 30.0 / 20.0 | 9.0 (0.77) / 10.0 (0.20) | 0 | ✓ 86 % of local fio (goal ≥ 85 %) |
| file | 4k-randread-qd1 | 100 µs | 126 µs (+26 µs) | 200 µs (+100 µs) | 180 µs (+80 µs) | 7.0 / 30.0 / 20.0 | 9.0 (0.10) / 10.0 (0.10) | 0 | **✗** +26 µs over local fio (goal ≤ +25 µs) |
| file | 4k-randread-qd16 | 60.0K IOPS | 50.0K IOPS (83 %) | 18.0K IOPS (30 %) | 24.0K IOPS (40 %) | 7.5 / 28.0 / 21.0 | 9.5 (0.60) / 10.0 (0.20) | 0 | reported, no goal |
| file | 4k-randwrite-qd1 | 110 µs | – µs (–) | 200 µs (+90 µs) | – µs (–) | – / 30.0 / – | – (–) / 10.0 (0.10) | 0 | not measured |
| block | 4k-randwrite-qd64 | 100.0K IOPS | 60.0K IOPS (60 %) | 40.0K IOPS (40 %) | 40.0K IOPS (40 %) | 6.0 / 12.0 / 12.0 | 16.0 (**0.95**) / 24.0 (**0.96**) | 0 | ✓ client-bound (ironlun bench at 0.95 / 0.96 cores): judged by CPU per I/O: target 6.0 vs tgt's 12.0 µs, client 16.0 vs 24.0 µs |
| block | 512k-seqread-qd8 | 1049 MB/s | 891 MB/s (85 %) | 472 MB/s (45 %) | 577 MB/s (55 %) | 40.0 / 90.0 / 80.0 | 60.0 (0.30) / 70.0 (0.20) | 0 | **✗** 85 % of local fio (goal ≥ 90 %) |

Failed runs:
- file 4k-randwrite-qd1 ironlun: connection refused
"#;

/// The table for [`bare_report`].
const BARE_MARKDOWN: &str = r#"Measured 2026-01-02T03:04:05Z on Test CPU @ 2.0GHz (2 CPUs, kernel 6.1.0-test); 3 alternating repetitions of 5.0 s (one second of ramp excluded); a 1024 MiB file of random data at /var/tmp/ironlun-compare-local.img; 0 runs repeated for steal ≥ 5 %; 432 s in all.


Medians. fio: io_uring, O_DIRECT, on the file or device itself. The targets export the same file or device with O_DIRECT (ironlun `file:…,direct` / `block:…,direct`; tgt rdwr with `bsoflags direct`, and aio) and one client, ironlun bench, drives each over loopback with offsets aligned to the transfer size. In brackets: the share of local fio's rate, or the latency added to fio's, each run against fio's run of the same repetition (median of those pairs: the device's speed drifts over minutes). CPU: target daemon µs per I/O; client: ironlun bench's µs per I/O and cores (fio's own for the local run). no block rows: not asked for.

| device | workload | fio (local) | ironlun | tgt rdwr | tgt aio | CPU µs/IO ironlun / tgt rdwr / aio | client µs/IO (cores) ironlun / tgt rdwr | steal % | verdict |
|---|---|---:|---:|---:|---:|---:|---:|---:|---|
| file | 4k-randread-qd64 | 100.0K IOPS | 86.0K IOPS (86 %) | 20.0K IOPS (20 %) | 30.0K IOPS (30 %) | 7.0 / 30.0 / 20.0 | 9.0 (0.77) / 10.0 (0.20) | 0 | ✓ 86 % of local fio (goal ≥ 85 %) |
| file | 4k-randread-qd1 | 100 µs | 126 µs (+26 µs) | 200 µs (+100 µs) | 180 µs (+80 µs) | 7.0 / 30.0 / 20.0 | 9.0 (0.10) / 10.0 (0.10) | 0 | **✗** +26 µs over local fio (goal ≤ +25 µs) |
"#;

#[test]
fn the_markdown_table_is_printed_as_pinned() {
    assert_eq!(super::table::markdown(&sample_report()), SAMPLE_MARKDOWN);
    assert_eq!(super::table::markdown(&bare_report()), BARE_MARKDOWN);
}
