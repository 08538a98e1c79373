//! Scans over the embedded store's indexes that the trait gives defaults for.

use kip_storage::{ConceptRecord, GraphRead, GraphWrite};
use kip_store::db::Store;
use serde_json::Map;

fn concept(ty: &str, name: &str) -> ConceptRecord {
    ConceptRecord {
        concept_type: ty.into(),
        name: name.into(),
        attributes: Map::new(),
        metadata: Map::new(),
    }
}

#[test]
fn many_names_scan_as_one_name_at_a_time_in_the_order_given() {
    let store = Store::in_memory(&mut |_| Ok(())).expect("open");
    let ids = store
        .write(
            |w| {
                let mut ids = Vec::new();
                for (ty, name) in [
                    ("Person", "Ada"),
                    ("Project", "Ada"),
                    ("Person", "Bob"),
                    ("Person", "Cy"),
                ] {
                    let id = w.alloc_concept_id()?;
                    w.put_concept(id, &concept(ty, name), None)?;
                    ids.push(id);
                }
                Ok(ids)
            },
            false,
        )
        .expect("write");
    let seen = store
        .read(|r| {
            let mut seen = Vec::new();
            r.scan_names(&["Cy", "nobody", "Ada"], &mut |name, n| {
                seen.push((name.to_string(), n));
                Ok(true)
            })?;
            Ok(seen)
        })
        .expect("read");
    assert_eq!(
        seen,
        vec![
            ("Cy".to_string(), ids[3]),
            ("Ada".to_string(), ids[0]),
            ("Ada".to_string(), ids[1]),
        ]
    );
    // `false` stops the whole scan, not just the current name.
    let first = store
        .read(|r| {
            let mut k = 0;
            r.scan_names(&["Ada", "Bob"], &mut |_, _| {
                k += 1;
                Ok(false)
            })?;
            Ok(k)
        })
        .expect("read");
    assert_eq!(first, 1);
}
