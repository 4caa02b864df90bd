//! One shared zeroed buffer that every zero read is sliced from.

use bytes::Bytes;

/// Size of the shared zero buffer. Larger reads allocate.
const ZERO_LEN: usize = 16 << 20;

/// Zeros in the program's zero-initialised data: reading them maps the
/// kernel's shared zero page, so they cost no memory.
static ZEROS: [u8; ZERO_LEN] = [0; ZERO_LEN];

/// `len` zero bytes. Up to 16 MiB this borrows the static buffer: a
/// `Bytes` of static data has no reference count, so clones and drops on
/// every core touch no shared cache line (a shared, counted buffer cost
/// 15–18 % of the target's CPU in 4 KiB null reads on 8 cores: `perf`,
/// docs/performance.md).
pub fn zeros(len: usize) -> Bytes {
    match ZEROS.get(..len) {
        Some(z) => Bytes::from_static(z),
        None => Bytes::from(vec![0u8; len]),
    }
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
