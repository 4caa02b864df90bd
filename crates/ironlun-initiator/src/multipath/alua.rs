//! Reading a LU's asymmetric access through each path (SPC-5 §5.16):
//! INQUIRY's TPGS, VPD 83h's target port, REPORT TARGET PORT GROUPS;
//! what they mean is ironlun-initiator-core's `alua` module's. Read once
//! after login, and again ([`reread`]) whenever a path reports a change.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ironlun_initiator_core::alua::{
    parse_rtpg, parse_vpd83, rtpg_cdb, tpgs, AluaPaths, PortIdentity, Report, RTPG_ALLOCATION,
};
use tokio::sync::mpsc;
use tracing::{debug, info};

use crate::error::{Error, Result};
use crate::scsi::{inquiry, request};
use crate::session::{Session, WeakSession};

/// How long one path's REPORT TARGET PORT GROUPS may take when read
/// again: a path that does not answer keeps what was known of it.
const REREAD_TIMEOUT: Duration = Duration::from_secs(2);

/// The asymmetric access of the LU a multipath was opened for, shared
/// by its callers' choices, its router and its reader.
#[derive(Debug)]
pub(crate) struct Alua {
    pub(crate) lun: u16,
    paths: Mutex<AluaPaths>,
}

impl Alua {
    pub(crate) fn new(lun: u16, n: usize) -> Alua {
        Alua {
            lun,
            paths: Mutex::new(AluaPaths::new(n)),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, AluaPaths> {
        self.paths.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads path `i`'s port and, if the LU reports asymmetric access
    /// (TPGS other than 00b), its group's state.
    pub(crate) async fn read_path(&self, i: usize, s: &Session) -> Result<()> {
        let std = s.run(inquiry(self.lun, None, 96)).await?;
        if tpgs(&std) == 0 {
            debug!(portal = %s.info().portal, "no asymmetric access (TPGS 00b)");
            return Ok(());
        }
        let vpd = s.run(inquiry(self.lun, Some(0x83), 1024)).await?;
        self.lock().set_port(i, parse_vpd83(&vpd));
        self.read_report(i, s).await
    }

    /// REPORT TARGET PORT GROUPS through path `i`, applied.
    pub(crate) async fn read_report(&self, i: usize, s: &Session) -> Result<()> {
        let report = report(s, self.lun).await?;
        let (change, port) = {
            let mut a = self.lock();
            let change = a.apply_report(i, &report);
            (change, a.path(i).map(|p| p.port).unwrap_or_default())
        };
        if let Some((old, new)) = change {
            let old = old.map_or("unknown".to_owned(), |o| o.to_string());
            info!(
                portal = %s.info().portal,
                "ALUA: path {i} (group {}) {old} -> {new}",
                group(port)
            );
        }
        Ok(())
    }
}

fn group(p: PortIdentity) -> String {
    p.group.map_or("?".to_owned(), |g| g.to_string())
}

/// REPORT TARGET PORT GROUPS, extended header (SPC-5 §6.36).
async fn report(s: &Session, lun: u16) -> Result<Report> {
    let cdb = rtpg_cdb(true, RTPG_ALLOCATION);
    let data = s
        .run(request(lun, &cdb, RTPG_ALLOCATION, Default::default()))
        .await?;
    parse_rtpg(&data).map_err(|e| Error::Malformed(format!("REPORT TARGET PORT GROUPS: {e}")))
}

/// Reads REPORT TARGET PORT GROUPS again on every connected path each
/// time it is asked to (asks that come while it reads make one more
/// pass), until the router that asks is gone.
pub(crate) async fn reread(paths: Vec<WeakSession>, alua: Arc<Alua>, mut asks: mpsc::Receiver<()>) {
    while asks.recv().await.is_some() {
        for (i, w) in paths.iter().enumerate() {
            let Some(s) = w.upgrade().filter(Session::is_connected) else {
                continue;
            };
            match tokio::time::timeout(REREAD_TIMEOUT, alua.read_report(i, &s)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => debug!(portal = %s.info().portal, "REPORT TARGET PORT GROUPS: {e}"),
                Err(_) => debug!(portal = %s.info().portal, "REPORT TARGET PORT GROUPS timed out"),
            }
        }
    }
}
