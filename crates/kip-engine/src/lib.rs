//! # kip-engine
//!
//! The kip-nexus engine: the Cognitive Nexus ([`Nexus`]) over any storage backend
//! that implements the contract of [`store`] (the kip-storage crate), KML, KQL, META,
//! the Knowledge Graph Memory Server tools ([`memory`]) and the `execute_kip` request
//! envelope ([`envelope`]) every interface (CLI, MCP, HTTP) goes through, so they
//! behave the same.
//!
//! The public surface is this facade: [`Nexus`] (execution) with the handles it lends
//! for each other concern ([`Admin`], [`MemoryTools`], [`Brain`], [`Recall`]; a
//! `Testing` handle with the `testing` feature) and its request types, the modules an
//! interface needs ([`envelope`], [`memory`], [`brain`], [`audit`], [`semantic`],
//! [`bootstrap`], [`progress`], [`time`], [`store`]) and the re-exports below. The
//! statement executors (`kml`, `kql`, `meta`, `export`), the schema rules (`schema`)
//! and the nexus internals are private to the crate.
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
pub(crate) mod cancel;
pub mod envelope;
pub(crate) mod export;
pub(crate) mod kml;
pub(crate) mod kql;
pub mod memory;
pub(crate) mod meta;
pub(crate) mod nexus;
pub(crate) mod outcome;
pub mod progress;
pub(crate) mod schema;
pub mod semantic;
pub mod time;
pub mod v2;
pub use kip_storage as store;

/// Stack size of every thread that runs engine calls (the server's async workers and
/// blocking pool, the CLI's command thread). The engine's recursive walks are bounded
/// by the parser's limits ([`kip_lang::ParseOptions`]: nesting depth, WHERE clauses and
/// FILTER operators per command); the test `deep_shapes_fit_the_worker_stack` runs the
/// worst shapes at those limits on a thread of this size in a debug build (whose frames
/// are several times larger than the release build's).
pub const WORKER_STACK_BYTES: usize = 8 << 20;

pub use cancel::Interrupt;
pub use envelope::{run, Access, CommandItem, ExecuteRequest, Outcome, Response};
pub use kql::QueryLimits;
#[cfg(feature = "testing")]
pub use nexus::Testing;
pub use nexus::{
    Admin, Backend, Brain, Budget, LocalLog, MemoryTools, Nexus, Recall, SleepGuard, UsageReport,
    REQUEST_LOG_WINDOW,
};
