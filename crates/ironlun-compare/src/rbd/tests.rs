use std::path::PathBuf;

use super::rbd_bench::line_ops;
use super::table::{markdown, verdict};
use super::*;

fn cluster(id: Option<&str>) -> Cluster {
    Cluster {
        conf: PathBuf::from("/var/tmp/c/ceph.conf"),
        id: id.map(str::to_owned),
        pool: "rbd".into(),
    }
}

#[test]
fn rbd_bench_lines_are_read() {
    // Lines of a real run (Ceph 16.2.15, 4 KiB random reads).
    assert_eq!(
        line_ops("    1      9280   9495.93    37 MiB/s"),
        Some((1, 9280))
    );
    assert_eq!(
        line_ops("elapsed: 4   ops: 51200   ops/sec: 10509   bytes/sec: 41 MiB/s"),
        Some((4, 51200))
    );
    for other in [
        "bench  type read io_size 4096 io_threads 64 bytes 209715200 pattern random",
        "  SEC       OPS   OPS/SEC   BYTES/SEC",
        "elapsed: 4",
        "elapsed: x ops: 1",
        "    1      x   9495.93",
        "",
    ] {
        assert_eq!(line_ops(other), None, "{other:?}");
    }
}

#[test]
fn the_issues_workloads() {
    let ws = workloads();
    let names: Vec<_> = ws.iter().map(|w| w.name).collect();
    assert_eq!(
        names,
        [
            "4k-randread-qd64",
            "4k-randwrite-qd64",
            "512k-seqread-qd8",
            "512k-seqwrite-qd8"
        ]
    );
    for w in &ws {
        assert_eq!(w.shape.align, Some(w.shape.block_size));
        assert_eq!(w.by_bandwidth(), w.shape.block_size == 512 * 1024);
        assert_eq!(w.shape.random, w.shape.block_size == 4096);
    }
}

#[test]
fn each_gateway_is_given_the_same_image_conf_and_id() {
    let c = cluster(None);
    assert_eq!(
        c.ironlun_spec("img"),
        "rbd:rbd/img,conf=/var/tmp/c/ceph.conf"
    );
    let t = c.tgt_lun("img");
    assert_eq!(t.path, "rbd/img");
    assert_eq!(t.bstype, Some("rbd"));
    assert_eq!(t.bsopts.as_deref(), Some("conf=/var/tmp/c/ceph.conf"));
    let c = cluster(Some("iscsi"));
    assert_eq!(
        c.ironlun_spec("img"),
        "rbd:rbd/img,conf=/var/tmp/c/ceph.conf,id=iscsi"
    );
    assert_eq!(
        c.tgt_lun("img").bsopts.as_deref(),
        Some("conf=/var/tmp/c/ceph.conf;id=iscsi")
    );
}

#[test]
fn a_binary_without_the_rbd_kind_is_recognised() {
    // What `ironlun target --check` on main says (before the kind lands).
    assert!(lacks_rbd_kind(
        "ironlun: --lun: LUN 'rbd:rbd/img,conf=/x': unknown option 'conf=/x'"
    ));
    assert!(lacks_rbd_kind(
        "ironlun: --lun: LUN 'rbd:rbd/img': unknown backend 'rbd' (use ram, null, file or block)"
    ));
    // A binary that has the kind and rejects something else is not.
    assert!(!lacks_rbd_kind(
        "ironlun: --lun: LUN 'rbd:rbd/img,conf=/x': no such file /x"
    ));
}

#[test]
fn osd_pids_come_from_the_clusters_pid_files() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let me = std::process::id();
    std::fs::write(run.join("osd.0.pid"), format!("{me}\n")).unwrap();
    std::fs::write(run.join("mon.a.pid"), "1\n").unwrap();
    // A pid file of a process long gone is left out.
    std::fs::write(run.join("osd.1.pid"), "999999999\n").unwrap();
    std::fs::write(run.join("osd.2.pid"), "garbage").unwrap();
    let conf = dir.path().join("ceph.conf");
    assert_eq!(image::osd_pids(&conf), vec![me]);
    assert!(image::osd_pids(&dir.path().join("elsewhere/ceph.conf")).is_empty());
}

fn sample(rep: usize, iops: f64, target: Option<f64>, client: f64, cores: f64) -> Sample {
    Sample {
        iops,
        mb_per_s: iops * 0.004096,
        target_cpu_us_per_io: target,
        client_cpu_us_per_io: Some(client),
        client_cores: Some(cores),
        backend_cores: Some(1.1),
        steal_pct: 2.0,
        rep,
        ..Sample::default()
    }
}

/// A 4 KiB random-read row with two repetitions.
fn row(rbd: [f64; 2], tgt: [f64; 2], ironlun: Option<[f64; 2]>, cores: f64) -> Row {
    let runs = |v: [f64; 2], cpu: Option<f64>| {
        vec![
            sample(0, v[0], cpu, 20.0, cores),
            sample(1, v[1], cpu, 20.0, cores),
        ]
    };
    Row {
        workload: workloads().remove(0),
        samples: vec![
            (Server::RbdBench, runs(rbd, None)),
            (Server::TgtRbd, runs(tgt, Some(40.0))),
            (
                Server::Ironlun,
                ironlun.map_or_else(Vec::new, |v| runs(v, Some(15.0))),
            ),
        ],
    }
}

#[test]
fn ratios_pair_runs_of_the_same_repetition() {
    // The cluster was twice as fast in repetition 1: pairing keeps that
    // out of the shares.
    let r = row(
        [10_000.0, 20_000.0],
        [5_000.0, 10_000.0],
        Some([9_000.0, 18_000.0]),
        0.5,
    );
    let v = verdict(&r, &[]);
    assert!((v.vs_tgt.unwrap() - 1.8).abs() < 1e-9);
    assert!((v.cpu_vs_tgt.unwrap() - 0.375).abs() < 1e-9);
    assert!((v.of(Server::Ironlun).vs_rbd_bench.unwrap() - 0.9).abs() < 1e-9);
    assert!((v.of(Server::TgtRbd).vs_rbd_bench.unwrap() - 0.5).abs() < 1e-9);
    assert_eq!(v.met, Some(true), "{}", v.reason);
    // Below 80 % of rbd bench misses, however far ahead of tgt-rbd.
    let r = row(
        [10_000.0, 20_000.0],
        [5_000.0, 10_000.0],
        Some([7_000.0, 14_000.0]),
        0.5,
    );
    let v = verdict(&r, &[]);
    assert_eq!(v.met, Some(false), "{}", v.reason);
    assert!(v.reason.contains("70 % of rbd bench"), "{}", v.reason);
}

#[test]
fn without_the_rbd_kind_the_ironlun_cells_say_so_and_hold_no_number() {
    let r = row([10_000.0, 11_000.0], [5_000.0, 6_000.0], None, 0.5);
    let why = format!("{NO_RBD_KIND} (`--lun rbd:rbd/img,conf=/x`: unknown option 'conf=/x')");
    let absent = vec![(Server::Ironlun, why)];
    let v = verdict(&r, &absent);
    assert_eq!(v.met, None);
    assert!(v.reason.starts_with(NO_RBD_KIND));
    assert_eq!(v.of(Server::Ironlun).figure, None);
    let md = markdown(&report(vec![r], absent));
    let line = md.lines().find(|l| l.starts_with("| 4k-randread")).unwrap();
    let cells: Vec<&str> = line.split(" | ").collect();
    assert_eq!(cells[1], "10.5K IOPS");
    assert_eq!(cells[2], "5500 IOPS (52 %)");
    assert_eq!(cells[3], NO_RBD_KIND);
    assert!(md.contains(&format!(
        "- 4k-randread-qd64: {NO_RBD_KIND}; tgt-rbd / rbd bench IOPS 52 %"
    )));
    assert!(md.contains("ironlun: ironlun has no rbd: LUN kind yet (`--lun"));
}

#[test]
fn a_client_at_a_full_core_against_both_gateways_is_judged_by_cpu_per_io() {
    let r = row(
        [10_000.0, 10_000.0],
        [5_000.0, 5_000.0],
        Some([5_000.0, 5_000.0]),
        0.95,
    );
    let v = verdict(&r, &[]);
    assert!(v.client_bound);
    // Equal rates, but 0.375× tgt-rbd's CPU per I/O and the same client cost.
    assert_eq!(v.met, Some(true), "{}", v.reason);
    assert!(v.reason.contains("judged by CPU per I/O"), "{}", v.reason);
    let md = markdown(&report(vec![r], Vec::new()));
    assert!(md.contains("**0.95**"));
    assert!(md.contains("- 4k-randread-qd64: ironlun / tgt-rbd IOPS 1.00, CPU per I/O 0.38; ironlun / rbd bench IOPS 50 %"));
}

fn report(rows: Vec<Row>, absent: Vec<(Server, String)>) -> Report {
    Report {
        date: "2026-11-24T10:00:00Z".into(),
        host: crate::test_host(),
        versions: vec![("ironlun".into(), "0.1".into())],
        reps: 2,
        measure_s: 3.0,
        cluster: cluster(None),
        image: "rbd/img".into(),
        size: 1 << 30,
        osd_pids: vec![42],
        absent,
        rows,
        failures: Vec::new(),
        redone: 0,
        steal_redo_pct: 5.0,
        elapsed_s: 60.0,
    }
}
