//! The wire codec: framing, digests and PDU headers (`ironlun-wire`).
//!
//! Input: one byte of settings (digests, MaxRecvDataSegmentLength), one
//! byte of read size, then a byte stream as a peer would send it.
//!
//! Checked beyond "does not panic":
//! - cutting the stream into reads of any size yields the same frames and
//!   the same first error as decoding it whole (a socket may deliver any
//!   split);
//! - a decoded frame encodes back to bytes that decode to the same frame;
//! - a decoded header re-encodes to a header that decodes to the same PDU,
//!   with the same opcode.

use bytes::BytesMut;
use ironlun_wire::{encode_frame, Digests, Frame, FrameDecoder, Pdu, WireError};

/// What one input exercised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WireRun {
    pub frames: usize,
    pub pdus: usize,
    pub error: Option<WireError>,
}

/// Segment limits a connection may have: the login limit, small and
/// large negotiated values, and the format's maximum.
const SEGMENT_LIMITS: [u32; 4] = [8192, 512, 262_144, (1 << 24) - 1];

pub fn wire(data: &[u8]) -> WireRun {
    let (settings, rest) = data.split_first().unwrap_or((&0, &[]));
    let (read_size, stream) = rest.split_first().unwrap_or((&0, &[]));
    let decoder = FrameDecoder {
        digests: Digests {
            header: settings & 1 != 0,
            data: settings & 2 != 0,
        },
        max_data_segment_len: SEGMENT_LIMITS
            .get(usize::from((settings >> 2) & 3))
            .copied()
            .unwrap_or(8192),
    };

    let whole = decode_all(&decoder, stream, stream.len().max(1));
    let pieces = decode_all(&decoder, stream, usize::from(*read_size).max(1));
    assert_eq!(
        whole, pieces,
        "the frames depend on how the stream was split"
    );

    let (frames, error) = whole;
    let mut run = WireRun {
        frames: frames.len(),
        pdus: 0,
        error,
    };
    for frame in &frames {
        check_frame_round_trip(&decoder, frame);
        if check_pdu_round_trip(frame) {
            run.pdus += 1;
        }
    }
    run
}

/// Frames decoded from `stream` delivered `read` bytes at a time, up to
/// and including the first error (after which a connection is dropped).
fn decode_all(
    decoder: &FrameDecoder,
    stream: &[u8],
    read: usize,
) -> (Vec<Frame>, Option<WireError>) {
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    for chunk in stream.chunks(read) {
        buf.extend_from_slice(chunk);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(f)) => frames.push(f),
                Ok(None) => break,
                // A data digest error consumes its PDU and the stream stays
                // in step (RFC 7143 §7.8); every other error ends it.
                Err(e) => return (frames, Some(e)),
            }
        }
    }
    (frames, None)
}

fn check_frame_round_trip(decoder: &FrameDecoder, frame: &Frame) {
    let mut out = BytesMut::new();
    match encode_frame(
        &frame.bhs,
        &frame.ahs,
        &frame.data,
        decoder.digests,
        &mut out,
    ) {
        Ok(()) => {}
        Err(e) => panic!("a decoded frame does not encode: {e}"),
    }
    match decoder.decode(&mut out) {
        Ok(Some(again)) => assert_eq!(&again, frame, "frame changed by a round trip"),
        other => panic!("a re-encoded frame does not decode: {other:?}"),
    }
    assert!(out.is_empty(), "bytes left after a re-encoded frame");
}

/// True when the header decoded as a PDU.
fn check_pdu_round_trip(frame: &Frame) -> bool {
    let Ok(pdu) = Pdu::decode(&frame.bhs) else {
        return false;
    };
    assert_eq!(
        pdu.opcode(),
        frame.bhs.opcode(),
        "decoded as another opcode"
    );
    match Pdu::decode(&pdu.encode()) {
        Ok(again) => assert_eq!(again, pdu, "PDU changed by a round trip"),
        Err(e) => panic!("an encoded {pdu:?} does not decode: {e}"),
    }
    true
}
