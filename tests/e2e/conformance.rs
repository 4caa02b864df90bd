//! libiscsi's conformance suite (iscsi-test-cu) against the daemon: the
//! families the core target must pass with no failures. Each run is read
//! as the full run reads it (tests/conformance_suite.rs): verbose output,
//! every test ran and passed, and every skip on
//! testdata/conformance/expected-skips.txt.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;
use crate::support::cu;

use support::{run, tool, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:e2e-cu";

fn run_families(lun_spec: &str) {
    let cu = tool("iscsi-test-cu", "libiscsi-bin");
    let expected = cu::expected_skips(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("testdata/conformance/expected-skips.txt"),
        )
        .unwrap(),
    )
    .unwrap();
    let t = Target::start(&["--name", NAME, "--lun", lun_spec]);
    let silent = cu::silent_skips(&cu::lu_facts(t.addr, NAME, 0));
    assert!(silent.is_empty(), "{lun_spec}: {silent:?}");
    let url = t.url(NAME, 0);
    let mut report = Vec::new();
    for fam in cu::REQUIRED_FAMILIES {
        let (_, out) = run(&cu, &["--dataloss", "-V", &format!("--test={fam}"), &url]);
        let (problems, clean) = cu::check_family(&expected, fam, &out);
        assert!(
            problems.is_empty(),
            "{fam} on {lun_spec}:\n{}\n{out}\ntarget log:\n{}",
            problems.join("\n"),
            t.log()
        );
        let r = cu::parse(&out);
        report.push(format!(
            "{fam}: {clean}/{} passed without skips",
            r.tests.len()
        ));
    }
    println!("{lun_spec}:\n  {}", report.join("\n  "));
}

#[test]
fn a_quick_family_check_fails_on_skips_failures_and_missing_tests() {
    let expected = cu::expected_skips("Read6.* | LUN is not removable | - | r\n").unwrap();
    let tail = "               tests      2      2      2      0        0\n";
    let ok = format!("Suite: Read6\n  Test: A ...passed\n  Test: B ...\n    [SKIPPED] LUN is not removable.\npassed\n{tail}");
    assert_eq!(cu::check_family(&expected, "f", &ok), (vec![], 1));
    // The old check read only the summary line: every one of these has
    // the same summary and passed it.
    for bad in [
        format!("Suite: Read6\n  Test: A ...passed\n  Test: B ...\n    [SKIPPING] something else\npassed\n{tail}"),
        format!("Suite: Read6\n  Test: A ...passed\n  Test: B ...\n    Skipping write\npassed\n{tail}"),
        format!("Suite: Read6\n  Test: A ...passed\n{tail}"),
        format!("Suite: Read6\n  Test: A ...passed\n  Test: B ...FAILED\n{tail}"),
    ] {
        assert!(!cu::check_family(&expected, "f", &bad).0.is_empty(), "{bad}");
    }
    assert!(!cu::check_family(&expected, "f", "no summary").0.is_empty());
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

/// With `,direct` on a disk file system (O_DIRECT; /tmp may be tmpfs):
/// the suite's 512-byte writes at odd offsets are read-modify-writes of
/// 4 KiB through O_DIRECT, with the LU alone (ironlun-backend's
/// `file/direct.rs`).
#[test]
fn required_families_pass_on_a_direct_file_lun() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    run_families(&format!(
        "file:{},size=128MiB,direct",
        dir.path().join("cu.img").display()
    ));
}
