//! The core driven with frames and completions, no sockets: where each
//! command runs, what task management does to the LUs and asks of other
//! sessions, and what another session's abort leaves behind.

use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use ironlun_backend::{FileBackend, FileOptions, RamBackend};
use ironlun_proto::params::{ConnParams, Offers, SessionParams};
use ironlun_proto::target::login::{LoginResult, TargetInfo};
use ironlun_proto::target::{
    Directory, FfpConfig, SendTargetsQuery, TargetConnection, TargetListing,
};
use ironlun_scsi::{ItNexus, LogicalUnit, LuConfig, LunMap, NexusId};
use ironlun_scsi_codes::{opcode, SenseKey, Status};
use ironlun_wire::{
    encode_frame, Digests, FrameDecoder, Lun, Pdu, ScsiCommand, TaskMgmtRequest, TmfFunction,
    TmfResponse,
};

use crate::{Action, ConnCore, Dispatch, Lus, Recipients, SessionSignal};

mod durability;
mod latency;
mod others;

struct NoDirectory;

impl Directory for NoDirectory {
    fn send_targets(&self, _: &str, _: SendTargetsQuery<'_>) -> Vec<TargetListing> {
        Vec::new()
    }
}

pub(super) fn lu_config() -> LuConfig {
    LuConfig {
        block_size: 512,
        physical_block_size: None,
        read_only: false,
        product: "core".into(),
        revision: "0.1".into(),
        serial: "core0".into(),
        naa_id: 0x0f0f_1234,
        target_name: "iqn.2026-11.test:core".into(),
        portal_group_tag: 1,
        relative_port: 1,
        alua: Default::default(),
        max_transfer_bytes: 1 << 20,
        thin: false,
        sanitize: false,
        rotation: None,
    }
}

/// LUN 0 on RAM, 1 MiB.
pub(super) fn ram_map() -> Arc<LunMap> {
    let lu = LogicalUnit::new(lu_config(), Arc::new(RamBackend::new(1 << 20))).unwrap();
    Arc::new(LunMap::new(vec![(0, Arc::new(lu))]))
}

fn login() -> LoginResult {
    LoginResult {
        initiator_name: "iqn.2026-11.test:init".into(),
        initiator_alias: None,
        isid: [0x80, 0, 0, 0, 0, 1],
        tsih: 1,
        cid: 0,
        discovery: false,
        target: Some(TargetInfo {
            name: "iqn.2026-11.test:core".into(),
            alias: None,
            portal_group_tag: 1,
            offers: Offers::default(),
            queue_depth: 8,
            chap: None,
        }),
        session: SessionParams::default(),
        conn: ConnParams::default(),
        exp_cmd_sn: 1,
        next_stat_sn: 1,
        summary: String::new(),
    }
}

/// One session's connection and its next CmdSN.
pub(super) struct Session {
    pub(super) core: ConnCore,
    pub(super) cmd_sn: u32,
    pub(super) now: Instant,
}

impl Session {
    pub(super) fn new(map: &Arc<LunMap>, nexus: u64, dispatch: Dispatch, stage: bool) -> Session {
        let now = Instant::now();
        let ffp = FfpConfig {
            queue_depth: 8,
            nop_interval: None,
            ..FfpConfig::default()
        };
        let conn = TargetConnection::new(&login(), ffp, Box::new(NoDirectory), now);
        let lus = Lus {
            map: map.clone(),
            nexus: NexusId(nexus),
            identity: ItNexus::new("iqn.2026-11.test:init", [0x80, 0, 0, 0, 0, nexus as u8], 1),
            replaced: false,
        };
        let mut s = Session {
            core: ConnCore::new(conn, Some(lus), dispatch, stage),
            cmd_sn: 1,
            now,
        };
        // The first command reports the new nexus's unit attention.
        let itt = s.command(99, [0; 10], 0);
        for a in s.actions() {
            if let Action::Run(cmd) = a {
                s.core.completed(cmd.run());
            }
        }
        assert_eq!(s.answer(itt).map(|a| a.0), Some(Status::CHECK_CONDITION));
        s
    }

    pub(super) fn send(&mut self, pdu: Pdu) {
        self.send_with(pdu, bytes::Bytes::new());
    }

    pub(super) fn send_with(&mut self, pdu: Pdu, data: bytes::Bytes) {
        let mut b = BytesMut::new();
        encode_frame(&pdu.encode(), &[], &data, Digests::default(), &mut b).unwrap();
        let f = FrameDecoder::new(1 << 20).decode(&mut b).unwrap().unwrap();
        self.core.handle_frame(f, self.now);
    }

    pub(super) fn command(&mut self, itt: u32, cdb10: [u8; 10], read_len: u32) -> u32 {
        let mut cdb = [0u8; 16];
        cdb[..10].copy_from_slice(&cdb10);
        self.cmd_sn += 1;
        self.send(Pdu::ScsiCommand(ScsiCommand {
            immediate: false,
            final_bit: true,
            read: read_len > 0,
            write: false,
            attr: 1,
            lun: Lun::from_index(0),
            itt,
            expected_data_transfer_length: read_len,
            cmd_sn: self.cmd_sn - 1,
            exp_stat_sn: 0,
            cdb,
        }));
        itt
    }

    pub(super) fn read(&mut self, itt: u32) -> u32 {
        self.command(itt, [opcode::READ_10, 0, 0, 0, 0, 8, 0, 0, 1, 0], 512)
    }

    pub(super) fn tmf(&mut self, itt: u32, function: TmfFunction) {
        self.send(Pdu::TaskMgmtRequest(TaskMgmtRequest {
            immediate: true,
            function,
            lun: Lun::from_index(0),
            itt,
            referenced_task_tag: u32::MAX,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: 0,
            ref_cmd_sn: 0,
            exp_data_sn: 0,
        }));
    }

    pub(super) fn actions(&mut self) -> Vec<Action> {
        std::iter::from_fn(|| self.core.poll_action()).collect()
    }

    /// The SCSI status the target sent for `itt`, if it sent one (the
    /// sense key and ASC with CHECK CONDITION).
    pub(super) fn answer(&mut self, itt: u32) -> Option<(Status, Option<(SenseKey, u8)>)> {
        let mut found = None;
        while let Some(p) = self.core.poll_transmit() {
            match &p.pdu {
                Pdu::ScsiResponse(r) if r.itt == itt => {
                    let data = p.data.to_bytes().unwrap();
                    // Sense length (2 bytes), then fixed-format sense.
                    let sense = (data.len() > 14).then(|| (SenseKey(data[4] & 0x0f), data[14]));
                    found = Some((r.status, sense));
                }
                Pdu::DataIn(d) if d.itt == itt && d.status.is_some() => {
                    found = Some((d.status.unwrap_or_default(), None));
                }
                _ => {}
            }
        }
        found
    }

    pub(super) fn tmf_response(&mut self, itt: u32) -> Option<TmfResponse> {
        std::iter::from_fn(|| self.core.poll_transmit()).find_map(|p| match p.pdu {
            Pdu::TaskMgmtResponse(r) if r.itt == itt => Some(r.response),
            _ => None,
        })
    }

    pub(super) fn test_unit_ready(&mut self, itt: u32) -> Option<(Status, Option<(SenseKey, u8)>)> {
        self.command(itt, [0; 10], 0);
        self.answer(itt)
    }
}

#[test]
fn a_command_that_cannot_block_runs_inside_the_core() {
    let mut s = Session::new(&ram_map(), 1, Dispatch::Inline, true);
    s.read(1);
    assert!(s.actions().is_empty());
    assert_eq!(s.answer(1), Some((Status::GOOD, None)));
}

#[test]
fn the_driver_dispatch_hands_every_command_out_and_answers_on_completion() {
    let mut s = Session::new(&ram_map(), 1, Dispatch::Driver, true);
    s.read(1);
    let mut actions = s.actions();
    assert_eq!(s.answer(1), None, "answered before it ran");
    let Some(Action::Run(cmd)) = actions.pop() else {
        panic!("the READ was not handed out");
    };
    assert!(actions.is_empty());
    s.core.completed(cmd.run());
    assert_eq!(s.answer(1), Some((Status::GOOD, None)));
}

#[test]
fn file_lu_medium_access_is_staged_and_finishes_like_execute() {
    let dir = tempfile::tempdir().unwrap();
    let opts = FileOptions {
        size: Some(1 << 20),
        ..Default::default()
    };
    let backend = FileBackend::open_file(&dir.path().join("lu"), &opts).unwrap();
    let lu = LogicalUnit::new(lu_config(), Arc::new(backend)).unwrap();
    let map = Arc::new(LunMap::new(vec![(0, Arc::new(lu))]));
    let mut s = Session::new(&map, 1, Dispatch::Inline, true);
    s.read(1);
    let Some(Action::Stage(staged)) = s.actions().pop() else {
        panic!("the READ on a file LU was not staged");
    };
    s.core.completed(staged.run_here());
    assert_eq!(s.answer(1), Some((Status::GOOD, None)));
    // Without a ring, nothing is staged.
    s.core.set_staging(false);
    s.read(2);
    assert!(!s.actions().iter().any(|a| matches!(a, Action::Stage(_))));
}

#[test]
fn lu_reset_resets_the_lu_and_asks_the_other_sessions_to_end_their_tasks() {
    let map = ram_map();
    let mut a = Session::new(&map, 1, Dispatch::Inline, true);
    let mut b = Session::new(&map, 2, Dispatch::Inline, true);
    a.tmf(7, TmfFunction::LOGICAL_UNIT_RESET);
    let signals: Vec<_> = a
        .actions()
        .into_iter()
        .filter_map(|x| match x {
            Action::Signal { to, signal } => Some((to, signal)),
            _ => None,
        })
        .collect();
    let [(Recipients::AllOthers, SessionSignal::Abort { lun, cleared, hold })] = &signals[..]
    else {
        panic!("not one abort for every other session: {signals:?}");
    };
    assert_eq!((*lun, *cleared), (Some(0), false));
    assert!(hold.is_some(), "the response does not wait for the others");
    // The driver delivered it and nobody else holds it: the response goes.
    drop(signals);
    assert_eq!(a.tmf_response(7), Some(TmfResponse::FUNCTION_COMPLETE));
    // Both nexuses learn of the reset (SAM-5 §6.3.3: ASC 29h).
    assert_eq!(
        b.test_unit_ready(3),
        Some((
            Status::CHECK_CONDITION,
            Some((SenseKey::UNIT_ATTENTION, 0x29))
        ))
    );
}

#[test]
fn cold_reset_closes_every_other_session() {
    let mut a = Session::new(&ram_map(), 1, Dispatch::Inline, true);
    a.tmf(7, TmfFunction::TARGET_COLD_RESET);
    assert!(a.actions().iter().any(|x| matches!(
        x,
        Action::Signal {
            to: Recipients::AllOthers,
            signal: SessionSignal::Close(_)
        }
    )));
}

#[test]
fn clear_task_set_ends_the_other_sessions_tasks_and_tells_it_why() {
    let map = ram_map();
    // With TAS=0 the task ends silently and the LU says why.
    set_tas(&map, false);
    let mut a = Session::new(&map, 1, Dispatch::Inline, true);
    // B's READ is held by its driver (a slow backend).
    let mut b = Session::new(&map, 2, Dispatch::Driver, true);
    b.read(5);
    let held = b.actions();
    assert_eq!(held.len(), 1);
    a.tmf(7, TmfFunction::CLEAR_TASK_SET);
    let signal = a.actions().into_iter().find_map(|x| match x {
        Action::Signal { signal, .. } => Some(signal),
        _ => None,
    });
    let Some(SessionSignal::Abort { lun, cleared, .. }) = signal else {
        panic!("no abort signal: {signal:?}");
    };
    assert_eq!((lun, cleared), (Some(0), true));
    assert_eq!(b.core.abort_from_other(lun, cleared), 1);
    assert_eq!(b.answer(5), None, "TAS=0 answered the aborted task");
    // COMMANDS CLEARED BY ANOTHER INITIATOR (2Fh/00h), SPC-4 §7.5.8.
    let itt = b.command(6, [0; 10], 0);
    let Some(Action::Run(cmd)) = b.actions().pop() else {
        panic!("TEST UNIT READY not handed out");
    };
    b.core.completed(cmd.run());
    assert_eq!(
        b.answer(itt),
        Some((
            Status::CHECK_CONDITION,
            Some((SenseKey::UNIT_ATTENTION, 0x2f))
        ))
    );
}

#[test]
fn a_preempt_and_abort_asks_the_preempted_nexus_to_end_its_tasks() {
    let mut s = Session::new(&ram_map(), 1, Dispatch::Driver, true);
    s.read(1);
    let Some(Action::Run(cmd)) = s.actions().pop() else {
        panic!("not handed out");
    };
    let mut done = cmd.run();
    done.response.abort_nexuses.push(NexusId(2));
    s.core.completed(done);
    let to = s.actions().into_iter().find_map(|x| match x {
        Action::Signal { to, signal } => Some((to, signal)),
        _ => None,
    });
    let expect = SessionSignal::Abort {
        lun: Some(0),
        cleared: false,
        hold: None,
    };
    assert_eq!(to, Some((Recipients::Nexuses(vec![NexusId(2)]), expect)));
    assert!(Recipients::Nexuses(vec![NexusId(2)]).includes(NexusId(2)));
    assert!(!Recipients::Nexuses(vec![NexusId(2)]).includes(NexusId(3)));
}

/// Sets the LU's TAS bit with MODE SELECT(6) of the control page
/// (SPC-5 §7.5.8), from a nexus of its own.
pub(super) fn set_tas(map: &LunMap, on: bool) {
    let nexus = NexusId(77);
    map.attach_nexus(
        nexus,
        &ItNexus::new("iqn.2026-11.test:admin", [0x80, 0, 0, 0, 0, 77], 1),
        false,
    );
    let run = |cdb: &[u8], data: &[u8]| {
        map.execute(
            Some(0),
            nexus,
            cdb,
            &ironlun_scsi::DataOutBuffer::copy_from_slice(data),
        )
    };
    // The power-on unit attention first.
    run(&[0; 6], &[]);
    let sense = run(&[opcode::MODE_SENSE_6, 0x08, 0x0a, 0, 255, 0], &[]);
    assert_eq!(sense.status, Status::GOOD);
    let mut page = sense.data.to_bytes().unwrap().to_vec();
    page.drain(..4);
    page[5] = if on { page[5] | 0x40 } else { page[5] & !0x40 };
    let mut list = vec![0u8; 4];
    list.extend_from_slice(&page);
    let r = run(
        &[opcode::MODE_SELECT_6, 0x10, 0, 0, list.len() as u8, 0],
        &list,
    );
    assert_eq!(r.status, Status::GOOD, "MODE SELECT refused");
    assert_eq!(map.get(0).unwrap().tas(), on);
}
