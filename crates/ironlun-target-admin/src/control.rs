//! The control plane beside the data path, as the server runs it
//! ([`ironlun_target::server::Control`]): the management API's endpoints,
//! bound before serving, and the snapshot schedules, whose runs take and
//! delete snapshots through the API's operations.

use std::sync::Arc;
use std::time::Duration;

use ironlun_target::live::Live;
use ironlun_target::schedule::{Scheduler, Snapshots};
use ironlun_target::BindError;
use ironlun_target_config::{AdminHttp, Config};
use tokio::net::TcpListener;

use crate::{snapshots, AdminThread, Endpoints, Token};

/// The management API's endpoints, bound, and the snapshot schedules:
/// what [`ironlun_target::Server::with_control`] runs beside the data
/// path.
pub struct Control {
    endpoints: Endpoints,
}

impl Control {
    /// Binds the management API's socket and its endpoint over HTTP, as
    /// `cfg` has them.
    pub async fn bind(cfg: &Config) -> Result<Control, BindError> {
        let unix = match cfg.admin_socket() {
            Some(path) => {
                Some(crate::bind(&path).map_err(|source| BindError::Admin { path, source })?)
            }
            None => None,
        };
        let http = match &cfg.admin_http {
            Some(h) => Some(bind_http(h).await?),
            None => None,
        };
        Ok(Control {
            endpoints: Endpoints { unix, http },
        })
    }
}

/// The token, then the loopback listener of the HTTP management API.
async fn bind_http(h: &AdminHttp) -> Result<(TcpListener, Token), BindError> {
    let failed = |problem: String| BindError::AdminHttp {
        addr: h.addr,
        problem,
    };
    let token = Token::load(&h.token_file)
        .map_err(|e| failed(format!("token file {}: {e}", h.token_file.display())))?;
    let l = TcpListener::bind(h.addr)
        .await
        .map_err(|e| failed(e.to_string()))?;
    Ok((l, token))
}

impl ironlun_target::server::Control for Control {
    fn start(self: Box<Self>, live: Arc<Live>) -> Result<Box<dyn Send>, String> {
        let admin = self
            .endpoints
            .start(live.clone())
            .map_err(|e| format!("management API: no thread: {e}"))?;
        // Snapshots on a schedule (docs/snapshots.md, "Schedules").
        let scheduler = Scheduler::start(live, Arc::new(ApiSnapshots))
            .map_err(|e| format!("snapshot schedules: no thread: {e}"))?;
        Ok(Box::new(Running {
            _scheduler: scheduler,
            _admin: admin,
        }))
    }
}

/// What runs, stopped when dropped: the schedules first (the thread
/// ends at its next tick; a run under way finishes), then the API (its
/// thread joined, which waits, bounded, for an operation under way).
struct Running {
    _scheduler: Scheduler,
    _admin: Option<AdminThread>,
}

/// The schedules' snapshots, taken and deleted as `ironlun admin
/// snapshot` takes and deletes them.
struct ApiSnapshots;

impl Snapshots for ApiSnapshots {
    fn names(&self, live: &Live, target: &str, lun: u16) -> Result<Vec<String>, String> {
        snapshots::names(live, target, lun).map_err(|e| e.message)
    }

    fn create(&self, live: &Live, target: &str, lun: u16, name: &str) -> Result<Duration, String> {
        let (_, pause) =
            snapshots::create_paused(live, target, &[lun], name, false).map_err(|e| e.message)?;
        Ok(pause.map_or(Duration::ZERO, |p| p.paused))
    }

    fn delete(&self, live: &Live, target: &str, lun: u16, name: &str) -> Result<(), String> {
        snapshots::delete(live, target, lun, name, false)
            .map(drop)
            .map_err(|e| e.message)
    }
}
