//! A data directory written by an earlier release, opened by this one: storage format 1
//! with text index version 4 (`text_docs`, `text_postings2`), written by commit a43b4db
//! (2026-11-22) and committed under `crates/kip-store/tests/fixtures/format1-textindex4`
//! (how: the README there). The open migrates it in place; every fact stays, SEARCH
//! works on the rebuilt index, every element gets `_version` 1 (RC11), and the
//! integrity check is clean.

mod common;

use common::ok;
use kip_open::Open;

use kip_engine::Nexus;
use serde_json::json;
use std::path::PathBuf;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../kip-store/tests/fixtures/format1-textindex4")
}

/// A copy of the fixture (the open migrates in place).
fn copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(fixture()).expect("fixture") {
        let entry = entry.expect("entry");
        if entry.file_name().to_string_lossy().starts_with("nexus.") {
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy");
        }
    }
    dir
}

fn meta_u64(n: &Nexus, key: &str) -> Option<u64> {
    n.read(|r| Ok(r.meta(key)?))
        .expect("meta")
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map(u64::from_le_bytes)
}

fn names(v: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            r["name"]
                .as_str()
                .or(r.as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    out.sort();
    out
}

/// What the open-time migration reported to the progress hook.
static PROGRESS: std::sync::Mutex<Vec<(String, u64, u64)>> = std::sync::Mutex::new(Vec::new());

#[test]
fn a_data_directory_of_an_earlier_release_opens_migrated_and_whole() {
    kip_engine::progress::set_open_progress(Box::new(|what, done, total| {
        PROGRESS
            .lock()
            .expect("progress")
            .push((what.to_string(), done, total));
    }));
    let dir = copy();
    {
        let n = Nexus::open(dir.path()).expect("the old directory opens");
        assert_eq!(
            meta_u64(&n, "format_version"),
            Some(kip_open::embedded::FORMAT_VERSION)
        );
        assert_eq!(
            meta_u64(&n, "text_index_version"),
            Some(kip_engine::store::text::TEXT_INDEX_VERSION)
        );
        // The facts.
        assert_eq!(
            ok(
                &n,
                r#"FIND(?d.name, ?d.attributes.risk_level, ?d.attributes.aliases) WHERE { ?d {type: "Drug"} }"#
            ),
            json!([["Aspirin"], [2], [["ASA", "acetylsalicylic acid"]]]),
            "the deleted drug stays deleted"
        );
        assert_eq!(
            names(&ok(
                &n,
                r#"FIND(?s.name) WHERE { ({type: "Drug", name: "Aspirin"}, "treats", ?s) }"#
            )),
            vec!["Fever", "Headache"]
        );
        // The statement about a statement, with its attribute.
        assert_eq!(
            ok(
                &n,
                r#"FIND(?c.attributes.confidence) WHERE { ?c ({type: "Person", name: "Ada"}, "stated", ?f) }"#
            ),
            json!([0.9])
        );
        // SEARCH over the rebuilt text index: words, CJK, and nothing of the deleted.
        for (query, expected) in [
            ("throbbing", "Headache"),
            ("发烧", "Fever"),
            ("analytical", "Ada"),
        ] {
            let found = ok(&n, &format!("SEARCH CONCEPT {query:?}"));
            assert!(found.to_string().contains(expected), "{query}: {found}");
        }
        // The migration told the progress hook, ending with done == total.
        let reports = PROGRESS.lock().expect("progress").clone();
        let last = reports.last().expect("a progress report");
        assert!(
            last.0.contains("_version") && last.1 == last.2 && last.2 > 0,
            "{reports:?}"
        );
        // RC11: every element written before versions existed has `_version` 1 now,
        // links included, and its next change makes it 2.
        assert_eq!(
            ok(
                &n,
                r#"FIND(COUNT(?x)) WHERE { ?x {type: "Drug"} FILTER(?x.metadata._version == 1) }"#
            ),
            json!(1)
        );
        assert_eq!(
            ok(
                &n,
                r#"FIND(?l.metadata._version) WHERE { ?l ({type: "Drug", name: "Aspirin"}, "treats", ?s) }"#
            ),
            json!([1])
        );
        assert_eq!(
            ok(
                &n,
                r#"FIND(COUNT(?x)) WHERE { ?x {type: "$ConceptType"} FILTER(IS_NULL(?x.metadata._version)) }"#
            ),
            json!(0)
        );
        ok(
            &n,
            r#"UPSERT { CONCEPT ?d { {type: "Drug", name: "Aspirin"} EXPECT VERSION 1 SET ATTRIBUTES { risk_level: 3 } } }"#,
        );
        assert_eq!(
            ok(
                &n,
                r#"FIND(?d.metadata._version) WHERE { ?d {type: "Drug", name: "Aspirin"} }"#
            ),
            json!([2])
        );
        // RC11 bootstrap: what the older store lacked is added (the System domain, the
        // new types and predicates), and nothing it had is changed: every type
        // definition is still at _version 1, and Genesis keeps its older text.
        for (t, name) in [
            ("Domain", "System"),
            ("$ConceptType", "Skill"),
            ("$ConceptType", "Experience"),
            ("$PropositionType", "consolidated_to"),
        ] {
            assert_eq!(
                ok(
                    &n,
                    &format!("FIND(COUNT(?x)) WHERE {{ ?x {{type: {t:?}, name: {name:?}}} }}")
                ),
                json!(1),
                "{t} {name}"
            );
        }
        assert_eq!(
            ok(
                &n,
                r#"FIND(COUNT(?x)) WHERE { ?x {type: "$ConceptType"} FILTER(?x.metadata._version != 1) }"#
            ),
            json!(0)
        );
        let genesis = ok(
            &n,
            r#"FIND(?x) WHERE { ?x {type: "$ConceptType", name: "$ConceptType"} }"#,
        );
        assert!(
            !genesis
                .to_string()
                .contains("(optionally 'item_type' for arrays"),
            "Genesis unchanged"
        );
        assert_eq!(
            ok(
                &n,
                r#"FIND(?d.name) WHERE { ({type: "$ConceptType", name: "Skill"}, "belongs_to_domain", ?d) }"#
            ),
            json!(["CoreSchema"])
        );
        let none = ok(&n, r#"SEARCH CONCEPT "migraine""#);
        assert!(!none.to_string().contains("Withdrawn"), "{none}");
        assert_eq!(
            n.admin().check_integrity().expect("check"),
            Vec::<String>::new()
        );
        // It takes writes.
        ok(
            &n,
            r#"UPSERT { CONCEPT ?s { {type: "Symptom", name: "Nausea"} SET ATTRIBUTES { description: "queasy" } } }"#,
        );
    }
    // And opens again as a current directory.
    let n = Nexus::open(dir.path()).expect("reopen");
    assert!(ok(&n, r#"SEARCH CONCEPT "queasy""#)
        .to_string()
        .contains("Nausea"));
    assert_eq!(
        n.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
}

/// A PostgreSQL schema written by an earlier release: schema version 2 (before the
/// request log, version 3, and the KIP 2.0 element tables, version 4), written by commit
/// 8aca680 from the same `capsule.kip` and committed as its `pg_dump`
/// (`crates/kip-store-pg/tests/fixtures/schema-v2/`, how: the README there). Restored
/// into a schema of its own and opened by this build, it is migrated in place: every
/// fact stays, SEARCH works, the integrity check is clean, and the new tables take
/// writes.
#[test]
#[ignore = "needs PostgreSQL: KIP_TEST_PG_URL (scripts/test.sh starts a cluster)"]
fn a_postgres_schema_of_an_earlier_release_opens_migrated_and_whole() {
    use kip_engine::store::{ElementId, ElementKind, SpaceId};
    let url = std::env::var("KIP_TEST_PG_URL").expect("KIP_TEST_PG_URL");
    let dump = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../kip-store-pg/tests/fixtures/schema-v2/dump.sql"),
    )
    .expect("the dump");
    let name = format!("old_v2_{}", std::process::id());
    let memory = kip_store_pg::restore_schema(&url, &name, &dump.replace("kip_fixture_v2", &name))
        .expect("the dump restores");
    let n = Nexus::open_postgres(&memory).expect("the old schema opens");
    assert_eq!(
        ok(
            &n,
            r#"FIND(?d.name, ?d.attributes.risk_level, ?d.attributes.aliases) WHERE { ?d {type: "Drug"} }"#
        ),
        json!([["Aspirin"], [2], [["ASA", "acetylsalicylic acid"]]]),
        "the deleted drug stays deleted"
    );
    assert_eq!(
        names(&ok(
            &n,
            r#"FIND(?s.name) WHERE { ({type: "Drug", name: "Aspirin"}, "treats", ?s) }"#
        )),
        vec!["Fever", "Headache"]
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.attributes.confidence) WHERE { ?c ({type: "Person", name: "Ada"}, "stated", ?f) }"#
        ),
        json!([0.9])
    );
    for (query, expected) in [
        ("throbbing", "Headache"),
        ("发烧", "Fever"),
        ("analytical", "Ada"),
    ] {
        let found = ok(&n, &format!("SEARCH CONCEPT {query:?}"));
        assert!(found.to_string().contains(expected), "{query}: {found}");
    }
    let none = ok(&n, r#"SEARCH CONCEPT "migraine""#);
    assert!(!none.to_string().contains("Withdrawn"), "{none}");
    assert_eq!(
        n.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
    // It takes writes: a 1.x one, and a KIP 2.0 element record in the new tables.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?d { {type: "Drug", name: "Aspirin"} SET ATTRIBUTES { risk_level: 3 } } }"#,
    );
    let a = n
        .write(
            |w| {
                let a = ElementId::new(
                    ElementKind::Assertion,
                    w.alloc_element_number(ElementKind::Assertion)?,
                );
                w.create_element(
                    SpaceId::DEFAULT,
                    a,
                    Default::default(),
                    Default::default(),
                    &[],
                )?;
                Ok(a)
            },
            false,
        )
        .expect("an element write");
    assert!(n
        .read(|g| Ok(g.element(SpaceId::DEFAULT, a)?))
        .expect("read")
        .is_some());
}
