//! The local comparison's verdicts and its Markdown table.

use std::fmt::Write;

use super::{Device, Goal, Report, Row, Server};
use crate::clients::Sample;
use crate::per_server::{self, client_cell, measured_text, Runs};
use crate::summary::{
    med, num, opt, outcome_text, write_failures, write_versions, CLIENT_BOUND_CORES,
};

/// The figure a row is judged by: mean latency at QD 1, MB/s for large
/// transfers, else IOPS.
fn figure(row: &Row, s: &Sample) -> f64 {
    match row.workload.goal {
        Goal::LatencyPlus(_) => s.mean_latency_us,
        _ if row.workload.by_bandwidth() => s.mb_per_s,
        _ => s.iops,
    }
}

fn unit(row: &Row) -> &'static str {
    match row.workload.goal {
        Goal::LatencyPlus(_) => "µs",
        _ if row.workload.by_bandwidth() => "MB/s",
        _ => "IOPS",
    }
}

/// Medians of one server's runs in a row.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Served {
    pub figure: Option<f64>,
    /// The figure against local fio's in the same repetition (a share of
    /// its rate, or the latency added to its latency, µs), median over
    /// repetitions.
    pub vs_local: Option<f64>,
    pub target_cpu: Option<f64>,
    pub client_cpu: Option<f64>,
    pub client_cores: Option<f64>,
}

/// A row's verdict: ironlun's against the goal, and whether the client
/// was the limit against both targets.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub served: Vec<(Server, Served)>,
    pub met: Option<bool>,
    /// The client (ironlun bench) at a full core against ironlun and tgt
    /// (rdwr) alike: the rate is the client's, so the row is judged by
    /// CPU per I/O instead.
    pub client_bound: bool,
    pub reason: String,
    pub steal: Option<f64>,
}

impl Verdict {
    pub fn of(&self, s: Server) -> Served {
        per_server::of(&self.served, s)
    }
}

/// A run against local fio's in the same repetition: the share of its
/// rate, or the latency added to its latency.
fn against(row: &Row, s: &Sample, local: &Sample) -> Option<f64> {
    let (f, l) = (figure(row, s), figure(row, local));
    match row.workload.goal {
        Goal::LatencyPlus(_) => Some(f - l),
        _ if l > 0.0 => Some(f / l),
        _ => None,
    }
}

/// The median over repetitions of each run against local fio's run of the
/// same repetition (the device's own speed drifts by half or double over
/// minutes on the development VM).
fn paired(row: &Row, runs: &[Sample]) -> Option<f64> {
    per_server::paired(runs, row.samples.of(Server::Fio), |s, l| against(row, s, l))
}

pub fn verdict(row: &Row) -> Verdict {
    let served: Vec<(Server, Served)> = Server::ALL
        .iter()
        .map(|&k| {
            let v = row.samples.of(k);
            let figure = med(v, |s| Some(figure(row, s)));
            let vs_local = paired(row, v);
            let served = Served {
                figure,
                vs_local,
                target_cpu: med(v, |s| s.target_cpu_us_per_io),
                client_cpu: med(v, |s| s.client_cpu_us_per_io),
                client_cores: med(v, |s| s.client_cores),
            };
            (k, served)
        })
        .collect();
    let steal = row.samples.steal();
    let mut v = Verdict {
        served,
        met: None,
        client_bound: false,
        reason: String::new(),
        steal,
    };
    judge(row, &mut v);
    v
}

/// Fills the verdict's outcome and says why.
fn judge(row: &Row, v: &mut Verdict) {
    let il = v.of(Server::Ironlun);
    let tgt = v.of(Server::TgtRdwr);
    let full = |s: Served| s.client_cores.is_some_and(|c| c >= CLIENT_BOUND_CORES);
    v.client_bound = full(il) && full(tgt);
    let Some(x) = il.vs_local else {
        v.reason = "not measured".into();
        return;
    };
    match row.workload.goal {
        Goal::None => v.reason = "reported, no goal".into(),
        Goal::LatencyPlus(plus) => {
            v.met = Some(x <= plus);
            v.reason = format!("{x:+.0} µs over local fio (goal ≤ +{plus:.0} µs)");
        }
        Goal::Share(_) if v.client_bound => {
            // The client at a full core set both rates: judge by what each
            // target spent per I/O, and what the client spent against it.
            let (Some(ti), Some(tt), Some(ci), Some(ct)) =
                (il.target_cpu, tgt.target_cpu, il.client_cpu, tgt.client_cpu)
            else {
                v.reason = "client-bound, CPU not measured".into();
                return;
            };
            v.met = Some(ti <= tt && ci <= ct);
            v.reason = format!(
                "client-bound (ironlun bench at {:.2} / {:.2} cores): judged by CPU per I/O: \
                 target {ti:.1} vs tgt's {tt:.1} µs, client {ci:.1} vs {ct:.1} µs",
                il.client_cores.unwrap_or(0.0),
                tgt.client_cores.unwrap_or(0.0)
            );
        }
        Goal::Share(g) => {
            v.met = Some(x >= g);
            v.reason = format!(
                "{:.0} % of local fio (goal ≥ {:.0} %)",
                x * 100.0,
                g * 100.0
            );
        }
    }
}

/// A target's cell: its figure and how it compares with local fio.
fn cell(row: &Row, s: Served) -> String {
    let u = unit(row);
    let vs = match row.workload.goal {
        Goal::LatencyPlus(_) => opt(s.vs_local, |x| format!("{x:+.0} µs")),
        _ => opt(s.vs_local, |x| format!("{:.0} %", x * 100.0)),
    };
    format!("{} {u} ({vs})", opt(s.figure, num))
}

/// The whole report as Markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    write_preamble(&mut s, r);
    let _ = writeln!(
        s,
        "| device | workload | fio (local) | ironlun | tgt rdwr | tgt aio | CPU µs/IO ironlun / tgt rdwr / aio | client µs/IO (cores) ironlun / tgt rdwr | steal % | verdict |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for row in &r.rows {
        write_row(&mut s, row);
    }
    write_failures(&mut s, &r.failures);
    s
}

/// Where and how it was measured, the versions, and what the columns mean.
fn write_preamble(s: &mut String, r: &Report) {
    let _ = writeln!(
        s,
        "{} (one second of ramp excluded); a {} MiB file of random data at {}; {} runs \
         repeated for steal ≥ {:.0} %; {:.0} s in all.\n",
        measured_text(&r.date, &r.host, r.reps, r.measure_s),
        r.size >> 20,
        r.file.display(),
        r.redone,
        r.steal_redo_pct,
        r.elapsed_s
    );
    write_versions(s, &r.versions);
    let block = match &r.block_device {
        Ok(d) => format!("the block rows ran on {d}"),
        Err(why) => format!("no block rows: {why}"),
    };
    let _ = writeln!(
        s,
        "\nMedians. fio: io_uring, O_DIRECT, on the file or device itself. The targets \
         export the same file or device with O_DIRECT (ironlun `file:…,direct` / \
         `block:…,direct`; tgt rdwr with `bsoflags direct`, and aio) and one client, \
         ironlun bench, drives each over loopback with offsets aligned to the transfer \
         size. In brackets: the share of local fio's rate, or the latency added to \
         fio's, each run against fio's run of the same repetition (median of those \
         pairs: the device's speed drifts over minutes). CPU: target daemon µs per I/O; client: ironlun bench's µs per I/O and \
         cores (fio's own for the local run). {block}.\n"
    );
}

/// One row of the table: every server's figure, CPU and client, and the
/// verdict.
fn write_row(s: &mut String, row: &Row) {
    let v = verdict(row);
    let (il, rd, ai, fio) = (
        v.of(Server::Ironlun),
        v.of(Server::TgtRdwr),
        v.of(Server::TgtAio),
        v.of(Server::Fio),
    );
    let client = |x: Served| client_cell(x.client_cpu, x.client_cores);
    let verdict = outcome_text(v.met, &v.reason);
    let cpu = |x: Served| opt(x.target_cpu, |c| format!("{c:.1}"));
    let _ = writeln!(
        s,
        "| {} | {} | {} {} | {} | {} | {} | {} / {} / {} | {} / {} | {} | {verdict} |",
        match row.device {
            Device::File => "file",
            Device::Block => "block",
        },
        row.workload.name,
        opt(fio.figure, num),
        unit(row),
        cell(row, il),
        cell(row, rd),
        cell(row, ai),
        cpu(il),
        cpu(rd),
        cpu(ai),
        client(il),
        client(rd),
        opt(v.steal, |x| format!("{x:.0}")),
    );
}
