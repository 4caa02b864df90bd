//! End to end with independent initiators: libiscsi's tools and qemu-img
//! against the real daemon on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::time::Duration;

use support::{run, tool, Target};

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

fn random_file(path: &std::path::Path, len: usize) -> Vec<u8> {
    // xorshift: deterministic, incompressible enough for a copy test.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let data: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, &data).unwrap();
    data
}

#[test]
fn qemu_img_writes_64mib_and_reads_it_back_on_ram_and_file_luns() {
    let qemu_img = tool("qemu-img", "qemu-utils");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.img");
    let data = random_file(&src, 64 << 20);
    let lun_file = dir.path().join("disk.img");
    let file_spec = format!("file:{},size=80MiB", lun_file.display());
    let mut t = Target::start(&["--name", NAME, "--lun", "ram:80MiB", "--lun", &file_spec]);

    for lun in [0u16, 1] {
        let url = t.url(NAME, lun);
        let (rc, out) = run(
            &qemu_img,
            &[
                "convert",
                "-n",
                "-f",
                "raw",
                "-O",
                "raw",
                src.to_str().unwrap(),
                &url,
            ],
        );
        assert_eq!(
            rc, 0,
            "qemu-img write to LUN {lun}: {out} (qemu-block-extra provides the iscsi driver)"
        );
        let back = dir.path().join(format!("back{lun}.img"));
        let (rc, out) = run(
            &qemu_img,
            &[
                "convert",
                "-f",
                "raw",
                "-O",
                "raw",
                &url,
                back.to_str().unwrap(),
            ],
        );
        assert_eq!(rc, 0, "qemu-img read from LUN {lun}: {out}");
        let got = std::fs::read(&back).unwrap();
        assert_eq!(got.len(), 80 << 20);
        assert!(
            got[..data.len()] == data[..],
            "LUN {lun}: data read back differs"
        );
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
    let qemu_img = tool("qemu-img", "qemu-utils");
    let src = dir.path().join("src.img");
    let data = random_file(&src, 8 << 20);
    let url = t.url(NAME, 0);
    let (rc, out) = run(
        &qemu_img,
        &[
            "convert",
            "-n",
            "-f",
            "raw",
            "-O",
            "raw",
            src.to_str().unwrap(),
            &url,
        ],
    );
    assert_eq!(rc, 0, "{out}");
    let back = dir.path().join("back.img");
    let (rc, out) = run(
        &qemu_img,
        &[
            "convert",
            "-f",
            "raw",
            "-O",
            "raw",
            &url,
            back.to_str().unwrap(),
        ],
    );
    assert_eq!(rc, 0, "{out}");
    assert!(std::fs::read(&back).unwrap()[..data.len()] == data[..]);
    assert!(t.log().contains("HeaderDigest=CRC32C"), "{}", t.log());
}
