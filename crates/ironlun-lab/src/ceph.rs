//! An RBD image for the lab to run against: on the cluster `CEPH_CONF`
//! names, or on a single-node cluster started with the repository's
//! `scripts/ceph-cluster` (docs/rbd.md). The image, and a cluster started
//! here, are removed again on drop.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's cluster script, as built from the source tree.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/ceph-cluster");

/// An image made for one lab run.
pub struct RbdImage {
    /// ceph.conf of its cluster.
    pub conf: PathBuf,
    pub pool: String,
    pub image: String,
    /// The cluster's directory when this run started it.
    started: Option<PathBuf>,
}

fn output(cmd: &mut Command, what: &str) -> Result<String, String> {
    let o = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if !o.status.success() {
        return Err(format!("{what} failed:\n{text}"));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Starts a cluster in `dir` with scripts/ceph-cluster; its ceph.conf.
fn start_cluster(dir: &Path) -> Result<PathBuf, String> {
    if !Path::new(SCRIPT).exists() {
        return Err(format!(
            "{SCRIPT} is not there (ironlun was built elsewhere): start a cluster and set CEPH_CONF"
        ));
    }
    let out = output(
        Command::new(SCRIPT).arg("start").arg(dir),
        "scripts/ceph-cluster start",
    )?;
    let last = out.lines().last().unwrap_or_default();
    last.strip_prefix("CEPH_CONF=")
        .map(PathBuf::from)
        .ok_or_else(|| format!("scripts/ceph-cluster start printed no CEPH_CONF= line:\n{out}"))
}

impl RbdImage {
    /// An image of `size` bytes in pool `rbd`: on `$CEPH_CONF`'s cluster
    /// if set, else on a cluster started in `dir`.
    pub fn create(size: u64, dir: &Path) -> Result<RbdImage, String> {
        let (conf, started) = match std::env::var_os("CEPH_CONF") {
            Some(c) => (PathBuf::from(c), None),
            None => (start_cluster(dir)?, Some(dir.to_owned())),
        };
        let img = RbdImage {
            conf,
            pool: "rbd".into(),
            image: format!("ironlun-lab-{}", std::process::id()),
            started,
        };
        img.rbd(&[
            "create",
            "--size",
            &format!("{}K", size.div_ceil(1024)),
            &img.name(),
        ])?;
        Ok(img)
    }

    /// `POOL/IMAGE`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.pool, self.image)
    }

    /// The LUN spec that serves it.
    pub fn lun_spec(&self) -> String {
        format!("rbd:{},conf={}", self.name(), self.conf.display())
    }

    fn rbd(&self, args: &[&str]) -> Result<String, String> {
        output(
            Command::new("rbd").env("CEPH_CONF", &self.conf).args(args),
            &format!("rbd {}", args.join(" ")),
        )
    }
}

impl Drop for RbdImage {
    fn drop(&mut self) {
        if let Some(dir) = &self.started {
            let _ = Command::new(SCRIPT).arg("stop").arg(dir).output();
            return;
        }
        // The target's close of the image may still be releasing its
        // watch: `rbd rm` refuses an image with watchers.
        let mut last = String::new();
        for _ in 0..20 {
            match self.rbd(&["rm", "--no-progress", &self.name()]) {
                Ok(_) => return,
                Err(e) => last = e,
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        eprintln!("lab: could not remove {}: {last}", self.name());
    }
}
