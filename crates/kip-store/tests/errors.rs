//! Storage errors are typed all the way up to the engine's boundary: a full disk under
//! the write-ahead log is a `StoreError` that says so (not a string), a later write is
//! refused with its own kind, and an error of the caller's own code run inside a
//! storage operation comes back unchanged.

use kip_lang::{ErrorCode, KipError};
use kip_storage::backend::Backend;
use kip_storage::{ConceptRecord, GraphRead, GraphWrite, StoreError};
use kip_store::crashsim::{Disk, Fault};
use kip_store::db::Store;
use serde_json::Map;

fn note(name: &str) -> ConceptRecord {
    ConceptRecord {
        concept_type: "Note".into(),
        name: name.into(),
        attributes: Map::new(),
        metadata: Map::new(),
    }
}

fn add(store: &Store, name: &str) -> Result<u64, StoreError> {
    store.write(
        |w| {
            let id = w.alloc_concept_id()?;
            w.put_concept(id, &note(name), None)?;
            Ok(id)
        },
        false,
    )
}

#[test]
fn a_full_disk_under_the_log_is_a_typed_error_and_later_writes_are_refused() {
    let disk = Disk::new();
    let (db, log) = (disk.file(), disk.file());
    let store = Store::open_simulated(db, log.clone(), &mut |_| Ok(())).expect("open");
    let kept = add(&store, "kept").expect("a write on a healthy disk");

    disk.inject(&log, Some(Fault::NoSpace));
    let e = add(&store, "lost").expect_err("the log cannot be written");
    match &e {
        StoreError::LogFailed {
            cause,
            earlier: false,
        } => assert!(
            matches!(**cause, StoreError::Full { .. }),
            "the cause is the full disk: {cause:?}"
        ),
        other => panic!("expected LogFailed, got {other:?}"),
    }
    assert!(e.is_full());
    assert!(
        std::error::Error::source(&e).is_some(),
        "the cause is kept as the source"
    );
    let k = KipError::from(e);
    assert_eq!(k.code, ErrorCode::InternalError);
    assert!(
        k.message.contains("no space left on device"),
        "{}",
        k.message
    );
    assert!(k.hint.is_some_and(|h| h.contains("free space")));

    // The disk has room again, but the log's state is unknown: refused until reopened.
    disk.inject(&log, None);
    let e = add(&store, "later").expect_err("refused");
    assert!(
        matches!(e, StoreError::LogFailed { earlier: true, .. }),
        "{e:?}"
    );
    // Reads still work, and see the acknowledged write only.
    let names = store
        .read(|r| {
            Ok((
                r.concept(kept)?.map(|c| c.name),
                r.concept_by_key("Note", "lost")?,
            ))
        })
        .expect("read");
    assert_eq!(names, (Some("kept".to_string()), None));
}

#[test]
fn the_callers_own_error_comes_back_unchanged() {
    let store: std::sync::Arc<dyn Backend> =
        std::sync::Arc::new(Store::in_memory(&mut |_| Ok(())).expect("store"));
    let own = KipError::new(ErrorCode::ResourceExhausted, "a query limit").with_hint("page");
    // From the body of a write: the transaction is aborted and the error returned as is.
    let r: Result<(), KipError> = store.write(
        |w| {
            let id = w.alloc_concept_id()?;
            w.put_concept(id, &note("n"), None)?;
            Err(own.clone())
        },
        false,
    );
    assert_eq!(r.expect_err("fails"), own);
    assert_eq!(
        store.read(|r| Ok::<_, KipError>(r.concept_by_key("Note", "n")?)),
        Ok(None),
        "nothing of the failed write is left"
    );
    // From a scan visitor: it stops the scan and passes through the store's error type.
    store
        .write(
            |w| {
                let id = w.alloc_concept_id()?;
                Ok::<_, KipError>(w.put_concept(id, &note("m"), None)?)
            },
            false,
        )
        .expect("write");
    let r: Result<(), KipError> = store.read(|r| {
        r.scan_type("Note", &mut |_| Err(own.clone().into()))?;
        Ok(())
    });
    assert_eq!(r.expect_err("the visitor's error"), own);
}
