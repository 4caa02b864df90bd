//! # ironlun-vm: the Linux kernel initiator in a QEMU VM
//!
//! **Owns:** building the guest image from Debian packages (a stock
//! kernel, busybox-static, open-iscsi, e2fsprogs, the iSCSI and ext4
//! modules) and caching it; booting it headless under QEMU (KVM where it
//! really works, TCG otherwise) with a hard time budget; the guest-side
//! case scripts; reading the guest's evidence off its own channel, the
//! second serial port, which only the case scripts write (the kernel's
//! console is the first, kept for diagnosis); carrying a host program
//! and its libraries into the guest (`bundle`).
//!
//! **Must not know:** iSCSI, SCSI or how the target works. The target is
//! whatever listens on the host's loopback; the guest reaches it as
//! 10.0.2.2 through QEMU's user-mode network. Checking the evidence
//! against the target's backing store is the caller's job.

// This crate keeps unsafe code: every block must say why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod bundle;
pub mod cases;
pub mod cpio;
pub mod evidence;
pub mod guest;
pub mod image;
pub mod outcome;

use std::path::{Path, PathBuf};

pub use cases::Case;
pub use guest::{boot, Accel, Boot};
pub use image::{default_cache_dir, Image};
pub use outcome::Outcome;

/// What can go wrong around the VM (a failing case is an [`Outcome`], not
/// an error).
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error("{tool} is not installed (Debian package {package})")]
    MissingTool { tool: String, package: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("building the guest image failed ({status}):\n{log}")]
    Build { status: String, log: String },
    #[error("variable cannot be passed to the guest: {0}")]
    BadEnv(String),
    #[error("cannot carry a host program into the guest: {0}")]
    Bundle(String),
}

impl VmError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        VmError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// `name` on `$PATH` (or in the sbin directories, which a non-root PATH
/// may lack).
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
