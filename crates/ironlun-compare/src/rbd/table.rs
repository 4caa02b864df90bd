//! The RBD comparison's ratios, verdicts and Markdown table.

use std::fmt::Write;

use super::{Report, Row, Server, CPU_GOAL_VS_TGT, GOAL_VS_RBD_BENCH, GOAL_VS_TGT};
use crate::clients::Sample;
use crate::per_server::{self, client_cell, measured_text, Runs};
use crate::summary::{
    med, num, opt, outcome_text, write_failures, write_versions, CLIENT_BOUND_CORES,
};

/// The figure a row is judged by: MB/s for large transfers, else IOPS.
fn figure(row: &Row, s: &Sample) -> f64 {
    if row.workload.by_bandwidth() {
        s.mb_per_s
    } else {
        s.iops
    }
}

fn unit(row: &Row) -> &'static str {
    if row.workload.by_bandwidth() {
        "MB/s"
    } else {
        "IOPS"
    }
}

/// Medians of one server's runs in a row.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Served {
    pub figure: Option<f64>,
    /// The figure against `rbd bench`'s in the same repetition, median
    /// over repetitions.
    pub vs_rbd_bench: Option<f64>,
    pub target_cpu: Option<f64>,
    pub client_cpu: Option<f64>,
    pub client_cores: Option<f64>,
    pub osd_cores: Option<f64>,
}

impl Served {
    fn client_bound(&self) -> bool {
        self.client_cores.is_some_and(|c| c >= CLIENT_BOUND_CORES)
    }
}

/// A row's ratios and verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub served: Vec<(Server, Served)>,
    /// ironlun's figure over tgt-rbd's, paired by repetition (median).
    pub vs_tgt: Option<f64>,
    /// ironlun's target CPU per I/O over tgt-rbd's (medians).
    pub cpu_vs_tgt: Option<f64>,
    /// The client at a full core against both gateways: the rates are
    /// the client's, and the row is judged by CPU per I/O.
    pub client_bound: bool,
    pub met: Option<bool>,
    pub reason: String,
    pub steal: Option<f64>,
}

impl Verdict {
    pub fn of(&self, s: Server) -> Served {
        per_server::of(&self.served, s)
    }
}

/// The median over repetitions of each of `runs` against the run of
/// `base` in the same repetition (the cluster's speed drifts over
/// minutes).
fn paired(row: &Row, runs: &[Sample], base: Server) -> Option<f64> {
    per_server::paired(runs, row.samples.of(base), |s, b| {
        let b = figure(row, b);
        (b > 0.0).then(|| figure(row, s) / b)
    })
}

pub fn verdict(row: &Row, absent: &[(Server, String)]) -> Verdict {
    let served = Server::ALL
        .iter()
        .map(|&k| {
            let v = row.samples.of(k);
            let s = Served {
                figure: med(v, |s| Some(figure(row, s))),
                vs_rbd_bench: paired(row, v, Server::RbdBench),
                target_cpu: med(v, |s| s.target_cpu_us_per_io),
                client_cpu: med(v, |s| s.client_cpu_us_per_io),
                client_cores: med(v, |s| s.client_cores),
                osd_cores: med(v, |s| s.backend_cores),
            };
            (k, s)
        })
        .collect();
    let (il, tgt) = (
        row.samples.of(Server::Ironlun),
        row.samples.of(Server::TgtRbd),
    );
    let cpu = |v: &[Sample]| med(v, |s| s.target_cpu_us_per_io);
    let cpu_vs_tgt = match (cpu(il), cpu(tgt)) {
        (Some(i), Some(t)) if t > 0.0 => Some(i / t),
        _ => None,
    };
    let mut v = Verdict {
        served,
        vs_tgt: paired(row, il, Server::TgtRbd),
        cpu_vs_tgt,
        client_bound: false,
        met: None,
        reason: String::new(),
        steal: row.samples.steal(),
    };
    judge(&mut v, absent);
    v
}

/// Fills the verdict's outcome and says why.
fn judge(v: &mut Verdict, absent: &[(Server, String)]) {
    let (il, tgt) = (v.of(Server::Ironlun), v.of(Server::TgtRbd));
    v.client_bound = il.client_bound() && tgt.client_bound();
    if let Some((_, why)) = absent.iter().find(|(s, _)| *s == Server::Ironlun) {
        v.reason = short_absence(why);
        return;
    }
    if v.client_bound {
        let (Some(c), Some(ci), Some(ct)) = (v.cpu_vs_tgt, il.client_cpu, tgt.client_cpu) else {
            v.reason = "client-bound, CPU not measured".into();
            return;
        };
        v.met = Some(c <= CPU_GOAL_VS_TGT && ci <= ct);
        v.reason = format!(
            "client-bound (ironlun bench at {:.2} / {:.2} cores): judged by CPU per I/O: \
             target {c:.2}× tgt-rbd's (≤ {CPU_GOAL_VS_TGT}), client {ci:.1} vs {ct:.1} µs",
            il.client_cores.unwrap_or(0.0),
            tgt.client_cores.unwrap_or(0.0),
        );
        return;
    }
    let (Some(r), Some(c), Some(b)) = (v.vs_tgt, v.cpu_vs_tgt, il.vs_rbd_bench) else {
        v.reason = "not measured against both tgt-rbd and rbd bench".into();
        return;
    };
    v.met = Some(r >= GOAL_VS_TGT && c <= CPU_GOAL_VS_TGT && b >= GOAL_VS_RBD_BENCH);
    v.reason = format!(
        "{r:.2}× tgt-rbd (≥ {GOAL_VS_TGT}) at {c:.2}× its CPU per I/O (≤ {CPU_GOAL_VS_TGT}); \
         {:.0} % of rbd bench (≥ {:.0} %)",
        b * 100.0,
        GOAL_VS_RBD_BENCH * 100.0
    );
}

/// A cell: the figure, and its share of rbd bench's (a gateway's), or
/// why there is none.
fn cell(row: &Row, server: Server, s: Served, absent: &[(Server, String)]) -> String {
    if s.figure.is_none() {
        if let Some((_, why)) = absent.iter().find(|(k, _)| *k == server) {
            return short_absence(why);
        }
    }
    let share = match server {
        Server::RbdBench => String::new(),
        _ => opt(s.vs_rbd_bench, |x| format!(" ({:.0} %)", x * 100.0)),
    };
    format!("{} {}{share}", opt(s.figure, num), unit(row))
}

/// The first clause of why a server is absent (the table's cell; the full
/// text is under the table).
fn short_absence(why: &str) -> String {
    why.split(" (").next().unwrap_or(why).to_owned()
}

/// The whole report as Markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    write_preamble(&mut s, r);
    let _ = writeln!(
        s,
        "| workload | rbd bench (no iSCSI) | tgt-rbd | ironlun | target CPU µs/IO tgt-rbd / ironlun | client µs/IO (cores) rbd bench / tgt-rbd / ironlun | OSD cores rbd bench / tgt-rbd / ironlun | steal % | verdict |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---|");
    let verdicts: Vec<Verdict> = r.rows.iter().map(|row| verdict(row, &r.absent)).collect();
    for (row, v) in r.rows.iter().zip(&verdicts) {
        write_row(&mut s, row, v, &r.absent);
    }
    write_ratios(&mut s, r, &verdicts);
    for (server, why) in &r.absent {
        let _ = writeln!(s, "\n{}: {why}", server.name());
    }
    write_failures(&mut s, &r.failures);
    s
}

/// Where and how it was measured, the versions, and what the columns mean.
fn write_preamble(s: &mut String, r: &Report) {
    let _ = writeln!(
        s,
        "{} (about one second of warm-up excluded); image {} of {} MiB, written in full \
         first, on the cluster of {}; {}; {:.0} s in all.\n",
        measured_text(&r.date, &r.host, r.reps, r.measure_s),
        r.image,
        r.size >> 20,
        r.cluster.conf.display(),
        redo_text(r.redone, r.steal_redo_pct),
        r.elapsed_s
    );
    write_versions(s, &r.versions);
    let osd = if r.osd_pids.is_empty() {
        "not read (not a cluster scripts/ceph-cluster started)".to_owned()
    } else {
        format!("of the OSD processes {:?}", r.osd_pids)
    };
    let _ = writeln!(
        s,
        "\nMedians. rbd bench: Ceph's own tool, librbd in the client, no iSCSI, \
         `--io-threads` = the queue depth: the raw limit. tgt-rbd (tgt's rbd backing \
         store) and ironlun (`rbd:` LUN) serve the same image; one client, ironlun bench, \
         drives each over loopback with offsets aligned to the transfer size. In \
         brackets: the share of rbd bench's rate, each run against rbd bench's run of the \
         same repetition (median of those pairs). Target CPU: the gateway daemon's µs per \
         I/O. Client: the client process's µs per I/O and cores (rbd bench's own for its \
         row); a client at ≥ {CLIENT_BOUND_CORES} of a core against both gateways set \
         their rates itself, and the row is then judged by CPU per I/O. OSD cores: CPU \
         {osd}, over each whole run. The OSD, the gateway and the client share the \
         machine's cores.\n"
    );
}

/// How many runs were repeated for steal, and above what.
fn redo_text(redone: usize, pct: f64) -> String {
    if pct.is_finite() {
        format!("{redone} runs repeated for steal ≥ {pct:.0} %")
    } else {
        "no runs repeated for steal".to_owned()
    }
}

/// One row of the table.
fn write_row(s: &mut String, row: &Row, v: &Verdict, absent: &[(Server, String)]) {
    let (rb, tg, il) = (
        v.of(Server::RbdBench),
        v.of(Server::TgtRbd),
        v.of(Server::Ironlun),
    );
    let f1 = |x: Option<f64>| opt(x, |c| format!("{c:.1}"));
    let f2 = |x: Option<f64>| opt(x, |c| format!("{c:.2}"));
    let client = |x: Served| client_cell(x.client_cpu, x.client_cores);
    let _ = writeln!(
        s,
        "| {} | {} | {} | {} | {} / {} | {} / {} / {} | {} / {} / {} | {} | {} |",
        row.workload.name,
        cell(row, Server::RbdBench, rb, absent),
        cell(row, Server::TgtRbd, tg, absent),
        cell(row, Server::Ironlun, il, absent),
        f1(tg.target_cpu),
        f1(il.target_cpu),
        client(rb),
        client(tg),
        client(il),
        f2(rb.osd_cores),
        f2(tg.osd_cores),
        f2(il.osd_cores),
        opt(v.steal, |x| format!("{x:.0}")),
        outcome_text(v.met, &v.reason),
    );
}

/// The ratios the goals name, one line per workload, and
/// tgt-rbd's share of rbd bench beside them.
fn write_ratios(s: &mut String, r: &Report, verdicts: &[Verdict]) {
    let _ = writeln!(
        s,
        "\nThe goals' ratios (ironlun ≥ {GOAL_VS_TGT}× tgt-rbd's rate at ≤ {CPU_GOAL_VS_TGT}× \
         its CPU per I/O; ironlun ≥ {:.0} % of rbd bench):\n",
        GOAL_VS_RBD_BENCH * 100.0
    );
    for (row, v) in r.rows.iter().zip(verdicts) {
        let u = unit(row);
        let pct = |x: Option<f64>| opt(x, |x| format!("{:.0} %", x * 100.0));
        let ironlun = match r.absent.iter().find(|(k, _)| *k == Server::Ironlun) {
            Some((_, why)) => short_absence(why),
            None => format!(
                "ironlun / tgt-rbd {u} {}, CPU per I/O {}; ironlun / rbd bench {u} {}",
                opt(v.vs_tgt, |x| format!("{x:.2}")),
                opt(v.cpu_vs_tgt, |x| format!("{x:.2}")),
                pct(v.of(Server::Ironlun).vs_rbd_bench),
            ),
        };
        let _ = writeln!(
            s,
            "- {}: {ironlun}; tgt-rbd / rbd bench {u} {}",
            row.workload.name,
            pct(v.of(Server::TgtRbd).vs_rbd_bench),
        );
    }
}
