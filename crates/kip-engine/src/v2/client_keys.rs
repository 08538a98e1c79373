//! Client keys (Specification §7.5, §52.1): a CREATE that carries `CLIENT KEY k` and is
//! retried with the same content resolves to the element the first one created instead
//! of creating a second; the same key with other immutable content is
//! `ClientKeyConflict` (KIP2-CORE-012/013). A key is scoped by element kind and kept in
//! the store's `meta` table, written in the creating transaction.

use super::error::{Code, V2Error, V2Result};
use super::model;
use crate::store::{ElementId, ElementKind, GraphRead, GraphWrite};
use serde_json::{Map, Value};

fn meta_key(kind: ElementKind, key: &str) -> String {
    format!("kip2.client_key.{}.{key}", kind.prefix())
}

/// The client key of a CREATE, checked to be a non-empty string.
pub fn key_of(v: Option<&Value>) -> V2Result<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 512 => Ok(Some(s.clone())),
        Some(other) => Err(V2Error::new(
            Code::TypeMismatch,
            format!("a client key is a string of 1 to 512 characters, not {other}"),
        )
        .with_hint("CLIENT KEY \"message:42:evidence\"")),
    }
}

/// The element a client key already created, if any.
pub fn lookup(g: &dyn GraphRead, kind: ElementKind, key: &str) -> V2Result<Option<ElementId>> {
    Ok(g.meta(&meta_key(kind, key))?
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| ElementId::parse_id(&s)))
}

/// Records that `key` created `id`.
pub fn bind(w: &mut dyn GraphWrite, kind: ElementKind, key: &str, id: ElementId) -> V2Result<()> {
    w.set_meta(&meta_key(kind, key), id.id_string().as_bytes())?;
    Ok(())
}

/// Whether a retry's `given` fields are the content `existing` was created with
/// (engine-set fields the retry did not give, such as `asserted_at`, are not compared).
pub fn same_content(given: &Map<String, Value>, existing: &Map<String, Value>) -> bool {
    let engine_set = ["asserted_at", model::SYSTEM];
    existing
        .iter()
        .filter(|(k, _)| given.contains_key(*k) || !engine_set.contains(&k.as_str()))
        .all(|(k, v)| given.get(k) == Some(v))
        && given.iter().all(|(k, v)| existing.get(k) == Some(v))
}

/// The conflict of a reused key.
pub fn conflict(key: &str, id: ElementId) -> V2Error {
    V2Error::new(
        Code::ClientKeyConflict,
        format!(
            "the client key \"{key}\" created {} with other content",
            id.id_string()
        ),
    )
    .with_hint(
        "a client key names one logical creation: retry with the same content, or use a new key",
    )
    .with_detail("existing", id.id_string())
}
