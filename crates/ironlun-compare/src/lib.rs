//! # ironlun-compare: ironlun side by side with a peer target
//!
//! **Owns:** starting tgt (`tgtd` + `tgtadm`) and `ironlun target` as
//! separate processes with equivalent LUNs (a tmpfs file of the same size
//! and content, and a null LUN), running the same external clients
//! (`iscsi-perf`, `qemu-img bench`, `ironlun bench`) against each in
//! alternation, reading each daemon's CPU (all threads) and memory from
//! /proc, each client's own CPU (so that a row the client limited says
//! so), hypervisor steal per run, iperf3's loopback rate, and the
//! table of medians, ratios and goals (`ironlun compare-peers`,
//! `benches/compare-peers`). istgt ([`istgt`]) is a second peer when
//! asked for: it runs in the same alternation and gets a table of its
//! own beside tgt's. Also the comparison with the disk itself
//! ([`local`]: `ironlun compare-local`, `benches/compare-local`): fio on
//! a disk file and on a loop device over it, beside the same file and
//! device exported by ironlun and tgt. And the comparison on Ceph RBD
//! ([`rbd`]: `ironlun compare-rbd`, `benches/compare-rbd`): `rbd bench`
//! (Ceph's own tool, no iSCSI) beside tgt's rbd backing store and
//! ironlun's `rbd:` LUN serving the same image.
//!
//! **Must not know:** iSCSI or SCSI (every client is a separate program),
//! how either target works inside.

// This crate keeps unsafe code: every block must say why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod cgroup;
pub mod clients;
pub mod daemons;
pub mod istgt;
pub mod istgt_summary;
pub mod local;
pub mod loopdev;
pub mod per_server;
pub mod pin;
pub mod procfs;
pub mod rbd;
pub mod scale;
pub mod summary;
pub mod workloads;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use clients::{Client, RunCtx, Sample};
use daemons::{Daemon, LunFiles};
use workloads::{LunKind, Workload};

/// What to run.
pub struct Options {
    /// The ironlun binary (target and bench).
    pub exe: PathBuf,
    /// Alternating repetitions of every run.
    pub reps: usize,
    /// Measured time per run (warm-up excluded).
    pub measure: Duration,
    /// Size of each file LUN.
    pub lun_size: u64,
    /// Where the LUN files live (a tmpfs directory).
    pub dir: PathBuf,
    pub clients: Vec<Client>,
    /// Session counts for the scaling runs (empty: none).
    pub sessions: Vec<usize>,
    /// Only workloads whose name contains one of these (empty: all).
    pub only: Vec<String>,
    /// When the run started (RFC 3339), for the report.
    pub started: String,
    /// Compare istgt too (a third target in the alternation).
    pub istgt: bool,
}

/// Both targets' samples of one workload with one client.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub workload: Workload,
    pub client: Client,
    /// How the client deviates from the workload (qemu-img: sequential).
    pub note: Option<&'static str>,
    pub tgt: Vec<Sample>,
    pub ironlun: Vec<Sample>,
    /// istgt's runs, when it was compared.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub istgt: Vec<Sample>,
    /// Why istgt has no runs on this row ("not supported by istgt …").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub istgt_unsupported: Option<String>,
}

/// Aggregate 4 KiB random reads at QD 64 per session over n sessions.
#[derive(Clone, Debug, Serialize)]
pub struct ScalingRow {
    pub sessions: usize,
    pub tgt: Vec<Sample>,
    pub ironlun: Vec<Sample>,
    /// istgt's runs, when it was compared.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub istgt: Vec<Sample>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub date: String,
    pub host: ironlun_bench::result::HostInfo,
    pub versions: Vec<(String, String)>,
    pub reps: usize,
    pub measure_s: f64,
    pub lun_size: u64,
    /// iperf3 single-stream loopback rate per repetition, MB/s.
    pub iperf3_mb_per_s: Vec<f64>,
    pub rows: Vec<Row>,
    pub scaling: Vec<ScalingRow>,
    /// Runs that failed, with why.
    pub failures: Vec<String>,
    pub elapsed_s: f64,
}

/// A fixed host, for the tables' tests.
#[cfg(test)]
fn test_host() -> ironlun_bench::result::HostInfo {
    ironlun_bench::result::HostInfo {
        cpu_model: "Test CPU @ 2.0GHz".into(),
        cpus: 2,
        kernel: "6.1.0-test".into(),
    }
}

fn progress(msg: &str) {
    eprintln!("{msg}");
}

/// Runs the whole comparison. Failed runs are listed in the report (and
/// make the command fail); they never stop the others.
pub fn run(opts: &Options) -> Result<Report, String> {
    let started = Instant::now();
    let files = LunFiles::create_for(&opts.dir, opts.lun_size, opts.istgt)?;
    let tgt = Daemon::start_tgt(daemons::free_loopback_addr()?, &files.tgt)?;
    let ironlun = Daemon::start_ironlun(&opts.exe, daemons::free_loopback_addr()?, &files.ironlun)?;
    let istgt = match &files.istgt {
        Some(f) => Some(Daemon::start_istgt(
            daemons::free_loopback_addr()?,
            f,
            &opts.dir,
        )?),
        None => None,
    };
    let mut runner = Runner {
        opts,
        ctx: RunCtx {
            exe: opts.exe.clone(),
            measure: opts.measure,
            scratch: opts.dir.clone(),
        },
        tgt: &tgt,
        ironlun: &ironlun,
        istgt: istgt.as_ref(),
        failures: Vec::new(),
    };
    let warm = workloads::all().into_iter().next().ok_or("no workloads")?;
    runner.warm_up(&warm);
    let mut rows = planned_rows(opts);
    let mut scaling: Vec<ScalingRow> = opts
        .sessions
        .iter()
        .map(|&n| ScalingRow {
            sessions: n,
            tgt: Vec::new(),
            ironlun: Vec::new(),
            istgt: Vec::new(),
        })
        .collect();
    let mut iperf = Vec::new();
    for rep in 0..opts.reps {
        iperf.extend(runner.iperf3(rep));
        for (i, row) in rows.iter_mut().enumerate() {
            runner.run_row(rep, i, row);
        }
        runner.run_scaling(rep, &mut scaling, &warm);
    }
    let failures = runner.failures;
    drop(tgt);
    drop(ironlun);
    drop(istgt);
    drop(files);
    let mut versions = summary::versions(&opts.exe);
    if opts.istgt {
        versions.push(("istgt".into(), summary::package_version("istgt")));
    }
    Ok(Report {
        date: opts.started.clone(),
        host: ironlun_bench::result::HostInfo::detect(),
        versions,
        reps: opts.reps,
        measure_s: opts.measure.as_secs_f64(),
        lun_size: opts.lun_size,
        iperf3_mb_per_s: iperf,
        rows,
        scaling,
        failures,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

/// Every workload (of those asked for) with every client that can run
/// it, without samples yet.
fn planned_rows(opts: &Options) -> Vec<Row> {
    let mut rows = Vec::new();
    for w in workloads::all() {
        if !opts.only.is_empty() && !opts.only.iter().any(|o| w.name.contains(o.as_str())) {
            continue;
        }
        for &c in &opts.clients {
            if let Ok(note) = c.fit(&w) {
                rows.push(Row {
                    workload: w.clone(),
                    client: c,
                    note,
                    tgt: Vec::new(),
                    ironlun: Vec::new(),
                    istgt: Vec::new(),
                    istgt_unsupported: None,
                });
            }
        }
    }
    rows
}

/// The targets under comparison and what their runs share; collects the
/// failed runs.
struct Runner<'a> {
    opts: &'a Options,
    ctx: RunCtx,
    tgt: &'a Daemon,
    ironlun: &'a Daemon,
    istgt: Option<&'a Daemon>,
    failures: Vec<String>,
}

impl<'a> Runner<'a> {
    /// Every target, in the order of the `k`th run (`rep + row`): the
    /// list rotated by `k`, so each goes first in turn (tgt and ironlun
    /// alone: alternating).
    fn order(&self, k: usize) -> Vec<&'a Daemon> {
        let mut all = vec![self.tgt, self.ironlun];
        all.extend(self.istgt);
        rotated(all, k)
    }

    /// Warm-up, not recorded: threads started, pages touched, sessions
    /// code paths loaded, for both targets alike.
    fn warm_up(&mut self, warm: &Workload) {
        for d in self.order(0) {
            let short = RunCtx {
                measure: Duration::from_secs(1),
                exe: self.ctx.exe.clone(),
                scratch: self.ctx.scratch.clone(),
            };
            if let Err(e) = clients::ironlun_bench(&short, warm, &[d.url(LunKind::File)], d.pid()) {
                self.failures
                    .push(format!("warm-up against {}: {e}", d.name));
            }
        }
    }

    /// iperf3's loopback rate in repetition `rep`, MB/s.
    fn iperf3(&mut self, rep: usize) -> Option<f64> {
        match clients::iperf3(self.opts.measure) {
            Ok(r) => {
                progress(&format!(
                    "[rep {}/{}] iperf3 loopback: {r:.0} MB/s",
                    rep + 1,
                    self.opts.reps
                ));
                Some(r)
            }
            Err(e) => {
                self.failures.push(format!("iperf3: {e}"));
                None
            }
        }
    }

    /// Runs row `i` against both targets in repetition `rep`.
    fn run_row(&mut self, rep: usize, i: usize, row: &mut Row) {
        let mut line = format!(
            "[rep {}/{}] {} {} {}:",
            rep + 1,
            self.opts.reps,
            row.workload.name,
            row.workload.lun.name(),
            row.client.name()
        );
        for d in self.order(rep + i) {
            if let Some(why) =
                istgt::unsupported_lun(row.workload.lun).filter(|_| d.name == "istgt")
            {
                line.push_str(" istgt not supported");
                row.istgt_unsupported = Some(why.to_owned());
                continue;
            }
            match row
                .client
                .run(&self.ctx, &row.workload, &d.url(row.workload.lun), d.pid())
            {
                Ok(mut s) => {
                    s.rep = rep;
                    let client = s
                        .client_cores
                        .map_or_else(String::new, |c| format!("client {c:.2} cores, "));
                    line.push_str(&format!(
                        " {} {} ({client}steal {:.0} %)",
                        d.name,
                        summary::rate_text(&row.workload, &s),
                        s.steal_pct
                    ));
                    samples_of(d, &mut row.tgt, &mut row.ironlun, &mut row.istgt).push(s);
                }
                Err(e) if d.name == "istgt" && istgt::unsupported_command(&e).is_some() => {
                    line.push_str(" istgt not supported");
                    row.istgt_unsupported = istgt::unsupported_command(&e);
                }
                Err(e) => {
                    line.push_str(&format!(" {} FAILED", d.name));
                    self.failures.push(format!(
                        "{} {} {} against {}: {e}",
                        row.workload.name,
                        row.workload.lun.name(),
                        row.client.name(),
                        d.name
                    ));
                }
            }
        }
        progress(&line);
    }

    /// Runs every session count against both targets in repetition
    /// `rep`: in rising order on even repetitions and falling on odd
    /// ones, so that drift within a repetition does not favour either end
    /// when counts are compared within it.
    fn run_scaling(&mut self, rep: usize, scaling: &mut [ScalingRow], w: &Workload) {
        let n = scaling.len();
        for k in 0..n {
            let i = if rep % 2 == 0 { k } else { n - 1 - k };
            let Some(sc) = scaling.get_mut(i) else {
                continue;
            };
            let mut line = format!(
                "[rep {}/{}] {} sessions:",
                rep + 1,
                self.opts.reps,
                sc.sessions
            );
            for d in self.order(rep + i) {
                let urls = vec![d.url(LunKind::File); sc.sessions];
                match clients::ironlun_bench(&self.ctx, w, &urls, d.pid()) {
                    Ok(mut s) => {
                        s.rep = rep;
                        line.push_str(&format!(" {} {:.0} IOPS", d.name, s.iops));
                        samples_of(d, &mut sc.tgt, &mut sc.ironlun, &mut sc.istgt).push(s);
                    }
                    Err(e) => {
                        line.push_str(&format!(" {} FAILED", d.name));
                        self.failures
                            .push(format!("{} sessions against {}: {e}", sc.sessions, d.name));
                    }
                }
            }
            progress(&line);
        }
    }
}

/// `v` rotated left by `k` (the `k`th run's order of the targets).
fn rotated<T>(mut v: Vec<T>, k: usize) -> Vec<T> {
    if !v.is_empty() {
        let n = v.len();
        v.rotate_left(k % n);
    }
    v
}

/// Where a run against `d` is kept: tgt's samples, istgt's or ironlun's.
fn samples_of<'v>(
    d: &Daemon,
    tgt: &'v mut Vec<Sample>,
    ironlun: &'v mut Vec<Sample>,
    istgt: &'v mut Vec<Sample>,
) -> &'v mut Vec<Sample> {
    match d.name {
        "tgt" => tgt,
        "istgt" => istgt,
        _ => ironlun,
    }
}

#[cfg(test)]
mod tests {
    use super::rotated;

    /// Two targets alternate as before istgt; three each go first once
    /// in three runs, and each is in every place once.
    #[test]
    fn every_target_goes_first_in_turn() {
        assert_eq!(rotated(vec!["tgt", "ironlun"], 0), ["tgt", "ironlun"]);
        assert_eq!(rotated(vec!["tgt", "ironlun"], 1), ["ironlun", "tgt"]);
        assert_eq!(rotated(vec!["tgt", "ironlun"], 2), ["tgt", "ironlun"]);
        let three = |k| rotated(vec!["tgt", "ironlun", "istgt"], k);
        assert_eq!(three(0), ["tgt", "ironlun", "istgt"]);
        assert_eq!(three(1), ["ironlun", "istgt", "tgt"]);
        assert_eq!(three(2), ["istgt", "tgt", "ironlun"]);
        assert_eq!(three(3), three(0));
        assert!(rotated(Vec::<u8>::new(), 5).is_empty());
    }
}
