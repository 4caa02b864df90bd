//! A block device over a file on the disk, for rows that need one: a loop
//! device attached with direct I/O to its backing file (`losetup --find
//! --show --direct-io=on FILE`, so the loop adds no page cache of its
//! own), and its I/O scheduler chosen through
//! `/sys/block/loopN/queue/scheduler`, whose text lists the schedulers
//! the kernel offers with the current one in brackets
//! (Documentation/block/switching-sched.rst). Detached on drop.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The schedulers a line of `queue/scheduler` offers, and the current one
/// ("none [mq-deadline] kyber bfq").
pub fn parse_schedulers(text: &str) -> (Vec<String>, Option<String>) {
    let mut offered = Vec::new();
    let mut current = None;
    for w in text.split_whitespace() {
        let name = w.trim_start_matches('[').trim_end_matches(']');
        if name.len() + 2 == w.len() && w.starts_with('[') {
            current = Some(name.to_owned());
        }
        offered.push(name.to_owned());
    }
    (offered, current)
}

/// Each wanted scheduler with `None` when the kernel offers it, or the
/// reason it is skipped.
pub fn plan_schedulers<'a>(
    wanted: &[&'a str],
    offered: &[String],
) -> Vec<(&'a str, Option<String>)> {
    wanted
        .iter()
        .map(|w| {
            let skip = (!offered.iter().any(|o| o == w)).then(|| {
                format!(
                    "the kernel does not offer the {w} scheduler (offered: {})",
                    offered.join(", ")
                )
            });
            (*w, skip)
        })
        .collect()
}

/// A loop device attached to a file, detached on drop.
pub struct LoopDevice {
    pub path: PathBuf,
}

impl LoopDevice {
    /// Attaches `file` with direct I/O (needs root and the loop driver).
    pub fn attach(file: &Path) -> Result<LoopDevice, String> {
        let out = Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on"])
            .arg(file)
            .output()
            .map_err(|e| format!("cannot run losetup (Debian package mount): {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "losetup --direct-io=on {}: {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if path.as_os_str().is_empty() {
            return Err("losetup printed no device".into());
        }
        Ok(LoopDevice { path })
    }

    /// `/sys/block/loopN/queue/scheduler`.
    pub fn scheduler_file(&self) -> Result<PathBuf, String> {
        let name = self
            .path
            .file_name()
            .ok_or_else(|| format!("{}: no device name", self.path.display()))?;
        Ok(Path::new("/sys/block")
            .join(name)
            .join("queue")
            .join("scheduler"))
    }

    /// The schedulers offered and the current one.
    pub fn schedulers(&self) -> Result<(Vec<String>, Option<String>), String> {
        let f = self.scheduler_file()?;
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        Ok(parse_schedulers(&text))
    }

    /// Sets the scheduler and reads it back.
    pub fn set_scheduler(&self, name: &str) -> Result<(), String> {
        let f = self.scheduler_file()?;
        std::fs::write(&f, name).map_err(|e| format!("{} <- {name}: {e}", f.display()))?;
        match self.schedulers()?.1 {
            Some(c) if c == name => Ok(()),
            other => Err(format!(
                "{}: asked for {name}, the kernel has {}",
                f.display(),
                other.unwrap_or_else(|| "none marked".into())
            )),
        }
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
    }
}

/// XFS made on a loop device over a sparse file on the disk and mounted,
/// for a file served through the page cache on a device whose scheduler
/// is set (the target study's FILEIO: a file on XFS on the disk). The
/// file is sized for `data` bytes and never under 320 MiB (mkfs.xfs's
/// smallest file system is 300 MB). Unmounted, detached and removed on
/// drop.
pub struct XfsOnLoop {
    /// Unmounted in `drop`, before the fields (and so `dev`'s detach).
    pub mount: PathBuf,
    pub dev: LoopDevice,
    image: PathBuf,
}

impl XfsOnLoop {
    /// Makes `image`, attaches it, runs `mkfs.xfs` and mounts it on
    /// `mount` (made if missing). Needs root, the loop driver and
    /// xfsprogs.
    pub fn make(image: &Path, data: u64, mount: &Path) -> Result<XfsOnLoop, String> {
        let size = (data + data / 8 + (64 << 20)).max(320 << 20);
        let f = std::fs::File::create(image).map_err(|e| format!("{}: {e}", image.display()))?;
        if let Err(e) = f.set_len(size) {
            let _ = std::fs::remove_file(image);
            return Err(format!("{}: {e}", image.display()));
        }
        drop(f);
        let dev = match LoopDevice::attach(image) {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_file(image);
                return Err(e);
            }
        };
        let fs = XfsOnLoop {
            mount: mount.to_owned(),
            dev,
            image: image.to_owned(),
        };
        run(
            "mkfs.xfs (Debian package xfsprogs)",
            Command::new("mkfs.xfs")
                .args(["-q", "-f"])
                .arg(&fs.dev.path),
        )?;
        std::fs::create_dir_all(mount).map_err(|e| format!("{}: {e}", mount.display()))?;
        run("mount", Command::new("mount").arg(&fs.dev.path).arg(mount))?;
        Ok(fs)
    }
}

/// Runs `cmd`, its stderr in the error.
fn run(what: &str, cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Drop for XfsOnLoop {
    fn drop(&mut self) {
        // Unmounting a file system that was never mounted fails
        // harmlessly; a busy one is detached lazily rather than left
        // mounted (the loop device then goes when it is released).
        if run("umount", Command::new("umount").arg(&self.mount)).is_err() {
            let lazy = Command::new("umount").arg("-l").arg(&self.mount).output();
            let still = std::fs::read_to_string("/proc/self/mounts").is_ok_and(|m| {
                m.lines()
                    .any(|l| l.split(' ').nth(1) == self.mount.to_str())
            });
            if still || lazy.is_err() {
                eprintln!("warning: {} may still be mounted", self.mount.display());
            }
        }
        let _ = std::fs::remove_dir(&self.mount);
        // Unlinked now, the file goes when `dev` detaches it.
        let _ = std::fs::remove_file(&self.image);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_scheduler_is_the_bracketed_one() {
        let (offered, current) = parse_schedulers("none [mq-deadline] kyber bfq \n");
        assert_eq!(offered, ["none", "mq-deadline", "kyber", "bfq"]);
        assert_eq!(current.as_deref(), Some("mq-deadline"));
        let (offered, current) = parse_schedulers("[none] \n");
        assert_eq!(offered, ["none"]);
        assert_eq!(current.as_deref(), Some("none"));
        assert_eq!(parse_schedulers("").1, None);
    }

    #[test]
    fn schedulers_the_kernel_lacks_are_skipped_with_the_list() {
        let offered: Vec<String> = ["none", "mq-deadline"].map(String::from).to_vec();
        let plan = plan_schedulers(&["none", "mq-deadline", "bfq"], &offered);
        assert_eq!(plan[0], ("none", None));
        assert_eq!(plan[1], ("mq-deadline", None));
        assert_eq!(
            plan[2].1.as_deref(),
            Some("the kernel does not offer the bfq scheduler (offered: none, mq-deadline)")
        );
    }
}
