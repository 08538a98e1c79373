//! The backend conformance kit (`kip_storage::conformance`) on the embedded redb store:
//! each check on a data directory of its own, reopened from disk.

use kip_storage::backend::Backend;
use kip_storage::conformance::Harness;
use kip_store::db::{OpenMode, Store};
use std::sync::{Arc, Mutex};

/// The directories of one check (removed when the check ends).
#[derive(Default)]
struct Redb {
    dirs: Mutex<Vec<tempfile::TempDir>>,
}

fn open(dir: &std::path::Path) -> Arc<dyn Backend> {
    Arc::new(Store::open(dir, OpenMode::Normal, &mut |_| Ok(())).expect("the store opens"))
}

impl Harness for Redb {
    fn fresh(&self) -> Arc<dyn Backend> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(&dir.path().join("nexus"));
        self.dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(dir);
        store
    }

    fn reopen(&self, backend: Arc<dyn Backend>) -> Arc<dyn Backend> {
        let dir = backend.path().expect("an on-disk store").to_path_buf();
        drop(backend);
        open(&dir)
    }
}

kip_storage::conformance_tests!(Redb::default());
