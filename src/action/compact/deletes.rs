//! Merge-on-read deletes applied in the rewrite's own query (`DeleteSet`): position deletes by
//! path and row position, equality deletes by value, each within the spec's sequence-number rule;
//! and the separate count of what they remove, which the row check compares against.

use ::iceberg::spec::{DataContentType, DataFile as IcebergDataFile, NestedField, Schema};

use super::sql::{duckdb_type, files_have_field_ids, leaves, parquet_source};
use crate::duck::{Nested, quote_ident, quote_list, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::store::strip_file_scheme;

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
pub(super) struct DeleteSet {
    /// The data files with file name and row position: `__d`, joined to their manifest path and
    /// sequence number, `__f`.
    data: String,
    /// (subquery, join condition) per delete source.
    sources: Vec<(String, String)>,
    /// The leaf columns checked after the rewrite, as SQL expressions over `__d`, by field id.
    leaves: Vec<(i32, String)>,
}

impl DeleteSet {
    pub(super) fn new(
        conn: &Nested,
        schema: &Schema,
        inputs: &[Input<'_>],
        deletes: &[Input<'_>],
        files_have_ids: bool,
    ) -> Result<Self> {
        let local = |f: &IcebergDataFile| strip_file_scheme(f.file_path()).to_string();
        let sequence_table = |files: &[&Input<'_>], with_path: bool| {
            let rows: Vec<String> = files
                .iter()
                .map(|i| {
                    let path =
                        if with_path { format!(", {}", quote_literal(i.file.file_path())) } else { String::new() };
                    format!("({}{path}, {}::BIGINT)", quote_literal(&local(i.file)), i.sequence_number)
                })
                .collect();
            format!("(VALUES {})", rows.join(", "))
        };
        let local_inputs: Vec<String> = inputs.iter().map(|i| local(i.file)).collect();
        let source = parquet_source(
            schema,
            &local_inputs,
            files_have_ids,
            ", filename = '__lakehouse_file', file_row_number = true",
        )?;
        let all: Vec<&Input<'_>> = inputs.iter().collect();
        let data = format!(
            "{source} AS __d JOIN {} AS __f(__file, __path, __seq) ON __d.__lakehouse_file = __f.__file",
            sequence_table(&all, true)
        );
        let mut sources = Vec::new();
        let position: Vec<&Input<'_>> =
            deletes.iter().filter(|d| d.file.content_type() == DataContentType::PositionDeletes).collect();
        if !position.is_empty() {
            let files: Vec<String> = position.iter().map(|d| local(d.file)).collect();
            sources.push((
                format!(
                    "(SELECT __r.file_path AS __path, __r.pos AS __pos, __s.__seq FROM read_parquet({}, union_by_name = true, \
                     filename = '__lakehouse_delete') AS __r JOIN {} AS __s(__file, __seq) ON __r.__lakehouse_delete = __s.__file)",
                    quote_list(&files),
                    sequence_table(&position, false)
                ),
                "__x.__path = __f.__path AND __x.__pos = __d.file_row_number AND __f.__seq <= __x.__seq".to_string(),
            ));
        }
        // Equality deletes, one source per set of equality fields.
        let mut by_fields: std::collections::BTreeMap<Vec<i32>, Vec<&Input<'_>>> = Default::default();
        for d in deletes.iter().filter(|d| d.file.content_type() == DataContentType::EqualityDeletes) {
            let mut ids = d.file.equality_ids().unwrap_or_default();
            ids.sort_unstable();
            ids.dedup();
            by_fields.entry(ids).or_default().push(d);
        }
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
            let by_id = files_have_field_ids(conn, &paths)?;
            let reader = if by_id {
                let entries: Vec<String> = fields
                    .iter()
                    .enumerate()
                    .map(|(k, (f, t))| {
                        format!("{}: {{name: '__k{k}', type: {}, default_value: NULL}}", f.id, quote_literal(t))
                    })
                    .collect();
                format!(
                    "(SELECT __r.* EXCLUDE (__lakehouse_delete), __s.__seq FROM read_parquet({}, schema = MAP {{{}}}, \
                     filename = '__lakehouse_delete') AS __r",
                    quote_list(&paths),
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
                    quote_list(&paths)
                )
            };
            let condition: Vec<String> = std::iter::once("__f.__seq < __x.__seq".to_string())
                .chain(
                    fields
                        .iter()
                        .enumerate()
                        .map(|(k, (f, _))| format!("__d.{} IS NOT DISTINCT FROM __x.__k{k}", quote_ident(&f.name))),
                )
                .collect();
            sources.push((
                format!(
                    "{reader} JOIN {} AS __s(__file, __seq) ON __r.__lakehouse_delete = __s.__file)",
                    sequence_table(&files, false)
                ),
                condition.join(" AND "),
            ));
        }
        let leaves = leaves(schema)
            .into_values()
            .filter(|l| !l.repeated)
            .map(|l| (l.id, format!("__d.{}", l.name.split(", ").map(quote_ident).collect::<Vec<_>>().join("."))))
            .collect();
        Ok(Self { data, sources, leaves })
    }

    /// The rows kept, as the current schema's columns (ordered by the caller: [`OrderedRows`]).
    pub(super) fn select_sql(&self, schema: &Schema) -> String {
        let mut kept = format!("SELECT __d.* FROM {}", self.data);
        for (k, (source, condition)) in self.sources.iter().enumerate() {
            kept.push_str(&format!(
                " ANTI JOIN {source} AS __x{k} ON {}",
                condition.replace("__x.", &format!("__x{k}."))
            ));
        }
        let columns = schema.as_struct().fields().iter().map(|f| quote_ident(&f.name)).collect::<Vec<_>>().join(", ");
        format!("SELECT {columns} FROM ({kept})")
    }

    /// Counts of the deleted rows: `count(*)`, then `count(leaf)` for each of [`Self::leaves`],
    /// by a mark join (`EXISTS`), not the anti join the rewrite uses; with the leaves' field ids,
    /// in the order of their counts.
    pub(super) fn deleted_counts_sql(&self) -> DeletedCounts {
        let exists: Vec<String> = self
            .sources
            .iter()
            .map(|(source, condition)| format!("EXISTS (SELECT 1 FROM {source} AS __x WHERE {condition})"))
            .collect();
        let counts: Vec<String> = std::iter::once("count(*)".to_string())
            .chain(self.leaves.iter().map(|(_, e)| format!("count({e})")))
            .collect();
        let sql = format!("SELECT {} FROM {} WHERE {}", counts.join(", "), self.data, exists.join(" OR "));
        (sql, self.leaves.iter().map(|(id, _)| *id).collect())
    }
}

/// A file a rewrite reads, with its data sequence number.
pub(super) struct Input<'a> {
    pub(super) file: &'a IcebergDataFile,
    pub(super) sequence_number: i64,
}
