//! One boot of the guest: the cached image plus an overlay archive holding
//! `/init`, `/lib.sh`, the case script and its variables, run headless
//! under QEMU with a hard time budget. The guest reaches the host's
//! loopback through QEMU's user-mode network (10.0.2.2 is the host's
//! 127.0.0.1; QEMU opens no listening socket).
//!
//! The guest has two serial ports: ttyS0 is the kernel's console (its log
//! and the scripts' progress), copied to the host for diagnosis; ttyS1 is
//! the evidence channel ([`crate::evidence`]), written only by the case
//! scripts, and the only place the host reads evidence from.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::cases::Case;
use crate::cpio::Newc;
use crate::evidence::{Channel, Evidence};
use crate::image::Image;
use crate::outcome::Outcome;
use crate::VmError;

// Where they were before the evidence channel had a module of its own.
pub use crate::evidence::{field, parse_record, KV_MARK, RESULT_MARK};

const INIT: &str = include_str!("../assets/init");
const LIB: &str = include_str!("../assets/lib.sh");

/// Files `/lib.sh`'s `write_files` writes on each LUN (one per size in
/// its list; a test below keeps the two in step).
pub const WRITE_FILES: usize = 8;

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
    /// Where to copy the console as it arrives (for diagnosis).
    pub console_log: Option<PathBuf>,
    /// Called with each line of the evidence channel as it arrives (on a
    /// reader thread), for hosts that act on the guest's progress; the
    /// console is never passed here.
    pub on_line: Option<&'a (dyn Fn(&str) + Sync)>,
    /// An archive appended after the image and before the case's overlay
    /// (a [`crate::bundle`] of host programs); empty for none.
    pub extra: &'a [u8],
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

/// The console kept in memory at most (a case's kernel log is a few KiB;
/// the file copy in `console_log` is not cut).
const MAX_CONSOLE: usize = 16 << 20;

/// Boots the guest once and collects what it reports.
pub fn boot(b: &Boot<'_>) -> Result<Outcome, VmError> {
    let qemu = crate::find_in_path("qemu-system-x86_64").ok_or_else(|| VmError::MissingTool {
        tool: "qemu-system-x86_64".to_owned(),
        package: "qemu-system-x86".to_owned(),
    })?;
    let stem = std::env::temp_dir().join(format!(
        "ironlun-vm-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let initrd = stem.with_extension("cpio");
    let evidence = stem.with_extension("evidence");
    let _cleanup = (RemoveOnDrop(initrd.clone()), RemoveOnDrop(evidence.clone()));
    write_initrd(&initrd, &b.image.initramfs, b.extra, &overlay(b)?)?;
    // Created empty before QEMU starts (which appends to it), so the
    // reader can open it now and follow it as it grows.
    std::fs::File::create(&evidence).map_err(|e| VmError::io(&evidence, e))?;
    let channel = std::fs::File::open(&evidence).map_err(|e| VmError::io(&evidence, e))?;
    let log_file = match &b.console_log {
        Some(p) => Some(std::fs::File::create(p).map_err(|e| VmError::io(p, e))?),
        None => None,
    };
    let start = Instant::now();
    let mut child = Command::new(qemu)
        .args(qemu_args(b, &initrd, &evidence))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| VmError::io(Path::new("qemu-system-x86_64"), e))?;
    let run = collect(b, &mut child, channel, log_file, start)?;
    Ok(Outcome {
        rc: run.evidence.rc,
        timed_out: run.timed_out,
        elapsed: start.elapsed(),
        accel: b.accel,
        records: run.evidence.records,
        evidence_errors: run.evidence.errors,
        evidence: run.evidence.text,
        console: run.console,
    })
}

/// The archive appended to the image: `/init`, `/lib.sh`, the case.
fn overlay(b: &Boot<'_>) -> Result<Vec<u8>, VmError> {
    let mut env = vec![("CASE".to_owned(), b.case.name.to_owned())];
    env.extend(b.env.iter().cloned());
    let mut overlay = Newc::new();
    overlay.file("init", 0o755, INIT.as_bytes());
    overlay.file("lib.sh", 0o644, LIB.as_bytes());
    overlay.file("case.sh", 0o644, b.case.script.as_bytes());
    overlay.file("case.env", 0o644, case_env(&env)?.as_bytes());
    Ok(overlay.finish())
}

/// The kernel's command line: its console is the first serial port, and
/// only that one (the second carries evidence). `no_timer_check` skips
/// the boot's test of the timer interrupt through the IO-APIC, which
/// counts ticks over a few milliseconds of the guest's clock: under TCG
/// on a loaded host the emulated CPU can miss them, and the kernel then
/// panics with "IO-APIC + timer doesn't work!" (seen with two busy loops
/// and other builds, load average 12). The timer works; only the test
/// is unreliable in an emulator.
pub const KERNEL_CMDLINE: &str = "console=ttyS0 panic=-1 quiet no_timer_check";

/// QEMU's arguments: the first serial port (ttyS0, the kernel's console)
/// on stdout, the second (ttyS1, the evidence channel) appended to the
/// file `evidence`.
fn qemu_args(b: &Boot<'_>, initrd: &Path, evidence: &Path) -> Vec<OsString> {
    // QEMU option values escape a comma by doubling it.
    let mut chardev = OsString::from("file,id=evidence,append=on,path=");
    chardev.push(evidence.as_os_str().to_string_lossy().replace(',', ",,"));
    let mut args: Vec<OsString> = [
        "-nodefaults",
        "-no-user-config",
        "-no-reboot",
        "-display",
        "none",
        "-serial",
        "stdio",
        "-chardev",
    ]
    .map(OsString::from)
    .into();
    args.push(chardev);
    let memory = b.memory_mib.to_string();
    let cpu = if b.accel == Accel::Kvm { "host" } else { "max" };
    args.extend(
        ["-serial", "chardev:evidence", "-m", &memory]
            .into_iter()
            .chain(["-accel", b.accel.name(), "-cpu", cpu])
            .map(OsString::from),
    );
    args.extend([
        "-kernel".into(),
        b.image.kernel.clone().into_os_string(),
        "-initrd".into(),
        initrd.as_os_str().to_owned(),
    ]);
    args.extend(
        ["-append", KERNEL_CMDLINE, "-netdev", "user,id=n0"]
            .into_iter()
            // romfile=: no iPXE option ROM (the kernel is loaded directly).
            .chain(["-device", "virtio-net-pci,netdev=n0,romfile="])
            .map(OsString::from),
    );
    args
}

/// What the readers collected once QEMU exited.
struct Run {
    console: String,
    evidence: Evidence,
    timed_out: bool,
}

/// Reads the console, QEMU's stderr and the evidence channel until QEMU
/// exits or is killed at the budget.
fn collect(
    b: &Boot<'_>,
    child: &mut Child,
    channel: std::fs::File,
    log_file: Option<std::fs::File>,
    start: Instant,
) -> Result<Run, VmError> {
    let console = Mutex::new(String::new());
    let exited = AtomicBool::new(false);
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let (waited, evidence) = std::thread::scope(|s| {
        let (console, exited) = (&console, &exited);
        if let Some(out) = stdout {
            s.spawn(move || read_console(out, log_file, console));
        }
        if let Some(err) = stderr {
            s.spawn(move || read_lines(err, "qemu: ", console));
        }
        let reader = s.spawn(move || read_evidence(channel, exited, b.on_line));
        let waited = wait_for(child, b.budget, start);
        exited.store(true, Ordering::SeqCst);
        let evidence = reader.join().unwrap_or_else(|_| {
            let mut ch = Channel::new();
            ch.fail("the evidence reader stopped: a panic in on_line".to_owned());
            ch.finish()
        });
        (waited, evidence)
    });
    Ok(Run {
        console: console.into_inner().unwrap_or_default(),
        evidence,
        timed_out: waited?,
    })
}

/// Waits for QEMU to exit; kills it at the budget. `Ok(true)`: killed.
fn wait_for(child: &mut Child, budget: Duration, start: Instant) -> Result<bool, VmError> {
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return Ok(false),
            Ok(None) if start.elapsed() >= budget => {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(true);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(VmError::io(Path::new("qemu-system-x86_64"), e));
            }
        }
    }
}

/// Follows the evidence file as QEMU appends to it, until QEMU has
/// exited and every byte is read. `on_line` sees each complete line.
fn read_evidence(
    mut file: std::fs::File,
    exited: &AtomicBool,
    on_line: Option<&(dyn Fn(&str) + Sync)>,
) -> Evidence {
    let mut ch = Channel::new();
    let mut buf = [0u8; 4096];
    loop {
        // Read before the check: once QEMU has exited, an empty read
        // means the whole file was read.
        let done = exited.load(Ordering::SeqCst);
        match file.read(&mut buf) {
            Ok(0) if done => break,
            Ok(0) => std::thread::sleep(Duration::from_millis(20)),
            Ok(n) => {
                for line in ch.feed(buf.get(..n).unwrap_or_default()) {
                    if let Some(cb) = on_line {
                        cb(&line);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                ch.fail(format!("reading the evidence channel: {e}"));
                break;
            }
        }
    }
    ch.finish()
}

/// Copies the console to `log_file` and to `console`.
fn read_console(out: ChildStdout, mut log_file: Option<std::fs::File>, console: &Mutex<String>) {
    for line in BufReader::new(out).lines().map_while(Result::ok) {
        let line = line.trim_end_matches('\r');
        if let Some(f) = log_file.as_mut() {
            let _ = writeln!(f, "{line}");
        }
        keep(console, "", line);
    }
}

fn read_lines(from: impl Read, prefix: &str, console: &Mutex<String>) {
    for line in BufReader::new(from).lines().map_while(Result::ok) {
        keep(console, prefix, &line);
    }
}

/// Appends a line to the console kept in memory, up to [`MAX_CONSOLE`].
fn keep(console: &Mutex<String>, prefix: &str, line: &str) {
    if let Ok(mut c) = console.lock() {
        if c.len() < MAX_CONSOLE {
            c.push_str(prefix);
            c.push_str(line);
            c.push('\n');
        }
    }
}

fn write_initrd(path: &Path, base: &Path, extra: &[u8], overlay: &[u8]) -> Result<(), VmError> {
    let mut out = std::fs::File::create(path).map_err(|e| VmError::io(path, e))?;
    let mut base_f = std::fs::File::open(base).map_err(|e| VmError::io(base, e))?;
    std::io::copy(&mut base_f, &mut out).map_err(|e| VmError::io(path, e))?;
    out.write_all(extra).map_err(|e| VmError::io(path, e))?;
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

    fn args_of(evidence: &str) -> Vec<String> {
        let image = Image {
            dir: PathBuf::from("/img"),
            kernel: PathBuf::from("/img/vmlinuz"),
            initramfs: PathBuf::from("/img/base.cpio"),
            manifest: String::new(),
        };
        let b = Boot {
            image: &image,
            case: &crate::cases::BASIC,
            env: Vec::new(),
            budget: Duration::from_secs(1),
            memory_mib: 512,
            accel: Accel::Tcg,
            console_log: None,
            on_line: None,
            extra: &[],
        };
        qemu_args(&b, Path::new("/t/i.cpio"), Path::new(evidence))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    /// The values of every `flag` in `args`.
    fn values<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
        args.windows(2)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].as_str())
            .collect()
    }

    #[test]
    fn the_kernel_console_is_ttys0_and_the_evidence_port_is_ttys1_alone() {
        let args = args_of("/t/a,b.evidence");
        // ttyS0 to stdout, ttyS1 to the evidence file (ports are numbered
        // in the order given).
        assert_eq!(values(&args, "-serial"), ["stdio", "chardev:evidence"]);
        assert_eq!(
            values(&args, "-chardev"),
            ["file,id=evidence,append=on,path=/t/a,,b.evidence"]
        );
        assert!(args.iter().any(|a| a == "-nodefaults"));
        let cmdline = values(&args, "-append");
        assert_eq!(cmdline, [KERNEL_CMDLINE]);
        let consoles: Vec<&str> = KERNEL_CMDLINE
            .split_whitespace()
            .filter(|w| w.starts_with("console=") || w.starts_with("earlycon"))
            .collect();
        assert_eq!(consoles, ["console=ttyS0"]);
    }

    #[test]
    fn the_guest_writes_evidence_to_ttys1_and_runs_no_getty() {
        // /init holds ttyS1 open as fd 9 for the case, refuses to run when
        // the kernel has a console there, and writes the result to it.
        assert!(INIT.contains("exec 9>/dev/ttyS1"), "{INIT}");
        assert!(INIT.contains("/proc/consoles"), "{INIT}");
        assert!(
            INIT.contains("echo \"IRONLUN-VM-RESULT rc=$1\" >&9"),
            "{INIT}"
        );
        let kv = LIB
            .lines()
            .skip_while(|l| !l.starts_with("kv() {"))
            .take_while(|l| !l.starts_with('}'))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(kv.contains("echo \"IRONLUN-VM-KV $*\" >&9"), "{kv}");
        for script in [INIT, LIB] {
            let mut code = script.lines().filter(|l| !l.trim_start().starts_with('#'));
            assert!(!code.any(|l| l.contains("getty")), "{script}");
        }
        for case in crate::cases::ALL {
            assert!(!case.script.contains("ttyS1"), "{}", case.name);
            assert!(!case.script.contains(">&9"), "{}", case.name);
        }
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
