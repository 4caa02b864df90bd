//! Steps the studies share: the TCP baseline over the relay, sweep
//! tables (calibration first, disturbed cells measured again), profiles
//! cut to a study's time, and the file-system rows through the kernel
//! initiator in a VM.

use std::time::{Duration, Instant};

use ironlun_netem::tcpbench::{self, Direction};
use ironlun_netem::{LinkSpec, Relay};

use super::fitted::Profile;
use super::{Progress, ReproduceOptions, Table, TcpCell};
use crate::fs_rows::{self, FsPlan, FsRow, VmMode};
use crate::model::Calibration;
use crate::runner::{Lab, DISTURBED_STEAL_PCT};
use crate::sweep::{self, Sweep, SweepFile};

/// The TCP baseline at `rate` for each round trip and declared window;
/// under a fitted `profile`, the testbed's round trip is added and the
/// relay keeps the profile's share of the declared window in flight (the
/// endpoints' socket buffers stay the declared window).
pub(super) fn tcp_baseline(
    rtts_ms: &[f64],
    windows: &[u32],
    rate: u64,
    time: Duration,
    repeat: usize,
    profile: Option<&Profile>,
) -> Result<Vec<TcpCell>, String> {
    let server = tcpbench::LocalServer::start(None).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for &rtt in rtts_ms {
        for &w in windows {
            let base = profile.map_or(Duration::ZERO, Profile::base_rtt);
            let mut spec = LinkSpec::with_rtt(Duration::from_secs_f64(rtt / 1e3) + base);
            spec.rate_bps = Some(rate);
            spec.window = Some(profile.map_or(w, |p| p.in_flight(w)));
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

pub(super) fn sweep_from(text: &str) -> Result<Sweep, String> {
    Sweep::from_file(&SweepFile::parse(text)?)
}

/// Each sweep as a table, after calibrating the host costs of all their
/// cells; under a fitted `profile`, each cell runs with it imposed
/// ([`Profile::impose`], which needs the calibration).
pub(super) fn run_tables(
    lab: &mut Lab,
    sweeps: &[(String, Sweep)],
    opts: &ReproduceOptions,
    started: Instant,
    profile: Option<&Profile>,
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
        let mut cells = s.cells()?;
        if let Some(p) = profile {
            for c in &mut cells {
                p.impose(c, &cal);
            }
        }
        progress(title);
        let cells = sweep::run_cells(&cells, opts.cell_time, lab, Some(&cal), &mut |_, _, _| {})?;
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
pub(super) fn remeasure_stolen(
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

pub(super) fn profile(name: &str, time: Duration) -> Result<ironlun_bench::Workload, String> {
    let mut w = ironlun_bench::profiles::find(name).ok_or_else(|| format!("no profile {name}"))?;
    w.time_s = time.as_secs_f64();
    w.ramp_s = (time.as_secs_f64() / 4.0).min(1.0);
    Ok(w)
}

/// The file-system rows on `luns` when the VM may run; otherwise the note
/// that says why they are missing.
pub(super) fn vm_fs_rows(
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
pub(super) fn fs_file_lun(opts: &ReproduceOptions, tag: &str, size: u64, direct: bool) -> String {
    format!(
        "file:{},size={size}{}",
        opts.lab
            .dir
            .join(format!("ironlun-fs-{}-{tag}.img", std::process::id()))
            .display(),
        if direct { ",direct" } else { "" }
    )
}
