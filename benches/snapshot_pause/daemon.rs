//! The daemon under test: `ironlun target` from a configuration of one
//! target with one LUN, its log in `DIR/target.log`, stopped at the end.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ironlun_admin_client::{Client as AdminClient, Endpoint};

/// How long the daemon may take to open its LUN and listen.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// The target's name.
pub const TARGET: &str = "iqn.2026-11.io.ironlun.snap:t";

pub struct Daemon {
    child: Child,
    port: u16,
    pub socket: PathBuf,
}

impl Daemon {
    /// Writes the configuration into `dir` (made if missing) and starts
    /// the daemon from it; returns once the API answers.
    pub fn start(ironlun: &Path, dir: &Path, spec: &str) -> Result<Daemon, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let port = free_port()?;
        let socket = dir.join("admin.sock");
        let cfg = dir.join("ironlun.toml");
        let text = format!(
            "listen = [\"127.0.0.1:{port}\"]\nadmin_socket = \"{}\"\n\n\
             [[target]]\nname = \"{TARGET}\"\n[[target.lun]]\nspec = \"{spec}\"\n",
            socket.display()
        );
        std::fs::write(&cfg, text).map_err(|e| e.to_string())?;
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

    /// LUN 0's URL.
    pub fn url(&self) -> String {
        format!("iscsi://127.0.0.1:{}/{TARGET}/0", self.port)
    }

    /// SIGTERM, then the exit (bounded: SIGKILL after 30 s).
    pub fn stop(mut self) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on our own child's pid, which has not been
        // waited for yet, so it names no other process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
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
