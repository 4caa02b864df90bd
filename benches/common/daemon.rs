//! The daemon under test of the benches that start one (`control_plane`,
//! `snapshot_pause`, each including this file with `#[path]`): `ironlun
//! target` from a configuration the bench writes, on a free port with
//! its management socket in the bench's directory and its log in
//! `DIR/target.log`; ready once the API answers, stopped at the end.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ironlun_admin_client::{Client as AdminClient, Endpoint};

/// How long the daemon may take to open its LUNs and listen.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// How long it may take to stop after SIGTERM (flushing its LUNs)
/// before it is killed.
const STOP_WITHIN: Duration = Duration::from_secs(30);

pub struct Daemon {
    child: Child,
    pub port: u16,
    pub socket: PathBuf,
}

impl Daemon {
    /// Writes the configuration `config(port, socket)` into `dir` (made
    /// if missing) and starts the daemon from it; returns once the API
    /// answers.
    pub fn start(
        ironlun: &Path,
        dir: &Path,
        config: impl FnOnce(u16, &Path) -> String,
    ) -> Result<Daemon, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let port = free_port()?;
        let socket = dir.join("admin.sock");
        let cfg = dir.join("ironlun.toml");
        std::fs::write(&cfg, config(port, &socket)).map_err(|e| e.to_string())?;
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
        if let Err(e) = d.wait_ready() {
            d.stop();
            return Err(format!("{e} (its log: {}/target.log)", dir.display()));
        }
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

    /// SIGTERM, then the exit (bounded: SIGKILL after [`STOP_WITHIN`]).
    pub fn stop(mut self) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on our own child's pid, which has not been
        // waited for yet, so it names no other process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_WITHIN;
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
