//! The kit's checks of the KIP 2.0 element records (`crate::elements`): write-once
//! payloads, versions, spaces, references and numbering, on every backend.

use super::{connect, create, read, write, Harness};
use crate::{ElementId, ElementKind, GraphRead, SpaceId, StoreError};
use serde_json::{json, Map, Value};

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn numbers_of(
    g: &dyn GraphRead,
    space: SpaceId,
    kind: ElementKind,
) -> Result<Vec<u64>, StoreError> {
    let mut out = Vec::new();
    g.scan_elements(space, kind, &mut |n| {
        out.push(n);
        Ok(true)
    })?;
    Ok(out)
}

/// KIP 2.0 element records (assertions, evidence, activities): a payload is written
/// once (a second create of the id is refused, a state change keeps it and counts a
/// version), an aborted write leaves nothing, a committed one survives reopening, and
/// a space sees only its own.
pub fn element_records_are_written_once_and_kept(h: &dyn Harness) {
    let b = h.fresh();
    let sp = SpaceId::DEFAULT;
    let aborted = b.write(
        |w| {
            let n = w.alloc_element_number(ElementKind::Evidence)?;
            let id = ElementId::new(ElementKind::Evidence, n);
            w.create_element(sp, id, obj(json!({"content": "lost"})), Map::new(), &[])?;
            Err::<(), _>(StoreError::Other("the statement fails".into()))
        },
        false,
    );
    assert!(aborted.is_err());
    assert_eq!(
        read(&*b, |g| numbers_of(g, sp, ElementKind::Evidence)),
        Vec::<u64>::new(),
        "an aborted element is gone"
    );
    let a = write(&*b, |w| {
        let n = w.alloc_element_number(ElementKind::Assertion)?;
        let id = ElementId::new(ElementKind::Assertion, n);
        let rec = w.create_element(
            sp,
            id,
            obj(json!({"stance": "support", "confidence": 0.9})),
            obj(json!({"status": "active"})),
            &[],
        )?;
        assert_eq!(rec.version, 1);
        assert_eq!(w.element(sp, id)?, Some(rec), "seen in its transaction");
        let again = w.create_element(sp, id, obj(json!({"stance": "oppose"})), Map::new(), &[]);
        assert!(
            matches!(again, Err(StoreError::Constraint(_))),
            "a payload is written once: {again:?}"
        );
        Ok(id)
    });
    let rec = write(&*b, |w| {
        w.set_element_state(sp, a, obj(json!({"status": "retracted"})))
    })
    .expect("the element exists");
    assert_eq!(rec.version, 2);
    assert_eq!(rec.payload["stance"], "support", "the payload is kept");
    let none = write(&*b, |w| {
        w.set_element_state(
            sp,
            ElementId::new(ElementKind::Assertion, 999_999),
            Map::new(),
        )
    });
    assert_eq!(none, None);
    let b = h.reopen(b);
    read(&*b, |g| {
        let kept = g.element(sp, a)?.expect("the assertion survives reopening");
        assert_eq!(kept.state["status"], "retracted");
        assert_eq!(kept.payload["confidence"], 0.9);
        assert_eq!(kept.version, 2);
        assert_eq!(numbers_of(g, sp, ElementKind::Assertion)?, vec![a.n]);
        assert_eq!(numbers_of(g, sp, ElementKind::Activity)?, Vec::<u64>::new());
        assert_eq!(
            g.element(SpaceId(2), a)?,
            None,
            "another space does not see it"
        );
        assert_eq!(
            numbers_of(g, SpaceId(2), ElementKind::Assertion)?,
            Vec::<u64>::new()
        );
        Ok(())
    });
    // A concept's record extends its graph row: refused without the row, kept with it.
    let refused = b.write(
        |w| {
            w.create_element(
                sp,
                ElementId::new(ElementKind::Concept, 999),
                Map::new(),
                Map::new(),
                &[],
            )
        },
        false,
    );
    assert!(refused.is_err(), "no concept C:999, so no record for it");
    let c = create(&*b, "Thing", "with a record", json!({}));
    let cid = ElementId::new(ElementKind::Concept, c);
    write(&*b, |w| {
        w.create_element(sp, cid, obj(json!({"key": "k"})), Map::new(), &[])?;
        Ok(())
    });
    read(&*b, |g| {
        let rec = g.element(sp, cid)?.expect("the concept's record");
        assert_eq!(rec.payload.get("key"), Some(&json!("k")));
        assert_eq!(rec.version, 1);
        assert!(g.concept(c)?.is_some(), "the row is untouched");
        Ok(())
    });
}

/// Structural references are indexed target first (the assertions of a proposition
/// are one scan), assertions are numbered from the proposition counter (so `A:n` may
/// be `P:n`'s founding assertion), evidence has its own counter, and no number comes
/// back after reopening.
pub fn element_references_and_numbers_hold(h: &dyn Harness) {
    let b = h.fresh();
    let sp = SpaceId::DEFAULT;
    let x = create(&*b, "Thing", "x", json!({}));
    let y = create(&*b, "Thing", "y", json!({}));
    let p = connect(&*b, x, "knows", y);
    let prop = ElementId::new(ElementKind::Proposition, p);
    let (e, a1, a2) = write(&*b, |w| {
        let e = ElementId::new(
            ElementKind::Evidence,
            w.alloc_element_number(ElementKind::Evidence)?,
        );
        w.create_element(sp, e, obj(json!({"content": "seen"})), Map::new(), &[])?;
        let a1 = ElementId::new(
            ElementKind::Assertion,
            w.alloc_element_number(ElementKind::Assertion)?,
        );
        w.create_element(
            sp,
            a1,
            obj(json!({"stance": "support"})),
            Map::new(),
            &[("proposition".into(), prop), ("evidence".into(), e)],
        )?;
        let a2 = ElementId::new(
            ElementKind::Assertion,
            w.alloc_element_number(ElementKind::Assertion)?,
        );
        w.create_element(
            sp,
            a2,
            obj(json!({"stance": "oppose"})),
            Map::new(),
            &[("proposition".into(), prop)],
        )?;
        let mut seen = Vec::new();
        w.scan_referrers(sp, prop, &mut |role, source| {
            seen.push((role.to_owned(), source));
            Ok(true)
        })?;
        assert_eq!(seen.len(), 2, "the transaction sees its own references");
        Ok((e, a1, a2))
    });
    assert!(
        a1.n > p,
        "assertions follow the proposition counter ({} after P:{p})",
        a1.n
    );
    assert_eq!(a2.n, a1.n + 1);
    let b = h.reopen(b);
    read(&*b, |g| {
        let mut of_p = Vec::new();
        g.scan_referrers(sp, prop, &mut |role, source| {
            of_p.push((role.to_owned(), source));
            Ok(true)
        })?;
        assert_eq!(
            of_p,
            vec![
                ("proposition".to_owned(), a1),
                ("proposition".to_owned(), a2)
            ]
        );
        let mut of_e = Vec::new();
        g.scan_referrers(sp, e, &mut |role, source| {
            of_e.push((role.to_owned(), source));
            Ok(true)
        })?;
        assert_eq!(of_e, vec![("evidence".to_owned(), a1)]);
        let mut none = 0;
        g.scan_referrers(SpaceId(2), prop, &mut |_, _| {
            none += 1;
            Ok(true)
        })?;
        assert_eq!(none, 0, "references stay in their space");
        Ok(())
    });
    let next = connect(&*b, y, "knows", x);
    assert!(
        next > a2.n,
        "a link after the assertions gets a later number ({next} after {})",
        a2.n
    );
    let e2 = write(&*b, |w| w.alloc_element_number(ElementKind::Evidence));
    assert!(
        e2 > e.n,
        "evidence numbers are not reused ({e2} after {})",
        e.n
    );
}
