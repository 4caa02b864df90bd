//! Text keys: `key=value` parsing, continuation across PDUs, and the
//! negotiation of RFC 7143 §6.2 and §13 (`ironlun-wire::text`,
//! `ironlun-proto::negotiate`).
//!
//! Input: one byte of settings (role, stage, discovery, leading), one byte
//! of PDU size for the continuation check, then the text.
//!
//! Checked beyond "does not panic":
//! - parsed pairs encode back to text that parses to the same pairs;
//! - text pushed PDU by PDU with the C bit is the text, or refused exactly
//!   when it is longer than the limit;
//! - every answer is to a key the peer sent, and an answer carrying a value
//!   is a value the key's own parser accepts (we never answer something we
//!   would refuse);
//! - the values in effect afterwards keep RFC 7143's bounds
//!   (MaxRecvDataSegmentLength 512..2^24-1, FirstBurstLength at most
//!   MaxBurstLength, §13.12, §13.14).

use ironlun_proto::keys::{KeyId, IRRELEVANT, NOT_UNDERSTOOD, REJECT};
use ironlun_proto::negotiate::{Negotiator, Role, Stage};
use ironlun_proto::params::Offers;
use ironlun_wire::text::{encode_pairs, parse_pairs, TextAccumulator};
use ironlun_wire::WireError;

/// What one input exercised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextRun {
    pub pairs: usize,
    pub answers: usize,
    pub negotiation_error: bool,
}

/// The login text limit the daemon uses by default.
const TEXT_LIMIT: usize = 64 << 10;

pub fn text(data: &[u8]) -> TextRun {
    let (settings, rest) = data.split_first().unwrap_or((&0, &[]));
    let (pdu_size, text) = rest.split_first().unwrap_or((&0, &[]));
    check_continuation(text, usize::from(*pdu_size) * 64 + 1);

    let Ok(pairs) = parse_pairs(text) else {
        return TextRun::default();
    };
    let again = encode_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    match parse_pairs(&again) {
        Ok(p) => assert_eq!(p, pairs, "pairs changed by a round trip"),
        Err(e) => panic!("encoded pairs do not parse: {e}"),
    }

    let role = if settings & 1 == 0 {
        Role::Target
    } else {
        Role::Initiator
    };
    let stage = match (settings >> 1) & 3 {
        0 => Stage::Security,
        1 => Stage::Operational,
        _ => Stage::FullFeature,
    };
    let mut neg = Negotiator::new(role);
    neg.load_offers(&Offers::default());
    neg.set_discovery(settings & 8 != 0);
    neg.set_leading(settings & 16 == 0);
    if matches!(role, Role::Initiator) {
        // The pairs then answer our proposals (check_answer's side).
        let _ = neg.proposals();
    }

    let mut run = TextRun {
        pairs: pairs.len(),
        ..TextRun::default()
    };
    // Twice: the second round is a peer repeating itself.
    for _ in 0..2 {
        match neg.respond(&pairs, stage) {
            Ok(answers) => {
                run.answers += answers.len();
                check_answers(&pairs, &answers);
            }
            Err(_) => {
                run.negotiation_error = true;
                break;
            }
        }
    }
    check_params(&neg);
    run
}

fn check_continuation(text: &[u8], pdu: usize) {
    let mut acc = TextAccumulator::new(TEXT_LIMIT);
    let mut chunks = text.chunks(pdu).peekable();
    let mut whole = None;
    if chunks.peek().is_none() {
        whole = acc.push(&[], false).ok().flatten();
    }
    while let Some(chunk) = chunks.next() {
        match acc.push(chunk, chunks.peek().is_some()) {
            Ok(Some(t)) => whole = Some(t),
            Ok(None) => {}
            Err(WireError::TextTooLong { .. }) => {
                assert!(text.len() > TEXT_LIMIT, "text within the limit refused");
                return;
            }
            Err(e) => panic!("unexpected error collecting text: {e}"),
        }
    }
    assert!(text.len() <= TEXT_LIMIT, "text over the limit collected");
    assert_eq!(whole.as_deref(), Some(text), "collected text differs");
    assert!(!acc.in_progress(), "text left behind after C=0");
}

fn check_answers(offered: &[(String, String)], answers: &[(String, String)]) {
    for (k, v) in answers {
        assert!(
            offered.iter().any(|(o, _)| o == k),
            "answered {k}, which was not sent"
        );
        if [REJECT, IRRELEVANT, NOT_UNDERSTOOD].contains(&v.as_str()) {
            continue;
        }
        if let Some(id) = KeyId::of(k) {
            if let Err(e) = id.def().parse(v) {
                panic!("answered {k}={v}, which our own parser refuses: {e}");
            }
        }
    }
}

fn check_params(neg: &Negotiator) {
    let s = neg.session_params();
    assert!(
        s.first_burst_length <= s.max_burst_length,
        "FirstBurstLength {} above MaxBurstLength {}",
        s.first_burst_length,
        s.max_burst_length
    );
    let c = neg.conn_params();
    for n in [
        c.max_recv_data_segment_length,
        c.max_xmit_data_segment_length,
    ] {
        assert!(
            (512..1 << 24).contains(&n),
            "MaxRecvDataSegmentLength {n} outside 512..2^24-1"
        );
    }
    let _ = neg.summary();
}
