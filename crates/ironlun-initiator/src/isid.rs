//! Which ISID each session gets when one initiator opens several.
//!
//! RFC 7143 §11.12.5: the ISID names the session within its initiator
//! port. Bytes 0 to 3 say how it was made (`T`, `A`, `B`, `C`: here the
//! "random" type, 10b); the last two bytes, `D`, are the qualifier, which
//! tells apart the sessions one initiator port opens to one target portal
//! group. A login with an ISID the target already has for this initiator
//! reinstates, and so ends, that session (§6.3.5), so each concurrent
//! session needs its own.
//!
//! The scheme: session `index` of a set opened from the options' ISID
//! (`base`) adds `index` to the qualifier, modulo 2^16, and keeps the
//! first four bytes. Session 0 keeps `base`. Every caller that opens
//! several sessions at once (multipath, several sessions per LUN) numbers
//! them from 0 and takes its ISIDs from here.

/// The ISID of session `index` among sessions opened from `base`: `base`
/// with `index` added to its qualifier (the last two bytes), modulo 2^16.
/// Distinct indices below 65,536 give distinct ISIDs.
pub fn isid_for(base: [u8; 6], index: usize) -> [u8; 6] {
    let [a, b, c, d, q0, q1] = base;
    // Truncation is the modulo the scheme documents.
    let step = (index % (1 << 16)) as u16;
    let [q0, q1] = u16::from_be_bytes([q0, q1])
        .wrapping_add(step)
        .to_be_bytes();
    [a, b, c, d, q0, q1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn session_zero_keeps_the_base() {
        let base = [0x80, 0x1e, 0x0a, 0x01, 0x02, 0x03];
        assert_eq!(isid_for(base, 0), base);
        assert_eq!(isid_for(base, 1), [0x80, 0x1e, 0x0a, 0x01, 0x02, 0x04]);
    }

    #[test]
    fn distinct_sessions_get_distinct_isids() {
        // A qualifier near the top wraps within the last two bytes and
        // never touches the type and naming bytes.
        for base in [
            [0x80, 0x1e, 0x0a, 0x00, 0x00, 0x00],
            [0x80, 0x1e, 0x0a, 0x12, 0xff, 0xf0],
        ] {
            let isids: HashSet<[u8; 6]> = (0..1024).map(|i| isid_for(base, i)).collect();
            assert_eq!(isids.len(), 1024);
            assert!(isids.iter().all(|i| i[..4] == base[..4]));
        }
        // The carry goes into the qualifier's high byte.
        assert_eq!(
            isid_for([0x80, 0, 0, 0, 0x00, 0xff], 1),
            [0x80, 0, 0, 0, 0x01, 0x00]
        );
    }
}
