//! One I_T nexus through ironlun's own initiator, for end-to-end tests
//! that must see every status and every unit attention themselves: the
//! session retries no unit attention, never reconnects, and every answer
//! is awaited for at most [`ANSWER_WITHIN`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use ironlun_initiator::{
    ReconnectPolicy, ScsiReply, ScsiRequest, SenseData, Session, SessionLimits, SessionOptions,
};
use ironlun_proto::initiator::ATTR_SIMPLE;
use ironlun_scsi_codes::{Asc, SenseKey, Status};
use ironlun_wire::{Lun, ServiceResponse};

/// Longest a command may take to be answered (a bound for a hung target,
/// not a timing: machines under load are slow).
pub const ANSWER_WITHIN: Duration = Duration::from_secs(120);

/// What a command came back with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Got {
    Good,
    Conflict,
    Check(SenseKey, Asc),
    Other(Status),
}

/// The outcome of a completed command (an iSCSI response other than
/// "command completed" fails the test).
pub fn got(r: &ScsiReply) -> Got {
    assert_eq!(
        r.response,
        ServiceResponse::COMMAND_COMPLETED,
        "iSCSI response: command not completed"
    );
    match r.status {
        Status::GOOD => Got::Good,
        Status::RESERVATION_CONFLICT => Got::Conflict,
        Status::CHECK_CONDITION => {
            let s = SenseData::parse(&r.sense).expect("CHECK CONDITION carries sense data");
            Got::Check(s.code.key, s.code.asc_ascq())
        }
        s => Got::Other(s),
    }
}

/// A unit attention with this code.
pub fn ua(asc: Asc) -> Got {
    Got::Check(SenseKey::UNIT_ATTENTION, asc)
}

/// A SIMPLE command to LUN 0 with `write` as its data.
pub fn request(cdb: &[u8], read_len: u32, write: Bytes) -> ScsiRequest {
    let mut c = [0u8; 16];
    c[..cdb.len()].copy_from_slice(cdb);
    ScsiRequest {
        lun: Lun::from_index(0),
        cdb: c,
        read_len,
        write,
        attr: ATTR_SIMPLE,
        discard_data: false,
    }
}

/// A logged-in session: its own I_T nexus.
pub struct Nexus {
    pub label: String,
    session: Session,
    rt: tokio::runtime::Handle,
}

impl Nexus {
    /// Logs `initiator` in to `target` at `portal` with this ISID; unit
    /// attentions are left for the test to take.
    pub fn login(
        rt: &tokio::runtime::Runtime,
        portal: &str,
        target: &str,
        initiator: &str,
        isid: [u8; 6],
        label: String,
    ) -> Nexus {
        let opts = SessionOptions {
            initiator_name: initiator.to_owned(),
            isid,
            limits: SessionLimits {
                unit_attention_retries: 0,
                ..SessionLimits::default()
            },
            reconnect: ReconnectPolicy {
                attempts: 0,
                ..ReconnectPolicy::default()
            },
            ..SessionOptions::default()
        };
        let session = rt
            .block_on(Session::connect(portal, Some(target), &opts))
            .unwrap_or_else(|e| panic!("{label}: login: {e}"));
        Nexus {
            label,
            session,
            rt: rt.handle().clone(),
        }
    }

    /// Runs one command and waits (bounded) for its answer.
    pub fn run(&self, req: ScsiRequest) -> ScsiReply {
        let s = self.session.clone();
        self.rt
            .block_on(async move { tokio::time::timeout(ANSWER_WITHIN, s.execute(req)).await })
            .unwrap_or_else(|_| panic!("{}: no answer", self.label))
            .unwrap_or_else(|e| panic!("{}: {e}", self.label))
    }

    pub fn tur(&self) -> Got {
        got(&self.run(ironlun_initiator::scsi::test_unit_ready(0)))
    }
}
