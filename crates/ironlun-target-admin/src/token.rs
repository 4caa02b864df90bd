//! The bearer token of the management API over HTTP (`admin_token_file`):
//! read once at start, compared in constant time.

use std::io;
use std::path::Path;

use subtle::ConstantTimeEq;

/// A token clients send as `Authorization: Bearer TOKEN`.
pub struct Token(Vec<u8>);

impl Token {
    /// Reads the token from `path` by the rule of all token files
    /// (`ironlun_token::load`).
    pub fn load(path: &Path) -> io::Result<Token> {
        ironlun_token::load(path).map(Token)
    }

    /// The token in `text` (`ironlun_token::parse`), for tests.
    #[cfg(test)]
    pub(crate) fn parse(text: &[u8]) -> Token {
        Token(ironlun_token::parse(text).unwrap())
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
        let t = Token(ironlun_token::parse(b"  0123456789abcdef-secret\n").unwrap());
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
}
