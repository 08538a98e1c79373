//! The backend conformance kit (`kip_storage::conformance`) on the in-memory backend.

use kip_storage::backend::Backend;
use kip_storage::conformance::Harness;
use kip_store_mem::MemStore;
use std::sync::Arc;

struct Memory;

impl Harness for Memory {
    fn fresh(&self) -> Arc<dyn Backend> {
        Arc::new(MemStore::new())
    }

    /// Memory lives as long as a handle to it: "opening it again" is keeping it.
    fn reopen(&self, backend: Arc<dyn Backend>) -> Arc<dyn Backend> {
        backend
    }
}

kip_storage::conformance_tests!(Memory);

#[test]
fn the_kit_lists_every_check_the_macro_runs() {
    assert_eq!(kip_storage::conformance::CHECKS.len(), 15);
}
