//! Argument groups that several commands share: the initiator's flags
//! (name, offers, socket options, CHAP), a LUN named by URL, and the
//! emulated link. Each turns flags into the crates' own types and names
//! the flag in its errors; none does the work itself.

mod initiator;
mod link;
mod offers;
mod url;

pub use initiator::InitiatorArgs;
pub use link::{relay_to, LinkArgs};
pub use url::{parse_url, UrlArgs};
