//! iSCSI names in the configuration: the check every target and
//! initiator name passes (ironlun-proto's, RFC 7143 §4.2.7 and RFC 3722,
//! the same as at login), names as map keys, and the default target
//! name.

pub use ironlun_proto::names::{normalize as normalize_iscsi_name, NameError};

/// An iSCSI name as a map key: equal and hashed without regard to ASCII
/// case (names are compared case-insensitively, RFC 7143 §4.2.7.1),
/// without making a lower-case copy.
#[derive(Clone, Copy, Debug)]
pub struct NameKey<'a>(pub &'a str);

impl PartialEq for NameKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.eq_ignore_ascii_case(other.0)
    }
}

impl Eq for NameKey<'_> {}

impl std::hash::Hash for NameKey<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let mut buf = [0u8; 64];
        for chunk in self.0.as_bytes().chunks(buf.len()) {
            if let Some(b) = buf.get_mut(..chunk.len()) {
                b.copy_from_slice(chunk);
                b.make_ascii_lowercase();
                h.write(b);
            }
        }
        h.write_usize(self.0.len());
    }
}

/// The normal form of the name given at `key` (`--name`,
/// `target[0].name`), or why it is not an iSCSI name.
pub(crate) fn check_name(key: &str, name: &str) -> Result<String, super::ConfigError> {
    normalize_iscsi_name(name).map_err(|source| super::ConfigError::Name {
        key: key.to_owned(),
        source,
    })
}

/// The default target name: `iqn.2026-11.io.ironlun:<host name>`.
pub fn default_target_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String = host
        .trim()
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let host = if host.is_empty() {
        "localhost".to_owned()
    } else {
        host
    };
    format!("iqn.2026-11.io.ironlun:{host}")
}
