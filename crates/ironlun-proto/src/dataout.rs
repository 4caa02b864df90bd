//! Collecting the data of one write command: immediate data, unsolicited
//! Data-Out, and the Data-Out sequences solicited by R2Ts
//! (RFC 7143 §4.2.5.2, §11.7, §11.8).
//!
//! ironlun always negotiates DataPDUInOrder=Yes and DataSequenceInOrder=Yes
//! (RFC 7143 §13.18, §13.19), so a command's data arrives at strictly
//! increasing, contiguous offsets: first the unsolicited part, then each
//! solicited sequence in the order of its R2T. Every Data-Out is checked
//! against that.

use std::collections::VecDeque;

use bytes::Bytes;
use ironlun_payload::DataOutBuffer;
use ironlun_scsi_codes::{Asc, SenseCode, SenseKey};

/// A Data-Out that breaks the sequencing rules. At ERL 0 this is a
/// connection-level protocol error (RFC 7143 §7.1.4).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DataOutError {
    #[error("unsolicited Data-Out not allowed (InitialR2T=Yes or past FirstBurstLength)")]
    UnsolicitedNotAllowed,
    #[error("Data-Out TTT 0x{0:08x} matches no outstanding R2T of the task")]
    UnknownTtt(u32),
    #[error("Data-Out for R2T 0x{0:08x} while an earlier R2T sequence is incomplete")]
    OutOfOrderSequence(u32),
    #[error("DataSN {got}, expected {expected}")]
    BadDataSn { got: u32, expected: u32 },
    #[error("buffer offset {got}, expected {expected}")]
    BadOffset { got: u32, expected: u32 },
    #[error("Data-Out beyond the end of its sequence ({end})")]
    BeyondSequence { end: u32 },
    #[error("F bit set before the sequence ended at {end}")]
    EarlyFinal { end: u32, unsolicited: bool },
}

impl DataOutError {
    /// The sense that reports this error on the task: the iSCSI codes of
    /// RFC 7143 §11.4.7.2 where one exists, otherwise the SPC-4 Annex D
    /// data phase codes, all with ABORTED COMMAND.
    pub fn sense(&self) -> SenseCode {
        let asc = match self {
            DataOutError::UnsolicitedNotAllowed => Asc::UNEXPECTED_UNSOLICITED_DATA,
            DataOutError::UnknownTtt(_) => Asc::INVALID_TARGET_PORT_TRANSFER_TAG_RECEIVED,
            DataOutError::OutOfOrderSequence(_) | DataOutError::BadDataSn { .. } => {
                Asc::DATA_PHASE_ERROR
            }
            DataOutError::BadOffset { .. } => Asc::DATA_OFFSET_ERROR,
            DataOutError::BeyondSequence { .. } => Asc::TOO_MUCH_WRITE_DATA,
            DataOutError::EarlyFinal {
                unsolicited: true, ..
            } => Asc::NOT_ENOUGH_UNSOLICITED_DATA,
            DataOutError::EarlyFinal {
                unsolicited: false, ..
            } => Asc::DATA_PHASE_ERROR,
        };
        SenseCode::new(SenseKey::ABORTED_COMMAND, asc)
    }
}

/// One R2T sent and not yet fully answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct R2tRecord {
    pub ttt: u32,
    pub r2t_sn: u32,
    pub offset: u32,
    pub len: u32,
    next_data_sn: u32,
}

/// An R2T to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct R2tToSend {
    pub ttt: u32,
    pub r2t_sn: u32,
    pub offset: u32,
    pub len: u32,
}

/// Data collection state for one write command.
#[derive(Debug)]
pub struct WriteCollect {
    edtl: u32,
    received: u32,
    data: DataOutBuffer,
    unsolicited_end: u32,
    unsolicited_data_sn: u32,
    next_solicit: u32,
    r2t_sn: u32,
    r2ts: VecDeque<R2tRecord>,
}

/// Result of accepting one Data-Out.
#[derive(Debug, PartialEq, Eq)]
pub enum DataOutProgress {
    /// More data is expected.
    More,
    /// An R2T sequence finished; more R2Ts may be sent.
    SequenceDone,
    /// All EDTL bytes are here.
    Complete,
}

impl WriteCollect {
    /// Starts collecting a command expecting `edtl` bytes that arrived with
    /// `immediate` data and may be followed by unsolicited data up to
    /// `unsolicited_limit` bytes in all (RFC 7143 §13.14). The caller has
    /// checked that the immediate data fits.
    pub fn new(edtl: u32, immediate: Bytes, unsolicited_limit: u32, initial_r2t: bool) -> Self {
        let imm = u32::try_from(immediate.len()).unwrap_or(u32::MAX);
        // With InitialR2T=Yes only immediate data is unsolicited; otherwise
        // the initiator sends min(FirstBurstLength, EDTL) unsolicited.
        let unsolicited_end = if initial_r2t {
            imm
        } else {
            unsolicited_limit.max(imm)
        }
        .min(edtl);
        let data = DataOutBuffer::from(immediate);
        WriteCollect {
            edtl,
            received: imm,
            data,
            unsolicited_end,
            unsolicited_data_sn: 0,
            next_solicit: unsolicited_end,
            r2t_sn: 0,
            r2ts: VecDeque::new(),
        }
    }

    pub fn edtl(&self) -> u32 {
        self.edtl
    }

    pub fn received(&self) -> u32 {
        self.received
    }

    pub fn is_complete(&self) -> bool {
        self.received >= self.edtl
    }

    /// Bytes still to be solicited by R2Ts not yet sent.
    pub fn bytes_to_request(&self) -> u32 {
        debug_assert!(self.next_solicit <= self.edtl, "solicited past EDTL");
        self.edtl.saturating_sub(self.next_solicit)
    }

    pub fn outstanding_r2ts(&self) -> usize {
        self.r2ts.len()
    }

    /// The next R2T to send, if fewer than `max_outstanding` are open and
    /// data remains to be requested. `max_burst` bounds its length; `ttt`
    /// is the tag to use.
    pub fn next_r2t(
        &mut self,
        max_outstanding: usize,
        max_burst: u32,
        ttt: u32,
    ) -> Option<R2tToSend> {
        if self.r2ts.len() >= max_outstanding || self.next_solicit >= self.edtl {
            return None;
        }
        let len = self.bytes_to_request().min(max_burst.max(1));
        debug_assert!(len > 0, "an empty R2T");
        let r = R2tToSend {
            ttt,
            r2t_sn: self.r2t_sn,
            offset: self.next_solicit,
            len,
        };
        self.r2ts.push_back(R2tRecord {
            ttt,
            r2t_sn: self.r2t_sn,
            offset: self.next_solicit,
            len,
            next_data_sn: 0,
        });
        self.r2t_sn = self.r2t_sn.wrapping_add(1);
        // Within EDTL: `len` is at most what is left to request.
        self.next_solicit = self.next_solicit.saturating_add(len);
        debug_assert!(self.next_solicit <= self.edtl, "R2T past EDTL");
        Some(r)
    }

    /// Accepts one Data-Out PDU.
    pub fn accept(
        &mut self,
        ttt: u32,
        data_sn: u32,
        offset: u32,
        final_bit: bool,
        data: Bytes,
    ) -> Result<DataOutProgress, DataOutError> {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let unsolicited = ttt == ironlun_wire::RESERVED_TAG;
        let (seq_end, expected_sn) = if unsolicited {
            if self.received >= self.unsolicited_end && !(len == 0 && final_bit) {
                return Err(DataOutError::UnsolicitedNotAllowed);
            }
            (self.unsolicited_end, self.unsolicited_data_sn)
        } else {
            let Some(pos) = self.r2ts.iter().position(|r| r.ttt == ttt) else {
                return Err(DataOutError::UnknownTtt(ttt));
            };
            if pos != 0 || self.received < self.unsolicited_end {
                return Err(DataOutError::OutOfOrderSequence(ttt));
            }
            let r = self
                .r2ts
                .front()
                .map(|r| (r.offset.saturating_add(r.len), r.next_data_sn));
            r.unwrap_or((0, 0))
        };
        if data_sn != expected_sn {
            return Err(DataOutError::BadDataSn {
                got: data_sn,
                expected: expected_sn,
            });
        }
        if offset != self.received {
            return Err(DataOutError::BadOffset {
                got: offset,
                expected: self.received,
            });
        }
        let end = offset.saturating_add(len);
        if end > seq_end {
            return Err(DataOutError::BeyondSequence { end: seq_end });
        }
        if final_bit && end != seq_end {
            return Err(DataOutError::EarlyFinal {
                end: seq_end,
                unsolicited,
            });
        }

        if len > 0 {
            self.data.push(data);
        }
        self.received = end;
        if unsolicited {
            self.unsolicited_data_sn = self.unsolicited_data_sn.wrapping_add(1);
        } else if let Some(front) = self.r2ts.front_mut() {
            front.next_data_sn = front.next_data_sn.wrapping_add(1);
        }

        // A sequence is complete when its last byte is here; initiators
        // must also set F there, which is checked above only for the
        // early case so that a missing F costs nothing.
        let mut progress = DataOutProgress::More;
        if !unsolicited && end == seq_end {
            self.r2ts.pop_front();
            progress = DataOutProgress::SequenceDone;
        }
        if self.is_complete() {
            progress = DataOutProgress::Complete;
        }
        Ok(progress)
    }

    /// The collected data, in the pieces the PDUs carried (never joined
    /// here: the backend writes the pieces with one vectored call).
    pub fn into_data(self) -> DataOutBuffer {
        self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ironlun_wire::RESERVED_TAG;

    fn bytes(n: usize, v: u8) -> Bytes {
        Bytes::from(vec![v; n])
    }

    #[test]
    fn immediate_data_covering_everything_completes_at_once() {
        let w = WriteCollect::new(4096, bytes(4096, 1), 65536, false);
        assert!(w.is_complete());
        let d = w.into_data();
        assert_eq!(d.len(), 4096);
    }

    #[test]
    fn unsolicited_then_solicited() {
        // EDTL 10000, FirstBurstLength 4096, immediate 1024, MaxBurst 4000.
        let mut w = WriteCollect::new(10000, bytes(1024, 1), 4096, false);
        let r1 = w.next_r2t(2, 4000, 10).unwrap();
        assert_eq!((r1.offset, r1.len, r1.r2t_sn), (4096, 4000, 0));
        let r2 = w.next_r2t(2, 4000, 11).unwrap();
        assert_eq!((r2.offset, r2.len, r2.r2t_sn), (8096, 1904, 1));
        assert!(w.next_r2t(2, 4000, 12).is_none(), "everything is requested");

        // Solicited data before unsolicited is complete: out of order.
        assert_eq!(
            w.accept(10, 0, 4096, false, bytes(100, 2)),
            Err(DataOutError::OutOfOrderSequence(10))
        );
        assert_eq!(
            w.accept(RESERVED_TAG, 0, 1024, false, bytes(2048, 2)),
            Ok(DataOutProgress::More)
        );
        assert_eq!(
            w.accept(RESERVED_TAG, 1, 3072, true, bytes(1024, 2)),
            Ok(DataOutProgress::More)
        );
        assert_eq!(
            w.accept(10, 0, 4096, false, bytes(2000, 3)),
            Ok(DataOutProgress::More)
        );
        assert_eq!(
            w.accept(10, 1, 6096, true, bytes(2000, 3)),
            Ok(DataOutProgress::SequenceDone)
        );
        assert_eq!(
            w.accept(11, 0, 8096, true, bytes(1904, 4)),
            Ok(DataOutProgress::Complete)
        );
        let d = w.into_data();
        assert_eq!(d.len(), 10000);
        // The six PDUs' data (immediate and five Data-Outs), not joined.
        assert_eq!(d.segments().len(), 6);
        let d = d.contiguous();
        assert_eq!(d[0], 1);
        assert_eq!(d[1024], 2);
        assert_eq!(d[4096], 3);
        assert_eq!(d[9999], 4);
    }

    #[test]
    fn initial_r2t_yes_forbids_unsolicited_data_out() {
        let mut w = WriteCollect::new(8192, Bytes::new(), 65536, true);
        assert_eq!(
            w.accept(RESERVED_TAG, 0, 0, true, bytes(512, 0)),
            Err(DataOutError::UnsolicitedNotAllowed)
        );
        let r = w.next_r2t(1, 262144, 7).unwrap();
        assert_eq!((r.offset, r.len), (0, 8192));
    }

    #[test]
    fn data_sn_and_offset_errors() {
        let mut w = WriteCollect::new(1024, Bytes::new(), 0, true);
        w.next_r2t(1, 1024, 5).unwrap();
        assert_eq!(
            w.accept(5, 1, 0, false, bytes(512, 0)),
            Err(DataOutError::BadDataSn {
                got: 1,
                expected: 0
            })
        );
        assert_eq!(
            w.accept(5, 0, 512, false, bytes(512, 0)),
            Err(DataOutError::BadOffset {
                got: 512,
                expected: 0
            })
        );
        assert_eq!(
            w.accept(5, 0, 0, false, bytes(512, 0)),
            Ok(DataOutProgress::More)
        );
        // DataSN 0 again (libiscsi's iSCSIDataSnInvalid case 1).
        assert_eq!(
            w.accept(5, 0, 512, true, bytes(512, 0)),
            Err(DataOutError::BadDataSn {
                got: 0,
                expected: 1
            })
        );
        assert_eq!(
            w.accept(6, 1, 512, true, bytes(512, 0)),
            Err(DataOutError::UnknownTtt(6))
        );
        assert_eq!(
            w.accept(5, 1, 512, true, bytes(1024, 0)),
            Err(DataOutError::BeyondSequence { end: 1024 })
        );
    }

    #[test]
    fn early_final_bit_is_an_error() {
        let mut w = WriteCollect::new(2048, Bytes::new(), 2048, false);
        assert_eq!(
            w.accept(RESERVED_TAG, 0, 0, true, bytes(512, 0)),
            Err(DataOutError::EarlyFinal {
                end: 2048,
                unsolicited: true
            })
        );
    }

    #[test]
    fn r2ts_bounded_by_max_outstanding_and_burst() {
        let mut w = WriteCollect::new(1 << 20, Bytes::new(), 0, true);
        let mut n = 0;
        while w.next_r2t(4, 65536, 100 + n).is_some() {
            n += 1;
        }
        assert_eq!(n, 4);
        assert_eq!(w.outstanding_r2ts(), 4);
        assert_eq!(w.bytes_to_request(), (1 << 20) - 4 * 65536);
    }
}
