//! Framing: BHS, AHS, optional header digest, data segment with padding,
//! optional data digest (RFC 7143 §11.1, §11.2).
//!
//! [`FrameDecoder`] cuts whole PDUs out of a receive buffer without copying
//! the data segment; [`encode_frame`] writes one PDU into a buffer. Data
//! segment lengths are bounded by the caller's limit before any byte of the
//! segment is buffered, so a peer cannot make us hold more than one
//! negotiated segment per PDU.

use bytes::{Buf, Bytes, BytesMut};

use crate::bhs::{Bhs, BHS_LEN};
use crate::digest;
use crate::WireError;

/// Length of a CRC32C digest on the wire.
pub const DIGEST_LEN: usize = 4;

/// The largest AHS the format allows: 255 words (RFC 7143 §11.2.1.4).
pub const MAX_AHS_LEN: usize = 255 * 4;

/// AHS type for an extended CDB (RFC 7143 §11.2.2.3).
pub const AHS_TYPE_EXTENDED_CDB: u8 = 1;
/// AHS type for the expected bidirectional read data length (§11.2.2.4).
pub const AHS_TYPE_BIDI_READ_LENGTH: u8 = 2;

/// Which digests are in effect on a connection (negotiated per connection,
/// RFC 7143 §13.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Digests {
    pub header: bool,
    pub data: bool,
}

/// One PDU as received: header, AHS and data segment (without padding or
/// digests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub bhs: Bhs,
    pub ahs: Bytes,
    pub data: Bytes,
}

/// Padding that brings `len` to a multiple of four (RFC 7143 §11.2.3).
/// Receive buffer allocated at a time ([`FrameDecoder::make_room`]).
pub const RECV_CHUNK: usize = 256 << 10;

/// Room worth a socket read.
const MIN_READ: usize = 16 << 10;

pub fn pad_len(len: usize) -> usize {
    // (-len) mod 4.
    len.wrapping_neg() & 3
}

/// `len` with its padding; `None` where that does not fit a `usize`.
fn padded_len(len: usize) -> Option<usize> {
    len.checked_add(pad_len(len))
}

/// Free capacity of `buf` (a `BytesMut` never holds more than it has room
/// for, so this never saturates).
fn room(buf: &BytesMut) -> usize {
    buf.capacity().saturating_sub(buf.len())
}

/// Cuts PDUs from a byte stream.
#[derive(Clone, Debug)]
pub struct FrameDecoder {
    pub digests: Digests,
    /// Largest data segment accepted: our declared MaxRecvDataSegmentLength
    /// in full feature phase, or the login-phase limit.
    pub max_data_segment_len: u32,
}

impl FrameDecoder {
    pub fn new(max_data_segment_len: u32) -> Self {
        FrameDecoder {
            digests: Digests::default(),
            max_data_segment_len,
        }
    }

    /// Bytes needed for the whole PDU whose header starts `buf`, once the
    /// header is present; `None` while fewer than 48 bytes are buffered.
    pub fn frame_len(&self, buf: &[u8]) -> Option<usize> {
        let head = buf.get(..BHS_LEN)?;
        let mut b = Bhs::default();
        b.0.copy_from_slice(head);
        self.frame_len_of(&b)
    }

    /// Makes room in a receive buffer before the next socket read, and
    /// returns how much to read. Frames decoded from `buf` share its
    /// memory (no copy), so when the rest of the PDU at its head would not
    /// fit, a fresh buffer is started (of [`RECV_CHUNK`], or eight such
    /// PDUs up to 4 MiB) and that PDU's bytes so far move over. Growing
    /// the old buffer in place instead could copy everything it ever held.
    /// To keep what moves small, a read near the end of a buffer stops at
    /// the end of the PDU at its head plus the next header, when another
    /// PDU as large would not fit after it: then at most a header moves.
    /// Decode every whole PDU first; the result is never 0.
    pub fn make_room(&self, buf: &mut BytesMut) -> usize {
        // A header that `decode` accepted bounds this by the segment limit
        // (under 2^25), so the saturating sums below are exact.
        let whole = self.frame_len(buf).unwrap_or(BHS_LEN);
        let missing = whole.saturating_sub(buf.len());
        if room(buf) < missing.max(MIN_READ) {
            let size = RECV_CHUNK
                .max(whole.saturating_mul(8).min(4 << 20))
                .max(whole.saturating_add(MIN_READ));
            let mut fresh = BytesMut::with_capacity(size);
            fresh.extend_from_slice(buf);
            *buf = fresh;
        }
        let room = room(buf);
        if room.saturating_sub(missing) < whole {
            missing.saturating_add(BHS_LEN).min(room)
        } else {
            room
        }
    }

    /// The PDU's length from its header's length fields (RFC 7143
    /// §11.2.1); `None` where it does not fit a `usize`.
    fn frame_len_of(&self, b: &Bhs) -> Option<usize> {
        let dsl = b.data_segment_len() as usize;
        let digest = |on: bool| if on { DIGEST_LEN } else { 0 };
        let mut n = BHS_LEN
            .checked_add(b.total_ahs_len_bytes())?
            .checked_add(digest(self.digests.header))?;
        if dsl > 0 {
            n = n
                .checked_add(padded_len(dsl)?)?
                .checked_add(digest(self.digests.data))?;
        }
        Some(n)
    }

    /// Takes one whole PDU from the front of `buf`, or returns `Ok(None)` if
    /// more bytes are needed. On a data digest error the PDU is consumed (the
    /// stream stays in step) and the header is returned inside the error, so
    /// the caller can Reject it (RFC 7143 §7.8).
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Frame>, WireError> {
        let Some(head) = buf.get(..BHS_LEN) else {
            return Ok(None);
        };
        let mut bhs = Bhs::default();
        bhs.0.copy_from_slice(head);

        let dsl = bhs.data_segment_len();
        if dsl > self.max_data_segment_len {
            return Err(WireError::DataSegmentTooLong {
                len: dsl,
                max: self.max_data_segment_len,
                bhs: Box::new(bhs),
            });
        }
        let Some(total) = self.frame_len_of(&bhs) else {
            return Err(WireError::DataSegmentTooLong {
                len: dsl,
                max: self.max_data_segment_len,
                bhs: Box::new(bhs),
            });
        };
        let more = total.saturating_sub(buf.len());
        if more > 0 {
            // Make room for the rest of this PDU in one allocation.
            buf.reserve(more);
            return Ok(None);
        }

        // Parts of `total`, which did not overflow: the sums are exact.
        let ahs_len = bhs.total_ahs_len_bytes();
        let header_len = BHS_LEN.saturating_add(ahs_len);
        if self.digests.header {
            let received = le32_at(buf, header_len);
            let computed = digest::crc32c(buf.get(..header_len).unwrap_or(&[]));
            if received != computed {
                // The header cannot be trusted, including its lengths: the
                // connection must be dropped (RFC 7143 §7.8).
                return Err(WireError::HeaderDigest { received, computed });
            }
        }

        let dsl = dsl as usize;
        if ahs_len == 0 && dsl == 0 {
            // A header alone (a READ's command, a NOP-Out, a status
            // answer): the BHS is already copied out, so the buffer only
            // moves on. Splitting it off would share the buffer behind a
            // reference count taken and dropped for every such PDU (5 %
            // of the target's CPU in 4 KiB reads on 8 cores, perf).
            buf.advance(total);
            return Ok(Some(Frame {
                bhs,
                ahs: Bytes::new(),
                data: Bytes::new(),
            }));
        }
        let mut pdu = buf.split_to(total).freeze();
        pdu.advance(BHS_LEN);
        let ahs = pdu.split_to(ahs_len);
        if self.digests.header {
            pdu.advance(DIGEST_LEN);
        }
        let data = if dsl == 0 {
            Bytes::new()
        } else {
            let padded = dsl.saturating_add(pad_len(dsl));
            if self.digests.data {
                let received = le32_at(&pdu, padded);
                let computed = digest::crc32c(pdu.get(..padded).unwrap_or(&[]));
                if received != computed {
                    return Err(WireError::DataDigest {
                        received,
                        computed,
                        bhs: Box::new(bhs),
                    });
                }
            }
            pdu.truncate(dsl);
            pdu
        };
        Ok(Some(Frame { bhs, ahs, data }))
    }
}

fn le32_at(buf: &[u8], off: usize) -> u32 {
    let mut b = [0u8; 4];
    if let Some(s) = off.checked_add(4).and_then(|end| buf.get(off..end)) {
        b.copy_from_slice(s);
    }
    u32::from_le_bytes(b)
}

/// Writes the header part of a PDU (BHS with lengths set, AHS, optional
/// header digest) into `out`. `data_len` is the unpadded data segment length
/// that will follow.
pub fn encode_header(
    bhs: &Bhs,
    ahs: &[u8],
    data_len: u32,
    digests: Digests,
    out: &mut BytesMut,
) -> Result<(), WireError> {
    if ahs.len() % 4 != 0 || ahs.len() > MAX_AHS_LEN {
        return Err(WireError::InvalidField(
            "AHS length must be a multiple of 4, at most 1020",
        ));
    }
    if data_len >= 1 << 24 {
        return Err(WireError::InvalidField("data segment longer than 2^24-1"));
    }
    let mut b = *bhs;
    b.set_total_ahs_len_words((ahs.len() / 4) as u8);
    b.set_data_segment_len(data_len);
    let start = out.len();
    out.extend_from_slice(&b.0);
    out.extend_from_slice(ahs);
    if digests.header {
        let crc = digest::crc32c(out.get(start..).unwrap_or(&[]));
        out.extend_from_slice(&crc.to_le_bytes());
    }
    Ok(())
}

/// Writes a whole PDU: header part, data, padding and optional data digest.
pub fn encode_frame(
    bhs: &Bhs,
    ahs: &[u8],
    data: &[u8],
    digests: Digests,
    out: &mut BytesMut,
) -> Result<(), WireError> {
    let len = u32::try_from(data.len())
        .map_err(|_| WireError::InvalidField("data segment longer than 2^24-1"))?;
    encode_header(bhs, ahs, len, digests, out)?;
    if !data.is_empty() {
        out.extend_from_slice(data);
        let pad = [0u8; 3];
        let pad = pad.get(..pad_len(data.len())).unwrap_or(&[]);
        out.extend_from_slice(pad);
        if digests.data {
            let crc = digest::crc32c_parts(&[data, pad]);
            out.extend_from_slice(&crc.to_le_bytes());
        }
    }
    Ok(())
}

/// One Additional Header Segment (RFC 7143 §11.2.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ahs<'a> {
    pub ahs_type: u8,
    pub specific: u8,
    pub data: &'a [u8],
}

/// Splits the AHS area into its segments. Each segment is a 2-byte length,
/// a type byte, a type-specific byte and data padded to 4 bytes.
pub fn parse_ahs(mut area: &[u8]) -> Result<Vec<Ahs<'_>>, WireError> {
    let mut out = Vec::new();
    while !area.is_empty() {
        let [l0, l1, ahs_type, specific, rest @ ..] = area else {
            return Err(WireError::InvalidField("truncated AHS header"));
        };
        let len = usize::from(u16::from_be_bytes([*l0, *l1]));
        let next = padded_len(len).and_then(|padded| rest.get(padded..));
        let (Some(data), Some(next)) = (rest.get(..len), next) else {
            return Err(WireError::InvalidField("AHS length beyond TotalAHSLength"));
        };
        out.push(Ahs {
            ahs_type: *ahs_type,
            specific: *specific,
            data,
        });
        area = next;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bhs::Opcode;

    fn sample_bhs() -> Bhs {
        let mut b = Bhs::new(Opcode::TEXT_REQUEST);
        b.set_itt(7);
        b
    }

    #[test]
    fn frame_round_trip_with_and_without_digests() {
        for header in [false, true] {
            for data_digest in [false, true] {
                let digests = Digests {
                    header,
                    data: data_digest,
                };
                let mut out = BytesMut::new();
                encode_frame(&sample_bhs(), &[], b"abcde", digests, &mut out).unwrap();
                let expected_len =
                    48 + 8 + if header { 4 } else { 0 } + if data_digest { 4 } else { 0 };
                assert_eq!(out.len(), expected_len);
                let dec = FrameDecoder {
                    digests,
                    max_data_segment_len: 8192,
                };
                // Feed byte by byte: no frame until the last byte arrives.
                let mut buf = BytesMut::new();
                for (i, byte) in out.iter().enumerate() {
                    buf.extend_from_slice(&[*byte]);
                    let r = dec.decode(&mut buf).unwrap();
                    if i + 1 < out.len() {
                        assert!(r.is_none());
                    } else {
                        let f = r.unwrap();
                        assert_eq!(&f.data[..], b"abcde");
                        assert_eq!(f.bhs.itt(), 7);
                        assert_eq!(f.bhs.data_segment_len(), 5);
                    }
                }
                assert!(buf.is_empty());
            }
        }
    }

    #[test]
    fn make_room_moves_at_most_a_header_and_keeps_decoded_frames() {
        let dec = FrameDecoder::new(1 << 20);
        let mut wire = BytesMut::new();
        let data: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        for _ in 0..4 {
            encode_frame(&sample_bhs(), &[], &data, Digests::default(), &mut wire).unwrap();
        }
        // Feed it in reads of 100 000 bytes into whatever room make_room
        // leaves, as a socket would.
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        let mut fed = 0;
        let mut moved = 0;
        while fed < wire.len() {
            let before = (buf.as_ptr(), buf.len());
            let most = dec.make_room(&mut buf);
            if buf.as_ptr() != before.0 {
                moved += before.1;
            }
            assert!(most > 0 && most <= buf.capacity() - buf.len());
            let n = most.min(100_000).min(wire.len() - fed);
            buf.extend_from_slice(&wire[fed..fed + n]);
            assert!(buf.capacity() < 4 << 20, "bounded: {}", buf.capacity());
            fed += n;
            while let Some(f) = dec.decode(&mut buf).unwrap() {
                frames.push(f);
            }
        }
        assert_eq!(frames.len(), 4);
        assert!(frames.iter().all(|f| f.data[..] == data[..]));
        assert!(
            moved <= 4 * BHS_LEN,
            "at most a header moved per buffer: {moved}"
        );
        // A PDU whose rest fits is left where it is.
        let mut buf = BytesMut::with_capacity(400_000);
        buf.extend_from_slice(&wire[..200_000]);
        let before = buf.as_ptr();
        dec.make_room(&mut buf);
        assert_eq!(buf.as_ptr(), before);
    }

    #[test]
    fn two_frames_back_to_back() {
        let mut out = BytesMut::new();
        encode_frame(&sample_bhs(), &[], b"x", Digests::default(), &mut out).unwrap();
        encode_frame(&sample_bhs(), &[], b"", Digests::default(), &mut out).unwrap();
        let dec = FrameDecoder::new(8192);
        let a = dec.decode(&mut out).unwrap().unwrap();
        let b = dec.decode(&mut out).unwrap().unwrap();
        assert_eq!(&a.data[..], b"x");
        assert!(b.data.is_empty());
        assert!(out.is_empty());
    }

    /// Header-only PDUs (the decoder's fast path, no split) between PDUs
    /// with data, with and without a header digest: each decodes whole and
    /// in order, and the buffer ends empty.
    #[test]
    fn header_only_frames_between_data_frames() {
        for header in [false, true] {
            let digests = Digests {
                header,
                data: false,
            };
            let mut dec = FrameDecoder::new(8192);
            dec.digests = digests;
            let mut out = BytesMut::new();
            for payload in [&b""[..], b"abc", b"", b"", b"defgh", b""] {
                encode_frame(&sample_bhs(), &[], payload, digests, &mut out).unwrap();
            }
            let got: Vec<Vec<u8>> = std::iter::from_fn(|| dec.decode(&mut out).unwrap())
                .map(|f| {
                    assert_eq!(f.bhs.opcode(), sample_bhs().opcode());
                    assert!(f.ahs.is_empty());
                    f.data.to_vec()
                })
                .collect();
            let want: Vec<&[u8]> = vec![b"", b"abc", b"", b"", b"defgh", b""];
            assert_eq!(got, want, "header digest {header}");
            assert!(out.is_empty());
        }
    }

    #[test]
    fn header_digest_error_detected() {
        let digests = Digests {
            header: true,
            data: false,
        };
        let mut out = BytesMut::new();
        encode_frame(&sample_bhs(), &[], b"", digests, &mut out).unwrap();
        out[20] ^= 1;
        let dec = FrameDecoder {
            digests,
            max_data_segment_len: 8192,
        };
        assert!(matches!(
            dec.decode(&mut out),
            Err(WireError::HeaderDigest { .. })
        ));
    }

    #[test]
    fn data_digest_error_consumes_pdu_and_returns_header() {
        let digests = Digests {
            header: false,
            data: true,
        };
        let mut out = BytesMut::new();
        encode_frame(&sample_bhs(), &[], b"hello", digests, &mut out).unwrap();
        encode_frame(&sample_bhs(), &[], b"ok", digests, &mut out).unwrap();
        out[49] ^= 0xff;
        let dec = FrameDecoder {
            digests,
            max_data_segment_len: 8192,
        };
        match dec.decode(&mut out) {
            Err(WireError::DataDigest { bhs, .. }) => assert_eq!(bhs.itt(), 7),
            other => panic!("expected data digest error, got {other:?}"),
        }
        // The stream is still in step: the next PDU decodes.
        assert_eq!(&dec.decode(&mut out).unwrap().unwrap().data[..], b"ok");
    }

    #[test]
    fn oversized_data_segment_is_refused_before_buffering() {
        let mut b = sample_bhs();
        b.set_data_segment_len(100_000);
        let mut buf = BytesMut::from(&b.0[..]);
        let dec = FrameDecoder::new(8192);
        assert!(matches!(
            dec.decode(&mut buf),
            Err(WireError::DataSegmentTooLong {
                len: 100_000,
                max: 8192,
                ..
            })
        ));
    }

    #[test]
    fn ahs_is_carried_and_parsed() {
        // Extended CDB AHS: length 5 (4 bytes of CDB + reserved byte), padded.
        let ahs = [0u8, 5, AHS_TYPE_EXTENDED_CDB, 0, 1, 2, 3, 4, 5, 0, 0, 0];
        let mut out = BytesMut::new();
        encode_frame(&sample_bhs(), &ahs, b"", Digests::default(), &mut out).unwrap();
        let f = FrameDecoder::new(8192).decode(&mut out).unwrap().unwrap();
        assert_eq!(f.bhs.total_ahs_len_words(), 3);
        let parsed = parse_ahs(&f.ahs).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].ahs_type, AHS_TYPE_EXTENDED_CDB);
        assert_eq!(parsed[0].data, &[1, 2, 3, 4, 5]);
        assert!(parse_ahs(&[0, 9, 1, 0]).is_err());
        assert!(parse_ahs(&[0, 1]).is_err());
    }

    #[test]
    fn padding() {
        assert_eq!(pad_len(0), 0);
        assert_eq!(pad_len(1), 3);
        assert_eq!(pad_len(4), 0);
        assert_eq!(pad_len(6), 2);
    }
}
