//! The per-I/O latency log: one line per measured I/O,
//!
//! ```text
//! # t_us op lun offset len lat_us
//! 1043 read 0 1048576 4096 87
//! ```
//!
//! `t_us` is when the I/O completed, in µs from the start of the
//! measured interval; `lun` the LUN's index among the run's targets;
//! `offset` and `len` in bytes. The file stops growing at its size cap;
//! its last line then says how many I/Os were left out.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Default size cap.
pub const DEFAULT_CAP: u64 = 256 << 20;

/// Where to log and how much at most.
#[derive(Clone, Debug)]
pub struct LatLogSpec {
    pub path: PathBuf,
    pub cap_bytes: u64,
}

/// One I/O as logged.
pub struct Entry<'a> {
    pub t_us: u64,
    pub op: &'a str,
    pub lun: usize,
    pub offset: u64,
    pub len: u32,
    pub lat_us: u64,
}

/// An open latency log.
pub struct LatLog<W: Write = BufWriter<File>> {
    out: W,
    written: u64,
    cap: u64,
    dropped: u64,
}

impl LatLog {
    pub fn create(spec: &LatLogSpec) -> Result<LatLog, String> {
        let f = File::create(&spec.path).map_err(|e| err(&spec.path, e))?;
        LatLog::new(BufWriter::with_capacity(1 << 16, f), spec.cap_bytes)
            .map_err(|e| err(&spec.path, e))
    }
}

fn err(p: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", p.display())
}

impl<W: Write> LatLog<W> {
    pub fn new(mut out: W, cap: u64) -> std::io::Result<LatLog<W>> {
        let head = b"# t_us op lun offset len lat_us\n";
        out.write_all(head)?;
        Ok(LatLog {
            out,
            written: head.len() as u64,
            cap,
            dropped: 0,
        })
    }

    /// Logs one I/O, or counts it as left out past the cap.
    pub fn record(&mut self, e: &Entry<'_>) -> std::io::Result<()> {
        let line = format!(
            "{} {} {} {} {} {}\n",
            e.t_us, e.op, e.lun, e.offset, e.len, e.lat_us
        );
        if self.dropped > 0 || self.written + line.len() as u64 > self.cap {
            self.dropped += 1;
            return Ok(());
        }
        self.written += line.len() as u64;
        self.out.write_all(line.as_bytes())
    }

    /// Ends the log (with the count of I/Os left out, if any); returns
    /// the writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        if self.dropped > 0 {
            writeln!(
                self.out,
                "# size cap of {} bytes reached: {} I/Os not logged",
                self.cap, self.dropped
            )?;
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

/// One latency log written by several load threads (lines in the order
/// they arrive; `t_us` is from the run's common start of measurement).
#[derive(Clone)]
pub struct SharedLatLog(Arc<Mutex<Option<LatLog>>>);

impl SharedLatLog {
    pub fn new(log: LatLog) -> SharedLatLog {
        SharedLatLog(Arc::new(Mutex::new(Some(log))))
    }

    /// Logs one I/O (nothing once the log is finished).
    pub fn record(&self, e: &Entry<'_>) -> Result<(), String> {
        let mut g = self.0.lock().map_err(|_| "latency log: a writer failed")?;
        match g.as_mut() {
            Some(log) => log.record(e).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Ends the log.
    pub fn finish(&self) -> Result<(), String> {
        let log = self
            .0
            .lock()
            .map_err(|_| "latency log: a writer failed")?
            .take();
        if let Some(log) = log {
            log.finish().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: u64) -> Entry<'static> {
        Entry {
            t_us: i,
            op: "write",
            lun: 0,
            offset: i * 4096,
            len: 4096,
            lat_us: 100 + i,
        }
    }

    #[test]
    fn lines_then_the_cap() {
        let mut log = LatLog::new(Vec::new(), 200).unwrap();
        for i in 0..100 {
            log.record(&entry(i)).unwrap();
        }
        let text = String::from_utf8(log.finish().unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "0 write 0 0 4096 100");
        let body = text.len() - lines.last().unwrap().len() - 1;
        assert!(body <= 200, "{body} bytes before the note");
        let logged = lines.len() - 2;
        assert!(logged > 3);
        assert!(
            lines
                .last()
                .unwrap()
                .ends_with(&format!("{} I/Os not logged", 100 - logged)),
            "{text}"
        );
    }

    #[test]
    fn no_note_under_the_cap() {
        let mut log = LatLog::new(Vec::new(), DEFAULT_CAP).unwrap();
        log.record(&entry(1)).unwrap();
        let text = String::from_utf8(log.finish().unwrap()).unwrap();
        assert_eq!(text.lines().count(), 2);
    }
}
