//! What this test process logs, from any thread, captured (a global
//! subscriber, installed once): for tests of what reaches the log.

#![allow(clippy::unwrap_used)]

use std::io;
use std::sync::{Mutex, Once, OnceLock};

static LOG: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
static INSTALLED: Once = Once::new();

struct Sink;

impl io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        buffer().lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn buffer() -> &'static Mutex<Vec<u8>> {
    LOG.get_or_init(Default::default)
}

/// Starts capturing (once per process).
pub(crate) fn capture() {
    INSTALLED.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(|| Sink)
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
    });
}

/// Everything logged so far, by every test of the process.
pub(crate) fn text() -> String {
    String::from_utf8_lossy(&buffer().lock().unwrap()).into_owned()
}
