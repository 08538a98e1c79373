//! Connection strings: what a `postgres://` URL (or a libpq `key=value` string) and the
//! standard `PG*` variables say, the TLS settings the client library does not read
//! itself (libpq's meanings), and URLs for messages (password hidden) and for a schema
//! of one's own.

use crate::conn::{self, Manager};
use crate::is_url;
use kip_storage::{StoreError, StoreResult};
use std::str::FromStr;
use std::time::Duration;

/// Fills what the URL leaves out from the standard libpq environment variables
/// (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`, `PGAPPNAME`,
/// `PGCONNECT_TIMEOUT`, `PGOPTIONS`).
fn apply_env(c: &mut postgres::Config) -> StoreResult<()> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if c.get_hosts().is_empty() {
        match var("PGHOST") {
            Some(h) => {
                for h in h.split(',') {
                    c.host(h);
                }
            }
            None => {
                c.host("localhost");
            }
        }
    }
    if c.get_ports().is_empty() {
        if let Some(p) = var("PGPORT") {
            let p = p
                .parse::<u16>()
                .map_err(|_| StoreError::Other(format!("PGPORT={p} is not a port number")))?;
            c.port(p);
        }
    }
    if c.get_user().is_none() {
        if let Some(u) = var("PGUSER").or_else(|| var("USER")) {
            c.user(&u);
        }
    }
    if c.get_password().is_none() {
        if let Some(p) = var("PGPASSWORD") {
            c.password(p);
        }
    }
    if c.get_dbname().is_none() {
        if let Some(d) = var("PGDATABASE") {
            c.dbname(&d);
        }
    }
    if c.get_application_name().is_none() {
        c.application_name(&var("PGAPPNAME").unwrap_or_else(|| "kip".into()));
    }
    if c.get_connect_timeout().is_none() {
        let secs = var("PGCONNECT_TIMEOUT")
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(10);
        c.connect_timeout(Duration::from_secs(secs.max(1)));
    }
    if c.get_options().is_none() {
        if let Some(o) = var("PGOPTIONS") {
            c.options(&o);
        }
    }
    Ok(())
}

/// What a connection string says beyond what the client library reads.
struct Tls {
    /// `sslrootcert` (else `PGSSLROOTCERT`): PEM root certificates to trust.
    root: Option<std::path::PathBuf>,
    /// How the server's certificate is checked: `verify-full` its chain and name,
    /// `verify-ca` (or a root certificate file given with a weaker `sslmode`, as libpq
    /// does) its chain, else not at all.
    verify: conn::Verify,
    /// `sslcert` (else `PGSSLCERT`): the client's PEM certificate (chain).
    cert: Option<std::path::PathBuf>,
    /// `sslkey` (else `PGSSLKEY`): its PEM private key.
    key: Option<std::path::PathBuf>,
}

/// Takes out of a connection string what the client library does not read:
/// `sslrootcert`, `sslcert`, `sslkey`, and `sslmode` values it does not know (`verify-ca` and `verify-full`,
/// passed on as `require` and remembered as "verify"); `sslmode` comes from
/// `PGSSLMODE` when the URL sets none.
fn split_url(url: &str) -> (String, Tls) {
    let env_path = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    };
    let mut verify = conn::Verify::No;
    let mut mode = |m: &str| -> String {
        match m {
            "verify-full" => verify = conn::Verify::Full,
            "verify-ca" => verify = conn::Verify::Ca,
            _ => return m.to_owned(),
        }
        "require".to_owned()
    };
    if !is_url(url) {
        // A libpq key=value string is passed as it is.
        let root = env_path("PGSSLROOTCERT");
        let verify = if root.is_some() {
            conn::Verify::Ca
        } else {
            conn::Verify::No
        };
        let (cert, key) = (env_path("PGSSLCERT"), env_path("PGSSLKEY"));
        return (
            url.to_owned(),
            Tls {
                root,
                verify,
                cert,
                key,
            },
        );
    }
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let (mut root, mut cert, mut key) = (None, None, None);
    let mut has_mode = false;
    let mut parts = Vec::new();
    for p in query.split('&').filter(|p| !p.is_empty()) {
        match p.split_once('=') {
            Some(("sslrootcert", f)) => root = Some(std::path::PathBuf::from(percent_decode(f))),
            Some(("sslcert", f)) => cert = Some(std::path::PathBuf::from(percent_decode(f))),
            Some(("sslkey", f)) => key = Some(std::path::PathBuf::from(percent_decode(f))),
            Some(("sslmode", m)) => {
                has_mode = true;
                parts.push(format!("sslmode={}", mode(m)));
            }
            _ => parts.push(p.to_owned()),
        }
    }
    if !has_mode {
        if let Ok(m) = std::env::var("PGSSLMODE") {
            parts.push(format!("sslmode={}", mode(&m)));
        }
    }
    let url = if parts.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", parts.join("&"))
    };
    let root = root.or_else(|| env_path("PGSSLROOTCERT"));
    if root.is_some() && verify == conn::Verify::No {
        verify = conn::Verify::Ca;
    }
    let cert = cert.or_else(|| env_path("PGSSLCERT"));
    let key = key.or_else(|| env_path("PGSSLKEY"));
    (
        url,
        Tls {
            root,
            verify,
            cert,
            key,
        },
    )
}

/// `%XX` escapes decoded (the text unchanged if the result is not UTF-8).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_owned())
}

/// A connection manager for `url`: the URL, the `PG*` variables, TLS.
pub(crate) fn manager(url: &str) -> StoreResult<Manager> {
    let (url, tls) = split_url(url);
    let mut config = postgres::Config::from_str(&url)
        .map_err(|e| StoreError::Other(format!("not a PostgreSQL URL ({e}): {}", redact(&url))))?;
    apply_env(&mut config)?;
    let client =
        match (&tls.cert, &tls.key) {
            (Some(c), Some(k)) => Some((c.as_path(), k.as_path())),
            (None, None) => None,
            _ => return Err(StoreError::Other(
                "a client certificate needs both sslcert and sslkey (or PGSSLCERT and PGSSLKEY)"
                    .into(),
            )),
        };
    Ok(Manager {
        config,
        tls: conn::tls(tls.root.as_deref(), tls.verify, client)?,
    })
}

/// The database named by a config, for messages: `user@host:port/dbname`.
pub(crate) fn shown(c: &postgres::Config) -> String {
    let host = match c.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = c.get_ports().first().copied().unwrap_or(5432);
    format!(
        "{}@{host}:{port}/{}",
        c.get_user().unwrap_or(""),
        c.get_dbname().unwrap_or(c.get_user().unwrap_or(""))
    )
}

/// A database URL for messages and logs: its password replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let mut out = match rest[..end].rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{}", &rest[end..]),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    };
    // A password may also come as a query parameter.
    if let Some(i) = out.find("password=") {
        let tail = &out[i + "password=".len()..];
        let stop = tail
            .find('&')
            .map_or(out.len(), |j| i + "password=".len() + j);
        out.replace_range(i + "password=".len()..stop, "***");
    }
    out
}

/// `url` with its connections' `search_path` set to `schema` (the URL's own
/// `options`, if any, are replaced).
pub fn url_with_schema(url: &str, schema: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut parts: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("options="))
        .map(str::to_owned)
        .collect();
    parts.push(format!("options=-csearch_path%3D{schema}"));
    format!("{base}?{}", parts.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_recognized_redacted_and_given_a_schema() {
        assert!(is_url("postgres://u@h/db") && is_url("postgresql://h/db"));
        assert!(!is_url("/var/lib/kip") && !is_url("postgres") && !is_url("./postgres://x"));
        assert_eq!(
            redact("postgres://ann:s3cret@db:5432/kip"),
            "postgres://ann:***@db:5432/kip"
        );
        assert_eq!(redact("postgres://ann@db/kip"), "postgres://ann@db/kip");
        assert_eq!(
            redact("postgres://db/kip?user=ann&password=s3cret&sslmode=disable"),
            "postgres://db/kip?user=ann&password=***&sslmode=disable"
        );
        assert_eq!(
            url_with_schema("postgres://db/kip", "m1"),
            "postgres://db/kip?options=-csearch_path%3Dm1"
        );
        assert_eq!(
            url_with_schema("postgres://db/kip?sslmode=disable&options=-cx%3Dy", "m1"),
            "postgres://db/kip?sslmode=disable&options=-csearch_path%3Dm1"
        );
    }

    #[test]
    fn tls_settings_the_client_library_does_not_read_are_taken_out() {
        let (url, tls) =
            split_url("postgres://u@h/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&x=1");
        assert_eq!(url, "postgres://u@h/db?sslmode=require&x=1");
        assert_eq!(
            tls.root.as_deref(),
            Some(std::path::Path::new("/etc/ca.pem"))
        );
        assert_eq!(tls.verify, conn::Verify::Full);
        let (url, tls) = split_url("postgres://u@h/db?sslmode=verify-ca");
        assert_eq!(url, "postgres://u@h/db?sslmode=require");
        assert_eq!(tls.verify, conn::Verify::Ca);
        let (url, tls) = split_url("postgres://u@h/db?sslmode=require&sslrootcert=ca.pem");
        assert_eq!(url, "postgres://u@h/db?sslmode=require");
        assert_eq!(
            tls.verify,
            conn::Verify::Ca,
            "a root certificate given: the chain verified, as libpq does"
        );
        let (_, tls) = split_url("postgres://u@h/db?sslmode=prefer");
        assert_eq!(tls.verify, conn::Verify::No);
        let (_, tls) =
            split_url("postgres://u@h/db?sslmode=require&sslcert=%2Fc%2Fa.crt&sslkey=%2Fc%2Fa.key");
        assert_eq!(tls.cert.as_deref(), Some(std::path::Path::new("/c/a.crt")));
        assert_eq!(tls.key.as_deref(), Some(std::path::Path::new("/c/a.key")));
        assert_eq!(percent_decode("a%2Fb%zz%4"), "a/b%zz%4");
    }
}
