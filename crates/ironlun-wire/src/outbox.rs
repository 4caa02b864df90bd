//! PDUs waiting to be written, as a queue of byte segments ready for one
//! vectored write: headers encoded into a reused arena, data segments
//! shared (never copied) with whoever produced them, padding and digests
//! appended as small segments (RFC 7143 §11.1, §13.1).
//!
//! The socket is not known here: [`Outbox::write_with`] hands the queued
//! segments to a caller-supplied vectored-write function.

use std::collections::VecDeque;
use std::io::{self, IoSlice};

use bytes::{Bytes, BytesMut};

use crate::{digest, encode_header, pad_len, Digests, Pdu, WireError};

/// IoSlices handed to one vectored write.
pub const MAX_IOV: usize = 64;

/// Arena chunk reserved at a time for encoded headers.
const ARENA_CHUNK: usize = 64 << 10;

static PAD: [u8; 3] = [0; 3];

/// A byte queue of encoded PDUs.
#[derive(Debug)]
pub struct Outbox {
    segs: VecDeque<Bytes>,
    bytes: usize,
    arena: BytesMut,
    /// Digests applied to PDUs pushed from now on.
    pub digests: Digests,
}

impl Outbox {
    pub fn new(digests: Digests) -> Self {
        Outbox {
            segs: VecDeque::new(),
            bytes: 0,
            arena: BytesMut::with_capacity(ARENA_CHUNK),
            digests,
        }
    }

    /// Bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    fn push_seg(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.bytes += b.len();
            self.segs.push_back(b);
        }
    }

    /// Queues one PDU (no AHS). Fails only if `data` is longer than a data
    /// segment can be (2^24 - 1 bytes); nothing is queued then.
    pub fn push(&mut self, pdu: &Pdu, data: Bytes) -> Result<(), WireError> {
        if self.arena.capacity() - self.arena.len() < 128 {
            self.arena.reserve(ARENA_CHUNK);
        }
        let len = u32::try_from(data.len())
            .map_err(|_| WireError::InvalidField("data segment longer than 2^24-1"))?;
        if let Err(e) = encode_header(&pdu.encode(), &[], len, self.digests, &mut self.arena) {
            self.arena.clear();
            return Err(e);
        }
        let head = self.arena.split().freeze();
        self.push_seg(head);
        if data.is_empty() {
            return Ok(());
        }
        let pad = PAD.get(..pad_len(data.len())).unwrap_or(&[]);
        let crc = self
            .digests
            .data
            .then(|| digest::crc32c_parts(&[&data, pad]));
        self.push_seg(data);
        self.push_seg(Bytes::from_static(pad));
        if let Some(crc) = crc {
            self.arena.extend_from_slice(&crc.to_le_bytes());
            let d = self.arena.split().freeze();
            self.push_seg(d);
        }
        Ok(())
    }

    /// Writes queued segments through `write` (a non-blocking vectored
    /// write) until everything is written (`Ok(true)`) or it reports
    /// `WouldBlock` (`Ok(false)`).
    pub fn write_with<W>(&mut self, mut write: W) -> io::Result<bool>
    where
        W: FnMut(&[IoSlice<'_>]) -> io::Result<usize>,
    {
        while !self.segs.is_empty() {
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            let mut n_iov = 0;
            for (slot, seg) in iov.iter_mut().zip(self.segs.iter()) {
                *slot = IoSlice::new(seg);
                n_iov += 1;
            }
            match write(iov.get(..n_iov).unwrap_or(&[])) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket closed")),
                Ok(n) => self.consume(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn consume(&mut self, mut n: usize) {
        self.bytes = self.bytes.saturating_sub(n);
        while n > 0 {
            let Some(front) = self.segs.front_mut() else {
                break;
            };
            if n >= front.len() {
                n -= front.len();
                self.segs.pop_front();
            } else {
                let _ = front.split_to(n);
                n = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameDecoder, NopOut};

    #[test]
    fn partial_writes_reassemble_to_frames() {
        let mut o = Outbox::new(Digests {
            header: true,
            data: true,
        });
        let nop = Pdu::NopOut(NopOut {
            itt: 7,
            ..Default::default()
        });
        o.push(&nop, Bytes::from_static(b"hello")).unwrap();
        o.push(&nop, Bytes::new()).unwrap();
        let mut wire = Vec::new();
        // A socket that takes 3 bytes at a time, then blocks every other call.
        let mut calls = 0;
        loop {
            let done = o
                .write_with(|iov| {
                    calls += 1;
                    if calls % 2 == 0 {
                        return Err(io::ErrorKind::WouldBlock.into());
                    }
                    let mut n = 0;
                    for s in iov {
                        for b in s.iter() {
                            if n == 3 {
                                return Ok(n);
                            }
                            wire.push(*b);
                            n += 1;
                        }
                    }
                    Ok(n)
                })
                .unwrap();
            if done {
                break;
            }
        }
        assert_eq!(o.queued_bytes(), 0);
        let mut d = FrameDecoder::new(8192);
        d.digests = o.digests;
        let mut buf = BytesMut::from(&wire[..]);
        let f = d.decode(&mut buf).unwrap().unwrap();
        assert_eq!(&f.data[..], b"hello");
        assert_eq!(f.bhs.itt(), 7);
        assert!(d.decode(&mut buf).unwrap().is_some());
        assert!(buf.is_empty());
    }
}
