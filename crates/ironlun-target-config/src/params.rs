//! Negotiation offers and queue depth in the file: `[defaults]` merged
//! with each `[target.params]`, then checked against RFC 7143.

use std::collections::BTreeMap;
use std::fmt;

use ironlun_proto::keys::Value;
use ironlun_proto::offers::{OfferKind, Offers, OFFER_KEYS};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::{check_queue_depth, ConfigError, DEFAULT_QUEUE_DEPTH};

/// The file's keys: `queue_depth`, then one per offered key (its
/// `Offers` field name, from the table). Evaluated at compile time, where
/// an index out of range is a build error, not a panic.
#[allow(clippy::indexing_slicing)]
const FIELDS: [&str; OFFER_KEYS.len() + 1] = {
    let mut names = ["queue_depth"; OFFER_KEYS.len() + 1];
    let mut i = 0;
    while i < OFFER_KEYS.len() {
        names[i + 1] = OFFER_KEYS[i].field;
        i += 1;
    }
    names
};

/// Negotiation offers and queue depth; every key optional.
#[derive(Default, Clone)]
pub(super) struct FileParams {
    queue_depth: Option<u32>,
    /// The values the file gives, by row of [`OFFER_KEYS`].
    offers: BTreeMap<usize, Value>,
}

impl<'de> Deserialize<'de> for FileParams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<FileParams, D::Error> {
        d.deserialize_map(FileParamsVisitor)
    }
}

struct FileParamsVisitor;

impl<'de> Visitor<'de> for FileParamsVisitor {
    type Value = FileParams;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of negotiation keys")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FileParams, A::Error> {
        let mut p = FileParams::default();
        while let Some(key) = map.next_key::<String>()? {
            if key == "queue_depth" {
                p.queue_depth = Some(map.next_value()?);
                continue;
            }
            let Some(row) = OFFER_KEYS.iter().position(|k| k.field == key) else {
                return Err(de::Error::unknown_field(&key, &FIELDS));
            };
            let kind = OFFER_KEYS.get(row).map(|k| k.kind);
            let v = match kind {
                Some(OfferKind::Digests) => Value::Text(map.next_value::<Vec<String>>()?.join(",")),
                Some(OfferKind::Bool) => Value::Bool(map.next_value()?),
                Some(OfferKind::U16) => Value::Number(map.next_value::<u16>()?.into()),
                Some(OfferKind::Bytes) | None => Value::Number(map.next_value::<u32>()?.into()),
            };
            p.offers.insert(row, v);
        }
        Ok(p)
    }
}

impl FileParams {
    /// Later values (per target) override earlier ones (defaults).
    pub(super) fn merged(&self, over: &FileParams) -> FileParams {
        let mut offers = self.offers.clone();
        offers.extend(over.offers.clone());
        FileParams {
            queue_depth: over.queue_depth.or(self.queue_depth),
            offers,
        }
    }

    /// The offers (defaults where a key is absent) and queue depth,
    /// checked; errors name the key, or the RFC 7143 key for relations.
    pub(super) fn offers(&self) -> Result<(Offers, u32), ConfigError> {
        let mut o = Offers::default();
        for (k, v) in self
            .offers
            .iter()
            .filter_map(|(i, v)| Some((OFFER_KEYS.get(*i)?, v)))
        {
            (k.set)(&mut o, v).map_err(|e| ConfigError::invalid(k.field, e))?;
        }
        o.validate()
            .map_err(|problem| ConfigError::Offers { problem })?;
        let qd = self.queue_depth.unwrap_or(DEFAULT_QUEUE_DEPTH);
        check_queue_depth("queue_depth", qd)?;
        Ok((o, qd))
    }
}
