//! The write log of a verifying run (`--verify-log FILE`): one line per
//! write, with when it was issued and when its status came back,
//!
//! ```text
//! # issued_ns acked_ns lun lba blocks generation ok
//! 81234567890123 81234567990456 0 2048 8 17 1
//! ```
//!
//! Both times are `CLOCK_MONOTONIC` nanoseconds, which every process of
//! the host shares, so another program can set the writes against its
//! own instants: a test that takes a snapshot of the LUN knows, for each
//! block, which generations the bench had acknowledged before it began
//! and which it had issued by the time it ended (tests/e2e/snapshot.rs).
//! `issued_ns` is read before the write's data is made and `acked_ns`
//! after its status arrived, so each write's interval holds its real
//! one. `lun` is the LUN's index among the run's targets; `generation`
//! is the one [`crate::verify`] wrote in each block's header; `ok` is 0
//! for a write that failed. The file stops growing at its size cap; its
//! last line then says how many writes were left out.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::iolog::DEFAULT_CAP;

/// `CLOCK_MONOTONIC` now, in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// One write as logged.
pub struct Written {
    pub issued_ns: u64,
    pub acked_ns: u64,
    pub lun: usize,
    pub lba: u64,
    pub blocks: u32,
    pub generation: u64,
    pub ok: bool,
}

struct Inner<W: Write> {
    out: W,
    written: u64,
    cap: u64,
    dropped: u64,
}

impl<W: Write> Inner<W> {
    fn record(&mut self, w: &Written) -> std::io::Result<()> {
        let line = format!(
            "{} {} {} {} {} {} {}\n",
            w.issued_ns,
            w.acked_ns,
            w.lun,
            w.lba,
            w.blocks,
            w.generation,
            u8::from(w.ok)
        );
        if self.dropped > 0 || self.written + line.len() as u64 > self.cap {
            self.dropped += 1;
            return Ok(());
        }
        self.written += line.len() as u64;
        self.out.write_all(line.as_bytes())
    }

    fn finish(mut self) -> std::io::Result<W> {
        if self.dropped > 0 {
            writeln!(
                self.out,
                "# size cap of {} bytes reached: {} writes not logged",
                self.cap, self.dropped
            )?;
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

const HEAD: &str = "# issued_ns acked_ns lun lba blocks generation ok\n";

/// An open write log, shared by every load thread of the run.
#[derive(Clone)]
pub struct WriteLog(Arc<Mutex<Option<Inner<BufWriter<File>>>>>);

impl WriteLog {
    /// Creates `path`, holding at most [`DEFAULT_CAP`] bytes.
    pub fn create(path: &Path) -> Result<WriteLog, String> {
        let err = |e: std::io::Error| format!("{}: {e}", path.display());
        let mut out = BufWriter::with_capacity(1 << 16, File::create(path).map_err(err)?);
        out.write_all(HEAD.as_bytes()).map_err(err)?;
        Ok(WriteLog(Arc::new(Mutex::new(Some(Inner {
            out,
            written: HEAD.len() as u64,
            cap: DEFAULT_CAP,
            dropped: 0,
        })))))
    }

    /// Logs one write (nothing once the log is finished).
    pub fn record(&self, w: &Written) -> Result<(), String> {
        let mut g = self.0.lock().map_err(|_| "write log: a writer failed")?;
        match g.as_mut() {
            Some(log) => log.record(w).map_err(|e| format!("write log: {e}")),
            None => Ok(()),
        }
    }

    /// Ends the log: written out, with the count of writes left out.
    pub fn finish(&self) -> Result<(), String> {
        let log = self
            .0
            .lock()
            .map_err(|_| "write log: a writer failed")?
            .take();
        if let Some(log) = log {
            log.finish().map_err(|e| format!("write log: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(i: u64) -> Written {
        Written {
            issued_ns: 1000 + i,
            acked_ns: 2000 + i,
            lun: 0,
            lba: i * 8,
            blocks: 8,
            generation: i + 1,
            ok: i != 1,
        }
    }

    #[test]
    fn lines_then_the_cap() {
        let mut log = Inner {
            out: Vec::new(),
            written: 0,
            cap: 100,
            dropped: 0,
        };
        for i in 0..10 {
            log.record(&write(i)).unwrap();
        }
        let text = String::from_utf8(log.finish().unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "1000 2000 0 0 8 1 1");
        assert_eq!(lines[1], "1001 2001 0 8 8 2 0");
        let logged = lines.len() - 1;
        assert!(
            lines
                .last()
                .unwrap()
                .ends_with(&format!("{} writes not logged", 10 - logged)),
            "{text}"
        );
    }

    #[test]
    fn the_clock_is_monotonic() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
    }
}
