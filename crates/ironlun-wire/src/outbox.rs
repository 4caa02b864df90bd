//! PDUs waiting to be written, as a queue of segments ready for one
//! vectored write: headers encoded into a reused arena, data segments
//! shared (never copied) with whoever produced them, padding and digests
//! appended as small segments (RFC 7143 §11.1, §13.1). A data segment may
//! also be a range of a file ([`Payload::File`]), which the caller's
//! [`Sink`] sends from the page cache (`sendfile`).
//!
//! The socket is not known here: [`Outbox::write_to`] hands the queued
//! segments to a caller-supplied [`Sink`], and [`Outbox::write_with`] to a
//! vectored-write function when everything queued is in memory.

use std::collections::VecDeque;
use std::io::{self, IoSlice};

use bytes::{Bytes, BytesMut};
use ironlun_payload::{FileRange, Payload};

use crate::{digest, encode_header, pad_len, Digests, Pdu, WireError};

/// IoSlices handed to one vectored write.
pub const MAX_IOV: usize = 64;

/// Arena chunk reserved at a time for encoded headers.
const ARENA_CHUNK: usize = 64 << 10;

static PAD: [u8; 3] = [0; 3];

/// Where queued segments go: a non-blocking socket, in practice. Both
/// calls return the bytes taken, or `WouldBlock`.
pub trait Sink {
    /// Writes some of the bytes of `bufs`, in order.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;

    /// Sends some of a file range's bytes, from its start.
    fn send_file(&mut self, range: &FileRange) -> io::Result<usize>;
}

/// A [`Sink`] made of a vectored-write function, for queues that hold
/// only bytes in memory.
struct WriteFn<W>(W);

impl<W> Sink for WriteFn<W>
where
    W: FnMut(&[IoSlice<'_>]) -> io::Result<usize>,
{
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (self.0)(bufs)
    }

    fn send_file(&mut self, _range: &FileRange) -> io::Result<usize> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a file range was queued for a writer that can only write memory",
        ))
    }
}

/// A byte queue of encoded PDUs.
#[derive(Debug)]
pub struct Outbox {
    segs: VecDeque<Payload>,
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

    /// Bytes queued and not yet written (file ranges included).
    pub fn queued_bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    fn push_seg(&mut self, p: Payload) {
        if !p.is_empty() {
            // Queued bytes are in memory or a file range of a LUN: far
            // below usize::MAX.
            self.bytes = self.bytes.saturating_add(p.len());
            self.segs.push_back(p);
        }
    }

    /// Queues one PDU (no AHS). Fails, queueing nothing, if `data` is
    /// longer than a data segment can be (2^24 - 1 bytes), or if it is a
    /// file range while data digests are on: a digest must cover the very
    /// bytes sent, so the caller reads the range into memory first
    /// ([`Payload::into_mem`]).
    pub fn push(&mut self, pdu: &Pdu, data: impl Into<Payload>) -> Result<(), WireError> {
        let data = data.into();
        let len = u32::try_from(data.len())
            .map_err(|_| WireError::InvalidField("data segment longer than 2^24-1"))?;
        if self.digests.data && data.as_mem().is_none() && !data.is_empty() {
            return Err(WireError::InvalidField(
                "a data digest needs the data segment in memory",
            ));
        }
        if self.arena.capacity().saturating_sub(self.arena.len()) < 128 {
            self.arena.reserve(ARENA_CHUNK);
        }
        if let Err(e) = encode_header(&pdu.encode(), &[], len, self.digests, &mut self.arena) {
            self.arena.clear();
            return Err(e);
        }
        let head = self.arena.split().freeze();
        self.push_seg(Payload::Mem(head));
        if data.is_empty() {
            return Ok(());
        }
        let pad = PAD.get(..pad_len(data.len())).unwrap_or(&[]);
        let crc = match (&data, self.digests.data) {
            (Payload::Mem(b), true) => Some(digest::crc32c_parts(&[b, pad])),
            _ => None,
        };
        self.push_seg(data);
        self.push_seg(Payload::Mem(Bytes::from_static(pad)));
        if let Some(crc) = crc {
            self.arena.extend_from_slice(&crc.to_le_bytes());
            let d = self.arena.split().freeze();
            self.push_seg(Payload::Mem(d));
        }
        Ok(())
    }

    /// Writes queued segments to `sink` until everything is written
    /// (`Ok(true)`) or it reports `WouldBlock` (`Ok(false)`). Bytes in
    /// memory go in vectored writes of up to [`MAX_IOV`] segments; a file
    /// range goes by itself through [`Sink::send_file`].
    pub fn write_to(&mut self, sink: &mut impl Sink) -> io::Result<bool> {
        while let Some(front) = self.segs.front() {
            let written = match front {
                Payload::File(range) => sink.send_file(range),
                Payload::Mem(_) => {
                    let mut iov = [IoSlice::new(&[]); MAX_IOV];
                    let mem = self.segs.iter().map_while(Payload::as_mem);
                    let n_iov = iov
                        .iter_mut()
                        .zip(mem)
                        .map(|(slot, seg)| *slot = IoSlice::new(seg))
                        .count();
                    sink.write_vectored(iov.get(..n_iov).unwrap_or(&[]))
                }
            };
            match written {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket closed")),
                Ok(n) => self.consume(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// [`Outbox::write_to`] through a vectored-write function, for queues
    /// that hold only bytes in memory (a file range fails with
    /// `Unsupported`).
    pub fn write_with<W>(&mut self, write: W) -> io::Result<bool>
    where
        W: FnMut(&[IoSlice<'_>]) -> io::Result<usize>,
    {
        self.write_to(&mut WriteFn(write))
    }

    fn consume(&mut self, mut n: usize) {
        debug_assert!(n <= self.bytes, "wrote more than was queued");
        self.bytes = self.bytes.saturating_sub(n);
        while n > 0 {
            let Some(front) = self.segs.front_mut() else {
                break;
            };
            if let Some(rest) = n.checked_sub(front.len()) {
                n = rest;
                self.segs.pop_front();
            } else {
                match front {
                    Payload::Mem(b) => {
                        let _ = b.split_to(n);
                    }
                    Payload::File(r) => r.advance(n),
                }
                n = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileRange, FrameDecoder, NopOut};

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

    /// A sink that takes at most 5 bytes a call and records what it got.
    struct Trickle {
        wire: Vec<u8>,
        files: usize,
    }

    impl Sink for Trickle {
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            let n = all.len().min(5);
            self.wire.extend_from_slice(&all[..n]);
            Ok(n)
        }

        fn send_file(&mut self, range: &FileRange) -> io::Result<usize> {
            self.files += 1;
            let bytes = range.read()?;
            let n = bytes.len().min(5);
            self.wire.extend_from_slice(&bytes[..n]);
            Ok(n)
        }
    }

    #[test]
    fn file_ranges_go_through_the_sink_in_order_between_headers() {
        use std::io::Write;
        let path = std::env::temp_dir().join(format!("ironlun-outbox-{}", std::process::id()));
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(b"0123456789abcdefghij").unwrap();
        let file = std::sync::Arc::new(std::fs::File::open(&path).unwrap());
        std::fs::remove_file(&path).unwrap();
        let nop = |itt| {
            Pdu::NopOut(NopOut {
                itt,
                ..Default::default()
            })
        };
        let mut o = Outbox::new(Digests {
            header: true,
            data: false,
        });
        // 13 bytes from offset 3: "3456789abcdef", padded to 16.
        o.push(&nop(1), FileRange::new(file.clone(), 3, 13))
            .unwrap();
        o.push(&nop(2), Bytes::from_static(b"mem")).unwrap();
        assert_eq!(o.queued_bytes(), 2 * (48 + 4) + 13 + 3 + 3 + 1);
        let mut sink = Trickle {
            wire: Vec::new(),
            files: 0,
        };
        assert!(o.write_to(&mut sink).unwrap());
        assert_eq!(sink.files, 3, "13 bytes, 5 at a time");
        let mut d = FrameDecoder::new(8192);
        d.digests = o.digests;
        let mut buf = BytesMut::from(&sink.wire[..]);
        let f1 = d.decode(&mut buf).unwrap().unwrap();
        assert_eq!((f1.bhs.itt(), &f1.data[..]), (1, &b"3456789abcdef"[..]));
        let f2 = d.decode(&mut buf).unwrap().unwrap();
        assert_eq!((f2.bhs.itt(), &f2.data[..]), (2, &b"mem"[..]));
        assert!(buf.is_empty());

        // A memory-only writer refuses a file range instead of skipping it.
        o.push(&nop(3), FileRange::new(file.clone(), 0, 4)).unwrap();
        let err = o
            .write_with(|iov| Ok(iov.first().map_or(0, |s| s.len())))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Unsupported);

        // A data digest must cover bytes in memory.
        let mut o = Outbox::new(Digests {
            header: false,
            data: true,
        });
        assert!(o.push(&nop(4), FileRange::new(file, 0, 4)).is_err());
        assert!(o.is_empty());
    }
}
