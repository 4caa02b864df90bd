//! A bench run from workloads to its report: every workload run
//! `repeat` times on this thread's LUNs or on load threads, the median
//! run by IOPS kept, its table printed as it finishes, and the report
//! and its JSON/CSV files made from the results. `ironlun bench`,
//! `ironlun lab` and the agents all run this; they only choose the
//! LUNs, the CPU probe and where lines go.

use std::path::{Path, PathBuf};

use crate::engine::ProgressFn;
use crate::iolog::LatLogSpec;
use crate::result::median_by_iops;
use crate::verify_log::WriteLog;
use crate::WorkloadResult;
use crate::{output, LunTarget, RunOptions, RunReport, TargetCpuProbe, Threads, Workload};

/// The per-I/O logs asked for: the latency log, and the write log of a
/// verifying run. With several runs in all, each run's file is
/// PATH.WORKLOAD.N.
#[derive(Clone, Default)]
pub struct RunLogs {
    pub lat_log: Option<PathBuf>,
    /// The latency log's cap in bytes.
    pub cap: u64,
    pub verify_log: Option<PathBuf>,
}

/// Where workloads run: on this thread's LUNs, or on load threads.
#[derive(Clone, Copy)]
pub enum Runner<'a> {
    Here(&'a [LunTarget]),
    Threads(&'a Threads),
}

/// How a run talks to its user: a progress line per workload (none when
/// not on a terminal) and the result table's lines.
pub trait Console {
    /// The progress callback of workload `name` lasting `total` seconds.
    fn progress(&self, name: &str, total: Option<f64>) -> Option<ProgressFn>;
    /// Removes the progress line after a run that had one.
    fn end_progress(&self);
    /// One line of the result table.
    fn table_line(&self, line: &str);
}

/// What every run of a bench shares.
pub struct RunAll<'a> {
    pub runner: Runner<'a>,
    pub verify: bool,
    pub repeat: u32,
    pub target_cpu: Option<TargetCpuProbe>,
    pub logs: &'a RunLogs,
    /// Threads of this process left out of its CPU accounting.
    pub exclude_threads: Option<&'static str>,
}

impl RunAll<'_> {
    /// Runs every workload (with repeats), printing the table.
    pub async fn run(
        &self,
        ws: &[Workload],
        console: &dyn Console,
    ) -> Result<Vec<WorkloadResult>, String> {
        let mut results = Vec::new();
        let runs_in_all = ws.len() * self.repeat.max(1) as usize;
        for w in ws {
            let mut runs = Vec::new();
            for n in 0..self.repeat.max(1) {
                runs.push(self.one(w, n + 1, runs_in_all, console).await?);
            }
            if let Some(r) = median_by_iops(runs) {
                let table = output::table(std::slice::from_ref(&r));
                // The header once, then one block per workload.
                let skip = usize::from(!results.is_empty());
                for line in table.lines().skip(skip) {
                    console.table_line(line);
                }
                results.push(r);
            }
        }
        Ok(results)
    }

    /// Run `n` of `runs_in_all` of workload `w`.
    async fn one(
        &self,
        w: &Workload,
        n: u32,
        runs_in_all: usize,
        console: &dyn Console,
    ) -> Result<WorkloadResult, String> {
        let total = (w.time_s > 0.0).then_some(w.time_s);
        let verify_log = match &self.logs.verify_log {
            Some(p) => Some(WriteLog::create(&per_run(p, w, n, runs_in_all))?),
            None => None,
        };
        let opts = RunOptions {
            verify: self.verify,
            target_cpu: self.target_cpu.clone(),
            progress: console.progress(&w.name, total),
            drain_timeout: None,
            exclude_threads: self.exclude_threads,
            lat_log: self.logs.lat_log.as_ref().map(|p| LatLogSpec {
                path: per_run(p, w, n, runs_in_all),
                cap_bytes: self.logs.cap,
            }),
            verify_log: verify_log.clone(),
        };
        let r = match self.runner {
            Runner::Here(luns) => crate::run(w, luns, &opts).await,
            Runner::Threads(t) => t.run(w, &opts).await,
        };
        if let Some(log) = &verify_log {
            log.finish()?;
        }
        let r = r?;
        if opts.progress.is_some() {
            console.end_progress();
        }
        Ok(r)
    }
}

/// The log file of run `n` of workload `w`: `path` itself when there
/// is one run in all, else PATH.WORKLOAD.N.
fn per_run(path: &Path, w: &Workload, n: u32, runs: usize) -> PathBuf {
    if runs == 1 {
        return path.to_owned();
    }
    let mut p = path.to_owned().into_os_string();
    p.push(format!(".{}.{n}", w.name));
    p.into()
}

/// Writes the report's JSON and the workloads' CSV where asked.
pub fn write_outputs(
    rep: &RunReport,
    json: Option<&PathBuf>,
    csv: Option<&PathBuf>,
) -> Result<(), String> {
    if let Some(p) = json {
        std::fs::write(p, output::json(rep)?).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(p) = csv {
        std::fs::write(p, output::csv(&rep.workloads))
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(name: &str) -> Workload {
        let mut w = crate::profiles::lookup("db-oltp-8k").unwrap().remove(0);
        w.name = name.into();
        w
    }

    #[test]
    fn one_run_logs_to_the_path_itself_and_several_to_numbered_files() {
        let w = workload("rr");
        assert_eq!(
            per_run(Path::new("/t/lat"), &w, 1, 1),
            PathBuf::from("/t/lat")
        );
        assert_eq!(
            per_run(Path::new("/t/lat"), &w, 2, 3),
            PathBuf::from("/t/lat.rr.2")
        );
    }
}
