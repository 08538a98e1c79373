//! # kip-engine
//!
//! The kip-nexus engine: the Cognitive Nexus ([`Nexus`]) over any storage backend
//! that implements the contract of [`store`] (the kip-storage crate), KML ([`kml`]), KQL ([`kql`]), META ([`meta`]), the Knowledge Graph
//! Memory Server tools ([`memory`]) and the `execute_kip` request envelope
//! ([`envelope`]) every interface (CLI, MCP, HTTP) goes through, so they behave the
//! same.
//!
//! Architecture invariant: the engine is synchronous; async lives in the server crate.
//!
//! Architecture invariant: the engine knows no backend. It depends on the storage
//! contract only (`cargo tree -p kip-engine -e normal` lists neither redb nor a
//! PostgreSQL driver); opening a data directory or a database is the composition
//! root's job (`kip-open`), which hands the engine an `Arc<dyn Backend>`
//! ([`Nexus::with_backend`]).

pub mod audit;
pub mod bootstrap;
pub mod brain;
pub mod cancel;
pub mod envelope;
pub mod export;
pub mod kml;
pub mod kql;
pub mod memory;
pub mod meta;
pub mod nexus;
pub mod outcome;
pub mod progress;
pub mod schema;
pub mod semantic;
pub mod time;
pub use kip_storage as store;
pub use kip_storage::throttle;

/// Stack size of every thread that runs engine calls (the server's async workers and
/// blocking pool, the CLI's command thread). The engine's recursive walks are bounded
/// by the parser's limits ([`kip_lang::ParseOptions`]: nesting depth, WHERE clauses and
/// FILTER operators per command); the test `deep_shapes_fit_the_worker_stack` runs the
/// worst shapes at those limits on a thread of this size in a debug build (whose frames
/// are several times larger than the release build's).
pub const WORKER_STACK_BYTES: usize = 8 << 20;

pub use cancel::Interrupt;
pub use envelope::{run, Access, CommandItem, ExecuteRequest, Outcome, Response};
pub use nexus::{Budget, Nexus, UsageReport};
