//! A run's latency histograms as they travel in a result: HDR's V2
//! encoding (uncompressed), in base64. They are exact, so results measured
//! apart (by agents on other hosts) merge exactly: percentiles of the
//! whole come from the sum of the histograms, never from the parts'
//! percentiles.
//!
//! Decoding takes bytes from the network: only histograms with the
//! engine's own bounds and precision are accepted (checked in the header
//! before anything is allocated), so a crafted header cannot make the
//! decoder allocate more than the engine's histogram does.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::engine::{HIST_HIGH_NS, HIST_LOW_NS, HIST_SIGFIG};

/// V2's header: cookie, payload length, normalizing offset, digits,
/// lowest, highest, integer-to-double ratio.
const HEADER: usize = 40;
/// V2 uncompressed (the base 0x1c849303 with the word-size bits 0x10).
const V2_COOKIE: u32 = 0x1c84_9313;

/// All I/Os', reads' and writes' latency histograms.
pub type Three = (Histogram<u64>, Histogram<u64>, Histogram<u64>);

/// The latency histograms of a result, each V2-encoded in base64.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histograms {
    pub all: String,
    pub read: String,
    pub write: String,
}

impl Histograms {
    pub fn encode(
        all: &Histogram<u64>,
        read: &Histogram<u64>,
        write: &Histogram<u64>,
    ) -> Result<Histograms, String> {
        Ok(Histograms {
            all: encode(all)?,
            read: encode(read)?,
            write: encode(write)?,
        })
    }

    /// (all, read, write).
    pub fn decode(&self) -> Result<Three, String> {
        Ok((
            decode(&self.all)?,
            decode(&self.read)?,
            decode(&self.write)?,
        ))
    }
}

/// An empty histogram with the engine's bounds.
pub fn empty() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(HIST_LOW_NS, HIST_HIGH_NS, HIST_SIGFIG).map_err(|e| e.to_string())
}

pub fn encode(h: &Histogram<u64>) -> Result<String, String> {
    let mut buf = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut buf)
        .map_err(|e| format!("encoding a latency histogram: {e:?}"))?;
    Ok(STANDARD.encode(buf))
}

pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = STANDARD
        .decode(text)
        .map_err(|e| format!("latency histogram: not base64: {e}"))?;
    check_header(&bytes)?;
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("latency histogram: {e:?}"))?;
    Ok(h)
}

/// Accepts only a V2 histogram of the engine's bounds whose payload is
/// exactly the rest of the bytes.
fn check_header(b: &[u8]) -> Result<(), String> {
    let u32_at = |i: usize| -> Option<u32> {
        let s = b.get(i..i + 4)?;
        Some(u32::from_be_bytes(s.try_into().ok()?))
    };
    let u64_at = |i: usize| -> Option<u64> {
        let s = b.get(i..i + 8)?;
        Some(u64::from_be_bytes(s.try_into().ok()?))
    };
    let bad = |what: &str| Err(format!("latency histogram: {what}"));
    let (Some(cookie), Some(len), Some(digits), Some(low), Some(high)) =
        (u32_at(0), u32_at(4), u32_at(12), u64_at(16), u64_at(24))
    else {
        return bad("shorter than its header");
    };
    if cookie != V2_COOKIE {
        return bad("not an HDR V2 histogram");
    }
    if usize::try_from(len).ok() != Some(b.len() - HEADER.min(b.len())) {
        return bad("its payload length does not match its size");
    }
    if u32::from(HIST_SIGFIG) != digits || low != HIST_LOW_NS || high != HIST_HIGH_NS {
        return bad("bounds or precision other than the engine's");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_round_trips_exactly() {
        let mut h = empty().unwrap();
        for us in [5u64, 80, 80, 950, 12_000, 7_000_000] {
            h.record(us * 1000).unwrap();
        }
        let back = decode(&encode(&h).unwrap()).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.len(), 6);
        assert_eq!(back.max(), h.max());
    }

    #[test]
    fn foreign_or_damaged_histograms_are_refused() {
        let mut other = Histogram::<u64>::new_with_bounds(1, u64::MAX / 4, 5).unwrap();
        other.record(10).unwrap();
        let e = decode(&encode(&other).unwrap()).unwrap_err();
        assert!(e.contains("bounds"), "{e}");
        let mut h = empty().unwrap();
        h.record(5_000).unwrap();
        let mut bytes = STANDARD.decode(encode(&h).unwrap()).unwrap();
        bytes.push(0);
        let e = decode(&STANDARD.encode(&bytes)).unwrap_err();
        assert!(e.contains("payload length"), "{e}");
        // A payload length of 4 GiB with no payload: refused before the
        // decoder would size a buffer for it.
        bytes.truncate(HEADER);
        bytes.splice(4..8, u32::MAX.to_be_bytes());
        let e = decode(&STANDARD.encode(&bytes)).unwrap_err();
        assert!(e.contains("payload length"), "{e}");
        assert!(decode("!!").is_err());
        assert!(decode("").unwrap_err().contains("shorter"));
    }
}
