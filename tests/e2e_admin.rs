//! The running target changed through its management API (`ironlun
//! admin`) and SIGHUP, with real clients: a verifying `ironlun bench`,
//! qemu-img, libiscsi's iscsi-ls.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{qemu_round_trip, random_file, run, tool, Target};

const NAME: &str = "iqn.2026-11.test:admin";
const READER: &str = "iqn.2026-11.test:reader";

fn admin(sock: &Path, args: &[&str]) -> String {
    let mut all = vec!["admin", "--socket", sock.to_str().unwrap()];
    all.extend_from_slice(args);
    let (rc, out) = run(env!("CARGO_BIN_EXE_ironlun"), &all);
    assert_eq!(rc, 0, "ironlun {all:?}: {out}");
    out
}

fn state(sock: &Path) -> serde_json::Value {
    serde_json::from_str(&admin(sock, &["--json", "state"])).unwrap()
}

/// LUN numbers iscsi-ls shows `initiator`.
fn luns_seen(t: &Target, initiator: &str) -> Vec<u16> {
    let ls = tool("iscsi-ls", "libiscsi-bin");
    let (rc, out) = run(&ls, &["-s", "-i", initiator, &t.portal()]);
    assert_eq!(rc, 0, "{out}");
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("Lun:"))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// While a verifying bench writes and reads LUN 0, LUN 1 is added,
/// written by qemu-img, resized, mapped read-only to one initiator as its
/// LUN 0, and removed. The bench sees no error and no mismatch.
#[test]
fn luns_change_under_a_verifying_bench() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("admin.sock");
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:64MiB",
        "--admin-socket",
        sock.to_str().unwrap(),
    ]);
    let json = dir.path().join("bench.json");
    let mut bench = Command::new(env!("CARGO_BIN_EXE_ironlun"))
        .args([
            "bench",
            &t.url(NAME, 0),
            "--verify",
            "--bs",
            "8k",
            "--read",
            "50",
        ])
        .args([
            "--random", "100", "--qd", "8", "--time", "6s", "--ramp", "0",
        ])
        .args(["--json", json.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let img = dir.path().join("lun1.img");
    let spec = format!("file:{},size=8MiB", img.display());
    let out = admin(&sock, &["lun", "add", NAME, &spec]);
    assert!(out.contains(&format!("+ target {NAME} LUN 1")), "{out}");
    let again = admin(&sock, &["lun", "add", NAME, &spec]);
    assert!(
        again.contains("no change"),
        "adding it again is a no-op: {again}"
    );

    let src = dir.path().join("src.img");
    let data = random_file(&src, 4 << 20);
    qemu_round_trip(dir.path(), &src, &data, &t.url(NAME, 1));

    let out = admin(&sock, &["lun", "resize", NAME, "1", "16MiB"]);
    assert!(out.contains("LUN 1: size 16777216"), "{out}");
    let luns = &state(&sock)["targets"][0]["luns"];
    assert_eq!(luns[1]["bytes"], 16 << 20, "{luns}");

    admin(
        &sock,
        &["initiator", "set", NAME, READER, "--map", "0=1:ro"],
    );
    assert_eq!(
        luns_seen(&t, READER),
        vec![0],
        "the reader sees its map only"
    );
    assert_eq!(luns_seen(&t, "iqn.2026-11.test:other"), vec![0, 1]);
    let back = dir.path().join("back.img");
    let reader_url = t.url(NAME, 0);
    let (rc, out) = run(
        env!("CARGO_BIN_EXE_ironlun"),
        &[
            "dd",
            "--if",
            &reader_url,
            "--of",
            back.to_str().unwrap(),
            "--count",
            "8",
            "--initiator-name",
            READER,
        ],
    );
    assert_eq!(rc, 0, "{out}");
    assert!(
        std::fs::read(&back).unwrap()[..] == data[..4 << 20],
        "the reader's LUN 0 is LUN 1"
    );
    let (rc, out) = run(
        env!("CARGO_BIN_EXE_ironlun"),
        &[
            "dd",
            "--if",
            src.to_str().unwrap(),
            "--of",
            &reader_url,
            "--count",
            "1",
            "--initiator-name",
            READER,
        ],
    );
    // DATA PROTECT / WRITE PROTECTED (sense key 7h, ASC/ASCQ 27h/00h,
    // SPC-5 Annex D), not any failure.
    assert_ne!(rc, 0, "a read-only mapping refuses writes: {out}");
    assert!(
        out.contains("CHECK CONDITION: DATA PROTECT (key 0x7), ASC/ASCQ 0x27/0x00"),
        "a read-only mapping refuses writes as write-protected: {out}"
    );

    let out = admin(&sock, &["lun", "remove", NAME, "1"]);
    assert!(out.contains(&format!("- target {NAME} LUN 1")), "{out}");
    assert_eq!(luns_seen(&t, "iqn.2026-11.test:other"), vec![0]);
    assert_eq!(
        luns_seen(&t, READER),
        Vec::<u16>::new(),
        "its mapping went with it"
    );

    let st = bench.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(bench.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(st.success(), "bench: {err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let w = &v["workloads"][0];
    assert_eq!(w["errors"], 0, "{w}");
    assert!(w["verify"]["checked_blocks"].as_u64().unwrap() > 0);
    assert_eq!(w["verify"]["mismatch_count"], 0, "{}", w["verify"]);
}

fn config(path: &Path, luns: &[String], extra: &str) {
    use std::os::unix::fs::PermissionsExt;
    let mut text = format!("listen = [\"127.0.0.1:0\"]\n{extra}\n[[target]]\nname = \"{NAME}\"\n");
    for (i, l) in luns.iter().enumerate() {
        text.push_str(&format!("[[target.lun]]\nnumber = {i}\nspec = \"{l}\"\n"));
    }
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn hangup(t: &Target) {
    // SAFETY: kill(2) on our own child with a valid signal.
    unsafe {
        libc::kill(t.child.id() as i32, libc::SIGHUP);
    }
}

/// SIGHUP applies the edited file's difference; a broken file changes
/// nothing and the log names its line and the reason.
#[test]
fn sighup_applies_the_file_and_refuses_a_broken_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ironlun.toml");
    let sock = dir.path().join("admin.sock");
    let extra = format!("admin_socket = \"{}\"", sock.display());
    config(&cfg, &["ram:8MiB".into()], &extra);
    let t = Target::start_with(&["--config", cfg.to_str().unwrap()], false);
    assert_eq!(luns_seen(&t, "iqn.2026-11.test:x"), vec![0]);

    config(&cfg, &["ram:8MiB".into(), "ram:4MiB".into()], &extra);
    hangup(&t);
    let applied = format!("applied: + target {NAME} LUN 1");
    assert!(t.wait_log(&applied, Duration::from_secs(30)), "{}", t.log());
    assert_eq!(luns_seen(&t, "iqn.2026-11.test:x"), vec![0, 1]);

    let good = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{good}[[target.lun]]\nnumber = 2\nspec = \"ram:\"\nbogus = = 1\n"),
    )
    .unwrap();
    hangup(&t);
    assert!(
        t.wait_log("nothing changed", Duration::from_secs(30)),
        "{}",
        t.log()
    );
    let line = t
        .log()
        .lines()
        .find(|l| l.contains("nothing changed"))
        .unwrap()
        .to_owned();
    assert!(
        line.contains("line 14: invalid string"),
        "the log names the line: {line}"
    );
    assert_eq!(
        state(&sock)["targets"][0]["luns"].as_array().unwrap().len(),
        2
    );
    assert_eq!(luns_seen(&t, "iqn.2026-11.test:x"), vec![0, 1]);
}

/// The API over HTTP on loopback: a request without the token, or with a
/// wrong one, is answered 401 and changes nothing; with it, `ironlun
/// admin --url` adds a LUN. A non-loopback address or a world-readable
/// token file stops the daemon from starting, saying why.
#[test]
fn http_on_loopback_needs_the_bearer_token() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token-0123456789\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let port = support::free_port();
    let http = format!("127.0.0.1:{port}");
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:4MiB",
        "--admin-http",
        &http,
        "--admin-token-file",
        token.to_str().unwrap(),
    ]);
    let addr: std::net::SocketAddr = http.parse().unwrap();
    let post = |auth: &str| {
        let body = format!(r#"{{"op":"add-lun","target":"{NAME}","spec":"ram:1MiB"}}"#);
        support::http_request(
            addr,
            &format!(
                "POST /v1/ops HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ),
        )
    };
    for auth in [
        "",
        "Authorization: Bearer s3cret-token-012345678\r\n",
        "Authorization: Basic s3cret-token-0123456789\r\n",
    ] {
        let (status, body) = post(auth);
        assert_eq!(status, 401, "{auth:?}: {body}");
    }
    let (status, _) = support::http_get(addr, "/v1/state");
    assert_eq!(status, 401);

    let url = format!("http://{http}");
    let tf = token.to_str().unwrap();
    let via_http = |args: &[&str]| {
        let mut all = vec!["admin", "--url", &url, "--token-file", tf];
        all.extend_from_slice(args);
        run(env!("CARGO_BIN_EXE_ironlun"), &all)
    };
    let luns = || {
        let (rc, out) = via_http(&["--json", "state"]);
        assert_eq!(rc, 0, "{out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["targets"][0]["luns"].as_array().unwrap().len()
    };
    assert_eq!(luns(), 1);
    let (rc, out) = via_http(&["lun", "add", NAME, "ram:1MiB"]);
    assert_eq!(rc, 0, "{out}");
    assert_eq!(luns(), 2);
    let (status, body) = post("Authorization: Bearer s3cret-token-0123456789\r\n");
    assert_eq!(status, 200, "{body}");
    drop(t);

    // Refused at start, with the reason.
    let exe = env!("CARGO_BIN_EXE_ironlun");
    let (rc, out) = run(
        exe,
        &[
            "target",
            "--check",
            "--lun",
            "ram:1MiB",
            "--admin-http",
            "0.0.0.0:9391",
            "--admin-token-file",
            tf,
        ],
    );
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("loopback"), "{out}");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Under `timeout`: a daemon that started anyway would never end.
    let (rc, out) = run(
        "timeout",
        &[
            "30",
            exe,
            "target",
            "--listen",
            "127.0.0.1:0",
            "--lun",
            "ram:1MiB",
            "--admin-http",
            &http,
            "--admin-token-file",
            tf,
        ],
    );
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("world-readable"), "{out}");
}

/// The scheduling policy (field 41 of /proc/PID/task/TID/stat, sched(7))
/// of each of `pid`'s threads, by thread name.
fn policies(pid: u32) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let stat = std::fs::read_to_string(e.unwrap().path().join("stat")).unwrap();
        let (head, rest) = stat.rsplit_once(')').unwrap();
        let name = head.split_once('(').unwrap().1.to_owned();
        // Fields after the name start at field 3.
        let policy = rest
            .split_whitespace()
            .nth(41 - 3)
            .unwrap()
            .parse()
            .unwrap();
        out.push((name, policy));
    }
    out
}

/// The API runs on threads of its own scheduled SCHED_IDLE, the
/// connections' workers are not; an operation still acts on the
/// connections' runtime: a portal it adds accepts logins, and one it
/// removes no longer does.
#[test]
fn the_api_runs_apart_at_idle_priority_and_its_portals_serve() {
    const SCHED_IDLE: u32 = 5;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("admin.sock");
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:8MiB",
        "--admin-socket",
        sock.to_str().unwrap(),
    ]);
    let port = support::free_port();
    let portal = format!("127.0.0.1:{port}");
    let out = admin(&sock, &["portal", "add", &portal]);
    assert!(out.contains(&format!("+ portal {portal}")), "{out}");
    // At once: the thread the operation ran on idles for 10 s before it
    // ends (tokio's blocking pool).
    let threads = policies(t.child.id());
    let of = |name: &str| -> Vec<u32> {
        threads
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, p)| *p)
            .collect()
    };
    let api = of("ironlun-admin");
    assert!(
        api.len() >= 2 && api.iter().all(|p| *p == SCHED_IDLE),
        "the API's thread and the one its operation ran on: {threads:?}"
    );
    let workers = of("tokio-rt-worker");
    assert!(
        !workers.is_empty() && workers.iter().all(|p| *p != SCHED_IDLE),
        "{threads:?}"
    );

    let url = format!("iscsi://{portal}/{NAME}/0");
    let (rc, out) = run(env!("CARGO_BIN_EXE_ironlun"), &["readcap", &url]);
    assert_eq!(rc, 0, "a login through the added portal: {out}");
    admin(&sock, &["portal", "remove", &portal]);
    let (rc, out) = run(env!("CARGO_BIN_EXE_ironlun"), &["readcap", &url]);
    assert_ne!(rc, 0, "the removed portal refuses: {out}");
}
