//! `ironlun compare-local`: the disk's own limit beside the network path.
//!
//! Debian's `fio` (io_uring, `O_DIRECT`) runs directly on a file on the
//! machine's disk; the same file is exported by `ironlun target`
//! (`file:…,direct`) and by tgt (its `rdwr` backing store with `bsoflags
//! direct`, and its `aio` store, which opens with `O_DIRECT` itself), and
//! one client, `ironlun bench`, drives each over loopback. The same again
//! for a block device: a loop device over that file with direct I/O
//! (`losetup --direct-io=on`), exported as `block:…,direct`. Runs
//! alternate in a rotating order within every repetition; each run's
//! steal is recorded, and a run with [`STEAL_REDO_PCT`] or more (by
//! default) is run again, up to twice, keeping the one with the least
//! steal (chosen by steal alone).
//!
//! What is compared is like with like: every path is `O_DIRECT`; the
//! targets run with their write caches on (ironlun's WCE=1 default), so
//! fio writes without sync, and ironlun bench aligns offsets to the
//! transfer size, as fio does.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use ironlun_bench::cpu::HostCpu;

use crate::clients::{self, RunCtx, Sample, Shape};
use crate::daemons::{self, Daemon, TgtLun};
use crate::per_server::{self, run_text, Runs};

/// A run with this much hypervisor steal (percent) is run again, unless
/// told otherwise ([`Options::steal_redo_pct`]).
pub const STEAL_REDO_PCT: f64 = 5.0;
/// Runs of one cell at most (the first and its redos).
const MAX_TRIES: usize = 3;

const KIB: u32 = 1024;

/// What decides a workload's row.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Goal {
    /// ironlun's IOPS (MB/s for large transfers) at least this share of
    /// local fio's.
    Share(f64),
    /// ironlun's mean latency at most local fio's plus this many µs.
    LatencyPlus(f64),
    /// Reported, not judged.
    None,
}

#[derive(Clone, Debug, Serialize)]
pub struct Workload {
    pub name: &'static str,
    pub shape: Shape,
    pub goal: Goal,
}

impl Workload {
    /// Large transfers are judged by MB/s, small ones by IOPS.
    pub fn by_bandwidth(&self) -> bool {
        per_server::by_bandwidth(&self.shape)
    }
}

/// The workloads: 4 KiB random read and write at QD 1, 16 and 64;
/// 512 KiB sequential read and write at QD 8.
pub fn workloads() -> Vec<Workload> {
    let w = |name, bs: u32, read, random, qd, goal| Workload {
        name,
        shape: Shape {
            block_size: bs,
            read,
            random,
            queue_depth: qd,
            align: Some(bs),
        },
        goal,
    };
    vec![
        w(
            "4k-randread-qd1",
            4 * KIB,
            true,
            true,
            1,
            Goal::LatencyPlus(25.0),
        ),
        w("4k-randread-qd16", 4 * KIB, true, true, 16, Goal::None),
        w(
            "4k-randread-qd64",
            4 * KIB,
            true,
            true,
            64,
            Goal::Share(0.85),
        ),
        w(
            "4k-randwrite-qd1",
            4 * KIB,
            false,
            true,
            1,
            Goal::LatencyPlus(25.0),
        ),
        w("4k-randwrite-qd16", 4 * KIB, false, true, 16, Goal::None),
        w(
            "4k-randwrite-qd64",
            4 * KIB,
            false,
            true,
            64,
            Goal::Share(0.85),
        ),
        w(
            "512k-seqread-qd8",
            512 * KIB,
            true,
            false,
            8,
            Goal::Share(0.90),
        ),
        w(
            "512k-seqwrite-qd8",
            512 * KIB,
            false,
            false,
            8,
            Goal::Share(0.90),
        ),
    ]
}

/// Who serves a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Server {
    /// fio on the file or device itself: the local limit.
    Fio,
    Ironlun,
    TgtRdwr,
    TgtAio,
}

impl Server {
    pub const ALL: [Server; 4] = [
        Server::Fio,
        Server::Ironlun,
        Server::TgtRdwr,
        Server::TgtAio,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Server::Fio => "fio (local)",
            Server::Ironlun => "ironlun",
            Server::TgtRdwr => "tgt rdwr",
            Server::TgtAio => "tgt aio",
        }
    }
}

/// Where the data lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Device {
    /// A regular file on the machine's disk.
    File,
    /// A loop device over that file, with direct I/O.
    Block,
}

impl Device {
    pub fn name(self) -> &'static str {
        match self {
            Device::File => "file",
            Device::Block => "block (loop, direct I/O)",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    /// The ironlun binary (target and bench).
    pub exe: PathBuf,
    pub reps: usize,
    pub measure: Duration,
    /// The file on the disk (created with random data when missing or of
    /// another size).
    pub file: PathBuf,
    pub size: u64,
    /// Remove the file afterwards.
    pub remove: bool,
    /// Also the loop-device rows.
    pub block: bool,
    /// Only workloads whose name contains one of these (empty: all).
    pub only: Vec<String>,
    /// A run with at least this much steal (percent) is run again.
    pub steal_redo_pct: f64,
    pub started: String,
}

/// Samples of one workload on one device, per server.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub device: Device,
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
    pub size: u64,
    pub file: PathBuf,
    /// The loop device, when the block rows ran; else why not.
    pub block_device: Result<String, String>,
    pub rows: Vec<Row>,
    /// Runs that failed, with why.
    pub failures: Vec<String>,
    /// Runs repeated for steal, and the steal that made them so.
    pub redone: usize,
    pub steal_redo_pct: f64,
    pub elapsed_s: f64,
}

fn progress(msg: &str) {
    eprintln!("{msg}");
}

/// One exported device: the URLs of each server's LUN on it (fio's
/// "URL" is the path).
struct Exported {
    device: Device,
    path: String,
    urls: Vec<(Server, String)>,
}

/// tgt's target for each device.
fn tgt_iqn(d: Device) -> &'static str {
    match d {
        Device::File => "iqn.2026-11.io.ironlun.compare:tgt-local-file",
        Device::Block => "iqn.2026-11.io.ironlun.compare:tgt-local-block",
    }
}

/// ironlun's target, with one LUN per device in order.
const IRONLUN_IQN: &str = "iqn.2026-11.io.ironlun.compare:local";

/// Runs the whole comparison. Failed runs are listed in the report; they
/// never stop the others.
pub fn run(opts: &Options) -> Result<Report, String> {
    let started = Instant::now();
    prepare_file(&opts.file, opts.size)?;
    let file = opts.file.to_string_lossy().into_owned();
    let loopdev = if opts.block {
        LoopDevice::attach(&opts.file)
    } else {
        Err("not asked for (--block)".into())
    };
    let mut devices = vec![(Device::File, file)];
    if let Ok(l) = &loopdev {
        devices.push((Device::Block, l.path.clone()));
    }
    let tgt = start_tgt(&devices)?;
    let ironlun = start_ironlun(&opts.exe, &devices)?;
    let exported = export(&devices, &ironlun, &tgt);
    let scratch =
        std::env::temp_dir().join(format!("ironlun-compare-local-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let mut runner = Runner {
        opts,
        ctx: RunCtx {
            exe: opts.exe.clone(),
            measure: opts.measure,
            scratch: scratch.clone(),
        },
        ironlun: &ironlun,
        tgt: &tgt,
        failures: Vec::new(),
        redone: 0,
    };
    let mut rows = planned_rows(opts, &exported);
    for rep in 0..opts.reps {
        for (i, row) in rows.iter_mut().enumerate() {
            let Some(e) = exported.iter().find(|e| e.device == row.device) else {
                continue;
            };
            runner.run_row(rep, i, row, e);
        }
    }
    let Runner {
        failures, redone, ..
    } = runner;
    drop(ironlun);
    drop(tgt);
    drop(loopdev);
    let _ = std::fs::remove_dir_all(&scratch);
    if opts.remove {
        let _ = std::fs::remove_file(&opts.file);
    }
    let mut versions = crate::summary::versions(&opts.exe);
    versions.push(("fio".into(), fio_version()));
    Ok(Report {
        date: opts.started.clone(),
        host: ironlun_bench::result::HostInfo::detect(),
        versions,
        reps: opts.reps,
        measure_s: opts.measure.as_secs_f64(),
        size: opts.size,
        file: opts.file.clone(),
        block_device: loopdev_name(opts.block, &exported),
        rows,
        failures,
        redone,
        steal_redo_pct: opts.steal_redo_pct,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

/// tgt with one target per device, each with two LUNs on it: LUN 1 the
/// `rdwr` store with `bsoflags direct`, LUN 2 the `aio` store.
fn start_tgt(devices: &[(Device, String)]) -> Result<Daemon, String> {
    let tgt_targets: Vec<(&str, Vec<TgtLun>)> = devices
        .iter()
        .map(|(d, p)| {
            let rdwr = TgtLun {
                path: p.clone(),
                bsoflags: Some("direct"),
                ..TgtLun::default()
            };
            let aio = TgtLun {
                path: p.clone(),
                bstype: Some("aio"),
                ..TgtLun::default()
            };
            (tgt_iqn(*d), vec![rdwr, aio])
        })
        .collect();
    Daemon::start_tgt_with(daemons::free_loopback_addr()?, &tgt_targets)
}

/// `ironlun target` with one `O_DIRECT` LUN per device.
fn start_ironlun(exe: &Path, devices: &[(Device, String)]) -> Result<Daemon, String> {
    let specs: Vec<String> = devices
        .iter()
        .map(|(d, p)| match d {
            Device::File => format!("file:{p},direct"),
            Device::Block => format!("block:{p},direct"),
        })
        .collect();
    Daemon::start_ironlun_with(
        exe,
        daemons::free_loopback_addr()?,
        IRONLUN_IQN,
        &specs,
        &[],
    )
}

/// Each device with the URL of every target's LUN on it.
fn export(devices: &[(Device, String)], ironlun: &Daemon, tgt: &Daemon) -> Vec<Exported> {
    devices
        .iter()
        .enumerate()
        .map(|(i, (d, p))| Exported {
            device: *d,
            path: p.clone(),
            urls: vec![
                (Server::Ironlun, ironlun.lun_url(IRONLUN_IQN, i as u16)),
                (Server::TgtRdwr, tgt.lun_url(tgt_iqn(*d), 1)),
                (Server::TgtAio, tgt.lun_url(tgt_iqn(*d), 2)),
            ],
        })
        .collect()
}

/// Every workload (of those asked for) on every exported device, without
/// samples yet.
fn planned_rows(opts: &Options, exported: &[Exported]) -> Vec<Row> {
    let mut rows = Vec::new();
    for e in exported {
        for w in workloads() {
            if opts.only.is_empty() || opts.only.iter().any(|o| w.name.contains(o.as_str())) {
                rows.push(Row {
                    device: e.device,
                    workload: w,
                    samples: Server::ALL.iter().map(|s| (*s, Vec::new())).collect(),
                });
            }
        }
    }
    rows
}

/// The servers under comparison and what their runs share; collects the
/// failed runs and counts the redone ones.
struct Runner<'a> {
    opts: &'a Options,
    ctx: RunCtx,
    ironlun: &'a Daemon,
    tgt: &'a Daemon,
    failures: Vec<String>,
    redone: usize,
}

impl Runner<'_> {
    /// Runs row `i` with every server in repetition `rep`, on the device
    /// `e` exports.
    fn run_row(&mut self, rep: usize, i: usize, row: &mut Row, e: &Exported) {
        // A different server goes first in each row and repetition.
        let mut order = Server::ALL.to_vec();
        order.rotate_left((rep + i) % Server::ALL.len());
        let mut line = format!(
            "[rep {}/{}] {} {}:",
            rep + 1,
            self.opts.reps,
            row.device.name(),
            row.workload.name
        );
        for server in order {
            match self.run_server(server, &row.workload.shape, e) {
                Ok((mut s, tries)) => {
                    self.redone += tries - 1;
                    s.rep = rep;
                    run_text(&mut line, server.name(), &row.workload.shape, &s, tries);
                    row.samples.add(server, s);
                }
                Err(err) => {
                    line.push_str(&format!(" {} FAILED", server.name()));
                    self.failures.push(format!(
                        "{} {} {}: {err}",
                        row.device.name(),
                        row.workload.name,
                        server.name()
                    ));
                }
            }
        }
        progress(&line);
    }

    /// One run of `shape` by `server` on the device `e` exports, run again
    /// for steal ([`least_steal`]); with how many tries it took.
    fn run_server(
        &self,
        server: Server,
        shape: &Shape,
        e: &Exported,
    ) -> Result<(Sample, usize), String> {
        let pid = match server {
            Server::Fio => None,
            Server::Ironlun => Some(self.ironlun.pid()),
            Server::TgtRdwr | Server::TgtAio => Some(self.tgt.pid()),
        };
        let target = e.urls.iter().find(|(s, _)| *s == server).map(|(_, u)| u);
        let once = || match (server, target, pid) {
            (Server::Fio, _, _) => fio(&e.path, shape, self.opts.size, self.opts.measure),
            (_, Some(url), Some(pid)) => {
                clients::bench(&self.ctx, shape, std::slice::from_ref(url), pid)
            }
            _ => Err("no URL for this server".into()),
        };
        least_steal(self.opts.steal_redo_pct, once)
    }
}

fn loopdev_name(asked: bool, exported: &[Exported]) -> Result<String, String> {
    match exported.iter().find(|e| e.device == Device::Block) {
        Some(e) => Ok(e.path.clone()),
        None if asked => Err("no loop device could be attached (see the log)".into()),
        None => Err("not asked for".into()),
    }
}

/// Runs `once` until its steal is below `redo_pct`, at most [`MAX_TRIES`]
/// times; keeps the run with the least steal.
pub(crate) fn least_steal(
    redo_pct: f64,
    once: impl Fn() -> Result<Sample, String>,
) -> Result<(Sample, usize), String> {
    let mut best: Option<Sample> = None;
    let mut tries = 0;
    while tries < MAX_TRIES {
        tries += 1;
        let s = once()?;
        let done = s.steal_pct < redo_pct;
        if best.as_ref().is_none_or(|b| s.steal_pct < b.steal_pct) {
            best = Some(s);
        }
        if done {
            break;
        }
    }
    best.map(|b| (b, tries)).ok_or_else(|| "no run".into())
}

/// Creates `path` with `size` bytes of pseudo-random data (incompressible,
/// every block allocated) unless it already has that size.
pub fn prepare_file(path: &Path, size: u64) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    if std::fs::metadata(path).is_ok_and(|m| m.len() == size) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    progress(&format!(
        "writing {} MiB of random data to {}",
        size >> 20,
        path.display()
    ));
    let mut f = std::fs::File::create(path).map_err(err)?;
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ size;
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        for w in chunk.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(chunk.get(..n).unwrap_or(&chunk)).map_err(err)?;
        left -= n as u64;
    }
    f.sync_all().map_err(err)
}

/// A loop device over a file, with direct I/O; detached when dropped.
struct LoopDevice {
    path: String,
}

impl LoopDevice {
    fn attach(file: &Path) -> Result<LoopDevice, String> {
        let out = Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on"])
            .arg(file)
            .output()
            .map_err(|e| format!("cannot run losetup: {e}"))?;
        let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() || !path.starts_with("/dev/") {
            let why = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            progress(&format!("no loop device, so no block rows: {why}"));
            return Err(format!("losetup: {why}"));
        }
        progress(&format!("loop device {path} over {}", file.display()));
        Ok(LoopDevice { path })
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.path]).status();
    }
}

fn fio_version() -> String {
    Command::new("fio")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

/// fio with io_uring and `O_DIRECT` on `path`: one job, a one-second ramp
/// excluded, offsets aligned to the transfer size (fio's default).
fn fio(path: &str, shape: &Shape, size: u64, measure: Duration) -> Result<Sample, String> {
    let rw = match (shape.read, shape.random) {
        (true, true) => "randread",
        (false, true) => "randwrite",
        (true, false) => "read",
        (false, false) => "write",
    };
    let host = HostCpu::sample();
    let out = Command::new("fio")
        .args([
            "--name=local",
            "--ioengine=io_uring",
            "--direct=1",
            "--thread",
        ])
        .arg(format!("--filename={path}"))
        .arg(format!("--rw={rw}"))
        .arg(format!("--bs={}", shape.block_size))
        .arg(format!("--iodepth={}", shape.queue_depth))
        .arg(format!("--size={size}"))
        .arg(format!("--runtime={}ms", measure.as_millis()))
        .args([
            "--ramp_time=1",
            "--time_based",
            "--norandommap",
            "--randrepeat=0",
        ])
        .args(["--output-format=json"])
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run fio (Debian package fio): {e}"))?;
    let steal = clients::steal_between(host, HostCpu::sample());
    if !out.status.success() {
        return Err(format!(
            "fio failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut s = parse_fio(&String::from_utf8_lossy(&out.stdout), shape.read)?;
    s.steal_pct = steal;
    Ok(s)
}

/// The sample in fio's JSON report (its first job, the direction run).
pub fn parse_fio(json: &str, read: bool) -> Result<Sample, String> {
    // fio may print warnings before the JSON object.
    let start = json.find('{').ok_or("fio printed no JSON")?;
    let v: serde_json::Value = serde_json::from_str(json.get(start..).unwrap_or(""))
        .map_err(|e| format!("fio JSON: {e}"))?;
    let job = v.pointer("/jobs/0").ok_or("fio JSON has no job")?;
    let dir = job
        .get(if read { "read" } else { "write" })
        .ok_or("fio JSON has no direction")?;
    let num = |v: &serde_json::Value, p: &str| v.pointer(p).and_then(|x| x.as_f64());
    let iops = num(dir, "/iops").ok_or("fio JSON has no iops")?;
    let cores = (num(job, "/usr_cpu").unwrap_or(0.0) + num(job, "/sys_cpu").unwrap_or(0.0)) / 100.0;
    let seconds = num(job, "/job_runtime").unwrap_or(0.0) / 1e3;
    Ok(Sample {
        iops,
        mb_per_s: num(dir, "/bw_bytes").unwrap_or(0.0) / 1e6,
        mean_latency_us: num(dir, "/lat_ns/mean").unwrap_or(0.0) / 1e3,
        client_cpu_us_per_io: (iops > 0.0).then(|| cores * 1e6 / iops),
        client_cores: Some(cores),
        seconds,
        ..Sample::default()
    })
}

pub mod table;
#[cfg(test)]
mod tests;
