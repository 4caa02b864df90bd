//! The table walked: every offered key round-trips through each place
//! derived from it (field, negotiator, outcome, session or connection
//! values, the rendered summary).

use super::*;
use crate::keys::{ResultFn, Sender, Usage, KEYS};
use crate::negotiate::{Negotiator, Role, Stage};
use crate::params::SESSION_KEYS;

/// A value for `k` that differs from both ironlun's default and the RFC
/// default, inside the key's domain and the relations between keys.
fn other_value(k: &OfferKey) -> Value {
    match k.kind {
        OfferKind::Digests => Value::Text("CRC32C".into()),
        OfferKind::Bool => Value::Bool(!(k.get)(&Offers::default()).as_bool().unwrap()),
        OfferKind::U16 if k.id == KeyId::MAX_CONNECTIONS => Value::Number(1),
        OfferKind::U16 => Value::Number(7),
        // Above the default FirstBurstLength, which must not exceed it.
        OfferKind::Bytes if k.id == KeyId::MAX_BURST_LENGTH => Value::Number(2 << 20),
        OfferKind::Bytes => Value::Number(16384),
    }
}

#[test]
fn every_offered_key_round_trips_through_negotiation() {
    for k in OFFER_KEYS {
        let v = other_value(k);
        let mut offers = Offers::default();
        (k.set)(&mut offers, &v).unwrap();
        assert_eq!((k.get)(&offers), v, "{}: field", k.field);
        // MaxConnections has only the value 1; the rest differ.
        if k.id != KeyId::MAX_CONNECTIONS {
            assert_ne!(offers, Offers::default(), "{}: set", k.field);
        }
        offers.validate().unwrap();

        let mut n = Negotiator::new(Role::Target);
        n.load_offers(&offers);
        assert_eq!(n.ours(k.id), v, "{}: ours", k.field);
        let pairs = vec![(k.id.name().to_owned(), v.to_string())];
        let out = n.respond(&pairs, Stage::Operational).unwrap();
        if k.id.def().result != ResultFn::Declarative {
            assert_eq!(out, pairs, "{}: answer", k.field);
        }
        assert_eq!(n.effective(k.id), Some(v.clone()), "{}", k.field);

        if let Some(s) = SESSION_KEYS.iter().find(|s| s.id == k.id) {
            assert_eq!((s.get)(&n.session_params()), v, "{}: session", s.field);
        } else {
            let c = n.conn_params();
            let got = match k.id {
                KeyId::HEADER_DIGEST => Value::Bool(c.header_digest),
                KeyId::DATA_DIGEST => Value::Bool(c.data_digest),
                KeyId::MAX_RECV_DATA_SEGMENT_LENGTH => {
                    Value::Number(c.max_recv_data_segment_length.into())
                }
                other => panic!("{other}: neither a session nor a connection value"),
            };
            let want = match &v {
                Value::Text(t) => Value::Bool(t == "CRC32C"),
                v => v.clone(),
            };
            assert_eq!(got, want, "{}: connection", k.field);
        }
        let rendered = format!("{}={v}", k.id.name());
        assert!(n.summary().contains(&rendered), "{rendered}");
    }
}

#[test]
fn the_tables_cover_every_negotiated_key_once() {
    let mut fields: Vec<&str> = OFFER_KEYS.iter().map(|k| k.field).collect();
    let mut flags: Vec<&str> = OFFER_KEYS
        .iter()
        .filter_map(|k| k.flag)
        .map(|f| f.long)
        .collect();
    let (nf, nl) = (fields.len(), flags.len());
    fields.sort_unstable();
    fields.dedup();
    flags.sort_unstable();
    flags.dedup();
    assert_eq!((fields.len(), flags.len()), (nf, nl), "duplicates");
    // Each key ironlun negotiates has a value of ours: from the offers
    // or fixed.
    let fixed = fixed_offers();
    for (i, def) in KEYS.iter().enumerate() {
        let id = KeyId(i);
        let offered = OFFER_KEYS.iter().filter(|k| k.id == id).count();
        let fixed = fixed.iter().filter(|(f, _)| *f == id).count();
        let negotiated = def.result != ResultFn::Declarative && def.sender == Sender::Both;
        let declared = id == KeyId::MAX_RECV_DATA_SEGMENT_LENGTH;
        let expected = usize::from(negotiated || declared);
        assert_eq!(offered + fixed, expected, "{}", def.name);
        if def.scope == crate::keys::Scope::Session && def.usage == Usage::LeadingOnly {
            let in_session = SESSION_KEYS.iter().any(|s| s.id == id);
            let unused = [
                KeyId::TASK_REPORTING,
                KeyId::ISCSI_PROTOCOL_LEVEL,
                KeyId::SESSION_TYPE,
            ];
            assert!(in_session || unused.contains(&id), "{}", def.name);
        }
    }
}

#[test]
fn session_defaults_are_the_rfc_defaults() {
    let d = crate::params::SessionParams::default();
    for s in SESSION_KEYS {
        assert_eq!(Some((s.get)(&d)), s.id.def().default_value(), "{}", s.field);
    }
    assert_eq!(d.max_burst_length, 262_144);
    assert!(d.initial_r2t && d.immediate_data);
}

#[test]
fn validation_names_the_key() {
    for (field, v, e) in [
        ("max_burst_length", Value::Number(100), "MaxBurstLength"),
        ("max_connections", Value::Number(2), "MaxConnections"),
        ("default_time2wait", Value::Number(3601), "DefaultTime2Wait"),
        (
            "first_burst_length",
            Value::Number(2 << 20),
            "FirstBurstLength",
        ),
    ] {
        let mut o = Offers::default();
        o.set(field, &v).unwrap();
        let got = o.validate().unwrap_err();
        assert!(got.starts_with(e), "{got}");
    }
    let mut o = Offers::default();
    o.data_digest.clear();
    assert!(o.validate().is_err());
    assert_eq!(
        o.set("header_digest", &Value::Text("MD5".into())),
        Err("unknown digest 'MD5' (expected None or CRC32C)".into())
    );
    assert!(o
        .set("max_outstanding_r2t", &Value::Number(70_000))
        .is_err());
    assert!(o.set("no_such_key", &Value::Number(1)).is_err());
}
