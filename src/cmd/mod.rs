//! One module per subcommand: its flags (a clap `Args` struct) and a
//! `run` that turns them into the crates' types, calls the crates and
//! prints what they return. The work itself (protocol, measurement,
//! models, file formats, reports) belongs to the crates. `compare_runs`
//! holds the flags compare-local and compare-rbd share.

pub mod admin;
pub mod admin_show;
pub mod bench;
pub mod bench_agent;
pub mod compare_local;
pub mod compare_peers;
pub mod compare_rbd;
pub mod compare_runs;
pub mod compare_scale;
pub mod dd;
pub mod discover;
pub mod inquiry;
pub mod lab;
pub mod manual;
pub mod netem;
pub mod readcap;
pub mod report;
pub mod reproduce;
pub mod sweep;
pub mod target;
pub mod target_check;
pub mod tcpbench;
