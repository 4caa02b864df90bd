//! ironlun as a systemd service (dist/, docs/admin.md "Service"): the
//! daemon's sd_notify messages on a socket the test binds, the unit
//! checked by `systemd-analyze verify` (and a broken copy refused), the
//! default configuration and its example loaded by the real parser
//! (`ironlun target --check`), and, run by scripts/test once the release
//! binary exists, the Debian package built by `cargo deb` and unpacked
//! into a scratch root.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{ironlun_ok, run, tool};

const NAME: &str = "iqn.2026-11.io.ironlun:service";
/// How long any one expected event may take, however loaded the machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

// --- sd_notify ------------------------------------------------------------

/// The service manager's end: a datagram socket the daemon finds in
/// NOTIFY_SOCKET, and every message received so far.
struct Manager {
    socket: UnixDatagram,
    path: PathBuf,
    received: Vec<String>,
}

impl Manager {
    fn bind(dir: &Path) -> Manager {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        Manager {
            socket,
            path,
            received: Vec::new(),
        }
    }

    /// Waits (bounded) for a message with the line `line`; returns it.
    /// Fails early once the daemon has ended and its messages are read.
    fn wait_for(&mut self, line: &str, daemon: &mut Child) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let ended = daemon.try_wait().unwrap();
            while let Some(msg) = self.next() {
                if msg.lines().any(|l| l == line) {
                    return msg;
                }
                if Instant::now() > deadline {
                    break;
                }
            }
            if let Some(st) = ended {
                panic!("the daemon ended ({st}) before {line}: {:?}", self.received);
            }
            if Instant::now() > deadline {
                panic!("no {line} within {PATIENCE:?}: {:?}", self.received);
            }
        }
    }

    /// The next message, kept in `received`; `None` after the read
    /// timeout with nothing queued.
    fn next(&mut self) -> Option<String> {
        let mut buf = vec![0u8; 4096];
        let n = self.socket.recv(&mut buf).ok()?;
        let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
        self.received.push(msg.clone());
        Some(msg)
    }

    /// Messages received so far with the line `line`.
    fn count(&self, line: &str) -> usize {
        let has = |m: &&String| m.lines().any(|l| l == line);
        self.received.iter().filter(has).count()
    }
}

/// `ironlun target` with NOTIFY_SOCKET and WATCHDOG_USEC, and
/// WATCHDOG_PID set to its own process id as systemd sets it (a shell
/// that exports its `$$`, then execs the daemon in its place).
fn start_supervised(dir: &Path, manager: &Manager) -> Child {
    Command::new("/bin/sh")
        .args([
            "-c",
            "export WATCHDOG_PID=$$; exec \"$0\" \"$@\"",
            support::ironlun_bin(),
        ])
        .args(["--log", "info", "target", "--listen", "127.0.0.1:0"])
        .args(["--name", NAME, "--lun", "ram:1MiB"])
        .env("NOTIFY_SOCKET", &manager.path)
        .env("WATCHDOG_USEC", "400000")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("daemon.log")).unwrap())
        .spawn()
        .unwrap()
}

/// The portal named in the READY=1 message's STATUS= line.
fn portal_in(ready: &str) -> SocketAddr {
    let status = ready
        .lines()
        .find_map(|l| l.strip_prefix("STATUS=serving on "))
        .unwrap_or_else(|| panic!("no STATUS=serving on … with READY=1: {ready:?}"));
    let first = status.split([' ', ';']).next().unwrap();
    first.parse().unwrap()
}

fn signal(daemon: &Child, sig: i32) {
    // SAFETY: kill(2) with the pid of a child we own and a valid signal.
    assert_eq!(unsafe { libc::kill(daemon.id() as i32, sig) }, 0);
}

/// Waits (bounded) for the daemon's exit code.
fn exit_code(daemon: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if let Some(st) = daemon.try_wait().unwrap() {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = daemon.kill();
    panic!("the daemon did not exit within {PATIENCE:?}");
}

#[test]
fn the_daemon_tells_systemd_ready_watchdog_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let mut manager = Manager::bind(dir.path());
    let mut daemon = start_supervised(dir.path(), &manager);
    let log = || std::fs::read_to_string(dir.path().join("daemon.log")).unwrap();

    // READY=1 first, naming the portal.
    let ready = manager.wait_for("READY=1", &mut daemon);
    assert_eq!(
        manager.received.len(),
        1,
        "READY=1 was not the first message"
    );
    // A reload as soon as the service is up (systemctl start, then
    // reload): SIGHUP must already have its handler, or its default
    // action ends the daemon (the exit status below).
    signal(&daemon, libc::SIGHUP);
    // The portal listens (one attempt, no retry) and an initiator logs in.
    let portal = portal_in(&ready);
    TcpStream::connect(portal).unwrap_or_else(|e| panic!("portal {portal} after READY=1: {e}"));
    let out = ironlun_ok(&["readcap", &format!("iscsi://{portal}/{NAME}/0")]);
    let blocks = out.lines().find(|l| l.starts_with("Logical blocks:"));
    assert_eq!(
        blocks.map(|l| l.split_whitespace().last()),
        Some(Some("2048")),
        "{out}"
    );

    assert!(ready.contains("; 1 target(s), 0 session(s)"), "{ready:?}");
    // A session that stays: the STATUS= line counts it.
    let mut session = support::Raw::connect(portal);
    let (r, _) = session.login(NAME, [0x80, 0, 0, 0, 0, 7], &[]);
    assert_eq!((r.status.class(), r.status.detail()), (0, 0));
    let counted = format!("STATUS=serving on {portal}; 1 target(s), 1 session(s)");
    manager.wait_for(&counted, &mut daemon);
    drop(session);

    // WATCHDOG_USEC=400000: pings every 200 ms; three show they repeat.
    while manager.count("WATCHDOG=1") < 3 {
        manager.wait_for("WATCHDOG=1", &mut daemon);
    }

    signal(&daemon, libc::SIGTERM);
    let stopping = manager.wait_for("STOPPING=1", &mut daemon);
    assert!(stopping.contains("STATUS=stopping"), "{stopping:?}");
    // Exit 0: neither SIGHUP nor SIGTERM ended it by default action.
    assert_eq!(exit_code(&mut daemon), Some(0), "{}", log());
    assert_eq!(manager.count("READY=1"), 1, "{:?}", manager.received);
    assert!(!log().contains("cannot notify"), "{}", log());
}

// --- the unit ---------------------------------------------------------------

/// dist/ironlun.service with ExecStart's /usr/bin/ironlun replaced by
/// `bin`, so that systemd-analyze finds the program it names.
fn unit_running(bin: &str) -> String {
    let unit = std::fs::read_to_string(repo().join("dist/ironlun.service")).unwrap();
    let exec = "\nExecStart=/usr/bin/ironlun target --config /etc/ironlun/ironlun.toml\n";
    assert_eq!(
        unit.matches(exec).count(),
        1,
        "the unit's ExecStart changed"
    );
    unit.replace(exec, &exec.replace("/usr/bin/ironlun", bin))
}

/// `systemd-analyze verify` on `unit`, written as ironlun.service in a
/// fresh directory: clean means exit 0 and nothing said (it exits 0 on
/// unknown keys and unparsable values, and only warns).
fn verify(unit: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ironlun.service");
    std::fs::write(&path, unit).unwrap();
    let analyze = tool("systemd-analyze", "systemd");
    let (rc, out) = run(&analyze, &["verify", path.to_str().unwrap()]);
    match (rc, out.trim()) {
        (0, "") => Ok(()),
        _ => Err(format!("exit {rc}: {out}")),
    }
}

#[test]
fn the_unit_verifies_clean_and_broken_copies_do_not() {
    let unit = unit_running(support::ironlun_bin());
    verify(&unit).unwrap_or_else(|e| panic!("dist/ironlun.service: {e}"));
    let broken = [
        (unit.replace("Type=notify", "Type=notfy"), "notfy"),
        (
            unit.replace("ProtectSystem=strict", "ProtectSytem=strict"),
            "ProtectSytem",
        ),
        (unit_running("/nonexistent/ironlun"), "/nonexistent/ironlun"),
    ];
    for (copy, named) in broken {
        let e = verify(&copy).expect_err(named);
        assert!(e.contains(named), "{named}: {e}");
    }
}

/// The unit's sandbox, as `systemd-analyze security` scores it (0 is
/// the most confined, 10 the least): it must not loosen unnoticed.
#[test]
fn the_unit_stays_confined() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ironlun.service");
    std::fs::write(&path, unit_running(support::ironlun_bin())).unwrap();
    let analyze = tool("systemd-analyze", "systemd");
    let path = path.to_str().unwrap();
    let (rc, out) = run(
        &analyze,
        &["security", "--offline=true", "--threshold=25", path],
    );
    assert_eq!(rc, 0, "exposure above 2.5:\n{out}");
    let loose = unit_running(support::ironlun_bin())
        .replace("CapabilityBoundingSet=CAP_NET_BIND_SERVICE\n", "");
    std::fs::write(path, loose).unwrap();
    let (rc, out) = run(
        &analyze,
        &["security", "--offline=true", "--threshold=25", path],
    );
    assert_ne!(rc, 0, "every capability back and still under 2.5:\n{out}");
}

// --- the default configuration ------------------------------------------------

fn check(config: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(support::ironlun_bin())
        .args(["target", "--config", config.to_str().unwrap(), "--check"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// What `--check` prints for dist/ironlun.toml as shipped: one RAM LUN
/// on loopback only, state and the management socket in /var/lib/ironlun.
fn assert_default_config(out: &str) {
    assert!(
        out.contains("configuration OK: 1 target(s), 1 LUN(s)"),
        "{out}"
    );
    for line in [
        "listen = [\"127.0.0.1:3260\"]",
        "state_dir = \"/var/lib/ironlun\"",
        "admin_socket = \"/var/lib/ironlun/admin.sock\"",
        "spec = \"ram:64MiB\"",
    ] {
        assert!(out.lines().any(|l| l == line), "{line}:\n{out}");
    }
}

/// `--check` of the example: it loads, and the only problems are its
/// LUNs' stores, which are examples (a device this host has not; a file
/// in /var/lib/ironlun, which is there where the package is installed).
fn assert_example_checks(out: &str) {
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("error: ")).collect();
    assert!(
        errors
            .iter()
            .any(|l| l.contains("wwn-0x5000c500a1b2c3d4: no such device")),
        "{out}"
    );
    assert!(
        errors
            .iter()
            .all(|l| l.starts_with("error: target iqn.2026-11.io.ironlun:store1 LUN ")),
        "{out}"
    );
    assert!(out.contains("chap = \"host-user:<hidden>\""), "{out}");
    assert!(!out.contains("a-secret-of-16b"), "{out}");
}

/// The configuration with its example switched on: one `#` taken off
/// every line from "# [[target]]" on.
fn with_example(config: &str) -> String {
    let at = config.find("\n# [[target]]").expect("the example") + 1;
    let (head, example) = config.split_at(at);
    let lines = example.lines().map(|l| match l {
        "#" => "",
        l => l.strip_prefix("# ").unwrap_or(l),
    });
    format!("{head}{}\n", lines.collect::<Vec<_>>().join("\n"))
}

#[test]
fn the_default_configuration_and_its_example_load() {
    let shipped = repo().join("dist/ironlun.toml");
    let (rc, out) = check(&shipped, &[]);
    assert_eq!(rc, 0, "{out}");
    assert_default_config(&out);

    let dir = tempfile::tempdir().unwrap();
    let example = dir.path().join("example.toml");
    let text = with_example(&std::fs::read_to_string(&shipped).unwrap());
    std::fs::write(&example, &text).unwrap();
    let secret = [("STORE1_CHAP", "host-user:a-secret-of-16b")];
    let (rc, out) = check(&example, &secret);
    assert_eq!(rc, 2, "{text}\n{out}");
    assert_example_checks(&out);
    let (rc, out) = check(&example, &[]);
    assert_eq!(rc, 2, "{out}");
    assert!(out.contains("STORE1_CHAP is not set"), "{out}");

    // The literal secret instead: refused while the file is readable by
    // everyone, as the comment says, and loaded once it is not.
    let literal = text
        .replace("chap_env = \"STORE1_CHAP\"\n", "")
        .replace("# chap = ", "chap = ");
    std::fs::write(&example, literal).unwrap();
    std::fs::set_permissions(&example, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (rc, out) = check(&example, &[]);
    assert_eq!(rc, 2, "{out}");
    std::fs::set_permissions(&example, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (rc, out) = check(&example, &[]);
    assert_eq!(rc, 2, "{out}");
    assert_example_checks(&out);
}

// --- the Debian package ---------------------------------------------------

/// `cargo deb --no-build --fast` on the release binary already built,
/// into `dir`, after scripts/deb-assets wrote the manual pages and
/// completions: the package and its -dbgsym, and how long it took.
/// (`--fast` is a lighter xz level: the same files, sooner.)
fn cargo_deb(dir: &Path) -> (String, Duration) {
    let (rc, out) = run(repo().join("scripts/deb-assets").to_str().unwrap(), &[]);
    assert_eq!(rc, 0, "scripts/deb-assets: {out}");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let started = Instant::now();
    let out = Command::new(cargo)
        .current_dir(repo())
        .args(["deb", "--no-build", "--locked", "--fast", "--output"])
        .arg(format!("{}/", dir.display()))
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "cargo deb failed (cargo-deb: scripts/deps.sh; the release binary: cargo build --release):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let version = env!("CARGO_PKG_VERSION");
    let deb = dir.join(format!("ironlun_{version}-1_amd64.deb"));
    let dbgsym = dir.join(format!("ironlun-dbgsym_{version}-1_amd64.ddeb"));
    assert!(
        deb.exists() && dbgsym.exists(),
        "{:?}",
        std::fs::read_dir(dir).unwrap().collect::<Vec<_>>()
    );
    (deb.display().to_string(), took)
}

fn dpkg_deb(args: &[&str]) -> String {
    let (rc, out) = run(&tool("dpkg-deb", "dpkg"), args);
    assert_eq!(rc, 0, "dpkg-deb {args:?}: {out}");
    out
}

/// The control part: name, a libc dependency, the conffile, and
/// cargo-deb's systemd scripts (enable and start on install).
fn assert_control(deb: &str) {
    let info = dpkg_deb(&["--info", deb]);
    assert!(info.contains(" Package: ironlun\n"), "{info}");
    assert!(info.contains(" Depends: libc6"), "{info}");
    let conffiles = dpkg_deb(&["--info", deb, "conffiles"]);
    assert_eq!(conffiles.trim(), "/etc/ironlun/ironlun.toml");
    let postinst = dpkg_deb(&["--info", deb, "postinst"]);
    assert!(
        postinst.contains("deb-systemd-helper enable ironlun.service"),
        "{postinst}"
    );
    assert!(
        postinst.contains("deb-systemd-invoke $_dh_action ironlun.service"),
        "{postinst}"
    );
}

fn assert_contents(deb: &str) {
    let contents = dpkg_deb(&["--contents", deb]);
    for path in [
        "./usr/bin/ironlun",
        "./usr/lib/systemd/system/ironlun.service",
        "./etc/ironlun/ironlun.toml",
        "./usr/share/doc/ironlun/admin.md",
        "./usr/share/doc/ironlun/config.md",
        "./usr/share/ironlun/grafana/grafana-ironlun.json",
    ] {
        let line = contents.lines().find(|l| l.ends_with(&format!(" {path}")));
        let line = line.unwrap_or_else(|| panic!("{path} not in the package:\n{contents}"));
        let mode = if path == "./usr/bin/ironlun" {
            "-rwxr-xr-x"
        } else {
            "-rw-r--r--"
        };
        assert!(line.starts_with(mode), "{line}");
    }
}

/// The manual pages (gzipped, one per command) and the completions for
/// bash, zsh and fish, as scripts/deb-assets made them from the binary.
fn assert_manual_and_completions(deb: &str, root: &Path) {
    let contents = dpkg_deb(&["--contents", deb]);
    let pages = contents
        .lines()
        .filter(|l| l.contains(" ./usr/share/man/man1/ironlun") && l.ends_with(".1.gz"))
        .count();
    assert!(pages > 30, "{pages} manual pages:\n{contents}");
    for (path, needle) in [
        ("usr/share/bash-completion/completions/ironlun", "_ironlun"),
        (
            "usr/share/zsh/vendor-completions/_ironlun",
            "#compdef ironlun",
        ),
        (
            "usr/share/fish/vendor_completions.d/ironlun.fish",
            "complete -c ironlun",
        ),
    ] {
        let text = std::fs::read_to_string(root.join(path))
            .unwrap_or_else(|e| panic!("{path}: {e}:\n{contents}"));
        assert!(text.contains(needle) && text.contains("readcap"), "{path}");
    }
    for page in [
        "ironlun.1.gz",
        "ironlun-target.1.gz",
        "ironlun-admin-lun-add.1.gz",
    ] {
        let p = root.join("usr/share/man/man1").join(page);
        let (rc, text) = run("/bin/zcat", &[p.to_str().unwrap()]);
        assert_eq!(rc, 0, "{page}: {text}");
        assert!(text.contains(".TH"), "{page}: {text}");
    }
}

/// The unpacked files are dist/'s, and the binary runs and checks the
/// installed configuration.
fn assert_installed(root: &Path) {
    for (installed, source) in [
        (
            "usr/lib/systemd/system/ironlun.service",
            "dist/ironlun.service",
        ),
        ("etc/ironlun/ironlun.toml", "dist/ironlun.toml"),
        (
            "usr/share/ironlun/grafana/grafana-ironlun.json",
            "dist/grafana-ironlun.json",
        ),
    ] {
        let a = std::fs::read(root.join(installed)).unwrap();
        assert!(
            a == std::fs::read(repo().join(source)).unwrap(),
            "{installed}"
        );
    }
    let bin = root.join("usr/bin/ironlun");
    let bin = bin.to_str().unwrap();
    let (rc, out) = run(bin, &["--version"]);
    assert_eq!(
        (rc, out.trim()),
        (0, concat!("ironlun ", env!("CARGO_PKG_VERSION")))
    );
    let config = root.join("etc/ironlun/ironlun.toml");
    let (rc, out) = run(
        bin,
        &["target", "--config", config.to_str().unwrap(), "--check"],
    );
    assert_eq!(rc, 0, "{out}");
    assert_default_config(&out);
}

/// `systemd-analyze verify` on the unit as installed in `root`, its
/// ExecStart= resolved there (so /usr/bin/ironlun must be the package's).
/// ExecReload='s /bin/kill comes from procps on a real system: the
/// host's is copied in. The scratch root has no system units, so errors
/// of the units ironlun.service depends on (sysinit.target not found)
/// are left out; its own are not.
fn verify_installed(root: &Path) -> Result<(), String> {
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy("/bin/kill", root.join("bin/kill")).unwrap();
    let analyze = tool("systemd-analyze", "systemd");
    let root_arg = format!("--root={}", root.display());
    let unit = "/usr/lib/systemd/system/ironlun.service";
    let (rc, out) = run(
        &analyze,
        &["verify", "--recursive-errors=no", &root_arg, unit],
    );
    match (rc, out.trim()) {
        (0, "") => Ok(()),
        _ => Err(format!("exit {rc}: {out}")),
    }
}

/// Run by scripts/test after the release build (`--ignored`): building a
/// package needs cargo-deb and target/release/ironlun.
#[test]
#[ignore = "needs cargo-deb and the release binary: scripts/test runs it"]
fn the_debian_package_installs_binary_unit_and_conffile() {
    let dir = tempfile::tempdir().unwrap();
    let (deb, took) = cargo_deb(dir.path());
    eprintln!(
        "cargo deb --no-build --fast took {:.1} s",
        took.as_secs_f64()
    );
    assert_control(&deb);
    assert_contents(&deb);
    let root = dir.path().join("root");
    let (rc, out) = run(&tool("dpkg", "dpkg"), &["-x", &deb, root.to_str().unwrap()]);
    assert_eq!(rc, 0, "dpkg -x: {out}");
    assert_installed(&root);
    assert_manual_and_completions(&deb, &root);
    verify_installed(&root).unwrap_or_else(|e| panic!("the installed unit: {e}"));
    // The same check fails when the package's binary is not there.
    std::fs::remove_file(root.join("usr/bin/ironlun")).unwrap();
    let e = verify_installed(&root).expect_err("verified without /usr/bin/ironlun");
    assert!(e.contains("/usr/bin/ironlun is not executable"), "{e}");
}
