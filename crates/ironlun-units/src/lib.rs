//! # ironlun-units: quantities as people type them
//!
//! **Owns:** the one syntax for sizes (`4k`, `512KiB`, `1G`, `1.5GiB`, `10MB`),
//! durations (`30s`, `500ms`, `4m`) and link rates (`155Mbit`, `1Gbit`,
//! `50MB/s`) that flags, configuration files, workload and sweep files
//! all accept, and the short forms they are printed in.
//!
//! **Must not know:** what the quantity is for (a LUN, a TCP window, a
//! run time, a link); callers check ranges and name the flag or key in
//! their errors. It depends on nothing but `std`, so every crate may use
//! it.

#![forbid(unsafe_code)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

mod duration;
mod rate;
mod size;

pub use duration::parse_duration;
pub use rate::{format_rate, parse_rate};
pub use size::{format_size, parse_size};

/// Splits `s` where its number ends: digits, and `.` when `decimals`.
fn split_number(s: &str, decimals: bool) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || (decimals && c == '.')))
        .unwrap_or(s.len());
    s.split_at(end)
}
