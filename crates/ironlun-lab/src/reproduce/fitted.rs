//! A study's fitted testbed profile (`crate::testbed`) as its measured
//! rows run under it: what the relay imposes on a cell (the link payload
//! rate, the testbed's round trip, the effective TCP window, the hosts'
//! time per command with their cores), and the lines that say so beside
//! the tables. The profile depends only on the published values, so it
//! is known before anything runs; the host time held per command is the
//! profile's less this machine's own (calibrated on loopback), so the
//! cycle is the testbed's, not the sum of both hosts'.

use std::time::Duration;

use crate::cell::{Cell, Imposed, Op};
use crate::model::Calibration;
use crate::testbed::{self, Knob, Testbed};

/// A study's fitted profile.
pub(super) struct Profile {
    tb: Testbed,
}

/// Microseconds, for the notes.
fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl Profile {
    /// `study`'s profile, fitted on its declared training cells.
    pub fn of(study: &str) -> Result<Profile, String> {
        let file = crate::published::load(study)?;
        let (tb, _, _) = testbed::fit_file(&file)?
            .ok_or_else(|| format!("{study} declares no training cells"))?;
        Ok(Profile { tb })
    }

    /// The TCP payload rate of a link at `line` bit/s (the study's line
    /// when `None`), as the relay's rate in bit/s.
    pub fn payload_bits(&self, line: Option<f64>) -> u64 {
        (self.tb.payload_rate(line) * 8.0) as u64
    }

    pub fn mtu(&self) -> u32 {
        self.tb.declared.mtu
    }

    /// The testbed's own round trip.
    pub fn base_rtt(&self) -> Duration {
        Duration::from_secs_f64(self.tb.si(Knob::BaseRtt).max(0.0))
    }

    /// The iSCSI connections' effective TCP window, bytes.
    pub fn window(&self) -> u32 {
        self.tb
            .si(Knob::TcpWindow)
            .clamp(1024.0, f64::from(256u32 << 20)) as u32
    }

    /// Bytes a TCP stream keeps in flight with a declared socket window.
    pub fn in_flight(&self, declared: u32) -> u32 {
        let share = self.tb.value(Knob::WindowShare).clamp(0.0, 1.0);
        ((f64::from(declared) * share) as u32).max(1024)
    }

    /// The testbed hosts' time for one command of `bytes`: the initiator's
    /// and target's per-command time and the per-byte time.
    pub fn host_time(&self, bytes: u32) -> Duration {
        let s = self.tb.si(Knob::HostInitiator)
            + self.tb.si(Knob::HostTarget)
            + self.tb.si(Knob::HostPerByte) * f64::from(bytes);
        Duration::from_secs_f64(s.max(0.0))
    }

    /// Writes of `bytes` the target takes at once: the lesser of its cap
    /// in commands and its cap in bytes over the request size, as the
    /// nearest whole number of commands (the model's is fractional), at
    /// least one.
    pub fn write_cap(&self, bytes: u32) -> u32 {
        let by_bytes = self.tb.si(Knob::WriteCapBytes) / f64::from(bytes.max(1));
        let cap = self.tb.value(Knob::WriteCapCmds).min(by_bytes).round();
        if cap.is_finite() {
            cap.clamp(1.0, f64::from(crate::cell::MAX_QD)) as u32
        } else {
            crate::cell::MAX_QD
        }
    }

    /// Commands the hosts serve at once: the fewer cores of the two.
    pub fn cores(&self) -> u32 {
        let d = &self.tb.declared;
        d.initiator_cores.min(d.target_cores).max(1)
    }

    /// The link alone (app-profiles): the payload rate and round trip.
    pub fn link_cell(&self) -> Cell {
        Cell {
            link_rate: Some(self.payload_bits(None)),
            imposed: Imposed {
                payload_bps: Some(self.payload_bits(None)),
                base_rtt: self.base_rtt(),
                ..Imposed::default()
            },
            ..Cell::default()
        }
    }

    /// `cell` under the whole profile: its line's payload rate (the
    /// study's when the cell names none), the testbed's round trip on top
    /// of the cell's, the effective window (relay credit and socket
    /// buffers), the relay holding each command for the profile's host
    /// time less this machine's own at queue depth 1 (`cal`; none where
    /// this machine is slower) while it keeps one of the profile's cores
    /// busy for the whole host time (so a deep queue is bounded by cores
    /// over host time, as on the testbed), and the target's write cap.
    pub fn impose(&self, cell: &mut Cell, cal: &Calibration) {
        let own = cal
            .get(cell)
            .map_or(Duration::ZERO, |h| Duration::from_secs_f64(h.t0_s.max(0.0)));
        cell.tcp_window = Some(self.window());
        let host = self.host_time(cell.bs);
        cell.imposed = Imposed {
            payload_bps: Some(self.payload_bits(cell.link_rate.map(|r| r as f64))),
            base_rtt: self.base_rtt(),
            host_delay: host.saturating_sub(own),
            host_busy: host,
            host_servers: self.cores(),
            write_cap: Some(self.write_cap(cell.bs)),
        };
    }

    /// What the measured rows run under, with units.
    pub fn note(&self, line: &str) -> String {
        let tb = &self.tb;
        format!(
            "Run under the fitted testbed profile, through the relay: {line}; the testbed's round trip {:.0} us added to every emulated one; an effective TCP window of {:.0} KiB per iSCSI connection (the relay's in-flight credit and the socket buffers); the hosts' time per command {:.0} us initiator + {:.0} us target + {:.2} ns/B, held by the relay per SCSI command less this machine's own time at queue depth 1 (below) while the command keeps one of {} cores busy for the whole host time; TCP rows keep {:.0} % of the declared window in flight; the target's write cap of {:.0} commands and {:.0} KiB (the nearest whole number of requests) bounds the writes the initiator keeps outstanding, whatever the command window the row names.",
            us(self.base_rtt()),
            f64::from(self.window()) / 1024.0,
            tb.value(Knob::HostInitiator),
            tb.value(Knob::HostTarget),
            tb.value(Knob::HostPerByte),
            self.cores(),
            tb.value(Knob::WindowShare) * 100.0,
            tb.value(Knob::WriteCapCmds),
            tb.value(Knob::WriteCapBytes),
        )
    }
}

/// The host time the relay held per command, by operation and request
/// size (the calibration is per pair), for the notes: "read 1KiB 41 us".
pub(super) fn held<'a>(cells: impl Iterator<Item = &'a Cell>) -> String {
    let mut seen: Vec<(Op, u32, Duration)> = Vec::new();
    for c in cells {
        if !seen.iter().any(|s| (s.0, s.1) == (c.op, c.bs)) {
            seen.push((c.op, c.bs, c.imposed.host_delay));
        }
    }
    seen.iter()
        .map(|(op, bs, d)| {
            format!(
                "{} {} {:.0} us",
                op.name(),
                super::observe::size_label(u64::from(*bs)),
                us(*d)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::cell::Digest;
    use crate::model::{predict, HostCost};

    fn calibrated(cell: &Cell, t0_us: f64) -> Calibration {
        let mut cal = Calibration::default();
        cal.costs.insert(
            (cell.op, cell.bs, Digest::None, true),
            HostCost {
                t0_s: t0_us / 1e6,
                max_bytes_per_s: 1e12,
            },
        );
        cal
    }

    /// A cell under wan-tuning's profile keeps the study's conditions
    /// (what the published cells are matched by) and gets the profile's
    /// link: payload rate, the testbed's round trip on top of the
    /// study's, the fitted window, and the host time less this machine's
    /// own, none where this machine is the slower.
    #[test]
    fn a_cell_under_the_profile_keeps_the_studys_conditions_and_gets_its_link() {
        let p = Profile::of("wan-tuning").unwrap();
        let study = Cell {
            bs: 8192,
            qd: 32,
            rtt: Duration::from_millis(10),
            link_rate: Some(155_000_000),
            tcp_window: Some(10_000_000),
            ..Cell::default()
        };
        let mut cell = study.clone();
        let cal = calibrated(&cell, 20.0);
        p.impose(&mut cell, &cal);
        assert_eq!((cell.rtt, cell.link_rate), (study.rtt, study.link_rate));
        assert_eq!(cell.param("rtt"), study.param("rtt"));
        let link = cell.link().unwrap();
        assert_eq!(link.rtt(), study.rtt + p.base_rtt());
        assert!(p.base_rtt() > Duration::ZERO);
        assert_eq!(link.window, Some(p.window()));
        // OC-3's payload at MTU 1500: 18.39 MB/s.
        let payload = link.rate_bps.unwrap() as f64 / 8e6;
        assert!((payload - 18.39).abs() < 0.01, "{payload}");
        let host = link.host.unwrap();
        let held = p.host_time(8192) - Duration::from_micros(20);
        assert_eq!(host.delay, held);
        assert_eq!(host.busy, p.host_time(8192));
        assert_eq!(host.servers, 2);
        // Reads are not capped; writes are, by commands and by bytes.
        assert_eq!(cell.depth(), 32);
        let mut w = Cell {
            op: Op::UnsolicitedWrite,
            ..study.clone()
        };
        p.impose(&mut w, &cal);
        assert_eq!(w.depth(), p.write_cap(8192));
        assert!(w.depth() > 1 && w.depth() < 32, "{}", w.depth());
        assert_eq!(p.write_cap(262_144), 1);
        assert!(p.write_cap(65536) > p.write_cap(262_144));
        // The model counts the held time once per command.
        let bare = predict(&study, cal.get(&study));
        let under = predict(&cell, cal.get(&cell));
        assert!(under.cycle_ms > bare.cycle_ms);
        // A machine slower than the testbed holds nothing more.
        let mut slow = study.clone();
        p.impose(&mut slow, &calibrated(&study, 1e6));
        let slow_host = slow.link().unwrap().host.unwrap();
        assert_eq!(slow_host.delay, Duration::ZERO);
        // Its cores still bound a deep queue.
        assert_eq!(slow_host.busy, p.host_time(8192));
        // The LAN cells get 1 Gbit/s's payload rate.
        let mut lan = Cell {
            link_rate: Some(1_000_000_000),
            ..study
        };
        p.impose(&mut lan, &cal);
        let payload = lan.relay_rate().unwrap() as f64 / 8e6;
        assert!((payload - 118.66).abs() < 0.01, "{payload}");
    }

    #[test]
    fn tcp_rows_keep_the_fitted_share_of_their_window_in_flight() {
        let p = Profile::of("wan-tuning").unwrap();
        let share = f64::from(p.in_flight(65536)) / 65536.0;
        assert!(share > 0.1 && share < 1.0, "{share}");
        assert!(p.in_flight(10_000_000) > 1_000_000);
    }
}
