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
    /// The length of the request's time budget, when its deadline is the one that
    /// `deadline` holds (set per request by [`crate::Nexus::execute_with`] and kept by
    /// [`QueryLimits::for_command`] only while the request's deadline comes before the
    /// query's own `timeout`): named when the time runs out.
    pub request_budget: Option<Duration>,
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
            request_budget: None,
            interrupt: None,
        }
    }
}

/// A duration for messages: `250 ms`, `1 s`, `1.5 s`, `60 s`.
pub fn show_duration(d: Duration) -> String {
    let micros = d.as_micros();
    // To the tenth of a second from 0.95 s up (what is left of a 1 s budget when the
    // request starts is a hair under 1 s); to the millisecond below.
    let tenths = (micros + 50_000) / 100_000;
    if tenths < 10 {
        return format!("{} ms", (micros + 500) / 1000);
    }
    if tenths.is_multiple_of(10) {
        format!("{} s", tenths / 10)
    } else {
        format!("{}.{} s", tenths / 10, tenths % 10)
    }
}

impl QueryLimits {
    /// The limits of one command started now: its deadline is the earlier of the
    /// request's and `now + timeout`.
    pub fn for_command(&self) -> QueryLimits {
        let own = Instant::now().checked_add(self.timeout);
        // Which deadline binds decides which budget a timeout names.
        let (deadline, the_requests) = match (own, self.deadline) {
            (Some(a), Some(b)) if b <= a => (Some(b), true),
            (Some(a), _) => (Some(a), false),
            (None, b) => (b, b.is_some()),
        };
        QueryLimits {
            deadline,
            request_budget: self.request_budget.filter(|_| the_requests),
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
            let message = match self.request_budget {
                Some(b) => format!(
                    "the query was stopped: the request's time budget ({}) ran out",
                    show_duration(b)
                ),
                None => format!(
                    "the query ran longer than its time limit ({})",
                    show_duration(self.timeout)
                ),
            };
            return Err(KipError::new(ErrorCode::ExecutionTimeout, message)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_shown_in_milliseconds_or_tenths_of_seconds() {
        assert_eq!(show_duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(show_duration(Duration::from_micros(999_970)), "1 s");
        assert_eq!(show_duration(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(show_duration(Duration::from_secs(60)), "60 s");
    }

    #[test]
    fn a_command_names_the_request_budget_only_when_it_binds() {
        let limits = QueryLimits {
            deadline: Instant::now().checked_add(Duration::from_secs(1)),
            request_budget: Some(Duration::from_secs(1)),
            ..QueryLimits::default()
        };
        assert_eq!(
            limits.for_command().request_budget,
            Some(Duration::from_secs(1))
        );
        let long = QueryLimits {
            deadline: Instant::now().checked_add(Duration::from_secs(600)),
            request_budget: Some(Duration::from_secs(600)),
            ..QueryLimits::default()
        };
        assert_eq!(long.for_command().request_budget, None);
    }
}
