//! The crate's error type: a kind to branch on, a message for people, and context pairs.
//!
//! Every SQL function turns an [`Error`] into a DuckDB error prefixed with its own name
//! (`lakehouse_fragmentation: …`), so messages here say *what* is wrong, not *where*.

use std::fmt;

/// What went wrong, coarse enough to branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A parameter has the wrong type or an out-of-range value.
    InvalidArgument,
    /// A table, file or catalog entry does not exist.
    NotFound,
    /// Metadata exists but cannot be parsed or is inconsistent.
    CorruptMetadata,
    /// A valid request that this version does not implement.
    Unsupported,
    /// The catalog could not be configured or queried.
    Catalog,
    /// Reading or writing a file failed.
    Io,
    /// A statement on the nested DuckDB connection failed.
    DuckDb,
    /// Another writer committed first in a way this commit cannot be rebased on (a replaced file
    /// is gone, new deletes target it, the table kept moving): nothing was committed; running
    /// again later plans on the new state. Not a sign of corruption.
    CommitConflict,
    /// A catalog did not answer a commit (5xx, timeout) and a reload could not tell whether it
    /// landed: nothing was cleaned up (files it may reference stay; orphan removal takes them
    /// once they are unreferenced).
    CommitUnknown,
    /// The query was interrupted (Ctrl-C): the step in progress finished or was abandoned,
    /// nothing half-committed.
    Interrupted,
}

impl ErrorKind {
    /// Whether running the same call again later may succeed (a conflict, an interruption).
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorKind::CommitConflict | ErrorKind::Interrupted)
    }
}

/// An error with a kind, a message and optional context (`key: value` pairs).
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    context: Vec<(&'static str, String)>,
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with a human-readable `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), context: Vec::new() }
    }

    /// Shorthand for an [`ErrorKind::CommitConflict`] error; the message says what moved.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::CommitConflict, format!("commit conflict: {}", message.into()))
    }

    /// Shorthand for an [`ErrorKind::InvalidArgument`] error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }

    /// Adds a `key: value` pair shown after the message.
    pub fn with_context(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.context.push((key, value.into()));
        self
    }

    /// The kind of the error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message without context.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        for (key, value) in &self.context {
            write!(f, " ({key}: {value})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<iceberg::Error> for Error {
    fn from(err: iceberg::Error) -> Self {
        let kind = match err.kind() {
            iceberg::ErrorKind::DataInvalid => ErrorKind::CorruptMetadata,
            iceberg::ErrorKind::FeatureUnsupported => ErrorKind::Unsupported,
            _ => ErrorKind::Io,
        };
        // iceberg's Display appends a backtrace section when one was captured; keep the first
        // line and the source, which carry the useful part.
        let mut message = err.message().to_string();
        if let Some(source) = std::error::Error::source(&err) {
            message.push_str(": ");
            message.push_str(&source.to_string());
        }
        Error::new(kind, message)
    }
}

impl From<duckdb::Error> for Error {
    fn from(err: duckdb::Error) -> Self {
        Error::new(ErrorKind::DuckDb, err.to_string())
    }
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        Error::new(ErrorKind::Io, err.to_string())
    }
}

/// `f()`, or the message of its panic: for calls into other crates' readers (iceberg-rust's Avro
/// decoding unwraps on some malformed manifests), so that a malformed file is an error naming it,
/// not a panic on a DuckDB thread.
pub fn without_panic<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "no message".into());
        format!("the reader panicked: {message}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_includes_context_in_order() {
        let err = Error::invalid("threshold must be positive")
            .with_context("parameter", "small_file_threshold_mb")
            .with_context("value", "-1");
        assert_eq!(err.to_string(), "threshold must be positive (parameter: small_file_threshold_mb) (value: -1)");
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    }
}
