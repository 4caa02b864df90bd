//! `app-profiles` (section 1): the twelve application access
//! specifications with IOPS, MB/s and initiator CPU %.

use std::time::Instant;

use ironlun_units::format_size;

use super::{Progress, ReproduceOptions, Reproduction, WorkloadSet, NAMES};
use crate::cell::Cell;
use crate::runner::Lab;

pub(super) fn run(opts: &ReproduceOptions, progress: Progress<'_>) -> Result<Reproduction, String> {
    let started = Instant::now();
    let mut lab = Lab::new(opts.lab.clone())?;
    let cell = Cell::default();
    let mut results = Vec::new();
    for w in ironlun_bench::profiles::lookup("app-profiles")? {
        progress(&w.name);
        let mut w = w;
        w.time_s = opts.profile_time.as_secs_f64();
        w.ramp_s = opts.profile_ramp.as_secs_f64();
        // Three runs; the one with the median IOPS is reported.
        let mut runs = Vec::new();
        for _ in 0..3 {
            runs.push(lab.run_workload(&cell, &w, false)?.0);
        }
        results.extend(ironlun_bench::result::median_by_iops(runs));
    }
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
        notes: vec![
            format!("One LUN ({} RAM, embedded target on loopback) instead of four 4 GiB targets; run time and ramp are short (settable with --time). Host CPU % is IOMeter's whole-host figure; on this 2-core machine it includes the embedded target, so the published 8 % line is not comparable as is: target CPU is reported separately.", format_size(opts.lab.lun_size)),
        ],
        comparison: None,
    })
}
