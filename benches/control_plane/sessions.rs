//! The idle sessions that stay logged in while the operations run: one
//! runtime thread keeps them (NOP answers, logout at the end).

use ironlun_initiator::{isid_for, Session, SessionOptions};

pub const INITIATOR: &str = "iqn.2026-11.io.ironlun.cp:holder";

pub struct Idle {
    rt: tokio::runtime::Runtime,
    sessions: Vec<Session>,
}

impl Idle {
    /// `count` sessions to targets `1..=targets_with` round-robin (target
    /// 0 is the bench's), each with its own ISID.
    pub fn open(
        portal: &str,
        count: usize,
        targets_with: usize,
        name: impl Fn(usize) -> String,
    ) -> Result<Idle, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let base = SessionOptions {
            initiator_name: INITIATOR.into(),
            ..SessionOptions::default()
        };
        let sessions = rt.block_on(async {
            let mut out = Vec::with_capacity(count);
            for k in 0..count {
                let target = name(1 + k % targets_with.max(1));
                let mut o = base.clone();
                o.isid = isid_for(base.isid, k);
                let s = Session::connect(portal, Some(&target), &o)
                    .await
                    .map_err(|e| format!("session {k} to {target}: {e}"))?;
                out.push(s);
            }
            Ok::<_, String>(out)
        })?;
        Ok(Idle { rt, sessions })
    }

    /// Sessions still logged in.
    pub fn alive(&self) -> usize {
        self.sessions.iter().filter(|s| s.is_alive()).count()
    }

    pub fn close(self) {
        let Idle { rt, sessions } = self;
        rt.block_on(async {
            for s in &sessions {
                let _ = s.logout().await;
            }
        });
    }
}
