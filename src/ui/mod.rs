//! What the commands show: results on standard output (the `outln!` and
//! `out!` macros, quiet on a closed pipe) and progress on a terminal.

#[macro_use]
pub mod stdout;
mod progress;

pub use progress::{Progress, Terminal};
