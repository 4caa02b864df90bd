//! SNACK Request (RFC 7143 §11.16): the initiator asks for PDUs again;
//! declared once.

use super::fields::{Bits, Lun, Word, EXP_STAT_SN, FINAL, FLAGS, ITT, LUN, TTT};
use crate::codes::SnackType;

/// Byte 1 bits 0..3: the Type (§11.16.1).
const TYPE: Bits = Bits {
    at: FLAGS,
    mask: 0x0f,
    shift: 0,
};
/// BegRun and RunLength (§11.16.4, §11.16.5).
const BEG_RUN: Word = Word(40);
const RUN_LENGTH: Word = Word(44);

pdu! {
    /// SNACK Request (RFC 7143 §11.16).
    pub struct SnackRequest {
        pub snack_type: SnackType = TYPE,
        pub lun: Lun = LUN,
        pub itt: u32 = ITT,
        pub ttt: u32 = TTT,
        pub exp_stat_sn: u32 = EXP_STAT_SN,
        pub beg_run: u32 = BEG_RUN,
        pub run_length: u32 = RUN_LENGTH,
    }
    always { FINAL => true, }
}
