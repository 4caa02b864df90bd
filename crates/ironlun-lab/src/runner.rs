//! Runs cells: embedded targets per backend, relays per session when a
//! cell has a link, sessions shared by consecutive cells that negotiate
//! the same way, and the load generator for each measurement.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ironlun_bench::luns::{self, Route};
use ironlun_bench::{AccessLine, LunTarget, RunOptions, Slice, Workload, WorkloadResult};
use ironlun_initiator::PathPolicy;
use ironlun_netem::{LinkSpec, Relay};
use serde::Serialize;
use tracing::info;

use crate::cell::{Cell, Op};
use crate::embedded::{EmbeddedTarget, TARGET_THREADS};
use crate::model::{Calibration, HostCost, HostLine};

/// How the lab sets itself up.
#[derive(Clone, Debug)]
pub struct LabOptions {
    /// Size of each embedded LUN.
    pub lun_size: u64,
    /// Where a file LUN's image goes.
    pub dir: PathBuf,
    /// MaxRecvDataSegmentLength the embedded targets declare (`None`:
    /// [`crate::embedded`]'s 256 KiB).
    pub target_max_recv_dsl: Option<u32>,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            lun_size: 512 << 20,
            dir: std::env::temp_dir(),
            target_max_recv_dsl: None,
        }
    }
}

/// A run during which the hypervisor stole at least this much of the
/// host's CPU (percent) counts as disturbed: calibration runs are redone
/// and reproductions measure such cells again when time allows.
pub const DISTURBED_STEAL_PCT: f64 = 5.0;

/// What one cell measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Measured {
    pub mb_per_s: f64,
    pub mib_per_s: f64,
    pub iops: f64,
    pub latency_mean_us: f64,
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub target_cpu_pct: Option<f64>,
    pub initiator_cpu_pct: Option<f64>,
    /// CPU time the hypervisor stole during the cell, percent of all.
    pub steal_pct: Option<f64>,
}

impl From<&WorkloadResult> for Measured {
    fn from(r: &WorkloadResult) -> Measured {
        Measured {
            mb_per_s: r.mb_per_s,
            mib_per_s: r.mib_per_s,
            iops: r.iops,
            latency_mean_us: r.latency_us.mean,
            latency_p50_us: r.latency_us.p50,
            latency_p99_us: r.latency_us.p99,
            errors: r.errors,
            elapsed_s: r.elapsed_s,
            target_cpu_pct: r.cpu.target_pct,
            initiator_cpu_pct: r.cpu.initiator_pct,
            steal_pct: None,
        }
    }
}

struct Conn {
    key: String,
    lun: LunTarget,
    /// Kept alive while the sessions use them; shared so a path can be
    /// cut mid-run.
    relays: Vec<Arc<std::sync::Mutex<Relay>>>,
}

/// A target the lab does not run (a peer daemon): where a backend's
/// cells go instead of an embedded target.
#[derive(Clone, Debug)]
pub struct External {
    pub portal: std::net::SocketAddr,
    pub iqn: String,
    pub lun: u16,
    /// The daemon's process, whose CPU (all threads, from /proc) is the
    /// target's.
    pub pid: u32,
}

/// The lab: owns targets, relays and sessions between cells.
pub struct Lab {
    rt: tokio::runtime::Runtime,
    opts: LabOptions,
    targets: BTreeMap<String, EmbeddedTarget>,
    /// Backends served by targets outside the lab.
    external: BTreeMap<String, External>,
    conn: Option<Conn>,
}

impl Lab {
    pub fn new(opts: LabOptions) -> Result<Lab, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("runtime: {e}"))?;
        Ok(Lab {
            rt,
            opts,
            targets: BTreeMap::new(),
            external: BTreeMap::new(),
            conn: None,
        })
    }

    fn lun_spec(&self, backend: &str) -> String {
        let size = self.opts.lun_size;
        match backend {
            "null" => format!("null:{size}"),
            "file" | "file-direct" => format!(
                "file:{},size={size}{}",
                self.image(backend).display(),
                if backend == "file-direct" {
                    ",direct"
                } else {
                    ""
                }
            ),
            _ => format!("ram:{size}"),
        }
    }

    /// Cells of `backend` go to `target` from now on (the current
    /// sessions are closed; `None`: back to the embedded target).
    pub fn serve_from(&mut self, backend: &str, target: Option<External>) {
        self.close();
        match target {
            Some(t) => self.external.insert(backend.to_owned(), t),
            None => self.external.remove(backend),
        };
    }

    /// The image of a file backend's embedded LUN (removed on drop).
    fn image(&self, backend: &str) -> PathBuf {
        self.opts
            .dir
            .join(format!("ironlun-lab-{}-{backend}.img", std::process::id()))
    }

    fn target(&mut self, backend: &str) -> Result<(std::net::SocketAddr, String, u16), String> {
        if let Some(e) = self.external.get(backend) {
            return Ok((e.portal, e.iqn.clone(), e.lun));
        }
        if !self.targets.contains_key(backend) {
            let t = EmbeddedTarget::start_with(
                &[self.lun_spec(backend)],
                self.opts.target_max_recv_dsl,
            )?;
            info!(backend, portal = %t.portal, "embedded target started");
            self.targets.insert(backend.to_owned(), t);
        }
        let t = self.targets.get(backend).ok_or("embedded target missing")?;
        Ok((t.portal, t.name.clone(), 0))
    }

    /// Logs out of the current sessions.
    pub fn close(&mut self) {
        if let Some(c) = self.conn.take() {
            self.rt.block_on(luns::close(std::slice::from_ref(&c.lun)));
        }
    }

    /// Sessions for `cell`, reusing the current ones when the cell
    /// negotiates and links the same way. `relay`: go through a relay
    /// even without a link (so calibration sees the relay's own cost).
    fn connect(&mut self, cell: &Cell, relay: bool) -> Result<LunTarget, String> {
        let key = format!("{}|relay={relay}", cell.connection_key());
        if let Some(c) = &self.conn {
            if c.key == key {
                return Ok(c.lun.clone());
            }
        }
        self.close();
        let (portal, target, lun_number) = self.target(&cell.backend)?;
        // A transparent relay for calibration: its hop is counted.
        let link = cell.link().or_else(|| relay.then(LinkSpec::default));
        let mut relays = Vec::new();
        let mut portals = Vec::new();
        for _ in 0..cell.sessions {
            match &link {
                Some(l) => {
                    let r = Relay::start_on_loopback(portal, l.clone())
                        .map_err(|e| format!("relay: {e}"))?;
                    portals.push(r.addr().to_string());
                    relays.push(Arc::new(std::sync::Mutex::new(r)));
                }
                None => portals.push(portal.to_string()),
            }
        }
        let opts = cell.session_options();
        let route = if cell.sessions == 1 {
            Route::Portal(portals.first().ok_or("no portal")?)
        } else {
            Route::Paths(&portals, PathPolicy::RoundRobin)
        };
        let label = format!("{} LUN {lun_number} ({})", target, cell.backend);
        let lun = self.rt.block_on(luns::open(
            route,
            &target,
            lun_number,
            &opts,
            label,
            Slice::WHOLE,
        ))?;
        self.conn = Some(Conn {
            key,
            lun: lun.clone(),
            relays,
        });
        Ok(lun)
    }

    /// Measures one cell.
    pub fn run(
        &mut self,
        cell: &Cell,
        time: Duration,
        ramp: Duration,
        relay: bool,
    ) -> Result<Measured, String> {
        let mut w = Workload::simple(
            &format!("{} {} qd{}", cell.op.name(), cell.bs, cell.depth()),
            "",
            AccessLine::simple(cell.bs, cell.read_pct(), cell.random),
            cell.depth(),
        );
        w.workers = cell.workers;
        w.time_s = time.as_secs_f64();
        w.ramp_s = ramp.as_secs_f64();
        let (r, steal) = self.run_workload(cell, &w, relay)?;
        let mut m = Measured::from(&r);
        m.steal_pct = steal;
        Ok(m)
    }

    /// Runs any workload over the sessions and link `cell` describes (its
    /// size, window and op fields are ignored but for negotiation); also
    /// returns the host steal during the run.
    pub fn run_workload(
        &mut self,
        cell: &Cell,
        w: &Workload,
        relay: bool,
    ) -> Result<(WorkloadResult, Option<f64>), String> {
        cell.validate()?;
        w.validate()?;
        let lun = self.connect(cell, relay)?;
        let probe = match self.external.get(&cell.backend) {
            Some(e) => ironlun_bench::cpu::pid_probe(e.pid),
            None => ironlun_bench::cpu::threads_probe(TARGET_THREADS),
        };
        let opts = RunOptions {
            target_cpu: Some(probe),
            exclude_threads: Some(ironlun_netem::awake::THREAD_NAME),
            ..RunOptions::default()
        };
        // An interval in which no command completed (the VM frozen by
        // its host for longer than the run) measures nothing: it is run
        // again, twice as long, at most twice.
        let mut w = w.clone();
        let mut tries = 0;
        let (r, steal) = loop {
            let before = ironlun_bench::cpu::HostCpu::sample();
            let r = self
                .rt
                .block_on(ironlun_bench::run(&w, std::slice::from_ref(&lun), &opts))?;
            let steal = match (before, ironlun_bench::cpu::HostCpu::sample()) {
                (Some(a), Some(b)) => a.steal_pct(&b),
                _ => None,
            };
            tries += 1;
            if r.ios > 0 || r.errors > 0 || tries > 2 {
                break (r, steal);
            }
            tracing::warn!(
                steal = ?steal,
                "{}: no command completed in {:.2} s; running it again",
                w.name,
                w.time_s
            );
            w.time_s *= 2.0;
        };
        if r.errors > 0 {
            return Err(format!(
                "{}: {} I/O errors, e.g. {}",
                w.name,
                r.errors,
                r.error_samples.first().cloned().unwrap_or_default()
            ));
        }
        Ok((r, steal))
    }

    /// Cuts path `index` of the current sessions after `after` (a pulled
    /// cable: its relay closes every connection and refuses new ones).
    pub fn cut_path_after(&self, index: usize, after: Duration) -> Result<(), String> {
        let relay = self
            .conn
            .as_ref()
            .and_then(|c| c.relays.get(index))
            .cloned()
            .ok_or("no such path (paths are relays: give the cell a link)")?;
        std::thread::spawn(move || {
            std::thread::sleep(after);
            relay.lock().unwrap_or_else(|e| e.into_inner()).cut();
            tracing::info!("path {index} cut");
        });
        Ok(())
    }

    /// A relay with `cell`'s link (a transparent one when it has none) in
    /// front of the embedded target of `cell.backend`, for initiators run
    /// as separate programs; with the target's name and the LUN to use.
    /// The lab's own sessions are closed first, so only that program's
    /// I/O crosses it. The relay lives as long as the caller keeps it.
    pub fn relayed_portal(&mut self, cell: &Cell) -> Result<(Relay, String, u16), String> {
        self.close();
        let (portal, target, lun) = self.target(&cell.backend)?;
        let link = cell.link().unwrap_or_default();
        let relay = Relay::start_on_loopback(portal, link).map_err(|e| format!("relay: {e}"))?;
        Ok((relay, target, lun))
    }

    /// Opens the sessions for `cell` now (so a path can be cut in the run
    /// that follows).
    pub fn prepare(&mut self, cell: &Cell) -> Result<(), String> {
        self.connect(cell, false).map(|_| ())
    }

    /// Measures the host's own cost for every distinct (op, size, digest,
    /// link-or-not) among `cells`: response time at queue depth 1 and
    /// throughput at 32, on loopback (through a transparent relay for
    /// cells that have a link, so its hop is counted).
    /// Runs `cell`; a run the hypervisor disturbed is run again (at most
    /// twice) and the least disturbed one is returned.
    fn least_disturbed(
        &mut self,
        cell: &Cell,
        time: Duration,
        via: bool,
    ) -> Result<Measured, String> {
        let mut best = self.run(cell, time, time / 4, via)?;
        for _ in 0..2 {
            if best.steal_pct.unwrap_or(0.0) < DISTURBED_STEAL_PCT {
                break;
            }
            let again = self.run(cell, time, time / 4, via)?;
            if again.steal_pct.unwrap_or(f64::INFINITY) < best.steal_pct.unwrap_or(f64::INFINITY) {
                best = again;
            }
        }
        Ok(best)
    }

    /// Host time per command at queue depth 1 as a line in the request
    /// size, for reads and writes (4 KiB and 256 KiB runs, through a
    /// relay that changes nothing when `link` has a link): the model of
    /// a mix of sizes.
    pub fn calibrate_line(&mut self, link: &Cell, time: Duration) -> Result<HostLine, String> {
        let via = link.link().is_some();
        let mut point = |op: Op, bs: u32| -> Result<(f64, f64), String> {
            let base = Cell {
                op,
                bs,
                qd: 1,
                backend: link.backend.clone(),
                ..Cell::default()
            }
            .with_sizes_of(link);
            let m = self.least_disturbed(&base, time, via)?;
            Ok((f64::from(bs), m.latency_p50_us / 1e6))
        };
        let (small, large) = (4096, 262_144);
        let read = HostLine::fit(point(Op::Read, small)?, point(Op::Read, large)?);
        let write = HostLine::fit(point(Op::Write, small)?, point(Op::Write, large)?);
        Ok(HostLine { read, write })
    }

    pub fn calibrate(&mut self, cells: &[Cell], time: Duration) -> Result<Calibration, String> {
        let mut cal = Calibration::default();
        for c in cells {
            let via = c.link().is_some();
            let k = (c.op, c.bs, c.digest, via);
            if cal.costs.contains_key(&k) {
                continue;
            }
            let mut base = Cell {
                op: c.op,
                bs: c.bs,
                digest: c.digest,
                backend: c.backend.clone(),
                qd: 1,
                ..Cell::default()
            }
            .with_sizes_of(c);
            // The median response time, not the mean: a host that stalls
            // now and then (a virtual machine's vCPU preempted) must not
            // set the model for every cell. The better of two runs for
            // the host's rate, for the same reason.
            // A run the hypervisor disturbed is run again.
            let one = self.least_disturbed(&base, time, via)?;
            base.qd = 32;
            let many = self.run(&base, time, time / 4, via)?;
            let again = self.run(&base, time, time / 4, via)?;
            cal.costs.insert(
                k,
                HostCost {
                    t0_s: one.latency_p50_us / 1e6,
                    max_bytes_per_s: many.mb_per_s.max(again.mb_per_s).max(one.mb_per_s) * 1e6,
                },
            );
        }
        Ok(cal)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.close();
        // Targets stop (and flush) as they drop, outside any runtime.
        // Only the images this lab created: another lab of the same
        // process may be serving its own.
        let started: Vec<String> = std::mem::take(&mut self.targets).into_keys().collect();
        for backend in started {
            if matches!(backend.as_str(), "file" | "file-direct") {
                let _ = std::fs::remove_file(self.image(&backend));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_removes_the_images_of_the_file_luns_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let mut lab = Lab::new(LabOptions {
            lun_size: 1 << 20,
            dir: dir.path().to_owned(),
            ..LabOptions::default()
        })
        .unwrap();
        for backend in ["file", "file-direct", "null"] {
            lab.target(backend).unwrap();
        }
        let images = || std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(images(), 2);
        drop(lab);
        assert_eq!(images(), 0);
    }
}
