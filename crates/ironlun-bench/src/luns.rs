//! Opening the LUNs a run drives and closing them after: one session
//! through one portal, one LUN's paths as a multipath set, or several
//! sessions to one LUN, each with its own ISID and its own slice of the
//! seek range. The initiator logs in ([`ironlun_initiator::open_lun`]);
//! this module adds the capacity and what the engine needs to know.

use std::sync::Arc;

use ironlun_initiator::{isid_for, open_lun, open_lun_paths, PathPolicy, SessionOptions};

use crate::engine::{LunTarget, Path, Slice};
use crate::result::LunInfo;

/// How a LUN is reached.
#[derive(Clone, Copy, Debug)]
pub enum Route<'a> {
    /// One session through one portal.
    Portal(&'a str),
    /// One session per portal, a path chosen per command.
    Paths(&'a [String], PathPolicy),
}

/// Opens `lun` of `target` by `route` as one LUN under test named
/// `label` that drives `slice` of the seek range. Errors name `label`.
pub async fn open(
    route: Route<'_>,
    target: &str,
    lun: u16,
    opts: &SessionOptions,
    label: String,
    slice: Slice,
) -> Result<LunTarget, String> {
    let fail = |e: ironlun_initiator::Error| format!("{label}: {e}");
    let (path, capacity) = match route {
        Route::Portal(portal) => {
            let s = open_lun(portal, target, lun, opts).await.map_err(fail)?;
            let capacity = s.read_capacity(lun).await.map_err(fail)?;
            (Path::Single(s), capacity)
        }
        Route::Paths(portals, policy) => {
            let m = open_lun_paths(portals, target, lun, opts, policy)
                .await
                .map_err(fail)?;
            // Through the multipath: with ALUA, a path that serves it.
            let capacity = m.read_capacity(lun).await.map_err(fail)?;
            (Path::Multi(Arc::new(m)), capacity)
        }
    };
    Ok(LunTarget {
        label,
        path,
        lun,
        capacity,
        slice,
    })
}

/// `count` sessions to `lun` of `target` through `portal`, each its own
/// I_T nexus driving its own equal slice of the seek range (so that
/// verification checks every one). Session `k` takes the ISID
/// [`isid_for`]`(opts.isid, first + k)`: number `first` past the sessions
/// already opened from the same options. Labels are `label`, or
/// `label [session k/count]` when there are several.
pub async fn open_sessions(
    portal: &str,
    target: &str,
    lun: u16,
    opts: &SessionOptions,
    count: u32,
    first: usize,
    label: &str,
) -> Result<Vec<LunTarget>, String> {
    let mut out = Vec::new();
    for k in 0..count {
        let mut o = opts.clone();
        o.isid = isid_for(opts.isid, first + k as usize);
        let name = if count > 1 {
            format!("{label} [session {}/{count}]", k + 1)
        } else {
            label.to_owned()
        };
        let slice = Slice { index: k, count };
        out.push(open(Route::Portal(portal), target, lun, &o, name, slice).await?);
    }
    Ok(out)
}

/// What a results file says of the LUNs a run drove: each label with
/// the capacity the target reported.
pub fn info(luns: &[LunTarget]) -> Vec<LunInfo> {
    luns.iter()
        .map(|l| LunInfo {
            label: l.label.clone(),
            blocks: l.capacity.blocks,
            block_size: l.capacity.block_size,
        })
        .collect()
}

/// Logs out of every session of `luns` (local targets close when dropped).
pub async fn close(luns: &[LunTarget]) {
    for l in luns {
        match &l.path {
            Path::Single(s) => {
                let _ = s.logout().await;
            }
            Path::Multi(m) => m.logout().await,
            Path::Local(_) => {}
        }
    }
}
