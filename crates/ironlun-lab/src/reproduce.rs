//! The published studies of `shared/workloads.md` as commands: each runs
//! its sweeps against an embedded target over emulated links, prints
//! tables shaped like the published ones with the model beside every
//! cell, and returns records for JSON and the HTML report.

use std::time::{Duration, Instant};

use ironlun_netem::tcpbench::{self, Direction};
use ironlun_netem::{LinkSpec, Relay};
use serde::Serialize;

use crate::model::Calibration;
use crate::report::Section;
use crate::runner::{Lab, LabOptions};
use crate::sweep::{self, CellResult, Sweep, SweepFile};

/// The reproductions, with what each covers.
pub const NAMES: [(&str, &str); 1] = [(
    "wan-tuning",
    "section 4: TCP 64 KiB vs 10 MB windows, then request size x command window x RTT for solicited writes, unsolicited writes and reads over 155 Mbit/s, and the 1 Gbit/s LAN table",
)];

/// How long cells run.
#[derive(Clone, Debug)]
pub struct ReproduceOptions {
    /// Measured time per iSCSI cell (stretched for long round trips).
    pub cell_time: Duration,
    /// Time per TCP measurement.
    pub tcp_time: Duration,
    pub lab: LabOptions,
}

impl Default for ReproduceOptions {
    fn default() -> Self {
        ReproduceOptions {
            cell_time: Duration::from_millis(700),
            tcp_time: Duration::from_millis(800),
            lab: LabOptions::default(),
        }
    }
}

/// One TCP baseline cell.
#[derive(Clone, Debug, Serialize)]
pub struct TcpCell {
    pub rtt_ms: f64,
    pub window: u32,
    pub direction: &'static str,
    pub link_rate: u64,
    pub measured_mb_per_s: f64,
    pub model_mb_per_s: f64,
}

/// One table of a reproduction.
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    pub title: String,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    pub cells: Vec<CellResult>,
}

/// Everything a reproduction measured.
#[derive(Clone, Debug, Serialize)]
pub struct Reproduction {
    pub reproduction: String,
    pub description: String,
    pub elapsed_s: f64,
    /// CPU time the hypervisor stole over the whole run, percent of all
    /// (a contended virtual machine disturbs every timing).
    pub steal_pct: Option<f64>,
    pub tcp: Vec<TcpCell>,
    pub tables: Vec<Table>,
    /// What could not be reproduced as published, and what ran instead.
    pub notes: Vec<String>,
}

/// One JSON record per cell: its parameters, `measured_mb_per_s`,
/// `model_mb_per_s`.
#[derive(Serialize)]
struct Record<'a> {
    section: &'a str,
    #[serde(flatten)]
    params: serde_json::Value,
    measured_mb_per_s: f64,
    model_mb_per_s: Option<f64>,
    model_bound: Option<&'static str>,
}

impl Reproduction {
    /// `{"reproduction": ..., "cells": [...]}`.
    pub fn json(&self) -> Result<String, String> {
        let mut cells = Vec::new();
        for t in &self.tcp {
            cells.push(Record {
                section: "tcp",
                params: serde_json::json!({
                    "rtt_ms": t.rtt_ms, "tcp_window": t.window,
                    "direction": t.direction, "link_rate": t.link_rate }),
                measured_mb_per_s: t.measured_mb_per_s,
                model_mb_per_s: Some(t.model_mb_per_s),
                model_bound: None,
            });
        }
        for tb in &self.tables {
            for c in &tb.cells {
                cells.push(Record {
                    section: &tb.title,
                    params: serde_json::to_value(&c.params).map_err(|e| e.to_string())?,
                    measured_mb_per_s: c.measured.mb_per_s,
                    model_mb_per_s: c.model.as_ref().map(|m| m.mb_per_s),
                    model_bound: c.model.as_ref().map(|m| m.bound),
                });
            }
        }
        serde_json::to_string_pretty(&serde_json::json!({
            "reproduction": self.reproduction,
            "description": self.description,
            "elapsed_s": self.elapsed_s,
            "steal_pct": self.steal_pct,
            "notes": self.notes,
            "cells": cells,
        }))
        .map_err(|e| e.to_string())
    }

    /// Cells more than `tolerance` (0.25 = 25 %) from their model.
    pub fn outliers(&self, tolerance: f64) -> Vec<String> {
        let mut out = Vec::new();
        for t in &self.tcp {
            let e = t.measured_mb_per_s / t.model_mb_per_s - 1.0;
            if e.abs() > tolerance {
                out.push(format!(
                    "tcp {} rtt {} ms window {}: {:.2} vs model {:.2} ({:+.0} %)",
                    t.direction,
                    t.rtt_ms,
                    t.window,
                    t.measured_mb_per_s,
                    t.model_mb_per_s,
                    e * 100.0
                ));
            }
        }
        for tb in &self.tables {
            for c in &tb.cells {
                if let (Some(e), Some(m)) = (c.model_error, &c.model) {
                    if e.abs() > tolerance {
                        let p = |k: &str| c.params.get(k).cloned().unwrap_or_default();
                        out.push(format!(
                            "{}: bs {} qd {} rtt {}: {:.2} vs model {:.2} ({:+.0} %, bound: {}; host steal {})",
                            tb.title,
                            p("bs"),
                            p("qd"),
                            p("rtt"),
                            c.measured.mb_per_s,
                            m.mb_per_s,
                            e * 100.0,
                            m.bound,
                            c.measured
                                .steal_pct
                                .map_or("unknown".into(), |s| format!("{s:.0} %"))
                        ));
                    }
                }
            }
        }
        out
    }

    /// Text tables as printed.
    pub fn text(&self) -> String {
        let mut s = format!("{}: {}\n", self.reproduction, self.description);
        if let Some(st) = self.steal_pct {
            s.push_str(&format!(
                "host CPU stolen by the hypervisor during the run: {st:.1} % (above a few percent, timings are disturbed)\n"
            ));
        }
        if !self.tcp.is_empty() {
            s.push_str("\nTCP throughput, MB/s (model in parentheses)\n");
            s.push_str(&format!("{:<8} {:<10}", "rtt", "window"));
            for d in ["up", "down"] {
                s.push_str(&format!(" {d:>16}"));
            }
            s.push('\n');
            let mut keys: Vec<(String, u32)> = Vec::new();
            for t in &self.tcp {
                let k = (format!("{}ms", t.rtt_ms), t.window);
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            for (rtt, w) in keys {
                s.push_str(&format!(
                    "{rtt:<8} {:<10}",
                    crate::cell::human_size(u64::from(w))
                ));
                for d in ["up", "down"] {
                    let v = self
                        .tcp
                        .iter()
                        .find(|t| {
                            format!("{}ms", t.rtt_ms) == rtt && t.window == w && t.direction == d
                        })
                        .map_or("-".to_owned(), |t| {
                            format!("{:.2} ({:.2})", t.measured_mb_per_s, t.model_mb_per_s)
                        });
                    s.push_str(&format!(" {v:>16}"));
                }
                s.push('\n');
            }
        }
        for tb in &self.tables {
            s.push_str(&format!("\n{} — MB/s (model in parentheses)\n", tb.title));
            s.push_str(&sweep::table(&tb.cells, &tb.rows, &tb.cols));
        }
        for n in &self.notes {
            s.push_str(&format!("\nnote: {n}\n"));
        }
        s
    }

    /// The HTML report.
    pub fn html(&self) -> Result<String, String> {
        let mut sections: Vec<Section<'_>> = self
            .tables
            .iter()
            .map(|t| Section {
                title: t.title.clone(),
                note: String::new(),
                results: &t.cells,
                rows: t.rows.clone(),
                cols: t.cols.clone(),
            })
            .collect();
        let mut tcp_note =
            String::from("TCP baseline (tcpbench through the relay), MB/s measured / model: ");
        for t in &self.tcp {
            tcp_note.push_str(&format!(
                "{} rtt {} ms window {} = {:.2} / {:.2}; ",
                t.direction,
                t.rtt_ms,
                crate::cell::human_size(u64::from(t.window)),
                t.measured_mb_per_s,
                t.model_mb_per_s
            ));
        }
        sections.insert(
            0,
            Section {
                title: "TCP baseline".into(),
                note: tcp_note,
                results: &[],
                rows: Vec::new(),
                cols: Vec::new(),
            },
        );
        let intro = format!(
            "{} ({:.0} s). {}",
            self.description,
            self.elapsed_s,
            self.notes.join(" ")
        );
        crate::report::html(
            &format!("ironlun reproduce {}", self.reproduction),
            &intro,
            &sections,
        )
    }
}

/// Progress lines: (what is running).
pub type Progress<'a> = &'a mut dyn FnMut(&str);

fn tcp_baseline(
    rtts_ms: &[u64],
    windows: &[u32],
    rate: u64,
    time: Duration,
) -> Result<Vec<TcpCell>, String> {
    let listener = tcpbench::listen("127.0.0.1:0".parse().map_err(|e| format!("{e}"))?, None)
        .map_err(|e| e.to_string())?;
    let server = listener.local_addr().map_err(|e| e.to_string())?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let handle = std::thread::spawn(move || tcpbench::serve(listener, s2));
    let mut out = Vec::new();
    let result = (|| {
        for &rtt in rtts_ms {
            for &w in windows {
                let mut spec = LinkSpec::with_rtt(Duration::from_millis(rtt));
                spec.rate_bps = Some(rate);
                spec.window = Some(w);
                let relay = Relay::start(
                    "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?,
                    server,
                    spec.clone(),
                )
                .map_err(|e| e.to_string())?;
                let model = spec.tcp_model_bytes_per_s().unwrap_or(0.0) / 1e6;
                for dir in [Direction::Up, Direction::Down] {
                    // The endpoints' buffers are the window too (capped by
                    // the kernel's limits); the relay carries it over the
                    // emulated delay.
                    let r = tcpbench::run(relay.addr(), dir, 1, time, Some(w))
                        .map_err(|e| format!("tcpbench: {e}"))?;
                    out.push(TcpCell {
                        rtt_ms: rtt as f64,
                        window: w,
                        direction: dir.name(),
                        link_rate: rate,
                        measured_mb_per_s: r.mb_per_s(),
                        model_mb_per_s: model,
                    });
                }
            }
        }
        Ok::<(), String>(())
    })();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = handle.join();
    result.map(|()| out)
}

fn sweep_from(text: &str) -> Result<Sweep, String> {
    let f: SweepFile = toml::from_str(text).map_err(|e| e.to_string())?;
    Sweep::from_file(&f)
}

fn run_tables(
    lab: &mut Lab,
    sweeps: &[(String, Sweep)],
    opts: &ReproduceOptions,
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
        let mut s = s.clone();
        s.time = opts.cell_time;
        progress(title);
        let cells = sweep::run(&s, lab, Some(&cal), &mut |_, _, _| {})?;
        tables.push(Table {
            title: title.clone(),
            rows: s.rows.clone(),
            cols: s.cols.clone(),
            cells,
        });
    }
    Ok(tables)
}

fn wan_tuning(opts: &ReproduceOptions, progress: Progress<'_>) -> Result<Reproduction, String> {
    let started = Instant::now();
    progress("TCP baseline: 64 KiB and 10 MB windows at 155 Mbit/s");
    let tcp = tcp_baseline(
        &[0, 2, 10, 50],
        &[65536, 10_000_000],
        155_000_000,
        opts.tcp_time,
    )?;
    let mut sweeps = Vec::new();
    for (op, label) in [
        ("solicited-write", "most-solicited writes (InitialR2T=Yes, ImmediateData=No)"),
        ("unsolicited-write", "most-unsolicited writes (InitialR2T=No, ImmediateData=Yes, FirstBurstLength >= request)"),
        ("read", "reads"),
    ] {
        let wan = sweep_from(&format!(
            r#"rows = ["bs"]
               cols = ["rtt", "qd"]
               [base]
               op = "{op}"
               link_rate = "155Mbit"
               tcp_window = "10MB"
               [axes]
               bs = ["1KiB", "8KiB", "64KiB", "256KiB"]
               rtt = ["0ms", "2ms", "10ms", "50ms"]
               qd = [1, 32]"#
        ))?;
        sweeps.push((format!("155 Mbit/s: {label}"), wan));
    }
    for (op, label) in [
        ("solicited-write", "solicited writes"),
        ("unsolicited-write", "unsolicited writes"),
        ("read", "reads"),
    ] {
        let lan = sweep_from(&format!(
            r#"rows = ["bs"]
               cols = ["qd"]
               [base]
               op = "{op}"
               link_rate = "1Gbit"
               tcp_window = "10MB"
               [axes]
               bs = ["1KiB", "8KiB", "64KiB", "256KiB"]
               qd = [1, 32]"#
        ))?;
        sweeps.push((format!("1 Gbit/s LAN, no added delay: {label}"), lan));
    }
    let mut lab = Lab::new(opts.lab.clone())?;
    let tables = run_tables(&mut lab, &sweeps, opts, progress)?;
    Ok(Reproduction {
        reproduction: "wan-tuning".into(),
        description: NAMES[0].1.into(),
        elapsed_s: started.elapsed().as_secs_f64(),
        steal_pct: None,
        tcp,
        tables,
        notes: vec![
            "The link is ironlun's netem relay (no netem qdisc on this kernel): the rate and one-way delays are emulated in userspace and the TCP window is carried by the relay's credit loop, because a relay terminates TCP.".into(),
            "The command window is the queue depth the initiator keeps outstanding (the target's MaxCmdSN credit is larger). RAM LUN: reads and writes are served from memory, as the study's cached target.".into(),
            "Model: per command t0 (host time at queue depth 1 on loopback through the relay) + round trips (1, or 2 when the write waits for an R2T) x RTT + wire bytes / rate; throughput = min(window x size / cycle, link rate less PDU headers, TCP window / RTT, host rate measured on loopback).".into(),
        ],
    })
}

/// Runs a reproduction by name.
pub fn run(
    name: &str,
    opts: &ReproduceOptions,
    progress: Progress<'_>,
) -> Result<Reproduction, String> {
    let before = ironlun_bench::cpu::HostCpu::sample();
    let mut r = match name {
        "wan-tuning" => wan_tuning(opts, progress)?,
        _ => {
            return Err(format!(
                "unknown reproduction '{name}' (one of: {})",
                NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ))
        }
    };
    r.steal_pct = match (before, ironlun_bench::cpu::HostCpu::sample()) {
        (Some(a), Some(b)) => a.steal_pct(&b),
        _ => None,
    };
    Ok(r)
}
