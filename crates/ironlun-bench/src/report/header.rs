//! The report's summary header: per run, what was measured where (target,
//! LUN, link, ironlun's version, the machine), and each workload's
//! access specification in one line.

use std::fmt::Write as _;

use super::format::{self, esc};
use super::svg::colour;
use super::Run;
use crate::result::RunReport;
use crate::spec::Workload;

/// The part of an older file's target text that names the emulated link.
const VIA_LINK: &str = " via an emulated link: ";

/// The target, without the link (older files carry both in one text).
fn target(rep: &RunReport) -> String {
    let t = rep.target.as_deref().unwrap_or("-");
    t.split_once(VIA_LINK).map_or(t, |(t, _)| t).to_owned()
}

/// The emulated link, or that there was none.
fn link(rep: &RunReport) -> String {
    if let Some(l) = &rep.link {
        return l.clone();
    }
    rep.target
        .as_deref()
        .and_then(|t| t.split_once(VIA_LINK))
        .map_or_else(|| "none emulated".to_owned(), |(_, l)| l.to_owned())
}

/// The LUNs with their size and block size, or for files that have no
/// LUN list, the labels the workloads carry.
fn luns(rep: &RunReport) -> String {
    if !rep.luns.is_empty() {
        let all: Vec<String> = rep
            .luns
            .iter()
            .map(|l| {
                let size = l.blocks as f64 * f64::from(l.block_size);
                let shape = format!("{}, {} B blocks", format::bytes(size), l.block_size);
                // The target column already names a single LUN.
                if Some(l.label.as_str()) == rep.target.as_deref() {
                    shape
                } else {
                    format!("{}: {shape}", l.label)
                }
            })
            .collect();
        return all.join("; ");
    }
    let mut labels: Vec<&str> = Vec::new();
    for l in rep.workloads.iter().flat_map(|w| &w.luns) {
        if !labels.contains(&l.as_str()) {
            labels.push(l);
        }
    }
    if labels.is_empty() {
        "-".into()
    } else {
        labels.join("; ")
    }
}

fn machine(rep: &RunReport) -> String {
    format!(
        "{}, {} cores, Linux {}",
        rep.host.cpu_model, rep.host.cpus, rep.host.kernel
    )
}

/// A run's colour swatch and name.
pub fn swatch(run: usize, name: &str) -> String {
    format!(
        "<span class=\"key\" data-run=\"{run}\"><i style=\"background:{}\"></i>{}</span>",
        colour(run),
        esc(name)
    )
}

/// The summary table: one row per run.
pub fn summary(runs: &[Run]) -> String {
    let mut h = String::from(
        "<table class=\"summary\"><tr><th>run</th><th>started</th><th>tool</th><th>target</th>\
         <th>LUN</th><th>link</th><th>machine</th></tr>",
    );
    for (i, r) in runs.iter().enumerate() {
        let rep = &r.report;
        let started = if rep.started.is_empty() {
            "-".to_owned()
        } else {
            rep.started.replacen('T', " ", 1)
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{} {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            swatch(i, &r.name),
            esc(&started),
            esc(&rep.tool),
            esc(&rep.version),
            esc(&target(rep)),
            esc(&luns(rep)),
            esc(&link(rep)),
            esc(&machine(rep))
        );
    }
    h.push_str("</table>");
    h
}

/// A workload's access specification in one line: "4 KiB, 70 % read,
/// 100 % random; QD 32 × 1 worker; 10 s".
pub fn spec(w: &Workload) -> String {
    let lines = match w.lines.as_slice() {
        [l] => format!(
            "{}, {} % read, {} % random",
            format::bytes(f64::from(l.size)),
            l.read,
            l.random
        ),
        ls => format!("a mix of {} access lines", ls.len()),
    };
    let workers = if w.workers == 1 { "worker" } else { "workers" };
    let mut s = format!(
        "{lines}; QD {} × {} {workers} per LUN; {} s",
        w.queue_depth, w.workers, w.time_s
    );
    if let Some(r) = w.rate_iops {
        let _ = write!(s, "; at most {} IOPS per worker", format::count(r));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{HostInfo, LunInfo};

    fn rep(target: &str) -> RunReport {
        RunReport {
            tool: "ironlun bench".into(),
            version: "0.1.0".into(),
            started: String::new(),
            host: HostInfo {
                cpu_model: "Test CPU".into(),
                cpus: 2,
                kernel: "6.1.0".into(),
            },
            target: Some(target.into()),
            link: None,
            luns: Vec::new(),
            workloads: Vec::new(),
        }
    }

    #[test]
    fn an_older_file_s_link_is_split_from_its_target() {
        let r = rep("iscsi://h/iqn.x/0 via an emulated link: RTT 10 ms, 155 Mbit/s");
        assert_eq!(target(&r), "iscsi://h/iqn.x/0");
        assert_eq!(link(&r), "RTT 10 ms, 155 Mbit/s");
        assert_eq!(link(&rep("iscsi://h/iqn.x/0")), "none emulated");
    }

    #[test]
    fn the_summary_names_the_lun_and_the_machine() {
        let mut r = rep("iscsi://h/iqn.x/0");
        r.luns.push(LunInfo {
            label: "iscsi://h/iqn.x/0".into(),
            blocks: 131_072,
            block_size: 512,
        });
        let runs = [Run {
            name: "a<b>".into(),
            report: r,
        }];
        let h = summary(&runs);
        assert!(h.contains("<td>64 MiB, 512 B blocks</td>"), "{h}");
        assert!(h.contains("Test CPU, 2 cores, Linux 6.1.0"));
        assert!(h.contains("a&lt;b&gt;"));
        assert!(h.contains("ironlun bench 0.1.0"));
    }

    #[test]
    fn luns_other_than_the_target_are_named() {
        let mut r = rep("iscsi://h/iqn.x/0");
        for lun in 0..2 {
            r.luns.push(LunInfo {
                label: format!("iscsi://h/iqn.x/{lun}"),
                blocks: 8,
                block_size: 4096,
            });
        }
        assert_eq!(
            luns(&r),
            "32 KiB, 4096 B blocks; iscsi://h/iqn.x/1: 32 KiB, 4096 B blocks"
        );
    }

    #[test]
    fn a_spec_reads_as_a_sentence() {
        let mut w = Workload::simple("w", "", crate::spec::AccessLine::simple(4096, 70, 100), 32);
        w.time_s = 10.0;
        assert_eq!(
            spec(&w),
            "4 KiB, 70 % read, 100 % random; QD 32 × 1 worker per LUN; 10 s"
        );
    }
}
