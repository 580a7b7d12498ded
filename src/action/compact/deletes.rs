//! Merge-on-read deletes applied in the rewrite's own query (`DeleteSet`): position deletes by
//! path and row position, equality deletes by value, each within the spec's sequence-number rule;
//! and the separate count of what they remove, which the row check compares against.

use ::iceberg::spec::{DataContentType, DataFile as IcebergDataFile, NestedField, Schema};

use super::deletion_vectors::DeletedPositions;
use super::iceberg_nested_defaults::NestedDefaults;
use super::sql::{FILE_COLUMN, LINEAGE_COLUMNS, column_sql, duckdb_type, files_have_field_ids, leaves, parquet_source};
use crate::duck::{Nested, quote_files, quote_ident, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::store::duckdb_path;
use crate::table::iceberg::deletion_vector::is_deletion_vector;

/// The query counting a group's deleted rows and their non-null values, with the field ids of
/// the counted leaves in order ([`DeleteSet::deleted_counts_sql`]).
pub(super) type DeletedCounts = (String, Vec<i32>);

/// A rewrite group's data files with the delete files that apply to them, as SQL. The rows kept
/// are the spec's: a row is deleted by a position delete whose `file_path` is the data file's
/// path as the manifest writes it and whose `pos` is the row's position in the file, when the
/// data file's data sequence number is at most the delete file's; and by an equality delete whose
/// values equal the row's in every equality column (null equal to null), when the data file's
/// data sequence number is below the delete file's. Partition scope was settled when the delete
/// files were chosen ([`DataFile::applies_to`]).
pub(crate) struct DeleteSet {
    /// The data files with file name and row position: `__d`, joined to their manifest path,
    /// data sequence number and first row id, `__f`.
    data: String,
    /// Format v3: the rows keep their lineage ([`LINEAGE_COLUMNS`]).
    lineage: bool,
    /// (subquery, join condition) per delete source.
    sources: Vec<(String, String)>,
    /// The leaf columns checked after the rewrite, as SQL expressions over `__d`, by field id.
    leaves: Vec<(i32, String)>,
    /// Nested fields with a default that some data files lack (written as readers see them).
    fills: NestedDefaults,
}

impl DeleteSet {
    /// The set of data files `inputs` with the delete files `deletes` (and `vectors`, deletion
    /// vectors read already) that apply to them; `files_have_ids`: the data files carry Parquet
    /// field ids; `lineage`: format v3, rows keep their lineage (which needs the ids).
    pub(crate) fn new(
        conn: &Nested,
        schema: &Schema,
        inputs: &[Input<'_>],
        deletes: &[Input<'_>],
        vectors: Option<&DeletedPositions>,
        files_have_ids: bool,
        lineage: bool,
    ) -> Result<Self> {
        if lineage && !files_have_ids {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the files of a format v3 table carry no Parquet field ids, so their row lineage (_row_id, \
                 _last_updated_sequence_number) cannot be read by id; nothing was committed",
            ));
        }
        let data = data_sql(schema, inputs, deletes, files_have_ids, lineage)?;
        let mut sources = Vec::new();
        if let Some(vectors) = vectors {
            sources.push((
                vectors.source_sql(),
                "__x.__dv_path = __d.__lakehouse_file AND __x.__dv_row = __d.file_row_number".to_string(),
            ));
        }
        sources.extend(position_source(deletes));
        sources.extend(equality_sources(conn, schema, deletes)?);
        let leaves = leaves(schema)
            .into_values()
            .filter(|l| !l.repeated)
            .map(|l| (l.id, format!("__d.{}", l.name.split(", ").map(quote_ident).collect::<Vec<_>>().join("."))))
            .collect();
        let fills = if files_have_ids {
            NestedDefaults::probe(conn, schema, &inputs.iter().map(|i| local(i.file)).collect::<Vec<_>>())?
        } else {
            NestedDefaults::default()
        };
        Ok(Self { data, lineage, sources, leaves, fills })
    }

    /// The rows kept, as the current schema's columns (ordered by the caller: [`OrderedRows`]),
    /// then with lineage each row's `_row_id` and `_last_updated_sequence_number`: the value its
    /// file stores, else the inherited one (the file's first row id plus the row's position;
    /// the file's data sequence number), so the rewritten file stores what readers saw.
    pub(super) fn select_sql(&self, schema: &Schema) -> String {
        let mut kept = format!(
            "SELECT __d.*, __f.__seq AS __lakehouse_seq, __f.__first_row_id AS __lakehouse_first_row_id FROM {}",
            self.data
        );
        for (k, (source, condition)) in self.sources.iter().enumerate() {
            kept.push_str(&format!(
                " ANTI JOIN {source} AS __x{k} ON {}",
                condition.replace("__x.", &format!("__x{k}."))
            ));
        }
        let mut columns: Vec<String> =
            schema.as_struct().fields().iter().map(|f| column_sql(f, &self.fills, FILE_COLUMN)).collect();
        if self.lineage {
            let [(row_id, _), (sequence, _)] = LINEAGE_COLUMNS;
            columns.push(format!(
                "coalesce({row_id}, __lakehouse_first_row_id + file_row_number) AS {row_id}",
                row_id = quote_ident(row_id)
            ));
            columns
                .push(format!("coalesce({sequence}, __lakehouse_seq) AS {sequence}", sequence = quote_ident(sequence)));
        }
        format!("SELECT {} FROM ({kept})", columns.join(", "))
    }

    /// The condition a deleted row of `__d` meets: some delete source matches it (a mark join,
    /// `EXISTS`, not the anti join the rewrite uses).
    fn deleted_condition(&self) -> String {
        let exists: Vec<String> = self
            .sources
            .iter()
            .map(|(source, condition)| format!("EXISTS (SELECT 1 FROM {source} AS __x WHERE {condition})"))
            .collect();
        exists.join(" OR ")
    }

    /// The positions its deletes delete, `(file_path, pos)`: each deleted row's data file (its
    /// path as the manifests write it) and position — what converts equality deletes into
    /// position deletes ([`crate::action::rewrite_position_deletes`]); `None` without deletes.
    pub(crate) fn deleted_positions_sql(&self) -> Option<String> {
        if self.sources.is_empty() {
            return None;
        }
        Some(format!(
            "SELECT __f.__path AS file_path, __d.file_row_number AS pos FROM {} WHERE {}",
            self.data,
            self.deleted_condition()
        ))
    }

    /// Counts of the deleted rows: `count(*)`, then `count(leaf)` for each of [`Self::leaves`],
    /// by a mark join (`EXISTS`), not the anti join the rewrite uses; with the leaves' field ids,
    /// in the order of their counts.
    pub(super) fn deleted_counts_sql(&self) -> Option<DeletedCounts> {
        if self.sources.is_empty() {
            return None;
        }
        let counts: Vec<String> = std::iter::once("count(*)".to_string())
            .chain(self.leaves.iter().map(|(_, e)| format!("count({e})")))
            .collect();
        let sql = format!("SELECT {} FROM {} WHERE {}", counts.join(", "), self.data, self.deleted_condition());
        Some((sql, self.leaves.iter().map(|(id, _)| *id).collect()))
    }
}

/// A file a rewrite reads, with its data sequence number and (format v3, data files) the row id
/// of its first row.
pub(crate) struct Input<'a> {
    pub(crate) file: &'a IcebergDataFile,
    pub(crate) sequence_number: i64,
    pub(crate) first_row_id: Option<i64>,
}

/// The SQL condition under which an equality delete's value `delete` deletes the value of
/// `field` of the data row `__d`: equal, null equal to null — as Java compares them
/// (`StructLikeSet` with `Comparators.forType`): a float or double compares as
/// `Float.compare`/`Double.compare`, so -0.0 is not 0.0 while every NaN equals every NaN.
/// DuckDB's equality takes -0.0 for 0.0 (and NaN for NaN), so the sign bit of a non-NaN value
/// must match too: the row's from its [`sign_column`], which [`DeleteSet::new`] adds to `__d`.
fn equal_values(delete: &str, field: &NestedField) -> String {
    let row = format!("__d.{}", quote_ident(&field.name));
    let equal = format!("{row} IS NOT DISTINCT FROM {delete}");
    match is_float(field) {
        true => {
            format!("({equal} AND ({row} IS NULL OR isnan({row}) OR __d.{} = signbit({delete})))", sign_column(field))
        }
        false => equal,
    }
}

/// Whether `field` is a float or double column.
fn is_float(field: &NestedField) -> bool {
    use ::iceberg::spec::{PrimitiveType, Type};
    matches!(field.field_type.as_ref(), Type::Primitive(PrimitiveType::Float | PrimitiveType::Double))
}

/// The column of `__d` holding the sign bit of float column `field` ([`equal_values`]).
fn sign_column(field: &NestedField) -> String {
    format!("__lakehouse_sign_{}", field.id)
}

/// The float and double columns some equality delete of `deletes` compares, once each.
fn float_equality_fields<'s>(schema: &'s Schema, deletes: &[Input<'_>]) -> Vec<&'s NestedField> {
    let mut ids: Vec<i32> = deletes
        .iter()
        .filter(|d| d.file.content_type() == DataContentType::EqualityDeletes)
        .flat_map(|d| d.file.equality_ids().unwrap_or_default())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.iter().filter_map(|id| schema.field_by_id(*id)).map(|f| f.as_ref()).filter(|f| is_float(f)).collect()
}

/// Where DuckDB reads `file`: its path without a `file://` scheme.
fn local(file: &IcebergDataFile) -> String {
    duckdb_path(file.file_path()).to_string()
}

/// `(VALUES (local path, data sequence number), …)` of `files`.
fn sequence_table(files: &[&Input<'_>]) -> String {
    let rows: Vec<String> =
        files.iter().map(|i| format!("({}, {}::BIGINT)", quote_literal(&local(i.file)), i.sequence_number)).collect();
    format!("(VALUES {})", rows.join(", "))
}

/// The data files `inputs` with file name and row position (`__d`), joined to their manifest
/// path, data sequence number and first row id (`__f`); with each float or double equality
/// column of `deletes` its sign bit beside it.
fn data_sql(
    schema: &Schema,
    inputs: &[Input<'_>],
    deletes: &[Input<'_>],
    files_have_ids: bool,
    lineage: bool,
) -> Result<String> {
    let local_inputs: Vec<String> = inputs.iter().map(|i| local(i.file)).collect();
    let source = parquet_source(
        schema,
        &local_inputs,
        files_have_ids,
        lineage,
        ", filename = '__lakehouse_file', file_row_number = true",
    )?;
    let files: Vec<String> = inputs
        .iter()
        .map(|i| {
            let first_row_id = i.first_row_id.map_or("NULL".to_string(), |id| id.to_string());
            format!(
                "({}, {}, {}::BIGINT, {first_row_id}::BIGINT)",
                quote_literal(&local(i.file)),
                quote_literal(i.file.file_path()),
                i.sequence_number
            )
        })
        .collect();
    // Each float or double equality column's sign bit beside it: the condition of
    // [`equal_values`] compares it, and a correlated `EXISTS` then tells -0.0 from 0.0 (DuckDB
    // takes the distinct values of the columns it correlates on, where -0.0 is 0.0).
    let signs: Vec<String> = float_equality_fields(schema, deletes)
        .iter()
        .map(|f| format!("signbit({}) AS {}", quote_ident(&f.name), sign_column(f)))
        .collect();
    let source = match signs.is_empty() {
        true => source,
        false => format!("(SELECT *, {} FROM {source})", signs.join(", ")),
    };
    Ok(format!(
        "{source} AS __d JOIN (VALUES {}) AS __f(__file, __path, __seq, __first_row_id) \
         ON __d.__lakehouse_file = __f.__file",
        files.join(", ")
    ))
}

/// The source of the position delete files among `deletes` (not deletion vectors), with its
/// join condition; `None` without any.
fn position_source(deletes: &[Input<'_>]) -> Option<(String, String)> {
    let position: Vec<&Input<'_>> = deletes
        .iter()
        .filter(|d| d.file.content_type() == DataContentType::PositionDeletes && !is_deletion_vector(d.file))
        .collect();
    if position.is_empty() {
        return None;
    }
    let files: Vec<String> = position.iter().map(|d| local(d.file)).collect();
    Some((
        format!(
            "(SELECT __r.file_path AS __path, __r.pos AS __pos, __s.__seq FROM read_parquet({}, union_by_name = true, \
             filename = '__lakehouse_delete') AS __r JOIN {} AS __s(__file, __seq) ON __r.__lakehouse_delete = __s.__file)",
            quote_files(&files),
            sequence_table(&position)
        ),
        "__x.__path = __f.__path AND __x.__pos = __d.file_row_number AND __f.__seq <= __x.__seq".to_string(),
    ))
}

/// The sources of the equality delete files among `deletes`, one per set of equality fields,
/// each with its join condition (values equal, the data file's sequence number below).
fn equality_sources(conn: &Nested, schema: &Schema, deletes: &[Input<'_>]) -> Result<Vec<(String, String)>> {
    let mut by_fields: std::collections::BTreeMap<Vec<i32>, Vec<&Input<'_>>> = Default::default();
    for d in deletes.iter().filter(|d| d.file.content_type() == DataContentType::EqualityDeletes) {
        let mut ids = d.file.equality_ids().unwrap_or_default();
        ids.sort_unstable();
        ids.dedup();
        by_fields.entry(ids).or_default().push(d);
    }
    let mut sources = Vec::new();
    for (ids, files) in by_fields {
        let paths: Vec<String> = files.iter().map(|d| local(d.file)).collect();
        let fields: Vec<(&NestedField, String)> = ids
            .iter()
            .map(|id| {
                let field = schema.field_by_id(*id).filter(|f| f.field_type.is_primitive());
                let ty = field.and_then(|f| f.field_type.as_primitive_type().and_then(duckdb_type));
                match (field, ty) {
                    (Some(f), Some(t)) => Ok((f.as_ref(), t)),
                    _ => Err(Error::new(
                        ErrorKind::Unsupported,
                        format!("equality deletes on field id {id} cannot be applied; nothing was committed"),
                    )),
                }
            })
            .collect::<Result<_>>()?;
        let reader = equality_reader(&paths, &fields, files_have_field_ids(conn, &paths)?);
        let condition: Vec<String> = std::iter::once("__f.__seq < __x.__seq".to_string())
            .chain(fields.iter().enumerate().map(|(k, (f, _))| equal_values(&format!("__x.__k{k}"), f)))
            .collect();
        sources.push((
            format!(
                "{reader} JOIN {} AS __s(__file, __seq) ON __r.__lakehouse_delete = __s.__file)",
                sequence_table(&files)
            ),
            condition.join(" AND "),
        ));
    }
    Ok(sources)
}

/// The opening of the query reading the equality delete files at `paths`, their `fields` (with
/// DuckDB types) as `__k0`, `__k1`, …: by field id when the files carry ids (`by_id`), else by
/// name.
fn equality_reader(paths: &[String], fields: &[(&NestedField, String)], by_id: bool) -> String {
    if by_id {
        let entries: Vec<String> = fields
            .iter()
            .enumerate()
            .map(|(k, (f, t))| format!("{}: {{name: '__k{k}', type: {}, default_value: NULL}}", f.id, quote_literal(t)))
            .collect();
        format!(
            "(SELECT __r.* EXCLUDE (__lakehouse_delete), __s.__seq FROM read_parquet({}, schema = MAP {{{}}}, \
             filename = '__lakehouse_delete') AS __r",
            quote_files(paths),
            entries.join(", ")
        )
    } else {
        let columns: Vec<String> = fields
            .iter()
            .enumerate()
            .map(|(k, (f, t))| format!("CAST(__r.{} AS {t}) AS __k{k}", quote_ident(&f.name)))
            .collect();
        format!(
            "(SELECT {}, __s.__seq FROM read_parquet({}, union_by_name = true, filename = '__lakehouse_delete') AS __r",
            columns.join(", "),
            quote_files(paths)
        )
    }
}
