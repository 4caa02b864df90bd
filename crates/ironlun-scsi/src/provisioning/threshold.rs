//! Logical block provisioning thresholds (SBC-4 §4.7.3.7): a soft
//! threshold on the space the file system under a thin LU has left for
//! it to grow into.
//!
//! What initiators see, in the layouts Seagate's SCSI Commands Reference
//! Manual (rev. J) gives for SBC-4's pages:
//! - THRESHOLD EXPONENT in the Logical Block Provisioning VPD page
//!   (§5.4.13): a threshold set is 2^exponent blocks, the unit of every
//!   count below. Zero, "thresholds not supported", without a threshold.
//! - One threshold descriptor in the Logical Block Provisioning mode page
//!   1Ch/02h (§5.3.19): enabled, soft (THRESHOLD TYPE 000b, table 395),
//!   armed decreasing (THRESHOLD ARMING 000b, table 396), on the
//!   available LBA mapping resources (THRESHOLD RESOURCE 01h, the log
//!   parameter code it watches), THRESHOLD COUNT in threshold sets; SITUA
//!   = 0: every I_T nexus is told. Nothing in it is changeable.
//! - The Available (0001h) and Used (0002h) LBA Mapping Resource Count
//!   parameters of the Logical Block Provisioning log page (§5.2.13),
//!   in threshold sets.
//!
//! When the space left drops below the threshold, every I_T nexus gets a
//! THIN PROVISIONING SOFT THRESHOLD REACHED unit attention (06/38/07) and
//! the LU's owner is told once. The threshold is armed again only once
//! the space is back above it by a margin (1/16 of it, at least one
//! threshold set), so space hovering at the line does not flood
//! initiators with unit attentions.
//!
//! The space is looked at (one fstatvfs) after writes, not per command:
//! once [`check_step`] bytes were written since the last look, or
//! [`CHECK_INTERVAL`] passed, whichever comes first.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::lu::LogicalUnit;
use ironlun_scsi_codes::Asc;

/// A soft threshold as the operator sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoftThreshold {
    /// Bytes of free space.
    Bytes(u64),
    /// A percentage (1..=100) of the LU's capacity.
    Percent(u8),
}

impl SoftThreshold {
    /// The threshold in bytes for an LU of `capacity` bytes.
    pub fn bytes_for(self, capacity: u64) -> u64 {
        match self {
            SoftThreshold::Bytes(b) => b,
            SoftThreshold::Percent(p) => {
                // A u64 times a u8 fits a u128.
                let b = u128::from(capacity).saturating_mul(u128::from(p)) / 100;
                u64::try_from(b).unwrap_or(u64::MAX)
            }
        }
    }
}

impl fmt::Display for SoftThreshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SoftThreshold::Bytes(b) => write!(f, "{b} bytes"),
            SoftThreshold::Percent(p) => write!(f, "{p}% of the capacity"),
        }
    }
}

/// A crossing, as the LU's owner is told of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThresholdEvent {
    /// The space left dropped below the threshold; every I_T nexus has
    /// the unit attention.
    Reached {
        free_bytes: u64,
        threshold_bytes: u64,
    },
    /// The space is back above the threshold (and its margin): the next
    /// drop below it is reported again.
    Rearmed {
        free_bytes: u64,
        threshold_bytes: u64,
    },
}

/// Called once per crossing (to log it).
pub type ThresholdNotify = Box<dyn Fn(ThresholdEvent) + Send + Sync>;

/// Longest time writes go on without a look at the space.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(5);

/// Bytes written between two looks at the space: 1/16 of the threshold,
/// within 64 KiB..=1 MiB. A crossing is seen at most this much (and one
/// write) late.
pub fn check_step(threshold_bytes: u64) -> u64 {
    (threshold_bytes / 16).clamp(64 << 10, 1 << 20)
}

/// THRESHOLD EXPONENT for an LU of `blocks` blocks of `block_size`
/// bytes on a store that allocates in `granule`-byte units: threshold
/// sets at least a granule (one set is storage the file system really
/// gives or takes), and few enough that the capacity counts below 2^32
/// sets, as VPD page B2h requires; never zero.
pub fn exponent_for(blocks: u64, block_size: u32, granule: u64) -> u8 {
    let per_granule = NonZeroU64::new(u64::from(block_size))
        .map_or(granule, |bs| granule / bs)
        .max(1);
    // A set, `block_size << e` bytes, must fit a u64: the granule the
    // store reports is taken up to that.
    let most = u64::from(block_size).leading_zeros().min(63);
    let e = per_granule
        .checked_next_power_of_two()
        .map_or(most, |p| p.trailing_zeros())
        .clamp(1, most.max(1));
    // The least exponent from `e` up that brings the count below 2^32
    // (32 always does).
    (e..63).find(|&e| (blocks >> e) < 1 << 32).unwrap_or(e) as u8
}

/// What one look at the space means: `reached` is whether the threshold
/// was reached and not armed again since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Judgement {
    Reached,
    Rearmed,
}

/// Below the threshold while armed: reached. At or above it by `margin`
/// while reached: armed again. Anything else changes nothing.
pub(crate) fn judge(reached: bool, free: u64, threshold: u64, margin: u64) -> Option<Judgement> {
    if !reached && free < threshold {
        Some(Judgement::Reached)
    } else if reached && free >= threshold.saturating_add(margin) {
        Some(Judgement::Rearmed)
    } else {
        None
    }
}

/// One LU's soft threshold and where its crossing stands.
pub(crate) struct ThresholdState {
    spec: SoftThreshold,
    notify: Option<ThresholdNotify>,
    epoch: Instant,
    /// Bytes written since the space was last looked at.
    unchecked: AtomicU64,
    /// When it was last looked at, in nanoseconds after `epoch`.
    checked_at: AtomicU64,
    /// Reached and not armed again. Held while a look is judged, so that
    /// looks racing each other report a crossing once.
    reached: Mutex<bool>,
}

impl ThresholdState {
    pub(crate) fn new(spec: SoftThreshold, notify: Option<ThresholdNotify>) -> ThresholdState {
        ThresholdState {
            spec,
            notify,
            epoch: Instant::now(),
            unchecked: AtomicU64::new(0),
            checked_at: AtomicU64::new(0),
            reached: Mutex::new(false),
        }
    }

    pub(crate) fn spec(&self) -> SoftThreshold {
        self.spec
    }

    /// Whether the threshold is reached now (and not armed again).
    pub(crate) fn is_reached(&self) -> bool {
        *self.reached.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `bytes` were written at `now`: looks at the space if it is time.
    pub(crate) fn note_write(&self, lu: &LogicalUnit, bytes: u64, now: Instant) {
        let unchecked = self
            .unchecked
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes);
        let at =
            u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        let since = at.saturating_sub(self.checked_at.load(Ordering::Relaxed));
        let step = check_step(threshold_bytes(lu, self.spec));
        if unchecked < step && since < CHECK_INTERVAL.as_nanos() as u64 {
            return;
        }
        self.unchecked.store(0, Ordering::Relaxed);
        self.checked_at.store(at, Ordering::Relaxed);
        if let Some(free) = lu.backend.free_bytes() {
            self.observe(lu, free);
        }
    }

    /// Judges a look at the space: on a crossing, the unit attention for
    /// every I_T nexus (SITUA = 0) and one word to the owner.
    pub(crate) fn observe(&self, lu: &LogicalUnit, free: u64) {
        let threshold = threshold_bytes(lu, self.spec);
        let margin = set_bytes(lu).max(threshold / 16);
        let mut reached = self.reached.lock().unwrap_or_else(|e| e.into_inner());
        let event = match judge(*reached, free, threshold, margin) {
            None => return,
            Some(Judgement::Reached) => {
                *reached = true;
                lu.establish_ua(Asc::THIN_PROVISIONING_SOFT_THRESHOLD_REACHED, None);
                ThresholdEvent::Reached {
                    free_bytes: free,
                    threshold_bytes: threshold,
                }
            }
            Some(Judgement::Rearmed) => {
                *reached = false;
                ThresholdEvent::Rearmed {
                    free_bytes: free,
                    threshold_bytes: threshold,
                }
            }
        };
        drop(reached);
        if let Some(notify) = &self.notify {
            notify(event);
        }
    }
}

/// THRESHOLD EXPONENT of `lu` (VPD page B2h): zero without a threshold.
pub(crate) fn exponent(lu: &LogicalUnit) -> u8 {
    if lu.soft_threshold().is_none() {
        return 0;
    }
    exponent_for(
        lu.num_blocks(),
        lu.block_size(),
        lu.backend.provisioning_granularity(),
    )
}

/// Bytes in one threshold set: never zero, and no bit shifted out
/// ([`exponent_for`] keeps the set within a u64).
pub(crate) fn set_bytes(lu: &LogicalUnit) -> u64 {
    u64::from(lu.block_size()) << exponent(lu)
}

/// THRESHOLD COUNT: the configured threshold in threshold sets, rounded
/// up, at least one.
pub(crate) fn threshold_count(lu: &LogicalUnit, spec: SoftThreshold) -> u32 {
    let capacity = lu.num_blocks().saturating_mul(u64::from(lu.block_size()));
    let sets = spec.bytes_for(capacity).div_ceil(set_bytes(lu)).max(1);
    u32::try_from(sets).unwrap_or(u32::MAX)
}

/// The threshold the space is held to: THRESHOLD COUNT sets in bytes,
/// so that it is reached exactly when the available resource count the
/// log page reports drops below the mode page's THRESHOLD COUNT.
pub(crate) fn threshold_bytes(lu: &LogicalUnit, spec: SoftThreshold) -> u64 {
    u64::from(threshold_count(lu, spec)).saturating_mul(set_bytes(lu))
}

/// A byte count in threshold sets (rounded down), as a RESOURCE COUNT.
pub(crate) fn in_sets(lu: &LogicalUnit, bytes: u64) -> u32 {
    let sets = NonZeroU64::new(set_bytes(lu)).map_or(bytes, |set| bytes / set);
    u32::try_from(sets).unwrap_or(u32::MAX)
}

/// Length of the Logical Block Provisioning mode page with its one
/// threshold descriptor.
pub(crate) const MODE_PAGE_LEN: usize = 24;

/// The Logical Block Provisioning mode page (1Ch/02h, SPF = 1). Its
/// default values are its current ones: the operator sets the threshold.
pub(crate) fn mode_page(lu: &LogicalUnit, _current: bool) -> Vec<u8> {
    let mut p = [0u8; MODE_PAGE_LEN];
    p[0] = 0x40 | 0x1c;
    p[1] = 0x02;
    p[3] = (MODE_PAGE_LEN - 4) as u8;
    // Byte 4: SITUA = 0. Threshold descriptor at 16: ENABLED, THRESHOLD
    // TYPE 000b (soft), THRESHOLD ARMING 000b (decreasing); THRESHOLD
    // RESOURCE 01h (available LBA mapping resources); THRESHOLD COUNT.
    p[16] = 0x80;
    p[17] = 0x01;
    let count = lu
        .soft_threshold()
        .map_or(0, |t| threshold_count(lu, t.spec()));
    p[20..24].copy_from_slice(&count.to_be_bytes());
    p.to_vec()
}

/// Its changeable values: none.
pub(crate) const MODE_PAGE_CHANGEABLE: [u8; MODE_PAGE_LEN] = [
    0x5c, 0x02, 0x00, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
];

/// SCOPE (log parameter byte 8, table 316): the count is the LU's own.
const SCOPE_DEDICATED: u8 = 0b01;
/// SCOPE: other users of the pool (the file system's other files) change
/// the count.
const SCOPE_SHARED: u8 = 0b10;

/// A Logical Block Provisioning log parameter: PARAMETER CODE, the
/// control byte of a binary format list parameter (FORMAT AND LINKING
/// 11b; TSD = 1: nothing is saved), PARAMETER LENGTH 8, RESOURCE COUNT,
/// SCOPE.
fn resource_count(code: u16, count: u32, scope: u8) -> (u16, Vec<u8>) {
    let mut p = Vec::with_capacity(12);
    p.extend_from_slice(&code.to_be_bytes());
    p.push(0x20 | 0x03);
    p.push(8);
    p.extend_from_slice(&count.to_be_bytes());
    p.extend_from_slice(&[scope, 0, 0, 0]);
    (code, p)
}

/// The Logical Block Provisioning log page's parameters, by parameter
/// code: the available LBA mapping resources (the file system's free
/// space, shared with its other files) and, where the store can say, the
/// used ones (the LU file's allocated blocks). Reading the space is a
/// look at it too: a crossing it shows is reported.
pub(crate) fn log_parameters(lu: &LogicalUnit) -> crate::log_sense::Parameters {
    let mut params = Vec::new();
    if let Some(free) = lu.backend.free_bytes() {
        if let Some(t) = lu.soft_threshold() {
            t.observe(lu, free);
        }
        params.push(resource_count(0x0001, in_sets(lu, free), SCOPE_SHARED));
    }
    if let Some(used) = lu.backend.used_bytes() {
        params.push(resource_count(0x0002, in_sets(lu, used), SCOPE_DEDICATED));
    }
    params
}

impl LogicalUnit {
    /// Sets a soft threshold (SBC-4 §4.7.3.7) on a thin LU whose store
    /// says how much space its file system has left; `notify` hears of
    /// every crossing. Refused on any other LU.
    pub fn set_soft_threshold(
        &mut self,
        spec: SoftThreshold,
        notify: Option<ThresholdNotify>,
    ) -> Result<(), String> {
        if !self.thin() {
            return Err("a soft threshold needs a thin LU".into());
        }
        if self.backend.free_bytes().is_none() {
            return Err(format!(
                "a soft threshold needs a store on a file system (a {} backend has none)",
                self.backend.kind()
            ));
        }
        if spec == SoftThreshold::Bytes(0) || spec == SoftThreshold::Percent(0) {
            return Err("a soft threshold of zero is never reached".into());
        }
        self.threshold = Some(ThresholdState::new(spec, notify));
        Ok(())
    }

    /// The soft threshold and its state, if one is set.
    pub(crate) fn soft_threshold(&self) -> Option<&ThresholdState> {
        self.threshold.as_ref()
    }

    /// Whether the soft threshold is reached now (and not armed again).
    pub fn soft_threshold_reached(&self) -> bool {
        self.soft_threshold().is_some_and(|t| t.is_reached())
    }
}
#[cfg(test)]
mod tests;
