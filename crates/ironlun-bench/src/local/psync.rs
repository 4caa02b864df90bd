//! The psync engine: pread/pwrite on threads, as fio's psync does. Each
//! I/O slot has a thread of its own with its own aligned buffer, fed
//! through its own channel (nothing is shared between the slots); its
//! completion goes to the engine's completion channel as an initiator's
//! would.

use std::os::unix::fs::FileExt;
use std::sync::mpsc;
use std::thread::JoinHandle;

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedSender;

use super::buf::SlotBuf;
use super::{good, io_error, Completion, LocalIo};

/// At most this many I/Os in flight, one thread each.
const MAX_THREADS: usize = 1024;

pub(crate) struct Psync {
    jobs: Vec<mpsc::Sender<LocalIo>>,
    threads: Vec<JoinHandle<()>>,
}

impl Psync {
    pub(super) fn new(
        slots: usize,
        max_len: usize,
        payload: &Bytes,
        tx: &UnboundedSender<Completion>,
    ) -> Result<Psync, String> {
        if slots > MAX_THREADS {
            return Err(format!(
                "psync: {slots} I/Os in flight, at most {MAX_THREADS} (one thread each)"
            ));
        }
        let mut p = Psync {
            jobs: Vec::new(),
            threads: Vec::new(),
        };
        for i in 0..slots {
            let (jtx, jrx) = mpsc::channel::<LocalIo>();
            let (tx, mut buf) = (tx.clone(), SlotBuf::new(max_len, payload));
            let t = std::thread::Builder::new()
                .name(format!("ironlun-psync-{i}"))
                .spawn(move || {
                    for io in jrx {
                        let r = run(&io, &mut buf);
                        if tx.send((io.tag, r)).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| format!("psync: cannot start a thread: {e}"))?;
            p.jobs.push(jtx);
            p.threads.push(t);
        }
        Ok(p)
    }

    pub(super) fn submit(&mut self, io: LocalIo) -> Result<(), String> {
        let tag = io.tag;
        self.jobs
            .get(tag as usize)
            .ok_or_else(|| format!("psync: no I/O slot {tag}"))?
            .send(io)
            .map_err(|_| format!("psync: the thread of slot {tag} has ended"))
    }
}

/// Runs one I/O with the slot's buffer.
fn run(
    io: &LocalIo,
    buf: &mut SlotBuf,
) -> Result<ironlun_initiator::ScsiReply, ironlun_initiator::Error> {
    let file = &io.dev.file;
    match &io.write {
        Some(data) => {
            if let Some(d) = data {
                buf.put(d);
            }
            let b = buf.head(io.len);
            file.write_all_at(b, io.offset)
                .map_err(|e| io_error("write", io, e))?;
            Ok(good(Bytes::new()))
        }
        None => {
            let len = io.len.min(buf.as_ref().len());
            let b = buf.as_mut().get_mut(..len).unwrap_or(&mut []);
            file.read_exact_at(b, io.offset)
                .map_err(|e| io_error("read", io, e))?;
            Ok(good(if io.keep {
                Bytes::copy_from_slice(b)
            } else {
                Bytes::new()
            }))
        }
    }
}

impl Drop for Psync {
    /// Closes every slot's channel; each thread ends after its I/O.
    fn drop(&mut self) {
        self.jobs.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
