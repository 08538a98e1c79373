use super::*;
use std::collections::BTreeMap;

fn keys(s: &mut Stream<'_, StrKey, u64>) -> Vec<(StrKey, Option<u64>)> {
    s.collect()
}

fn changes(items: &[(&str, u64, Option<u64>)]) -> IndexChanges {
    let mut c = IndexChanges::default();
    for (t, id, v) in items {
        c.postings.insert((Text::from(*t), *id), *v);
    }
    c
}

fn commit(o: &Overlay, c: IndexChanges, folded: Option<u64>) -> Option<u64> {
    let n = c.len();
    let next = o.writer_start().1 + 1;
    let ver = o.publish(c, next);
    o.commit(ver, n, folded, || Ok(())).expect("commit");
    ver
}

/// What a reader opening a snapshot now would see.
fn begin(o: &Overlay) -> Snapshot {
    let token = o.reader_token();
    let (floor, version) = o.writer_start();
    Snapshot::new(floor, version, token)
}

fn view(o: &Overlay, s: &Snapshot) -> Vec<(StrKey, Option<u64>)> {
    let v = View::of_snapshot(o, s);
    match v.stream(&POSTINGS, || (Bound::Unbounded, Bound::Unbounded)) {
        Some(mut st) => keys(&mut st),
        None => Vec::new(),
    }
}

#[test]
fn a_snapshot_sees_the_versions_committed_before_it_and_newest_first() {
    let o = Overlay::default();
    commit(&o, changes(&[("a", 1, Some(1)), ("b", 2, Some(2))]), None);
    let s1 = begin(&o);
    commit(&o, changes(&[("a", 1, None), ("c", 3, Some(3))]), None);
    let s2 = begin(&o);
    assert_eq!(
        view(&o, &s1),
        vec![(("a".into(), 1), Some(1)), (("b".into(), 2), Some(2))]
    );
    assert_eq!(
        view(&o, &s2),
        vec![
            (("a".into(), 1), None),
            (("b".into(), 2), Some(2)),
            (("c".into(), 3), Some(3))
        ]
    );
    // Published but not committed: invisible; withdrawn on failure.
    let ver = o.publish(changes(&[("d", 4, Some(4))]), 3);
    let s3 = begin(&o);
    assert_eq!(view(&o, &s3).len(), 3);
    assert!(o
        .commit(ver, 1, None, || Err(storage_error("disk full")))
        .is_err());
    assert_eq!(o.entries(), 4);
}

#[test]
fn folded_entries_are_ignored_and_pruned_once_older_readers_are_gone() {
    let o = Overlay::default();
    commit(&o, changes(&[("a", 1, Some(1))]), None);
    let old = begin(&o);
    // A fold up to version 1 (in a transaction that also publishes version 2).
    commit(&o, changes(&[("b", 2, Some(2))]), Some(1));
    let new = begin(&o);
    assert_eq!(view(&o, &old), vec![(("a".into(), 1), Some(1))]);
    assert_eq!(view(&o, &new), vec![(("b".into(), 2), Some(2))]);
    assert_eq!(o.entries(), 2, "the old reader still needs version 1");
    drop(old);
    commit(&o, IndexChanges::default(), None);
    assert_eq!(o.entries(), 1);
    assert_eq!(o.unfolded(), 1);
}

use proptest::prelude::*;

use redb::ReadableTable;

const SORTED: redb::TableDefinition<(&str, u64), u64> = redb::TableDefinition::new("t");

/// Many one-entry publishes (a server's small writes) stay within the run cap and
/// keep every entry.
#[test]
fn small_publishes_stay_within_the_run_cap() {
    let o = Overlay::default();
    for v in 1..=10_000u64 {
        let key = (Text::from(format!("t{}", v % 31)), v);
        let changes: Changes<StrKey, u64> = [(key, Some(v))].into_iter().collect();
        publish_into(&o, &POSTINGS, changes, v);
        let l = o.layers();
        assert!(
            l.postings.runs.len() <= MAX_RUNS,
            "{} runs",
            l.postings.runs.len()
        );
    }
    let l = o.layers();
    assert_eq!(l.postings.len(), 10_000);
    let mut n = 0;
    l.postings
        .for_each_latest(0, &mut |k, v| {
            assert_eq!(*v, Some(k.1));
            n += 1;
            Ok(())
        })
        .expect("walk");
    assert_eq!(n, 10_000);
}

/// Prunes that replace runs while a writer publishes (its merge then has to be
/// redone) lose nothing and keep the runs in version order.
#[test]
fn publishing_while_pruning_keeps_every_entry() {
    let o = Overlay::default();
    let done = std::sync::atomic::AtomicBool::new(false);
    let key = |v: u64, i: u64| (Text::from(format!("t{}", (v * 7 + i) % 97)), v * 10 + i);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                o.layers_mut().postings.prune(1);
            }
        });
        for v in 1..=1500u64 {
            let changes: Changes<StrKey, u64> = (0..4).map(|i| (key(v, i), Some(v))).collect();
            publish_into(&o, &POSTINGS, changes, v);
        }
        done.store(true, Ordering::SeqCst);
    });
    o.layers_mut().postings.prune(1);
    assert_every_entry_once(&o.layers().postings, 1499 * 4, 10);
}

/// The layer holds `count` entries, each key once, in runs in version order, and
/// each entry's value is its version: its element id divided by `per_version`.
fn assert_every_entry_once(layer: &Layer<StrKey, u64>, count: usize, per_version: u64) {
    assert_eq!(layer.len(), count);
    for w in layer.runs.windows(2) {
        assert!(w[0].max_ver < w[1].min_ver);
    }
    let mut seen = 0;
    layer
        .for_each_latest(0, &mut |k, v| {
            assert_eq!(*v, Some(k.1 / per_version));
            seen += 1;
            Ok(())
        })
        .expect("walk");
    assert_eq!(seen, count);
}

/// The merger thread merging appended runs while this thread publishes and another
/// prunes: every entry published after the pruned version is still there, once, in
/// runs that are in version order and within the cap.
#[test]
fn merger_thread_keeps_every_entry() {
    let o = Arc::new(Overlay::default());
    o.start_merger();
    assert_eq!(o.background.load(Ordering::Relaxed), BACKGROUND_MIN);
    let done = std::sync::atomic::AtomicBool::new(false);
    let n = BACKGROUND_MIN as u64 + 50;
    let key = |v: u64, i: u64| (Text::from(format!("t{}", (v * 7 + i) % 97)), v * 10_000 + i);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                o.layers_mut().postings.prune(1);
                std::thread::yield_now();
            }
        });
        for v in 1..=120u64 {
            let changes: Changes<StrKey, u64> = (0..n).map(|i| (key(v, i), Some(v))).collect();
            publish_into(&o, &POSTINGS, changes, v);
            assert!(o.layers().postings.runs.len() <= MAX_RUNS);
        }
        done.store(true, Ordering::SeqCst);
    });
    o.layers_mut().postings.prune(1);
    o.merge_pending();
    let l = o.layers();
    let layer = &l.postings;
    assert!(
        layer.runs.len() <= 8,
        "{} runs after merging",
        layer.runs.len()
    );
    assert_every_entry_once(layer, 119 * n as usize, 10_000);
}

/// A withdrawal or prune that lands between the merger's merge and its swap wins:
/// the merge is dropped, so no withdrawn or pruned entry comes back.
#[test]
fn a_merge_raced_by_a_withdrawal_or_prune_is_dropped() {
    let o = Overlay::default();
    o.set_background(1);
    for v in 1..=4u64 {
        let changes: Changes<StrKey, u64> = [((Text::from("k"), v), Some(v))].into_iter().collect();
        publish_into(&o, &POSTINGS, changes, v);
    }
    assert_eq!(o.layers().postings.runs.len(), 4);
    // All four runs merge; version 4 is withdrawn meanwhile.
    assert!(!merge_once(&o, &POSTINGS, || o
        .layers_mut()
        .postings
        .unpublish(4)));
    assert_eq!(o.layers().postings.len(), 3);
    // Unraced, the three left merge into one.
    assert!(merge_once(&o, &POSTINGS, || ()));
    assert_eq!(o.layers().postings.runs.len(), 1);
    assert_eq!(o.layers().postings.len(), 3);
    // Two entries: large enough to merge with the three before them; version 1 is
    // pruned meanwhile.
    let changes: Changes<StrKey, u64> = [
        ((Text::from("k"), 5), Some(5)),
        ((Text::from("k"), 6), Some(5)),
    ]
    .into_iter()
    .collect();
    publish_into(&o, &POSTINGS, changes, 5);
    let mut raced = false;
    assert!(!merge_once(&o, &POSTINGS, || {
        raced = true;
        o.layers_mut().postings.prune(1);
    }));
    assert!(raced);
    let l = o.layers();
    assert_eq!(l.postings.len(), 4);
    let mut vers = Vec::new();
    l.postings
        .for_each_latest(0, &mut |k, _| {
            vers.push(k.1);
            Ok(())
        })
        .expect("walk");
    assert_eq!(vers, vec![2, 3, 5, 6]);
}

/// One step of the layer model test.
#[derive(Debug, Clone)]
enum LayerOp {
    /// Publish a transaction's changes (keys 0..40) under the next version.
    Publish(BTreeMap<u8, Option<u64>>),
    /// Withdraw the newest version (a failed commit).
    Unpublish,
    /// Drop every entry at or below this fraction (0..=4 quarters) of the versions.
    Prune(u8),
    /// Read keys in `[lo, hi)` as of `(floor, at)` (quarters of the versions), at most
    /// `max` entries per chunk.
    Read(u8, u8, u8, u8, usize),
    /// What the merger thread does when woken.
    Merge,
}

fn layer_op() -> impl Strategy<Value = LayerOp> {
    prop_oneof![
        6 => prop::collection::btree_map(
            0u8..40,
            prop_oneof![3 => (0u64..9).prop_map(Some), 1 => Just(None)],
            0..25,
        )
        .prop_map(LayerOp::Publish),
        1 => Just(LayerOp::Unpublish),
        1 => (0u8..5).prop_map(LayerOp::Prune),
        3 => (0u8..41, 0u8..41, 0u8..5, 0u8..5, 1usize..6)
            .prop_map(|(a, b, f, t, m)| LayerOp::Read(a, b, f, t, m)),
        2 => Just(LayerOp::Merge),
    ]
}

/// Two readers of a transaction's changes at once (a join's nested streams) share
/// the sorted list; a change made after them is sorted in by the next reader.
#[test]
fn changes_are_read_by_nested_streams_and_sorted_after_new_changes() {
    let mut c: Changes<u64, u64> = [(3, Some(1)), (1, Some(1)), (3, None)]
        .into_iter()
        .collect();
    {
        let a = c.sorted();
        let b = c.sorted();
        assert_eq!(&*a, &[(1, Some(1)), (3, None)][..]);
        assert_eq!(&*a, &*b);
    }
    c.insert(2, Some(7));
    c.insert(1, None);
    assert_eq!(c.len(), 4);
    assert_eq!(&*c.sorted(), &[(1, None), (2, Some(7)), (3, None)][..]);
    assert_eq!(c.len(), 3);
    assert_eq!(c.into_sorted(), vec![(1, None), (2, Some(7)), (3, None)]);
}

proptest! {
    /// Changes read back at any point equal a map with the last change per key.
    #[test]
    fn changes_keep_the_last_change_per_key(
        ops in prop::collection::vec((0u8..40, prop::option::of(0u64..5), any::<bool>()), 0..200),
    ) {
        let mut c: Changes<u8, u64> = Changes::default();
        let mut model: BTreeMap<u8, Option<u64>> = BTreeMap::new();
        for (k, v, read) in ops {
            c.insert(k, v);
            model.insert(k, v);
            prop_assert!(c.len() >= model.len());
            if read {
                let got: Vec<(u8, Option<u64>)> = c.sorted().to_vec();
                let want: Vec<(u8, Option<u64>)> = model.iter().map(|(k, v)| (*k, *v)).collect();
                prop_assert_eq!(got, want);
                prop_assert_eq!(c.len(), model.len());
            }
        }
        let want: Vec<(u8, Option<u64>)> = model.into_iter().collect();
        prop_assert_eq!(c.take_sorted(), want);
        prop_assert!(c.is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        rng_seed: proptest::test_runner::RngSeed::Fixed(9),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    /// The run layer (publishing with merges, withdrawing, pruning, chunked reads at
    /// any `(floor, at)`, the fold's walk) agrees with a plain map of
    /// `(key, version) -> value`, and keeps its runs in version order; also when
    /// publishes only append and the merger's work comes in between.
    #[test]
    fn run_layer_matches_a_versioned_map(
        background in prop_oneof![Just(0usize), 1usize..4],
        ops in prop::collection::vec(layer_op(), 1..60),
    ) {
        let key = |k: u8| (Text::from(format!("k{k:02}")), u64::from(k % 3));
        let o = Overlay::default();
        o.set_background(background);
        let mut model: BTreeMap<(StrKey, u64), Option<u64>> = BTreeMap::new();
        let mut ver = 0u64;
        for op in ops {
            match op {
                LayerOp::Publish(c) => {
                    ver += 1;
                    let changes: Changes<StrKey, u64> =
                        c.iter().map(|(k, v)| (key(*k), *v)).collect();
                    for (k, v) in changes.sorted().iter() {
                        model.insert((k.clone(), ver), *v);
                    }
                    publish_into(&o, &POSTINGS, changes, ver);
                }
                LayerOp::Unpublish => {
                    o.layers_mut().postings.unpublish(ver);
                    model.retain(|(_, v), _| *v != ver);
                    ver = ver.saturating_sub(1);
                }
                LayerOp::Prune(q) => {
                    let upto = ver * u64::from(q) / 4;
                    o.layers_mut().postings.prune(upto);
                    model.retain(|(_, v), _| *v > upto);
                }
                LayerOp::Read(a, b, f, t, max) => {
                    let floor = ver * u64::from(f) / 4;
                    let at = ver * u64::from(t) / 4;
                    let lo = Bound::Included(key(a.min(b)));
                    let hi = Bound::Excluded(key(a.max(b)));
                    let mut want = Vec::new();
                    let mut last: Option<(&StrKey, Option<u64>)> = None;
                    for ((k, v), val) in &model {
                        if std::ops::RangeBounds::contains(&(lo.clone(), hi.clone()), k) && *v > floor && *v <= at {
                            match &mut last {
                                Some((lk, lv)) if *lk == k => *lv = *val,
                                _ => {
                                    want.extend(last.take().map(|(k, v)| (k.clone(), v)));
                                    last = Some((k, *val));
                                }
                            }
                        }
                    }
                    want.extend(last.take().map(|(k, v)| (k.clone(), v)));
                    let mut got = Vec::new();
                    let mut from = lo;
                    loop {
                        let mut out = VecDeque::new();
                        let l = o.layers();
                        let resume = l.postings.chunk(&from, &hi, floor, at, max, &mut out);
                        prop_assert!(out.len() <= max);
                        got.extend(out);
                        match resume {
                            Some(k) => from = Bound::Excluded(k),
                            None => break,
                        }
                    }
                    prop_assert_eq!(got, want);
                }
                LayerOp::Merge => o.merge_pending(),
            }
            let l = o.layers();
            let layer = &l.postings;
            prop_assert_eq!(layer.len(), model.len());
            for w in layer.runs.windows(2) {
                prop_assert!(w[0].max_ver < w[1].min_ver);
            }
            prop_assert!(layer.runs.len() <= MAX_RUNS);
            for r in &layer.runs {
                prop_assert!(r.entries.windows(2).all(|e| (&e[0].0, e[0].1) < (&e[1].0, e[1].1)));
            }
            let mut walked = Vec::new();
            layer.for_each_latest(0, &mut |k, v| {
                walked.push((k.clone(), *v));
                Ok(())
            }).expect("walk");
            let mut newest: BTreeMap<StrKey, Option<u64>> = BTreeMap::new();
            for ((k, _), v) in &model {
                newest.insert(k.clone(), *v);
            }
            prop_assert_eq!(walked, newest.into_iter().collect::<Vec<_>>());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        rng_seed: proptest::test_runner::RngSeed::Fixed(5),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    /// A fold through cursor runs and plain inserts leaves the table with exactly
    /// the entries a map model says: long runs into one gap, runs cut short by an
    /// existing key, replaced values, removals of present and absent keys.
    #[test]
    fn sorted_writes_leave_exactly_the_modelled_entries(
        existing in prop::collection::btree_map((0u8..3, 0u64..200), 0u64..9, 0..150),
        changes in prop::collection::btree_map(
            (0u8..3, 0u64..200),
            prop_oneof![3 => (0u64..9).prop_map(Some), 1 => Just(None)],
            0..300,
        ),
    ) {
        let term = |t: u8| ["ka", "kalo", "mi"][usize::from(t)];
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .expect("db");
        let txn = db.begin_write().expect("txn");
        let mut model = BTreeMap::new();
        {
            let mut t = txn.open_table(SORTED).expect("table");
            for ((k, id), v) in &existing {
                t.insert((term(*k), *id), *v).expect("insert");
                model.insert((term(*k).to_string(), *id), *v);
            }
            let keys: Vec<(StrKey, Option<u64>)> = changes
                .iter()
                .map(|((k, id), v)| ((Text::from(term(*k)), *id), *v))
                .collect();
            let items: Vec<Entry<'_, StrKey, u64>> = keys.iter().map(|(k, v)| (k, v)).collect();
            t.apply_sorted(&items).expect("write");
            for ((k, id), v) in &changes {
                match v {
                    Some(v) => model.insert((term(*k).to_string(), *id), *v),
                    None => model.remove(&(term(*k).to_string(), *id)),
                };
            }
            let got: BTreeMap<(String, u64), u64> = t
                .iter()
                .expect("iter")
                .map(|e| {
                    let (k, v) = e.expect("entry");
                    let (text, id) = k.value();
                    ((text.to_string(), id), v.value())
                })
                .collect();
            prop_assert_eq!(got, model);
        }
        txn.commit().expect("commit");
    }
}

#[test]
fn streams_resume_across_chunks_and_the_writers_changes_win() {
    let o = Overlay::default();
    let mut c = IndexChanges::default();
    for id in 0..(3 * CHUNK as u64 + 7) {
        c.postings.insert(("t".into(), id), Some(id));
    }
    commit(&o, c, None);
    let mut own = IndexChanges::default();
    own.postings.insert(("t".into(), 5), None);
    own.postings.insert(("t".into(), 10_000), Some(1));
    own.postings.insert(("s".into(), 1), Some(1));
    let view = View {
        overlay: &o,
        floor: 0,
        at: u64::MAX,
        private: Some(&own),
    };
    let got: Vec<_> = view
        .stream(&POSTINGS, || {
            (
                Bound::Included((Text::from("t"), 0)),
                Bound::Included((Text::from("t"), u64::MAX)),
            )
        })
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(got.len(), 3 * CHUNK + 7 + 1);
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(got[5], (("t".into(), 5), None));
    assert_eq!(got.last(), Some(&(("t".into(), 10_000), Some(1))));
    // An empty or inverted range yields nothing (and does not panic).
    let none: Vec<_> = view
        .stream(&POSTINGS, || {
            (
                Bound::Excluded((Text::from("t"), 3)),
                Bound::Excluded((Text::from("t"), 3)),
            )
        })
        .into_iter()
        .flatten()
        .collect();
    assert!(none.is_empty());
    // An index without overlay entries is not looked at.
    assert!(view.stream(&POS, || unreachable!()).is_none());
}

#[test]
fn merge_replaces_and_hides_base_entries() {
    let base: Vec<Result<u64, String>> = vec![Ok(1u64), Ok(2), Ok(4), Ok(6)];
    let over = vec![(2u64, None), (3, Some(30u64)), (4, Some(40)), (7, Some(70))];
    let mut seen = Vec::new();
    merge(
        base.into_iter(),
        Some(over.into_iter()),
        |b, k| b.cmp(k),
        |item| {
            seen.push(match item {
                Item::Base(b) => (*b, 0),
                Item::Over(k, v) => (*k, *v),
            });
            Ok(true)
        },
    )
    .expect("merge");
    assert_eq!(seen, vec![(1, 0), (3, 30), (4, 40), (6, 0), (7, 70)]);
}
