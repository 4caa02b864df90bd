//! The target login state machine, driven without sockets
//! (RFC 7143 §6.3, §11.12, §11.13).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use bytes::BytesMut;
use ironlun_proto::login::LoginStatus;
use ironlun_proto::params::Offers;
use ironlun_proto::target::login::{LoginContext, LoginStep, NewSession, TargetInfo, TargetLogin};
use ironlun_wire::text::{encode_pairs, parse_pairs};
use ironlun_wire::{
    encode_frame, Digests, Frame, FrameDecoder, LoginRequest, LoginResponse, Opcode, Pdu,
};

const TARGET: &str = "iqn.2026-11.test:tgt";

/// A PDU and its data segment as the decoder gives them to a driver.
fn frame_of(pdu: &Pdu, data: &[u8]) -> Frame {
    let mut b = BytesMut::new();
    encode_frame(&pdu.encode(), &[], data, Digests::default(), &mut b).unwrap();
    FrameDecoder::new(1 << 24).decode(&mut b).unwrap().unwrap()
}

/// The tests step the login with a request and its data, fed as the
/// frame a driver would hand it.
trait Feed {
    fn feed(&mut self, req: &LoginRequest, data: &[u8], ctx: &mut dyn LoginContext) -> LoginStep;
}

impl Feed for TargetLogin {
    fn feed(&mut self, req: &LoginRequest, data: &[u8], ctx: &mut dyn LoginContext) -> LoginStep {
        self.handle_frame(&frame_of(&Pdu::LoginRequest(req.clone()), data), ctx)
    }
}

struct Ctx {
    sessions: Vec<NewSession>,
    refuse: Option<LoginStatus>,
    offers: Offers,
}

impl Ctx {
    fn new() -> Self {
        Ctx {
            sessions: Vec::new(),
            refuse: None,
            offers: Offers::default(),
        }
    }
}

impl LoginContext for Ctx {
    fn find_target(&mut self, name: &str, _i: &str) -> Result<TargetInfo, LoginStatus> {
        if name.eq_ignore_ascii_case(TARGET) {
            Ok(TargetInfo {
                name: TARGET.into(),
                alias: Some("disk".into()),
                portal_group_tag: 7,
                offers: self.offers.clone(),
                queue_depth: 32,
                chap: None,
            })
        } else {
            Err(LoginStatus::NOT_FOUND)
        }
    }

    fn discovery_offers(&self) -> Result<Offers, LoginStatus> {
        Ok(Offers::default())
    }

    fn discovery_chap(&self) -> Option<ironlun_proto::chap::ChapPolicy> {
        None
    }

    fn random(&mut self, buf: &mut [u8]) -> Result<(), LoginStatus> {
        buf.fill(0x5a);
        Ok(())
    }

    fn create_session(&mut self, s: &NewSession) -> Result<u16, LoginStatus> {
        if let Some(st) = self.refuse {
            return Err(st);
        }
        self.sessions.push(s.clone());
        Ok(0x1234)
    }
}

fn req(csg: u8, nsg: u8, transit: bool) -> LoginRequest {
    LoginRequest {
        transit,
        cont: false,
        csg,
        nsg,
        version_max: 0,
        version_min: 0,
        isid: [0x80, 1, 2, 3, 4, 5],
        tsih: 0,
        itt: 0x11,
        cid: 0,
        cmd_sn: 100,
        exp_stat_sn: 0,
    }
}

fn text(pairs: &[(&str, &str)]) -> Vec<u8> {
    encode_pairs(pairs.iter().copied())
}

fn first_pairs() -> Vec<(&'static str, &'static str)> {
    vec![
        ("InitiatorName", "iqn.2026-11.test:init"),
        ("SessionType", "Normal"),
        ("TargetName", TARGET),
    ]
}

fn resp(step: &LoginStep) -> (LoginResponse, Vec<(String, String)>) {
    let out = match step {
        LoginStep::Continue(o) => o,
        LoginStep::Failed { response, .. } => response,
        LoginStep::Complete { response, .. } => response,
    };
    let Pdu::LoginResponse(r) = &out.pdu else {
        panic!("not a login response")
    };
    (
        r.clone(),
        parse_pairs(&out.data.to_bytes().unwrap()).unwrap(),
    )
}

fn status(step: &LoginStep) -> LoginStatus {
    match step {
        LoginStep::Failed { status, .. } => *status,
        _ => LoginStatus::SUCCESS,
    }
}

fn get<'a>(p: &'a [(String, String)], k: &str) -> Option<&'a str> {
    p.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

#[test]
fn libiscsi_captured_login_completes_in_one_exchange() {
    // The first PDU libiscsi sent to tgt (testdata/captures).
    let path = format!(
        "{}/../../testdata/captures/libiscsi-inq-vs-tgt.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let capture = std::fs::read_to_string(path).unwrap();
    let mut stream = Vec::new();
    for line in capture.lines().filter(|l| l.starts_with("I ")) {
        let hex = &line[2..];
        stream.extend(
            (0..hex.len())
                .step_by(2)
                .map(|k| u8::from_str_radix(&hex[k..k + 2], 16).unwrap()),
        );
    }
    let mut buf = BytesMut::from(&stream[..]);
    let frame = FrameDecoder::new(8192).decode(&mut buf).unwrap().unwrap();
    let Pdu::LoginRequest(r) = Pdu::decode(&frame.bhs).unwrap() else {
        panic!()
    };

    let mut ctx = Ctx::new();
    let mut login = TargetLogin::new(500, 8, 65536);
    let step = login.feed(&r, &frame.data, &mut ctx);
    let LoginStep::Complete { response, result } = &step else {
        panic!("expected completion, got {step:?}")
    };
    let (h, answers) = resp(&step);
    assert!(h.transit);
    assert_eq!((h.csg, h.nsg), (1, 3));
    assert_eq!(h.tsih, 0x1234);
    assert_eq!(h.stat_sn, 500);
    assert_eq!(h.exp_cmd_sn, r.cmd_sn);
    assert_eq!(
        h.max_cmd_sn,
        r.cmd_sn.wrapping_add(31),
        "queue depth 32 of the target"
    );
    assert_eq!((h.status.class(), h.status.detail()), (0, 0));
    assert_eq!(response.pdu.opcode(), Opcode::LOGIN_RESPONSE);
    // RFC 7143 §13.9 and §13.12: TPGT in the first response, our receive
    // limit declared.
    assert_eq!(get(&answers, "TargetPortalGroupTag"), Some("7"));
    assert_eq!(get(&answers, "MaxRecvDataSegmentLength"), Some("262144"));
    assert_eq!(get(&answers, "TargetAlias"), Some("disk"));
    assert_eq!(get(&answers, "HeaderDigest"), Some("None"));
    assert_eq!(get(&answers, "IFMarker"), Some("No"));
    assert_eq!(get(&answers, "InitialR2T"), Some("No"));
    // Every key the initiator offered got an answer, except declarations.
    let offered = parse_pairs(&frame.data).unwrap();
    for (k, _) in &offered {
        let declarative = matches!(
            k.as_str(),
            "InitiatorName" | "InitiatorAlias" | "TargetName" | "SessionType"
        );
        assert_eq!(get(&answers, k).is_some(), !declarative, "answer for {k}");
    }
    assert_eq!(result.tsih, 0x1234);
    assert_eq!(result.next_stat_sn, 501);
    assert_eq!(result.exp_cmd_sn, r.cmd_sn);
    assert_eq!(ctx.sessions.len(), 1);
    assert_eq!(ctx.sessions[0].target_name.as_deref(), Some(TARGET));
}

#[test]
fn security_then_operational_then_full_feature() {
    let mut ctx = Ctx::new();
    let mut login = TargetLogin::new(1, 8, 65536);
    let mut p = first_pairs();
    p.push(("AuthMethod", "CHAP,None"));
    let s = login.feed(&req(0, 1, true), &text(&p), &mut ctx);
    let (h, a) = resp(&s);
    assert!(matches!(s, LoginStep::Continue(_)));
    assert!(h.transit);
    assert_eq!((h.csg, h.nsg), (0, 1));
    assert_eq!(h.tsih, 0, "TSIH only in the final response");
    assert_eq!(get(&a, "AuthMethod"), Some("None"));
    assert_eq!(get(&a, "TargetPortalGroupTag"), Some("7"));
    // Operational keys are not declared during the security stage.
    assert_eq!(get(&a, "MaxRecvDataSegmentLength"), None);

    // Operational stage without transit: answers, T=0.
    let s = login.feed(
        &req(1, 3, false),
        &text(&[("MaxBurstLength", "65536")]),
        &mut ctx,
    );
    let (h, a) = resp(&s);
    assert!(!h.transit);
    assert_eq!(h.csg, 1);
    assert_eq!(get(&a, "MaxBurstLength"), Some("65536"));
    assert_eq!(get(&a, "MaxRecvDataSegmentLength"), Some("262144"));
    assert_eq!(h.stat_sn, 2, "StatSN advances per login response");

    // Every LO key offered now, so no target proposals are needed.
    let rest = [
        ("InitialR2T", "No"),
        ("ImmediateData", "Yes"),
        ("FirstBurstLength", "65536"),
        ("MaxOutstandingR2T", "8"),
        ("DefaultTime2Wait", "2"),
        ("DefaultTime2Retain", "20"),
    ];
    let s = login.feed(&req(1, 3, true), &text(&rest), &mut ctx);
    let LoginStep::Complete { result, .. } = &s else {
        panic!("{s:?}")
    };
    assert_eq!(result.session.max_burst_length, 65536);
    assert_eq!(result.session.max_outstanding_r2t, 8);
    assert!(!result.session.initial_r2t);
}

#[test]
fn target_proposes_keys_the_initiator_left_out() {
    let mut ctx = Ctx::new();
    let mut login = TargetLogin::new(1, 8, 65536);
    // InitialR2T=No (our default) differs from the RFC default; the
    // initiator says nothing about it and asks to finish.
    let s = login.feed(&req(1, 3, true), &text(&first_pairs()), &mut ctx);
    let (h, a) = resp(&s);
    assert!(matches!(s, LoginStep::Continue(_)));
    assert!(
        !h.transit,
        "the target holds the stage until its proposals are answered"
    );
    assert_eq!(get(&a, "InitialR2T"), Some("No"));
    assert_eq!(get(&a, "MaxOutstandingR2T"), Some("8"));
    let s = login.feed(
        &req(1, 3, true),
        &text(&[("InitialR2T", "No"), ("MaxOutstandingR2T", "4")]),
        &mut ctx,
    );
    let LoginStep::Complete { result, .. } = &s else {
        panic!("{s:?}")
    };
    assert!(!result.session.initial_r2t);
    assert_eq!(result.session.max_outstanding_r2t, 4);
    // MaxBurstLength was proposed too (1 MiB) and left unanswered: the
    // default stays.
    assert_eq!(result.session.max_burst_length, 262144);
}

#[test]
fn text_continues_across_login_pdus_in_both_directions() {
    let mut ctx = Ctx::new();
    let mut login = TargetLogin::new(1, 8, 65536);
    let all = text(&first_pairs());
    let (a, b) = all.split_at(20);
    let mut r = req(1, 3, false);
    r.cont = true;
    let s = login.feed(&r, a, &mut ctx);
    let (h, pairs) = resp(&s);
    assert!(
        pairs.is_empty() && !h.transit,
        "empty acknowledgement while C=1"
    );
    r.cont = false;
    let s = login.feed(&r, b, &mut ctx);
    let (_, pairs) = resp(&s);
    assert_eq!(get(&pairs, "TargetPortalGroupTag"), Some("7"));

    // An answer longer than 8192 bytes: many unknown keys each answered
    // NotUnderstood.
    let mut ctx = Ctx::new();
    let mut login = TargetLogin::new(1, 8, 1 << 20);
    let mut p: Vec<(String, String)> = first_pairs()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for i in 0..400 {
        p.push((format!("X-com.example.key{i:04}"), "1".into()));
    }
    let data = encode_pairs(p.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let mut r = req(1, 1, false);
    // Send it in 8 KiB pieces.
    let chunks: Vec<&[u8]> = data.chunks(8192).collect();
    let mut step = None;
    for (i, c) in chunks.iter().enumerate() {
        r.cont = i + 1 < chunks.len();
        step = Some(login.feed(&r, c, &mut ctx));
    }
    let mut collected = Vec::new();
    let mut s = step.unwrap();
    loop {
        let out = match &s {
            LoginStep::Continue(o) => o.clone(),
            other => panic!("{other:?}"),
        };
        let Pdu::LoginResponse(h) = &out.pdu else {
            panic!()
        };
        assert!(out.data.len() <= 8192);
        collected.extend_from_slice(&out.data.to_bytes().unwrap());
        if !h.cont {
            break;
        }
        assert!(!h.transit, "no transition while our text continues");
        r.cont = false;
        s = login.feed(&r, &[], &mut ctx);
    }
    let answers = parse_pairs(&collected).unwrap();
    assert_eq!(
        answers.iter().filter(|(_, v)| v == "NotUnderstood").count(),
        400
    );
}

#[test]
fn failures_carry_the_right_status() {
    type Case = (LoginRequest, Vec<(&'static str, &'static str)>, LoginStatus);
    let cases: Vec<Case> = vec![
        (
            req(0, 1, true),
            vec![("SessionType", "Normal"), ("TargetName", TARGET)],
            LoginStatus::MISSING_PARAMETER,
        ),
        (
            req(0, 1, true),
            vec![("InitiatorName", "iqn.2026-11.test:init")],
            LoginStatus::MISSING_PARAMETER,
        ),
        (
            req(0, 1, true),
            vec![
                ("InitiatorName", "iqn.2026-11.test:init"),
                ("TargetName", "iqn.2026-11.nope:x"),
            ],
            LoginStatus::NOT_FOUND,
        ),
        (
            req(0, 1, true),
            vec![
                ("InitiatorName", "iqn.2026-11.test:init"),
                ("SessionType", "Bogus"),
            ],
            LoginStatus::SESSION_TYPE_NOT_SUPPORTED,
        ),
        (
            {
                let mut r = req(0, 1, true);
                r.version_min = 2;
                r
            },
            first_pairs(),
            LoginStatus::UNSUPPORTED_VERSION,
        ),
        (req(3, 3, true), first_pairs(), LoginStatus::INITIATOR_ERROR),
        (req(1, 1, true), first_pairs(), LoginStatus::INITIATOR_ERROR),
        (
            {
                let mut r = req(0, 1, true);
                r.cont = true;
                r
            },
            first_pairs(),
            LoginStatus::INITIATOR_ERROR,
        ),
        (
            {
                let mut r = req(0, 1, true);
                r.tsih = 9;
                r
            },
            first_pairs(),
            LoginStatus::SESSION_DOES_NOT_EXIST,
        ),
        (
            req(1, 3, true),
            {
                let mut p = first_pairs();
                p.push(("AuthMethod", "None"));
                p
            },
            LoginStatus::INITIATOR_ERROR,
        ),
    ];
    for (i, (r, p, want)) in cases.into_iter().enumerate() {
        let mut ctx = Ctx::new();
        let mut login = TargetLogin::new(1, 8, 65536);
        let s = login.feed(&r, &text(&p), &mut ctx);
        assert_eq!(status(&s), want, "case {i}: {s:?}");
        let (h, _) = resp(&s);
        assert_eq!(
            (h.status.class(), h.status.detail()),
            (want.class(), want.detail()),
            "case {i}"
        );
        assert!(!h.transit);
        assert!(
            ctx.sessions.is_empty(),
            "case {i}: a failed login leaves no session"
        );
    }
}

/// Names are checked where they enter (RFC 7143 §4.2.7, RFC 3722): the
/// reservation-forging name of issue 36 and every malformed form are
/// refused with INITIATOR ERROR and an escaped reason; a good name in
/// upper case is accepted in its lower-case normal form, which is what
/// the session table and everything after it see.
#[test]
fn initiator_and_target_names_are_checked_and_normalised() {
    let forged = "iqn.2026-11.evil:i\nreserve 5 1 iqn.2026-11.victim:x,i,0x800102030405";
    let long = format!("iqn.2026-11.test:{}", "a".repeat(207));
    for bad in [
        forged,
        "iqn.2026-11.test:with space",
        "iqn.2026-11.test:tab\there",
        "iqn.2026-11.test:esc\u{1b}[31m",
        "iqn.x:y",
        "eui.0123456789abcde",
        "eui.0123456789abcdef0",
        "naa.0123456789abcdef01",
        "host1",
        long.as_str(),
    ] {
        for key in ["InitiatorName", "TargetName"] {
            let mut p = first_pairs();
            p.retain(|(k, _)| *k != key);
            p.push((key, bad));
            let mut ctx = Ctx::new();
            let mut login = TargetLogin::new(1, 8, 65536);
            let s = login.feed(&req(1, 3, true), &text(&p), &mut ctx);
            let LoginStep::Failed { status, reason, .. } = &s else {
                panic!("{key}={bad:?} accepted: {s:?}")
            };
            assert_eq!(*status, LoginStatus::INITIATOR_ERROR, "{key}={bad:?}");
            assert!(reason.starts_with(key), "{reason}");
            assert!(!reason.chars().any(char::is_control), "{reason:?}");
            assert!(ctx.sessions.is_empty());
        }
    }
    let mut p = first_pairs();
    p[0].1 = "IQN.2026-11.Test:Init";
    p[2].1 = "IQN.2026-11.TEST:TGT";
    let mut ctx = Ctx::new();
    let mut login = TargetLogin::new(1, 8, 65536);
    let s = login.feed(&req(1, 3, true), &text(&p), &mut ctx);
    assert_eq!(status(&s), LoginStatus::SUCCESS, "{s:?}");
    assert_eq!(login.initiator_name(), Some("iqn.2026-11.test:init"));
    for good in ["eui.02004567A425678D", "naa.52004567BA64678D"] {
        let mut p = first_pairs();
        p[0].1 = good;
        let mut login = TargetLogin::new(1, 8, 65536);
        let s = login.feed(&req(1, 3, true), &text(&p), &mut Ctx::new());
        assert_eq!(status(&s), LoginStatus::SUCCESS, "{good}: {s:?}");
        assert_eq!(
            login.initiator_name(),
            Some(good.to_ascii_lowercase().as_str())
        );
    }
}

/// libiscsi with credentials, against a target that needs none (issue
/// 42, as captured from iscsi-ls 1.19): the security stage ends in one
/// exchange (AuthMethod=None), and its first operational request declares
/// InitiatorName and SessionType again, with the same values. That is
/// accepted (LIO and tgt accept it too); the same keys with other values
/// are still an initiator error (RFC 7143 §6.2).
#[test]
fn identity_declared_again_with_the_same_value_is_accepted() {
    let operational = |name: &'static str, ty: &'static str| {
        vec![
            ("InitiatorName", name),
            ("SessionType", ty),
            ("HeaderDigest", "None"),
            ("DataDigest", "None"),
            ("MaxBurstLength", "262144"),
        ]
    };
    let first = [
        (
            "InitiatorName",
            "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-ls",
        ),
        ("SessionType", "Discovery"),
        ("AuthMethod", "CHAP,None"),
    ];
    let libiscsi = "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-ls";
    for (again, ty, want) in [
        (libiscsi, "Discovery", LoginStatus::SUCCESS),
        // The same name in another case is the same name.
        (
            "IQN.2007-10.com.github:sahlberg:libiscsi:iscsi-ls",
            "Discovery",
            LoginStatus::SUCCESS,
        ),
        (
            "iqn.2026-11.test:someone-else",
            "Discovery",
            LoginStatus::INITIATOR_ERROR,
        ),
        (libiscsi, "Normal", LoginStatus::INITIATOR_ERROR),
    ] {
        let mut ctx = Ctx::new();
        let mut login = TargetLogin::new(1, 8, 65536);
        let s = login.feed(&req(0, 1, true), &text(&first), &mut ctx);
        let (h, a) = resp(&s);
        assert!(h.transit, "{s:?}");
        assert_eq!(get(&a, "AuthMethod"), Some("None"));
        let s = login.feed(&req(1, 3, true), &text(&operational(again, ty)), &mut ctx);
        assert_eq!(status(&s), want, "{again} {ty}: {s:?}");
        if want == LoginStatus::SUCCESS {
            assert!(matches!(s, LoginStep::Complete { .. }), "{s:?}");
        }
    }
}

#[test]
fn repeated_keys_and_changed_isid_fail() {
    let mut ctx = Ctx::new();
    let mut login = TargetLogin::new(1, 8, 65536);
    login.feed(
        &req(1, 3, false),
        &text(&[
            ("InitiatorName", "iqn.2026-11.test:init"),
            ("TargetName", TARGET),
            ("MaxBurstLength", "4096"),
        ]),
        &mut ctx,
    );
    let s = login.feed(
        &req(1, 3, false),
        &text(&[("MaxBurstLength", "4096")]),
        &mut ctx,
    );
    assert_eq!(status(&s), LoginStatus::INITIATOR_ERROR);

    let mut login = TargetLogin::new(1, 8, 65536);
    login.feed(&req(1, 3, false), &text(&first_pairs()), &mut ctx);
    let mut r = req(1, 3, true);
    r.isid[5] = 0xee;
    assert_eq!(
        status(&login.feed(&r, &[], &mut ctx)),
        LoginStatus::INITIATOR_ERROR
    );
}

#[test]
fn unsupported_auth_method_is_rejected_and_the_default_applies() {
    // No authentication is required here: an initiator offering only an
    // unsupported method gets Reject, and AuthMethod keeps its default,
    // None (RFC 7143 §6.2.1, §12.1).
    let mut ctx = Ctx::new();
    let mut login = TargetLogin::new(1, 8, 65536);
    let mut p = first_pairs();
    p.push(("AuthMethod", "KRB5"));
    let s = login.feed(&req(0, 1, true), &text(&p), &mut ctx);
    let (h, a) = resp(&s);
    assert_eq!(get(&a, "AuthMethod"), Some("Reject"));
    assert!(h.transit);
}

#[test]
fn non_login_pdu_during_login_is_invalid_during_login() {
    let mut login = TargetLogin::new(1, 8, 65536);
    let cmd = Pdu::ScsiCommand(ironlun_wire::ScsiCommand::default());
    let s = login.handle_frame(&frame_of(&cmd, &[]), &mut Ctx::new());
    assert_eq!(status(&s), LoginStatus::INVALID_DURING_LOGIN);
}

#[test]
fn discovery_session() {
    let mut ctx = Ctx::new();
    let mut login = TargetLogin::new(1, 8, 65536);
    let p = [
        ("InitiatorName", "iqn.2026-11.test:init"),
        ("SessionType", "Discovery"),
        ("MaxBurstLength", "65536"),
        ("HeaderDigest", "None"),
    ];
    let s = login.feed(&req(1, 3, true), &text(&p), &mut ctx);
    let LoginStep::Complete { result, .. } = &s else {
        panic!("{s:?}")
    };
    let (_, a) = resp(&s);
    assert_eq!(get(&a, "MaxBurstLength"), Some("Irrelevant"));
    assert_eq!(get(&a, "TargetPortalGroupTag"), None);
    assert!(result.discovery);
    assert!(ctx.sessions[0].discovery);
}

#[test]
fn context_refusal_is_reported() {
    let mut ctx = Ctx::new();
    ctx.refuse = Some(LoginStatus::OUT_OF_RESOURCES);
    let mut login = TargetLogin::new(1, 8, 65536);
    let mut p = first_pairs();
    p.extend([
        ("InitialR2T", "No"),
        ("MaxOutstandingR2T", "8"),
        ("MaxBurstLength", "1048576"),
        // Every key where the target's default differs from the RFC's is
        // answered here, so the target has nothing left to propose and the
        // login would complete in this exchange.
        ("FirstBurstLength", "524288"),
    ]);
    let s = login.feed(&req(1, 3, true), &text(&p), &mut ctx);
    assert_eq!(status(&s), LoginStatus::OUT_OF_RESOURCES);
}

#[test]
fn login_text_is_bounded() {
    let mut ctx = Ctx::new();
    let mut login = TargetLogin::new(1, 8, 16384);
    let mut r = req(1, 3, false);
    r.cont = true;
    let chunk = vec![b'a'; 8192];
    assert!(matches!(
        login.feed(&r, &chunk, &mut ctx),
        LoginStep::Continue(_)
    ));
    assert!(matches!(
        login.feed(&r, &chunk, &mut ctx),
        LoginStep::Continue(_)
    ));
    assert_eq!(
        status(&login.feed(&r, &chunk, &mut ctx)),
        LoginStatus::INITIATOR_ERROR
    );
}
