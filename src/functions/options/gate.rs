//! `lakehouse_gate`'s options (also `lakehouse_serve`'s, beside its own): the compaction's, the
//! executor's and the expiry's ([`super::compact`], [`super::expire`]), and the gate's own.

use crate::action::gate::GateOptions;
use crate::error::Result;
use crate::functions::args::{Args, TABLE_PARAMETERS, THRESHOLD_PARAMETERS};
use crate::functions::gate_runs::history::{History, history_options};
use crate::notify::slack::{RetryPolicy, Webhook};
use crate::plan::format_options::FormatOnly;

use super::compact::{COMPACTION_PARAMETERS, EXECUTOR_PARAMETERS, compaction_options, executor_options};
use super::expire::{EXPIRY_PARAMETERS, expiry_options};
use super::source::OptionSource;

const GATE_PARAMETERS: [&str; 8] = [
    "slack_webhook_url",
    "dry_run",
    "notify_when_healthy",
    "fail_on_notify_error",
    "measure_speedup",
    "history_table",
    "history_path",
    "notify_max_attempts",
];

/// Every named parameter of the gate (also `lakehouse_serve`'s, beside its own).
pub fn gate_parameter_names() -> Vec<&'static str> {
    let mut names = THRESHOLD_PARAMETERS.to_vec();
    names.extend(COMPACTION_PARAMETERS);
    names.extend(EXECUTOR_PARAMETERS);
    names.extend(EXPIRY_PARAMETERS);
    names.extend(GATE_PARAMETERS);
    names.extend(TABLE_PARAMETERS);
    names
}

/// The gate's options for `table` and where its runs are recorded, from the named parameters.
pub fn gate_options(args: &Args, table: String) -> Result<(GateOptions, History)> {
    let dry_run = args.bool("dry_run", false)?;
    let webhook = Webhook::resolve(args.opt_string("slack_webhook_url", true)?.as_deref())?;
    let history = history_options(args)?;
    let retry =
        RetryPolicy { max_attempts: args.i64_in("notify_max_attempts", 4, 1, 10)? as u32, ..RetryPolicy::default() };
    let options = GateOptions {
        table,
        locate: args.locate_options()?,
        compaction: compaction_options(args, true)?,
        executor: executor_options(args)?,
        expiry: expiry_options(args, dry_run)?,
        dry_run,
        webhook,
        notify_when_healthy: args.bool("notify_when_healthy", false)?,
        fail_on_notify_error: args.bool("fail_on_notify_error", false)?,
        measure_speedup: args.bool("measure_speedup", true)?,
        retry,
        format_only: FormatOnly::given(|name| args.given(name)),
    };
    Ok((options, history))
}
