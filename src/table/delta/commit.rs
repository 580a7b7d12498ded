//! Our OPTIMIZE commit through delta-rs's `CommitBuilder`, with two corrections delta-rs 0.32.4
//! needs before Spark reads what it writes:
//!
//! - **Paths as URIs.** The protocol stores `add`/`remove` paths as RFC 2396 URIs; Spark parses
//!   every one with `java.net.URI`. delta-rs decodes them on read and, on write, escapes only the
//!   characters object stores dislike — not the space. A Spark table partitioned by a value with
//!   a space (`region=us west/`, stored as `region=us%20west/…`) gets a `remove` with a raw space
//!   and Spark then fails to load the table (`URISyntaxException: Illegal character in path`).
//!   [`UriPathLogStore`] sits between delta-rs and the real log store and re-encodes each path
//!   the way Hadoop's `Path.toUri` (and so Spark) does before the commit file is put.
//! - **Writer features an OPTIMIZE keeps by construction.** Built without DataFusion, delta-rs
//!   refuses to commit to any table that lists `invariants`, `checkConstraints`,
//!   `generatedColumns`, `changeDataFeed` or `identityColumns` (nearly every Spark table with
//!   deletion vectors lists `invariants`), because it cannot check new rows against them. A
//!   compaction adds no row: each output holds exactly its inputs' rows, `dataChange: false`.
//!   [`CompactionView`] shows delta-rs's protocol check the table without the features
//!   [`crate::action::compact::delta::check_protocol`] has already judged safe for a rewrite;
//!   everything else (the read snapshot its conflict checker replays, table properties,
//!   metadata) is the table's own.

use std::sync::Arc;

use buoyant_kernel::table_properties::TableProperties;
use bytes::Bytes;
use deltalake_core::kernel::transaction::{TableReference, TransactionError};
use deltalake_core::kernel::{EagerSnapshot, Metadata, Protocol, Version};
use deltalake_core::logstore::{CommitOrBytes, LogStore, LogStoreConfig, LogStoreRef};
use deltalake_core::{DeltaResult, ObjectStore};
use object_store::ObjectStoreExt as _;
use serde_json::Value;
use uuid::Uuid;

// --------------------------------------------------------------------------- paths as URIs

/// Characters `java.net.URI`'s multi-argument constructors leave in a path as they are: letters,
/// digits, the marks `-_.!~*'()`, the punctuation `,;:$&+=`, and `/` and `@`. Everything else in
/// ASCII (space, `%`, `"`, `#`, `<`, `>`, `?`, `[`, `\`, `]`, `^`, `` ` ``, `{`, `|`, `}`,
/// controls) is percent-encoded; other Unicode characters stay as they are unless they are
/// whitespace or controls.
fn uri_keeps(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric() || "-_.!~*'(),;:$&+=/@".contains(c)
    } else {
        !c.is_whitespace() && !c.is_control()
    }
}

/// A decoded path (what delta-rs holds) as the URI the log stores, as Spark writes it:
/// `region=us west/a%b.parquet` → `region=us%20west/a%25b.parquet`.
pub fn encode_uri_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if uri_keeps(c) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

/// A commit file as delta-rs serialized it, with the `path` of every `add`, `remove` and `cdc`
/// action re-encoded by [`encode_uri_path`] (delta-rs's own escaping decoded first). Lines that
/// name no path are kept byte for byte.
pub fn reencode_commit(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("commit is not UTF-8: {e}"))?;
    let mut out = Vec::with_capacity(bytes.len() + 64);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        if line.trim().is_empty() {
            out.extend_from_slice(line.as_bytes());
            continue;
        }
        let mut action: Value = serde_json::from_str(line).map_err(|e| format!("commit line {}: {e}", i + 1))?;
        let mut changed = false;
        for kind in ["add", "remove", "cdc"] {
            if let Some(Value::String(path)) = action.get_mut(kind).and_then(|a| a.get_mut("path")) {
                let decoded = percent_encoding::percent_decode_str(path)
                    .decode_utf8()
                    .map_err(|e| format!("commit line {}: path is not UTF-8: {e}", i + 1))?;
                let encoded = encode_uri_path(&decoded);
                if encoded != *path {
                    *path = encoded;
                    changed = true;
                }
            }
        }
        if changed {
            out.extend_from_slice(serde_json::to_string(&action).map_err(|e| e.to_string())?.as_bytes());
        } else {
            out.extend_from_slice(line.as_bytes());
        }
    }
    Ok(out)
}

/// A log store that writes commit files with URI-encoded paths ([`reencode_commit`]) and is
/// otherwise the table's own (every other call is delegated unchanged, including its name, which
/// delta-rs uses to choose between put-if-absent and a temporary file).
#[derive(Debug)]
pub struct UriPathLogStore {
    inner: LogStoreRef,
    /// The only version a commit may be written as (`None`: any).
    only: Option<Version>,
}

impl UriPathLogStore {
    pub fn wrap(inner: LogStoreRef) -> LogStoreRef {
        Self::wrap_at(inner, None)
    }

    /// [`UriPathLogStore::wrap`], refusing to write a commit as any version but `only` (as if
    /// another writer had taken it): for a commit whose actions are valid at one version only.
    pub fn wrap_at(inner: LogStoreRef, only: Option<Version>) -> LogStoreRef {
        Arc::new(Self { inner, only })
    }

    async fn fixed(&self, commit: CommitOrBytes, operation_id: Uuid) -> Result<CommitOrBytes, TransactionError> {
        let invalid = |e: String| TransactionError::LogStoreError { msg: e, source: "lakehouse".into() };
        match commit {
            CommitOrBytes::LogBytes(bytes) => {
                Ok(CommitOrBytes::LogBytes(Bytes::from(reencode_commit(&bytes).map_err(invalid)?)))
            }
            CommitOrBytes::TmpCommit(path) => {
                // A temporary file private to this commit (named by a fresh uuid): rewritten in place.
                let store = self.inner.object_store(Some(operation_id));
                let bytes = store.get(&path).await?.bytes().await?;
                let fixed = reencode_commit(&bytes).map_err(invalid)?;
                if fixed != bytes.as_ref() {
                    store.put(&path, Bytes::from(fixed).into()).await?;
                }
                Ok(CommitOrBytes::TmpCommit(path))
            }
        }
    }
}

#[async_trait::async_trait]
impl LogStore for UriPathLogStore {
    fn name(&self) -> String {
        self.inner.name()
    }

    async fn refresh(&self) -> DeltaResult<()> {
        self.inner.refresh().await
    }

    async fn read_commit_entry(&self, version: Version) -> DeltaResult<Option<Bytes>> {
        self.inner.read_commit_entry(version).await
    }

    async fn write_commit_entry(
        &self,
        version: Version,
        commit_or_bytes: CommitOrBytes,
        operation_id: Uuid,
    ) -> Result<(), TransactionError> {
        let fixed = self.fixed(commit_or_bytes, operation_id).await?;
        if self.only.is_some_and(|only| only != version) {
            self.inner.abort_commit_entry(version, fixed, operation_id).await?;
            return Err(TransactionError::VersionAlreadyExists(version));
        }
        self.inner.write_commit_entry(version, fixed, operation_id).await
    }

    async fn abort_commit_entry(
        &self,
        version: Version,
        commit_or_bytes: CommitOrBytes,
        operation_id: Uuid,
    ) -> Result<(), TransactionError> {
        self.inner.abort_commit_entry(version, commit_or_bytes, operation_id).await
    }

    async fn get_latest_version(&self, start_version: Version) -> DeltaResult<Version> {
        self.inner.get_latest_version(start_version).await
    }

    fn object_store(&self, operation_id: Option<Uuid>) -> Arc<dyn ObjectStore> {
        self.inner.object_store(operation_id)
    }

    fn root_object_store(&self, operation_id: Option<Uuid>) -> Arc<dyn ObjectStore> {
        self.inner.root_object_store(operation_id)
    }

    fn engine(&self, operation_id: Option<Uuid>) -> Arc<dyn buoyant_kernel::Engine> {
        self.inner.engine(operation_id)
    }

    fn log_path(&self) -> &deltalake_core::Path {
        self.inner.log_path()
    }

    fn transaction_url(&self, operation_id: Option<Uuid>) -> DeltaResult<url::Url> {
        self.inner.transaction_url(operation_id)
    }

    fn config(&self) -> &LogStoreConfig {
        self.inner.config()
    }
}

// --------------------------------------------------------------------------- finding a commit

/// The version after `read_version` whose `commitInfo` carries `key` = `value`, if the log has
/// one: how a writer whose commit was not confirmed learns whether it landed.
pub fn find_commit(
    table: &deltalake_core::DeltaTable,
    read_version: i64,
    key: &str,
    value: &str,
) -> crate::error::Result<Option<i64>> {
    let log_store = table.log_store();
    let io = |e: deltalake_core::DeltaTableError| {
        crate::error::Error::new(crate::error::ErrorKind::Io, format!("cannot read the Delta log: {e}"))
    };
    crate::runtime::block_on(async {
        let start = read_version.max(0) as u64;
        let latest = log_store.get_latest_version(start).await.map_err(io)?;
        for version in start + 1..=latest {
            let Some(bytes) = log_store.read_commit_entry(version).await.map_err(io)? else { continue };
            let ours = String::from_utf8_lossy(&bytes).lines().any(|line| {
                serde_json::from_str::<Value>(line).is_ok_and(|action| {
                    action.get("commitInfo").and_then(|info| info.get(key)).and_then(Value::as_str) == Some(value)
                })
            });
            if ours {
                return Ok(Some(version as i64));
            }
        }
        Ok(None)
    })?
}

// --------------------------------------------------------------------------- protocol check

/// Features delta-rs (without DataFusion) will not commit under, and that a compaction keeps by
/// construction (no new row, `dataChange: false`; identity values and their high-water mark
/// unchanged; files written with physical names and field ids under column mapping, with the
/// widened types, element, key and value ids too, as Iceberg compatibility asks; the partition
/// columns materialized where the table asks; collated columns' schema metadata untouched and
/// no collation-aware stats written; no checkpoint written on a v2-checkpoint table, domains
/// untouched; variant columns copied byte for byte);
/// [`crate::action::compact::delta::check_protocol`] has refused everything else.
const KEPT_BY_COMPACTION: &[&str] = &[
    "invariants",
    "checkConstraints",
    "generatedColumns",
    "changeDataFeed",
    "identityColumns",
    "vacuumProtocolCheck",
    "columnMapping",
    "typeWidening",
    "typeWidening-preview",
    "v2Checkpoint",
    "allowColumnDefaults",
    "checkpointProtection",
    "domainMetadata",
    "rowTracking",
    "inCommitTimestamp",
    "clustering",
    "icebergCompatV1",
    "icebergCompatV2",
    // Variant columns are only stitched: their bytes (shredded ones only where the table enables
    // shredding) are the inputs'.
    "variantType",
    "variantType-preview",
    "variantShredding",
    "variantShredding-preview",
    "materializePartitionColumns",
    "collations",
    "collations-preview",
];

/// The table as delta-rs's protocol check should see it for a compaction: its protocol without
/// the features in `KEPT_BY_COMPACTION`; legacy writer versions 3–6 (whose features are all
/// among them) shown as version 2 (append-only still checked); reader version 2 (column
/// mapping) as 1.
pub struct CompactionView<'a> {
    table: &'a dyn TableReference,
    protocol: Protocol,
}

impl<'a> CompactionView<'a> {
    pub fn new(table: &'a dyn TableReference) -> Result<Self, String> {
        let mut p = serde_json::to_value(table.protocol()).map_err(|e| e.to_string())?;
        let version = |p: &Value, k: &str| p.get(k).and_then(Value::as_i64).unwrap_or(1);
        let (reader, writer) = (version(&p, "minReaderVersion"), version(&p, "minWriterVersion"));
        if (3..=6).contains(&writer) {
            p["minWriterVersion"] = Value::from(2);
        }
        if reader == 2 {
            p["minReaderVersion"] = Value::from(1);
        }
        for key in ["readerFeatures", "writerFeatures"] {
            if let Some(Value::Array(features)) = p.get_mut(key) {
                features.retain(|f| f.as_str().is_none_or(|f| !KEPT_BY_COMPACTION.contains(&f)));
            }
        }
        let protocol = serde_json::from_value(p).map_err(|e| e.to_string())?;
        Ok(Self { table, protocol })
    }
}

impl TableReference for CompactionView<'_> {
    fn config(&self) -> &TableProperties {
        self.table.config()
    }

    fn protocol(&self) -> &Protocol {
        &self.protocol
    }

    fn metadata(&self) -> &Metadata {
        self.table.metadata()
    }

    fn eager_snapshot(&self) -> &EagerSnapshot {
        self.table.eager_snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_encoded_as_java_uri_encodes_them() {
        assert_eq!(encode_uri_path("region=us west/part-0.parquet"), "region=us%20west/part-0.parquet");
        // Hive-escaped directory names keep their escapes, themselves escaped (DAT's log).
        assert_eq!(encode_uri_path("letter=%2F%2520%25f/x"), "letter=%252F%252520%2525f/x");
        assert_eq!(encode_uri_path("d=😈/a{b}#c?.parquet"), "d=😈/a%7Bb%7D%23c%3F.parquet");
        assert_eq!(
            encode_uri_path("s3://bucket/t/x=1,2;@$&+='()!~*.parquet"),
            "s3://bucket/t/x=1,2;@$&+='()!~*.parquet"
        );
        assert_eq!(encode_uri_path("a\u{a0}b"), "a%C2%A0b");
    }

    #[test]
    fn commits_get_uri_paths_and_keep_everything_else() {
        let commit = concat!(
            r#"{"commitInfo":{"operation":"OPTIMIZE","operationParameters":{"p":"a b"}}}"#,
            "\n",
            r#"{"remove":{"path":"region=us west/x.parquet","dataChange":false}}"#,
            "\n",
            r#"{"add":{"path":"region=a%252Fb/y%2A.parquet","dataChange":false}}"#,
            "\n"
        );
        let fixed = String::from_utf8(reencode_commit(commit.as_bytes()).unwrap()).unwrap();
        let lines: Vec<&str> = fixed.split('\n').collect();
        assert_eq!(lines[0], r#"{"commitInfo":{"operation":"OPTIMIZE","operationParameters":{"p":"a b"}}}"#);
        assert!(lines[1].contains(r#""path":"region=us%20west/x.parquet""#), "{}", lines[1]);
        assert!(lines[2].contains(r#""path":"region=a%252Fb/y*.parquet""#), "{}", lines[2]);
        assert_eq!(lines[3], "");
    }
}
