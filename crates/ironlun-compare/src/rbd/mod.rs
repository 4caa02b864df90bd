//! `ironlun compare-rbd`: RBD gateways beside Ceph's own limit (issue 25,
//! item 5).
//!
//! One RBD image, three ways to drive it: `rbd bench`, Ceph's own tool
//! (librbd in the client process, no iSCSI): the raw limit of the
//! cluster; tgt with its rbd backing store (Debian `tgt-rbd`); and
//! `ironlun target` with an `rbd:POOL/IMAGE,conf=…` LUN. One iSCSI
//! client, `ironlun bench`, drives both gateways over loopback with the
//! same shapes `rbd bench` runs (offsets aligned to the transfer size, as
//! `rbd bench`'s are). Runs alternate in a rotating order within every
//! repetition; each run's steal is recorded (and a run with too much is
//! run again, keeping the least stolen, as in `compare-local`).
//!
//! A binary without the `rbd:` LUN kind is found out before anything
//! starts (`ironlun target --check`): its column then says so instead of
//! holding a number.

mod gateways;
mod image;
mod rbd_bench;
pub mod table;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::clients::{self, RunCtx, Sample, Shape};
use crate::daemons::{Daemon, TgtLun};
use crate::local::least_steal;
use crate::per_server::{self, run_text, Runs};

pub use gateways::{lacks_rbd_kind, NO_RBD_KIND};
pub use image::Image;

use gateways::{Absent, IRONLUN_IQN, TGT_IQN};

/// The goals: ironlun ≥ 1.5× tgt-rbd's IOPS (MB/s for large
/// transfers) at ≤ 0.5× its target CPU per I/O, and ≥ 80 % of `rbd
/// bench`'s rate on the same cluster.
pub const GOAL_VS_TGT: f64 = 1.5;
pub const CPU_GOAL_VS_TGT: f64 = 0.5;
pub const GOAL_VS_RBD_BENCH: f64 = 0.8;

const KIB: u32 = 1024;

#[derive(Clone, Debug, Serialize)]
pub struct Workload {
    pub name: &'static str,
    pub shape: Shape,
}

impl Workload {
    /// Large transfers are judged by MB/s, small ones by IOPS.
    pub fn by_bandwidth(&self) -> bool {
        per_server::by_bandwidth(&self.shape)
    }
}

/// The workloads: 4 KiB random read and write at QD 64
/// (`rbd bench --io-threads 64`), 512 KiB sequential read and write at
/// QD 8 (as in compare-peers and compare-local).
pub fn workloads() -> Vec<Workload> {
    let w = |name, bs: u32, read, random, qd| Workload {
        name,
        shape: Shape {
            block_size: bs,
            read,
            random,
            queue_depth: qd,
            align: Some(bs),
        },
    };
    vec![
        w("4k-randread-qd64", 4 * KIB, true, true, 64),
        w("4k-randwrite-qd64", 4 * KIB, false, true, 64),
        w("512k-seqread-qd8", 512 * KIB, true, false, 8),
        w("512k-seqwrite-qd8", 512 * KIB, false, false, 8),
    ]
}

/// Who drives the image in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Server {
    /// `rbd bench`: librbd in the client, no iSCSI. The raw limit.
    RbdBench,
    /// tgt's rbd backing store, over iSCSI.
    TgtRbd,
    /// `ironlun target` with an `rbd:` LUN, over iSCSI.
    Ironlun,
}

impl Server {
    pub const ALL: [Server; 3] = [Server::RbdBench, Server::TgtRbd, Server::Ironlun];

    pub fn name(self) -> &'static str {
        match self {
            Server::RbdBench => "rbd bench",
            Server::TgtRbd => "tgt-rbd",
            Server::Ironlun => "ironlun",
        }
    }
}

/// How to reach the cluster: its ceph.conf, the client id (None: the
/// default, `admin`) and the pool.
#[derive(Clone, Debug, Serialize)]
pub struct Cluster {
    pub conf: PathBuf,
    pub id: Option<String>,
    pub pool: String,
}

impl Cluster {
    /// The `rbd` command with this cluster's conf and id.
    fn rbd(&self) -> Command {
        let mut c = Command::new("rbd");
        c.arg("--conf").arg(&self.conf);
        if let Some(id) = &self.id {
            c.args(["--id", id]);
        }
        c
    }

    /// `POOL/IMAGE`.
    pub fn image_spec(&self, image: &str) -> String {
        format!("{}/{image}", self.pool)
    }

    /// ironlun's LUN spec for `image`.
    pub fn ironlun_spec(&self, image: &str) -> String {
        let mut s = format!(
            "rbd:{},conf={}",
            self.image_spec(image),
            self.conf.display()
        );
        if let Some(id) = &self.id {
            s.push_str(&format!(",id={id}"));
        }
        s
    }

    /// tgt's LUN for `image`: its rbd store, `--bsopts "conf=…;id=…"`.
    pub fn tgt_lun(&self, image: &str) -> TgtLun {
        let mut opts = format!("conf={}", self.conf.display());
        if let Some(id) = &self.id {
            opts.push_str(&format!(";id={id}"));
        }
        TgtLun {
            path: self.image_spec(image),
            bstype: Some("rbd"),
            bsopts: Some(opts),
            ..TgtLun::default()
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    /// The ironlun binary: the client (`ironlun bench`) for both gateways.
    pub exe: PathBuf,
    /// The ironlun binary serving the image (`ironlun target`): `exe`, or
    /// another build (a branch's) measured with the same client.
    pub target_exe: PathBuf,
    pub reps: usize,
    pub measure: Duration,
    pub cluster: Cluster,
    /// The image to create (and fill) for the runs.
    pub image: String,
    pub size: u64,
    /// Keep the image afterwards, and reuse one of that name and size.
    pub keep_image: bool,
    /// Only workloads whose name contains one of these (empty: all).
    pub only: Vec<String>,
    /// A run with at least this much steal (percent) is run again.
    pub steal_redo_pct: f64,
    pub started: String,
}

/// Samples of one workload, per server.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub workload: Workload,
    pub samples: Vec<(Server, Vec<Sample>)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub date: String,
    pub host: ironlun_bench::result::HostInfo,
    pub versions: Vec<(String, String)>,
    pub reps: usize,
    pub measure_s: f64,
    pub cluster: Cluster,
    pub image: String,
    pub size: u64,
    /// The OSD processes whose CPU was read (those of a cluster that
    /// scripts/ceph-cluster started; none for another cluster).
    pub osd_pids: Vec<u32>,
    /// Servers that did not run at all, and why.
    pub absent: Vec<(Server, String)>,
    pub rows: Vec<Row>,
    /// Runs that failed, with why.
    pub failures: Vec<String>,
    /// Runs repeated for steal.
    pub redone: usize,
    pub steal_redo_pct: f64,
    pub elapsed_s: f64,
}

fn progress(msg: &str) {
    eprintln!("{msg}");
}

/// Runs the whole comparison. Failed runs are listed in the report; they
/// never stop the others.
pub fn run(opts: &Options) -> Result<Report, String> {
    let started = Instant::now();
    let image = Image::prepare(&opts.cluster, &opts.image, opts.size, opts.keep_image)?;
    let mut failures = Vec::new();
    let mut absent = Vec::new();
    let tgt = gateways::start_tgt(&opts.cluster, &opts.image)
        .map_err(|e| {
            failures.push(format!("tgt-rbd did not start: {e}"));
            absent.push((Server::TgtRbd, format!("did not start: {e}")));
        })
        .ok();
    let ironlun = gateways::start_ironlun(&opts.target_exe, &opts.cluster, &opts.image)
        .map_err(|Absent { reason, failed }| {
            if failed {
                failures.push(format!("ironlun did not start: {reason}"));
            }
            progress(&format!("no ironlun runs: {reason}"));
            absent.push((Server::Ironlun, reason));
        })
        .ok();
    let osd_pids = image::osd_pids(&opts.cluster.conf);
    let scratch = std::env::temp_dir().join(format!("ironlun-compare-rbd-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let mut runner = Runner {
        opts,
        ctx: RunCtx {
            exe: opts.exe.clone(),
            measure: opts.measure,
            scratch: scratch.clone(),
        },
        tgt: tgt.as_ref(),
        ironlun: ironlun.as_ref(),
        osd: osd_pids.clone(),
        failures,
        redone: 0,
    };
    let mut rows = planned_rows(opts);
    for rep in 0..opts.reps {
        for (i, row) in rows.iter_mut().enumerate() {
            runner.run_row(rep, i, row);
        }
    }
    let Runner {
        failures, redone, ..
    } = runner;
    drop(ironlun);
    if let Some(t) = &tgt {
        if let Err(e) = gateways::close_tgt(t) {
            progress(&format!("tgt-rbd's LUN not deleted: {e}"));
        }
    }
    drop(tgt);
    let _ = std::fs::remove_dir_all(&scratch);
    if let Err(e) = image.remove() {
        progress(&e);
    }
    Ok(Report {
        date: opts.started.clone(),
        host: ironlun_bench::result::HostInfo::detect(),
        versions: versions(&opts.exe, &opts.target_exe),
        reps: opts.reps,
        measure_s: opts.measure.as_secs_f64(),
        cluster: opts.cluster.clone(),
        image: opts.cluster.image_spec(&opts.image),
        size: opts.size,
        osd_pids,
        absent,
        rows,
        failures,
        redone,
        steal_redo_pct: opts.steal_redo_pct,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

/// Every workload (of those asked for), without samples yet.
fn planned_rows(opts: &Options) -> Vec<Row> {
    workloads()
        .into_iter()
        .filter(|w| opts.only.is_empty() || opts.only.iter().any(|o| w.name.contains(o.as_str())))
        .map(|workload| Row {
            workload,
            samples: Server::ALL.iter().map(|s| (*s, Vec::new())).collect(),
        })
        .collect()
}

/// What the runs share; collects the failed runs and counts the redone
/// ones.
struct Runner<'a> {
    opts: &'a Options,
    ctx: RunCtx,
    tgt: Option<&'a Daemon>,
    ironlun: Option<&'a Daemon>,
    osd: Vec<u32>,
    failures: Vec<String>,
    redone: usize,
}

impl Runner<'_> {
    /// Runs row `i` with every server that runs, in repetition `rep`.
    fn run_row(&mut self, rep: usize, i: usize, row: &mut Row) {
        // A different server goes first in each row and repetition.
        let mut order = Server::ALL.to_vec();
        order.rotate_left((rep + i) % Server::ALL.len());
        let mut line = format!(
            "[rep {}/{}] {}:",
            rep + 1,
            self.opts.reps,
            row.workload.name
        );
        for server in order {
            let Some(result) = self.run_server(server, &row.workload.shape) else {
                continue;
            };
            match result {
                Ok((mut s, tries)) => {
                    self.redone += tries - 1;
                    s.rep = rep;
                    run_text(&mut line, server.name(), &row.workload.shape, &s, tries);
                    row.samples.add(server, s);
                }
                Err(err) => {
                    line.push_str(&format!(" {} FAILED", server.name()));
                    self.failures
                        .push(format!("{} {}: {err}", row.workload.name, server.name()));
                }
            }
        }
        progress(&line);
    }

    /// One run of `shape` by `server`, run again for steal; `None` when
    /// the server is absent.
    fn run_server(&self, server: Server, shape: &Shape) -> Option<Result<(Sample, usize), String>> {
        let daemon = match server {
            Server::RbdBench => None,
            Server::TgtRbd => Some(self.tgt?),
            Server::Ironlun => Some(self.ironlun?),
        };
        let once = || match daemon {
            None => rbd_bench::run(&self.bench_ctx(), shape),
            Some(d) => self.over_iscsi(d, shape),
        };
        Some(least_steal(self.opts.steal_redo_pct, once))
    }

    fn bench_ctx(&self) -> rbd_bench::Ctx<'_> {
        rbd_bench::Ctx {
            cluster: &self.opts.cluster,
            image: &self.opts.image,
            measure: self.opts.measure,
            osd: &self.osd,
        }
    }

    /// `ironlun bench` against daemon `d`'s LUN on the image, with the
    /// OSDs' CPU over the whole run.
    fn over_iscsi(&self, d: &Daemon, shape: &Shape) -> Result<Sample, String> {
        let url = match d.name {
            "tgt" => d.lun_url(TGT_IQN, 1),
            _ => d.lun_url(IRONLUN_IQN, 0),
        };
        let osd = image::OsdCpu::start(&self.osd);
        let mut s = clients::bench(&self.ctx, shape, &[url], d.pid())?;
        s.backend_cores = osd.cores();
        Ok(s)
    }
}

/// Versions of everything measured.
fn versions(exe: &std::path::Path, target: &std::path::Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = crate::summary::versions(exe)
        .into_iter()
        .filter(|(name, _)| name == "ironlun" || name == "tgt")
        .collect();
    if target != exe {
        v.push((
            format!("ironlun target ({})", target.display()),
            crate::summary::versions(target)
                .into_iter()
                .next()
                .map_or_else(|| "?".to_owned(), |(_, ver)| ver),
        ));
    }
    for p in ["tgt-rbd", "ceph-osd", "ceph-common", "librbd1"] {
        v.push((p.to_owned(), crate::summary::package_version(p)));
    }
    v
}
