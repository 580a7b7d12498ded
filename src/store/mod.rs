//! Tables on S3-compatible object storage: one client (object_store's `AmazonS3`, the store
//! delta-rs already brings) for Iceberg metadata I/O, commits, listings and deletes.
//!
//! Iceberg reads go through iceberg-rust's `FileIO` with [`S3StorageFactory`] plugged in (the
//! `Storage` trait is iceberg-rust's door for other stores; GCS/ADLS would be another factory over
//! object_store's `gcp`/`azure` modules). Every request takes a permit of one process-wide
//! semaphore ([`max_in_flight`]): a real limit on requests in flight, whoever spawned them.
//! object_store retries 5xx (S3's `503 SlowDown` among them), 429 and dropped connections with
//! exponential backoff.
//!
//! Credentials are registered per table location by whoever resolved the table ([`register`]):
//! a REST catalog's vended credentials, else the catalog's `s3.*` properties. A location with
//! nothing registered uses the standard AWS environment (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`,
//! web identity, ECS, instance metadata). Secrets never appear in `Debug` output or errors.

pub mod duckdb;
pub mod location;

pub use duckdb::prepare_remote;
pub use location::{
    Location, canonical, decoded, is_inside, is_remote, location_key, normalize_location, split_location,
    strip_file_scheme,
};

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, LazyLock, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::error::{Error, ErrorKind, Result};

/// Requests to object storage in flight at once, across every table and call of the process
/// (`LAKEHOUSE_S3_MAX_IN_FLIGHT`, 1 to 1,024, read once, overrides it).
pub const MAX_IN_FLIGHT: usize = 32;

/// The limit in force: [`MAX_IN_FLIGHT`] unless `LAKEHOUSE_S3_MAX_IN_FLIGHT` says otherwise.
pub fn max_in_flight() -> usize {
    static LIMIT: LazyLock<usize> = LazyLock::new(|| {
        std::env::var("LAKEHOUSE_S3_MAX_IN_FLIGHT")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|n| (1..=1024).contains(n))
            .unwrap_or(MAX_IN_FLIGHT)
    });
    *LIMIT
}

static PERMITS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(max_in_flight()));

/// The `s3.*` settings of a table's storage (the keys pyiceberg and iceberg-rust read).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct S3Settings {
    /// `s3.endpoint`: an S3-compatible server, e.g. `http://127.0.0.1:9000`.
    pub endpoint: Option<String>,
    /// `s3.region` (`client.region` wins).
    pub region: Option<String>,
    /// `s3.access-key-id`.
    pub access_key_id: Option<String>,
    /// `s3.secret-access-key`.
    pub secret_access_key: Option<String>,
    /// `s3.session-token`.
    pub session_token: Option<String>,
    /// `s3.path-style-access`; unset means path style with an endpoint, virtual-hosted without.
    pub path_style: Option<bool>,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |v: &Option<String>| if v.is_some() { "<set>" } else { "<unset>" };
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &shown(&self.access_key_id))
            .field("secret_access_key", &shown(&self.secret_access_key))
            .field("session_token", &shown(&self.session_token))
            .field("path_style", &self.path_style)
            .finish()
    }
}

impl S3Settings {
    /// The settings among `properties` (`s3.endpoint`, …); `None` when there are none.
    pub fn from_properties<'a>(properties: impl IntoIterator<Item = (&'a String, &'a String)>) -> Option<Self> {
        let mut s = S3Settings::default();
        let mut client_region = None;
        let mut any = false;
        for (key, value) in properties {
            let value = Some(value.clone());
            match key.as_str() {
                "s3.endpoint" => s.endpoint = value,
                "s3.region" => s.region = value,
                "client.region" => client_region = value,
                "s3.access-key-id" => s.access_key_id = value,
                "s3.secret-access-key" => s.secret_access_key = value,
                "s3.session-token" => s.session_token = value,
                "s3.path-style-access" => s.path_style = value.map(|v| v.eq_ignore_ascii_case("true")),
                _ => continue,
            }
            any = true;
        }
        if client_region.is_some() {
            s.region = client_region;
            any = true;
        }
        any.then_some(s)
    }

    /// `self`, with what it leaves unset taken from `fallback`. Keys and secrets go together:
    /// a key id from one source is never paired with a secret from another.
    pub fn or(self, fallback: &S3Settings) -> S3Settings {
        let has_keys = self.access_key_id.is_some() || self.secret_access_key.is_some();
        S3Settings {
            endpoint: self.endpoint.or_else(|| fallback.endpoint.clone()),
            region: self.region.or_else(|| fallback.region.clone()),
            access_key_id: if has_keys { self.access_key_id } else { fallback.access_key_id.clone() },
            secret_access_key: if has_keys { self.secret_access_key } else { fallback.secret_access_key.clone() },
            session_token: if has_keys { self.session_token } else { fallback.session_token.clone() },
            path_style: self.path_style.or(fallback.path_style),
        }
    }

    /// Path-style addressing (`http://host/bucket/key`): as configured, else with an endpoint.
    pub fn path_style(&self) -> bool {
        self.path_style.unwrap_or(self.endpoint.is_some())
    }

    /// The endpoint as `host:port` and whether it uses TLS (DuckDB's secret wants them apart).
    pub fn endpoint_host(&self) -> Option<(String, bool)> {
        let endpoint = self.endpoint.as_deref()?;
        let (tls, rest) = match endpoint.split_once("://") {
            Some((scheme, rest)) => (!scheme.eq_ignore_ascii_case("http"), rest),
            None => (true, endpoint),
        };
        Some((rest.trim_end_matches('/').to_string(), tls))
    }
}

/// Settings registered for table locations, longest prefix first when looked up.
static REGISTRY: LazyLock<Mutex<Vec<(String, S3Settings)>>> = LazyLock::new(|| Mutex::new(Vec::new()));

/// Clients, one per bucket and settings.
type Clients = HashMap<(String, S3Settings), Arc<AmazonS3>>;
static CLIENTS: LazyLock<Mutex<Clients>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Records the settings for every location under `prefix` (a table's location), replacing what
/// an earlier call registered for the same prefix.
pub fn register(prefix: &str, settings: S3Settings) {
    let prefix = canonical(prefix).trim_end_matches('/').to_string();
    if let Ok(mut registry) = REGISTRY.lock() {
        registry.retain(|(p, _)| *p != prefix);
        registry.push((prefix, settings));
    }
}

/// The settings registered for `location` (the longest registered prefix that contains it).
pub fn settings_for(location: &str) -> S3Settings {
    registered(location).map(|(_, s)| s).unwrap_or_default()
}

/// The longest registered prefix containing `location`, and its settings.
pub fn registered(location: &str) -> Option<(String, S3Settings)> {
    let location = canonical(location);
    let registry = REGISTRY.lock().ok()?;
    registry
        .iter()
        .filter(|(prefix, _)| {
            location == *prefix || location.strip_prefix(prefix.as_str()).is_some_and(|r| r.starts_with('/'))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .cloned()
}

fn client(bucket: &str, settings: &S3Settings) -> Result<Arc<AmazonS3>> {
    let key = (bucket.to_string(), settings.clone());
    let mut clients = CLIENTS.lock().map_err(|_| Error::new(ErrorKind::Io, "object store clients poisoned"))?;
    if let Some(c) = clients.get(&key) {
        return Ok(c.clone());
    }
    let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket).with_retry(RetryConfig {
        max_retries: 6,
        retry_timeout: std::time::Duration::from_secs(60),
        ..Default::default()
    });
    if let Some(endpoint) = &settings.endpoint {
        builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
    }
    builder = builder.with_virtual_hosted_style_request(!settings.path_style());
    if let Some(region) = &settings.region {
        builder = builder.with_region(region);
    }
    if let (Some(id), Some(secret)) = (&settings.access_key_id, &settings.secret_access_key) {
        builder = builder.with_access_key_id(id).with_secret_access_key(secret);
        if let Some(token) = &settings.session_token {
            builder = builder.with_token(token);
        }
    }
    let store = Arc::new(builder.build().map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("cannot configure S3 access to bucket '{bucket}': {}", scrub(&e)),
        )
    })?);
    clients.insert(key, store.clone());
    Ok(store)
}

/// The client of the bucket `location` is in (its root is the bucket's), for delta-rs.
pub fn bucket_store(location: &str) -> Result<Arc<dyn ObjectStore>> {
    let (bucket, _) = split_location(location)?;
    Ok(client(&bucket, &settings_for(location))?)
}

/// Whether any object lies under the directory `dir` (one listing page at most).
pub async fn any_under(dir: &str) -> Result<bool> {
    let (_, key) = split_location(dir)?;
    let (store, _) = resolve(dir)?;
    let prefix = ObjectPath::from(key.trim_end_matches('/'));
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    match store.list(Some(&prefix)).next().await {
        Some(Ok(_)) => Ok(true),
        Some(Err(e)) => Err(io_error("list", dir, e)),
        None => Ok(false),
    }
}

/// The client and object path of `location`.
pub fn resolve(location: &str) -> Result<(Arc<AmazonS3>, ObjectPath)> {
    let (bucket, key) = split_location(location)?;
    let store = client(&bucket, &settings_for(location))?;
    let path = ObjectPath::parse(&key).map_err(|e| Error::invalid(format!("'{location}': {e}")))?;
    Ok((store, path))
}

/// An object_store error's message, without the server's XML body (AWS puts the access key id,
/// the string to sign and the canonical request into a `SignatureDoesNotMatch` body): what
/// precedes the body, plus the S3 error code from it.
fn scrub(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    let code = text.find("<Code>").and_then(|i| {
        let rest = &text[i + "<Code>".len()..];
        rest.find("</Code>").map(|j| rest[..j].to_string())
    });
    let head = text.split("<?xml").next().unwrap_or_default();
    let head = head.lines().next().unwrap_or_default().trim_end_matches([':', ' ']);
    match code {
        Some(code) if !code.is_empty() => format!("{head} ({code})"),
        _ => head.to_string(),
    }
}

fn io_error(what: &str, location: &str, e: object_store::Error) -> Error {
    let kind = if matches!(e, object_store::Error::NotFound { .. }) { ErrorKind::NotFound } else { ErrorKind::Io };
    Error::new(kind, format!("cannot {what} '{location}': {}", scrub(&e)))
}

/// Whether `location` exists.
pub async fn exists(location: &str) -> Result<bool> {
    Ok(head(location).await?.is_some())
}

/// Size and last-modified time (ms) of `location`, `None` when it does not exist.
pub async fn head(location: &str) -> Result<Option<ObjectInfo>> {
    let (store, path) = resolve(location)?;
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    match store.head(&path).await {
        Ok(meta) => Ok(Some(ObjectInfo {
            location: location.to_string(),
            size_bytes: meta.size,
            modified_ms: meta.last_modified.timestamp_millis(),
        })),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(io_error("read", location, e)),
    }
}

/// The whole object at `location`.
pub async fn read(location: &str) -> Result<Bytes> {
    let (store, path) = resolve(location)?;
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    let got = store.get(&path).await.map_err(|e| io_error("read", location, e))?;
    got.bytes().await.map_err(|e| io_error("read", location, e))
}

/// Bytes `range` of `location`.
pub async fn read_range(location: &str, range: Range<u64>) -> Result<Bytes> {
    let (store, path) = resolve(location)?;
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    store.get_range(&path, range).await.map_err(|e| io_error("read", location, e))
}

/// Writes `bytes` to `location`, replacing what is there.
pub async fn write(location: &str, bytes: Bytes) -> Result<()> {
    let (store, path) = resolve(location)?;
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    store.put(&path, PutPayload::from(bytes)).await.map(|_| ()).map_err(|e| io_error("write", location, e))
}

/// Writes `bytes` to `location` only if nothing is there (`If-None-Match: *`): `Ok(false)` when
/// something already is. The store must honour the condition ([`require_conditional_writes`]).
pub async fn write_if_absent(location: &str, bytes: Bytes) -> Result<bool> {
    let (store, path) = resolve(location)?;
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    let options = PutOptions { mode: PutMode::Create, ..Default::default() };
    match store.put_opts(&path, PutPayload::from(bytes), options).await {
        Ok(_) => Ok(true),
        Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => Ok(false),
        Err(object_store::Error::NotImplemented { .. }) => Err(no_conditional_writes(location)),
        Err(e) => Err(io_error("write", location, e)),
    }
}

fn no_conditional_writes(location: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "the object store holding '{location}' does not support conditional writes (If-None-Match: *), so a \
             commit without a catalog could overwrite another writer's; nothing was committed: name the table \
             through its catalog, or use a store with conditional writes (AWS S3, MinIO, versitygw, R2)"
        ),
    )
}

/// Checks, once per store and directory, that a conditional write is refused when the object
/// exists (a store that ignores `If-None-Match` would let two commits overwrite each other): a
/// probe object is written twice under `dir` and removed.
pub async fn require_conditional_writes(dir: &str) -> Result<()> {
    static CHECKED: LazyLock<Mutex<Vec<(String, S3Settings)>>> = LazyLock::new(|| Mutex::new(Vec::new()));
    let (bucket, _) = split_location(dir)?;
    let key = (bucket, settings_for(dir));
    if CHECKED.lock().is_ok_and(|c| c.contains(&key)) {
        return Ok(());
    }
    let probe = format!("{}/.lakehouse-probe-{}", dir.trim_end_matches('/'), uuid::Uuid::new_v4());
    let first = write_if_absent(&probe, Bytes::from_static(b"1")).await;
    let second = match &first {
        Ok(true) => write_if_absent(&probe, Bytes::from_static(b"2")).await,
        _ => Ok(true),
    };
    let _ = delete_many(vec![probe.clone()]).await;
    match (first?, second?) {
        (true, false) => {
            if let Ok(mut c) = CHECKED.lock() {
                c.push(key);
            }
            Ok(())
        }
        _ => Err(no_conditional_writes(dir)),
    }
}

/// One object of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectInfo {
    /// `s3://bucket/key`.
    pub location: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Last-modified time, milliseconds since the epoch.
    pub modified_ms: i64,
}

/// Every object under the directory `dir` (recursively), with sizes and last-modified times.
pub async fn list(dir: &str) -> Result<Vec<ObjectInfo>> {
    let (bucket, key) = split_location(dir)?;
    let (store, _) = resolve(dir)?;
    let prefix = ObjectPath::from(key.trim_end_matches('/'));
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    let mut stream = store.list(Some(&prefix));
    let mut out = Vec::new();
    while let Some(meta) = stream.next().await {
        let meta = meta.map_err(|e| io_error("list", dir, e))?;
        out.push(ObjectInfo {
            location: format!("s3://{bucket}/{}", meta.location),
            size_bytes: meta.size,
            modified_ms: meta.last_modified.timestamp_millis(),
        });
    }
    Ok(out)
}

/// Deletes `locations` in batches (S3 `DeleteObjects`, 1,000 keys a request); one result per
/// location, in order. A key that was already gone counts as deleted (S3 does not tell).
pub async fn delete_many(locations: Vec<String>) -> Vec<Result<()>> {
    let mut by_bucket: HashMap<(String, S3Settings), Vec<(usize, ObjectPath)>> = HashMap::new();
    let mut results: Vec<Option<Result<()>>> = (0..locations.len()).map(|_| None).collect();
    for (i, location) in locations.iter().enumerate() {
        match split_location(location).and_then(|(bucket, key)| {
            let path = ObjectPath::parse(&key).map_err(|e| Error::invalid(format!("'{location}': {e}")))?;
            Ok(((bucket, settings_for(location)), path))
        }) {
            Ok((k, path)) => by_bucket.entry(k).or_default().push((i, path)),
            Err(e) => results[i] = Some(Err(e)),
        }
    }
    for ((bucket, settings), paths) in by_bucket {
        let store = match client(&bucket, &settings) {
            Ok(s) => s,
            Err(e) => {
                for (i, _) in paths {
                    results[i] = Some(Err(Error::new(e.kind(), e.message().to_string())));
                }
                continue;
            }
        };
        for chunk in paths.chunks(1000) {
            let _permit = PERMITS.acquire().await;
            let index: HashMap<ObjectPath, usize> = chunk.iter().map(|(i, p)| (p.clone(), *i)).collect();
            let input: BoxStream<'static, object_store::Result<ObjectPath>> =
                futures::stream::iter(chunk.iter().map(|(_, p)| Ok(p.clone())).collect::<Vec<_>>()).boxed();
            let mut outcomes = store.delete_stream(input);
            while let Some(outcome) = outcomes.next().await {
                match outcome {
                    Ok(path) => {
                        if let Some(&i) = index.get(&path) {
                            results[i] = Some(Ok(()));
                        }
                    }
                    Err(object_store::Error::NotFound { path, .. }) => {
                        if let Some(&i) = ObjectPath::parse(&path).ok().and_then(|p| index.get(&p)) {
                            results[i] = Some(Ok(()));
                        }
                    }
                    Err(e) => {
                        let message = scrub(&e);
                        for (i, p) in chunk {
                            if results[*i].is_none() {
                                results[*i] = Some(Err(Error::new(
                                    ErrorKind::Io,
                                    format!("cannot delete 's3://{bucket}/{p}': {message}"),
                                )));
                            }
                        }
                        break;
                    }
                }
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::new(ErrorKind::Io, "the store did not answer for this file"))))
        .collect()
}

/// Removes files a failed action wrote (best effort: what is left is an orphan that orphan
/// removal finds): local paths from disk, object-store locations in batches.
pub fn remove_quietly<'a>(locations: impl IntoIterator<Item = &'a str>) {
    let mut remote = Vec::new();
    for location in locations {
        if is_remote(location) {
            remote.push(location.to_string());
        } else {
            let _ = std::fs::remove_file(crate::store::strip_file_scheme(location));
        }
    }
    if !remote.is_empty() {
        let _ = crate::runtime::block_on(delete_many(remote));
    }
}

// ---------------------------------------------------------------------------------------------
// iceberg-rust's FileIO over this module.

/// The `FileIO` for a table at `location`: S3 through [`S3StorageFactory`], else local files.
pub fn file_io_for(location: &str) -> iceberg::io::FileIO {
    if is_remote(location) {
        iceberg::io::FileIOBuilder::new(Arc::new(S3StorageFactory)).build()
    } else {
        iceberg::io::FileIO::new_with_fs()
    }
}

/// Builds [`S3Storage`]; the settings come from [`register`], per location.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct S3StorageFactory;

#[typetag::serde]
impl iceberg::io::StorageFactory for S3StorageFactory {
    fn build(&self, _config: &iceberg::io::StorageConfig) -> iceberg::Result<Arc<dyn iceberg::io::Storage>> {
        Ok(Arc::new(S3Storage))
    }
}

/// iceberg-rust's `Storage` on S3 through this module's functions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct S3Storage;

fn to_iceberg(e: Error) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.message().to_string())
}

struct S3Read(String);

#[async_trait::async_trait]
impl iceberg::io::FileRead for S3Read {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        read_range(&self.0, range).await.map_err(to_iceberg)
    }
}

/// Buffers a file in memory and writes it whole on close (manifests and lists are small).
struct S3Write {
    location: String,
    buffer: Vec<u8>,
    closed: bool,
}

#[async_trait::async_trait]
impl iceberg::io::FileWrite for S3Write {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        self.buffer.extend_from_slice(&bs);
        Ok(())
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        if self.closed {
            return Err(iceberg::Error::new(iceberg::ErrorKind::Unexpected, "file already closed"));
        }
        self.closed = true;
        write(&self.location, Bytes::from(std::mem::take(&mut self.buffer))).await.map_err(to_iceberg)
    }
}

#[async_trait::async_trait]
#[typetag::serde]
impl iceberg::io::Storage for S3Storage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        exists(path).await.map_err(to_iceberg)
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<iceberg::io::FileMetadata> {
        match head(path).await.map_err(to_iceberg)? {
            Some(info) => Ok(iceberg::io::FileMetadata { size: info.size_bytes }),
            None => Err(iceberg::Error::new(iceberg::ErrorKind::Unexpected, format!("'{path}' does not exist"))),
        }
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        read(path).await.map_err(to_iceberg)
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn iceberg::io::FileRead>> {
        Ok(Box::new(S3Read(path.to_string())))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        write(path, bs).await.map_err(to_iceberg)
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn iceberg::io::FileWrite>> {
        Ok(Box::new(S3Write { location: path.to_string(), buffer: Vec::new(), closed: false }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        delete_many(vec![path.to_string()]).await.pop().unwrap_or(Ok(())).map_err(to_iceberg)
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        let objects = list(path).await.map_err(to_iceberg)?;
        for r in delete_many(objects.into_iter().map(|o| o.location).collect()).await {
            r.map_err(to_iceberg)?;
        }
        Ok(())
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        let paths: Vec<String> = paths.collect().await;
        for r in delete_many(paths).await {
            r.map_err(to_iceberg)?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<iceberg::io::InputFile> {
        Ok(iceberg::io::InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<iceberg::io::OutputFile> {
        Ok(iceberg::io::OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_split_into_bucket_and_key() {
        assert_eq!(
            split_location("s3://b/w/t/metadata/v1.metadata.json").unwrap(),
            ("b".into(), "w/t/metadata/v1.metadata.json".into())
        );
        assert_eq!(split_location("s3a://b/k").unwrap(), ("b".into(), "k".into()));
        assert_eq!(canonical("s3a://b/k"), "s3://b/k");
        assert_eq!(split_location("gs://b/k").unwrap_err().kind(), ErrorKind::Unsupported);
        assert!(split_location("s3:///k").is_err());
        assert!(is_remote("s3://b/k") && !is_remote("/tmp/x") && !is_remote("file:///tmp/x"));
    }

    #[test]
    fn server_error_bodies_are_reduced_to_their_code() {
        let raw = "Error performing PUT http://h/b/k - Server returned non-2xx status code: 403 Forbidden: \
                   <?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>\
                   <AWSAccessKeyId>AKIDEXAMPLE</AWSAccessKeyId><StringToSign>x</StringToSign></Error>";
        let shown = scrub(&raw);
        assert!(shown.ends_with("403 Forbidden (SignatureDoesNotMatch)"), "{shown}");
        assert!(!shown.contains("AKIDEXAMPLE"), "{shown}");
        assert_eq!(scrub(&"plain failure\nsecond line"), "plain failure");
    }

    #[test]
    fn settings_come_from_the_longest_registered_prefix() {
        let a = S3Settings { endpoint: Some("http://a:1".into()), ..Default::default() };
        let b = S3Settings { endpoint: Some("http://b:2".into()), ..Default::default() };
        register("s3://reg-bucket/wh", a.clone());
        register("s3://reg-bucket/wh/t1/", b.clone());
        assert_eq!(settings_for("s3://reg-bucket/wh/t1/metadata/x.json"), b);
        assert_eq!(settings_for("s3a://reg-bucket/wh/t2/x"), a);
        assert_eq!(settings_for("s3://reg-bucket/wh-other/x"), S3Settings::default());
    }

    #[test]
    fn keys_never_mix_sources_and_never_print() {
        let props: HashMap<String, String> = [
            ("s3.endpoint", "http://127.0.0.1:9000"),
            ("s3.access-key-id", "AKIDEXAMPLE"),
            ("s3.secret-access-key", "wJalrXUtnFEMI"),
            ("s3.path-style-access", "true"),
            ("client.region", "eu-west-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let catalog = S3Settings::from_properties(&props).unwrap();
        assert_eq!(catalog.region.as_deref(), Some("eu-west-1"));
        let shown = format!("{catalog:?}");
        assert!(!shown.contains("wJalrXUtnFEMI") && !shown.contains("AKIDEXAMPLE"), "{shown}");
        let vended =
            S3Settings { access_key_id: Some("V".into()), secret_access_key: Some("S".into()), ..Default::default() };
        let merged = vended.or(&catalog);
        assert_eq!((merged.access_key_id.as_deref(), merged.secret_access_key.as_deref()), (Some("V"), Some("S")));
        assert_eq!(merged.endpoint_host(), Some(("127.0.0.1:9000".to_string(), false)));
        let only_endpoint = S3Settings { endpoint: Some("https://e".into()), ..Default::default() }.or(&catalog);
        assert_eq!(only_endpoint.access_key_id.as_deref(), Some("AKIDEXAMPLE"));
        assert!(only_endpoint.path_style());
        assert!(S3Settings::from_properties(&HashMap::new()).is_none());
    }
}
