//! The in-memory index overlay (`store/overlay.rs`): whatever the interleaving of writes,
//! failed and dry-run writes, folds (checkpoints), crashes, reopenings and readers that
//! keep an old snapshot, every secondary-index read returns exactly the entries the
//! records imply, in key order, and a held snapshot never changes.

use kip_engine::store::{ConceptRecord, ElemRef, GraphRead, PropRecord};
use kip_engine::Nexus;
use kip_lang::KipError;
use kip_open::Open;
use kip_open::{DB_FILE, WAL_FILE};
use proptest::prelude::*;
use serde_json::{json, Map};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};

const TYPES: [&str; 3] = ["Alpha", "Beta", "Gamma"];
const NAMES: [&str; 4] = ["one", "two", "three", "four"];
const PREDS: [&str; 2] = ["likes", "cites"];
const WORDS: [&str; 6] = ["river", "stone", "rivers", "light", "north", "stony"];

/// Everything the overlaid indexes return, read through the public read interface.
#[derive(Debug, PartialEq, Eq)]
struct Indexes {
    types: BTreeMap<String, Vec<u64>>,
    names: BTreeMap<String, Vec<u64>>,
    pos: BTreeMap<String, Vec<(u64, u64, u64)>>,
    osp: BTreeMap<u64, Vec<(String, u64, u64)>>,
    /// Links out of each element: `spo` (staged in a write transaction until its end).
    spo: BTreeMap<u64, Vec<(String, u64, u64)>>,
    postings: Vec<(String, u64, u32, u32)>,
    /// `totals()`: concepts, propositions.
    totals: (u64, u64),
}

/// What the indexes must hold, derived from the records alone.
fn expected(r: &dyn GraphRead, extra_elems: &BTreeSet<u64>) -> Indexes {
    let mut ix = Indexes {
        types: TYPES.iter().map(|t| (t.to_string(), Vec::new())).collect(),
        names: NAMES.iter().map(|n| (n.to_string(), Vec::new())).collect(),
        pos: PREDS.iter().map(|p| (p.to_string(), Vec::new())).collect(),
        osp: extra_elems.iter().map(|e| (*e, Vec::new())).collect(),
        spo: extra_elems.iter().map(|e| (*e, Vec::new())).collect(),
        postings: Vec::new(),
        totals: (0, 0),
    };
    let mut concepts = Vec::new();
    r.scan_concepts(&mut |n| {
        concepts.push(n);
        Ok(true)
    })
    .expect("scan concepts");
    let concepts_len = concepts.len() as u64;
    let mut listed: BTreeSet<u64> = concepts
        .iter()
        .map(|n| ElemRef::Concept(*n).encode())
        .collect();
    for n in concepts {
        let c = r.concept(n).expect("read").expect("listed concept");
        ix.types.entry(c.concept_type.clone()).or_default().push(n);
        ix.names.entry(c.name.clone()).or_default().push(n);
        ix.osp.entry(ElemRef::Concept(n).encode()).or_default();
        ix.spo.entry(ElemRef::Concept(n).encode()).or_default();
        let doc = kip_engine::store::text::concept_doc(&c);
        for (t, tf) in &doc.terms {
            ix.postings
                .push((t.clone(), ElemRef::Concept(n).encode(), *tf, doc.len));
        }
    }
    let mut props = Vec::new();
    r.scan_props(&mut |n| {
        props.push(n);
        Ok(true)
    })
    .expect("scan props");
    let props_len = props.len() as u64;
    listed.extend(props.iter().map(|n| ElemRef::Prop(*n).encode()));
    for n in props {
        let p = r.prop(n).expect("read").expect("listed prop");
        let (s, o) = (p.subject.encode(), p.object.encode());
        ix.pos
            .entry(p.predicate.clone())
            .or_default()
            .push((o, s, n));
        ix.osp
            .entry(o)
            .or_default()
            .push((p.predicate.clone(), s, n));
        ix.osp.entry(ElemRef::Prop(n).encode()).or_default();
        ix.spo
            .entry(s)
            .or_default()
            .push((p.predicate.clone(), o, n));
        ix.spo.entry(ElemRef::Prop(n).encode()).or_default();
    }
    ix.totals = (concepts_len, props_len);
    // Every element ever seen reads back exactly when it is listed (a removed record
    // must not show through, a new one must).
    for e in extra_elems {
        let present = match ElemRef::decode(*e) {
            ElemRef::Concept(n) => r.concept(n).expect("read concept").is_some(),
            ElemRef::Prop(n) => r.prop(n).expect("read prop").is_some(),
        };
        assert_eq!(
            present,
            listed.contains(e),
            "element {e} reads back exactly when listed"
        );
    }
    for v in ix.types.values_mut().chain(ix.names.values_mut()) {
        v.sort();
    }
    for v in ix.pos.values_mut() {
        v.sort();
    }
    for v in ix.osp.values_mut().chain(ix.spo.values_mut()) {
        v.sort();
    }
    ix.postings.sort();
    ix
}

/// The same keys, read from the indexes (in the order the scans return them).
fn actual(r: &dyn GraphRead, like: &Indexes) -> Indexes {
    let mut ix = Indexes {
        types: BTreeMap::new(),
        names: BTreeMap::new(),
        pos: BTreeMap::new(),
        osp: BTreeMap::new(),
        spo: BTreeMap::new(),
        postings: Vec::new(),
        totals: r.totals().expect("totals"),
    };
    // Every id filed under `key` by the type or the name index, in scan order.
    let ids = |by_type: bool, key: &str| {
        let mut v = Vec::new();
        let mut push = |n| {
            v.push(n);
            Ok(true)
        };
        if by_type {
            r.scan_type(key, &mut push).expect("scan type");
        } else {
            r.scan_name(key, &mut push).expect("scan name");
        }
        v
    };
    for t in like.types.keys() {
        ix.types.insert(t.clone(), ids(true, t));
    }
    for t in like.names.keys() {
        ix.names.insert(t.clone(), ids(false, t));
    }
    for p in like.pos.keys() {
        let mut v = Vec::new();
        r.scan_predicate(p, &mut |s, o, id| {
            v.push((o.encode(), s.encode(), id));
            Ok(true)
        })
        .expect("scan predicate");
        ix.pos.insert(p.clone(), v);
    }
    for (o, links) in &like.osp {
        let mut v = Vec::new();
        r.scan_in(ElemRef::decode(*o), None, &mut |p, s, id| {
            v.push((p.to_string(), s.encode(), id));
            Ok(true)
        })
        .expect("scan in");
        // With a predicate: exactly that predicate's share.
        for p in PREDS {
            let mut w = Vec::new();
            r.scan_in(ElemRef::decode(*o), Some(p), &mut |p, s, id| {
                w.push((p.to_string(), s.encode(), id));
                Ok(true)
            })
            .expect("scan in with predicate");
            let want: Vec<_> = links.iter().filter(|l| l.0 == p).cloned().collect();
            assert_eq!(w, want, "links into {o} with predicate {p}");
        }
        ix.osp.insert(*o, v);
    }
    for (s, links) in &like.spo {
        let mut v = Vec::new();
        r.scan_out(ElemRef::decode(*s), None, &mut |p, o, id| {
            v.push((p.to_string(), o.encode(), id));
            Ok(true)
        })
        .expect("scan out");
        for p in PREDS {
            let mut w = Vec::new();
            r.scan_out(ElemRef::decode(*s), Some(p), &mut |p, o, id| {
                w.push((p.to_string(), o.encode(), id));
                Ok(true)
            })
            .expect("scan out with predicate");
            let want: Vec<_> = links.iter().filter(|l| l.0 == p).cloned().collect();
            assert_eq!(w, want, "links out of {s} with predicate {p}");
        }
        for (p, o, id) in links {
            assert_eq!(
                r.prop_by_spo(ElemRef::decode(*s), p, ElemRef::decode(*o))
                    .expect("prop by spo"),
                Some(*id),
                "link ({s}, {p}, {o})"
            );
        }
        ix.spo.insert(*s, v);
    }
    r.scan_postings("", &mut |t, key, tf, len| {
        ix.postings.push((t.to_string(), key, tf, len));
        Ok(true)
    })
    .expect("scan postings");
    for (t, key, tf, len) in &like.postings {
        assert_eq!(
            r.posting(t, *key).expect("posting"),
            Some((*tf, *len)),
            "posting ({t}, {key})"
        );
    }
    // A prefix scan that starts in the middle sees the same tail.
    let tail: Vec<_> = like
        .postings
        .iter()
        .filter(|p| p.0.as_str() >= "s")
        .cloned()
        .collect();
    let mut got = Vec::new();
    r.scan_postings("s", &mut |t, key, tf, len| {
        got.push((t.to_string(), key, tf, len));
        Ok(true)
    })
    .expect("scan postings from s");
    assert_eq!(got, tail, "postings from \"s\"");
    ix
}

/// The same check inside a write transaction (its own changes on top of the overlay).
fn check_in(w: &dyn GraphRead, elems: &BTreeSet<u64>) {
    let want = expected(w, elems);
    assert_eq!(
        actual(w, &want),
        want,
        "index reads inside the write match its records"
    );
}

fn check(n: &Nexus, elems: &BTreeSet<u64>) -> Indexes {
    n.read(|r| {
        let want = expected(r, elems);
        let got = actual(r, &want);
        assert_eq!(got, want, "index reads match the records");
        Ok(want)
    })
    .expect("read")
}

/// Every `{type, name}` lookup answers what the records say, through a read snapshot and
/// twice inside a write (whose lookups go through the writers' key cache, which the
/// first lookup may fill), also right after failed and dry-run writes.
fn check_keys(n: &Nexus, slots: &BTreeMap<u8, (u64, ConceptRecord)>) {
    let want = |t: &str, name: &str| {
        slots
            .values()
            .find(|(_, c)| c.concept_type == t && c.name == name)
            .map(|(id, _)| *id)
    };
    let all = |g: &dyn GraphRead, what: &str| -> Result<(), KipError> {
        for t in TYPES {
            for name in NAMES {
                assert_eq!(
                    g.concept_by_key(t, name)?,
                    want(t, name),
                    "{{type: {t}, name: {name}}} {what}"
                );
            }
        }
        Ok(())
    };
    n.read(|r| all(r, "in a snapshot")).expect("read");
    n.write(
        |w| {
            all(&*w, "in a write")?;
            all(&*w, "in a write, again")
        },
        true,
    )
    .expect("dry run");
}

#[derive(Debug, Clone)]
enum Op {
    /// Create or rewrite a concept (by slot), with a text made of `words`.
    Concept {
        slot: u8,
        ty: u8,
        name: u8,
        words: Vec<u8>,
    },
    DeleteConcept(u8),
    Link(u8, u8, u8),
    DeleteLink(u8),
    /// A write that changes the indexes and then fails.
    Failing(u8),
    DryRun(u8),
    Checkpoint,
    /// Copy the files while open (a crash) and continue on the copy.
    Crash,
    Reopen,
    /// Start (or stop) a reader that holds its snapshot.
    Hold,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..8, 0u8..3, 0u8..4, prop::collection::vec(0u8..6, 0..4))
            .prop_map(|(slot, ty, name, words)| Op::Concept { slot, ty, name, words }),
        2 => (0u8..8).prop_map(Op::DeleteConcept),
        5 => (0u8..8, 0u8..2, 0u8..8).prop_map(|(s, p, o)| Op::Link(s, p, o)),
        2 => (0u8..16).prop_map(Op::DeleteLink),
        1 => (0u8..8).prop_map(Op::Failing),
        1 => (0u8..8).prop_map(Op::DryRun),
        2 => Just(Op::Checkpoint),
        1 => Just(Op::Crash),
        1 => Just(Op::Reopen),
        2 => Just(Op::Hold),
    ]
}

fn record(ty: u8, name: u8, words: &[u8]) -> ConceptRecord {
    let text: Vec<&str> = words.iter().map(|w| WORDS[usize::from(*w)]).collect();
    let mut attributes = Map::new();
    attributes.insert("description".into(), json!(text.join(" ")));
    ConceptRecord {
        concept_type: TYPES[usize::from(ty)].to_string(),
        name: NAMES[usize::from(name)].to_string(),
        attributes,
        metadata: Map::new(),
    }
}

/// A reader thread holding one snapshot until told to check it again.
struct Held {
    go: mpsc::Sender<()>,
    done: std::thread::JoinHandle<()>,
}

fn hold(n: &Arc<Nexus>, elems: BTreeSet<u64>) -> Held {
    let (ready_tx, ready_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let n = n.clone();
    let done = std::thread::spawn(move || {
        n.read(|r| {
            let before = expected(r, &elems);
            ready_tx.send(()).expect("ready");
            let _ = go_rx.recv();
            let after = expected(r, &elems);
            assert_eq!(after, before, "a snapshot's records do not change");
            assert_eq!(actual(r, &after), after, "nor do its index reads");
            Ok(())
        })
        .expect("held read");
    });
    ready_rx.recv().expect("reader started");
    Held { go: go_tx, done }
}

fn release(held: &mut Option<Held>) {
    if let Some(h) = held.take() {
        h.go.send(()).expect("go");
        h.done
            .join()
            .expect("the held reader saw a stable snapshot");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for f in [DB_FILE, WAL_FILE] {
        std::fs::copy(from.join(f), to.join(f)).expect("copy");
    }
}

fn open(dir: &Path, max_changes: Option<usize>) -> Nexus {
    let n = Nexus::open(dir).expect("open");
    if let Some(m) = max_changes {
        n.testing().set_max_txn_index_changes(m);
    }
    n
}

fn run(ops: Vec<Op>, max_changes: Option<usize>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut dirs = 0;
    let mut dir: PathBuf = tmp.path().join("d0");
    let mut n = Arc::new(open(&dir, max_changes));
    let mut slots: BTreeMap<u8, (u64, ConceptRecord)> = BTreeMap::new();
    let mut links: Vec<(u64, PropRecord)> = Vec::new();
    let mut elems: BTreeSet<u64> = BTreeSet::new();
    let mut held: Option<Held> = None;
    for op in ops {
        match op {
            Op::Concept {
                slot,
                ty,
                name,
                words,
            } => {
                let rec = record(ty, name, &words);
                let old = slots.get(&slot).cloned();
                // (type, name) stays unique: skip a rewrite that would collide.
                if slots.iter().any(|(s, (_, c))| {
                    *s != slot && c.concept_type == rec.concept_type && c.name == rec.name
                }) || n
                    .read(|r| Ok(r.concept_by_key(&rec.concept_type, &rec.name)?))
                    .expect("read")
                    .is_some_and(|id| old.as_ref().is_none_or(|(o, _)| *o != id))
                {
                    continue;
                }
                let id = n
                    .write(
                        |w| {
                            let id = match &old {
                                Some((id, _)) => *id,
                                None => w.alloc_concept_id()?,
                            };
                            w.put_concept(id, &rec, old.as_ref().map(|(_, c)| c))?;
                            let mut seen = elems.clone();
                            seen.insert(ElemRef::Concept(id).encode());
                            check_in(&*w, &seen);
                            Ok(id)
                        },
                        false,
                    )
                    .expect("write concept");
                elems.insert(ElemRef::Concept(id).encode());
                slots.insert(slot, (id, rec));
            }
            Op::DeleteConcept(slot) => {
                let Some((id, rec)) = slots.get(&slot).cloned() else {
                    continue;
                };
                let e = ElemRef::Concept(id);
                let gone: Vec<(u64, PropRecord)> = links
                    .iter()
                    .filter(|(_, l)| l.subject == e || l.object == e)
                    .cloned()
                    .collect();
                n.write(
                    |w| {
                        for (lid, l) in &gone {
                            w.delete_prop(*lid, l)?;
                        }
                        w.delete_concept(id, &rec)?;
                        check_in(&*w, &elems);
                        Ok(())
                    },
                    false,
                )
                .expect("delete concept");
                links.retain(|(lid, _)| !gone.iter().any(|(g, _)| g == lid));
                slots.remove(&slot);
            }
            Op::Link(s, p, o) => {
                let (Some((sid, _)), Some((oid, _))) = (slots.get(&s), slots.get(&o)) else {
                    continue;
                };
                let rec = PropRecord {
                    subject: ElemRef::Concept(*sid),
                    predicate: PREDS[usize::from(p)].to_string(),
                    object: ElemRef::Concept(*oid),
                    attributes: Map::new(),
                    metadata: Map::new(),
                };
                if links.iter().any(|(_, l)| {
                    l.subject == rec.subject
                        && l.predicate == rec.predicate
                        && l.object == rec.object
                }) {
                    continue;
                }
                let id = n
                    .write(
                        |w| {
                            let id = w.alloc_prop_id()?;
                            w.put_prop(id, &rec, None)?;
                            let mut seen = elems.clone();
                            seen.insert(ElemRef::Prop(id).encode());
                            check_in(&*w, &seen);
                            Ok(id)
                        },
                        false,
                    )
                    .expect("write link");
                elems.insert(ElemRef::Prop(id).encode());
                links.push((id, rec));
            }
            Op::DeleteLink(i) => {
                if links.is_empty() {
                    continue;
                }
                let (id, rec) = links.remove(usize::from(i) % links.len());
                n.write(|w| Ok(w.delete_prop(id, &rec)?), false)
                    .expect("delete link");
            }
            Op::Failing(slot) | Op::DryRun(slot) => {
                let dry = matches!(op, Op::DryRun(_));
                // (type, name) stays unique (the store refuses a second concept with a
                // key, which would fail the write for another reason): skip a collision.
                let fresh = record(slot % 3, slot % 4, &[0, 1, 2]);
                if slots.iter().any(|(s, (_, c))| {
                    *s != slot && c.concept_type == fresh.concept_type && c.name == fresh.name
                }) {
                    continue;
                }
                let before = check(&n, &elems);
                let r = n.write(
                    |w| {
                        // The old concept goes first: its key may be the new one's (a
                        // store refuses two concepts with one key, even for a moment).
                        if let Some((cid, rec)) = slots.get(&slot) {
                            let e = ElemRef::Concept(*cid);
                            for (lid, l) in &links {
                                if l.subject == e || l.object == e {
                                    w.delete_prop(*lid, l)?;
                                }
                            }
                            w.delete_concept(*cid, rec)?;
                        }
                        let id = w.alloc_concept_id()?;
                        w.put_concept(id, &fresh, None)?;
                        let mut seen = elems.clone();
                        seen.insert(ElemRef::Concept(id).encode());
                        check_in(&*w, &seen);
                        if dry {
                            Ok(())
                        } else {
                            Err(KipError::internal("this write fails on purpose"))
                        }
                    },
                    dry,
                );
                assert_eq!(r.is_ok(), dry);
                assert_eq!(check(&n, &elems), before, "a failed write changes nothing");
            }
            Op::Checkpoint => n.admin().checkpoint().expect("checkpoint"),
            Op::Crash | Op::Reopen => {
                release(&mut held);
                dirs += 1;
                let next = tmp.path().join(format!("d{dirs}"));
                if matches!(op, Op::Crash) {
                    copy_dir(&dir, &next);
                    let crashed = open(&next, max_changes);
                    // The live one closes normally; the copy carries on.
                    n = Arc::new(crashed);
                } else {
                    drop(n);
                    std::fs::rename(&dir, &next).expect("rename");
                    n = Arc::new(open(&next, max_changes));
                }
                dir = next;
            }
            Op::Hold => {
                if held.is_some() {
                    release(&mut held);
                } else {
                    held = Some(hold(&n, elems.clone()));
                }
            }
        }
        check(&n, &elems);
        check_keys(&n, &slots);
    }
    release(&mut held);
    // (The test's types are not registered as `$ConceptType`s: storage does not care.)
    let problems: Vec<String> = n
        .admin()
        .check_integrity()
        .expect("check")
        .into_iter()
        .filter(|p| !p.contains("unregistered type"))
        .collect();
    assert_eq!(problems, Vec::<String>::new());
    // Folded completely on request, and then still the same.
    let before = check(&n, &elems);
    n.admin().checkpoint().expect("checkpoint");
    assert_eq!(check(&n, &elems), before);
    assert_eq!(
        n.testing().overlay_entries(),
        0,
        "nothing left in memory after a fold"
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        rng_seed: proptest::test_runner::RngSeed::Fixed(11),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    #[test]
    fn index_reads_always_match_the_records(
        ops in prop::collection::vec(op(), 1..40),
        max_changes in prop_oneof![Just(None), (1usize..12).prop_map(Some)],
    ) {
        run(ops, max_changes);
    }
}

#[test]
fn a_held_reader_keeps_its_view_through_a_fold_and_pruning_waits_for_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let n = Arc::new(Nexus::open(tmp.path()).expect("open"));
    let mut elems = BTreeSet::new();
    let mut ids = Vec::new();
    for i in 0..3u8 {
        let id = n
            .write(
                |w| {
                    let id = w.alloc_concept_id()?;
                    w.put_concept(id, &record(i % 3, i, &[0, 1]), None)?;
                    Ok(id)
                },
                false,
            )
            .expect("write");
        elems.insert(ElemRef::Concept(id).encode());
        ids.push(id);
    }
    assert!(
        n.testing().overlay_entries() > 0,
        "small writes stay in the overlay"
    );
    let mut held = Some(hold(&n, elems.clone()));
    n.admin().checkpoint().expect("fold");
    let kept = n.testing().overlay_entries();
    assert!(kept > 0, "the old reader still needs the folded entries");
    // A later write, removing one of the folded entries' concepts.
    let rec = record(0, 0, &[0, 1]);
    n.write(|w| Ok(w.delete_concept(ids[0], &rec)?), false)
        .expect("delete");
    check(&n, &elems);
    release(&mut held);
    n.admin().checkpoint().expect("fold again");
    assert_eq!(n.testing().overlay_entries(), 0);
    check(&n, &elems);
}

#[test]
fn concurrent_readers_always_see_whole_commits_while_writers_fold() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let n = Arc::new(open(tmp.path(), Some(5)));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (n, stop) = (n.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || reads < 20 {
                    n.read(|r| {
                        let want = expected(r, &BTreeSet::new());
                        assert_eq!(actual(r, &want), want, "a reader saw part of a commit");
                        Ok(())
                    })
                    .expect("read");
                    reads += 1;
                }
            })
        })
        .collect();
    for round in 0..60u64 {
        let id = n
            .write(
                |w| {
                    let id = w.alloc_concept_id()?;
                    w.put_concept(
                        id,
                        &record((round % 3) as u8, 0, &[(round % 6) as u8, 1, 2]),
                        None,
                    )?;
                    Ok(id)
                },
                false,
            )
            .expect("write");
        // Rename: the old (type, name) entries go, the new ones come.
        let old = record((round % 3) as u8, 0, &[(round % 6) as u8, 1, 2]);
        let mut new = old.clone();
        new.name = format!("renamed-{round}");
        n.write(|w| Ok(w.put_concept(id, &new, Some(&old))?), false)
            .expect("rename");
        if round % 7 == 0 {
            n.admin().checkpoint().expect("checkpoint");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader");
    }
    check(&n, &BTreeSet::new());
}

#[test]
fn the_integrity_check_finds_a_stale_secondary_index_entry() {
    let n = Nexus::in_memory().expect("nexus");
    let put = |rec: &ConceptRecord, id: Option<u64>| {
        n.write(
            |w| {
                let id = match id {
                    Some(id) => id,
                    None => w.alloc_concept_id()?,
                };
                // `old: None` on purpose for a rename: the old name's entry stays.
                w.put_concept(id, rec, None)?;
                Ok(id)
            },
            false,
        )
        .expect("write")
    };
    put(&record(0, 0, &[]), None);
    let b = put(&record(1, 0, &[]), None);
    let clean = |n: &Nexus| -> Vec<String> {
        n.admin()
            .check_integrity()
            .expect("check")
            .into_iter()
            .filter(|p| !p.contains("unregistered type"))
            .collect()
    };
    assert_eq!(clean(&n), Vec::<String>::new());
    put(&record(1, 1, &[]), Some(b));
    for fold in [false, true] {
        if fold {
            n.admin().checkpoint().expect("fold");
        }
        let problems = clean(&n);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("name \"one\"") && p.contains("1 extra")),
            "{problems:?}"
        );
    }
}
