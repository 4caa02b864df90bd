//! SCSI commands: the CmdSN window's order, R2T and Data-Out, Data-In
//! and the response (RFC 7143 §4.2.2, §11.2–§11.8).

use super::*;

impl TargetConnection {
    /// Command-class PDUs pass the CmdSN window (RFC 7143 §4.2.2.1).
    pub(super) fn on_command(&mut self, pdu: Pdu, frame: Frame) {
        let (immediate, cmd_sn) = match &pdu {
            Pdu::ScsiCommand(c) => (c.immediate, c.cmd_sn),
            Pdu::NopOut(n) => (n.immediate, n.cmd_sn),
            Pdu::TaskMgmtRequest(t) => (t.immediate, t.cmd_sn),
            Pdu::TextRequest(t) => (t.immediate, t.cmd_sn),
            Pdu::LogoutRequest(l) => (l.immediate, l.cmd_sn),
            _ => return,
        };
        if self.logout.is_some() && !matches!(pdu, Pdu::LogoutRequest(_)) {
            self.reject(&frame.bhs, Violation::WaitingForLogout);
            return;
        }
        if immediate {
            if self.immediate_in_flight >= self.cfg.max_immediate {
                self.reject(&frame.bhs, Violation::TooManyImmediate);
                return;
            }
            self.dispatch(pdu, frame, false);
            return;
        }
        match self.window.classify(cmd_sn) {
            Admission::InOrder => {
                self.window.accept_in_order();
                self.dispatch(pdu, frame, true);
                self.drain_ahead();
            }
            Admission::Ahead => {
                if self.ahead.iter().any(|(sn, _)| *sn == cmd_sn) {
                    self.stats.ignored_cmd_sn = self.stats.ignored_cmd_sn.saturating_add(1);
                } else {
                    self.ahead.push((cmd_sn, frame));
                }
            }
            Admission::Outside => {
                // Silently ignored (RFC 7143 §4.2.2.1); the initiator will
                // time out the command.
                self.stats.ignored_cmd_sn = self.stats.ignored_cmd_sn.saturating_add(1);
            }
        }
    }

    pub(super) fn drain_ahead(&mut self) {
        loop {
            let exp = self.window.exp_cmd_sn();
            let Some(pos) = self.ahead.iter().position(|(sn, _)| *sn == exp) else {
                // Commands the window moved past can never be delivered.
                self.ahead.retain(|(sn, _)| sn_lt(exp, *sn));
                return;
            };
            let (_, frame) = self.ahead.swap_remove(pos);
            let Ok(pdu) = Pdu::decode(&frame.bhs) else {
                continue;
            };
            self.window.accept_in_order();
            self.dispatch(pdu, frame, true);
        }
    }

    pub(super) fn dispatch(&mut self, pdu: Pdu, frame: Frame, windowed: bool) {
        if !windowed {
            debug_assert!(self.immediate_in_flight < self.cfg.max_immediate);
            self.immediate_in_flight = self.immediate_in_flight.saturating_add(1);
        }
        match pdu {
            Pdu::ScsiCommand(c) => self.on_scsi_command(c, frame, windowed),
            Pdu::NopOut(n) => self.on_nop_out(n, frame.data, windowed),
            Pdu::TaskMgmtRequest(t) => self.on_tmf(t, windowed),
            Pdu::TextRequest(t) => self.on_text(t, frame.data, windowed),
            Pdu::LogoutRequest(l) => self.on_logout(l, windowed),
            _ => self.finish_command(windowed),
        }
    }

    /// A command-class PDU has been answered: free its window slot or its
    /// immediate slot.
    pub(super) fn finish_command(&mut self, windowed: bool) {
        if windowed {
            self.window.release();
        } else {
            debug_assert!(
                self.immediate_in_flight > 0,
                "an immediate command ended twice"
            );
            self.immediate_in_flight = self.immediate_in_flight.saturating_sub(1);
        }
    }

    pub(super) fn on_scsi_command(&mut self, c: ScsiCommand, frame: Frame, windowed: bool) {
        self.stats.commands = self.stats.commands.saturating_add(1);
        if self.discovery {
            self.reject(&frame.bhs, Violation::CommandInDiscovery);
            self.finish_command(windowed);
            return;
        }
        if self.tasks.contains_key(&c.itt) || c.itt == RESERVED_TAG {
            self.reject(&frame.bhs, Violation::TagInUse);
            self.finish_command(windowed);
            return;
        }
        let cdb = match self.cdb_of(&c, &frame) {
            Ok(cdb) => cdb,
            Err(v) => {
                self.reject(&frame.bhs, v);
                self.finish_command(windowed);
                return;
            }
        };
        let edtl = c.expected_data_transfer_length;
        let imm_len = frame.data.len() as u64;
        // Checks on the data that came with the command (RFC 7143 §11.3.4,
        // §13.11, §13.14).
        let bad_data = if c.read && c.write {
            Some(Violation::Bidirectional)
        } else if imm_len > 0
            && (!c.write
                || !self.session.immediate_data
                || imm_len > u64::from(edtl)
                || imm_len > u64::from(self.session.first_burst_length))
        {
            Some(Violation::ImmediateData)
        } else {
            None
        };
        if let Some(v) = bad_data {
            self.reject(&frame.bhs, v);
            self.finish_command(windowed);
            return;
        }

        let task = Task {
            arrived: self.last_rx,
            cdb,
            windowed,
            aborted: false,
            answer_aborted: false,
            reserved: 0,
            state: TaskState::Executing,
            cmd: c,
        };
        let itt = task.cmd.itt;
        if task.cmd.write && edtl > 0 {
            if edtl > self.cfg.max_write_transfer_length {
                // Too large to buffer: execute with no data; the device
                // answers that the transfer cannot be done.
                self.tasks.insert(itt, task);
                self.execute(itt, DataOutBuffer::new());
                return;
            }
            let collect = WriteCollect::new(
                edtl,
                frame.data,
                self.session.unsolicited_limit(edtl),
                self.session.initial_r2t,
            );
            if collect.is_complete() {
                let data = collect.into_data();
                self.tasks.insert(itt, task);
                self.execute(itt, data);
                return;
            }
            let mut task = task;
            task.state = TaskState::Collecting(collect);
            self.tasks.insert(itt, task);
            self.solicit_queue.push_back(itt);
            self.pump_r2ts();
        } else {
            self.tasks.insert(itt, task);
            self.execute(itt, DataOutBuffer::new());
        }
    }

    /// The CDB, extended by an Extended CDB AHS when present.
    pub(super) fn cdb_of(&self, c: &ScsiCommand, frame: &Frame) -> Result<Cdb, Violation> {
        let mut cdb = Cdb::new(c.cdb);
        if frame.ahs.is_empty() {
            return Ok(cdb);
        }
        let segments = parse_ahs(&frame.ahs).map_err(|_| Violation::InvalidField)?;
        for s in segments {
            if s.ahs_type == AHS_TYPE_EXTENDED_CDB {
                // The AHS holds the CDB bytes beyond the first 16, after one
                // reserved byte (RFC 7143 §11.2.2.3).
                let extra = s.data.get(1..).unwrap_or(&[]);
                if extra.len() > 244 {
                    return Err(Violation::InvalidField);
                }
                let mut full = c.cdb.to_vec();
                full.extend_from_slice(extra);
                cdb.ext = Some(full.into_boxed_slice());
            }
        }
        Ok(cdb)
    }

    pub(super) fn execute(&mut self, itt: u32, data: DataOutBuffer) {
        let Some(task) = self.tasks.get_mut(&itt) else {
            return;
        };
        task.state = TaskState::Executing;
        self.stats.write_bytes = self.stats.write_bytes.saturating_add(data.len() as u64);
        self.events.push_back(Event::Execute(ScsiTask {
            itt,
            lun: task.cmd.lun,
            cdb: task.cdb.clone(),
            attr: task.cmd.attr,
            read: task.cmd.read,
            write: task.cmd.write,
            expected_data_transfer_length: task.cmd.expected_data_transfer_length,
            data_out: data,
        }));
    }

    /// Sends R2Ts for collecting tasks in arrival order, within the
    /// solicited-data budget and MaxOutstandingR2T.
    pub(super) fn pump_r2ts(&mut self) {
        let max_outstanding = usize::from(self.session.max_outstanding_r2t);
        let max_burst = self.session.max_burst_length;
        let mut i = 0;
        while let Some(&itt) = self.solicit_queue.get(i) {
            let ttt = self.next_ttt;
            let reserved_now = self.reserved;
            let budget = self.cfg.solicit_budget;
            let Some(task) = self.tasks.get_mut(&itt) else {
                self.solicit_queue.remove(i);
                continue;
            };
            let TaskState::Collecting(collect) = &mut task.state else {
                self.solicit_queue.remove(i);
                continue;
            };
            if task.reserved == 0 {
                let need = collect.bytes_to_request();
                if need == 0 {
                    // Only unsolicited data is still to come.
                    self.solicit_queue.remove(i);
                    continue;
                }
                // Reserve the whole solicited part at once so tasks cannot
                // starve each other; an oversize task runs alone.
                if reserved_now > 0 && reserved_now.saturating_add(u64::from(need)) > budget {
                    break;
                }
                task.reserved = need;
                self.reserved = self.reserved.saturating_add(u64::from(need));
            }
            let lun = task.cmd.lun;
            let mut sent = Vec::new();
            let mut t = ttt;
            while let Some(r) = collect.next_r2t(max_outstanding, max_burst, t) {
                sent.push(r);
                t = next_tag(t);
            }
            let done_requesting = collect.bytes_to_request() == 0;
            self.next_ttt = t;
            for r in sent {
                let max = self.window.max_cmd_sn();
                self.out.push_back(OutPdu::new(Pdu::R2t(R2t {
                    lun,
                    itt,
                    ttt: r.ttt,
                    // R2T carries the next StatSN without using it
                    // (RFC 7143 §11.8.3).
                    stat_sn: self.stat_sn,
                    exp_cmd_sn: self.window.exp_cmd_sn(),
                    max_cmd_sn: max,
                    r2t_sn: r.r2t_sn,
                    buffer_offset: r.offset,
                    desired_data_transfer_length: r.len,
                })));
            }
            if done_requesting {
                self.solicit_queue.remove(i);
            } else {
                i = i.saturating_add(1);
            }
        }
    }

    pub(super) fn on_data_out(&mut self, d: DataOut, data: Bytes) {
        let Some(task) = self.tasks.get_mut(&d.itt) else {
            // Data for a task that was rejected, aborted or never existed:
            // discard it (RFC 7143 §11.7, an ITT we do not know).
            return;
        };
        let TaskState::Collecting(collect) = &mut task.state else {
            // The task is already executing (for instance a write refused
            // without collecting its data): late data is discarded.
            return;
        };
        match collect.accept(d.ttt, d.data_sn, d.buffer_offset, d.final_bit, data) {
            Ok(DataOutProgress::More) => {}
            Ok(DataOutProgress::SequenceDone) => self.pump_r2ts(),
            Ok(DataOutProgress::Complete) => {
                let reserved = u64::from(task.reserved);
                let state = std::mem::replace(&mut task.state, TaskState::Executing);
                debug_assert!(self.reserved >= reserved, "solicited bytes released twice");
                self.reserved = self.reserved.saturating_sub(reserved);
                if let Some(t) = self.tasks.get_mut(&d.itt) {
                    t.reserved = 0;
                }
                if let TaskState::Collecting(c) = state {
                    self.execute(d.itt, c.into_data());
                }
                self.pump_r2ts();
            }
            Err(e) => self.data_out_error(d.itt, e),
        }
    }

    /// A Data-Out sequencing error ends the task, not the connection: it
    /// is answered with CHECK CONDITION (RFC 7143 §11.4.7.2) and any data
    /// still arriving for it is discarded. Other sessions and the rest of
    /// this one are unaffected.
    pub(super) fn data_out_error(&mut self, itt: u32, e: DataOutError) {
        self.stats.data_out_errors = self.stats.data_out_errors.saturating_add(1);
        let Some(task) = self.tasks.get_mut(&itt) else {
            return;
        };
        task.state = TaskState::Executing;
        let reserved = u64::from(std::mem::take(&mut task.reserved));
        let lun = task.cmd.lun;
        debug_assert!(self.reserved >= reserved, "solicited bytes released twice");
        self.reserved = self.reserved.saturating_sub(reserved);
        self.solicit_queue.retain(|t| *t != itt);
        self.events.push_back(Event::FailTask {
            itt,
            lun,
            sense: e.sense(),
        });
        self.pump_r2ts();
    }

    /// The driver finished executing a task. When its status is now
    /// queued, returns when the command arrived (the time of the input
    /// that brought its SCSI Command PDU), for the driver's latency.
    pub fn complete(&mut self, itt: u32, result: ScsiResult) -> Option<Instant> {
        let task = self.tasks.remove(&itt)?;
        self.release_task_resources(&task);
        if task.aborted {
            self.finish_command(task.windowed);
            self.end_aborted(&task);
            self.check_pending_tmfs();
            self.check_logout();
            return None;
        }
        // Free the window slot first, so the response already advertises
        // it in MaxCmdSN.
        self.finish_command(task.windowed);
        let answered = !self.closing;
        if answered {
            self.respond(&task, result);
        }
        self.check_logout();
        answered.then_some(task.arrived)
    }

    pub(super) fn release_task_resources(&mut self, task: &Task) {
        debug_assert!(
            self.reserved >= u64::from(task.reserved),
            "solicited bytes released twice"
        );
        self.reserved = self.reserved.saturating_sub(u64::from(task.reserved));
    }

    /// Data-In PDUs and status for a completed command
    /// (RFC 7143 §11.4, §11.7).
    pub(super) fn respond(&mut self, task: &Task, r: ScsiResult) {
        let itt = task.cmd.itt;
        let edtl = task.cmd.expected_data_transfer_length;
        let residual = Residual::of(edtl, r.transfer_length);
        let mut data = r.data_in;
        if data.len() > edtl as usize {
            data.truncate(edtl as usize);
        }
        if !task.cmd.read {
            data.clear();
        }
        self.stats.read_bytes = self.stats.read_bytes.saturating_add(data.len() as u64);
        let good = r.status == Status::GOOD && r.sense.is_empty();
        let mut data_sn = 0u32;
        if !data.is_empty() {
            let seg = self.conn.max_xmit_data_segment_length.max(512) as usize;
            let burst = self.session.max_burst_length.max(512) as usize;
            let total = data.len();
            let mut off = 0usize;
            // The end of the burst `off` is in: the next multiple of
            // `burst` above it.
            let mut burst_end = burst;
            while off < total {
                debug_assert!(off < burst_end, "a Data-In burst overran");
                let start = off;
                let n = seg
                    .min(total.saturating_sub(off))
                    .min(burst_end.saturating_sub(off));
                // Never past `total`: the sums below are exact.
                debug_assert!(n > 0 && n <= seg, "a Data-In segment of {n} bytes");
                off = off.saturating_add(n);
                let chunk = data.slice(start..off);
                let last = off == total;
                // F ends each Data-In sequence, bounded by MaxBurstLength
                // (RFC 7143 §13.13); S carries the status on the last PDU
                // when it is GOOD (phase collapse, RFC 7143 §11.7.4).
                let end_of_burst = last || off == burst_end;
                if off == burst_end {
                    burst_end = burst_end.saturating_add(burst);
                }
                let collapse = last && good;
                let (stat_sn, residual_field) = if collapse {
                    (self.next_stat_sn(), residual)
                } else {
                    (0, Residual::None)
                };
                let max = self.window.max_cmd_sn();
                self.out.push_back(OutPdu {
                    pdu: Pdu::DataIn(DataIn {
                        final_bit: end_of_burst,
                        ack: false,
                        residual: residual_field,
                        status: collapse.then_some(r.status),
                        lun: task.cmd.lun,
                        itt,
                        ttt: RESERVED_TAG,
                        stat_sn,
                        exp_cmd_sn: self.window.exp_cmd_sn(),
                        max_cmd_sn: max,
                        data_sn,
                        buffer_offset: start as u32,
                    }),
                    data: chunk,
                });
                data_sn = data_sn.wrapping_add(1);
            }
            if good {
                return;
            }
        }
        // A separate SCSI Response: sense data travels in its data segment
        // behind a 2-byte SenseLength (RFC 7143 §11.4.7).
        let payload = if r.sense.is_empty() {
            Bytes::new()
        } else {
            let mut b = BytesMut::with_capacity(r.sense.len().saturating_add(2));
            b.put_u16(r.sense.len() as u16);
            b.extend_from_slice(&r.sense);
            b.freeze()
        };
        let stat_sn = self.next_stat_sn();
        let max = self.window.max_cmd_sn();
        self.out.push_back(OutPdu {
            pdu: Pdu::ScsiResponse(ScsiResponse {
                bidi_residual: Residual::None,
                residual,
                response: ServiceResponse::COMMAND_COMPLETED,
                status: r.status,
                itt,
                snack_tag: 0,
                stat_sn,
                exp_cmd_sn: self.window.exp_cmd_sn(),
                max_cmd_sn: max,
                exp_data_sn: data_sn,
            }),
            data: payload.into(),
        });
    }
}
