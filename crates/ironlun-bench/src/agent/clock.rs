//! The agents' clocks against the controller's, from a ping exchange
//! (as NTP's offset, RFC 5905 §8): the controller sends at `sent`, the
//! agent reads its clock at `agent`, the reply arrives at `received`; the
//! offset is `agent - (sent + received) / 2`, in error by at most half the
//! round trip, so the sample with the shortest round trip is kept.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, nanoseconds since the Unix epoch (negative before it).
pub fn unix_ns() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    }
}

/// One ping: the controller's send and receive instants and the agent's
/// reading between them.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub sent: i64,
    pub agent: i64,
    pub received: i64,
}

/// An agent's clock against the controller's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Offset {
    /// Agent minus controller, nanoseconds.
    pub offset_ns: i64,
    /// The round trip of the sample it came from.
    pub rtt_ns: i64,
}

/// The offset of the sample with the shortest round trip (`None`
/// without a sample whose reply came after its request).
pub fn estimate(samples: &[Sample]) -> Option<Offset> {
    samples
        .iter()
        .filter(|s| s.received >= s.sent)
        .min_by_key(|s| s.received - s.sent)
        .map(|s| Offset {
            offset_ns: s.agent - (s.sent / 2 + s.received / 2 + (s.sent % 2 + s.received % 2) / 2),
            rtt_ns: s.received - s.sent,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortest_round_trip_gives_the_offset() {
        // The agent is 5 s ahead. A slow sample (its reply held up on the
        // way back) would put it 1.5 s further; the fast one is right
        // within its 2 ms round trip.
        let s = [
            Sample {
                sent: 1_000_000_000,
                agent: 6_001_000_000,
                received: 4_000_000_000,
            },
            Sample {
                sent: 10_000_000_000,
                agent: 15_001_000_000,
                received: 10_002_000_000,
            },
            Sample {
                sent: 20,
                agent: 0,
                received: 10,
            },
        ];
        let o = estimate(&s).unwrap();
        assert_eq!(o.offset_ns, 5_000_000_000);
        assert_eq!(o.rtt_ns, 2_000_000);
        assert_eq!(estimate(&[]), None);
        assert_eq!(estimate(&s[2..]), None, "a reply before its request");
    }
}
