//! SCSI status (SAM-5 §5.3.1).

use crate::named_codes;

named_codes!(
    /// The status byte a command ends with (SAM-5 §5.3.1). Any byte is a
    /// value; the constants are the defined codes.
    pub struct Status(pub u8);
    unknown: "status 0x{:02x}", 0;
    GOOD = Status(0x00), "GOOD";
    CHECK_CONDITION = Status(0x02), "CHECK CONDITION";
    CONDITION_MET = Status(0x04), "CONDITION MET";
    BUSY = Status(0x08), "BUSY";
    RESERVATION_CONFLICT = Status(0x18), "RESERVATION CONFLICT";
    TASK_SET_FULL = Status(0x28), "TASK SET FULL";
    ACA_ACTIVE = Status(0x30), "ACA ACTIVE";
    TASK_ABORTED = Status(0x40), "TASK ABORTED";
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    #[test]
    fn names_and_numbers() {
        assert_eq!(Status::CHECK_CONDITION.0, 0x02);
        assert_eq!(format!("{}", Status::TASK_SET_FULL), "TASK SET FULL");
        assert_eq!(format!("{}", Status(0x22)), "status 0x22");
        assert_eq!(format!("{:?}", Status::GOOD), "Status(GOOD)");
        assert_eq!(Status::default(), Status::GOOD);
    }
}
