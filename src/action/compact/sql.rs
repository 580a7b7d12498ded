//! Reading Iceberg data files as DuckDB: DuckDB's names for Iceberg types, the leaf columns of a
//! schema, and the `read_parquet(…)` that reads files as the current schema (by field id, with
//! column defaults, or by name).

use std::collections::HashMap;

use ::iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

use crate::action::compact::defaults::default_text;
use crate::action::compact::iceberg_nested_defaults::NestedDefaults;
use crate::duck::{Nested, quote_files, quote_ident, quote_literal};
use crate::error::{Error, ErrorKind, Result};

/// The row-lineage columns of format v3 (the spec's reserved field ids): written into every
/// rewritten file so each row keeps its id and the sequence number that last updated it.
pub(super) const LINEAGE_COLUMNS: [(&str, i32); 2] =
    [("_row_id", 2_147_483_540), ("_last_updated_sequence_number", 2_147_483_539)];

/// DuckDB's name for an Iceberg primitive type.
pub(super) fn duckdb_type(ty: &PrimitiveType) -> Option<String> {
    Some(match ty {
        PrimitiveType::Boolean => "BOOLEAN".into(),
        PrimitiveType::Int => "INTEGER".into(),
        PrimitiveType::Long => "BIGINT".into(),
        PrimitiveType::Float => "FLOAT".into(),
        PrimitiveType::Double => "DOUBLE".into(),
        PrimitiveType::Decimal { precision, scale } => format!("DECIMAL({precision}, {scale})"),
        PrimitiveType::Date => "DATE".into(),
        PrimitiveType::Time => "TIME".into(),
        PrimitiveType::Timestamp => "TIMESTAMP".into(),
        PrimitiveType::Timestamptz => "TIMESTAMPTZ".into(),
        PrimitiveType::TimestampNs => "TIMESTAMP_NS".into(),
        PrimitiveType::String => "VARCHAR".into(),
        PrimitiveType::Uuid => "UUID".into(),
        PrimitiveType::Fixed(_) | PrimitiveType::Binary => "BLOB".into(),
        PrimitiveType::TimestamptzNs => return None,
    })
}

/// DuckDB's name for an Iceberg type, nested ones included (struct children by name).
fn duckdb_type_of(ty: &Type) -> Option<String> {
    Some(match ty {
        Type::Primitive(p) => duckdb_type(p)?,
        Type::Struct(s) => {
            let children: Option<Vec<String>> = s
                .fields()
                .iter()
                .map(|f| Some(format!("{} {}", quote_ident(&f.name), duckdb_type_of(&f.field_type)?)))
                .collect();
            format!("STRUCT({})", children?.join(", "))
        }
        Type::List(l) => format!("{}[]", duckdb_type_of(&l.element_field.field_type)?),
        Type::Map(m) => {
            format!("MAP({}, {})", duckdb_type_of(&m.key_field.field_type)?, duckdb_type_of(&m.value_field.field_type)?)
        }
    })
}

/// A leaf (primitive) column of the current schema, as DuckDB's `parquet_metadata` names it in
/// a file DuckDB wrote (`s, x`; `l, list, element`; `m, key_value, key`).
#[derive(Debug, Clone)]
pub(super) struct Leaf {
    pub(super) id: i32,
    pub(super) name: String,
    pub(super) ty: PrimitiveType,
    /// Inside a list or map: its value and null counts follow writer-specific rules for empty
    /// and null collections, so they are recorded but not compared, and it gets no bounds.
    pub(super) repeated: bool,
}

/// Every leaf of `schema` by its DuckDB path.
pub(super) fn leaves(schema: &Schema) -> HashMap<String, Leaf> {
    fn walk(field: &NestedField, path: String, repeated: bool, out: &mut HashMap<String, Leaf>) {
        match field.field_type.as_ref() {
            Type::Primitive(ty) => {
                out.insert(path.clone(), Leaf { id: field.id, name: path, ty: ty.clone(), repeated });
            }
            Type::Struct(s) => {
                for child in s.fields() {
                    walk(child, format!("{path}, {}", child.name), repeated, out);
                }
            }
            Type::List(l) => walk(&l.element_field, format!("{path}, list, element"), true, out),
            Type::Map(m) => {
                walk(&m.key_field, format!("{path}, key_value, key"), true, out);
                walk(&m.value_field, format!("{path}, key_value, value"), true, out);
            }
        }
    }
    let mut out = HashMap::new();
    for field in schema.as_struct().fields() {
        walk(field, field.name.clone(), false, &mut out);
    }
    out
}

/// `FIELD_IDS` value for one field: the id, or a struct naming children's ids.
pub(super) fn field_ids(field: &NestedField) -> String {
    match field.field_type.as_ref() {
        Type::Primitive(_) => field.id.to_string(),
        Type::Struct(s) => {
            let children: Vec<String> =
                s.fields().iter().map(|f| format!("{}: {}", quote_ident(&f.name), field_ids(f))).collect();
            format!("{{__duckdb_field_id: {}, {}}}", field.id, children.join(", "))
        }
        Type::List(l) => format!("{{__duckdb_field_id: {}, element: {}}}", field.id, field_ids(&l.element_field)),
        Type::Map(m) => format!(
            "{{__duckdb_field_id: {}, key: {}, value: {}}}",
            field.id,
            field_ids(&m.key_field),
            field_ids(&m.value_field)
        ),
    }
}

/// The `SELECT` reading `inputs` as the current schema: top-level columns by field id (renames
/// and added columns resolve like Iceberg readers) when the files carry field ids, the children
/// of nested columns by name (DuckDB casts structs by name; [`check_nested_names`] refuses files
/// where that would differ from reading by id); by name otherwise (files registered without ids,
/// e.g. pyiceberg `add_files`, are read through their column names, as Iceberg's name mapping
/// does).
/// With `fills` (read by field id only), struct columns holding a field some input lacks are
/// rebuilt with its default ([`column_sql`]).
pub(crate) fn select_sql(
    schema: &Schema,
    inputs: &[String],
    files_have_ids: bool,
    fills: &NestedDefaults,
) -> Result<String> {
    let fill = files_have_ids && !fills.is_empty();
    let columns = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| if fill { column_sql(f, fills, FILE_COLUMN) } else { quote_ident(&f.name) })
        .collect::<Vec<_>>()
        .join(", ");
    let extra = if fill { format!(", filename = {}", quote_literal(FILE_COLUMN)) } else { String::new() };
    let source = parquet_source(schema, inputs, files_have_ids, false, &extra)?;
    Ok(format!("SELECT {columns} FROM {source}"))
}

/// The column of a rewrite's read that names each row's file (`read_parquet`'s `filename`).
pub(super) const FILE_COLUMN: &str = "__lakehouse_file";

/// The expression reading top-level column `field` as readers see it: the column itself, or,
/// when some input (its name in column `file_column`) lacks a struct field below it that has an
/// `initial-default` ([`NestedDefaults`]), the value rebuilt level by level — structs field by
/// field, lists element by element, maps entry by entry, in order — with that default in the
/// rows of those files; a NULL struct, list, map or element stays NULL.
pub(super) fn column_sql(field: &NestedField, fills: &NestedDefaults, file_column: &str) -> String {
    let name = quote_ident(&field.name);
    if fills.touches_type(&field.field_type) {
        format!("{} AS {name}", rebuilt(&name, &field.field_type, fills, file_column, 0))
    } else {
        name
    }
}

/// `value` (of type `ty`) with each field inside it that some files lack read as its default in
/// those files' rows; `depth` names the lambda parameters of lists and maps apart.
fn rebuilt(value: &str, ty: &Type, fills: &NestedDefaults, file_column: &str, depth: usize) -> String {
    if !fills.touches_type(ty) {
        return value.to_string();
    }
    let within = |field: &NestedField, current: String| -> String {
        match (field.field_type.as_ref(), fills.lacking(field.id)) {
            (Type::Primitive(p), Some(files)) => match (default_text(field), duckdb_type(p)) {
                (Ok(Some(text)), Some(ty)) => format!(
                    "CASE WHEN {} IN ({}) THEN CAST({} AS {ty}) ELSE {current} END",
                    quote_ident(file_column),
                    files.iter().map(|f| quote_literal(f)).collect::<Vec<_>>().join(", "),
                    quote_literal(&text)
                ),
                _ => current,
            },
            (ty, _) => rebuilt(&current, ty, fills, file_column, depth + 1),
        }
    };
    let inner = match ty {
        Type::Primitive(_) => return value.to_string(),
        Type::Struct(s) => {
            let children: Vec<String> = s
                .fields()
                .iter()
                .map(|child| {
                    let current = format!("struct_extract({value}, {})", quote_literal(&child.name));
                    format!("{} := {}", quote_ident(&child.name), within(child, current))
                })
                .collect();
            format!("struct_pack({})", children.join(", "))
        }
        Type::List(l) => {
            let element = format!("__lakehouse_e{depth}");
            format!("list_transform({value}, lambda {element}: {})", within(&l.element_field, element.clone()))
        }
        Type::Map(m) => {
            let entry = format!("__lakehouse_e{depth}");
            let key = within(&m.key_field, format!("struct_extract({entry}, 'key')"));
            let val = within(&m.value_field, format!("struct_extract({entry}, 'value')"));
            format!(
                "map_from_entries(list_transform(map_entries({value}), lambda {entry}: struct_pack(key := {key}, value := {val})))"
            )
        }
    };
    format!("CASE WHEN {value} IS NULL THEN NULL ELSE {inner} END")
}

/// The `read_parquet(…)` of [`select_sql`], with `extra` options appended (`, filename = …`).
/// A file without a top-level column reads it as its initial-default, as readers see it; a
/// default this version cannot render is an error (compaction skipped such partitions before:
/// [`crate::action::compact::defaults`]). With `lineage` (by field id only) the files' own
/// [`LINEAGE_COLUMNS`] are read too, NULL where a file has none.
pub(super) fn parquet_source(
    schema: &Schema,
    inputs: &[String],
    files_have_ids: bool,
    lineage: bool,
    extra: &str,
) -> Result<String> {
    let files = quote_files(inputs);
    if !files_have_ids {
        return Ok(format!("read_parquet({files}, union_by_name = true{extra})"));
    }
    let mut entries = Vec::new();
    for f in schema.as_struct().fields() {
        let default = match default_text(f) {
            Ok(Some(text)) => quote_literal(&text),
            Ok(None) => "NULL".to_string(),
            Err(why) => return Err(Error::new(ErrorKind::Unsupported, why)),
        };
        let Some(ty) = duckdb_type_of(&f.field_type) else {
            if lineage {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!("column '{}' has a type DuckDB cannot read by field id; nothing was committed", f.name),
                ));
            }
            return Ok(format!("read_parquet({files}, union_by_name = true{extra})"));
        };
        entries.push(format!(
            "{}: {{name: {}, type: {}, default_value: {default}}}",
            f.id,
            quote_literal(&f.name),
            quote_literal(&ty)
        ));
    }
    if lineage {
        for (name, id) in LINEAGE_COLUMNS {
            entries.push(format!("{id}: {{name: {}, type: 'BIGINT', default_value: NULL}}", quote_literal(name)));
        }
    }
    Ok(format!("read_parquet({files}, schema = MAP {{{}}}{extra})", entries.join(", ")))
}

/// Whether every input file carries Parquet field ids (all or none; a mix is refused).
pub(crate) fn files_have_field_ids(conn: &Nested, inputs: &[String]) -> Result<bool> {
    let list = quote_files(inputs);
    let sql = format!(
        "SELECT count(*) FILTER (WHERE ids > 0), count(*) FROM \
         (SELECT file_name, count(field_id) AS ids FROM parquet_schema({list}) GROUP BY file_name)"
    );
    let result = conn.query(&sql)?;
    let row = result.first("the field-id probe")?;
    let (with_ids, files) = (row[0].int()?, row[1].int()?);
    match with_ids {
        0 => Ok(false),
        n if n == files => Ok(true),
        _ => Err(Error::new(
            ErrorKind::Unsupported,
            "a group mixes Parquet files with and without field ids; nothing was committed",
        )),
    }
}
