//! The two targets under comparison, as the processes users would run:
//! `tgtd` configured with `tgtadm`, and `ironlun target`. Each exports a
//! tmpfs file LUN and a null LUN; both are stopped when dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::workloads::LunKind;

/// tgt's null backing store has a fixed size of 1 TiB (`bs_null.c`); the
/// ironlun null LUN is given the same.
pub const NULL_LUN_BYTES: u64 = 1 << 40;

/// How long a daemon may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Daemon {
    /// `tgt` or `ironlun`.
    pub name: &'static str,
    child: Child,
    addr: SocketAddr,
    file_iqn: String,
    null_iqn: String,
    /// LUN numbers of the file and null LUNs (tgt keeps LUN 0 for its
    /// controller).
    file_lun: u16,
    null_lun: u16,
    /// tgtd's control port (`-C`), for tgtadm.
    control: Option<u32>,
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, lun: LunKind) -> String {
        let (iqn, n) = match lun {
            LunKind::File => (&self.file_iqn, self.file_lun),
            LunKind::Null => (&self.null_iqn, self.null_lun),
        };
        format!("iscsi://{}/{iqn}/{n}", self.addr)
    }

    /// Starts tgtd on `addr` with the file LUN (rdwr backing store) on
    /// target 1 and a null LUN on target 2.
    pub fn start_tgt(addr: SocketAddr, file: &Path) -> Result<Daemon, String> {
        // A control port of our own, so a tgtd the system runs is untouched.
        let control = 20_000 + std::process::id() % 10_000;
        let child = Command::new("tgtd")
            .args(["-f", "-C", &control.to_string(), "--iscsi"])
            .arg(format!("portal={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start tgtd (Debian package tgt): {e}"))?;
        let mut d = Daemon {
            name: "tgt",
            child,
            addr,
            file_iqn: "iqn.2026-11.io.ironlun.compare:tgt-file".into(),
            null_iqn: "iqn.2026-11.io.ironlun.compare:tgt-null".into(),
            file_lun: 1,
            null_lun: 1,
            control: Some(control),
        };
        d.wait_listening()?;
        let file_iqn = d.file_iqn.clone();
        let null_iqn = d.null_iqn.clone();
        let path = file.to_string_lossy().into_owned();
        let steps: [&[&str]; 6] = [
            &[
                "--op", "new", "--mode", "target", "--tid", "1", "-T", &file_iqn,
            ],
            &[
                "--op",
                "new",
                "--mode",
                "logicalunit",
                "--tid",
                "1",
                "--lun",
                "1",
                "-b",
                &path,
            ],
            &[
                "--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL",
            ],
            &[
                "--op", "new", "--mode", "target", "--tid", "2", "-T", &null_iqn,
            ],
            &[
                "--op",
                "new",
                "--mode",
                "logicalunit",
                "--tid",
                "2",
                "--lun",
                "1",
                "-E",
                "null",
                "-b",
                "N",
            ],
            &[
                "--op", "bind", "--mode", "target", "--tid", "2", "-I", "ALL",
            ],
        ];
        for args in steps {
            d.tgtadm(args)?;
        }
        Ok(d)
    }

    /// Starts `ironlun target` (the binary at `exe`) on `addr` with the
    /// file LUN (LUN 0) and a null LUN of tgt's size (LUN 1).
    pub fn start_ironlun(exe: &Path, addr: SocketAddr, file: &Path) -> Result<Daemon, String> {
        let iqn = "iqn.2026-11.io.ironlun.compare:ironlun".to_owned();
        let child = Command::new(exe)
            .args(["target", "--log", "warn", "--name", &iqn])
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--lun")
            .arg(format!("file:{}", file.display()))
            .arg("--lun")
            .arg(format!("null:{NULL_LUN_BYTES}"))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let mut d = Daemon {
            name: "ironlun",
            child,
            addr,
            file_iqn: iqn.clone(),
            null_iqn: iqn,
            file_lun: 0,
            null_lun: 1,
            control: None,
        };
        d.wait_listening()?;
        Ok(d)
    }

    fn wait_listening(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("{} exited at start: {status}", self.name));
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} did not listen on {} within {START_TIMEOUT:?}",
                    self.name, self.addr
                ));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn tgtadm(&self, args: &[&str]) -> Result<(), String> {
        let control = self.control.ok_or("not a tgt daemon")?;
        // tgtd opens its control socket just after its portal; retry
        // briefly.
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let out = Command::new("tgtadm")
                .args(["-C", &control.to_string(), "--lld", "iscsi"])
                .args(args)
                .output()
                .map_err(|e| format!("cannot run tgtadm: {e}"))?;
            if out.status.success() {
                return Ok(());
            }
            let err = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            if Instant::now() > deadline || !err.contains("connect") {
                return Err(format!("tgtadm {}: {err}", args.join(" ")));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a PID we spawned and have not reaped yet
        // (the Child is still owned here), so it cannot name another
        // process; SIGTERM lets both daemons close their sessions.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback address with a port free right now.
pub fn free_loopback_addr() -> Result<SocketAddr, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map_err(|e| e.to_string())
}

/// The LUN files: one per target, equal size, filled with the same
/// non-zero pattern so both serve allocated pages (a hole on tmpfs reads
/// as the zero page, which would flatter whichever target read holes).
pub struct LunFiles {
    dir: PathBuf,
    pub tgt: PathBuf,
    pub ironlun: PathBuf,
}

impl LunFiles {
    pub fn create(dir: &Path, size: u64) -> Result<LunFiles, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let files = LunFiles {
            dir: dir.to_owned(),
            tgt: dir.join("tgt.img"),
            ironlun: dir.join("ironlun.img"),
        };
        let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8 + 1).collect();
        for p in [&files.tgt, &files.ironlun] {
            use std::io::Write;
            let mut f = std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let mut left = size;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                f.write_all(chunk.get(..n).unwrap_or(&chunk))
                    .map_err(|e| format!("{}: {e}", p.display()))?;
                left -= n as u64;
            }
        }
        Ok(files)
    }
}

impl Drop for LunFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.tgt);
        let _ = std::fs::remove_file(&self.ironlun);
        let _ = std::fs::remove_dir(&self.dir);
    }
}
