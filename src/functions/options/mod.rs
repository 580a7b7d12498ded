//! The options of the SQL functions, one file per verb: each verb's named parameters (also its
//! scalar form's JSON keys) and the one parser both forms read them with, through
//! [`source::OptionSource`]. The gate and the webhook server take the verbs' options from here,
//! so no SQL function's file imports another's.

pub mod compact;
pub mod expire;
pub mod gate;
pub mod orphans;
pub mod profile;
pub mod source;
