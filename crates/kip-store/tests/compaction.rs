//! The database file gives its free pages back on request (`kip storage compact`),
//! with nothing of the data lost.

use kip_storage::{ConceptRecord, GraphRead, GraphWrite};
use kip_store::db::{OpenMode, Store, DB_FILE};
use serde_json::{Map, Value};

fn concept(name: String) -> ConceptRecord {
    let mut attributes = Map::new();
    attributes.insert("note".into(), Value::String("x".repeat(400)));
    ConceptRecord {
        concept_type: "Note".into(),
        name,
        attributes,
        metadata: Map::new(),
    }
}

fn open(dir: &std::path::Path) -> Store {
    Store::open(dir, OpenMode::Normal, &mut |_| Ok(())).expect("open")
}

fn file_len(dir: &std::path::Path) -> u64 {
    std::fs::metadata(dir.join(DB_FILE)).expect("file").len()
}

/// Writes `n` concepts and deletes all but `keep` of them: the file then holds far
/// more free pages than pages in use.
fn churn(store: &Store, prefix: &str, n: u64, keep: u64) {
    let ids = store
        .write(
            |w| {
                let mut ids = Vec::new();
                for i in 0..n {
                    let id = w.alloc_concept_id()?;
                    w.put_concept(id, &concept(format!("{prefix} {i}")), None)?;
                    ids.push(id);
                }
                Ok(ids)
            },
            false,
        )
        .expect("write");
    store
        .write(
            |w| {
                for (i, id) in ids.iter().enumerate().skip(keep as usize) {
                    w.delete_concept(*id, &concept(format!("{prefix} {i}")))?;
                }
                Ok(())
            },
            false,
        )
        .expect("delete");
}

fn names(store: &Store) -> u64 {
    store
        .read(|r| {
            let mut n = 0;
            r.scan_concepts(&mut |_| {
                n += 1;
                Ok(true)
            })?;
            Ok(n)
        })
        .expect("read")
}

#[test]
fn compact_on_request_cuts_the_file_and_keeps_the_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = open(dir.path());
    churn(&store, "note", 20_000, 100);
    let (before, after) = store.compact().expect("compact");
    assert!(after * 2 < before, "{before} -> {after}");
    assert_eq!(after, file_len(dir.path()));
    assert_eq!(names(&store), 100);
    // Writes go on after a compaction.
    churn(&store, "more", 50, 50);
    drop(store);
    assert_eq!(names(&open(dir.path())), 150);
}
