//! KIP standard error codes (spec Appendix 4) and the error object every interface returns.

use serde::Serialize;
use std::fmt;

/// One of the thirteen standard KIP error codes (RC11 added `KIP_3005`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum ErrorCode {
    /// `KIP_1001` InvalidSyntax: the text cannot be parsed.
    #[serde(rename = "KIP_1001")]
    InvalidSyntax,
    /// `KIP_1002` InvalidIdentifier: an identifier does not match `[a-zA-Z_][a-zA-Z0-9_]*`.
    #[serde(rename = "KIP_1002")]
    InvalidIdentifier,
    /// `KIP_2001` TypeMismatch: unknown (or wrongly cased) concept type or predicate.
    #[serde(rename = "KIP_2001")]
    TypeMismatch,
    /// `KIP_2002` ConstraintViolation: a data constraint is violated.
    #[serde(rename = "KIP_2002")]
    ConstraintViolation,
    /// `KIP_2003` InvalidValueType: a JSON value has the wrong type.
    #[serde(rename = "KIP_2003")]
    InvalidValueType,
    /// `KIP_3001` ReferenceError: an undefined variable, handle or parameter.
    #[serde(rename = "KIP_3001")]
    ReferenceError,
    /// `KIP_3002` NotFound: a referenced node or link does not exist.
    #[serde(rename = "KIP_3002")]
    NotFound,
    /// `KIP_3003` DuplicateExists: a uniqueness constraint is violated.
    #[serde(rename = "KIP_3003")]
    DuplicateExists,
    /// `KIP_3004` ImmutableTarget: a protected system structure would change.
    #[serde(rename = "KIP_3004")]
    ImmutableTarget,
    /// `KIP_3005` VersionConflict: an `EXPECT VERSION` guard did not match.
    #[serde(rename = "KIP_3005")]
    VersionConflict,
    /// `KIP_4001` ExecutionTimeout: the time budget was exceeded.
    #[serde(rename = "KIP_4001")]
    ExecutionTimeout,
    /// `KIP_4002` ResourceExhausted: a result or resource limit was exceeded.
    #[serde(rename = "KIP_4002")]
    ResourceExhausted,
    /// `KIP_4003` InternalError: an unexpected internal failure.
    #[serde(rename = "KIP_4003")]
    InternalError,
}

impl ErrorCode {
    /// Every code, in numeric order.
    pub const ALL: [ErrorCode; 13] = [
        ErrorCode::InvalidSyntax,
        ErrorCode::InvalidIdentifier,
        ErrorCode::TypeMismatch,
        ErrorCode::ConstraintViolation,
        ErrorCode::InvalidValueType,
        ErrorCode::ReferenceError,
        ErrorCode::NotFound,
        ErrorCode::DuplicateExists,
        ErrorCode::ImmutableTarget,
        ErrorCode::VersionConflict,
        ErrorCode::ExecutionTimeout,
        ErrorCode::ResourceExhausted,
        ErrorCode::InternalError,
    ];

    /// The wire form, e.g. `"KIP_1001"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidSyntax => "KIP_1001",
            ErrorCode::InvalidIdentifier => "KIP_1002",
            ErrorCode::TypeMismatch => "KIP_2001",
            ErrorCode::ConstraintViolation => "KIP_2002",
            ErrorCode::InvalidValueType => "KIP_2003",
            ErrorCode::ReferenceError => "KIP_3001",
            ErrorCode::NotFound => "KIP_3002",
            ErrorCode::DuplicateExists => "KIP_3003",
            ErrorCode::ImmutableTarget => "KIP_3004",
            ErrorCode::VersionConflict => "KIP_3005",
            ErrorCode::ExecutionTimeout => "KIP_4001",
            ErrorCode::ResourceExhausted => "KIP_4002",
            ErrorCode::InternalError => "KIP_4003",
        }
    }

    /// The spec's name for the code, e.g. `"InvalidSyntax"`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::InvalidSyntax => "InvalidSyntax",
            ErrorCode::InvalidIdentifier => "InvalidIdentifier",
            ErrorCode::TypeMismatch => "TypeMismatch",
            ErrorCode::ConstraintViolation => "ConstraintViolation",
            ErrorCode::InvalidValueType => "InvalidValueType",
            ErrorCode::ReferenceError => "ReferenceError",
            ErrorCode::NotFound => "NotFound",
            ErrorCode::DuplicateExists => "DuplicateExists",
            ErrorCode::ImmutableTarget => "ImmutableTarget",
            ErrorCode::VersionConflict => "VersionConflict",
            ErrorCode::ExecutionTimeout => "ExecutionTimeout",
            ErrorCode::ResourceExhausted => "ResourceExhausted",
            ErrorCode::InternalError => "InternalError",
        }
    }

    /// The KIP 2.0 registry name of the code (Specification §87). The syntax and
    /// resource codes map to the identically named 2.0 errors; the others map to the
    /// nearest 2.0 name (`NotFound` is `NotFoundOrNotVisible`, `InvalidValueType` is
    /// `TypeMismatch`, `DuplicateExists` is `IdentityConflict`, `ImmutableTarget` is
    /// `ImmutableField`).
    pub fn v2_name(self) -> &'static str {
        match self {
            ErrorCode::InvalidSyntax => "InvalidSyntax",
            ErrorCode::InvalidIdentifier => "InvalidIdentifier",
            ErrorCode::TypeMismatch | ErrorCode::InvalidValueType => "TypeMismatch",
            ErrorCode::ConstraintViolation => "ConstraintViolation",
            ErrorCode::ReferenceError => "ReferenceError",
            ErrorCode::NotFound => "NotFoundOrNotVisible",
            ErrorCode::DuplicateExists => "IdentityConflict",
            ErrorCode::ImmutableTarget => "ImmutableField",
            ErrorCode::VersionConflict => "VersionConflict",
            ErrorCode::ExecutionTimeout => "ExecutionTimeout",
            ErrorCode::ResourceExhausted => "ResourceExhausted",
            ErrorCode::InternalError => "InternalError",
        }
    }

    /// The KIP 2.0 error category of the code (Specification §86.2).
    pub fn v2_category(self) -> &'static str {
        match self {
            ErrorCode::InvalidSyntax | ErrorCode::InvalidIdentifier => "syntax",
            ErrorCode::TypeMismatch
            | ErrorCode::InvalidValueType
            | ErrorCode::ConstraintViolation => "schema",
            ErrorCode::ReferenceError | ErrorCode::NotFound | ErrorCode::DuplicateExists => "data",
            ErrorCode::ImmutableTarget => "epistemic",
            ErrorCode::VersionConflict => "transaction",
            ErrorCode::ExecutionTimeout | ErrorCode::ResourceExhausted => "resource",
            ErrorCode::InternalError => "system",
        }
    }

    /// Parses the wire form (`"KIP_3002"`).
    pub fn from_code(code: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == code)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A KIP error: the `error` object of a response.
///
/// Serializes as `{"code", "message", "hint"?, "line"?, "column"?, "found"?, "expected"?}`.
/// `line`/`column` are 1-based and present for errors tied to a place in the command text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct KipError {
    /// The standard code.
    pub code: ErrorCode,
    /// What went wrong, naming the offending thing.
    pub message: String,
    /// What to do next, written for an LLM that will retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// 1-based line of the offending text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// 1-based column (in characters) of the offending text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// The token that was found, for syntax errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
    /// What would have been valid there, for syntax errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
}

impl KipError {
    /// An error with a code and message and nothing else.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        KipError {
            code,
            message: message.into(),
            hint: None,
            line: None,
            column: None,
            found: None,
            expected: None,
        }
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Sets the position (1-based line and column).
    pub fn at(mut self, line: usize, column: usize) -> Self {
        self.line = Some(line);
        self.column = Some(column);
        self
    }

    /// The KIP 2.0 registry name of this error (Specification §87), e.g.
    /// `"InvalidSyntax"`; see [`ErrorCode::v2_name`].
    pub fn v2_code(&self) -> &'static str {
        self.code.v2_name()
    }

    /// This error as a KIP 2.0 error object (Specification §86.1): `code` is the 2.0
    /// registry name, with `category`, `message`, `hint` and, for errors tied to a place
    /// in the text, `details.line` / `details.column`.
    pub fn to_v2_json(&self) -> serde_json::Value {
        let mut o = serde_json::Map::new();
        o.insert("code".into(), self.v2_code().into());
        o.insert("category".into(), self.code.v2_category().into());
        o.insert("message".into(), self.message.clone().into());
        if let Some(h) = &self.hint {
            o.insert("hint".into(), h.clone().into());
        }
        let mut details = serde_json::Map::new();
        if let (Some(l), Some(c)) = (self.line, self.column) {
            details.insert("line".into(), l.into());
            details.insert("column".into(), c.into());
        }
        if let Some(f) = &self.found {
            details.insert("found".into(), f.clone().into());
        }
        if let Some(x) = &self.expected {
            details.insert("expected".into(), x.clone().into());
        }
        o.insert("details".into(), details.into());
        serde_json::Value::Object(o)
    }

    /// Shorthand for a `KIP_1001` error.
    pub fn syntax(message: impl Into<String>) -> Self {
        KipError::new(ErrorCode::InvalidSyntax, message)
    }

    /// Shorthand for a `KIP_4003` error.
    pub fn internal(message: impl Into<String>) -> Self {
        KipError::new(ErrorCode::InternalError, message)
    }

    /// This error as a JSON value (the content of a response's `error` key).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_else(
            |_| serde_json::json!({"code": self.code.as_str(), "message": self.message}),
        )
    }
}

/// The result type of this crate.
pub type KipResult<T> = Result<T, KipError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_wire_form() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(code.as_str()), Some(code));
            let json = serde_json::to_value(code).expect("serialize");
            assert_eq!(json, serde_json::json!(code.as_str()));
        }
        assert_eq!(ErrorCode::from_code("KIP_9999"), None);
    }

    #[test]
    fn error_object_omits_absent_fields() {
        let e = KipError::syntax("boom").with_hint("fix it").at(2, 5);
        assert_eq!(
            e.to_json(),
            serde_json::json!({"code": "KIP_1001", "message": "boom", "hint": "fix it", "line": 2, "column": 5})
        );
    }
}
