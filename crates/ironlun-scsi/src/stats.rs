//! What a logical unit has served, for monitoring: commands by kind,
//! bytes moved and commands that failed. Counters only grow; a reader
//! takes two snapshots and subtracts.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::reservations::Access;

/// Live counters, updated once per command with relaxed atomics.
#[derive(Default)]
pub struct IoStats {
    reads: AtomicU64,
    writes: AtomicU64,
    other: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    failed: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoSnapshot {
    /// Commands that read the medium (READ, VERIFY, ...).
    pub read_commands: u64,
    /// Commands that change the medium or its state (WRITE, WRITE SAME,
    /// UNMAP, COMPARE AND WRITE, ...).
    pub write_commands: u64,
    /// Every other command (INQUIRY, TEST UNIT READY, ...).
    pub other_commands: u64,
    /// Data returned by read commands.
    pub read_bytes: u64,
    /// Data received with write commands.
    pub write_bytes: u64,
    /// Commands that ended with a status other than GOOD.
    pub failed_commands: u64,
}

impl IoSnapshot {
    pub fn commands(&self) -> u64 {
        self.read_commands + self.write_commands + self.other_commands
    }

    /// Adds another LU's counters (target or daemon totals).
    pub fn add(&mut self, o: &IoSnapshot) {
        self.read_commands += o.read_commands;
        self.write_commands += o.write_commands;
        self.other_commands += o.other_commands;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.failed_commands += o.failed_commands;
    }
}

impl IoStats {
    /// Counts one finished command. `access` is `None` for a command
    /// the LU does not know.
    pub(crate) fn record(
        &self,
        access: Option<Access>,
        data_out: usize,
        data_in: usize,
        good: bool,
    ) {
        let add = |c: &AtomicU64, n: usize| {
            c.fetch_add(n as u64, Ordering::Relaxed);
        };
        match access {
            Some(Access::Read) => {
                add(&self.reads, 1);
                add(&self.read_bytes, data_in);
            }
            Some(Access::Write) => {
                add(&self.writes, 1);
                add(&self.write_bytes, data_out);
            }
            _ => add(&self.other, 1),
        }
        if !good {
            add(&self.failed, 1);
        }
    }

    pub fn snapshot(&self) -> IoSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        IoSnapshot {
            read_commands: get(&self.reads),
            write_commands: get(&self.writes),
            other_commands: get(&self.other),
            read_bytes: get(&self.read_bytes),
            write_bytes: get(&self.write_bytes),
            failed_commands: get(&self.failed),
        }
    }
}
