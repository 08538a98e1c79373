//! # kip-store
//!
//! The embedded storage backend: the tables of the Cognitive Nexus in redb, their keys
//! and value encoding, and the backend that opens, commits and checkpoints a data
//! directory ([`db::Store`]). It implements the storage contract of `kip-storage`
//! ([`GraphRead`], [`GraphWrite`], [`kip_storage::backend::Backend`] and
//! [`kip_storage::backend::LocalLog`]), whose index-upkeep driver decides what every
//! change does to the indexes.
//!
//! Every access pattern is an index range, never a scan of unrelated data:
//!
//! | table | key -> value | serves |
//! | --- | --- | --- |
//! | `concepts` | id -> record | concept by id |
//! | `concept_key` | (type, name) -> id | `{type, name}`, uniqueness |
//! | `concept_type` | (type, id) -> () | `{type}` |
//! | `concept_name` | (name, id) -> () | `{name}` |
//! | `props` | id -> record | proposition by id |
//! | `spo` | (subject, predicate, object) -> id | uniqueness, subject(+predicate) |
//! | `pos` | (predicate, object, subject) -> id | predicate(+object) |
//! | `osp` | (object, predicate, subject) -> id | object(+predicate), higher-order cascade |
//! | `stats` | [`Stat`] keys ("t:Type", "p:pred", "dm:C:n", "ft:docs") -> count | planner statistics, domain sizes, BM25 |
//! | `meta` | key -> bytes | format version, id counters, bootstrap marker |
//! | `text_postings3` | (term, first element) -> block of (element, tf, doc length) | SEARCH (exact term and prefix ranges) |
//! | `attr_values` | (type, attribute, value key, id) -> () | FILTER ranges and ORDER BY over a type's attribute ([`attrs`]) |
//!
//! Subjects and objects are [`ElemRef`]s encoded as one `u64` (bit 63 set for
//! propositions), so a link whose subject is another link sorts like any other.
//! Attributes and metadata are stored as MessagePack (compact, self-describing).
//!
//! The six pure secondary indexes (`concept_type`, `concept_name`, `pos`, `osp`,
//! `text_postings3`, `attr_values`) are written through an in-memory layer ([`Overlay`]): committed
//! changes wait there, merged into every read, until a checkpoint folds them into the
//! tables in key order.
//!
//! Small writes are made durable by the write-ahead log ([`wal`]), big ones and
//! checkpoints by redb's durable commit.
//!
//! Architecture invariant: only this crate knows about redb (neither the contract nor
//! the engine depends on it); it is chosen by the composition root (`kip-open`).

pub mod crashsim;
pub mod db;
pub(crate) mod error;
mod keys;
mod overlay;
mod postings;
mod tables;
pub mod wal;

pub use overlay::{Overlay, Snapshot};
pub(crate) use postings::OLD_POSTINGS;
pub(crate) use tables::LEGACY_DOCS;
pub(crate) use tables::WAL_SEQ;
pub use tables::{Finished, ReadTables, Sealed, WriteTables};

pub(crate) use error::storage_error;
pub(crate) use kip_storage::{
    attrs, backend, decode, encode, meta_u64, text, throttle, ConceptRecord, Continue, ElemRef,
    GraphRead, GraphWrite, PropRecord, Stat, StoreError, StoreResult, TEXT_DOCS, TEXT_LEN,
    VECTORS_ON,
};
use serde::Deserialize;

/// The on-disk format version this build writes and reads. Format 1 (which also stored
/// each element's analysed text in `text_docs`) is migrated to 2 when it is opened.
pub const FORMAT_VERSION: u64 = 2;

/// The head of a concept record: what [`GraphRead::concept_head`] decodes (the other
/// fields of the record are skipped, not built).
#[derive(Debug, Deserialize)]
pub(crate) struct ConceptHead {
    #[serde(rename = "t")]
    pub concept_type: String,
    #[serde(rename = "n")]
    pub name: String,
}
