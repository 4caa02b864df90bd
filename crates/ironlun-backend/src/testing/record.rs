//! A store that writes down every request made of it, in order, for
//! tests of what the layers above ask of the medium: above all, that a
//! command the initiator must find on stable storage (FUA, the write
//! cache off, SYNCHRONIZE CACHE) asked the store for durability before
//! its GOOD status was sent ([`unsettled`]).
//!
//! The [`Recorder`] wraps a real store and passes every request on. Its
//! files ([`Backend::file_for`]) are the wrapped store's, so requests a
//! ring runs reach the kernel without passing here: the ring reports
//! those itself ([`crate::ring::Ring::watch_submissions`]), and the test
//! adds them to the same [`CallLog`].

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use crate::aio::{AsyncMedium, MediumFuture};
use crate::ring::Request;
use crate::{Backend, CompareWrite, Extent, FileTarget, Payload, Rotation};

/// Most calls a log keeps; a test that makes more fails rather than
/// lose one ([`CallLog::push`]).
pub const LOG_MAX: usize = 1 << 16;

/// One request made of the store, or a mark the test set between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Read {
        offset: u64,
        len: usize,
    },
    /// `len` bytes written at `offset` (one `write`, `write_vectored` or
    /// write request); with `durable` they are on stable storage when it
    /// completes (FUA semantics: `RWF_DSYNC`, or a flush of its own).
    Write {
        offset: u64,
        len: usize,
        durable: bool,
    },
    /// The store's own write-same over `len` bytes.
    WriteSame {
        offset: u64,
        len: u64,
        durable: bool,
    },
    /// The store's own atomic compare-and-write of `len` bytes.
    CompareAndWrite {
        offset: u64,
        len: usize,
        durable: bool,
    },
    /// Storage released (thin provisioning).
    Deallocate {
        offset: u64,
        len: u64,
    },
    /// Every completed write made durable (`fdatasync`, SYNCHRONIZE
    /// CACHE).
    Flush,
    /// Set by the test: what the transport sent, and when.
    Mark(String),
}

impl Call {
    /// Whether the call changed the medium.
    pub fn changes_medium(&self) -> bool {
        matches!(
            self,
            Call::Write { .. }
                | Call::WriteSame { .. }
                | Call::CompareAndWrite { .. }
                | Call::Deallocate { .. }
        )
    }

    /// Whether the change is on stable storage when the call completes.
    pub fn durable(&self) -> bool {
        match self {
            Call::Write { durable, .. }
            | Call::WriteSame { durable, .. }
            | Call::CompareAndWrite { durable, .. } => *durable,
            _ => false,
        }
    }
}

/// The changes in `calls` that nothing made durable by the end of them:
/// not durable themselves, and no [`Call::Flush`] after them. Empty when
/// everything written is on stable storage.
pub fn unsettled(calls: &[Call]) -> Vec<&Call> {
    let after_last_flush = calls
        .iter()
        .rposition(|c| *c == Call::Flush)
        .map_or(0, |f| f + 1);
    calls
        .iter()
        .skip(after_last_flush)
        .filter(|c| c.changes_medium() && !c.durable())
        .collect()
}

/// Where a [`Recorder`] writes its calls; shared with the test.
#[derive(Clone, Debug, Default)]
pub struct CallLog(Arc<Mutex<Vec<Call>>>);

impl CallLog {
    fn lock(&self) -> MutexGuard<'_, Vec<Call>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a call. Past [`LOG_MAX`] calls it panics: a log that dropped
    /// one could hide the write that was not durable.
    pub fn push(&self, call: Call) {
        let mut log = self.lock();
        assert!(
            log.len() < LOG_MAX,
            "call log full ({LOG_MAX} calls): take() it more often"
        );
        log.push(call);
    }

    /// The calls so far, leaving the log empty.
    pub fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.lock())
    }
}

/// A store that records each request ([`Call`]) in its [`CallLog`] and
/// passes it on to the store it wraps.
pub struct Recorder<B> {
    inner: B,
    log: CallLog,
    store_ops: bool,
    async_path: bool,
}

impl<B: Backend> Recorder<B> {
    pub fn new(inner: B) -> Recorder<B> {
        Recorder {
            inner,
            log: CallLog::default(),
            store_ops: false,
            async_path: false,
        }
    }

    /// Stands in for a store with write-same and compare-and-write calls
    /// of its own and an asynchronous path (RBD): it answers
    /// [`Backend::compare_and_write`] and [`Backend::write_same`] itself,
    /// on the wrapped store, and offers [`Backend::async_medium`], whose
    /// requests it records and runs on the wrapped store at once.
    pub fn like_a_network_store(mut self) -> Recorder<B> {
        self.store_ops = true;
        self.async_path = true;
        self
    }

    /// The log this store writes to.
    pub fn log(&self) -> CallLog {
        self.log.clone()
    }

    fn note(&self, call: Call) {
        self.log.push(call);
    }
}

impl<B: Backend> AsyncMedium for Recorder<B> {
    fn start(&self, request: &Request) -> MediumFuture {
        let outcome = match request {
            Request::Read { offset, len } => {
                self.note(Call::Read {
                    offset: *offset,
                    len: *len,
                });
                self.inner.read(*offset, *len).map(Some)
            }
            Request::Write {
                offset,
                data,
                len,
                durable,
            } => {
                self.note(Call::Write {
                    offset: *offset,
                    len: *len,
                    durable: *durable,
                });
                let parts: Vec<&[u8]> = data.slices(0..*len).collect();
                self.inner
                    .write_vectored(*offset, &parts, *durable)
                    .map(|()| None)
            }
            Request::Flush => {
                self.note(Call::Flush);
                self.inner.flush().map(|()| None)
            }
        };
        Box::pin(std::future::ready(outcome))
    }
}

impl<B: Backend> Backend for Recorder<B> {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn read(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        self.note(Call::Read { offset, len });
        self.inner.read(offset, len)
    }

    fn read_payload(&self, offset: u64, len: usize) -> io::Result<Payload> {
        self.note(Call::Read { offset, len });
        self.inner.read_payload(offset, len)
    }

    fn write(&self, offset: u64, data: &[u8], durable: bool) -> io::Result<()> {
        self.note(Call::Write {
            offset,
            len: data.len(),
            durable,
        });
        self.inner.write(offset, data, durable)
    }

    fn write_vectored(&self, offset: u64, parts: &[&[u8]], durable: bool) -> io::Result<()> {
        self.note(Call::Write {
            offset,
            len: parts.iter().map(|p| p.len()).sum(),
            durable,
        });
        self.inner.write_vectored(offset, parts, durable)
    }

    fn flush(&self) -> io::Result<()> {
        self.note(Call::Flush);
        self.inner.flush()
    }

    fn write_needs_exclusive(&self, offset: u64, len: u64) -> bool {
        self.inner.write_needs_exclusive(offset, len)
    }

    fn may_block(&self) -> bool {
        self.inner.may_block()
    }

    fn file_for(&self, offset: u64, len: usize) -> Option<FileTarget> {
        self.inner.file_for(offset, len)
    }

    fn async_medium(&self) -> Option<&dyn AsyncMedium> {
        if self.async_path {
            return Some(self);
        }
        self.inner.async_medium()
    }

    fn compare_and_write(
        &self,
        offset: u64,
        compare: &[u8],
        data: &[u8],
        durable: bool,
    ) -> io::Result<CompareWrite> {
        if !self.store_ops {
            return self.inner.compare_and_write(offset, compare, data, durable);
        }
        self.note(Call::CompareAndWrite {
            offset,
            len: data.len(),
            durable,
        });
        let now = self.inner.read(offset, compare.len())?;
        if let Some(i) = now.iter().zip(compare).position(|(a, b)| a != b) {
            return Ok(CompareWrite::Mismatch(i as u64));
        }
        self.inner.write(offset, data, durable)?;
        Ok(CompareWrite::Written)
    }

    fn compare_and_write_limit(&self) -> Option<u64> {
        self.inner.compare_and_write_limit()
    }

    fn reports_lost_writes(&self) -> bool {
        self.inner.reports_lost_writes()
    }

    fn write_same(&self, offset: u64, len: u64, pattern: &[u8], durable: bool) -> io::Result<bool> {
        if !self.store_ops || pattern.is_empty() || len % pattern.len() as u64 != 0 {
            return self.inner.write_same(offset, len, pattern, durable);
        }
        self.note(Call::WriteSame {
            offset,
            len,
            durable,
        });
        let mut at = offset;
        while at < offset + len {
            self.inner.write(at, pattern, durable)?;
            at += pattern.len() as u64;
        }
        Ok(true)
    }

    fn copies_data(&self) -> bool {
        self.inner.copies_data()
    }

    fn reads_in_place(&self, len: usize) -> bool {
        self.inner.reads_in_place(len)
    }

    fn refresh_size(&self) -> io::Result<u64> {
        self.inner.refresh_size()
    }

    fn rotation(&self) -> Rotation {
        self.inner.rotation()
    }

    fn physical_block_size(&self) -> Option<u32> {
        self.inner.physical_block_size()
    }

    fn free_bytes(&self) -> Option<u64> {
        self.inner.free_bytes()
    }

    fn used_bytes(&self) -> Option<u64> {
        self.inner.used_bytes()
    }

    fn provisioning_granularity(&self) -> u64 {
        self.inner.provisioning_granularity()
    }

    fn deallocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.note(Call::Deallocate { offset, len });
        self.inner.deallocate(offset, len)
    }

    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<Extent>> {
        self.inner.allocation(offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RamBackend;

    fn write(durable: bool) -> Call {
        Call::Write {
            offset: 0,
            len: 512,
            durable,
        }
    }

    #[test]
    fn a_change_is_settled_by_its_own_durability_or_a_later_flush() {
        assert!(unsettled(&[]).is_empty());
        assert!(unsettled(&[write(true)]).is_empty());
        assert!(unsettled(&[write(false), Call::Flush]).is_empty());
        assert_eq!(unsettled(&[write(false)]), [&write(false)]);
        // A flush before the write does not cover it.
        assert_eq!(unsettled(&[Call::Flush, write(false)]), [&write(false)]);
        let gone = Call::Deallocate {
            offset: 0,
            len: 512,
        };
        assert_eq!(unsettled(std::slice::from_ref(&gone)), [&gone]);
        let read = Call::Read {
            offset: 0,
            len: 512,
        };
        assert!(unsettled(&[read, Call::Mark("GOOD".into())]).is_empty());
    }

    #[test]
    fn every_request_is_recorded_and_reaches_the_store() {
        let r = Recorder::new(RamBackend::new(1 << 20)).like_a_network_store();
        let log = r.log();
        r.write(0, &[7; 512], true).unwrap();
        r.write_vectored(512, &[&[1; 100], &[2; 412]], false)
            .unwrap();
        assert!(r.write_same(1024, 2048, &[3; 512], false).unwrap());
        r.flush().unwrap();
        r.deallocate(0, 512).unwrap();
        let request = Request::Write {
            offset: 4096,
            data: ironlun_payload::DataOutBuffer::from(Bytes::from_static(&[9; 512])),
            len: 512,
            durable: true,
        };
        let medium = r.async_medium().unwrap();
        crate::aio::block_on(medium.start(&request)).unwrap();
        assert_eq!(
            log.take(),
            [
                write(true),
                Call::Write {
                    offset: 512,
                    len: 512,
                    durable: false
                },
                Call::WriteSame {
                    offset: 1024,
                    len: 2048,
                    durable: false
                },
                Call::Flush,
                Call::Deallocate {
                    offset: 0,
                    len: 512
                },
                Call::Write {
                    offset: 4096,
                    len: 512,
                    durable: true
                },
            ]
        );
        assert_eq!(&r.read(4096, 512).unwrap()[..], &[9; 512]);
        assert_eq!(&r.read(1536, 512).unwrap()[..], &[3; 512]);
        assert!(log.take().len() == 2, "the reads are recorded too");
    }
}
