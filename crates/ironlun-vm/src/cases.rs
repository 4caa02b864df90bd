//! The guest-side cases: busybox shell scripts run by the guest's `/init`
//! with `/lib.sh`'s helpers. Each reports evidence lines the host checks
//! against what it can see itself (the LUN's backing file).

/// A guest script and the variables it needs besides the portal.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub name: &'static str,
    pub about: &'static str,
    pub script: &'static str,
}

/// Case 1: discovery, login, mkfs.ext4, mount, files with known SHA-256,
/// sync, unmount, `e2fsck -fn`, remount and verify, raw read, logout.
pub const BASIC: Case = Case {
    name: "basic",
    about: "discovery, login, mkfs.ext4, files with known SHA-256, e2fsck, remount and verify, raw read, logout",
    script: include_str!("../assets/cases/basic.sh"),
};

/// Every case, for `ironlun vm run --case`.
pub const ALL: &[Case] = &[BASIC];

/// The case called `name`.
pub fn find(name: &str) -> Option<&'static Case> {
    ALL.iter().find(|c| c.name == name)
}
