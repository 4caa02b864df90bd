//! `ironlun`: the command-line front end. Parses flags, sets up logging
//! and runs the chosen tool; it knows nothing of how the layers work inside.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ironlun_target::{Config, Overrides, Server};
use tracing_subscriber::EnvFilter;

#[macro_use]
mod stdout;

mod bench_cmd;
mod compare_cmd;
mod initiator_args;
mod lab;
mod link_args;
mod netem_cmd;
mod progress;
mod reproduce_cmd;
mod sweep_cmd;
mod tcpbench_cmd;
mod tools;

/// The current time as RFC 3339 (UTC, seconds).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[derive(Parser)]
#[command(
    name = "ironlun",
    version,
    about = "Userspace iSCSI target, initiator and SAN benchmark lab"
)]
struct Cli {
    /// Log level or filter (error, warn, info, debug, trace, or a tracing
    /// filter such as ironlun_target=debug). Also IRONLUN_LOG.
    #[arg(long, global = true, env = "IRONLUN_LOG")]
    log: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run an iSCSI target (RFC 7143) exporting null, RAM, file and
    /// block-device LUNs.
    Target(TargetArgs),
    /// List the targets a portal reports (SendTargets discovery).
    Discover(tools::DiscoverArgs),
    /// Show a LUN's standard INQUIRY data.
    Inquiry(tools::UrlArgs),
    /// Show a LUN's capacity and block size (READ CAPACITY).
    Readcap(tools::UrlArgs),
    /// Copy between a local file and a LUN (or LUN to LUN), with progress.
    Dd(tools::DdArgs),
    /// Load generator: IOMeter-style access specifications over iSCSI.
    Bench(Box<bench_cmd::BenchArgs>),
    /// One HTML page with charts from bench/lab JSON results.
    Report(ReportArgs),
    /// Start an in-process target with a RAM LUN, benchmark it, write a
    /// report: no setup needed.
    Lab(lab::LabArgs),
    /// Relay TCP between initiators and a target through an emulated
    /// link: delay per direction, rate cap, jitter, TCP window.
    Netem(netem_cmd::NetemArgs),
    /// TCP throughput (iperf-like), one or more streams, both directions,
    /// over loopback or an emulated link: the baseline of each study.
    Tcpbench(tcpbench_cmd::TcpbenchArgs),
    /// Sweep request size, command window, write mode, bursts, TCP
    /// window, RTT, rate, digests, sessions or backend against an embedded
    /// target, with a model prediction beside every cell.
    Sweep(sweep_cmd::SweepArgs),
    /// Run a published study (shared/workloads.md) in one command:
    /// tables, model predictions, JSON and an HTML report.
    Reproduce(reproduce_cmd::ReproduceArgs),
    /// ironlun against tgt on loopback: the same clients (iscsi-perf,
    /// qemu-img bench, ironlun bench) in alternation, with medians,
    /// ratios and target CPU per I/O.
    ComparePeers(compare_cmd::CompareArgs),
    /// The disk's own limit beside the network path: fio (io_uring,
    /// O_DIRECT) on a disk file and on a loop device over it, and the same
    /// exported by ironlun and tgt, driven by ironlun bench in alternation.
    CompareLocal(compare_cmd::LocalArgs),
}

#[derive(clap::Args)]
struct ReportArgs {
    /// JSON results written by `ironlun bench --json` or `ironlun lab`.
    #[arg(required = true)]
    results: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short, long, default_value = "report.html")]
    output: PathBuf,
}

fn run_report(a: ReportArgs) -> Result<(), String> {
    let mut reports = Vec::new();
    for p in &a.results {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let r =
            ironlun_bench::output::read_json(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        reports.push(r);
    }
    let html = ironlun_bench::report::html(&reports)?;
    std::fs::write(&a.output, html).map_err(|e| format!("{}: {e}", a.output.display()))?;
    outln!("report: {}", a.output.display());
    Ok(())
}

#[derive(clap::Args)]
struct TargetArgs {
    /// TOML configuration file (see docs/config.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Portal to listen on, ADDR:PORT (repeatable; default 127.0.0.1:3260;
    /// IPv6 as [::1]:3260).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Vec<String>,
    /// Target name (default: iqn.2026-11.io.ironlun:<host name>).
    #[arg(long, value_name = "IQN")]
    name: Option<String>,
    /// A LUN, numbered from 0 in the order given: ram:SIZE, null:SIZE,
    /// file:PATH[,size=SIZE][,direct][,prealloc] or block:PATH[,direct],
    /// optionally followed by ,bs=4096, ,ro and ,thin (thin provisioning,
    /// not for block). Sizes: 512MiB, 1GiB, 1G.
    #[arg(long, value_name = "SPEC")]
    lun: Vec<String>,
    /// Commands each session may have outstanding (the CmdSN window).
    #[arg(long, value_name = "N")]
    queue_depth: Option<u32>,
    /// Directory for state that survives restarts (persistent
    /// reservations with APTPL). Default with --config: next to the file.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Serve statistics (process CPU, sessions, per-LUN I/O counters) as
    /// JSON over HTTP at ADDR:PORT/stats (see docs/stats.md); `ironlun
    /// bench --target-stats` reads it.
    #[arg(long, value_name = "ADDR:PORT")]
    stats: Option<String>,
    /// Socket send and receive buffers for every connection (the TCP
    /// window), e.g. 512KiB; default: kernel autotuning.
    #[arg(long, value_name = "SIZE")]
    tcp_window: Option<String>,
    /// Turn TCP_NODELAY off (let Nagle batch small segments).
    #[arg(long)]
    tcp_nagle: bool,
    /// Re-arm TCP_QUICKACK after every read (no delayed ACKs).
    #[arg(long)]
    tcp_quickack: bool,
    /// How commands on file and block LUNs reach the kernel: uring (an
    /// io_uring per connection, the default; the thread pool where
    /// io_uring is unavailable) or pool (a blocking thread per command).
    #[arg(long, value_name = "ENGINE")]
    io_engine: Option<String>,
    /// Require CHAP (RFC 7143 §12.1.3) from initiators, for every target
    /// and for discovery: USER:SECRET, the secret 12 to 255 bytes.
    /// Prefer the environment variable: a flag shows in `ps`.
    #[arg(
        long,
        value_name = "USER:SECRET",
        env = "IRONLUN_CHAP",
        hide_env_values = true
    )]
    chap: Option<String>,
    /// The target's own credentials for initiators that ask for mutual
    /// CHAP (needs --chap; a different secret).
    #[arg(
        long,
        value_name = "USER:SECRET",
        env = "IRONLUN_MUTUAL_CHAP",
        hide_env_values = true
    )]
    mutual_chap: Option<String>,
    /// Allow an initiator name (iqn./eui./naa.) or a network (CIDR, or
    /// one address) to log in (repeatable; without any, all are allowed;
    /// with names and networks both, both must match).
    #[arg(long, value_name = "IQN|CIDR")]
    allow: Vec<String>,
}

/// Exit status for bad flags or configuration.
const EXIT_USAGE: u8 = 2;

fn init_logging(flag: Option<&str>, config: Option<&str>) {
    let filter = flag.or(config).unwrap_or("info");
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("ironlun: {msg}");
    ExitCode::from(EXIT_USAGE)
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
            // One clear line instead of clap's usage block.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            return usage_error(&format!("{first} (see ironlun --help)"));
        }
    };
    match cli.command {
        Command::Target(args) => run_target(cli.log.as_deref(), args),
        Command::Discover(a) => run_tool(cli.log.as_deref(), tools::run_discover(a)),
        Command::Inquiry(a) => run_tool(cli.log.as_deref(), tools::run_inquiry(a)),
        Command::Readcap(a) => run_tool(cli.log.as_deref(), tools::run_readcap(a)),
        Command::Dd(a) => run_tool(cli.log.as_deref(), tools::run_dd(a)),
        Command::Bench(a) => run_tool(cli.log.as_deref(), bench_cmd::run_bench(*a)),
        Command::Report(a) => finish(run_report(a)),
        Command::Netem(a) => {
            let log = cli.log.as_deref().unwrap_or("info");
            run_tool(Some(log), netem_cmd::run_netem(a))
        }
        Command::Tcpbench(a) => run_tool(cli.log.as_deref(), tcpbench_cmd::run_tcpbench(a)),
        Command::Sweep(a) => {
            init_logging(Some(cli.log.as_deref().unwrap_or("warn")), None);
            finish(sweep_cmd::run_sweep(a))
        }
        Command::Reproduce(a) => {
            init_logging(Some(cli.log.as_deref().unwrap_or("warn")), None);
            finish(reproduce_cmd::run_reproduce(a))
        }
        Command::ComparePeers(a) => {
            init_logging(Some(cli.log.as_deref().unwrap_or("warn")), None);
            finish(compare_cmd::run_compare(a))
        }
        Command::CompareLocal(a) => {
            init_logging(Some(cli.log.as_deref().unwrap_or("warn")), None);
            finish(compare_cmd::run_local(a))
        }
        Command::Lab(a) => {
            init_logging(Some(cli.log.as_deref().unwrap_or("warn")), None);
            finish(lab::run_lab(a))
        }
    }
}

fn finish(r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ironlun: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs an initiator tool on a single-threaded runtime: one core drives
/// the protocol, the other is left to the target when both share a host.
fn run_tool<F>(log: Option<&str>, fut: F) -> ExitCode
where
    F: std::future::Future<Output = Result<(), String>>,
{
    init_logging(Some(log.unwrap_or("warn")), None);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ironlun: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    finish(rt.block_on(fut))
}

fn run_target(log: Option<&str>, args: TargetArgs) -> ExitCode {
    let overrides = Overrides {
        config: args.config,
        listen: args.listen,
        name: args.name,
        luns: args.lun,
        queue_depth: args.queue_depth,
        state_dir: args.state_dir,
        stats: args.stats,
        tcp_window: args.tcp_window,
        tcp_nagle: args.tcp_nagle,
        tcp_quickack: args.tcp_quickack,
        io_engine: args.io_engine,
        chap: args.chap,
        mutual_chap: args.mutual_chap,
        allow: args.allow,
    };
    let cfg = match Config::load(&overrides) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    init_logging(log, cfg.log.as_deref());
    // The runtime model (ironlun-target's conn.rs says why this one). The
    // alternative stays selectable so that the measurement behind the
    // choice can be repeated (docs/performance.md).
    let mut builder = match std::env::var("IRONLUN_RUNTIME").as_deref() {
        Err(_) | Ok("multi-thread") => tokio::runtime::Builder::new_multi_thread(),
        Ok("current-thread") => tokio::runtime::Builder::new_current_thread(),
        Ok(other) => {
            return usage_error(&format!(
                "IRONLUN_RUNTIME={other}: expected multi-thread or current-thread"
            ))
        }
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ironlun: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        let server = match Server::bind(&cfg).await {
            Ok(s) => s,
            Err(e) => return usage_error(&e),
        };
        for t in &cfg.targets {
            for l in &t.luns {
                tracing::info!("target {} LUN {}: {:?}", t.name, l.number, l.spec);
            }
            // User names only: secrets never reach the log.
            tracing::info!(
                "target {}: authentication {}; access: {}",
                t.name,
                describe_chap(t.chap.as_ref()),
                t.acl.describe()
            );
        }
        tracing::info!(
            "discovery: authentication {}",
            describe_chap(cfg.discovery_chap.as_ref())
        );
        match server.run(shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ironlun: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

fn describe_chap(p: Option<&ironlun_proto::chap::ChapPolicy>) -> String {
    match p {
        None => "none".to_owned(),
        Some(p) => match &p.target {
            None => format!("CHAP (user {})", p.initiator.user),
            Some(t) => format!("CHAP (user {}; mutual as {})", p.initiator.user, t.user),
        },
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    match term {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    tracing::info!("signal received");
}
