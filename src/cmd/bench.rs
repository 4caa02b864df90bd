//! `ironlun bench`: runs workloads against LUNs and reports them.

use std::path::PathBuf;

use ironlun_bench::local::Engine;
use ironlun_bench::plan::LunPlan;
use ironlun_bench::runs::{write_outputs, RunAll, RunLogs, Runner};
use ironlun_bench::{
    profiles, AccessLine, RunReport, Threads, Workload, WorkloadFile, WorkloadResult,
};
use ironlun_initiator::{IscsiUrl, PathPolicy};
use ironlun_units::{parse_duration, parse_size};

use crate::args::{parse_url, relay_to, InitiatorArgs, LinkArgs};
use crate::runtime::{usage, Failure};

#[derive(clap::Args, Clone)]
pub struct BenchArgs {
    /// LUNs to load: iscsi://host[:port]/target-iqn/lun (repeatable), or
    /// local files or block devices (driven by --engine).
    pub urls: Vec<String>,
    /// How local files and devices are driven: io_uring or psync
    /// (pread/pwrite, a thread per I/O in flight).
    #[arg(long, default_value = "io_uring", value_name = "ENGINE")]
    pub engine: String,
    /// Local files and devices through the page cache (default: O_DIRECT).
    #[arg(long)]
    pub buffered: bool,
    /// List the built-in workloads and exit.
    #[arg(long)]
    pub list: bool,
    /// A built-in workload or group (repeatable; see --list).
    #[arg(long, value_name = "NAME")]
    pub profile: Vec<String>,
    /// A TOML workload file ([[workload]] tables).
    #[arg(long, value_name = "FILE")]
    pub workload: Option<PathBuf>,
    /// Simple workload: transfer size.
    #[arg(long, value_name = "SIZE")]
    pub bs: Option<String>,
    /// Simple workload: percent reads.
    #[arg(long, value_name = "PCT")]
    pub read: Option<u32>,
    /// Simple workload: percent random.
    #[arg(long, value_name = "PCT")]
    pub random: Option<u32>,
    /// Outstanding I/Os per worker (overrides the workload's).
    #[arg(long, value_name = "N")]
    pub qd: Option<u32>,
    /// Workers per LUN (overrides the workload's).
    #[arg(long, value_name = "N")]
    pub workers: Option<u32>,
    /// Measured run time per workload (30s, 4m ...).
    #[arg(long, value_name = "DURATION")]
    pub time: Option<String>,
    /// Ramp-up before measuring.
    #[arg(long, value_name = "DURATION")]
    pub ramp: Option<String>,
    /// Stop after this many measured I/Os.
    #[arg(long, value_name = "N")]
    pub ios: Option<u64>,
    /// Rate limit per worker, IOPS (latency counted from intended start).
    #[arg(long, value_name = "IOPS")]
    pub rate: Option<f64>,
    /// Seek range length (from the start of the LUN).
    #[arg(long, value_name = "SIZE")]
    pub seek_range: Option<String>,
    /// Random offsets are multiples of this (default: the transfer size,
    /// as fio's blockalign=bs); `sector` for IOMeter's sector alignment
    /// (the LUN's block).
    #[arg(long, value_name = "SIZE|sector|transfer")]
    pub align: Option<String>,
    /// Where random I/Os land: uniform, zipf:THETA, pareto:H or
    /// hotspot:SHARE/FRACTION (fio's random_distribution; docs/bench-shapes.md).
    #[arg(long, value_name = "DIST")]
    pub access: Option<String>,
    /// Percent of each written block that compresses away (fio's
    /// buffer_compress_percentage).
    #[arg(long, value_name = "PCT")]
    pub compress: Option<u32>,
    /// Percent of writes that repeat an earlier write (fio's
    /// dedupe_percentage).
    #[arg(long, value_name = "PCT")]
    pub dedupe: Option<u32>,
    /// Commands and their shares, e.g. read=60,write=30,unmap=5,writesame=5
    /// (also caw, xcopy); replaces --read.
    #[arg(long, value_name = "OP=PCT,...")]
    pub mix: Option<String>,
    /// Stop once steady: iops|lat|iops_slope|lat_slope:PCT%@WINDOW, e.g.
    /// iops:5%@30s; --time is then the longest run.
    #[arg(long, value_name = "RULE")]
    pub steady: Option<String>,
    /// Log every measured I/O (time, op, LUN, offset, length, latency)
    /// to FILE (FILE.WORKLOAD.N when several runs).
    #[arg(long, value_name = "FILE")]
    pub lat_log: Option<PathBuf>,
    /// Size cap of each latency log.
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    pub lat_log_cap: String,
    /// Write verifiable blocks and check every block read.
    #[arg(long)]
    pub verify: bool,
    /// With --verify: log every write (when issued and acknowledged, in
    /// CLOCK_MONOTONIC ns, its LBA, blocks and generation) to FILE
    /// (FILE.WORKLOAD.N when several runs).
    #[arg(long, value_name = "FILE", requires = "verify")]
    pub verify_log: Option<PathBuf>,
    /// Sessions per URL, each its own I_T nexus driving its own equal
    /// slice of the seek range (so --verify checks every one of them).
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub sessions: u32,
    /// OS threads the workers run on, each with its own sessions
    /// (default: one per worker, at most one per core).
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: Option<u32>,
    /// Several URLs are paths to one LUN (multipath), not separate LUNs;
    /// the LUN's ALUA states decide which paths take I/O (docs/ha.md).
    #[arg(long)]
    pub multipath: bool,
    /// Path selection with --multipath, among the paths of the best ALUA
    /// state.
    #[arg(long, default_value = "round-robin", value_name = "POLICY")]
    pub path_policy: String,
    /// Run each workload N times and report the run with the median IOPS.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: u32,
    /// Write results as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write results as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Target CPU: PID of the target process (its /proc stat is read).
    #[arg(long, value_name = "PID")]
    pub target_pid: Option<u32>,
    /// Target CPU: an ironlun target's statistics endpoint (`ironlun
    /// target --stats ADDR:PORT`), read at the start and end of each
    /// measured interval; works across machines.
    #[arg(long, value_name = "ADDR:PORT")]
    pub target_stats: Option<std::net::SocketAddr>,
    /// Run on these agents (`ironlun bench agent` on each load host,
    /// HOST:PORT, comma-separated): each runs the whole workload from one
    /// agreed instant and the results are merged (docs/bench-agents.md).
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...")]
    pub agents: Vec<String>,
    /// With --agents: the agents' shared token.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    #[command(flatten)]
    pub initiator: InitiatorArgs,
    #[command(flatten)]
    pub link: LinkArgs,
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
}

#[derive(clap::Subcommand, Clone)]
pub enum BenchCommand {
    /// Serve `ironlun bench --agents` controllers on this load host: run
    /// the bench specs they send, only after they prove they know the
    /// shared token.
    Agent(super::bench_agent::AgentArgs),
}

fn list() {
    outln!(
        "{:<22} {:>4} {:>9} {:>5} {:>6}  description",
        "name",
        "qd",
        "size",
        "read",
        "random"
    );
    for w in profiles::all() {
        let size = if w.lines.len() == 1 {
            w.lines
                .first()
                .map(|l| format!("{}", l.size))
                .unwrap_or_default()
        } else {
            "mix".into()
        };
        outln!(
            "{:<22} {:>4} {:>9} {:>5} {:>6}  {}",
            w.name,
            w.queue_depth,
            size,
            format!("{}%", w.read_pct()),
            format!("{}%", w.random_pct()),
            w.description
        );
    }
    outln!("\ngroups: app-profiles (the twelve application specs), disk-tests");
}

/// The workloads the flags ask for.
pub fn workloads(a: &BenchArgs) -> Result<Vec<Workload>, String> {
    let mut out = Vec::new();
    for p in &a.profile {
        out.extend(profiles::lookup(p)?);
    }
    if let Some(f) = &a.workload {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        out.extend(WorkloadFile::parse(&text).map_err(|e| format!("{}: {e}", f.display()))?);
    }
    if out.is_empty() || a.bs.is_some() || a.read.is_some() || a.random.is_some() {
        if !out.is_empty()
            && (a.bs.is_some() || a.read.is_some() || a.random.is_some())
            && !a.profile.is_empty()
        {
            return Err(
                "--bs/--read/--random describe one simple workload; do not mix them with --profile"
                    .into(),
            );
        }
        if out.is_empty() {
            let bs = parse_size(a.bs.as_deref().unwrap_or("4k"))?;
            let bs = u32::try_from(bs).map_err(|_| "--bs too large".to_owned())?;
            let read = a.read.unwrap_or(100);
            let random = a.random.unwrap_or(100);
            out.push(Workload::simple(
                &match &a.mix {
                    Some(_) => format!("{}k-mix-{}rand", bs / 1024, random),
                    None => format!("{}k-{}r-{}rand", bs / 1024, read, random),
                },
                "command-line workload",
                AccessLine::simple(bs, read, random),
                32,
            ));
        }
    }
    for w in &mut out {
        if let Some(q) = a.qd {
            w.queue_depth = q;
        }
        if let Some(n) = a.workers {
            w.workers = n;
        }
        if let Some(t) = &a.time {
            w.time_s = parse_duration(t)?.as_secs_f64();
        }
        if let Some(t) = &a.ramp {
            w.ramp_s = parse_duration(t)?.as_secs_f64();
        }
        if a.ios.is_some() {
            w.ios = a.ios;
        }
        if a.rate.is_some() {
            w.rate_iops = a.rate;
        }
        if let Some(s) = &a.seek_range {
            w.seek.length = parse_size(s)?;
        }
        apply_shape(a, w)?;
        if let Some(s) = &a.align {
            let n = align(s)?;
            for l in &mut w.lines {
                l.align = n;
            }
        }
        w.validate()?;
    }
    Ok(out)
}

/// `--align`: `sector` (IOMeter's), `transfer` (the default) or a size
/// in bytes.
fn align(s: &str) -> Result<u32, String> {
    match s {
        "sector" => Ok(ironlun_bench::spec::SECTOR),
        "transfer" => Ok(0),
        _ => match parse_size(s)? {
            0 => Err("--align 0: give a size, sector or transfer".into()),
            n => u32::try_from(n).map_err(|_| "--align too large".to_owned()),
        },
    }
}

/// The shape flags, over the workload's own shape.
fn apply_shape(a: &BenchArgs, w: &mut Workload) -> Result<(), String> {
    if let Some(s) = &a.access {
        w.shape.access = s.parse()?;
    }
    if let Some(p) = a.compress {
        w.shape.compress_pct = p;
    }
    if let Some(p) = a.dedupe {
        w.shape.dedupe_pct = p;
    }
    if let Some(m) = &a.mix {
        if a.read.is_some() {
            return Err("--mix gives the share of reads; do not add --read".into());
        }
        w.shape.mix = Some(m.parse()?);
    }
    if let Some(s) = &a.steady {
        w.shape.steady = Some(s.parse()?);
    }
    Ok(())
}

/// How every load thread reaches the LUNs the URLs name; with link
/// flags, each portal is reached through an emulated link (a relay kept
/// in `relays` for the run).
pub fn lun_plan(
    a: &BenchArgs,
    relays: &mut Vec<ironlun_netem::Relay>,
    verify: bool,
) -> Result<LunPlan, String> {
    let engine: Engine = a.engine.parse()?;
    let (local, iscsi): (Vec<&String>, Vec<&String>) =
        a.urls.iter().partition(|u| !u.starts_with("iscsi://"));
    if !local.is_empty() {
        if !iscsi.is_empty() {
            return Err("give iscsi:// URLs or local files and devices, not both".into());
        }
        if a.sessions > 1 || a.multipath || a.link.spec(None, None)?.is_some() {
            return Err("--sessions, --multipath and link emulation are for iscsi:// URLs".into());
        }
        return Ok(LunPlan {
            urls: Vec::new(),
            local: local.into_iter().map(PathBuf::from).collect(),
            engine,
            buffered: a.buffered,
            sessions: 1,
            multipath: None,
            verify,
            threads: 1,
        });
    }
    let mut urls: Vec<IscsiUrl> = a
        .urls
        .iter()
        .map(|u| parse_url(u))
        .collect::<Result<_, _>>()?;
    if urls.is_empty() {
        return Err("no LUN given (ironlun bench iscsi://host/target/lun ...)".into());
    }
    if let Some(spec) = a.link.spec(None, a.initiator.tcp_window.as_deref())? {
        for u in &mut urls {
            let relay = relay_to(&u.portal(), &spec)?;
            u.host = relay.addr().ip().to_string();
            u.port = relay.addr().port();
            relays.push(relay);
        }
    }
    let multipath = if a.multipath {
        if a.sessions > 1 {
            return Err("--sessions opens separate sessions per URL; with --multipath the URLs are one LUN's paths".into());
        }
        let first = urls.first().ok_or("no URL")?;
        if urls
            .iter()
            .any(|u| u.target != first.target || u.lun != first.lun)
        {
            return Err("--multipath: every URL must name the same target and LUN".into());
        }
        Some(a.path_policy.parse::<PathPolicy>()?)
    } else {
        None
    };
    let mut with_opts = Vec::new();
    for u in urls {
        let o = a.initiator.options_for(&u)?;
        let label = u.to_string();
        with_opts.push((u, o, label));
    }
    Ok(LunPlan {
        urls: with_opts,
        local: Vec::new(),
        engine,
        buffered: a.buffered,
        sessions: a.sessions,
        multipath,
        verify,
        threads: 1,
    })
}

/// The report of a run's results.
pub fn report(results: Vec<WorkloadResult>, target: Option<String>) -> RunReport {
    RunReport::new(
        "ironlun bench".into(),
        crate::runtime::now_rfc3339(),
        target,
        results,
    )
}

/// Runs the bench. What the flags, workload files and URLs say is
/// checked before any I/O, and a mistake there is a usage error (exit
/// status 2); what fails while running is a failure (status 1).
pub async fn run(a: BenchArgs) -> Result<(), Failure> {
    if a.list {
        list();
        return Ok(());
    }
    if let Some(BenchCommand::Agent(g)) = a.command {
        return Ok(super::bench_agent::serve(g).await?);
    }
    if !a.agents.is_empty() {
        if a.lat_log.is_some() || a.verify_log.is_some() {
            return Err(usage(
                "--lat-log and --verify-log log the I/O of this host; with --agents it runs on the agents",
            ));
        }
        return Ok(super::bench_agent::control(&a).await?);
    }
    if a.target_pid.is_some() && a.target_stats.is_some() {
        return Err(usage("--target-pid and --target-stats: give one of them"));
    }
    let logs = RunLogs {
        lat_log: a.lat_log.clone(),
        cap: parse_size(&a.lat_log_cap).map_err(|e| usage(format!("--lat-log-cap: {e}")))?,
        verify_log: a.verify_log.clone(),
    };
    let ws = workloads(&a).map_err(usage)?;
    let mut relays = Vec::new();
    let mut plan = lun_plan(&a, &mut relays, a.verify).map_err(usage)?;
    plan.threads = plan.load_threads(a.threads, &ws).map_err(usage)?;
    let n = plan.threads;
    let stride = ws.iter().map(|w| w.workers).max().unwrap_or(1);
    let targets = plan.targets();
    let pool = Threads::start(n, targets, stride, plan.opener()).await?;
    outln!("{n} load thread{}", if n == 1 { "" } else { "s" });
    let probe = match (a.target_pid, a.target_stats) {
        (Some(pid), _) => Some(ironlun_bench::cpu::pid_probe(pid)),
        (None, Some(addr)) => {
            // Fail early on a wrong address rather than report no CPU.
            ironlun_bench::target_stats::fetch(addr).await?;
            Some(ironlun_bench::target_stats::probe(addr))
        }
        (None, None) => None,
    };
    let results = RunAll {
        runner: Runner::Threads(&pool),
        verify: a.verify,
        repeat: a.repeat,
        target_cpu: probe,
        logs: &logs,
        exclude_threads: Some(ironlun_netem::awake::THREAD_NAME),
    }
    .run(&ws, &crate::ui::Terminal)
    .await;
    let lun_info = ironlun_bench::luns::info(pool.targets());
    pool.close().await;
    let results = results?;
    let clean = results.iter().all(WorkloadResult::clean);
    let mut rep = report(results, a.urls.first().cloned());
    rep.link = relays.first().map(|r| r.spec().describe());
    rep.luns = lun_info;
    write_outputs(&rep, a.json.as_ref(), a.csv.as_ref())?;
    if clean {
        Ok(())
    } else {
        Err("the run had I/O errors or verification mismatches (see above)".into())
    }
}
