//! The target the login and session harnesses talk to: one target name,
//! CHAP credentials when the input's settings ask for them, a
//! deterministic random source, and a small SendTargets directory.

use ironlun_proto::chap::{ChapPolicy, Credentials, InitiatorAuth, Secret};
use ironlun_proto::login::LoginStatus;
use ironlun_proto::params::Offers;
use ironlun_proto::target::login::{LoginContext, NewSession, TargetInfo};
use ironlun_proto::target::{Directory, SendTargetsQuery, TargetListing};

pub const TARGET: &str = "iqn.2026-11.test:fuzz";
pub const INITIATOR: &str = "iqn.2026-11.test:initiator";
pub const INITIATOR_USER: &str = "fuzz-initiator";
pub const INITIATOR_SECRET: &[u8] = b"initiator-secret-16";
pub const TARGET_USER: &str = "fuzz-target";
pub const TARGET_SECRET: &[u8] = b"target-secret-of-20b";
/// Commands a session may hold at once.
pub const QUEUE_DEPTH: u32 = 8;
/// TSIH the world hands out.
pub const TSIH: u16 = 0x0101;

/// What the input's settings byte turned on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorldSettings {
    /// Normal sessions require CHAP.
    pub chap: bool,
    /// The target has credentials of its own (mutual CHAP possible).
    pub mutual: bool,
    /// Discovery sessions require CHAP.
    pub discovery_chap: bool,
    /// Session creation is refused (a full session table).
    pub refuse_sessions: bool,
}

impl WorldSettings {
    pub fn from_byte(b: u8) -> Self {
        WorldSettings {
            chap: b & 1 != 0,
            mutual: b & 2 != 0,
            discovery_chap: b & 4 != 0,
            refuse_sessions: b & 8 != 0,
        }
    }

    pub fn to_byte(self) -> u8 {
        u8::from(self.chap)
            | u8::from(self.mutual) << 1
            | u8::from(self.discovery_chap) << 2
            | u8::from(self.refuse_sessions) << 3
    }
}

fn credentials(user: &str, secret: &[u8]) -> Credentials {
    match Secret::new(secret) {
        Ok(secret) => Credentials {
            user: user.to_owned(),
            secret,
        },
        Err(e) => panic!("the fuzz world's secret is invalid: {e}"),
    }
}

/// The CHAP policy the world's target enforces.
pub fn policy(mutual: bool) -> ChapPolicy {
    ChapPolicy {
        initiator: credentials(INITIATOR_USER, INITIATOR_SECRET),
        target: mutual.then(|| credentials(TARGET_USER, TARGET_SECRET)),
    }
}

/// What an initiator that knows the secrets logs in with.
pub fn initiator_auth(mutual: bool) -> InitiatorAuth {
    InitiatorAuth {
        credentials: credentials(INITIATOR_USER, INITIATOR_SECRET),
        mutual: mutual.then(|| credentials(TARGET_USER, TARGET_SECRET)),
    }
}

/// The daemon's side of a login, deterministic.
#[derive(Debug, Default)]
pub struct World {
    pub settings: WorldSettings,
    random_calls: u8,
    pub sessions: Vec<NewSession>,
    /// Mutual CHAP challenges already answered (bounded, as the daemon's).
    challenges: Vec<Vec<u8>>,
}

impl World {
    pub fn new(settings: WorldSettings) -> Self {
        World {
            settings,
            ..World::default()
        }
    }

    fn chap(&self, required: bool) -> Option<ChapPolicy> {
        required.then(|| policy(self.settings.mutual))
    }
}

impl LoginContext for World {
    fn find_target(&mut self, name: &str, _initiator: &str) -> Result<TargetInfo, LoginStatus> {
        if !name.eq_ignore_ascii_case(TARGET) {
            return Err(LoginStatus::NOT_FOUND);
        }
        Ok(TargetInfo {
            name: TARGET.into(),
            alias: Some("fuzz".into()),
            portal_group_tag: 1,
            offers: Offers::default(),
            queue_depth: QUEUE_DEPTH,
            chap: self.chap(self.settings.chap),
        })
    }

    fn discovery_offers(&self) -> Result<Offers, LoginStatus> {
        Ok(Offers::default())
    }

    fn discovery_chap(&self) -> Option<ChapPolicy> {
        self.chap(self.settings.discovery_chap)
    }

    fn random(&mut self, buf: &mut [u8]) -> Result<(), LoginStatus> {
        // Different on every call, the same for every run of an input.
        self.random_calls = self.random_calls.wrapping_add(1);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self.random_calls.wrapping_mul(37).wrapping_add(i as u8);
        }
        Ok(())
    }

    fn challenge_seen_before(&mut self, challenge: &[u8]) -> bool {
        if self.challenges.iter().any(|c| c == challenge) {
            return true;
        }
        if self.challenges.len() >= 64 {
            self.challenges.remove(0);
        }
        self.challenges.push(challenge.to_vec());
        false
    }

    fn create_session(&mut self, s: &NewSession) -> Result<u16, LoginStatus> {
        if self.settings.refuse_sessions {
            return Err(LoginStatus::OUT_OF_RESOURCES);
        }
        self.sessions.push(s.clone());
        Ok(TSIH)
    }
}

/// SendTargets answers: the world's target plus enough others that a
/// full answer spans several Text Responses.
pub struct FuzzDirectory;

impl Directory for FuzzDirectory {
    fn send_targets(&self, _initiator: &str, query: SendTargetsQuery<'_>) -> Vec<TargetListing> {
        let all = std::iter::once(TARGET.to_owned())
            .chain((0..150).map(|n| format!("iqn.2026-11.test:other{n:03}")))
            .map(|name| TargetListing {
                name,
                addresses: vec!["127.0.0.1:3260,1".into(), "[::1]:3260,1".into()],
            });
        match query {
            SendTargetsQuery::All => all.collect(),
            SendTargetsQuery::Named(n) => all.filter(|t| t.name == n).collect(),
        }
    }
}
