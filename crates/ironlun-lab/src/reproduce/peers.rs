//! The target study's other targets (issue 41 item 4): tgt standing in
//! for STGT and istgt for IET, started as `compare-peers` starts them
//! (`ironlun_compare::daemons`) and measured through the lab's initiator
//! over the same emulated 1 Gbit/s link as ironlun's rows. As in the
//! study's tests I, the target's memory is limited by a cgroup
//! (`ironlun_compare::cgroup`) to the study's share of its data; its
//! block rows are a loop device over the LUN file with direct I/O
//! (`ironlun_compare::loopdev`) under each I/O scheduler the kernel
//! offers, and its FILEIO rows a file on XFS on a second loop device,
//! served through the page cache, under each scheduler too (the study's
//! FILEIO was a file on XFS on its disk). ironlun's block and FILEIO rows
//! run the same way, as an `ironlun target` process of its own. Which
//! rows run is planned here ([`plan`]) without root.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ironlun_compare::cgroup::{self, MemoryLimit};
use ironlun_compare::daemons::{self, Daemon, TgtLun};
use ironlun_compare::loopdev::{self, LoopDevice, XfsOnLoop};
use ironlun_compare::workloads::LunKind;
use serde::Serialize;

use super::{Progress, ReproduceOptions};
use crate::cell::Cell;
use crate::runner::{External, Lab};
use crate::sweep;

/// The peers, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Tgt,
    Istgt,
    /// `ironlun target` as a daemon, for the block and FILEIO rows only
    /// (ironlun's other rows are the embedded target's, above): a process
    /// of its own, so its memory can be limited as the peers' is.
    Ironlun,
}

impl Peer {
    pub const ALL: [Peer; 3] = [Peer::Tgt, Peer::Istgt, Peer::Ironlun];

    pub fn name(self) -> &'static str {
        match self {
            Peer::Tgt => "tgt",
            Peer::Istgt => "istgt",
            Peer::Ironlun => "ironlun",
        }
    }

    /// The study's target whose published row this peer's stands beside.
    pub fn stands_for(self) -> &'static str {
        match self {
            Peer::Tgt => "stgt",
            Peer::Istgt => "iet",
            Peer::Ironlun => "iscsi-scst",
        }
    }

    fn program(self) -> &'static str {
        match self {
            Peer::Tgt => "tgtd",
            Peer::Istgt => "istgt",
            Peer::Ironlun => "ironlun",
        }
    }

    /// Why this peer cannot serve `backend`, when it cannot.
    pub fn unsupported(self, backend: &str) -> Option<String> {
        match (self, backend) {
            (Peer::Istgt, "null") => {
                ironlun_compare::istgt::unsupported_lun(LunKind::Null).map(str::to_owned)
            }
            (Peer::Istgt, "file-direct") => Some(
                "not supported by istgt (its configuration has no direct I/O for a file; its direct rows are the block rows)".into(),
            ),
            _ => None,
        }
    }
}

/// The study's backends as run on a file LUN.
pub const FILE_BACKENDS: [&str; 3] = ["null", "file", "file-direct"];
/// The schedulers of the block rows: none, and the successors of the
/// study's deadline (mq-deadline) and CFQ (bfq, CFQ's closest
/// proportional-share heir; CFQ left the kernel in 5.0).
pub const SCHEDULERS: [&str; 3] = ["none", "mq-deadline", "bfq"];
const OPS: [&str; 2] = ["read", "write"];

/// One row of a peer: measured, or skipped with why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeerRow {
    pub target: &'static str,
    pub stands_for: &'static str,
    /// dd-read-raw or dd-write-raw (the study's tests I.1 and I.2).
    pub test: &'static str,
    /// null, file (page cache), file-direct (O_DIRECT), block (a loop
    /// device with direct I/O).
    pub backend: &'static str,
    /// The block device's scheduler; "not set" for a file on the lab's
    /// own directory, none for null. A file row with a scheduler is a
    /// FILEIO row: its file is on XFS on a loop device with that
    /// scheduler.
    pub scheduler: Option<String>,
    /// The target's memory limit in bytes, when one was applied ("none"
    /// in the table: see the notes for why).
    pub memory_limit: Option<u64>,
    /// The most memory the target's group used (page cache included)
    /// by the end of the row, bytes.
    pub memory_peak: Option<u64>,
    pub mb_per_s: Option<f64>,
    pub target_cpu_pct: Option<f64>,
    pub steal_pct: Option<f64>,
    /// Why the row was not measured.
    pub skipped: Option<String>,
}

impl PeerRow {
    /// Which of a peer's LUNs serves the row: its backend, or "fileio"
    /// for a file on the XFS loop device.
    fn lun(&self) -> &'static str {
        let on_xfs =
            self.backend == "file" && self.scheduler.as_deref().is_some_and(|s| s != "not set");
        if on_xfs {
            "fileio"
        } else {
            self.backend
        }
    }

    fn op(&self) -> &'static str {
        if self.test == "dd-read-raw" {
            "read"
        } else {
            "write"
        }
    }
}

/// The study's limit: 256 MB of RAM against 5 GB of data, a twentieth,
/// but never under 32 MiB (the daemon's own memory).
pub fn memory_limit(lun_size: u64) -> u64 {
    (lun_size / 20).max(32 << 20)
}

/// The rows of `peer`: the file backends, then the block rows and the
/// FILEIO rows per scheduler (`block`, `fileio`: the schedulers the loop
/// device offers, or why there is no loop device or no file system on
/// one; `None`: no such rows in this run).
pub fn plan(
    peer: Peer,
    installed: bool,
    block: Option<&Result<Vec<String>, String>>,
    fileio: Option<&Result<Vec<String>, String>>,
) -> Vec<PeerRow> {
    let mut rows = Vec::new();
    let row = |backend: &'static str, op: &str, scheduler: Option<String>| PeerRow {
        target: peer.name(),
        stands_for: peer.stands_for(),
        test: if op == "read" {
            "dd-read-raw"
        } else {
            "dd-write-raw"
        },
        backend,
        scheduler,
        memory_limit: None,
        memory_peak: None,
        mb_per_s: None,
        target_cpu_pct: None,
        steal_pct: None,
        skipped: None,
    };
    let file_backends: &[&'static str] = match peer {
        Peer::Ironlun => &[],
        _ => &FILE_BACKENDS,
    };
    for &backend in file_backends {
        let sched = (backend != "null").then(|| "not set".to_owned());
        for op in OPS {
            let mut r = row(backend, op, sched.clone());
            r.skipped = peer.unsupported(backend);
            rows.push(r);
        }
    }
    for (backend, device) in [("block", block), ("file", fileio)] {
        let Some(device) = device else { continue };
        let planned = match device {
            Ok(offered) => loopdev::plan_schedulers(&SCHEDULERS, offered),
            Err(e) => SCHEDULERS.iter().map(|s| (*s, Some(e.clone()))).collect(),
        };
        for (sched, skip) in planned {
            for op in OPS {
                let mut r = row(backend, op, Some(sched.to_owned()));
                r.skipped = skip.clone();
                rows.push(r);
            }
        }
    }
    if !installed {
        let why = match peer {
            Peer::Ironlun => {
                "the lab was not told the ironlun binary (`ironlun reproduce` tells it): not run"
                    .to_owned()
            }
            _ => format!(
                "{} is not installed (Debian package {}): not run",
                peer.program(),
                peer.name()
            ),
        };
        for r in &mut rows {
            r.skipped.get_or_insert_with(|| why.clone());
        }
    }
    rows
}

/// Whether `peer`'s daemon can be started (it is on PATH; ironlun's
/// binary is the one the options name).
fn installed(peer: Peer, opts: &ReproduceOptions) -> bool {
    match peer {
        Peer::Istgt => return ironlun_compare::istgt::installed(),
        Peer::Ironlun => return opts.target_exe.is_some(),
        Peer::Tgt => {}
    }
    std::process::Command::new(peer.program())
        .arg("-h")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// A file removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What the peers measured, and notes on how (the memory limit, the
/// schedulers offered, the rows skipped). Each row runs over the link of
/// ironlun's row in `like` of its backend and direction ([`peer_cell`]).
pub(super) fn run(
    opts: &ReproduceOptions,
    with_block: bool,
    like: &[Cell],
    progress: Progress<'_>,
) -> Result<(Vec<PeerRow>, Vec<String>), String> {
    let present: Vec<(Peer, bool)> = Peer::ALL
        .iter()
        .map(|p| (*p, installed(*p, opts)))
        .collect();
    let mut notes = Vec::new();
    if !present.iter().any(|(p, i)| *i && *p != Peer::Ironlun) {
        let rows = present.iter().flat_map(|(p, i)| plan(*p, *i, None, None));
        return Ok((rows.collect(), notes));
    }
    let file = Scratch(
        opts.lab
            .dir
            .join(format!("ironlun-peer-{}.img", std::process::id())),
    );
    progress("writing the peers' LUN file");
    daemons::fill_file(&file.0, opts.lab.lun_size)?;
    let dev = with_block.then(|| LoopDevice::attach(&file.0));
    let block = dev.as_ref().map(|d| match d {
        Ok(d) => d.schedulers().map(|(offered, _)| offered),
        Err(e) => Err(format!("no loop device: {e}")),
    });
    if let Some(Ok(offered)) = &block {
        notes.push(format!("The block rows are a loop device with direct I/O over the LUN file on the disk; its I/O schedulers offered by this kernel: {}.", offered.join(", ")));
    }
    let xfs = with_block.then(|| fileio_lun(opts, progress));
    let fileio = xfs.as_ref().map(|x| match x {
        Ok((fs, _)) => fs.dev.schedulers().map(|(offered, _)| offered),
        Err(e) => Err(format!("no file system on a loop device: {e}")),
    });
    if let Some(Ok(_)) = &fileio {
        notes.push("The FILEIO rows (file, with a scheduler) serve a file on XFS made on a second loop device with direct I/O over a file on the disk, through the page cache, as the study's FILEIO served a file on XFS; the scheduler is the loop device's.".into());
    }
    let limit = memory_limit(opts.lab.lun_size);
    let hierarchy = cgroup::host_hierarchy();
    notes.push(match &hierarchy {
        Ok(h) => format!("Each peer's memory was limited to {} MiB ({}; the study's 256 MB against 5 GB of data, a twentieth of the {} MiB LUN, at least 32 MiB), its LUN file's pages dropped from the cache before it started (and the FILEIO file's before each FILEIO row); so was `ironlun target` serving the block and FILEIO rows. ironlun's other rows run in the lab's process and are not limited.", limit >> 20, h.describe(), opts.lab.lun_size >> 20),
        Err(e) => format!("The peers' memory limit was NOT applied: {e}."),
    });
    let mut lab = Lab::new(opts.lab.clone())?;
    let mut rows = Vec::new();
    for (peer, inst) in present {
        let mut planned = plan(peer, inst, block.as_ref(), fileio.as_ref());
        if inst {
            let dev = dev.as_ref().and_then(|d| d.as_ref().ok());
            let ctx = Ctx {
                file: &file.0,
                exe: opts.target_exe.as_deref(),
                dev,
                xfs: xfs.as_ref().and_then(|x| x.as_ref().ok()),
                limit: hierarchy.as_ref().ok().map(|h| (h, limit)),
            };
            let ran = run_peer(peer, &ctx, &mut planned, &mut lab, (opts, like), progress);
            notes.extend(ran);
        }
        rows.extend(planned);
    }
    lab.close();
    Ok((rows, notes))
}

struct Ctx<'a> {
    file: &'a Path,
    exe: Option<&'a Path>,
    dev: Option<&'a LoopDevice>,
    /// The FILEIO rows' file system and the LUN file on it.
    xfs: Option<&'a (XfsOnLoop, PathBuf)>,
    limit: Option<(&'a cgroup::Hierarchy, u64)>,
}

impl Ctx<'_> {
    /// The path that serves LUN kind `lun` (see [`PeerRow::lun`]).
    fn storage(&self, lun: &str) -> Result<PathBuf, String> {
        match lun {
            "block" => Ok(self.dev.ok_or("no loop device")?.path.clone()),
            "fileio" => Ok(self.xfs.ok_or("no XFS loop device")?.1.clone()),
            _ => Ok(self.file.to_owned()),
        }
    }
}

/// XFS on a loop device in the lab's directory, with a LUN file of the
/// lab's size written on it.
fn fileio_lun(
    opts: &ReproduceOptions,
    progress: Progress<'_>,
) -> Result<(XfsOnLoop, PathBuf), String> {
    let stem = format!("ironlun-peer-{}-xfs", std::process::id());
    let image = opts.lab.dir.join(format!("{stem}.img"));
    progress("making XFS on a loop device for the FILEIO rows");
    let fs = XfsOnLoop::make(&image, opts.lab.lun_size, &opts.lab.dir.join(stem))?;
    let lun = fs.mount.join("lun.img");
    daemons::fill_file(&lun, opts.lab.lun_size)?;
    Ok((fs, lun))
}

/// Which LUN serves a backend: (backend, target name, LUN number).
type LunMap = Vec<(&'static str, String, u16)>;

/// A running peer: the daemon, its memory limit, and which of its LUNs
/// serves each backend.
struct Serving {
    daemon: Daemon,
    limit: Option<MemoryLimit>,
    /// Why the memory limit was not applied, when it was asked for.
    limit_error: Option<String>,
    addr: SocketAddr,
    luns: LunMap,
}

impl Serving {
    fn stop(self) {
        drop(self.daemon);
        drop(self.limit);
    }
}

/// Starts `peer` serving `backends` (LUN kinds, [`PeerRow::lun`]), with
/// the files' pages dropped from the cache first.
fn start(peer: Peer, ctx: &Ctx<'_>, backends: &[&'static str]) -> Result<Serving, String> {
    daemons::drop_cached(ctx.file)?;
    if backends.contains(&"fileio") {
        daemons::drop_cached(&ctx.storage("fileio")?)?;
    }
    let addr = daemons::free_loopback_addr()?;
    let (daemon, luns) = match peer {
        Peer::Tgt => start_tgt(addr, ctx, backends)?,
        Peer::Istgt => {
            // One LUN per daemon: `run_peer` starts one per kind.
            let storage = ctx.storage(backends.first().copied().unwrap_or("file"))?;
            let dir = std::env::temp_dir();
            let d = Daemon::start_istgt(addr, &storage, &dir)?;
            let iqn = ironlun_compare::istgt::FILE_IQN.to_owned();
            let luns = backends.iter().map(|b| (*b, iqn.clone(), 0)).collect();
            (d, luns)
        }
        Peer::Ironlun => {
            let exe = ctx.exe.ok_or("no ironlun binary")?;
            let iqn = "iqn.2026-11.io.ironlun.reproduce:ironlun";
            let mut specs = Vec::new();
            let mut luns = Vec::new();
            for b in backends {
                let path = ctx.storage(b)?;
                specs.push(match *b {
                    "block" => format!("block:{},direct", path.display()),
                    "fileio" => format!("file:{}", path.display()),
                    other => return Err(format!("ironlun's daemon serves no {other} rows")),
                });
                let lun = u16::try_from(luns.len()).map_err(|_| "too many LUNs")?;
                luns.push((*b, iqn.to_owned(), lun));
            }
            (
                Daemon::start_ironlun_with(exe, addr, iqn, &specs, &[])?,
                luns,
            )
        }
    };
    let (limit, limit_error) = match ctx.limit {
        Some((h, bytes)) => {
            let name = format!("ironlun-{}-{}", peer.name(), daemon.pid());
            match MemoryLimit::apply(h, &name, daemon.pid(), bytes) {
                Ok(l) => (Some(l), None),
                Err(e) => (None, Some(e)),
            }
        }
        None => (None, None),
    };
    Ok(Serving {
        daemon,
        limit,
        limit_error,
        addr,
        luns,
    })
}

fn start_tgt(
    addr: SocketAddr,
    ctx: &Ctx<'_>,
    backends: &[&'static str],
) -> Result<(Daemon, LunMap), String> {
    let iqn = "iqn.2026-11.io.ironlun.reproduce:tgt";
    let path = ctx.file.to_string_lossy().into_owned();
    let mut luns = Vec::new();
    let mut map = Vec::new();
    for b in backends {
        let lun = match *b {
            "null" => TgtLun::null(),
            "file" => TgtLun::plain(&path),
            "file-direct" => TgtLun {
                bsoflags: Some("direct"),
                ..TgtLun::plain(&path)
            },
            "block" => match ctx.dev {
                Some(d) => TgtLun {
                    bsoflags: Some("direct"),
                    ..TgtLun::plain(&d.path.to_string_lossy())
                },
                None => continue,
            },
            "fileio" => match ctx.storage("fileio") {
                Ok(p) => TgtLun::plain(&p.to_string_lossy()),
                Err(_) => continue,
            },
            _ => continue,
        };
        luns.push(lun);
        map.push((*b, iqn.to_owned(), u16::try_from(luns.len()).unwrap_or(0)));
    }
    let d = Daemon::start_tgt_with(addr, &[(iqn, luns)])?;
    Ok((d, map))
}

/// Runs the rows of `peer` that are not skipped: tgt and `ironlun
/// target` serve every LUN kind from one daemon, istgt (one LUN per
/// daemon) the file, the block device and the FILEIO file from one each. Returns notes (a limit not applied).
fn run_peer(
    peer: Peer,
    ctx: &Ctx<'_>,
    rows: &mut [PeerRow],
    lab: &mut Lab,
    how: (&ReproduceOptions, &[Cell]),
    progress: Progress<'_>,
) -> Vec<String> {
    let mut notes = Vec::new();
    let wanted = |rows: &[PeerRow]| {
        let mut b: Vec<&'static str> = Vec::new();
        for r in rows.iter().filter(|r| r.skipped.is_none()) {
            if !b.contains(&r.lun()) {
                b.push(r.lun());
            }
        }
        b
    };
    let groups: Vec<Vec<&'static str>> = match peer {
        Peer::Tgt | Peer::Ironlun => vec![wanted(rows)],
        Peer::Istgt => wanted(rows).into_iter().map(|b| vec![b]).collect(),
    };
    for backends in groups.into_iter().filter(|g| !g.is_empty()) {
        progress(&format!("{}: {}", peer.name(), backends.join(", ")));
        let serving = match start(peer, ctx, &backends) {
            Ok(s) => s,
            Err(e) => {
                let why = format!("{} did not start: {e}", peer.name());
                for r in rows.iter_mut().filter(|r| backends.contains(&r.lun())) {
                    r.skipped.get_or_insert_with(|| why.clone());
                }
                continue;
            }
        };
        if let Some(e) = &serving.limit_error {
            notes.push(format!(
                "The memory limit was NOT applied to {} ({}): {e}.",
                peer.name(),
                backends.join(", ")
            ));
        }
        for r in rows
            .iter_mut()
            .filter(|r| r.skipped.is_none() && backends.contains(&r.lun()))
        {
            if let Err(e) = measure(r, &serving, ctx, lab, how) {
                r.skipped = Some(format!("failed: {e}"));
            }
        }
        lab.close();
        serving.stop();
    }
    notes
}

/// The study's test I cell (512 KiB, queue depth 1, 1 Gbit/s) for `op`
/// over the link of ironlun's row in `like` with the same direction and
/// backend (a block row takes the file row's; none: the study's link
/// alone): the same rate, round trip, window and host time held per
/// command, so the peers' rows compare with ironlun's.
pub fn peer_cell(op: &str, backend: &str, like: &[Cell]) -> Result<Cell, String> {
    let s = super::target_backends::seq_sweep(r#"["file"]"#, &format!(r#"["{op}"]"#))?;
    let mut cell = s
        .cells()?
        .into_iter()
        .next()
        .ok_or_else(|| "no cell".to_owned())?;
    let backend = if backend == "block" { "file" } else { backend };
    let same = |c: &&Cell| c.op == cell.op && c.bs == cell.bs && c.backend == backend;
    if let Some(l) = like.iter().find(same) {
        cell.imposed = l.imposed;
        cell.tcp_window = l.tcp_window; // the relay's is in `imposed`
        cell.link_rate = l.link_rate;
        cell.rtt = l.rtt;
    }
    Ok(cell)
}

fn measure(
    r: &mut PeerRow,
    s: &Serving,
    ctx: &Ctx<'_>,
    lab: &mut Lab,
    (opts, like): (&ReproduceOptions, &[Cell]),
) -> Result<(), String> {
    let (_, iqn, lun) = s
        .luns
        .iter()
        .find(|(b, _, _)| *b == r.lun())
        .ok_or("no LUN for this backend")?;
    let device = match r.lun() {
        "block" => Some(ctx.dev.ok_or("no loop device")?),
        "fileio" => {
            // Each FILEIO row starts with none of the file cached, so no
            // row reads what an earlier one left behind.
            daemons::drop_cached(&ctx.storage("fileio")?)?;
            Some(&ctx.xfs.ok_or("no XFS loop device")?.0.dev)
        }
        _ => None,
    };
    if let Some(d) = device {
        d.set_scheduler(r.scheduler.as_deref().ok_or("no scheduler")?)?;
    }
    let cell = peer_cell(r.op(), r.backend, like)?;
    let ext = External {
        portal: s.addr,
        iqn: iqn.clone(),
        lun: *lun,
        pid: s.daemon.pid(),
    };
    lab.serve_from(&cell.backend, Some(ext));
    let (time, ramp) = sweep::cell_time(opts.cell_time, &cell, None);
    let m = lab.run(&cell, time, ramp, false)?;
    r.mb_per_s = Some(m.mb_per_s);
    r.target_cpu_pct = m.target_cpu_pct;
    r.steal_pct = m.steal_pct;
    r.memory_limit = s.limit.as_ref().map(|l| l.bytes);
    r.memory_peak = s.limit.as_ref().and_then(MemoryLimit::peak);
    Ok(())
}

/// The rows as a text table.
pub fn table(rows: &[PeerRow]) -> String {
    let mut s = format!(
        "{:<7} {:<10} {:<13} {:<12} {:<12} {:>8} {:>8} {:>8} {:>8}\n",
        "target", "for", "test", "backend", "scheduler", "memory", "MB/s", "CPU %", "peak"
    );
    for r in rows {
        let mem = r
            .memory_limit
            .map_or("none".to_owned(), |b| format!("{}MiB", b >> 20));
        let line = format!(
            "{:<7} {:<10} {:<13} {:<12} {:<12} {:>8}",
            r.target,
            r.stands_for,
            r.test,
            r.backend,
            r.scheduler.as_deref().unwrap_or("-"),
            mem
        );
        match (&r.skipped, r.mb_per_s) {
            (Some(why), _) => s.push_str(&format!("{line}  {why}\n")),
            (None, v) => s.push_str(&format!(
                "{line} {:>8} {:>8} {:>8}\n",
                v.map_or("-".into(), |v| format!("{v:.1}")),
                r.target_cpu_pct.map_or("-".into(), |c| format!("{c:.0}")),
                r.memory_peak
                    .map_or("-".into(), |b| format!("{:.1}MiB", b as f64 / 1048576.0))
            )),
        }
    }
    s
}

/// The rows in one line each, for the HTML report.
pub fn summary(rows: &[PeerRow]) -> String {
    let line = |r: &PeerRow| {
        let what = match (&r.skipped, r.mb_per_s) {
            (Some(why), _) => why.clone(),
            (None, v) => v.map_or("-".into(), |v| format!("{v:.1} MB/s")),
        };
        format!(
            "{} (for {}) {} {}{}: {what}",
            r.target,
            r.stands_for,
            r.test,
            r.backend,
            r.scheduler
                .as_deref()
                .map_or(String::new(), |s| format!(" [{s}]"))
        )
    };
    rows.iter().map(line).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(rows: &[PeerRow]) -> Vec<(&str, &str, Option<&str>)> {
        rows.iter()
            .map(|r| (r.backend, r.test, r.skipped.as_deref()))
            .collect()
    }

    /// A peer's row runs over the link of ironlun's row of its backend
    /// and direction (the file row's for a block row), held as long.
    #[test]
    fn a_peer_row_takes_the_link_of_ironluns_row() {
        let row = |op: &str, backend: &str, ms: u64| {
            let mut c = peer_cell(op, "file", &[]).unwrap();
            c.backend = backend.into();
            c.imposed.host_delay = std::time::Duration::from_millis(ms);
            c.imposed.base_rtt = std::time::Duration::from_micros(54);
            c.imposed.payload_bps = Some(949_000_000);
            c
        };
        let like = [
            row("read", "null", 1),
            row("read", "file", 2),
            row("write", "file", 3),
        ];
        let held = |op, backend| {
            let c = peer_cell(op, backend, &like).unwrap();
            assert_eq!(c.backend, "file");
            assert_eq!(c.link_rtt(), std::time::Duration::from_micros(54));
            assert_eq!(c.relay_rate(), Some(949_000_000));
            c.imposed.host_delay.as_millis()
        };
        assert_eq!(held("read", "null"), 1);
        assert_eq!(held("read", "file"), 2);
        assert_eq!(held("read", "block"), 2);
        assert_eq!(held("write", "block"), 3);
        // No row of ironlun's: the study's link alone.
        let bare = peer_cell("write", "file-direct", &like).unwrap();
        assert_eq!(bare.imposed, crate::cell::Imposed::default());
    }

    #[test]
    fn tgt_runs_every_file_backend_and_istgt_no_null_or_direct_file() {
        let tgt = plan(Peer::Tgt, true, None, None);
        assert_eq!(tgt.len(), 6);
        assert!(tgt.iter().all(|r| r.skipped.is_none()));
        assert!(tgt.iter().all(|r| r.stands_for == "stgt"));
        let istgt = plan(Peer::Istgt, true, None, None);
        let s = skipped(&istgt);
        assert!(s[0].2.unwrap().starts_with("not supported by istgt"));
        assert_eq!(s[2], ("file", "dd-read-raw", None));
        assert_eq!(s[3], ("file", "dd-write-raw", None));
        assert!(s[4].2.unwrap().starts_with("not supported by istgt"));
        assert!(istgt.iter().all(|r| r.stands_for == "iet"));
        // A null LUN has no disk, so no scheduler; a file's is not set.
        assert_eq!(istgt[0].scheduler, None);
        assert_eq!(istgt[2].scheduler.as_deref(), Some("not set"));
    }

    #[test]
    fn a_missing_peer_is_skipped_with_its_package() {
        let rows = plan(Peer::Tgt, false, None, None);
        assert!(rows
            .iter()
            .all(|r| r.skipped.as_deref()
                == Some("tgtd is not installed (Debian package tgt): not run")));
        // An unsupported row keeps its own reason.
        let rows = plan(Peer::Istgt, false, None, None);
        assert!(rows[0]
            .skipped
            .as_deref()
            .unwrap()
            .starts_with("not supported"));
        assert!(rows[2].skipped.as_deref().unwrap().contains("istgt"));
    }

    #[test]
    fn block_rows_follow_the_schedulers_offered() {
        let offered = Ok(vec!["none".to_owned(), "mq-deadline".to_owned()]);
        let rows = plan(Peer::Tgt, true, Some(&offered), None);
        let block: Vec<&PeerRow> = rows.iter().filter(|r| r.backend == "block").collect();
        assert_eq!(block.len(), 6);
        assert!(block[..4].iter().all(|r| r.skipped.is_none()));
        assert_eq!(block[4].scheduler.as_deref(), Some("bfq"));
        assert!(block[4]
            .skipped
            .as_deref()
            .unwrap()
            .contains("does not offer the bfq scheduler"));
        // Without a loop device every block row says why.
        let none = Err("no loop device: losetup: permission denied".to_owned());
        let rows = plan(Peer::Istgt, true, Some(&none), None);
        let block: Vec<&PeerRow> = rows.iter().filter(|r| r.backend == "block").collect();
        assert_eq!(block.len(), 6);
        assert!(block
            .iter()
            .all(|r| r.skipped.as_deref() == Some("no loop device: losetup: permission denied")));
    }

    #[test]
    fn ironlun_as_a_daemon_runs_the_block_and_fileio_rows_only() {
        let offered = Ok(SCHEDULERS.map(String::from).to_vec());
        let rows = plan(Peer::Ironlun, true, Some(&offered), None);
        assert_eq!(rows.len(), 6);
        assert!(rows
            .iter()
            .all(|r| r.backend == "block" && r.skipped.is_none() && r.stands_for == "iscsi-scst"));
        let rows = plan(Peer::Ironlun, true, Some(&offered), Some(&offered));
        assert_eq!(rows.len(), 12);
        let lun = |r: &PeerRow| (r.lun(), r.scheduler.clone().unwrap_or_default());
        assert_eq!(lun(&rows[6]), ("fileio", "none".to_owned()));
        assert_eq!(lun(&rows[11]), ("fileio", "bfq".to_owned()));
        assert!(plan(Peer::Ironlun, true, None, None).is_empty());
        let rows = plan(Peer::Ironlun, false, Some(&offered), None);
        assert!(rows[0]
            .skipped
            .as_deref()
            .unwrap()
            .contains("ironlun binary"));
    }

    /// A FILEIO row is a file row with a scheduler, served from the XFS
    /// loop device; a file row on the lab's directory keeps "not set".
    #[test]
    fn fileio_rows_are_file_rows_per_scheduler_on_their_own_lun() {
        let offered = Ok(vec!["none".to_owned(), "mq-deadline".to_owned()]);
        let rows = plan(Peer::Istgt, true, None, Some(&offered));
        let fileio: Vec<&PeerRow> = rows.iter().filter(|r| r.lun() == "fileio").collect();
        assert_eq!(fileio.len(), 6);
        assert!(fileio.iter().all(|r| r.backend == "file"));
        assert!(fileio[..4].iter().all(|r| r.skipped.is_none()));
        assert!(fileio[4].skipped.as_deref().unwrap().contains("bfq"));
        let plain = rows.iter().find(|r| r.backend == "file").unwrap();
        assert_eq!(
            (plain.lun(), plain.scheduler.as_deref()),
            ("file", Some("not set"))
        );
        let no_fs = Err("no file system on a loop device: mkfs.xfs: not found".to_owned());
        let rows = plan(Peer::Tgt, true, None, Some(&no_fs));
        let fileio = rows.iter().filter(|r| r.lun() == "fileio");
        assert!(fileio.clone().count() == 6 && fileio.clone().all(|r| r.skipped.is_some()));
    }

    #[test]
    fn the_limit_is_a_twentieth_of_the_data_and_at_least_32_mib() {
        assert_eq!(memory_limit(2 << 30), 2 * (1 << 30) / 20);
        assert_eq!(memory_limit(512 << 20), 32 << 20);
        assert_eq!(memory_limit(1 << 30), (1 << 30) / 20);
    }

    #[test]
    fn a_skipped_row_prints_its_reason_and_a_measured_one_its_rate() {
        let mut rows = plan(Peer::Istgt, true, None, None);
        rows[2].mb_per_s = Some(98.76);
        rows[2].target_cpu_pct = Some(12.0);
        rows[2].memory_limit = Some(32 << 20);
        rows[2].memory_peak = Some(31 << 20);
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].ends_with("not supported by istgt (it has no null backing store)"));
        assert!(lines[3].contains("32MiB"), "{}", lines[3]);
        assert!(lines[3].contains("98.8"), "{}", lines[3]);
        assert!(lines[3].ends_with("31.0MiB"), "{}", lines[3]);
        let html = summary(&rows[..3]);
        assert!(html.contains("istgt (for iet) dd-read-raw file [not set]: 98.8 MB/s"));
    }
}
