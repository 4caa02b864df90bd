//! The shared token of agents and their controller, and the proof of
//! knowing it.
//!
//! The file's rules are those of every token file (`ironlun-token`, which
//! the target's admin token follows too): 16 to 4096 printable ASCII
//! bytes without spaces, in a file others cannot read. The token itself never
//! crosses the network: the agent sends a fresh random challenge and the
//! controller answers with HMAC-SHA256(token, challenge) (RFC 2104),
//! which the agent compares in constant time.

use std::io;
use std::path::Path;

use hmac::digest::InvalidLength;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// HMAC-SHA256 (RFC 2104 with SHA-256), keyed with the token.
type HmacSha256 = Hmac<Sha256>;

/// The shared token, held as the HMAC keyed with it.
pub struct Token(HmacSha256);

impl Token {
    /// Reads the token from `path` by the rule of all token files
    /// (`ironlun_token::load`).
    pub fn load(path: &Path) -> io::Result<Token> {
        let key = ironlun_token::load(path)?;
        keyed(&key)
            .map(Token)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
    }

    /// The token in `text` (`ironlun_token::parse`).
    pub fn parse(text: &[u8]) -> Result<Token, &'static str> {
        let key = ironlun_token::parse(text)?;
        keyed(&key)
            .map(Token)
            .map_err(|_| "the token is no HMAC key")
    }

    /// The answer to `challenge`, in hex.
    pub fn prove(&self, challenge: &str) -> String {
        let mac = self.0.clone().chain_update(challenge.as_bytes());
        hex(&mac.finalize().into_bytes())
    }

    /// Whether `proof` answers `challenge` with this token (compared in
    /// constant time).
    pub fn admits(&self, challenge: &str, proof: &str) -> bool {
        bool::from(self.prove(challenge).as_bytes().ct_eq(proof.as_bytes()))
    }
}

/// HMAC-SHA256 keyed with `key`: it takes keys of any length (a longer
/// one than a block is hashed first, RFC 2104 §2), so this never fails
/// in practice, but the crate's signature says it may.
fn keyed(key: &[u8]) -> Result<HmacSha256, InvalidLength> {
    HmacSha256::new_from_slice(key)
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        let hmac_sha256 = |key: &[u8], msg: &[u8]| {
            keyed(key)
                .unwrap()
                .chain_update(msg)
                .finalize()
                .into_bytes()
        };
        // RFC 4231 §4.3 (test case 2) and §4.7 (a key longer than a block).
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let mac = hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex(&mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn only_the_answer_with_the_same_token_to_the_same_challenge_is_admitted() {
        let t = Token::parse(b"0123456789abcdef-secret\n").unwrap();
        let other = Token::parse(b"0123456789abcdef-secreT").unwrap();
        let proof = t.prove("c1");
        assert!(t.admits("c1", &proof));
        assert!(!t.admits("c2", &proof), "an answer to another challenge");
        assert!(!t.admits("c1", &other.prove("c1")));
        assert!(!t.admits("c1", ""));
        assert!(!t.admits("c1", &proof[..63]));
        assert!(!t.admits("c1", "0123456789abcdef-secret"));
    }
}
