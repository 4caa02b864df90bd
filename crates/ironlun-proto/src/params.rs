//! Negotiated operational values in their typed form, as the full feature
//! phase uses them (RFC 7143 §13). One side's own values before
//! negotiation are [`Offers`] (in [`crate::offers`]).

pub use crate::offers::{DigestKind, Offers};

use crate::keys::{KeyId, Value};

/// A field type of [`SessionParams`]: its value from a key's outcome
/// (numbers saturate at the field's width; the key table's domains keep
/// every outcome inside it).
pub trait KeyField: Sized + Default {
    fn from_value(v: &Value) -> Self;
    fn to_value(&self) -> Value;
}

impl KeyField for bool {
    fn from_value(v: &Value) -> bool {
        v.as_bool().unwrap_or(false)
    }
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
}

macro_rules! saturating {
    ($($ty:ty),*) => {$(
        impl KeyField for $ty {
            fn from_value(v: &Value) -> $ty {
                let n = v.as_number().unwrap_or(0);
                <$ty>::try_from(n).unwrap_or(<$ty>::MAX)
            }
            fn to_value(&self) -> Value {
                Value::Number(u64::from(*self))
            }
        }
    )*};
}
saturating!(u8, u16, u32);

/// One session-wide key and the [`SessionParams`] field it sets.
#[derive(Clone, Copy)]
pub struct SessionKey {
    pub id: KeyId,
    pub field: &'static str,
    pub set: fn(&mut SessionParams, &Value),
    pub get: fn(&SessionParams) -> Value,
}

/// Declares [`SessionParams`] and [`SESSION_KEYS`] from one list; the
/// RFC 7143 defaults come from the key table.
macro_rules! session_params {
    ($($field:ident: $ty:ty = $id:ident;)*) => {
        /// Session-wide values (RFC 7143 §13, "Scope: SW").
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct SessionParams {
            $(pub $field: $ty,)*
        }

        /// Every session-wide key a session's values come from.
        pub const SESSION_KEYS: &[SessionKey] = &[$(SessionKey {
            id: KeyId::$id,
            field: stringify!($field),
            set: |p, v| p.$field = KeyField::from_value(v),
            get: |p| p.$field.to_value(),
        },)*];

        impl SessionParams {
    /// The values `value` gives each key (`None`: zero or No), then the
    /// relations RFC 7143 states between them.
    pub fn from_values(value: impl Fn(KeyId) -> Option<Value>) -> SessionParams {
        let mut p = SessionParams::zero();
        for k in SESSION_KEYS {
            if let Some(v) = value(k.id) {
                (k.set)(&mut p, &v);
            }
        }
        // RFC 7143 §13.14: FirstBurstLength MUST NOT exceed
        // MaxBurstLength.
        p.first_burst_length = p.first_burst_length.min(p.max_burst_length);
        p.max_outstanding_r2t = p.max_outstanding_r2t.max(1);
        p.max_connections = p.max_connections.max(1);
        p
    }

            /// Every field zero or No, before the keys set them.
            fn zero() -> SessionParams {
                SessionParams { $($field: <$ty>::default(),)* }
            }
        }
    };
}

session_params! {
    initial_r2t: bool = INITIAL_R2T;
    immediate_data: bool = IMMEDIATE_DATA;
    max_burst_length: u32 = MAX_BURST_LENGTH;
    first_burst_length: u32 = FIRST_BURST_LENGTH;
    default_time2wait: u16 = DEFAULT_TIME2WAIT;
    default_time2retain: u16 = DEFAULT_TIME2RETAIN;
    max_outstanding_r2t: u16 = MAX_OUTSTANDING_R2T;
    data_pdu_in_order: bool = DATA_PDU_IN_ORDER;
    data_sequence_in_order: bool = DATA_SEQUENCE_IN_ORDER;
    error_recovery_level: u8 = ERROR_RECOVERY_LEVEL;
    max_connections: u16 = MAX_CONNECTIONS;
}

impl Default for SessionParams {
    /// The RFC 7143 defaults (the key table's).
    fn default() -> Self {
        SessionParams::from_values(|id| id.def().default_value())
    }
}

impl SessionParams {
    /// Bytes an initiator may send without an R2T for a command expecting
    /// `edtl` bytes: immediate data plus unsolicited Data-Out, together at
    /// most FirstBurstLength (RFC 7143 §4.2.5.2, §13.14).
    pub fn unsolicited_limit(&self, edtl: u32) -> u32 {
        if self.initial_r2t && !self.immediate_data {
            0
        } else {
            edtl.min(self.first_burst_length)
        }
    }
}

/// Connection values (RFC 7143 §13, "Scope: CO").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnParams {
    pub header_digest: bool,
    pub data_digest: bool,
    /// The largest data segment we accept (our declaration).
    pub max_recv_data_segment_length: u32,
    /// The largest data segment we may send (the peer's declaration).
    pub max_xmit_data_segment_length: u32,
}

impl Default for ConnParams {
    fn default() -> Self {
        ConnParams {
            header_digest: false,
            data_digest: false,
            max_recv_data_segment_length: 8192,
            max_xmit_data_segment_length: 8192,
        }
    }
}
