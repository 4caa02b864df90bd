//! Seeds of the `initiator` target: ironlun's initiator (through the
//! harness, [`InitiatorHarness`]) logs in to and works against the
//! session harness's target ([`SessionHarness`], the daemon's own
//! connection logic on RAM LUs), and what that target sent becomes the
//! input, with the harness's submits and time steps between.

use bytes::BytesMut;
use ironlun_proto::initiator::default_isid;
use ironlun_scsi_codes::Status;
use ironlun_wire::text::encode_pairs;
use ironlun_wire::{
    encode_frame, AsyncEvent, AsyncMessage, DataIn, Digests, LoginResponse, NopIn, Pdu, R2t,
    Reject, RejectReason, ScsiCommand, ScsiResponse, TextResponse, RESERVED_TAG,
};

use crate::initiator::{InitiatorHarness, Job, Settings};
use crate::input::{RecordWriter, Stepped};
use crate::session::SessionHarness;
use crate::world::TSIH;

use super::{seed, Seed};

/// The two harnesses talking, recorded from the initiator's side.
struct Exchange {
    target: SessionHarness,
    ini: InitiatorHarness,
    w: RecordWriter,
    settings: u8,
}

impl Exchange {
    /// `target` is the session harness's settings byte (CHAP, LUs).
    fn new(settings: Settings, target: u8) -> Self {
        let mut t = SessionHarness::new(target);
        t.sent().keep();
        let settings = settings.to_byte();
        let mut ini = InitiatorHarness::new(settings);
        ini.sent().keep();
        let mut x = Exchange {
            target: t,
            ini,
            w: RecordWriter::new(),
            settings,
        };
        x.pump();
        x
    }

    /// Moves bytes both ways until neither side has anything to say.
    fn pump(&mut self) {
        for _ in 0..10_000 {
            let out = self.ini.sent().take();
            if !out.is_empty() {
                self.target.step(0, &out);
            }
            let back = self.target.sent().take();
            if !back.is_empty() {
                self.w.push(0, &back);
                self.ini.step(0, &back);
            }
            if out.is_empty() && back.is_empty() {
                return;
            }
        }
    }

    fn submit(&mut self, job: Job, arg: u8, lba: u8) {
        let p = [job.byte(), arg, lba];
        self.w.push(2, &p);
        self.ini.step(2, &p);
        self.pump();
    }

    /// Time passes on both sides.
    fn time(&mut self, ms: u32) {
        let p = ms.to_le_bytes();
        self.w.push(1, &p);
        self.ini.step(1, &p);
        self.target.step(1, &p);
        self.pump();
    }

    /// A step of the target's own (see [`crate::session`]): not recorded,
    /// only what the target sends because of it.
    fn target_event(&mut self, tag: u8, payload: &[u8]) {
        self.target.step(tag, payload);
        self.pump();
    }

    fn finish(&self) -> Vec<u8> {
        let mut v = vec![self.settings];
        v.extend(self.w.finish());
        v
    }
}

const READ_512: Job = Job::Read {
    bytes: 512,
    discard: false,
};
const READ_4K: Job = Job::Read {
    bytes: 4096,
    discard: false,
};
const READ_96K: Job = Job::Read {
    bytes: 96 << 10,
    discard: false,
};
const READ_DISCARD: Job = Job::Read {
    bytes: 4096,
    discard: true,
};

/// Reads and writes of every size on both LUs.
fn some_io(x: &mut Exchange) {
    x.submit(Job::TestUnitReady, 0, 0);
    x.submit(READ_512, 0, 0);
    x.submit(READ_96K, 0, 1);
    x.submit(READ_4K, 1, 2);
    x.submit(READ_DISCARD, 0, 3);
    x.submit(Job::Write { bytes: 512 }, 0, 4);
    x.submit(Job::Write { bytes: 4096 }, 1, 5);
    x.submit(Job::Write { bytes: 96 << 10 }, 0, 6);
    x.submit(READ_96K, 0, 6);
}

pub(super) fn seeds() -> Vec<Seed> {
    let mut seeds = Vec::new();

    // The first workload's 96 KiB write sends 16 KiB of immediate data
    // and waits for R2Ts for the rest; reads of 96 KiB come in several
    // Data-In. Six seconds of silence: both sides ping.
    let mut x = Exchange::new(Settings::default(), 0);
    some_io(&mut x);
    x.submit(Job::SendTargets, 0, 0);
    x.submit(Job::Ping, 0, 0);
    x.submit(Job::LogicalUnitReset, 1, 0);
    x.submit(Job::AbortTask, 0, 0);
    x.time(6000);
    x.submit(Job::Logout, 0, 0);
    seeds.push(seed("initiator", "normal-io", x.finish()));

    // Mutual CHAP, digests, and the unit attention of the first command
    // retried.
    let s = Settings {
        chap: true,
        mutual: true,
        digests: true,
        unit_attention_retry: true,
        ..Settings::default()
    };
    let mut x = Exchange::new(s, 1 | 2);
    some_io(&mut x);
    x.submit(Job::Logout, 0, 0);
    seeds.push(seed("initiator", "mutual-chap-digests-io", x.finish()));

    // InitialR2T=Yes, ImmediateData=No: every write byte answers an R2T.
    // The target holds commands, the task table (4 tags) fills, ABORT
    // TASK leaves its task for the driver to take back, and the target
    // asks for a logout (Asynchronous Message, event 1).
    let s = Settings {
        r2t_only: true,
        small_table: true,
        take_back: true,
        ..Settings::default()
    };
    let mut x = Exchange::new(s, 0);
    // The unit attentions of a new nexus, out of the way.
    x.submit(Job::TestUnitReady, 0, 0);
    x.submit(Job::TestUnitReady, 1, 0);
    x.target_event(3, &[1]);
    x.submit(READ_4K, 0, 0);
    x.submit(Job::Write { bytes: 4096 }, 0, 1);
    x.submit(Job::AbortTask, 0, 0);
    x.submit(READ_512, 1, 2);
    x.submit(Job::Write { bytes: 512 }, 0, 3);
    x.target_event(2, &[0]);
    x.target_event(3, &[0]);
    x.submit(Job::Write { bytes: 96 << 10 }, 0, 4);
    x.target_event(4, &[2]);
    seeds.push(seed("initiator", "r2t-only-held", x.finish()));

    // A discovery session: SendTargets spans Text Responses of 4 KiB,
    // each asked for with the target's TTT.
    let s = Settings {
        discovery: true,
        ..Settings::default()
    };
    let mut x = Exchange::new(s, 0);
    x.submit(Job::SendTargets, 0, 0);
    x.submit(Job::Ping, 0, 0);
    x.submit(Job::Logout, 0, 0);
    seeds.push(seed("initiator", "discovery", x.finish()));
    seeds.push(seed("initiator", "hostile-target", hostile_target()));
    seeds
}

/// A target that breaks rules, written by hand (no well-behaved target
/// sends these): the initiator must fail a task or the connection, never
/// itself, and answer what it must.
fn hostile_target() -> Vec<u8> {
    // The first workload: READ 4 KiB (ITT 0x10000) goes out with CmdSN
    // 1; the window is full, so the 96 KiB WRITE (0x10001) waits.
    let (read, write) = (0x0001_0000, 0x0001_0001);
    let mut s = Script::new(Settings::default(), 1);
    // A window announcement that opens nothing, a ping with more data
    // than the target itself takes, an asynchronous SCSI event.
    s.nop_in(RESERVED_TAG, RESERVED_TAG, &[]);
    s.nop_in(RESERVED_TAG, 5, &[7; 9000]);
    s.async_message(
        AsyncEvent::SCSI_ASYNC_EVENT,
        &[0, 18, 0x70, 0, 6, 0, 0, 0, 0, 10],
    );
    // Data-In out of order fails the read.
    s.data_in(read, 1, 0, &[1; 512], None);
    // The window opens: the write goes out (8 KiB immediate, 8 KiB
    // unsolicited, the target's segments being 8 KiB); an R2T past its
    // end fails it.
    s.exp_cmd_sn = 2;
    s.max_cmd_sn = 10;
    s.nop_in(RESERVED_TAG, RESERVED_TAG, &[]);
    s.r2t(write, 9, 90 << 10, 16 << 10);
    // A read that completes with status in its last Data-In, a write
    // whose data all went as immediate data, a SendTargets answered in
    // two Text Responses (each task takes the slot freed last, with its
    // generation one up).
    s.submit(READ_4K, 0, 0);
    s.data_in(0x0002_0001, 0, 0, &[2; 4096], Some(0));
    s.submit(Job::Write { bytes: 4096 }, 0, 0);
    s.scsi_response(0x0003_0001, 0);
    s.submit(Job::SendTargets, 0, 0);
    s.text_response(0x0004_0001, 0x44, b"TargetName=iqn.2026-11.test:a\0");
    s.text_response(0x0004_0001, RESERVED_TAG, b"TargetAddress=[::1]:3260,1\0");
    // A Reject of a command never sent: the connection fails.
    s.reject(0x0009_0009);
    s.finish()
}

/// A target written by hand, PDU by PDU, for inputs no well-behaved
/// target produces: it logs a default-settings initiator in (no CHAP,
/// no digests, our MaxRecvDataSegmentLength 8 KiB) with the command
/// window it is given, then sends what it is told. StatSN counts from
/// 100; ExpCmdSN and MaxCmdSN are the script's to set. ITTs are the
/// initiator's to hand out, predictably (slot and generation).
pub(crate) struct Script {
    w: RecordWriter,
    settings: u8,
    pub(crate) stat_sn: u32,
    pub(crate) exp_cmd_sn: u32,
    pub(crate) max_cmd_sn: u32,
}

impl Script {
    pub(crate) fn new(settings: Settings, max_cmd_sn: u32) -> Self {
        let mut s = Script {
            w: RecordWriter::new(),
            settings: settings.to_byte(),
            stat_sn: 100,
            exp_cmd_sn: 1,
            max_cmd_sn,
        };
        let isid = default_isid(0);
        let response = |transit, csg, nsg, tsih, stat_sn, max_cmd_sn| {
            Pdu::LoginResponse(LoginResponse {
                transit,
                csg,
                nsg,
                isid,
                tsih,
                stat_sn,
                exp_cmd_sn: 1,
                max_cmd_sn,
                ..LoginResponse::default()
            })
        };
        let sn = s.next_stat_sn();
        s.pdu(
            response(true, 0, 1, 0, sn, max_cmd_sn),
            b"AuthMethod=None\0",
        );
        let sn = s.next_stat_sn();
        let keys = encode_pairs([
            ("HeaderDigest", "None"),
            ("DataDigest", "None"),
            ("MaxConnections", "1"),
            ("InitialR2T", "No"),
            ("ImmediateData", "Yes"),
            ("MaxBurstLength", "65536"),
            ("FirstBurstLength", "16384"),
            ("DefaultTime2Wait", "2"),
            ("DefaultTime2Retain", "20"),
            ("MaxOutstandingR2T", "8"),
            ("DataPDUInOrder", "Yes"),
            ("DataSequenceInOrder", "Yes"),
            ("ErrorRecoveryLevel", "0"),
            ("MaxRecvDataSegmentLength", "8192"),
        ]);
        s.pdu(response(true, 1, 3, TSIH, sn, max_cmd_sn), &keys);
        s
    }

    /// StatSN for a PDU that carries status.
    pub(crate) fn next_stat_sn(&mut self) -> u32 {
        self.stat_sn += 1;
        self.stat_sn - 1
    }

    /// StatSN, ExpCmdSN and MaxCmdSN for a PDU that carries status
    /// (StatSN advances) or not (it carries the next one).
    fn numbers(&mut self, status: bool) -> (u32, u32, u32) {
        let stat_sn = if status {
            self.next_stat_sn()
        } else {
            self.stat_sn
        };
        (stat_sn, self.exp_cmd_sn, self.max_cmd_sn)
    }

    /// One PDU from the target.
    pub(crate) fn pdu(&mut self, pdu: Pdu, data: &[u8]) -> &mut Self {
        let mut out = BytesMut::new();
        if let Err(e) = encode_frame(&pdu.encode(), &[], data, Digests::default(), &mut out) {
            panic!("the script's PDU does not encode: {e}");
        }
        self.w.push(0, &out);
        self
    }

    pub(crate) fn submit(&mut self, job: Job, arg: u8, lba: u8) -> &mut Self {
        self.w.push(2, &[job.byte(), arg, lba]);
        self
    }

    /// A NOP-In: a ping (TTT set), a window announcement (ITT and TTT
    /// reserved) or an answer (ITT set; it uses a StatSN).
    fn nop_in(&mut self, itt: u32, ttt: u32, data: &[u8]) -> &mut Self {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = self.numbers(itt != RESERVED_TAG);
        self.pdu(
            Pdu::NopIn(NopIn {
                itt,
                ttt,
                stat_sn,
                exp_cmd_sn,
                max_cmd_sn,
                ..NopIn::default()
            }),
            data,
        )
    }

    fn data_in(&mut self, itt: u32, data_sn: u32, offset: u32, data: &[u8], status: Option<u8>) {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = self.numbers(status.is_some());
        self.pdu(
            Pdu::DataIn(DataIn {
                final_bit: status.is_some(),
                status: status.map(Status),
                itt,
                ttt: RESERVED_TAG,
                stat_sn,
                exp_cmd_sn,
                max_cmd_sn,
                data_sn,
                buffer_offset: offset,
                ..DataIn::default()
            }),
            data,
        );
    }

    fn r2t(&mut self, itt: u32, ttt: u32, offset: u32, len: u32) {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = self.numbers(false);
        self.pdu(
            Pdu::R2t(R2t {
                itt,
                ttt,
                stat_sn,
                exp_cmd_sn,
                max_cmd_sn,
                buffer_offset: offset,
                desired_data_transfer_length: len,
                ..R2t::default()
            }),
            &[],
        );
    }

    fn scsi_response(&mut self, itt: u32, status: u8) {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = self.numbers(true);
        self.pdu(
            Pdu::ScsiResponse(ScsiResponse {
                itt,
                status: Status(status),
                stat_sn,
                exp_cmd_sn,
                max_cmd_sn,
                ..ScsiResponse::default()
            }),
            &[],
        );
    }

    fn text_response(&mut self, itt: u32, ttt: u32, text: &[u8]) {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = self.numbers(true);
        self.pdu(
            Pdu::TextResponse(TextResponse {
                final_bit: ttt == RESERVED_TAG,
                itt,
                ttt,
                stat_sn,
                exp_cmd_sn,
                max_cmd_sn,
                ..TextResponse::default()
            }),
            text,
        );
    }

    fn async_message(&mut self, event: AsyncEvent, data: &[u8]) {
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = self.numbers(true);
        self.pdu(
            Pdu::AsyncMessage(AsyncMessage {
                async_event: event,
                stat_sn,
                exp_cmd_sn,
                max_cmd_sn,
                ..AsyncMessage::default()
            }),
            data,
        );
    }

    /// A Reject of a SCSI Command with this ITT (its header as the data).
    fn reject(&mut self, itt: u32) {
        let mut rejected = Pdu::ScsiCommand(ScsiCommand::default()).encode();
        rejected.set_itt(itt);
        let (stat_sn, exp_cmd_sn, max_cmd_sn) = self.numbers(true);
        self.pdu(
            Pdu::Reject(Reject {
                reason: RejectReason::INVALID_PDU_FIELD,
                stat_sn,
                exp_cmd_sn,
                max_cmd_sn,
                ..Reject::default()
            }),
            rejected.as_bytes(),
        );
    }

    pub(crate) fn finish(&self) -> Vec<u8> {
        let mut v = vec![self.settings];
        v.extend(self.w.finish());
        v
    }
}
