//! The flags of the operational keys an initiator offers (RFC 7143 §13),
//! made from the key table (`ironlun_proto::offers::OFFER_KEYS`): each
//! row with a flag gives one, its name, value name and help from the row,
//! its value read by the row's kind.

use clap::{Arg, ArgMatches, Command};
use ironlun_initiator::Offers;
use ironlun_proto::keys::Value;
use ironlun_proto::offers::{Flag, OfferKey, OfferKind, OFFER_KEYS};
use ironlun_units::parse_size;

/// The offer flags given, as typed.
#[derive(Clone, Debug, Default)]
pub struct OfferFlags {
    given: Vec<(&'static OfferKey, String)>,
}

/// The rows with a flag, in the order `--help` lists them.
fn flagged() -> Vec<(&'static OfferKey, Flag)> {
    let mut rows: Vec<_> = OFFER_KEYS
        .iter()
        .filter_map(|k| Some((k, k.flag?)))
        .collect();
    rows.sort_by_key(|(_, f)| f.rank);
    rows
}

fn arg(kind: OfferKind, f: Flag) -> Arg {
    let a = Arg::new(f.long)
        .long(f.long)
        .value_name(f.value_name)
        .help(f.help);
    match kind {
        OfferKind::Bool => a.value_parser(["yes", "no"]),
        OfferKind::U16 => a.value_parser(clap::value_parser!(u16)),
        OfferKind::Digests | OfferKind::Bytes => a,
    }
}

impl clap::Args for OfferFlags {
    fn augment_args(cmd: Command) -> Command {
        flagged()
            .into_iter()
            .fold(cmd, |c, (k, f)| c.arg(arg(k.kind, f)))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for OfferFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = OfferFlags::default();
        flags.update_from_arg_matches(m)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        for (k, f) in flagged() {
            let text = match k.kind {
                OfferKind::U16 => m.try_get_one::<u16>(f.long).map(|v| v.map(u16::to_string)),
                _ => m
                    .try_get_one::<String>(f.long)
                    .map(Option::<&String>::cloned),
            }
            .map_err(|e| clap::Error::raw(clap::error::ErrorKind::InvalidValue, e))?;
            if let Some(text) = text {
                self.given.retain(|(g, _)| g.id != k.id);
                self.given.push((k, text));
            }
        }
        Ok(())
    }
}

impl OfferFlags {
    /// `offers` with the flags given applied; errors name the flag.
    pub fn apply(&self, offers: &mut Offers) -> Result<(), String> {
        for (k, text) in &self.given {
            let flag = k.flag.map_or("", |f| f.long);
            let v = match k.kind {
                OfferKind::Digests => Value::Text(text.clone()),
                OfferKind::Bool => Value::Bool(text == "yes"),
                OfferKind::U16 => {
                    Value::Number(text.parse().map_err(|e| format!("--{flag}: {e}"))?)
                }
                OfferKind::Bytes => {
                    Value::Number(parse_size(text).map_err(|e| format!("--{flag}: {e}"))?)
                }
            };
            (k.set)(offers, &v).map_err(|e| format!("--{flag}: {e}"))?;
        }
        Ok(())
    }
}
