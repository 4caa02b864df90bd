//! Decoding real traffic: libiscsi talking to tgt, captured on loopback
//! (see testdata/captures). Every PDU must decode, its text must parse,
//! and re-encoding the typed header must give back the exact bytes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use bytes::BytesMut;
use ironlun_scsi_codes::Status;
use ironlun_wire::text::parse_pairs;
use ironlun_wire::{encode_frame, Digests, Frame, FrameDecoder, LoginStatus, Opcode, Pdu};

/// The initiator and target byte streams of a capture file.
fn streams(name: &str) -> (Vec<u8>, Vec<u8>) {
    let path = format!(
        "{}/../../testdata/captures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("capture file");
    let (mut i, mut t) = (Vec::new(), Vec::new());
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (dir, hex) = line.split_once(' ').unwrap();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|k| u8::from_str_radix(&hex[k..k + 2], 16).unwrap())
            .collect();
        match dir {
            "I" => i.extend(bytes),
            "T" => t.extend(bytes),
            other => panic!("bad direction {other}"),
        }
    }
    (i, t)
}

fn frames(stream: &[u8]) -> Vec<Frame> {
    let dec = FrameDecoder::new(1 << 20);
    let mut buf = BytesMut::from(stream);
    let mut out = Vec::new();
    while let Some(f) = dec.decode(&mut buf).unwrap() {
        out.push(f);
    }
    assert!(buf.is_empty(), "trailing bytes in capture");
    out
}

/// Re-encodes a frame from its typed header and compares with the wire.
fn assert_round_trip(f: &Frame) {
    let pdu = Pdu::decode(&f.bhs).unwrap();
    let mut bhs = pdu.encode();
    bhs.set_immediate(f.bhs.immediate());
    let mut out = BytesMut::new();
    encode_frame(&bhs, &f.ahs, &f.data, Digests::default(), &mut out).unwrap();
    let mut orig = BytesMut::new();
    encode_frame(&f.bhs, &f.ahs, &f.data, Digests::default(), &mut orig).unwrap();
    assert_eq!(
        &out[..48],
        &orig[..48],
        "{:?} header differs after re-encoding",
        pdu.opcode()
    );
}

#[test]
fn libiscsi_normal_session_against_tgt() {
    let (i, t) = streams("libiscsi-inq-vs-tgt.txt");
    let req = frames(&i);
    let rsp = frames(&t);
    let ops: Vec<Opcode> = req.iter().map(|f| f.bhs.opcode()).collect();
    assert_eq!(
        ops,
        vec![
            Opcode::LOGIN_REQUEST,
            Opcode::SCSI_COMMAND,
            Opcode::SCSI_COMMAND,
            Opcode::SCSI_COMMAND,
            Opcode::SCSI_COMMAND,
            Opcode::LOGOUT_REQUEST
        ]
    );
    let rops: Vec<Opcode> = rsp.iter().map(|f| f.bhs.opcode()).collect();
    assert_eq!(
        rops,
        vec![
            Opcode::LOGIN_RESPONSE,
            Opcode::SCSI_RESPONSE,
            Opcode::SCSI_RESPONSE,
            Opcode::DATA_IN,
            Opcode::DATA_IN,
            Opcode::LOGOUT_RESPONSE
        ]
    );
    for f in req.iter().chain(rsp.iter()) {
        assert_round_trip(f);
    }

    // libiscsi starts in the operational stage and asks for full feature
    // phase at once.
    let Pdu::LoginRequest(login) = Pdu::decode(&req[0].bhs).unwrap() else {
        panic!()
    };
    assert!(login.transit && !login.cont);
    assert_eq!((login.csg, login.nsg), (1, 3));
    assert_eq!(login.tsih, 0);
    let keys = parse_pairs(&req[0].data).unwrap();
    let get = |k: &str| keys.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(get("SessionType"), Some("Normal"));
    assert_eq!(get("TargetName"), Some("iqn.2026-11.test:tgt"));
    assert!(get("InitiatorName")
        .unwrap()
        .starts_with("iqn.2007-10.com.github:sahlberg:libiscsi"));
    assert_eq!(get("HeaderDigest"), Some("None,CRC32C"));
    assert_eq!(get("IFMarker"), Some("No"));

    let Pdu::LoginResponse(lr) = Pdu::decode(&rsp[0].bhs).unwrap() else {
        panic!()
    };
    assert_eq!(lr.status, LoginStatus::SUCCESS);
    assert!(lr.transit);
    assert_ne!(lr.tsih, 0, "final login response assigns a TSIH");
    let answers = parse_pairs(&rsp[0].data).unwrap();
    assert!(answers.iter().any(|(k, _)| k == "TargetPortalGroupTag"));

    // The first TEST UNIT READY meets tgt's power-on unit attention: a
    // SCSI Response with CHECK CONDITION and fixed-format sense behind a
    // 2-byte SenseLength.
    let Pdu::ScsiResponse(r) = Pdu::decode(&rsp[1].bhs).unwrap() else {
        panic!()
    };
    assert_eq!(r.status, Status::CHECK_CONDITION);
    let sense_len = u16::from_be_bytes([rsp[1].data[0], rsp[1].data[1]]) as usize;
    assert_eq!(rsp[1].data.len(), 2 + sense_len);
    assert_eq!(rsp[1].data[2 + 2] & 0x0f, 0x06, "UNIT ATTENTION");

    // INQUIRY answers come as one Data-In with phase-collapsed status.
    let Pdu::DataIn(d) = Pdu::decode(&rsp[3].bhs).unwrap() else {
        panic!()
    };
    assert!(d.final_bit);
    assert_eq!(d.status, Some(Status::GOOD));
    assert_eq!(d.data_sn, 0);
    // StatSN advances by one per status.
    let stat_sns: Vec<u32> = rsp
        .iter()
        .filter_map(|f| match Pdu::decode(&f.bhs).unwrap() {
            Pdu::ScsiResponse(r) => Some(r.stat_sn),
            Pdu::DataIn(d) if d.status.is_some() => Some(d.stat_sn),
            Pdu::LogoutResponse(l) => Some(l.stat_sn),
            _ => None,
        })
        .collect();
    assert!(stat_sns.windows(2).all(|w| w[1] == w[0].wrapping_add(1)));
}

#[test]
fn libiscsi_discovery_session_against_tgt() {
    let (i, t) = streams("libiscsi-ls-vs-tgt.txt");
    let req = frames(&i);
    let rsp = frames(&t);
    for f in req.iter().chain(rsp.iter()) {
        assert_round_trip(f);
    }
    let keys = parse_pairs(&req[0].data).unwrap();
    assert!(keys.contains(&("SessionType".into(), "Discovery".into())));
    let Pdu::TextRequest(tr) = Pdu::decode(&req[1].bhs).unwrap() else {
        panic!()
    };
    assert!(tr.final_bit);
    assert_eq!(tr.ttt, ironlun_wire::RESERVED_TAG);
    assert_eq!(
        parse_pairs(&req[1].data).unwrap(),
        vec![("SendTargets".into(), "All".into())]
    );
    let answer = parse_pairs(&rsp[1].data).unwrap();
    assert_eq!(
        answer[0],
        ("TargetName".into(), "iqn.2026-11.test:tgt".into())
    );
    assert_eq!(
        answer[1],
        ("TargetAddress".into(), "127.0.0.1:3261,1".into())
    );
}
