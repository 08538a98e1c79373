//! The attribute value index: `(type, attribute, value, concept)`, for every top-level
//! attribute of every concept whose value is a number, a boolean or a string of at most
//! [`MAX_INDEXED_STRING`] bytes.
//!
//! It lets a query read one attribute of a type's concepts without decoding their
//! records: a range FILTER (`?d {type: "Project"} FILTER(?d.attributes.rank > 98)`) is a
//! range scan, `ORDER BY ?d.attributes.rank DESC LIMIT 10` walks the index from its end
//! and stops. Why every such attribute and not a declared list: agents write attributes
//! the schema never names, an index that exists only after someone declares it is an
//! index most memories never get, and the cost is small (one entry of about 30 bytes
//! per short attribute; long strings, arrays and objects are left out, text is what
//! SEARCH is for). Counted per `(type, attribute)` in the `stats` table
//! ([`crate::Stat::Attr`]), so a query knows when every concept of a type has an indexed
//! value (the index then holds the whole order of that attribute).
//!
//! Values are keyed by an order-preserving text: a kind tag, then the value. The kinds
//! sort as the query engine sorts values of different kinds (numbers, then strings, then
//! booleans); numbers by their `f64` value (so `1` and `1.0` share a key, and integers
//! beyond 2^53 may share one: the index narrows, the query engine still compares the
//! exact values).

use crate::ConceptRecord;
use serde_json::Value;

/// The longest string value that is indexed (longer ones are left out).
pub const MAX_INDEXED_STRING: usize = 64;
/// The version of this index's key layout; a store indexed by another version (or
/// never) is rebuilt when it is opened.
pub const ATTR_INDEX_VERSION: u64 = 1;
/// `meta` key holding [`ATTR_INDEX_VERSION`].
pub const ATTR_INDEX_KEY: &str = "attr_index_version";

/// The kind tag of numbers; every number key starts with it.
pub const NUMBER: &str = "1";
/// The kind tag of strings.
pub const STRING: &str = "2";
/// The kind tag of booleans.
pub const BOOL: &str = "3";

/// A number's key: its `f64` value mapped to bits that sort as the numbers do, in hex.
pub fn number_key(f: f64) -> String {
    // -0.0 and 0.0 are equal numbers: one key.
    let f = if f == 0.0 { 0.0 } else { f };
    let bits = f.to_bits();
    let sortable = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    format!("{NUMBER}{sortable:016x}")
}

/// A string's key (any length: bounds of a scan may be longer than what is indexed).
pub fn string_key(s: &str) -> String {
    let mut k = String::with_capacity(s.len() + 1);
    k.push_str(STRING);
    k.push_str(s);
    k
}

/// The index key of a value, or `None` when such a value is not indexed.
pub fn value_key(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => n.as_f64().filter(|f| f.is_finite()).map(number_key),
        Value::String(s) if s.len() <= MAX_INDEXED_STRING => Some(string_key(s)),
        Value::Bool(b) => Some(format!("{BOOL}{}", u8::from(*b))),
        _ => None,
    }
}

/// Whether a value of this kind would be indexed (long strings are not).
pub fn indexed(v: &Value) -> bool {
    value_key(v).is_some()
}

/// The index entries of a concept: `(attribute, value key)`, in attribute order.
pub fn entries(rec: &ConceptRecord) -> Vec<(&str, String)> {
    let mut e: Vec<(&str, String)> = rec
        .attributes
        .iter()
        .filter_map(|(k, v)| value_key(v).map(|key| (k.as_str(), key)))
        .collect();
    e.sort_unstable();
    e
}

/// One entry of the index: `(type, attribute, value key)` of a concept.
pub type Entry<'a> = (&'a str, &'a str, String);

/// What changes in the index when a concept's record goes from `old` to `new` (`None`:
/// absent): `(removed, added)`. Entries that both records file under the same type are
/// in neither list, so an update that leaves the indexed values alone changes nothing.
/// Every backend files attributes through this, so they index the same entries.
pub fn diff<'a>(
    old: Option<&'a ConceptRecord>,
    new: Option<&'a ConceptRecord>,
) -> (Vec<Entry<'a>>, Vec<Entry<'a>>) {
    let before = old.map(entries).unwrap_or_default();
    let after = new.map(entries).unwrap_or_default();
    let same_type = matches!((old, new), (Some(o), Some(n)) if o.concept_type == n.concept_type);
    let kept = |list: &[(&str, String)], e: &(&str, String)| {
        same_type
            && list
                .binary_search_by(|x| (x.0, &x.1).cmp(&(e.0, &e.1)))
                .is_ok()
    };
    let removed: Vec<Entry<'a>> = match old {
        Some(o) => before
            .iter()
            .filter(|e| !kept(&after, e))
            .map(|(a, v)| (o.concept_type.as_str(), *a, v.clone()))
            .collect(),
        None => Vec::new(),
    };
    let added: Vec<Entry<'a>> = match new {
        Some(n) => after
            .iter()
            .filter(|e| !kept(&before, e))
            .map(|(a, v)| (n.concept_type.as_str(), *a, v.clone()))
            .collect(),
        None => Vec::new(),
    };
    (removed, added)
}

/// The `stats` key counting the indexed values of one `(type, attribute)`.
pub fn stat_key(concept_type: &str, attr: &str) -> String {
    format!("a:{concept_type}\u{0}{attr}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_sort_as_the_values() {
        let nums = [
            json!(-1e300),
            json!(-5),
            json!(-0.5),
            json!(0),
            json!(1e-9),
            json!(1),
            json!(2.5),
            json!(98),
            json!(99),
            json!(u64::MAX),
        ];
        let keys: Vec<String> = nums.iter().filter_map(value_key).collect();
        assert_eq!(keys.len(), nums.len());
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        assert_eq!(value_key(&json!(-0.0)), value_key(&json!(0)));
        assert_eq!(value_key(&json!(1.0)), value_key(&json!(1)));
        // Kinds: numbers < strings < booleans, as the query engine sorts them.
        let n = value_key(&json!(1e300)).unwrap_or_default();
        let s = value_key(&json!("")).unwrap_or_default();
        let f = value_key(&json!(false)).unwrap_or_default();
        let t = value_key(&json!(true)).unwrap_or_default();
        assert!(n < s && s < f && f < t);
        assert!(value_key(&json!("a")) < value_key(&json!("ab")));
        assert!(value_key(&json!("ab")) < value_key(&json!("b")));
        assert_eq!(value_key(&json!("x".repeat(65))), None);
        assert!(value_key(&json!("x".repeat(64))).is_some());
        assert_eq!(value_key(&json!([1])), None);
        assert_eq!(value_key(&json!({"a": 1})), None);
        assert_eq!(value_key(&Value::Null), None);
    }
}
