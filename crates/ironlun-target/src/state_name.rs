//! The names of the state directory's files: `KIND-STEM-lunN.txt`, one
//! file per LU and kind of state (`pr`, `sanitize`), where STEM is a
//! one-to-one encoding of the target's name, so that two targets never
//! share a file.
//!
//! Target names compare without regard to ASCII case (RFC 7143 §4.2.7.1,
//! and [`crate::config::NameKey`] everywhere in the daemon), so the name
//! is lower-cased first (ASCII only, as everywhere else); then every byte
//! outside `a`-`z`, `0`-`9`, `.` and `-` becomes `%xx`. `iqn.x:t` is
//! `iqn.x%3at`, `iqn.x_t` is `iqn.x%5ft`. A stem longer than
//! [`MAX_STEM_BYTES`] (a long name of many escaped bytes; a file name
//! has at most 255 bytes) is `~` and the SHA-256 of the lower-cased name
//! in hex instead: `~` never appears in an escaped stem, and SHA-256 has
//! no known collisions.
//!
//! Before, every character but ASCII letters, digits, `.` and `-` became
//! `_`, case kept ([`legacy_file_name`]): `iqn.x:t` and `iqn.x_t` shared
//! `pr-iqn.x_t-lun0.txt`. Such files are renamed when their LU opens
//! (`lu_state.rs`), found ignoring ASCII case: the name they were made
//! from kept the case it was configured with.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// Longest escaped stem; longer ones are hashed.
pub(crate) const MAX_STEM_BYTES: usize = 200;

/// `KIND-STEM-lunN.txt` for target `target`'s LUN `lun`.
pub(crate) fn file_name(kind: &str, target: &str, lun: u16) -> String {
    format!("{kind}-{}-lun{lun}.txt", stem(target))
}

/// The name the file had before names were one-to-one.
pub(crate) fn legacy_file_name(kind: &str, target: &str, lun: u16) -> String {
    format!("{kind}-{}-lun{lun}.txt", legacy_stem(target))
}

fn stem(target: &str) -> String {
    let lower = target.to_ascii_lowercase();
    let mut s = String::with_capacity(lower.len());
    for b in lower.bytes() {
        if matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-') {
            s.push(char::from(b));
        } else {
            let _ = write!(s, "%{b:02x}");
        }
    }
    if s.len() <= MAX_STEM_BYTES {
        return s;
    }
    let mut h = String::from("~");
    for b in Sha256::digest(lower.as_bytes()) {
        let _ = write!(h, "{b:02x}");
    }
    h
}

/// Every character but ASCII letters, digits, `.` and `-` made `_`.
pub(crate) fn legacy_stem(target: &str) -> String {
    target
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_shared_a_file_no_longer_do() {
        assert_eq!(
            legacy_file_name("pr", "iqn.x:t", 0),
            legacy_file_name("pr", "iqn.x_t", 0)
        );
        assert_eq!(file_name("pr", "iqn.x:t", 0), "pr-iqn.x%3at-lun0.txt");
        assert_eq!(file_name("pr", "iqn.x_t", 0), "pr-iqn.x%5ft-lun0.txt");
        assert_eq!(file_name("pr", "iqn.x%3at", 0), "pr-iqn.x%253at-lun0.txt");
        // One target however it is written.
        assert_eq!(
            file_name("sanitize", "IQN.2026-11.Test:T", 3),
            file_name("sanitize", "iqn.2026-11.test:t", 3)
        );
        assert_eq!(
            file_name("pr", "iqn.2026-11.test:t", 3),
            "pr-iqn.2026-11.test%3at-lun3.txt"
        );
    }

    #[test]
    fn the_encoding_is_one_to_one() {
        // Decoding the stem gives the lower-cased name back.
        let unstem = |s: &str| -> Vec<u8> {
            let mut out = Vec::new();
            let mut b = s.bytes();
            while let Some(c) = b.next() {
                if c == b'%' {
                    let h = [b.next().unwrap(), b.next().unwrap()];
                    out.push(u8::from_str_radix(std::str::from_utf8(&h).unwrap(), 16).unwrap());
                } else {
                    out.push(c);
                }
            }
            out
        };
        for name in [
            "iqn.2026-11.test:t",
            "a b",
            "%",
            "~",
            "é:ü",
            "eui.0123456789ABCDEF",
        ] {
            let s = stem(name);
            assert!(!s.starts_with('~'));
            assert_eq!(unstem(&s), name.to_ascii_lowercase().into_bytes(), "{name}");
        }
    }

    #[test]
    fn long_stems_are_hashed_and_file_names_stay_short() {
        let long = format!("iqn.2026-11.test:{}", ":".repeat(206));
        let other = format!("iqn.2026-11.test:{}", ":".repeat(205) + ";");
        let (a, b) = (
            file_name("sanitize", &long, u16::MAX),
            file_name("sanitize", &other, 0),
        );
        assert!(
            a.starts_with("sanitize-~") && b.starts_with("sanitize-~"),
            "{a}"
        );
        assert_ne!(stem(&long), stem(&other));
        assert_eq!(stem(&long), stem(&long.to_ascii_uppercase()));
        // Room for the `.corrupt-<unix time>` a file kept aside gets.
        let longest = format!(
            "sanitize-{}-lun65535.txt.corrupt-18446744073709551615-99",
            "x".repeat(MAX_STEM_BYTES)
        );
        assert!(longest.len() <= 255, "{}", longest.len());
    }
}
