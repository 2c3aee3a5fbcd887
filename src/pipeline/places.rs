//! Where a mistake in a pipeline is: the places (file, line, column) of a pipeline file's
//! tables and keys, the first op or `[source]` table that does not parse on its own, and the
//! table at fault in a pipeline given as JSON. Errors name what the user wrote, not a line
//! and column of text nobody wrote.

use super::config::{BatchConfig, EngineConfig};
use crate::batch_ops::BatchOp;
use crate::error::{Invalid, Place};
use crate::ops::Op;
use crate::shards::StoreConfig;
use crate::source::SourceConfig;
use serde::Deserialize;
use std::path::Path;
/// Where one op of a pipeline file is written: its table, and each `key = value` line in it
/// (tables written as `[[ops]]`; an inline table gets only its own place).
#[derive(Clone, Debug)]
pub(super) struct OpPlace {
    table: Place,
    /// `(key, its place, the value's text on that line)`.
    keys: Vec<(String, Place, String)>,
}

impl OpPlace {
    /// The place of `key` in this op's table, else of the table.
    pub(super) fn of(&self, key: Option<&str>) -> Place {
        key.and_then(|k| self.keys.iter().find(|(name, ..)| name == k))
            .map_or_else(|| self.table.clone(), |(_, p, _)| p.clone())
    }

    /// Where serde's `message` about this table points: the unknown field it names, the key
    /// holding the unknown variant it names, else the table.
    fn culprit(&self, message: &str) -> Place {
        let quoted = |prefix: &str| {
            message
                .strip_prefix(prefix)
                .and_then(|m| m.split('`').next())
                .map(str::to_string)
        };
        if let Some(field) = quoted("unknown field `") {
            return self.of(Some(&field));
        }
        if let Some(variant) = quoted("unknown variant `") {
            // the value as written: a basic or a literal string, maybe with a comment after
            let written = |v: &str| {
                let v = v.trim();
                [format!("\"{variant}\""), format!("'{variant}'")]
                    .iter()
                    .any(|q| v.starts_with(q.as_str()))
            };
            if let Some((_, p, _)) = self.keys.iter().find(|(.., v)| written(v)) {
                return p.clone();
            }
        }
        self.table.clone()
    }
}

/// Where a pipeline file wrote its ops, so that an op's error can point at its line. Not part
/// of what the pipeline is: two configs that differ only here are equal.
#[derive(Clone, Debug, Default)]
pub(super) struct OpPlaces(pub(super) Vec<OpPlace>);

impl PartialEq for OpPlaces {
    fn eq(&self, _: &OpPlaces) -> bool {
        true
    }
}

/// A pipeline file's tables as written, with their byte spans (one lenient parse, for
/// pointing at mistakes and for what the typed parse cannot tell).
#[derive(Deserialize)]
pub(super) struct Tables {
    source: Option<toml::Spanned<toml::Table>>,
    #[serde(default)]
    pub(super) ops: Vec<toml::Spanned<toml::Table>>,
    pub(super) batch: Option<toml::Value>,
    #[serde(default)]
    pub(super) batch_ops: Vec<toml::Spanned<toml::Table>>,
}

impl Tables {
    /// `None` when the file does not parse as TOML (the typed parse reports where).
    pub(super) fn read(text: &str) -> Option<Tables> {
        toml::from_str(text).ok()
    }
}

/// Where the table at `span` of `text` (the contents of `file`) and its keys are.
pub(super) fn table_place(text: &str, span: std::ops::Range<usize>, file: &Path) -> OpPlace {
    let body = text.get(span.clone()).unwrap_or("");
    let mut keys = Vec::new();
    let mut offset = span.start;
    for line in body.split_inclusive('\n') {
        let key_at = line.len() - line.trim_start().len();
        let rest = &line[key_at..];
        let key: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        if let Some(value) = rest[key.len()..].trim_start().strip_prefix('=') {
            if !key.is_empty() {
                let place = Place::of(file, text, offset + key_at);
                keys.push((key, place, value.trim().to_string()));
            }
        }
        offset += line.len();
    }
    OpPlace {
        table: Place::of(file, text, span.start),
        keys,
    }
}

/// The places of the ops of `text` (the contents of `file`).
pub(super) fn op_places(text: &str, file: &Path, ops: &[toml::Spanned<toml::Table>]) -> OpPlaces {
    OpPlaces(
        ops.iter()
            .map(|t| table_place(text, t.span(), file))
            .collect(),
    )
}

/// A mistake inside `[source]`, as `[source] at line L, column C: why`, at the field where
/// the message names one: the whole-file parse would point at the table (the table is split
/// into dataset and sampling fields by hand, which loses serde's places). `None` when the
/// table is valid or the file does not parse (the whole-file parse reports that).
pub(super) fn source_error(text: &str, file: &Path, tables: &Option<Tables>) -> Option<String> {
    let source = tables.as_ref()?.source.as_ref()?;
    let place = table_place(text, source.span(), file);
    let err = toml::Value::Table(source.get_ref().clone())
        .try_into::<SourceConfig>()
        .err()?;
    let p = place.culprit(err.message());
    Some(format!(
        "[source] at line {}, column {}: {}",
        p.line,
        p.column,
        err.message().trim_end()
    ))
}

/// The first op of `text` that is not a valid op table, as `ops[i] (name) at line L, column
/// C: why`, the place being the field at fault where the message names one (an unknown
/// field), else the op's table; `None` when every op table is valid, or when the file does
/// not parse or an op's name is wrong (the whole-file parse reports those at their own line).
pub(super) fn op_error<T: serde::de::DeserializeOwned>(
    list: &str,
    tables: &[toml::Spanned<toml::Table>],
    places: &OpPlaces,
) -> Option<String> {
    for (i, t) in tables.iter().enumerate() {
        let table = t.get_ref().clone();
        let name = table
            .get("op")
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string();
        let Err(err) = toml::Value::Table(table).try_into::<T>() else {
            continue;
        };
        // An unknown or missing `op` name: the whole-file parse points at the `op = ...`
        // line itself, better than the table's.
        let message = err.message();
        if message.contains("missing field `op`")
            || message.starts_with(&format!("unknown variant `{name}`"))
        {
            return None;
        }
        let place = places.0.get(i).map(|p| p.culprit(err.message()));
        let at = place.map_or(String::new(), |p| {
            format!(" at line {}, column {}", p.line, p.column)
        });
        return Some(format!(
            "{list}[{i}] ({name}){at}: {}",
            err.message().trim_end()
        ));
    }
    None
}

/// Where in the tables `value` the error `whole` (of the whole config's parse) is: the first
/// table that does not parse on its own, with its error.
pub(super) fn locate_json_error(value: &serde_json::Value, whole: serde_json::Error) -> Invalid {
    use serde::de::DeserializeOwned;
    fn check<T: DeserializeOwned>(v: &serde_json::Value) -> Option<serde_json::Error> {
        serde_json::from_value::<T>(v.clone()).err()
    }
    let Some(tables) = value.as_object() else {
        return Invalid::NotTables(whole);
    };
    let at = |table: String, source| Invalid::Table {
        table: Some(table),
        source,
    };
    let listed = |key: &str| tables.get(key).and_then(|v| v.as_array()).cloned();
    let named = |t: &serde_json::Value, key: &str| {
        t.get(key)
            .and_then(|v| v.as_str())
            .map_or(String::new(), |n| format!(" ({n})"))
    };
    if let Some(e) = tables.get("source").and_then(check::<SourceConfig>) {
        return at("source".into(), e);
    }
    for (i, op) in listed("ops").unwrap_or_default().iter().enumerate() {
        if let Some(e) = check::<Op>(op) {
            return at(format!("ops[{i}]{}", named(op, "op")), e);
        }
    }
    for (i, op) in listed("batch_ops").unwrap_or_default().iter().enumerate() {
        if let Some(e) = check::<BatchOp>(op) {
            return at(format!("batch_ops[{i}]{}", named(op, "op")), e);
        }
    }
    if let Some(e) = tables.get("batch").and_then(check::<BatchConfig>) {
        return at("batch".into(), e);
    }
    if let Some(e) = tables.get("engine").and_then(check::<EngineConfig>) {
        return at("engine".into(), e);
    }
    if let Some(e) = tables.get("store").and_then(check::<StoreConfig>) {
        return at("store".into(), e);
    }
    Invalid::Table {
        table: None,
        source: whole,
    }
}
