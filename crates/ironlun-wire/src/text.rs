//! Text segments: `key=value` pairs separated by NUL (RFC 7143 §6.1), and
//! their continuation across PDUs with the C bit (RFC 7143 §11.10.2,
//! §11.12.2).

use bytes::Bytes;

use crate::WireError;

/// Longest key name (RFC 7143 §6.1: "a maximum of 63 bytes").
pub const MAX_KEY_LEN: usize = 63;

/// Longest value accepted. Simple values are limited to 255 bytes by
/// RFC 7143 §6.1, but binary values (CHAP challenges, §12.1.3) may be much
/// longer in their hex or base64 form; per-key limits are enforced by the
/// negotiation layer.
pub const MAX_VALUE_LEN: usize = 8192;

/// Parses a complete text segment into ordered pairs.
///
/// Every pair must be NUL-terminated (RFC 7143 §6.1); a missing final NUL is
/// tolerated because the segment end delimits the last pair unambiguously.
/// Empty items (double NULs, zero padding) are skipped.
pub fn parse_pairs(data: &[u8]) -> Result<Vec<(String, String)>, WireError> {
    let mut pairs = Vec::new();
    for item in data.split(|&b| b == 0) {
        if item.is_empty() {
            continue;
        }
        let Some(eq) = item.iter().position(|&b| b == b'=') else {
            return Err(WireError::Text("item without '='"));
        };
        let (key, rest) = item.split_at(eq);
        let value = rest.get(1..).unwrap_or(&[]);
        validate_key(key)?;
        if value.len() > MAX_VALUE_LEN {
            return Err(WireError::Text("value longer than 8192 bytes"));
        }
        let key = std::str::from_utf8(key).map_err(|_| WireError::Text("key is not UTF-8"))?;
        let value =
            std::str::from_utf8(value).map_err(|_| WireError::Text("value is not UTF-8"))?;
        pairs.push((key.to_owned(), value.to_owned()));
    }
    Ok(pairs)
}

/// Checks a key name against RFC 7143 §6.1: 1 to 63 bytes of
/// `a-z A-Z 0-9 . - + @ _`.
pub fn validate_key(key: &[u8]) -> Result<(), WireError> {
    if key.is_empty() {
        return Err(WireError::Text("empty key name"));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(WireError::Text("key name longer than 63 bytes"));
    }
    if !key
        .iter()
        .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'+' | b'@' | b'_'))
    {
        return Err(WireError::Text("invalid character in key name"));
    }
    Ok(())
}

/// Encodes pairs as `key=value\0...`.
pub fn encode_pairs<'a, I>(pairs: I) -> Vec<u8>
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut out = Vec::new();
    for (k, v) in pairs {
        out.extend_from_slice(k.as_bytes());
        out.push(b'=');
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    }
    out
}

/// Collects a text segment that may be split over several PDUs with the C
/// bit, up to a total limit (a bound on what a peer can make us hold).
#[derive(Debug)]
pub struct TextAccumulator {
    buf: Vec<u8>,
    limit: usize,
}

impl TextAccumulator {
    pub fn new(limit: usize) -> Self {
        TextAccumulator {
            buf: Vec::new(),
            limit,
        }
    }

    /// Adds one PDU's data segment. Returns the whole text once a PDU with
    /// C=0 arrives.
    pub fn push(&mut self, data: &[u8], cont: bool) -> Result<Option<Vec<u8>>, WireError> {
        // Past the limit, or past usize, either way too long.
        if self.buf.len().saturating_add(data.len()) > self.limit {
            self.buf.clear();
            return Err(WireError::TextTooLong { limit: self.limit });
        }
        self.buf.extend_from_slice(data);
        if cont {
            Ok(None)
        } else {
            Ok(Some(std::mem::take(&mut self.buf)))
        }
    }

    /// True while a continued text is being collected.
    pub fn in_progress(&self) -> bool {
        !self.buf.is_empty()
    }

    pub fn reset(&mut self) {
        self.buf.clear();
    }
}

/// Hands out a long text response in pieces no larger than the peer's
/// MaxRecvDataSegmentLength; every piece but the last goes out with C=1.
#[derive(Debug, Clone, Default)]
pub struct TextChunker {
    data: Bytes,
}

impl TextChunker {
    pub fn new(data: Vec<u8>) -> Self {
        TextChunker {
            data: Bytes::from(data),
        }
    }

    /// Next piece and whether more follows (the C bit).
    pub fn next_chunk(&mut self, max: usize) -> (Bytes, bool) {
        let n = self.data.len().min(max.max(1));
        let chunk = self.data.split_to(n);
        (chunk, !self.data.is_empty())
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_encode() {
        let data = encode_pairs([
            ("InitiatorName", "iqn.2007-10.com.github:x"),
            ("SessionType", "Normal"),
        ]);
        assert_eq!(
            data,
            b"InitiatorName=iqn.2007-10.com.github:x\0SessionType=Normal\0".to_vec()
        );
        let pairs = parse_pairs(&data).unwrap();
        assert_eq!(
            pairs[0],
            ("InitiatorName".into(), "iqn.2007-10.com.github:x".into())
        );
        assert_eq!(pairs[1], ("SessionType".into(), "Normal".into()));
    }

    #[test]
    fn values_may_contain_equals_and_be_empty() {
        let pairs = parse_pairs(b"X-a=b=c\0SendTargets=\0").unwrap();
        assert_eq!(pairs[0].1, "b=c");
        assert_eq!(pairs[1].1, "");
    }

    #[test]
    fn missing_final_nul_and_padding_tolerated() {
        let pairs = parse_pairs(b"A=1\0B=2").unwrap();
        assert_eq!(pairs.len(), 2);
        let pairs = parse_pairs(b"A=1\0\0\0").unwrap();
        assert_eq!(pairs.len(), 1);
    }

    #[test]
    fn malformed_items_are_errors() {
        assert!(parse_pairs(b"novalue\0").is_err());
        assert!(parse_pairs(b"=x\0").is_err());
        assert!(parse_pairs(b"bad key=x\0").is_err());
        assert!(parse_pairs(&[b'K', b'=', 0xff, 0]).is_err());
        let long_key = format!("{}=1", "K".repeat(64));
        assert!(parse_pairs(long_key.as_bytes()).is_err());
        let ok_key = format!("{}=1", "K".repeat(63));
        assert!(parse_pairs(ok_key.as_bytes()).is_ok());
        let long_value = format!("K={}", "v".repeat(MAX_VALUE_LEN + 1));
        assert!(parse_pairs(long_value.as_bytes()).is_err());
    }

    #[test]
    fn continuation_across_pdus_even_mid_pair() {
        let mut acc = TextAccumulator::new(1024);
        assert_eq!(acc.push(b"HeaderDig", true).unwrap(), None);
        assert!(acc.in_progress());
        assert_eq!(acc.push(b"est=None\0Data", true).unwrap(), None);
        let whole = acc.push(b"Digest=None\0", false).unwrap().unwrap();
        let pairs = parse_pairs(&whole).unwrap();
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[1], ("DataDigest".into(), "None".into()));
        assert!(!acc.in_progress());
    }

    #[test]
    fn accumulator_is_bounded() {
        let mut acc = TextAccumulator::new(10);
        acc.push(b"12345", true).unwrap();
        assert!(matches!(
            acc.push(b"123456", true),
            Err(WireError::TextTooLong { limit: 10 })
        ));
        // After the error it starts clean.
        assert!(!acc.in_progress());
    }

    #[test]
    fn chunker_sets_continue_until_last() {
        let mut c = TextChunker::new(b"0123456789".to_vec());
        assert_eq!(c.next_chunk(4), (Bytes::from_static(b"0123"), true));
        assert_eq!(c.next_chunk(4), (Bytes::from_static(b"4567"), true));
        assert_eq!(c.next_chunk(4), (Bytes::from_static(b"89"), false));
        assert!(c.is_empty());
    }
}
