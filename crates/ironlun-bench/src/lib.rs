//! # ironlun-bench: the load generator
//!
//! **Owns:** the workload model (IOMeter access specifications, TOML
//! workload files, the built-in profiles of the published studies in
//! `docs/studies.md`), the workload shapes of `docs/bench-shapes.md`
//! (skewed access, compressible and dedupable data, command mixes, the
//! steady-state stop, per-I/O latency logs), the
//! LUNs a run drives (opened through one portal, as a multipath set, or
//! as several sessions each with its own slice), local files and block
//! devices driven by io_uring or psync (`local`), the engine that runs
//! workloads over the ironlun initiator or a local engine, on one thread
//! or on several with exact merging (`threads`), a run's plan of LUNs
//! (`plan`) and its orchestration from workloads to report (`runs`),
//! metrics (HDR
//! latency histograms, per-second series, host/process CPU from /proc,
//! zone rates), data verification, and the table/JSON/CSV outputs and
//! the HTML report (SVG charts drawn by `report`, runs overlaid).
//!
//! **Must not know:** iSCSI PDUs or negotiation (the initiator crate owns
//! them), or how a target works inside; a target's CPU reaches it only
//! through a probe (a PID's /proc entry, in-process threads, or an
//! ironlun target's statistics endpoint, read as documented JSON).

// This crate keeps unsafe code: every block must say why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod access;
pub mod agent;
pub mod cpu;
pub mod engine;
pub mod hdr;
pub mod iolog;
pub mod local;
pub mod luns;
pub mod mix;
pub mod output;
pub mod pattern;
pub mod plan;
pub mod profiles;
pub mod progress;
pub mod report;
pub mod result;
pub mod runs;
pub mod spec;
pub mod steady;
pub mod target_stats;
pub mod threads;
pub mod timer;
pub mod verify;
pub mod verify_log;

pub use engine::{run, LunTarget, Path, RunOptions, Slice, TargetCpuProbe};
pub use result::{LunInfo, RunReport, ThreadTotals, WorkloadResult};
pub use spec::{AccessLine, SeekRange, Shape, Workload, WorkloadFile};
pub use threads::{plan::default_threads, Opener, Threads};
