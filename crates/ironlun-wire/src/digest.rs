//! CRC32C header and data digests (RFC 7143 §13.1, test vectors in
//! RFC 7143 Appendix B.4). The `crc32c` crate uses SSE4.2 / ARMv8 CRC
//! instructions when the CPU has them.
//!
//! The digest value goes on the wire least significant byte first, which is
//! how RFC 7143 Appendix B.4 prints its vectors.

/// CRC32C (Castagnoli) of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// CRC32C of several slices as if they were one.
pub fn crc32c_parts(parts: &[&[u8]]) -> u32 {
    parts
        .iter()
        .fold(0u32, |crc, p| crc32c::crc32c_append(crc, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7143 Appendix B.4: the byte sequences and the digest bytes as
    // transmitted.
    #[test]
    fn rfc7143_appendix_b4_vectors() {
        assert_eq!(crc32c(&[0u8; 32]).to_le_bytes(), [0xaa, 0x36, 0x91, 0x8a]);
        assert_eq!(
            crc32c(&[0xffu8; 32]).to_le_bytes(),
            [0x43, 0xab, 0xa8, 0x62]
        );
        let inc: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&inc).to_le_bytes(), [0x4e, 0x79, 0xdd, 0x46]);
        let dec: Vec<u8> = (0u8..32).rev().collect();
        assert_eq!(crc32c(&dec).to_le_bytes(), [0x5c, 0xdb, 0x3f, 0x11]);
        // An iSCSI Read (10) command PDU.
        let read10: [u8; 48] = [
            0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14,
            0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ];
        assert_eq!(crc32c(&read10).to_le_bytes(), [0x56, 0x3a, 0x96, 0xd9]);
    }

    #[test]
    fn parts_equal_whole() {
        let data: Vec<u8> = (0..=255u8).collect();
        let (a, b) = data.split_at(77);
        assert_eq!(crc32c_parts(&[a, b]), crc32c(&data));
        assert_eq!(crc32c_parts(&[]), crc32c(&[]));
    }
}
