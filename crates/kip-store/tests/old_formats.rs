//! The tables of a data directory written by an earlier release (storage format 1,
//! text index version 4; see `fixtures/format1-textindex4/README.md`) after this
//! build's open: the retired tables are gone, the current ones are there, and the
//! version keys say so. (What the data means is checked by kip-engine's
//! `tests/old_formats.rs` on the same fixture.)

use kip_store::db::{OpenMode, Store, DB_FILE, FORMAT_KEY, TEXT_INDEX_KEY};
use redb::{ReadableDatabase, TableDefinition, TableHandle};

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

fn tables_and_meta(file: &std::path::Path) -> (Vec<String>, Option<u64>, Option<u64>) {
    let db = redb::Database::open(file).expect("redb open");
    let txn = db.begin_read().expect("read");
    let tables = txn
        .list_tables()
        .expect("tables")
        .map(|t| t.name().to_string())
        .collect();
    let meta = txn.open_table(META).expect("meta");
    let get = |k: &str| {
        meta.get(k)
            .expect("get")
            .and_then(|v| <[u8; 8]>::try_from(v.value()).ok())
            .map(u64::from_le_bytes)
    };
    (tables, get(FORMAT_KEY), get(TEXT_INDEX_KEY))
}

#[test]
fn an_old_directory_is_migrated_in_place() {
    let fixture = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/format1-textindex4");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(DB_FILE);
    std::fs::copy(fixture.join(DB_FILE), &file).expect("copy");

    let (before, format, text) = tables_and_meta(&file);
    assert_eq!(
        (format, text),
        (Some(1), Some(4)),
        "the fixture is what it claims"
    );
    assert!(before.iter().any(|t| t == "text_docs"), "{before:?}");
    assert!(before.iter().any(|t| t == "text_postings2"), "{before:?}");

    // The engine's bootstrap already ran when the fixture was written: nothing to add.
    let store = Store::open(dir.path(), OpenMode::Normal, &mut |_| Ok(())).expect("open");
    assert!(store.check_log().expect("log").is_empty());
    drop(store);

    let (after, format, text) = tables_and_meta(&file);
    assert_eq!(format, Some(kip_store::FORMAT_VERSION));
    assert_eq!(text, Some(kip_storage::text::TEXT_INDEX_VERSION));
    assert!(!after.iter().any(|t| t == "text_docs"), "{after:?}");
    assert!(!after.iter().any(|t| t == "text_postings2"), "{after:?}");
    assert!(after.iter().any(|t| t == "text_postings3"), "{after:?}");
}
