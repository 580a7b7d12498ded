//! Committing a new metadata file atomically, with optimistic concurrency.
//!
//! A commit writes the new `*.metadata.json` next to the current one, flushed to disk with its
//! directory, under a name that does not exist yet (a hard link of a fully written temporary
//! file, so no reader ever sees half a file), then moves the table's pointer:
//! - a SQL-catalog table: the catalog's `metadata_location`, with a conditional `UPDATE … WHERE
//!   metadata_location = <base>` — the catalog is the lock;
//! - a Glue table: `UpdateTable` under Glue's `VersionId` after checking the pointer is still the
//!   base ([`crate::catalog::glue`]); a call that was never answered leaves the outcome unknown;
//! - a path table (Hadoop-style `vN.metadata.json` names): the exclusive creation of
//!   `v{N+1}.metadata.json` is the lock, as in Java's `HadoopTableOperations` — of two writers
//!   based on `vN` exactly one creates `v{N+1}`; `metadata/version-hint.text` is then moved
//!   forward (never back), and readers of this crate follow `v{N+1}`, `v{N+2}`, … past a stale
//!   hint, as Java does.
//!
//! A path table with `<N>-<uuid>.metadata.json` names has no such lock (two writers create two
//! different names): [`is_exclusive`] says no, and the actions refuse to commit on it.
//! If the pointer moved since the base was read, the commit reports [`CommitOutcome::Conflict`]
//! and removes its metadata file.
//!
//! On object storage (`s3://`) the new metadata file is created with a conditional write
//! (`If-None-Match: *`), the store's equivalent of the exclusive link; a path table's commit first
//! checks that the store honours the condition ([`crate::store::require_conditional_writes`]).
//! A REST-catalog table is committed by the catalog ([`commit_table`]): the changes and their
//! requirements are POSTed, and the catalog writes the metadata file.

use std::path::{Path, PathBuf};

use crate::catalog::{CatalogTable, Published, Swap};
use crate::error::{Error, ErrorKind, Result};
use crate::store::local_path;
use crate::table::{Located, hadoop_version, metadata_version};

/// How a commit ended.
#[derive(Debug, Clone, PartialEq)]
pub enum CommitOutcome {
    /// The table now points at `location`. Once this is the outcome nothing the new metadata
    /// names may be deleted, whatever went wrong after the commit point: `warning` says what did
    /// (the version hint could not be moved, a directory could not be flushed) without undoing it.
    Committed { location: String, warning: Option<String> },
    /// Someone else committed first; nothing of ours is left behind.
    Conflict,
    /// The catalog or store did not answer (5xx, timeout, a dropped connection): the commit may
    /// have landed. The caller reloads and checks before retrying or cleaning up, and keeps every
    /// file when it cannot tell.
    Unknown(String),
}

impl CommitOutcome {
    /// Committed, with nothing to warn about.
    pub fn committed(location: String) -> Self {
        CommitOutcome::Committed { location, warning: None }
    }
}

/// Commits `new`, built on `base` (the table as `located` was read), by the table's catalog:
/// a catalog that takes changes ([`crate::catalog::Catalog::takes_changes`], a REST catalog) takes the changes ([`rest_updates`]) under `assert-table-uuid` and
/// `assert-ref-snapshot-id` on `main` (and `assert-default-sort-order-id` when a sort order is
/// added); any other table gets a new metadata file ([`commit`]).
///
/// A REST catalog assigns the id of an added sort order itself (as Java does: an equal order's
/// id, else the highest plus one), and no requirement can pin it; the new files name the id
/// `new` gave it. After the commit the catalog's metadata is read back: an order under another
/// id is a warning on the commit (the files are right, their `sort_order_id` is not).
pub fn commit_table(
    located: &Located,
    base: &crate::table::iceberg::IcebergTable,
    new: &iceberg::spec::TableMetadata,
) -> Result<CommitOutcome> {
    let Some(CatalogTable { backend: catalog, namespace, table, .. }) =
        located.catalog_table.as_ref().filter(|t| t.backend.takes_changes())
    else {
        return commit(located, &base.to_json(new)?);
    };
    if !base.stand_ins.is_empty() {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("a commit through a REST catalog cannot carry columns of type {}", base.stand_ins.describe()),
        ));
    }
    let main = base.metadata.snapshot_for_ref("main").map(|s| s.snapshot_id());
    let mut requirements = vec![
        serde_json::json!({ "type": "assert-table-uuid", "uuid": base.metadata.uuid().to_string() }),
        serde_json::json!({ "type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": main }),
    ];
    let added = added_sort_orders(&base.metadata, new);
    if !added.is_empty() {
        requirements.push(serde_json::json!({
            "type": "assert-default-sort-order-id",
            "default-sort-order-id": base.metadata.default_sort_order_id(),
        }));
    }
    let updates = rest_updates(&base.metadata, new, &added)?;
    Ok(match catalog.publish(namespace, table, serde_json::Value::Array(requirements), updates)? {
        Published::Committed(location) => {
            let warning = (!added.is_empty()).then(|| misplaced_sort_orders(&location, &added)).flatten();
            CommitOutcome::Committed { location, warning }
        }
        Published::Conflict => CommitOutcome::Conflict,
        Published::Unknown(why) => CommitOutcome::Unknown(why),
    })
}

/// The sort orders `new` has and `base` has not (by id).
fn added_sort_orders(
    base: &iceberg::spec::TableMetadata,
    new: &iceberg::spec::TableMetadata,
) -> Vec<iceberg::spec::SortOrder> {
    new.sort_orders_iter().filter(|o| base.sort_order_by_id(o.order_id).is_none()).map(|o| o.as_ref().clone()).collect()
}

/// After a REST commit that added `added`: a warning when the catalog's metadata at `location`
/// does not hold each of them under its id (or cannot be read to tell).
fn misplaced_sort_orders(location: &str, added: &[iceberg::spec::SortOrder]) -> Option<String> {
    let committed = match crate::table::iceberg::IcebergTable::load(location) {
        Ok(table) => table,
        Err(e) => return Some(format!("the committed metadata could not be read back to check its sort orders: {e}")),
    };
    let misplaced: Vec<String> = added
        .iter()
        .filter(|o| crate::table::iceberg::new_snapshot::check_added(&committed.metadata, o).is_err())
        .map(|o| o.order_id.to_string())
        .collect();
    (!misplaced.is_empty()).then(|| {
        format!(
            "the catalog stored the added sort order under another id than {} (another writer added one \
             meanwhile); the new files are correct, but their sort_order_id names the wrong order",
            misplaced.join(", ")
        )
    })
}

/// The REST updates that turn `base` into `new`: sort orders added (`added`, a sorted
/// compaction's own order: `added_sort_orders`), snapshots added and removed, refs set and removed, statistics of removed snapshots
/// removed. Anything else changed is refused (no action of ours changes schemas, specs,
/// properties or the default sort order; were one to, it must not be dropped silently).
pub fn rest_updates(
    base: &iceberg::spec::TableMetadata,
    new: &iceberg::spec::TableMetadata,
    added: &[iceberg::spec::SortOrder],
) -> Result<serde_json::Value> {
    use std::collections::{HashMap, HashSet};

    use iceberg::TableUpdate;
    use iceberg::spec::SnapshotReference;
    let refs = |m: &iceberg::spec::TableMetadata| -> Result<HashMap<String, SnapshotReference>> {
        let value = serde_json::to_value(m).map_err(|e| Error::new(ErrorKind::CorruptMetadata, e.to_string()))?;
        Ok(value.get("refs").cloned().map(serde_json::from_value).transpose().ok().flatten().unwrap_or_default())
    };
    let unchanged = base.location() == new.location()
        && base.properties() == new.properties()
        && base.current_schema_id() == new.current_schema_id()
        && base.schemas_iter().len() == new.schemas_iter().len()
        && base.default_partition_spec_id() == new.default_partition_spec_id()
        && base.partition_specs_iter().len() == new.partition_specs_iter().len()
        && base.default_sort_order_id() == new.default_sort_order_id()
        && base.sort_orders_iter().all(|o| new.sort_order_by_id(o.order_id) == Some(o));
    if !unchanged {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "this change touches more than snapshots and refs; it cannot be sent to a REST catalog (a bug: please \
             report it)",
        ));
    }
    let base_ids: HashSet<i64> = base.snapshots().map(|s| s.snapshot_id()).collect();
    let new_ids: HashSet<i64> = new.snapshots().map(|s| s.snapshot_id()).collect();
    let mut updates: Vec<TableUpdate> =
        added.iter().map(|sort_order| TableUpdate::AddSortOrder { sort_order: sort_order.clone() }).collect();
    let mut added_snapshots: Vec<_> = new.snapshots().filter(|s| !base_ids.contains(&s.snapshot_id())).collect();
    added_snapshots.sort_by_key(|s| s.sequence_number());
    for s in added_snapshots {
        updates.push(TableUpdate::AddSnapshot { snapshot: s.as_ref().clone() });
    }
    let (base_refs, new_refs) = (refs(base)?, refs(new)?);
    let mut removed_refs: Vec<&String> = base_refs.keys().filter(|k| !new_refs.contains_key(*k)).collect();
    removed_refs.sort();
    for name in removed_refs {
        updates.push(TableUpdate::RemoveSnapshotRef { ref_name: name.clone() });
    }
    let mut set_refs: Vec<(&String, &SnapshotReference)> =
        new_refs.iter().filter(|(k, r)| base_refs.get(*k) != Some(*r)).collect();
    set_refs.sort_by_key(|(k, _)| k.as_str());
    for (name, reference) in set_refs {
        updates.push(TableUpdate::SetSnapshotRef { ref_name: name.clone(), reference: reference.clone() });
    }
    let mut removed: Vec<i64> = base_ids.difference(&new_ids).copied().collect();
    removed.sort();
    for id in &removed {
        if base.statistics_for_snapshot(*id).is_some() && new.statistics_for_snapshot(*id).is_none() {
            updates.push(TableUpdate::RemoveStatistics { snapshot_id: *id });
        }
        if base.partition_statistics_for_snapshot(*id).is_some() && new.partition_statistics_for_snapshot(*id).is_none()
        {
            updates.push(TableUpdate::RemovePartitionStatistics { snapshot_id: *id });
        }
    }
    if !removed.is_empty() {
        updates.push(TableUpdate::RemoveSnapshots { snapshot_ids: removed });
    }
    serde_json::to_value(&updates)
        .map_err(|e| Error::new(ErrorKind::CorruptMetadata, format!("cannot encode the commit: {e}")))
}

/// Where the metadata file after `base_location` goes: `v{N+1}.metadata.json` or
/// `{N+1:05}-{uuid}.metadata.json`, following the base's naming.
pub fn next_metadata_location(base_location: &str) -> String {
    let (dir, name) = base_location.rsplit_once('/').unwrap_or((".", base_location));
    let next = match metadata_version(name) {
        Some(v) if name.starts_with('v') => format!("v{}.metadata.json", v + 1),
        Some(v) => format!("{:05}-{}.metadata.json", v + 1, uuid::Uuid::new_v4()),
        None => format!("{}.metadata.json", uuid::Uuid::new_v4()),
    };
    format!("{dir}/{next}")
}

/// Whether a commit on `located` excludes every other writer: a catalog entry (conditional
/// update) or a path table with `vN.metadata.json` names (the next version is created
/// exclusively). A path table with `<N>-<uuid>.metadata.json` names is neither: another writer
/// can commit beside us, or a catalog we do not know of may keep pointing at its own file.
pub fn is_exclusive(located: &Located) -> bool {
    located.catalog_table.is_some()
        || hadoop_version(Path::new(local_path(&located.metadata_location).unwrap_or(&located.metadata_location)))
            .is_some()
}

/// [`is_exclusive`], or an error that says why not and what to do: named by a metadata file
/// with no catalog entry and no `vN.metadata.json` name, a commit could not exclude other
/// writers (and deleting files after it would not be safe). Dry runs need no such commit.
pub fn require_exclusive(located: &Located) -> Result<()> {
    if is_exclusive(located) {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Unsupported,
        "this table is named by a metadata file that has no catalog entry and no vN.metadata.json name, so a \
         commit could not exclude other writers: name the table through its catalog (namespace.table); a dry run \
         works",
    ))
}

/// Flushes a directory's entries (a new or renamed file in it) to disk.
fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// Writes `bytes` to a flushed temporary file beside `target`.
fn write_temporary(target: &Path, bytes: &[u8]) -> Result<PathBuf> {
    use std::io::Write;
    let tmp = target.with_file_name(format!(".{}.tmp", uuid::Uuid::new_v4()));
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e.into())
        }
    }
}

/// What [`write_new_file`] did.
#[derive(Debug)]
enum NewFile {
    /// `target` now exists with the bytes; `unflushed`: its directory entry could not be flushed
    /// (the file is there for every reader, but a crash of the machine could lose it).
    Created { unflushed: Option<String> },
    /// `target` existed already; nothing was written.
    Exists,
}

/// Writes `bytes` to `target` only if `target` does not exist yet; flushed with its directory.
/// An error means `target` was not created.
fn write_new_file(target: &Path, bytes: &[u8]) -> Result<NewFile> {
    let tmp = write_temporary(target, bytes)?;
    let linked = std::fs::hard_link(&tmp, target);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            let unflushed = target.parent().and_then(|dir| sync_dir(dir).err()).map(|e| e.to_string());
            Ok(NewFile::Created { unflushed })
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(NewFile::Exists),
        Err(e) => Err(e.into()),
    }
}

/// Replaces `target` with `bytes` atomically (a flushed temporary file renamed over it).
pub fn replace_file(target: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = write_temporary(target, bytes)?;
    if let Err(e) = std::fs::rename(&tmp, target) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e.into());
    }
    if let Some(dir) = target.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Commits `json` (a metadata file's contents, [`crate::table::iceberg::IcebergTable::to_json`]) as the
/// successor of `located` (whose metadata the change was based on). Refuses a table whose commits
/// are not exclusive ([`is_exclusive`]).
///
/// The commit point of a path table is the creation of `v{N+1}.metadata.json` (readers follow
/// versions past the hint); of a catalog table, the catalog's pointer. What fails after it — the
/// hint, a directory flush — is a warning on [`CommitOutcome::Committed`], never an error: an
/// error makes callers remove what they wrote, which the committed metadata names.
pub fn commit(located: &Located, json: &[u8]) -> Result<CommitOutcome> {
    require_exclusive(located)?;
    if local_path(&located.metadata_location).is_none() {
        return crate::runtime::block_on(commit_remote(located, json))?;
    }
    let base = &located.metadata_location;
    let new_location = next_metadata_location(base);
    let new_path = PathBuf::from(local_path(&new_location).unwrap_or(&new_location));
    if located.catalog_table.is_none() && hint_is_ahead_of(&new_path)? {
        return Ok(CommitOutcome::Conflict);
    }
    let unflushed = match write_new_file(&new_path, json)? {
        NewFile::Exists => return Ok(CommitOutcome::Conflict),
        NewFile::Created { unflushed } => unflushed,
    };
    let Some(table) = &located.catalog_table else {
        // Committed: v{N+1} exists. Only the hint is left to move.
        let warnings: Vec<String> = unflushed
            .map(|e| format!("the metadata directory could not be flushed to disk ({e})"))
            .into_iter()
            .chain(advance_version_hint(&new_path).err().map(|e| hint_warning(&e.to_string())))
            .collect();
        return Ok(CommitOutcome::Committed {
            location: new_location,
            warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
        });
    };
    // A catalog table is committed only once its pointer moves, so a metadata file that may not
    // survive a crash is not pointed at.
    let swapped = match unflushed {
        Some(e) => Err(Error::new(
            ErrorKind::Io,
            format!("the new metadata file could not be flushed to disk ({e}); nothing was committed"),
        )),
        None => crate::runtime::block_on(swap_catalog_pointer(table, base, &new_location)).and_then(|r| r),
    };
    match swapped {
        Ok(Swap::Moved) => Ok(CommitOutcome::committed(new_location)),
        Ok(Swap::Conflict) => {
            let _ = std::fs::remove_file(&new_path);
            Ok(CommitOutcome::Conflict)
        }
        // The pointer may name the new file: it stays.
        Ok(Swap::Unknown(why)) => Ok(CommitOutcome::Unknown(why)),
        Err(e) => {
            let _ = std::fs::remove_file(&new_path);
            Err(e)
        }
    }
}

/// The warning of a commit whose `version-hint.text` could not be moved forward.
fn hint_warning(error: &str) -> String {
    format!(
        "committed, but metadata/version-hint.text could not be updated ({error}): readers that follow versions \
         past the hint (Java, this extension) see the commit; readers that trust the hint alone see the version \
         before it until the next commit moves the hint"
    )
}

/// [`commit`] on object storage: the new metadata file by a conditional write, then the
/// catalog's pointer, or (a path table) `metadata/version-hint.text`. A conditional write whose
/// answer was lost (an error, or "already exists" from the client's own retry of a write that
/// had landed) is settled by reading the object back: our bytes there mean it landed.
async fn commit_remote(located: &Located, json: &[u8]) -> Result<CommitOutcome> {
    use crate::store;
    let base = &located.metadata_location;
    let new_location = next_metadata_location(base);
    let metadata_dir = new_location.rsplit_once('/').map_or(new_location.as_str(), |(d, _)| d).to_string();
    let hint = format!("{metadata_dir}/version-hint.text");
    let new_version = hadoop_version(Path::new(&new_location));
    if located.catalog_table.is_none() {
        store::require_conditional_writes(&metadata_dir).await?;
        if let (Some(h), Some(v)) = (remote_hint_version(&hint).await?, new_version)
            && h >= v
        {
            return Ok(CommitOutcome::Conflict);
        }
    }
    let written = store::write_if_absent(&new_location, bytes::Bytes::copy_from_slice(json)).await;
    match settle_write(&new_location, json, written).await {
        Write::Landed => {}
        Write::Refused => return Ok(CommitOutcome::Conflict),
        Write::Failed(e) => return Err(e),
        // A catalog table is committed only by its pointer, which has not moved: whatever
        // landed, nothing references it.
        Write::Unconfirmed(why) if located.catalog_table.is_some() => {
            return Err(Error::new(ErrorKind::Io, format!("'{new_location}': {why}; nothing was committed")));
        }
        Write::Unconfirmed(why) => {
            return Ok(CommitOutcome::Unknown(format!("the write of '{new_location}' was not confirmed: {why}")));
        }
    }
    match &located.catalog_table {
        Some(table) => match swap_catalog_pointer(table, base, &new_location).await {
            Ok(Swap::Moved) => Ok(CommitOutcome::committed(new_location)),
            Ok(Swap::Conflict) => {
                let _ = store::delete_many(vec![new_location]).await;
                Ok(CommitOutcome::Conflict)
            }
            // The pointer may name the new file: it stays.
            Ok(Swap::Unknown(why)) => Ok(CommitOutcome::Unknown(why)),
            Err(e) => {
                let _ = store::delete_many(vec![new_location]).await;
                Err(e)
            }
        },
        None => {
            // Committed: the new version exists. The hint moves forward only, as on disk.
            let moved: Result<()> = async {
                if let Some(v) = new_version
                    && store::exists(&hint).await?
                    && remote_hint_version(&hint).await?.is_none_or(|h| h < v)
                {
                    store::write(&hint, bytes::Bytes::from(v.to_string())).await?;
                }
                Ok(())
            }
            .await;
            Ok(CommitOutcome::Committed {
                location: new_location,
                warning: moved.err().map(|e| hint_warning(e.message())),
            })
        }
    }
}

/// What became of a conditional write ([`settle_write`]).
enum Write {
    /// Our bytes are there.
    Landed,
    /// Another writer's object is there.
    Refused,
    /// Refused before anything was sent (a store without conditional writes): nothing landed.
    Failed(Error),
    /// The write failed and nothing is there now, or what is there could not be read: it may
    /// still land (a request the store finishes after the client gave up), so nothing it would
    /// reference may be deleted on this evidence.
    Unconfirmed(String),
}

/// Settles a conditional write of `bytes` to `location` whose answer was `written`: an answer
/// of "already exists" or an error (a 503 after the object landed, then the client's own retry
/// answered 412) is checked by reading the object back — our bytes mean it landed.
async fn settle_write(location: &str, bytes: &[u8], written: Result<bool>) -> Write {
    let write_error = match written {
        Ok(true) => return Write::Landed,
        Ok(false) => None,
        Err(e) if e.kind() == ErrorKind::Unsupported => return Write::Failed(e),
        Err(e) => Some(e),
    };
    match (crate::store::read(location).await, write_error) {
        (Ok(there), _) if there.as_ref() == bytes => Write::Landed,
        (Ok(_), _) => Write::Refused,
        (Err(e), None) if e.kind() == ErrorKind::NotFound => Write::Refused,
        (Err(e), None) => Write::Unconfirmed(format!("it may be ours, but reading it back failed: {}", e.message())),
        (Err(e), Some(w)) if e.kind() == ErrorKind::NotFound => {
            Write::Unconfirmed(format!("{}; it is not there now, but may still land", w.message()))
        }
        (Err(e), Some(w)) => {
            Write::Unconfirmed(format!("{}; reading it back failed too: {}", w.message(), e.message()))
        }
    }
}

/// The version an object-store `version-hint.text` names, if it exists and names one.
async fn remote_hint_version(hint: &str) -> Result<Option<u64>> {
    if !crate::store::exists(hint).await? {
        return Ok(None);
    }
    let text = crate::store::read(hint).await?;
    let text = String::from_utf8_lossy(&text);
    let text = text.trim();
    Ok(text.parse::<u64>().ok().or_else(|| metadata_version(text.rsplit('/').next().unwrap_or(text))))
}

async fn swap_catalog_pointer(table: &CatalogTable, base: &str, new_location: &str) -> Result<Swap> {
    let to = crate::catalog::Move { namespace: &table.namespace, table: &table.table, base, new_location };
    table.backend.swap(to).await
}

/// The version `metadata/version-hint.text` beside `new_path` names, if any.
fn hint_version(new_path: &Path) -> Result<Option<u64>> {
    let Some(hint) = new_path.parent().map(|d| d.join("version-hint.text")) else { return Ok(None) };
    if !hint.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&hint)?;
    let text = text.trim();
    Ok(text.parse::<u64>().ok().or_else(|| metadata_version(text.rsplit('/').next().unwrap_or(text))))
}

/// Whether the hint already names `new_path`'s version or a later one: the base is stale.
fn hint_is_ahead_of(new_path: &Path) -> Result<bool> {
    Ok(matches!((hint_version(new_path)?, hadoop_version(new_path)), (Some(h), Some(v)) if h >= v))
}

/// Moves `metadata/version-hint.text`, when the table has one, forward to `new_path`'s version
/// (never back: a writer that committed a later version meanwhile keeps its hint).
fn advance_version_hint(new_path: &Path) -> Result<()> {
    let (Some(dir), Some(version)) = (new_path.parent(), hadoop_version(new_path)) else { return Ok(()) };
    let hint = dir.join("version-hint.text");
    if !hint.is_file() || hint_version(new_path)?.is_some_and(|h| h >= version) {
        return Ok(());
    }
    replace_file(&hint, version.to_string().as_bytes())
}

/// After a commit whose outcome was not reported: the metadata now current when it holds
/// `snapshot_id` (the commit landed), `None` when it does not.
pub fn snapshot_landed(located: &Located, snapshot_id: i64) -> Result<Option<String>> {
    let fresh = relocate(located)?;
    let table = crate::table::iceberg::IcebergTable::load(&fresh.metadata_location)?;
    Ok(table.metadata.snapshot_by_id(snapshot_id).is_some().then_some(fresh.metadata_location))
}

/// Where the table's current metadata is now (the catalog's pointer, or the version hint).
pub fn relocate(located: &Located) -> Result<Located> {
    match &located.catalog_table {
        Some(t) => {
            let fresh = t.reload()?;
            Ok(Located { metadata_location: fresh.metadata_location.clone(), catalog_table: Some(fresh) })
        }
        None if local_path(&located.metadata_location).is_none() => {
            let dir = located
                .metadata_location
                .rsplit_once("/metadata/")
                .map(|(d, _)| d.to_string())
                .ok_or_else(|| Error::invalid("metadata file is not in a metadata/ directory"))?;
            crate::table::locate(&dir, &crate::table::LocateOptions { latest_metadata: true, ..Default::default() })
        }
        None => {
            let base = Path::new(local_path(&located.metadata_location).unwrap_or(&located.metadata_location));
            let dir = base
                .parent()
                .and_then(Path::parent)
                .ok_or_else(|| Error::invalid("metadata file has no table directory"))?;
            // The hint when there is one, else the newest metadata file (`locate` prefers the hint).
            crate::table::locate(
                &dir.to_string_lossy(),
                &crate::table::LocateOptions { latest_metadata: true, ..Default::default() },
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::TableMetadata;

    #[test]
    fn next_locations_follow_the_base_naming() {
        assert_eq!(next_metadata_location("/t/metadata/v7.metadata.json"), "/t/metadata/v8.metadata.json");
        let next = next_metadata_location("file:///t/metadata/00003-abc.metadata.json");
        assert!(next.starts_with("file:///t/metadata/00004-") && next.ends_with(".metadata.json"), "{next}");
    }

    #[test]
    fn path_commits_are_exclusive_only_with_hadoop_names() {
        let located = |p: &str| Located { metadata_location: p.to_string(), catalog_table: None };
        assert!(is_exclusive(&located("/t/metadata/v3.metadata.json")));
        assert!(is_exclusive(&located("file:///t/metadata/v3.gz.metadata.json")));
        assert!(!is_exclusive(&located("/t/metadata/00003-6b1c.metadata.json")));
        let err = commit(&located("/t/metadata/00003-6b1c.metadata.json"), &json(&empty_metadata())).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported);
    }

    fn json(metadata: &TableMetadata) -> Vec<u8> {
        serde_json::to_vec(metadata).unwrap()
    }

    fn empty_metadata() -> TableMetadata {
        use iceberg::spec::{NestedField, PrimitiveType, Schema, SortOrder, Type, UnboundPartitionSpec};
        let schema = Schema::builder()
            .with_fields(vec![NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into()])
            .build()
            .unwrap();
        let spec = UnboundPartitionSpec::builder().build();
        iceberg::spec::TableMetadataBuilder::new(
            schema,
            spec,
            SortOrder::unsorted_order(),
            "/t".into(),
            iceberg::spec::FormatVersion::V2,
            Default::default(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata
    }

    #[test]
    fn of_two_writers_on_one_base_one_commits_and_the_hint_never_goes_back() {
        let dir = std::env::temp_dir().join(format!("lakehouse-commit-{}", uuid::Uuid::new_v4()));
        let metadata_dir = dir.join("metadata");
        std::fs::create_dir_all(&metadata_dir).unwrap();
        let md = empty_metadata();
        std::fs::write(metadata_dir.join("v1.metadata.json"), serde_json::to_vec(&md).unwrap()).unwrap();
        std::fs::write(metadata_dir.join("version-hint.text"), "1").unwrap();
        let base = Located {
            metadata_location: metadata_dir.join("v1.metadata.json").to_string_lossy().into_owned(),
            catalog_table: None,
        };
        let first = commit(&base, &json(&md)).unwrap();
        assert!(
            matches!(&first, CommitOutcome::Committed { location, warning: None } if location.ends_with("v2.metadata.json")),
            "{first:?}"
        );
        assert_eq!(commit(&base, &json(&md)).unwrap(), CommitOutcome::Conflict, "v2 exists: the second writer loses");
        assert_eq!(std::fs::read_to_string(metadata_dir.join("version-hint.text")).unwrap(), "2");
        // A base behind the hint (another writer is at v5) is a conflict before anything is
        // written, and the hint stays where it is.
        std::fs::write(metadata_dir.join("version-hint.text"), "5").unwrap();
        let v2 =
            Located { metadata_location: metadata_dir.join("v2.metadata.json").to_string_lossy().into_owned(), ..base };
        assert_eq!(commit(&v2, &json(&md)).unwrap(), CommitOutcome::Conflict);
        assert!(!metadata_dir.join("v3.metadata.json").exists());
        assert_eq!(std::fs::read_to_string(metadata_dir.join("version-hint.text")).unwrap(), "5");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn write_new_file_refuses_to_overwrite() {
        let dir = std::env::temp_dir().join(format!("lakehouse-commit-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("v2.metadata.json");
        assert!(matches!(write_new_file(&target, b"first").unwrap(), NewFile::Created { unflushed: None }));
        assert!(matches!(write_new_file(&target, b"second").unwrap(), NewFile::Exists));
        assert_eq!(std::fs::read(&target).unwrap(), b"first");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left behind");
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// A new snapshot's commit that landed.
#[derive(Debug, Clone, PartialEq)]
pub struct Landed {
    /// The snapshot's id.
    pub snapshot_id: i64,
    /// The metadata file that made it current.
    pub location: String,
    /// What went wrong after the commit point without undoing it.
    pub warning: Option<String>,
}

/// Settles one attempt at committing a new snapshot (`attempt`: the commit's outcome and the
/// snapshot's id, or the error that stopped it before the commit). `Some` when it landed (also
/// when the catalog did not confirm it but the reloaded table shows it); `None` on a conflict,
/// with the files written (`scratch`) removed and `located` moved to the new head, to plan
/// again; an error otherwise, with `scratch` removed — except after a commit nobody confirmed,
/// which may still land: then `written` (what they are, for the message) are left in place.
pub fn settle_attempt(
    located: &mut Located,
    attempt: Result<(CommitOutcome, i64)>,
    scratch: &[String],
    written: &str,
) -> Result<Option<Landed>> {
    let remove = || crate::store::remove_quietly(scratch.iter().map(String::as_str));
    match attempt {
        Ok((CommitOutcome::Committed { location, warning }, snapshot_id)) => {
            Ok(Some(Landed { snapshot_id, location, warning }))
        }
        Ok((CommitOutcome::Unknown(why), snapshot_id)) => match snapshot_landed(located, snapshot_id)? {
            Some(location) => Ok(Some(Landed { snapshot_id, location, warning: None })),
            None => Err(Error::new(
                ErrorKind::CommitUnknown,
                format!(
                    "the catalog or store did not confirm the commit ({why}) and the reloaded table does not show it; the \
                     {written} were left in place (orphan removal deletes them once nothing references them)"
                ),
            )),
        },
        Ok((CommitOutcome::Conflict, _)) => {
            remove();
            *located = relocate(located)?;
            Ok(None)
        }
        Err(e) => {
            remove();
            Err(e)
        }
    }
}
