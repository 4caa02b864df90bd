//! The shared token of agents and their controller, and the proof of
//! knowing it.
//!
//! The file's rules are those of the target's admin token
//! (`ironlun-target`'s `admin::token`): 16 to 4096 printable ASCII bytes
//! without spaces, in a file others cannot read. The token itself never
//! crosses the network: the agent sends a fresh random challenge and the
//! controller answers with HMAC-SHA256(token, challenge) (RFC 2104),
//! which the agent compares in constant time.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Shortest token accepted: a guessable one would let anyone on the
/// network drive the agent.
const MIN_LEN: usize = 16;
/// Longest token read.
const MAX_LEN: usize = 4096;
/// SHA-256's block size (RFC 2104's B).
const BLOCK: usize = 64;

/// The shared token.
pub struct Token(Vec<u8>);

impl Token {
    /// Reads the token from `path`: its text without surrounding white
    /// space, 16 to 4096 bytes, in a file that others cannot read.
    pub fn load(path: &Path) -> io::Result<Token> {
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
        Token::parse(&text).map_err(|m| bad(m.to_owned()))
    }

    pub fn parse(text: &[u8]) -> Result<Token, &'static str> {
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

    /// The answer to `challenge`, in hex.
    pub fn prove(&self, challenge: &str) -> String {
        hex(&hmac_sha256(&self.0, challenge.as_bytes()))
    }

    /// Whether `proof` answers `challenge` with this token (compared in
    /// constant time).
    pub fn admits(&self, challenge: &str, proof: &str) -> bool {
        bool::from(self.prove(challenge).as_bytes().ct_eq(proof.as_bytes()))
    }
}

/// HMAC-SHA256 (RFC 2104 with SHA-256).
fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; BLOCK];
    let hashed;
    let key = if key.len() > BLOCK {
        hashed = Sha256::digest(key);
        hashed.as_slice()
    } else {
        key
    };
    for (d, s) in k.iter_mut().zip(key) {
        *d = *s;
    }
    let pad = |b: u8| k.map(|x| x ^ b);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
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

    #[test]
    fn short_long_spaced_or_world_readable_tokens_are_refused() {
        assert!(Token::parse(b"short").is_err());
        assert!(Token::parse(b"   \n").is_err());
        assert!(Token::parse(&[b'a'; MAX_LEN + 1]).is_err());
        assert!(Token::parse(b"0123456789 abcdef").is_err());
        assert!(Token::parse(&[b'a'; MAX_LEN]).is_ok());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, "0123456789abcdef-secret").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Token::load(&p).err().unwrap();
        assert!(e.to_string().contains("world-readable"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(Token::load(&p).is_ok());
    }
}
