//! `ironlun lab`: an in-process target with a RAM LUN on loopback, a short
//! suite of built-in profiles against it, JSON and an HTML report.

use std::path::PathBuf;

use ironlun_bench::{profiles, report, LunTarget, Path, TargetCpuProbe};
use ironlun_initiator::{Session, SessionOptions};
use ironlun_target::{Config, Overrides, Server};

use crate::bench_cmd;

/// Name prefix of the in-process target's runtime threads, so their CPU
/// can be told apart from the load generator's.
const TARGET_THREADS: &str = "ironlun-tgt";

#[derive(clap::Args)]
pub struct LabArgs {
    /// Where the JSON and HTML go.
    #[arg(long, default_value = "ironlun-lab", value_name = "DIR")]
    pub out: PathBuf,
    /// RAM LUN size.
    #[arg(long, default_value = "1GiB", value_name = "SIZE")]
    pub size: String,
    /// Measured time per workload.
    #[arg(long, default_value = "3s", value_name = "DURATION")]
    pub time: String,
    /// Profiles to run (default: a short suite; see ironlun bench --list).
    #[arg(long, value_name = "NAME")]
    pub profile: Vec<String>,
}

const DEFAULT_SUITE: [&str; 8] = [
    "web-file-server-4k",
    "db-oltp-8k",
    "exchange-email-4k",
    "file-server",
    "video-on-demand-512k",
    "dd-read-512k",
    "dd-write-512k",
    "access-time-read",
];

pub fn run_lab(a: LabArgs) -> Result<(), String> {
    let size = crate::units::parse_size(&a.size)?;
    let time = crate::units::parse_duration(&a.time)?.as_secs_f64();
    let cfg = Config::load(&Overrides {
        listen: vec!["127.0.0.1:0".into()],
        name: Some("iqn.2026-11.org.ironlun:lab".into()),
        luns: vec![format!("ram:{size}")],
        ..Overrides::default()
    })?;
    // The target gets its own runtime (named threads); the load generator
    // runs on this thread.
    let target_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(TARGET_THREADS)
        .enable_all()
        .build()
        .map_err(|e| format!("target runtime: {e}"))?;
    let server = target_rt.block_on(Server::bind(&cfg))?;
    let addr = server
        .local_addrs()
        .first()
        .copied()
        .ok_or("the target did not listen")?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = target_rt.spawn(server.run(async {
        let _ = stop_rx.await;
    }));
    let names: Vec<String> = if a.profile.is_empty() {
        DEFAULT_SUITE.iter().map(|s| (*s).to_owned()).collect()
    } else {
        a.profile.clone()
    };
    let mut ws = Vec::new();
    for n in &names {
        let mut found = profiles::group(n)
            .or_else(|| profiles::find(n).map(|w| vec![w]))
            .ok_or_else(|| format!("unknown profile '{n}' (see ironlun bench --list)"))?;
        for w in &mut found {
            w.time_s = time;
            w.ramp_s = 0.5;
        }
        ws.extend(found);
    }
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let portal = addr.to_string();
    let target = cfg
        .targets
        .first()
        .map(|t| t.name.clone())
        .ok_or("no target")?;
    eprintln!(
        "lab: target {target} on {portal}, RAM LUN of {size} bytes; {} workloads of {time} s",
        ws.len()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let results = rt.block_on(async {
        let s = Session::connect(&portal, Some(&target), &SessionOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        let _ = s.clear_unit_attention(0).await;
        let capacity = s.read_capacity(0).await.map_err(|e| e.to_string())?;
        let luns = vec![LunTarget {
            label: format!("iscsi://{portal}/{target}/0"),
            path: Path::Single(s.clone()),
            lun: 0,
            capacity,
        }];
        let probe: TargetCpuProbe = ironlun_bench::cpu::threads_probe(TARGET_THREADS);
        let r = bench_cmd::run_all(&ws, &luns, false, 1, Some(probe)).await;
        let _ = s.logout().await;
        r
    })?;
    let _ = stop_tx.send(());
    let _ = target_rt.block_on(served);
    let rep = bench_cmd::report(
        results,
        Some(format!("in-process ironlun target, ram:{size}")),
    );
    let json = a.out.join("lab.json");
    let html = a.out.join("report.html");
    bench_cmd::write_outputs(&rep, Some(&json), None)?;
    std::fs::write(&html, report::html(std::slice::from_ref(&rep))?)
        .map_err(|e| format!("{}: {e}", html.display()))?;
    println!("results: {}", json.display());
    println!("report:  {}", html.display());
    Ok(())
}
