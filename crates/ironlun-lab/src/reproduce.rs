//! The published studies of `shared/workloads.md` as commands: each runs
//! its sweeps against an embedded target over emulated links, prints
//! tables shaped like the published ones with the model beside every
//! cell, and returns records for JSON and the HTML report.

use std::time::{Duration, Instant};

use ironlun_netem::tcpbench::{self, Direction};
use ironlun_netem::{LinkSpec, Relay};
use ironlun_units::format_size;
use serde::Serialize;

use crate::cell::{Cell, Op};
use crate::fs_rows::{self, FsPlan, FsRow, VmMode};
use crate::model::{predict_mix, Calibration, Prediction};
use crate::report::Section;
use crate::runner::{Lab, LabOptions, DISTURBED_STEAL_PCT};
use crate::sweep::{self, CellResult, Sweep, SweepFile};

/// The reproductions, with what each covers.
pub const NAMES: [(&str, &str); 4] = [
    (
        "wan-tuning",
        "section 4: TCP 64 KiB vs 10 MB windows, then request size x command window x RTT for solicited writes, unsolicited writes and reads over 155 Mbit/s, and the 1 Gbit/s LAN table",
    ),
    (
        "target-backends",
        "section 3: NULLIO / FILEIO / BLOCKIO sequential 512 KiB read and write over 1 Gbit/s, the database-like random test, MPIO over two 100 Mbit/s paths vs one",
    ),
    (
        "ramdisk-target",
        "section 2: TCP window sweep, the file-server mix under three tuning scenarios and its 50/50 variant, the 64 KiB disk-benchmark tests, two paths with one pulled mid-run",
    ),
    (
        "app-profiles",
        "section 1: the twelve application access specifications with IOPS, MB/s and initiator CPU %",
    ),
];

/// How long cells run.
#[derive(Clone, Debug)]
pub struct ReproduceOptions {
    /// Measured time per iSCSI cell (stretched for long round trips).
    pub cell_time: Duration,
    /// Time per TCP measurement.
    pub tcp_time: Duration,
    /// Application profiles: measured time and ramp-up per run.
    pub profile_time: Duration,
    pub profile_ramp: Duration,
    /// Wall time the reproduction aims to stay within: cells measured
    /// while the hypervisor stole CPU are measured again only while the
    /// run is inside it. `None`: each such cell is measured once more.
    pub budget: Option<Duration>,
    pub lab: LabOptions,
    /// The file-system rows through the kernel initiator in a VM.
    pub vm: VmMode,
    pub fs: FsPlan,
}

impl ReproduceOptions {
    /// The published run lengths: 10 s TCP runs, 4 min profile runs after
    /// a 60 s ramp (three each), 10 s per iSCSI cell. Hours, not minutes.
    pub fn full() -> ReproduceOptions {
        ReproduceOptions {
            cell_time: Duration::from_secs(10),
            tcp_time: Duration::from_secs(10),
            profile_time: Duration::from_secs(240),
            profile_ramp: Duration::from_secs(60),
            budget: None,
            lab: LabOptions {
                lun_size: 2 << 30,
                ..LabOptions::default()
            },
            vm: VmMode::Auto,
            fs: FsPlan {
                file_mb: 1000,
                copy_scale: 1,
            },
        }
    }
}

impl Default for ReproduceOptions {
    fn default() -> Self {
        ReproduceOptions {
            cell_time: Duration::from_millis(600),
            tcp_time: Duration::from_millis(600),
            profile_time: Duration::from_millis(2100),
            profile_ramp: Duration::from_millis(300),
            budget: Some(Duration::from_secs(172)),
            lab: LabOptions::default(),
            vm: VmMode::Auto,
            // Under TCG the guest moves some 30-50 MB/s: a fifth of the
            // file and an eighth of the copies keep each boot near a minute.
            fs: FsPlan {
                file_mb: 200,
                copy_scale: 8,
            },
        }
    }
}

/// One TCP baseline cell.
#[derive(Clone, Debug, Serialize)]
pub struct TcpCell {
    pub rtt_ms: f64,
    pub window: u32,
    pub direction: &'static str,
    pub link_rate: u64,
    pub measured_mb_per_s: f64,
    pub model_mb_per_s: f64,
}

/// One table of a reproduction.
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    pub title: String,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    pub cells: Vec<CellResult>,
}

/// Workload runs under one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadSet {
    pub title: String,
    pub results: Vec<ironlun_bench::WorkloadResult>,
    /// The model for each result (`None` where there is none), in order.
    pub models: Vec<Option<Prediction>>,
    /// Host steal during each run, %.
    pub steal_pct: Vec<Option<f64>>,
}

impl WorkloadSet {
    /// Runs without a model.
    pub fn measured(title: String, results: Vec<ironlun_bench::WorkloadResult>) -> WorkloadSet {
        let n = results.len();
        WorkloadSet {
            title,
            results,
            models: vec![None; n],
            steal_pct: vec![None; n],
        }
    }

    fn rows(
        &self,
    ) -> impl Iterator<
        Item = (
            &ironlun_bench::WorkloadResult,
            Option<&Prediction>,
            Option<f64>,
        ),
    > {
        self.results.iter().enumerate().map(|(i, r)| {
            (
                r,
                self.models.get(i).and_then(Option::as_ref),
                self.steal_pct.get(i).copied().flatten(),
            )
        })
    }
}

/// Everything a reproduction measured.
#[derive(Clone, Debug, Serialize)]
pub struct Reproduction {
    pub reproduction: String,
    pub description: String,
    pub elapsed_s: f64,
    /// CPU time the hypervisor stole over the whole run, percent of all
    /// (a contended virtual machine disturbs every timing).
    pub steal_pct: Option<f64>,
    pub tcp: Vec<TcpCell>,
    pub tables: Vec<Table>,
    /// Whole-workload runs (mixes, profiles), by scenario.
    pub workloads: Vec<WorkloadSet>,
    /// Rows measured through ext4 on the Linux kernel initiator in a VM.
    pub fs_rows: Vec<FsRow>,
    /// What could not be reproduced as published, and what ran instead.
    pub notes: Vec<String>,
}

/// One JSON record per cell: its parameters, `measured_mb_per_s`,
/// `model_mb_per_s`.
#[derive(Serialize)]
struct Record<'a> {
    section: &'a str,
    #[serde(flatten)]
    params: serde_json::Value,
    measured_mb_per_s: f64,
    model_mb_per_s: Option<f64>,
    model_bound: Option<&'static str>,
    /// Host CPU stolen by the hypervisor during the reported run, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    steal_pct: Option<f64>,
    /// Runs of the cell (the one with the least steal is reported).
    #[serde(skip_serializing_if = "Option::is_none")]
    runs: Option<u32>,
}

impl Reproduction {
    /// `{"reproduction": ..., "cells": [...]}`.
    pub fn json(&self) -> Result<String, String> {
        let mut cells = Vec::new();
        for t in &self.tcp {
            cells.push(Record {
                section: "tcp",
                params: serde_json::json!({
                    "rtt_ms": t.rtt_ms, "tcp_window": t.window,
                    "direction": t.direction, "link_rate": t.link_rate }),
                measured_mb_per_s: t.measured_mb_per_s,
                model_mb_per_s: Some(t.model_mb_per_s),
                model_bound: None,
                steal_pct: None,
                runs: None,
            });
        }
        for tb in &self.tables {
            for c in &tb.cells {
                cells.push(Record {
                    section: &tb.title,
                    params: serde_json::to_value(&c.params).map_err(|e| e.to_string())?,
                    measured_mb_per_s: c.measured.mb_per_s,
                    model_mb_per_s: c.model.as_ref().map(|m| m.mb_per_s),
                    model_bound: c.model.as_ref().map(|m| m.bound),
                    steal_pct: c.measured.steal_pct,
                    runs: Some(c.runs),
                });
            }
        }
        for set in &self.workloads {
            for (r, model, steal) in set.rows() {
                if let Some(m) = model {
                    cells.push(Record {
                        section: &set.title,
                        params: serde_json::json!({ "workload": r.name }),
                        measured_mb_per_s: r.mb_per_s,
                        model_mb_per_s: Some(m.mb_per_s),
                        model_bound: Some(m.bound),
                        steal_pct: steal,
                        runs: None,
                    });
                }
            }
        }
        serde_json::to_string_pretty(&serde_json::json!({
            "reproduction": self.reproduction,
            "description": self.description,
            "elapsed_s": self.elapsed_s,
            "steal_pct": self.steal_pct,
            "notes": self.notes,
            "cells": cells,
            "workloads": self.workloads,
            "fs_rows": self.fs_rows,
        }))
        .map_err(|e| e.to_string())
    }

    /// Cells more than `tolerance` (0.25 = 25 %) from their model.
    pub fn outliers(&self, tolerance: f64) -> Vec<String> {
        let mut out = Vec::new();
        for t in &self.tcp {
            let e = t.measured_mb_per_s / t.model_mb_per_s - 1.0;
            if e.abs() > tolerance {
                out.push(format!(
                    "tcp {} rtt {} ms window {}: {:.2} vs model {:.2} ({:+.0} %)",
                    t.direction,
                    t.rtt_ms,
                    t.window,
                    t.measured_mb_per_s,
                    t.model_mb_per_s,
                    e * 100.0
                ));
            }
        }
        for tb in &self.tables {
            for c in &tb.cells {
                if let (Some(e), Some(m)) = (c.model_error, &c.model) {
                    if e.abs() > tolerance {
                        let p = |k: &str| c.params.get(k).cloned().unwrap_or_default();
                        out.push(format!(
                            "{}: bs {} qd {} rtt {}: {:.2} vs model {:.2} ({:+.0} %, bound: {}; host steal {}{}) — {}",
                            tb.title,
                            p("bs"),
                            p("qd"),
                            p("rtt"),
                            c.measured.mb_per_s,
                            m.mb_per_s,
                            e * 100.0,
                            m.bound,
                            c.measured
                                .steal_pct
                                .map_or("unknown".into(), |s| format!("{s:.0} %")),
                            if c.runs > 1 {
                                format!(" in the least disturbed of {} runs", c.runs)
                            } else {
                                String::new()
                            },
                            explain(c, e)
                        ));
                    }
                }
            }
        }
        for set in &self.workloads {
            for (r, model, steal) in set.rows() {
                let Some(m) = model.filter(|m| m.mb_per_s > 0.0) else {
                    continue;
                };
                let e = r.mb_per_s / m.mb_per_s - 1.0;
                if e.abs() > tolerance {
                    out.push(format!(
                        "{}: {}: {:.2} vs model {:.2} ({:+.0} %, bound: {}; host steal {}) — {}",
                        set.title,
                        r.name,
                        r.mb_per_s,
                        m.mb_per_s,
                        e * 100.0,
                        m.bound,
                        steal.map_or("unknown".into(), |s| format!("{s:.0} %")),
                        if steal.unwrap_or(0.0) >= DISTURBED_STEAL_PCT {
                            "the hypervisor stole CPU time during the run, disturbing its timing"
                        } else {
                            "a mix is modelled from two calibration sizes per direction; see the notes"
                        }
                    ));
                }
            }
        }
        out
    }

    /// Cells that have a model prediction.
    pub fn modelled(&self) -> usize {
        self.tcp.len()
            + self
                .tables
                .iter()
                .flat_map(|t| &t.cells)
                .filter(|c| c.model.is_some())
                .count()
            + self
                .workloads
                .iter()
                .flat_map(|w| &w.models)
                .filter(|m| m.is_some())
                .count()
    }

    /// Text tables as printed.
    pub fn text(&self) -> String {
        let mut s = format!("{}: {}\n", self.reproduction, self.description);
        if let Some(st) = self.steal_pct {
            s.push_str(&format!(
                "host CPU stolen by the hypervisor during the run: {st:.1} % (above a few percent, timings are disturbed)\n"
            ));
        }
        let again = self
            .tables
            .iter()
            .flat_map(|t| &t.cells)
            .filter(|c| c.runs > 1)
            .count();
        if again > 0 {
            s.push_str(&format!(
                "{again} cells lost at least {DISTURBED_STEAL_PCT} % of the CPU to the hypervisor and were measured again; each shows its least disturbed run (chosen by steal, not by result)\n"
            ));
        }
        if !self.tcp.is_empty() {
            s.push_str("\nTCP throughput, MB/s (model in parentheses)\n");
            s.push_str(&format!("{:<8} {:<10}", "rtt", "window"));
            for d in ["up", "down"] {
                s.push_str(&format!(" {d:>16}"));
            }
            s.push('\n');
            let mut keys: Vec<(String, u32)> = Vec::new();
            for t in &self.tcp {
                let k = (format!("{}ms", t.rtt_ms), t.window);
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            for (rtt, w) in keys {
                s.push_str(&format!("{rtt:<8} {:<10}", format_size(u64::from(w))));
                for d in ["up", "down"] {
                    let v = self
                        .tcp
                        .iter()
                        .find(|t| {
                            format!("{}ms", t.rtt_ms) == rtt && t.window == w && t.direction == d
                        })
                        .map_or("-".to_owned(), |t| {
                            format!("{:.2} ({:.2})", t.measured_mb_per_s, t.model_mb_per_s)
                        });
                    s.push_str(&format!(" {v:>16}"));
                }
                s.push('\n');
            }
        }
        for tb in &self.tables {
            s.push_str(&format!("\n{} — MB/s (model in parentheses)\n", tb.title));
            s.push_str(&sweep::table(&tb.cells, &tb.rows, &tb.cols));
        }
        for w in &self.workloads {
            s.push_str(&format!("\n{}\n", w.title));
            s.push_str(&ironlun_bench::output::table(&w.results));
            for (r, model, _) in w.rows() {
                if let Some(m) = model {
                    s.push_str(&format!(
                        "  model {:<28} {:>8.1} MB/s measured, {:>8.1} model ({})\n",
                        r.name, r.mb_per_s, m.mb_per_s, m.bound
                    ));
                }
            }
        }
        if !self.fs_rows.is_empty() {
            s.push_str(&format!("\n{FS_TITLE}\n"));
            s.push_str(&fs_rows::table(&self.fs_rows));
        }
        for n in &self.notes {
            s.push_str(&format!("\nnote: {n}\n"));
        }
        s
    }

    /// The workload runs as bench reports (for ironlun-bench's HTML).
    pub fn workload_reports(&self) -> Vec<ironlun_bench::RunReport> {
        self.workloads
            .iter()
            .map(|w| {
                ironlun_bench::RunReport::new(
                    format!("ironlun reproduce {}", self.reproduction),
                    String::new(),
                    Some(w.title.clone()),
                    w.results.clone(),
                )
            })
            .collect()
    }

    /// The HTML report.
    pub fn html(&self) -> Result<String, String> {
        let mut sections: Vec<Section<'_>> = self
            .tables
            .iter()
            .map(|t| Section {
                title: t.title.clone(),
                note: String::new(),
                results: &t.cells,
                rows: t.rows.clone(),
                cols: t.cols.clone(),
            })
            .collect();
        let mut tcp_note =
            String::from("TCP baseline (tcpbench through the relay), MB/s measured / model: ");
        for t in &self.tcp {
            tcp_note.push_str(&format!(
                "{} rtt {} ms window {} = {:.2} / {:.2}; ",
                t.direction,
                t.rtt_ms,
                format_size(u64::from(t.window)),
                t.measured_mb_per_s,
                t.model_mb_per_s
            ));
        }
        sections.insert(
            0,
            Section {
                title: "TCP baseline".into(),
                note: tcp_note,
                results: &[],
                rows: Vec::new(),
                cols: Vec::new(),
            },
        );
        let out = self.outliers(0.25);
        let outliers = if out.is_empty() {
            format!(
                "All {} modelled cells are within 25 % of their model.",
                self.modelled()
            )
        } else {
            format!(
                "{} of {} modelled cells are more than 25 % from their model: {}",
                out.len(),
                self.modelled(),
                out.join("; ")
            )
        };
        if !self.fs_rows.is_empty() {
            let rows: Vec<String> = self
                .fs_rows
                .iter()
                .map(|r| {
                    format!(
                        "{} on {}: {:.1} MB/s ({:.2} s)",
                        r.label, r.backend, r.mb_per_s, r.seconds
                    )
                })
                .collect();
            sections.push(Section {
                title: FS_TITLE.into(),
                note: rows.join("; "),
                results: &[],
                rows: Vec::new(),
                cols: Vec::new(),
            });
        }
        sections.push(Section {
            title: "Cells far from the model".into(),
            note: outliers,
            results: &[],
            rows: Vec::new(),
            cols: Vec::new(),
        });
        let intro = format!(
            "{} ({:.0} s; host CPU stolen by the hypervisor: {}). {}",
            self.description,
            self.elapsed_s,
            self.steal_pct
                .map_or("unknown".into(), |s| format!("{s:.1} %")),
            self.notes.join(" ")
        );
        crate::report::html(
            &format!("ironlun reproduce {}", self.reproduction),
            &intro,
            &sections,
        )
    }
}

/// Heading of the file-system rows, wherever they appear.
const FS_TITLE: &str = "Through ext4 on the Linux kernel initiator in an emulated VM (QEMU; guest clock; bounded by the emulation, not the target)";

/// The file-system rows on `luns` when the VM may run; otherwise the note
/// that says why they are missing.
fn vm_fs_rows(
    opts: &ReproduceOptions,
    luns: &[(&str, String)],
    plan: &FsPlan,
    progress: Progress<'_>,
) -> Result<(Vec<FsRow>, Option<String>), String> {
    match fs_rows::should_run(opts.vm)? {
        false if opts.vm == VmMode::Off => Ok((
            Vec::new(),
            Some("The file-system rows were not run (--vm off).".into()),
        )),
        false => Ok((
            Vec::new(),
            Some("The file-system rows need qemu-system-x86_64 (Debian package qemu-system-x86) for the kernel-initiator VM: not installed, so not run.".into()),
        )),
        true => {
            let rows = fs_rows::run(luns, plan, &mut |m| progress(m))?;
            Ok((rows, None))
        }
    }
}

/// A file LUN of `size` bytes for the VM rows, in the lab's directory.
fn fs_file_lun(opts: &ReproduceOptions, tag: &str, size: u64, direct: bool) -> String {
    format!(
        "file:{},size={size}{}",
        opts.lab
            .dir
            .join(format!("ironlun-fs-{}-{tag}.img", std::process::id()))
            .display(),
        if direct { ",direct" } else { "" }
    )
}

/// Why a cell may be far from its model (a reading of the evidence, not
/// a proof).
fn explain(c: &CellResult, error: f64) -> &'static str {
    let steal = c.measured.steal_pct.unwrap_or(0.0);
    let small = c.cell.bs <= 8192;
    let many = c.cell.qd * c.cell.workers * c.cell.sessions >= 8;
    if steal >= DISTURBED_STEAL_PCT {
        "the hypervisor stole CPU time during the cell, disturbing its timing"
    } else if error < 0.0 && small && many {
        "host-bound: many small commands keep both cores busy (initiator, target and the relay pacing every delivery); the model's host rate is measured through an unpaced relay and overstates it"
    } else if small && c.cell.qd == 1 {
        "per-command host time dominates; the model's t0 comes from a 0.3 s calibration run whose median response time varies from run to run on this machine"
    } else {
        "not explained by host steal or host-bound small requests"
    }
}

/// Progress lines: (what is running).
pub type Progress<'a> = &'a mut dyn FnMut(&str);

fn tcp_baseline(
    rtts_ms: &[f64],
    windows: &[u32],
    rate: u64,
    time: Duration,
    repeat: usize,
) -> Result<Vec<TcpCell>, String> {
    let server = tcpbench::LocalServer::start(None).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for &rtt in rtts_ms {
        for &w in windows {
            let mut spec = LinkSpec::with_rtt(Duration::from_secs_f64(rtt / 1e3));
            spec.rate_bps = Some(rate);
            spec.window = Some(w);
            let relay =
                Relay::start_on_loopback(server.addr(), spec.clone()).map_err(|e| e.to_string())?;
            // The endpoints' buffers are the window too (capped by the
            // kernel's limits); the relay carries it over the emulated
            // delay. The median of `repeat` runs (the published baseline
            // took three).
            let dirs = [Direction::Up, Direction::Down];
            let repeat = u32::try_from(repeat).unwrap_or(u32::MAX);
            let runs =
                tcpbench::measure(relay.addr(), &dirs, 1, time, Some(w), repeat, Some(&spec))?;
            out.extend(runs.into_iter().map(|r| TcpCell {
                rtt_ms: rtt,
                window: w,
                direction: r.direction,
                link_rate: rate,
                measured_mb_per_s: r.mb_per_s,
                model_mb_per_s: r.model_mb_per_s.unwrap_or(0.0),
            }));
        }
    }
    Ok(out)
}

fn sweep_from(text: &str) -> Result<Sweep, String> {
    Sweep::from_file(&SweepFile::parse(text)?)
}

fn run_tables(
    lab: &mut Lab,
    sweeps: &[(String, Sweep)],
    opts: &ReproduceOptions,
    started: Instant,
    progress: Progress<'_>,
) -> Result<Vec<Table>, String> {
    let mut all_cells = Vec::new();
    for (_, s) in sweeps {
        all_cells.extend(s.cells()?);
    }
    progress("calibrating host costs on loopback");
    let cal: Calibration = lab.calibrate(&all_cells, Duration::from_millis(300))?;
    let mut tables = Vec::new();
    for (title, s) in sweeps {
        let mut s = s.clone();
        s.time = opts.cell_time;
        progress(title);
        let cells = sweep::run(&s, lab, Some(&cal), &mut |_, _, _| {})?;
        tables.push(Table {
            title: title.clone(),
            rows: s.rows.clone(),
            cols: s.cols.clone(),
            cells,
        });
    }
    remeasure_stolen(lab, &mut tables, opts, started, progress)?;
    Ok(tables)
}

/// Measures again the cells during which the hypervisor stole CPU, most
/// stolen first, while the reproduction is inside its time budget; each
/// keeps the run with the least steal (chosen by steal, not by result).
fn remeasure_stolen(
    lab: &mut Lab,
    tables: &mut [Table],
    opts: &ReproduceOptions,
    started: Instant,
    progress: Progress<'_>,
) -> Result<(), String> {
    let mut stolen: Vec<(f64, usize, usize)> = Vec::new();
    for (t, table) in tables.iter().enumerate() {
        for (c, r) in table.cells.iter().enumerate() {
            let steal = r.measured.steal_pct.unwrap_or(0.0);
            if steal >= DISTURBED_STEAL_PCT {
                stolen.push((steal, t, c));
            }
        }
    }
    if stolen.is_empty() {
        return Ok(());
    }
    stolen.sort_by(|a, b| b.0.total_cmp(&a.0));
    progress(&format!(
        "{} cells ran while the hypervisor stole CPU; measuring them again{}",
        stolen.len(),
        if opts.budget.is_some() {
            " while time allows"
        } else {
            ""
        }
    ));
    let mut again = 0usize;
    for (_, t, c) in stolen {
        let Some(r) = tables.get_mut(t).and_then(|tb| tb.cells.get_mut(c)) else {
            continue;
        };
        let (time, ramp) = sweep::cell_time(opts.cell_time, &r.cell, r.model.as_ref());
        // Set-up and drain cost about a ramp's worth on top.
        let cost = time + ramp * 2;
        if opts.budget.is_some_and(|b| started.elapsed() + cost > b) {
            continue;
        }
        let m = lab.run(&r.cell, time, ramp, false)?;
        r.remeasured(m);
        again += 1;
    }
    lab.close();
    progress(&format!("measured {again} cells again"));
    Ok(())
}

fn wan_tuning(opts: &ReproduceOptions, progress: Progress<'_>) -> Result<Reproduction, String> {
    let started = Instant::now();
    progress("TCP baseline: 64 KiB and 10 MB windows at 155 Mbit/s");
    let tcp = tcp_baseline(
        &[0.0, 2.0, 10.0, 50.0],
        &[65536, 10_000_000],
        155_000_000,
        opts.tcp_time,
        1,
    )?;
    let mut sweeps = Vec::new();
    for (op, label) in [
        ("solicited-write", "most-solicited writes (InitialR2T=Yes, ImmediateData=No)"),
        ("unsolicited-write", "most-unsolicited writes (InitialR2T=No, ImmediateData=Yes, FirstBurstLength >= request)"),
        ("read", "reads"),
    ] {
        let wan = sweep_from(&format!(
            r#"rows = ["bs"]
               cols = ["rtt", "qd"]
               [base]
               op = "{op}"
               link_rate = "155Mbit"
               tcp_window = "10MB"
               [axes]
               bs = ["1KiB", "8KiB", "64KiB", "256KiB"]
               rtt = ["0ms", "2ms", "10ms", "50ms"]
               qd = [1, 32]"#
        ))?;
        sweeps.push((format!("155 Mbit/s: {label}"), wan));
    }
    for (op, label) in [
        ("solicited-write", "solicited writes"),
        ("unsolicited-write", "unsolicited writes"),
        ("read", "reads"),
    ] {
        let lan = sweep_from(&format!(
            r#"rows = ["bs"]
               cols = ["qd"]
               [base]
               op = "{op}"
               link_rate = "1Gbit"
               tcp_window = "10MB"
               [axes]
               bs = ["1KiB", "8KiB", "64KiB", "256KiB"]
               qd = [1, 32]"#
        ))?;
        sweeps.push((format!("1 Gbit/s LAN, no added delay: {label}"), lan));
    }
    // The LAN tables run first, right after calibration: at 1 Gbit/s
    // with no delay their queue-depth-1 cells are almost all host time,
    // so they are the ones a drift of the host's speed between
    // calibration and measurement would move. Printed in the study's
    // order.
    let lan = sweeps.split_off(3);
    let lan_tables = lan.len();
    let sweeps: Vec<_> = lan.into_iter().chain(sweeps).collect();
    let mut lab = Lab::new(opts.lab.clone())?;
    let mut tables = run_tables(&mut lab, &sweeps, opts, started, progress)?;
    tables.rotate_left(lan_tables);
    Ok(Reproduction {
        reproduction: "wan-tuning".into(),
        description: NAMES[0].1.into(),
        elapsed_s: started.elapsed().as_secs_f64(),
        steal_pct: None,
        tcp,
        tables,
        workloads: Vec::new(),
        fs_rows: Vec::new(),
        notes: vec![
            "The link is ironlun's netem relay (no netem qdisc on this kernel): the rate and one-way delays are emulated in userspace and the TCP window is carried by the relay's credit loop, because a relay terminates TCP.".into(),
            "The command window is the queue depth the initiator keeps outstanding (the target's MaxCmdSN credit is larger). RAM LUN: reads and writes are served from memory, as the study's cached target.".into(),
            "Model: per command t0 (host time at queue depth 1 on loopback through the relay) + round trips (1, or 2 when the write waits for an R2T) x RTT + wire bytes / rate; throughput = min(window x size / cycle, link rate less PDU headers, TCP window / RTT, host rate measured on loopback).".into(),
        ],
    })
}

/// Runs a reproduction by name.
pub fn run(
    name: &str,
    opts: &ReproduceOptions,
    progress: Progress<'_>,
) -> Result<Reproduction, String> {
    let before = ironlun_bench::cpu::HostCpu::sample();
    let mut r = match name {
        "wan-tuning" => wan_tuning(opts, progress)?,
        "target-backends" => target_backends(opts, progress)?,
        "ramdisk-target" => ramdisk_target(opts, progress)?,
        "app-profiles" => app_profiles(opts, progress)?,
        _ => {
            return Err(format!(
                "unknown reproduction '{name}' (one of: {})",
                NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ))
        }
    };
    r.steal_pct = match (before, ironlun_bench::cpu::HostCpu::sample()) {
        (Some(a), Some(b)) => a.steal_pct(&b),
        _ => None,
    };
    Ok(r)
}

fn profile(name: &str, time: Duration) -> Result<ironlun_bench::Workload, String> {
    let mut w = ironlun_bench::profiles::find(name).ok_or_else(|| format!("no profile {name}"))?;
    w.time_s = time.as_secs_f64();
    w.ramp_s = (time.as_secs_f64() / 4.0).min(1.0);
    Ok(w)
}

fn target_backends(
    opts: &ReproduceOptions,
    progress: Progress<'_>,
) -> Result<Reproduction, String> {
    let started = Instant::now();
    let mut lab = Lab::new(opts.lab.clone())?;
    let seq = sweep_from(
        r#"rows = ["backend"]
           cols = ["op"]
           [base]
           bs = "512KiB"
           qd = 1
           link_rate = "1Gbit"
           tcp_window = "4MB"
           [axes]
           backend = ["null", "file", "file-direct"]
           op = ["read", "write"]"#,
    )?;
    let db = sweep_from(
        r#"rows = ["backend"]
           cols = ["workers"]
           [base]
           op = "write"
           bs = "4KiB"
           read = 70
           random = 90
           qd = 1
           workers = 2
           link_rate = "1Gbit"
           [axes]
           backend = ["null", "file", "file-direct"]"#,
    )?;
    let mpio = sweep_from(
        r#"rows = ["sessions"]
           cols = ["op"]
           [base]
           op = "read"
           bs = "512KiB"
           qd = 8
           link_rate = "100Mbit"
           backend = "file"
           [axes]
           sessions = [1, 2]"#,
    )?;
    let sweeps = vec![
        (
            "dd-style sequential 512 KiB, queue depth 1, 1 Gbit/s (MB/s)".to_owned(),
            seq,
        ),
        (
            "database-like: 4 KiB, 90 % random, 70 % read, two workers, 1 Gbit/s".to_owned(),
            db,
        ),
        (
            "MPIO: sequential read over one or two 100 Mbit/s paths".to_owned(),
            mpio,
        ),
    ];
    let tables = run_tables(&mut lab, &sweeps, opts, started, progress)?;
    lab.close();
    drop(lab);
    // Tests 3 and 4: a file read and written through ext4 on the kernel
    // initiator, on the file and file-direct backends (a null LUN holds no
    // file system).
    let plan = FsPlan {
        copy_scale: 0,
        ..opts.fs.clone()
    };
    let size = fs_rows::lun_size_for(&plan);
    let luns = [
        ("file", fs_file_lun(opts, "file", size, false)),
        ("file-direct", fs_file_lun(opts, "direct", size, true)),
    ];
    let fs = vm_fs_rows(opts, &luns, &plan, progress);
    for (_, spec) in &luns {
        if let Some(path) = spec.strip_prefix("file:").and_then(|s| s.split(',').next()) {
            let _ = std::fs::remove_file(path);
        }
    }
    let (fs_rows, fs_note) = fs?;
    let mut notes = vec![
        format!("NULLIO is ironlun's null backend. FILEIO is a file LUN through the page cache; the study limited the target's memory so the cache could not hold the data, which a process cannot do to itself here, so BLOCKIO is stood in for by the same file opened with O_DIRECT (no spare block device on this machine). The LUN is {}, not 5 GB.", format_size(opts.lab.lun_size)),
    ];
    notes.extend(fs_note);
    if !fs_rows.is_empty() {
        notes.push(format!("Tests 3 and 4 ran through ext4 on the Linux kernel initiator (open-iscsi) in a QEMU VM, {} MiB file{}; under software emulation the guest CPU, not the target, bounds them.", plan.file_mb, if plan.file_mb == 1000 { "" } else { " (1000 MiB with --full)" }));
    }
    notes.push("The database-like test reports throughput over a fixed time rather than the total time of a fixed job.".into());
    Ok(Reproduction {
        reproduction: "target-backends".into(),
        description: NAMES[1].1.into(),
        elapsed_s: started.elapsed().as_secs_f64(),
        steal_pct: None,
        tcp: Vec::new(),
        tables,
        workloads: Vec::new(),
        fs_rows,
        notes,
    })
}

fn ramdisk_target(opts: &ReproduceOptions, progress: Progress<'_>) -> Result<Reproduction, String> {
    let started = Instant::now();
    progress("TCP baseline: windows 8, 64, 128, 512 KiB over 1 Gbit/s, 0.2 ms RTT, median of 3");
    let tcp = tcp_baseline(
        &[0.2],
        &[8192, 65536, 131_072, 524_288],
        1_000_000_000,
        opts.tcp_time / 2,
        3,
    )?;
    let mut lab = Lab::new(opts.lab.clone())?;
    let time = opts.cell_time * 3;
    let base = Cell {
        op: Op::Write,
        rtt: Duration::from_micros(200),
        link_rate: Some(1_000_000_000),
        ..Cell::default()
    };
    let scenarios = [
        ("notweaks: defaults", base.clone()),
        (
            "iSCSI tweaks: FirstBurstLength 256 KiB, MaxRecvDataSegmentLength 256 KiB, MaxBurstLength 512 KiB",
            Cell {
                first_burst: Some(262_144),
                max_recv_dsl: Some(262_144),
                max_burst: Some(524_288),
                ..base.clone()
            },
        ),
        (
            "TCP + iSCSI tweaks: the above plus a 512 KiB TCP window",
            Cell {
                first_burst: Some(262_144),
                max_recv_dsl: Some(262_144),
                max_burst: Some(524_288),
                tcp_window: Some(524_288),
                ..base.clone()
            },
        ),
    ];
    progress("calibrating host time per command on loopback");
    let host = lab.calibrate_line(&base, Duration::from_millis(300))?;
    let mut workloads = Vec::new();
    for (title, cell) in &scenarios {
        progress(title);
        let (mut results, mut models, mut steals) = (Vec::new(), Vec::new(), Vec::new());
        for name in ["file-server", "file-server-50"] {
            let w = profile(name, time)?;
            let (r, steal) = lab.run_workload(cell, &w, false)?;
            models.push(predict_mix(&w, cell, Some(&host)));
            results.push(r);
            steals.push(steal);
        }
        workloads.push(WorkloadSet {
            title: format!("file-server mix, {title}"),
            results,
            models,
            steal_pct: steals,
        });
    }
    progress("64 KiB disk-benchmark tests");
    let (mut disk, mut disk_models, mut disk_steal) = (Vec::new(), Vec::new(), Vec::new());
    for w in ironlun_bench::profiles::group("disk-tests").unwrap_or_default() {
        let mut w = w;
        // A zone test ends when it has swept the whole LUN.
        w.time_s = if w.zones.is_some() {
            120.0
        } else {
            time.as_secs_f64()
        };
        w.ramp_s = if w.zones.is_some() { 0.0 } else { 0.2 };
        let (r, steal) = lab.run_workload(&base, &w, false)?;
        disk_models.push(predict_mix(&w, &base, Some(&host)));
        disk.push(r);
        disk_steal.push(steal);
    }
    workloads.push(WorkloadSet {
        title: "disk-benchmark style tests, 64 KiB".into(),
        results: disk,
        models: disk_models,
        steal_pct: disk_steal,
    });
    progress("two paths, then one pulled mid-run");
    let two = Cell {
        sessions: 2,
        ..base.clone()
    };
    let fs = profile("file-server", time * 2)?;
    let (both, both_steal) = lab.run_workload(&two, &fs, false)?;
    let both_model = predict_mix(&fs, &two, Some(&host));
    lab.close();
    lab.prepare(&two)?;
    lab.cut_path_after(0, time)?;
    let (mut pulled, pulled_steal) = lab.run_workload(&two, &fs, false)?;
    pulled.name = format!(
        "{} (path 0 pulled after {:.1} s)",
        pulled.name,
        time.as_secs_f64()
    );
    workloads.push(WorkloadSet {
        title: "link aggregation: two paths, and one pulled mid-run".into(),
        results: vec![both, pulled],
        // A pulled path has no steady state to model.
        models: vec![both_model, None],
        steal_pct: vec![both_steal, pulled_steal],
    });
    lab.close();
    drop(lab);
    // The file copies through ext4 on the kernel initiator, on a RAM LUN.
    let plan = FsPlan {
        file_mb: 0,
        ..opts.fs.clone()
    };
    let luns = [("ram", format!("ram:{}", fs_rows::lun_size_for(&plan)))];
    let (fs_rows, fs_note) = vm_fs_rows(opts, &luns, &plan, progress)?;
    Ok(Reproduction {
        reproduction: "ramdisk-target".into(),
        description: NAMES[2].1.into(),
        elapsed_s: started.elapsed().as_secs_f64(),
        steal_pct: None,
        tcp,
        tables: Vec::new(),
        workloads,
        fs_rows,
        notes: vec![
            format!("The RAM LUN is {}, not 2 GB. The link is 1 Gbit/s with a 0.2 ms round trip, emulated by ironlun's relay.", format_size(opts.lab.lun_size)),
            "Model of a workload (a mix of sizes): per command, mean over the mix of host time (a line in the request size through 4 KiB and 256 KiB runs at queue depth 1, per direction) + round trips x RTT + wire bytes / rate, at least a line's transfer delay; throughput = the least of outstanding commands x mean size / mean cycle, the link rate in the busier direction, the TCP window per round trip and any rate limit. It has no host-rate bound (a mix's host limit is not calibrated), and none for the run with a pulled path.".into(),
            "Delayed ACK, window scaling and SACK are the kernel's (loopback TCP between the relay and each end); the TCP window is set on the sockets and carried by the relay.".into(),
            "Link aggregation is two iSCSI sessions (multipath, round-robin) over two emulated links rather than NIC teaming; pulling a link cuts one relay.".into(),
            fs_note.unwrap_or_else(|| format!("The file copies ran through ext4 on the Linux kernel initiator (open-iscsi) in a QEMU VM on a RAM LUN of its own, with no emulated link{}; under software emulation the guest CPU, not the target, bounds them.", if plan.copy_scale > 1 { format!(", at 1/{} of the published sizes (--full runs them whole)", plan.copy_scale) } else { String::new() })),
        ],
    })
}

fn app_profiles(opts: &ReproduceOptions, progress: Progress<'_>) -> Result<Reproduction, String> {
    let started = Instant::now();
    let mut lab = Lab::new(opts.lab.clone())?;
    let cell = Cell::default();
    let mut results = Vec::new();
    for w in ironlun_bench::profiles::group("app-profiles").unwrap_or_default() {
        progress(&w.name);
        let mut w = w;
        w.time_s = opts.profile_time.as_secs_f64();
        w.ramp_s = opts.profile_ramp.as_secs_f64();
        // Three runs; the one with the median IOPS is reported.
        let mut runs = Vec::new();
        for _ in 0..3 {
            runs.push(lab.run_workload(&cell, &w, false)?.0);
        }
        results.extend(ironlun_bench::result::median_by_iops(runs));
    }
    lab.close();
    Ok(Reproduction {
        reproduction: "app-profiles".into(),
        description: NAMES[3].1.into(),
        elapsed_s: started.elapsed().as_secs_f64(),
        steal_pct: None,
        tcp: Vec::new(),
        tables: Vec::new(),
        workloads: vec![WorkloadSet::measured(
            "twelve application access specifications (median of 3 runs)".into(),
            results,
        )],
        fs_rows: Vec::new(),
        notes: vec![
            format!("One LUN ({} RAM, embedded target on loopback) instead of four 4 GiB targets; run time and ramp are short (settable with --time). Host CPU % is IOMeter's whole-host figure; on this 2-core machine it includes the embedded target, so the published 8 % line is not comparable as is: target CPU is reported separately.", format_size(opts.lab.lun_size)),
        ],
    })
}
