//! The bearer token of the management API over HTTP (`admin_token_file`):
//! read once at start, compared in constant time.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use subtle::ConstantTimeEq;

/// Shortest token accepted: a guessable one would open the API to any
/// local process.
const MIN_LEN: usize = 16;
/// Longest token read.
const MAX_LEN: usize = 4096;

/// A token clients send as `Authorization: Bearer TOKEN`.
pub struct Token(Vec<u8>);

impl Token {
    /// Reads the token from `path`: its text without surrounding white
    /// space, 16 to 4096 bytes, in a file that others cannot read.
    pub fn load(path: &Path) -> io::Result<Token> {
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
        let meta = std::fs::metadata(path)?;
        if meta.permissions().mode() & 0o004 != 0 {
            return Err(bad(format!(
                "world-readable (mode {:o}): run chmod o-r on it",
                meta.permissions().mode() & 0o7777
            )));
        }
        if meta.len() > MAX_LEN as u64 * 2 {
            return Err(bad(format!("longer than {MAX_LEN} bytes")));
        }
        let text = std::fs::read(path)?;
        Token::parse(&text).map_err(|m| bad(m.to_owned()))
    }

    fn parse(text: &[u8]) -> Result<Token, &'static str> {
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
        Ok(Token(token.to_vec()))
    }

    /// Whether an `Authorization` header value carries this token (the
    /// scheme compares without regard to case, RFC 9110 §11.1).
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        let Some((scheme, given)) = value.split_at_checked(7) else {
            return false;
        };
        scheme.eq_ignore_ascii_case(b"Bearer ") && bool::from(given.ct_eq(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &[u8] = b"0123456789abcdef-secret";

    #[test]
    fn only_the_exact_token_with_the_bearer_scheme_is_admitted() {
        let t = Token::parse(b"  0123456789abcdef-secret\n").unwrap();
        assert!(t.admits(Some(b"Bearer 0123456789abcdef-secret")));
        assert!(t.admits(Some(b"bearer 0123456789abcdef-secret")));
        assert!(!t.admits(None));
        assert!(!t.admits(Some(b"Bearer 0123456789abcdef-secreT")));
        assert!(!t.admits(Some(b"Bearer 0123456789abcdef-secret ")));
        assert!(!t.admits(Some(b"Bearer 0123456789abcdef")));
        assert!(!t.admits(Some(b"Basic 0123456789abcdef-secret")));
        assert!(!t.admits(Some(T)));
        assert!(!t.admits(Some(b"Bearer")));
    }

    #[test]
    fn short_long_or_spaced_tokens_are_refused() {
        assert!(Token::parse(b"short").is_err());
        assert!(Token::parse(b"   \n").is_err());
        assert!(Token::parse(&[b'a'; MAX_LEN + 1]).is_err());
        assert!(Token::parse(b"0123456789 abcdef").is_err());
        assert!(Token::parse(&[b'a'; MAX_LEN]).is_ok());
    }

    #[test]
    fn a_world_readable_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, T).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Token::load(&p).err().unwrap();
        assert!(e.to_string().contains("world-readable"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Token::load(&p).is_ok());
    }
}
