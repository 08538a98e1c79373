//! The backend conformance kit (`kip_storage::conformance`) on PostgreSQL: each check
//! in a schema of its own of the database at `KIP_TEST_PG_URL` (the throwaway cluster
//! `scripts/pg-test-cluster.sh` starts; `scripts/test.sh` runs these), reopened through
//! a new pool as another process would.

use kip_storage::backend::Backend;
use kip_storage::conformance::Harness;
use kip_store_pg::PgStore;
use std::sync::{Arc, Mutex};

/// The URLs of the stores each check made, to reopen them by URL.
#[derive(Default)]
struct Postgres {
    urls: Mutex<Vec<(String, String)>>,
}

impl Harness for Postgres {
    fn fresh(&self) -> Arc<dyn Backend> {
        let url = std::env::var("KIP_TEST_PG_URL")
            .expect("KIP_TEST_PG_URL (scripts/pg-test-cluster.sh start prints one)");
        let schema = kip_store_pg::scratch_schema(&url, "kit").expect("a schema of its own");
        let store = PgStore::open(&schema).expect("the store opens");
        let location = store.location();
        self.urls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((location, schema));
        Arc::new(store)
    }

    fn reopen(&self, backend: Arc<dyn Backend>) -> Arc<dyn Backend> {
        let location = backend.location();
        drop(backend);
        let urls = self.urls.lock().unwrap_or_else(|p| p.into_inner());
        let url = urls
            .iter()
            .find(|(l, _)| *l == location)
            .map(|(_, u)| u.clone())
            .expect("a store this harness made");
        Arc::new(PgStore::open(&url).expect("the store opens again"))
    }
}

kip_storage::conformance_tests!(
    Postgres::default(),
    ignore = "needs PostgreSQL: KIP_TEST_PG_URL (scripts/test.sh starts a cluster)"
);
