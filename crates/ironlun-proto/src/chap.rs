//! CHAP for iSCSI logins (RFC 7143 §12.1.3 over RFC 1994): the algorithms,
//! binary value encodings, secrets, and each side of one exchange,
//! one-way or mutual. Sans-IO: the caller supplies random bytes.
//!
//! [`crate::target::login`] drives [`TargetChap`] in the security stage;
//! [`crate::initiator::login`] drives [`InitiatorChap`].
//!
//! The exchange (security negotiation stage, after AuthMethod=CHAP):
//! 1. initiator: `CHAP_A=<list>`; target: `CHAP_A=<chosen> CHAP_I=<id>
//!    CHAP_C=<challenge>`;
//! 2. initiator: `CHAP_N=<name> CHAP_R=<response>`, and for mutual CHAP
//!    also `CHAP_I`, `CHAP_C`; target: for mutual CHAP `CHAP_N CHAP_R`.
//!
//! The response is H(identifier ‖ secret ‖ challenge) (RFC 1994 §4.1).

use md5::Md5;
use sha1::Sha1;
use sha2::Sha256;
use sha3::Sha3_256;
use subtle::ConstantTimeEq;

/// A CHAP digest algorithm and its CHAP_A code (IANA "PPP Authentication
/// Algorithms": 5 MD5, 6 SHA-1, 7 SHA-256, 8 SHA3-256).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Md5,
    Sha1,
    Sha256,
    Sha3_256,
}

impl Algorithm {
    /// Every algorithm this side accepts. MD5 is the one RFC 7143 requires.
    pub const ALL: [Algorithm; 4] = [
        Algorithm::Sha3_256,
        Algorithm::Sha256,
        Algorithm::Sha1,
        Algorithm::Md5,
    ];

    pub fn code(self) -> u8 {
        match self {
            Algorithm::Md5 => 5,
            Algorithm::Sha1 => 6,
            Algorithm::Sha256 => 7,
            Algorithm::Sha3_256 => 8,
        }
    }

    pub fn from_code(code: &str) -> Option<Algorithm> {
        match code.trim() {
            "5" => Some(Algorithm::Md5),
            "6" => Some(Algorithm::Sha1),
            "7" => Some(Algorithm::Sha256),
            "8" => Some(Algorithm::Sha3_256),
            _ => None,
        }
    }

    /// Digest (and so response and challenge) length in bytes.
    pub fn digest_len(self) -> usize {
        match self {
            Algorithm::Md5 => 16,
            Algorithm::Sha1 => 20,
            Algorithm::Sha256 | Algorithm::Sha3_256 => 32,
        }
    }

    /// H(id ‖ secret ‖ challenge).
    pub fn response(self, id: u8, secret: &Secret, challenge: &[u8]) -> Vec<u8> {
        fn h<D: digest::Digest>(id: u8, secret: &[u8], challenge: &[u8]) -> Vec<u8> {
            let mut d = D::new();
            d.update([id]);
            d.update(secret);
            d.update(challenge);
            d.finalize().to_vec()
        }
        let s = secret.0.as_slice();
        match self {
            Algorithm::Md5 => h::<Md5>(id, s, challenge),
            Algorithm::Sha1 => h::<Sha1>(id, s, challenge),
            Algorithm::Sha256 => h::<Sha256>(id, s, challenge),
            Algorithm::Sha3_256 => h::<Sha3_256>(id, s, challenge),
        }
    }

    /// The first algorithm of the initiator's list that this side accepts
    /// (the responder picks from the originator's preference order,
    /// RFC 7143 §6.2).
    pub fn choose(offer: &str) -> Option<Algorithm> {
        offer.split(',').find_map(Algorithm::from_code)
    }
}

/// Secrets shorter than this are refused (RFC 7143 §12.1.3 asks for at
/// least 96 bits; the RFC's examples use 16 bytes and more).
pub const SECRET_MIN: usize = 12;
/// And longer than this (nothing sensible is longer).
pub const SECRET_MAX: usize = 255;
/// Challenges accepted from a peer: at least 16 bytes, at most 1024.
pub const CHALLENGE_MIN: usize = 16;
pub const CHALLENGE_MAX: usize = 1024;
/// Random bytes one side draws per exchange: an identifier and a
/// challenge as long as the longest digest (32 bytes).
pub const RANDOM_BYTES: usize = 1 + 32;

/// A CHAP secret. Its `Debug` output never shows the bytes; it hashes,
/// so that a configuration's secrets can be compared in linear time.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: &[u8]) -> Result<Secret, ChapError> {
        if bytes.len() < SECRET_MIN || bytes.len() > SECRET_MAX {
            return Err(ChapError::SecretLength(bytes.len()));
        }
        Ok(Secret(bytes.to_vec()))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret(<{} bytes>)", self.0.len())
    }
}

/// A CHAP user name and its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub secret: Secret,
}

impl Credentials {
    /// `USER:SECRET`, as the command-line flags take them.
    pub fn parse(s: &str) -> Result<Credentials, ChapError> {
        let (user, secret) = s.split_once(':').ok_or(ChapError::Format)?;
        if user.is_empty() || user.len() > 255 {
            return Err(ChapError::Format);
        }
        Ok(Credentials {
            user: user.to_owned(),
            secret: Secret::new(secret.as_bytes())?,
        })
    }
}

/// Why an exchange failed. Every variant maps to login status 0x0201
/// (authentication failure) except `Missing`, an initiator error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChapError {
    #[error("CHAP secret of {0} bytes (12 to 255 required)")]
    SecretLength(usize),
    #[error("credentials must be USER:SECRET")]
    Format,
    #[error("no CHAP algorithm in common (offered {0})")]
    NoAlgorithm(String),
    #[error("{0} missing")]
    Missing(&'static str),
    #[error("{0} is not a valid binary value")]
    Encoding(&'static str),
    #[error("unknown CHAP user {0:?}")]
    UnknownUser(String),
    #[error("wrong CHAP response")]
    WrongResponse,
    #[error(
        "the initiator's challenge is {0} bytes ({CHALLENGE_MIN} to {CHALLENGE_MAX} accepted)"
    )]
    ChallengeLength(usize),
    #[error("the initiator reflected the target's challenge")]
    Reflected,
    #[error("the initiator and the target use the same CHAP secret")]
    SameSecret,
    #[error("mutual CHAP asked for, but the target has no credentials of its own")]
    NoTargetCredentials,
    #[error("CHAP key received out of order")]
    OutOfOrder,
    #[error("the target offered CHAP_A={0}, which we did not propose")]
    UnofferedAlgorithm(String),
    #[error("the target's CHAP_N {0:?} is not the expected target user")]
    UnknownTarget(String),
    #[error("the target's mutual CHAP response is wrong")]
    WrongTargetResponse,
}

impl ChapError {
    /// Whether this is the peer breaking the CHAP exchange's form (login
    /// status 0x0200) rather than failing to authenticate (0x0201).
    pub fn is_protocol_error(&self) -> bool {
        matches!(
            self,
            ChapError::Missing(_) | ChapError::OutOfOrder | ChapError::Encoding(_)
        )
    }
}

/// What a target (or its discovery service) requires: the initiator's
/// credentials, and the target's own for initiators that ask for mutual
/// CHAP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChapPolicy {
    pub initiator: Credentials,
    pub target: Option<Credentials>,
}

/// What an initiator authenticates with: its own credentials and, for
/// mutual CHAP, the target's it expects to see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitiatorAuth {
    pub credentials: Credentials,
    pub mutual: Option<Credentials>,
}

/// Decodes a binary value: `0x` hex or `0b` base64 (RFC 7143 §6.1).
pub fn decode_binary(s: &str, what: &'static str) -> Result<Vec<u8>, ChapError> {
    let bad = || ChapError::Encoding(what);
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        // An odd number of digits has an implied leading zero.
        let padded;
        let hex = if hex.len() % 2 == 1 {
            padded = format!("0{hex}");
            padded.as_str()
        } else {
            hex
        };
        if hex.is_empty() {
            return Err(bad());
        }
        return hex
            .as_bytes()
            .chunks(2)
            .map(|p| {
                std::str::from_utf8(p)
                    .ok()
                    .and_then(|d| u8::from_str_radix(d, 16).ok())
                    .ok_or_else(bad)
            })
            .collect();
    }
    if let Some(b64) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        use base64::Engine;
        return base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| bad());
    }
    Err(bad())
}

/// `0x` followed by lower-case hex.
pub fn encode_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len().saturating_mul(2).saturating_add(2));
    s.push_str("0x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Text keys as parsed: (name, value) in order.
pub type Keys = Vec<(String, String)>;

/// Splits a login request's or response's keys into the CHAP exchange's
/// (`CHAP_*`) and the rest, which are negotiation (RFC 7143 §12.1.3).
pub fn split_keys(pairs: Keys) -> (Keys, Keys) {
    pairs.into_iter().partition(|(k, _)| k.starts_with("CHAP_"))
}

/// A random source for [`TargetChap::step`] / [`InitiatorChap::step`]
/// that hands out `pool` (drawn from the OS beforehand) in order; one
/// exchange needs at most [`RANDOM_BYTES`].
pub fn draw_from(pool: &[u8]) -> impl FnMut(&mut [u8]) + '_ {
    let mut drawn = pool.iter().copied();
    move |buf: &mut [u8]| {
        for b in buf {
            *b = drawn.next().unwrap_or(0);
        }
    }
}

/// The target's side of one CHAP exchange.
#[derive(Debug)]
pub struct TargetChap {
    /// Who may log in.
    initiator: Credentials,
    /// The target's own credentials, for mutual CHAP.
    target: Option<Credentials>,
    state: State,
    /// The challenge the initiator sent for mutual CHAP, once answered.
    initiator_challenge: Option<Vec<u8>>,
}

#[derive(Debug)]
enum State {
    AwaitAlgorithms,
    AwaitResponse {
        alg: Algorithm,
        id: u8,
        challenge: Vec<u8>,
    },
    Done,
}

impl From<ChapPolicy> for TargetChap {
    fn from(p: ChapPolicy) -> TargetChap {
        TargetChap::new(p.initiator, p.target)
    }
}

impl TargetChap {
    pub fn new(initiator: Credentials, target: Option<Credentials>) -> TargetChap {
        TargetChap {
            initiator,
            target,
            state: State::AwaitAlgorithms,
            initiator_challenge: None,
        }
    }

    /// The initiator authenticated (and, if it asked, so did we).
    pub fn done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// The challenge the initiator sent for mutual CHAP, after the step
    /// that answered it. The caller checks it against challenges seen in
    /// earlier logins before sending the answer: a challenge used twice
    /// is a replay (RFC 1994 §2.3: challenges must be unique), and the
    /// answer must then not go out.
    pub fn initiator_challenge(&self) -> Option<&[u8]> {
        self.initiator_challenge.as_deref()
    }

    /// Takes the CHAP keys of one login request (`CHAP_A`, `CHAP_N`,
    /// `CHAP_R`, `CHAP_I`, `CHAP_C`) and returns the keys to answer.
    /// `random` fills a buffer with unpredictable bytes (the identifier
    /// and challenge).
    pub fn step(
        &mut self,
        keys: &[(String, String)],
        random: &mut dyn FnMut(&mut [u8]),
    ) -> Result<Vec<(String, String)>, ChapError> {
        let get = |k: &str| keys.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        match &self.state {
            State::AwaitAlgorithms => {
                let offer = get("CHAP_A").ok_or(ChapError::Missing("CHAP_A"))?;
                let alg = Algorithm::choose(offer)
                    .ok_or_else(|| ChapError::NoAlgorithm(offer.to_owned()))?;
                let mut id = [0u8; 1];
                random(&mut id);
                let mut challenge = vec![0u8; alg.digest_len().max(CHALLENGE_MIN)];
                random(&mut challenge);
                let answer = vec![
                    ("CHAP_A".to_owned(), alg.code().to_string()),
                    ("CHAP_I".to_owned(), id[0].to_string()),
                    ("CHAP_C".to_owned(), encode_hex(&challenge)),
                ];
                self.state = State::AwaitResponse {
                    alg,
                    id: id[0],
                    challenge,
                };
                Ok(answer)
            }
            State::AwaitResponse { alg, id, challenge } => {
                let (alg, id) = (*alg, *id);
                let name = get("CHAP_N").ok_or(ChapError::Missing("CHAP_N"))?;
                let response =
                    decode_binary(get("CHAP_R").ok_or(ChapError::Missing("CHAP_R"))?, "CHAP_R")?;
                // Compare names and responses without early exit on the
                // first differing byte.
                let name_ok = name.as_bytes().ct_eq(self.initiator.user.as_bytes());
                let expected = alg.response(id, &self.initiator.secret, challenge);
                let response_ok = response.ct_eq(&expected);
                if !bool::from(name_ok) {
                    return Err(ChapError::UnknownUser(name.to_owned()));
                }
                if !bool::from(response_ok) {
                    return Err(ChapError::WrongResponse);
                }
                let mut answer = Vec::new();
                match (get("CHAP_I"), get("CHAP_C")) {
                    (None, None) => {}
                    (Some(their_id), Some(their_c)) => {
                        let their_id: u8 = their_id
                            .trim()
                            .parse()
                            .map_err(|_| ChapError::Encoding("CHAP_I"))?;
                        let their_c = decode_binary(their_c, "CHAP_C")?;
                        if their_c.len() < CHALLENGE_MIN || their_c.len() > CHALLENGE_MAX {
                            return Err(ChapError::ChallengeLength(their_c.len()));
                        }
                        // RFC 7143 §12.1.3: the originator must not reuse
                        // the responder's challenge for the other
                        // direction; the responder checks.
                        if bool::from(their_c.ct_eq(challenge)) {
                            return Err(ChapError::Reflected);
                        }
                        let ours = self.target.as_ref().ok_or(ChapError::NoTargetCredentials)?;
                        // The same secret in both directions would let a
                        // peer replay our own response: refuse it.
                        if bool::from(ours.secret.0.ct_eq(&self.initiator.secret.0)) {
                            return Err(ChapError::SameSecret);
                        }
                        answer.push(("CHAP_N".to_owned(), ours.user.clone()));
                        answer.push((
                            "CHAP_R".to_owned(),
                            encode_hex(&alg.response(their_id, &ours.secret, &their_c)),
                        ));
                        self.initiator_challenge = Some(their_c);
                    }
                    (Some(_), None) => return Err(ChapError::Missing("CHAP_C")),
                    (None, Some(_)) => return Err(ChapError::Missing("CHAP_I")),
                }
                self.state = State::Done;
                Ok(answer)
            }
            State::Done => Err(ChapError::OutOfOrder),
        }
    }
}

/// The initiator's side of one CHAP exchange.
#[derive(Debug)]
pub struct InitiatorChap {
    auth: InitiatorAuth,
    state: IState,
}

#[derive(Debug)]
enum IState {
    Start,
    AwaitChallenge,
    /// Our response went out; for mutual CHAP, the target must answer our
    /// challenge.
    AwaitTargetResponse {
        alg: Algorithm,
        mutual: Option<(u8, Vec<u8>)>,
    },
    Done,
}

impl InitiatorChap {
    pub fn new(auth: InitiatorAuth) -> InitiatorChap {
        InitiatorChap {
            auth,
            state: IState::Start,
        }
    }

    /// The exchange completed (the target, for mutual CHAP, proved itself).
    pub fn done(&self) -> bool {
        matches!(self.state, IState::Done)
    }

    /// `CHAP_A` went out.
    pub fn offered(&self) -> bool {
        !matches!(self.state, IState::Start)
    }

    /// Whether the target's last answer must still be checked.
    pub fn awaiting_target(&self) -> bool {
        matches!(self.state, IState::AwaitTargetResponse { .. })
    }

    /// `CHAP_A`: every algorithm, strongest first.
    pub fn offer(&mut self) -> Vec<(String, String)> {
        self.state = IState::AwaitChallenge;
        let list: Vec<String> = Algorithm::ALL
            .iter()
            .map(|a| a.code().to_string())
            .collect();
        vec![("CHAP_A".to_owned(), list.join(","))]
    }

    /// Handles the target's keys: the challenge (answered with `CHAP_N`,
    /// `CHAP_R` and for mutual CHAP our own `CHAP_I`, `CHAP_C`), or the
    /// target's mutual response (checked; nothing to send).
    pub fn step(
        &mut self,
        keys: &[(String, String)],
        random: &mut dyn FnMut(&mut [u8]),
    ) -> Result<Vec<(String, String)>, ChapError> {
        let get = |k: &str| keys.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        match &self.state {
            IState::Start | IState::Done => Err(ChapError::OutOfOrder),
            IState::AwaitChallenge => {
                let a = get("CHAP_A").ok_or(ChapError::Missing("CHAP_A"))?;
                let alg = Algorithm::from_code(a)
                    .ok_or_else(|| ChapError::UnofferedAlgorithm(a.to_owned()))?;
                let id: u8 = get("CHAP_I")
                    .ok_or(ChapError::Missing("CHAP_I"))?
                    .trim()
                    .parse()
                    .map_err(|_| ChapError::Encoding("CHAP_I"))?;
                let challenge =
                    decode_binary(get("CHAP_C").ok_or(ChapError::Missing("CHAP_C"))?, "CHAP_C")?;
                if challenge.len() < CHALLENGE_MIN || challenge.len() > CHALLENGE_MAX {
                    return Err(ChapError::ChallengeLength(challenge.len()));
                }
                let creds = &self.auth.credentials;
                let mut out = vec![
                    ("CHAP_N".to_owned(), creds.user.clone()),
                    (
                        "CHAP_R".to_owned(),
                        encode_hex(&alg.response(id, &creds.secret, &challenge)),
                    ),
                ];
                let mutual = match &self.auth.mutual {
                    None => None,
                    Some(m) => {
                        if bool::from(m.secret.0.ct_eq(&creds.secret.0)) {
                            return Err(ChapError::SameSecret);
                        }
                        let mut my_id = [0u8; 1];
                        random(&mut my_id);
                        let mut my_c = vec![0u8; alg.digest_len().max(CHALLENGE_MIN)];
                        // Never the target's own challenge (RFC 7143
                        // §12.1.3): redraw in the (astronomically
                        // unlikely) case the source repeats it.
                        for _ in 0..4 {
                            random(&mut my_c);
                            if my_c != challenge {
                                break;
                            }
                        }
                        if my_c == challenge {
                            return Err(ChapError::Reflected);
                        }
                        out.push(("CHAP_I".to_owned(), my_id[0].to_string()));
                        out.push(("CHAP_C".to_owned(), encode_hex(&my_c)));
                        Some((my_id[0], my_c))
                    }
                };
                self.state = if mutual.is_some() {
                    IState::AwaitTargetResponse { alg, mutual }
                } else {
                    IState::Done
                };
                Ok(out)
            }
            IState::AwaitTargetResponse { alg, mutual } => {
                let (Some((id, challenge)), Some(expect)) = (mutual, &self.auth.mutual) else {
                    return Err(ChapError::OutOfOrder);
                };
                let name = get("CHAP_N").ok_or(ChapError::Missing("CHAP_N"))?;
                let response =
                    decode_binary(get("CHAP_R").ok_or(ChapError::Missing("CHAP_R"))?, "CHAP_R")?;
                let name_ok = name.as_bytes().ct_eq(expect.user.as_bytes());
                let want = alg.response(*id, &expect.secret, challenge);
                let response_ok = response.ct_eq(&want);
                if !bool::from(name_ok) {
                    return Err(ChapError::UnknownTarget(name.to_owned()));
                }
                if !bool::from(response_ok) {
                    return Err(ChapError::WrongTargetResponse);
                }
                self.state = IState::Done;
                Ok(Vec::new())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(user: &str, secret: &str) -> Credentials {
        Credentials::parse(&format!("{user}:{secret}")).unwrap()
    }

    fn counter() -> impl FnMut(&mut [u8]) {
        let mut n = 0u8;
        move |buf: &mut [u8]| {
            for b in buf {
                n = n.wrapping_add(1);
                *b = n;
            }
        }
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn responses_match_rfc1994_construction() {
        // H(0x01 ‖ "secretsecret" ‖ 16 x 0x02), computed independently
        // with Python's hashlib (and md5sum for MD5).
        let secret = Secret::new(b"secretsecret").unwrap();
        let want = [
            (Algorithm::Md5, "0x48ccf1862ceb2a29d79a059e4f4dd3c3"),
            (
                Algorithm::Sha1,
                "0x88c201e3ab19dc02ad1e057159c10fb24acd8bf6",
            ),
            (
                Algorithm::Sha256,
                "0x91ebe2f44aae4e13213e6f8717e01cef4a6b833395b8a1266535488553ee5bfd",
            ),
            (
                Algorithm::Sha3_256,
                "0xbb4d1274e06196952ce78e4c27c52607420c39cf0703a0c58eb4df430fc6e54e",
            ),
        ];
        for (alg, hex) in want {
            assert_eq!(
                encode_hex(&alg.response(1, &secret, &[2u8; 16])),
                hex,
                "{alg:?}"
            );
        }
    }

    #[test]
    fn binary_values_in_hex_and_base64() {
        assert_eq!(decode_binary("0x0aFf", "x").unwrap(), [0x0a, 0xff]);
        assert_eq!(decode_binary("0xabc", "x").unwrap(), [0x0a, 0xbc]);
        assert_eq!(decode_binary("0bAQID", "x").unwrap(), [1, 2, 3]);
        assert!(decode_binary("0x", "x").is_err());
        assert!(decode_binary("0xzz", "x").is_err());
        assert!(decode_binary("1234", "x").is_err());
        assert!(decode_binary("0b!!", "x").is_err());
    }

    #[test]
    fn secrets_have_bounds_and_never_print() {
        assert_eq!(
            Secret::new(b"short").unwrap_err(),
            ChapError::SecretLength(5)
        );
        assert!(Secret::new(&[b'a'; 256]).is_err());
        let c = creds("u", "twelve-bytes");
        assert!(!format!("{c:?}").contains("twelve"));
        assert!(Credentials::parse("no-colon").is_err());
        assert!(Credentials::parse(":secret-secret").is_err());
    }

    #[test]
    fn algorithm_follows_the_initiators_order() {
        assert_eq!(Algorithm::choose("7,5"), Some(Algorithm::Sha256));
        assert_eq!(Algorithm::choose("99,5"), Some(Algorithm::Md5));
        assert_eq!(Algorithm::choose("8"), Some(Algorithm::Sha3_256));
        assert_eq!(Algorithm::choose("1,2"), None);
    }

    /// Plays the initiator against a [`TargetChap`] for every algorithm,
    /// one-way and mutual.
    #[test]
    fn one_way_and_mutual_exchanges_succeed() {
        for alg in Algorithm::ALL {
            for mutual in [false, true] {
                let ini = creds("initiator", "initiator-secret");
                let tgt = creds("target", "target-secret-1");
                let mut t = TargetChap::new(ini.clone(), mutual.then(|| tgt.clone()));
                let mut rnd = counter();
                let a = t
                    .step(&pairs(&[("CHAP_A", &alg.code().to_string())]), &mut rnd)
                    .unwrap();
                let id: u8 = a[1].1.parse().unwrap();
                let challenge = decode_binary(&a[2].1, "c").unwrap();
                assert_eq!(challenge.len(), alg.digest_len().max(16));
                let r = encode_hex(&alg.response(id, &ini.secret, &challenge));
                let my_c = [0x55u8; 16];
                let mut req = vec![("CHAP_N", "initiator"), ("CHAP_R", r.as_str())];
                let my_c_hex = encode_hex(&my_c);
                if mutual {
                    req.push(("CHAP_I", "77"));
                    req.push(("CHAP_C", &my_c_hex));
                }
                let answer = t.step(&pairs(&req), &mut rnd).unwrap();
                assert!(t.done());
                if mutual {
                    assert_eq!(answer[0], ("CHAP_N".to_owned(), "target".to_owned()));
                    let want = encode_hex(&alg.response(77, &tgt.secret, &my_c));
                    assert_eq!(answer[1].1, want);
                } else {
                    assert!(answer.is_empty());
                }
            }
        }
    }

    fn after_challenge(t: &mut TargetChap) -> (u8, Vec<u8>) {
        let a = t.step(&pairs(&[("CHAP_A", "5")]), &mut counter()).unwrap();
        (
            a[1].1.parse().unwrap(),
            decode_binary(&a[2].1, "c").unwrap(),
        )
    }

    /// Runs the target to its challenge, then answers it correctly as
    /// `ini`, with `mutual` (CHAP_I, CHAP_C) if given.
    fn answer(
        t: &mut TargetChap,
        ini: &Credentials,
        mutual: Option<(&str, &str)>,
    ) -> Result<Vec<(String, String)>, ChapError> {
        let (id, c) = after_challenge(t);
        let r = encode_hex(&Algorithm::Md5.response(id, &ini.secret, &c));
        let mut keys = vec![("CHAP_N", ini.user.as_str()), ("CHAP_R", r.as_str())];
        if let Some((i, c)) = mutual {
            keys.push(("CHAP_I", i));
            keys.push(("CHAP_C", c));
        }
        t.step(&pairs(&keys), &mut counter())
    }

    #[test]
    fn wrong_secret_user_reflection_and_same_secret_fail() {
        let ini = creds("initiator", "initiator-secret");
        // Wrong secret.
        let mut t = TargetChap::new(ini.clone(), None);
        let (id, c) = after_challenge(&mut t);
        let wrong = Secret::new(b"not-the-secret").unwrap();
        let r = encode_hex(&Algorithm::Md5.response(id, &wrong, &c));
        let e = t
            .step(
                &pairs(&[("CHAP_N", "initiator"), ("CHAP_R", &r)]),
                &mut counter(),
            )
            .unwrap_err();
        assert_eq!(e, ChapError::WrongResponse);
        assert!(!t.done());
        // Unknown user with the right secret.
        let mut t = TargetChap::new(ini.clone(), None);
        let (id, c) = after_challenge(&mut t);
        let r = encode_hex(&Algorithm::Md5.response(id, &ini.secret, &c));
        let e = t
            .step(
                &pairs(&[("CHAP_N", "mallory"), ("CHAP_R", &r)]),
                &mut counter(),
            )
            .unwrap_err();
        assert_eq!(e, ChapError::UnknownUser("mallory".into()));
        // The initiator reflects our challenge back for mutual CHAP.
        let tgt = creds("target", "target-secret-1");
        let mut t = TargetChap::new(ini.clone(), Some(tgt));
        let (id, c) = after_challenge(&mut t);
        let r = encode_hex(&Algorithm::Md5.response(id, &ini.secret, &c));
        let c_hex = encode_hex(&c);
        let e = t
            .step(
                &pairs(&[
                    ("CHAP_N", "initiator"),
                    ("CHAP_R", &r),
                    ("CHAP_I", &id.to_string()),
                    ("CHAP_C", &c_hex),
                ]),
                &mut counter(),
            )
            .unwrap_err();
        assert_eq!(e, ChapError::Reflected);
        // The same secret configured for both directions.
        let same = creds("target", "initiator-secret");
        let mut t = TargetChap::new(ini.clone(), Some(same));
        let e = answer(&mut t, &ini, Some(("3", &encode_hex(&[9u8; 16])))).unwrap_err();
        assert_eq!(e, ChapError::SameSecret);
    }

    #[test]
    fn malformed_and_out_of_order_keys_fail() {
        let ini = creds("initiator", "initiator-secret");
        let mut t = TargetChap::new(ini.clone(), None);
        assert_eq!(
            t.step(&pairs(&[("CHAP_N", "x")]), &mut counter())
                .unwrap_err(),
            ChapError::Missing("CHAP_A")
        );
        assert!(matches!(
            t.step(&pairs(&[("CHAP_A", "1,2,3")]), &mut counter()),
            Err(ChapError::NoAlgorithm(_))
        ));
        // A short mutual challenge.
        let e = answer(&mut t, &ini, Some(("1", "0x0102"))).unwrap_err();
        assert_eq!(e, ChapError::ChallengeLength(2));
        // Mutual CHAP asked of a target without credentials.
        let mut t = TargetChap::new(ini.clone(), None);
        let e = answer(&mut t, &ini, Some(("1", &encode_hex(&[7u8; 16])))).unwrap_err();
        assert_eq!(e, ChapError::NoTargetCredentials);
        // Garbage response encoding.
        let mut t = TargetChap::new(ini, None);
        after_challenge(&mut t);
        assert_eq!(
            t.step(
                &pairs(&[("CHAP_N", "initiator"), ("CHAP_R", "zz")]),
                &mut counter()
            )
            .unwrap_err(),
            ChapError::Encoding("CHAP_R")
        );
    }

    /// The two sides of this module against each other, every algorithm
    /// the target might choose, one-way and mutual; then a target that
    /// answers mutual CHAP with the wrong secret.
    #[test]
    fn initiator_and_target_agree() {
        for alg in Algorithm::ALL {
            for mutual in [false, true] {
                let ini = creds("initiator", "initiator-secret");
                let tgt = creds("target", "target-secret-1");
                let mut t = TargetChap::new(ini.clone(), mutual.then(|| tgt.clone()));
                let mut i = InitiatorChap::new(InitiatorAuth {
                    credentials: ini,
                    mutual: mutual.then(|| tgt.clone()),
                });
                let mut rnd = counter();
                let mut offer = i.offer();
                offer[0].1 = alg.code().to_string();
                let challenge = t.step(&offer, &mut rnd).unwrap();
                let response = i.step(&challenge, &mut rnd).unwrap();
                let back = t.step(&response, &mut rnd).unwrap();
                assert!(t.done());
                assert_eq!(i.awaiting_target(), mutual);
                if mutual {
                    i.step(&back, &mut rnd).unwrap();
                }
                assert!(i.done(), "{alg:?} mutual={mutual}");
            }
        }
        // A target that does not know the secret the initiator expects.
        let ini = creds("initiator", "initiator-secret");
        let mut t = TargetChap::new(ini.clone(), Some(creds("target", "impostor-secret")));
        let mut i = InitiatorChap::new(InitiatorAuth {
            credentials: ini,
            mutual: Some(creds("target", "target-secret-1")),
        });
        let mut rnd = counter();
        let challenge = t.step(&i.offer(), &mut rnd).unwrap();
        let response = i.step(&challenge, &mut rnd).unwrap();
        let back = t.step(&response, &mut rnd).unwrap();
        assert_eq!(
            i.step(&back, &mut rnd).unwrap_err(),
            ChapError::WrongTargetResponse
        );
        assert!(!i.done());
    }
}
