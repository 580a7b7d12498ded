//! Objects on object storage, whichever store holds them: existence, reads, writes (plain and
//! conditional), listings and batched deletes, each through object_store's `ObjectStore` trait —
//! the one trait every store implements ([`store_for`] asks the location's store backend for its
//! client). Every request takes a permit of one process-wide semaphore ([`max_in_flight`]):
//! a real limit on requests in flight, whoever spawned them. object_store retries 5xx (S3's
//! `503 SlowDown` among them), 429 and dropped connections with exponential backoff.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, LazyLock, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use tokio::sync::Semaphore;

use super::backend::ObjectLocation;
use super::redact::scrub;
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

/// The client of the store `object` is on (its backend's), with the settings registered for its
/// location.
pub fn store_for(object: &ObjectLocation) -> Result<Arc<dyn ObjectStore>> {
    object.scheme.backend().client(object)
}

/// The client of the bucket `location` is in (its root is the bucket's), for delta-rs.
pub fn bucket_store(location: &str) -> Result<Arc<dyn ObjectStore>> {
    store_for(&ObjectLocation::parse(location)?)
}

/// Whether any object lies under the directory `dir` (one listing page at most).
pub async fn any_under(dir: &str) -> Result<bool> {
    let (object, store, _) = resolve(dir)?;
    let prefix = ObjectPath::from(object.key.trim_end_matches('/'));
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    match store.list(Some(&prefix)).next().await {
        Some(Ok(_)) => Ok(true),
        Some(Err(e)) => Err(io_error("list", dir, e)),
        None => Ok(false),
    }
}

/// The parsed location, its store's client and the object path of `location`.
pub fn resolve(location: &str) -> Result<(ObjectLocation, Arc<dyn ObjectStore>, ObjectPath)> {
    let object = ObjectLocation::parse(location)?;
    let store = store_for(&object)?;
    let path = ObjectPath::parse(&object.key).map_err(|e| Error::invalid(format!("'{location}': {e}")))?;
    Ok((object, store, path))
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
    let (_, store, path) = resolve(location)?;
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
    let (_, store, path) = resolve(location)?;
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    let got = store.get(&path).await.map_err(|e| io_error("read", location, e))?;
    got.bytes().await.map_err(|e| io_error("read", location, e))
}

/// Bytes `range` of `location`.
pub async fn read_range(location: &str, range: Range<u64>) -> Result<Bytes> {
    let (_, store, path) = resolve(location)?;
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    store.get_range(&path, range).await.map_err(|e| io_error("read", location, e))
}

/// Writes `bytes` to `location`, replacing what is there.
pub async fn write(location: &str, bytes: Bytes) -> Result<()> {
    let (_, store, path) = resolve(location)?;
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    store.put(&path, PutPayload::from(bytes)).await.map(|_| ()).map_err(|e| io_error("write", location, e))
}

/// Writes `bytes` to `location` only if nothing is there (`If-None-Match: *`): `Ok(false)` when
/// something already is. The store must honour the condition ([`require_conditional_writes`]).
pub async fn write_if_absent(location: &str, bytes: Bytes) -> Result<bool> {
    let (_, store, path) = resolve(location)?;
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
    static CHECKED: LazyLock<Mutex<Vec<usize>>> = LazyLock::new(|| Mutex::new(Vec::new()));
    let (_, store, _) = resolve(dir)?;
    let key = client_id(&store);
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
    let (object, store, _) = resolve(dir)?;
    let prefix = ObjectPath::from(object.key.trim_end_matches('/'));
    let _permit = PERMITS.acquire().await.map_err(|_| Error::new(ErrorKind::Io, "object store closed"))?;
    let mut stream = store.list(Some(&prefix));
    let mut out = Vec::new();
    while let Some(meta) = stream.next().await {
        let meta = meta.map_err(|e| io_error("list", dir, e))?;
        out.push(ObjectInfo {
            location: object.with_key(meta.location.to_string()).to_uri(),
            size_bytes: meta.size,
            modified_ms: meta.last_modified.timestamp_millis(),
        });
    }
    Ok(out)
}

/// Deletes `locations` in batches (S3 `DeleteObjects`, 1,000 keys a request); one result per
/// location, in order. A key that was already gone counts as deleted (S3 does not tell).
pub async fn delete_many(locations: Vec<String>) -> Vec<Result<()>> {
    let mut by_store: HashMap<usize, Batch> = HashMap::new();
    let mut results: Vec<Option<Result<()>>> = (0..locations.len()).map(|_| None).collect();
    for (i, location) in locations.iter().enumerate() {
        match resolve(location) {
            Ok((object, store, path)) => by_store
                .entry(client_id(&store))
                .or_insert_with(|| Batch { store, object, paths: Vec::new() })
                .paths
                .push((i, path)),
            Err(e) => results[i] = Some(Err(e)),
        }
    }
    for Batch { store, object, paths } in by_store.into_values() {
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
                                    format!("cannot delete '{}': {message}", object.with_key(p.to_string()).to_uri()),
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

/// The deletions [`delete_many`] sends through one client: the client, one of the locations (for
/// messages), and each path with its index among the locations.
struct Batch {
    store: Arc<dyn ObjectStore>,
    object: ObjectLocation,
    paths: Vec<(usize, ObjectPath)>,
}

/// One client's identity: what requests to the same store and credentials share (clients are
/// cached for the life of the process, so the address is never reused by another).
fn client_id(store: &Arc<dyn ObjectStore>) -> usize {
    Arc::as_ptr(store) as *const () as usize
}
