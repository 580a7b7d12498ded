//! Defaults of nested struct fields in a rewrite: which input files lack a struct field that has
//! an `initial-default`, so the rewrite writes the default there as readers see it.
//!
//! The spec (Default values; Struct evolution) reads a field id missing from a data file as its
//! `initial-default`, per field, at any depth; and a writer must write every known field.
//! DuckDB reads a file's struct by name into the current struct type, leaving a field the file
//! lacks NULL, so the rewrite rebuilds each value holding such a field, file by file
//! ([`super::sql`]'s column expressions): the default where the file lacks the field and the
//! parent struct is not NULL, the parent NULL where it was NULL.
//!
//! Handled: primitive struct fields at any depth of structs, list elements and map keys and
//! values ([`writable_nested_defaults`]). Not handled (the partition is skipped,
//! [`super::defaults::skip_unwritable_defaults`]): a struct's, list's or map's own default (`{}`
//! makes a missing struct non-NULL) and what lies inside it, and a default this version cannot
//! render.

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
        self.lacking.contains_key(&field.id) || self.touches_type(&field.field_type)
    }

    /// Whether some field inside a value of type `ty` is lacking from an input.
    pub fn touches_type(&self, ty: &Type) -> bool {
        match ty {
            Type::Primitive(_) => false,
            Type::Struct(s) => s.fields().iter().any(|f| self.touches(f)),
            Type::List(l) => self.touches(&l.element_field),
            Type::Map(m) => self.touches(&m.key_field) || self.touches(&m.value_field),
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
    fn primitive_defaults_inside_structs_lists_and_maps_are_written() {
        let inner = Type::Struct(StructType::new(vec![int(4, "g", Some(2)).into()]));
        let element = Type::Struct(StructType::new(vec![int(8, "e", Some(3)).into()]));
        let unrenderable = NestedField::optional(9, "bad", Type::Primitive(PrimitiveType::Timestamp))
            .with_initial_default(Literal::Primitive(PrimitiveLiteral::Long(i64::MIN)));
        let schema = Schema::builder()
            .with_fields(vec![
                int(1, "top", Some(1)).into(),
                NestedField::optional(
                    2,
                    "s",
                    Type::Struct(StructType::new(vec![
                        int(3, "f", Some(5)).into(),
                        NestedField::optional(5, "t", inner).into(),
                        NestedField::optional(
                            6,
                            "l",
                            Type::List(ListType::new(NestedField::list_element(7, element, false).into())),
                        )
                        .into(),
                        unrenderable.into(),
                    ])),
                )
                .into(),
            ])
            .build()
            .unwrap();
        let fields = writable_nested_defaults(&schema);
        // 1 is top-level (read with DuckDB's default_value); 9's default does not render.
        assert_eq!(fields.iter().map(|f| f.id).collect::<Vec<_>>(), vec![3, 4, 8]);
        let inputs = vec!["old".to_string(), "new".to_string(), "no-ids".to_string()];
        let present = vec![HashSet::from([1, 2, 5, 6, 7]), HashSet::from([1, 2, 3, 4, 5, 6, 7, 8]), HashSet::new()];
        let fills = NestedDefaults::from_ids(&fields, &inputs, &present);
        assert_eq!(fills.lacking(3), Some(&["old".to_string()][..]));
        assert_eq!(fills.lacking(8), Some(&["old".to_string()][..]));
        assert!(fills.touches(&schema.as_struct().fields()[1]) && !fills.touches(&schema.as_struct().fields()[0]));
        let sql = crate::action::compact::sql::column_sql(&schema.as_struct().fields()[1], &fills, "__file");
        assert_eq!(
            sql,
            "CASE WHEN \"s\" IS NULL THEN NULL ELSE struct_pack(\"f\" := CASE WHEN \"__file\" IN ('old') \
             THEN CAST('5' AS INTEGER) ELSE struct_extract(\"s\", 'f') END, \"t\" := CASE WHEN \
             struct_extract(\"s\", 't') IS NULL THEN NULL ELSE struct_pack(\"g\" := CASE WHEN \"__file\" IN \
             ('old') THEN CAST('2' AS INTEGER) ELSE struct_extract(struct_extract(\"s\", 't'), 'g') \
             END) END, \"l\" := CASE WHEN struct_extract(\"s\", 'l') IS NULL THEN NULL ELSE \
             list_transform(struct_extract(\"s\", 'l'), lambda __lakehouse_e1: CASE WHEN __lakehouse_e1 \
             IS NULL THEN NULL ELSE struct_pack(\"e\" := CASE WHEN \"__file\" IN ('old') THEN CAST('3' AS \
             INTEGER) ELSE struct_extract(__lakehouse_e1, 'e') END) END) END, \"bad\" := \
             struct_extract(\"s\", 'bad')) END AS \"s\""
        );
    }
}
