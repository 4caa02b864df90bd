//! Seed inputs: each target's starting corpus.
//!
//! The login and session seeds are recorded, not written by hand:
//! ironlun's own initiator (`ironlun-proto::initiator`) logs in to and
//! works against the harness's target, and what it sent becomes the input.
//! The `initiator` seeds are the other way round (`initiator`): what the
//! session harness's target sent to ironlun's initiator. Replaying a seed
//! therefore reaches as deep as the recorded exchange did (the tests check
//! how deep). The others are built from the codec.
//! `fuzz/seeds/` holds these files; `scripts/fuzz --write-seeds`
//! regenerates them and a test keeps them current.

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use ironlun_proto::chap::RANDOM_BYTES;
use ironlun_proto::initiator::{
    InitiatorLogin, InitiatorSession, LoginConfig, LoginOutcome, LoginProgress, ScsiRequest,
    SessionLimits, ATTR_SIMPLE,
};
use ironlun_proto::params::{DigestKind, Offers};
use ironlun_proto::OutPdu;
use ironlun_scsi_codes::{opcode, service_action};
use ironlun_wire::text::encode_pairs;
use ironlun_wire::{
    encode_frame, Bhs, DataOut, Digests, Frame, FrameDecoder, LogoutReason, Lun, NopOut, Opcode,
    Outbox, Pdu, ScsiCommand, TextRequest, TmfFunction,
};

use crate::input::{RecordWriter, Stepped};
use crate::login::{LoginDriver, Phase};
use crate::session::{encode_into, SessionHarness};
use crate::world::{initiator_auth, WorldSettings, INITIATOR, TARGET};

mod files;
pub(crate) mod initiator;

/// One seed file.
#[derive(Clone, Debug)]
pub struct Seed {
    pub target: &'static str,
    pub name: &'static str,
    pub bytes: Vec<u8>,
}

/// Every seed of every target.
pub fn all() -> Vec<Seed> {
    let mut seeds = Vec::new();
    seeds.extend(wire_seeds());
    seeds.extend(text_seeds());
    seeds.extend(cdb_seeds());
    seeds.extend(login_seeds());
    seeds.extend(session_seeds());
    seeds.extend(initiator::seeds());
    seeds.extend(files::state_seeds());
    seeds.extend(files::config_seeds());
    seeds
}

fn seed(target: &'static str, name: &'static str, bytes: Vec<u8>) -> Seed {
    Seed {
        target,
        name,
        bytes,
    }
}

/// A PDU as the wire carries it.
fn frame(p: &OutPdu, digests: Digests) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(&mut Outbox::new(digests), p.clone(), &mut out);
    out
}

pub(crate) fn rw10(op: u8, lba: u32, blocks: u16) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = op;
    let l = lba.to_be_bytes();
    let n = blocks.to_be_bytes();
    c[2..6].copy_from_slice(&l);
    c[7..9].copy_from_slice(&n);
    c
}

fn command(itt: u32, cmd_sn: u32, cdb: [u8; 16], edtl: u32, write: bool) -> Pdu {
    Pdu::ScsiCommand(ScsiCommand {
        immediate: false,
        final_bit: true,
        read: !write && edtl > 0,
        write,
        attr: ATTR_SIMPLE,
        lun: Lun::from_index(0),
        itt,
        expected_data_transfer_length: edtl,
        cmd_sn,
        exp_stat_sn: 0,
        cdb,
    })
}

/// A few PDUs of a session, framed with `digests`.
fn some_pdus(digests: Digests) -> Vec<u8> {
    let mut login = InitiatorLogin::new(LoginConfig::normal(INITIATOR, TARGET), [7; RANDOM_BYTES]);
    let mut s = frame(&login.start(), digests);
    let pdus = [
        OutPdu {
            pdu: command(1, 1, rw10(opcode::WRITE_10, 0, 1), 512, true),
            data: Bytes::from(vec![0xab; 512]).into(),
        },
        OutPdu {
            pdu: Pdu::DataOut(DataOut {
                final_bit: true,
                lun: Lun::from_index(0),
                itt: 1,
                ttt: 5,
                exp_stat_sn: 1,
                data_sn: 0,
                buffer_offset: 512,
            }),
            data: Bytes::from(vec![0xcd; 1000]).into(),
        },
        OutPdu::new(command(2, 2, rw10(opcode::READ_10, 0, 8), 4096, false)),
        OutPdu {
            pdu: Pdu::NopOut(NopOut {
                immediate: true,
                lun: Lun::default(),
                itt: 3,
                ttt: u32::MAX,
                cmd_sn: 3,
                exp_stat_sn: 2,
            }),
            data: Bytes::from_static(b"ping").into(),
        },
        OutPdu {
            pdu: Pdu::TextRequest(TextRequest {
                immediate: true,
                final_bit: true,
                cont: false,
                lun: Lun::default(),
                itt: 4,
                ttt: u32::MAX,
                cmd_sn: 3,
                exp_stat_sn: 3,
            }),
            data: Bytes::from(encode_pairs([("SendTargets", "All")])).into(),
        },
    ];
    for p in &pdus {
        s.extend(frame(p, digests));
    }
    s
}

fn wire_seeds() -> Vec<Seed> {
    let plain = Digests::default();
    let both = Digests {
        header: true,
        data: true,
    };
    let with_settings = |settings: u8, read: u8, stream: Vec<u8>| {
        let mut v = vec![settings, read];
        v.extend(stream);
        v
    };
    let mut every = Vec::new();
    for op in 0u8..0x40 {
        let mut b = Bhs::new(Opcode(op));
        b.set_final_bit(true);
        b.set_itt(u32::from(op));
        let mut out = BytesMut::new();
        if encode_frame(&b, &[], &[op; 5], plain, &mut out).is_ok() {
            every.extend_from_slice(&out);
        }
    }
    let mut ahs = BytesMut::new();
    // An extended CDB AHS (RFC 7143 §11.2.2.3): length 13, type 1, then
    // the CDB bytes beyond the 16 in the BHS, padded.
    let ext = [
        0x00, 0x0d, 0x01, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0, 0,
    ];
    let _ = encode_frame(
        &command(9, 9, [0x7f; 16], 0, false).encode(),
        &ext,
        &[],
        plain,
        &mut ahs,
    );
    vec![
        seed(
            "wire",
            "session-pdus",
            with_settings(0, 7, some_pdus(plain)),
        ),
        seed(
            "wire",
            "session-pdus-with-digests",
            with_settings(3 | 2 << 2, 100, some_pdus(both)),
        ),
        seed("wire", "every-opcode", with_settings(0, 48, every)),
        seed(
            "wire",
            "extended-cdb-ahs",
            with_settings(0, 1, ahs.to_vec()),
        ),
    ]
}

fn text_seeds() -> Vec<Seed> {
    let t = |settings: u8, pairs: &[(&str, &str)]| {
        let mut v = vec![settings, 1];
        v.extend(encode_pairs(pairs.iter().copied()));
        v
    };
    vec![
        seed(
            "text",
            "security-stage",
            t(
                0,
                &[
                    ("InitiatorName", INITIATOR),
                    ("SessionType", "Normal"),
                    ("TargetName", TARGET),
                    ("AuthMethod", "CHAP,None"),
                    ("CHAP_A", "8,7,6,5"),
                    ("CHAP_N", "user"),
                    ("CHAP_R", "0x0123456789abcdef0123456789abcdef"),
                    ("CHAP_I", "7"),
                    ("CHAP_C", "0bASNFZ4mrze8BI0VniavN7w=="),
                ],
            ),
        ),
        seed(
            "text",
            "operational-offer",
            t(
                2,
                &[
                    ("HeaderDigest", "CRC32C,None"),
                    ("DataDigest", "None,CRC32C"),
                    ("MaxConnections", "1"),
                    ("InitialR2T", "No"),
                    ("ImmediateData", "Yes"),
                    ("MaxRecvDataSegmentLength", "262144"),
                    ("MaxBurstLength", "16776192"),
                    ("FirstBurstLength", "262144"),
                    ("DefaultTime2Wait", "2"),
                    ("DefaultTime2Retain", "0"),
                    ("MaxOutstandingR2T", "1"),
                    ("DataPDUInOrder", "Yes"),
                    ("DataSequenceInOrder", "Yes"),
                    ("ErrorRecoveryLevel", "0"),
                    ("IFMarker", "No"),
                    ("X-com.example.key", "1"),
                ],
            ),
        ),
        seed(
            "text",
            "target-answers",
            t(
                1 | 1 << 1,
                &[
                    ("HeaderDigest", "None"),
                    ("DataDigest", "None"),
                    ("InitialR2T", "Yes"),
                    ("ImmediateData", "Yes"),
                    ("MaxRecvDataSegmentLength", "65536"),
                    ("MaxBurstLength", "262144"),
                    ("FirstBurstLength", "65536"),
                    ("TargetPortalGroupTag", "1"),
                    ("TargetAlias", "disk"),
                ],
            ),
        ),
        seed(
            "text",
            "full-feature",
            t(
                2 << 1,
                &[
                    ("SendTargets", "All"),
                    ("MaxRecvDataSegmentLength", "16384"),
                ],
            ),
        ),
        seed(
            "text",
            "discovery",
            t(
                1 << 1 | 8,
                &[
                    ("SessionType", "Discovery"),
                    ("HeaderDigest", "None"),
                    ("MaxRecvDataSegmentLength", "32768"),
                    ("InitialR2T", "No"),
                ],
            ),
        ),
    ]
}

/// CDBs that cover the opcode table: (LUN selector, CDB, Data-Out).
#[allow(clippy::too_many_lines)] // a table: one line per CDB
fn cdbs() -> Vec<(u8, Vec<u8>, Vec<u8>)> {
    let mut v: Vec<(u8, Vec<u8>, Vec<u8>)> = Vec::new();
    let mut add = |lun: u8, cdb: &[u8], data: &[u8]| v.push((lun, cdb.to_vec(), data.to_vec()));
    add(0, &[opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0], &[]); // TEST UNIT READY
    add(0, &[opcode::REQUEST_SENSE, 0, 0, 0, 252, 0], &[]); // REQUEST SENSE
    add(0, &[opcode::INQUIRY, 0, 0, 0, 255, 0], &[]); // INQUIRY
    for page in [0x00, 0x80, 0x83, 0x86, 0xb0, 0xb1, 0xb2] {
        add(1, &[opcode::INQUIRY, 1, page, 0, 255, 0], &[]);
    }
    add(2, &[opcode::INQUIRY, 0, 0, 0, 96, 0], &[]); // INQUIRY, no LU
    add(
        0,
        &[opcode::REPORT_LUNS, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
        &[],
    ); // REPORT LUNS
    add(
        0,
        &[opcode::READ_CAPACITY_10, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        &[],
    ); // READ CAPACITY(10)
    add(
        1,
        &[
            opcode::SERVICE_ACTION_IN_16,
            service_action::READ_CAPACITY_16,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            32,
            0,
            0,
        ],
        &[],
    ); // (16)
    add(0, &[opcode::MODE_SENSE_6, 0, 0x3f, 0, 255, 0], &[]); // MODE SENSE(6), all pages
    add(
        1,
        &[opcode::MODE_SENSE_10, 0, 0x3f, 0, 0, 0, 0, 0x10, 0, 0],
        &[],
    ); // MODE SENSE(10)
       // MODE SELECT(6): caching page with WCE off.
    let caching = [
        0, 0, 0, 0, 0x08, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    add(
        0,
        &[opcode::MODE_SELECT_6, 0x10, 0, 0, caching.len() as u8, 0],
        &caching,
    );
    add(0, &rw10(opcode::WRITE_10, 0, 2)[..10], &[0x5a; 1024]); // WRITE(10)
    add(0, &rw10(opcode::READ_10, 0, 2)[..10], &[]); // READ(10)
    add(0, &[opcode::WRITE_6, 0, 0, 4, 1, 0], &[0x11; 512]); // WRITE(6)
    add(0, &[opcode::READ_6, 0, 0, 4, 1, 0], &[]); // READ(6)
    add(
        1,
        &[
            opcode::WRITE_16,
            0x08,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            3,
            0,
            0,
            0,
            1,
            0,
            0,
        ],
        &[0x22; 4096],
    ); // WRITE(16) FUA
    add(
        1,
        &[opcode::READ_16, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0],
        &[],
    ); // READ(16)
    add(
        0,
        &[opcode::WRITE_12, 0, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0],
        &[0x33; 512],
    ); // WRITE(12)
    add(0, &[opcode::READ_12, 0, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0], &[]); // READ(12)
    add(0, &[opcode::VERIFY_10, 0, 0, 0, 0, 0, 0, 0, 4, 0], &[]); // VERIFY(10)
    add(
        0,
        &[opcode::WRITE_AND_VERIFY_10, 0x02, 0, 0, 0, 0, 0, 0, 1, 0],
        &[0x5a; 512],
    ); // WRITE AND VERIFY
    add(
        0,
        &[opcode::SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        &[],
    ); // SYNCHRONIZE CACHE(10)
    add(0, &[opcode::PRE_FETCH_10, 0, 0, 0, 0, 0, 0, 0, 8, 0], &[]); // PRE-FETCH(10)
    add(
        0,
        &[opcode::WRITE_SAME_10, 0x08, 0, 0, 0, 16, 0, 0, 16, 0],
        &[0; 512],
    ); // WRITE SAME(10) UNMAP
    add(
        0,
        &[
            opcode::WRITE_SAME_16,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            64,
            0,
            0,
            0,
            8,
            0,
            0,
        ],
        &[0x44; 512],
    ); // WRITE SAME(16)
    let unmap = [
        0, 22, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0, 0, 8, 0, 0, 0, 0,
    ];
    add(
        0,
        &[opcode::UNMAP, 0, 0, 0, 0, 0, 0, 0, unmap.len() as u8, 0],
        &unmap,
    ); // UNMAP
    add(
        0,
        &[
            opcode::SERVICE_ACTION_IN_16,
            service_action::GET_LBA_STATUS,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            64,
            0,
            0,
        ],
        &[],
    ); // GET LBA STATUS
    let mut caw = vec![0x5a; 512];
    caw.extend([0x66; 512]);
    add(
        0,
        &[
            opcode::COMPARE_AND_WRITE,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            0,
            0,
        ],
        &caw,
    ); // COMPARE AND WRITE
    add(
        0,
        &[
            opcode::MAINTENANCE_IN,
            service_action::REPORT_SUPPORTED_OPERATION_CODES,
            0,
            0,
            0,
            0,
            0,
            0,
            0x10,
            0,
            0,
            0,
        ],
        &[],
    ); // REPORT SUPPORTED OPERATION CODES
    add(0, &[opcode::START_STOP_UNIT, 0, 0, 0, 1, 0], &[]); // START STOP UNIT
    add(
        0,
        &[opcode::PREVENT_ALLOW_MEDIUM_REMOVAL, 0, 0, 0, 1, 0],
        &[],
    ); // PREVENT ALLOW MEDIUM REMOVAL
    add(0, &[opcode::RESERVE_6, 0, 0, 0, 0, 0], &[]); // RESERVE(6)
    add(4, &[opcode::READ_10, 0, 0, 0, 0, 0, 0, 0, 1, 0], &[]); // READ from the other nexus
    add(0, &[opcode::RELEASE_6, 0, 0, 0, 0, 0], &[]); // RELEASE(6)
    let key = 0x1234u64.to_be_bytes();
    let register = [[0u8; 8], key, [0u8; 8]].concat();
    add(
        0,
        &[
            opcode::PERSISTENT_RESERVE_OUT,
            service_action::REGISTER,
            0,
            0,
            0,
            0,
            0,
            0,
            24,
            0,
        ],
        &register,
    ); // PR OUT REGISTER
    let reserve = [key, [0u8; 8], [0u8; 8]].concat();
    add(
        0,
        &[
            opcode::PERSISTENT_RESERVE_OUT,
            service_action::RESERVE,
            0x05,
            0,
            0,
            0,
            0,
            0,
            24,
            0,
        ],
        &reserve,
    ); // RESERVE
    add(
        0,
        &[
            opcode::PERSISTENT_RESERVE_IN,
            service_action::READ_KEYS,
            0,
            0,
            0,
            0,
            0,
            0x10,
            0,
            0,
        ],
        &[],
    ); // PR IN READ KEYS
    add(
        0,
        &[
            opcode::PERSISTENT_RESERVE_IN,
            service_action::READ_RESERVATION,
            0,
            0,
            0,
            0,
            0,
            0x10,
            0,
            0,
        ],
        &[],
    ); // READ RESERVATION
    add(4, &[opcode::WRITE_10, 0, 0, 0, 0, 0, 0, 0, 1, 0], &[0; 512]); // conflict
    add(
        0,
        &[
            opcode::SANITIZE,
            service_action::SANITIZE_OVERWRITE,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ],
        &[],
    ); // SANITIZE OVERWRITE
    add(
        0,
        &[opcode::LOG_SENSE, 0, 0x40, 0, 0, 0, 0, 0, 0xff, 0],
        &[],
    ); // LOG SENSE
    add(
        0,
        &[
            opcode::THIRD_PARTY_COPY_IN,
            service_action::RECEIVE_COPY_OPERATING_PARAMETERS,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0x60,
            0,
            0,
        ],
        &[],
    ); // RECEIVE COPY OPERATING PARAMETERS
    add(0, &[0x7f, 0, 0, 0, 0, 0, 0, 0x18, 0, 0x0b], &[]); // variable length
                                                           // REPORT TARGET PORT GROUPS, both formats; SET TARGET PORT GROUPS
                                                           // (group 1 standby, group 2 active/optimized), then a read through
                                                           // the standby port (ALUA settings only; invalid opcode otherwise).
    for format in [0x00, 0x20] {
        let rtpg = [
            opcode::MAINTENANCE_IN,
            format | 0x0a,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            0,
            0,
            0,
        ];
        add(1, &rtpg, &[]);
    }
    add(
        1,
        &[opcode::MAINTENANCE_OUT, 0x0a, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0],
        &[0, 0, 0, 0, 0x2, 0, 0, 1, 0x0, 0, 0, 2],
    );
    add(1, &rw10(opcode::READ_10, 0, 1), &[]);
    add(0, &[0xff; 16], &[]);
    v
}

fn cdb_seeds() -> Vec<Seed> {
    let build = |settings: u8| {
        let mut w = RecordWriter::new();
        for (lun, cdb, data) in cdbs() {
            let mut payload = vec![cdb.len() as u8];
            payload.extend(&cdb);
            payload.extend(&data);
            w.push(lun, &payload);
        }
        // A LU reset, a nexus reset and a nexus that comes back.
        w.push(0xe0, &[]).push(0xec, &[]).push(0xf0, &[]);
        w.push(0, &[6, opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0]);
        let mut v = vec![settings];
        v.extend(w.finish());
        v
    };
    vec![
        seed("cdb", "command-tour", build(0)),
        seed("cdb", "command-tour-thin-sanitize", build(1 | 4)),
        seed("cdb", "command-tour-write-protected", build(2)),
        seed("cdb", "command-tour-alua", build(8)),
    ]
}

/// A login of ironlun's initiator against the login harness.
fn recorded_login(settings: WorldSettings, cfg: LoginConfig) -> Vec<u8> {
    let mut w = RecordWriter::new();
    let mut target = LoginDriver::new(settings);
    let mut ini = InitiatorLogin::new(cfg, [0x3c; RANDOM_BYTES]);
    let mut req = ini.start();
    for _ in 0..16 {
        let bytes = frame(&req, Digests::default());
        w.push(0, &bytes);
        let mut buf = BytesMut::from(&bytes[..]);
        let Ok(Some(f)) = FrameDecoder::new(8192).decode(&mut buf) else {
            break;
        };
        let (resp, phase) = target.handle(&f);
        let mut back = BytesMut::from(&frame(&resp, Digests::default())[..]);
        let Ok(Some(r)) = FrameDecoder::new(8192).decode(&mut back) else {
            break;
        };
        match (ini.handle_frame(&r), phase) {
            (Ok(LoginProgress::Send(next)), Phase::Continue) => req = next,
            _ => break,
        }
    }
    let mut v = vec![settings.to_byte()];
    v.extend(w.finish());
    v
}

fn chap(settings: u8) -> WorldSettings {
    WorldSettings::from_byte(settings)
}

fn with_auth(mut cfg: LoginConfig, mutual: bool) -> LoginConfig {
    cfg.auth = Some(initiator_auth(mutual));
    cfg
}

fn digest_offers() -> Offers {
    Offers {
        header_digest: vec![DigestKind::Crc32c],
        data_digest: vec![DigestKind::Crc32c],
        ..Offers::default()
    }
}

fn login_seeds() -> Vec<Seed> {
    let normal = || LoginConfig::normal(INITIATOR, TARGET);
    let discovery = || LoginConfig::discovery(INITIATOR);
    let mut digests = normal();
    digests.offers = digest_offers();
    vec![
        seed("login", "normal", recorded_login(chap(0), normal())),
        seed("login", "normal-digests", recorded_login(chap(0), digests)),
        seed(
            "login",
            "chap",
            recorded_login(chap(1), with_auth(normal(), false)),
        ),
        seed(
            "login",
            "mutual-chap",
            recorded_login(chap(1 | 2), with_auth(normal(), true)),
        ),
        seed("login", "discovery", recorded_login(chap(0), discovery())),
        seed(
            "login",
            "discovery-mutual-chap",
            recorded_login(chap(2 | 4), with_auth(discovery(), true)),
        ),
    ]
}

/// ironlun's initiator against the session harness, recorded.
struct Recorder {
    h: SessionHarness,
    w: RecordWriter,
    settings: u8,
    rx: BytesMut,
    decoder: FrameDecoder,
    digests: Digests,
    ini: Option<InitiatorSession<u32>>,
    now: Instant,
    next_token: u32,
}

impl Recorder {
    fn new(settings: u8) -> Self {
        let mut h = SessionHarness::new(settings);
        h.sent().keep();
        Recorder {
            h,
            w: RecordWriter::new(),
            settings,
            rx: BytesMut::new(),
            decoder: FrameDecoder::new(1 << 24),
            digests: Digests::default(),
            ini: None,
            now: Instant::now(),
            next_token: 0,
        }
    }

    /// A step that is not bytes on the wire (see [`crate::session`]).
    fn event(&mut self, tag: u8, payload: &[u8]) {
        self.w.push(tag, payload);
        self.h.step(tag, payload);
    }

    fn wire(&mut self, p: &OutPdu) {
        let bytes = frame(p, self.digests);
        self.w.push(0, &bytes);
        self.h.step(0, &bytes);
    }

    fn received(&mut self) -> Vec<Frame> {
        self.rx.extend_from_slice(&self.h.sent().take());
        let mut out = Vec::new();
        while let Ok(Some(f)) = self.decoder.decode(&mut self.rx) {
            out.push(f);
        }
        out
    }

    fn login(&mut self, cfg: LoginConfig) -> bool {
        let mut ini = InitiatorLogin::new(cfg, [0x3c; RANDOM_BYTES]);
        let mut req = ini.start();
        for _ in 0..16 {
            self.wire(&req);
            let mut next = None;
            for f in self.received() {
                match ini.handle_frame(&f) {
                    Ok(LoginProgress::Send(n)) => next = Some(n),
                    Ok(LoginProgress::Done(outcome)) => {
                        self.start_session(&outcome);
                        return true;
                    }
                    Err(_) => return false,
                }
            }
            match next {
                Some(n) => req = n,
                None => return false,
            }
        }
        false
    }

    fn start_session(&mut self, outcome: &LoginOutcome) {
        self.digests = Digests {
            header: outcome.conn.header_digest,
            data: outcome.conn.data_digest,
        };
        self.decoder.digests = self.digests;
        let limits = SessionLimits {
            nop_interval: None,
            unit_attention_retries: 0,
            ..SessionLimits::default()
        };
        self.ini = Some(InitiatorSession::new(outcome, limits, self.now));
    }

    fn token(&mut self) -> u32 {
        self.next_token += 1;
        self.next_token
    }

    /// Moves PDUs both ways until neither side has anything to say.
    fn pump(&mut self) {
        for _ in 0..10_000 {
            let mut moved = false;
            let out: Vec<OutPdu> = match &mut self.ini {
                Some(ini) => std::iter::from_fn(|| ini.poll_transmit()).collect(),
                None => return,
            };
            for p in &out {
                moved = true;
                self.wire(p);
            }
            for f in self.received() {
                moved = true;
                if let Some(ini) = &mut self.ini {
                    let _ = ini.handle_frame(f, self.now);
                }
            }
            if let Some(ini) = &mut self.ini {
                while ini.poll_completion().is_some() {}
                while ini.poll_event().is_some() {}
            }
            if !moved || self.h.is_closed() {
                return;
            }
        }
    }

    fn scsi(&mut self, lun: u16, cdb: [u8; 16], read_len: u32, write: Vec<u8>) -> u32 {
        let token = self.token();
        let req = ScsiRequest {
            lun: Lun::from_index(lun),
            cdb,
            read_len,
            write: Bytes::from(write),
            attr: ATTR_SIMPLE,
            discard_data: false,
        };
        let itt = self
            .ini
            .as_mut()
            .and_then(|ini| ini.submit(req, token).ok())
            .unwrap_or(0);
        self.pump();
        itt
    }

    fn text(&mut self, pairs: &[(&str, &str)]) {
        let token = self.token();
        if let Some(ini) = &mut self.ini {
            let _ = ini.submit_text(pairs, token);
        }
        self.pump();
    }

    fn tmf(&mut self, function: TmfFunction, lun: u16, rtt: u32) {
        let token = self.token();
        if let Some(ini) = &mut self.ini {
            let _ = ini.submit_task_mgmt(function, Lun::from_index(lun), rtt, token);
        }
        self.pump();
    }

    fn ping(&mut self) {
        let token = self.token();
        if let Some(ini) = &mut self.ini {
            let _ = ini.submit_ping(token);
        }
        self.pump();
    }

    fn logout(&mut self) {
        let token = self.token();
        if let Some(ini) = &mut self.ini {
            let _ = ini.submit_logout(LogoutReason::CLOSE_SESSION, 0, token);
        }
        self.pump();
    }

    fn finish(&self) -> Vec<u8> {
        let mut v = vec![self.settings];
        v.extend(self.w.finish());
        v
    }
}

fn cdb16(bytes: &[u8]) -> [u8; 16] {
    let mut c = [0u8; 16];
    for (d, s) in c.iter_mut().zip(bytes) {
        *d = *s;
    }
    c
}

/// The commands of a short working session.
fn some_io(r: &mut Recorder) {
    r.scsi(0, cdb16(&[opcode::TEST_UNIT_READY]), 0, Vec::new()); // TEST UNIT READY (unit attention)
    r.scsi(0, cdb16(&[opcode::INQUIRY, 0, 0, 0, 96]), 96, Vec::new()); // INQUIRY
    r.scsi(
        1,
        cdb16(&[
            opcode::SERVICE_ACTION_IN_16,
            service_action::READ_CAPACITY_16,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            32,
        ]),
        32,
        Vec::new(),
    );
    r.scsi(0, rw10(opcode::WRITE_10, 8, 8), 0, vec![0xa5; 4096]); // immediate data
    r.scsi(0, rw10(opcode::WRITE_10, 64, 192), 0, vec![0x5a; 96 << 10]); // R2Ts
    r.scsi(0, rw10(opcode::READ_10, 64, 192), 96 << 10, Vec::new()); // many Data-In
    r.scsi(1, rw10(opcode::READ_10, 0, 4), 16 << 10, Vec::new());
    r.scsi(5, cdb16(&[opcode::INQUIRY, 0, 0, 0, 36]), 36, Vec::new()); // no LU
}

fn session_seeds() -> Vec<Seed> {
    let mut seeds = Vec::new();

    // The initiator takes 16 KiB per PDU: reads come in several Data-In.
    // It offers 64 KiB of unsolicited data, so the 96 KiB write waits for
    // an R2T.
    let mut r = Recorder::new(0);
    let mut cfg = LoginConfig::normal(INITIATOR, TARGET);
    cfg.offers.max_recv_data_segment_length = 16 << 10;
    cfg.offers.first_burst_length = 64 << 10;
    if r.login(cfg) {
        some_io(&mut r);
        r.ping();
        r.tmf(TmfFunction::ABORT_TASK, 0, 0x7777);
        r.tmf(TmfFunction::LOGICAL_UNIT_RESET, 1, 0);
        r.text(&[("SendTargets", "All")]);
        r.logout();
    }
    seeds.push(seed("session", "normal-io", r.finish()));

    let mut r = Recorder::new(1 | 2);
    let mut cfg = with_auth(LoginConfig::normal(INITIATOR, TARGET), true);
    cfg.offers = digest_offers();
    cfg.offers.first_burst_length = 64 << 10;
    if r.login(cfg) {
        some_io(&mut r);
        r.logout();
    }
    seeds.push(seed("session", "mutual-chap-digests-io", r.finish()));

    // Commands held by a "blocking backend" while time passes (a NOP-In
    // ping), task management waits for them, another initiator aborts
    // some, and the target asks for a logout.
    let mut r = Recorder::new(1 << 4);
    if r.login(LoginConfig::normal(INITIATOR, TARGET)) {
        r.event(3, &[1]);
        let a = r.scsi(0, rw10(opcode::READ_10, 0, 8), 4096, Vec::new());
        r.scsi(0, rw10(opcode::WRITE_10, 0, 8), 0, vec![1; 4096]);
        r.scsi(1, rw10(opcode::READ_10, 0, 1), 4096, Vec::new());
        r.event(1, &6000u32.to_le_bytes());
        r.pump();
        r.tmf(TmfFunction::ABORT_TASK, 0, a);
        r.event(2, &[1]);
        r.pump();
        r.event(5, &[2]);
        r.event(2, &[0]);
        r.pump();
        r.event(3, &[0]);
        r.event(4, &[3]);
        r.pump();
        r.logout();
    }
    seeds.push(seed("session", "held-commands", r.finish()));

    // A small MaxRecvDataSegmentLength: the answer spans several Text
    // Responses, continued with the target transfer tag.
    let mut r = Recorder::new(0);
    let mut cfg = LoginConfig::discovery(INITIATOR);
    cfg.offers.max_recv_data_segment_length = 4096;
    if r.login(cfg) {
        r.text(&[("SendTargets", "All")]);
        r.text(&[("SendTargets", TARGET)]);
        r.logout();
    }
    seeds.push(seed("session", "discovery", r.finish()));
    seeds
}
