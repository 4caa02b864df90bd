//! `ironlun lab`: an in-process target with a RAM LUN (or, with `--rbd`,
//! an RBD image) on loopback, a short suite of built-in profiles against
//! it, JSON and an HTML report.

use std::path::PathBuf;

use ironlun_bench::luns::{self, Route};
use ironlun_bench::runs::{write_outputs, RunAll, RunLogs, Runner};
use ironlun_bench::{profiles, report, Slice, TargetCpuProbe};
use ironlun_initiator::SessionOptions;
use ironlun_lab::ceph::RbdImage;
use ironlun_lab::embedded::{EmbeddedTarget, TARGET_THREADS};

use super::bench;

#[derive(clap::Args)]
pub struct LabArgs {
    /// Where the JSON and HTML go.
    #[arg(long, default_value = "ironlun-lab", value_name = "DIR")]
    pub out: PathBuf,
    /// LUN size.
    #[arg(long, default_value = "1GiB", value_name = "SIZE")]
    pub size: String,
    /// Serve an RBD image instead of RAM: made for the run on the cluster
    /// $CEPH_CONF names, or on a single-node cluster that
    /// scripts/ceph-cluster starts in OUT/ceph (docs/rbd.md); removed
    /// afterwards.
    #[arg(long)]
    pub rbd: bool,
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

pub fn run(a: LabArgs) -> Result<(), String> {
    let size = ironlun_units::parse_size(&a.size)?;
    let time = ironlun_units::parse_duration(&a.time)?.as_secs_f64();
    // The target runs on its own runtime threads; the load generator on
    // this thread.
    let image = if a.rbd {
        std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
        Some(RbdImage::create(size, &a.out.join("ceph"))?)
    } else {
        None
    };
    let spec = image
        .as_ref()
        .map_or_else(|| format!("ram:{size}"), RbdImage::lun_spec);
    let target = EmbeddedTarget::start(std::slice::from_ref(&spec))?;
    let names: Vec<String> = if a.profile.is_empty() {
        DEFAULT_SUITE.iter().map(|s| (*s).to_owned()).collect()
    } else {
        a.profile.clone()
    };
    let mut ws = Vec::new();
    for n in &names {
        let mut found = profiles::lookup(n)?;
        for w in &mut found {
            w.time_s = time;
            w.ramp_s = 0.5;
        }
        ws.extend(found);
    }
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let portal = target.portal.to_string();
    let name = target.name.clone();
    eprintln!(
        "lab: target {name} on {portal}, LUN {spec} of {size} bytes; {} workloads of {time} s",
        ws.len()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let (results, lun_info) = rt.block_on(async {
        let label = format!("iscsi://{portal}/{name}/0");
        let opts = SessionOptions::default();
        let lun = luns::open(Route::Portal(&portal), &name, 0, &opts, label, Slice::WHOLE).await?;
        let luns = vec![lun];
        let probe: TargetCpuProbe = ironlun_bench::cpu::threads_probe(TARGET_THREADS);
        let r = RunAll {
            runner: Runner::Here(&luns),
            verify: false,
            repeat: 1,
            target_cpu: Some(probe),
            logs: &RunLogs::default(),
            exclude_threads: Some(ironlun_netem::awake::THREAD_NAME),
        }
        .run(&ws, &crate::ui::Terminal)
        .await;
        luns::close(&luns).await;
        r.map(|r| (r, luns::info(&luns)))
    })?;
    drop(rt);
    // Stops the target: initiators asked to log out, LUNs flushed; then
    // the image (and a cluster started for it) goes.
    drop(target);
    drop(image);
    let mut rep = bench::report(results, Some(format!("in-process ironlun target, {spec}")));
    rep.luns = lun_info;
    let json = a.out.join("lab.json");
    let html = a.out.join("report.html");
    write_outputs(&rep, Some(&json), None)?;
    std::fs::write(&html, report::html(std::slice::from_ref(&rep)))
        .map_err(|e| format!("{}: {e}", html.display()))?;
    outln!("results: {}", json.display());
    outln!("report:  {}", html.display());
    Ok(())
}
