//! SCSI commands: the request and its reply, immediate and unsolicited
//! Data-Out, Data-In reassembly, R2T answers and status, with the retry of
//! a unit attention (RFC 7143 §4.2.5, §11.2–§11.8).

use super::*;

/// SCSI task attribute SIMPLE (SAM-5 §8.6, RFC 7143 §11.3.1.1 ATTR).
pub const ATTR_SIMPLE: u8 = 1;

/// One SCSI command to run.
#[derive(Clone, Debug, Default)]
pub struct ScsiRequest {
    pub lun: Lun,
    pub cdb: [u8; 16],
    /// Bytes the command reads (Data-In expected), 0 for none.
    pub read_len: u32,
    /// Bytes the command writes; empty for none.
    pub write: Bytes,
    /// Task attribute (RFC 7143 §11.3.1.1).
    pub attr: u8,
    /// Check Data-In for order and length as always, but keep none of it
    /// ([`ScsiReply::data`] is then empty): for a load generator that
    /// does not look at what it read, like IOMeter with no verification.
    /// The bytes still cross into user space once, from the socket.
    pub discard_data: bool,
}

/// A finished SCSI command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScsiReply {
    /// iSCSI response code (RFC 7143 §11.4.3): 0 = command completed.
    pub response: ServiceResponse,
    /// SCSI status (SAM-5 §5.3.1).
    pub status: Status,
    /// Sense data (without the SenseLength prefix), when status carries it.
    pub sense: Bytes,
    /// Data read, `read_len` bytes less any residual underflow (none when
    /// the request said [`ScsiRequest::discard_data`]).
    pub data: Bytes,
    pub residual: Residual,
}

#[derive(Debug)]
pub(super) struct ScsiTask {
    pub(super) req: ScsiRequest,
    pub(super) data: DataBuf,
    /// Next DataSN expected in Data-In (RFC 7143 §11.7.5).
    pub(super) exp_data_sn: u32,
    /// Times sent again after a unit attention.
    pub(super) ua_retries: u8,
}

/// Data-In collected for one command: one PDU's data is kept as it came
/// (no copy); several are joined into one buffer; discarded data is only
/// counted.
#[derive(Debug)]
pub(super) enum DataBuf {
    Empty,
    One(Bytes),
    Many(BytesMut),
    Counted(usize),
}

impl DataBuf {
    fn len(&self) -> usize {
        match self {
            DataBuf::Empty => 0,
            DataBuf::One(b) => b.len(),
            DataBuf::Many(b) => b.len(),
            DataBuf::Counted(n) => *n,
        }
    }

    fn count(&mut self, n: usize) {
        // Data-In is bounded by the read length before it is counted.
        *self = DataBuf::Counted(self.len().saturating_add(n));
    }

    fn append(&mut self, d: Bytes, capacity: usize) {
        *self = match std::mem::replace(self, DataBuf::Empty) {
            DataBuf::Empty => DataBuf::One(d),
            DataBuf::One(first) => {
                let mut m =
                    BytesMut::with_capacity(capacity.max(first.len().saturating_add(d.len())));
                m.extend_from_slice(&first);
                m.extend_from_slice(&d);
                DataBuf::Many(m)
            }
            DataBuf::Many(mut m) => {
                m.extend_from_slice(&d);
                DataBuf::Many(m)
            }
            DataBuf::Counted(n) => DataBuf::Counted(n.saturating_add(d.len())),
        }
    }

    fn take(&mut self) -> Bytes {
        match std::mem::replace(self, DataBuf::Empty) {
            DataBuf::Empty => Bytes::new(),
            DataBuf::One(b) => b,
            DataBuf::Many(m) => m.freeze(),
            DataBuf::Counted(_) => Bytes::new(),
        }
    }
}

/// A SCSI Command and the unsolicited Data-Out that follows it: immediate
/// data (ImmediateData=Yes) and unsolicited Data-Out PDUs (InitialR2T=No),
/// together at most FirstBurstLength (RFC 7143 §4.2.5.2).
pub(super) fn scsi_command_pdus(
    out: &mut VecDeque<OutPdu>,
    req: &ScsiRequest,
    h: Header,
    params: &SessionParams,
    max_xmit: usize,
) {
    let write_len = req.write.len() as u32;
    let edtl = if write_len > 0 {
        write_len
    } else {
        req.read_len
    };
    let unsolicited = params.unsolicited_limit(write_len) as usize;
    let immediate_len = if params.immediate_data {
        unsolicited.min(max_xmit)
    } else {
        0
    };
    let data_out_end = if params.initial_r2t {
        immediate_len
    } else {
        unsolicited
    };
    let more_unsolicited = data_out_end > immediate_len;
    out.push_back(OutPdu {
        pdu: Pdu::ScsiCommand(ScsiCommand {
            immediate: h.immediate,
            final_bit: !more_unsolicited,
            read: req.read_len > 0,
            write: write_len > 0,
            attr: req.attr & 0x07,
            lun: req.lun,
            itt: h.itt,
            expected_data_transfer_length: edtl,
            cmd_sn: h.cmd_sn,
            exp_stat_sn: h.exp_stat_sn,
            cdb: req.cdb,
        }),
        data: req.write.slice(..immediate_len).into(),
    });
    if more_unsolicited {
        push_data_out(
            out,
            &req.write,
            req.lun,
            h.itt,
            RESERVED_TAG,
            immediate_len,
            data_out_end,
            max_xmit,
            h.exp_stat_sn,
        );
    }
}

/// Data-Out PDUs for bytes `from..to` of `write`, no PDU longer than
/// `max_xmit` (the target's MaxRecvDataSegmentLength), DataSN from 0 and F
/// on the last (RFC 7143 §11.7).
#[allow(clippy::too_many_arguments)]
pub(super) fn push_data_out(
    out: &mut VecDeque<OutPdu>,
    write: &Bytes,
    lun: Lun,
    itt: u32,
    ttt: u32,
    from: usize,
    to: usize,
    max_xmit: usize,
    exp_stat_sn: u32,
) {
    let mut offset = from;
    let mut data_sn = 0u32;
    while offset < to {
        let end = offset.saturating_add(max_xmit).min(to);
        out.push_back(OutPdu {
            pdu: Pdu::DataOut(DataOut {
                final_bit: end == to,
                lun,
                itt,
                ttt,
                exp_stat_sn,
                data_sn,
                buffer_offset: offset as u32,
            }),
            data: write.slice(offset..end).into(),
        });
        data_sn = data_sn.wrapping_add(1);
        offset = end;
    }
}

impl<T> InitiatorSession<T> {
    /// Queues a SCSI command. It is sent at once if the window allows,
    /// otherwise when the target raises MaxCmdSN. Returns the task tag.
    pub fn submit(&mut self, req: ScsiRequest, token: T) -> Result<u32, Refused<T>> {
        if u32::try_from(req.write.len()).is_err() {
            let error = SubmitError::TooLong {
                len: req.write.len(),
            };
            return Err(Refused { error, token });
        }
        self.add(
            Body::Scsi(ScsiTask {
                req,
                data: DataBuf::Empty,
                exp_data_sn: 0,
                ua_retries: 0,
            }),
            token,
            false,
        )
    }

    pub(super) fn scsi_task(&mut self, itt: u32) -> Option<&mut ScsiTask> {
        let (idx, generation) = split_itt(itt);
        match self
            .slots
            .get_mut(usize::from(idx))
            .filter(|s| s.generation == generation)
            .and_then(|s| s.task.as_mut())
        {
            Some(Task {
                sent: true,
                body: Body::Scsi(t),
                ..
            }) => Some(t),
            _ => None,
        }
    }

    pub(super) fn data_in(&mut self, d: DataIn, data: Bytes) {
        let Some(task) = self.scsi_task(d.itt) else {
            return self.fail(format!("Data-In for unknown task 0x{:08x}", d.itt));
        };
        let read_len = task.req.read_len as usize;
        let offset = d.buffer_offset as usize;
        let problem = if d.data_sn != task.exp_data_sn {
            Some(format!(
                "Data-In DataSN {} where {} was due",
                d.data_sn, task.exp_data_sn
            ))
        } else if offset != task.data.len() {
            // DataPDUInOrder=Yes (RFC 7143 §13.18): no gaps, no overlap.
            Some(format!(
                "Data-In at offset {offset}, expected {}",
                task.data.len()
            ))
        } else if offset.saturating_add(data.len()) > read_len {
            Some(format!(
                "Data-In ends at {} past the {read_len} bytes asked for",
                offset.saturating_add(data.len())
            ))
        } else {
            None
        };
        if let Some(p) = problem {
            return self.finish(d.itt, Err(TaskError::Protocol(p)));
        }
        task.exp_data_sn = task.exp_data_sn.wrapping_add(1);
        if task.req.discard_data {
            task.data.count(data.len());
        } else if !data.is_empty() {
            task.data.append(data, read_len);
        }
        if let Some(status) = d.status {
            // Phase collapse: status in the last Data-In (RFC 7143 §11.7.4).
            let data = task.data.take();
            self.finish(
                d.itt,
                Ok(Reply::Scsi(ScsiReply {
                    response: ServiceResponse::COMMAND_COMPLETED,
                    status,
                    sense: Bytes::new(),
                    data,
                    residual: d.residual,
                })),
            );
        }
    }

    pub(super) fn scsi_response(&mut self, r: ScsiResponse, data: Bytes) {
        let Some(task) = self.scsi_task(r.itt) else {
            return self.fail(format!("SCSI Response for unknown task 0x{:08x}", r.itt));
        };
        let read = task.data.take();
        // Sense data: SenseLength (2 bytes) then the sense (RFC 7143
        // §11.4.7.2).
        let sense = match data.get(..2).and_then(|l| <[u8; 2]>::try_from(l).ok()) {
            Some(l) => {
                let n = usize::from(u16::from_be_bytes(l));
                data.slice(2..(2 + n).min(data.len()))
            }
            None => Bytes::new(),
        };
        let status = r.status;
        if r.response == ServiceResponse::COMMAND_COMPLETED
            && status == Status::CHECK_CONDITION
            && SenseCode::parse(&sense).map(|c| c.key) == Some(SenseKey::UNIT_ATTENTION)
            && self.retry(r.itt, sense.clone())
        {
            return;
        }
        self.finish(
            r.itt,
            Ok(Reply::Scsi(ScsiReply {
                response: r.response,
                status,
                sense,
                data: read,
                residual: r.residual,
            })),
        );
    }

    /// Queues a command that met a unit attention again, if it has
    /// retries left. The target has finished with the old command
    /// (it sent the response), so its tag may be reused.
    pub(super) fn retry(&mut self, itt: u32, sense: Bytes) -> bool {
        let limit = self.limits.unit_attention_retries;
        let (idx, generation) = split_itt(itt);
        let Some(task) = self
            .slots
            .get_mut(usize::from(idx))
            .filter(|s| s.generation == generation)
            .and_then(|s| s.task.as_mut())
        else {
            return false;
        };
        let Body::Scsi(t) = &mut task.body else {
            return false;
        };
        if t.ua_retries >= limit {
            return false;
        }
        t.ua_retries = t.ua_retries.saturating_add(1);
        t.exp_data_sn = 0;
        t.data = DataBuf::Empty;
        let lun = t.req.lun;
        task.sent = false;
        self.events
            .push_back(SessionEvent::UnitAttention { lun, sense });
        self.waiting.push_back(idx);
        self.flush_waiting();
        true
    }

    pub(super) fn r2t(&mut self, itt: u32, ttt: u32, offset: u32, len: u32) {
        let max_xmit = self.conn.max_xmit_data_segment_length.max(512) as usize;
        let max_burst = self.params.max_burst_length;
        let exp_stat_sn = self.exp_stat_sn;
        let Some(task) = self.scsi_task(itt) else {
            return self.fail(format!("R2T for unknown task 0x{itt:08x}"));
        };
        let total = task.req.write.len();
        // Saturating: an end past usize is past the write as well.
        let end = (offset as usize).saturating_add(len as usize);
        if len == 0 || end > total || len > max_burst || ttt == RESERVED_TAG {
            let why = format!(
                "R2T for bytes {offset}..{end} (TTT 0x{ttt:08x}) of a {total}-byte write, \
                 MaxBurstLength {max_burst} (RFC 7143 §11.8)"
            );
            return self.finish(itt, Err(TaskError::Protocol(why)));
        }
        let (write, lun) = (task.req.write.clone(), task.req.lun);
        push_data_out(
            &mut self.out,
            &write,
            lun,
            itt,
            ttt,
            offset as usize,
            end,
            max_xmit,
            exp_stat_sn,
        );
    }
}
