//! The `block:` backend on a real block device: a loop device over a
//! file. Needs root for losetup (scripts/test runs as root in CI).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::time::Duration;

use support::{qemu_round_trip, random_file, run, target_refused, tool, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:e2e-block";

/// A loop device, detached on drop.
struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.0])
            .status();
    }
}

#[test]
fn block_backend_on_a_loop_device_with_direct_io() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test attaches a loop device and needs root (scripts/test runs as root)"
    );
    let losetup = tool("losetup", "mount");
    let rc16 = tool("iscsi-readcapacity16", "libiscsi-bin");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("backing.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let (rc, out) = run(&losetup, &["-f", "--show", img.to_str().unwrap()]);
    assert_eq!(rc, 0, "losetup: {out}");
    let dev = Loop(out.trim().to_owned());

    let spec = format!("block:{},direct", dev.0);
    let mut t = Target::start(&["--name", NAME, "--lun", &spec]);
    let url = t.url(NAME, 0);
    let (rc, out) = run(&rc16, &[&url]);
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains(&format!("Total size:{}", 32u64 << 20)),
        "{out}"
    );
    // The physical block reported is the device's (BLKPBSZGET), at least
    // the 4 KiB that direct requests are aligned to.
    let name = dev.0.trim_start_matches("/dev/");
    let pbs: u64 = std::fs::read_to_string(format!("/sys/block/{name}/queue/physical_block_size"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let exponent = (pbs.max(4096) / 512).trailing_zeros();
    assert!(
        out.contains(&format!(
            "LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT:{exponent}\n"
        )),
        "{dev:?} of {pbs}-byte physical blocks: {out}",
        dev = dev.0
    );

    let src = dir.path().join("src.img");
    let data = random_file(&src, 16 << 20);
    qemu_round_trip(dir.path(), &src, &data, &url);
    assert_eq!(t.terminate(Duration::from_secs(30)), Some(0), "{}", t.log());
    drop(dev);
    let on_disk = std::fs::read(&img).unwrap();
    assert!(on_disk[..data.len()] == data[..], "data reached the device");
}

/// A served block device carries the lock block device tools take
/// (flock(2), as systemd's "Locking Block Device Access" and util-linux
/// have it): `flock -n` and a second daemon are refused while it is
/// served, the second naming the device and the first daemon; after
/// the daemon ends, both succeed.
#[test]
fn a_served_block_device_is_locked() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(root, "this test attaches a loop device and needs root");
    let losetup = tool("losetup", "mount");
    let flock = tool("flock", "util-linux");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("backing.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let (rc, out) = run(&losetup, &["-f", "--show", img.to_str().unwrap()]);
    assert_eq!(rc, 0, "losetup: {out}");
    let dev = Loop(out.trim().to_owned());
    let spec = format!("block:{}", dev.0);
    let mut t = Target::start(&["--name", NAME, "--lun", &spec]);
    let (rc, out) = run(&flock, &["-n", &dev.0, "true"]);
    assert_ne!(rc, 0, "flock -n took a served device's lock: {out}");
    let (rc, out) = target_refused(&["--name", "iqn.2026-11.test:t", "--lun", &spec]);
    assert_ne!(rc, 0, "{out}");
    let held = format!(
        "{}: in use: process {} (ironlun) holds its lock",
        dev.0,
        t.child.id()
    );
    assert!(out.contains(&held), "{out}");
    assert_eq!(t.terminate(Duration::from_secs(30)), Some(0), "{}", t.log());
    let (rc, out) = run(&flock, &["-n", &dev.0, "true"]);
    assert_eq!(rc, 0, "{out}");
}
