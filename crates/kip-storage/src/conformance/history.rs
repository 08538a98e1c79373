//! The kit's check of history (`crate::history`, `crate::asof`): seqs per committed
//! change, nothing for an aborted or empty write, the version chain of rows and
//! records, reads `AS OF` a seq, purges of the chain, and all of it after reopening.

use super::{concept, link, read, write, Harness};
use crate::asof::AsOf;
use crate::history::{self, PART_ROW};
use crate::{ElemRef, ElementId, ElementKind, ElementRead, GraphRead, SpaceId, StoreError};
use serde_json::{json, Map, Value};

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn at<T>(
    g: &dyn GraphRead,
    seq: u64,
    f: impl FnOnce(&AsOf<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let v = AsOf::new(g, SpaceId::DEFAULT, seq)?
        .ok_or_else(|| StoreError::Other(format!("no commit {seq}")))?;
    f(&v)
}

/// History: once started, every write that changes something commits with the next
/// seq (one per transaction, none for an aborted or empty one), keeps what it replaced,
/// and a read `AS OF` a seq sees rows, links, indexes and element records as they were
/// then; a purge removes an element's past states; all of it survives reopening.
pub fn history_keeps_the_past_and_reads_it_as_of(h: &dyn Harness) {
    let b = h.fresh();
    let sp = SpaceId::DEFAULT;
    let before = super::create(&*b, "Thing", "before", json!({}));
    assert!(
        read(&*b, |g| history::last(g, sp)).is_none(),
        "no history before start"
    );
    write(&*b, |w| history::start(w).map(|_| ()));
    let (x, l) = write(&*b, |w| {
        let x = w.alloc_concept_id()?;
        w.put_concept(
            x,
            &concept("Person", "Alpha", json!({"mood": "calm"})),
            None,
        )?;
        let l = w.alloc_prop_id()?;
        w.put_prop(l, &link(x, "likes", before), None)?;
        Ok((x, l))
    });
    write(&*b, |w| {
        let old = w.concept(x)?;
        w.put_concept(
            x,
            &concept("Person", "Beta", json!({"mood": "busy"})),
            old.as_ref(),
        )
    });
    write(&*b, |w| {
        let old = w.prop(l)?.ok_or_else(|| StoreError::Other("link".into()))?;
        w.delete_prop(l, &old)
    });
    let aborted = b.write(
        |w| {
            let old = w.concept(x)?;
            w.put_concept(x, &concept("Person", "Gamma", json!({})), old.as_ref())?;
            Err::<(), _>(StoreError::Other("the statement fails".into()))
        },
        false,
    );
    assert!(aborted.is_err());
    write(&*b, |_| Ok(()));
    let e = write(&*b, |w| {
        let n = w.alloc_element_number(ElementKind::Evidence)?;
        let id = ElementId::new(ElementKind::Evidence, n);
        w.create_element(
            sp,
            id,
            obj(json!({"content": "c"})),
            obj(json!({"v": 1})),
            &[],
        )?;
        Ok(id)
    });
    write(&*b, |w| {
        w.set_element_state(sp, e, obj(json!({"v": 2}))).map(|_| ())
    });
    let check = |b: &(dyn crate::backend::Backend + 'static)| {
        read(b, |g| {
            let last = history::last(g, sp)?.map(|c| c.seq);
            assert_eq!(
                last,
                Some(5),
                "seqs 1-5: an aborted or empty write takes none"
            );
            let name_at = |seq| at(g, seq, |v| Ok(v.concept(x)?.map(|c| c.name)));
            assert_eq!(name_at(0)?, None, "created after seq 0");
            assert_eq!(name_at(1)?.as_deref(), Some("Alpha"));
            assert_eq!(name_at(2)?.as_deref(), Some("Beta"));
            assert_eq!(g.concept(x)?.map(|c| c.name).as_deref(), Some("Beta"));
            at(g, 1, |v| {
                assert_eq!(v.concept_by_key("Person", "Alpha")?, Some(x));
                assert_eq!(v.concept_by_key("Person", "Beta")?, None);
                assert_eq!(super::ids_of_type(v, "Person")?, vec![x]);
                assert_eq!(super::ids_of_type(v, "Thing")?, vec![before]);
                assert_eq!(
                    v.prop_by_spo(ElemRef::Concept(x), "likes", ElemRef::Concept(before))?,
                    Some(l)
                );
                assert_eq!(super::out_links(v, x)?.len(), 1);
                Ok(())
            })?;
            at(g, 0, |v| {
                assert_eq!(super::ids_of_type(v, "Person")?, Vec::<u64>::new());
                assert_eq!(
                    super::ids_of_type(v, "Thing")?,
                    vec![before],
                    "history starts with what exists"
                );
                Ok(())
            })?;
            at(g, 3, |v| {
                assert_eq!(super::out_links(v, x)?, vec![], "deleted at seq 3");
                assert_eq!(v.prop(l)?, None);
                Ok(())
            })?;
            at(g, 2, |v| {
                assert!(v.prop(l)?.is_some(), "deleted later");
                Ok(())
            })?;
            let state_at = |seq| at(g, seq, |v| Ok(v.element(sp, e)?.map(|r| r.state)));
            assert_eq!(state_at(3)?, None, "created at seq 4");
            assert_eq!(state_at(4)?, Some(obj(json!({"v": 1}))));
            assert_eq!(state_at(5)?, Some(obj(json!({"v": 2}))));
            let mut changed = Vec::new();
            g.scan_changes(sp, 1, &mut |seq, key| {
                changed.push((seq, key));
                Ok(true)
            })?;
            assert_eq!(
                changed,
                vec![
                    (2, ElemRef::Concept(x).encode()),
                    (3, ElemRef::Prop(l).encode()),
                    (5, e.encode())
                ],
                "changes list what changed or ended, creations none"
            );
            Ok(())
        })
    };
    check(&*b);
    // Inside a write, a read AS OF an earlier seq sees the write's own change as a
    // change (its commit lists it only when it commits).
    let inside = b.write(
        |w| {
            let old = w.concept(x)?;
            w.put_concept(x, &concept("Person", "Delta", json!({})), old.as_ref())?;
            let then = at(w, 5, |v| Ok(v.concept(x)?.map(|c| c.name)))?;
            assert_eq!(
                then.as_deref(),
                Some("Beta"),
                "as of seq 5, inside the write"
            );
            assert_eq!(w.concept(x)?.map(|c| c.name).as_deref(), Some("Delta"));
            Err::<(), _>(StoreError::Other("rolled back".into()))
        },
        false,
    );
    assert!(inside.is_err());
    check(&*b);
    let b = h.reopen(b);
    check(&*b);
    // A horizon at seq 3: commits below go at once, changes at or below it with their
    // versions; reads at 3 and later are as before.
    let cut = write(&*b, |w| w.prune_history(sp, 3, 1));
    assert_eq!(cut, 1, "at most `max` changes a call");
    let cut = write(&*b, |w| w.prune_history(sp, 3, 100));
    assert_eq!(cut, 1, "the rest of the changes at or below the horizon");
    read(&*b, |g| {
        assert!(
            AsOf::new(g, sp, 2)?.is_none(),
            "below the horizon: no coordinate"
        );
        assert_eq!(history::oldest(g, sp)?.map(|c| c.seq), Some(3));
        let name = at(g, 3, |v| Ok(v.concept(x)?.map(|c| c.name)))?;
        assert_eq!(name.as_deref(), Some("Beta"));
        assert_eq!(
            at(g, 4, |v| Ok(v.element(sp, e)?.map(|r| r.state)))?,
            Some(obj(json!({"v": 1})))
        );
        Ok(())
    });
    write(&*b, |w| history::purge(w, sp, ElemRef::Concept(x).encode()));
    read(&*b, |g| {
        assert_eq!(
            g.version_after(sp, ElemRef::Concept(x).encode(), PART_ROW, 0)?,
            None,
            "purged"
        );
        assert_eq!(
            history::last(g, sp)?.map(|c| c.seq),
            Some(5),
            "a purge of the chain alone is no commit"
        );
        Ok(())
    });
}

/// History of a busy element: many changes of one concept, link and element record
/// (stored as reverse deltas with a whole state now and then), several changes of one
/// element inside one write, and a deletion at the end; a read `AS OF` every seq sees
/// exactly the state of then, before and after reopening, and `past_states` lists
/// them all.
pub fn history_reads_every_past_state_of_a_busy_element(h: &dyn Harness) {
    let b = h.fresh();
    let sp = SpaceId::DEFAULT;
    let other = super::create(&*b, "Thing", "other", json!({}));
    write(&*b, |w| history::start(w).map(|_| ()));
    let long = "a description long enough that a whole copy costs more than a delta";
    let state = |i: u64| json!({"description": long, "rank": i, "note": format!("n{}", i % 3)});
    let (x, l, e) = write(&*b, |w| {
        let x = w.alloc_concept_id()?;
        w.put_concept(x, &concept("Doc", "busy", state(0)), None)?;
        let l = w.alloc_prop_id()?;
        let mut rec = link(x, "cites", other);
        rec.attributes = obj(state(0));
        w.put_prop(l, &rec, None)?;
        let n = w.alloc_element_number(ElementKind::Evidence)?;
        let e = ElementId::new(ElementKind::Evidence, n);
        w.create_element(sp, e, obj(json!({"content": long})), obj(state(0)), &[])?;
        Ok((x, l, e))
    });
    // Seqs 2..=41: one change of each a commit; seq 42: three changes in one write.
    for i in 1..=40u64 {
        write(&*b, |w| {
            let old = w.concept(x)?;
            w.put_concept(x, &concept("Doc", "busy", state(i)), old.as_ref())?;
            let old = w.prop(l)?.ok_or_else(|| StoreError::Other("link".into()))?;
            let mut rec = old.clone();
            rec.attributes = obj(state(i));
            w.put_prop(l, &rec, Some(&old))?;
            w.set_element_state(sp, e, obj(state(i))).map(|_| ())
        });
    }
    write(&*b, |w| {
        for i in [100, 101, 102] {
            let old = w.concept(x)?;
            w.put_concept(x, &concept("Doc", "busy", state(i)), old.as_ref())?;
            w.set_element_state(sp, e, obj(state(i)))?;
        }
        Ok(())
    });
    // Seq 43: the link is deleted.
    write(&*b, |w| {
        let old = w.prop(l)?.ok_or_else(|| StoreError::Other("link".into()))?;
        w.delete_prop(l, &old)
    });
    let expected = |seq: u64| -> u64 {
        match seq {
            1 => 0,
            2..=41 => seq - 1,
            _ => 102,
        }
    };
    let check = |b: &(dyn crate::backend::Backend + 'static)| {
        read(b, |g| {
            assert_eq!(history::last(g, sp)?.map(|c| c.seq), Some(43));
            for seq in 1..=43u64 {
                let want = obj(state(expected(seq)));
                at(g, seq, |v| {
                    let c = v.concept(x)?.map(|c| c.attributes);
                    assert_eq!(c.as_ref(), Some(&want), "the concept as of seq {seq}");
                    let r = v.element(sp, e)?.map(|r| r.state);
                    assert_eq!(r.as_ref(), Some(&want), "the record as of seq {seq}");
                    let p = v.prop(l)?.map(|p| p.attributes);
                    if seq < 43 {
                        let want = obj(state(expected(seq).min(40)));
                        assert_eq!(p.as_ref(), Some(&want), "the link as of seq {seq}");
                    } else {
                        assert_eq!(p, None, "the link is deleted at seq 43");
                    }
                    Ok(())
                })?;
            }
            let past = history::past_states(g, sp, ElemRef::Concept(x).encode(), PART_ROW)?;
            assert_eq!(past.len(), 41, "one kept state per changing commit");
            for (i, (valid_to, bytes)) in past.iter().enumerate() {
                let c: crate::ConceptRecord = crate::decode(bytes)?;
                assert_eq!(*valid_to, i as u64 + 2);
                assert_eq!(c.attributes, obj(state(i as u64)));
            }
            Ok(())
        })
    };
    check(&*b);
    let b = h.reopen(b);
    check(&*b);
}
