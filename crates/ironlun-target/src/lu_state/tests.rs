//! State files that do not parse take their LU offline and are kept
//! aside; a person brings it back; files of the former names are renamed
//! unless two targets could own them.

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use ironlun_scsi::reservations::{ItNexus, Registration};

use super::*;
use crate::registry::Target;
use crate::server::build_targets;

const T: &str = "iqn.2026-11.test:t";

/// `targets` (each with two RAM LUNs) with their state in `dir`.
fn config(dir: &Path, targets: &[&str]) -> Config {
    let mut text = format!("state_dir = \"{}\"\n", dir.display());
    for t in targets {
        text.push_str(&format!(
            "[[target]]\nname = \"{t}\"\n[[target.lun]]\nspec = \"ram:1MiB\"\n[[target.lun]]\nspec = \"ram:1MiB\"\n"
        ));
    }
    Config::from_toml(&text, None).unwrap()
}

fn build(cfg: &Config) -> Vec<Arc<Target>> {
    build_targets(cfg).unwrap()
}

fn lu(targets: &[Arc<Target>], t: usize, lun: u16) -> Arc<LogicalUnit> {
    targets[t].luns.get(lun).unwrap().clone()
}

fn saved(name: &str, key: u64) -> PrState {
    PrState {
        generation: 0,
        registrations: vec![Registration {
            nexus: ItNexus::new(name, [0x80, 0, 0, 0, 0, 1], 1),
            key,
            all_tg_pt: false,
        }],
        reservation: None,
        aptpl: true,
    }
}

fn file(dir: &Path, kind: &str, target: &str, lun: u16) -> std::path::PathBuf {
    dir.join(state_name::file_name(kind, target, lun))
}

/// The files of `dir` whose names start with `prefix`.
fn named(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

#[test]
fn a_file_that_does_not_parse_takes_its_lu_offline_and_is_kept_aside() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pr1 = file(d, "pr", T, 1);
    let junk = "ironlun-pr 2\ngeneration 1\nreserve 3 1 x\nend\n";
    fs::write(&pr1, junk).unwrap();
    fs::write(file(d, "pr", T, 0), saved("iqn.2026-11.test:i", 5).encode()).unwrap();
    let cfg = config(d, &[T]);
    let targets = build(&cfg);
    assert_eq!(lu(&targets, 0, 0).offline_reason(), None);
    assert_eq!(
        lu(&targets, 0, 0).pr_state(),
        saved("iqn.2026-11.test:i", 5)
    );
    let why = lu(&targets, 0, 1)
        .offline_reason()
        .expect("LUN 1 is offline");
    assert!(
        why.contains(&pr1.display().to_string()) && why.contains("does not parse"),
        "{why}"
    );
    assert!(why.contains("line 3"), "{why}");
    // Kept aside as it was; a marker where it was.
    let name = pr1.file_name().unwrap().to_string_lossy().into_owned();
    let aside = named(d, &format!("{name}.corrupt-"));
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(why.contains(&aside[0]), "{why}");
    assert_eq!(fs::read_to_string(d.join(&aside[0])).unwrap(), junk);
    assert_eq!(
        held(&fs::read_to_string(&pr1).unwrap()),
        Some(aside[0].clone())
    );

    // A restart: still offline, for the marker; nothing more kept aside.
    let targets = build(&cfg);
    let why = lu(&targets, 0, 1).offline_reason().expect("still offline");
    assert!(why.contains("marker") && why.contains(&aside[0]), "{why}");
    assert_eq!(named(d, &format!("{name}.corrupt-")), aside);

    // Bringing it back changes nothing while the marker is there...
    let l = lu(&targets, 0, 1);
    let sd = state_dir(&cfg).unwrap();
    assert!(bring_back(&l, sd, T, 1).is_err());
    // ...and serves what a person put in its place.
    fs::write(&pr1, saved("iqn.2026-11.test:j", 9).encode()).unwrap();
    assert_eq!(bring_back(&l, sd, T, 1), Ok(()));
    assert_eq!(l.offline_reason(), None);
    assert_eq!(l.pr_state(), saved("iqn.2026-11.test:j", 9));
    assert_eq!(
        fs::read_to_string(d.join(&aside[0])).unwrap(),
        junk,
        "never touched"
    );
}

#[test]
fn without_the_marker_the_lu_comes_back_without_that_state() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let san0 = file(d, "sanitize", T, 0);
    fs::write(&san0, "ironlun-sanitize 2\nlu zz\n").unwrap();
    let cfg = config(d, &[T]);
    let targets = build(&cfg);
    let l = lu(&targets, 0, 0);
    let why = l.offline_reason().expect("offline");
    assert!(
        why.contains("sanitize state file") && why.contains("kept aside"),
        "{why}"
    );
    assert_eq!(lu(&targets, 0, 1).offline_reason(), None);
    fs::remove_file(&san0).unwrap();
    assert_eq!(bring_back(&l, state_dir(&cfg).unwrap(), T, 0), Ok(()));
    assert_eq!(l.offline_reason(), None);
    assert_eq!(l.pr_state(), PrState::default());
}

/// A FIFO or a link where a state file belongs takes its LU offline and
/// is left for a person; the start goes on (a FIFO opened the plain way
/// waits for a writer for ever). The thread is only the guard that turns
/// such a hang into a failure.
#[test]
fn a_fifo_or_a_link_in_place_of_a_state_file_does_not_hold_up_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_owned();
    let fifo = file(&d, "sanitize", T, 0);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    fs::write(d.join("elsewhere"), saved("iqn.2026-11.test:i", 5).encode()).unwrap();
    std::os::unix::fs::symlink(d.join("elsewhere"), file(&d, "pr", T, 1)).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let dd = d.clone();
    std::thread::spawn(move || {
        let targets = build(&config(&dd, &[T]));
        let why = |lun| lu(&targets, 0, lun).offline_reason();
        let _ = tx.send((why(0), why(1)));
    });
    let (zero, one) = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the start waited on the FIFO");
    let zero = zero.expect("LUN 0 offline");
    assert!(zero.contains("a FIFO"), "{zero}");
    let one = one.expect("LUN 1 offline");
    assert!(one.contains("a symbolic link"), "{one}");
    // Left as they were, for a person.
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(fs::symlink_metadata(file(&d, "pr", T, 1))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn unreadable_and_oversized_files_take_the_lu_offline_too() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(file(d, "pr", T, 0), vec![b'x'; MAX_PR_BYTES + 1]).unwrap();
    fs::write(file(d, "pr", T, 1), [0xff, 0xfe, b'\n']).unwrap();
    let targets = build(&config(d, &[T]));
    for lun in [0, 1] {
        let why = lu(&targets, 0, lun).offline_reason().expect("offline");
        assert!(why.contains("kept aside"), "{why}");
    }
    assert!(lu(&targets, 0, 0)
        .offline_reason()
        .unwrap()
        .contains("longer than"));
    assert!(lu(&targets, 0, 1)
        .offline_reason()
        .unwrap()
        .contains("UTF-8"));
}

#[test]
fn a_file_of_the_former_name_is_renamed_for_its_one_target() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = d.join(state_name::legacy_file_name("pr", T, 0));
    let v1 = "ironlun-pr 1\ngeneration 2\nregister 0000000000000005 0 1 iqn.2026-11.test:i,i,0x800000000001\n";
    fs::write(&old, v1).unwrap();
    let targets = build(&config(d, &[T, "iqn.2026-11.test:other"]));
    assert_eq!(lu(&targets, 0, 0).offline_reason(), None);
    assert_eq!(
        lu(&targets, 0, 0).pr_state(),
        saved("iqn.2026-11.test:i", 5)
    );
    assert!(!old.exists());
    assert_eq!(fs::read_to_string(file(d, "pr", T, 0)).unwrap(), v1);
}

/// The former names kept the case of the name as configured; names are
/// lower-cased now, so the file is found ignoring case: APTPL
/// reservations (and an interrupted sanitize) survive the upgrade.
#[test]
fn a_file_of_the_former_name_is_found_whatever_its_case() {
    let configured = "iqn.2026-11.Example:Disk1";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = d.join(state_name::legacy_file_name("pr", configured, 0));
    assert!(old.to_string_lossy().contains("Example_Disk1"), "{old:?}");
    let v1 = "ironlun-pr 1\ngeneration 2\nregister 0000000000000005 0 1 iqn.2026-11.test:i,i,0x800000000001\n";
    fs::write(&old, v1).unwrap();
    let cfg = config(d, &[configured]);
    assert_eq!(cfg.targets[0].name, configured.to_ascii_lowercase());
    let targets = build(&cfg);
    assert_eq!(lu(&targets, 0, 0).offline_reason(), None);
    assert_eq!(
        lu(&targets, 0, 0).pr_state(),
        saved("iqn.2026-11.test:i", 5)
    );
    assert!(!old.exists());
    let new = file(d, "pr", &cfg.targets[0].name, 0);
    assert_eq!(fs::read_to_string(new).unwrap(), v1);
}

/// Two files of the former name that differ only in case: which one is
/// the LU's is for a person to say; the LU waits offline.
#[test]
fn former_names_differing_in_case_are_for_a_person() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = saved("iqn.2026-11.test:i", 5).encode();
    for name in ["iqn.2026-11.Example:Disk1", "iqn.2026-11.example:DISK1"] {
        fs::write(d.join(state_name::legacy_file_name("pr", name, 0)), &text).unwrap();
    }
    let targets = build(&config(d, &["iqn.2026-11.example:disk1"]));
    let why = lu(&targets, 0, 0).offline_reason().expect("offline");
    assert!(why.contains("differ in case"), "{why}");
    assert_eq!(lu(&targets, 0, 1).offline_reason(), None);
    assert_eq!(named(d, "pr-").len(), 2, "both left as they are");
}

/// Names that shared one file before: neither takes it; both LUs wait for
/// a person, who renames it for the one it belongs to.
#[test]
fn a_file_two_targets_shared_is_theirs_to_sort_out() {
    let (a, b) = (
        "iqn.2026-11.test:disk-\u{e9}",
        "iqn.2026-11.test:disk-\u{fc}",
    );
    assert_eq!(state_name::legacy_stem(a), state_name::legacy_stem(b));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = d.join(state_name::legacy_file_name("pr", a, 0));
    fs::write(&old, saved("iqn.2026-11.test:i", 5).encode()).unwrap();
    let cfg = config(d, &[a, b]);
    let targets = build(&cfg);
    for t in [0, 1] {
        let why = lu(&targets, t, 0).offline_reason().expect("offline");
        assert!(why.contains("a person decides whose it is"), "{why}");
        assert_eq!(lu(&targets, t, 1).offline_reason(), None);
    }
    assert!(old.exists(), "left as it is");
    fs::rename(&old, file(d, "pr", b, 0)).unwrap();
    let sd = state_dir(&cfg).unwrap();
    assert_eq!(bring_back(&lu(&targets, 0, 0), sd, a, 0), Ok(()));
    assert_eq!(bring_back(&lu(&targets, 1, 0), sd, b, 0), Ok(()));
    assert_eq!(lu(&targets, 0, 0).pr_state(), PrState::default());
    assert_eq!(
        lu(&targets, 1, 0).pr_state(),
        saved("iqn.2026-11.test:i", 5)
    );
}

#[test]
fn markers_name_a_file_of_the_directory_only() {
    assert_eq!(
        held(&marker("pr-x.txt.corrupt-1")),
        Some("pr-x.txt.corrupt-1".into())
    );
    assert_eq!(held(&marker("a b%")), Some("a b%".into()));
    for bad in [
        "ironlun-held 1\naside ../etc/passwd\n".to_owned(),
        "ironlun-held 1\naside \n".into(),
        "ironlun-held 1\naside ..\n".into(),
        "ironlun-held 1\naside x".into(),
        "ironlun-held 1\naside x\n\n".into(),
        "ironlun-held 1\n".into(),
    ] {
        assert_eq!(held(&bad), None, "{bad:?}");
    }
}

/// Two callers bringing one LU back (SIGHUP's thread and `lun online`):
/// while one holds it, the other changes nothing and is told so; the
/// sanitize record it would have taken up a second time (entering
/// failure mode over the resumed operation, and saving that) is left to
/// the first, which resumes it before the LU serves.
#[test]
fn a_second_caller_does_not_take_the_state_up_twice() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = format!(
        "state_dir = \"{}\"\n[[target]]\nname = \"{T}\"\n[[target.lun]]\nspec = \"ram:1MiB,sanitize,sanitize_rate=64KiB\"\n",
        d.display()
    );
    let cfg = Config::from_toml(&text, None).unwrap();
    let pr0 = file(d, "pr", T, 0);
    fs::write(&pr0, "ironlun-pr 2\ngeneration x\n").unwrap();
    let targets = build(&cfg);
    let l = lu(&targets, 0, 0);
    assert!(l.offline_reason().is_some());
    // A person repairs the state: no reservations, and an overwrite that
    // was under way when the target stopped.
    fs::remove_file(&pr0).unwrap();
    let running = format!(
        "ironlun-sanitize 2\nlu {:016x} 512 2048\nstate running\nmethod overwrite 1 0\npattern a5\ndone 0\nend\n",
        l.config().naa_id
    );
    let san0 = file(d, "sanitize", T, 0);
    fs::write(&san0, &running).unwrap();
    let sd = state_dir(&cfg).unwrap();
    let first = l.claim_offline().expect("the first caller");
    assert_eq!(bring_back(&l, sd, T, 0), Err(BEING_BROUGHT_BACK.into()));
    assert!(l.offline_reason().is_some());
    assert_eq!(
        fs::read_to_string(&san0).unwrap(),
        running,
        "taken up twice"
    );
    drop(first);
    assert_eq!(bring_back(&l, sd, T, 0), Ok(()));
    assert_eq!(l.offline_reason(), None);
    assert_eq!(bring_back(&l, sd, T, 0), Ok(()), "online: nothing to do");
    let now = fs::read_to_string(&san0).unwrap_or_default();
    assert!(!now.contains("state failed"), "{now}");
    l.stop_sanitize();
}

/// A file of version 1 (names written raw) is taken up, and what it holds
/// goes to the log at warn, record by record, for a person to review.
#[test]
fn a_file_of_version_1_is_logged_for_review() {
    crate::test_log::capture();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let v1 = "ironlun-pr 1\ngeneration 2\nregister 0000000000000007 0 1 iqn.2026-11.test:v1-review,i,0x800000000001\n";
    fs::write(file(d, "pr", T, 0), v1).unwrap();
    let targets = build(&config(d, &[T]));
    assert_eq!(lu(&targets, 0, 0).offline_reason(), None);
    let log = crate::test_log::text();
    let line = log
        .lines()
        .find(|l| l.contains("iqn.2026-11.test:v1-review"))
        .unwrap_or_else(|| panic!("not logged:\n{log}"));
    assert!(
        line.contains("WARN") && line.contains("older version"),
        "{line}"
    );
    assert!(
        line.contains("register 0000000000000007 0 1 iqn.2026-11.test:v1-review,i,0x800000000001"),
        "{line}"
    );
}
