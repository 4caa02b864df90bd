//! The LU's physical block: the one place that decides its size from the
//! LUN's override and what the backend says of its store, and that turns
//! it into what initiators read: READ CAPACITY(16)'s LOGICAL BLOCKS PER
//! PHYSICAL BLOCK EXPONENT (SBC-4 §5.20.2) and the Block Limits page's
//! OPTIMAL TRANSFER LENGTH GRANULARITY (SBC-4 §6.6.4).
//!
//! Initiators align to these: Linux sets a disk's `physical_block_size`
//! and `minimum_io_size` from them, and file systems, partitioners and
//! Windows align to them. A file LUN on a 4 KiB-block file system that
//! reports 512-byte physical blocks gets 512-byte-aligned 4 KiB writes,
//! each straddling two file system blocks (ext4 serialises such O_DIRECT
//! writes; buffered ones read-modify-write a page).

use std::num::NonZeroU32;

/// The largest physical block taken from a backend. Stores that report
/// more (an NFS mount's `wsize`, ZFS's record size) speak of a preferred
/// I/O size rather than of a unit the store writes whole; above this an
/// initiator would align partitions and file system sectors to it too.
pub const MAX_PHYSICAL: u32 = 64 << 10;

/// LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT is a 4-bit field.
const MAX_EXPONENT: u32 = 15;

/// The physical block size an LU with `block_size`-byte logical blocks
/// reports: `configured` (the LUN's `pbs=`) when given, else what the
/// backend reports of its store when that is a power of two no larger
/// than [`MAX_PHYSICAL`], raised to the logical block size; else the
/// logical block size.
pub fn physical_block(block_size: u32, configured: Option<u32>, store: Option<u32>) -> u32 {
    if let Some(p) = configured {
        return p;
    }
    match store {
        Some(p) if p.is_power_of_two() && p <= MAX_PHYSICAL => p.max(block_size),
        _ => block_size,
    }
}

/// Why a configured physical block size cannot be reported over
/// `block_size`-byte logical blocks, if it cannot.
pub fn check(block_size: u32, physical: u32) -> Result<(), String> {
    if !physical.is_power_of_two()
        || physical < block_size
        || physical
            .checked_div(block_size)
            .is_none_or(|n| n.trailing_zeros() > MAX_EXPONENT)
    {
        return Err(format!(
            "physical block size {physical} (must be a power of two from the block size {block_size} up to {} blocks)",
            1u32 << MAX_EXPONENT
        ));
    }
    Ok(())
}

/// LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT (SBC-4 §5.20.2): 2^n
/// logical blocks per physical block. Both sizes are powers of two
/// ([`check`]).
pub fn exponent(block_size: u32, physical: u32) -> u8 {
    let n = per_physical(block_size, physical).trailing_zeros();
    n.min(MAX_EXPONENT) as u8
}

/// OPTIMAL TRANSFER LENGTH GRANULARITY (SBC-4 §6.6.4), in logical
/// blocks: a transfer whose length is not a multiple of the physical
/// block costs the store a read-modify-write.
pub fn granularity(block_size: u32, physical: u32) -> u16 {
    u16::try_from(per_physical(block_size, physical)).unwrap_or(u16::MAX)
}

/// Logical blocks per physical block, at least one (a block size of 0
/// counts as 1).
fn per_physical(block_size: u32, physical: u32) -> u32 {
    NonZeroU32::new(block_size)
        .map_or(physical, |bs| physical / bs)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_override_wins_then_the_store_then_the_block_size() {
        assert_eq!(physical_block(512, Some(4096), Some(512)), 4096);
        assert_eq!(physical_block(512, Some(512), Some(4096)), 512);
        assert_eq!(physical_block(512, None, Some(4096)), 4096);
        assert_eq!(physical_block(512, None, Some(8192)), 8192);
        assert_eq!(physical_block(512, None, None), 512);
        assert_eq!(physical_block(4096, None, None), 4096);
    }

    #[test]
    fn a_store_block_below_the_logical_block_is_raised_to_it() {
        assert_eq!(physical_block(4096, None, Some(512)), 4096);
    }

    #[test]
    fn odd_or_huge_store_blocks_are_not_taken() {
        assert_eq!(physical_block(512, None, Some(3000)), 512);
        assert_eq!(physical_block(512, None, Some(0)), 512);
        assert_eq!(physical_block(512, None, Some(128 << 10)), 512);
        assert_eq!(physical_block(512, None, Some(MAX_PHYSICAL)), MAX_PHYSICAL);
    }

    #[test]
    fn exponent_and_granularity() {
        assert_eq!(exponent(512, 512), 0);
        assert_eq!(exponent(512, 4096), 3);
        assert_eq!(exponent(4096, 4096), 0);
        assert_eq!(exponent(512, 64 << 10), 7);
        assert_eq!(granularity(512, 512), 1);
        assert_eq!(granularity(512, 4096), 8);
        assert_eq!(granularity(4096, 4096), 1);
        assert_eq!(granularity(4096, 64 << 10), 16);
    }

    #[test]
    fn check_refuses_what_the_exponent_cannot_say() {
        assert!(check(512, 4096).is_ok());
        assert!(check(4096, 4096).is_ok());
        assert!(check(512, 512 << 15).is_ok());
        assert!(check(512, 512 << 16).is_err());
        assert!(check(4096, 512).is_err());
        assert!(check(512, 1536).is_err());
        assert!(check(512, 0).is_err());
    }
}
