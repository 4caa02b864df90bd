//! What a link carries as TCP payload: the line rate less Ethernet, IPv4
//! and TCP framing at a given MTU (jumbo frames included).

/// Bytes an Ethernet frame takes on the wire beyond its MTU-sized
/// payload: preamble and start delimiter 8, MAC header 14, FCS 4, and the
/// inter-frame gap of 12 byte times (IEEE 802.3 §3.1.1, §4.4.2).
pub const ETHERNET_OVERHEAD: u32 = 38;
/// An IPv4 header without options (RFC 791 §3.1).
pub const IPV4_HEADER: u32 = 20;
/// A TCP header without options (RFC 9293 §3.1).
pub const TCP_HEADER: u32 = 20;
/// The smallest MTU an IPv4 link may have (RFC 791 §3.2); below it the
/// arithmetic means nothing.
pub const MIN_MTU: u32 = 576;

/// TCP payload bytes per second over a line of `line_bits_per_s` at
/// `mtu`, with `tcp_options` bytes of TCP options in every segment (12
/// with timestamps, RFC 7323 §3): the line's bytes per second times the
/// share of each frame that is payload. `None` below [`MIN_MTU`].
pub fn payload_rate(line_bits_per_s: f64, mtu: u32, tcp_options: u32) -> Option<f64> {
    if mtu < MIN_MTU || !line_bits_per_s.is_finite() || line_bits_per_s <= 0.0 {
        return None;
    }
    let payload = mtu.checked_sub(IPV4_HEADER + TCP_HEADER + tcp_options)?;
    let frame = mtu + ETHERNET_OVERHEAD;
    Some(line_bits_per_s / 8.0 * f64::from(payload) / f64::from(frame))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gigabit_ethernet_carries_118_7_mb_per_s_at_1500_and_123_9_jumbo() {
        // 1460 of every 1538 bytes, 8960 of every 9038.
        let std = payload_rate(1e9, 1500, 0).unwrap();
        assert!((std / 1e6 - 118.66).abs() < 0.01, "{std}");
        let jumbo = payload_rate(1e9, 9000, 0).unwrap();
        assert!((jumbo / 1e6 - 123.92).abs() < 0.01, "{jumbo}");
        // Timestamps cost 12 bytes a segment.
        let ts = payload_rate(1e9, 1500, 12).unwrap();
        assert!((ts / 1e6 - 117.69).abs() < 0.01, "{ts}");
        // OC-3 carried as Ethernet frames.
        let oc3 = payload_rate(155e6, 1500, 0).unwrap();
        assert!((oc3 / 1e6 - 18.39).abs() < 0.01, "{oc3}");
    }

    #[test]
    fn a_link_below_the_minimum_mtu_or_rate_has_no_payload_rate() {
        assert_eq!(payload_rate(1e9, 100, 0), None);
        assert_eq!(payload_rate(0.0, 1500, 0), None);
        assert_eq!(payload_rate(f64::NAN, 1500, 0), None);
    }
}
