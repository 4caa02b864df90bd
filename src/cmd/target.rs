//! `ironlun target`: the iSCSI target daemon. Flags become the target
//! crate's overrides; the runtime model is chosen here, and the daemon
//! runs until SIGINT or SIGTERM, telling systemd how it goes when run as
//! a service (`crate::service`).

use std::path::PathBuf;
use std::process::ExitCode;

use ironlun_proto::chap::ChapPolicy;
use ironlun_target::{BindError, Server};
use ironlun_target_admin::Control;
use ironlun_target_config::{Config, ConfigError, Overrides};

use crate::runtime::{init_logging, log_filter, shutdown_signal, usage_error};
use crate::service;

#[derive(clap::Args)]
pub struct TargetArgs {
    /// TOML configuration file (see docs/config.md).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Portal to listen on, ADDR:PORT (repeatable; default 127.0.0.1:3260;
    /// IPv6 as [::1]:3260).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Vec<String>,
    /// Target name (default: iqn.2026-11.io.ironlun:<host name>).
    #[arg(long, value_name = "IQN")]
    pub name: Option<String>,
    /// A LUN, numbered from 0 in the order given: ram:SIZE, null:SIZE,
    /// file:PATH[,size=SIZE][,direct][,prealloc], block:PATH[,direct] or
    /// rbd:POOL/IMAGE[,conf=FILE][,id=USER] (a Ceph RBD image,
    /// docs/rbd.md), optionally followed by ,bs=4096, ,ro, ,thin (thin
    /// provisioning, not for block) and ,sanitize[,sanitize_rate=RATE]
    /// (docs/config.md has every option). Sizes: 512MiB, 1GiB, 1.5GiB,
    /// 1G, 500GB.
    #[arg(long, value_name = "SPEC")]
    pub lun: Vec<String>,
    /// Commands each session may have outstanding (the CmdSN window).
    #[arg(long, value_name = "N")]
    pub queue_depth: Option<u32>,
    /// Directory for state that survives restarts (persistent
    /// reservations with APTPL, sanitize operations under way). Default
    /// with --config: next to the file.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The management API's Unix socket (owner-only; `ironlun admin`
    /// talks to it). Default: admin.sock in the state directory; none
    /// without one.
    #[arg(long, value_name = "PATH")]
    pub admin_socket: Option<PathBuf>,
    /// Serve the management API over HTTP too, on this loopback
    /// ADDR:PORT; needs --admin-token-file.
    #[arg(long, value_name = "ADDR:PORT")]
    pub admin_http: Option<String>,
    /// The bearer token HTTP management clients must send (a file others
    /// cannot read, 16 characters at least).
    #[arg(long, value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// A directory `ironlun admin config save PATH` may write NAME.toml
    /// files in, besides the daemon's own configuration file (the only
    /// place otherwise).
    #[arg(long, value_name = "DIR")]
    pub admin_save_dir: Option<PathBuf>,
    /// Serve statistics (process CPU, sessions, per-LUN I/O counters) as
    /// JSON over HTTP at ADDR:PORT/stats (see docs/stats.md); `ironlun
    /// bench --target-stats` reads it.
    #[arg(long, value_name = "ADDR:PORT")]
    pub stats: Option<String>,
    /// Socket send and receive buffers for every connection (the TCP
    /// window), e.g. 512KiB; default: kernel autotuning.
    #[arg(long, value_name = "SIZE")]
    pub tcp_window: Option<String>,
    /// Which gateway of the configuration's `[target.group]` this process
    /// is (every gateway reads the same file; docs/ha.md).
    #[arg(long, value_name = "NAME")]
    pub gateway: Option<String>,
    /// Turn TCP_NODELAY off (let Nagle batch small segments).
    #[arg(long)]
    pub tcp_nagle: bool,
    /// Re-arm TCP_QUICKACK after every read (no delayed ACKs).
    #[arg(long)]
    pub tcp_quickack: bool,
    /// Latency mode: a connection with nothing to send polls its socket
    /// and io_uring this long (e.g. 50us, at most 1ms) before it sleeps,
    /// trading CPU for fewer wake-ups at low queue depth; 0 (the
    /// default) is off. Same as `busy_poll` in the file's `[tcp]`.
    #[arg(long, value_name = "DURATION")]
    pub busy_poll: Option<String>,
    /// How commands on file and block LUNs reach the kernel: uring (an
    /// io_uring per connection, the default; the thread pool where
    /// io_uring is unavailable) or pool (a blocking thread per command).
    #[arg(long, value_name = "ENGINE")]
    pub io_engine: Option<String>,
    /// Require CHAP (RFC 7143 §12.1.3) from initiators, for every target
    /// and for discovery: USER:SECRET, the secret 12 to 255 bytes.
    /// Prefer the environment variable: a flag shows in `ps`.
    #[arg(
        long,
        value_name = "USER:SECRET",
        env = "IRONLUN_CHAP",
        hide_env_values = true
    )]
    pub chap: Option<String>,
    /// The target's own credentials for initiators that ask for mutual
    /// CHAP (needs --chap; a different secret).
    #[arg(
        long,
        value_name = "USER:SECRET",
        env = "IRONLUN_MUTUAL_CHAP",
        hide_env_values = true
    )]
    pub mutual_chap: Option<String>,
    /// Allow an initiator name (iqn./eui./naa.) or a network (CIDR, or
    /// one address) to log in (repeatable; without any, all are allowed;
    /// with names and networks both, both must match).
    #[arg(long, value_name = "IQN|CIDR")]
    pub allow: Vec<String>,
    /// Check the configuration (flags and file) as the daemon would open
    /// it, without serving, and exit: prints it as TOML with every
    /// default filled in, then every problem found (directories, files
    /// and devices, addresses, token file, CHAP secrets) or
    /// "configuration OK"; exit status 2 on a problem. Binds no port,
    /// creates, grows and locks no file (docs/config.md).
    #[arg(long)]
    pub check: bool,
}

/// Why the daemon did not start, or stopped with an error.
enum Failure {
    /// Flags or the configuration file.
    Config(ConfigError),
    /// A LUN that did not open, a portal that did not listen.
    Bind(BindError),
    /// The file's `log` names no level (`runtime::log_filter`).
    Log(String),
    /// `IRONLUN_RUNTIME` names no runtime model.
    RuntimeModel(String),
    /// The tokio runtime did not start.
    Runtime(std::io::Error),
    /// Serving ended with an error (a LUN that did not flush).
    Serve(String),
    /// `--check` found problems (each printed): the verdict.
    Check(String),
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Failure {
        Failure::Config(e)
    }
}

impl From<BindError> for Failure {
    fn from(e: BindError) -> Failure {
        Failure::Bind(e)
    }
}

impl Failure {
    /// The one place a failure becomes a message and an exit status:
    /// what the user must fix before the daemon can start (configuration,
    /// a LUN or port) is a usage error, status 2 with one line; the rest
    /// is status 1.
    fn exit(self) -> ExitCode {
        match self {
            Failure::Config(e) => usage_error(&e.to_string()),
            Failure::Bind(e) => usage_error(&e.to_string()),
            Failure::Log(e) => usage_error(&e),
            Failure::RuntimeModel(other) => usage_error(&format!(
                "IRONLUN_RUNTIME={other}: expected multi-thread or current-thread"
            )),
            Failure::Runtime(e) => {
                eprintln!("ironlun: cannot start the runtime: {e}");
                ExitCode::FAILURE
            }
            Failure::Serve(e) => {
                eprintln!("ironlun: {e}");
                ExitCode::FAILURE
            }
            Failure::Check(verdict) => usage_error(&verdict),
        }
    }
}

pub fn run(log: Option<&str>, args: TargetArgs) -> ExitCode {
    match serve(log, args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => f.exit(),
    }
}

fn overrides(args: TargetArgs) -> Overrides {
    if let Some(g) = &args.gateway {
        ironlun_target_config::set_local_gateway(g);
    }
    Overrides {
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
        busy_poll: args.busy_poll,
        io_engine: args.io_engine,
        chap: args.chap,
        mutual_chap: args.mutual_chap,
        allow: args.allow,
        admin_socket: args.admin_socket,
        admin_http: args.admin_http,
        admin_token_file: args.admin_token_file,
        admin_save_dir: args.admin_save_dir,
    }
}

/// The runtime model (ironlun-target's conn.rs says why this one). The
/// alternative stays selectable so that the measurement behind the
/// choice can be repeated (docs/performance.md).
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    let mut builder = match std::env::var("IRONLUN_RUNTIME").as_deref() {
        Err(_) | Ok("multi-thread") => tokio::runtime::Builder::new_multi_thread(),
        Ok("current-thread") => tokio::runtime::Builder::new_current_thread(),
        Ok(other) => return Err(Failure::RuntimeModel(other.to_owned())),
    };
    builder.enable_all().build().map_err(Failure::Runtime)
}

fn serve(log: Option<&str>, args: TargetArgs) -> Result<(), Failure> {
    let check = args.check;
    let overrides = overrides(args);
    let cfg = Config::load(&overrides)?;
    if let Some(Err(e)) = cfg.log.as_deref().map(log_filter) {
        let source = cfg.source.as_ref().map(|p| p.display().to_string());
        return Err(Failure::Log(format!(
            "{}: log: {e}",
            source.unwrap_or_default()
        )));
    }
    if check {
        return crate::cmd::target_check::run(&cfg, &overrides, log).map_err(Failure::Check);
    }
    init_logging(log, cfg.log.as_deref());
    runtime()?.block_on(async move {
        let stop = shutdown_signal();
        let server = Server::bind_with(&cfg, &overrides).await?;
        let server = server.with_control(Control::bind(&cfg).await?);
        log_startup(&cfg);
        let live = server.live();
        let status = move || {
            let r = &live.registry;
            service::serving(&r.portals(), r.targets().len(), r.sessions().len())
        };
        let stop = service::supervise(stop, status);
        server.run(stop).await.map_err(Failure::Serve)
    })
}

/// What each target serves and who may log in.
fn log_startup(cfg: &Config) {
    for t in &cfg.targets {
        for l in &t.luns {
            tracing::info!("target {} LUN {}: {}", t.name, l.number, l.spec);
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
}

fn describe_chap(p: Option<&ChapPolicy>) -> String {
    match p {
        None => "none".to_owned(),
        Some(p) => match &p.target {
            None => format!("CHAP (user {})", p.initiator.user),
            Some(t) => format!("CHAP (user {}; mutual as {})", p.initiator.user, t.user),
        },
    }
}
