//! What `--check` finds in the places and stores of a configuration,
//! made in a temporary directory (no socket is bound, no daemon runs).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::*;

/// A configuration whose one target has `luns`, with `top` (keys of the
/// top level) before it.
fn config(top: &str, luns: &[String]) -> Config {
    let luns: Vec<String> = luns
        .iter()
        .map(|s| format!("[[target.lun]]\nspec = {s:?}\n"))
        .collect();
    let text = format!(
        "{top}\n[[target]]\nname = \"iqn.2026-11.test:t\"\n{}",
        luns.concat()
    );
    Config::from_toml(&text, None).unwrap_or_else(|e| panic!("{e}:\n{text}"))
}

/// The findings as `severity: subject: message` lines.
fn said(cfg: &Config) -> Vec<String> {
    check(cfg).iter().map(ToString::to_string).collect()
}

fn one_with(lines: &[String], needle: &str) -> String {
    let hits: Vec<&String> = lines.iter().filter(|l| l.contains(needle)).collect();
    assert_eq!(hits.len(), 1, "{needle}: {lines:#?}");
    hits[0].clone()
}

fn ram() -> Vec<String> {
    vec!["ram:1MiB".to_owned()]
}

fn quoted(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

#[test]
fn a_state_directory_is_a_directory_or_can_be_made() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let cfg = config(&format!("state_dir = {}", quoted(&file)), &ram());
    let l = said(&cfg);
    let e = one_with(&l, "state_dir");
    assert!(
        e.starts_with("error: ") && e.ends_with("not a directory: a regular file"),
        "{e}"
    );

    let fresh = dir.path().join("state");
    let l = said(&config(&format!("state_dir = {}", quoted(&fresh)), &ram()));
    let n = one_with(&l, "state_dir");
    assert!(
        n.starts_with("note: ") && n.ends_with("made at the first save"),
        "{n}"
    );

    let typo = dir.path().join("no/state");
    let l = said(&config(&format!("state_dir = {}", quoted(&typo)), &ram()));
    let w = one_with(&l, "state_dir");
    assert!(w.starts_with("warning: ") && w.contains("(a typo?)"), "{w}");

    let under_a_file = file.join("state");
    let l = said(&config(
        &format!("state_dir = {}", quoted(&under_a_file)),
        &ram(),
    ));
    let e = one_with(&l, "state_dir");
    assert!(
        e.starts_with("error: ") && e.contains("is not a directory"),
        "{e}"
    );
}

#[test]
fn the_socket_path_and_the_save_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("admin.sock");
    std::fs::write(&file, "x").unwrap();
    let missing = dir.path().join("saves");
    let top = format!(
        "admin_socket = {}\nadmin_save_dir = {}",
        quoted(&file),
        quoted(&missing)
    );
    let l = said(&config(&top, &ram()));
    let e = one_with(&l, "admin_socket");
    assert!(
        e.starts_with("error: ")
            && e.contains("is a regular file: only an old socket there is replaced"),
        "{e}"
    );
    let e = one_with(&l, "admin_save_dir");
    assert!(
        e.starts_with("error: ")
            && e.ends_with("does not exist: config save could not write there"),
        "{e}"
    );

    let later = dir.path().join("run/ironlun/admin.sock");
    let l = said(&config(
        &format!("admin_socket = {}", quoted(&later)),
        &ram(),
    ));
    let n = one_with(&l, "admin_socket");
    assert!(
        n.starts_with("note: ") && n.ends_with("does not exist yet: made at start"),
        "{n}"
    );
}

#[test]
fn a_token_file_others_can_read_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "0123456789abcdef0123").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let top = format!(
        "admin_http = \"127.0.0.1:9391\"\nadmin_token_file = {}",
        quoted(&token)
    );
    let cfg = config(&top, &ram());
    let e = one_with(&said(&cfg), "admin_token_file");
    assert!(e.starts_with("error: "), "{e}");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(!said(&cfg).iter().any(|l| l.contains("admin_token_file")));
}

#[test]
fn file_and_device_luns_as_their_open_finds_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let small = dir.path().join("small.img");
    std::fs::File::create(&small)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let odd = dir.path().join("odd.img");
    std::fs::File::create(&odd)
        .unwrap()
        .set_len((1 << 20) + 100)
        .unwrap();
    let not_a_device = dir.path().join("not-a-device");
    std::fs::write(&not_a_device, "x").unwrap();
    let tiny = dir.path().join("tiny.img");
    std::fs::File::create(&tiny).unwrap().set_len(100).unwrap();
    let luns = vec![
        format!("file:{d}/small.img,size=2MiB"),
        format!("file:{d}/small2.img"),
        format!("file:{d}/no/dir/x.img,size=1MiB"),
        format!("block:{d}/not-a-device"),
        format!("block:{d}/sdz"),
        format!("file:{d}/odd.img"),
        format!("file:{d}/tiny.img"),
        format!("file:{d}/new.img,size=4MiB"),
    ];
    std::fs::copy(&small, dir.path().join("small2.img")).unwrap();
    let cfg = config("", &luns);
    let l = said(&cfg);
    let at = |n: u16| format!("target iqn.2026-11.test:t LUN {n}: ");
    let expect = [
        format!(
            "error: {}{}: the file is 1MiB, smaller than size=2MiB",
            at(0),
            small.display()
        ),
        format!(
            "error: {}{d}/no/dir/x.img: cannot create it: {d}/no/dir does not exist",
            at(2)
        ),
        format!(
            "error: {}{}: not a block device (use file: for files)",
            at(3),
            not_a_device.display()
        ),
        format!("error: {}{d}/sdz: no such device", at(4)),
        format!("error: {}100 bytes hold no 512-byte block", at(6)),
        format!(
            "warning: {}1048676 bytes are not whole 512-byte blocks: the last 100 are not served",
            at(5)
        ),
        format!("note: {}the file is made, 4MiB", at(7)),
    ];
    assert_eq!(l.len(), expect.len(), "{l:#?}");
    for (got, want) in l.iter().zip(&expect) {
        assert!(got.starts_with(want.as_str()), "{got}\nnot\n{want}");
    }
    // Nothing was made or changed.
    assert!(!dir.path().join("new.img").exists());
    assert_eq!(std::fs::metadata(&small).unwrap().len(), 1 << 20);
}

#[test]
fn a_file_served_by_a_daemon_is_information() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("a.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let served =
        ironlun_backend::FileBackend::open_file(&img, &ironlun_backend::FileOptions::default())
            .unwrap();
    let cfg = config("", &[format!("file:{}", img.display())]);
    let l = said(&cfg);
    if Path::new("/proc/locks").exists() {
        let n = one_with(&l, "in use by");
        assert!(
            n.starts_with(&format!(
                "note: target iqn.2026-11.test:t LUN 0: in use by process {} (",
                std::process::id()
            )),
            "{n}"
        );
    }
    assert!(!l.iter().any(|x| x.starts_with("error")), "{l:#?}");
    drop(served);
}

#[test]
fn rbd_files_must_be_readable() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("ceph.conf");
    let spec = format!(
        "rbd:pool/img,conf={},keyring={}/k",
        conf.display(),
        dir.path().display()
    );
    let l = said(&config("", &[spec]));
    assert!(
        l[0].starts_with("error: target iqn.2026-11.test:t LUN 0: conf="),
        "{l:#?}"
    );
    assert!(
        l[1].starts_with("error: target iqn.2026-11.test:t LUN 0: keyring="),
        "{l:#?}"
    );
    assert!(l[2].contains("the Ceph cluster is not contacted"), "{l:#?}");
}

#[test]
fn every_problem_is_found_errors_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let file = dir.path().join("f");
    std::fs::write(&file, "x").unwrap();
    // A port free now (a fixed one fails the test whenever another
    // process holds it); listen and stats both name it, which is the
    // one address error expected.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let top = format!(
        "listen = [\"127.0.0.1:{port}\"]\nstats = \"127.0.0.1:{port}\"\nstate_dir = {}",
        quoted(&file)
    );
    let luns = vec![
        format!("file:{d}/new.img,size=1MiB"),
        format!("block:{d}/f"),
    ];
    let l = said(&config(&top, &luns));
    let severities: Vec<&str> = l.iter().map(|x| x.split(':').next().unwrap()).collect();
    assert_eq!(
        severities,
        ["error", "error", "error", "error", "note"],
        "{l:#?}"
    );
    // The socket, in the state directory that is a file, once.
    one_with(&l, "admin_socket");
}

#[test]
fn a_schedule_on_a_file_system_without_reflink_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let fs = ironlun_backend::snapshot::reflink::fs_name(dir.path());
    let file = dir.path().join("a.img");
    let text = format!(
        "[[target]]\nname = \"iqn.2026-11.test:t\"\n[[target.lun]]\nspec = \"file:{},size=1MiB\"\nsnapshot_every = \"1h\"\nsnapshot_keep = 3\n",
        file.display()
    );
    let l = said(&Config::from_toml(&text, None).unwrap());
    let hits: Vec<&String> = l.iter().filter(|x| x.contains("snapshot_every")).collect();
    if fs == "xfs" || fs == "btrfs" {
        assert!(hits.is_empty(), "{fs}: {l:#?}");
    } else {
        assert_eq!(hits.len(), 1, "{l:#?}");
        assert!(
            hits[0].starts_with(
                "warning: target iqn.2026-11.test:t LUN 0: snapshot_every: the file is on "
            ) && hits[0].contains("cannot share a file's blocks"),
            "{}",
            hits[0]
        );
    }
}
