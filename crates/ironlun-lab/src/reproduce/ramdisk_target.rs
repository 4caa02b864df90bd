//! `ramdisk-target` (section 2): the TCP window sweep, the file-server
//! mix under three tuning scenarios and its 50/50 variant, the 64 KiB
//! disk-benchmark tests, two paths with one pulled mid-run, and the file
//! copies through the kernel initiator.

use std::time::{Duration, Instant};

use ironlun_units::format_size;

use super::steps::{profile, tcp_baseline, vm_fs_rows};
use super::{Progress, ReproduceOptions, Reproduction, WorkloadSet, NAMES};
use crate::cell::{Cell, Op};
use crate::fs_rows::{self, FsPlan};
use crate::model::{predict_mix, HostLine};
use crate::runner::Lab;

/// The link of every scenario: 1 Gbit/s with a 0.2 ms round trip.
fn base_cell() -> Cell {
    Cell {
        op: Op::Write,
        rtt: Duration::from_micros(200),
        link_rate: Some(1_000_000_000),
        ..Cell::default()
    }
}

pub(super) fn run(opts: &ReproduceOptions, progress: Progress<'_>) -> Result<Reproduction, String> {
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
    let base = base_cell();
    progress("calibrating host time per command on loopback");
    let host = lab.calibrate_line(&base, Duration::from_millis(300))?;
    let mut workloads = file_server_mixes(&mut lab, &base, &host, time, progress)?;
    progress("64 KiB disk-benchmark tests");
    workloads.push(disk_tests(&mut lab, &base, &host, time)?);
    progress("two paths, then one pulled mid-run");
    workloads.push(two_paths(&mut lab, &base, &host, time)?);
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
        peers: Vec::new(),
        notes: notes(opts, &plan, fs_note),
        comparison: None,
        initiators: None,
    })
}

/// The file-server mix and its 50/50 variant under the three tuning
/// scenarios: defaults, iSCSI burst and segment sizes, and those with a
/// 512 KiB TCP window.
fn file_server_mixes(
    lab: &mut Lab,
    base: &Cell,
    host: &HostLine,
    time: Duration,
    progress: Progress<'_>,
) -> Result<Vec<WorkloadSet>, String> {
    let tweaked = Cell {
        first_burst: Some(262_144),
        max_recv_dsl: Some(262_144),
        max_burst: Some(524_288),
        ..base.clone()
    };
    let scenarios = [
        ("notweaks: defaults", base.clone()),
        (
            "iSCSI tweaks: FirstBurstLength 256 KiB, MaxRecvDataSegmentLength 256 KiB, MaxBurstLength 512 KiB",
            tweaked.clone(),
        ),
        (
            "TCP + iSCSI tweaks: the above plus a 512 KiB TCP window",
            Cell {
                tcp_window: Some(524_288),
                ..tweaked
            },
        ),
    ];
    let mut sets = Vec::new();
    for (title, cell) in &scenarios {
        progress(title);
        let mut set = WorkloadSet::new(format!("file-server mix, {title}"));
        for name in ["file-server", "file-server-50"] {
            let w = profile(name, time)?;
            let (r, steal) = lab.run_workload(cell, &w, false)?;
            set.push(r, predict_mix(&w, cell, Some(host)), steal);
        }
        sets.push(set);
    }
    Ok(sets)
}

/// The 64 KiB disk-benchmark tests over the base link.
fn disk_tests(
    lab: &mut Lab,
    base: &Cell,
    host: &HostLine,
    time: Duration,
) -> Result<WorkloadSet, String> {
    let mut set = WorkloadSet::new("disk-benchmark style tests, 64 KiB".into());
    for mut w in ironlun_bench::profiles::lookup("disk-tests")? {
        // A zone test ends when it has swept the whole LUN.
        w.time_s = if w.zones.is_some() {
            120.0
        } else {
            time.as_secs_f64()
        };
        w.ramp_s = 0.2; // none for zone sweeps (Workload::ramp)
        let (r, steal) = lab.run_workload(base, &w, false)?;
        set.push(r, predict_mix(&w, base, Some(host)), steal);
    }
    Ok(set)
}

/// Link aggregation: the file-server mix over two paths, then again with
/// path 0 pulled after `time`.
fn two_paths(
    lab: &mut Lab,
    base: &Cell,
    host: &HostLine,
    time: Duration,
) -> Result<WorkloadSet, String> {
    let two = Cell {
        sessions: 2,
        ..base.clone()
    };
    let fs = profile("file-server", time * 2)?;
    let mut set = WorkloadSet::new("link aggregation: two paths, and one pulled mid-run".into());
    let (both, steal) = lab.run_workload(&two, &fs, false)?;
    set.push(both, predict_mix(&fs, &two, Some(host)), steal);
    lab.close();
    lab.prepare(&two)?;
    lab.cut_path_after(0, time)?;
    let (mut pulled, steal) = lab.run_workload(&two, &fs, false)?;
    pulled.name = format!(
        "{} (path 0 pulled after {:.1} s)",
        pulled.name,
        time.as_secs_f64()
    );
    // A pulled path has no steady state to model.
    set.push(pulled, None, steal);
    Ok(set)
}

/// What differs from the published study, and the model.
fn notes(opts: &ReproduceOptions, plan: &FsPlan, fs_note: Option<String>) -> Vec<String> {
    vec![
        format!("The RAM LUN is {}, not 2 GB. The link is 1 Gbit/s with a 0.2 ms round trip, emulated by ironlun's relay.", format_size(opts.lab.lun_size)),
        "Model of a workload (a mix of sizes): per command, mean over the mix of host time (a line in the request size through 4 KiB and 256 KiB runs at queue depth 1, per direction) + round trips x RTT + wire bytes / rate, at least a line's transfer delay; throughput = the least of outstanding commands x mean size / mean cycle, the link rate in the busier direction, the TCP window per round trip and any rate limit. It has no host-rate bound (a mix's host limit is not calibrated), and none for the run with a pulled path.".into(),
        "Delayed ACK, window scaling and SACK are the kernel's (loopback TCP between the relay and each end); the TCP window is set on the sockets and carried by the relay.".into(),
        "Link aggregation is two iSCSI sessions (multipath, round-robin) over two emulated links rather than NIC teaming; pulling a link cuts one relay.".into(),
        fs_note.unwrap_or_else(|| format!("The file copies ran through ext4 on the Linux kernel initiator (open-iscsi) in a QEMU VM on a RAM LUN of its own, with no emulated link{}; under software emulation the guest CPU, not the target, bounds them.", if plan.copy_scale > 1 { format!(", at 1/{} of the published sizes (--full runs them whole)", plan.copy_scale) } else { String::new() })),
    ]
}
