//! A reproduction's measured rows in the vocabulary of the published
//! values (`testdata/published/<study>.toml`): each row's metric, the
//! conditions that identify it, its value in the metric's canonical unit
//! and the model's where there is one. The condition names and values
//! here and in the data files are one vocabulary; a row whose conditions
//! no published cell names stays in the report as "not published".

use std::time::Duration;

use ironlun_bench::WorkloadResult;

use super::peers::PeerRow;
use super::{Reproduction, Table, TcpCell};
use crate::cell::Cell;
use crate::fs_rows::FsRow;
use crate::model::Prediction;
use crate::published::{Metric, Observation};

/// Request and window sizes as the data files write them: "8KiB",
/// "1MiB", "10MB", "512B".
pub fn size_label(bytes: u64) -> String {
    if bytes > 0 && bytes % (1 << 20) == 0 {
        format!("{}MiB", bytes >> 20)
    } else if bytes > 0 && bytes % 1024 == 0 {
        format!("{}KiB", bytes >> 10)
    } else if bytes > 0 && bytes % 1_000_000 == 0 {
        format!("{}MB", bytes / 1_000_000)
    } else {
        format!("{bytes}B")
    }
}

/// A round trip: "0ms", "2ms", "0.2ms".
pub fn rtt_label(ms: f64) -> String {
    if (ms - ms.round()).abs() < 1e-9 {
        format!("{}ms", ms.round())
    } else {
        format!("{ms}ms")
    }
}

fn rtt_of(d: Duration) -> String {
    rtt_label(d.as_secs_f64() * 1e3)
}

/// A link rate: "155Mbit", "1Gbit".
pub fn rate_label(bps: Option<u64>) -> String {
    match bps {
        None => "unlimited".into(),
        Some(b) if b % 1_000_000_000 == 0 => format!("{}Gbit", b / 1_000_000_000),
        Some(b) if b % 1_000_000 == 0 => format!("{}Mbit", b / 1_000_000),
        Some(b) => format!("{b}bit"),
    }
}

type Conds = Vec<(String, String)>;

fn obs(metric: Metric, c: &Conds, value: f64, model: Option<f64>) -> Observation {
    Observation {
        metric,
        conditions: c.iter().cloned().collect(),
        value,
        model,
    }
}

fn conds(pairs: &[(&str, String)]) -> Conds {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// The rows of `r` as observations, by study.
pub fn observations(r: &Reproduction) -> Vec<Observation> {
    match r.reproduction.as_str() {
        "wan-tuning" => wan_tuning(r),
        "target-backends" => target_backends(r),
        "ramdisk-target" => ramdisk_target(r),
        "app-profiles" => app_profiles(r),
        _ => Vec::new(),
    }
}

fn tcp(t: &TcpCell, with_rtt: bool) -> Observation {
    let mut c = conds(&[
        ("test", "tcp".into()),
        ("window", size_label(u64::from(t.window))),
        ("direction", t.direction.into()),
    ]);
    if with_rtt {
        c.push(("rtt".into(), rtt_label(t.rtt_ms)));
    }
    obs(
        Metric::Throughput,
        &c,
        t.measured_mb_per_s,
        Some(t.model_mb_per_s),
    )
}

fn model_mb(p: Option<&Prediction>) -> Option<f64> {
    p.map(|m| m.mb_per_s)
}

fn wan_tuning(r: &Reproduction) -> Vec<Observation> {
    let mut out: Vec<Observation> = r.tcp.iter().map(|t| tcp(t, true)).collect();
    for c in r.tables.iter().flat_map(|t| &t.cells) {
        let cell = &c.cell;
        let k = conds(&[
            ("test", "iscsi".into()),
            ("link", rate_label(cell.link_rate)),
            ("op", cell.op.name().into()),
            ("bs", size_label(u64::from(cell.bs))),
            ("qd", cell.qd.to_string()),
            ("rtt", rtt_of(cell.rtt)),
        ]);
        out.push(obs(
            Metric::Throughput,
            &k,
            c.measured.mb_per_s,
            model_mb(c.model.as_ref()),
        ));
    }
    out
}

/// ironlun as the target; a scheduler only where a disk-backed file is
/// involved (the lab sets none).
fn target_conds(test: &str, cell: &Cell) -> Conds {
    let mut k = conds(&[
        ("test", test.into()),
        ("target", "ironlun".into()),
        ("backend", cell.backend.clone()),
    ]);
    if cell.backend != "null" {
        k.push(("scheduler".into(), "not set".into()));
    }
    k
}

fn backend_test(table: &Table, cell: &Cell) -> &'static str {
    if table.title.starts_with("MPIO") {
        "mpio-read"
    } else if table.title.starts_with("database") {
        "db-random"
    } else if cell.op.is_read() {
        "dd-read-raw"
    } else {
        "dd-write-raw"
    }
}

fn target_backends(r: &Reproduction) -> Vec<Observation> {
    let mut out = Vec::new();
    for t in &r.tables {
        for c in &t.cells {
            let test = backend_test(t, &c.cell);
            let mut k = target_conds(test, &c.cell);
            if test == "mpio-read" {
                k.push(("paths".into(), c.cell.sessions.to_string()));
            }
            out.push(obs(
                Metric::Throughput,
                &k,
                c.measured.mb_per_s,
                model_mb(c.model.as_ref()),
            ));
        }
    }
    out.extend(mpio_gain(&out));
    out.extend(r.peers.iter().filter_map(peer_row));
    for row in &r.fs_rows {
        let test = match row.test.as_str() {
            "fs-read-512k" => "fs-read",
            "fs-write-512k" => "fs-write",
            other => other,
        };
        out.push(fs_row(test, row, true));
    }
    out
}

/// A peer's measured row under its own name (the published file's
/// stand-ins set it beside the target it stands in for).
fn peer_row(p: &PeerRow) -> Option<Observation> {
    let v = p.mb_per_s.filter(|_| p.skipped.is_none())?;
    let mut k = conds(&[
        ("test", p.test.into()),
        ("target", p.target.into()),
        ("backend", p.backend.into()),
    ]);
    if let Some(s) = &p.scheduler {
        k.push(("scheduler".into(), s.clone()));
    }
    Some(obs(Metric::Throughput, &k, v, None))
}

/// The study's "improvement from two paths" on the null backend, from
/// the measured one- and two-path rows: (two / one - 1) x 100 %.
fn mpio_gain(rows: &[Observation]) -> Option<Observation> {
    let null_paths = |n: &str| {
        rows.iter().find(|o| {
            let c = |k: &str| o.conditions.get(k).map(String::as_str);
            c("test") == Some("mpio-read") && c("backend") == Some("null") && c("paths") == Some(n)
        })
    };
    let (one, two) = (null_paths("1")?, null_paths("2")?);
    if one.value <= 0.0 {
        return None;
    }
    let k = conds(&[
        ("test", "mpio-read".into()),
        ("target", "ironlun".into()),
        ("backend", "null".into()),
        ("compare", "2 paths over 1".into()),
    ]);
    let model = match (one.model, two.model) {
        (Some(a), Some(b)) if a > 0.0 => Some((b / a - 1.0) * 100.0),
        _ => None,
    };
    Some(obs(
        Metric::Gain,
        &k,
        (two.value / one.value - 1.0) * 100.0,
        model,
    ))
}

fn fs_row(test: &str, row: &FsRow, target: bool) -> Observation {
    let mut k = conds(&[("test", test.into()), ("backend", row.backend.clone())]);
    if target {
        k.push(("target".into(), "ironlun".into()));
        if row.backend != "null" {
            k.push(("scheduler".into(), "not set".into()));
        }
    }
    obs(Metric::Throughput, &k, row.mb_per_s, None)
}

/// Every IOMeter figure of a workload run (IOMeter counts one I/O per
/// transaction when there is no reply, so transactions are IOPS).
fn iometer_rows(w: &WorkloadResult, k: &Conds, model: Option<f64>) -> Vec<Observation> {
    vec![
        obs(Metric::Iops, k, w.iops, None),
        obs(Metric::ReadIops, k, w.read_iops, None),
        obs(Metric::WriteIops, k, w.write_iops, None),
        obs(Metric::Throughput, k, w.mb_per_s, model),
        obs(Metric::ReadThroughput, k, w.read_mb_per_s, None),
        obs(Metric::WriteThroughput, k, w.write_mb_per_s, None),
        obs(Metric::Transactions, k, w.iops, None),
        obs(Metric::Latency, k, w.latency_us.mean, None),
        obs(Metric::ReadLatency, k, w.read_latency_us.mean, None),
        obs(Metric::WriteLatency, k, w.write_latency_us.mean, None),
        obs(Metric::TransactionTime, k, w.transaction_time_us, None),
    ]
}

/// The tuning scenario a workload set ran under, from its title.
fn scenario(title: &str) -> &'static str {
    if title.contains("TCP + iSCSI") {
        "tcp-iscsi-tweaks"
    } else if title.contains("iSCSI tweaks") {
        "iscsi-tweaks"
    } else {
        "notweaks"
    }
}

fn mix_read(name: &str) -> &'static str {
    if name.starts_with("file-server-50") {
        "50"
    } else {
        "80"
    }
}

fn ramdisk_target(r: &Reproduction) -> Vec<Observation> {
    let mut out: Vec<Observation> = r.tcp.iter().map(|t| tcp(t, false)).collect();
    for set in &r.workloads {
        for (i, w) in set.results.iter().enumerate() {
            let model = set
                .models
                .get(i)
                .and_then(Option::as_ref)
                .map(|m| m.mb_per_s);
            if set.title.starts_with("file-server mix") {
                let k = conds(&[
                    ("test", "file-server".into()),
                    ("read", mix_read(&w.name).into()),
                    ("scenario", scenario(&set.title).into()),
                    ("link", "single".into()),
                ]);
                out.extend(iometer_rows(w, &k, model));
            } else if set.title.starts_with("NIC team") || set.title.starts_with("multipath") {
                let link = if set.title.starts_with("NIC team") {
                    "team-member"
                } else if i == 0 {
                    "two-paths"
                } else {
                    "two-paths, one pulled"
                };
                let k = conds(&[
                    ("test", "file-server".into()),
                    ("read", mix_read(&w.name).into()),
                    ("scenario", "notweaks".into()),
                    ("link", link.into()),
                ]);
                out.extend(iometer_rows(w, &k, model));
            } else {
                let k = conds(&[
                    ("test", w.name.clone()),
                    ("scenario", scenario(&set.title).into()),
                ]);
                out.push(if w.name.starts_with("access-time") {
                    obs(Metric::AccessTime, &k, w.latency_us.mean, None)
                } else {
                    obs(Metric::Throughput, &k, w.mb_per_s, model)
                });
            }
        }
    }
    for row in &r.fs_rows {
        match copy_conditions(&row.test) {
            Some(k) => out.push(obs(Metric::Throughput, &k, row.mb_per_s, None)),
            None => out.push(fs_row(&row.test, row, false)),
        }
    }
    out
}

/// A RAM disk <-> LUN copy row as the study's robocopy cells name it:
/// `ram-to-lun-SET` is its write, `lun-to-ram-SET` its read (the LUN's
/// data still cached, as the study's was); the synced write and the
/// uncached read carry a condition of their own (no published cell).
fn copy_conditions(test: &str) -> Option<Conds> {
    let (direction, rest) = if let Some(r) = test.strip_prefix("ram-to-lun-") {
        ("write", r)
    } else {
        ("read", test.strip_prefix("lun-to-ram-")?)
    };
    let (set, extra) = match rest.split_once('-') {
        Some((set, "synced")) => (set, Some(("until", "synced"))),
        Some((set, "uncached")) => (set, Some(("cache", "dropped"))),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut k = conds(&[
        ("test", format!("robocopy-{set}")),
        ("direction", direction.into()),
    ]);
    if let Some((key, v)) = extra {
        k.push((key.into(), v.into()));
    }
    Some(k)
}

fn app_profiles(r: &Reproduction) -> Vec<Observation> {
    let mut out = Vec::new();
    for w in r.workloads.iter().flat_map(|s| &s.results) {
        let k = conds(&[("spec", w.name.clone()), ("initiator", "ironlun".into())]);
        out.push(obs(Metric::Iops, &k, w.iops, None));
        out.push(obs(Metric::Throughput, &k, w.mb_per_s, None));
        if let Some(cpu) = initiator_host_cpu(r, &w.name, w.iops) {
            out.push(obs(Metric::Cpu, &k, cpu, None));
        }
    }
    out
}

/// The study's CPU %: the initiator host's utilisation, its CPU time
/// over its cores and the elapsed time. The workload rows' own CPU is the
/// whole of this machine, which also runs the target and the relay (on
/// the study's testbed, other hosts), so the figure takes the initiator
/// comparison's run of ironlun's initiator as a process of its own: its
/// CPU time per I/O, times the I/Os per second the workload row ran at
/// (`iops`, under the profile's disk), over the initiator cores of the
/// study's host (the fitted profile's `initiator_cores`, the cpu line's
/// `host_cpus`). `None` where that run did not measure the spec
/// (`--initiators quick` or `off`).
fn initiator_host_cpu(r: &Reproduction, spec: &str, iops: f64) -> Option<f64> {
    let study = r.initiators.as_ref()?;
    let row = study.rows.iter().find(|row| {
        row.source == "measured"
            && row.spec == spec
            && row.initiator == super::initiators::Client::Ironlun.name()
            && row.cannot.is_none()
    })?;
    Some(study.line.host_pct(row.cpu_us_per_io?, iops))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_the_data_files_spelling() {
        assert_eq!(size_label(1024), "1KiB");
        assert_eq!(size_label(256 << 10), "256KiB");
        assert_eq!(size_label(1 << 20), "1MiB");
        assert_eq!(size_label(10_000_000), "10MB");
        assert_eq!(size_label(512), "512B");
        assert_eq!(rtt_label(0.0), "0ms");
        assert_eq!(rtt_label(50.0), "50ms");
        assert_eq!(rtt_label(0.2), "0.2ms");
        assert_eq!(rtt_of(Duration::from_millis(10)), "10ms");
        assert_eq!(rate_label(Some(155_000_000)), "155Mbit");
        assert_eq!(rate_label(Some(1_000_000_000)), "1Gbit");
        assert_eq!(rate_label(Some(100_000_000)), "100Mbit");
        assert_eq!(
            scenario("file-server mix, TCP + iSCSI tweaks: x"),
            "tcp-iscsi-tweaks"
        );
        assert_eq!(scenario("file-server mix, iSCSI tweaks: y"), "iscsi-tweaks");
        assert_eq!(scenario("file-server mix, notweaks: defaults"), "notweaks");
    }

    /// The CPU cell is the initiator's own CPU per I/O at the rate it ran,
    /// over the study host's CPUs; no initiator run, no CPU cell.
    #[test]
    fn the_cpu_cell_is_the_initiators_own_over_the_study_hosts_cpus() {
        use super::super::initiators::{InitiatorStudy, Line, Row};
        let row = |initiator: &str, us: f64| Row {
            spec: "web-file-server-4k".into(),
            initiator: initiator.into(),
            source: "measured",
            iops: Some(20_000.0),
            cpu_us_per_io: Some(us),
            ..Row::default()
        };
        let mut r = Reproduction::bare("app-profiles");
        assert_eq!(initiator_host_cpu(&r, "web-file-server-4k", 20_000.0), None);
        r.initiators = Some(InitiatorStudy {
            line: Line {
                pct: 8.0,
                host_cpus: 8.0,
            },
            time_s: 1.0,
            columns: Vec::new(),
            rows: vec![row("libiscsi iscsi-perf", 99.0), row("ironlun bench", 12.0)],
            kernel_calibration: None,
            kernel_not_run: None,
        });
        // 12 µs x 20,000/s = 0.24 CPU of 8: 3 %; at the workload row's
        // 10,000/s, 1.5 %.
        let cpu = initiator_host_cpu(&r, "web-file-server-4k", 20_000.0).unwrap();
        assert!((cpu - 3.0).abs() < 1e-9, "{cpu}");
        let cpu = initiator_host_cpu(&r, "web-file-server-4k", 10_000.0).unwrap();
        assert!((cpu - 1.5).abs() < 1e-9, "{cpu}");
        assert_eq!(initiator_host_cpu(&r, "dss-1m", 118.0), None);
    }

    #[test]
    fn ram_disk_copies_are_the_robocopy_cells() {
        let get = |t: &str| {
            copy_conditions(t).map(|c| {
                c.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
        };
        assert_eq!(
            get("ram-to-lun-1x1GiB").unwrap(),
            "test=robocopy-1x1GiB direction=write"
        );
        assert_eq!(
            get("lun-to-ram-64x64x256KiB").unwrap(),
            "test=robocopy-64x64x256KiB direction=read"
        );
        assert_eq!(
            get("ram-to-lun-1024x1MiB-synced").unwrap(),
            "test=robocopy-1024x1MiB direction=write until=synced"
        );
        assert_eq!(
            get("lun-to-ram-1x1GiB-uncached").unwrap(),
            "test=robocopy-1x1GiB direction=read cache=dropped"
        );
        assert!(get("copy-1x1GiB").is_none());
        assert!(get("lun-to-ram-1x1GiB-other").is_none());
    }

    #[test]
    fn the_two_path_gain_comes_from_the_measured_null_rows() {
        let row = |paths: &str, v: f64, m: f64| {
            Observation::new(
                Metric::Throughput,
                &[
                    ("test", "mpio-read"),
                    ("target", "ironlun"),
                    ("backend", "null"),
                    ("paths", paths),
                ],
                v,
            )
            .with_model(Some(m))
        };
        let g = mpio_gain(&[row("1", 12.0, 12.5), row("2", 23.0, 25.0)]).unwrap();
        assert_eq!(g.metric, Metric::Gain);
        assert!((g.value - 91.666_666).abs() < 1e-3, "{}", g.value);
        assert!((g.model.unwrap() - 100.0).abs() < 1e-9);
        assert_eq!(g.conditions.get("compare").unwrap(), "2 paths over 1");
        // Without both rows there is no gain to report.
        assert!(mpio_gain(&[row("2", 23.0, 25.0)]).is_none());
    }
}
