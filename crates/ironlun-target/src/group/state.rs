//! The gateway group's decisions, without sockets, clocks or Ceph: what
//! this gateway is for each LUN (owner, standby, ...), what it does next
//! ([`Action`]), and the ALUA states that follow (issue 37; docs/ha.md,
//! "The gateway group").
//!
//! The heartbeat is a hint: a peer silent for `dead_after` is *presumed*
//! dead, and only then does a standby ask RADOS. The lock decides
//! (`Action::Acquire` breaks the lock of the address the dead peer last
//! announced, never another, and takes it; two survivors race and the
//! lock picks one). Time comes in as `Instant`s the caller reads, so the
//! tests drive it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ironlun_scsi::AccessState;

use super::wire::Heartbeat;

/// What this gateway is for one LUN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not the owner; serves what the group's `others` state allows.
    Standby,
    /// Breaking a dead owner's lock and taking it (ALUA transitioning).
    Acquiring,
    /// Holds the lock: active/optimized.
    Owner,
    /// Handing the LUN over (failback): transitioning, draining,
    /// flushing, releasing.
    Releasing,
    /// Checking with RADOS whether it still owns the LUN (a peer claims
    /// it too).
    Verifying,
    /// The cluster cut this gateway's client off: serves nothing until
    /// an explicit rejoin.
    Fenced,
    /// Opening a fresh client after a fence (the explicit rejoin).
    Rejoining,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Standby => "standby",
            Role::Acquiring => "acquiring",
            Role::Owner => "owner",
            Role::Releasing => "releasing",
            Role::Verifying => "verifying",
            Role::Fenced => "fenced",
            Role::Rejoining => "rejoining",
        }
    }

    /// Waiting for an outcome: no new action for the LUN meanwhile.
    fn busy(self) -> bool {
        matches!(
            self,
            Role::Acquiring | Role::Releasing | Role::Verifying | Role::Rejoining
        )
    }
}

/// One gateway of the group as the configuration lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    /// Its target port group (and portal group tag).
    pub tpg: u16,
}

/// The heartbeat's timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Between two heartbeats.
    pub interval: Duration,
    /// Silence after which a peer is presumed dead.
    pub dead_after: Duration,
}

/// Something the driver must do; it reports back with [`Outcome`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Take the LUN's lock; first break `break_owner`'s (the address the
    /// dead owner announced) if RADOS still shows that one holding it.
    Acquire {
        lun: u16,
        break_owner: Option<String>,
    },
    /// Hand the LUN over: drain and flush, then release the lock.
    Release { lun: u16 },
    /// Read the lock's holder from RADOS: still ours?
    Verify { lun: u16 },
    /// Open a fresh client (after a fence).
    Rejoin { lun: u16 },
    /// Set these ALUA states (target port group, state) on the LU.
    Alua {
        lun: u16,
        states: Vec<(u16, AccessState)>,
    },
}

/// What came of an [`Action`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The lock is ours; `address` is how RADOS names our client.
    Acquired {
        lun: u16,
        address: String,
    },
    /// Someone else holds it (the race was lost), as RADOS named it
    /// (`holder`), or the cluster said no.
    NotAcquired {
        lun: u16,
        holder: Option<String>,
    },
    Released {
        lun: u16,
    },
    /// Verify: RADOS shows `address` as the holder; ours or not.
    Holder {
        lun: u16,
        ours: bool,
    },
    /// The cluster blocklisted our client.
    Fenced {
        lun: u16,
    },
    Rejoined {
        lun: u16,
    },
    /// A release or rejoin failed; the LUN stays as it was.
    Failed {
        lun: u16,
    },
}

#[derive(Clone, Debug)]
struct Lun {
    role: Role,
    /// Our client's address as RADOS names it, while we own the LUN.
    address: Option<String>,
    /// Since when no live gateway has claimed the LUN.
    unowned_since: Instant,
    /// The ALUA states last set on the LU.
    applied: Vec<(u16, AccessState)>,
    /// A lock holder no live gateway claimed, and since when it was seen
    /// so: an owner that died before it announced itself. Broken once it
    /// stays unclaimed for `dead_after` (a live owner announces within an
    /// interval).
    suspect: Option<(String, Instant)>,
}

#[derive(Clone, Debug, Default)]
struct Peer {
    heard: Option<Instant>,
    /// LUNs it claimed in its last heartbeat, with its lock address.
    claims: BTreeMap<u16, String>,
    /// LUNs it asked us to hand over (failback).
    asks: BTreeSet<u16>,
    fenced: bool,
    /// It said it was stopping, its locks released (until it is heard
    /// again).
    left: bool,
    /// Its heartbeat port refused a datagram (ICMP port unreachable):
    /// its host is up and its process is not (until it is heard again).
    gone: bool,
}

/// What `admin state` shows of one gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberView {
    pub name: String,
    pub tpg: u16,
    pub local: bool,
    /// "up", "dead (silent 4.1 s)", "never heard", "fenced".
    pub health: String,
}

/// What a [`Group`] is made of (the checked configuration's part).
#[derive(Clone, Debug)]
pub struct Setup {
    pub members: Vec<Member>,
    /// This gateway (index into `members`).
    pub me: usize,
    pub preferred: Option<usize>,
    /// Non-owners' state: standby or active/non-optimized.
    pub others: AccessState,
    pub timing: Timing,
    pub failback: bool,
}

/// The group as one gateway sees it.
#[derive(Debug)]
pub struct Group {
    members: Vec<Member>,
    me: usize,
    preferred: Option<usize>,
    /// Non-owners' state: standby or active/non-optimized.
    others: AccessState,
    timing: Timing,
    failback: bool,
    luns: BTreeMap<u16, Lun>,
    peers: Vec<Peer>,
    /// This gateway is stopping ([`Group::leave`]): no new decisions;
    /// once its locks are released ([`Group::left`]) its heartbeats say
    /// so.
    leaving: Leaving,
}

/// Where an orderly stop stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leaving {
    No,
    /// Releasing what it owns.
    Releasing,
    /// Every lock released: heartbeats say `leaving`.
    Left,
}

impl Group {
    /// The group of `setup` for `luns`, which start unowned at `now`.
    pub fn new(setup: Setup, luns: &[u16], now: Instant) -> Group {
        let Setup {
            members,
            me,
            preferred,
            others,
            timing,
            failback,
        } = setup;
        let peers = vec![Peer::default(); members.len()];
        let luns = luns
            .iter()
            .map(|n| {
                let lun = Lun {
                    role: Role::Standby,
                    address: None,
                    unowned_since: now,
                    applied: Vec::new(),
                    suspect: None,
                };
                (*n, lun)
            })
            .collect();
        Group {
            members,
            me,
            preferred,
            others,
            timing,
            failback,
            luns,
            peers,
            leaving: Leaving::No,
        }
    }

    /// Member `i`'s name ("" for none).
    fn name(&self, i: usize) -> String {
        self.members
            .get(i)
            .map(|m| m.name.clone())
            .unwrap_or_default()
    }

    fn peer(&self, i: usize) -> Option<&Peer> {
        self.peers.get(i)
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    pub fn role(&self, lun: u16) -> Option<Role> {
        self.luns.get(&lun).map(|l| l.role)
    }

    fn alive(&self, i: usize, now: Instant) -> bool {
        i == self.me
            || self.peer(i).is_some_and(|p| {
                !p.gone
                    && p.heard
                        .is_some_and(|t| now.saturating_duration_since(t) < self.timing.dead_after)
            })
    }

    /// The live peer that claims `lun`, if any.
    fn live_claimant(&self, lun: u16, now: Instant) -> Option<usize> {
        (0..self.members.len()).find(|&i| {
            i != self.me
                && self.alive(i, now)
                && self.peer(i).is_some_and(|p| p.claims.contains_key(&lun))
        })
    }

    /// A heartbeat from member `from` at `now`. Unknown LUNs in it are
    /// ignored (the configurations differ; `--check` on each says so).
    pub fn heard(&mut self, from: usize, hb: &Heartbeat, now: Instant) {
        if from == self.me {
            return;
        }
        let me = self.name(self.me);
        let Some(peer) = self.peers.get_mut(from) else {
            return;
        };
        // A peer that stopped in order is not waited for: not alive, no
        // claims, and no silence to sit out.
        peer.heard = (!hb.leaving).then_some(now);
        peer.left = hb.leaving;
        peer.gone = false;
        peer.fenced = hb.fenced;
        peer.claims = hb
            .owns
            .iter()
            .filter(|(l, _)| self.luns.contains_key(l))
            .cloned()
            .collect();
        peer.asks = hb
            .release
            .iter()
            .filter(|(to, l)| *to == me && self.luns.contains_key(l))
            .map(|(_, l)| *l)
            .collect();
        for (l, lun) in self.luns.iter_mut() {
            if let Some(addr) = peer.claims.get(l) {
                lun.unowned_since = now;
                if lun.suspect.as_ref().is_some_and(|(s, _)| s == addr) {
                    lun.suspect = None;
                }
            }
        }
    }

    /// What this gateway tells the others now.
    pub fn heartbeat(&self, group: &str, seq: u64, now: Instant) -> Heartbeat {
        if self.leaving == Leaving::Left {
            return Heartbeat {
                group: group.to_owned(),
                from: self.name(self.me),
                seq,
                fenced: false,
                owns: Vec::new(),
                release: Vec::new(),
                leaving: true,
            };
        }
        let owns = self
            .luns
            .iter()
            // A LUN being handed over is still held: the preferred
            // gateway waits for the release rather than suspecting it.
            .filter(|(_, l)| matches!(l.role, Role::Owner | Role::Verifying | Role::Releasing))
            .filter_map(|(n, l)| Some((*n, l.address.clone()?)))
            .collect();
        let fenced = self.luns.values().any(|l| l.role == Role::Fenced);
        let mut release = Vec::new();
        if self.failback && self.preferred == Some(self.me) && !fenced {
            for (n, l) in &self.luns {
                if l.role != Role::Standby {
                    continue;
                }
                if let Some(owner) = self.live_claimant(*n, now) {
                    release.push((self.name(owner), *n));
                }
            }
        }
        Heartbeat {
            group: group.to_owned(),
            from: self.name(self.me),
            seq,
            fenced,
            owns,
            release,
            leaving: false,
        }
    }

    /// The next steps at `now`: at most one per LUN, then the ALUA states
    /// of the LUNs whose states changed.
    pub fn tick(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        let numbers: Vec<u16> = self.luns.keys().copied().collect();
        for n in &numbers {
            if let Some(a) = self.decide(*n, now) {
                out.push(a);
            }
        }
        for n in numbers {
            let states = self.states(n, now);
            let Some(lun) = self.luns.get_mut(&n) else {
                continue;
            };
            if lun.applied != states {
                lun.applied = states.clone();
                out.push(Action::Alua { lun: n, states });
            }
        }
        out
    }

    fn set_role(&mut self, lun: u16, role: Role) {
        if let Some(l) = self.luns.get_mut(&lun) {
            l.role = role;
        }
    }

    fn decide(&mut self, n: u16, now: Instant) -> Option<Action> {
        let lun = self.luns.get(&n)?;
        if lun.role.busy() || self.leaving != Leaving::No {
            return None;
        }
        let claimant = self.live_claimant(n, now);
        match lun.role {
            Role::Owner => {
                if claimant.is_some() {
                    // Two claims: RADOS says which one holds the lock.
                    self.set_role(n, Role::Verifying);
                    return Some(Action::Verify { lun: n });
                }
                let asked = (0..self.members.len()).any(|i| {
                    Some(i) == self.preferred
                        && self.alive(i, now)
                        && self
                            .peer(i)
                            .is_some_and(|p| !p.fenced && p.asks.contains(&n))
                });
                if asked && self.failback {
                    self.set_role(n, Role::Releasing);
                    return Some(Action::Release { lun: n });
                }
                None
            }
            Role::Standby => {
                if claimant.is_some() {
                    return None;
                }
                // The address a peer, now silent, last announced.
                let dead_owner = (0..self.members.len())
                    .filter(|&i| i != self.me && !self.alive(i, now))
                    .find_map(|i| self.peer(i)?.claims.get(&n).cloned())
                    .or_else(|| {
                        let (addr, since) = lun.suspect.as_ref()?;
                        let long = now.saturating_duration_since(*since) >= self.timing.dead_after;
                        long.then(|| addr.clone())
                    });
                let waited = now.saturating_duration_since(lun.unowned_since);
                // The preferred gateway first, unless it stopped in order.
                let first = match self.preferred {
                    None => true,
                    Some(p) => p == self.me || self.peer(p).is_some_and(|p| p.left),
                };
                if dead_owner.is_none() && !first && waited < self.timing.dead_after {
                    // The preferred gateway takes an unowned LUN first.
                    return None;
                }
                self.set_role(n, Role::Acquiring);
                Some(Action::Acquire {
                    lun: n,
                    break_owner: dead_owner,
                })
            }
            _ => None,
        }
    }

    /// The ALUA state of every member's group for LUN `n`.
    fn states(&self, n: u16, now: Instant) -> Vec<(u16, AccessState)> {
        let Some(lun) = self.luns.get(&n) else {
            return Vec::new();
        };
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let state = if i == self.me {
                    match lun.role {
                        Role::Owner | Role::Verifying => AccessState::ActiveOptimized,
                        Role::Acquiring | Role::Releasing => AccessState::Transitioning,
                        Role::Fenced | Role::Rejoining => AccessState::Unavailable,
                        Role::Standby => self.others,
                    }
                } else if self.alive(i, now)
                    && self.peer(i).is_some_and(|p| p.claims.contains_key(&n))
                {
                    AccessState::ActiveOptimized
                } else if !self.alive(i, now) {
                    AccessState::Unavailable
                } else {
                    self.others
                };
                (m.tpg, state)
            })
            .collect()
    }

    /// What the driver reports back.
    pub fn outcome(&mut self, o: Outcome, now: Instant) {
        let (n, role, address) = match o {
            Outcome::Acquired { lun, address } => (lun, Role::Owner, Some(address)),
            Outcome::NotAcquired { lun, holder } => {
                if let Some(l) = self.luns.get_mut(&lun) {
                    let same = l.suspect.as_ref().map(|(s, _)| s) == holder.as_ref();
                    if !same {
                        l.suspect = holder.map(|h| (h, now));
                    }
                }
                (lun, Role::Standby, None)
            }
            Outcome::Released { lun } => (lun, Role::Standby, None),
            Outcome::Holder { lun, ours: true } => {
                let address = self.luns.get(&lun).and_then(|l| l.address.clone());
                (lun, Role::Owner, address)
            }
            Outcome::Holder { lun, ours: false } => (lun, Role::Standby, None),
            Outcome::Fenced { lun } => (lun, Role::Fenced, None),
            Outcome::Rejoined { lun } => (lun, Role::Standby, None),
            Outcome::Failed { lun } => {
                let back = match self.role(lun) {
                    Some(Role::Releasing) => Role::Owner,
                    Some(Role::Rejoining) => Role::Fenced,
                    _ => Role::Standby,
                };
                let address = self.luns.get(&lun).and_then(|l| l.address.clone());
                (lun, back, address.filter(|_| back == Role::Owner))
            }
        };
        if let Some(l) = self.luns.get_mut(&n) {
            if role == Role::Owner {
                l.suspect = None;
            }
            l.role = role;
            l.address = address;
            if role == Role::Standby {
                l.unowned_since = now;
            }
        }
    }

    /// The store of LUN `n` was found fenced (an I/O failed with the
    /// blocklist's error): stop serving it.
    pub fn fenced(&mut self, n: u16) {
        if let Some(l) = self.luns.get_mut(&n) {
            if !matches!(l.role, Role::Fenced | Role::Rejoining) {
                l.role = Role::Fenced;
                l.address = None;
            }
        }
    }

    /// Member `i`'s heartbeat port refused our datagram (ICMP port
    /// unreachable on the connected socket we send it from): its host
    /// answers and no process listens, so the process died. It is
    /// presumed dead at once instead of after `dead_after` of silence;
    /// the lock still decides (its lock is broken with the blocklist, as
    /// after silence). Whether it was live until now.
    pub fn unreachable(&mut self, i: usize, now: Instant) -> bool {
        if i == self.me {
            return false;
        }
        let was = self.alive(i, now);
        if let Some(p) = self.peers.get_mut(i) {
            p.gone = true;
        }
        was
    }

    /// An orderly stop begins: no new decisions from now on; the LUNs
    /// this gateway owns go transitioning and are returned for the
    /// caller to drain, flush and release ([`Group::left`] when done).
    pub fn leave(&mut self) -> Vec<u16> {
        self.leaving = Leaving::Releasing;
        let mut owned = Vec::new();
        for (n, l) in self.luns.iter_mut() {
            if matches!(l.role, Role::Owner | Role::Verifying) {
                l.role = Role::Releasing;
                owned.push(*n);
            }
        }
        owned
    }

    /// The locks of an orderly stop are released (or could not be: then
    /// the peers break them after `dead_after`, as for a crash): the
    /// heartbeats say `leaving` and claim nothing.
    pub fn left(&mut self) {
        self.leaving = Leaving::Left;
        for l in self.luns.values_mut() {
            if l.role == Role::Releasing {
                l.role = Role::Standby;
                l.address = None;
            }
        }
    }

    /// The explicit way back (`ironlun admin group rejoin`): a rejoin of
    /// every fenced LUN. Those not fenced are left alone.
    pub fn rejoin(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        for (n, l) in self.luns.iter_mut() {
            if l.role == Role::Fenced {
                l.role = Role::Rejoining;
                out.push(Action::Rejoin { lun: *n });
            }
        }
        out
    }

    /// Each member's health at `now`, in configuration order.
    pub fn member_views(&self, now: Instant) -> Vec<MemberView> {
        let local_fenced = self.luns.values().any(|l| l.role == Role::Fenced);
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let health = if i == self.me {
                    if local_fenced { "fenced" } else { "up" }.to_owned()
                } else {
                    let fenced = self.peer(i).is_some_and(|p| p.fenced);
                    match self.peer(i).and_then(|p| p.heard) {
                        None if self.peer(i).is_some_and(|p| p.left) => {
                            "stopped (left in order)".to_owned()
                        }
                        Some(t) if self.peer(i).is_some_and(|p| p.gone) => format!(
                            "dead (its heartbeat port refused, heard {:.1} s ago)",
                            secs(now, t)
                        ),
                        None => "never heard".to_owned(),
                        Some(t) if self.alive(i, now) => {
                            if fenced { "fenced" } else { "up" }.to_owned()
                                + &format!(" (heard {:.1} s ago)", secs(now, t))
                        }
                        Some(t) => format!("dead (silent {:.1} s)", secs(now, t)),
                    }
                };
                MemberView {
                    name: m.name.clone(),
                    tpg: m.tpg,
                    local: i == self.me,
                    health,
                }
            })
            .collect()
    }

    /// The owner of LUN `n` as this gateway knows it: a member's name,
    /// or `None` when nobody live claims it.
    pub fn owner(&self, n: u16, now: Instant) -> Option<String> {
        let lun = self.luns.get(&n)?;
        if matches!(lun.role, Role::Owner | Role::Verifying | Role::Releasing) {
            return Some(self.name(self.me));
        }
        self.live_claimant(n, now).map(|i| self.name(i))
    }

    /// Our lock address for LUN `n`, while we own it.
    pub fn address(&self, n: u16) -> Option<String> {
        self.luns.get(&n)?.address.clone()
    }

    /// The LUNs, in order.
    pub fn luns(&self) -> impl Iterator<Item = u16> + '_ {
        self.luns.keys().copied()
    }
}

fn secs(now: Instant, then: Instant) -> f64 {
    now.saturating_duration_since(then).as_secs_f64()
}

#[cfg(test)]
mod tests;
