//! A grouped LU's way to its owner (ironlun-scsi's [`Forwarder`];
//! docs/ha.md, "Forwarding"): a write this gateway cannot do goes, with
//! its CDB and Data-Out, over the peer session to the gateway the group
//! says owns the LUN, and its status, sense and residual come back.
//!
//! Called on a blocking thread (the LU runs forwarded commands off the
//! network thread); the session's work runs on the runtime, and the
//! caller waits for it at most [`FORWARD_TIMEOUT`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use ironlun_initiator::{ScsiReply, ScsiRequest};
use ironlun_proto::initiator::ATTR_SIMPLE;
use ironlun_scsi::forward::{data_bytes, ForwardReply, Forwarder};
use ironlun_scsi::DataOutBuffer;
use ironlun_wire::{Lun, Residual, ServiceResponse, TmfFunction, TmfResponse};
use tracing::warn;

use super::driver::Running;
use super::{lock_running, peer};

/// The longest a forwarded command may take, session opening included.
/// Past it the initiator gets NOT READY, ASYMMETRIC ACCESS STATE
/// TRANSITION and retries.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(20);

/// LUN `lun` of `target`, as a gateway of its group forwards it.
pub struct LunForwarder {
    target: String,
    lun: u16,
}

impl LunForwarder {
    pub fn new(target: &str, lun: u16) -> LunForwarder {
        LunForwarder {
            target: target.to_owned(),
            lun,
        }
    }
}

impl Forwarder for LunForwarder {
    fn is_peer(&self, initiator_port: &str) -> bool {
        peer::is_peer_name(&self.target, initiator_port)
    }

    fn forward(&self, cdb: &[u8], data_out: &DataOutBuffer) -> Option<ForwardReply> {
        let running = lock_running().get(&self.target).cloned()?;
        running.forward(self.lun, cdb, data_out)
    }

    fn reset(&self) {
        if let Some(running) = lock_running().get(&self.target).cloned() {
            running.reset_peers(self.lun);
        }
    }
}

/// The owner's reply as this port's answer to a command that sent `sent`
/// bytes: `None` when the owner did not complete it (a target failure of
/// the iSCSI service), which the caller answers as a transition.
pub fn reply_of(r: ScsiReply, sent: u32) -> Option<ForwardReply> {
    if r.response != ServiceResponse::COMMAND_COMPLETED {
        return None;
    }
    // The owner's residual is against `sent`; its own transfer length is
    // what this port's transport sets against the initiator's.
    let transfer_length = match r.residual {
        Residual::None => sent,
        Residual::Overflow(n) => sent.saturating_add(n),
        Residual::Underflow(n) => sent.saturating_sub(n),
    };
    Some(ForwardReply {
        status: r.status,
        sense: r.sense,
        transfer_length,
    })
}

/// The request for `cdb` on LUN `lun` with `data_out`; `None` for a CDB
/// longer than an iSCSI command carries without an extension (16 bytes).
pub fn request(lun: u16, cdb: &[u8], data_out: &DataOutBuffer) -> Option<ScsiRequest> {
    let mut c = [0u8; 16];
    c.get_mut(..cdb.len())?.copy_from_slice(cdb);
    Some(ScsiRequest {
        lun: Lun::from_index(lun),
        cdb: c,
        read_len: 0,
        write: data_bytes(data_out),
        attr: ATTR_SIMPLE,
        discard_data: false,
    })
}

/// The longest a LOGICAL UNIT RESET waits for the other gateways to
/// have done it too.
pub const RESET_TIMEOUT: Duration = Duration::from_secs(3);

impl Running {
    /// Sends LOGICAL UNIT RESET for LUN `lun` to every other gateway;
    /// waits for their answers at most [`RESET_TIMEOUT`] (a gateway that
    /// is down has no nexus to tell).
    pub(super) fn reset_peers(self: &Arc<Self>, lun: u16) {
        if !self.peers.enabled() {
            return;
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let me = self.clone();
        drop(self.runtime().spawn(async move {
            let all = (0..me.gateway_count()).map(|i| me.reset_peer(i, lun));
            let _ = tokio::time::timeout(RESET_TIMEOUT, futures_util::future::join_all(all)).await;
            let _ = tx.send(());
        }));
        let wait = || rx.recv_timeout(RESET_TIMEOUT + Duration::from_secs(1));
        // Called on the connection's task (task management runs inline):
        // on a multi-threaded runtime the worker hands its other tasks on
        // while it waits.
        let multi = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let _ = if multi {
            tokio::task::block_in_place(wait)
        } else {
            wait()
        };
    }

    async fn reset_peer(self: &Arc<Self>, i: usize, lun: u16) {
        if i == self.local_index() {
            return;
        }
        let r = match self.peers.session(i).await {
            Ok(s) => s
                .task_mgmt(TmfFunction::LOGICAL_UNIT_RESET, lun, 0)
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| match r {
                    TmfResponse::FUNCTION_COMPLETE => Ok(()),
                    other => Err(format!("answered {other}")),
                }),
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            warn!(
                "target {} LUN {lun}: LOGICAL UNIT RESET to gateway {}: {e}",
                self.target(),
                self.gateway_name(i)
            );
        }
    }

    /// Runs a command of LUN `lun` on its owner; blocks.
    pub(super) fn forward(
        self: &Arc<Self>,
        lun: u16,
        cdb: &[u8],
        data_out: &DataOutBuffer,
    ) -> Option<ForwardReply> {
        let owner = self.owner_index(lun, Instant::now())?;
        let req = request(lun, cdb, data_out)?;
        let sent = u32::try_from(req.write.len()).ok()?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let me = self.clone();
        drop(self.runtime().spawn(async move {
            let run = async {
                let s = me.peers.session(owner).await?;
                s.execute(req).await.map_err(|e| e.to_string())
            };
            let r = match tokio::time::timeout(FORWARD_TIMEOUT, run).await {
                Ok(r) => r,
                Err(_) => Err("timed out".to_owned()),
            };
            if let Err(e) = &r {
                if me.may_log_forward() {
                    warn!(
                        "target {} LUN {lun}: forwarding a write to gateway {}: {e} (answered \
                         NOT READY, ASYMMETRIC ACCESS STATE TRANSITION; such failures are logged \
                         once per 10 s)",
                        me.target(),
                        me.gateway_name(owner)
                    );
                }
            }
            let _ = tx.send(r.ok());
        }));
        let reply = rx
            .recv_timeout(FORWARD_TIMEOUT + Duration::from_secs(1))
            .ok()??;
        reply_of(reply, sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ironlun_scsi_codes::Status;

    #[test]
    fn the_owners_status_sense_and_residual_come_back() {
        let sense = Bytes::from_static(&[0x70, 0, 0x05, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x24, 0]);
        let reply = |residual| ScsiReply {
            response: ServiceResponse::COMMAND_COMPLETED,
            status: Status::CHECK_CONDITION,
            sense: sense.clone(),
            data: Bytes::new(),
            residual,
        };
        let r = reply_of(reply(Residual::None), 4096).unwrap();
        assert_eq!(r.status, Status::CHECK_CONDITION);
        assert_eq!(r.sense, sense);
        assert_eq!(r.transfer_length, 4096);
        // The owner wanted 512 bytes more or less than were sent.
        assert_eq!(
            reply_of(reply(Residual::Overflow(512)), 4096)
                .unwrap()
                .transfer_length,
            4608
        );
        assert_eq!(
            reply_of(reply(Residual::Underflow(512)), 4096)
                .unwrap()
                .transfer_length,
            3584
        );
        let failed = ScsiReply {
            response: ServiceResponse::TARGET_FAILURE,
            ..reply(Residual::None)
        };
        assert_eq!(reply_of(failed, 4096), None);
    }

    #[test]
    fn the_request_carries_the_cdb_and_data() {
        let data = DataOutBuffer::copy_from_slice(&[7; 512]);
        let cdb = [0x2a, 0, 0, 0, 0, 9, 0, 0, 1, 0];
        let r = request(3, &cdb, &data).unwrap();
        assert_eq!(r.lun, Lun::from_index(3));
        assert_eq!(&r.cdb[..10], &cdb);
        assert_eq!(&r.cdb[10..], &[0; 6]);
        assert_eq!(&r.write[..], &[7; 512]);
        assert_eq!(r.read_len, 0);
        assert!(request(0, &[0; 32], &data).is_none());
    }
}
