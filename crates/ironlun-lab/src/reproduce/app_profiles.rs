//! `app-profiles` (section 1): the twelve application access
//! specifications with IOPS, MB/s and initiator CPU %.

use std::time::Instant;

use ironlun_units::format_size;

use super::fitted::Profile;
use super::{initiators, Progress, ReproduceOptions, Reproduction, WorkloadSet, NAMES};
use crate::cell::Cell;
use crate::runner::Lab;

/// The link of the fitted testbed profile (`crate::testbed`), imposed
/// through the relay: the payload rate of 1 Gbit/s with jumbo frames and
/// the fitted round trip; and the profile itself, whose disk each
/// workload row runs under ([`Profile::impose_disk`]).
fn profile_link() -> Result<(Cell, Profile, String), String> {
    let p = Profile::of("app-profiles")?;
    let cell = p.link_cell();
    let note = format!(
        "Run under the fitted testbed profile's link, through the relay: {:.2} MB/s of TCP payload (1 Gbit/s at MTU {}) and a {:.0} us round trip. The workload rows also run under its disk: the relay holds each command on one of the target's {} disk arrays for the profile's disk time at the spec's mix ({:.0} us per random access, plus the bytes at {:.0} MB/s), as the study's arrays served its LUNs. The profile's host time is not imposed (this machine's own is what is measured), nor the disk on the initiator comparison's runs (one relay serves them all; their CPU per I/O is what they give).",
        p.payload_bits(None) as f64 / 8e6,
        p.mtu(),
        p.base_rtt().as_secs_f64() * 1e6,
        p.disk_servers(),
        p.disk_access().as_secs_f64() * 1e6,
        p.disk_rate() / 1e6,
    );
    Ok((cell, p, note))
}

pub(super) fn run(opts: &ReproduceOptions, progress: Progress<'_>) -> Result<Reproduction, String> {
    let started = Instant::now();
    let mut lab = Lab::new(opts.lab.clone())?;
    let (cell, profile, link_note) = profile_link()?;
    let mut results = Vec::new();
    let specs = ironlun_bench::profiles::lookup("app-profiles")?;
    for w in specs.clone() {
        progress(&w.name);
        let mut w = w;
        w.time_s = opts.profile_time.as_secs_f64();
        w.ramp_s = opts.profile_ramp.as_secs_f64();
        // Three runs; the one with the median IOPS is reported.
        let mut under = cell.clone();
        profile.impose_disk(&mut under, &w);
        let mut runs = Vec::new();
        for _ in 0..3 {
            runs.push(lab.run_workload(&under, &w, false)?.0);
        }
        results.extend(ironlun_bench::result::median_by_iops(runs));
    }
    let file = crate::published::load("app-profiles")?;
    let initiators = initiators::run(
        &mut lab,
        &cell,
        &specs,
        &opts.initiators,
        opts.vm,
        &file,
        progress,
    )?;
    lab.close();
    Ok(Reproduction {
        reproduction: "app-profiles".into(),
        description: NAMES[3].1.into(),
        elapsed_s: started.elapsed().as_secs_f64(),
        steal_pct: None,
        tcp: Vec::new(),
        tables: Vec::new(),
        workloads: vec![WorkloadSet::measured(
            "twelve application access specifications (median of 3 runs)".into(),
            results,
        )],
        fs_rows: Vec::new(),
        peers: Vec::new(),
        notes: vec![
            link_note,
            format!("One LUN ({} RAM, embedded target on loopback) instead of four 4 GiB targets; run time and ramp are short (settable with --time). Host CPU % in the workload table is IOMeter's whole-host figure; on this 2-core machine it includes the embedded target and the relay, so it is not the study's initiator host: target CPU is reported separately. The published table's CPU cells are the initiator's own instead: the initiator comparison's run of ironlun's initiator as a process of its own gives its CPU time per I/O, times the I/Os per second the workload row ran at, over the study host's 8 CPUs (this machine's CPU time on the study's core count; a spec that comparison did not run has no measured CPU cell).", format_size(opts.lab.lun_size)),
        ],
        comparison: None,
        initiators,
    })
}
