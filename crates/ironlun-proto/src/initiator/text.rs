//! Text exchanges in full feature phase, with continuation in both
//! directions (RFC 7143 §11.10, §11.11).

use super::*;

/// Largest text response (SendTargets) we collect across continuations.
pub(super) const TEXT_LIMIT: usize = 1 << 20;

/// A Text Request that fits one PDU (RFC 7143 §11.10).
pub(super) fn text_request_pdu(h: Header, lun: Lun, request: &Bytes) -> OutPdu {
    OutPdu {
        pdu: Pdu::TextRequest(TextRequest {
            immediate: h.immediate,
            final_bit: true,
            cont: false,
            lun,
            itt: h.itt,
            ttt: RESERVED_TAG,
            cmd_sn: h.cmd_sn,
            exp_stat_sn: h.exp_stat_sn,
        }),
        data: request.clone().into(),
    }
}

impl<T> InitiatorSession<T> {
    /// Starts a text exchange (e.g. `SendTargets=All`, RFC 7143 §11.10).
    pub fn submit_text(&mut self, pairs: &[(&str, &str)], token: T) -> Result<u32, Refused<T>> {
        let request = Bytes::from(encode_pairs(pairs.iter().copied()));
        self.add(
            Body::Text {
                lun: Lun::default(),
                request,
                text: Vec::new(),
            },
            token,
            false,
        )
    }

    pub(super) fn text_response(
        &mut self,
        itt: u32,
        ttt: u32,
        final_bit: bool,
        cont: bool,
        data: Bytes,
    ) {
        let (idx, generation) = split_itt(itt);
        let cmd_sn = self.cmd_sn;
        let exp_stat_sn = self.exp_stat_sn;
        let Some(Task {
            body: Body::Text { lun, text, .. },
            sent: true,
            ..
        }) = self
            .slots
            .get_mut(usize::from(idx))
            .filter(|s| s.generation == generation)
            .and_then(|s| s.task.as_mut())
        else {
            return self.fail(format!("Text Response for unknown task 0x{itt:08x}"));
        };
        if text.len().saturating_add(data.len()) > TEXT_LIMIT {
            return self.finish(
                itt,
                Err(TaskError::Protocol(format!(
                    "text response longer than {TEXT_LIMIT} bytes"
                ))),
            );
        }
        text.extend_from_slice(&data);
        if final_bit && !cont {
            let result = parse_pairs(text)
                .map(Reply::Text)
                .map_err(|e| TaskError::Protocol(e.to_string()));
            return self.finish(itt, result);
        }
        // More to come: an empty request with the target's TTT asks for it
        // (RFC 7143 §11.10.4).
        let lun = *lun;
        self.out
            .push_back(OutPdu::new(Pdu::TextRequest(TextRequest {
                immediate: true,
                final_bit: true,
                cont: false,
                lun,
                itt,
                ttt,
                cmd_sn,
                exp_stat_sn,
            })));
    }
}
