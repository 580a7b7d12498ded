//! Whether an Iceberg rewrite would read a file's nested fields wrongly: `select_sql` ([`super::sql`])
//! reads them by name inside their top-level column, which is what reading by field id gives
//! only while every nested field a file carries keeps its name and no name moved to another id.

use std::collections::{HashMap, HashSet};

use ::iceberg::spec::{DataFile as IcebergDataFile, Schema, Type};

use crate::duck::{Nested, quote_files};
use crate::error::Result;
use crate::plan::compaction::{PartitionPlan, Verdict};
use crate::store::duckdb_path;

/// Skips (with the reason, before anything is written; a dry run shows it too) each partition
/// whose files [`select_sql`] would read wrongly: nested fields are read by name inside their
/// top-level column, which is what reading by field id gives only while every nested field a file
/// carries still has its name ([`misread_nested_field`]).
pub(super) fn skip_misread_nested_fields(
    conn: &Nested,
    schema: &Schema,
    plans: &mut [PartitionPlan],
    sources: &[&IcebergDataFile],
) -> Result<()> {
    if schema.as_struct().fields().iter().all(|f| f.field_type.is_primitive()) {
        return Ok(());
    }
    for p in plans.iter_mut().filter(|p| p.verdict == Verdict::Compact) {
        let inputs: Vec<String> =
            p.groups.iter().flatten().map(|&i| duckdb_path(sources[i].file_path()).to_string()).collect();
        if let Some(why) = misread_nested_field(conn, &inputs, schema)? {
            p.skip(&format!("{why}; nested fields are read by name, so its files are not rewritten"));
        }
    }
    Ok(())
}

/// Why `inputs` cannot be read as `schema` by name inside nested columns, if they cannot: a file
/// whose nested field id now has another name (a renamed field), or whose nested field name now
/// belongs to another id (dropped, then re-added under the old name). Lists' and maps' element,
/// key and value fields are named by each writer's convention and are not compared.
fn misread_nested_field(conn: &Nested, inputs: &[String], schema: &Schema) -> Result<Option<String>> {
    let top: HashSet<i32> = schema.as_struct().fields().iter().map(|f| f.id).collect();
    let mut current: HashMap<i32, String> = HashMap::new();
    let mut element_ids: HashSet<i32> = HashSet::new();
    fn walk(ty: &Type, current: &mut HashMap<i32, String>, element_ids: &mut HashSet<i32>) {
        match ty {
            Type::Primitive(_) => {}
            Type::Struct(s) => {
                for f in s.fields() {
                    current.insert(f.id, f.name.clone());
                    walk(&f.field_type, current, element_ids);
                }
            }
            Type::List(l) => {
                element_ids.insert(l.element_field.id);
                walk(&l.element_field.field_type, current, element_ids);
            }
            Type::Map(m) => {
                element_ids.extend([m.key_field.id, m.value_field.id]);
                walk(&m.key_field.field_type, current, element_ids);
                walk(&m.value_field.field_type, current, element_ids);
            }
        }
    }
    for field in schema.as_struct().fields() {
        walk(&field.field_type, &mut current, &mut element_ids);
    }
    if current.is_empty() || inputs.is_empty() {
        return Ok(None);
    }
    let names: HashSet<&str> = current.values().map(String::as_str).collect();
    let list = quote_files(inputs);
    let result = conn.query(&format!(
        "SELECT DISTINCT name, field_id::BIGINT FROM parquet_schema({list}) WHERE field_id IS NOT NULL ORDER BY ALL"
    ))?;
    for row in &result.rows {
        let (Some(name), Ok(id)) = (row[0].text(), row[1].int()) else { continue };
        let id = id as i32;
        if top.contains(&id) || element_ids.contains(&id) {
            continue;
        }
        match current.get(&id) {
            Some(now) if now != name => {
                return Ok(Some(format!("a data file's nested field '{name}' (id {id}) is now named '{now}'")));
            }
            None if names.contains(name) => {
                return Ok(Some(format!(
                    "a data file's nested field '{name}' (id {id}) was dropped and its name reused by another field"
                )));
            }
            _ => {}
        }
    }
    Ok(None)
}
