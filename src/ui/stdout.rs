//! Writing results to standard output. `println!` panics when stdout is a
//! pipe whose reader has gone (`ironlun discover | head -1`); these end
//! the process quietly instead, as a command killed by SIGPIPE would, but
//! without restoring SIGPIPE's default action, which would also kill the
//! process on a write to a dropped iSCSI connection.

use std::fmt;
use std::io::{ErrorKind, Write};

/// Writes `args` to stdout; on a closed pipe exits with status 0 (the
/// reader took what it wanted), on another error reports it and exits 1.
pub fn write(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("ironlun: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// `println!` for results: see [`write`].
macro_rules! outln {
    () => {
        $crate::ui::stdout::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::ui::stdout::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for results: see [`write`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::ui::stdout::write(format_args!($($arg)*))
    };
}
