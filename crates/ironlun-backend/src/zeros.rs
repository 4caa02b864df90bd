//! One shared zeroed buffer that every zero read is sliced from.

use std::sync::OnceLock;

use bytes::Bytes;

/// Size of the shared zero buffer. Larger reads allocate.
const ZERO_LEN: usize = 16 << 20;

static ZEROS: OnceLock<Bytes> = OnceLock::new();

/// `len` zero bytes. Up to 16 MiB this is a slice of one allocation made
/// with `calloc`-style zeroed pages, so it touches no new memory.
pub fn zeros(len: usize) -> Bytes {
    if len > ZERO_LEN {
        return Bytes::from(vec![0u8; len]);
    }
    ZEROS
        .get_or_init(|| Bytes::from(vec![0u8; ZERO_LEN]))
        .slice(..len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_are_zero_of_any_length() {
        assert_eq!(zeros(0).len(), 0);
        let z = zeros(4096);
        assert!(z.iter().all(|&b| b == 0));
        let big = zeros(ZERO_LEN + 1);
        assert_eq!(big.len(), ZERO_LEN + 1);
        assert!(big.iter().all(|&b| b == 0));
    }
}
