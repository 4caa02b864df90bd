//! The initiator study's own question (section 1): how much host CPU a
//! software initiator spends per I/O, judged by the study's CPU line.
//!
//! **Owns:** which initiators run which access specifications (`plan`),
//! the figures derived from CPU time and rate on the study's host scale
//! ([`Line`]), the published initiators' rows (offload adapters shown as
//! published only), the verdict of each row, and the table. Software
//! initiators run here as separate programs, ironlun's (`ironlun bench`)
//! and libiscsi's (`iscsi-perf`), against the same embedded target through
//! the same relay, with their CPU read from /proc by ironlun-compare's
//! client runners. The Linux kernel initiator runs fio in the QEMU VM
//! through the same relay (`kernel`), its CPU an estimate from the
//! guest's under emulation.
//!
//! **Must not know:** how a client is started or its output parsed
//! (`ironlun_compare::clients`), or how the published file is read.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use ironlun_bench::Workload;
use ironlun_compare::clients::{self, RunCtx, Sample, Shape};

use crate::cell::Cell;
use crate::fs_rows::VmMode;
use crate::published::{Metric, StudyFile};
use crate::runner::Lab;

/// The published file's name of the study's CPU line.
const LINE: &str = "cpu-line";
/// The condition key of the published initiator columns.
const KEY: &str = "initiator";
/// A specification with at most this share of writes runs on iscsi-perf
/// as all reads (a stated deviation); one with more cannot run on it.
const MAX_WRITES_AS_READS: u32 = 5;
/// The specifications of the quick slice: large reads both clients run
/// as specified, small mostly-read I/O iscsi-perf runs as all reads, and
/// a write-only spec it cannot run.
pub const QUICK: [&str; 3] = ["dss-1m", "web-file-server-4k", "sql-server-log-64k"];

/// Which specifications the comparison runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    All,
    Quick,
    Off,
}

impl Which {
    pub fn parse(s: &str) -> Result<Which, String> {
        match s {
            "all" => Ok(Which::All),
            "quick" => Ok(Which::Quick),
            "off" => Ok(Which::Off),
            o => Err(format!("--initiators {o}: all, quick or off")),
        }
    }

    /// This slice, no wider than `outer` (the kernel initiator's within
    /// the comparison's).
    pub fn within(self, outer: Which) -> Which {
        match (self, outer) {
            (_, Which::Off) | (Which::Off, _) => Which::Off,
            (Which::All, Which::All) => Which::All,
            _ => Which::Quick,
        }
    }

    fn takes(self, spec: &str) -> bool {
        match self {
            Which::All => true,
            Which::Quick => QUICK.contains(&spec),
            Which::Off => false,
        }
    }
}

/// How the comparison runs.
#[derive(Clone, Debug)]
pub struct InitiatorOptions {
    pub which: Which,
    /// Measured time per client run (after a one-second warm-up).
    pub time: Duration,
    /// Which specifications the Linux kernel initiator runs in the VM
    /// (booted when `--vm` allows).
    pub kernel: Which,
}

/// One access specification as the study gave it.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    pub name: String,
    pub size: u32,
    pub read_pct: u32,
    pub random_pct: u32,
    pub qd: u32,
}

impl Spec {
    /// A one-line workload (each of the study's specifications is one).
    pub fn of(w: &Workload) -> Option<Spec> {
        match w.lines.as_slice() {
            [l] => Some(Spec {
                name: w.name.clone(),
                size: l.size,
                read_pct: l.read,
                random_pct: l.random,
                qd: w.queue_depth,
            }),
            _ => None,
        }
    }
}

/// The software initiators this lab runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Client {
    Ironlun,
    Libiscsi,
}

impl Client {
    pub const ALL: [Client; 2] = [Client::Ironlun, Client::Libiscsi];

    pub fn name(self) -> &'static str {
        match self {
            Client::Ironlun => "ironlun bench",
            Client::Libiscsi => "libiscsi iscsi-perf",
        }
    }
}

/// How a client runs a specification.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// As specified.
    Exact,
    /// With the stated differences (`shape`: what it runs instead).
    Deviates { shape: Shape, how: String },
    /// Not at all, and why.
    Cannot(String),
}

/// What `client` runs for `spec`. `ironlun bench` runs the study's
/// profile itself (its mix, random share, queue depth, sector-aligned
/// offsets). iscsi-perf (libiscsi 1.19, "version 0.1") issues reads of
/// one size at one queue depth, all sequential or all random: a spec
/// that is all reads runs as given (its random share rounded to all or
/// none), one with at most `MAX_WRITES_AS_READS` % writes runs as all
/// reads, one with more cannot run.
pub fn plan(client: Client, spec: &Spec) -> Plan {
    if client == Client::Ironlun {
        return Plan::Exact;
    }
    let writes = 100u32.saturating_sub(spec.read_pct);
    if writes > MAX_WRITES_AS_READS {
        return Plan::Cannot(format!(
            "iscsi-perf only reads; the spec is {writes} % writes"
        ));
    }
    let shape = perf_shape(spec);
    let random = shape.random;
    let mut how = Vec::new();
    if writes > 0 {
        how.push(format!("all reads (spec: {} % reads)", spec.read_pct));
    }
    if spec.random_pct != 0 && spec.random_pct != 100 {
        how.push(format!(
            "all {} (spec: {} % random)",
            if random { "random" } else { "sequential" },
            spec.random_pct
        ));
    }
    if how.is_empty() {
        Plan::Exact
    } else {
        Plan::Deviates {
            shape,
            how: how.join(", "),
        }
    }
}

/// What iscsi-perf runs for `spec`: its size and queue depth, reads, all
/// random when the spec is mostly random.
fn perf_shape(spec: &Spec) -> Shape {
    Shape {
        block_size: spec.size,
        read: true,
        random: spec.random_pct >= 50,
        queue_depth: spec.qd,
        align: None,
    }
}

/// The study's CPU line on the study's host: a CPU % is of all its
/// CPUs, averaged, at the rate the workload ran.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Line {
    pub pct: f64,
    pub host_cpus: f64,
}

/// A row against the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// At or below: a software initiator is acceptable.
    Under,
    /// Above: the study recommends an offload HBA.
    Over,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Under => "under",
            Verdict::Over => "OVER",
        }
    }
}

impl Line {
    /// The host CPU % that `us_per_io` µs of CPU per I/O costs at `iops`.
    pub fn host_pct(&self, us_per_io: f64, iops: f64) -> f64 {
        us_per_io * iops / (self.host_cpus * 1e6) * 100.0
    }

    /// CPU µs per I/O from a host CPU % at `iops`.
    pub fn us_per_io(&self, host_pct: f64, iops: f64) -> Option<f64> {
        (iops > 0.0).then(|| host_pct / 100.0 * self.host_cpus * 1e6 / iops)
    }

    /// I/Os per second per percent of the host's CPU, from CPU per I/O.
    pub fn iops_per_pct(&self, us_per_io: f64) -> Option<f64> {
        (us_per_io > 0.0).then(|| self.host_cpus * 1e6 / (100.0 * us_per_io))
    }

    pub fn verdict(&self, host_pct: f64) -> Verdict {
        if host_pct <= self.pct {
            Verdict::Under
        } else {
            Verdict::Over
        }
    }
}

/// One row: a published initiator's or a measured one's figures for one
/// specification. CPU figures are on the study host's scale.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    pub spec: String,
    /// The published column's value, or the client's name.
    pub initiator: String,
    /// "published" or "measured".
    pub source: &'static str,
    /// Whether this lab has the row's hardware.
    pub in_lab: bool,
    /// How the spec ran ("as specified" or the differences).
    pub runs_as: String,
    /// Why it did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cannot: Option<String>,
    pub iops: Option<f64>,
    /// CPU µs per I/O (published rows: derived from their IOPS and CPU %).
    pub cpu_us_per_io: Option<f64>,
    /// IOPS per % of the study host's CPU.
    pub iops_per_cpu_pct: Option<f64>,
    /// Host CPU % at the spec's published software-initiator rate on the
    /// study's host (published rows: as published).
    pub cpu_pct: Option<f64>,
    /// Measured rows: the client's share of this machine's CPUs at the
    /// rate it ran here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub this_host_cpu_pct: Option<f64>,
    /// Measured rows: the embedded target's and the relay's CPU per I/O.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_cpu_us_per_io: Option<f64>,
    pub verdict: Option<Verdict>,
    /// The CPU figures (and so the verdict) are an estimate: the kernel
    /// initiator's guest CPU under emulation over the calibrated slowdown.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimate: bool,
    /// Estimated rows: the guest's CPU µs per I/O as measured in the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_cpu_us_per_io: Option<f64>,
    /// Estimated rows: what `raw_cpu_us_per_io` was divided by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulation_slowdown: Option<f64>,
    /// Estimated rows: the guest's CPUs' busy share over the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_cpu_pct: Option<f64>,
}

/// The comparison's result.
#[derive(Clone, Debug, Serialize)]
pub struct InitiatorStudy {
    pub line: Line,
    pub time_s: f64,
    /// Published column → (label, why), for the legend.
    pub columns: Vec<(String, String, String)>,
    pub rows: Vec<Row>,
    /// The kernel initiator's calibration, when the VM ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_calibration: Option<kernel::Calibration>,
    /// Why the kernel initiator has no rows, when it was not asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_not_run: Option<String>,
}

/// The study's line from the published file.
pub fn line(file: &StudyFile) -> Result<Line, String> {
    let t = file
        .threshold(LINE)
        .ok_or("the published file has no cpu-line threshold")?;
    Ok(Line {
        pct: t.value,
        host_cpus: f64::from(t.host_cpus.ok_or("cpu-line: no host_cpus")?),
    })
}

/// A published value of `spec` for `column` in the metric's canonical
/// unit.
fn published(file: &StudyFile, spec: &str, column: &str, metric: Metric) -> Option<f64> {
    file.cell
        .iter()
        .find(|c| {
            c.metric == metric
                && c.conditions.get("spec").map(String::as_str) == Some(spec)
                && c.conditions.get(KEY).map(String::as_str) == Some(column)
        })
        .and_then(|c| c.canonical())
}

/// A published column's IOPS for `spec`: its IOPS, or its MB/s over the
/// transfer size for the large-transfer specs published in MB/s.
fn published_iops(file: &StudyFile, spec: &Spec, column: &str) -> Option<f64> {
    published(file, &spec.name, column, Metric::Iops).or_else(|| {
        published(file, &spec.name, column, Metric::Throughput)
            .map(|mb| mb * 1e6 / f64::from(spec.size))
    })
}

/// The rate the study's software initiator (the column the lab has)
/// carried `spec` at.
pub fn study_rate(file: &StudyFile, spec: &Spec) -> Option<f64> {
    let col = file.column.iter().find(|c| c.key == KEY && c.in_lab)?;
    published_iops(file, spec, &col.value)
}

/// Every published initiator's row for `spec`.
pub fn published_rows(file: &StudyFile, line: &Line, spec: &Spec) -> Vec<Row> {
    let mut out = Vec::new();
    for col in file.column.iter().filter(|c| c.key == KEY) {
        let iops = published_iops(file, spec, &col.value);
        let cpu = published(file, &spec.name, &col.value, Metric::Cpu);
        let Some((iops, cpu)) = iops.zip(cpu) else {
            continue;
        };
        let us = line.us_per_io(cpu, iops);
        out.push(Row {
            spec: spec.name.clone(),
            initiator: col.value.clone(),
            source: "published",
            in_lab: col.in_lab,
            runs_as: "as published".into(),
            iops: Some(iops),
            cpu_us_per_io: us,
            iops_per_cpu_pct: (cpu > 0.0).then(|| iops / cpu),
            cpu_pct: Some(cpu),
            verdict: Some(line.verdict(cpu)),
            ..Row::default()
        });
    }
    out
}

/// A measured row from a client's sample; CPU % at the study's rate
/// when the study published one for the spec.
pub fn measured_row(
    line: &Line,
    spec: &Spec,
    client: Client,
    runs_as: String,
    s: &Sample,
    rate: Option<f64>,
) -> Row {
    let us = s.client_cpu_us_per_io;
    let pct = us.zip(rate).map(|(us, r)| line.host_pct(us, r));
    Row {
        spec: spec.name.clone(),
        initiator: client.name().into(),
        source: "measured",
        in_lab: true,
        runs_as,
        iops: Some(s.iops),
        cpu_us_per_io: us,
        iops_per_cpu_pct: us.and_then(|u| line.iops_per_pct(u)),
        cpu_pct: pct,
        this_host_cpu_pct: s
            .client_cores
            .map(|c| c * 100.0 / ironlun_bench::cpu::cpus() as f64),
        target_cpu_us_per_io: s.target_cpu_us_per_io,
        verdict: pct.map(|p| line.verdict(p)),
        ..Row::default()
    }
}

fn cannot_row(spec: &Spec, client: Client, why: String) -> Row {
    Row {
        spec: spec.name.clone(),
        initiator: client.name().into(),
        source: "measured",
        in_lab: true,
        runs_as: "not run".into(),
        cannot: Some(why),
        ..Row::default()
    }
}

/// What runs the clients: the ironlun binary (this program, when it is
/// the `ironlun` command), a scratch directory, the relay's URL.
struct Runner {
    ctx: RunCtx,
    url: String,
    ironlun: Result<(), String>,
}

impl Runner {
    fn run(&self, client: Client, spec: &Spec, plan: &Plan) -> Result<Sample, String> {
        let pid = std::process::id();
        match (client, plan) {
            (_, Plan::Cannot(why)) => Err(why.clone()),
            (Client::Ironlun, _) => {
                self.ironlun.clone()?;
                clients::bench_profile(&self.ctx, &spec.name, std::slice::from_ref(&self.url), pid)
            }
            (Client::Libiscsi, Plan::Deviates { shape, .. }) => {
                clients::iscsi_perf(&self.ctx, shape, &self.url, pid)
            }
            (Client::Libiscsi, Plan::Exact) => {
                clients::iscsi_perf(&self.ctx, &perf_shape(spec), &self.url, pid)
            }
        }
    }
}

/// Whether this program is the ironlun command (which `ironlun bench`
/// runs as).
fn ironlun_exe() -> (PathBuf, Result<(), String>) {
    match std::env::current_exe() {
        Ok(p) => {
            let ok = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("ironlun"));
            let why = format!(
                "not run from the ironlun command ({}), so `ironlun bench` is not at hand",
                p.display()
            );
            (p, if ok { Ok(()) } else { Err(why) })
        }
        Err(e) => (PathBuf::new(), Err(format!("this program's path: {e}"))),
    }
}

/// Runs the comparison for `specs` through a relay with `cell`'s link;
/// the kernel initiator's rows when `vm` allows the VM.
pub fn run(
    lab: &mut Lab,
    cell: &Cell,
    specs: &[Workload],
    opts: &InitiatorOptions,
    vm: VmMode,
    file: &StudyFile,
    progress: &mut dyn FnMut(&str),
) -> Result<Option<InitiatorStudy>, String> {
    let all: Vec<Spec> = specs.iter().filter_map(Spec::of).collect();
    let specs: Vec<Spec> = all
        .iter()
        .filter(|s| opts.which.takes(&s.name))
        .cloned()
        .collect();
    let kernel_specs: Vec<Spec> = all
        .into_iter()
        .filter(|s| opts.kernel.takes(&s.name))
        .collect();
    if specs.is_empty() && kernel_specs.is_empty() {
        return Ok(None);
    }
    let line = line(file)?;
    let (relay, iqn, lun) = lab.relayed_portal(cell)?;
    let scratch = std::env::temp_dir().join(format!("ironlun-initiators-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let (exe, ironlun) = ironlun_exe();
    let runner = Runner {
        ctx: RunCtx {
            exe,
            measure: opts.time.max(Duration::from_secs(1)),
            scratch: scratch.clone(),
        },
        url: format!("iscsi://{}/{iqn}/{lun}", relay.addr()),
        ironlun,
    };
    let mut rows = Vec::new();
    for spec in &specs {
        rows.extend(published_rows(file, &line, spec));
        let rate = study_rate(file, spec);
        for client in Client::ALL {
            progress(&format!("{} on {}", spec.name, client.name()));
            let p = plan(client, spec);
            let runs_as = match &p {
                Plan::Deviates { how, .. } => how.clone(),
                _ => "as specified".into(),
            };
            rows.push(match runner.run(client, spec, &p) {
                Ok(s) => measured_row(&line, spec, client, runs_as, &s, rate),
                Err(why) => cannot_row(spec, client, why),
            });
        }
    }
    for spec in kernel_specs.iter().filter(|k| !specs.contains(k)) {
        rows.extend(published_rows(file, &line, spec));
    }
    let (kernel_rows, kernel_calibration) = kernel_rows(
        &kernel_specs,
        &kernel::Portal {
            port: relay.addr().port(),
            iqn,
            lun,
        },
        (vm, runner.ctx.measure),
        (file, &line),
        progress,
    );
    for r in kernel_rows {
        insert_after_spec(&mut rows, r);
    }
    drop(relay);
    let _ = std::fs::remove_dir_all(&scratch);
    let columns = file
        .column
        .iter()
        .filter(|c| c.key == KEY)
        .map(|c| (c.value.clone(), c.label.clone(), c.why.clone()))
        .collect();
    Ok(Some(InitiatorStudy {
        line,
        time_s: runner.ctx.measure.as_secs_f64(),
        columns,
        rows,
        kernel_calibration,
        kernel_not_run: (opts.kernel == Which::Off).then(|| KERNEL_OFF.to_owned()),
    }))
}

/// Why the kernel initiator's rows are missing by default.
pub const KERNEL_OFF: &str = "not run; --kernel-initiator quick (three specs) or all (the default with --full) runs fio in the QEMU VM, which under emulation adds about 40 s for the quick slice, past the default run's 3 minutes";

/// Whether the VM may boot, or why not (the rows' reason).
fn vm_allowed(vm: VmMode) -> Result<(), String> {
    match crate::fs_rows::should_run(vm)? {
        true => Ok(()),
        false if vm == VmMode::Off => Err("not run (--vm off)".into()),
        false => Err("qemu-system-x86_64 is not installed (Debian package qemu-system-x86), so the VM cannot run".into()),
    }
}

/// The kernel initiator's rows for `specs` (one VM boot), or a row per
/// spec saying why it did not run; never a number the VM did not give.
fn kernel_rows(
    specs: &[Spec],
    portal: &kernel::Portal,
    (vm, time): (VmMode, Duration),
    (file, line): (&StudyFile, &Line),
    progress: &mut dyn FnMut(&str),
) -> (Vec<Row>, Option<kernel::Calibration>) {
    if specs.is_empty() {
        return (Vec::new(), None);
    }
    let ran = vm_allowed(vm).and_then(|()| kernel::run(specs, portal, time, progress));
    match ran {
        Err(why) => {
            progress(&format!("kernel initiator not run: {why}"));
            let rows = specs.iter().map(|s| kernel::cannot(s, &why)).collect();
            (rows, None)
        }
        Ok(k) => {
            let rows = specs
                .iter()
                .zip(&k.samples)
                .map(|(spec, sample)| match sample {
                    Ok(s) => kernel::row(line, spec, s, &k.calibration, study_rate(file, spec)),
                    Err(why) => kernel::cannot(spec, why),
                })
                .collect();
            (rows, Some(k.calibration))
        }
    }
}

/// Puts `row` after the last row of its spec (at the end when none).
fn insert_after_spec(rows: &mut Vec<Row>, row: Row) {
    let at = rows
        .iter()
        .rposition(|r| r.spec == row.spec)
        .map_or(rows.len(), |i| i + 1);
    rows.insert(at, row);
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

impl InitiatorStudy {
    /// The table's heading.
    pub fn title(&self) -> String {
        format!(
            "Initiator CPU against the study's {} % line (CPU % of a {}-CPU host like the study's, at the spec's published rate; CPU per I/O is this machine's, so indicative only)",
            self.line.pct, self.line.host_cpus
        )
    }

    /// The rows in a paragraph (for the HTML report).
    pub fn summary(&self) -> String {
        let rows: Vec<String> = self
            .rows
            .iter()
            .map(|r| match &r.cannot {
                Some(why) => format!("{} on {}: not run ({why})", r.spec, r.initiator),
                None if r.estimate => format!(
                    "{} on {}: an estimate under emulation, {} us CPU per I/O ({} us measured in the guest over a slowdown of {}), {} % at the study's rate, {} (from the estimate)",
                    r.spec,
                    r.initiator,
                    opt(r.cpu_us_per_io, 1),
                    opt(r.raw_cpu_us_per_io, 1),
                    opt(r.emulation_slowdown, 1),
                    opt(r.cpu_pct, 2),
                    r.verdict.map_or("no verdict", Verdict::text)
                ),
                None => format!(
                    "{} on {}{}: {} us CPU per I/O, {} % at the study's rate, {}",
                    r.spec,
                    r.initiator,
                    if r.in_lab {
                        ""
                    } else {
                        " (published only: hardware this lab does not have)"
                    },
                    opt(r.cpu_us_per_io, 1),
                    opt(r.cpu_pct, 2),
                    r.verdict.map_or("no verdict", Verdict::text)
                ),
            })
            .collect();
        let mut s = rows.join("; ");
        if self.rows.iter().any(|r| r.estimate) {
            s.push_str(&format!(". {}", self.kernel_legend().trim()));
        }
        if let Some(n) = &self.kernel_not_run {
            s.push_str(&format!(". {}: {n}", kernel::NAME));
        }
        s
    }

    /// The table as printed.
    pub fn text(&self) -> String {
        let l = &self.line;
        let mut s = format!("\n{}\n", self.title());
        s.push_str(&format!(
            "{:<22} {:<20} {:<9} {:>10} {:>9} {:>10} {:>7} {:>6} {:>8}  {}\n",
            "spec",
            "initiator",
            "source",
            "IOPS",
            "CPU us/IO",
            "IOPS/CPU%",
            "CPU %",
            "line",
            "here %",
            "runs as"
        ));
        for r in &self.rows {
            let source = if r.in_lab { r.source } else { "pub-only" };
            let how = match &r.cannot {
                Some(why) => format!("not run: {why}"),
                None if r.estimate => format!(
                    "{} (guest: {} us/IO, {} % busy)",
                    r.runs_as,
                    opt(r.raw_cpu_us_per_io, 1),
                    opt(r.guest_cpu_pct, 0)
                ),
                None => r.runs_as.clone(),
            };
            let verdict = match r.verdict {
                Some(v) if r.estimate => format!("{}*", v.text()),
                Some(v) => v.text().to_owned(),
                None => "-".to_owned(),
            };
            s.push_str(&format!(
                "{:<22} {:<20} {:<9} {:>10} {:>9} {:>10} {:>7} {:>6} {:>8}  {}\n",
                r.spec,
                r.initiator,
                source,
                opt(r.iops, 0),
                opt(r.cpu_us_per_io, 1),
                opt(r.iops_per_cpu_pct, 0),
                opt(r.cpu_pct, 2),
                verdict,
                opt(r.this_host_cpu_pct, 1),
                how
            ));
        }
        for (value, label, why) in &self.columns {
            s.push_str(&format!("  {value}: {label} ({why})\n"));
        }
        s.push_str(&format!(
            "  pub-only: published only, no value measured or modelled for it. Measured rows: each client a separate program against the embedded target through the profile's relay, {:.0} s measured after 1 s of warm-up; CPU % is the client's CPU per I/O at the study's rate on {} CPUs; 'here %' its share of this machine's {} CPUs at the rate it ran here (target and relay excluded; shared machine, numbers indicative).\n",
            self.time_s,
            l.host_cpus,
            ironlun_bench::cpu::cpus()
        ));
        if self.rows.iter().any(|r| r.estimate) {
            s.push_str(&self.kernel_legend());
        }
        if let Some(n) = &self.kernel_not_run {
            s.push_str(&format!("  {}: {n}\n", kernel::NAME));
        }
        s
    }

    /// What the kernel initiator's rows are and how their estimate is
    /// made.
    fn kernel_legend(&self) -> String {
        let cal = match &self.kernel_calibration {
            Some(c) => {
                let works: Vec<String> = c
                    .works
                    .iter()
                    .map(|w| {
                        format!(
                            "{} (fio {}): {:.1} MiB/s in the guest, {:.1} on this host, {}",
                            w.work,
                            w.fio,
                            w.guest_mib_s,
                            w.host_mib_s,
                            w.slowdown
                                .map_or("no slowdown".into(), |f| format!("{f:.1}x slower"))
                        )
                    })
                    .collect();
                format!(
                    "QEMU ({}) ran the same fixed works with the same fio binary as this host: {}. The estimate divides by the {} slowdown, {} (the initiator's work is kernel code moving data); the checksum's shows how much less emulation slows arithmetic, so the true figure is uncertain by about their ratio",
                    c.accel,
                    works.join("; "),
                    c.used,
                    c.slowdown.map_or("unknown: no estimate".into(), |f| format!("{f:.1}x"))
                )
            }
            None => "the VM did not run".into(),
        };
        format!(
            "  {}: the Linux kernel initiator (open-iscsi) in a QEMU VM, fio (libaio, O_DIRECT, the spec's mix, random share and queue depth, sector-aligned) driving the raw LUN through the same relay; its CPU is the guest's (/proc/stat: user, nice, system, irq, softirq) over a window of each run, per I/O from the LUN's sector counters. Under emulation that measures the emulator, so its CPU us/IO, IOPS/CPU% and CPU % are an ESTIMATE: the guest's figure divided by a slowdown. {cal}. A verdict marked * is from that estimate; the row's IOPS are the emulated guest's.\n",
            kernel::NAME
        )
    }
}

pub mod kernel;
#[cfg(test)]
mod tests;
