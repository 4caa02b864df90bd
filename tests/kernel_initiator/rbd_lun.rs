//! Case 9, rbd: the Linux kernel initiator on an RBD LUN (`rbd:POOL/IMAGE`,
//! issue 25) of a real single-node Ceph that scripts/ceph-cluster starts:
//! discovery, login, mkfs.ext4, files with known SHA-256, sync, unmount,
//! e2fsck, remount and verify, raw read, logout (the `basic` guest
//! script). Afterwards the host checks the image itself, without iSCSI:
//! `rbd export` of the whole image must have the SHA-256 the guest read
//! through the LUN, `e2fsck -fn` must be clean on it, and every file the
//! guest wrote must read back from it (debugfs) with the guest's SHA-256.
//!
//! Where Ceph cannot be installed the case skips, saying why; under
//! CI=true or `--require-all` a skip fails the VM tier
//! (tests/kernel_initiator.rs, tests/support/skip.rs).

use std::time::Duration;

use ironlun_vm::cases;
use ironlun_vm::guest::WRITE_FILES;

use super::ceph::Ceph;
use super::support::Target;
use super::{boot_watching, host_checks_ext4, require_kv, require_pass, sha256_file, verdict};
use super::{Ctx, Verdict, IQN};

/// The image, as large as the file LUNs of the other ext4 cases.
const IMAGE: &str = "rbd/vm";
const SIZE: &str = "128M";

pub(super) fn case_rbd(ctx: &Ctx) -> Verdict {
    let dir = ctx.work.path().join("ceph");
    let Some(mut cluster) = Ceph::start(&dir) else {
        return Verdict::Skip(
            "Ceph is not installed and could not be installed (scripts/deps.sh install_ceph)"
                .to_owned(),
        );
    };
    cluster.rbd(&["create", "--size", SIZE, IMAGE]);
    let lun = format!("rbd:{IMAGE},conf={}", cluster.conf.display());
    let mut target = Target::start(&["--name", IQN, "--lun", &lun]);
    let o = boot_watching(ctx, &cases::BASIC, "rbd", target.addr.port(), &[], None);
    let guest = (|| {
        require_pass(&o)?;
        for k in ["discovery", "login", "logout"] {
            require_kv(&o, k, "ok")?;
        }
        require_kv(&o, "fsck", "clean")?;
        require_kv(&o, "verify", "ok")
    })();
    // The session ended; the target's exit flushes nothing the guest had
    // not already flushed, but it releases the image's exclusive lock.
    let _ = target.terminate(Duration::from_secs(10));
    let r = guest.and_then(|()| host_checks(ctx, &cluster, &o));
    // Stopped and its data removed; a failed stop fails the test binary.
    cluster.stop();
    verdict(r.map(|n| {
        format!(
            "{n} files verified in the guest and in the exported image, whole-image SHA-256 equal, e2fsck clean in both; boot to power-off {:.0} s ({})",
            o.elapsed.as_secs_f64(),
            o.accel.name()
        )
    }))
}

/// The host's look at the image, read from Ceph (not through iSCSI).
fn host_checks(ctx: &Ctx, cluster: &Ceph, o: &ironlun_vm::Outcome) -> Result<usize, String> {
    let copy = ctx.work.path().join("rbd-export.img");
    let _ = std::fs::remove_file(&copy);
    cluster.rbd(&["export", IMAGE, copy.to_str().unwrap_or_default()]);
    let host_sum = sha256_file(&copy);
    require_kv(o, "device_sha256", &host_sum)
        .map_err(|e| format!("whole-image checksum: {e} (rbd export on the host)"))?;
    host_checks_ext4(&copy, o, "0", WRITE_FILES)
}
