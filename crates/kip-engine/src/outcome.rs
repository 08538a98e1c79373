//! The outcome of one command, shared by the executors (which produce it) and the
//! envelope (which assembles responses from it), so that neither imports the other.

use kip_lang::KipError;
use serde_json::{json, Map, Value};

/// The outcome of one command: a `result` (with optional `next_cursor`) or an `error`.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Success.
    Ok {
        /// The command's result.
        result: Value,
        /// Pagination token when more rows exist.
        next_cursor: Option<String>,
    },
    /// Failure.
    Err(KipError),
}

impl Outcome {
    /// A success without a cursor.
    pub fn ok(result: Value) -> Outcome {
        Outcome::Ok {
            result,
            next_cursor: None,
        }
    }

    /// The response object `{"result": ..., "next_cursor"?: ...}` or `{"error": {...}}`.
    pub fn to_json(&self) -> Value {
        match self {
            Outcome::Ok {
                result,
                next_cursor,
            } => {
                let mut m = Map::new();
                m.insert("result".into(), result.clone());
                if let Some(c) = next_cursor {
                    m.insert("next_cursor".into(), Value::String(c.clone()));
                }
                Value::Object(m)
            }
            Outcome::Err(e) => json!({ "error": e.to_json() }),
        }
    }

    /// True for an error outcome.
    pub fn is_err(&self) -> bool {
        matches!(self, Outcome::Err(_))
    }
}

/// Counts the bytes of a JSON serialization without building it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The size of `v` as compact JSON.
pub fn json_size(v: &Value) -> usize {
    let mut n = ByteCount(0);
    let _ = serde_json::to_writer(&mut n, v);
    n.0
}
