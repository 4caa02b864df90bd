//! The two gateways as users would run them on the image: tgtd with its
//! rbd backing store, and `ironlun target` with an `rbd:` LUN, once
//! `ironlun target --check` says the binary has that kind.

use std::path::Path;
use std::process::Command;

use super::Cluster;
use crate::daemons::{self, Daemon};

pub const TGT_IQN: &str = "iqn.2026-11.io.ironlun.compare:tgt-rbd";
pub const IRONLUN_IQN: &str = "iqn.2026-11.io.ironlun.compare:rbd";

/// tgtd with one target whose LUN 1 is the image (its rbd store).
pub fn start_tgt(cluster: &Cluster, image: &str) -> Result<Daemon, String> {
    Daemon::start_tgt_with(
        daemons::free_loopback_addr()?,
        &[(TGT_IQN, vec![cluster.tgt_lun(image)])],
    )
}

/// Deletes tgt's LUN, which closes the image. tgtd does not exit on
/// SIGTERM, and a tgtd killed with the image open would leave its watch
/// on the image for the OSDs' watch timeout (30 s): `rbd rm` waited for
/// it.
pub fn close_tgt(tgt: &Daemon) -> Result<(), String> {
    tgt.tgtadm(&[
        "--op",
        "delete",
        "--mode",
        "logicalunit",
        "--tid",
        "1",
        "--lun",
        "1",
    ])
}

/// Why ironlun does not run: a binary without the `rbd:` kind (expected
/// until it lands; not a failure), or one that has it and failed.
pub struct Absent {
    pub reason: String,
    pub failed: bool,
}

/// The sentence a binary without the `rbd:` LUN kind gets in its column.
pub const NO_RBD_KIND: &str = "ironlun has no rbd: LUN kind yet";

/// Whether `ironlun target --check`'s complaint about an `rbd:` spec
/// means the binary has no such kind: it rejects the kind, or the
/// `conf=` option (options are parsed before the kind, and only `rbd:`
/// takes `conf=`).
pub fn lacks_rbd_kind(stderr: &str) -> bool {
    stderr.contains("unknown backend 'rbd'") || stderr.contains("unknown option 'conf=")
}

/// `ironlun target` serving the image as LUN 0, after `--check` says the
/// binary takes the spec at all.
pub fn start_ironlun(exe: &Path, cluster: &Cluster, image: &str) -> Result<Daemon, Absent> {
    let spec = cluster.ironlun_spec(image);
    let out = Command::new(exe)
        .args(["target", "--check", "--name", IRONLUN_IQN, "--lun", &spec])
        .output()
        .map_err(|e| Absent {
            reason: format!("cannot run {}: {e}", exe.display()),
            failed: true,
        })?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(if lacks_rbd_kind(&why) {
            Absent {
                reason: format!("{NO_RBD_KIND} (`--lun {spec}`: {why})"),
                failed: false,
            }
        } else {
            Absent {
                reason: format!("`--lun {spec}` rejected: {why}"),
                failed: true,
            }
        });
    }
    let addr = daemons::free_loopback_addr().map_err(|reason| Absent {
        reason,
        failed: true,
    })?;
    Daemon::start_ironlun_with(exe, addr, IRONLUN_IQN, &[spec], &[]).map_err(|reason| Absent {
        reason,
        failed: true,
    })
}
