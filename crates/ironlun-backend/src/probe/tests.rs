//! A probe says what the open would say, and changes nothing.

use std::path::{Path, PathBuf};

use super::*;
use crate::FileBackend;

fn opts(size: Option<u64>, grow: bool, read_only: bool) -> FileOptions {
    FileOptions {
        size,
        grow,
        read_only,
        ..FileOptions::default()
    }
}

/// A file of `len` bytes at `name` in `dir` (`None`: no file).
fn place(dir: &Path, name: &str, len: Option<u64>) -> PathBuf {
    let p = dir.join(name);
    if let Some(len) = len {
        std::fs::File::create(&p).unwrap().set_len(len).unwrap();
    }
    p
}

/// What the file at `p` is: its length, or nothing.
fn on_disk(p: &Path) -> Option<u64> {
    std::fs::metadata(p).ok().map(|m| m.len())
}

/// For files of each length and specs of each kind: the probe refuses
/// with the open's own message, or says the size the open then gives,
/// and what it would change; the probe itself changes nothing.
#[test]
fn a_probe_says_what_the_open_does() {
    const MIB: u64 = 1 << 20;
    let cases = [
        (None, opts(None, false, false)),
        (None, opts(None, false, true)),
        (None, opts(Some(MIB), false, false)),
        (Some(0), opts(None, false, false)),
        (Some(0), opts(Some(MIB), false, false)),
        (Some(MIB), opts(None, false, false)),
        (Some(MIB), opts(Some(MIB), false, true)),
        (Some(MIB), opts(Some(2 * MIB), false, false)),
        (Some(MIB), opts(Some(2 * MIB), true, false)),
        (Some(2 * MIB), opts(Some(MIB), false, false)),
        (Some(2 * MIB), opts(Some(MIB), true, false)),
        (Some(MIB), opts(Some(2 * MIB), false, true)),
    ];
    for (i, (len, o)) in cases.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let p = place(dir.path(), "lun.img", len);
        let probed = probe_file(&p, &o);
        assert_eq!(on_disk(&p), len, "case {i}: the probe changed the file");
        let opened = FileBackend::open_file(&p, &o);
        match (probed, opened) {
            (Ok(probe), Ok(_)) => {
                assert_eq!(Some(probe.size), on_disk(&p), "case {i}");
                let change = match len {
                    None => Some(Change::Create),
                    Some(l) if l == probe.size => None,
                    Some(0) => Some(Change::Size),
                    Some(from) => Some(Change::Grow { from }),
                };
                assert_eq!(probe.change, change, "case {i}");
                assert_eq!(probe.holder, None, "case {i}");
            }
            (Err(p), Err(o)) => assert_eq!(p.to_string(), o.to_string(), "case {i}"),
            (p, o) => panic!("case {i}: probe {p:?}, open {:?}", o.err()),
        }
    }
}

#[test]
fn a_file_in_a_directory_that_is_not_there_cannot_be_created() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("no/such/dir/lun.img");
    let e = probe_file(&p, &opts(Some(1 << 20), false, false))
        .unwrap_err()
        .to_string();
    let missing = dir.path().join("no/such/dir");
    assert_eq!(
        e,
        format!(
            "{}: cannot create it: {} does not exist",
            p.display(),
            missing.display()
        )
    );
    assert!(FileBackend::open_file(&p, &opts(Some(1 << 20), false, false)).is_err());
}

#[test]
fn a_directory_or_a_file_is_not_what_the_other_kind_serves() {
    let dir = tempfile::tempdir().unwrap();
    let e = probe_file(dir.path(), &opts(None, false, false))
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("not a regular file (use block: for devices)"),
        "{e}"
    );
    let f = place(dir.path(), "f.img", Some(4096));
    let e = probe_block(&f, &FileOptions::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!("{}: not a block device (use file: for files)", f.display())
    );
    let open = FileBackend::open_block(&f, &FileOptions::default())
        .err()
        .unwrap();
    assert_eq!(e, open.to_string());
    let e = probe_block(&dir.path().join("sdz"), &FileOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("sdz: no such device"), "{e}");
}

/// A served file: the probe names the holder and takes no lock, so the
/// daemon that serves it goes on, and a store nobody holds stays free.
#[test]
fn a_served_file_is_probed_without_its_lock() {
    let dir = tempfile::tempdir().unwrap();
    let p = place(dir.path(), "lun.img", Some(1 << 20));
    let served = FileBackend::open_file(&p, &FileOptions::default()).unwrap();
    let probe = probe_file(&p, &FileOptions::default()).unwrap();
    if Path::new("/proc/locks").exists() {
        let me = probe.holder.expect("/proc/locks names the holder");
        assert_eq!(me.pid, std::process::id());
        assert!(me.to_string().starts_with(&format!("process {} (", me.pid)));
    }
    drop(served);
    let probe = probe_file(&p, &FileOptions::default()).unwrap();
    assert_eq!(probe.holder, None);
    // Probing took no lock: an open right after it succeeds at once.
    let f = std::fs::File::open(&p).unwrap();
    crate::lock::lock_exclusive(&f, &p, std::time::Duration::ZERO).unwrap();
}
