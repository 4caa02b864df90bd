//! The published studies (`docs/studies.md`, whose section numbers
//! [`NAMES`] uses) as commands: each runs its sweeps and workloads
//! against an embedded target, over emulated links where the study had
//! a network, prints tables shaped like the published ones with the
//! model beside every modelled cell, and returns records for JSON and
//! the HTML report.
//!
//! One module per study (`wan_tuning`, `target_backends`,
//! `ramdisk_target`, `app_profiles`); the steps they share (the TCP
//! baseline, sweep tables with their calibration and re-measurement, the
//! kernel initiator's file-system rows) are in `steps`, what a study's
//! fitted testbed profile imposes on its cells in `fitted`, and what a study
//! returns and how it is printed in `reproduction`; `observe` names its
//! measured rows as the published values (`crate::published`) do, so each
//! report sets the study's figure beside ironlun's.

use std::time::Duration;

use crate::fs_rows::{FsPlan, VmMode};
use crate::runner::LabOptions;
use initiators::{InitiatorOptions, Which};

mod app_profiles;
mod fitted;
pub mod initiators;
pub mod observe;
pub mod peers;
mod ramdisk_target;
mod reproduction;
mod steps;
mod target_backends;
mod tunings;
mod wan_tuning;

pub use reproduction::{Reproduction, Table, TcpCell, WorkloadSet};

/// The reproductions, with what each covers.
pub const NAMES: [(&str, &str); 4] = [
    (
        "wan-tuning",
        "section 4: TCP 64 KiB vs 10 MB windows, then request size x command window x RTT for solicited writes, unsolicited writes and reads over 155 Mbit/s, and the 1 Gbit/s LAN table",
    ),
    (
        "target-backends",
        "section 3: NULLIO / FILEIO / BLOCKIO sequential 512 KiB read and write over 1 Gbit/s, the database-like random test, MPIO over two 100 Mbit/s paths vs one",
    ),
    (
        "ramdisk-target",
        "section 2: TCP window sweep, the file-server mix and its 50/50 variant and the 64 KiB disk-benchmark tests under three tuning scenarios, the NIC team, two paths with one pulled mid-run",
    ),
    (
        "app-profiles",
        "section 1: the twelve application access specifications with IOPS, MB/s and initiator CPU %",
    ),
];

/// How long cells run.
#[derive(Clone, Debug)]
pub struct ReproduceOptions {
    /// Measured time per iSCSI cell (stretched for long round trips).
    pub cell_time: Duration,
    /// Time per TCP measurement.
    pub tcp_time: Duration,
    /// Application profiles: measured time and ramp-up per run.
    pub profile_time: Duration,
    pub profile_ramp: Duration,
    /// Wall time the reproduction aims to stay within: cells measured
    /// while the hypervisor stole CPU are measured again only while the
    /// run is inside it. `None`: each such cell is measured once more.
    pub budget: Option<Duration>,
    pub lab: LabOptions,
    /// The file-system rows through the kernel initiator in a VM.
    pub vm: VmMode,
    pub fs: FsPlan,
    /// The ironlun binary, to run `ironlun target` as a separate process
    /// (target-backends' memory-limited block and FILEIO rows); `None`: not run.
    pub target_exe: Option<std::path::PathBuf>,
    /// app-profiles: the initiators' CPU comparison.
    pub initiators: InitiatorOptions,
}

impl ReproduceOptions {
    /// The published run lengths: 10 s TCP runs, 4 min profile runs after
    /// a 60 s ramp (three each), 10 s per iSCSI cell. Hours, not minutes.
    pub fn full() -> ReproduceOptions {
        ReproduceOptions {
            cell_time: Duration::from_secs(10),
            tcp_time: Duration::from_secs(10),
            profile_time: Duration::from_secs(240),
            profile_ramp: Duration::from_secs(60),
            budget: None,
            lab: LabOptions {
                lun_size: 2 << 30,
                ..LabOptions::default()
            },
            vm: VmMode::Auto,
            fs: FsPlan {
                file_mb: 1000,
                copy_scale: 1,
                lun_copies: true,
                ram_copies: true,
                ram_uncached: true,
            },
            target_exe: None,
            initiators: InitiatorOptions {
                which: Which::All,
                time: Duration::from_secs(240),
                kernel: Which::All,
            },
        }
    }
}

impl Default for ReproduceOptions {
    fn default() -> Self {
        ReproduceOptions {
            cell_time: Duration::from_millis(600),
            tcp_time: Duration::from_millis(600),
            profile_time: Duration::from_millis(2100),
            profile_ramp: Duration::from_millis(300),
            budget: Some(Duration::from_secs(172)),
            lab: LabOptions::default(),
            vm: VmMode::Auto,
            // Under TCG the guest moves some 30-50 MB/s: a fifth of the
            // file and an eighth of the copies keep each boot near a minute.
            // The RAM-disk study's copies run between a RAM disk and the
            // LUN by default; LUN-to-LUN copies and uncached reads back
            // (no published cell; about 65 s of the VM's time) only with
            // --full.
            fs: FsPlan {
                file_mb: 200,
                copy_scale: 8,
                lun_copies: false,
                ram_copies: true,
                ram_uncached: false,
            },
            target_exe: None,
            // Two seconds per client run after one of warm-up: some 60 s
            // for the twelve specs on two clients.
            // The kernel initiator's VM (a boot under TCG, calibration and
            // fio's start-up per spec: some 40 s for the quick slice) only
            // when asked for (--kernel-initiator).
            initiators: InitiatorOptions {
                which: Which::All,
                time: Duration::from_secs(2),
                kernel: Which::Off,
            },
        }
    }
}

/// Progress lines: (what is running).
pub type Progress<'a> = &'a mut dyn FnMut(&str);

/// Runs a reproduction by name.
pub fn run(
    name: &str,
    opts: &ReproduceOptions,
    progress: Progress<'_>,
) -> Result<Reproduction, String> {
    let before = ironlun_bench::cpu::HostCpu::sample();
    let mut r = match name {
        "wan-tuning" => wan_tuning::run(opts, progress)?,
        "target-backends" => target_backends::run(opts, progress)?,
        "ramdisk-target" => ramdisk_target::run(opts, progress)?,
        "app-profiles" => app_profiles::run(opts, progress)?,
        _ => {
            return Err(format!(
                "unknown reproduction '{name}' (one of: {})",
                NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ))
        }
    };
    let file = crate::published::load(name)?;
    let mut cmp = crate::published::compare(&file, &observe::observations(&r));
    crate::testbed::apply(&file, &mut cmp)?;
    r.comparison = Some(cmp);
    r.steal_pct = match (before, ironlun_bench::cpu::HostCpu::sample()) {
        (Some(a), Some(b)) => a.steal_pct(&b),
        _ => None,
    };
    Ok(r)
}
