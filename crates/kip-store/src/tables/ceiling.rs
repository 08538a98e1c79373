//! What redb alone needs to write a loaded graph: the floor under any bulk-load path
//! that keeps these tables in redb (issue 27's comparison with Kùzu's `COPY`).
//!
//! An ignored test, run by hand on a data directory a load left behind:
//!
//! ```sh
//! target/release/kip bench -q --scales 100000 --only none --keep-data --work-dir /tmp/lb
//! KIP_CEILING_DIR=/tmp/lb/scale-100000 cargo test --release -p kip-store --lib \
//!   redb_ceiling -- --ignored --nocapture
//! ```
//!
//! It copies every graph table of that directory's `nexus.redb` (records and every
//! index, as the load left them) into a fresh database in key order: one unsynced
//! transaction per table (or per `KIP_CEILING_CHUNK=N` entries), then one durable
//! commit that takes them all to the disk. No KIP text, no encoding, no lookups, no
//! log: the best order redb can be given, so its time is a lower bound for loading that
//! graph into these tables. A read-only pass over the same tables is timed first, to
//! tell the reading apart from the writing.

use super::*;
use redb::{Database, Durability, Key, ReadableDatabase, Value};
use std::time::Instant;

/// Reads one table in key order (the part of a copy's time that is not writing).
fn scan<K: Key + 'static, V: Value + 'static>(
    from: &redb::ReadTransaction,
    def: TableDefinition<K, V>,
) -> u64 {
    let Ok(src) = from.open_table(def) else {
        return 0;
    };
    let mut bytes = 0;
    for entry in src.iter().expect("iterate") {
        let (k, v) = entry.expect("entry");
        bytes += K::as_bytes(&k.value()).as_ref().len() + V::as_bytes(&v.value()).as_ref().len();
    }
    bytes as u64
}

/// Copies one table in key order, committing (without syncing) every `chunk` entries;
/// returns its number of entries.
fn copy<K: Key + 'static, V: Value + 'static>(
    from: &redb::ReadTransaction,
    to: &Database,
    chunk: u64,
    def: TableDefinition<K, V>,
) -> u64 {
    let Ok(src) = from.open_table(def) else {
        return 0;
    };
    let begin = || {
        let mut tx = to.begin_write().expect("write");
        tx.set_durability(Durability::None).expect("durability");
        tx
    };
    let mut tx = begin();
    let mut dst = tx.open_table(def).expect("open the copy's table");
    let mut n = 0;
    for entry in src.iter().expect("iterate") {
        let (k, v) = entry.expect("entry");
        dst.insert(k.value(), v.value()).expect("insert");
        n += 1;
        if n % chunk == 0 {
            drop(dst);
            tx.commit().expect("commit");
            tx = begin();
            dst = tx.open_table(def).expect("open the copy's table");
        }
    }
    drop(dst);
    tx.commit().expect("commit");
    n
}

#[test]
#[ignore = "a measurement on a data directory named by KIP_CEILING_DIR"]
fn redb_ceiling() {
    let Some(dir) = std::env::var_os("KIP_CEILING_DIR") else {
        eprintln!("set KIP_CEILING_DIR to a data directory (see the module docs)");
        return;
    };
    let src = Database::open(std::path::Path::new(&dir).join("nexus.redb")).expect("open");
    let out = tempfile::tempdir().expect("temp dir");
    let dst = Database::create(out.path().join("copy.redb")).expect("create");
    let read = src.begin_read().expect("read");
    let start = Instant::now();
    let bytes = scan(&read, CONCEPTS)
        + scan(&read, CONCEPT_KEY)
        + scan(&read, CONCEPT_TYPE)
        + scan(&read, CONCEPT_NAME)
        + scan(&read, PROPS)
        + scan(&read, SPO)
        + scan(&read, POS)
        + scan(&read, OSP)
        + scan(&read, ATTR_VALUES)
        + scan(&read, POSTINGS);
    println!(
        "reading the tables alone: {:.2?} ({} MiB of keys and values)",
        start.elapsed(),
        bytes >> 20
    );
    let chunk = std::env::var("KIP_CEILING_CHUNK")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(u64::MAX);
    let start = Instant::now();
    let counts = [
        ("concepts", copy(&read, &dst, chunk, CONCEPTS)),
        ("concept_key", copy(&read, &dst, chunk, CONCEPT_KEY)),
        ("concept_type", copy(&read, &dst, chunk, CONCEPT_TYPE)),
        ("concept_name", copy(&read, &dst, chunk, CONCEPT_NAME)),
        ("props", copy(&read, &dst, chunk, PROPS)),
        ("spo", copy(&read, &dst, chunk, SPO)),
        ("pos", copy(&read, &dst, chunk, POS)),
        ("osp", copy(&read, &dst, chunk, OSP)),
        ("attr_values", copy(&read, &dst, chunk, ATTR_VALUES)),
        ("text_postings3", copy(&read, &dst, chunk, POSTINGS)),
    ];
    // The last, durable commit: every chunk before it reaches the disk with this one.
    let mut last = dst.begin_write().expect("write");
    last.set_durability(Durability::Immediate)
        .expect("durability");
    last.commit().expect("commit");
    let took = start.elapsed();
    let total: u64 = counts.iter().map(|(_, n)| n).sum();
    for (table, n) in counts {
        println!("{table:>16}: {n:>10} entries");
    }
    println!(
        "{total} entries copied in key order in {took:.2?} ({:.2} M entries/s)",
        total as f64 / took.as_secs_f64() / 1e6
    );
}
