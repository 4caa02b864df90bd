//! One measurement: every parameter an experiment may sweep, and the
//! negotiation and link it implies.

use std::time::Duration;

use ironlun_initiator::{DigestKind, Offers, SessionOptions};
use ironlun_netem::{HostDelay, LinkSpec, Stage};
use ironlun_proto::keys::{KeyId, Value};
use ironlun_proto::offers::{OfferKey, OFFER_KEYS};
use ironlun_units::{format_rate, format_size};
use serde::Serialize;

/// What the I/O does, and the write negotiation it needs (RFC 7143
/// §13.10, §13.11, §13.14).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Reads.
    Read,
    /// Writes with the session's default negotiation (InitialR2T=No,
    /// ImmediateData=Yes, FirstBurstLength from the offers).
    Write,
    /// Most-solicited writes: InitialR2T=Yes, ImmediateData=No: every
    /// write waits for an R2T.
    SolicitedWrite,
    /// Most-unsolicited writes: InitialR2T=No, ImmediateData=Yes,
    /// FirstBurstLength ≥ the request size.
    UnsolicitedWrite,
}

impl Op {
    pub const ALL: [Op; 4] = [
        Op::Read,
        Op::Write,
        Op::SolicitedWrite,
        Op::UnsolicitedWrite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::SolicitedWrite => "solicited-write",
            Op::UnsolicitedWrite => "unsolicited-write",
        }
    }

    pub fn parse(s: &str) -> Result<Op, String> {
        Op::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| format!("op '{s}': read, write, solicited-write or unsolicited-write"))
    }

    pub fn is_read(self) -> bool {
        self == Op::Read
    }
}

impl Cell {
    /// Percent of I/Os that read.
    pub fn read_pct(&self) -> u32 {
        self.read.unwrap_or(if self.op.is_read() { 100 } else { 0 })
    }
}

/// Digests for a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Digest {
    None,
    Header,
    Data,
    Both,
}

impl Digest {
    pub fn name(self) -> &'static str {
        match self {
            Digest::None => "none",
            Digest::Header => "header",
            Digest::Data => "data",
            Digest::Both => "both",
        }
    }

    pub fn parse(s: &str) -> Result<Digest, String> {
        [Digest::None, Digest::Header, Digest::Data, Digest::Both]
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| format!("digest '{s}': none, header, data or both"))
    }
}

/// Every parameter of one measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    pub op: Op,
    /// Request size, bytes.
    pub bs: u32,
    /// Command window: commands outstanding (queue depth).
    pub qd: u32,
    /// Percent random offsets (0: sequential, IOMeter semantics).
    pub random: u32,
    /// Percent reads, for mixed I/O (`None`: all reads for `read`, all
    /// writes otherwise; the op still chooses the write negotiation).
    pub read: Option<u32>,
    /// Workers (threads of I/O), each with `qd` outstanding.
    pub workers: u32,
    #[serde(serialize_with = "ser_ms")]
    pub rtt: Duration,
    /// Link rate, bit/s; `None`: no cap.
    pub link_rate: Option<u64>,
    /// TCP window (socket buffers, and the window carried over the link).
    pub tcp_window: Option<u32>,
    pub max_burst: Option<u32>,
    pub first_burst: Option<u32>,
    pub max_recv_dsl: Option<u32>,
    pub digest: Digest,
    /// Sessions (paths) to the LUN, used round-robin.
    pub sessions: u32,
    /// LUN backend: ram, null, file (through the page cache) or
    /// file-direct (O_DIRECT).
    pub backend: String,
    /// What a fitted testbed profile adds to the link (none by default).
    pub imposed: Imposed,
}

/// What a fitted testbed profile (`crate::testbed`) adds to a cell's
/// link, through the relay: the line's payload rate, the testbed's own
/// round trip on top of the cell's `rtt` (which stays the study's), and a
/// host time per SCSI command with the hosts' cores (the relay holds
/// each command), then where a study's disk is imposed a disk time on
/// one of the target's disks; and the target's cap on outstanding
/// writes, as the initiator's depth.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Imposed {
    /// The relay's rate instead of `link_rate` (which stays the study's
    /// line): the line's TCP payload rate under the profile's framing.
    pub payload_bps: Option<u64>,
    #[serde(rename = "base_rtt_us", serialize_with = "ser_us")]
    pub base_rtt: Duration,
    /// The relay's in-flight credit instead of `tcp_window` (which stays
    /// the study's, and the endpoints' socket buffers): the profile's
    /// effective TCP window over the emulated link.
    pub window: Option<u32>,
    /// Time the relay holds each command.
    #[serde(rename = "host_delay_us", serialize_with = "ser_us")]
    pub host_delay: Duration,
    /// Time each command keeps one of the hosts' cores busy (the
    /// profile's whole host time; see `ironlun_netem::HostDelay`).
    #[serde(rename = "host_busy_us", serialize_with = "ser_us")]
    pub host_busy: Duration,
    /// The hosts' cores.
    pub host_servers: u32,
    /// Time each command then holds one of the target's disks (the
    /// profile's access and transfer time for the workload's mix; zero:
    /// no disk stage).
    #[serde(rename = "disk_time_us", serialize_with = "ser_us")]
    pub disk_time: Duration,
    /// The target's disks (arrays) serving at once, per session's relay
    /// (app-profiles, the one user, runs one session).
    pub disk_servers: u32,
    /// Writes the target takes at once: a write cell keeps at most this
    /// many outstanding whatever its `qd` (which stays the study's).
    pub write_cap: Option<u32>,
}

impl Imposed {
    /// Whether the relay has anything to do for it (a write cap is the
    /// initiator's depth, not the link's).
    pub fn on_link(&self) -> bool {
        self.payload_bps.is_some()
            || !self.base_rtt.is_zero()
            || self.window.is_some()
            || !self.host_busy.is_zero()
            || !self.disk_time.is_zero()
    }
}

fn ser_us<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e6)
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

impl Default for Cell {
    fn default() -> Self {
        Cell {
            op: Op::Read,
            bs: 64 << 10,
            qd: 1,
            random: 0,
            read: None,
            workers: 1,
            rtt: Duration::ZERO,
            link_rate: None,
            tcp_window: None,
            max_burst: None,
            first_burst: None,
            max_recv_dsl: None,
            digest: Digest::None,
            sessions: 1,
            backend: "ram".into(),
            imposed: Imposed::default(),
        }
    }
}

/// Largest request size a cell may use (one command; bounded by the
/// target's maximum transfer length).
pub const MAX_BS: u32 = 8 << 20;
/// Largest command window a cell may use.
pub const MAX_QD: u32 = 256;
/// Most sessions a cell may open.
pub const MAX_SESSIONS: u32 = 16;

impl Cell {
    pub fn validate(&self) -> Result<(), String> {
        if self.bs < 512 || self.bs % 512 != 0 || self.bs > MAX_BS {
            return Err(format!("bs {}: a multiple of 512 up to {MAX_BS}", self.bs));
        }
        if self.qd == 0 || self.qd > MAX_QD {
            return Err(format!("qd {}: 1..={MAX_QD}", self.qd));
        }
        if self.random > 100 || self.read.is_some_and(|r| r > 100) {
            return Err("random and read are percentages".into());
        }
        if self.workers == 0 || self.workers > 16 {
            return Err(format!("workers {}: 1..=16", self.workers));
        }
        if self.sessions == 0 || self.sessions > MAX_SESSIONS {
            return Err(format!("sessions {}: 1..={MAX_SESSIONS}", self.sessions));
        }
        if !matches!(
            self.backend.as_str(),
            "ram" | "null" | "file" | "file-direct"
        ) {
            return Err(format!(
                "backend '{}': ram, null, file or file-direct",
                self.backend
            ));
        }
        self.offers().validate()
    }

    /// The link between initiator and target; `None` when there is none
    /// to emulate (but a window alone still needs a relay only with RTT).
    pub fn link(&self) -> Option<LinkSpec> {
        if self.rtt.is_zero() && self.link_rate.is_none() && !self.imposed.on_link() {
            return None;
        }
        let mut l = LinkSpec::with_rtt(self.rtt + self.imposed.base_rtt);
        l.rate_bps = self.relay_rate();
        l.window = self.link_window();
        let disk = (!self.imposed.disk_time.is_zero()).then(|| Stage {
            time: self.imposed.disk_time,
            servers: self.imposed.disk_servers.max(1),
        });
        if !self.imposed.host_busy.is_zero() || disk.is_some() {
            l.host = Some(HostDelay {
                delay: self.imposed.host_delay,
                busy: self.imposed.host_busy,
                servers: self.imposed.host_servers.max(1),
                then: disk,
                framer: crate::framer::commands(self.digest),
            });
        }
        Some(l)
    }

    /// Commands kept outstanding: `qd`, or a profile's write cap when it
    /// is less and the cell only writes.
    pub fn depth(&self) -> u32 {
        match self.imposed.write_cap {
            Some(cap) if self.read_pct() == 0 => self.qd.min(cap).max(1),
            _ => self.qd,
        }
    }

    /// The rate the relay runs at: the profile's payload rate, or the
    /// cell's.
    pub fn relay_rate(&self) -> Option<u64> {
        self.imposed.payload_bps.or(self.link_rate)
    }

    /// The window the relay carries: the profile's, or the cell's.
    pub fn link_window(&self) -> Option<u32> {
        self.imposed.window.or(self.tcp_window)
    }

    /// The round trip the link adds: the cell's and the profile's.
    pub fn link_rtt(&self) -> Duration {
        self.rtt + self.imposed.base_rtt
    }

    /// The operational keys this cell offers.
    pub fn offers(&self) -> Offers {
        let mut o = Offers {
            header_digest: vec![DigestKind::None],
            data_digest: vec![DigestKind::None],
            ..Offers::default()
        };
        if matches!(self.digest, Digest::Header | Digest::Both) {
            o.header_digest = vec![DigestKind::Crc32c];
        }
        if matches!(self.digest, Digest::Data | Digest::Both) {
            o.data_digest = vec![DigestKind::Crc32c];
        }
        for k in &SIZE_KEYS {
            if let (Some(n), Some(offer)) = (k.value(self), k.offer()) {
                // Every u32 fits a length field: nothing to refuse.
                let _ = (offer.set)(&mut o, &Value::Number(n.into()));
            }
        }
        match self.op {
            Op::Read | Op::Write => {}
            Op::SolicitedWrite => {
                o.initial_r2t = true;
                o.immediate_data = false;
            }
            Op::UnsolicitedWrite => {
                o.initial_r2t = false;
                o.immediate_data = true;
                if self.first_burst.is_none() {
                    o.first_burst_length = self.bs.max(o.first_burst_length);
                }
                o.max_burst_length = o.max_burst_length.max(o.first_burst_length);
            }
        }
        o
    }

    pub fn session_options(&self) -> SessionOptions {
        let mut s = SessionOptions {
            offers: self.offers(),
            ..SessionOptions::default()
        };
        s.tcp.send_buffer = self.tcp_window;
        s.tcp.recv_buffer = self.tcp_window;
        s.reconnect.attempts = 0;
        s
    }

    /// What sessions a cell needs: cells with equal keys share them.
    pub fn connection_key(&self) -> String {
        format!(
            "{:?}|{:?}|{:?}|{:?}|{}|{}|{:?}",
            self.offers(),
            self.rtt,
            self.link_rate,
            self.tcp_window,
            self.sessions,
            self.backend,
            self.imposed
        )
    }

    /// The value of a named parameter, for tables and JSON.
    pub fn param(&self, name: &str) -> Option<String> {
        Some(match name {
            "op" => self.op.name().to_owned(),
            "bs" => format_size(u64::from(self.bs)),
            "qd" => self.qd.to_string(),
            "random" => self.random.to_string(),
            "read" => self.read.map_or_else(
                || if self.op.is_read() { "100" } else { "0" }.to_owned(),
                |r| r.to_string(),
            ),
            "workers" => self.workers.to_string(),
            "rtt" => format!("{}ms", trim(self.rtt.as_secs_f64() * 1e3)),
            "link_rate" => self.link_rate.map_or("none".into(), format_rate),
            "tcp_window" => self
                .tcp_window
                .map_or("default".into(), |w| format_size(u64::from(w))),
            _ if SizeKey::named(name).is_some() => SizeKey::named(name)?
                .value(self)
                .map_or("default".into(), |w| format_size(u64::from(w))),
            "digest" => self.digest.name().to_owned(),
            "sessions" => self.sessions.to_string(),
            "backend" => self.backend.clone(),
            _ => return None,
        })
    }
}

/// A cell parameter that is an offered length (RFC 7143 §13.12–§13.14):
/// its name is the initiator flag's (`max_burst` for `--max-burst`), its
/// offer the key table's row.
pub struct SizeKey {
    pub id: KeyId,
    /// The cell's value (`None`: the session's default offer).
    pub get: fn(&Cell) -> Option<u32>,
    pub slot: fn(&mut Cell) -> &mut Option<u32>,
}

/// The offered lengths a cell may set.
pub const SIZE_KEYS: [SizeKey; 3] = [
    SizeKey {
        id: KeyId::MAX_BURST_LENGTH,
        get: |c| c.max_burst,
        slot: |c| &mut c.max_burst,
    },
    SizeKey {
        id: KeyId::FIRST_BURST_LENGTH,
        get: |c| c.first_burst,
        slot: |c| &mut c.first_burst,
    },
    SizeKey {
        id: KeyId::MAX_RECV_DATA_SEGMENT_LENGTH,
        get: |c| c.max_recv_dsl,
        slot: |c| &mut c.max_recv_dsl,
    },
];

impl SizeKey {
    /// The key's row in the offered-key table.
    pub fn offer(&self) -> Option<&'static OfferKey> {
        OFFER_KEYS.iter().find(|k| k.id == self.id)
    }

    /// The parameter's name: the flag's, with `_` for `-`.
    pub fn name(&self) -> Option<String> {
        Some(self.offer()?.flag?.long.replace('-', "_"))
    }

    pub fn named(name: &str) -> Option<&'static SizeKey> {
        SIZE_KEYS.iter().find(|k| k.name().as_deref() == Some(name))
    }

    pub fn value(&self, cell: &Cell) -> Option<u32> {
        (self.get)(cell)
    }
}

impl Cell {
    /// This cell with the offered lengths of `other`.
    pub fn with_sizes_of(mut self, other: &Cell) -> Cell {
        for k in &SIZE_KEYS {
            *(k.slot)(&mut self) = k.value(other);
        }
        self
    }
}

/// Parameter names a sweep may use.
pub const PARAMS: [&str; 15] = [
    "op",
    "bs",
    "qd",
    "random",
    "read",
    "workers",
    "rtt",
    "link_rate",
    "tcp_window",
    "max_burst",
    "first_burst",
    "max_recv_dsl",
    "digest",
    "sessions",
    "backend",
];

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::sweep::set_param;

    /// Each offered length a cell sets: by its name (the flag's), shown
    /// by that name in tables and JSON, offered under its key, and
    /// carried by `with_sizes_of`.
    #[test]
    fn every_size_parameter_reaches_its_offer() {
        for k in &SIZE_KEYS {
            let name = k.name().unwrap();
            assert!(PARAMS.contains(&name.as_str()), "{name}");
            let mut cell = Cell::default();
            assert_eq!(cell.param(&name).as_deref(), Some("default"));
            set_param(&mut cell, &name, "16KiB").unwrap();
            assert_eq!(cell.param(&name).as_deref(), Some("16KiB"), "{name}");
            let offer = k.offer().unwrap();
            assert_eq!((offer.get)(&cell.offers()), Value::Number(16384), "{name}");
            let json = serde_json::to_value(&cell).unwrap();
            assert_eq!(json[name.as_str()], 16384, "{name}");
            let copy = Cell::default().with_sizes_of(&cell);
            assert_eq!(k.value(&copy), Some(16384), "{name}");
            set_param(&mut cell, &name, "default").unwrap();
            assert_eq!(cell, Cell::default(), "{name}");
        }
    }
}
