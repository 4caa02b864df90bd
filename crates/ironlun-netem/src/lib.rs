//! # ironlun-netem: link emulation
//!
//! **Owns:** the link model (one-way delay per direction, a rate cap with
//! serialisation like a real link, jitter, and an emulated TCP window),
//! and a TCP relay that applies it between an initiator and a target, so
//! RTT and bandwidth experiments need neither privileges nor a netem
//! qdisc.
//!
//! It also owns `tcpbench`, the iperf-like TCP baseline measured over
//! the same link: the streams, the median of repeated runs beside what
//! the link model predicts, and its JSON results.
//!
//! **Must not know:** iSCSI. It moves bytes.
//!
//! # Why a relay emulates the window
//! A relay terminates TCP: the sender's connection ends at the relay over
//! loopback, where the round trip is microseconds, so the endpoints' own
//! socket buffers cannot limit throughput over the emulated delay the way
//! a TCP window limits it over a real long link. The relay therefore
//! carries the window itself: with a window of W bytes, at most W bytes
//! are on the emulated link in each direction, and credit comes back one
//! reverse one-way delay after the bytes reach the receiver (the ACK's
//! trip), so a window-limited flow gets W per round trip as on a real
//! link. Without a window the relay's buffer is sized to at least twice
//! the bandwidth-delay product, so the relay is never what limits.
//!
//! # Host time
//! A link may also hold each message of the client → server direction
//! that a caller's [`Framer`] marks (a command, to the lab) for a fixed
//! host time, with a fixed number at once ([`host`]): the hosts of a
//! testbed profile, imposed on top of this machine's own; and then, where
//! the profile has one, for a disk's time on one of its servers
//! ([`Stage`]), before the link.

// This crate keeps unsafe code: every block must say why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod awake;
pub mod host;
pub mod model;
pub mod relay;
pub mod spec;
pub mod tcpbench;

pub use host::{Framer, HostDelay, Stage};
pub use relay::{Relay, RelayStats};
pub use spec::LinkSpec;
