//! istgt (Debian `istgt`, installed by scripts/deps.sh), the second peer
//! target of `ironlun compare-peers`, started by the comparison's own code
//! (ironlun-compare's `Daemon::start_istgt`: its configuration file,
//! `istgt -D`) and read with ironlun's initiator tools on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use ironlun_compare::daemons::Daemon;
use ironlun_compare::workloads::LunKind;
use support::{free_port, ironlun_ok as ok, random_file, tool};

#[test]
fn istgt_serves_the_comparisons_file_lun_to_ironlun_tools() {
    tool("istgt", "istgt");
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let img = dir.path().join("istgt.img");
    let data = random_file(&img, 8 << 20);
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let istgt = Daemon::start_istgt(addr, &img, dir.path()).unwrap();
    assert!(istgt.serves(LunKind::File));
    assert!(!istgt.serves(LunKind::Null), "istgt has no null LUN");
    let url = istgt.url(LunKind::File);
    assert_eq!(
        url,
        format!("iscsi://{addr}/iqn.2026-11.io.ironlun.compare:istgt-file/0")
    );

    let out = ok(&["inquiry", &url]);
    assert!(out.contains("Vendor:                 FreeBSD"), "{out}");
    let out = ok(&["readcap", &url]);
    assert!(out.contains("Capacity:            8388608 bytes"), "{out}");

    // A short read of the first MiB, compared with the file.
    let back = dir.path().join("back.bin");
    ok(&[
        "dd",
        "--if",
        &url,
        "--of",
        back.to_str().unwrap(),
        "--bs",
        "4k",
        "--count",
        "256",
        "--qd",
        "8",
        "--quiet",
    ]);
    let got = std::fs::read(&back).unwrap();
    assert!(
        got == data[..1 << 20],
        "istgt returned other data than its file holds"
    );

    // Stopped on drop, its configuration directory removed.
    let conf = ironlun_compare::istgt::conf_dir(dir.path(), addr);
    assert!(conf.join("istgt.conf").exists());
    let pid = istgt.pid();
    drop(istgt);
    assert!(!conf.exists(), "{} left behind", conf.display());
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}
