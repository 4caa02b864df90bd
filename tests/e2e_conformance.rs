//! libiscsi's conformance suite (iscsi-test-cu) against the daemon: the
//! families the core target must pass with no failures.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use support::{run, tool, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:e2e-cu";

/// The families named by the core target issue.
const FAMILIES: &[&str] = &[
    "ALL.TestUnitReady",
    "ALL.Inquiry",
    "ALL.ReadCapacity10",
    "ALL.ReadCapacity16",
    "ALL.Read6",
    "ALL.Read10",
    "ALL.Read12",
    "ALL.Read16",
    "ALL.Write10",
    "ALL.Write12",
    "ALL.Write16",
    "ALL.ModeSense6",
    "ALL.iSCSIResiduals",
    // The rest of the iSCSI family: CmdSN window, DataSN, task management.
    "iSCSI",
];

/// (total, ran, passed, failed) from CUnit's "tests" summary line.
fn summary(out: &str) -> Option<(u32, u32, u32, u32)> {
    let line = out.lines().find(|l| l.trim_start().starts_with("tests "))?;
    let n: Vec<u32> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|w| w.parse().ok())
        .collect();
    Some((*n.first()?, *n.get(1)?, *n.get(2)?, *n.get(3)?))
}

fn run_families(lun_spec: &str) {
    let cu = tool("iscsi-test-cu", "libiscsi-bin");
    let t = Target::start(&["--name", NAME, "--lun", lun_spec]);
    let url = t.url(NAME, 0);
    let mut report = Vec::new();
    for fam in FAMILIES {
        let (_, out) = run(&cu, &["--dataloss", "-s", &format!("--test={fam}"), &url]);
        let (total, ran, passed, failed) =
            summary(&out).unwrap_or_else(|| panic!("{fam}: no CUnit summary in output:\n{out}"));
        report.push(format!("{fam}: {passed}/{total} passed"));
        assert!(total > 0, "{fam}: no tests ran:\n{out}");
        assert_eq!(
            (ran, failed),
            (total, 0),
            "{fam} on {lun_spec}:\n{out}\ntarget log:\n{}",
            t.log()
        );
    }
    println!("{lun_spec}:\n  {}", report.join("\n  "));
}

#[test]
fn required_families_pass_on_a_ram_lun() {
    run_families("ram:128MiB");
}

#[test]
fn required_families_pass_on_a_file_lun() {
    let dir = tempfile::tempdir().unwrap();
    run_families(&format!(
        "file:{},size=128MiB",
        dir.path().join("cu.img").display()
    ));
}
