//! # ironlun-lab: experiments
//!
//! **Owns:** in-process targets for experiments, the cell (every
//! parameter a study varies: request size, command window, read vs
//! solicited vs unsolicited writes, bursts, segment size, TCP window,
//! RTT, rate, digests, sessions, backend), sweeps over cells, the
//! analytical model printed beside each measurement, and the published
//! reproductions (`ironlun reproduce`) with each study's fitted testbed
//! profile (`testbed`), including their file-system rows
//! measured through the kernel initiator in a VM (`fs_rows`, on
//! ironlun-vm).
//!
//! **Must not know:** PDU layouts or protocol rules (the initiator and
//! target crates own them), how the load generator schedules I/O
//! (ironlun-bench) or how the relay emulates a link (ironlun-netem).

#![forbid(unsafe_code)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod cell;
pub mod ceph;
pub mod embedded;
pub mod framer;
pub mod fs_rows;
pub mod model;
pub mod published;
pub mod report;
pub mod reproduce;
pub mod runner;
pub mod sweep;
pub mod testbed;

pub use cell::{Cell, Digest, Op};
pub use runner::{Lab, LabOptions, Measured};
pub use sweep::{CellResult, Sweep, SweepFile};
