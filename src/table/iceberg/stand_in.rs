//! Column types of Iceberg format v3 that iceberg-rust 0.10 cannot parse (`variant`, `geometry`,
//! `geography`, `unknown`, and, in a v3 table, any primitive type name the spec does not define
//! yet: v3's types have grown since it first shipped), held by stand-ins so that the rest of the
//! metadata can be read. A v1 or v2 table's types are all known, so a name outside them is an
//! error there ([`StandIns::first_unknown_type`] names it).
//!
//! Maintenance of metadata never looks inside such a column: profile, health, expiry and orphans
//! need the partition specs (whose source columns are never of these types) and the manifests.
//! So while reading, each such type is replaced by `binary` (whose bounds accept any bytes), and
//! the original type is remembered by schema id and field id. Writing metadata back puts every
//! original type in its place ([`StandIns::restore`]), so a commit never changes a schema.
//! Compaction, which rewrites rows, refuses a table with stand-ins.

use std::collections::BTreeMap;

use serde_json::Value;

/// The type that stands in for an unsupported one while reading.
const STAND_IN: &str = "binary";

/// Original types replaced by stand-ins: schema id → field id → (column name, original type).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StandIns {
    by_schema: BTreeMap<i64, BTreeMap<i64, (String, Value)>>,
}

impl StandIns {
    /// Whether nothing was replaced.
    pub fn is_empty(&self) -> bool {
        self.by_schema.is_empty()
    }

    /// `name (type)` of each replaced column of any schema, for messages.
    pub fn describe(&self) -> String {
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for fields in self.by_schema.values() {
            for (name, ty) in fields.values() {
                seen.insert(name.clone(), type_name(ty));
            }
        }
        seen.into_iter().map(|(n, t)| format!("'{n}' ({t})")).collect::<Vec<_>>().join(", ")
    }

    /// Whether a replaced column is a `variant`.
    pub fn has_variant(&self) -> bool {
        self.by_schema.values().flat_map(|fields| fields.values()).any(|(_, ty)| ty.as_str() == Some("variant"))
    }

    /// Replaces unsupported types in every schema of table metadata JSON (`schemas`, and v1's
    /// `schema`); what was replaced is recorded. Types the spec does not define are replaced
    /// only in format v3 and later.
    pub fn substitute_metadata(metadata: &mut Value) -> StandIns {
        let undefined_too = metadata.get("format-version").and_then(Value::as_u64).is_some_and(|v| v >= 3);
        let mut stand_ins = StandIns::default();
        if let Some(schemas) = metadata.get_mut("schemas").and_then(Value::as_array_mut) {
            for schema in schemas {
                stand_ins.substitute(schema, undefined_too);
            }
        }
        if let Some(schema) = metadata.get_mut("schema") {
            stand_ins.substitute(schema, undefined_too);
        }
        stand_ins
    }

    /// Replaces unsupported types in one schema's JSON (a manifest header's `schema`: read only
    /// once the table's metadata was, so types the spec does not define are replaced too).
    pub fn substitute_schema(&mut self, schema: &mut Value) {
        self.substitute(schema, true);
    }

    fn substitute(&mut self, schema: &mut Value, undefined_too: bool) {
        let schema_id = schema.get("schema-id").and_then(Value::as_i64).unwrap_or(0);
        let mut replaced = BTreeMap::new();
        walk_fields(schema, &mut |field| {
            let Some(ty) = field.get("type") else { return };
            if is_unsupported(ty) || (undefined_too && ty.as_str().is_some_and(|t| !is_defined(t))) {
                let id = field.get("id").and_then(Value::as_i64).unwrap_or(-1);
                let name = field.get("name").and_then(Value::as_str).unwrap_or("?").to_string();
                replaced.insert(id, (name, ty.clone()));
                field["type"] = Value::String(STAND_IN.into());
            }
        });
        if !replaced.is_empty() {
            self.by_schema.entry(schema_id).or_default().extend(replaced);
        }
    }

    /// The first column (name, type) of any schema in metadata JSON whose type is a string the
    /// spec does not define (for an error that names it).
    pub fn first_unknown_type(metadata: &Value) -> Option<(String, String)> {
        let mut schemas: Vec<Value> = metadata.get("schemas").and_then(Value::as_array).cloned().unwrap_or_default();
        schemas.extend(metadata.get("schema").cloned());
        let mut found = None;
        for schema in &mut schemas {
            walk_fields(schema, &mut |field| {
                if let (None, Some(Value::String(ty))) = (&found, field.get("type"))
                    && !is_defined(ty)
                {
                    let name = field.get("name").and_then(Value::as_str).unwrap_or("?");
                    found = Some((name.to_string(), ty.clone()));
                }
            });
        }
        found
    }

    /// Puts the original types back into metadata JSON about to be written.
    pub fn restore(&self, metadata: &mut Value) {
        if self.is_empty() {
            return;
        }
        let mut restore_schema = |schema: &mut Value| {
            let schema_id = schema.get("schema-id").and_then(Value::as_i64).unwrap_or(0);
            let Some(originals) = self.by_schema.get(&schema_id) else { return };
            walk_fields(schema, &mut |field| {
                let id = field.get("id").and_then(Value::as_i64).unwrap_or(-1);
                if let Some((_, ty)) = originals.get(&id) {
                    field["type"] = ty.clone();
                }
            });
        };
        if let Some(schemas) = metadata.get_mut("schemas").and_then(Value::as_array_mut) {
            schemas.iter_mut().for_each(&mut restore_schema);
        }
        if let Some(schema) = metadata.get_mut("schema") {
            restore_schema(schema);
        }
    }
}

/// Calls `visit` on every field object of a schema (struct fields, list elements, map keys and
/// values), depth first, children after their parent.
fn walk_fields(node: &mut Value, visit: &mut dyn FnMut(&mut Value)) {
    if let Some(fields) = node.get_mut("fields").and_then(Value::as_array_mut) {
        for field in fields {
            visit(field);
            if let Some(ty) = field.get_mut("type") {
                walk_type(ty, visit);
            }
        }
    }
}

fn walk_type(ty: &mut Value, visit: &mut dyn FnMut(&mut Value)) {
    let Some(kind) = ty.get("type").and_then(Value::as_str).map(str::to_string) else { return };
    match kind.as_str() {
        "struct" => walk_fields(ty, visit),
        "list" => walk_element(ty, "element", "element-id", visit),
        "map" => {
            walk_element(ty, "key", "key-id", visit);
            walk_element(ty, "value", "value-id", visit);
        }
        _ => {}
    }
}

/// A list element or map key/value is not a field object: its type sits under `key`, its id under
/// `id_key`. Visited as a pseudo-field so that its type can be replaced and restored too.
fn walk_element(ty: &mut Value, key: &str, id_key: &str, visit: &mut dyn FnMut(&mut Value)) {
    let id = ty.get(id_key).cloned().unwrap_or(Value::Null);
    let Some(inner) = ty.get(key).cloned() else { return };
    let mut pseudo = serde_json::json!({ "id": id, "name": key, "type": inner });
    visit(&mut pseudo);
    if let Some(inner) = pseudo.get_mut("type") {
        walk_type(inner, visit);
    }
    ty[key] = pseudo["type"].take();
}

/// Whether `ty` is a type iceberg-rust 0.10 does not parse.
fn is_unsupported(ty: &Value) -> bool {
    let Some(name) = ty.as_str() else { return false };
    let base = name.split('(').next().unwrap_or(name).trim();
    matches!(base, "variant" | "unknown" | "geometry" | "geography")
}

/// Whether `ty` is a primitive type name of the spec (v1 to v3).
fn is_defined(ty: &str) -> bool {
    let base = ty.split(['(', '[']).next().unwrap_or(ty).trim();
    matches!(
        base,
        "boolean"
            | "int"
            | "long"
            | "float"
            | "double"
            | "date"
            | "time"
            | "timestamp"
            | "timestamptz"
            | "timestamp_ns"
            | "timestamptz_ns"
            | "string"
            | "uuid"
            | "binary"
            | "decimal"
            | "fixed"
            | "variant"
            | "unknown"
            | "geometry"
            | "geography"
    )
}

fn type_name(ty: &Value) -> String {
    ty.as_str().map(str::to_string).unwrap_or_else(|| ty.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unsupported_types_are_replaced_and_restored_everywhere() {
        let original = json!({
            "format-version": 3,
            "schemas": [{
                "type": "struct", "schema-id": 1, "fields": [
                    {"id": 1, "name": "id", "required": true, "type": "long"},
                    {"id": 2, "name": "v", "required": false, "type": "variant"},
                    {"id": 3, "name": "s", "required": false, "type": {"type": "struct", "fields": [
                        {"id": 4, "name": "g", "required": false, "type": "geometry(srid:4326)"}]}},
                    {"id": 5, "name": "l", "required": false,
                     "type": {"type": "list", "element-id": 6, "element-required": false, "element": "unknown"}},
                    {"id": 7, "name": "m", "required": false,
                     "type": {"type": "map", "key-id": 8, "key": "string", "value-id": 9,
                              "value-required": false, "value": "geography"}}
                ]}]
        });
        let mut metadata = original.clone();
        let stand_ins = StandIns::substitute_metadata(&mut metadata);
        let text = metadata.to_string();
        for gone in ["variant", "geometry", "unknown", "geography"] {
            assert!(!text.contains(gone), "{gone} left in {text}");
        }
        assert_eq!(metadata["schemas"][0]["fields"][0]["type"], "long", "supported types untouched");
        assert_eq!(metadata["schemas"][0]["fields"][4]["type"]["key"], "string");
        assert!(stand_ins.describe().contains("'v' (variant)"), "{}", stand_ins.describe());
        assert!(stand_ins.has_variant());
        assert!(!StandIns::default().has_variant());
        stand_ins.restore(&mut metadata);
        assert_eq!(metadata, original);
    }

    #[test]
    fn undefined_types_are_named() {
        let metadata = json!({"schemas": [{"schema-id": 0, "type": "struct", "fields": [
            {"id": 1, "name": "a", "required": false, "type": "decimal(9, 2)"},
            {"id": 2, "name": "s", "required": false, "type": {"type": "struct", "fields": [
                {"id": 3, "name": "c", "required": false, "type": "varchar(10)"}]}}]}]});
        assert_eq!(StandIns::first_unknown_type(&metadata), Some(("c".into(), "varchar(10)".into())));
        assert_eq!(StandIns::first_unknown_type(&json!({"schemas": []})), None);
    }

    #[test]
    fn a_type_v3_does_not_define_yet_is_held_by_a_stand_in_only_in_v3() {
        let schema = |version: u64| {
            json!({"format-version": version, "schemas": [{"schema-id": 0, "type": "struct", "fields": [
                {"id": 1, "name": "a", "required": false, "type": "timestamptz_ns"},
                {"id": 2, "name": "l", "required": false,
                 "type": {"type": "list", "element-id": 3, "element-required": false, "element": "decimal256(60, 2)"}}]}]})
        };
        let original = schema(3);
        let mut metadata = original.clone();
        let stand_ins = StandIns::substitute_metadata(&mut metadata);
        assert_eq!(stand_ins.describe(), "'element' (decimal256(60, 2))");
        assert_eq!(metadata["schemas"][0]["fields"][0]["type"], "timestamptz_ns", "a defined type stays");
        assert_eq!(metadata["schemas"][0]["fields"][1]["type"]["element"], STAND_IN);
        stand_ins.restore(&mut metadata);
        assert_eq!(metadata, original);
        // v2's types are all known: an undefined one stays, for the error that names it.
        let mut v2 = schema(2);
        assert!(StandIns::substitute_metadata(&mut v2).is_empty());
        assert_eq!(StandIns::first_unknown_type(&v2), Some(("element".into(), "decimal256(60, 2)".into())));
    }

    #[test]
    fn nothing_replaced_in_a_v2_schema() {
        let mut metadata = json!({"schemas": [{"schema-id": 0, "type": "struct",
            "fields": [{"id": 1, "name": "unknown", "required": false, "type": "string"}]}]});
        let before = metadata.clone();
        let stand_ins = StandIns::substitute_metadata(&mut metadata);
        assert!(stand_ins.is_empty());
        assert_eq!(metadata, before);
    }
}
