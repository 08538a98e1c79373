//! KQL: the query engine behind `FIND` and the `WHERE` of every `DELETE`.
//!
//! - [`plan`] compiles a `WHERE` body into a tree of steps: patterns ordered by
//!   estimated cost from the store's statistics, FILTERs pushed down to the first point
//!   where their variables are bound, OPTIONAL as left joins, NOT as anti-joins, UNION
//!   branches as independent scopes.
//! - [`exec`] runs the steps as nested index lookups, streaming rows to a callback so a
//!   `LIMIT` without `ORDER BY` stops early.
//! - [`eval`] evaluates dot paths and FILTER expressions.
//! - [`result`] projects, groups and aggregates, deduplicates, orders and pages.
//!
//! Resource limits ([`QueryLimits`]) turn runaway queries into `KIP_4001` (time) or
//! `KIP_4002` (rows, hops) errors instead of hangs.

pub mod eval;
pub mod exec;
pub mod plan;
pub mod result;

use crate::envelope::Outcome;
use crate::store::GraphRead;
use kip_lang::ast::FindQuery;
use kip_lang::KipError;
use std::time::Duration;

/// Bounds on the work one query may do.
#[derive(Debug, Clone)]
pub struct QueryLimits {
    /// Wall-clock budget per query (`KIP_4001` when exceeded).
    pub timeout: Duration,
    /// Maximum candidate rows examined while matching (`KIP_4002` beyond).
    pub max_work: u64,
    /// Maximum solutions kept in memory for ordering, grouping and paging (`KIP_4002`).
    pub max_rows: usize,
    /// Page size when the query has no `LIMIT`.
    pub default_page: usize,
    /// Maximum hops of a path pattern (`{m,}` stops here).
    pub max_hops: u32,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            timeout: Duration::from_secs(10),
            max_work: 20_000_000,
            max_rows: 1_000_000,
            default_page: 1000,
            max_hops: 16,
        }
    }
}

/// Runs a bound `FIND` query on a snapshot.
pub fn find(g: &dyn GraphRead, q: &FindQuery, limits: &QueryLimits) -> Result<Outcome, KipError> {
    result::run_find(g, q, limits)
}

/// Checks a bound `FIND` (variables, schema names, ids, cursor) without running it.
pub fn validate(g: &dyn GraphRead, q: &FindQuery, limits: &QueryLimits) -> Result<(), KipError> {
    result::validate_find(g, q, limits)
}

/// The plan of a `FIND`, one line per step, for `kip explain`.
pub fn explain(
    g: &dyn GraphRead,
    q: &FindQuery,
    limits: &QueryLimits,
) -> Result<Vec<String>, KipError> {
    result::explain_find(g, q, limits)
}
