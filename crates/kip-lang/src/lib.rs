//! # kip-lang
//!
//! The KIP (Knowledge Interaction Protocol, v1.0-RC6) language for kip-nexus: a lexer and
//! recursive-descent parser for every form of KQL (`FIND`), KML (`UPSERT`, `DELETE`) and
//! META (`DESCRIBE`, `SEARCH`), a typed [`ast`] whose nodes carry source [`Span`]s, a
//! printer back to canonical text ([`std::fmt::Display`] on [`Command`]), parameter
//! binding on the tree ([`bind()`]) and the standard KIP error codes ([`ErrorCode`]).
//!
//! KIP 2.0 (the three normative grammars KQL, KML and META of the 2.0-draft) is parsed
//! by [`v2::parse`] into the [`v2::ast`] tree.
//!
//! Architecture invariant: this crate has no storage, no async and no I/O.
//!
//! ```
//! use kip_lang::{parse_command, bind, Command};
//! let cmd = parse_command(r#"FIND(?d.name) WHERE { ?d {type: "Drug", name: :n} } LIMIT 5"#)?;
//! let mut params = serde_json::Map::new();
//! params.insert("n".into(), "Aspirin".into());
//! let bound = bind(&cmd, &params)?;
//! assert!(matches!(bound, Command::Find(_)));
//! // The printer renders canonical text that parses back to the same tree.
//! assert_eq!(parse_command(&bound.to_string())?, bound);
//! # Ok::<(), kip_lang::KipError>(())
//! ```

pub mod ast;
mod bind;
mod error;
pub mod lexer;
mod parser;
pub mod printer;
mod span;
pub mod v2;

pub use ast::{Command, CommandKind};
pub use bind::{bind, bind_owned};
pub use error::{ErrorCode, KipError, KipResult};
pub use parser::{
    parse_command, parse_command_with, parse_script, parse_script_bytes, parse_script_part,
    parse_script_with, parse_where_clauses, script_ranges, utf8, ParseOptions,
};
pub use span::{line_col, Span};
