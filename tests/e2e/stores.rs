//! A LUN's store is not changed behind the operator's back (issue 42,
//! "silent changes to data"), with the real binary: a file is served by
//! one daemon at a time (its flock), `size=` neither grows nor cuts an
//! existing file unasked, and a live shrink needs `--force` and is told
//! to the sessions as CAPACITY DATA HAS CHANGED.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::path::Path;
use std::time::Duration;

use support::{random_file, run, target_refused, Raw, Target};

const NAME: &str = "iqn.2026-11.test:t";
const TUR: [u8; 6] = [0; 6];
const READ_CAPACITY10: [u8; 10] = [0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const MIB: u64 = 1 << 20;

/// Logs in and clears the power-on unit attention.
fn session(t: &Target) -> Raw {
    let mut c = Raw::connect(t.addr);
    let (r, _) = c.login(NAME, [0x80, 0, 0, 0, 0, 1], &[]);
    assert_eq!(
        (r.status.class(), r.status.detail()),
        (0, 0),
        "login failed"
    );
    assert_eq!(c.scsi(&TUR, 0, &[]).0, 2, "the power-on unit attention");
    assert_eq!(c.scsi(&TUR, 0, &[]).0, 0);
    c
}

/// The last LBA READ CAPACITY(10) reports.
fn last_lba(c: &mut Raw) -> u32 {
    let (st, _, cap) = c.scsi(&READ_CAPACITY10, 8, &[]);
    assert_eq!(st, 0);
    u32::from_be_bytes(cap[..4].try_into().unwrap())
}

/// Status, then sense key, ASC and ASCQ, of a TEST UNIT READY.
fn tur(c: &mut Raw) -> (u8, u8, u8, u8) {
    let (st, sense, _) = c.scsi(&TUR, 0, &[]);
    match st {
        0 => (0, 0, 0, 0),
        _ => (st, sense[2] & 0x0f, sense[12], sense[13]),
    }
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

/// `ironlun admin --socket SOCK ARGS…`: its exit code and output.
fn admin(sock: &Path, args: &[&str]) -> (i32, String) {
    let mut all = vec!["admin", "--socket", sock.to_str().unwrap()];
    all.extend_from_slice(args);
    run(support::ironlun_bin(), &all)
}

/// The case: a second daemon on a file the first serves, asking
/// to grow it, is refused, naming the file and the first daemon's
/// process, and the file (size and bytes) stays as it was; so is one
/// asking nothing of it, and a read-only one. The first serves on, and
/// once it is gone the file can be served again.
#[test]
fn a_second_daemon_on_a_served_file_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let data = random_file(&img, 4 << 20);
    let spec = format!("file:{}", img.display());
    let mut first = Target::start(&["--name", NAME, "--lun", &spec]);
    let pid = first.child.id();
    let other = "iqn.2026-11.test:other";
    for second in [
        format!("{spec},size=16MiB,grow"),
        spec.clone(),
        format!("{spec},ro"),
    ] {
        let (rc, out) = target_refused(&["--name", other, "--lun", &second]);
        assert_ne!(rc, 0, "{out}");
        let held = format!(
            "{}: in use: process {pid} (ironlun) holds its lock",
            img.display()
        );
        assert!(out.contains(&held), "{second}: {out}");
    }
    assert_eq!(file_len(&img), 4 << 20);
    assert!(std::fs::read(&img).unwrap() == data, "the file was changed");
    let mut c = session(&first);
    assert_eq!(u64::from(last_lba(&mut c)), (4 << 20) / 512 - 1);
    let (st, _, block) = c.scsi(&[0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0], 512, &[]);
    assert_eq!((st, &block[..]), (0, &data[..512]));
    drop(c);
    assert_eq!(
        first.terminate(Duration::from_secs(30)),
        Some(0),
        "{}",
        first.log()
    );
    let again = Target::start(&["--name", other, "--lun", &spec]);
    drop(again);
}

/// `size=` other than an existing file's size is refused, saying what to
/// write instead, and the file is left as it was; `,grow` grows it.
#[test]
fn a_size_other_than_the_files_is_refused_without_grow() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let data = random_file(&img, MIB as usize);
    let spec = |opts: &str| format!("file:{}{opts}", img.display());
    let cases = [
        (
            ",size=2MiB",
            "smaller than size=2MiB: add ,grow to the spec",
        ),
        (
            ",size=512KiB",
            "larger than size=512KiB: a file is served whole",
        ),
        (
            ",size=512KiB,grow",
            "larger than size=512KiB: a file is served whole",
        ),
        (
            ",size=2MiB,ro",
            "not size=2MiB, and a read-only LUN does not change it",
        ),
    ];
    for (opts, why) in cases {
        let (rc, out) = target_refused(&["--name", NAME, "--lun", &spec(opts)]);
        assert_ne!(rc, 0, "{out}");
        let said = format!("{}: the file is 1MiB, {why}", img.display());
        assert!(out.contains(&said), "{opts}: {out}");
        assert_eq!(file_len(&img), MIB, "{opts}");
    }
    assert!(std::fs::read(&img).unwrap() == data, "the file was changed");
    let t = Target::start(&["--name", NAME, "--lun", &spec(",size=2MiB,grow")]);
    let mut c = session(&t);
    assert_eq!(u64::from(last_lba(&mut c)), 2 * MIB / 512 - 1);
    assert_eq!(file_len(&img), 2 * MIB);
    assert!(std::fs::read(&img).unwrap()[..MIB as usize] == data[..]);
}

/// A resize to less is refused while a session is logged in, and the
/// session sees nothing; with `--force` it is done, and the session is
/// told CAPACITY DATA HAS CHANGED (SBC-4 §4.6.3.2) and reads the new
/// capacity; a grow needs no `--force` and is told the same way.
#[test]
fn a_shrink_needs_force_and_the_session_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let sock = dir.path().join("admin.sock");
    let spec = format!("file:{},size=8MiB", img.display());
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        &spec,
        "--admin-socket",
        sock.to_str().unwrap(),
    ]);
    let mut c = session(&t);
    let (rc, out) = admin(&sock, &["lun", "resize", NAME, "0", "4MiB"]);
    assert_ne!(rc, 0, "{out}");
    assert!(
        out.contains(&format!("target {NAME} LUN 0: shrinking it from 8MiB to 4MiB discards its last 4MiB (1 session of the target is logged in): give --force to shrink it")),
        "{out}"
    );
    assert_eq!(file_len(&img), 8 * MIB);
    assert_eq!(tur(&mut c), (0, 0, 0, 0), "nothing changed, nothing told");
    assert_eq!(u64::from(last_lba(&mut c)), 8 * MIB / 512 - 1);

    let capacity_changed = (2, 0x06, 0x2a, 0x09);
    let (rc, out) = admin(&sock, &["--force", "lun", "resize", NAME, "0", "4MiB"]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("LUN 0: size 4194304"), "{out}");
    assert_eq!(file_len(&img), 4 * MIB);
    assert_eq!(tur(&mut c), capacity_changed);
    assert_eq!(u64::from(last_lba(&mut c)), 4 * MIB / 512 - 1);

    let (rc, out) = admin(&sock, &["lun", "resize", NAME, "0", "16MiB"]);
    assert_eq!(rc, 0, "{out}");
    assert_eq!(tur(&mut c), capacity_changed);
    assert_eq!(u64::from(last_lba(&mut c)), 16 * MIB / 512 - 1);
    assert_eq!(file_len(&img), 16 * MIB);
}
