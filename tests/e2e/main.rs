//! The end-to-end tests, one test binary: the real `ironlun` binary on
//! loopback driven by real clients (libiscsi's tools, qemu-img, tgt,
//! Ceph, the ironlun initiator). Each module is one area and says what it
//! covers; `support` is what they share. `cargo test --test e2e -- ha::`
//! runs one area.
//!
//! One binary rather than one per area (issue 38 item 6): the tests and
//! `support` are compiled and linked once, and libtest keeps its threads
//! busy across areas instead of waiting for each binary's slowest test.
//! Tests of every area share the process, so none may change what is
//! process-wide (the environment, the current directory, signal
//! dispositions): a child process gets its environment through
//! `Command::env`, and files go in a directory of the test's own
//! (`tempfile`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

#[path = "../support/mod.rs"]
mod support;

mod abort;
mod admin;
mod alua;
mod alua_initiator;
mod bench_agents;
mod bench_local;
mod bench_shapes;
mod bench_threads;
mod block;
mod busy_poll;
mod ceph_cluster;
mod check;
mod cli;
mod cluster;
mod conformance;
mod crash;
mod dashboard;
mod direct;
mod docs_commands;
mod ha;
mod harness;
mod hostile;
mod initiator;
mod istgt;
mod lab;
mod limits;
mod metrics;
mod protocol;
mod rbd;
mod report;
mod sanitize;
mod security;
mod service;
mod shared_pr;
mod snapshot;
mod soak;
mod space;
mod stores;
mod takeover;
mod tools;
