//! `wan-tuning` (section 4 of the study): TCP with 64 KiB and 10 MB
//! windows, then request size x command window x RTT for solicited
//! writes, unsolicited writes and reads over 155 Mbit/s, and the 1 Gbit/s
//! LAN table.

use std::time::Instant;

use super::fitted::{self, Profile};
use super::steps::{run_tables, sweep_from, tcp_baseline};
use super::{Progress, ReproduceOptions, Reproduction, NAMES};
use crate::runner::Lab;
use crate::sweep::Sweep;

/// Round trips of the TCP baseline (ms).
const TCP_RTTS_MS: [f64; 4] = [0.0, 2.0, 10.0, 50.0];
/// The study's default and enlarged TCP windows.
const TCP_WINDOWS: [u32; 2] = [65536, 10_000_000];

/// The six tables, 155 Mbit/s first as the study prints them.
fn sweeps() -> Result<Vec<(String, Sweep)>, String> {
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
    Ok(sweeps)
}

pub(super) fn run(opts: &ReproduceOptions, progress: Progress<'_>) -> Result<Reproduction, String> {
    let started = Instant::now();
    // The measured rows run under the study's fitted testbed profile.
    let profile = Profile::of("wan-tuning")?;
    progress("TCP baseline: 64 KiB and 10 MB windows at 155 Mbit/s");
    let tcp = tcp_baseline(
        &TCP_RTTS_MS,
        &TCP_WINDOWS,
        profile.payload_bits(None),
        opts.tcp_time,
        1,
        Some(&profile),
    )?;
    let mut sweeps = sweeps()?;
    // The LAN tables run first, right after calibration: at 1 Gbit/s
    // with no delay their queue-depth-1 cells are almost all host time,
    // so they are the ones a drift of the host's speed between
    // calibration and measurement would move. Printed in the study's
    // order.
    let lan = sweeps.split_off(3);
    let lan_tables = lan.len();
    let sweeps: Vec<_> = lan.into_iter().chain(sweeps).collect();
    let mut lab = Lab::new(opts.lab.clone())?;
    let mut tables = run_tables(&mut lab, &sweeps, opts, started, Some(&profile), progress)?;
    tables.rotate_left(lan_tables);
    let held = fitted::held(tables.iter().flat_map(|t| &t.cells).map(|c| &c.cell));
    Ok(Reproduction {
        reproduction: "wan-tuning".into(),
        description: NAMES[0].1.into(),
        elapsed_s: started.elapsed().as_secs_f64(),
        steal_pct: None,
        tcp,
        tables,
        workloads: Vec::new(),
        fs_rows: Vec::new(),
        peers: Vec::new(),
        notes: vec![
            profile.note(&format!(
                "OC-3 at {:.2} MB/s of TCP payload (155 Mbit/s at MTU {}; the TCP baseline too) and 1 Gbit/s at {:.2} MB/s for the LAN tables",
                profile.payload_bits(None) as f64 / 8e6,
                profile.mtu(),
                profile.payload_bits(Some(1e9)) as f64 / 8e6,
            )),
            format!("Host time the relay held per command (the profile's less this machine's own at queue depth 1): {held}."),
            "The link is ironlun's netem relay (no netem qdisc on this kernel): the rate and one-way delays are emulated in userspace and the TCP window is carried by the relay's credit loop, because a relay terminates TCP.".into(),
            "The command window is the queue depth the initiator keeps outstanding (the target's MaxCmdSN credit is larger). RAM LUN: reads and writes are served from memory, as the study's cached target.".into(),
            "Model: per command t0 (host time at queue depth 1 on loopback through the relay) + the host time held + round trips (1, or 2 when the write waits for an R2T) x (RTT + the testbed's) + wire bytes / rate; throughput = min(window (for writes, at most the write cap) x size / cycle, link rate less PDU headers, TCP window / RTT, host rate measured on loopback, cores / host time held).".into(),
        ],
        comparison: None,
        initiators: None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::observe::observations;
    use super::super::{Table, TcpCell};
    use super::*;
    use crate::runner::Measured;
    use crate::sweep::CellResult;

    /// The study's line.
    const WAN_RATE: u64 = 155_000_000;

    /// Every published cell of the study has a row in the grid the
    /// reproduction runs, and every row a published cell (no sockets:
    /// the rows are the grid's cells with a made-up value).
    #[test]
    fn the_grid_measures_every_published_cell() {
        let mut tcp = Vec::new();
        for rtt_ms in TCP_RTTS_MS {
            for window in TCP_WINDOWS {
                for direction in ["up", "down"] {
                    tcp.push(TcpCell {
                        rtt_ms,
                        window,
                        direction,
                        link_rate: WAN_RATE,
                        measured_mb_per_s: 1.0,
                        model_mb_per_s: 1.0,
                    });
                }
            }
        }
        let mut tables = Vec::new();
        for (title, s) in sweeps().unwrap() {
            let cells = s
                .cells()
                .unwrap()
                .into_iter()
                .map(|cell| CellResult {
                    params: Default::default(),
                    measured: Measured {
                        mb_per_s: 1.0,
                        ..Measured::default()
                    },
                    model: None,
                    model_error: None,
                    runs: 1,
                    cell,
                })
                .collect();
            tables.push(Table {
                title,
                rows: Vec::new(),
                cols: Vec::new(),
                cells,
            });
        }
        let r = Reproduction {
            tcp,
            tables,
            ..Reproduction::bare("wan-tuning")
        };
        let c = crate::published::compare(
            &crate::published::load("wan-tuning").unwrap(),
            &observations(&r),
        );
        let missing: Vec<_> = c.cells.iter().filter(|x| x.measured.is_none()).collect();
        assert!(missing.is_empty(), "{missing:#?}");
        assert_eq!((c.compared, c.not_published), (136, 0));
    }
}
