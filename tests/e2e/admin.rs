//! The running target changed through its management API (`ironlun
//! admin`) and SIGHUP, with real clients: a verifying `ironlun bench`,
//! qemu-img, libiscsi's iscsi-ls.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{qemu_round_trip, random_file, run, tool, Target};

const NAME: &str = "iqn.2026-11.test:admin";
const READER: &str = "iqn.2026-11.test:reader";

fn admin(sock: &Path, args: &[&str]) -> String {
    let mut all = vec!["admin", "--socket", sock.to_str().unwrap()];
    all.extend_from_slice(args);
    let (rc, out) = run(support::ironlun_bin(), &all);
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

/// A target with a 64 MiB RAM LUN and its admin socket in `dir`; the
/// socket's path, and where a bench's result goes.
fn ram_target_with_admin(dir: &Path) -> (Target, PathBuf, PathBuf) {
    let sock = dir.join("admin.sock");
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:64MiB",
        "--admin-socket",
        sock.to_str().unwrap(),
    ]);
    (t, sock, dir.join("bench.json"))
}

/// A verifying bench of six seconds on `t`'s LUN 0 (8 KiB random, half
/// reads, QD 8), logging at info on stderr, its result in `json`.
fn verifying_bench(t: &Target, json: &Path) -> std::process::Child {
    Command::new(support::ironlun_bin())
        .args(["--log", "info", "bench", &t.url(NAME, 0), "--verify"])
        .args(["--bs", "8k", "--read", "50", "--random", "100", "--qd", "8"])
        .args([
            "--time",
            "6s",
            "--ramp",
            "0",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// While a verifying bench writes and reads LUN 0, LUN 1 is added,
/// written by qemu-img, resized, mapped read-only to one initiator as its
/// LUN 0, and removed. The bench sees no error and no mismatch.
#[test]
fn luns_change_under_a_verifying_bench() {
    let dir = tempfile::tempdir().unwrap();
    let (t, sock, json) = ram_target_with_admin(dir.path());
    let mut bench = verifying_bench(&t, &json);

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
        support::ironlun_bin(),
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
        support::ironlun_bin(),
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
#[allow(clippy::too_many_lines)] // one scenario, step by step
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
        run(support::ironlun_bin(), &all)
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
    let exe = support::ironlun_bin();
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
    // Group access is refused too, and a link to a good file.
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o640)).unwrap();
    let start = |tf: &str| {
        run(
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
        )
    };
    let (rc, out) = start(tf);
    assert_ne!(rc, 0, "{out}");
    assert!(
        out.contains("group-readable") && out.contains("chmod 600"),
        "{out}"
    );
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&token, &link).unwrap();
    let (rc, out) = start(link.to_str().unwrap());
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("symbolic link"), "{out}");
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
    let (rc, out) = run(support::ironlun_bin(), &["readcap", &url]);
    assert_eq!(rc, 0, "a login through the added portal: {out}");
    admin(&sock, &["portal", "remove", &portal]);
    let (rc, out) = run(support::ironlun_bin(), &["readcap", &url]);
    assert_ne!(rc, 0, "the removed portal refuses: {out}");
}

/// A token file of mode 0600 in `dir`.
fn token_file(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let token = dir.join("token");
    std::fs::write(&token, "s3cret-token-0123456789\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    token
}

/// `ironlun admin ARGS` over HTTP with the token: exit status and output.
fn admin_http(url: &str, token: &Path, args: &[&str]) -> (i32, String) {
    let mut all = vec![
        "admin",
        "--url",
        url,
        "--token-file",
        token.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    run(support::ironlun_bin(), &all)
}

/// `config show` hides every literal secret (discovery, target, an
/// initiator entry written inline, one-way and mutual) and shows `_env`
/// references; `config save` writes the daemon's own file or NAME.toml in
/// `admin_save_dir` and nothing else, over the socket and over HTTP; a
/// dry run of it writes nothing.
#[test]
fn config_show_hides_secrets_and_save_writes_only_where_allowed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ironlun.toml");
    let sock = dir.path().join("admin.sock");
    let saved = dir.path().join("saved");
    std::fs::create_dir(&saved).unwrap();
    let token = token_file(dir.path());
    let port = support::free_port();
    let text = format!(
        r#"listen = ["127.0.0.1:0"]
admin_socket = "{sock}"
admin_http = "127.0.0.1:{port}"
admin_token_file = "{token}"
admin_save_dir = "{saved}"
discovery = {{ chap = "disc:disc-S3CRET-0001", mutual_chap = "dt:disc-S3CRET-0002" }}

[[target]]
name = "{NAME}"
chap = "alice:tgt-S3CRET-0003"
mutual_chap_env = "TGT_MUTUAL"
allow = ["iqn.2026-11.test:init"]
initiator = [{{ name = "iqn.2026-11.test:init", chap = "bob:ini-S3CRET-0004", mutual_chap = "t2:ini-S3CRET-0005" }}]
[[target.lun]]
spec = "ram:8MiB"
"#,
        sock = sock.display(),
        token = token.display(),
        saved = saved.display(),
    );
    std::fs::write(&cfg, &text).unwrap();
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o600)).unwrap();
    let _t = Target::start_env(
        &["--config", cfg.to_str().unwrap()],
        0,
        &[("TGT_MUTUAL", "tgt:tgt-mutual-0123456")],
    );
    let url = format!("http://127.0.0.1:{port}");

    let shown = admin(&sock, &["config", "show"]);
    let (rc, shown_http) = admin_http(&url, &token, &["config", "show"]);
    assert_eq!(rc, 0, "{shown_http}");
    for s in [&shown, &shown_http] {
        assert!(!s.contains("S3CRET"), "{s}");
        assert_eq!(s.matches("<hidden>").count(), 5, "{s}");
        assert!(s.contains("mutual_chap_env = \"TGT_MUTUAL\""), "{s}");
    }

    // Elsewhere: refused, nothing written.
    let elsewhere = dir.path().join("elsewhere.toml");
    let (rc, out) = run(
        support::ironlun_bin(),
        &[
            "admin",
            "--socket",
            sock.to_str().unwrap(),
            "config",
            "save",
            elsewhere.to_str().unwrap(),
        ],
    );
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("config save writes only"), "{out}");
    let (rc, out) = admin_http(
        &url,
        &token,
        &["config", "save", elsewhere.to_str().unwrap()],
    );
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains("config save writes only"), "{out}");
    let sub = saved.join("../escape.toml");
    let (rc, out) = admin_http(&url, &token, &["config", "save", sub.to_str().unwrap()]);
    assert_ne!(rc, 0, "{out}");
    assert!(!elsewhere.exists() && !dir.path().join("escape.toml").exists());

    // A change, then a dry run of the save: the file stays as it was.
    admin(&sock, &["lun", "add", NAME, "ram:4MiB"]);
    let out = admin(&sock, &["--diff", "config", "save"]);
    assert!(out.contains("would save to"), "{out}");
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), text);
    let (rc, out) = admin_http(&url, &token, &["--diff", "config", "save"]);
    assert_eq!(rc, 0, "{out}");
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), text);

    // The daemon's own file, and NAME.toml in admin_save_dir.
    let out = admin(&sock, &["config", "save"]);
    assert!(
        out.contains(&format!("saved to {}", cfg.display())),
        "{out}"
    );
    let now = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        now.contains("ram:4MiB") && now.contains("tgt-S3CRET-0003"),
        "{now}"
    );
    let backup = saved.join("backup.toml");
    let (rc, out) = admin_http(&url, &token, &["config", "save", backup.to_str().unwrap()]);
    assert_eq!(rc, 0, "{out}");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), now);
}

/// Everything one connection sends back until it closes, and whether it
/// closed (EOF or reset) rather than fell silent for `wait`.
fn read_until_closed(s: &mut std::net::TcpStream, wait: Duration) -> (String, bool) {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match support::read_some(s, &mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(end) => {
                let closed = matches!(end, support::End::Closed);
                return (String::from_utf8_lossy(&got).into_owned(), closed);
            }
        }
    }
}

/// Over HTTP: a request without the token gets 401 and the connection
/// closes although the client asked to keep it; 32 idle connections,
/// every place the API has, do not keep an authenticated client out
/// beyond the head deadline (10 s): they are closed and it is served.
#[test]
fn a_401_closes_and_idle_connections_do_not_lock_the_api() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let port = support::free_port();
    let http = format!("127.0.0.1:{port}");
    let _t = Target::start(&[
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

    let mut s = std::net::TcpStream::connect(addr).unwrap();
    // Two requests that ask to keep the connection, sent together: a
    // connection kept after the 401 would answer the second too before
    // the head deadline closed it, so one answer and the close say the
    // 401 closed it, however long a loaded machine takes to get there.
    let keep = "GET /v1/state HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n";
    s.write_all(format!("{keep}{keep}").as_bytes()).unwrap();
    let (answer, closed) = read_until_closed(&mut s, Duration::from_secs(120));
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert_eq!(answer.matches("HTTP/1.1 ").count(), 1, "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(closed, "the 401 closed the connection: {answer}");

    let mut idle: Vec<_> = (0..32)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let authorized = "GET /v1/state HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer s3cret-token-0123456789\r\n\r\n";
    let started = std::time::Instant::now();
    let served = loop {
        let (status, _) = support::http_request(addr, authorized);
        if status == 200 {
            break true;
        }
        if started.elapsed() > Duration::from_secs(120) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(served, "still locked out after 120 s");
    for s in &mut idle {
        let (_, closed) = read_until_closed(s, Duration::from_secs(60));
        assert!(closed, "an idle connection was closed by the API");
    }
}

/// The socket's path holding a regular file: the daemon does not start,
/// names the path, and leaves the file as it was.
#[test]
fn a_file_where_the_socket_goes_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("admin.sock");
    std::fs::write(&sock, "not a socket").unwrap();
    let (rc, out) = run(
        "timeout",
        &[
            "30",
            support::ironlun_bin(),
            "target",
            "--listen",
            "127.0.0.1:0",
            "--lun",
            "ram:1MiB",
            "--admin-socket",
            sock.to_str().unwrap(),
        ],
    );
    assert_ne!(rc, 0, "{out}");
    assert!(out.contains(&sock.display().to_string()), "{out}");
    assert!(out.contains("is a regular file"), "{out}");
    assert_eq!(std::fs::read_to_string(&sock).unwrap(), "not a socket");
}

/// `ironlun admin logout TSIH` asks the session's initiator to log out
/// (Asynchronous Message, AsyncEvent 1, RFC 7143 §11.9.1). ironlun's
/// initiator answers with a Logout Request within the time given, closes
/// after the Logout Response and logs in again (same ISID): the target
/// logs a logout, not a connection the initiator dropped, and a
/// verifying bench across it sees no error.
#[test]
fn an_operators_logout_is_answered_with_a_logout_and_the_bench_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (t, sock, json) = ram_target_with_admin(dir.path());
    let bench = verifying_bench(&t, &json);
    let mut sessions = Vec::new();
    for _ in 0..200 {
        let out = admin(&sock, &["--json", "sessions"]);
        sessions = serde_json::from_str::<Vec<serde_json::Value>>(&out).unwrap();
        if !sessions.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let tsih = sessions.first().expect("the bench's session")["tsih"].to_string();
    std::thread::sleep(Duration::from_secs(1));
    admin(&sock, &["logout", &tsih]);
    let logged_out = format!("tsih={tsih} ");
    let ended = || {
        t.log()
            .lines()
            .find(|l| l.contains(&logged_out) && l.contains("logout: "))
            .map(str::to_owned)
    };
    assert!(
        t.wait_log("logout: ", Duration::from_secs(10)),
        "the session did not end: {}",
        t.log()
    );
    let line = ended().unwrap_or_else(|| panic!("no end of session {tsih}: {}", t.log()));
    assert!(
        line.contains("logout: LoggedOut"),
        "the initiator did not log out (RFC 7143 §11.9.1): {line}"
    );
    let out = bench.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("asks for a logout"), "{log}");
    assert!(log.contains("session reinstated"), "{log}");
    let w = support::first_workload(&json);
    assert_eq!(w["errors"], 0, "{log}");
    assert_eq!(w["verify"]["mismatch_count"], 0, "{}", w["verify"]);
}

/// `admin state` is a tree of what the configuration says, as targetcli's
/// `ls`: the target with its portals, LUNs (the spec in the file's own
/// grammar, size and flags), access list, initiator entries (CHAP on or
/// off, maps in the file's `{ lun, target_lun, read_only }` form) and a
/// logged-in session under it; `admin sessions` is a table with the
/// session's target; `--json` is the API's answer, the fields tools
/// read still there beside the new ones.
#[test]
fn state_is_a_tree_and_sessions_a_table() {
    const OTHER: &str = "iqn.2026-11.test:other";
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("a.img");
    let sock = dir.path().join("admin.sock");
    let config = dir.path().join("ironlun.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[target]]
name = "{NAME}"
alias = "store"
allow = ["{READER}", "{OTHER}", "127.0.0.0/8"]
[[target.lun]]
spec = "file:{},size=8MiB,thin"
[[target.lun]]
spec = "ram:16777216,bs=4096,ro"
[[target.initiator]]
name = "{READER}"
luns = [{{ lun = 0, target_lun = 1, read_only = true }}]
[[target.initiator]]
name = "{OTHER}"
chap = "carol:carol-secret-0123"
"#,
            img.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let t = Target::start(&[
        "--config",
        config.to_str().unwrap(),
        "--admin-socket",
        sock.to_str().unwrap(),
    ]);
    let mut c = support::Raw::connect(t.addr);
    let (r, _) = c.login(NAME, [0x40, 0, 1, 0x37, 0, 0], &[("InitiatorName", READER)]);
    assert_eq!(
        (r.status.class(), r.status.detail()),
        (0, 0),
        "login failed"
    );

    let tree = admin(&sock, &["state"]);
    let lines: Vec<&str> = tree.lines().collect();
    let portal = t.addr.to_string();
    for want in [
        "o- / [1 portal, 1 target]",
        &format!("  o- {NAME} [alias \"store\", CHAP off, default_map all]"),
        "  | o- portals [tpgt 1]",
        &format!("  | | o- {portal}"),
        &format!(
            "  | | o- lun0 file:{},size=8MiB,thin [8MiB, 512-byte blocks, thin]",
            img.display()
        ),
        "  | | o- lun1 ram:16MiB,bs=4096,ro [16MiB, 4096-byte blocks, ro]",
        "  | o- acl [3 allowed]",
        "  | | o- 127.0.0.0/8",
        &format!(
            "  | | o- {READER} [CHAP off] luns = [{{ lun = 0, target_lun = 1, read_only = true }}]"
        ),
        &format!("  | | o- {OTHER} [CHAP on] the target's LUNs"),
        "  | o- sessions [1]",
        "  o- discovery [CHAP off, 0 sessions]",
    ] {
        assert!(lines.contains(&want), "{want:?} in\n{tree}");
    }
    let session = lines
        .iter()
        .position(|l| l.starts_with(&format!("  |   o- tsih 1 {READER} from 127.0.0.1:")))
        .unwrap_or_else(|| panic!("the session under its target:\n{tree}"));
    assert_eq!(lines[session - 1], "  | o- sessions [1]", "{tree}");
    assert!(!tree.contains("carol-secret"), "{tree}");

    let table = admin(&sock, &["sessions"]);
    let rows: Vec<&str> = table.lines().collect();
    assert!(rows[0].starts_with("TSIH  TARGET"), "{table}");
    let at = rows[0].find("TARGET").unwrap();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(rows[1][at..].starts_with(NAME), "{table}");
    assert!(rows[1].contains(READER), "{table}");

    let json = state(&sock);
    let target = &json["targets"][0];
    assert_eq!(target["luns"][0]["kind"], "file");
    assert_eq!(target["luns"][0]["bytes"], 8 << 20);
    assert_eq!(target["luns"][1]["read_only"], true);
    assert_eq!(
        target["luns"][0]["spec"],
        format!("file:{},size=8MiB,thin", img.display())
    );
    assert_eq!(target["luns"][0]["thin"], true);
    assert_eq!(
        target["initiators"][0]["luns"],
        serde_json::json!([[0, 1, true]])
    );
    assert_eq!(target["initiators"][1]["chap"], true);
    assert_eq!(target["sessions"], 1);
    assert_eq!(
        target["allow"],
        serde_json::json!([READER, OTHER, "127.0.0.0/8"])
    );
    assert_eq!(
        (target["chap"].clone(), json["discovery_chap"].clone()),
        (false.into(), false.into())
    );
    let (rc, raw) = run(
        support::ironlun_bin(),
        &[
            "admin",
            "--socket",
            sock.to_str().unwrap(),
            "--json",
            "sessions",
        ],
    );
    assert_eq!(rc, 0, "{raw}");
    let v: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(v[0]["target"], NAME);
    drop(c);
}
