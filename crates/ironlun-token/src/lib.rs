//! # ironlun-token: secret tokens read from files
//!
//! **Owns:** the one rule for a token file, shared by the target's
//! management API (`admin_token_file`, a bearer token) and the bench
//! agents (`--token-file`, the key of their challenge-response): the
//! token is the file's text without surrounding white space, 16 to 4096
//! printable ASCII bytes without spaces, in a file others cannot read.
//!
//! **Must not know:** how a token is used (compared as a bearer token,
//! used as an HMAC key); callers wrap the bytes in a type of their own
//! and compare in constant time. It depends on nothing but `std`.

#![forbid(unsafe_code)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Shortest token accepted: a guessable one would let any local process
/// use the API, or anyone on the network drive an agent.
pub const MIN_LEN: usize = 16;
/// Longest token read.
pub const MAX_LEN: usize = 4096;

/// Reads the token from `path`: its text without surrounding white
/// space, 16 to 4096 bytes, in a file that others cannot read.
pub fn load(path: &Path) -> io::Result<Vec<u8>> {
    let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    let meta = std::fs::metadata(path)?;
    let mode = meta.permissions().mode();
    if mode & 0o004 != 0 {
        return Err(bad(format!(
            "world-readable (mode {:o}): run chmod o-r on it",
            mode & 0o7777
        )));
    }
    if meta.len() > MAX_LEN as u64 * 2 {
        return Err(bad(format!("longer than {MAX_LEN} bytes")));
    }
    let text = std::fs::read(path)?;
    parse(&text).map_err(|m| bad(m.to_owned()))
}

/// The token in `text`: without surrounding white space, 16 to 4096
/// printable ASCII bytes without spaces.
pub fn parse(text: &[u8]) -> Result<Vec<u8>, &'static str> {
    let token = text.trim_ascii();
    if token.len() < MIN_LEN {
        return Err("the token is shorter than 16 characters");
    }
    if token.len() > MAX_LEN {
        return Err("the token is longer than 4096 bytes");
    }
    if !token.iter().all(|b| b.is_ascii_graphic()) {
        return Err("the token must be printable ASCII without spaces");
    }
    Ok(token.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &[u8] = b"0123456789abcdef-secret";

    #[test]
    fn surrounding_white_space_is_not_part_of_the_token() {
        assert_eq!(parse(b"  0123456789abcdef-secret\n").unwrap(), T);
    }

    #[test]
    fn short_long_or_spaced_tokens_are_refused() {
        assert!(parse(b"short").is_err());
        assert!(parse(b"   \n").is_err());
        assert!(parse(&[b'a'; MAX_LEN + 1]).is_err());
        assert!(parse(b"0123456789 abcdef").is_err());
        assert!(parse(&[b'a'; MAX_LEN]).is_ok());
    }

    #[test]
    fn a_world_readable_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, T).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = load(&p).err().unwrap();
        assert!(e.to_string().contains("world-readable"), "{e}");
        for mode in [0o600, 0o640] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(load(&p).unwrap(), T, "mode {mode:o}");
        }
    }
}
