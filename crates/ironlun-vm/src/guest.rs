//! One boot of the guest: the cached image plus an overlay archive holding
//! `/init`, `/lib.sh`, the case script and its variables, run headless
//! under QEMU with a hard time budget. The guest reaches the host's
//! loopback through QEMU's user-mode network (10.0.2.2 is the host's
//! 127.0.0.1; QEMU opens no listening socket).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::cases::Case;
use crate::cpio::Newc;
use crate::image::Image;
use crate::VmError;

const INIT: &str = include_str!("../assets/init");
const LIB: &str = include_str!("../assets/lib.sh");

/// Files `/lib.sh`'s `write_files` writes on each LUN (one per size in
/// its list; a test below keeps the two in step).
pub const WRITE_FILES: usize = 8;

/// Marker of an evidence line on the guest console.
pub const KV_MARK: &str = "IRONLUN-VM-KV ";
/// Marker of the case's exit status.
pub const RESULT_MARK: &str = "IRONLUN-VM-RESULT rc=";

/// How the guest CPU is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualisation.
    Kvm,
    /// QEMU's binary translation (slow, works everywhere).
    Tcg,
}

impl Accel {
    /// KVM only where it really works: `/dev/kvm` opens and the CPU
    /// advertises vmx or svm. (A `/dev/kvm` backed by kvm_pvm, without
    /// either flag, hangs a stock kernel.) `IRONLUN_VM_ACCEL=tcg|kvm`
    /// overrides.
    pub fn detect() -> Accel {
        match std::env::var("IRONLUN_VM_ACCEL").as_deref() {
            Ok("tcg") => return Accel::Tcg,
            Ok("kvm") => return Accel::Kvm,
            _ => {}
        }
        let dev_ok = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")
            .is_ok();
        let flags = std::fs::read_to_string("/proc/cpuinfo")
            .map(|c| {
                c.lines()
                    .filter(|l| l.starts_with("flags"))
                    .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"))
            })
            .unwrap_or(false);
        if dev_ok && flags {
            Accel::Kvm
        } else {
            Accel::Tcg
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// What to boot.
pub struct Boot<'a> {
    pub image: &'a Image,
    pub case: &'a Case,
    /// Variables for the case (`PORTAL_PORT`, `TARGET_IQN`, ...).
    pub env: Vec<(String, String)>,
    /// The whole boot, from QEMU's start to its exit; killed after it.
    pub budget: Duration,
    pub memory_mib: u32,
    pub accel: Accel,
    /// Where to copy the console as it arrives (for the test's evidence).
    pub console_log: Option<PathBuf>,
    /// Called with each console line as it arrives (on a reader thread),
    /// for hosts that act on the guest's progress.
    pub on_line: Option<&'a (dyn Fn(&str) + Sync)>,
}

/// What the guest reported.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The case's exit status; `None` when the guest never reported one
    /// (killed at the budget, crashed, or the VM failed to boot).
    pub rc: Option<i32>,
    pub timed_out: bool,
    pub elapsed: Duration,
    pub accel: Accel,
    /// Every evidence line, each as its `key=value` pairs in order.
    pub records: Vec<Vec<(String, String)>>,
    /// The whole console.
    pub console: String,
}

impl Outcome {
    /// The case exited 0.
    pub fn passed(&self) -> bool {
        self.rc == Some(0) && !self.timed_out
    }

    /// The first value of `key` in any evidence line.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.records.iter().find_map(|r| field(r, key))
    }

    /// The evidence lines that carry `key`.
    pub fn with_key<'s>(&'s self, key: &'s str) -> impl Iterator<Item = &'s [(String, String)]> {
        self.records
            .iter()
            .filter(move |r| r.iter().any(|(k, _)| k == key))
            .map(|r| r.as_slice())
    }

    /// The files the guest reported writing on `lun`, path to SHA-256:
    /// exactly `expected` of them, or an error. A `file` record that
    /// lost its `lun` or `sha256` (or carries a malformed one), or a path
    /// reported twice, is an error rather than a record to drop, so a
    /// count that comes out right is a count of complete records.
    pub fn files_written(
        &self,
        lun: &str,
        expected: usize,
    ) -> Result<std::collections::BTreeMap<String, String>, String> {
        let mut files = std::collections::BTreeMap::new();
        for r in self.with_key("file") {
            let line = || {
                r.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let Some(on) = field(r, "lun") else {
                return Err(format!("a file record without lun: {}", line()));
            };
            if on != lun {
                continue;
            }
            let (Some(path), Some(sum)) = (field(r, "file"), field(r, "sha256")) else {
                return Err(format!("a file record without sha256: {}", line()));
            };
            if sum.len() != 64 || !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("a file record with a malformed sha256: {}", line()));
            }
            if files.insert(path.to_owned(), sum.to_owned()).is_some() {
                return Err(format!("{path} reported twice on LUN {lun}"));
            }
        }
        if files.len() != expected {
            return Err(format!(
                "the guest reported {} complete file records on LUN {lun}, it writes {expected}",
                files.len()
            ));
        }
        Ok(files)
    }

    /// The last `n` console lines (for failure messages).
    pub fn console_tail(&self, n: usize) -> String {
        crate::image::tail(&self.console, n)
    }
}

/// The value of `key` in one evidence line.
pub fn field<'r>(record: &'r [(String, String)], key: &str) -> Option<&'r str> {
    record
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Parses the `key=value` pairs after an evidence marker anywhere in a
/// console line (kernel messages may share the line).
pub fn parse_record(line: &str) -> Option<Vec<(String, String)>> {
    let at = line.find(KV_MARK)?;
    let rest = line.get(at + KV_MARK.len()..)?;
    let pairs: Vec<(String, String)> = rest
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    (!pairs.is_empty()).then_some(pairs)
}

/// The case status from a console line, if it carries one.
pub fn parse_result(line: &str) -> Option<i32> {
    let at = line.find(RESULT_MARK)?;
    let rest = line.get(at + RESULT_MARK.len()..)?;
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

/// `/case.env`: one `KEY='value'` per line. Values may not hold a single
/// quote or a newline (nothing the harness passes does).
pub fn case_env(env: &[(String, String)]) -> Result<String, VmError> {
    let mut s = String::new();
    for (k, v) in env {
        let key_ok = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !key_ok || v.contains('\'') || v.contains('\n') {
            return Err(VmError::BadEnv(format!("{k}={v}")));
        }
        s.push_str(&format!("{k}='{v}'\n"));
    }
    Ok(s)
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Boots the guest once and collects what it reports.
pub fn boot(b: &Boot<'_>) -> Result<Outcome, VmError> {
    let qemu = crate::find_in_path("qemu-system-x86_64").ok_or_else(|| VmError::MissingTool {
        tool: "qemu-system-x86_64".to_owned(),
        package: "qemu-system-x86".to_owned(),
    })?;
    let mut env = vec![("CASE".to_owned(), b.case.name.to_owned())];
    env.extend(b.env.iter().cloned());
    let mut overlay = Newc::new();
    overlay.file("init", 0o755, INIT.as_bytes());
    overlay.file("lib.sh", 0o644, LIB.as_bytes());
    overlay.file("case.sh", 0o644, b.case.script.as_bytes());
    overlay.file("case.env", 0o644, case_env(&env)?.as_bytes());
    let initrd = std::env::temp_dir().join(format!(
        "ironlun-vm-{}-{}.cpio",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _cleanup = RemoveOnDrop(initrd.clone());
    write_initrd(&initrd, &b.image.initramfs, &overlay.finish())?;

    let mut cmd = Command::new(qemu);
    cmd.args([
        "-nodefaults",
        "-no-user-config",
        "-no-reboot",
        "-display",
        "none",
    ])
    .args(["-serial", "stdio", "-m", &b.memory_mib.to_string()])
    .args(["-accel", b.accel.name()])
    .args(["-cpu", if b.accel == Accel::Kvm { "host" } else { "max" }])
    .arg("-kernel")
    .arg(&b.image.kernel)
    .arg("-initrd")
    .arg(&initrd)
    .args(["-append", "console=ttyS0 panic=-1 quiet"])
    .args(["-netdev", "user,id=n0"])
    // romfile=: no iPXE option ROM (the kernel is loaded directly).
    .args(["-device", "virtio-net-pci,netdev=n0,romfile="])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| VmError::io(Path::new("qemu-system-x86_64"), e))?;
    let console = Mutex::new(String::new());
    let mut log_file = match &b.console_log {
        Some(p) => Some(std::fs::File::create(p).map_err(|e| VmError::io(p, e))?),
        None => None,
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut timed_out = false;
    let waited = std::thread::scope(|s| {
        if let Some(out) = stdout {
            let console = &console;
            s.spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    let line = line.trim_end_matches('\r');
                    if let Some(f) = log_file.as_mut() {
                        let _ = writeln!(f, "{line}");
                    }
                    if let Some(cb) = b.on_line {
                        cb(line);
                    }
                    if let Ok(mut c) = console.lock() {
                        c.push_str(line);
                        c.push('\n');
                    }
                }
            });
        }
        if let Some(err) = stderr {
            let console = &console;
            s.spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    if let Ok(mut c) = console.lock() {
                        c.push_str("qemu: ");
                        c.push_str(&line);
                        c.push('\n');
                    }
                }
            });
        }
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if start.elapsed() >= b.budget => {
                    timed_out = true;
                    let _ = child.kill();
                    let _ = child.wait();
                    return Ok(());
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(VmError::io(Path::new("qemu-system-x86_64"), e));
                }
            }
        }
    });
    waited?;
    let elapsed = start.elapsed();
    let console = console.into_inner().unwrap_or_default();
    let records = console.lines().filter_map(parse_record).collect();
    let rc = console.lines().rev().find_map(parse_result);
    Ok(Outcome {
        rc,
        timed_out,
        elapsed,
        accel: b.accel,
        records,
        console,
    })
}

fn write_initrd(path: &Path, base: &Path, overlay: &[u8]) -> Result<(), VmError> {
    let mut out = std::fs::File::create(path).map_err(|e| VmError::io(path, e))?;
    let mut base_f = std::fs::File::open(base).map_err(|e| VmError::io(base, e))?;
    std::io::copy(&mut base_f, &mut out).map_err(|e| VmError::io(path, e))?;
    out.write_all(overlay).map_err(|e| VmError::io(path, e))
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_lines_parse_even_after_kernel_text() {
        let r = parse_record("[ 13.1] sd 0:0:0:0: foo IRONLUN-VM-KV file=/d/f1 sha256=ab").unwrap();
        assert_eq!(
            r,
            [
                ("file".to_owned(), "/d/f1".to_owned()),
                ("sha256".to_owned(), "ab".to_owned())
            ]
        );
        assert!(parse_record("IRONLUN-VM-KV").is_none());
        assert!(parse_record("no marker").is_none());
        assert_eq!(parse_result("IRONLUN-VM-RESULT rc=0"), Some(0));
        assert_eq!(parse_result("x IRONLUN-VM-RESULT rc=17\r"), Some(17));
        assert_eq!(parse_result("IRONLUN-VM-RESULT rc="), None);
    }

    #[test]
    fn case_env_quotes_and_refuses_what_it_cannot_quote() {
        let env = vec![
            ("PORTAL_PORT".to_owned(), "3260".to_owned()),
            (
                "TARGET_IQN".to_owned(),
                "iqn.2026-11.io.ironlun:h".to_owned(),
            ),
        ];
        assert_eq!(
            case_env(&env).unwrap(),
            "PORTAL_PORT='3260'\nTARGET_IQN='iqn.2026-11.io.ironlun:h'\n"
        );
        assert!(case_env(&[("X".to_owned(), "a'b".to_owned())]).is_err());
        assert!(case_env(&[("lower".to_owned(), "v".to_owned())]).is_err());
    }

    #[test]
    fn outcome_lookups() {
        let o = Outcome {
            rc: Some(0),
            timed_out: false,
            elapsed: Duration::ZERO,
            accel: Accel::Tcg,
            records: vec![
                parse_record("IRONLUN-VM-KV fsck=clean").unwrap(),
                parse_record("IRONLUN-VM-KV file=/a sha256=1").unwrap(),
                parse_record("IRONLUN-VM-KV file=/b sha256=2").unwrap(),
            ],
            console: String::new(),
        };
        assert!(o.passed());
        assert_eq!(o.get("fsck"), Some("clean"));
        assert_eq!(o.with_key("file").count(), 2);
        assert_eq!(o.get("missing"), None);
    }

    fn outcome_of(lines: &[&str]) -> Outcome {
        Outcome {
            rc: Some(0),
            timed_out: false,
            elapsed: Duration::ZERO,
            accel: Accel::Tcg,
            records: lines
                .iter()
                .map(|l| parse_record(&format!("{KV_MARK}{l}")).unwrap())
                .collect(),
            console: String::new(),
        }
    }

    #[test]
    fn files_written_counts_only_complete_records_and_wants_them_all() {
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let fa = format!("file=/d/f1 sha256={a} lun=0");
        let fb = format!("file=/d/f2 sha256={b} lun=0");
        let other = format!("file=/d/f1 sha256={b} lun=1");
        let o = outcome_of(&[&fa, &fb, &other]);
        let files = o.files_written("0", 2).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files["/d/f2"], b);
        assert_eq!(o.files_written("1", 1).unwrap()["/d/f1"], b);
        // One record lost its checksum: not dropped, an error, even though
        // the other record would verify.
        let o = outcome_of(&[&fa, "file=/d/f2 lun=0"]);
        assert!(o.files_written("0", 1).is_err());
        assert!(o.files_written("0", 2).is_err());
        // Lost its LUN, a cut checksum, a path twice.
        assert!(outcome_of(&[&fa, "file=/d/f2 sha256=ab"])
            .files_written("0", 1)
            .is_err());
        assert!(outcome_of(&[&fa, "file=/d/f2 sha256=abc lun=0"])
            .files_written("0", 1)
            .is_err());
        assert!(outcome_of(&[&fa, &fa]).files_written("0", 1).is_err());
        // Fewer complete records than files written.
        assert!(outcome_of(&[&fa]).files_written("0", 2).is_err());
        assert!(outcome_of(&[]).files_written("0", 0).unwrap().is_empty());
    }

    #[test]
    fn write_files_writes_as_many_files_as_the_host_expects() {
        let body = &LIB[LIB.find("write_files() {").unwrap()..];
        let sizes = body
            .lines()
            .find_map(|l| l.trim().strip_prefix("for kib in "))
            .and_then(|l| l.strip_suffix("; do"))
            .unwrap();
        assert_eq!(sizes.split_whitespace().count(), WRITE_FILES, "{sizes}");
    }
}
