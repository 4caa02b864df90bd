//! The Linux kernel initiator (open-iscsi in a QEMU VM, crate ironlun-vm)
//! against `ironlun target` on loopback, one VM boot per case, each with a
//! hard time budget.
//!
//! Runs only when asked: `IRONLUN_VM_TESTS=1 cargo test --release --test
//! kernel_initiator` (scripts/test does this after installing
//! qemu-system-x86). Pick cases with `IRONLUN_VM_CASES=basic,restart`.
//! Prints PASS, FAIL or SKIP (with the reason) per case, keeps each
//! guest console in target/vm-tests/, and exits non-zero on any FAIL.
//!
//! The guest's word is not taken alone: where the LUN is a file, the host
//! checks the same bytes itself (SHA-256 of the whole LUN, `e2fsck -fn`
//! and `debugfs` reading every file the guest wrote).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    dead_code
)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ironlun_vm::{cases, Accel, Boot, Case, Image, Outcome};
use support::Target;

const IQN: &str = "iqn.2026-11.io.ironlun:vm-tests";

/// A case's verdict.
enum Verdict {
    Pass(String),
    Fail(String),
    Skip(String),
}

struct Ctx {
    image: Image,
    accel: Accel,
    logs: PathBuf,
    work: tempfile::TempDir,
}

fn main() {
    if std::env::var_os("IRONLUN_VM_TESTS").is_none() {
        println!(
            "kernel initiator VM tests: not requested (IRONLUN_VM_TESTS=1 runs them; scripts/test does)"
        );
        return;
    }
    let only: Option<Vec<String>> = std::env::var("IRONLUN_VM_CASES")
        .ok()
        .map(|s| s.split(',').map(str::to_owned).collect());
    let logs = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/vm-tests");
    std::fs::create_dir_all(&logs).unwrap();

    let t0 = Instant::now();
    let image = match Image::ensure(&ironlun_vm::default_cache_dir(), &mut |m| println!("{m}")) {
        Ok(i) => i,
        Err(e) => {
            println!("FAIL  guest image: {e}");
            std::process::exit(1);
        }
    };
    let accel = Accel::detect();
    println!(
        "guest image {} ready in {:.1} s; accelerator {}",
        image.dir.display(),
        t0.elapsed().as_secs_f64(),
        accel.name()
    );
    for line in image.manifest.lines() {
        println!("  {line}");
    }
    let ctx = Ctx {
        image,
        accel,
        logs,
        work: tempfile::tempdir().unwrap(),
    };

    type CaseFn = fn(&Ctx) -> Verdict;
    let all: &[(&str, CaseFn)] = &[("basic", case_basic)];
    let mut failed = 0;
    for (name, f) in all {
        if only.as_ref().is_some_and(|o| !o.iter().any(|n| n == name)) {
            continue;
        }
        let t = Instant::now();
        let v = f(&ctx);
        let secs = t.elapsed().as_secs_f64();
        match v {
            Verdict::Pass(note) => println!("PASS  {name} ({secs:.0} s): {note}"),
            Verdict::Skip(why) => println!("SKIP  {name}: {why}"),
            Verdict::Fail(why) => {
                failed += 1;
                println!("FAIL  {name} ({secs:.0} s): {why}");
            }
        }
    }
    if failed > 0 {
        println!("{failed} kernel initiator case(s) failed; consoles in target/vm-tests/");
        std::process::exit(1);
    }
}

/// Boots `case` against a target on `port`, with extra variables, within
/// `budget`.
fn boot(ctx: &Ctx, case: &Case, port: u16, extra: &[(&str, &str)], budget: Duration) -> Outcome {
    let mut env = vec![
        ("PORTAL_PORT".to_owned(), port.to_string()),
        ("TARGET_IQN".to_owned(), IQN.to_owned()),
    ];
    env.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let log = ctx.logs.join(format!("{}.console.log", case.name));
    ironlun_vm::boot(&Boot {
        image: &ctx.image,
        case,
        env,
        budget,
        memory_mib: 512,
        accel: ctx.accel,
        console_log: Some(log),
    })
    .unwrap_or_else(|e| panic!("booting the VM: {e}"))
}

/// Fails with the guest's last console lines unless the case exited 0.
fn require_pass(o: &Outcome) -> Result<(), String> {
    if o.passed() {
        return Ok(());
    }
    let why = if o.timed_out {
        format!(
            "killed at its budget after {:.0} s",
            o.elapsed.as_secs_f64()
        )
    } else {
        match o.rc {
            Some(rc) => format!("guest case exited {rc}"),
            None => "the guest reported no result".to_owned(),
        }
    };
    Err(format!("{why}; console tail:\n{}", o.console_tail(30)))
}

fn require_kv(o: &Outcome, key: &str, want: &str) -> Result<(), String> {
    match o.get(key) {
        Some(v) if v == want => Ok(()),
        Some(v) => Err(format!("guest reported {key}={v}, expected {want}")),
        None => Err(format!("guest did not report {key}")),
    }
}

fn sha256_file(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The host's own look at an ext4 image file: `e2fsck -fn` is clean and
/// every file the guest reported has the SHA-256 the guest computed when
/// it wrote it (read back with debugfs, not through iSCSI). Returns how
/// many files were checked.
fn host_checks_ext4(img: &Path, o: &Outcome) -> Result<usize, String> {
    let fsck = Command::new(tool("e2fsck"))
        .args(["-fn"])
        .arg(img)
        .output()
        .unwrap();
    if !fsck.status.success() {
        return Err(format!(
            "host e2fsck -fn on the LUN file: {}\n{}",
            fsck.status,
            String::from_utf8_lossy(&fsck.stdout)
        ));
    }
    let files: BTreeMap<String, String> = o
        .with_key("file")
        .filter_map(|r| {
            let path = r.iter().find(|(k, _)| k == "file")?.1.clone();
            let sum = r.iter().find(|(k, _)| k == "sha256")?.1.clone();
            Some((path, sum))
        })
        .collect();
    if files.is_empty() {
        return Err("guest reported no files".to_owned());
    }
    let dump = img.with_extension("dump");
    for (path, sum) in &files {
        let _ = std::fs::remove_file(&dump);
        let out = Command::new(tool("debugfs"))
            .arg("-R")
            .arg(format!("dump {path} {}", dump.display()))
            .arg(img)
            .output()
            .unwrap();
        if !dump.exists() {
            return Err(format!(
                "debugfs could not read {path}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let got = sha256_file(&dump);
        if &got != sum {
            return Err(format!(
                "{path}: the LUN file holds sha256 {got}, the guest wrote {sum}"
            ));
        }
    }
    let _ = std::fs::remove_file(&dump);
    Ok(files.len())
}

fn tool(name: &str) -> PathBuf {
    ironlun_vm::find_in_path(name)
        .unwrap_or_else(|| panic!("{name} is not installed (Debian package e2fsprogs)"))
}

fn raw_read_rate(o: &Outcome) -> String {
    let bytes: f64 = o
        .get("raw_read_bytes")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let ms: f64 = o
        .get("raw_read_ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    if ms > 0.0 {
        format!("{:.0} MB/s guest-clock", bytes / ms / 1000.0)
    } else {
        "?".to_owned()
    }
}

/// Case 1: discovery, login, mkfs.ext4, mount, files with known SHA-256,
/// sync, unmount, e2fsck -fn, remount and verify, raw read, logout; then
/// the host checks the LUN file itself.
fn case_basic(ctx: &Ctx) -> Verdict {
    let img = ctx.work.path().join("basic.img");
    let lun = format!("file:{},size=128MiB", img.display());
    let mut target = Target::start(&["--name", IQN, "--lun", &lun]);
    let o = boot(
        ctx,
        &cases::BASIC,
        target.addr.port(),
        &[],
        Duration::from_secs(240),
    );
    let r = (|| {
        require_pass(&o)?;
        for k in ["discovery", "login", "logout"] {
            require_kv(&o, k, "ok")?;
        }
        require_kv(&o, "fsck", "clean")?;
        require_kv(&o, "verify", "ok")?;
        // The session ended, so the file holds everything the guest wrote.
        let host_sum = sha256_file(&img);
        require_kv(&o, "device_sha256", &host_sum)
            .map_err(|e| format!("whole-LUN checksum: {e} (the host's file)"))?;
        let n = host_checks_ext4(&img, &o)?;
        if !target.log().contains(&format!(
            "initiator={}",
            "iqn.2026-11.io.ironlun:vm-initiator"
        )) {
            return Err(format!(
                "the target's log shows no login by the VM's initiator:\n{}",
                target.log()
            ));
        }
        Ok(format!(
            "{n} files verified in the guest and by the host, whole-LUN SHA-256 equal, e2fsck clean in both; raw read {}; boot to power-off {:.0} s ({})",
            raw_read_rate(&o),
            o.elapsed.as_secs_f64(),
            o.accel.name()
        ))
    })();
    let _ = target.terminate(Duration::from_secs(10));
    match r {
        Ok(n) => Verdict::Pass(n),
        Err(e) => Verdict::Fail(e),
    }
}
