//! `ironlun`: the command-line front end. Parses flags, sets up logging
//! and runs the chosen tool; it knows nothing of how the layers work
//! inside. Each subcommand is a module of [`cmd`]; argument groups that
//! several share are in [`args`], output helpers in [`ui`], runtimes,
//! logging and exit statuses in [`runtime`], the daemon's notifications
//! to systemd in [`service`].

#![forbid(unsafe_code)]
// Results go through `outln!`/`out!` (ui::stdout), which end quietly on a
// closed pipe; `println!` would panic there.
#![deny(clippy::print_stdout)]
// The doc comments of the argument structs are clap's --help text, written
// for a terminal ("[:port]", "<host>", "[,direct]"), not rustdoc links.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[macro_use]
mod ui;

mod args;
mod cmd;
mod runtime;
mod service;

use runtime::{finish, init_logging, log_filter, run_tool, usage_error};

#[derive(Parser)]
#[command(
    name = "ironlun",
    version,
    propagate_version = true,
    about = "Userspace iSCSI target, initiator and SAN benchmark lab",
    after_help = "Exit status: 0 done; 1 the operation failed; 2 a usage or configuration error."
)]
struct Cli {
    /// Log level (off, error, warn, info, debug, trace) or a tracing
    /// filter whose directives each end in a level, such as
    /// ironlun_target=debug,info. Also IRONLUN_LOG.
    #[arg(long, global = true, env = "IRONLUN_LOG", value_name = "FILTER")]
    log: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run an iSCSI target (RFC 7143) exporting null, RAM, file and
    /// block-device LUNs.
    Target(cmd::target::TargetArgs),
    /// Manage a running target: targets, LUNs, initiator maps, portals,
    /// sessions, apply a whole file (docs/admin.md).
    Admin(cmd::admin::AdminArgs),
    /// List the targets a portal reports (SendTargets discovery).
    Discover(cmd::discover::DiscoverArgs),
    /// Show a LUN's standard INQUIRY data.
    Inquiry(cmd::inquiry::InquiryArgs),
    /// Show a LUN's capacity and block size (READ CAPACITY).
    Readcap(cmd::readcap::ReadcapArgs),
    /// Copy between a local file and a LUN (or LUN to LUN), with progress.
    Dd(cmd::dd::DdArgs),
    /// Load generator: IOMeter-style access specifications over iSCSI.
    Bench(Box<cmd::bench::BenchArgs>),
    /// One HTML page with charts from bench/lab JSON results.
    Report(cmd::report::ReportArgs),
    /// Start an in-process target with a RAM LUN, benchmark it, write a
    /// report: no setup needed.
    Lab(cmd::lab::LabArgs),
    /// Relay TCP between initiators and a target through an emulated
    /// link: delay per direction, rate cap, jitter, TCP window.
    Netem(cmd::netem::NetemArgs),
    /// TCP throughput (iperf-like), one or more streams, both directions,
    /// over loopback or an emulated link: the baseline of each study.
    Tcpbench(cmd::tcpbench::TcpbenchArgs),
    /// Sweep request size, command window, write mode, bursts, TCP
    /// window, RTT, rate, digests, sessions or backend against an embedded
    /// target, with a model prediction beside every cell.
    Sweep(cmd::sweep::SweepArgs),
    /// Run a published study in one command: tables, model predictions,
    /// JSON and an HTML report (the studies: docs/studies.md).
    Reproduce(cmd::reproduce::ReproduceArgs),
    /// ironlun against tgt on loopback: the same clients (iscsi-perf,
    /// qemu-img bench, ironlun bench) in alternation, with medians,
    /// ratios and target CPU per I/O.
    ComparePeers(cmd::compare_peers::CompareArgs),
    /// The disk's own limit beside the network path: fio (io_uring,
    /// O_DIRECT) on a disk file and on a loop device over it, and the same
    /// exported by ironlun and tgt, driven by ironlun bench in alternation.
    CompareLocal(cmd::compare_local::LocalArgs),
    /// ironlun and tgt as the client's threads (1 to half the CPUs) and
    /// sessions (1 to 64) grow, target and client pinned to disjoint
    /// CPUs: IOPS, MB/s, target CPU per I/O and IOPS per target core.
    CompareScale(cmd::compare_scale::ScaleArgs),
    /// RBD gateways beside Ceph's own limit: rbd bench (no iSCSI), tgt's
    /// rbd backing store and ironlun's rbd: LUN on one image, the
    /// gateways driven by ironlun bench, in alternation.
    CompareRbd(cmd::compare_rbd::RbdArgs),
    /// Print a shell's completion script for ironlun (bash, zsh, fish,
    /// elvish, powershell) on standard output.
    Completions(cmd::manual::CompletionsArgs),
    /// Write ironlun's manual pages (one per command, section 1) into a
    /// directory.
    Man(cmd::manual::ManArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // `ironlun admin` alone: the list of its commands, on stderr.
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                let _ = e.print();
                return ExitCode::from(runtime::EXIT_USAGE);
            }
            return usage_error(&one_line(&e));
        }
    };
    // A filter that names no level would silence the log: refused before
    // anything runs (IRONLUN_LOG too: clap read it into --log).
    if let Some(Err(e)) = cli.log.as_deref().map(log_filter) {
        return usage_error(&format!("--log (or IRONLUN_LOG): {e}"));
    }
    let log = cli.log.as_deref();
    // The lab's commands log warnings unless told otherwise.
    let quiet = || init_logging(Some(log.unwrap_or("warn")), None);
    match cli.command {
        Command::Target(a) => cmd::target::run(log, a),
        Command::Admin(a) => finish(cmd::admin::run(a)),
        Command::Discover(a) => run_tool(log, cmd::discover::run(a)),
        Command::Inquiry(a) => run_tool(log, cmd::inquiry::run(a)),
        Command::Readcap(a) => run_tool(log, cmd::readcap::run(a)),
        Command::Dd(a) => run_tool(log, cmd::dd::run(a)),
        Command::Bench(a) => run_tool(log, cmd::bench::run(*a)),
        Command::Report(a) => finish(cmd::report::run(a)),
        Command::Netem(a) => run_tool(Some(log.unwrap_or("info")), cmd::netem::run(a)),
        Command::Tcpbench(a) => run_tool(log, cmd::tcpbench::run(a)),
        Command::Sweep(a) => {
            quiet();
            finish(cmd::sweep::run(a))
        }
        Command::Reproduce(a) => {
            quiet();
            finish(cmd::reproduce::run(a))
        }
        Command::ComparePeers(a) => {
            quiet();
            finish(cmd::compare_peers::run(a))
        }
        Command::CompareLocal(a) => {
            quiet();
            finish(cmd::compare_local::run(a))
        }
        Command::CompareScale(a) => {
            quiet();
            finish(cmd::compare_scale::run(a))
        }
        Command::CompareRbd(a) => {
            quiet();
            finish(cmd::compare_rbd::run(a))
        }
        Command::Lab(a) => {
            quiet();
            finish(cmd::lab::run(a))
        }
        Command::Completions(a) => finish(cmd::manual::completions(a, Cli::command())),
        Command::Man(a) => finish(cmd::manual::man(a, Cli::command())),
    }
}

/// clap's error on one line: its message, the arguments it lists on lines
/// of their own (those not provided), its "did you mean" tip, and where
/// the help is (`ironlun admin lun add --help`).
fn one_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let mut out = first.strip_prefix("error: ").unwrap_or(first).to_owned();
    let mut command = "ironlun".to_owned();
    for line in lines {
        if let Some(usage) = line.strip_prefix("Usage: ") {
            let words = usage.split_whitespace();
            let words: Vec<&str> = words
                .take_while(|w| !w.starts_with(['[', '<', '-']))
                .collect();
            if !words.is_empty() {
                command = words.join(" ");
            }
            break;
        }
        match line.strip_prefix("tip: ") {
            Some(tip) => out.push_str(&format!("; {tip}")),
            None => out.push_str(&format!(" {line}")),
        }
    }
    format!("{out} (see {command} --help)")
}

#[cfg(test)]
mod cli_tests;
