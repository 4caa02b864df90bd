//! What a published cell ran, as the profile's model sees it, and what
//! the model predicts for it under a testbed.
//!
//! Per command (mean over the size mix): host time at the initiator and
//! at the target, host time per byte, round trips (one for reads and
//! unsolicited writes, two for solicited ones, RFC 7143 §4.2.5.2) of the
//! testbed's round trip plus any emulated delay, the bytes at the link's
//! payload rate, and the disk where one was used. Commands per second
//! are the least of: the commands outstanding (writes capped by the
//! target) over that cycle; the target's write bytes per round trip; each
//! direction's link payload rate and TCP window per round trip; each
//! host's cores over its per-command time; the disk.

use super::profile::{Knob, Testbed};

/// Bytes of iSCSI headers per command: the command and the response
/// Basic Header Segments (RFC 7143 §11.2.1).
const HEADERS: f64 = 96.0;

/// Where the data lives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Disk {
    /// Memory or a null device: no disk time.
    None,
    /// A disk read or written in order: its streaming rate.
    Sequential,
    /// A disk with this share of commands at random offsets: an access
    /// time for each of those, then its rate. The target's cores (or
    /// arrays) serve that many commands at once.
    Random(f64),
}

/// An I/O load: a command mix kept outstanding over one or more links.
#[derive(Clone, Debug, PartialEq)]
pub struct Load {
    /// Share of commands that read (0 to 1).
    pub read: f64,
    /// (share of commands, bytes).
    pub sizes: Vec<(f64, f64)>,
    /// Commands outstanding.
    pub outstanding: f64,
    /// Links in use (MPIO paths, a NIC team), each a session.
    pub links: f64,
    /// A line rate other than the study's (bit/s).
    pub line_bits_per_s: Option<f64>,
    /// Round trip an emulator added, seconds.
    pub added_rtt_s: f64,
    /// Round trips a write waits (2 when it waits for an R2T).
    pub write_round_trips: f64,
    pub disk: Disk,
}

impl Load {
    /// One size, all reads or all writes.
    pub fn simple(read: bool, bytes: f64, outstanding: f64) -> Load {
        Load {
            read: if read { 1.0 } else { 0.0 },
            sizes: vec![(1.0, bytes)],
            outstanding,
            links: 1.0,
            line_bits_per_s: None,
            added_rtt_s: 0.0,
            write_round_trips: 1.0,
            disk: Disk::None,
        }
    }
}

/// What a cell reports of a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    Iops,
    ReadIops,
    WriteIops,
    /// MB/s (10^6 bytes).
    Throughput,
    ReadThroughput,
    WriteThroughput,
    /// Mean response time, µs.
    Latency,
    ReadLatency,
    WriteLatency,
    /// Initiator CPU, % of all its cores.
    Cpu,
}

/// A published cell as the model sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// One quantity of a load.
    Io(Load, Quantity),
    /// A single TCP stream with a declared socket window (bytes), MB/s.
    Tcp {
        window: f64,
        added_rtt_s: f64,
        line_bits_per_s: Option<f64>,
    },
    /// How much higher one load's throughput is than another's, %.
    Gain(Load, Load),
}

/// The model's rates for a load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    pub iops: f64,
    /// Per-command time of a read and of a write at one outstanding, s.
    pub read_cycle: f64,
    pub write_cycle: f64,
    pub mean_bytes: f64,
    /// Initiator CPU seconds per command.
    pub cpu_per_command: f64,
    pub outstanding: f64,
}

/// The least of `bounds` that is positive (infinite when none is).
fn least(bounds: &[f64]) -> f64 {
    bounds
        .iter()
        .copied()
        .filter(|b| *b > 0.0 && !b.is_nan())
        .fold(f64::INFINITY, f64::min)
}

/// `a / b`, infinite when `b` is not positive (no bound).
fn over(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::INFINITY
    }
}

/// The model's rates for `load` under `tb`.
pub fn rates(tb: &Testbed, load: &Load) -> Rates {
    let total: f64 = load.sizes.iter().map(|(s, _)| s).sum();
    let mean_bytes = over(load.sizes.iter().map(|(s, b)| s * b).sum::<f64>(), total);
    let mean_bytes = if mean_bytes.is_finite() {
        mean_bytes
    } else {
        0.0
    };
    let r = load.read.clamp(0.0, 1.0);
    let w = 1.0 - r;
    let rtt = tb.si(Knob::BaseRtt) + load.added_rtt_s;
    let payload = tb.payload_rate(load.line_bits_per_s);
    let (ti, tt, per_byte) = (
        tb.si(Knob::HostInitiator),
        tb.si(Knob::HostTarget),
        tb.si(Knob::HostPerByte),
    );
    let disk_rate = tb.si(Knob::DiskRate);
    let disk = |bytes: f64| match load.disk {
        Disk::None => 0.0,
        Disk::Sequential => over(bytes, disk_rate),
        Disk::Random(share) => share * tb.si(Knob::DiskAccess) + over(bytes, disk_rate),
    };
    let wire = mean_bytes + HEADERS;
    let base = ti + tt + per_byte * mean_bytes + over(wire, payload) + disk(mean_bytes);
    let read_cycle = base + rtt;
    let write_cycle = base + load.write_round_trips * rtt;
    let cycle = r * read_cycle + w * write_cycle;
    let links = load.links.max(1.0);
    // Writes the target takes at once: a cap in commands and in bytes.
    let write_cap = tb
        .value(Knob::WriteCapCmds)
        .min(over(tb.si(Knob::WriteCapBytes), mean_bytes))
        * links;
    let outstanding = if w > 0.0 {
        load.outstanding.min(write_cap / w)
    } else {
        load.outstanding
    }
    .max(1.0_f64.min(load.outstanding));
    let window = tb.si(Knob::TcpWindow);
    let (ci, ct) = (
        f64::from(tb.declared.initiator_cores.max(1)),
        f64::from(tb.declared.target_cores.max(1)),
    );
    let disk_iops = match load.disk {
        Disk::None => f64::INFINITY,
        _ => over(ct, disk(mean_bytes)),
    };
    let iops = least(&[
        over(outstanding, cycle),
        over(links * payload, r * wire),
        over(links * payload, w * wire),
        over(links * window, r * wire * rtt),
        over(links * window, w * wire * rtt),
        over(ci, ti + per_byte * mean_bytes),
        over(ct, tt + per_byte * mean_bytes),
        disk_iops,
    ]);
    Rates {
        iops: if iops.is_finite() { iops } else { 0.0 },
        read_cycle,
        write_cycle,
        mean_bytes,
        cpu_per_command: ti + per_byte * mean_bytes,
        outstanding: load.outstanding,
    }
}

/// The model's value of `q` for `load`, in the metric's canonical unit.
pub fn quantity(tb: &Testbed, load: &Load, q: Quantity) -> f64 {
    let x = rates(tb, load);
    let r = load.read.clamp(0.0, 1.0);
    let cycle = r * x.read_cycle + (1.0 - r) * x.write_cycle;
    // Little's law: what is outstanding over what completes.
    let latency = over(x.outstanding, x.iops) * 1e6;
    let scaled = |c: f64| {
        if cycle > 0.0 {
            latency * c / cycle
        } else {
            latency
        }
    };
    match q {
        Quantity::Iops => x.iops,
        Quantity::ReadIops => x.iops * r,
        Quantity::WriteIops => x.iops * (1.0 - r),
        Quantity::Throughput => x.iops * x.mean_bytes / 1e6,
        Quantity::ReadThroughput => x.iops * r * x.mean_bytes / 1e6,
        Quantity::WriteThroughput => x.iops * (1.0 - r) * x.mean_bytes / 1e6,
        Quantity::Latency => latency,
        Quantity::ReadLatency => scaled(x.read_cycle),
        Quantity::WriteLatency => scaled(x.write_cycle),
        Quantity::Cpu => {
            let cores = f64::from(tb.declared.initiator_cores.max(1));
            100.0 * x.iops * x.cpu_per_command / cores
        }
    }
}

/// The model's value for a published cell's shape.
pub fn predict(tb: &Testbed, shape: &Shape) -> f64 {
    match shape {
        Shape::Io(load, q) => quantity(tb, load, *q),
        Shape::Tcp {
            window,
            added_rtt_s,
            line_bits_per_s,
        } => {
            let rtt = tb.si(Knob::BaseRtt) + added_rtt_s;
            let inflight = window * tb.value(Knob::WindowShare);
            least(&[tb.payload_rate(*line_bits_per_s), over(inflight, rtt)]) / 1e6
        }
        Shape::Gain(a, b) => {
            let (x, y) = (
                quantity(tb, a, Quantity::Throughput),
                quantity(tb, b, Quantity::Throughput),
            );
            if y > 0.0 {
                (x / y - 1.0) * 100.0
            } else {
                0.0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::profile::Declared;

    fn gigabit() -> Testbed {
        Testbed::new(Declared {
            line_bits_per_s: 1e9,
            mtu: 1500,
            tcp_options: 0,
            initiator_cores: 1,
            target_cores: 1,
        })
    }

    #[test]
    fn one_command_at_a_time_costs_hosts_round_trip_and_wire() {
        let tb = gigabit()
            .fix(Knob::BaseRtt, 100.0)
            .fix(Knob::HostInitiator, 20.0)
            .fix(Knob::HostTarget, 30.0);
        let load = Load::simple(true, 4096.0, 1.0);
        let wire = (4096.0 + HEADERS) / tb.payload_rate(None);
        let cycle = 150e-6 + wire;
        let iops = quantity(&tb, &load, Quantity::Iops);
        assert!((iops - 1.0 / cycle).abs() < 1e-6, "{iops}");
        assert!((quantity(&tb, &load, Quantity::Latency) - cycle * 1e6).abs() < 1e-6);
        // A solicited write waits one more round trip.
        let mut write = Load::simple(false, 4096.0, 1.0);
        write.write_round_trips = 2.0;
        let wiops = quantity(&tb, &write, Quantity::Iops);
        assert!((wiops - 1.0 / (cycle + 100e-6)).abs() < 1e-6);
    }

    #[test]
    fn deep_queues_fill_the_link_or_the_busier_host() {
        let tb = gigabit().fix(Knob::HostTarget, 50.0);
        let big = Load::simple(true, 262_144.0, 32.0);
        let mb = quantity(&tb, &big, Quantity::Throughput);
        let link = tb.payload_rate(None) * 262_144.0 / (262_144.0 + HEADERS) / 1e6;
        assert!((mb - link).abs() < 1e-9, "{mb} {link}");
        let small = Load::simple(true, 512.0, 32.0);
        assert!((quantity(&tb, &small, Quantity::Iops) - 20_000.0).abs() < 1e-6);
    }

    #[test]
    fn the_target_caps_outstanding_writes_and_tcp_its_window() {
        let tb = gigabit()
            .fix(Knob::BaseRtt, 1000.0)
            .fix(Knob::WriteCapCmds, 4.0);
        let w = Load::simple(false, 1024.0, 32.0);
        let r = Load::simple(true, 1024.0, 32.0);
        let ratio = quantity(&tb, &r, Quantity::Iops) / quantity(&tb, &w, Quantity::Iops);
        assert!((ratio - 8.0).abs() < 1e-9, "{ratio}");
        let tcp = |window| Shape::Tcp {
            window,
            added_rtt_s: 0.009,
            line_bits_per_s: None,
        };
        // 64 KiB per 10 ms, well under the link.
        assert!((predict(&tb, &tcp(65536.0)) - 6.5536).abs() < 1e-9);
        assert!((predict(&tb, &tcp(1e8)) - tb.payload_rate(None) / 1e6).abs() < 1e-9);
    }

    #[test]
    fn cpu_is_the_initiators_time_per_command_over_its_cores() {
        let mut d = gigabit().declared;
        d.initiator_cores = 4;
        let tb = Testbed::new(d).fix(Knob::HostInitiator, 40.0);
        let load = Load::simple(true, 512.0, 1.0);
        let iops = quantity(&tb, &load, Quantity::Iops);
        let cpu = quantity(&tb, &load, Quantity::Cpu);
        assert!((cpu - 100.0 * iops * 40e-6 / 4.0).abs() < 1e-9);
    }
}
