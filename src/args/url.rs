//! A LUN named by an iSCSI URL, with the initiator flags to reach it.

use ironlun_initiator::url::UrlError;
use ironlun_initiator::{open_lun, IscsiUrl, Session};

use super::InitiatorArgs;
use crate::runtime::{usage, Failure};

#[derive(clap::Args)]
pub struct UrlArgs {
    /// The LUN: iscsi://[user[%password]@]host[:port]/target-iqn/lun
    pub url: String,
    #[command(flatten)]
    pub initiator: InitiatorArgs,
}

impl UrlArgs {
    /// The URL, and a session to its target with the LUN ready. A URL or
    /// flag that does not parse is a usage error; a login or LUN that
    /// fails is a failure.
    pub async fn open(&self) -> Result<(IscsiUrl, Session), Failure> {
        let url = parse_url(&self.url).map_err(usage)?;
        let opts = self.initiator.options_for(&url).map_err(usage)?;
        let s = open_lun(&url.portal(), &url.target, url.lun, &opts)
            .await
            .map_err(|e| e.to_string())?;
        Ok((url, s))
    }
}

/// `iscsi://...` as typed, or the error that says what form it takes.
pub fn parse_url(s: &str) -> Result<IscsiUrl, String> {
    s.parse().map_err(|e: UrlError| e.to_string())
}
