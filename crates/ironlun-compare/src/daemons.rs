//! The targets under comparison, as the processes users would run:
//! `tgtd` configured with `tgtadm`, `ironlun target`, and `istgt` with its
//! configuration file ([`crate::istgt`]). Each exports a tmpfs file LUN,
//! and tgt and ironlun a null LUN (istgt has none); all are stopped when
//! dropped.

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
    /// `tgt`, `ironlun` or `istgt`.
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
    /// How many targets tgtd has (tids 1..=N), deleted before it stops.
    tgt_targets: usize,
    /// istgt's configuration directory, removed when it stops.
    conf_dir: Option<PathBuf>,
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
        let file_iqn = "iqn.2026-11.io.ironlun.compare:tgt-file";
        let null_iqn = "iqn.2026-11.io.ironlun.compare:tgt-null";
        let path = file.to_string_lossy().into_owned();
        let mut d = Daemon::start_tgt_with(
            addr,
            &[
                (file_iqn, vec![TgtLun::plain(&path)]),
                (null_iqn, vec![TgtLun::null()]),
            ],
        )?;
        d.file_iqn = file_iqn.into();
        d.null_iqn = null_iqn.into();
        Ok(d)
    }

    /// Starts tgtd on `addr` with targets (tid 1, 2, ...) named as given,
    /// each with its LUNs numbered from 1 (tgt keeps LUN 0 for its
    /// controller), open to every initiator.
    pub fn start_tgt_with(
        addr: SocketAddr,
        targets: &[(&str, Vec<TgtLun>)],
    ) -> Result<Daemon, String> {
        Daemon::start_tgt_on(addr, targets, None)
    }

    /// [`Daemon::start_tgt_with`] on the CPUs `cpus` (a `taskset -c`
    /// list; `None`: anywhere).
    pub fn start_tgt_on(
        addr: SocketAddr,
        targets: &[(&str, Vec<TgtLun>)],
        cpus: Option<&str>,
    ) -> Result<Daemon, String> {
        // A control port of our own, so a tgtd the system runs is untouched.
        let control = 20_000 + std::process::id() % 10_000;
        let child = crate::pin::command("tgtd", cpus)
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
            file_iqn: String::new(),
            null_iqn: String::new(),
            file_lun: 1,
            null_lun: 1,
            control: Some(control),
            tgt_targets: 0,
            conf_dir: None,
        };
        d.wait_listening()?;
        for (t, (iqn, luns)) in targets.iter().enumerate() {
            let tid = (t + 1).to_string();
            d.tgtadm(&["--op", "new", "--mode", "target", "--tid", &tid, "-T", iqn])?;
            d.tgt_targets = t + 1;
            for (l, lun) in luns.iter().enumerate() {
                let n = (l + 1).to_string();
                let mut args = vec![
                    "--op",
                    "new",
                    "--mode",
                    "logicalunit",
                    "--tid",
                    &tid,
                    "--lun",
                    &n,
                    "-b",
                    &lun.path,
                ];
                if let Some(t) = lun.bstype {
                    args.extend(["-E", t]);
                }
                if let Some(f) = lun.bsoflags {
                    args.extend(["--bsoflags", f]);
                }
                if let Some(o) = &lun.bsopts {
                    args.extend(["--bsopts", o.as_str()]);
                }
                d.tgtadm(&args)?;
            }
            d.tgtadm(&[
                "--op", "bind", "--mode", "target", "--tid", &tid, "-I", "ALL",
            ])?;
        }
        Ok(d)
    }

    /// Starts `ironlun target` (the binary at `exe`) on `addr` with the
    /// file LUN (LUN 0) and a null LUN of tgt's size (LUN 1).
    pub fn start_ironlun(exe: &Path, addr: SocketAddr, file: &Path) -> Result<Daemon, String> {
        let iqn = "iqn.2026-11.io.ironlun.compare:ironlun";
        let luns = [
            format!("file:{}", file.display()),
            format!("null:{NULL_LUN_BYTES}"),
        ];
        let mut d = Daemon::start_ironlun_with(exe, addr, iqn, &luns, &[])?;
        d.file_lun = 0;
        d.null_lun = 1;
        Ok(d)
    }

    /// Starts `ironlun target` on `addr` as target `iqn` with these LUN
    /// specs (numbered from 0) and extra arguments.
    pub fn start_ironlun_with(
        exe: &Path,
        addr: SocketAddr,
        iqn: &str,
        luns: &[String],
        extra: &[&str],
    ) -> Result<Daemon, String> {
        Daemon::start_ironlun_on(exe, addr, iqn, luns, extra, None)
    }

    /// [`Daemon::start_ironlun_with`] on the CPUs `cpus` (a `taskset -c`
    /// list; `None`: anywhere).
    pub fn start_ironlun_on(
        exe: &Path,
        addr: SocketAddr,
        iqn: &str,
        luns: &[String],
        extra: &[&str],
        cpus: Option<&str>,
    ) -> Result<Daemon, String> {
        let mut cmd = crate::pin::command(exe, cpus);
        cmd.args(["target", "--log", "warn", "--name", iqn])
            .arg("--listen")
            .arg(addr.to_string());
        for l in luns {
            cmd.arg("--lun").arg(l);
        }
        let child = cmd
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let mut d = Daemon {
            name: "ironlun",
            child,
            addr,
            file_iqn: iqn.to_owned(),
            null_iqn: iqn.to_owned(),
            file_lun: 0,
            null_lun: 0,
            control: None,
            tgt_targets: 0,
            conf_dir: None,
        };
        d.wait_listening()?;
        Ok(d)
    }

    /// Starts istgt in the foreground (`istgt -D -c CONF`) on `addr` with
    /// `file` as LUN 0 of [`crate::istgt::FILE_IQN`], its configuration
    /// in a directory of its own under `dir`. istgt has no null LUN:
    /// [`Daemon::serves`] says so.
    pub fn start_istgt(addr: SocketAddr, file: &Path, dir: &Path) -> Result<Daemon, String> {
        let conf = crate::istgt::Config {
            addr,
            iqn: crate::istgt::FILE_IQN.to_owned(),
            storage: file.to_owned(),
            size: crate::istgt::Size::Auto,
            dir: crate::istgt::conf_dir(dir, addr),
        };
        let path = conf.write()?;
        let child = Command::new("istgt")
            .arg("-D")
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start istgt (Debian package istgt): {e}"))?;
        let mut d = Daemon {
            name: "istgt",
            child,
            addr,
            file_iqn: conf.iqn,
            null_iqn: String::new(),
            file_lun: 0,
            null_lun: 0,
            control: None,
            tgt_targets: 0,
            conf_dir: Some(conf.dir),
        };
        d.wait_listening()?;
        Ok(d)
    }

    /// Whether this daemon has a LUN of kind `lun` (istgt has no null
    /// LUN).
    pub fn serves(&self, lun: LunKind) -> bool {
        match lun {
            LunKind::File => !self.file_iqn.is_empty(),
            LunKind::Null => !self.null_iqn.is_empty(),
        }
    }

    /// The URL of LUN `lun` of target `iqn` on this daemon.
    pub fn lun_url(&self, iqn: &str, lun: u16) -> String {
        format!("iscsi://{}/{iqn}/{lun}", self.addr)
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

    /// Runs `tgtadm` against this tgtd (`--lld iscsi` and its control
    /// port given), e.g. to delete a LUN before the daemon stops.
    pub fn tgtadm(&self, args: &[&str]) -> Result<(), String> {
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

impl Daemon {
    /// Asks tgtd to exit: it ignores SIGTERM while it has targets, so
    /// each is deleted (`--force` closes its sessions), then the system.
    /// Best effort: Drop falls back to SIGKILL.
    fn stop_tgt(&self) {
        for tid in 1..=self.tgt_targets {
            let tid = tid.to_string();
            let _ = self.tgtadm(&[
                "--op", "delete", "--force", "--mode", "target", "--tid", &tid,
            ]);
        }
        let _ = self.tgtadm(&["--op", "delete", "--mode", "system"]);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.control.is_some() {
            self.stop_tgt();
        }
        // SIGTERM lets both daemons close their sessions.
        crate::clients::signal(&self.child, rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.conf_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A LUN of tgt: a backing file or device (or `POOL/IMAGE` for rbd), its
/// backing store type (`-E`: rdwr when `None`, aio, null, rbd), its open
/// flags (`--bsoflags`) and its store's options (`--bsopts`, rbd's
/// `conf=…;id=…`).
#[derive(Clone, Debug, Default)]
pub struct TgtLun {
    pub path: String,
    pub bstype: Option<&'static str>,
    pub bsoflags: Option<&'static str>,
    pub bsopts: Option<String>,
}

impl TgtLun {
    pub fn plain(path: &str) -> TgtLun {
        TgtLun {
            path: path.to_owned(),
            ..TgtLun::default()
        }
    }

    /// tgt's null backing store (1 TiB, [`NULL_LUN_BYTES`]).
    pub fn null() -> TgtLun {
        TgtLun {
            path: "N".to_owned(),
            bstype: Some("null"),
            ..TgtLun::default()
        }
    }
}

/// A loopback address with a port free right now.
pub fn free_loopback_addr() -> Result<SocketAddr, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map_err(|e| e.to_string())
}

/// The LUN files: one per target, equal size, filled with the same
/// non-zero pattern so all serve allocated pages (a hole on tmpfs reads
/// as the zero page, which would flatter whichever target read holes).
pub struct LunFiles {
    dir: PathBuf,
    pub tgt: PathBuf,
    pub ironlun: PathBuf,
    /// istgt's, when it is compared.
    pub istgt: Option<PathBuf>,
}

impl LunFiles {
    pub fn create(dir: &Path, size: u64) -> Result<LunFiles, String> {
        LunFiles::create_for(dir, size, false)
    }

    /// [`LunFiles::create`], with a file for istgt too when `istgt`.
    pub fn create_for(dir: &Path, size: u64, istgt: bool) -> Result<LunFiles, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let files = LunFiles {
            dir: dir.to_owned(),
            tgt: dir.join("tgt.img"),
            ironlun: dir.join("ironlun.img"),
            istgt: istgt.then(|| dir.join("istgt.img")),
        };
        for p in [&files.tgt, &files.ironlun]
            .into_iter()
            .chain(files.istgt.as_ref())
        {
            fill_file(p, size)?;
        }
        Ok(files)
    }
}

/// Writes `size` bytes of the comparison's non-zero pattern to `path`
/// (every page allocated, the same content for every target).
pub fn fill_file(path: &Path, size: u64) -> Result<(), String> {
    use std::io::Write;
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8 + 1).collect();
    let mut f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(chunk.get(..n).unwrap_or(&chunk))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        left -= n as u64;
    }
    Ok(())
}

/// Writes `path` back and drops its pages from the page cache
/// (`posix_fadvise(POSIX_FADV_DONTNEED)` after `fsync`), so a target
/// reads it from the disk and its own memory limit, not the writer's
/// cache, decides what stays cached.
pub fn drop_cached(path: &Path) -> Result<(), String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.sync_all()
        .map_err(|e| format!("{}: fsync: {e}", path.display()))?;
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)
        .map_err(|e| format!("{}: fadvise: {e}", path.display()))
}

impl Drop for LunFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.tgt);
        let _ = std::fs::remove_file(&self.ironlun);
        if let Some(p) = &self.istgt {
            let _ = std::fs::remove_file(p);
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
