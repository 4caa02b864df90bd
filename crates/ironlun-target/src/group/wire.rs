//! The heartbeat datagram between the gateways of a group: who sends,
//! which LUNs it owns (with the lock address RADOS names its client by),
//! whether it is fenced, and which owners it asks to hand a LUN back
//! (failback).
//!
//! One JSON object per UDP datagram, at most [`MAX_DATAGRAM`] bytes.
//! "Authenticated enough" for a hint (the lock in RADOS decides, not
//! this): the receiver takes it only from the address configured for
//! the named gateway, for its own group, with a sequence number above
//! the last one taken from that sender since it was heard, and, with a
//! group key, with an HMAC-SHA256 over the body.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The largest datagram sent or taken (a UDP payload that fits the
/// loopback and any jumbo-free LAN after fragmentation; the configuration
/// limits the LUNs of a group so that a heartbeat fits).
pub const MAX_DATAGRAM: usize = 16 * 1024;

/// What one gateway tells the others.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    pub group: String,
    pub from: String,
    /// Counts up from a random start per process.
    pub seq: u64,
    /// Some LUN of the sender is fenced (it waits for a rejoin).
    pub fenced: bool,
    /// (LUN, lock address) for each LUN the sender owns.
    pub owns: Vec<(u16, String)>,
    /// (owner's name, LUN): asks that owner to hand the LUN over.
    pub release: Vec<(String, u16)>,
    /// The sender is stopping and has released every lock it held: the
    /// others take its LUNs at once, without waiting for its silence and
    /// without breaking a lock (an orderly stop, SIGTERM). Written only
    /// when set, so that every other heartbeat reads as before to a
    /// gateway of an earlier version (a rolling upgrade).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub leaving: bool,
}

/// A datagram on the wire: the heartbeat and its MAC (hex; empty
/// without a key).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    body: String,
    mac: String,
}

/// Why a datagram was not taken.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("datagram of {0} bytes (at most {MAX_DATAGRAM})")]
    TooLong(usize),
    #[error("not a heartbeat: {0}")]
    Malformed(String),
    #[error("bad or missing MAC")]
    Mac,
}

fn mac_of(key: &[u8], body: &[u8]) -> String {
    let Ok(mut m) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    m.update(body);
    hex(&m.finalize().into_bytes())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The datagram for `hb`, signed with `key` when there is one.
pub fn encode(hb: &Heartbeat, key: Option<&[u8]>) -> Vec<u8> {
    let body = serde_json::to_string(hb).unwrap_or_default();
    let mac = key.map(|k| mac_of(k, body.as_bytes())).unwrap_or_default();
    serde_json::to_vec(&Envelope { body, mac }).unwrap_or_default()
}

/// The heartbeat in `bytes`, its MAC checked against `key` (with a key,
/// one without a good MAC is refused; the comparison takes the same time
/// wherever the first difference is).
pub fn decode(bytes: &[u8], key: Option<&[u8]>) -> Result<Heartbeat, WireError> {
    if bytes.len() > MAX_DATAGRAM {
        return Err(WireError::TooLong(bytes.len()));
    }
    let env: Envelope =
        serde_json::from_slice(bytes).map_err(|e| WireError::Malformed(e.to_string()))?;
    if let Some(k) = key {
        let want = mac_of(k, env.body.as_bytes());
        let same = want.len() == env.mac.len()
            && want
                .bytes()
                .zip(env.mac.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        if !same {
            return Err(WireError::Mac);
        }
    }
    serde_json::from_str(&env.body).map_err(|e| WireError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hb() -> Heartbeat {
        Heartbeat {
            group: "ha1".into(),
            from: "gw1".into(),
            seq: 7,
            fenced: false,
            owns: vec![(0, "127.0.0.1:0/1234".into())],
            release: vec![("gw2".into(), 3)],
            leaving: false,
        }
    }

    #[test]
    fn a_heartbeat_goes_and_comes_back() {
        assert_eq!(decode(&encode(&hb(), None), None), Ok(hb()));
        let key = b"group key";
        assert_eq!(decode(&encode(&hb(), Some(key)), Some(key)), Ok(hb()));
    }

    #[test]
    fn only_a_leaving_heartbeat_carries_the_leaving_field() {
        let text = String::from_utf8(encode(&hb(), None)).unwrap();
        assert!(!text.contains("leaving"), "{text}");
        let bye = Heartbeat {
            leaving: true,
            ..hb()
        };
        let text = String::from_utf8(encode(&bye, None)).unwrap();
        assert!(text.contains("leaving"), "{text}");
        assert_eq!(decode(text.as_bytes(), None), Ok(bye));
    }

    #[test]
    fn with_a_key_an_unsigned_or_altered_one_is_refused() {
        let key = b"group key";
        assert_eq!(decode(&encode(&hb(), None), Some(key)), Err(WireError::Mac));
        assert_eq!(
            decode(&encode(&hb(), Some(b"other key")), Some(key)),
            Err(WireError::Mac)
        );
        let signed = String::from_utf8(encode(&hb(), Some(key))).unwrap();
        let forged = signed.replace("gw1", "gw2");
        assert_eq!(decode(forged.as_bytes(), Some(key)), Err(WireError::Mac));
    }

    #[test]
    fn junk_and_oversized_datagrams_are_refused() {
        assert!(matches!(
            decode(b"\xff\x00", None),
            Err(WireError::Malformed(_))
        ));
        assert!(matches!(
            decode(br#"{"body":"{}","mac":""}"#, None),
            Err(WireError::Malformed(_))
        ));
        let big = vec![b' '; MAX_DATAGRAM + 1];
        assert_eq!(
            decode(&big, None),
            Err(WireError::TooLong(MAX_DATAGRAM + 1))
        );
    }
}
