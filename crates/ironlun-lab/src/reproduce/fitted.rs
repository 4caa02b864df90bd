//! A study's fitted testbed profile (`crate::testbed`) as its measured
//! rows run under it: what the relay imposes on a cell (the link payload
//! rate, the testbed's round trip, the effective TCP window, the hosts'
//! time per command with their cores, and for app-profiles its disk's
//! time per command on the target's arrays), and the lines that say so beside
//! the tables. The profile depends only on the published values, so it
//! is known before anything runs; the host time held per command is the
//! profile's less this machine's own (calibrated on loopback), so the
//! cycle is the testbed's, not the sum of both hosts'.

use std::time::Duration;

use ironlun_bench::{AccessLine, Workload};

use crate::cell::{Cell, Imposed, Op};
use crate::model::{Calibration, HostLine};
use crate::testbed::{self, Knob, Testbed};

/// A study's fitted profile.
pub(super) struct Profile {
    tb: Testbed,
    /// The knobs the study's model uses: a window or write cap it does
    /// not have is not imposed.
    used: Vec<Knob>,
    /// Knobs a study's rows cannot run under faithfully, with why.
    left_out: Vec<(Knob, &'static str)>,
}

/// Microseconds, for the notes.
fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl Profile {
    /// `study`'s profile, fitted on its declared training cells.
    pub fn of(study: &str) -> Result<Profile, String> {
        let file = crate::published::load(study)?;
        let (tb, used, _) = testbed::fit_file(&file)?
            .ok_or_else(|| format!("{study} declares no training cells"))?;
        let left_out = [Knob::DiskRate, Knob::DiskAccess]
            .into_iter()
            .filter(|k| used.contains(k))
            .map(|k| (k, "the backends are this machine's"))
            .collect();
        Ok(Profile { tb, used, left_out })
    }

    /// The profile less `knob`, which the rows do not run under, for
    /// `why` (printed in the note).
    pub fn leave_out(mut self, knob: Knob, why: &'static str) -> Profile {
        if self.used.contains(&knob) && !self.left_out.iter().any(|l| l.0 == knob) {
            self.left_out.push((knob, why));
        }
        self
    }

    /// Whether the rows run under `knob`: the study's model has it and
    /// it is not left out.
    pub fn uses(&self, knob: Knob) -> bool {
        self.used.contains(&knob) && !self.left_out.iter().any(|l| l.0 == knob)
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
    /// of the cell's, the effective window as the relay's credit (the
    /// socket buffers keep the cell's), the relay holding each command for the profile's host
    /// time less this machine's own at queue depth 1 (`cal`; none where
    /// this machine is slower) while it keeps one of the profile's cores
    /// busy for the whole host time (so a deep queue is bounded by cores
    /// over host time, as on the testbed), and the target's write cap; the window and
    /// write cap only where the study's model has them.
    pub fn impose(&self, cell: &mut Cell, cal: &Calibration) {
        let own = cal.get(cell).map_or(0.0, |h| h.t0_s);
        let host = self.host_time(cell.bs);
        self.impose_host(cell, host, own);
    }

    /// `cell` under the whole profile for a workload `w`, which mixes
    /// sizes and directions: the host time held is the mix's mean, the
    /// profile's less this machine's own (`line`, its host time at queue
    /// depth 1 by size and direction), as [`Profile::impose`] does for
    /// one size (the profile's time is linear in the bytes, so the mean
    /// is its time at the mean size).
    pub fn impose_workload(&self, cell: &mut Cell, w: &Workload, line: &HostLine) {
        let bytes = mix_mean(w, |l| f64::from(l.size));
        let own = mix_mean(w, |l| {
            let r = f64::from(l.read.min(100)) / 100.0;
            r * line.t0(l.size, true) + (1.0 - r) * line.t0(l.size, false)
        });
        let host = self.host_time(bytes.round().clamp(0.0, f64::from(u32::MAX)) as u32);
        self.impose_host(cell, host, own);
    }

    /// Imposes the profile's disk on `cell` for `w` (app-profiles, whose
    /// LUN is memory where the study's was four disk arrays): each command
    /// then holds one of the target's `target_cores` disks for the
    /// profile's disk time at `w`'s mix, the access time for the random
    /// share and its bytes at the disk's rate (as `testbed::load` models
    /// it), after the host.
    pub fn impose_disk(&self, cell: &mut Cell, w: &Workload) {
        let (access, rate) = (self.tb.si(Knob::DiskAccess), self.tb.si(Knob::DiskRate));
        let s = mix_mean(w, |l| {
            let random = f64::from(l.random.min(100)) / 100.0;
            let transfer = if rate > 0.0 {
                f64::from(l.size) / rate
            } else {
                0.0
            };
            random * access + transfer
        });
        cell.imposed.disk_time = Duration::from_secs_f64(s.clamp(0.0, 3600.0));
        cell.imposed.disk_servers = self.disk_servers();
    }

    /// The target's disks serving at once (its declared cores or arrays).
    pub fn disk_servers(&self) -> u32 {
        self.tb.declared.target_cores.max(1)
    }

    /// The profile's random access time.
    pub fn disk_access(&self) -> Duration {
        Duration::from_secs_f64(self.tb.si(Knob::DiskAccess).clamp(0.0, 3600.0))
    }

    /// The profile's disk streaming rate, bytes/s.
    pub fn disk_rate(&self) -> f64 {
        self.tb.si(Knob::DiskRate)
    }

    /// Imposes the profile with a host time per command of `host`, of
    /// which this machine already spends `own_s` seconds. The window and
    /// write cap only where the study's model has them; the cores are
    /// shared by the cell's sessions (each has a relay of its own).
    fn impose_host(&self, cell: &mut Cell, host: Duration, own_s: f64) {
        let own = Duration::from_secs_f64(own_s.clamp(0.0, 3600.0));
        let capped = self.uses(Knob::WriteCapCmds) || self.uses(Knob::WriteCapBytes);
        cell.imposed = Imposed {
            payload_bps: Some(self.payload_bits(cell.link_rate.map(|r| r as f64))),
            base_rtt: self.base_rtt(),
            window: self.uses(Knob::TcpWindow).then(|| self.window()),
            host_delay: host.saturating_sub(own),
            host_busy: host,
            host_servers: (self.cores() / cell.sessions.max(1)).max(1),
            write_cap: capped.then(|| self.write_cap(cell.bs)),
            ..Imposed::default()
        };
    }

    /// What the measured rows run under, with units: `line` says the
    /// link's payload rate; the window, write cap and TCP share only
    /// where the study's model has them, and what of the profile is not
    /// imposed (a disk's times).
    pub fn note(&self, line: &str) -> String {
        let tb = &self.tb;
        let mut parts = vec![
            format!("Run under the fitted testbed profile, through the relay: {line}"),
            format!(
                "the testbed's round trip {:.0} us added to every emulated one",
                us(self.base_rtt())
            ),
        ];
        if self.uses(Knob::TcpWindow) {
            parts.push(format!(
                "an effective TCP window of {:.0} KiB per iSCSI connection (the relay's in-flight credit over the emulated link; the endpoints' socket buffers keep the row's declared window, or the kernel's autotuning)",
                f64::from(self.window()) / 1024.0
            ));
        }
        parts.push(format!(
            "the hosts' time per command {:.0} us initiator + {:.1} us target + {:.3} ns/B, held by the relay per SCSI command less this machine's own time at queue depth 1 (below) while the command keeps {} busy for the whole host time (the cores shared by a row's paths)",
            tb.value(Knob::HostInitiator),
            tb.value(Knob::HostTarget),
            tb.value(Knob::HostPerByte),
            match self.cores() {
                1 => "the hosts' one core".to_owned(),
                n => format!("one of the hosts' {n} cores"),
            },
        ));
        if self.uses(Knob::WindowShare) {
            parts.push(format!(
                "TCP rows keep {:.0} % of the declared window in flight",
                tb.value(Knob::WindowShare) * 100.0
            ));
        }
        if self.uses(Knob::WriteCapCmds) || self.uses(Knob::WriteCapBytes) {
            parts.push(format!(
                "the target's write cap of {:.0} commands and {:.0} KiB (the nearest whole number of requests) bounds the writes the initiator keeps outstanding, whatever the command window the row names",
                tb.value(Knob::WriteCapCmds),
                tb.value(Knob::WriteCapBytes),
            ));
        }
        let mut out = parts.join("; ") + ".";
        for (k, why) in &self.left_out {
            let (v, unit) = match k {
                Knob::TcpWindow => (f64::from(self.window()) / 1024.0, "KiB"),
                _ => (tb.value(*k), k.unit()),
            };
            out.push_str(&format!(
                " Not imposed: {} {v:.2} {unit} ({why}).",
                k.name()
            ));
        }
        out
    }
}

/// The host time the relay held per command, by operation and request
/// size (the calibration is per pair) and, where the cells have more than
/// one, by backend, for the notes: "read 1KiB 41 us", "null read 512KiB
/// 0 us".
pub(super) fn held<'a>(cells: impl Iterator<Item = &'a Cell>) -> String {
    let mut seen: Vec<(&str, Op, u32, Duration)> = Vec::new();
    for c in cells {
        if !seen
            .iter()
            .any(|s| (s.0, s.1, s.2) == (c.backend.as_str(), c.op, c.bs))
        {
            seen.push((&c.backend, c.op, c.bs, c.imposed.host_delay));
        }
    }
    let backends = seen
        .windows(2)
        .any(|w| w.first().map(|a| a.0) != w.last().map(|b| b.0));
    seen.iter()
        .map(|(backend, op, bs, d)| {
            format!(
                "{}{} {} {:.0} us",
                if backends {
                    format!("{backend} ")
                } else {
                    String::new()
                },
                op.name(),
                super::observe::size_label(u64::from(*bs)),
                us(*d)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The mean of `f` over `w`'s access lines, weighted by their shares.
fn mix_mean(w: &Workload, f: impl Fn(&AccessLine) -> f64) -> f64 {
    let total: f64 = w.lines.iter().map(|l| f64::from(l.share)).sum();
    w.lines
        .iter()
        .map(|l| f64::from(l.share) / total.max(1e-9) * f(l))
        .sum()
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

    /// app-profiles' disk: the access time for the random share, the
    /// bytes at the disk's rate, on the target's arrays; the relay gets it
    /// as a stage after the host.
    #[test]
    fn a_workload_under_the_disk_holds_its_mixes_disk_time_on_the_arrays() {
        let p = Profile::of("app-profiles").unwrap();
        let specs = ironlun_bench::profiles::lookup("app-profiles").unwrap();
        let spec = |n: &str| specs.iter().find(|w| w.name == n).unwrap().clone();
        let (access, rate) = (p.disk_access().as_secs_f64(), p.disk_rate());
        let mut cell = p.link_cell();
        p.impose_disk(&mut cell, &spec("db-oltp-8k")); // all random, 8 KiB
        let want = access + 8192.0 / rate;
        assert!((cell.imposed.disk_time.as_secs_f64() - want).abs() < 1e-9);
        assert_eq!(cell.imposed.disk_servers, 4);
        let stage = cell.link().unwrap().host.unwrap().then.unwrap();
        assert_eq!((stage.time, stage.servers), (cell.imposed.disk_time, 4));
        let mut seq = p.link_cell();
        p.impose_disk(&mut seq, &spec("sql-server-log-64k")); // in order
        let want = 65536.0 / rate;
        assert!((seq.imposed.disk_time.as_secs_f64() - want).abs() < 1e-9);
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
        // The endpoints' socket buffers keep the study's window.
        assert_eq!(cell.tcp_window, study.tcp_window);
        assert_eq!(cell.session_options().tcp.recv_buffer, Some(10_000_000));
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

    /// target-backends' model has no window or write cap: its rows keep
    /// their declared window and every command window; its one core
    /// bounds the rows, shared by an MPIO row's two paths; the MPIO
    /// paths get 100 Mbit/s's payload rate; its disk rate is said to be
    /// not imposed.
    #[test]
    fn a_profile_imposes_only_the_knobs_its_study_models() {
        let p = Profile::of("target-backends").unwrap();
        assert!(!p.uses(Knob::TcpWindow) && !p.uses(Knob::WriteCapCmds));
        let study = Cell {
            op: Op::Write,
            bs: 524_288,
            qd: 8,
            link_rate: Some(1_000_000_000),
            tcp_window: Some(4_000_000),
            ..Cell::default()
        };
        let mut cell = study.clone();
        let cal = calibrated(&cell, 300.0);
        p.impose(&mut cell, &cal);
        assert_eq!(cell.link_window(), study.tcp_window);
        assert_eq!(cell.imposed.write_cap, None);
        assert_eq!(cell.depth(), 8);
        assert_eq!(cell.imposed.host_servers, 1);
        assert_eq!(
            cell.imposed.host_delay,
            p.host_time(524_288) - Duration::from_micros(300)
        );
        assert!(
            p.host_time(524_288) > Duration::from_millis(1),
            "{:?}",
            p.host_time(524_288)
        );
        let mut mpio = Cell {
            sessions: 2,
            link_rate: Some(100_000_000),
            ..study
        };
        p.impose(&mut mpio, &cal);
        assert_eq!(mpio.imposed.host_servers, 1);
        let payload = mpio.relay_rate().unwrap() as f64 / 8e6;
        assert!((payload - 11.866).abs() < 0.01, "{payload}");
        let note = p.note("1 Gbit/s");
        assert!(
            note.contains("Not imposed: disk_rate 135.71 MB/s (the backends are this machine's)"),
            "{note}"
        );
        assert!(
            !note.contains("TCP window") && !note.contains("write cap"),
            "{note}"
        );
        // wan-tuning's model has both, and two cores a row's paths share.
        let wan = Profile::of("wan-tuning").unwrap();
        let note = wan.note("OC-3");
        assert!(
            note.contains("TCP window") && note.contains("write cap"),
            "{note}"
        );
        assert!(!note.contains("Not imposed"), "{note}");
        let mut two = Cell {
            sessions: 2,
            ..Cell::default()
        };
        wan.impose(&mut two, &Calibration::default());
        assert_eq!(two.imposed.host_servers, 1);
    }

    /// A workload that mixes sizes and directions is held for the
    /// profile's host time at its mean size less this machine's own mean
    /// over the mix, and gets the fitted window in place of its own.
    #[test]
    fn a_mix_is_held_for_the_profiles_mean_less_this_machines() {
        let p = Profile::of("ramdisk-target").unwrap();
        let w = ironlun_bench::profiles::find("file-server").unwrap();
        // 40 us + 1 ns/B for reads, 60 us + 2 ns/B for writes.
        let line = HostLine {
            read: (40e-6, 1e-9),
            write: (60e-6, 2e-9),
        };
        let total: f64 = w.lines.iter().map(|l| f64::from(l.share)).sum();
        let (mut bytes, mut own) = (0.0, 0.0);
        for l in &w.lines {
            let (q, r) = (f64::from(l.share) / total, f64::from(l.read) / 100.0);
            bytes += q * f64::from(l.size);
            own += q
                * (r * (40e-6 + 1e-9 * f64::from(l.size))
                    + (1.0 - r) * (60e-6 + 2e-9 * f64::from(l.size)));
        }
        let study = Cell {
            link_rate: Some(1_000_000_000),
            tcp_window: Some(524_288),
            ..Cell::default()
        };
        let mut cell = study.clone();
        p.impose_workload(&mut cell, &w, &line);
        let host = p.host_time(bytes.round() as u32);
        let held = host.as_secs_f64() - own;
        let got = cell.imposed.host_delay.as_secs_f64();
        assert!(held > 0.0 && (got - held).abs() < 1e-8, "{got} {held}");
        assert_eq!(cell.imposed.host_busy, host);
        assert_eq!(cell.imposed.host_servers, 4);
        assert_eq!(cell.link_window(), Some(p.window()));
        assert_eq!(cell.tcp_window, study.tcp_window);
        assert!(p.window() < 524_288, "{}", p.window());
        assert_eq!(cell.link_rtt(), p.base_rtt());
        // The model counts the held time in each command's cycle, and
        // the profile's cores bound the rate.
        let mut unheld = cell.clone();
        unheld.imposed.host_delay = Duration::ZERO;
        let under = crate::model::predict_mix(&w, &cell, Some(&line)).unwrap();
        let bare = crate::model::predict_mix(&w, &unheld, Some(&line)).unwrap();
        let added = under.cycle_ms - bare.cycle_ms;
        assert!((added - held * 1e3).abs() < 1e-6, "{added} {held}");
        let mut one_core = cell.clone();
        one_core.imposed.host_servers = 1;
        let bound = crate::model::predict_mix(&w, &one_core, Some(&line)).unwrap();
        let cores = bytes / host.as_secs_f64() / 1e6;
        assert!(
            (bound.mb_per_s - cores).abs() < 1e-6,
            "{} {cores}",
            bound.mb_per_s
        );
        assert_eq!(bound.bound, "profile-host");
    }

    /// A knob left out is neither imposed nor printed as imposed, but
    /// printed as not imposed with its value and why.
    #[test]
    fn a_knob_left_out_is_not_imposed_and_says_why() {
        let p = Profile::of("ramdisk-target")
            .unwrap()
            .leave_out(Knob::TcpWindow, "because");
        assert!(!p.uses(Knob::TcpWindow) && p.uses(Knob::WindowShare));
        let mut cell = Cell {
            tcp_window: Some(524_288),
            ..Cell::default()
        };
        p.impose(&mut cell, &Calibration::default());
        assert_eq!(cell.imposed.window, None);
        assert_eq!(cell.link_window(), Some(524_288));
        let note = p.note("1 Gbit/s");
        assert!(!note.contains("effective TCP window"), "{note}");
        let kib = f64::from(p.window()) / 1024.0;
        assert!(
            note.contains(&format!("Not imposed: tcp_window {kib:.2} KiB (because).")),
            "{note}"
        );
        // The window share is the TCP rows', still imposed.
        assert!(note.contains("of the declared window in flight"), "{note}");
    }

    #[test]
    fn held_times_name_the_backend_only_where_rows_differ_in_it() {
        let cell = |backend: &str, ms: u64| Cell {
            backend: backend.into(),
            imposed: Imposed {
                host_delay: Duration::from_millis(ms),
                ..Imposed::default()
            },
            ..Cell::default()
        };
        let one = [cell("ram", 1), cell("ram", 2)];
        assert_eq!(held(one.iter()), "read 64KiB 1000 us");
        let two = [cell("null", 1), cell("file", 2)];
        assert_eq!(
            held(two.iter()),
            "null read 64KiB 1000 us, file read 64KiB 2000 us"
        );
    }
}
