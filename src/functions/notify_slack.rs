//! Scalar `lakehouse_notify_slack([webhook_url,] message)` → the HTTP outcome as JSON
//! (`{"ok": true, "status": 200, "attempts": 1, "error": null}`). `message` is text, or a Block
//! Kit payload as a JSON object. The one-argument form posts to `$SLACK_WEBHOOK_URL`; so does a
//! NULL URL read from a column (DuckDB skips a call whose argument is a *literal* NULL, so
//! `lakehouse_notify_slack(NULL, msg)` is NULL: use the one-argument form). Volatile. Delivery
//! failures are returned, not raised; a bad URL is an error; a NULL message gives NULL.

use duckdb::core::{DataChunkHandle, Inserter, LogicalTypeHandle, LogicalTypeId};
use duckdb::vscalar::{ScalarFunctionSignature, VScalar};
use duckdb::vtab::arrow::WritableVector;

use super::json_options::{NamedScalar, read_text};
use crate::duck::HostDb;
use crate::notify::slack::{RetryPolicy, Webhook, payload_of, post};

/// The Slack scalar.
pub struct NotifySlack;

impl NamedScalar for NotifySlack {
    const NAME: &'static str = "lakehouse_notify_slack";
}

impl VScalar for NotifySlack {
    type State = HostDb;

    fn invoke(
        _host: &Self::State,
        input: &mut DataChunkHandle,
        output: &mut dyn WritableVector,
    ) -> std::result::Result<(), Box<dyn std::error::Error>> {
        let mut out = output.flat_vector();
        let _interrupts = crate::interrupt::Guard::new();
        // (message) or (webhook_url, message).
        let with_url = input.num_columns() > 1;
        for row in 0..input.len() {
            let url = if with_url { read_text(input, 0, row) } else { None };
            let Some(message) = read_text(input, usize::from(with_url), row) else {
                out.set_null(row);
                continue;
            };
            let webhook = Webhook::resolve(url.as_deref())
                .map_err(|e| format!("{}: {e}", Self::NAME))?
                .ok_or_else(|| format!("{}: no webhook URL: pass one or set SLACK_WEBHOOK_URL", Self::NAME))?;
            let delivery = post(&webhook, &payload_of(&message), &RetryPolicy::default());
            out.insert(row, delivery.to_json().to_string().as_str());
        }
        Ok(())
    }

    fn signatures() -> Vec<ScalarFunctionSignature> {
        let text = || LogicalTypeHandle::from(LogicalTypeId::Varchar);
        vec![
            ScalarFunctionSignature::exact(vec![text()], text()),
            ScalarFunctionSignature::exact(vec![text(), text()], text()),
        ]
    }

    fn volatile() -> bool {
        true
    }
}
