//! KIP 2.0 (2.0-draft): the parser for the three normative grammars
//! (`KIP-2.0-KQL.ebnf`, `KIP-2.0-KML.ebnf`, `KIP-2.0-META.ebnf`), beside the 1.x parser
//! of this crate and sharing its lexer, literals and `:parameter` handling.
//!
//! A [`Statement`] prints as canonical 2.0 text ([`std::fmt::Display`]) that parses
//! back to the same tree, apart from source spans.
//!
//! Errors are [`KipError`](crate::KipError)s with line, column and a hint; their KIP 2.0 registry name
//! (Specification §87, e.g. `InvalidSyntax`) is [`KipError::v2_code`](crate::KipError::v2_code).
//!
//! ```
//! use kip_lang::v2::{self, ast::StatementKind};
//! let st = v2::parse(r#"find(?b) where { ?p PROPOSITION (:alice, "prefers", ?o) ?b BELIEF (?p) }"#)?;
//! assert!(matches!(st.kind, StatementKind::Query(_)));
//! let e = v2::parse("FIND(?x) WHERE { ?x CONCEPT }").unwrap_err();
//! assert_eq!((e.v2_code(), e.line, e.column), ("InvalidSyntax", Some(1), Some(29)));
//! # Ok::<(), kip_lang::KipError>(())
//! ```

pub mod ast;
mod params;
mod printer;

use crate::error::KipResult;
use crate::parser::ParseOptions;

pub use ast::{Statement, StatementKind};

/// Parses exactly one KIP 2.0 statement (KQL, KML or META). There is no `;` in KIP
/// 2.0 (one statement per operation, KIPSyntax.md): a `;` is `InvalidSyntax`. Errors carry the registry name [`KipError::v2_code`](crate::KipError::v2_code) (`InvalidSyntax`,
/// `InvalidIdentifier`, `ResourceExhausted`), line, column and a hint.
pub fn parse(text: &str) -> KipResult<Statement> {
    parse_with(text, ParseOptions::default())
}

/// [`parse`] with explicit limits.
pub fn parse_with(text: &str, opts: ParseOptions) -> KipResult<Statement> {
    crate::parser::v2::parse_statement(text, opts)
}

/// Parses a sequence of KIP 2.0 statements, optionally separated by `;` (the grammars
/// define single statements; a sequence is this crate's convenience for scripts and
/// documentation examples).
pub fn parse_script(text: &str) -> KipResult<Vec<Statement>> {
    crate::parser::v2::parse_statements(text, ParseOptions::default())
}

/// Parses the inside of a KQL `WHERE { ... }` block without the braces (patterns,
/// BELIEF, FILTER, NOT, OPTIONAL, UNION): for checking pattern fragments on their own.
pub fn parse_where_clauses(text: &str) -> KipResult<Vec<ast::WhereClause>> {
    crate::parser::v2::parse_where_body(text, ParseOptions::default())
}

/// Parses raw bytes as one statement: invalid UTF-8 is `InvalidSyntax`.
pub fn parse_bytes(bytes: &[u8]) -> KipResult<Statement> {
    parse(crate::parser::utf8(bytes)?)
}

/// The words that start a KIP 2.0 statement, uppercase.
pub fn statement_keywords() -> &'static [&'static str] {
    &crate::parser::v2::V2_STATEMENT_KEYWORDS
}
