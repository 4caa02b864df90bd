//! What a link looks like: delays, rate, jitter, window.

use std::time::Duration;

use ironlun_units::format_rate;

use crate::host::HostDelay;

/// An emulated link between a client (the initiator side) and a server
/// (the target side). "Up" is client to server.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkSpec {
    /// One-way delay client → server.
    pub delay_up: Duration,
    /// One-way delay server → client.
    pub delay_down: Duration,
    /// Link rate in bit/s, each direction (full duplex); `None`: no cap.
    pub rate_bps: Option<u64>,
    /// Extra delay drawn uniformly from [0, jitter] per chunk; order is
    /// kept (TCP would reorder nothing the relay delivers).
    pub jitter: Duration,
    /// The TCP window carried over the emulated link (see the crate
    /// docs); `None`: the relay buffers at least twice the
    /// bandwidth-delay product and never limits.
    pub window: Option<u32>,
    /// Keep the CPUs out of idle while the relay runs (see
    /// [`crate::awake`]). Off by default: on a VM whose host caps its CPU
    /// the spinners spend the quota and the whole VM is throttled.
    pub keep_awake: bool,
    /// Host time per marked message, client → server (see
    /// [`crate::host`]); `None`: none.
    pub host: Option<HostDelay>,
}

/// Largest window or relay buffer per direction.
pub const MAX_BUFFER: usize = 256 << 20;
/// Relay buffer per direction when nothing bounds the bandwidth-delay
/// product (no rate cap).
pub const UNCAPPED_BUFFER: usize = 64 << 20;
/// Smallest relay buffer per direction.
pub const MIN_BUFFER: usize = 4 << 20;

impl LinkSpec {
    /// A symmetric link: half the round trip each way.
    pub fn with_rtt(rtt: Duration) -> LinkSpec {
        LinkSpec {
            delay_up: rtt / 2,
            delay_down: rtt - rtt / 2,
            ..LinkSpec::default()
        }
    }

    pub fn rtt(&self) -> Duration {
        self.delay_up + self.delay_down
    }

    /// True when the relay changes nothing but adds its own hop.
    pub fn is_transparent(&self) -> bool {
        self.rtt().is_zero()
            && self.rate_bps.is_none()
            && self.jitter.is_zero()
            && self.host.is_none()
    }

    /// Bytes allowed on the emulated link per direction: the window, or
    /// a buffer of at least twice the bandwidth-delay product.
    pub fn buffer_bytes(&self) -> usize {
        if let Some(w) = self.window {
            return (w as usize).clamp(1, MAX_BUFFER);
        }
        match self.rate_bps {
            Some(r) => {
                let rtt = (self.rtt() + 2 * self.jitter).as_secs_f64();
                let bdp = (r as f64 / 8.0 * rtt) as usize;
                bdp.saturating_mul(2).clamp(MIN_BUFFER, MAX_BUFFER)
            }
            None => UNCAPPED_BUFFER,
        }
    }

    /// The relay moves data in chunks of about a millisecond of link
    /// time (at most 64 KiB, at least one Ethernet segment, at most a
    /// quarter of the window): each is delayed and delivered as a unit,
    /// as a packet train would be.
    pub fn chunk_bytes(&self) -> usize {
        let mut c = 64usize << 10;
        if let Some(r) = self.rate_bps {
            c = c.min((r / 8 / 1000) as usize);
        }
        if let Some(w) = self.window {
            c = c.min(w as usize / 4);
        }
        c.max(1448)
    }

    /// Within a chunk, each piece of this many bytes has its own due
    /// time (its bytes leave the link when they are serialised, as a
    /// packet's do): about 50 µs of link time, at least one Ethernet
    /// segment, at most a chunk. Without a rate cap nothing is
    /// serialised and the chunk is one piece.
    pub fn piece_bytes(&self) -> usize {
        match self.rate_bps {
            Some(r) => ((r / 8 / 20_000) as usize)
                .max(1448)
                .min(self.chunk_bytes()),
            None => self.chunk_bytes(),
        }
    }

    /// What a bulk TCP stream should get over this link, in bytes/s:
    /// the rate, or the window per round trip if that is less (the
    /// window-limited throughput of TCP; the round trip includes one
    /// chunk's serialisation, as a real one includes a segment's).
    /// `None` when nothing bounds it.
    pub fn tcp_model_bytes_per_s(&self) -> Option<f64> {
        let by_rate = self.rate_bps.map(|r| r as f64 / 8.0);
        let chunk_time = by_rate.map_or(0.0, |r| self.chunk_bytes() as f64 / r);
        let rtt = self.rtt().as_secs_f64() + chunk_time;
        let by_window = match self.window {
            Some(w) if rtt > 0.0 => Some(f64::from(w) / rtt),
            _ => None,
        };
        match (by_rate, by_window) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// One line for logs and reports.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "RTT {:?} ({:?} up, {:?} down)",
            self.rtt(),
            self.delay_up,
            self.delay_down
        );
        match self.rate_bps {
            Some(r) => s.push_str(&format!(", {}", format_rate(r))),
            None => s.push_str(", no rate cap"),
        }
        if !self.jitter.is_zero() {
            s.push_str(&format!(", jitter {:?}", self.jitter));
        }
        if let Some(w) = self.window {
            s.push_str(&format!(", window {w} B"));
        }
        if let Some(h) = &self.host {
            s.push_str(&format!(
                ", commands held {:?} (a core busy {:?}, {} cores)",
                h.delay, h.busy, h.servers
            ));
            if let Some(d) = &h.then {
                s.push_str(&format!(
                    ", then {:?} on one of {} servers",
                    d.time, d.servers
                ));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_cover_the_bandwidth_delay_product() {
        let mut l = LinkSpec::with_rtt(Duration::from_millis(50));
        assert_eq!(l.delay_up + l.delay_down, Duration::from_millis(50));
        l.rate_bps = Some(1_000_000_000);
        // 1 Gbit/s x 50 ms = 6.25 MB; twice that.
        assert_eq!(l.buffer_bytes(), 12_500_000);
        l.rate_bps = Some(1_000_000);
        assert_eq!(l.buffer_bytes(), MIN_BUFFER);
        l.window = Some(65536);
        assert_eq!(l.buffer_bytes(), 65536);
        assert!(!l.is_transparent());
        assert!(LinkSpec::default().is_transparent());
    }

    #[test]
    fn tcp_model_is_the_rate_or_the_window_per_round_trip() {
        let mut l = LinkSpec::with_rtt(Duration::from_millis(50));
        assert_eq!(l.tcp_model_bytes_per_s(), None);
        l.rate_bps = Some(155_000_000);
        assert_eq!(l.tcp_model_bytes_per_s(), Some(19_375_000.0));
        l.window = Some(65536);
        // 16 KiB chunks (a quarter of the window) take 0.85 ms at 155 Mbit/s.
        let chunk = 16384.0 / 19_375_000.0;
        assert_eq!(l.tcp_model_bytes_per_s(), Some(65536.0 / (0.05 + chunk)));
        l.window = Some(10_000_000);
        assert_eq!(l.tcp_model_bytes_per_s(), Some(19_375_000.0));
    }
}
