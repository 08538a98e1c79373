//! Connections: the r2d2 pool's manager, a per-connection cache of prepared statements
//! (one round trip per query instead of two), and the mapping of PostgreSQL errors to
//! [`StoreError`]s.

use kip_store::StoreError;
use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::{Client, Row, Statement};
use std::collections::HashMap;

/// Query parameters.
pub(crate) type Params<'a> = [&'a (dyn ToSql + Sync)];

/// One database session with its prepared statements.
pub(crate) struct Conn {
    pub(crate) client: Client,
    statements: HashMap<String, Statement>,
}

impl Conn {
    fn statement(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql)?;
        self.statements.insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    /// Runs a (cached) statement, returning its rows.
    pub(crate) fn query(&mut self, sql: &str, params: &Params<'_>) -> Result<Vec<Row>, StoreError> {
        let s = self.statement(sql).map_err(pg_error)?;
        self.client.query(&s, params).map_err(pg_error)
    }

    /// Runs a (cached) statement expecting at most one row.
    pub(crate) fn query_opt(
        &mut self,
        sql: &str,
        params: &Params<'_>,
    ) -> Result<Option<Row>, StoreError> {
        let s = self.statement(sql).map_err(pg_error)?;
        self.client.query_opt(&s, params).map_err(pg_error)
    }

    /// Runs a (cached) statement, returning the number of rows it changed.
    pub(crate) fn execute(&mut self, sql: &str, params: &Params<'_>) -> Result<u64, StoreError> {
        let s = self.statement(sql).map_err(pg_error)?;
        self.client.execute(&s, params).map_err(pg_error)
    }

    /// Runs statements without parameters (simple query protocol).
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        self.client.batch_execute(sql).map_err(pg_error)
    }
}

/// Makes and checks the pool's connections.
#[derive(Debug)]
pub(crate) struct Manager {
    pub(crate) config: postgres::Config,
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = postgres::Error;

    fn connect(&self) -> Result<Conn, postgres::Error> {
        let client = self.config.connect(postgres::NoTls)?;
        Ok(Conn {
            client,
            statements: HashMap::new(),
        })
    }

    fn is_valid(&self, conn: &mut Conn) -> Result<(), postgres::Error> {
        conn.client.simple_query("").map(|_| ())
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.client.is_closed()
    }
}

/// Classifies a PostgreSQL error: serialization failures, deadlocks and uniqueness
/// violations are [`StoreError::Conflict`] (another writer got in the way), a full disk
/// is said so, a lost connection is an I/O error; the rest is
/// [`StoreError::Other`] with the server's message.
pub(crate) fn pg_error(e: postgres::Error) -> StoreError {
    let Some(db) = e.as_db_error() else {
        if e.is_closed() {
            return StoreError::Io {
                path: None,
                source: std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    format!("the connection to PostgreSQL was lost: {e}"),
                ),
            };
        }
        return StoreError::Other(format!("PostgreSQL: {e}"));
    };
    let code = db.code();
    let what = format!("PostgreSQL {}: {}", code.code(), db.message());
    if *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::UNIQUE_VIOLATION
        || *code == SqlState::LOCK_NOT_AVAILABLE
    {
        StoreError::Conflict(what)
    } else if *code == SqlState::DISK_FULL || *code == SqlState::OUT_OF_MEMORY {
        StoreError::Full {
            path: None,
            source: std::io::Error::new(std::io::ErrorKind::StorageFull, what),
        }
    } else {
        StoreError::Other(what)
    }
}

/// A value read from a row, with a clear error when the column does not hold it.
pub(crate) fn get<'a, T: postgres::types::FromSql<'a>>(
    row: &'a Row,
    i: usize,
) -> Result<T, StoreError> {
    row.try_get(i)
        .map_err(|e| StoreError::Corruption(format!("PostgreSQL row: {e}")))
}
