//! Planning, the line's arithmetic, published rows and verdicts, on the
//! study's own specifications and published file (no sockets, no runs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use super::*;

fn specs() -> Vec<Spec> {
    ironlun_bench::profiles::lookup("app-profiles")
        .unwrap()
        .iter()
        .map(|w| Spec::of(w).unwrap())
        .collect()
}

fn spec(name: &str) -> Spec {
    specs().into_iter().find(|s| s.name == name).unwrap()
}

fn file() -> StudyFile {
    crate::published::load("app-profiles").unwrap()
}

#[test]
fn iscsi_perf_runs_the_read_specs_and_says_why_not_the_others() {
    assert_eq!(plan(Client::Libiscsi, &spec("dss-1m")), Plan::Exact);
    assert_eq!(
        plan(Client::Libiscsi, &spec("video-on-demand-512k")),
        Plan::Exact
    );
    match plan(Client::Libiscsi, &spec("web-file-server-4k")) {
        Plan::Deviates { shape, how } => {
            assert!(shape.read && shape.random, "{shape:?}");
            assert_eq!((shape.block_size, shape.queue_depth), (4096, 64));
            assert!(how.contains("all reads (spec: 95 % reads)"), "{how}");
            assert!(how.contains("all random (spec: 75 % random)"), "{how}");
        }
        p => panic!("{p:?}"),
    }
    match plan(Client::Libiscsi, &spec("media-streaming-64k")) {
        Plan::Deviates { shape, how } => {
            assert!(!shape.random);
            assert_eq!(how, "all reads (spec: 98 % reads)");
        }
        p => panic!("{p:?}"),
    }
    assert_eq!(
        plan(Client::Libiscsi, &spec("sql-server-log-64k")),
        Plan::Cannot("iscsi-perf only reads; the spec is 100 % writes".into())
    );
    // 10 % writes is past what may be run as reads.
    assert!(matches!(
        plan(Client::Libiscsi, &spec("os-paging-64k")),
        Plan::Cannot(_)
    ));
    let runnable = specs()
        .iter()
        .filter(|s| !matches!(plan(Client::Libiscsi, s), Plan::Cannot(_)))
        .count();
    assert_eq!(runnable, 6);
    assert!(specs()
        .iter()
        .all(|s| plan(Client::Ironlun, s) == Plan::Exact));
}

#[test]
fn the_line_converts_between_cpu_per_io_and_host_percent() {
    let l = line(&file()).unwrap();
    assert_eq!((l.pct, l.host_cpus), (8.0, 8.0));
    // 16.03 % of 8 CPUs at 23,887.94 IOPS is 53.7 µs per I/O.
    let us = l.us_per_io(16.03, 23_887.94).unwrap();
    assert!((us - 53.684).abs() < 0.01, "{us}");
    assert!((l.host_pct(us, 23_887.94) - 16.03).abs() < 1e-9);
    assert!((l.iops_per_pct(us).unwrap() - 23_887.94 / 16.03).abs() < 1e-6);
    assert_eq!(l.verdict(8.0), Verdict::Under);
    assert_eq!(l.verdict(8.01), Verdict::Over);
    assert_eq!(l.us_per_io(5.0, 0.0), None);
    assert_eq!(l.iops_per_pct(0.0), None);
}

#[test]
fn the_published_rows_give_the_studys_own_verdicts() {
    let f = file();
    let l = line(&f).unwrap();
    // The text: the software initiator under the line for the two large
    // specs and five small ones, over it for the other five.
    let under: Vec<String> = specs()
        .iter()
        .flat_map(|s| published_rows(&f, &l, s))
        .filter(|r| r.initiator == "software-broadcom" && r.verdict == Some(Verdict::Under))
        .map(|r| r.spec)
        .collect();
    assert_eq!(
        under,
        [
            "web-file-server-64k",
            "dss-1m",
            "media-streaming-64k",
            "sql-server-log-64k",
            "os-paging-64k",
            "web-server-log-8k",
            "video-on-demand-512k"
        ]
    );
    let rows = published_rows(&f, &l, &spec("web-file-server-4k"));
    let names: Vec<&str> = rows.iter().map(|r| r.initiator.as_str()).collect();
    assert_eq!(
        names,
        [
            "software-broadcom",
            "toe-broadcom",
            "hba-broadcom",
            "software-intel-ioat"
        ]
    );
    for r in &rows {
        assert_eq!(r.source, "published");
        assert_eq!(r.in_lab, r.initiator == "software-broadcom", "{r:?}");
        // Nothing measured is set on a published row.
        assert!(r.this_host_cpu_pct.is_none() && r.target_cpu_us_per_io.is_none());
    }
    let hba = &rows[2];
    assert_eq!(hba.cpu_pct, Some(4.89));
    assert_eq!(hba.verdict, Some(Verdict::Under));
    // A large spec's rate comes from its MB/s: 118.28 MiB/s of 1 MiB.
    let dss = study_rate(&f, &spec("dss-1m")).unwrap();
    assert!((dss - 118.28).abs() < 1e-6, "{dss}");
}

#[test]
fn a_measured_row_is_judged_at_the_studys_rate() {
    let f = file();
    let l = line(&f).unwrap();
    let s = spec("web-file-server-4k");
    let rate = study_rate(&f, &s);
    let sample = Sample {
        iops: 10_000.0,
        client_cpu_us_per_io: Some(20.0),
        client_cores: Some(0.2),
        target_cpu_us_per_io: Some(30.0),
        ..Sample::default()
    };
    let r = measured_row(
        &l,
        &s,
        Client::Ironlun,
        "as specified".into(),
        &sample,
        rate,
    );
    // 20 µs x 23,887.94 IOPS over 8 CPUs: 5.97 %.
    let pct = r.cpu_pct.unwrap();
    assert!((pct - 5.972).abs() < 0.01, "{pct}");
    assert_eq!(r.verdict, Some(Verdict::Under));
    assert_eq!(r.iops_per_cpu_pct, Some(4000.0));
    assert_eq!(r.target_cpu_us_per_io, Some(30.0));
    // Twice the CPU per I/O crosses the line.
    let heavy = Sample {
        client_cpu_us_per_io: Some(40.0),
        ..sample.clone()
    };
    let r = measured_row(&l, &s, Client::Libiscsi, String::new(), &heavy, rate);
    assert_eq!(r.verdict, Some(Verdict::Over));
    // No CPU reading: no verdict.
    let blind = Sample {
        client_cpu_us_per_io: None,
        ..sample
    };
    let r = measured_row(&l, &s, Client::Ironlun, String::new(), &blind, rate);
    assert_eq!((r.cpu_pct, r.verdict), (None, None));
}

#[test]
fn the_quick_slice_and_the_flag() {
    assert_eq!(Which::parse("quick").unwrap(), Which::Quick);
    assert!(Which::parse("some").is_err());
    let quick: Vec<String> = specs()
        .into_iter()
        .filter(|s| Which::Quick.takes(&s.name))
        .map(|s| s.name)
        .collect();
    assert_eq!(quick.len(), QUICK.len());
    assert!(!Which::Off.takes("dss-1m"));
}

#[test]
fn a_column_that_names_no_cell_is_refused() {
    let text = include_str!("../../../../../testdata/published/app-profiles.toml");
    let bad = text.replace("value = \"toe-broadcom\"", "value = \"toe-broadcomm\"");
    let e = StudyFile::parse(&bad).unwrap_err();
    assert!(e.contains("toe-broadcomm"), "{e}");
}

#[test]
fn the_kernel_slice_is_never_wider_than_the_comparisons() {
    assert_eq!(Which::All.within(Which::All), Which::All);
    assert_eq!(Which::All.within(Which::Quick), Which::Quick);
    assert_eq!(Which::Quick.within(Which::All), Which::Quick);
    assert_eq!(Which::Quick.within(Which::Off), Which::Off);
    assert_eq!(Which::Off.within(Which::All), Which::Off);
}

#[test]
fn a_kernel_row_goes_after_its_specs_rows() {
    let row = |spec: &str, who: &str| Row {
        spec: spec.into(),
        initiator: who.into(),
        ..Row::default()
    };
    let mut rows = vec![row("a", "x"), row("a", "y"), row("b", "x")];
    insert_after_spec(&mut rows, row("a", kernel::NAME));
    insert_after_spec(&mut rows, row("c", kernel::NAME));
    let order: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.spec.as_str(), r.initiator.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            ("a", "x"),
            ("a", "y"),
            ("a", kernel::NAME),
            ("b", "x"),
            ("c", kernel::NAME)
        ]
    );
}

/// The kernel initiator's row as printed: its verdict marked as from an
/// estimate, the raw guest figure beside it, the legend with both
/// slowdowns; a VM that could not run leaves a reason, not a number.
#[test]
fn the_kernel_rows_say_they_are_estimates() {
    let f = file();
    let l = line(&f).unwrap();
    let s = spec("dss-1m");
    let sample = kernel::parse_sample(
        &"kinit=dss-1m ms=2000 bytes=41943040 ncpu=1 user=10 nice=0 system=100 idle=10 iowait=0 irq=0 softirq=80 steal=0"
            .split_whitespace()
            .map(|w| {
                let (k, v) = w.split_once('=').unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let cal = kernel::Calibration::new(
        vec![
            kernel::Work::new(kernel::USED, kernel::COPY_JOB, 2000.0, 50.0),
            kernel::Work::new(kernel::CAL_HASH, "--crctest=fnv", 3000.0, 1000.0),
        ],
        "tcg",
    );
    let r = kernel::row(&l, &s, &sample, &cal, study_rate(&f, &s));
    // 1.9 s of guest CPU over 40 I/Os: 47 500 us raw, / 40 = 1187.5 us.
    assert_eq!(r.raw_cpu_us_per_io, Some(47_500.0));
    assert_eq!(r.cpu_us_per_io, Some(1187.5));
    assert_eq!(r.iops, Some(20.0));
    let study = InitiatorStudy {
        line: l,
        time_s: 2.0,
        columns: Vec::new(),
        rows: vec![r, kernel::cannot(&spec("web-file-server-4k"), "no qemu")],
        kernel_calibration: Some(cal),
        kernel_not_run: None,
    };
    let text = study.text();
    let dss = text.lines().find(|l| l.starts_with("dss-1m")).unwrap();
    assert!(dss.contains("under*"), "{dss}");
    assert!(dss.contains("guest: 47500.0 us/IO"), "{dss}");
    assert!(text.contains("40.0x"), "{text}");
    assert!(text.contains("3.0x slower"), "{text}");
    assert!(text.contains("ESTIMATE"), "{text}");
    let web = text
        .lines()
        .find(|l| l.starts_with("web-file-server-4k"))
        .unwrap();
    assert!(web.contains("not run: no qemu"), "{web}");
    assert!(study.summary().contains("(from the estimate)"));
    let json = serde_json::to_value(&study).unwrap();
    assert_eq!(json["rows"][0]["estimate"], true);
    assert_eq!(json["rows"][0]["emulation_slowdown"], 40.0);
    assert_eq!(json["kernel_calibration"]["used"], kernel::USED);
    // Rows of the other initiators carry none of the estimate's fields.
    let plain = serde_json::to_value(Row::default()).unwrap();
    assert!(plain.get("estimate").is_none() && plain.get("raw_cpu_us_per_io").is_none());
}
