//! # kip-engine
//!
//! The kip-nexus engine. Today it holds the `execute_kip` request envelope
//! ([`envelope`]): request parsing, per-command preparation (parse + parameter binding),
//! batch semantics, the read-only refusal and the response shapes, so that every
//! interface (CLI, MCP, HTTP) behaves the same. Storage, KML, KQL and META execution
//! arrive as the Cognitive Nexus is built (see the project issues).
//!
//! Architecture invariant: the engine is synchronous; async lives in the server crate.

pub mod bootstrap;
pub mod envelope;
pub mod export;
pub mod kml;
pub mod kql;
pub mod memory;
pub mod meta;
pub mod nexus;
pub mod schema;
pub mod store;

pub use envelope::{run, Access, CommandItem, ExecuteRequest, Outcome, Response};
pub use nexus::Nexus;
