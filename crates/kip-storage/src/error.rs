//! Storage errors, typed: what went wrong (no space, I/O, corruption, a locked
//! directory, a conflict), with its source, turned into a KIP error (`KIP_4003` with a
//! precise message and hint) in one place, [`From<StoreError> for KipError`].

use kip_lang::KipError;
use std::fmt;
use std::path::{Path, PathBuf};

/// A storage failure.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// No space left on the device (or the disk quota or file size limit is reached).
    Full {
        /// The file being written, when known.
        path: Option<PathBuf>,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Any other I/O failure.
    Io {
        /// The file being read or written, when known.
        path: Option<PathBuf>,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Stored data that cannot be read back: a damaged page, record or log.
    Corruption(String),
    /// An earlier write to the database file failed, so its state in memory and on
    /// disk may differ: no write is accepted until the store is reopened.
    Poisoned,
    /// The data directory is in use by another process.
    Locked(String),
    /// A concurrent use of the database got in the way; retrying can succeed.
    Conflict(String),
    /// A write would break a uniqueness rule of the store (two concepts with one
    /// `{type, name}`, two links with one `(subject, predicate, object)`): the engine
    /// never asks for that, so it is a bug of the caller; the write changes nothing.
    Constraint(String),
    /// Anything else the database reported.
    Other(String),
    /// The write-ahead log could not be written: the write failed, and every later
    /// write is refused until the store is reopened (which checks and replays the log).
    LogFailed {
        /// What went wrong with the log.
        cause: Box<StoreError>,
        /// False for the write whose append failed, true for a later write refused
        /// because of that failure.
        earlier: bool,
    },
    /// The caller's own error, raised by code it ran inside a storage operation (a scan
    /// visitor, the body of a read or a write): passed back unchanged, so a query limit
    /// reached inside a scan is still that limit's error, not a storage failure.
    Caller(Box<KipError>),
}

/// True for the errors that mean "the disk is full": ENOSPC, EDQUOT, EFBIG.
fn is_full(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(28 | 122 | 27))
        || e.kind() == std::io::ErrorKind::StorageFull
        || e.kind() == std::io::ErrorKind::QuotaExceeded
        || e.kind() == std::io::ErrorKind::FileTooLarge
}

impl StoreError {
    /// An I/O error on `path`, classified (a full disk is [`StoreError::Full`]).
    pub fn io(path: Option<&Path>, source: std::io::Error) -> StoreError {
        let path = path.map(Path::to_path_buf);
        if is_full(&source) {
            StoreError::Full { path, source }
        } else {
            StoreError::Io { path, source }
        }
    }

    /// True when the device is full.
    pub fn is_full(&self) -> bool {
        match self {
            StoreError::Full { .. } => true,
            StoreError::LogFailed { cause, .. } => cause.is_full(),
            _ => false,
        }
    }
}

fn at(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| format!(" ({})", p.display()))
        .unwrap_or_default()
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Full { path, source } => {
                let what = match source.raw_os_error() {
                    Some(27) => "the file size limit is reached",
                    Some(122) => "the disk quota is exceeded",
                    _ => "no space left on device",
                };
                write!(f, "{what}{}: {source}", at(path))
            }
            StoreError::Io { path, source } => write!(f, "I/O error{}: {source}", at(path)),
            StoreError::Corruption(m) => write!(f, "the stored data is damaged: {m}"),
            StoreError::Poisoned => write!(
                f,
                "an earlier write to the database file failed; writes are refused until the nexus is reopened (reads still work, nothing acknowledged is lost)"
            ),
            StoreError::Locked(m) => write!(f, "{m}"),
            StoreError::Conflict(m) => write!(f, "a concurrent use of the database: {m}"),
            StoreError::Other(m) => write!(f, "{m}"),
            StoreError::Constraint(m) => write!(f, "a uniqueness rule of the store: {m}"),
            StoreError::LogFailed {
                cause,
                earlier: false,
            } => write!(
                f,
                "{cause}; writes are refused until kip-nexus restarts (reads still work)"
            ),
            StoreError::LogFailed {
                cause,
                earlier: true,
            } => write!(
                f,
                "writes are refused since the write-ahead log failed ({cause})"
            ),
            StoreError::Caller(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Full { source, .. } | StoreError::Io { source, .. } => Some(source),
            StoreError::LogFailed { cause, .. } => Some(&**cause),
            _ => None,
        }
    }
}

impl From<StoreError> for KipError {
    fn from(e: StoreError) -> KipError {
        let hint = match &e {
            StoreError::Caller(_) => {
                let StoreError::Caller(inner) = e else {
                    unreachable!("matched just above")
                };
                return *inner;
            }
            StoreError::Full { .. } => {
                "free space on that file system (df -h), then retry: the command was not applied, and nothing acknowledged was lost"
            }
            StoreError::Io { .. } => {
                "the command was not applied; check the disk and the data directory's permissions, then retry"
            }
            StoreError::Corruption(_) => {
                "run `kip check` on the data directory (with no server running); restore it from a backup or a `kip export` if it reports damage"
            }
            StoreError::Poisoned => {
                "restart kip-nexus (after freeing disk space if the disk was full): the open replays the write-ahead log"
            }
            StoreError::Locked(_) => {
                "stop the other process, or use `kip serve`/`kip exec`, which share a directory"
            }
            StoreError::LogFailed { cause, .. } if cause.is_full() => {
                "free space on that file system (df -h), then restart kip-nexus: the log is checked and replayed on open; nothing acknowledged was lost, and reads still work"
            }
            StoreError::LogFailed { .. } => {
                "restart kip-nexus: the log is checked and replayed on open; nothing acknowledged was lost, and reads still work"
            }
            StoreError::Conflict(_) => "the command was not applied; retry it",
            StoreError::Constraint(_) => {
                "the command was not applied; this is a bug of kip-nexus, please report it with the command"
            }
            StoreError::Other(_) => {
                "the command was not applied; retry, and report the error if it persists"
            }
        };
        KipError::internal(format!("storage error: {e}")).with_hint(hint)
    }
}

impl From<KipError> for StoreError {
    fn from(e: KipError) -> Self {
        StoreError::Caller(Box::new(e))
    }
}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        StoreError::io(None, e)
    }
}

impl From<String> for StoreError {
    fn from(m: String) -> Self {
        StoreError::Other(m)
    }
}

impl From<&str> for StoreError {
    fn from(m: &str) -> Self {
        StoreError::Other(m.to_string())
    }
}

impl From<rmp_serde::decode::Error> for StoreError {
    fn from(e: rmp_serde::decode::Error) -> Self {
        StoreError::Corruption(format!("a stored record cannot be decoded: {e}"))
    }
}

impl From<rmp_serde::encode::Error> for StoreError {
    fn from(e: rmp_serde::encode::Error) -> Self {
        StoreError::Other(format!("a record cannot be encoded: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_says_so_with_the_path() {
        let e = StoreError::io(
            Some(Path::new("/data/nexus.wal")),
            std::io::Error::from_raw_os_error(28),
        );
        assert!(e.is_full());
        let k = KipError::from(e);
        assert_eq!(k.code.as_str(), "KIP_4003");
        assert!(
            k.message
                .contains("no space left on device (/data/nexus.wal)"),
            "{}",
            k.message
        );
        assert!(k.hint.as_deref().is_some_and(|h| h.contains("free space")));
    }

    #[test]
    fn kinds_are_told_apart() {
        let io = StoreError::from(std::io::Error::from_raw_os_error(5));
        assert!(matches!(io, StoreError::Io { .. }));
        assert!(
            std::error::Error::source(&io).is_some(),
            "the source is kept"
        );
        let corrupt = StoreError::Corruption("page 7".into());
        assert!(KipError::from(corrupt)
            .hint
            .is_some_and(|h| h.contains("kip check")));
        let bad: Result<u64, _> = rmp_serde::from_slice(&[0xc1]);
        let decode = StoreError::from(bad.expect_err("invalid msgpack"));
        assert!(matches!(decode, StoreError::Corruption(_)));
    }
}
