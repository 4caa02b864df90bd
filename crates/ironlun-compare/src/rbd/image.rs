//! The image under test (created, filled, removed with the `rbd`
//! command) and the OSDs' CPU.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use ironlun_bench::cpu::process_cpu_seconds;

use super::{progress, Cluster};

/// The image of the runs. It is removed by [`Image::remove`] unless it
/// is kept; an image that existed before is never removed.
pub struct Image {
    cluster: Cluster,
    name: String,
    remove: bool,
}

impl Image {
    /// Creates `name` with `size` bytes and writes it in full (so that
    /// reads hit data, not unallocated objects). An image of that name
    /// is reused only when `keep` says so and it has that size: anything
    /// else of that name is refused, so that a real cluster's image is
    /// never written over.
    pub fn prepare(cluster: &Cluster, name: &str, size: u64, keep: bool) -> Result<Image, String> {
        let spec = cluster.image_spec(name);
        if size == 0 || size % (1 << 20) != 0 {
            return Err(format!("image size {size}: a whole number of MiB"));
        }
        let image = Image {
            cluster: cluster.clone(),
            name: name.to_owned(),
            remove: !keep,
        };
        match image_size(cluster, &spec)? {
            Some(s) if keep && s == size => {
                progress(&format!("reusing {spec} ({} MiB)", size >> 20));
                return Ok(image);
            }
            Some(s) => {
                return Err(format!(
                    "{spec} exists ({} MiB); it is not written over: remove it, pick \
                     another --image, or pass --keep-image with its size to reuse it",
                    s >> 20
                ))
            }
            None => {}
        }
        run(cluster
            .rbd()
            .args(["create", "--size", &format!("{}M", size >> 20), &spec]))?;
        progress(&format!("filling {spec} ({} MiB)", size >> 20));
        let filled = run(cluster.rbd().args(["bench", "--io-type", "write"]).args([
            "--io-pattern",
            "seq",
            "--io-size",
            "4M",
            "--io-threads",
            "4",
            "--io-total",
            &size.to_string(),
            &spec,
        ]));
        if let Err(e) = filled {
            let _ = image.remove();
            return Err(e);
        }
        Ok(image)
    }

    /// Removes the image unless it is kept.
    pub fn remove(self) -> Result<(), String> {
        if !self.remove {
            return Ok(());
        }
        let spec = self.cluster.image_spec(&self.name);
        run(self.cluster.rbd().args(["rm", "--no-progress", &spec]))
            .map_err(|e| format!("could not remove {spec}: {e}"))
    }
}

/// The size of image `spec`, or `None` when there is no such image.
fn image_size(cluster: &Cluster, spec: &str) -> Result<Option<u64>, String> {
    let out = cluster
        .rbd()
        .args(["info", "--format", "json", spec])
        .output()
        .map_err(|e| format!("cannot run rbd (Debian package ceph-common): {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("No such file") {
            return Ok(None);
        }
        return Err(format!("rbd info {spec}: {}", err.trim()));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("rbd info {spec}: not JSON: {e}"))?;
    v.get("size")
        .and_then(|s| s.as_u64())
        .map(Some)
        .ok_or_else(|| format!("rbd info {spec}: no size"))
}

/// Runs `cmd`; its stderr when it fails.
fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run rbd (Debian package ceph-common): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{:?} failed: {}",
            cmd,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The OSDs of a cluster scripts/ceph-cluster started: the live
/// processes in the pid files `run/osd.*.pid` beside its ceph.conf.
/// Another cluster's OSDs are elsewhere (often on other hosts): none.
pub fn osd_pids(conf: &Path) -> Vec<u32> {
    let Some(run) = conf.parent().map(|d| d.join("run")) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&run) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("osd.") && n.ends_with(".pid")
        })
        .filter_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse().ok())
        .filter(|pid| Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    pids.sort_unstable();
    pids
}

/// The OSDs' CPU seconds, all of them (`None` when there are none or one
/// cannot be read).
fn osd_seconds(pids: &[u32]) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    pids.iter().map(|p| process_cpu_seconds(*p)).sum()
}

/// The OSDs' CPU from one instant on.
pub struct OsdCpu<'a> {
    pids: &'a [u32],
    cpu: Option<f64>,
    at: Instant,
}

impl<'a> OsdCpu<'a> {
    pub fn start(pids: &'a [u32]) -> OsdCpu<'a> {
        OsdCpu {
            pids,
            cpu: osd_seconds(pids),
            at: Instant::now(),
        }
    }

    /// Their CPU since the start, in cores.
    pub fn cores(&self) -> Option<f64> {
        let secs = self.at.elapsed().as_secs_f64();
        let (a, b) = (self.cpu?, osd_seconds(self.pids)?);
        (secs > 0.0).then(|| (b - a) / secs)
    }
}
