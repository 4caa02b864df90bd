//! Where the measured LUNs live: a file on a reflink XFS this program
//! makes on a loop device (unmounted and removed on drop), or an image
//! in the `rbd` pool of a Ceph cluster (removed with its snapshots).

use std::path::{Path, PathBuf};
use std::process::Command;

use ironlun_units::format_size;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Rbd,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Rbd => "rbd",
        }
    }
}

/// The XFS's image: room for the LUN, its snapshots' copied blocks and
/// the 1 TiB LUN's few written MiB (mkfs.xfs wants 300 MiB at least).
fn xfs_bytes(lun: u64) -> u64 {
    (lun.saturating_mul(4) + (1 << 30)).max(512 << 20)
}

enum Place {
    /// The mount point, and the image under it.
    Xfs { mnt: PathBuf, img: PathBuf },
    /// The cluster's configuration file.
    Rbd { conf: PathBuf },
}

pub struct Store {
    pub kind: Kind,
    place: Place,
}

impl Store {
    /// The store, or why it cannot be had here (the store is skipped).
    pub fn open(kind: Kind, dir: &Path, conf: Option<&Path>, lun: u64) -> Result<Store, String> {
        let place = match kind {
            Kind::File => make_xfs(dir, xfs_bytes(lun))?,
            Kind::Rbd => {
                let conf = conf.ok_or(
                    "no Ceph cluster: CEPH_CONF and --ceph-conf unset \
                     (benches/snapshot-pause starts one when Ceph is installed)",
                )?;
                run("rbd", &["-c", &s(conf), "ls", "rbd"])
                    .map_err(|e| format!("the cluster in {}: {e}", conf.display()))?;
                Place::Rbd {
                    conf: conf.to_path_buf(),
                }
            }
        };
        Ok(Store { kind, place })
    }

    /// A LUN's spec, its store made (`bytes` long, thin).
    pub fn lun(&self, name: &str, bytes: u64) -> Result<String, String> {
        match &self.place {
            Place::Xfs { mnt, .. } => Ok(format!(
                "file:{}/{name}.img,size={}",
                mnt.display(),
                format_size(bytes)
            )),
            Place::Rbd { conf } => {
                let size = format!("{}M", bytes.div_ceil(1 << 20));
                let image = image(name);
                run("rbd", &["-c", &s(conf), "create", "--size", &size, &image])?;
                Ok(format!("rbd:{image},conf={}", conf.display()))
            }
        }
    }

    /// Removes a LUN's store and its snapshots.
    pub fn remove_lun(&self, name: &str) -> Result<(), String> {
        match &self.place {
            Place::Xfs { mnt, .. } => {
                let f = mnt.join(format!("{name}.img"));
                let snaps = mnt.join(format!("{name}.img.snapshots"));
                let _ = std::fs::remove_dir_all(snaps);
                std::fs::remove_file(&f).map_err(|e| format!("{}: {e}", f.display()))
            }
            Place::Rbd { conf } => {
                let c = s(conf);
                run("rbd", &["-c", &c, "snap", "purge", &image(name)])?;
                run("rbd", &["-c", &c, "rm", "--no-progress", &image(name)]).map(drop)
            }
        }
    }

    /// What the table says the store is.
    pub fn describe(&self) -> String {
        match &self.place {
            Place::Xfs { img, .. } => format!(
                "file: on XFS (reflink=1) on a loop device over {}",
                img.display()
            ),
            Place::Rbd { conf } => format!("rbd: pool rbd of the cluster {}", conf.display()),
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Place::Xfs { mnt, img } = &self.place {
            if let Err(e) = run("umount", &[&s(mnt)]) {
                eprintln!("{e}; unmounting lazily");
                let _ = run("umount", &["-l", &s(mnt)]);
            }
            let _ = std::fs::remove_file(img);
        }
    }
}

fn image(name: &str) -> String {
    format!("rbd/snapshot-pause-{name}")
}

/// A sparse image of `bytes` in `dir`, formatted XFS with reflink and
/// mounted through a loop device on `dir/mnt`.
fn make_xfs(dir: &Path, bytes: u64) -> Result<Place, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root (a loop mount needs it)".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Err("no /dev/loop-control".into());
    }
    let mkfs = ["/usr/sbin/mkfs.xfs", "/sbin/mkfs.xfs"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or("mkfs.xfs is not installed (apt install xfsprogs)")?;
    let img = dir.join("xfs.img");
    let mnt = dir.join("mnt");
    // A mount left by an interrupted run.
    let _ = run("umount", &[&s(&mnt)]);
    let f = std::fs::File::create(&img).map_err(|e| format!("{}: {e}", img.display()))?;
    f.set_len(bytes)
        .map_err(|e| format!("{}: {e}", img.display()))?;
    run(mkfs, &["-q", "-f", "-m", "reflink=1", &s(&img)])?;
    std::fs::create_dir_all(&mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
    run("mount", &["-o", "loop", &s(&img), &s(&mnt)])?;
    Ok(Place::Xfs { mnt, img })
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Runs a command; its stdout, or an error naming it with its stderr.
pub fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {}: {} {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
