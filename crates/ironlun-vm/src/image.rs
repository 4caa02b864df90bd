//! The guest image: a Debian kernel and a base initramfs, built by
//! `assets/build-image.sh` from Debian packages and cached on disk under a
//! directory named after the script's hash (a changed script builds a new
//! image; an unchanged one is reused across runs and checkouts).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::VmError;

/// The build script, embedded so an installed binary can build the image.
pub const BUILD_SCRIPT: &str = include_str!("../assets/build-image.sh");

/// A built guest image.
#[derive(Debug, Clone)]
pub struct Image {
    /// The directory holding it.
    pub dir: PathBuf,
    /// The kernel (`vmlinuz`).
    pub kernel: PathBuf,
    /// The base initramfs (uncompressed newc cpio).
    pub initramfs: PathBuf,
    /// `package version` per line: what the image was built from.
    pub manifest: String,
}

/// Where images are cached: `$IRONLUN_VM_DIR`, else
/// `$XDG_CACHE_HOME/ironlun/vm`, else `~/.cache/ironlun/vm`.
pub fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("IRONLUN_VM_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("ironlun/vm");
    }
    if let Some(h) = std::env::var_os("HOME") {
        return PathBuf::from(h).join(".cache/ironlun/vm");
    }
    std::env::temp_dir().join("ironlun-vm")
}

/// FNV-1a, 64 bits: the cache key of the build script (not a security
/// property; a changed script only has to land in another directory).
fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Image {
    /// The image directory under `root` for this version of the script.
    pub fn dir_under(root: &Path) -> PathBuf {
        root.join(format!("image-{:016x}", fnv1a(BUILD_SCRIPT.as_bytes())))
    }

    /// The cached image under `root`, if one was built by this version of
    /// the build script.
    pub fn cached(root: &Path) -> Option<Image> {
        let dir = Self::dir_under(root);
        let kernel = dir.join("vmlinuz");
        let initramfs = dir.join("base.cpio");
        let manifest = fs::read_to_string(dir.join("manifest.txt")).ok()?;
        (kernel.is_file() && initramfs.is_file()).then_some(Image {
            dir,
            kernel,
            initramfs,
            manifest,
        })
    }

    /// The cached image under `root`, building it first if needed.
    /// Concurrent callers (test threads, processes) build it once: the
    /// build holds an exclusive `flock` on `root/.lock`. `progress` gets
    /// one line when a build starts.
    pub fn ensure(root: &Path, progress: &mut dyn FnMut(&str)) -> Result<Image, VmError> {
        if let Some(img) = Self::cached(root) {
            return Ok(img);
        }
        fs::create_dir_all(root).map_err(|e| VmError::io(root, e))?;
        let lock_path = root.join(".lock");
        let lock = fs::File::create(&lock_path).map_err(|e| VmError::io(&lock_path, e))?;
        // Held until `lock` drops at the end of the function.
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| VmError::io(&lock_path, e.into()))?;
        if let Some(img) = Self::cached(root) {
            return Ok(img);
        }
        for tool in ["apt-get", "apt-cache", "dpkg-deb", "ldd"] {
            if crate::find_in_path(tool).is_none() {
                return Err(VmError::MissingTool {
                    tool: tool.to_owned(),
                    package: "apt / dpkg / libc-bin (a Debian host)".to_owned(),
                });
            }
        }
        let dir = Self::dir_under(root);
        fs::create_dir_all(&dir).map_err(|e| VmError::io(&dir, e))?;
        let script = dir.join("build-image.sh");
        fs::File::create(&script)
            .and_then(|mut f| f.write_all(BUILD_SCRIPT.as_bytes()))
            .map_err(|e| VmError::io(&script, e))?;
        progress(&format!(
            "building the guest image from Debian packages in {}",
            dir.display()
        ));
        let out = Command::new("bash")
            .arg(&script)
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| VmError::io(Path::new("bash"), e))?;
        let mut log = String::from_utf8_lossy(&out.stdout).into_owned();
        log.push_str(&String::from_utf8_lossy(&out.stderr));
        let _ = fs::write(dir.join("build.log"), &log);
        if !out.status.success() {
            return Err(VmError::Build {
                status: out.status.to_string(),
                log: tail(&log, 40),
            });
        }
        Self::cached(root).ok_or_else(|| VmError::Build {
            status: "the script succeeded but left no image".to_owned(),
            log: tail(&log, 40),
        })
    }
}

/// The last `n` lines of `s`.
pub(crate) fn tail(s: &str, n: usize) -> String {
    let count = s.lines().count();
    s.lines()
        .skip(count.saturating_sub(n))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_key_follows_the_script() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let d = Image::dir_under(Path::new("/c"));
        assert!(d.to_string_lossy().starts_with("/c/image-"));
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
