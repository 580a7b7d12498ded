//! How a Delta rewrite reads and writes the table's columns: the top-level fields without the
//! partition columns (their values live in the log), in schema order, each read and written as
//! its Delta type. A table that asks for its partition columns in every new file
//! (`materializePartitionColumns`; the hint `delta.writePartitionColumnsToParquet`) gets them
//! after the data columns, each the partition's value from the log cast to its type (what
//! readers read, whether or not an older file holds the column), with no statistics.
//!
//! Under column mapping (`delta.columnMapping.mode` `name` or `id`, also the legacy (2, 5)
//! protocol) a column lives in the files under its physical name
//! (`delta.columnMapping.physicalName`, nested fields too) with its field id
//! (`delta.columnMapping.id`): files are read by physical name — each file's field ids checked
//! against the table's first, so that a column is never read by a name that now means another
//! field — and written with physical names and `parquet.field.id`s, as Spark writes them. Stats
//! are keyed by physical names; users see (and sort by) logical names. A dropped column is in the
//! files but not in the schema: it is not read, so not written back.
//!
//! A column whose type was widened (`typeWidening`) is read from older files with the widened
//! type (the cast below), so every rewritten file has the table's current types. A widened
//! nested field (`delta.typeChanges` on a struct field, or on a field with `fieldPath`
//! `element`, `key`, `value`) has its whole top-level column cast to the nested type, which
//! DuckDB does by field name (a field a file lacks comes out NULL, as readers see it); the
//! schema and its `delta.typeChanges` are left as they are (the protocol lets a writer drop them
//! only once every file has the new types, which a compaction of some files does not know).
//!
//! Under row tracking ([`crate::table::delta::row_tracking`]) every rewritten row keeps its id
//! and commit version: the materialized columns are written as
//! `coalesce(materialized, baseRowId + file_row_number)` and
//! `coalesce(materialized, defaultRowCommitVersion)` of the file the row comes from.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::action::compact::deletion_vectors::DeletedPositions;
use crate::action::layout::{OrderedRows, RowOrder};
use crate::duck::{Nested, quote_file, quote_ident, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::plan::layout::{Layout, OrderTerm};
use crate::table::delta::{DeltaLakeTable, LiveFile};

const PHYSICAL_NAME: &str = "delta.columnMapping.physicalName";

/// Per data file (as DuckDB names it): `baseRowId` and `defaultRowCommitVersion`.
pub(crate) type RowIds = std::collections::BTreeMap<String, (Option<i64>, Option<i64>)>;
const FIELD_ID: &str = "delta.columnMapping.id";

/// One data column.
pub(crate) struct DataColumn {
    /// Its name in the files and in the stats: the physical name under column mapping.
    pub(crate) name: String,
    /// The name users see.
    pub(crate) logical: String,
    /// DuckDB's type for it (struct children by their names in the files); `None`: no form.
    pub(crate) ty: Option<String>,
    /// The Delta type, as the schema writes it.
    pub(crate) delta: Value,
    /// Under column mapping: its field id and its `FIELD_IDS` entry (nested ids included).
    mapped: Option<(i64, String)>,
    /// Whether its type, or the type of a field nested in it (a struct field, a list's element,
    /// a map's key or value), was widened (`delta.typeChanges` on it or inside it): the whole
    /// column is cast, nested types included, so older files' narrow fields are written wide.
    pub(crate) widened: bool,
}

/// The columns a rewrite reads and writes ([module docs](self)).
pub(crate) struct DeltaColumns {
    /// The data columns, in schema order.
    pub(crate) data: Vec<DataColumn>,
    /// Columns (by file name) that get min/max statistics (`delta.dataSkippingNumIndexedCols` /
    /// `delta.dataSkippingStatsColumns`).
    pub(crate) indexed: Vec<String>,
    pub(crate) compression: &'static str,
    /// The order the rewrite writes rows in ([`crate::action::layout`]).
    pub(crate) order: RowOrder,
    /// Under column mapping: every mapped field of the data columns, nested ones too (id,
    /// physical name).
    mapped_fields: Vec<(i64, String)>,
    /// Under row tracking: the materialized row-id and row-commit-version columns.
    pub(crate) row_tracking: Option<(String, String)>,
    /// The partition columns every new file must hold ([`materializes_partition_columns`]), in
    /// schema order, written after the data columns with their partition's value from the log;
    /// empty when files are written without them.
    pub(crate) materialized: Vec<DataColumn>,
}

/// Whether new files must (`materializePartitionColumns`; `icebergCompatV1`/`V2`, whose Iceberg
/// readers take partition values from the files) or should (the table property
/// `delta.writePartitionColumnsToParquet` = `true`, a hint the protocol lets writers follow) hold
/// the partition columns.
pub(crate) fn materializes_partition_columns(table: &DeltaLakeTable) -> bool {
    table
        .features("writerFeatures")
        .iter()
        .any(|f| matches!(f.as_str(), "materializePartitionColumns" | "icebergCompatV1" | "icebergCompatV2"))
        || table.property("delta.writePartitionColumnsToParquet").is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

impl DeltaColumns {
    pub(crate) fn of(table: &DeltaLakeTable) -> Result<Self> {
        let mapped = table.property("delta.columnMapping.mode").is_some_and(|m| m != "none");
        let partition: Vec<String> = table.partition_columns();
        let materialize = materializes_partition_columns(table);
        let mut data = Vec::new();
        let mut materialized = Vec::new();
        let mut all_mapped = Vec::new();
        for f in table.fields() {
            let Some(logical) = f.get("name").and_then(Value::as_str) else { continue };
            let is_partition = partition.iter().any(|p| p == logical);
            if is_partition && !materialize {
                continue;
            }
            let delta = f.get("type").cloned().unwrap_or(Value::Null);
            let name = if mapped { physical_name(f)? } else { logical.to_string() };
            let mapped = match mapped {
                true => {
                    mapped_fields(f, &mut all_mapped)?;
                    Some((field_id(f)?, field_ids(f)?))
                }
                false => None,
            };
            let column = DataColumn {
                widened: has_type_changes(f),
                ty: duckdb_type(&delta, mapped.is_some()),
                name,
                logical: logical.to_string(),
                delta,
                mapped,
            };
            match is_partition {
                true => materialized.push(column),
                false => data.push(column),
            }
        }
        let by_logical = |wanted: &str| data.iter().find(|c| c.logical == wanted).map(|c| c.name.clone());
        let indexed = match table.property("delta.dataSkippingStatsColumns") {
            Some(list) => list.split(',').filter_map(|c| by_logical(c.trim().trim_matches('`'))).collect(),
            None => {
                let n = table
                    .property("delta.dataSkippingNumIndexedCols")
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(32);
                let take = if n < 0 { usize::MAX } else { n as usize };
                data.iter().take(take).map(|c| c.name.clone()).collect()
            }
        };
        let compression = match table.property("delta.parquet.compression.codec") {
            Some("snappy") => "snappy",
            Some("gzip") => "gzip",
            Some("uncompressed") => "uncompressed",
            _ => "zstd",
        };
        let row_tracking =
            table.row_tracking.as_ref().map(|t| (t.row_id_column.clone(), t.commit_version_column.clone()));
        Ok(Self {
            data,
            indexed,
            compression,
            order: RowOrder::Unordered,
            mapped_fields: all_mapped,
            row_tracking,
            materialized,
        })
    }

    /// The names of the columns a rewrite writes, in order: the data columns' names in the
    /// files, then the materialized row-tracking columns.
    pub(crate) fn names(&self) -> Vec<&str> {
        let tracking = self.row_tracking.iter().flat_map(|(id, version)| [id.as_str(), version.as_str()]);
        self.data.iter().map(|c| c.name.as_str()).chain(tracking).collect()
    }

    /// `SELECT` of every data column of `files` by its name in the files, as its Delta type:
    /// primitive columns cast (a Spark INT96 timestamp becomes the instant it was written as; a
    /// widened column read from an older file takes its new type), a column no file has comes
    /// out NULL of its type. With `deleted`, the rows its deletion vectors delete are left out,
    /// as a reader of the table leaves them out.
    ///
    /// `row_ids`: under row tracking, each file's `baseRowId` and `defaultRowCommitVersion` (a
    /// file not named has materialized ids only, as every file a rewrite wrote).
    ///
    /// `partition`: the partition values (from the log) of the files, all of one partition, when
    /// the materialized partition columns are to be selected too (a rewrite), each as its
    /// partition value ([`partition_value_sql`]): what readers read, whatever a file holds.
    pub(crate) fn select_sql(
        &self,
        conn: &Nested,
        files: &[String],
        deleted: Option<&DeletedPositions>,
        row_ids: &RowIds,
        partition: Option<&HashMap<String, Option<String>>>,
    ) -> Result<String> {
        let list = files.iter().map(|f| quote_file(f)).collect::<Vec<_>>().join(", ");
        if !self.mapped_fields.is_empty() {
            self.check_field_ids(conn, &list)?;
        }
        let plain = format!("read_parquet([{list}], union_by_name = true)");
        let present: HashSet<String> = conn
            .query(&format!("SELECT column_name::VARCHAR FROM (DESCRIBE SELECT * FROM {plain})"))?
            .rows
            .iter()
            .filter_map(|r| r[0].text().map(str::to_string))
            .collect();
        let mut select = Vec::new();
        for c in &self.data {
            let id = quote_ident(&c.name);
            select.push(match (present.contains(&c.name), &c.ty) {
                (true, Some(ty)) if !ty.contains('(') || ty.starts_with("DECIMAL") || c.widened => {
                    format!("CAST({id} AS {ty}) AS {id}")
                }
                (true, None) if c.widened => {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "column '{}' was widened (typeWidening), and its type has no DuckDB form to write it in; \
                             nothing was committed",
                            c.logical
                        ),
                    ));
                }
                (true, _) => id,
                (false, Some(ty)) => format!("CAST(NULL AS {ty}) AS {id}"),
                (false, None) => {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "column '{}' is in none of the files and its type has no DuckDB form; nothing was committed",
                            c.logical
                        ),
                    ));
                }
            });
        }
        if let Some(values) = partition {
            for c in &self.materialized {
                let value = values.get(&c.name).cloned().flatten();
                select.push(format!("{} AS {}", partition_value_sql(c, value.as_deref())?, quote_ident(&c.name)));
            }
        }
        let tracked = match &self.row_tracking {
            Some((id_column, version_column)) => {
                let stored = |column: &str| if present.contains(column) { quote_ident(column) } else { "NULL".into() };
                select.push(format!(
                    "coalesce({}, __rt.__rt_base + __d.file_row_number)::BIGINT AS {}",
                    stored(id_column),
                    quote_ident(id_column)
                ));
                select.push(format!(
                    "coalesce({}, __rt.__rt_version)::BIGINT AS {}",
                    stored(version_column),
                    quote_ident(version_column)
                ));
                let values: Vec<String> = row_ids
                    .iter()
                    .map(|(file, (base, version))| {
                        let number = |n: &Option<i64>| n.map_or("NULL".to_string(), |n| n.to_string());
                        format!("({}, {}::BIGINT, {}::BIGINT)", quote_literal(file), number(base), number(version))
                    })
                    .chain(std::iter::once("(NULL::VARCHAR, NULL::BIGINT, NULL::BIGINT)".to_string()))
                    .collect();
                format!(
                    " LEFT JOIN (VALUES {}) AS __rt(__rt_file, __rt_base, __rt_version) ON __rt.__rt_file = __d.__lakehouse_file",
                    values.join(", ")
                )
            }
            None => String::new(),
        };
        let source = match (deleted, tracked.is_empty()) {
            (None, true) => plain,
            _ => format!(
                "read_parquet([{list}], union_by_name = true, filename = '__lakehouse_file', file_row_number = true) AS __d{tracked} {}",
                deleted.map(|d| d.anti_join("__d")).unwrap_or_default()
            ),
        };
        Ok(format!("SELECT {} FROM {source}", select.join(", ")))
    }

    /// Under column mapping: refuses files in which a mapped field's id is found under another
    /// name, or a top-level physical name carries another field id (reading by name would then
    /// read the wrong field, or none).
    fn check_field_ids(&self, conn: &Nested, list: &str) -> Result<()> {
        let schema = conn.query(&format!(
            "SELECT file_name::VARCHAR, name::VARCHAR, field_id::BIGINT FROM parquet_schema([{list}]) WHERE field_id IS NOT NULL"
        ))?;
        let by_id: HashMap<i64, &str> = self.mapped_fields.iter().map(|(id, name)| (*id, name.as_str())).collect();
        for row in &schema.rows {
            let (Some(file), Some(name), Some(id)) = (row[0].text(), row[1].text(), row[2].opt_int()?) else {
                continue;
            };
            let refuse = |why: String| {
                Err(Error::new(
                    ErrorKind::CorruptMetadata,
                    format!("'{file}' {why}, so it cannot be read by physical name; nothing was rewritten"),
                ))
            };
            if let Some(c) = self.data.iter().find(|c| c.name == name)
                && let Some((expected, _)) = c.mapped
                && expected != id
            {
                return refuse(format!(
                    "names field id {id} '{name}', which the table maps to id {expected} ('{}')",
                    c.logical
                ));
            }
            if let Some(physical) = by_id.get(&id)
                && *physical != name
            {
                return refuse(format!("holds field id {id} (physical name '{physical}') under the name '{name}'"));
            }
        }
        Ok(())
    }

    /// Whether the table maps columns (then files carry field ids).
    pub(crate) fn is_mapped(&self) -> bool {
        !self.mapped_fields.is_empty()
    }

    /// Under column mapping: refuses a written file that lacks a mapped field's id under its
    /// physical name (a reader in `id` mode would read that field as NULL).
    pub(crate) fn check_written_ids(&self, conn: &Nested, file: &str) -> Result<()> {
        if self.mapped_fields.is_empty() {
            return Ok(());
        }
        let written: HashSet<(i64, String)> = conn
            .query(&format!(
                "SELECT field_id::BIGINT, name::VARCHAR FROM parquet_schema({}) WHERE field_id IS NOT NULL",
                quote_file(file)
            ))?
            .rows
            .iter()
            .filter_map(|r| Some((r[0].opt_int().ok()??, r[1].text()?.to_string())))
            .collect();
        match self.mapped_fields.iter().find(|f| !written.contains(f)) {
            None => Ok(()),
            Some((id, name)) => Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "rewrite check failed: '{file}' lacks field id {id} for '{name}', which readers by field id need; \
                     nothing was committed"
                ),
            )),
        }
    }

    /// The logical names of the columns a rewrite can sort by: primitive ones.
    pub(crate) fn sortable(&self) -> Vec<String> {
        self.data
            .iter()
            .filter(|c| {
                c.ty.as_deref().is_some_and(|t| !t.starts_with("STRUCT") && !t.starts_with("MAP") && !t.ends_with(']'))
            })
            .map(|c| c.logical.clone())
            .collect()
    }

    /// `layout` (resolved among [`DeltaColumns::sortable`]) with each column by its name in the
    /// files.
    pub(crate) fn in_files(&self, layout: &Layout) -> Layout {
        let name = |logical: &str| {
            self.data.iter().find(|c| c.logical == logical).map_or_else(|| logical.to_string(), |c| c.name.clone())
        };
        match layout {
            Layout::Binpack => Layout::Binpack,
            Layout::Sort { terms, table_order } => Layout::Sort {
                terms: terms.iter().map(|t| OrderTerm { column: name(&t.column), ..t.clone() }).collect(),
                table_order: *table_order,
            },
            Layout::Zorder(columns) => Layout::Zorder(columns.iter().map(|c| name(c)).collect()),
        }
    }

    /// The DuckDB type of the column named `name` in the files.
    pub(crate) fn type_of(&self, name: &str) -> String {
        self.data.iter().find(|c| c.name == name).and_then(|c| c.ty.clone()).unwrap_or_default()
    }

    /// The COPY of `inputs` into `target` ([`DeltaColumns::select_sql`]), in the layout's order,
    /// deletion vectors not applied (a sample that measures the output's size).
    pub(crate) fn copy_sql(&self, conn: &Nested, inputs: &[&LiveFile], target: &str) -> Result<String> {
        Ok(self.copy_to(&self.ordered_select(conn, inputs, None)?.sql(), target))
    }

    /// The `baseRowId` and `defaultRowCommitVersion` of `files` by the name DuckDB reads them by
    /// (empty without row tracking).
    pub(crate) fn row_ids(&self, files: &[&LiveFile]) -> RowIds {
        if self.row_tracking.is_none() {
            return RowIds::new();
        }
        files
            .iter()
            .map(|f| {
                let key = f.local_path.to_string_lossy().into_owned();
                (key, (f.remove.base_row_id, f.remove.default_row_commit_version))
            })
            .collect()
    }

    /// [`DeltaColumns::select_sql`] of `inputs`, in the layout's order.
    pub(crate) fn ordered_select(
        &self,
        conn: &Nested,
        inputs: &[&LiveFile],
        deleted: Option<&DeletedPositions>,
    ) -> Result<OrderedRows> {
        let files: Vec<String> = inputs.iter().map(|f| f.local_path.to_string_lossy().into_owned()).collect();
        if inputs.iter().any(|f| f.partition_values != inputs[0].partition_values) {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                "a rewrite group mixes partitions; nothing was committed (this is a bug, please report it)",
            ));
        }
        let partition = inputs.first().map(|f| &f.partition_values);
        self.order.rows(conn, self.select_sql(conn, &files, deleted, &self.row_ids(inputs), partition)?)
    }

    /// The COPY of `select` into `target` (with the field ids under column mapping).
    pub(crate) fn copy_to(&self, select: &str, target: &str) -> String {
        let ids: Vec<String> = self
            .data
            .iter()
            .chain(&self.materialized)
            .filter_map(|c| Some(format!("{}: {}", quote_ident(&c.name), c.mapped.as_ref()?.1)))
            .collect();
        let field_ids = if ids.is_empty() { String::new() } else { format!(", FIELD_IDS {{{}}}", ids.join(", ")) };
        format!(
            "COPY ({select}) TO {} (FORMAT parquet, COMPRESSION {}{field_ids}, RETURN_STATS)",
            quote_literal(target),
            self.compression
        )
    }
}

/// The SQL value of a materialized partition column: its partition value as the log writes it
/// (Delta's partition value serialization; null, or an empty string, is NULL) cast to its type.
/// A `timestamp` value is taken only in its ISO 8601 UTC form (`…Z`): the other form is in the
/// time zone of whichever system wrote it, which the log does not say. Binary values (escaped
/// text) are refused ([`materialized_partition_refusal`] says so before any rewrite).
fn partition_value_sql(column: &DataColumn, value: Option<&str>) -> Result<String> {
    let Some(ty) = &column.ty else {
        return Err(materialize_error(column, "its type has no DuckDB form"));
    };
    let value = match value {
        None | Some("") => return Ok(format!("CAST(NULL AS {ty})")),
        Some(value) => value,
    };
    match column.delta.as_str() {
        Some("binary") => Err(materialize_error(column, "binary partition values are escaped text")),
        Some("timestamp") if !value.ends_with('Z') => Err(materialize_error(
            column,
            &format!("its partition value '{value}' has no time zone (the writer's, which the log does not say)"),
        )),
        _ => Ok(format!("CAST({} AS {ty})", quote_literal(value))),
    }
}

fn materialize_error(column: &DataColumn, why: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "partition column '{}' must be written into new files (materializePartitionColumns), but {why}; nothing \
             was committed",
            column.logical
        ),
    )
}

/// Why the table's partition columns cannot be written into its files when it asks for them
/// ([`materializes_partition_columns`]): a type whose partition values this rewrite does not
/// turn back into values (binary; one with no DuckDB form); `None` when they can be.
pub(crate) fn materialized_partition_refusal(table: &DeltaLakeTable) -> Option<String> {
    if !materializes_partition_columns(table) {
        return None;
    }
    let partition = table.partition_columns();
    table.fields().iter().find_map(|f| {
        let name = f.get("name").and_then(Value::as_str)?;
        let ty = f.get("type")?;
        let readable = ty.as_str() != Some("binary") && duckdb_type(ty, false).is_some();
        (partition.iter().any(|p| p == name) && !readable).then(|| {
            format!(
                "must hold its partition columns in new files (materializePartitionColumns), and partition column \
                 '{name}' is of type {ty}, whose partition values this version does not turn back into values"
            )
        })
    })
}

/// A field's physical name (column mapping).
fn physical_name(field: &Value) -> Result<String> {
    field
        .get("metadata")
        .and_then(|m| m.get(PHYSICAL_NAME))
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| unmapped(field, PHYSICAL_NAME))
}

/// A field's column-mapping id.
fn field_id(field: &Value) -> Result<i64> {
    field.get("metadata").and_then(|m| m.get(FIELD_ID)).and_then(Value::as_i64).ok_or_else(|| unmapped(field, FIELD_ID))
}

fn unmapped(field: &Value, key: &str) -> Error {
    Error::new(
        ErrorKind::CorruptMetadata,
        format!(
            "the table uses column mapping, but column '{}' has no {key}; nothing was rewritten",
            field.get("name").and_then(Value::as_str).unwrap_or("?")
        ),
    )
}

/// The `FIELD_IDS` entry of a mapped field: its id, with the ids of the fields nested in it (by
/// physical name, inside arrays and maps too), and the ids of its arrays' elements and its maps'
/// keys and values where the schema gives them (`delta.columnMapping.nested.ids`, keyed
/// `<physical name>.element`, `.key`, `.value`, `….element.value`…, which Iceberg compatibility
/// writes): as Spark writes them, so a reader in `id` mode finds every nested field by its id.
fn field_ids(field: &Value) -> Result<String> {
    let id = field_id(field)?;
    let nested = NestedIds {
        ids: field.get("metadata").and_then(|m| m.get(NESTED_IDS)).and_then(Value::as_object),
        path: physical_name(field)?,
    };
    Ok(match nested_ids(field.get("type").unwrap_or(&Value::Null), &nested)? {
        None => id.to_string(),
        Some(entries) => format!("{{__duckdb_field_id: {id}, {entries}}}"),
    })
}

const NESTED_IDS: &str = "delta.columnMapping.nested.ids";

/// The element, key and value ids of a mapped field (`delta.columnMapping.nested.ids`), and the
/// path of the type at hand inside it (`col-x`, `col-x.element`, `col-x.value.element`, …).
struct NestedIds<'a> {
    ids: Option<&'a serde_json::Map<String, Value>>,
    path: String,
}

impl NestedIds<'_> {
    /// The ids one level down, at `<path>.<label>`, and that level's own id when the schema
    /// gives one.
    fn inside(&self, label: &str) -> (NestedIds<'_>, Option<i64>) {
        let path = format!("{}.{label}", self.path);
        let id = self.ids.and_then(|ids| ids.get(&path)).and_then(Value::as_i64);
        (NestedIds { ids: self.ids, path }, id)
    }
}

/// The `FIELD_IDS` entries of the fields nested in `ty` (`"col-x": 5, …`, `element: {…}`,
/// `key: 7, value: {…}`); `None` when it holds no field and no id.
fn nested_ids(ty: &Value, nested: &NestedIds) -> Result<Option<String>> {
    let Some(object) = ty.as_object() else { return Ok(None) };
    let inside = |key: &str, label: &str| -> Result<Option<String>> {
        let (deeper, id) = nested.inside(label);
        let entries = nested_ids(object.get(key).unwrap_or(&Value::Null), &deeper)?;
        Ok(match (id, entries) {
            (None, None) => None,
            (Some(id), None) => Some(format!("{label}: {id}")),
            (None, Some(e)) => Some(format!("{label}: {{{e}}}")),
            (Some(id), Some(e)) => Some(format!("{label}: {{__duckdb_field_id: {id}, {e}}}")),
        })
    };
    let entries: Vec<String> = match object.get("type").and_then(Value::as_str) {
        Some("struct") => object
            .get("fields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|child| Ok(format!("{}: {}", quote_ident(&physical_name(child)?), field_ids(child)?)))
            .collect::<Result<_>>()?,
        Some("array") => inside("elementType", "element")?.into_iter().collect(),
        Some("map") => [inside("keyType", "key")?, inside("valueType", "value")?].into_iter().flatten().collect(),
        _ => Vec::new(),
    };
    Ok((!entries.is_empty()).then(|| entries.join(", ")))
}

/// Every mapped field of `field`, itself and nested (in structs, arrays and maps): (id, physical
/// name).
fn mapped_fields(field: &Value, out: &mut Vec<(i64, String)>) -> Result<()> {
    out.push((field_id(field)?, physical_name(field)?));
    fn walk(ty: &Value, out: &mut Vec<(i64, String)>) -> Result<()> {
        let Some(object) = ty.as_object() else { return Ok(()) };
        for f in object.get("fields").and_then(Value::as_array).into_iter().flatten() {
            mapped_fields(f, out)?;
        }
        for key in ["elementType", "keyType", "valueType"] {
            if let Some(inner) = object.get(key) {
                walk(inner, out)?;
            }
        }
        Ok(())
    }
    walk(field.get("type").unwrap_or(&Value::Null), out)
}

/// Whether `field` or a field nested in it (in structs, arrays and maps) carries
/// `delta.typeChanges`: a widening of the field itself, of its array's element or map's key or
/// value (`fieldPath`), or of a struct field inside it.
pub(crate) fn has_type_changes(field: &Value) -> bool {
    fn inside(ty: &Value) -> bool {
        let Some(object) = ty.as_object() else { return false };
        object.get("fields").and_then(Value::as_array).into_iter().flatten().any(has_type_changes)
            || ["elementType", "keyType", "valueType"].iter().any(|k| object.get(*k).is_some_and(inside))
    }
    field.get("metadata").and_then(|m| m.get("delta.typeChanges")).is_some() || field.get("type").is_some_and(inside)
}

/// DuckDB's type for a Delta type (struct children by name, by physical name when `mapped`).
pub(crate) fn duckdb_type(ty: &Value, mapped: bool) -> Option<String> {
    if let Some(object) = ty.as_object() {
        return match object.get("type")?.as_str()? {
            "struct" => {
                let fields: Option<Vec<String>> = object
                    .get("fields")?
                    .as_array()?
                    .iter()
                    .map(|f| {
                        let name = match mapped {
                            true => f.get("metadata")?.get(PHYSICAL_NAME)?.as_str()?,
                            false => f.get("name")?.as_str()?,
                        };
                        Some(format!("{} {}", quote_ident(name), duckdb_type(f.get("type")?, mapped)?))
                    })
                    .collect();
                let fields = fields.filter(|f| !f.is_empty())?;
                Some(format!("STRUCT({})", fields.join(", ")))
            }
            "array" => Some(format!("{}[]", duckdb_type(object.get("elementType")?, mapped)?)),
            "map" => Some(format!(
                "MAP({}, {})",
                duckdb_type(object.get("keyType")?, mapped)?,
                duckdb_type(object.get("valueType")?, mapped)?
            )),
            _ => None,
        };
    }
    let name = ty.as_str()?;
    Some(match name {
        "string" => "VARCHAR".into(),
        "long" => "BIGINT".into(),
        "integer" => "INTEGER".into(),
        "short" => "SMALLINT".into(),
        "byte" => "TINYINT".into(),
        "float" => "FLOAT".into(),
        "double" => "DOUBLE".into(),
        "boolean" => "BOOLEAN".into(),
        "binary" => "BLOB".into(),
        "date" => "DATE".into(),
        "timestamp" => "TIMESTAMPTZ".into(),
        "timestamp_ntz" => "TIMESTAMP".into(),
        d if d.starts_with("decimal(") => d.to_uppercase(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mapped(name: &str, id: i64, ty: Value) -> Value {
        json!({"name": name, "type": ty, "nullable": true,
               "metadata": {FIELD_ID: id, PHYSICAL_NAME: format!("col-{id}")}})
    }

    #[test]
    fn mapped_fields_are_typed_and_numbered_by_their_physical_names() {
        let inner = mapped("b", 2, json!("integer"));
        let outer = mapped("a", 1, json!({"type": "struct", "fields": [inner]}));
        assert_eq!(duckdb_type(&outer["type"], true).as_deref(), Some("STRUCT(\"col-2\" INTEGER)"));
        assert_eq!(duckdb_type(&outer["type"], false).as_deref(), Some("STRUCT(\"b\" INTEGER)"));
        assert_eq!(field_ids(&outer).unwrap(), "{__duckdb_field_id: 1, \"col-2\": 2}");
        let list = mapped("l", 3, json!({"type": "array", "elementType": "long", "containsNull": true}));
        assert_eq!(field_ids(&list).unwrap(), "3");
        let in_list = mapped(
            "m",
            4,
            json!({"type": "array", "containsNull": true,
            "elementType": {"type": "struct", "fields": [mapped("c", 5, json!("long"))]}}),
        );
        assert_eq!(field_ids(&in_list).unwrap(), "{__duckdb_field_id: 4, element: {\"col-5\": 5}}");
        let in_map = mapped(
            "n",
            6,
            json!({"type": "map", "keyType": "string", "valueContainsNull": true,
            "valueType": {"type": "struct", "fields": [mapped("d", 7, json!("long"))]}}),
        );
        assert_eq!(field_ids(&in_map).unwrap(), "{__duckdb_field_id: 6, value: {\"col-7\": 7}}");
        let mut all = Vec::new();
        mapped_fields(&in_map, &mut all).unwrap();
        assert_eq!(all, vec![(6, "col-6".to_string()), (7, "col-7".to_string())]);
        let bare = json!({"name": "x", "type": "long", "metadata": {}});
        assert!(field_ids(&bare).unwrap_err().message().contains("column 'x' has no delta.columnMapping.id"));
        assert_eq!(duckdb_type(&json!("decimal(10,2)"), false), Some("DECIMAL(10,2)".into()));
        assert_eq!(duckdb_type(&json!({"type": "struct", "fields": []}), false), None);
    }

    #[test]
    fn materialized_partition_values_are_cast_from_the_log_or_refused() {
        let column = |delta: &str| DataColumn {
            name: "col-1".into(),
            logical: "p".into(),
            ty: duckdb_type(&json!(delta), false),
            delta: json!(delta),
            mapped: None,
            widened: false,
        };
        assert_eq!(partition_value_sql(&column("integer"), Some("7")).unwrap(), "CAST('7' AS INTEGER)");
        assert_eq!(partition_value_sql(&column("date"), None).unwrap(), "CAST(NULL AS DATE)");
        assert_eq!(partition_value_sql(&column("string"), Some("")).unwrap(), "CAST(NULL AS VARCHAR)");
        let utc = partition_value_sql(&column("timestamp"), Some("2026-01-01T05:00:00.123456Z")).unwrap();
        assert_eq!(utc, "CAST('2026-01-01T05:00:00.123456Z' AS TIMESTAMPTZ)");
        let zoneless = partition_value_sql(&column("timestamp"), Some("2026-01-01 05:00:00")).unwrap_err();
        assert!(zoneless.message().contains("partition column 'p'") && zoneless.message().contains("no time zone"));
        let ntz = partition_value_sql(&column("timestamp_ntz"), Some("2026-01-01 05:00:00")).unwrap();
        assert_eq!(ntz, "CAST('2026-01-01 05:00:00' AS TIMESTAMP)");
        assert!(partition_value_sql(&column("binary"), Some("\\u0001")).unwrap_err().message().contains("binary"));
    }

    #[test]
    fn widened_nested_fields_are_found() {
        let changes = json!([{"fromType": "integer", "toType": "long"}]);
        let widened = json!({"name": "b", "type": "long", "metadata": {"delta.typeChanges": changes}});
        let deep = json!({"name": "s", "type": {"type": "struct", "fields": [
            {"name": "t", "type": {"type": "array", "elementType": {"type": "struct", "fields": [widened]}}}]}});
        assert!(has_type_changes(&deep));
        let element = json!({"name": "l", "type": {"type": "array", "elementType": "long"},
            "metadata": {"delta.typeChanges": [{"fromType": "integer", "toType": "long", "fieldPath": "element"}]}});
        assert!(has_type_changes(&element));
        let plain = json!({"name": "p", "type": {"type": "array", "elementType": {"type": "struct", "fields": [
            {"name": "c", "type": "long", "metadata": {}}]}}, "metadata": {}});
        assert!(!has_type_changes(&plain));
    }
}
