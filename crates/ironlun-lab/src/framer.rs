//! Where the initiator's SCSI commands begin in its byte stream, for the
//! relay's host time per command (`ironlun_netem::host`): the relay
//! knows no iSCSI, so the lab gives it this framer.
//!
//! A PDU's length is its Basic Header Segment's (RFC 7143 §11.2.1): the
//! BHS, TotalAHSLength words, the header digest, DataSegmentLength
//! padded to four bytes, and the data digest where there is data. Digests
//! start after login (RFC 7143 §13.1: the keys take effect at the end of
//! the login phase), so Login Requests carry none.

use std::sync::{Arc, LazyLock};

use ironlun_netem::Framer;
use ironlun_wire::{Bhs, Digests, FrameDecoder, Opcode, BHS_LEN};

use crate::cell::Digest;

/// The initiator's PDUs with `digests` after login; SCSI Command PDUs
/// are marked.
#[derive(Debug)]
struct Commands {
    digests: Digests,
}

impl Framer for Commands {
    fn header_len(&self) -> usize {
        BHS_LEN
    }

    fn message(&self, header: &[u8]) -> Option<(usize, bool)> {
        let mut b = Bhs::default();
        b.0.copy_from_slice(header.get(..BHS_LEN)?);
        let op = b.opcode();
        if op.is_target_opcode() {
            return None;
        }
        let digests = if op == Opcode::LOGIN_REQUEST {
            Digests::default()
        } else {
            self.digests
        };
        let d = FrameDecoder {
            digests,
            max_data_segment_len: u32::MAX,
        };
        Some((d.frame_len(header)?, op == Opcode::SCSI_COMMAND))
    }
}

static FRAMERS: LazyLock<[Arc<dyn Framer>; 4]> = LazyLock::new(|| {
    [(false, false), (true, false), (false, true), (true, true)].map(|(header, data)| {
        Arc::new(Commands {
            digests: Digests { header, data },
        }) as Arc<dyn Framer>
    })
});

/// The framer of a session with `digest`s (one per kind, shared).
pub fn commands(digest: Digest) -> Arc<dyn Framer> {
    let [none, header, data, both] = &*FRAMERS;
    match digest {
        Digest::None => none,
        Digest::Header => header,
        Digest::Data => data,
        Digest::Both => both,
    }
    .clone()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use ironlun_netem::host::Messages;

    fn pdu(op: Opcode, ahs_words: u8, data: u32) -> Vec<u8> {
        let mut b = Bhs::default();
        b.0[0] = op.0;
        b.0[4] = ahs_words;
        b.0[5..8].copy_from_slice(&data.to_be_bytes()[1..]);
        let mut v = b.0.to_vec();
        v.resize(BHS_LEN + usize::from(ahs_words) * 4, 0);
        v.resize(v.len() + data.div_ceil(4) as usize * 4, 0xab);
        v
    }

    /// A login, then commands with immediate data and Data-Out between
    /// them: the commands are marked, the rest is not, with and without
    /// digests after login.
    #[test]
    fn commands_are_marked_in_the_initiators_stream() {
        for digest in [Digest::None, Digest::Both] {
            let dig = if digest == Digest::Both { 4 } else { 0 };
            let with_digests = |mut p: Vec<u8>, data: bool| {
                p.splice(BHS_LEN..BHS_LEN, vec![0; dig]);
                if data {
                    p.extend(vec![0; dig]);
                }
                p
            };
            let mut stream = pdu(Opcode::LOGIN_REQUEST, 0, 300);
            let mut want = Vec::new();
            for (op, ahs, data) in [
                (Opcode::SCSI_COMMAND, 0, 0),
                (Opcode::SCSI_COMMAND, 1, 1023),
                (Opcode::DATA_OUT, 0, 8192),
                (Opcode::NOP_OUT, 0, 0),
                (Opcode::SCSI_COMMAND, 0, 5),
            ] {
                if op == Opcode::SCSI_COMMAND {
                    want.push(stream.len());
                }
                stream.extend(with_digests(pdu(op, ahs, data), data > 0));
            }
            let mut m = Messages::new(commands(digest));
            assert_eq!(m.marks(&stream), want, "{digest:?}");
            assert!(!m.lost());
            // A target's PDU is not the initiator's stream.
            assert!(m.marks(&pdu(Opcode::DATA_IN, 0, 0)).is_empty());
            assert!(m.lost());
        }
    }
}
