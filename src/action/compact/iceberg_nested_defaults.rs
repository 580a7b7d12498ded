//! Defaults of nested struct fields in a rewrite: which input files lack a struct field that has
//! an `initial-default`, so the rewrite writes the default there as readers see it.
//!
//! The spec (Default values; Struct evolution) reads a field id missing from a data file as its
//! `initial-default`, per field, at any depth; and a writer must write every known field.
//! DuckDB reads a file's struct by name into the current struct type, leaving a field the file
//! lacks NULL, so the rewrite rebuilds each struct holding such a field, file by file
//! ([`super::sql`]'s column expressions): the default where the file lacks the field and the
//! parent struct is not NULL, the parent NULL where it was NULL.
//!
//! Handled: primitive fields reached from a top-level column through structs only. Not handled
//! (the partition is skipped, [`super::defaults::skip_unwritable_defaults`]): a default inside a
//! list or map (an element's field), a struct-typed field's own default (`{}` makes a missing
//! struct non-NULL), and a default this version cannot render.

use std::collections::{HashMap, HashSet};

use ::iceberg::spec::{NestedField, Schema, Type};

use crate::action::compact::defaults::{field_ids_by_file, writable_nested_defaults};
use crate::duck::Nested;
use crate::error::Result;

/// Per writable nested default (by field id): the input files, as DuckDB reads them, that lack
/// the field. Files without Parquet field ids are never listed (they are read by name, and a
/// partition with defaults and such files is skipped before).
#[derive(Debug, Default, Clone)]
pub struct NestedDefaults {
    lacking: HashMap<i32, Vec<String>>,
}

impl NestedDefaults {
    /// Which of `inputs` lack each of `schema`'s [`writable_nested_defaults`] (no probe when
    /// the schema has none).
    pub fn probe(conn: &Nested, schema: &Schema, inputs: &[String]) -> Result<Self> {
        let fields = writable_nested_defaults(schema);
        if fields.is_empty() || inputs.is_empty() {
            return Ok(Self::default());
        }
        let ids = field_ids_by_file(conn, inputs)?;
        Ok(Self::from_ids(&fields, inputs, &ids))
    }

    fn from_ids(fields: &[&NestedField], inputs: &[String], ids: &[HashSet<i32>]) -> Self {
        let mut lacking = HashMap::new();
        for field in fields {
            let files: Vec<String> = inputs
                .iter()
                .zip(ids)
                .filter(|(_, ids)| !ids.is_empty() && !ids.contains(&field.id))
                .map(|(path, _)| path.clone())
                .collect();
            if !files.is_empty() {
                lacking.insert(field.id, files);
            }
        }
        Self { lacking }
    }

    /// Whether no input lacks a nested field with a default (the rewrite reads plainly).
    pub fn is_empty(&self) -> bool {
        self.lacking.is_empty()
    }

    /// The input files lacking field `id`, if any lacks it.
    pub fn lacking(&self, id: i32) -> Option<&[String]> {
        self.lacking.get(&id).map(Vec::as_slice)
    }

    /// Whether some field at or below `field` is lacking from an input.
    pub fn touches(&self, field: &NestedField) -> bool {
        if self.lacking.contains_key(&field.id) {
            return true;
        }
        match field.field_type.as_ref() {
            Type::Struct(s) => s.fields().iter().any(|f| self.touches(f)),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use ::iceberg::spec::{ListType, Literal, PrimitiveLiteral, PrimitiveType, StructType};

    use super::*;

    fn int(id: i32, name: &str, default: Option<i32>) -> NestedField {
        let f = NestedField::optional(id, name, Type::Primitive(PrimitiveType::Int));
        match default {
            Some(v) => f.with_initial_default(Literal::Primitive(PrimitiveLiteral::Int(v))),
            None => f,
        }
    }

    #[test]
    fn only_primitive_defaults_reached_through_structs_are_written() {
        let inner = Type::Struct(StructType::new(vec![int(4, "g", Some(2)).into()]));
        let element = Type::Struct(StructType::new(vec![int(8, "e", Some(3)).into()]));
        let schema = Schema::builder()
            .with_fields(vec![
                int(1, "top", Some(1)).into(),
                NestedField::optional(
                    2,
                    "s",
                    Type::Struct(StructType::new(vec![
                        int(3, "f", Some(5)).into(),
                        NestedField::optional(5, "t", inner.clone()).into(),
                        NestedField::optional(
                            6,
                            "l",
                            Type::List(ListType::new(NestedField::list_element(7, element, false).into())),
                        )
                        .into(),
                    ])),
                )
                .into(),
            ])
            .build()
            .unwrap();
        let ids: Vec<i32> = writable_nested_defaults(&schema).iter().map(|f| f.id).collect();
        // 1 is top-level (read with DuckDB's default_value); 8, inside the list's element, is not.
        assert_eq!(ids, vec![3, 4]);
        let fields = writable_nested_defaults(&schema);
        let inputs = vec!["old".to_string(), "new".to_string(), "no-ids".to_string()];
        let present = vec![HashSet::from([1, 2, 5]), HashSet::from([1, 2, 3, 4, 5]), HashSet::new()];
        let fills = NestedDefaults::from_ids(&fields, &inputs, &present);
        assert_eq!(fills.lacking(3), Some(&["old".to_string()][..]));
        assert_eq!(fills.lacking(4), Some(&["old".to_string()][..]));
        assert!(fills.touches(&schema.as_struct().fields()[1]) && !fills.touches(&schema.as_struct().fields()[0]));
        let sql = crate::action::compact::sql::column_sql(&schema.as_struct().fields()[1], &fills, "__file");
        assert_eq!(
            sql,
            "CASE WHEN \"s\" IS NULL THEN NULL ELSE struct_pack(\
             \"f\" := CASE WHEN \"__file\" IN ('old') THEN CAST('5' AS INTEGER) ELSE struct_extract(\"s\", 'f') END, \
             \"t\" := CASE WHEN struct_extract(\"s\", 't') IS NULL THEN NULL ELSE struct_pack(\"g\" := CASE WHEN \
             \"__file\" IN ('old') THEN CAST('2' AS INTEGER) ELSE struct_extract(struct_extract(\"s\", 't'), 'g') END) END, \
             \"l\" := struct_extract(\"s\", 'l')) END AS \"s\""
        );
    }
}
