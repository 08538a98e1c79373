//! The backend conformance kit: what every backend must guarantee (ARCHITECTURE.md,
//! "What a backend must guarantee"), written once against the contract and run by
//! each backend's own tests (`tests/conformance.rs` in `kip-store`, `kip-store-pg` and
//! `kip-store-mem`), so a new backend proves itself by passing it.
//!
//! Each check is a function taking a [`Harness`] (how to make a fresh backend and how
//! to open the same storage again) and panicking with what went wrong; [`CHECKS`] lists
//! them all with their names, so a backend's test file runs one test per check:
//!
//! ```ignore
//! #[test]
//! fn writes_are_atomic() {
//!     kip_storage::conformance::writes_are_atomic(&MyHarness);
//! }
//! ```
//!
//! Compiled only with the `conformance` feature (a dev-dependency feature of the
//! backends), so it is not part of any release binary.

use crate::backend::Backend;
use crate::{ConceptRecord, ElemRef, GraphRead, GraphWrite, PropRecord, Stat, StoreError};
use serde_json::{json, Map, Value};
use std::sync::Arc;

mod elements;
mod history;
pub use elements::*;
pub use history::*;

/// How a backend under test is made.
pub trait Harness: Sync {
    /// A new, empty backend (not bootstrapped: the kit writes what it needs).
    fn fresh(&self) -> Arc<dyn Backend>;

    /// The storage of `backend` opened again once `backend` is dropped, as a new process
    /// would open it (the harness drops its own handle first).
    fn reopen(&self, backend: Arc<dyn Backend>) -> Arc<dyn Backend>;
}

/// A check of the kit.
pub type Check = fn(&dyn Harness);

/// Every check, by name.
pub const CHECKS: [(&str, Check); 15] = [
    ("writes_are_atomic", writes_are_atomic),
    ("a_write_sees_its_own_changes", a_write_sees_its_own_changes),
    ("reads_see_one_snapshot", reads_see_one_snapshot),
    ("concept_keys_are_unique", concept_keys_are_unique),
    ("link_keys_are_unique", link_keys_are_unique),
    (
        "committed_writes_survive_reopening",
        committed_writes_survive_reopening,
    ),
    (
        "concurrent_writers_are_serialized",
        concurrent_writers_are_serialized,
    ),
    ("ids_are_never_reused", ids_are_never_reused),
    ("indexes_follow_the_records", indexes_follow_the_records),
    (
        "audit_log_keeps_what_it_is_told",
        audit_log_keeps_what_it_is_told,
    ),
    (
        "request_records_commit_with_their_writes",
        request_records_commit_with_their_writes,
    ),
    (
        "element_records_are_written_once_and_kept",
        element_records_are_written_once_and_kept,
    ),
    (
        "element_references_and_numbers_hold",
        element_references_and_numbers_hold,
    ),
    (
        "history_keeps_the_past_and_reads_it_as_of",
        history_keeps_the_past_and_reads_it_as_of,
    ),
    (
        "history_reads_every_past_state_of_a_busy_element",
        history_reads_every_past_state_of_a_busy_element,
    ),
];

fn concept(ty: &str, name: &str, attributes: Value) -> ConceptRecord {
    ConceptRecord {
        concept_type: ty.into(),
        name: name.into(),
        attributes: attributes.as_object().cloned().unwrap_or_default(),
        metadata: Map::new(),
    }
}

fn link(s: u64, p: &str, o: u64) -> PropRecord {
    PropRecord {
        subject: ElemRef::Concept(s),
        predicate: p.into(),
        object: ElemRef::Concept(o),
        attributes: Map::new(),
        metadata: Map::new(),
    }
}

/// Runs `f` in a write transaction that commits.
fn write<T>(
    b: &(dyn Backend + 'static),
    f: impl FnOnce(&mut dyn GraphWrite) -> Result<T, StoreError>,
) -> T {
    b.write(f, false).expect("the write commits")
}

/// Runs `f` on a snapshot.
fn read<T>(
    b: &(dyn Backend + 'static),
    f: impl FnOnce(&dyn GraphRead) -> Result<T, StoreError>,
) -> T {
    b.read(f).expect("the read succeeds")
}

/// Creates a concept in its own transaction; returns its id.
fn create(b: &(dyn Backend + 'static), ty: &str, name: &str, attributes: Value) -> u64 {
    write(b, |w| {
        let id = w.alloc_concept_id()?;
        w.put_concept(id, &concept(ty, name, attributes), None)?;
        Ok(id)
    })
}

/// Creates a link in its own transaction; returns its id.
fn connect(b: &(dyn Backend + 'static), s: u64, p: &str, o: u64) -> u64 {
    write(b, |w| {
        let id = w.alloc_prop_id()?;
        w.put_prop(id, &link(s, p, o), None)?;
        Ok(id)
    })
}

fn ids_of_type(g: &dyn GraphRead, ty: &str) -> Result<Vec<u64>, StoreError> {
    let mut out = Vec::new();
    g.scan_type(ty, &mut |id| {
        out.push(id);
        Ok(true)
    })?;
    Ok(out)
}

fn out_links(g: &dyn GraphRead, s: u64) -> Result<Vec<(String, u64, u64)>, StoreError> {
    let mut out = Vec::new();
    g.scan_out(ElemRef::Concept(s), None, &mut |p, o, id| {
        out.push((p.to_owned(), o.encode(), id));
        Ok(true)
    })?;
    Ok(out)
}

/// A write that fails, or that its body aborts, leaves nothing behind: no record, no
/// key, no index entry, no count.
pub fn writes_are_atomic(h: &dyn Harness) {
    let b = h.fresh();
    let a = create(&*b, "Thing", "a", json!({}));
    let failed = b.write(
        |w| {
            let id = w.alloc_concept_id()?;
            w.put_concept(
                id,
                &concept("Thing", "b", json!({"description": "lost words"})),
                None,
            )?;
            let l = w.alloc_prop_id()?;
            w.put_prop(l, &link(a, "knows", id), None)?;
            Err::<(), _>(StoreError::Other("the body fails".into()))
        },
        false,
    );
    assert!(failed.is_err(), "the body's error is returned");
    let aborted: Result<(), StoreError> = b.write(
        |w| {
            let id = w.alloc_concept_id()?;
            w.put_concept(id, &concept("Thing", "c", json!({})), None)?;
            Ok(())
        },
        true,
    );
    assert!(aborted.is_ok(), "a dry run returns the body's value");
    read(&*b, |g| {
        assert_eq!(
            g.concept_by_key("Thing", "b")?,
            None,
            "no key of the failed write"
        );
        assert_eq!(
            g.concept_by_key("Thing", "c")?,
            None,
            "no key of the aborted write"
        );
        assert_eq!(
            ids_of_type(g, "Thing")?,
            vec![a],
            "the type index holds only a"
        );
        assert_eq!(g.stat(Stat::Type("Thing"))?, 1, "the count holds only a");
        assert_eq!(g.stat(Stat::Predicate("knows"))?, 0, "no link was counted");
        assert_eq!(out_links(g, a)?, vec![], "no link of the failed write");
        assert_eq!(g.totals()?, (1, 0));
        let mut words = 0;
        g.scan_postings("lost", &mut |t, _, _, _| {
            words += usize::from(t == "lost");
            Ok(t == "lost")
        })?;
        assert_eq!(words, 0, "no posting of the failed write");
        Ok(())
    });
}

/// Inside a write, reads see the transaction's own changes through every access path.
pub fn a_write_sees_its_own_changes(h: &dyn Harness) {
    let b = h.fresh();
    write(&*b, |w| {
        let x = w.alloc_concept_id()?;
        w.put_concept(x, &concept("Person", "Ann", json!({"age": 41})), None)?;
        let y = w.alloc_concept_id()?;
        w.put_concept(y, &concept("Person", "Bob", json!({})), None)?;
        assert_eq!(w.concept_by_key("Person", "Ann")?, Some(x));
        assert_eq!(w.concept(x)?.map(|c| c.name), Some("Ann".into()));
        assert_eq!(ids_of_type(w, "Person")?, vec![x, y]);
        let l = w.alloc_prop_id()?;
        w.put_prop(l, &link(x, "knows", y), None)?;
        assert_eq!(
            w.prop_by_spo(ElemRef::Concept(x), "knows", ElemRef::Concept(y))?,
            Some(l)
        );
        assert_eq!(out_links(w, x)?, vec![("knows".into(), y, l)]);
        let mut into = Vec::new();
        w.scan_in(ElemRef::Concept(y), Some("knows"), &mut |p, s, id| {
            into.push((p.to_owned(), s, id));
            Ok(true)
        })?;
        assert_eq!(into, vec![("knows".into(), ElemRef::Concept(x), l)]);
        assert_eq!(w.stat(Stat::Type("Person"))?, 2);
        assert_eq!(w.stat(Stat::Predicate("knows"))?, 1);
        Ok(())
    });
}

/// A read sees one committed state from its start to its end, whatever commits
/// meanwhile.
pub fn reads_see_one_snapshot(h: &dyn Harness) {
    let b = h.fresh();
    create(&*b, "Thing", "before", json!({}));
    let writer = b.clone();
    read(&*b, |g| {
        assert_eq!(g.totals()?.0, 1);
        std::thread::scope(|s| {
            s.spawn(|| create(&*writer, "Thing", "during", json!({})))
                .join()
                .expect("the writer commits while the read is open");
        });
        assert_eq!(g.totals()?.0, 1, "the commit is not in the open snapshot");
        assert_eq!(g.concept_by_key("Thing", "during")?, None);
        assert_eq!(ids_of_type(g, "Thing")?.len(), 1);
        Ok(())
    });
    read(&*b, |g| {
        assert_eq!(g.totals()?.0, 2, "a new read sees the commit");
        Ok(())
    });
}

/// Two concepts never share a `{type, name}`: filing a taken key fails and changes
/// nothing.
pub fn concept_keys_are_unique(h: &dyn Harness) {
    let b = h.fresh();
    let a = create(&*b, "Thing", "same", json!({}));
    let dup = b.write(
        |w| {
            let id = w.alloc_concept_id()?;
            w.put_concept(id, &concept("Thing", "same", json!({})), None)
        },
        false,
    );
    assert!(dup.is_err(), "a second concept with a taken key is refused");
    // Renaming another concept onto the key is refused too.
    let other = create(&*b, "Thing", "other", json!({}));
    let rename = b.write(
        |w| {
            let old = w.concept(other)?.expect("other exists");
            w.put_concept(other, &concept("Thing", "same", json!({})), Some(&old))
        },
        false,
    );
    assert!(rename.is_err(), "a rename onto a taken key is refused");
    read(&*b, |g| {
        assert_eq!(g.concept_by_key("Thing", "same")?, Some(a));
        assert_eq!(g.concept_by_key("Thing", "other")?, Some(other));
        assert_eq!(g.totals()?.0, 2);
        assert_eq!(g.stat(Stat::Type("Thing"))?, 2);
        Ok(())
    });
    // The same concept written again under its own key is fine.
    write(&*b, |w| {
        let old = w.concept(a)?.expect("a exists");
        w.put_concept(a, &concept("Thing", "same", json!({"x": 1})), Some(&old))
    });
}

/// Two links never share a `(subject, predicate, object)`: filing a taken key fails,
/// whether or not the writer looked it up first, and changes nothing.
pub fn link_keys_are_unique(h: &dyn Harness) {
    let b = h.fresh();
    let x = create(&*b, "Thing", "x", json!({}));
    let y = create(&*b, "Thing", "y", json!({}));
    let l = connect(&*b, x, "knows", y);
    for probe_first in [false, true] {
        let dup = b.write(
            |w| {
                if probe_first {
                    w.prop_by_spo(ElemRef::Concept(x), "knows", ElemRef::Concept(y))?;
                }
                let id = w.alloc_prop_id()?;
                w.put_prop(id, &link(x, "knows", y), None)
            },
            false,
        );
        assert!(
            dup.is_err(),
            "a second link with a taken key is refused (probe first: {probe_first})"
        );
    }
    // Twice in one transaction.
    let twice = b.write(
        |w| {
            let one = w.alloc_prop_id()?;
            w.put_prop(one, &link(y, "knows", x), None)?;
            let two = w.alloc_prop_id()?;
            w.put_prop(two, &link(y, "knows", x), None)
        },
        false,
    );
    assert!(
        twice.is_err(),
        "the same new link twice in one transaction is refused"
    );
    read(&*b, |g| {
        assert_eq!(
            g.prop_by_spo(ElemRef::Concept(x), "knows", ElemRef::Concept(y))?,
            Some(l)
        );
        assert_eq!(
            g.prop_by_spo(ElemRef::Concept(y), "knows", ElemRef::Concept(x))?,
            None
        );
        assert_eq!(g.totals()?.1, 1);
        assert_eq!(g.stat(Stat::Predicate("knows"))?, 1);
        Ok(())
    });
    // A link deleted and filed again under a new id in one transaction is fine.
    write(&*b, |w| {
        let old = w.prop(l)?.expect("the link exists");
        w.delete_prop(l, &old)?;
        let id = w.alloc_prop_id()?;
        w.put_prop(id, &link(x, "knows", y), None)
    });
}

/// What a write committed is there when the storage is opened again, and numbering
/// goes on after it.
pub fn committed_writes_survive_reopening(h: &dyn Harness) {
    let b = h.fresh();
    let x = create(
        &*b,
        "Thing",
        "kept",
        json!({"description": "durable words", "n": 7}),
    );
    let y = create(&*b, "Thing", "too", json!({}));
    let l = connect(&*b, x, "knows", y);
    write(&*b, |w| w.set_meta("kit", b"value"));
    let b = h.reopen(b);
    read(&*b, |g| {
        assert_eq!(g.concept_by_key("Thing", "kept")?, Some(x));
        assert_eq!(
            g.concept(x)?.and_then(|c| c.attributes.get("n").cloned()),
            Some(json!(7))
        );
        assert_eq!(
            g.prop_by_spo(ElemRef::Concept(x), "knows", ElemRef::Concept(y))?,
            Some(l)
        );
        assert_eq!(g.meta("kit")?, Some(b"value".to_vec()));
        assert!(g
            .posting("durable", ElemRef::Concept(x).encode())?
            .is_some());
        assert_eq!(g.stat(Stat::Type("Thing"))?, 2);
        Ok(())
    });
    let z = create(&*b, "Thing", "after", json!({}));
    assert!(z > y, "numbering goes on after reopening ({z} after {y})");
}

/// Concurrent writers behave as if run one at a time: no increment is lost.
pub fn concurrent_writers_are_serialized(h: &dyn Harness) {
    let b = h.fresh();
    const THREADS: u64 = 4;
    const EACH: u64 = 20;
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let b = b.clone();
            s.spawn(move || {
                for _ in 0..EACH {
                    write(&*b, |w| {
                        let n = crate::meta_u64(w, "kit_counter")?.unwrap_or(0);
                        w.set_meta("kit_counter", &(n + 1).to_le_bytes())
                    });
                }
            });
        }
    });
    let n = read(&*b, |g| crate::meta_u64(g, "kit_counter"));
    assert_eq!(n, Some(THREADS * EACH), "every increment is applied once");
}

/// An id handed out and committed is never handed out again, even after its element
/// is deleted.
pub fn ids_are_never_reused(h: &dyn Harness) {
    let b = h.fresh();
    let x = create(&*b, "Thing", "x", json!({}));
    let y = create(&*b, "Thing", "y", json!({}));
    let l = connect(&*b, x, "knows", y);
    write(&*b, |w| {
        let rec = w.prop(l)?.expect("link");
        w.delete_prop(l, &rec)?;
        let rec = w.concept(y)?.expect("y");
        w.delete_concept(y, &rec)
    });
    let z = create(&*b, "Thing", "z", json!({}));
    assert!(z > y, "concept numbers are not reused ({z} after {y})");
    let m = connect(&*b, x, "knows", z);
    assert!(m > l, "link numbers are not reused ({m} after {l})");
}

/// Every index and counter follows the records through creation, change and deletion:
/// keys, type and name indexes, links in three orders, text postings, the attribute
/// value index, counts per type, predicate and domain.
pub fn indexes_follow_the_records(h: &dyn Harness) {
    let b = h.fresh();
    let d = create(&*b, "Domain", "Work", json!({}));
    let x = create(
        &*b,
        "Project",
        "Apollo",
        json!({"description": "lunar landing program", "rank": 3}),
    );
    let l = connect(&*b, x, crate::DOMAIN_PREDICATE, d);
    read(&*b, |g| {
        assert!(g.posting("lunar", ElemRef::Concept(x).encode())?.is_some());
        assert!(g.stat(Stat::TextDocs)? >= 1);
        let mut ranks = Vec::new();
        g.scan_attr(
            "Project",
            "rank",
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            false,
            &mut |_, id| {
                ranks.push(id);
                Ok(true)
            },
        )?;
        assert_eq!(ranks, vec![x]);
        assert_eq!(g.stat(Stat::Attr("Project", "rank"))?, 1);
        assert_eq!(g.stat(Stat::Domain(ElemRef::Concept(d)))?, 1);
        let mut by_pred = Vec::new();
        g.scan_predicate(crate::DOMAIN_PREDICATE, &mut |s, o, id| {
            by_pred.push((s, o, id));
            Ok(true)
        })?;
        assert_eq!(by_pred, vec![(ElemRef::Concept(x), ElemRef::Concept(d), l)]);
        Ok(())
    });
    // Rename and change the text and the attribute.
    write(&*b, |w| {
        let old = w.concept(x)?.expect("x");
        let new = concept(
            "Project",
            "Artemis",
            json!({"description": "return to the moon", "rank": 9}),
        );
        w.put_concept(x, &new, Some(&old))
    });
    read(&*b, |g| {
        assert_eq!(g.concept_by_key("Project", "Apollo")?, None);
        assert_eq!(g.concept_by_key("Project", "Artemis")?, Some(x));
        let mut named = Vec::new();
        g.scan_name("Artemis", &mut |id| {
            named.push(id);
            Ok(true)
        })?;
        assert_eq!(named, vec![x]);
        g.scan_name("Apollo", &mut |_| panic!("the old name is still indexed"))?;
        assert!(g.posting("lunar", ElemRef::Concept(x).encode())?.is_none());
        assert!(g.posting("moon", ElemRef::Concept(x).encode())?.is_some());
        let mut high = Vec::new();
        g.scan_attr(
            "Project",
            "rank",
            std::ops::Bound::Excluded(&crate::attrs::number_key(5.0)),
            std::ops::Bound::Unbounded,
            false,
            &mut |_, id| {
                high.push(id);
                Ok(true)
            },
        )?;
        assert_eq!(high, vec![x], "the new value is indexed");
        assert_eq!(g.stat(Stat::Type("Project"))?, 1);
        Ok(())
    });
    // Delete everything.
    write(&*b, |w| {
        let rec = w.prop(l)?.expect("link");
        w.delete_prop(l, &rec)?;
        let rec = w.concept(x)?.expect("x");
        w.delete_concept(x, &rec)
    });
    read(&*b, |g| {
        assert_eq!(ids_of_type(g, "Project")?, Vec::<u64>::new());
        assert!(g.posting("moon", ElemRef::Concept(x).encode())?.is_none());
        assert_eq!(g.stat(Stat::Type("Project"))?, 0);
        assert_eq!(g.stat(Stat::Attr("Project", "rank"))?, 0);
        assert_eq!(g.stat(Stat::Domain(ElemRef::Concept(d)))?, 0);
        assert_eq!(g.stat(Stat::Predicate(crate::DOMAIN_PREDICATE))?, 0);
        assert_eq!(g.totals()?, (1, 0));
        Ok(())
    });
}

/// The audit log keeps what an append says to keep, in sequence order both ways.
pub fn audit_log_keeps_what_it_is_told(h: &dyn Harness) {
    use crate::backend::AuditKeep;
    let b = h.fresh();
    let records: Vec<(u64, Vec<u8>)> = (1..=5).map(|i| (i, format!("r{i}").into_bytes())).collect();
    b.audit_append(&records, AuditKeep { newest: 3, from: 0 }, true)
        .expect("append");
    let mut seen = Vec::new();
    b.audit_range(0, u64::MAX, false, &mut |seq, bytes| {
        seen.push((seq, bytes.to_vec()));
        Ok(true)
    })
    .expect("range");
    assert_eq!(
        seen.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        vec![3, 4, 5],
        "the newest three are kept"
    );
    assert_eq!(seen[0].1, b"r3".to_vec());
    let mut rev = Vec::new();
    b.audit_range(4, 6, true, &mut |seq, _| {
        rev.push(seq);
        Ok(true)
    })
    .expect("range");
    assert_eq!(rev, vec![5, 4]);
}

/// The request log: a record is written in its statement's transaction (gone with an
/// aborted one), survives reopening, is read by key, replaced by a second put, and
/// pruned oldest first.
pub fn request_records_commit_with_their_writes(h: &dyn Harness) {
    let b = h.fresh();
    let aborted = b.write(
        |w| {
            let id = w.alloc_concept_id()?;
            w.put_concept(id, &concept("Thing", "lost", json!({})), None)?;
            w.put_request_record("r1#0", 1_000, b"{\"upserted\":1}")?;
            Err::<(), _>(StoreError::Other("the statement fails".into()))
        },
        false,
    );
    assert!(aborted.is_err());
    assert_eq!(
        read(&*b, |g| g.request_record("r1#0")),
        None,
        "an aborted record is gone"
    );
    write(&*b, |w| {
        let id = w.alloc_concept_id()?;
        w.put_concept(id, &concept("Thing", "kept", json!({})), None)?;
        w.put_request_record("r1#0", 1_000, b"first")?;
        assert_eq!(
            w.request_record("r1#0")?,
            Some(b"first".to_vec()),
            "seen in its transaction"
        );
        w.put_request_record("r2#0", 2_000, b"second")?;
        w.put_request_record("r3#1", 3_000, b"third")
    });
    let b = h.reopen(b);
    read(&*b, |g| {
        assert_eq!(g.request_record("r1#0")?, Some(b"first".to_vec()));
        assert_eq!(g.request_record("r3#1")?, Some(b"third".to_vec()));
        assert_eq!(g.request_record("r9#0")?, None);
        Ok(())
    });
    write(&*b, |w| w.put_request_record("r1#0", 4_000, b"again"));
    let pruned = write(&*b, |w| w.prune_request_records(3_500, 10));
    assert_eq!(
        pruned, 2,
        "r2 and r3 are older than 3500 (r1 was re-recorded at 4000)"
    );
    read(&*b, |g| {
        assert_eq!(g.request_record("r1#0")?, Some(b"again".to_vec()));
        assert_eq!(g.request_record("r2#0")?, None);
        assert_eq!(g.request_record("r3#1")?, None);
        Ok(())
    });
    write(&*b, |w| {
        for i in 0..5u64 {
            w.put_request_record(&format!("m{i}#0"), 5_000 + i, b"x")?;
        }
        Ok(())
    });
    assert_eq!(
        write(&*b, |w| w.prune_request_records(u64::MAX, 3)),
        3,
        "at most max"
    );
    read(&*b, |g| {
        // Oldest first: r1 (made at 4000), m0 and m1 go; m2 stays.
        assert_eq!(g.request_record("r1#0")?, None, "oldest first");
        assert_eq!(g.request_record("m1#0")?, None, "oldest first");
        assert!(g.request_record("m2#0")?.is_some());
        Ok(())
    });
}

/// One `#[test]` per check of the kit, for a backend's `tests/conformance.rs`:
/// `kip_storage::conformance_tests!(MyHarness);`, or with a reason to skip them in a
/// plain `cargo test` (a backend that needs a server):
/// `kip_storage::conformance_tests!(MyHarness, ignore = "needs PostgreSQL");`.
#[macro_export]
macro_rules! conformance_tests {
    ($harness:expr) => {
        $crate::conformance_tests!(@each $harness, [], writes_are_atomic, a_write_sees_its_own_changes,
            reads_see_one_snapshot, concept_keys_are_unique, link_keys_are_unique,
            committed_writes_survive_reopening, concurrent_writers_are_serialized,
            ids_are_never_reused, indexes_follow_the_records, audit_log_keeps_what_it_is_told,
            request_records_commit_with_their_writes, element_records_are_written_once_and_kept,
            element_references_and_numbers_hold, history_keeps_the_past_and_reads_it_as_of,
            history_reads_every_past_state_of_a_busy_element);
    };
    ($harness:expr, ignore = $reason:literal) => {
        $crate::conformance_tests!(@each $harness, [$reason], writes_are_atomic, a_write_sees_its_own_changes,
            reads_see_one_snapshot, concept_keys_are_unique, link_keys_are_unique,
            committed_writes_survive_reopening, concurrent_writers_are_serialized,
            ids_are_never_reused, indexes_follow_the_records, audit_log_keeps_what_it_is_told,
            request_records_commit_with_their_writes, element_records_are_written_once_and_kept,
            element_references_and_numbers_hold, history_keeps_the_past_and_reads_it_as_of,
            history_reads_every_past_state_of_a_busy_element);
    };
    (@each $harness:expr, [], $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                $crate::conformance::$name(&$harness);
            }
        )*
    };
    (@each $harness:expr, [$reason:literal], $($name:ident),*) => {
        $(
            #[test]
            #[ignore = $reason]
            fn $name() {
                $crate::conformance::$name(&$harness);
            }
        )*
    };
}
