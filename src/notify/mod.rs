//! Telling the team: the Slack Block Kit card of a gate run ([`card`]) and its delivery to an
//! incoming webhook ([`slack`]).

pub mod card;
pub mod slack;
