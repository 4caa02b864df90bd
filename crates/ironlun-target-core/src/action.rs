//! What the core hands its driver: commands to run elsewhere, medium
//! accesses for a ring, and signals for other sessions.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use ironlun_backend::ring::{Job, Request};
use ironlun_backend::Backend;
use ironlun_proto::target::ScsiTask;
use ironlun_scsi::{LunMap, MediumIo, NexusId, Response};
use ironlun_scsi_codes::Status;

use crate::abort_wait::AbortHold;

/// Work for the driver, from [`ConnCore::poll_action`](crate::ConnCore::poll_action).
/// Take every action before sending the PDUs
/// [`poll_transmit`](crate::ConnCore::poll_transmit) gives: a signal then
/// reaches other sessions before this session's response leaves.
pub enum Action {
    /// Run the command where blocking is fine ([`Command::run`]) and hand
    /// what it gives to [`ConnCore::completed`](crate::ConnCore::completed).
    Run(Command),
    /// Put the medium access on the driver's io_uring and hand the
    /// outcome to [`Staged::finish`]; with no room or no ring, run it with
    /// [`Staged::run_here`] where blocking is fine. Either way the result
    /// goes to [`ConnCore::completed`](crate::ConnCore::completed).
    Stage(Staged),
    /// Tell other sessions of the same target.
    Signal {
        to: Recipients,
        signal: SessionSignal,
    },
}

/// Which other sessions a signal is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recipients {
    /// Every other session of the target.
    AllOthers,
    /// The sessions of these I_T nexuses.
    Nexuses(Vec<NexusId>),
}

impl Recipients {
    /// Whether a session with this nexus is meant (never the sender: the
    /// driver leaves its own session out).
    pub fn includes(&self, nexus: NexusId) -> bool {
        match self {
            Recipients::AllOthers => true,
            Recipients::Nexuses(v) => v.contains(&nexus),
        }
    }
}

/// What one session asks of another session's connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionSignal {
    /// End this session's tasks on a LUN (all LUNs with `None`): another
    /// nexus reset the LU or target, cleared the task set or preempted
    /// this nexus with PREEMPT AND ABORT. With TAS=1 on the LU they end
    /// with TASK ABORTED status; with TAS=0 silently, and `cleared` then
    /// tells the initiator with COMMANDS CLEARED BY ANOTHER INITIATOR if
    /// any task was ended. `hold`: the requester's task management
    /// response waits until the recipient drops it, once its ended tasks
    /// are gone ([`ConnCore::abort_for_other`](crate::ConnCore::abort_for_other)).
    Abort {
        lun: Option<u16>,
        cleared: bool,
        hold: Option<AbortHold>,
    },
    /// Close the session: a reinstatement replaced it, or a TARGET COLD
    /// RESET (RFC 7143 §11.5.1) ends every session.
    Close(&'static str),
    /// The operator changed what this session's initiator may see (LUNs
    /// added, removed, remapped): the driver takes its new LUN map from
    /// the daemon.
    Remap,
    /// Ask the initiator to log out (Async Message, RFC 7143 §11.9.1,
    /// AsyncEvent 1), and close after Time2Wait if it has not: the
    /// operator logs the session out, or removes its target with force.
    Logout(&'static str),
}

/// A finished command: the task it answers and the device's response.
#[derive(Debug)]
pub struct Done {
    pub itt: u32,
    pub lun: Option<u16>,
    pub response: Response,
}

/// A command the driver runs where blocking is fine.
pub struct Command {
    pub(crate) task: ScsiTask,
    pub(crate) lun: Option<u16>,
    pub(crate) nexus: NexusId,
    pub(crate) map: Arc<LunMap>,
    /// Set when task management aborted the task before it ran.
    pub(crate) aborted: Arc<AtomicBool>,
}

impl Command {
    /// Runs it on the target's LUs (may block on a backend's files). A
    /// command aborted while it waited for a thread does not run at all:
    /// it changes nothing, and does not take the unit attention the
    /// abort's reset left for its nexus.
    pub fn run(self) -> Done {
        if self.aborted.load(Ordering::Acquire) {
            return Done {
                itt: self.task.itt,
                lun: self.lun,
                response: Response {
                    status: Status::TASK_ABORTED,
                    ..Response::default()
                },
            };
        }
        let response = self.map.execute(
            self.lun,
            self.nexus,
            self.task.cdb.as_slice(),
            &self.task.data_out,
        );
        Done {
            itt: self.task.itt,
            lun: self.lun,
            response,
        }
    }

    /// Data-Out bytes the command carries.
    pub fn data_out_len(&self) -> usize {
        self.task.data_out.len()
    }
}

/// A command whose medium access waits for the driver: the device did
/// every check before it ([`LogicalUnit::start`](ironlun_scsi::LogicalUnit::start)).
pub struct Staged {
    pub(crate) itt: u32,
    pub(crate) lun: Option<u16>,
    pub(crate) io: MediumIo,
}

impl Staged {
    /// Finishes the command with the access's outcome (bytes read, or
    /// nothing for writes and flushes).
    pub fn finish(self, outcome: io::Result<Option<Bytes>>) -> Done {
        Done {
            itt: self.itt,
            lun: self.lun,
            response: self.io.finish(outcome),
        }
    }

    /// Starts the access on the store's own asynchronous path, where it
    /// has one (RBD); the future's outcome goes to [`Staged::finish`].
    /// The command stays in flight until then: task management that ends
    /// it answers only after the store is done with it.
    pub fn start_async(&self) -> Option<ironlun_backend::aio::MediumFuture> {
        self.io.start_async()
    }

    /// Runs the access here, synchronously. May block.
    pub fn run_here(self) -> Done {
        Done {
            itt: self.itt,
            lun: self.lun,
            response: self.io.run_here(),
        }
    }
}

impl Job for Staged {
    fn backend(&self) -> &dyn Backend {
        self.io.backend()
    }
    fn request(&self) -> &Request {
        self.io.request()
    }
}
