//! # ironlun-scsi-codes: SCSI's numbers, by name
//!
//! **Owns:** the codes that a SCSI device server and an application
//! client both speak, defined once for the target's device
//! (ironlun-scsi), the protocol core (ironlun-proto), the initiator and
//! the tools above it:
//!
//! * [`opcode`] and [`service_action`]: operation codes and the service
//!   actions of the opcodes that carry one (SPC-4 Annex D.3, SBC-4);
//! * [`Status`]: SCSI status (SAM-5 §5.3.1);
//! * [`SenseKey`], [`Asc`] (an ASC/ASCQ pair) and [`SenseCode`], the
//!   three together (SPC-4 §4.5.6, Annex D.2);
//! * [`SenseData`]: what an initiator reads out of sense data in fixed
//!   or descriptor format (SPC-5 §4.4.2, §4.4.3).
//!
//! Each code type is an open newtype: any byte is a value, the named
//! constants are the ones the standards define, and `Display` gives the
//! standard's name (or the number, for one without a name), for logs.
//!
//! **Must not know:** how a command is carried out or what its CDB holds
//! beyond byte 0, how sense data is built (ironlun-scsi's `Sense`
//! encodes it), iSCSI, I/O. It has no dependencies and is `no_std`.

#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

#[cfg(test)]
extern crate std;

pub mod opcode;
mod sense;
pub mod service_action;
mod status;

pub use sense::{Asc, SenseCode, SenseData, SenseKey};
pub use status::Status;

/// Defines a code newtype, its named constants, `name`, and `Display`
/// (the name, or the `unknown` format of its numbers) and `Debug`
/// (`Type(NAME)` or `Type(0x..)`), from one list, so that a constant and
/// its name cannot drift apart.
macro_rules! named_codes {
    (
        $(#[$meta:meta])*
        pub struct $ty:ident($(pub $inner:ty),+);
        unknown: $unknown:literal, $($idx:tt),+;
        $($(#[$doc:meta])* $name:ident = $value:expr, $text:literal;)*
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $ty($(pub $inner),+);

        impl $ty {
            $($(#[$doc])* pub const $name: $ty = $value;)*

            /// The standard's name of a defined code.
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $(Self::$name => Some($text),)*
                    _ => None,
                }
            }
        }

        impl core::fmt::Display for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, $unknown, $(self.$idx),+),
                }
            }
        }

        impl core::fmt::Debug for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{}({n})", stringify!($ty)),
                    None => f
                        .debug_tuple(stringify!($ty))
                        $(.field(&format_args!("0x{:02x}", self.$idx)))+
                        .finish(),
                }
            }
        }
    };
}
pub(crate) use named_codes;
