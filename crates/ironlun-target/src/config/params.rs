//! Negotiation offers and queue depth in the file: `[defaults]` merged
//! with each `[target.params]`, then checked against RFC 7143.

use ironlun_proto::params::{DigestKind, Offers};
use serde::Deserialize;

use super::{check_queue_depth, ConfigError, DEFAULT_QUEUE_DEPTH};

/// Negotiation offers and queue depth; every key optional.
#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct FileParams {
    queue_depth: Option<u32>,
    header_digest: Option<Vec<String>>,
    data_digest: Option<Vec<String>>,
    max_connections: Option<u16>,
    initial_r2t: Option<bool>,
    immediate_data: Option<bool>,
    max_recv_data_segment_length: Option<u32>,
    max_burst_length: Option<u32>,
    first_burst_length: Option<u32>,
    default_time2wait: Option<u16>,
    default_time2retain: Option<u16>,
    max_outstanding_r2t: Option<u16>,
}

/// A digest list at `key`: at least one of None and CRC32C.
fn digests(key: &str, l: &[String]) -> Result<Vec<DigestKind>, ConfigError> {
    if l.is_empty() {
        return Err(ConfigError::invalid(key, "digest list is empty"));
    }
    l.iter()
        .map(|s| s.parse().map_err(|e: String| ConfigError::invalid(key, e)))
        .collect()
}

/// The value the file gives, if it gives one.
fn replace<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

impl FileParams {
    /// Later values (per target) override earlier ones (defaults).
    pub(super) fn merged(&self, over: &FileParams) -> FileParams {
        FileParams {
            queue_depth: over.queue_depth.or(self.queue_depth),
            header_digest: over
                .header_digest
                .clone()
                .or_else(|| self.header_digest.clone()),
            data_digest: over
                .data_digest
                .clone()
                .or_else(|| self.data_digest.clone()),
            max_connections: over.max_connections.or(self.max_connections),
            initial_r2t: over.initial_r2t.or(self.initial_r2t),
            immediate_data: over.immediate_data.or(self.immediate_data),
            max_recv_data_segment_length: over
                .max_recv_data_segment_length
                .or(self.max_recv_data_segment_length),
            max_burst_length: over.max_burst_length.or(self.max_burst_length),
            first_burst_length: over.first_burst_length.or(self.first_burst_length),
            default_time2wait: over.default_time2wait.or(self.default_time2wait),
            default_time2retain: over.default_time2retain.or(self.default_time2retain),
            max_outstanding_r2t: over.max_outstanding_r2t.or(self.max_outstanding_r2t),
        }
    }

    /// The offers (defaults where a key is absent) and queue depth,
    /// checked; errors name the key, or the RFC 7143 key for relations.
    pub(super) fn offers(&self) -> Result<(Offers, u32), ConfigError> {
        let mut o = Offers::default();
        if let Some(l) = &self.header_digest {
            o.header_digest = digests("header_digest", l)?;
        }
        if let Some(l) = &self.data_digest {
            o.data_digest = digests("data_digest", l)?;
        }
        replace(&mut o.max_connections, self.max_connections);
        replace(&mut o.initial_r2t, self.initial_r2t);
        replace(&mut o.immediate_data, self.immediate_data);
        replace(
            &mut o.max_recv_data_segment_length,
            self.max_recv_data_segment_length,
        );
        replace(&mut o.max_burst_length, self.max_burst_length);
        replace(&mut o.first_burst_length, self.first_burst_length);
        replace(&mut o.default_time2wait, self.default_time2wait);
        replace(&mut o.default_time2retain, self.default_time2retain);
        replace(&mut o.max_outstanding_r2t, self.max_outstanding_r2t);
        o.validate()
            .map_err(|problem| ConfigError::Offers { problem })?;
        let qd = self.queue_depth.unwrap_or(DEFAULT_QUEUE_DEPTH);
        check_queue_depth("queue_depth", qd)?;
        Ok((o, qd))
    }
}
