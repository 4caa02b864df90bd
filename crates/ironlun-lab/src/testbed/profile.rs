//! A testbed as a few physical parameters: what a study declared (line
//! rate, MTU, links, cores) and what is fitted (host costs, windows, the
//! target's write cap, disk times), each with its unit.

use std::collections::BTreeMap;

use serde::Serialize;

use super::framing;

/// A fitted (or fixed) parameter of a testbed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Knob {
    /// Round trip of the testbed's own network with no emulated delay.
    BaseRtt,
    /// Host time per command at the initiator (also its CPU time).
    HostInitiator,
    /// Host time per command at the target.
    HostTarget,
    /// Host time per byte moved (copies, checksums), each end.
    HostPerByte,
    /// Effective TCP window of the iSCSI connections.
    TcpWindow,
    /// Share of a declared socket window that TCP keeps in flight.
    WindowShare,
    /// Writes the target keeps outstanding at most.
    WriteCapCmds,
    /// Write bytes the target keeps outstanding at most.
    WriteCapBytes,
    /// A disk's streaming rate.
    DiskRate,
    /// A disk's random access time (seek and rotation).
    DiskAccess,
}

/// Every knob, in print order.
pub const KNOBS: [Knob; 10] = [
    Knob::BaseRtt,
    Knob::HostInitiator,
    Knob::HostTarget,
    Knob::HostPerByte,
    Knob::TcpWindow,
    Knob::WindowShare,
    Knob::WriteCapCmds,
    Knob::WriteCapBytes,
    Knob::DiskRate,
    Knob::DiskAccess,
];

impl Knob {
    pub fn name(self) -> &'static str {
        match self {
            Knob::BaseRtt => "base_rtt",
            Knob::HostInitiator => "host_cost_initiator",
            Knob::HostTarget => "host_cost_target",
            Knob::HostPerByte => "host_cost_per_byte",
            Knob::TcpWindow => "tcp_window",
            Knob::WindowShare => "window_share",
            Knob::WriteCapCmds => "target_write_cap",
            Knob::WriteCapBytes => "target_write_cap_bytes",
            Knob::DiskRate => "disk_rate",
            Knob::DiskAccess => "disk_access_time",
        }
    }

    /// The unit the value is kept and printed in.
    pub fn unit(self) -> &'static str {
        match self {
            Knob::BaseRtt | Knob::HostInitiator | Knob::HostTarget => "us",
            Knob::HostPerByte => "ns/B",
            Knob::TcpWindow | Knob::WriteCapBytes => "KiB",
            Knob::WindowShare => "share",
            Knob::WriteCapCmds => "commands",
            Knob::DiskRate => "MB/s",
            Knob::DiskAccess => "ms",
        }
    }

    /// Factor from the printed unit to SI (seconds, bytes, bytes/s).
    pub fn si(self) -> f64 {
        match self {
            Knob::BaseRtt | Knob::HostInitiator | Knob::HostTarget => 1e-6,
            Knob::HostPerByte => 1e-9,
            Knob::TcpWindow | Knob::WriteCapBytes => 1024.0,
            Knob::WindowShare | Knob::WriteCapCmds => 1.0,
            Knob::DiskRate => 1e6,
            Knob::DiskAccess => 1e-3,
        }
    }

    /// What it means, in a phrase.
    pub fn what(self) -> &'static str {
        match self {
            Knob::BaseRtt => "round trip of the testbed's network with no emulated delay",
            Knob::HostInitiator => "host time per command at the initiator",
            Knob::HostTarget => "host time per command at the target",
            Knob::HostPerByte => "host time per byte moved, at each end",
            Knob::TcpWindow => "effective TCP window of the iSCSI connections",
            Knob::WindowShare => "share of a declared socket window TCP keeps in flight",
            Knob::WriteCapCmds => "writes the target keeps outstanding at most",
            Knob::WriteCapBytes => "write bytes the target keeps outstanding at most",
            Knob::DiskRate => "disk streaming rate",
            Knob::DiskAccess => "disk random access time",
        }
    }

    /// The value a knob has until a study fixes or frees it: no host
    /// cost, no caps, no disk.
    fn neutral(self) -> f64 {
        match self {
            Knob::TcpWindow | Knob::WriteCapBytes | Knob::WriteCapCmds | Knob::DiskRate => 1e9,
            Knob::WindowShare => 1.0,
            _ => 0.0,
        }
    }
}

/// One knob's value and, if it is fitted, its bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Setting {
    /// In [`Knob::unit`].
    pub value: f64,
    /// `Some((lo, hi))` when the fit may move it, within these.
    pub bounds: Option<(f64, f64)>,
}

/// What a study's text says of its testbed (never fitted).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Declared {
    /// Line rate of each link, bit/s.
    pub line_bits_per_s: f64,
    pub mtu: u32,
    /// Bytes of TCP options per segment (12 with timestamps).
    pub tcp_options: u32,
    pub initiator_cores: u32,
    pub target_cores: u32,
}

/// A testbed: what was declared and the knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct Testbed {
    pub declared: Declared,
    settings: BTreeMap<Knob, Setting>,
}

impl Testbed {
    /// A testbed with every knob fixed at a neutral value (no host cost,
    /// no caps, no disk); studies then fix or free the knobs they use.
    pub fn new(declared: Declared) -> Testbed {
        let settings = KNOBS
            .into_iter()
            .map(|k| {
                let s = Setting {
                    value: k.neutral(),
                    bounds: None,
                };
                (k, s)
            })
            .collect();
        Testbed { declared, settings }
    }

    /// `knob` fixed at `value`.
    pub fn fix(mut self, knob: Knob, value: f64) -> Testbed {
        self.settings.insert(
            knob,
            Setting {
                value,
                bounds: None,
            },
        );
        self
    }

    /// `knob` free within `lo..=hi`, starting at `start`.
    pub fn free(mut self, knob: Knob, start: f64, lo: f64, hi: f64) -> Testbed {
        self.settings.insert(
            knob,
            Setting {
                value: start.clamp(lo, hi),
                bounds: Some((lo, hi)),
            },
        );
        self
    }

    pub fn setting(&self, knob: Knob) -> Setting {
        self.settings.get(&knob).copied().unwrap_or(Setting {
            value: knob.neutral(),
            bounds: None,
        })
    }

    /// In the knob's unit.
    pub fn value(&self, knob: Knob) -> f64 {
        self.setting(knob).value
    }

    /// In SI units (seconds, bytes, bytes/s).
    pub fn si(&self, knob: Knob) -> f64 {
        self.value(knob) * knob.si()
    }

    /// Sets a free knob's value, clamped to its bounds (a fixed knob is
    /// left alone).
    pub fn set(&mut self, knob: Knob, value: f64) {
        if let Some(s) = self.settings.get_mut(&knob) {
            if let Some((lo, hi)) = s.bounds {
                s.value = value.clamp(lo, hi);
            }
        }
    }

    /// The knobs the fit may move.
    pub fn free_knobs(&self) -> Vec<Knob> {
        KNOBS
            .into_iter()
            .filter(|k| self.setting(*k).bounds.is_some())
            .collect()
    }

    /// TCP payload bytes per second of one link at `line_bits_per_s`
    /// (the study's line unless a cell names another).
    pub fn payload_rate(&self, line_bits_per_s: Option<f64>) -> f64 {
        let d = &self.declared;
        framing::payload_rate(
            line_bits_per_s.unwrap_or(d.line_bits_per_s),
            d.mtu,
            d.tcp_options,
        )
        .unwrap_or(0.0)
    }

    /// Every parameter with its unit, for the reports: the declared ones
    /// and the derived payload rate first, then the knobs a study uses
    /// (`used`), each marked fitted or fixed.
    pub fn parameters(&self, used: &[Knob]) -> Vec<Parameter> {
        let d = &self.declared;
        let mut out = vec![
            Parameter::declared("line_rate", d.line_bits_per_s / 1e6, "Mbit/s", "line rate of a link"),
            Parameter::declared("mtu", f64::from(d.mtu), "B", "MTU (9000: jumbo frames)"),
            Parameter::declared(
                "link_payload_rate",
                self.payload_rate(None) / 1e6,
                "MB/s",
                "TCP payload rate of a link: line rate less Ethernet, IPv4 and TCP framing at the MTU",
            ),
            Parameter::declared("initiator_cores", f64::from(d.initiator_cores), "cores", "initiator host's cores"),
            Parameter::declared("target_cores", f64::from(d.target_cores), "cores", "target host's cores"),
        ];
        for k in KNOBS.into_iter().filter(|k| used.contains(k)) {
            let s = self.setting(k);
            out.push(Parameter {
                name: k.name(),
                value: s.value,
                unit: k.unit(),
                fitted: s.bounds.is_some(),
                what: k.what(),
            });
        }
        out
    }
}

/// A parameter as the reports print it.
#[derive(Clone, Debug, Serialize)]
pub struct Parameter {
    pub name: &'static str,
    pub value: f64,
    pub unit: &'static str,
    /// Moved by the fit (false: declared by the study or fixed).
    pub fitted: bool,
    pub what: &'static str,
}

impl Parameter {
    fn declared(
        name: &'static str,
        value: f64,
        unit: &'static str,
        what: &'static str,
    ) -> Parameter {
        Parameter {
            name,
            value,
            unit,
            fitted: false,
            what,
        }
    }
}
