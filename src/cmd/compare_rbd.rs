//! `ironlun compare-rbd`: RBD gateways (tgt-rbd, ironlun's `rbd:` LUN)
//! beside Ceph's own `rbd bench` on one image (see docs/rbd.md and
//! docs/performance.md; `benches/compare-rbd` starts a cluster and runs
//! this).

use std::path::PathBuf;
use std::time::Duration;

use ironlun_compare::rbd;

use super::compare_peers::write_out;
use super::compare_runs::RunArgs;

#[derive(clap::Args)]
pub struct RbdArgs {
    /// The cluster's ceph.conf (scripts/ceph-cluster start prints it).
    #[arg(long, env = "CEPH_CONF", value_name = "PATH")]
    pub ceph_conf: PathBuf,
    /// Ceph client id (without "client."); default: Ceph's own (admin).
    #[arg(long, value_name = "CLIENT")]
    pub id: Option<String>,
    /// The pool the image is created in.
    #[arg(long, default_value = "rbd")]
    pub pool: String,
    /// The image to create, fill and remove. An existing image of that
    /// name is refused (never written over) unless --keep-image is given
    /// and it has --size.
    #[arg(long, default_value = "ironlun-compare-rbd")]
    pub image: String,
    /// Size of the image (whole MiB).
    #[arg(long, default_value = "1GiB", value_name = "SIZE")]
    pub size: String,
    /// Keep the image afterwards, and reuse one of that name and size.
    #[arg(long)]
    pub keep_image: bool,
    /// The ironlun binary that serves the image (default: this one), e.g.
    /// a build of another branch; the client stays this binary's
    /// `ironlun bench`.
    #[arg(long, value_name = "PATH")]
    pub target_exe: Option<PathBuf>,
    #[command(flatten)]
    pub runs: RunArgs,
    /// Where the table (Markdown) and the samples (JSON) go.
    #[arg(long, default_value = "compare-rbd", value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(a: RbdArgs) -> Result<(), String> {
    let runs = a.runs.check(
        Duration::from_secs(1),
        "1s (rbd bench reports whole seconds)",
    )?;
    let size = ironlun_units::parse_size(&a.size)?;
    if size < 64 << 20 || size % (1 << 20) != 0 {
        return Err("--size must be whole MiB, at least 64MiB".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find our own binary: {e}"))?;
    let opts = rbd::Options {
        target_exe: a.target_exe.unwrap_or_else(|| exe.clone()),
        exe,
        reps: runs.reps,
        measure: runs.measure,
        cluster: rbd::Cluster {
            conf: a.ceph_conf,
            id: a.id,
            pool: a.pool,
        },
        image: a.image,
        size,
        keep_image: a.keep_image,
        only: runs.only,
        steal_redo_pct: runs.steal_redo_pct,
        started: crate::runtime::now_rfc3339(),
    };
    let report = rbd::run(&opts)?;
    let md = rbd::table::markdown(&report);
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    write_out(&a.out, &md, &json, report.failures.len())
}
