//! redb's errors as the contract's typed [`StoreError`]: `.map_err(storage_error)` at
//! every call into redb (the conversions cannot be `From` impls: neither type is this
//! crate's).

use crate::StoreError;

/// An error this crate meets, classified as a [`StoreError`].
pub(crate) trait IntoStoreError {
    /// The classification.
    fn into_store(self) -> StoreError;
}

/// Classifies an error of redb (or of I/O, record encoding, the caller) as a
/// [`StoreError`].
pub(crate) fn storage_error(e: impl IntoStoreError) -> StoreError {
    e.into_store()
}

macro_rules! through_from {
    ($($t:ty),* $(,)?) => {$(
        impl IntoStoreError for $t {
            fn into_store(self) -> StoreError {
                StoreError::from(self)
            }
        }
    )*};
}

through_from!(
    StoreError,
    std::io::Error,
    String,
    &str,
    kip_lang::KipError,
    rmp_serde::decode::Error,
    rmp_serde::encode::Error,
);

impl IntoStoreError for redb::StorageError {
    fn into_store(self) -> StoreError {
        match self {
            redb::StorageError::Io(io) => StoreError::io(None, io),
            redb::StorageError::Corrupted(m) => StoreError::Corruption(m),
            redb::StorageError::PreviousIo => StoreError::Poisoned,
            redb::StorageError::LockPoisoned(_) => {
                StoreError::Other("a database lock was poisoned by a panic".into())
            }
            other => StoreError::Other(other.to_string()),
        }
    }
}

impl IntoStoreError for redb::TransactionError {
    fn into_store(self) -> StoreError {
        match self {
            redb::TransactionError::Storage(s) => s.into_store(),
            other => StoreError::Conflict(other.to_string()),
        }
    }
}

impl IntoStoreError for redb::CommitError {
    fn into_store(self) -> StoreError {
        match self {
            redb::CommitError::Storage(s) => s.into_store(),
            other => StoreError::Other(other.to_string()),
        }
    }
}

impl IntoStoreError for redb::CompactionError {
    fn into_store(self) -> StoreError {
        match self {
            redb::CompactionError::Storage(s) => s.into_store(),
            other => StoreError::Conflict(other.to_string()),
        }
    }
}

impl IntoStoreError for redb::TableError {
    fn into_store(self) -> StoreError {
        match self {
            redb::TableError::Storage(s) => s.into_store(),
            e @ (redb::TableError::TableTypeMismatch { .. }
            | redb::TableError::TypeDefinitionChanged { .. }
            | redb::TableError::TableIsMultimap(_)
            | redb::TableError::TableIsNotMultimap(_)) => StoreError::Corruption(e.to_string()),
            other => StoreError::Other(other.to_string()),
        }
    }
}

impl IntoStoreError for redb::DatabaseError {
    fn into_store(self) -> StoreError {
        match self {
            redb::DatabaseError::Storage(s) => s.into_store(),
            redb::DatabaseError::DatabaseAlreadyOpen => {
                StoreError::Locked("the database is open in another process".into())
            }
            other => StoreError::Other(other.to_string()),
        }
    }
}

impl IntoStoreError for redb::Error {
    fn into_store(self) -> StoreError {
        match self {
            redb::Error::Io(io) => StoreError::io(None, io),
            redb::Error::Corrupted(m) => StoreError::Corruption(m),
            redb::Error::PreviousIo => StoreError::Poisoned,
            redb::Error::DatabaseAlreadyOpen => {
                StoreError::Locked("the database is open in another process".into())
            }
            other => StoreError::Other(other.to_string()),
        }
    }
}

impl IntoStoreError for redb::SetDurabilityError {
    fn into_store(self) -> StoreError {
        StoreError::Other(self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kip_lang::KipError;

    #[test]
    fn redb_errors_are_classified() {
        let corrupt = storage_error(redb::StorageError::Corrupted("page 7".into()));
        assert!(matches!(corrupt, StoreError::Corruption(_)));
        assert!(KipError::from(corrupt)
            .hint
            .is_some_and(|h| h.contains("kip check")));
        let full = storage_error(redb::StorageError::Io(std::io::Error::from_raw_os_error(
            28,
        )));
        assert!(full.is_full());
        let locked = storage_error(redb::DatabaseError::DatabaseAlreadyOpen);
        assert!(matches!(locked, StoreError::Locked(_)));
    }
}
