//! End to end with independent initiators: libiscsi's tools and qemu-img
//! against the real daemon on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::time::Duration;

use support::{ironlun_ok, qemu_round_trip, random_file, run, tool, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:e2e-tools";

#[test]
fn discovery_inquiry_and_capacity_for_ram_null_and_file_luns() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lun2.img");
    let file_spec = format!("file:{},size=48MiB", file.display());
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:64MiB",
        "--lun",
        "null:1GiB,bs=4096",
        "--lun",
        &file_spec,
    ]);

    let ls = tool("iscsi-ls", "libiscsi-bin");
    let (rc, out) = run(&ls, &["-s", &t.portal()]);
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains(&format!("Target:{NAME} Portal:{},1", t.addr)),
        "{out}"
    );
    for lun in 0..3 {
        assert!(
            out.contains(&format!("Lun:{lun} ")),
            "LUN {lun} missing: {out}"
        );
    }
    assert_eq!(out.matches("DIRECT_ACCESS").count(), 3, "{out}");

    let inq = tool("iscsi-inq", "libiscsi-bin");
    for (lun, kind) in [(0, "ram"), (1, "null"), (2, "file")] {
        let (rc, out) = run(&inq, &[&t.url(NAME, lun)]);
        assert_eq!(rc, 0, "{out}");
        assert!(
            out.contains("Peripheral Device Type:DIRECT_ACCESS"),
            "{out}"
        );
        assert!(out.contains("Vendor:IRONLUN"), "{out}");
        assert!(out.contains(&format!("Product:ironlun {kind}")), "{out}");
        assert!(out.contains("SPC-4") && out.contains("SBC-3"), "{out}");
        // Device identification page (0x83 = 131).
        let (rc, out) = run(&inq, &["-e", "1", "-c", "131", &t.url(NAME, lun)]);
        assert_eq!(rc, 0, "{out}");
        assert!(out.contains("Designator Type:(3) NAA"), "{out}");
        assert!(out.contains("Designator Type:(1) T10_VENDORT_ID"), "{out}");
        assert!(
            out.contains(&format!("Designator:[{NAME},t,0x0001]")),
            "{out}"
        );
        // Unit serial number (0x80 = 128).
        let (rc, out) = run(&inq, &["-e", "1", "-c", "128", &t.url(NAME, lun)]);
        assert_eq!(rc, 0, "{out}");
        assert!(out.contains("Unit Serial Number:["), "{out}");
    }

    let rc16 = tool("iscsi-readcapacity16", "libiscsi-bin");
    for (lun, blocks, bs) in [
        (0u16, 64u64 << 11, 512u64),
        (1, 1 << 18, 4096),
        (2, 48 << 11, 512),
    ] {
        let (rc, out) = run(&rc16, &[&t.url(NAME, lun)]);
        assert_eq!(rc, 0, "{out}");
        assert!(
            out.contains(&format!("RETURNED LOGICAL BLOCK ADDRESS:{}", blocks - 1)),
            "LUN {lun}: {out}"
        );
        assert!(
            out.contains(&format!("LOGICAL BLOCK LENGTH IN BYTES:{bs}")),
            "LUN {lun}: {out}"
        );
        assert!(
            out.contains(&format!("Total size:{}", blocks * bs)),
            "LUN {lun}: {out}"
        );
    }
}

/// A file LUN reports its file system's block as its physical block, so
/// that initiators align: READ CAPACITY(16)'s exponent (3 for 512-byte
/// blocks on a 4 KiB-block file system) and the Block Limits page's
/// optimal granularity; `pbs=512` overrides it; a RAM LUN has none.
#[test]
fn a_file_lun_reports_its_file_systems_block_as_physical() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lu.img");
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        &format!("file:{},size=16MiB", file.display()),
        "--lun",
        &format!(
            "file:{},size=16MiB,pbs=512",
            dir.path().join("b.img").display()
        ),
        "--lun",
        "ram:16MiB",
    ]);
    let fs_block = std::fs::metadata(&file).unwrap().blksize();
    assert!(
        fs_block.is_power_of_two() && fs_block <= 64 << 10,
        "{fs_block}"
    );
    let exponent = (fs_block / 512).trailing_zeros();
    if fs_block == 4096 {
        assert_eq!(exponent, 3);
    }
    let rc16 = tool("iscsi-readcapacity16", "libiscsi-bin");
    let inq = tool("iscsi-inq", "libiscsi-bin");
    for (lun, exponent) in [(0u16, exponent), (1, 0), (2, 0)] {
        let (rc, out) = run(&rc16, &[&t.url(NAME, lun)]);
        assert_eq!(rc, 0, "{out}");
        assert!(out.contains("LOGICAL BLOCK LENGTH IN BYTES:512"), "{out}");
        assert!(
            out.contains(&format!(
                "LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT:{exponent}\n"
            )),
            "LUN {lun} on a {fs_block}-byte-block file system: {out}"
        );
        // Block Limits (0xB0 = 176).
        let (rc, out) = run(&inq, &["-e", "1", "-c", "176", &t.url(NAME, lun)]);
        assert_eq!(rc, 0, "{out}");
        assert!(
            out.contains(&format!(
                "optimal transfer length granularity:{}\n",
                1 << exponent
            )),
            "LUN {lun}: {out}"
        );
    }
}

#[test]
fn qemu_img_writes_64mib_and_reads_it_back_on_ram_and_file_luns() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.img");
    let data = random_file(&src, 64 << 20);
    let lun_file = dir.path().join("disk.img");
    let file_spec = format!("file:{},size=80MiB", lun_file.display());
    let mut t = Target::start(&["--name", NAME, "--lun", "ram:80MiB", "--lun", &file_spec]);

    for lun in [0u16, 1] {
        qemu_round_trip(dir.path(), &src, &data, &t.url(NAME, lun));
    }

    // A clean shutdown leaves the data in the file.
    let code = t.terminate(Duration::from_secs(30));
    assert_eq!(code, Some(0), "exit status; log:\n{}", t.log());
    let on_disk = std::fs::read(&lun_file).unwrap();
    assert!(
        on_disk[..data.len()] == data[..],
        "file LUN content after shutdown"
    );
    assert!(t.log().contains("stopped"), "{}", t.log());
}

#[test]
fn ipv6_portal_and_crc32c_header_digests_with_libiscsi() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("t.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = [\"[::1]:0\"]\n[[target]]\nname = \"{NAME}\"\n[target.params]\nheader_digest = [\"CRC32C\"]\n[[target.lun]]\nspec = \"ram:32MiB\"\n"
        ),
    )
    .unwrap();
    let t = Target::start_with(&["--config", cfg.to_str().unwrap()], false);
    assert!(t.addr.is_ipv6());
    let (rc, out) = run(&tool("iscsi-ls", "libiscsi-bin"), &["-s", &t.portal()]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains(&format!("Portal:{},1", t.addr)), "{out}");
    // libiscsi offers HeaderDigest=None,CRC32C; this target accepts only
    // CRC32C, so every PDU after login carries a header digest.
    let src = dir.path().join("src.img");
    let data = random_file(&src, 8 << 20);
    qemu_round_trip(dir.path(), &src, &data, &t.url(NAME, 0));
    assert!(t.log().contains("HeaderDigest=CRC32C"), "{}", t.log());
}

/// `zero_copy_bytes=N` of each session's logout line, in order.
fn zero_copy_bytes_per_session(log: &str) -> Vec<u64> {
    log.lines()
        .filter(|l| l.contains("logout:"))
        .filter_map(|l| {
            let v = l.split("zero_copy_bytes=").nth(1)?;
            v.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
        })
        .collect()
}

/// A file LUN on tmpfs hands large reads to the socket as file ranges
/// (`sendfile`): real clients read back exactly the file, digests still
/// cover what is sent, and a file shrunk behind the target's back reads
/// as zeros past its end instead of breaking the PDU.
#[test]
fn tmpfs_file_lun_reads_go_from_the_page_cache_and_stay_exact() {
    let shm = std::path::Path::new("/dev/shm");
    let (rc, fs) = run("stat", &["-f", "-c", "%T", "/dev/shm"]);
    assert!(
        rc == 0 && fs.trim() == "tmpfs",
        "this test needs /dev/shm on tmpfs (Debian mounts it so): {fs}"
    );
    let dir = tempfile::tempdir_in(shm).unwrap();
    let lun_file = dir.path().join("lun.img");
    let data = random_file(&lun_file, 32 << 20);
    let spec = format!("file:{}", lun_file.display());
    let mut t = Target::start(&["--name", NAME, "--lun", &spec]);
    let url = t.url(NAME, 0);
    let back = dir.path().join("back.img");
    let back_s = back.to_str().unwrap();
    let read_back = |extra: &[&str]| {
        let mut args = vec!["dd", "--quiet", "--if", &url, "--of", back_s];
        args.extend_from_slice(extra);
        ironlun_ok(&args);
        std::fs::read(&back).unwrap()
    };

    // 1. Plain: 512 KiB reads in 8 KiB PDUs, each a slice of the range.
    assert!(read_back(&["--bs", "512KiB", "--max-recv-dsl", "8KiB"]) == data);
    // 2. Data digests: the range is read into memory first.
    let digests = [
        "--bs",
        "1MiB",
        "--header-digest",
        "CRC32C",
        "--data-digest",
        "CRC32C",
    ];
    assert!(read_back(&digests) == data);
    // 3. An independent client.
    let src = dir.path().join("src.img");
    std::fs::write(&src, &data).unwrap();
    qemu_round_trip(dir.path(), &src, &data, &url);
    // 4. The file loses its second half behind the target's back.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&lun_file)
        .unwrap();
    f.set_len(16 << 20).unwrap();
    let got = read_back(&["--bs", "1MiB"]);
    assert!(
        got[..16 << 20] == data[..16 << 20],
        "the part still in the file"
    );
    assert!(
        got[16 << 20..].iter().all(|&b| b == 0),
        "past the end: zeros"
    );

    assert!(
        t.wait_log("sending zeros", Duration::from_secs(5)),
        "{}",
        t.log()
    );
    let log = t.log();
    assert_eq!(
        log.matches("sending zeros").count(),
        1,
        "warned once:\n{log}"
    );
    let per_session = zero_copy_bytes_per_session(&log);
    assert!(per_session.len() >= 4, "{per_session:?}\n{log}");
    assert_eq!(per_session[0], 32 << 20, "plain dd: all of it in place");
    assert_eq!(per_session[1], 0, "with data digests nothing goes in place");
    assert!(
        per_session[per_session.len() - 1] >= 15 << 20,
        "{per_session:?}"
    );
    assert_eq!(t.terminate(Duration::from_secs(30)), Some(0));
}

/// The daemon's runtime can be one thread (IRONLUN_RUNTIME, kept to repeat
/// the runtime-model measurement): it serves and stops as the default
/// does, and an unknown model is a usage error.
#[test]
fn the_single_thread_runtime_serves_and_a_bad_runtime_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.img");
    let data = random_file(&src, 4 << 20);
    let mut t = Target::start_env(
        &["--name", NAME, "--lun", "ram:8MiB"],
        1,
        &[("IRONLUN_RUNTIME", "current-thread")],
    );
    let url = t.url(NAME, 0);
    let back = dir.path().join("back.img");
    ironlun_ok(&["dd", "--quiet", "--if", src.to_str().unwrap(), "--of", &url]);
    ironlun_ok(&[
        "dd",
        "--quiet",
        "--if",
        &url,
        "--of",
        back.to_str().unwrap(),
        "--count",
        "8",
    ]);
    assert!(std::fs::read(&back).unwrap() == data);
    assert_eq!(t.terminate(Duration::from_secs(30)), Some(0), "{}", t.log());

    let out = std::process::Command::new(support::ironlun_bin())
        .env("IRONLUN_RUNTIME", "fibers")
        .args([
            "target",
            "--listen",
            "127.0.0.1:0",
            "--name",
            NAME,
            "--lun",
            "ram:1MiB",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("IRONLUN_RUNTIME=fibers"), "{err}");
}
