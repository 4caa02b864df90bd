//! Login negotiation: parsing a typical initiator's operational text and
//! answering it (`cargo bench -p ironlun-proto`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use ironlun_proto::keys::{KeyId, Value};
use ironlun_proto::negotiate::{Negotiator, Role, Stage};
use ironlun_wire::text::{encode_pairs, parse_pairs};

/// What open-iscsi offers in its operational stage.
const OFFER: &[(&str, &str)] = &[
    ("HeaderDigest", "None"),
    ("DataDigest", "None"),
    ("DefaultTime2Wait", "2"),
    ("DefaultTime2Retain", "0"),
    ("IFMarker", "No"),
    ("OFMarker", "No"),
    ("ErrorRecoveryLevel", "0"),
    ("InitialR2T", "No"),
    ("ImmediateData", "Yes"),
    ("MaxBurstLength", "16776192"),
    ("FirstBurstLength", "262144"),
    ("MaxOutstandingR2T", "1"),
    ("MaxConnections", "1"),
    ("DataPDUInOrder", "Yes"),
    ("DataSequenceInOrder", "Yes"),
    ("MaxRecvDataSegmentLength", "262144"),
];

fn target() -> Negotiator {
    let mut n = Negotiator::new(Role::Target);
    n.set_ours(KeyId::HEADER_DIGEST, Value::Text("None,CRC32C".into()));
    n.set_ours(KeyId::DATA_DIGEST, Value::Text("None,CRC32C".into()));
    n.set_ours(KeyId::MAX_BURST_LENGTH, Value::Number(1 << 20));
    n.set_ours(KeyId::MAX_RECV_DATA_SEGMENT_LENGTH, Value::Number(262_144));
    n
}

fn negotiation(c: &mut Criterion) {
    let text = encode_pairs(OFFER.iter().map(|(k, v)| (*k, *v)));
    c.bench_function("parse operational text (16 keys)", |b| {
        b.iter(|| parse_pairs(std::hint::black_box(&text)).unwrap())
    });
    let pairs = parse_pairs(&text).unwrap();
    c.bench_function("target answers 16 operational keys", |b| {
        b.iter(|| {
            let mut n = target();
            let answer = n.respond(&pairs, Stage::Operational).unwrap();
            let mut out = answer;
            out.extend(n.proposals());
            (n.session_params(), n.conn_params(), out)
        })
    });
}

criterion_group!(benches, negotiation);
criterion_main!(benches);
