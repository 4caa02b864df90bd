//! The file-system rows of the published studies (a 1000 MB file read
//! and written with 512 KiB blocks through ext4; 1 x 1 GiB, 1024 x 1 MiB
//! and 64 x 64 x 256 KiB file copies), measured through the Linux kernel
//! initiator in a QEMU VM (crate ironlun-vm) against an embedded target.
//!
//! Under TCG the guest's CPU is emulated: these rows are bounded by the
//! emulation, not by the target, and are labelled so wherever they appear.

use std::time::Duration;

use serde::Serialize;

use crate::embedded::EmbeddedTarget;

/// Whether the reproductions boot the VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmMode {
    /// When `qemu-system-x86_64` is installed (the image is built on first
    /// use from Debian packages).
    Auto,
    /// Always; a missing QEMU is an error.
    On,
    Off,
}

/// What to run through the file system.
#[derive(Clone, Debug)]
pub struct FsPlan {
    /// Size of the file written and read (MiB; 1000 as published, "a
    /// 1000 MB file" written by `dd bs=512K count=2000`); 0 skips it.
    pub file_mb: u64,
    /// The copy tests divided by this (1 as published); 0 skips them.
    pub copy_scale: u32,
    /// Each copy set copied from the LUN to the LUN.
    pub lun_copies: bool,
    /// Each copy set copied from a RAM disk in the guest to the LUN and
    /// back (`ram-to-lun-*`, `lun-to-ram-*`), as the RAM-disk study did.
    pub ram_copies: bool,
    /// With `ram_copies`, each set also read back after the caches are
    /// dropped (`lun-to-ram-*-uncached`; no published cell).
    pub ram_uncached: bool,
}

impl FsPlan {
    /// Guest memory for the plan: 512 MiB, and room for the RAM disk
    /// (a copy set) and the page cache holding it once more.
    pub fn guest_mib(&self) -> u32 {
        if self.ram_copies && self.copy_scale > 0 {
            512 + 2 * 1024 / self.copy_scale
        } else {
            512
        }
    }
}

/// One measured row.
#[derive(Clone, Debug, Serialize)]
pub struct FsRow {
    /// What was measured ("fs-read-512k", "copy-1x1GiB" ...).
    pub test: String,
    /// The same, for people, with the scale it ran at.
    pub label: String,
    /// The LUN's backend ("file", "file-direct", "ram").
    pub backend: String,
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    /// Always "QEMU VM (tcg)" or "(kvm)": how the initiator ran.
    pub measured_through: String,
}

/// The LUN size a plan needs: the file, or a copy's source and
/// destination, plus room for ext4's metadata and journal.
pub fn lun_size_for(plan: &FsPlan) -> u64 {
    let file = plan.file_mb << 20;
    let copies = if plan.copy_scale > 0 {
        2 * (1u64 << 30) / u64::from(plan.copy_scale)
    } else {
        0
    };
    let data = file.max(copies);
    (data + data / 4 + (64 << 20)).next_multiple_of(1 << 20)
}

/// Runs `plan` on each `(backend, lun spec)`: one embedded target and one
/// VM boot per LUN. `Err` says why the VM could not run at all.
pub fn run(
    luns: &[(&str, String)],
    plan: &FsPlan,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<FsRow>, String> {
    let image = ironlun_vm::Image::ensure(&ironlun_vm::default_cache_dir(), progress)
        .map_err(|e| e.to_string())?;
    let accel = ironlun_vm::Accel::detect();
    let through = format!("QEMU VM ({})", accel.name());
    let mut rows = Vec::new();
    for (backend, spec) in luns {
        progress(&format!(
            "file system rows on a {backend} LUN through the kernel initiator in a {through}"
        ));
        let target = EmbeddedTarget::start(std::slice::from_ref(spec))?;
        let env = vec![
            ("PORTAL_PORT".to_owned(), target.portal.port().to_string()),
            ("TARGET_IQN".to_owned(), target.name.clone()),
            ("FILE_MB".to_owned(), plan.file_mb.to_string()),
            ("COPY_SCALE".to_owned(), plan.copy_scale.to_string()),
            (
                "LUN_COPIES".to_owned(),
                u8::from(plan.lun_copies).to_string(),
            ),
            (
                "RAM_COPIES".to_owned(),
                u8::from(plan.ram_copies).to_string(),
            ),
            (
                "RAM_UNCACHED".to_owned(),
                u8::from(plan.ram_uncached).to_string(),
            ),
        ];
        let o = ironlun_vm::boot(&ironlun_vm::Boot {
            image: &image,
            case: &ironlun_vm::cases::FS_BENCH,
            env,
            budget: Duration::from_secs(1800),
            memory_mib: plan.guest_mib(),
            accel,
            console_log: None,
            on_line: None,
            extra: &[],
        })
        .map_err(|e| e.to_string())?;
        drop(target);
        if !o.passed() {
            return Err(format!(
                "the VM's file-system run on the {backend} LUN failed (rc {:?}, {:.0} s):\n{}",
                o.rc,
                o.elapsed.as_secs_f64(),
                o.console_tail(20)
            ));
        }
        for r in o.with_key("test") {
            let get = |k: &str| ironlun_vm::guest::field(r, k);
            let (Some(test), Some(bytes), Some(ms)) = (
                get("test"),
                get("bytes").and_then(|b| b.parse::<u64>().ok()),
                get("ms").and_then(|m| m.parse::<u64>().ok()),
            ) else {
                continue;
            };
            let seconds = ms.max(1) as f64 / 1000.0;
            rows.push(FsRow {
                test: test.to_owned(),
                label: label(test, bytes, plan),
                backend: (*backend).to_owned(),
                bytes,
                seconds,
                mb_per_s: bytes as f64 / seconds / 1e6,
                measured_through: through.clone(),
            });
        }
    }
    Ok(rows)
}

fn label(test: &str, bytes: u64, plan: &FsPlan) -> String {
    let scale = if plan.copy_scale > 1 {
        format!(" (1/{} scale)", plan.copy_scale)
    } else {
        String::new()
    };
    match test {
        "fs-write-512k" => format!("write a {} MiB file, 512 KiB blocks", bytes >> 20),
        "fs-read-512k" => format!("read a {} MiB file, 512 KiB blocks", bytes >> 20),
        "copy-1x1GiB" => format!("copy 1 x 1 GiB file{scale}"),
        "copy-1024x1MiB" => format!("copy 1024 x 1 MiB files{scale}"),
        "copy-64x64x256KiB" => format!("copy 64 folders x 64 x 256 KiB files{scale}"),
        other => ram_copy_label(other)
            .map(|l| format!("{l}{scale}"))
            .unwrap_or_else(|| other.to_owned()),
    }
}

/// `ram-to-lun-SET[-synced]` and `lun-to-ram-SET[-uncached]` for people.
fn ram_copy_label(test: &str) -> Option<String> {
    let (dir, rest) = if let Some(r) = test.strip_prefix("ram-to-lun-") {
        ("RAM disk -> LUN", r)
    } else {
        ("LUN -> RAM disk", test.strip_prefix("lun-to-ram-")?)
    };
    let (set, how) = match rest.split_once('-') {
        Some((set, "synced")) => (set, ", synced"),
        Some((set, "uncached")) => (set, ", uncached"),
        _ => (rest, ""),
    };
    let what = match set {
        "1x1GiB" => "1 x 1 GiB",
        "1024x1MiB" => "1024 x 1 MiB",
        "64x64x256KiB" => "64 x 64 x 256 KiB",
        _ => return None,
    };
    Some(format!("{dir} {what}{how}"))
}

/// The rows as a text table.
pub fn table(rows: &[FsRow]) -> String {
    let mut s = format!(
        "{:<48} {:<12} {:>10} {:>9} {:>9}\n",
        "test", "backend", "MB", "seconds", "MB/s"
    );
    for r in rows {
        s.push_str(&format!(
            "{:<48} {:<12} {:>10.1} {:>9.2} {:>9.1}\n",
            r.label,
            r.backend,
            r.bytes as f64 / 1e6,
            r.seconds,
            r.mb_per_s
        ));
    }
    s
}

/// Whether to run, and if not why (for the reproduction's notes).
pub fn should_run(mode: VmMode) -> Result<bool, String> {
    match mode {
        VmMode::Off => Ok(false),
        VmMode::On => ironlun_vm::find_in_path("qemu-system-x86_64")
            .map(|_| true)
            .ok_or_else(|| {
                "qemu-system-x86_64 is not installed (Debian package qemu-system-x86)".to_owned()
            }),
        VmMode::Auto => Ok(ironlun_vm::find_in_path("qemu-system-x86_64").is_some()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lun_size_holds_the_largest_test() {
        let full = FsPlan {
            file_mb: 1000,
            copy_scale: 1,
            lun_copies: true,
            ram_copies: true,
            ram_uncached: false,
        };
        // Copies need source and destination: 2 GiB plus a quarter and 64 MiB.
        assert_eq!(lun_size_for(&full), (2u64 << 30) + (512 << 20) + (64 << 20));
        let file_only = FsPlan {
            file_mb: 1000,
            copy_scale: 0,
            lun_copies: true,
            ram_copies: false,
            ram_uncached: false,
        };
        assert_eq!(lun_size_for(&file_only), (1250 << 20) + (64 << 20));
        let small = FsPlan {
            file_mb: 200,
            copy_scale: 8,
            lun_copies: false,
            ram_copies: true,
            ram_uncached: false,
        };
        assert!(lun_size_for(&small) >= 256 << 20);
        assert_eq!(lun_size_for(&small) % (1 << 20), 0);
    }

    #[test]
    fn labels_say_the_scale() {
        let p = FsPlan {
            file_mb: 200,
            copy_scale: 8,
            lun_copies: false,
            ram_copies: true,
            ram_uncached: false,
        };
        assert_eq!(
            label("copy-1x1GiB", 1 << 27, &p),
            "copy 1 x 1 GiB file (1/8 scale)"
        );
        assert_eq!(
            label("fs-read-512k", 200 << 20, &p),
            "read a 200 MiB file, 512 KiB blocks"
        );
        assert_eq!(
            label("ram-to-lun-1024x1MiB-synced", 1 << 27, &p),
            "RAM disk -> LUN 1024 x 1 MiB, synced (1/8 scale)"
        );
        assert_eq!(
            label("lun-to-ram-64x64x256KiB", 1 << 27, &p),
            "LUN -> RAM disk 64 x 64 x 256 KiB (1/8 scale)"
        );
        assert_eq!(label("lun-to-ram-bogus", 1, &p), "lun-to-ram-bogus");
    }

    #[test]
    fn guest_memory_holds_the_ram_disk() {
        let mut p = FsPlan {
            file_mb: 0,
            copy_scale: 8,
            lun_copies: false,
            ram_copies: true,
            ram_uncached: false,
        };
        assert_eq!(p.guest_mib(), 768);
        p.copy_scale = 1;
        assert_eq!(p.guest_mib(), 2560);
        p.ram_copies = false;
        assert_eq!(p.guest_mib(), 512);
    }
}
