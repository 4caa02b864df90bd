//! The daemon under test: a configuration of N targets with one null LUN
//! each, `ironlun target` started from it, and stopped at the end.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ironlun_admin_client::{Client as AdminClient, Endpoint};

/// How long the daemon may take to open its LUNs and listen.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// Target `i`'s name.
pub fn target_name(i: usize) -> String {
    format!("iqn.2026-11.io.ironlun.cp:t{i:04}")
}

/// The configuration: `targets` targets, each one `null:1GiB` LUN.
pub fn config(port: u16, socket: &Path, targets: usize) -> String {
    let mut s = format!(
        "listen = [\"127.0.0.1:{port}\"]\nadmin_socket = \"{}\"\n",
        socket.display()
    );
    for i in 0..targets {
        let _ = write!(
            s,
            "\n[[target]]\nname = \"{}\"\n[[target.lun]]\nspec = \"null:1GiB\"\n",
            target_name(i)
        );
    }
    s
}

pub struct Daemon {
    child: Child,
    pub port: u16,
    pub socket: PathBuf,
}

impl Daemon {
    /// Writes the configuration into `dir` and starts the daemon from it
    /// (its log in `dir/target.log`); returns once the API answers.
    pub fn start(ironlun: &Path, dir: &Path, targets: usize) -> Result<Daemon, String> {
        let port = free_port()?;
        let socket = dir.join("admin.sock");
        let cfg = dir.join("ironlun.toml");
        std::fs::write(&cfg, config(port, &socket, targets)).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("target.log")).map_err(|e| e.to_string())?;
        let child = Command::new(ironlun)
            .arg("target")
            .arg("--config")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{}: {e}", ironlun.display()))?;
        let mut d = Daemon {
            child,
            port,
            socket,
        };
        d.wait_ready()?;
        Ok(d)
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Err(format!("ironlun target exited: {st}"));
            }
            let answered = AdminClient::connect(Endpoint::Socket(self.socket.clone()))
                .and_then(|mut c| c.call("GET", "/v1/state", None))
                .is_ok_and(|a| a.status == 200);
            if answered {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("ironlun target: the management API did not answer".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, target: usize, lun: u16) -> String {
        format!(
            "iscsi://127.0.0.1:{}/{}/{lun}",
            self.port,
            target_name(target)
        )
    }

    /// SIGTERM, then the exit (bounded: SIGKILL after 20 s).
    pub fn stop(mut self) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on our own child's pid, which has not been
        // waited for yet, so it names no other process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("a free port: {e}"))
}
