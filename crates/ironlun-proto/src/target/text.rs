//! Text requests: SendTargets and other keys in full feature phase (RFC
//! 7143 §11.10, §11.11, Appendix C).

use super::*;

/// Which targets SendTargets reports (RFC 7143 Appendix C).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendTargetsQuery<'a> {
    /// `SendTargets=All` in a discovery session.
    All,
    /// `SendTargets=<iSCSI name>`.
    Named(&'a str),
}

/// One target in a SendTargets answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetListing {
    pub name: String,
    /// `address:port,portal-group-tag` strings (RFC 7143 §13.8).
    pub addresses: Vec<String>,
}

/// What the connection asks of the daemon in full feature phase.
pub trait Directory: Send {
    /// Targets visible to `initiator` for the query.
    fn send_targets(&self, initiator: &str, query: SendTargetsQuery<'_>) -> Vec<TargetListing>;
}

pub(super) struct TextExchange {
    itt: u32,
    ttt: u32,
    out: TextChunker,
}

impl TargetConnection {
    pub(super) fn on_text(&mut self, t: TextRequest, data: Bytes, windowed: bool) {
        if t.ttt != RESERVED_TAG {
            // A continuation of an exchange we hold a TTT for (RFC 7143
            // §11.10.4): either more initiator text, or a request for the
            // next piece of our long answer.
            let matches = self
                .text_tx
                .as_ref()
                .is_some_and(|x| x.ttt == t.ttt && x.itt == t.itt);
            if !matches {
                self.reject_pdu(&Pdu::TextRequest(t), Violation::Text);
                self.finish_command(windowed);
                return;
            }
            if !self.text_rx.in_progress() {
                self.send_text_chunk(t, windowed);
                return;
            }
        } else {
            // A new exchange replaces any unfinished one.
            self.text_rx.reset();
        }
        self.text_tx = None;
        let text = match self.text_rx.push(&data, t.cont) {
            Ok(Some(text)) => text,
            Ok(None) => {
                // The initiator continues: acknowledge with an empty answer.
                let ttt = self.alloc_ttt();
                self.text_tx = Some(TextExchange {
                    itt: t.itt,
                    ttt,
                    out: TextChunker::default(),
                });
                self.text_response(&t, ttt, false, false, Bytes::new(), windowed);
                return;
            }
            Err(_) => {
                self.reject_pdu(&Pdu::TextRequest(t), Violation::Text);
                self.finish_command(windowed);
                return;
            }
        };
        let pairs = match parse_pairs(&text) {
            Ok(p) => p,
            Err(_) => {
                self.reject_pdu(&Pdu::TextRequest(t), Violation::Text);
                self.finish_command(windowed);
                return;
            }
        };
        let answer = self.answer_text(&pairs);
        self.text_tx = Some(TextExchange {
            itt: t.itt,
            ttt: RESERVED_TAG,
            out: TextChunker::new(answer),
        });
        self.send_text_chunk(t, windowed);
    }

    /// Answers a full-feature text request: SendTargets (RFC 7143 §13.3,
    /// Appendix C) and renegotiation of keys allowed in full feature phase.
    pub(super) fn answer_text(&mut self, pairs: &[(String, String)]) -> Vec<u8> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut others = Vec::new();
        for (k, v) in pairs {
            if k == "SendTargets" {
                let listings = match (v.as_str(), self.discovery) {
                    ("All", true) => self
                        .directory
                        .send_targets(&self.initiator_name, SendTargetsQuery::All),
                    // In a normal session "All" and the empty value report
                    // the session's own target.
                    ("All", false) | ("", false) => match &self.target_name {
                        Some(n) => self
                            .directory
                            .send_targets(&self.initiator_name, SendTargetsQuery::Named(n)),
                        None => Vec::new(),
                    },
                    ("", true) => {
                        out.push((k.clone(), "Reject".into()));
                        continue;
                    }
                    (name, discovery) => {
                        let allowed = discovery || self.target_name.as_deref() == Some(name);
                        if allowed {
                            self.directory
                                .send_targets(&self.initiator_name, SendTargetsQuery::Named(name))
                        } else {
                            Vec::new()
                        }
                    }
                };
                for l in listings {
                    out.push(("TargetName".into(), l.name));
                    for a in l.addresses {
                        out.push(("TargetAddress".into(), a));
                    }
                }
            } else {
                others.push((k.clone(), v.clone()));
            }
        }
        if !others.is_empty() {
            let mut neg = Negotiator::new(Role::Target);
            neg.set_discovery(self.discovery);
            neg.set_ours(
                crate::keys::KeyId::MAX_RECV_DATA_SEGMENT_LENGTH,
                crate::keys::Value::Number(u64::from(self.conn.max_recv_data_segment_length)),
            );
            match neg.respond(&others, Stage::FullFeature) {
                Ok(answers) => {
                    if neg.peer_offered(crate::keys::KeyId::MAX_RECV_DATA_SEGMENT_LENGTH) {
                        self.conn.max_xmit_data_segment_length =
                            neg.conn_params().max_xmit_data_segment_length;
                    }
                    out.extend(answers);
                }
                Err(_) => out.extend(others.into_iter().map(|(k, _)| (k, "Reject".into()))),
            }
        }
        encode_pairs(out.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    pub(super) fn send_text_chunk(&mut self, t: TextRequest, windowed: bool) {
        let seg = self.conn.max_xmit_data_segment_length as usize;
        let Some(mut x) = self.text_tx.take() else {
            self.finish_command(windowed);
            return;
        };
        let (chunk, more) = x.out.next_chunk(seg);
        if more {
            // Long answer: C=1, F=0 and a TTT the initiator echoes to get
            // the rest (RFC 7143 §11.11.2).
            if x.ttt == RESERVED_TAG {
                x.ttt = self.alloc_ttt();
            }
            let ttt = x.ttt;
            self.text_tx = Some(x);
            self.text_response(&t, ttt, false, true, chunk, windowed);
        } else {
            self.text_response(&t, RESERVED_TAG, true, false, chunk, windowed);
        }
    }

    pub(super) fn text_response(
        &mut self,
        t: &TextRequest,
        ttt: u32,
        final_bit: bool,
        cont: bool,
        data: Bytes,
        windowed: bool,
    ) {
        let stat_sn = self.next_stat_sn();
        self.finish_command(windowed);
        let max = self.window.max_cmd_sn();
        self.out.push_back(OutPdu {
            pdu: Pdu::TextResponse(TextResponse {
                final_bit,
                cont,
                lun: t.lun,
                itt: t.itt,
                ttt,
                stat_sn,
                exp_cmd_sn: self.window.exp_cmd_sn(),
                max_cmd_sn: max,
            }),
            data: data.into(),
        });
    }
}
