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
//! - [`cursor`] the keyset cursor tokens pages resume from, and the order of ties.
//!
//! Resource limits ([`QueryLimits`]) turn runaway queries into `KIP_4001` (time) or
//! `KIP_4002` (rows, hops) errors instead of hangs.

pub mod cursor;
pub mod eval;
pub mod exec;
pub mod index;
pub mod join;
pub mod plan;
pub mod result;

pub use crate::cancel::Interrupt;
use crate::outcome::Outcome;
use crate::store::GraphRead;
use kip_lang::ast::{FindQuery, Slot};
use kip_lang::{ErrorCode, KipError};
use std::time::{Duration, Instant};

/// Bounds on the work one query may do, and on what one request may ask for.
#[derive(Debug, Clone)]
pub struct QueryLimits {
    /// Wall-clock budget per query, planning included (`KIP_4001` when exceeded).
    pub timeout: Duration,
    /// Maximum candidate rows examined while matching (`KIP_4002` beyond).
    pub max_work: u64,
    /// Maximum solutions kept in memory for ordering, grouping and paging (`KIP_4002`).
    pub max_rows: usize,
    /// Page size when the query has no `LIMIT`.
    pub default_page: usize,
    /// Largest `LIMIT` of a FIND or DESCRIBE page (`KIP_4002` beyond: page with
    /// CURSOR instead).
    pub max_page: usize,
    /// Maximum hops of a path pattern (`{m,}` stops here).
    pub max_hops: u32,
    /// Whether queries may use the attribute value index (FILTER ranges, ORDER BY
    /// walks). On by default; off answers every query by scanning, as a reference for
    /// tests and for measuring what the index gains.
    pub attr_index: bool,
    /// Maximum commands in one `commands` batch (`KIP_4002` beyond, nothing run).
    pub max_batch: usize,
    /// Maximum size of one response's JSON, in bytes: a read whose result would pass
    /// it is `KIP_4002` and stops the batch.
    pub max_response_bytes: usize,
    /// The request's deadline, when it has one (set per request by
    /// [`crate::Nexus::execute_with`]); each query then ends at the earlier of it and
    /// its own `timeout`.
    pub deadline: Option<Instant>,
    /// The request's cancellation flag (set per request), checked inside the matching
    /// loops: a cancelled query ends in `KIP_4001` within milliseconds.
    pub interrupt: Option<Interrupt>,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            timeout: Duration::from_secs(10),
            max_work: 20_000_000,
            max_rows: 1_000_000,
            default_page: 1000,
            max_page: 10_000,
            max_hops: 16,
            attr_index: true,
            max_batch: 256,
            max_response_bytes: 16 << 20,
            deadline: None,
            interrupt: None,
        }
    }
}

impl QueryLimits {
    /// The limits of one command started now: its deadline is the earlier of the
    /// request's and `now + timeout`.
    pub fn for_command(&self) -> QueryLimits {
        let own = Instant::now().checked_add(self.timeout);
        let deadline = match (own, self.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        QueryLimits {
            deadline,
            ..self.clone()
        }
    }

    /// `KIP_4001` when the request was cancelled or its deadline has passed.
    pub fn check_time(&self) -> Result<(), KipError> {
        if self.interrupt.as_ref().is_some_and(Interrupt::is_set) {
            return Err(KipError::new(
                ErrorCode::ExecutionTimeout,
                "the request was cancelled (its time budget ran out or the client went away)",
            )
            .with_hint("optimize the query: bind exact {type, name} first, reduce UNION branches, hops and REGEX, lower LIMIT"));
        }
        if self.deadline.is_some_and(|d| Instant::now() > d) {
            return Err(KipError::new(
                ErrorCode::ExecutionTimeout,
                format!("the query ran longer than its time budget ({:?})", self.timeout),
            )
            .with_hint("optimize the query: bind exact {type, name} first, reduce UNION branches, hops and REGEX, lower LIMIT"));
        }
        Ok(())
    }

    /// The page size a `LIMIT` asks for: the default without one, `KIP_4002` above
    /// [`QueryLimits::max_page`].
    pub fn page(&self, limit: Option<&Slot<u64>>) -> Result<usize, KipError> {
        match limit {
            None => Ok(self.default_page.max(1)),
            Some(Slot::Param(p)) => Err(crate::kml::unbound(&p.name)),
            Some(Slot::Literal(n, _)) => {
                let n = usize::try_from(*n).unwrap_or(usize::MAX);
                if n > self.max_page {
                    return Err(KipError::new(
                        ErrorCode::ResourceExhausted,
                        format!(
                            "LIMIT {n} is larger than this server's page limit of {} rows",
                            self.max_page
                        ),
                    )
                    .with_hint(format!(
                        "use LIMIT {} or less and follow next_cursor (CURSOR \"...\") to read the next pages",
                        self.max_page
                    )));
                }
                Ok(n.max(1))
            }
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
