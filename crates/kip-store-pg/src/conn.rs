//! Connections: the r2d2 pool's manager, a per-connection cache of prepared statements
//! (one round trip per query instead of two), and the mapping of PostgreSQL errors to
//! [`StoreError`]s.

use kip_storage::StoreError;
use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::{Row, Statement};
use std::collections::HashMap;

/// Query parameters.
pub(crate) type Params<'a> = [&'a (dyn ToSql + Sync)];

/// Two-column rows as text (from the simple query protocol).
pub(crate) type TextRows = Vec<(String, Option<String>)>;

/// A session's client. The client library's calls block on a runtime of their own,
/// which panics inside another async runtime; everything kip does with a connection
/// runs on blocking threads, but a connection may be dropped anywhere (the last
/// reference to a nexus going away in an async task), and dropping a client talks to
/// the server: that drop is moved to a thread of its own.
pub(crate) struct Client(Option<postgres::Client>);

impl std::ops::Deref for Client {
    type Target = postgres::Client;

    fn deref(&self) -> &postgres::Client {
        self.0.as_ref().expect("only the drop takes the client")
    }
}

impl std::ops::DerefMut for Client {
    fn deref_mut(&mut self) -> &mut postgres::Client {
        self.0.as_mut().expect("only the drop takes the client")
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = std::thread::Builder::new()
                    .name("kip-pg-close".into())
                    .spawn(move || drop(c));
            }
        }
    }
}

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

    /// Runs a (cached) `COPY ... FROM STDIN (FORMAT binary)` statement, sending the
    /// rows of `cols` (columns of one length, in the statement's order).
    pub(crate) fn copy_rows(
        &mut self,
        sql: &str,
        cols: &[crate::buffer::Col],
    ) -> Result<u64, StoreError> {
        let s = self.statement(sql).map_err(pg_error)?;
        let types: Vec<_> = cols.iter().map(|c| c.pg_type()).collect();
        let rows = cols.first().map_or(0, |c| c.len());
        if cols.iter().any(|c| c.len() != rows) {
            return Err(StoreError::Other(
                "COPY columns of different lengths".into(),
            ));
        }
        let writer = self.client.copy_in(&s).map_err(pg_error)?;
        let mut writer = postgres::binary_copy::BinaryCopyInWriter::new(writer, &types);
        let mut values: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(cols.len());
        for i in 0..rows {
            values.clear();
            values.extend(cols.iter().map(|c| c.at(i)));
            writer.write(&values).map_err(pg_error)?;
        }
        writer.finish().map_err(pg_error)
    }

    /// Runs statements without parameters (simple query protocol), returning the rows
    /// of the two-column results as text.
    pub(crate) fn batch_rows(&mut self, sql: &str) -> Result<TextRows, StoreError> {
        let out = self.client.simple_query(sql).map_err(pg_error)?;
        Ok(out
            .iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) if r.len() == 2 => {
                    Some((r.get(0)?.to_owned(), r.get(1).map(str::to_owned)))
                }
                _ => None,
            })
            .collect())
    }

    /// Runs statements without parameters (simple query protocol).
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        self.client.batch_execute(sql).map_err(pg_error)
    }
}

/// Makes and checks the pool's connections.
pub(crate) struct Manager {
    pub(crate) config: postgres::Config,
    /// TLS, used as `sslmode` says (`prefer`, the default: when the server offers it).
    pub(crate) tls: tokio_postgres_rustls::MakeRustlsConnect,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager").finish_non_exhaustive()
    }
}

/// How a server's certificate is checked (libpq's `sslmode` values that check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verify {
    /// Not at all (`prefer`, `require`): encrypted with whoever holds the key.
    No,
    /// Its chain up to a trusted root, whatever name it is for (`verify-ca`).
    Ca,
    /// Its chain and that it is for the host connected to (`verify-full`).
    Full,
}

/// The TLS setup, as libpq does it: unless `verify` is [`Verify::No`], the server's
/// certificate chain is checked against Mozilla's roots plus the PEM certificates in
/// `root_file` (`sslrootcert`: a private CA or a self-signed server), and with
/// [`Verify::Full`] its name against the host too; with [`Verify::No`], the connection
/// is encrypted but the certificate is not checked (`prefer`, the default, and
/// `require`: what libpq does, so a server with a self-signed certificate, e.g.
/// Debian's default, just works; use `verify-full` over networks you do not trust).
/// With `client` (`sslcert`, `sslkey`: PEM files), the client presents that
/// certificate (for `cert` authentication, or a server that requires one).
pub(crate) fn tls(
    root_file: Option<&std::path::Path>,
    verify: Verify,
    client: Option<(&std::path::Path, &std::path::Path)>,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, StoreError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let identity = match client {
        None => None,
        Some((cert, key)) => {
            let bad = |f: &std::path::Path, e: String| {
                StoreError::Other(format!("client certificate {}: {e}", f.display()))
            };
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| bad(cert, e.to_string()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(cert, e.to_string()))?;
            if chain.is_empty() {
                return Err(bad(cert, "no PEM certificate in the file".into()));
            }
            let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, e.to_string()))?;
            Some((chain, key_der))
        }
    };
    let with_identity = move |b: rustls::ConfigBuilder<
        rustls::ClientConfig,
        rustls::client::WantsClientCert,
    >|
          -> Result<rustls::ClientConfig, StoreError> {
        match identity {
            None => Ok(b.with_no_client_auth()),
            Some((chain, key)) => b
                .with_client_auth_cert(chain, key)
                .map_err(|e| StoreError::Other(format!("client certificate: {e}"))),
        }
    };
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Other(format!("TLS setup: {e}")))?;
    let config = if verify != Verify::No {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(f) = root_file {
            let bad = |e: String| StoreError::Other(format!("sslrootcert {}: {e}", f.display()));
            let mut n = 0;
            for cert in CertificateDer::pem_file_iter(f).map_err(|e| bad(e.to_string()))? {
                let cert = cert.map_err(|e| bad(e.to_string()))?;
                roots.add(cert).map_err(|e| bad(e.to_string()))?;
                n += 1;
            }
            if n == 0 {
                return Err(bad("no PEM certificate in the file".into()));
            }
        }
        let roots = std::sync::Arc::new(roots);
        if verify == Verify::Full {
            with_identity(builder.with_root_certificates(roots))?
        } else {
            let chain = rustls::client::WebPkiServerVerifier::builder_with_provider(
                roots,
                provider.clone(),
            )
            .build()
            .map_err(|e| StoreError::Other(format!("TLS setup: {e}")))?;
            with_identity(builder.dangerous().with_custom_certificate_verifier(
                std::sync::Arc::new(Lenient {
                    provider: provider.clone(),
                    chain: Some(chain),
                }),
            ))?
        }
    } else {
        with_identity(
            builder
                .dangerous()
                .with_custom_certificate_verifier(std::sync::Arc::new(Lenient {
                    provider,
                    chain: None,
                })),
        )?
    };
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The server certificate checks other than `verify-full`'s: with `chain`, the chain
/// up to a trusted root but not the name the certificate is for (libpq's `verify-ca`:
/// a name mismatch is the one error let through); without, none at all (libpq's
/// `sslmode=require`). The handshake's signatures are verified either way, so the
/// session is encrypted with the holder of that certificate's key.
#[derive(Debug)]
struct Lenient {
    provider: std::sync::Arc<rustls::crypto::CryptoProvider>,
    chain: Option<std::sync::Arc<rustls::client::WebPkiServerVerifier>>,
}

impl rustls::client::danger::ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        let Some(chain) = &self.chain else {
            return Ok(rustls::client::danger::ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                NotValidForName | NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = postgres::Error;

    fn connect(&self) -> Result<Conn, postgres::Error> {
        let client = self.config.connect(self.tls.clone())?;
        Ok(Conn {
            client: Client(Some(client)),
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
        return StoreError::Other(format!("PostgreSQL: {}", chain(&e)));
    };
    let code = db.code();
    let what = format!("PostgreSQL {}: {}", code.code(), db.message());
    if *code == SqlState::LOCK_NOT_AVAILABLE {
        StoreError::Conflict(format!(
            "{what}: another kip process has held the memory's write lock for longer than a write waits (a long import, or a process stopped while writing); nothing was changed, retry"
        ))
    } else if *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::UNIQUE_VIOLATION
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

/// An error with its causes (`a: b: c`): the client library's top-level messages
/// ("error performing TLS handshake") say little without them.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = c.source();
    }
    out
}

/// A value read from a row, with a clear error when the column does not hold it.
pub(crate) fn get<'a, T: postgres::types::FromSql<'a>>(
    row: &'a Row,
    i: usize,
) -> Result<T, StoreError> {
    row.try_get(i)
        .map_err(|e| StoreError::Corruption(format!("PostgreSQL row: {e}")))
}
