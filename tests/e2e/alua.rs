//! ALUA (SPC-5 §5.16, issue 37 item 1) with real clients: two gateways
//! of one target (two daemons on loopback with the same name and
//! `[target.alua]` groups, portal group tags 1 and 2, each its own local
//! group) over RAM LUNs. Raw PDUs check INQUIRY's TPGS, VPD 83h (decoded
//! again by sg3-utils' `sg_vpd`, which reads a page from a file as well
//! as from a device), REPORT TARGET PORT GROUPS in both formats through
//! each gateway, what a standby gateway answers, `ironlun admin alua set`
//! raising ASYMMETRIC ACCESS STATE CHANGED on a live session, and SET
//! TARGET PORT GROUPS from an initiator; libiscsi's `iscsi-inq` shows the
//! designators, and its test suite's required families, INQUIRY and
//! REPORT SUPPORTED OPERATION CODES pass on an active/optimized LU with
//! ALUA on. (libiscsi has no ALUA tests of its own:
//! `iscsi-test-cu --list` names none.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;
use crate::support::cu;

use std::path::Path;

use ironlun_scsi_codes::SenseCode;
use support::alua::{self, Gateway};
use support::{run, tool, Raw, Target};

const NAME: &str = "iqn.2026-11.test:ha";
const TUR: [u8; 6] = [0; 6];
const READ10: [u8; 10] = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];

/// NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE.
const STANDBY: (u8, u8, u8) = (2, 0x04, 0x0b);
/// UNIT ATTENTION, ASYMMETRIC ACCESS STATE CHANGED.
const CHANGED: (u8, u8, u8) = (6, 0x2a, 0x06);

/// Gateway `tag` of the two-gateway group: group 1 active/optimized and
/// preferred, group 2 standby, in `mode`.
fn gateway(dir: &Path, tag: u16, mode: &str) -> Gateway {
    alua::gateway(
        dir,
        NAME,
        tag,
        mode,
        ["active/optimized", "standby"],
        "ram:16MiB",
    )
}

/// A logged-in session whose power-on unit attention is taken.
fn session(t: &Target, isid_tail: u8) -> Raw {
    let mut c = Raw::connect(t.addr);
    let (r, _) = c.login(NAME, [0x80, 0, 0, 0, 0, isid_tail], &[]);
    assert_eq!(
        (r.status.class(), r.status.detail()),
        (0, 0),
        "login failed"
    );
    let (st, sense, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!((st, key(&sense).0), (2, 6), "the power-on unit attention");
    c
}

/// Sense key, ASC, ASCQ.
fn key(sense: &[u8]) -> (u8, u8, u8) {
    let c = SenseCode::parse(sense).expect("sense data");
    (c.key.0, c.asc, c.ascq)
}

/// Runs a command expected to end in CHECK CONDITION; its sense.
fn refused(c: &mut Raw, cdb: &[u8]) -> (u8, u8, u8) {
    let (st, sense, _) = c.scsi(cdb, 512, &[]);
    assert_eq!(st, 2, "CHECK CONDITION expected for {cdb:02x?}");
    key(&sense)
}

fn good(c: &mut Raw, cdb: &[u8], read: u32, write: &[u8]) -> Vec<u8> {
    let (st, sense, data) = c.scsi(cdb, read, write);
    assert_eq!(st, 0, "{cdb:02x?}: sense {sense:02x?}");
    data
}

fn rtpg(extended: bool) -> [u8; 12] {
    let format = if extended { 0x20 } else { 0 };
    [0xa3, format | 0x0a, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0]
}

/// The group descriptors' (state, PREF, group, status code, ports).
fn groups(data: &[u8], from: usize) -> Vec<(u8, bool, u16, u8, Vec<u16>)> {
    let len = u32::from_be_bytes(data[..4].try_into().unwrap()) as usize;
    assert_eq!(
        len + 4,
        data.len(),
        "RETURN DATA LENGTH counts what follows it"
    );
    let mut out = Vec::new();
    let mut d = &data[from..];
    while !d.is_empty() {
        let ports = usize::from(d[7]);
        let list = (0..ports)
            .map(|i| u16::from_be_bytes([d[8 + 4 * i + 2], d[8 + 4 * i + 3]]))
            .collect();
        out.push((
            d[0] & 0x0f,
            d[0] & 0x80 != 0,
            u16::from_be_bytes([d[2], d[3]]),
            d[5],
            list,
        ));
        assert_eq!(d[1], 0x8f, "supported: T, U, S, AN, AO");
        d = &d[8 + 4 * ports..];
    }
    out
}

/// VPD 83h as sg3-utils decodes it.
fn sg_vpd_83(dir: &Path, c: &mut Raw) -> String {
    let page = good(c, &[0x12, 1, 0x83, 1, 0, 0], 256, &[]);
    let file = dir.join("vpd83.bin");
    std::fs::write(&file, &page).unwrap();
    let sg_vpd = tool("sg_vpd", "sg3-utils");
    let inhex = format!("--inhex={}", file.display());
    let (rc, out) = run(&sg_vpd, &["--raw", &inhex, "--page=di"]);
    assert_eq!(rc, 0, "sg_vpd: {out}");
    out
}

fn admin(sock: &Path, args: &[&str]) -> String {
    let mut all = vec!["admin", "--socket", sock.to_str().unwrap()];
    all.extend_from_slice(args);
    let (rc, out) = run(support::ironlun_bin(), &all);
    assert_eq!(rc, 0, "ironlun {all:?}: {out}");
    out
}

/// Both gateways report the same layout and each its own group and
/// port; the standby one serves INQUIRY, REPORT TPG, READ CAPACITY and
/// refuses the medium with TARGET PORT IN STANDBY STATE.
#[test]
fn two_gateways_report_one_layout_and_each_its_own_port() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        gateway(dir.path(), 1, "implicit"),
        gateway(dir.path(), 2, "implicit"),
    );
    let mut ca = session(&a.t, 1);
    let mut cb = session(&b.t, 1);
    let std_inq = good(&mut ca, &[0x12, 0, 0, 0, 96, 0], 96, &[]);
    assert_eq!((std_inq[5] >> 4) & 3, 0b01, "TPGS: implicit");
    for (c, tag) in [(&mut ca, 1u16), (&mut cb, 2)] {
        let vpd = sg_vpd_83(dir.path(), c);
        assert!(
            vpd.contains(&format!("Relative target port: 0x{tag}")),
            "{vpd}"
        );
        assert!(
            vpd.contains(&format!("Target port group: 0x{tag}")),
            "{vpd}"
        );
        assert!(vpd.contains(&format!("{NAME},t,0x000{tag}")), "{vpd}");
        // The same groups through either port, in both formats.
        let want = vec![(0x0, true, 1, 0, vec![1]), (0x2, false, 2, 0, vec![2])];
        let plain = good(c, &rtpg(false), 1024, &[]);
        assert_eq!(groups(&plain, 4), want);
        let ext = good(c, &rtpg(true), 1024, &[]);
        assert_eq!(&ext[4..6], &[0x10, 10], "format 001b, 10 s");
        assert_eq!(groups(&ext, 8), want);
    }
    // Gateway 2 is in standby.
    good(&mut cb, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], 8, &[]);
    assert_eq!(refused(&mut cb, &TUR), STANDBY);
    assert_eq!(refused(&mut cb, &READ10), STANDBY);
    good(&mut ca, &READ10, 512, &[]);
    // libiscsi sees the designators too (through the active gateway:
    // libiscsi's connect fails when the TEST UNIT READY it sends after
    // login is answered NOT READY, as a standby port must answer it).
    let inq = tool("iscsi-inq", "libiscsi-bin");
    let (rc, out) = run(&inq, &["-e", "1", "-c", "131", &a.t.url(NAME, 0)]);
    assert_eq!(rc, 0, "{out}");
    assert!(
        out.contains("Designator Type:(5) TARGET_PORT_GROUP"),
        "{out}"
    );
    assert!(
        out.contains("Designator Type:(4) RELATIVE_TARGET_PORT"),
        "{out}"
    );
}

/// `ironlun admin alua set` on a live gateway: its sessions are told
/// ASYMMETRIC ACCESS STATE CHANGED, then get the new state's answers;
/// REPORT TPG shows the change as implicit; `admin state` shows it.
#[test]
fn a_state_set_by_the_operator_reaches_live_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let a = gateway(dir.path(), 1, "implicit");
    let mut c = session(&a.t, 1);
    good(&mut c, &READ10, 512, &[]);
    let out = admin(&a.sock, &["alua", "set", NAME, "1", "standby"]);
    assert!(
        out.contains(&format!(
            "~ target {NAME}: ALUA group 1 active/optimized -> standby"
        )),
        "{out}"
    );
    assert_eq!(refused(&mut c, &READ10), CHANGED);
    assert_eq!(refused(&mut c, &READ10), STANDBY);
    let d = good(&mut c, &rtpg(false), 1024, &[]);
    assert_eq!(groups(&d, 4)[0].0, 0x2);
    assert_eq!(groups(&d, 4)[0].3, 2, "altered by implicit behaviour");
    let state = admin(&a.sock, &["state"]);
    assert!(
        state.contains("ALUA implicit: local group 1 standby; groups: 1* standby ports [1], 2 standby ports [2]"),
        "{state}"
    );
    // Back, through the configuration's own words; a mistyped state is
    // a usage error.
    admin(&a.sock, &["alua", "set", NAME, "1", "active/optimized"]);
    assert_eq!(refused(&mut c, &READ10), CHANGED);
    good(&mut c, &READ10, 512, &[]);
    let (rc, out) = run(
        support::ironlun_bin(),
        &[
            "admin",
            "--socket",
            a.sock.to_str().unwrap(),
            "alua",
            "set",
            NAME,
            "1",
            "optimized",
        ],
    );
    assert_eq!(rc, 2, "{out}");
    let (rc, out) = run(
        support::ironlun_bin(),
        &[
            "admin",
            "--socket",
            a.sock.to_str().unwrap(),
            "alua",
            "set",
            NAME,
            "9",
            "standby",
        ],
    );
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("has no ALUA group 9"), "{out}");
}

/// Explicit ALUA: an initiator's SET TARGET PORT GROUPS makes the standby
/// gateway active/optimized on it; its other sessions are told, the
/// sender is not, and the log says what was set.
#[test]
fn set_target_port_groups_from_an_initiator() {
    let dir = tempfile::tempdir().unwrap();
    let b = gateway(dir.path(), 2, "both");
    let mut sender = session(&b.t, 1);
    let mut other = session(&b.t, 2);
    let std_inq = good(&mut sender, &[0x12, 0, 0, 0, 96, 0], 96, &[]);
    assert_eq!((std_inq[5] >> 4) & 3, 0b11, "TPGS: both");
    assert_eq!(refused(&mut sender, &READ10), STANDBY);
    // Group 2 active/optimized, group 1 standby.
    let list = [0, 0, 0, 0, 0x0, 0, 0, 2, 0x2, 0, 0, 1];
    let stpg = [0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0];
    good(&mut sender, &stpg, 0, &list);
    good(&mut sender, &READ10, 512, &[]);
    assert_eq!(refused(&mut other, &READ10), CHANGED);
    good(&mut other, &READ10, 512, &[]);
    let d = good(&mut other, &rtpg(false), 1024, &[]);
    let g = groups(&d, 4);
    assert_eq!((g[0].0, g[0].3), (0x2, 1), "group 1: standby, by SET");
    assert_eq!(
        (g[1].0, g[1].3),
        (0x0, 1),
        "group 2: active/optimized, by SET"
    );
    assert!(
        b.t.wait_log(
            "SET TARGET PORT GROUPS: ALUA group 2 standby -> active/optimized",
            std::time::Duration::from_secs(5)
        ),
        "{}",
        b.t.log()
    );
    // Transitioning cannot be asked for; nothing changes.
    let bad = [0, 0, 0, 0, 0xf, 0, 0, 2];
    let (st, sense, _) = sender.scsi(&[0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0], 0, &bad);
    assert_eq!((st, key(&sense)), (2, (5, 0x26, 0)));
    good(&mut sender, &READ10, 512, &[]);
}

/// libiscsi's required families, INQUIRY and REPORT SUPPORTED OPERATION
/// CODES on an active/optimized LU with explicit and implicit ALUA (REPORT
/// and SET TARGET PORT GROUPS listed among its commands): no failures,
/// only the expected skips.
#[test]
fn libiscsi_families_pass_with_alua_on() {
    let dir = tempfile::tempdir().unwrap();
    let a = gateway(dir.path(), 1, "both");
    let cu_bin = tool("iscsi-test-cu", "libiscsi-bin");
    let expected = cu::expected_skips(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/conformance/expected-skips.txt"),
        )
        .unwrap(),
    )
    .unwrap();
    let url = a.t.url(NAME, 0);
    for fam in cu::REQUIRED_FAMILIES
        .iter()
        .chain(&["ALL.ReportSupportedOpcodes"])
    {
        let (_, out) = run(
            &cu_bin,
            &["--dataloss", "-V", &format!("--test={fam}"), &url],
        );
        let (problems, clean) = cu::check_family(&expected, fam, &out);
        assert!(
            problems.is_empty(),
            "{fam}:\n{}\n{out}\ntarget log:\n{}",
            problems.join("\n"),
            a.t.log()
        );
        eprintln!("  {fam}: {clean} passed without skips");
    }
}
