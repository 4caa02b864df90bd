//! An initiator core and a target (ironlun-proto's login and connection
//! state machines, a device of zeros that may hold commands) joined by
//! an in-memory wire.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ironlun_proto::chap::{ChapPolicy, RANDOM_BYTES};
use ironlun_proto::initiator::{
    LoginConfig, Reply, ScsiRequest, SessionLimits, TaskError, ATTR_SIMPLE,
};
use ironlun_proto::login::LoginStatus;
use ironlun_proto::params::{DigestKind, Offers};
use ironlun_proto::target::login::{LoginContext, LoginStep, NewSession, TargetInfo, TargetLogin};
use ironlun_proto::target::{
    Directory, Event as TargetEvent, FfpConfig, ScsiResult, ScsiTask, SendTargetsQuery,
    TargetConnection, TargetListing,
};
use ironlun_proto::OutPdu;
use ironlun_scsi_codes::{opcode, Status};
use ironlun_wire::{Digests, Frame, FrameDecoder, Lun, Outbox, Pdu};

use crate::{CoreConfig, Event, InitiatorCore, ReconnectPolicy, Request};

pub const TARGET: &str = "iqn.2026-11.test:t";
pub const INITIATOR: &str = "iqn.2026-11.test:init";

struct Ctx;

impl LoginContext for Ctx {
    fn find_target(&mut self, name: &str, _i: &str) -> Result<TargetInfo, LoginStatus> {
        if name != TARGET {
            return Err(LoginStatus::NOT_FOUND);
        }
        Ok(TargetInfo {
            name: TARGET.into(),
            alias: None,
            portal_group_tag: 1,
            offers: Offers::default(),
            queue_depth: 16,
            chap: None::<ChapPolicy>,
        })
    }
    fn discovery_offers(&self) -> Result<Offers, LoginStatus> {
        Ok(Offers::default())
    }
    fn discovery_chap(&self) -> Option<ChapPolicy> {
        None
    }
    fn random(&mut self, buf: &mut [u8]) -> Result<(), LoginStatus> {
        buf.fill(0x11);
        Ok(())
    }
    fn create_session(&mut self, _s: &NewSession) -> Result<u16, LoginStatus> {
        Ok(0x42)
    }
}

struct NoTargets;

impl Directory for NoTargets {
    fn send_targets(&self, _i: &str, _q: SendTargetsQuery<'_>) -> Vec<TargetListing> {
        Vec::new()
    }
}

/// The target's side of the current connection.
enum Peer {
    None,
    Login(Box<TargetLogin>),
    Ffp(Box<TargetConnection>, Digests),
    /// It closed its side (after a Logout Response or a failed login).
    Closed,
}

/// Encodes a PDU with `digests`: the bytes on the wire.
fn encode(p: OutPdu, digests: Digests) -> Vec<u8> {
    let mut o = Outbox::new(digests);
    o.push(&p.pdu, p.data).unwrap();
    let mut bytes = Vec::new();
    o.write_with(|iov| {
        for s in iov {
            bytes.extend_from_slice(s);
        }
        Ok(iov.iter().map(|s| s.len()).sum())
    })
    .unwrap();
    bytes
}

/// Frames bytes the way the other end's decoder would.
fn frame(bytes: &[u8], digests: Digests) -> Frame {
    let mut d = FrameDecoder::new(1 << 24);
    d.digests = digests;
    let mut buf = BytesMut::from(bytes);
    let f = d.decode(&mut buf).unwrap().unwrap();
    assert!(buf.is_empty());
    f
}

pub struct World {
    pub core: InitiatorCore<u32>,
    pub now: Instant,
    peer: Peer,
    /// Bytes from the target not yet framed by the core.
    rx: BytesMut,
    /// The device answers nothing while true.
    pub hold: bool,
    pub held: Vec<ScsiTask>,
    /// Commands the device ends with a unit attention before it answers
    /// GOOD again.
    pub unit_attentions: usize,
    /// The target sends nothing at all, and never closes, while true.
    pub silent: bool,
    pub refuse_connections: bool,
    pub connections: usize,
    /// Every PDU the target received, on every connection.
    pub received: Vec<Pdu>,
    pub events: Vec<Event>,
    pub done: Vec<(u32, Result<Reply, TaskError>)>,
    pub orphans: Vec<(ScsiRequest, u32)>,
}

pub fn config() -> CoreConfig {
    let mut login = LoginConfig::normal(INITIATOR, TARGET);
    login.offers.header_digest = vec![DigestKind::Crc32c];
    login.offers.data_digest = vec![DigestKind::Crc32c];
    CoreConfig {
        login,
        limits: SessionLimits {
            nop_interval: None,
            ..SessionLimits::default()
        },
        login_timeout: Duration::from_secs(10),
        reconnect: ReconnectPolicy {
            attempts: 2,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        },
        failover: false,
    }
}

impl World {
    /// Logged in with [`config`].
    pub fn new() -> World {
        Self::with(config())
    }

    pub fn with(cfg: CoreConfig) -> World {
        let mut w = Self::unconnected_with(cfg);
        w.run();
        w
    }

    /// Before the first connection is opened.
    pub fn unconnected() -> World {
        Self::unconnected_with(config())
    }

    fn unconnected_with(cfg: CoreConfig) -> World {
        let now = Instant::now();
        World {
            core: InitiatorCore::new(cfg, now),
            now,
            peer: Peer::None,
            rx: BytesMut::new(),
            hold: false,
            held: Vec::new(),
            unit_attentions: 0,
            silent: false,
            refuse_connections: false,
            connections: 0,
            received: Vec::new(),
            events: Vec::new(),
            done: Vec::new(),
            orphans: Vec::new(),
        }
    }

    pub fn last_event(&self) -> Option<&Event> {
        self.events.last()
    }

    /// Logout Requests the target received.
    pub fn logouts(&self) -> usize {
        self.received
            .iter()
            .filter(|p| matches!(p, Pdu::LogoutRequest(_)))
            .count()
    }

    pub fn request(&mut self, r: Request, token: u32) {
        let _ = self.core.handle_request(r, token, self.now);
        self.run();
    }

    /// The target's side of the connection in full feature phase.
    pub fn target(&mut self) -> &mut TargetConnection {
        match &mut self.peer {
            Peer::Ffp(c, _) => c,
            _ => panic!("the target is not in full feature phase"),
        }
    }

    /// Moves time on; timers of both sides run.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        if self.core.poll_timeout().is_some_and(|t| t <= self.now) {
            self.core.handle_timeout(self.now);
        }
        if let Peer::Ffp(c, _) = &mut self.peer {
            c.handle_timeout(self.now);
        }
        self.run();
    }

    /// Ends the held commands with GOOD.
    pub fn release(&mut self) {
        self.hold = false;
        for t in std::mem::take(&mut self.held) {
            if let Peer::Ffp(c, _) = &mut self.peer {
                c.complete(t.itt, answer(&t));
            }
        }
        self.run();
    }

    /// A PDU the target's state machine would not send, framed as the
    /// connection's PDUs are.
    pub fn inject(&mut self, pdu: Pdu) {
        let digests = self.core.digests();
        self.rx
            .extend_from_slice(&encode(OutPdu::new(pdu), digests));
        self.run();
    }

    /// Moves everything until nothing moves.
    pub fn run(&mut self) {
        for _ in 0..1000 {
            let mut moved = self.drain_core();
            moved |= self.deliver_to_target();
            moved |= self.deliver_to_initiator();
            if !moved {
                return;
            }
        }
        panic!("the exchange does not settle");
    }

    fn drain_core(&mut self) -> bool {
        let mut moved = false;
        while let Some(e) = self.core.poll_event() {
            moved = true;
            match e {
                Event::Connect => self.connect(),
                Event::Disconnect => {
                    self.peer = Peer::None;
                    self.rx.clear();
                    self.held.clear();
                }
                _ => {}
            }
            self.events.push(e);
        }
        while let Some(c) = self.core.poll_completion() {
            moved = true;
            self.done.push((c.token, c.result));
        }
        while let Some(o) = self.core.poll_orphan() {
            moved = true;
            self.orphans.push(o);
        }
        moved
    }

    fn connect(&mut self) {
        if self.refuse_connections {
            self.core
                .handle_connection_lost("connection refused".into(), self.now);
            return;
        }
        self.connections += 1;
        self.peer = Peer::Login(Box::new(TargetLogin::new(100, 16, 64 << 10)));
        self.core.handle_connected([0x5a; RANDOM_BYTES]);
    }

    /// What the initiator sends goes to the target.
    fn deliver_to_target(&mut self) -> bool {
        let mut moved = false;
        while let Some(p) = self.core.poll_transmit() {
            moved = true;
            let digests = self.core.digests();
            let f = frame(&encode(p, digests), digests);
            self.received.push(Pdu::decode(&f.bhs).unwrap());
            self.target_receives(f);
        }
        moved
    }

    fn target_receives(&mut self, f: Frame) {
        match &mut self.peer {
            Peer::Login(l) => match l.handle_frame(&f, &mut Ctx) {
                LoginStep::Continue(r) => self.send(r, Digests::default()),
                LoginStep::Failed { response, .. } => {
                    self.send(response, Digests::default());
                    self.peer = Peer::Closed;
                }
                LoginStep::Complete { response, result } => {
                    self.send(response, Digests::default());
                    let ffp = FfpConfig {
                        queue_depth: 16,
                        nop_interval: None,
                        ..FfpConfig::default()
                    };
                    let digests = Digests {
                        header: result.conn.header_digest,
                        data: result.conn.data_digest,
                    };
                    let c = TargetConnection::new(&result, ffp, Box::new(NoTargets), self.now);
                    self.peer = Peer::Ffp(Box::new(c), digests);
                }
            },
            Peer::Ffp(c, _) => c.handle_frame(f, self.now),
            Peer::None | Peer::Closed => {}
        }
    }

    fn send(&mut self, p: OutPdu, digests: Digests) {
        if !self.silent {
            self.rx.extend_from_slice(&encode(p, digests));
        }
    }

    /// The target runs its device and sends what it has; the core frames
    /// it with its own decoder.
    fn deliver_to_initiator(&mut self) -> bool {
        let mut moved = false;
        if let Peer::Ffp(c, digests) = &mut self.peer {
            let digests = *digests;
            let mut close = false;
            while let Some(e) = c.poll_event() {
                moved = true;
                match e {
                    TargetEvent::Execute(t) if self.hold => self.held.push(t),
                    TargetEvent::Execute(t) if self.unit_attentions > 0 => {
                        self.unit_attentions -= 1;
                        c.complete(t.itt, unit_attention());
                    }
                    TargetEvent::Execute(t) => {
                        let r = answer(&t);
                        c.complete(t.itt, r);
                    }
                    TargetEvent::Close(_) => close = !self.silent,
                    _ => {}
                }
            }
            let mut out = Vec::new();
            while let Some(p) = c.poll_transmit() {
                out.push(p);
            }
            for p in out {
                moved = true;
                self.send(p, digests);
            }
            if close {
                self.peer = Peer::Closed;
            }
        }
        while !self.rx.is_empty() {
            match self.core.decoder().decode(&mut self.rx) {
                Ok(Some(f)) => {
                    moved = true;
                    self.core.handle_frame(f, self.now);
                }
                Ok(None) => break,
                Err(e) => {
                    moved = true;
                    self.rx.clear();
                    self.core.handle_frame_error(&e, self.now);
                }
            }
        }
        if matches!(self.peer, Peer::Closed) && self.rx.is_empty() {
            // The target closed its side: the reader sees the end.
            self.peer = Peer::None;
            self.core
                .handle_connection_lost("connection closed by the target".into(), self.now);
            moved = true;
        }
        moved
    }
}

/// The device: zeros for reads, GOOD for everything.
fn answer(t: &ScsiTask) -> ScsiResult {
    let len = t.expected_data_transfer_length;
    ScsiResult {
        status: Status::GOOD,
        data_in: if t.read {
            Bytes::from(vec![0u8; len as usize]).into()
        } else {
            Bytes::new().into()
        },
        transfer_length: len,
        ..ScsiResult::default()
    }
}

/// POWER ON, RESET, OR BUS DEVICE RESET OCCURRED (29h/00h), fixed
/// format sense (SPC-5 §4.4.3).
fn unit_attention() -> ScsiResult {
    let mut sense = vec![0u8; 18];
    sense[0] = 0x70;
    sense[2] = 0x06;
    sense[7] = 10;
    sense[12] = 0x29;
    ScsiResult {
        status: Status::CHECK_CONDITION,
        sense: Bytes::from(sense),
        ..ScsiResult::default()
    }
}

pub fn read(lba: u32, len: u32) -> ScsiRequest {
    let mut cdb = [0u8; 16];
    cdb[0] = opcode::READ_10;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&((len / 512) as u16).to_be_bytes());
    ScsiRequest {
        lun: Lun::from_index(0),
        cdb,
        read_len: len,
        attr: ATTR_SIMPLE,
        ..ScsiRequest::default()
    }
}
