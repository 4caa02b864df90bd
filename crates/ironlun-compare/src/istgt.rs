//! istgt, the second peer target: its configuration file, the daemon
//! started in the foreground (`istgt -D -c CONF`), and which
//! of the comparison's runs it cannot serve.
//!
//! istgt (Debian package `istgt`, 0.4 of 2011, from FreeBSD) is configured
//! only by its file: one `[LogicalUnitN]` per target, with `LUN0 Storage
//! PATH SIZE` backed by a regular file or a raw block device (`Auto`
//! takes the file's or device's own size). It has **no null backing
//! store**, so the comparison's null-LUN rows are "not supported by
//! istgt". It stops on SIGTERM.

use std::fmt::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::workloads::LunKind;

/// The target name the comparison gives istgt's file LUN.
pub const FILE_IQN: &str = "iqn.2026-11.io.ironlun.compare:istgt-file";

/// Sessions istgt accepts (its `MaxSessions`): the scaling runs go to 64.
pub const MAX_SESSIONS: u32 = 128;

/// Commands istgt queues per LUN (`QueueDepth`, at most 255): above the
/// deepest workload (QD 64), so the target never caps the client's window.
pub const QUEUE_DEPTH: u32 = 128;

/// The size of a `LUN0 Storage` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// The file's or block device's own size (istgt's `Auto`).
    Auto,
    /// This many MiB (istgt's `NMB`; istgt's units are powers of 1024).
    Mib(u64),
}

/// One istgt instance's configuration: one portal on `addr`, open to
/// initiators on loopback, one target `iqn` whose LUN 0 is `storage`.
#[derive(Clone, Debug)]
pub struct Config {
    pub addr: SocketAddr,
    pub iqn: String,
    /// A regular file or a raw block device.
    pub storage: PathBuf,
    pub size: Size,
    /// Where istgt writes its PID file (and would look for media).
    pub dir: PathBuf,
}

impl Config {
    /// The file's text (istgt.conf, see /usr/share/doc/istgt/examples).
    /// No authentication (the other targets have none either), no
    /// digests, the study's defaults otherwise.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let dir = self.dir.display();
        let _ = writeln!(s, "# written by ironlun compare-peers");
        let _ = writeln!(s, "[Global]");
        let _ = writeln!(s, "  NodeBase \"iqn.2026-11.io.ironlun.compare\"");
        let _ = writeln!(s, "  PidFile {dir}/istgt.pid");
        let _ = writeln!(s, "  AuthFile {dir}/auth.conf");
        let _ = writeln!(s, "  MediaDirectory {dir}");
        let _ = writeln!(s, "  Timeout 30");
        let _ = writeln!(s, "  NopInInterval 20");
        let _ = writeln!(s, "  DiscoveryAuthMethod None");
        let _ = writeln!(s, "  MaxSessions {MAX_SESSIONS}");
        let _ = writeln!(s, "  MaxConnections 4");
        // No [UnitControl] portal: istgtcontrol is not used.
        let _ = writeln!(s, "[UnitControl]");
        let _ = writeln!(s, "  AuthMethod None");
        let _ = writeln!(s, "[PortalGroup1]");
        let _ = writeln!(s, "  Portal DA1 {}", self.addr);
        let _ = writeln!(s, "[InitiatorGroup1]");
        let _ = writeln!(s, "  InitiatorName \"ALL\"");
        let _ = writeln!(s, "  Netmask 127.0.0.0/8");
        let _ = writeln!(s, "[LogicalUnit1]");
        let _ = writeln!(s, "  TargetName {}", self.iqn);
        let _ = writeln!(s, "  Mapping PortalGroup1 InitiatorGroup1");
        let _ = writeln!(s, "  AuthMethod None");
        let _ = writeln!(s, "  UseDigest Auto");
        let _ = writeln!(s, "  UnitType Disk");
        let _ = writeln!(s, "  QueueDepth {QUEUE_DEPTH}");
        let size = match self.size {
            Size::Auto => "Auto".to_owned(),
            Size::Mib(n) => format!("{n}MB"),
        };
        let _ = writeln!(s, "  LUN0 Storage {} {size}", self.storage.display());
        s
    }

    /// Writes the configuration (and the empty auth file it names) into
    /// `self.dir`; returns the configuration's path.
    pub fn write(&self) -> Result<PathBuf, String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let auth = self.dir.join("auth.conf");
        std::fs::write(&auth, "").map_err(|e| format!("{}: {e}", auth.display()))?;
        let conf = self.dir.join("istgt.conf");
        std::fs::write(&conf, self.text()).map_err(|e| format!("{}: {e}", conf.display()))?;
        Ok(conf)
    }
}

/// Why istgt cannot serve a LUN of kind `lun`, when it cannot.
pub fn unsupported_lun(lun: LunKind) -> Option<&'static str> {
    match lun {
        LunKind::File => None,
        LunKind::Null => Some("not supported by istgt (it has no null backing store)"),
    }
}

/// Whether a client's failure against istgt says istgt rejected a SCSI
/// command (CHECK CONDITION with ILLEGAL REQUEST: an opcode or field it
/// does not implement, SPC-5 §4.4.5) rather than a fault of the run; the
/// row then says "not supported by istgt" with the client's words.
pub fn unsupported_command(err: &str) -> Option<String> {
    let e = err.to_ascii_uppercase();
    let rejected = [
        "ILLEGAL_REQUEST",
        "ILLEGAL REQUEST",
        "INVALID_OPERATION",
        "INVALID OPCODE",
    ]
    .iter()
    .any(|k| e.contains(k));
    rejected.then(|| {
        let first = err
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("");
        let short: String = first.chars().take(120).collect();
        format!("not supported by istgt ({short})")
    })
}

/// Whether the istgt binary is on PATH.
pub fn installed() -> bool {
    std::process::Command::new("istgt")
        .arg("-V")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// Where istgt's files for the daemon on `addr` go under `dir`.
pub fn conf_dir(dir: &Path, addr: SocketAddr) -> PathBuf {
    dir.join(format!("istgt-{}", addr.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(size: Size) -> Config {
        Config {
            addr: "127.0.0.1:13260".parse().unwrap(),
            iqn: "iqn.2026-11.test:t".into(),
            storage: "/dev/shm/c/istgt.img".into(),
            size,
            dir: "/dev/shm/c/istgt-13260".into(),
        }
    }

    #[test]
    fn the_config_file_is_written_as_pinned() {
        let want = "# written by ironlun compare-peers
[Global]
  NodeBase \"iqn.2026-11.io.ironlun.compare\"
  PidFile /dev/shm/c/istgt-13260/istgt.pid
  AuthFile /dev/shm/c/istgt-13260/auth.conf
  MediaDirectory /dev/shm/c/istgt-13260
  Timeout 30
  NopInInterval 20
  DiscoveryAuthMethod None
  MaxSessions 128
  MaxConnections 4
[UnitControl]
  AuthMethod None
[PortalGroup1]
  Portal DA1 127.0.0.1:13260
[InitiatorGroup1]
  InitiatorName \"ALL\"
  Netmask 127.0.0.0/8
[LogicalUnit1]
  TargetName iqn.2026-11.test:t
  Mapping PortalGroup1 InitiatorGroup1
  AuthMethod None
  UseDigest Auto
  UnitType Disk
  QueueDepth 128
  LUN0 Storage /dev/shm/c/istgt.img Auto
";
        assert_eq!(config(Size::Auto).text(), want);
    }

    #[test]
    fn a_fixed_size_is_written_in_mib_and_a_device_path_as_given() {
        let mut c = config(Size::Mib(256));
        assert!(c
            .text()
            .ends_with("  LUN0 Storage /dev/shm/c/istgt.img 256MB\n"));
        c.storage = "/dev/loop7".into();
        c.size = Size::Auto;
        assert!(c.text().ends_with("  LUN0 Storage /dev/loop7 Auto\n"));
    }

    #[test]
    fn write_puts_the_config_and_an_empty_auth_file_in_its_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let mut c = config(Size::Auto);
        c.dir = tmp.path().join("istgt-1");
        let conf = c.write().unwrap();
        assert_eq!(std::fs::read_to_string(&conf).unwrap(), c.text());
        assert_eq!(
            std::fs::read_to_string(c.dir.join("auth.conf")).unwrap(),
            ""
        );
    }

    #[test]
    fn only_a_rejected_command_is_called_unsupported() {
        let e = "qemu-img bench failed: SENSE KEY:ILLEGAL_REQUEST(5) ASCQ:INVALID_OPERATION_CODE(0x2000)";
        let why = unsupported_command(e).unwrap();
        assert!(
            why.starts_with("not supported by istgt (qemu-img bench failed"),
            "{why}"
        );
        assert_eq!(unsupported_command("connection refused"), None);
        assert_eq!(unsupported_command("timed out"), None);
        assert_eq!(unsupported_lun(LunKind::File), None);
        assert!(unsupported_lun(LunKind::Null)
            .unwrap()
            .starts_with("not supported by istgt"));
    }
}
