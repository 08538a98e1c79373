//! The write-ahead log: acknowledged writes survive a crash between checkpoints, replay
//! is exact (same graph, same ids, consistent indexes), and a clean close empties it.
//!
//! A crash is simulated by copying the data directory's files while the nexus is open:
//! the database file then holds the last durable state only, the log the rest.

mod common;

use common::ok;
use kip_engine::Nexus;
use kip_open::embedded::wal::Wal;
use kip_open::Open;
use kip_open::{DB_FILE, WAL_FILE};
use std::path::Path;

fn snapshot(from: &Path, to: &Path, files: &[&str]) {
    std::fs::create_dir_all(to).expect("mkdir");
    for f in files {
        std::fs::copy(from.join(f), to.join(f)).expect("copy");
    }
}

/// Sequence numbers of the records in a data directory's log (as an open would read them).
fn logged(dir: &Path) -> Vec<u64> {
    let (_, recs) = Wal::open(&dir.join(WAL_FILE)).expect("read the log");
    recs.iter().map(|r| r.seq).collect()
}

const WRITES: &[&str] = &[
    r#"UPSERT { CONCEPT ?k { {type: "$PropositionType", name: "knows"} SET ATTRIBUTES { description: "knows someone", subject_types: ["Person"], object_types: ["Person"] } } }"#,
    r#"UPSERT { CONCEPT ?a { {type: "Person", name: "Ada"} SET ATTRIBUTES { description: "wrote the first program", born: 1815 } } }"#,
    r#"UPSERT { CONCEPT ?b { {type: "Person", name: "Charles"} SET ATTRIBUTES { description: "designed the analytical engine" } SET PROPOSITIONS { ("knows", {type: "Person", name: "Ada"}) } } }"#,
    r#"UPSERT { CONCEPT ?c { {type: "Person", name: "Temp"} } }"#,
    r#"DELETE CONCEPT ?c DETACH WHERE { ?c {type: "Person", name: "Temp"} }"#,
    r#"UPSERT { CONCEPT ?a { {type: "Person", name: "Ada"} SET ATTRIBUTES { born: 1816 } } }"#,
];

fn graph(n: &Nexus) -> serde_json::Value {
    n.admin().dump().expect("dump")
}

#[test]
fn acknowledged_writes_survive_a_crash_between_checkpoints() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let live = tmp.path().join("live");
    let crashed = tmp.path().join("crashed");
    let n = Nexus::open(&live).expect("open");
    for w in WRITES {
        ok(&n, w);
    }
    assert!(n.admin().wal_len() > 0, "small writes go through the log");
    let expected = graph(&n);
    snapshot(&live, &crashed, &[DB_FILE, WAL_FILE]);
    assert_eq!(
        logged(&crashed).len(),
        WRITES.len(),
        "one record per statement"
    );

    let r = Nexus::open(&crashed).expect("reopen after the crash");
    assert_eq!(graph(&r), expected, "replay rebuilds the same graph");
    assert_eq!(
        r.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
    assert_eq!(r.admin().wal_len(), 0, "replayed records are checkpointed");
    let born = ok(
        &r,
        r#"FIND(?p.attributes.born) WHERE { ?p {type: "Person", name: "Ada"} }"#,
    );
    assert_eq!(born, serde_json::json!([1816]));
    let hits = ok(&r, r#"SEARCH CONCEPT "analytical" LIMIT 5"#);
    assert_eq!(
        hits[0]["name"], "Charles",
        "the text index is replayed too: {hits}"
    );
    // New ids continue after the replayed ones (counters are part of the log).
    ok(
        &r,
        r#"UPSERT { CONCEPT ?d { {type: "Person", name: "Grace"} } }"#,
    );
    assert_eq!(
        r.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
    drop(n);
}

#[test]
fn records_already_checkpointed_are_not_applied_twice() {
    // A crash after the checkpoint's durable commit but before the log was emptied.
    let tmp = tempfile::tempdir().expect("tempdir");
    let live = tmp.path().join("live");
    let crashed = tmp.path().join("crashed");
    let n = Nexus::open(&live).expect("open");
    for w in &WRITES[..4] {
        ok(&n, w);
    }
    snapshot(&live, &crashed, &[WAL_FILE]);
    n.admin().checkpoint().expect("checkpoint");
    assert_eq!(n.admin().wal_len(), 0);
    assert!(logged(&live).is_empty(), "a checkpoint empties the log");
    // The database after the checkpoint, the log from before it.
    snapshot(&live, &crashed, &[DB_FILE]);
    let expected = graph(&n);
    let r = Nexus::open(&crashed).expect("reopen");
    assert_eq!(graph(&r), expected);
    assert_eq!(
        r.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
    drop(r);

    // Later writes go to the start of the log again; with the same database snapshot
    // rule, a crash now replays only them.
    for w in &WRITES[4..] {
        ok(&n, w);
    }
    assert_eq!(
        logged(&live),
        vec![5, 6],
        "numbering continues after the checkpoint"
    );
    let expected = graph(&n);
    let again = tmp.path().join("again");
    snapshot(&live, &again, &[DB_FILE, WAL_FILE]);
    let r = Nexus::open(&again).expect("reopen");
    assert_eq!(graph(&r), expected);
    assert_eq!(
        r.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
    drop(n);
}

#[test]
fn a_clean_close_empties_the_log_and_a_failed_write_logs_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("d");
    let n = Nexus::open(&dir).expect("open");
    ok(&n, WRITES[1]);
    let before = n.admin().wal_len();
    // Unknown type: KIP_2001, nothing written, nothing logged.
    let r = common::run(&n, r#"UPSERT { CONCEPT ?x { {type: "Nope", name: "x"} } }"#);
    assert!(r.get("error").is_some());
    assert_eq!(n.admin().wal_len(), before);
    // dry_run logs nothing either.
    let r = n
        .execute_json(
            &serde_json::json!({"command": WRITES[3], "dry_run": true}),
            kip_engine::Access::ReadWrite,
        )
        .to_json();
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(n.admin().wal_len(), before);
    drop(n);
    assert!(logged(&dir).is_empty(), "a clean close leaves an empty log");
    let n = Nexus::open(&dir).expect("reopen");
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p.name) WHERE { ?p {type: "Person", name: "Ada"} }"#
        ),
        serde_json::json!(["Ada"])
    );
}

#[test]
fn an_idle_nexus_checkpoints_its_log_within_the_age() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("d");
    let n = std::sync::Arc::new(Nexus::open(&dir).expect("open"));
    n.testing()
        .set_checkpoint_age(std::time::Duration::from_millis(200));
    n.admin().start_idle_checkpoints().expect("timer");
    ok(&n, WRITES[1]);
    assert!(n.admin().wal_len() > 0, "the write is in the log");
    // No further write: the timer alone must checkpoint it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while n.admin().wal_len() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "an idle nexus kept its log"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A crash now (a copy of the files while open) needs no replay and loses nothing.
    let crashed = tmp.path().join("crashed");
    snapshot(&dir, &crashed, &[DB_FILE, WAL_FILE]);
    assert!(logged(&crashed).is_empty(), "nothing left to replay");
    let m = Nexus::open(&crashed).expect("open the copy");
    assert_eq!(
        ok(
            &m,
            r#"FIND(?p.name) WHERE { ?p {type: "Person", name: "Ada"} }"#
        ),
        serde_json::json!(["Ada"])
    );
    // The timer ends with the nexus (it holds a weak reference only, but may be
    // holding it upgraded for a moment).
    drop(n);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while Nexus::open(&dir).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the timer kept the nexus open"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_gap_in_the_log_is_refused_not_skipped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let live = tmp.path().join("live");
    let crashed = tmp.path().join("crashed");
    let n = Nexus::open(&live).expect("open");
    ok(&n, WRITES[0]);
    ok(&n, WRITES[1]);
    snapshot(&live, &crashed, &[DB_FILE, WAL_FILE]);
    drop(n);
    // Keep only the second record: it no longer follows the durable state.
    let path = crashed.join(WAL_FILE);
    let (_, recs) = Wal::open(&path).expect("read");
    assert_eq!(recs.len(), 2);
    std::fs::remove_file(&path).expect("rm");
    let (mut wal, _) = Wal::open(&path).expect("new log");
    wal.append(recs[1].seq, &recs[1].payload).expect("append");
    drop(wal);
    let e = Nexus::open(&crashed).expect_err("a gap must be refused");
    assert_eq!(e.code.as_str(), "KIP_4003", "{}", e.message);
    assert!(e.message.contains("missing"), "{}", e.message);
}

#[test]
fn a_log_without_its_database_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let live = tmp.path().join("live");
    let orphan = tmp.path().join("orphan");
    let n = Nexus::open(&live).expect("open");
    ok(&n, WRITES[1]);
    snapshot(&live, &orphan, &[WAL_FILE]);
    drop(n);
    let e = Nexus::open(&orphan).expect_err("a log without its database");
    assert_eq!(e.code.as_str(), "KIP_4003", "{}", e.message);
    assert!(e.message.contains("no database"), "{}", e.message);
}

mod damaged {
    //! A damaged log never panics the reader or the replay: it is read up to the damage,
    //! and a record that does not decode is an error, not a crash.
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_7021), ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_log_bytes_are_read_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join(WAL_FILE);
            std::fs::write(&path, &bytes).expect("write");
            let (wal, recs) = Wal::open(&path).expect("open");
            prop_assert!(wal.len() <= bytes.len() as u64);
            for w in recs.windows(2) {
                prop_assert_eq!(w[0].seq + 1, w[1].seq);
            }
        }
    }

    #[test]
    fn a_record_that_does_not_decode_refuses_to_open() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let live = tmp.path().join("live");
        let crashed = tmp.path().join("crashed");
        let n = Nexus::open(&live).expect("open");
        ok(&n, WRITES[1]);
        n.admin().checkpoint().expect("checkpoint");
        snapshot(&live, &crashed, &[DB_FILE]);
        drop(n);
        // A well-framed record (right CRC) whose operations are garbage.
        let path = crashed.join(WAL_FILE);
        let (mut wal, _) = Wal::open(&path).expect("new log");
        // Record 2 follows the checkpoint (record 1): a put whose record is cut short.
        wal.append(2, &[1, 0, 0, 0, 0, 0, 0, 0, 9, 5, 0, 0, 0, 1, 2])
            .expect("append");
        drop(wal);
        let e = Nexus::open(&crashed).expect_err("garbage must not be applied");
        assert_eq!(e.code.as_str(), "KIP_4003", "{}", e.message);
        assert!(
            e.message.contains("record 2 cannot be applied"),
            "{}",
            e.message
        );
        assert!(
            e.hint
                .as_deref()
                .unwrap_or("")
                .contains("move nexus.wal away"),
            "{:?}",
            e.hint
        );
    }
}

/// Files of a data directory as (name, length, crc32), to show that a refusal changed
/// nothing.
fn files(dir: &Path) -> Vec<(String, usize, u32)> {
    let mut out: Vec<(String, usize, u32)> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| {
            let e = e.expect("entry");
            let bytes = std::fs::read(e.path()).expect("read");
            (
                e.file_name().to_string_lossy().into_owned(),
                bytes.len(),
                crc32fast::hash(&bytes),
            )
        })
        .collect();
    out.sort();
    out
}

/// A crashed directory (database as of its last checkpoint, log with every write since).
fn crashed_copy(tmp: &Path) -> (std::path::PathBuf, serde_json::Value) {
    let live = tmp.join("live");
    let crashed = tmp.join("crashed");
    let n = Nexus::open(&live).expect("open");
    for w in WRITES {
        ok(&n, w);
    }
    let expected = graph(&n);
    snapshot(&live, &crashed, &[DB_FILE, WAL_FILE]);
    drop(n);
    (crashed, expected)
}

/// The regression of a supervisor's restarts discarding 10,371 acknowledged writes: a
/// directory whose log holds records but whose database file is missing is refused, as
/// often as it is started, and nothing on disk changes.
#[test]
fn a_log_without_its_database_is_refused_and_left_untouched() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (crashed, _) = crashed_copy(tmp.path());
    std::fs::remove_file(crashed.join(DB_FILE)).expect("rm db");
    let before = files(&crashed);
    for _ in 0..3 {
        let e = Nexus::open(&crashed).expect_err("must refuse");
        assert!(e.message.contains("no database"), "{}", e.message);
        assert!(e.hint.as_deref().unwrap_or("").contains("backup"), "{e:?}");
        assert_eq!(files(&crashed), before, "a refusal changes nothing");
    }
    assert_eq!(logged(&crashed).len(), WRITES.len());
}

/// The regression of one flipped byte mid-log silently dropping every later record: a
/// damaged record followed by newer valid ones is corruption; the open is refused with
/// the offset, nothing changes; `kip recover --salvage-wal`'s mode opens it as of the
/// last good record after keeping a copy, and a torn last record is still a clean end.
#[test]
fn a_damaged_record_mid_log_is_corruption_not_a_torn_tail() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (crashed, expected) = crashed_copy(tmp.path());
    let wal = crashed.join(WAL_FILE);
    let (records, _) = Wal::read(&wal).expect("read");
    assert_eq!(records.len(), WRITES.len());
    // Flip one byte inside the payload of the third record.
    let mut bytes = std::fs::read(&wal).expect("read");
    let mut offset = 0usize;
    for r in &records[..2] {
        offset += 20 + r.payload.len();
    }
    bytes[offset + 20 + records[2].payload.len() / 2] ^= 0x40;
    std::fs::write(&wal, &bytes).expect("write");
    for _ in 0..2 {
        let e = Nexus::open(&crashed).expect_err("corrupt log");
        assert_eq!(e.code.as_str(), "KIP_4003");
        assert!(
            e.message.contains(&format!("byte {offset}")),
            "{}",
            e.message
        );
        assert!(
            e.hint.as_deref().unwrap_or("").contains("--salvage-wal"),
            "{e:?}"
        );
        assert_eq!(
            std::fs::read(&wal).expect("log"),
            bytes,
            "the log is left as it was"
        );
    }

    // Salvage: explicit, keeps a copy, opens as of record 2.
    let n = Nexus::open_with(&crashed, kip_open::OpenMode::SalvageWal).expect("salvage");
    assert_eq!(
        n.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
    let people = ok(
        &n,
        r#"FIND(?p.name) WHERE { ?p {type: "Person"} FILTER(?p.name == "Ada" || ?p.name == "Charles") }"#,
    );
    assert_eq!(
        people,
        serde_json::json!(["Ada"]),
        "records 1-2 kept, 3-6 lost"
    );
    drop(n);
    let copies: Vec<_> = std::fs::read_dir(&crashed)
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("nexus.wal.damaged-")
        })
        .collect();
    assert_eq!(copies.len(), 1);
    assert_eq!(std::fs::read(copies[0].path()).expect("copy"), bytes);
    // After the salvage the nexus opens normally (the log was emptied).
    let n = Nexus::open(&crashed).expect("opens after salvage");
    assert_ne!(graph(&n), expected);
    drop(n);

    // A torn last record (a crash mid-append) is a clean end: no error, no loss of
    // anything before it.
    let tmp2 = tempfile::tempdir().expect("tempdir");
    let (torn, _) = crashed_copy(tmp2.path());
    let wal = torn.join(WAL_FILE);
    let (records, _) = Wal::read(&wal).expect("read");
    let total: usize = records.iter().map(|r| 20 + r.payload.len()).sum();
    let mut bytes = std::fs::read(&wal).expect("read");
    let last = records.last().expect("records");
    bytes[total - last.payload.len() / 2] ^= 0x01;
    std::fs::write(&wal, &bytes).expect("write");
    let n = Nexus::open(&torn).expect("a torn tail opens");
    assert_eq!(
        n.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
}

/// New data directories and their files are private to their owner.
#[cfg(unix)]
#[test]
fn data_files_are_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("a").join("nexus");
    let n = Nexus::open(&dir).expect("open");
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Person", name: "Ada"} } }"#,
    );
    let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(DB_FILE)), 0o600);
    assert_eq!(mode(&dir.join(WAL_FILE)), 0o600);
    drop(n);
}

/// `kip check` verifies the log too: a record damaged on disk behind a running nexus is
/// reported.
#[test]
fn the_integrity_check_reads_the_log_back() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let n = Nexus::open(tmp.path()).expect("open");
    for w in WRITES {
        ok(&n, w);
    }
    assert_eq!(
        n.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
    let wal = tmp.path().join(WAL_FILE);
    let (records, _) = Wal::read(&wal).expect("read");
    let mut bytes = std::fs::read(&wal).expect("read");
    let at = 20 + records[0].payload.len() + 20 + 3;
    bytes[at] ^= 0xff;
    std::fs::write(&wal, &bytes).expect("write");
    let problems = n.admin().check_integrity().expect("check");
    assert!(
        problems.iter().any(|p| p.contains("write-ahead log")),
        "{problems:?}"
    );
    // Put it back, so the close's checkpoint is clean.
    bytes[at] ^= 0xff;
    std::fs::write(&wal, &bytes).expect("write");
}

/// KIP 2.0 element records (assertions, evidence) and their references go through the
/// write-ahead log like the graph records: a crash before the checkpoint loses none.
#[test]
fn element_records_are_replayed_after_a_crash() {
    use kip_engine::store::{ElementId, ElementKind, SpaceId};
    let tmp = tempfile::tempdir().expect("tempdir");
    let live = tmp.path().join("live");
    let crashed = tmp.path().join("crashed");
    let n = Nexus::open(&live).expect("open");
    let payload = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
    let (e, a) = n
        .write(
            |w| {
                let e = ElementId::new(
                    ElementKind::Evidence,
                    w.alloc_element_number(ElementKind::Evidence)?,
                );
                w.create_element(
                    SpaceId::DEFAULT,
                    e,
                    payload(serde_json::json!({"content": "seen"})),
                    Default::default(),
                    &[],
                )?;
                let a = ElementId::new(
                    ElementKind::Assertion,
                    w.alloc_element_number(ElementKind::Assertion)?,
                );
                w.create_element(
                    SpaceId::DEFAULT,
                    a,
                    payload(serde_json::json!({"stance": "support"})),
                    payload(serde_json::json!({"status": "active"})),
                    &[("evidence".into(), e)],
                )?;
                Ok((e, a))
            },
            false,
        )
        .expect("write");
    n.write(
        |w| {
            w.set_element_state(
                SpaceId::DEFAULT,
                a,
                payload(serde_json::json!({"status": "retracted"})),
            )?;
            Ok(())
        },
        false,
    )
    .expect("state");
    assert!(n.admin().wal_len() > 0, "element writes go through the log");
    snapshot(&live, &crashed, &[DB_FILE, WAL_FILE]);
    let r = Nexus::open(&crashed).expect("reopen after the crash");
    let (rec, refs) = r
        .read(|g| {
            let rec = g.element(SpaceId::DEFAULT, a)?;
            let mut refs = Vec::new();
            g.scan_referrers(SpaceId::DEFAULT, e, &mut |role, source| {
                refs.push((role.to_owned(), source));
                Ok(true)
            })?;
            Ok((rec, refs))
        })
        .expect("read");
    let rec = rec.expect("the assertion was replayed");
    assert_eq!(
        (rec.version, &rec.state["status"]),
        (2, &serde_json::json!("retracted"))
    );
    assert_eq!(refs, vec![("evidence".to_owned(), a)]);
    drop(n);
}

/// History (commit records with their times, the version chain, the changes index)
/// comes back from the log exactly: a crash before the checkpoint changes neither
/// HISTORY SPACE nor what a read `AS OF` a seq answers.
#[test]
fn history_is_replayed_exactly_after_a_crash() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let live = tmp.path().join("live");
    let crashed = tmp.path().join("crashed");
    let n = Nexus::open(&live).expect("open");
    for w in WRITES {
        ok(&n, w);
    }
    let kip2 = |n: &Nexus, cmd: &str| {
        let r = n
            .execute_json(
                &serde_json::json!({"kip": "2.0", "operations": [{"command": cmd}]}),
                kip_engine::Access::ReadWrite,
            )
            .to_json();
        assert_eq!(r["status"], "succeeded", "{cmd}: {r}");
        r["results"][0]["result"].clone()
    };
    let past = r#"FIND(?p.attributes.born) WHERE { ?p CONCEPT {type: "Person", name: "Ada"} } AS OF SEQ 3"#;
    let history = kip2(&n, "HISTORY SPACE LIMIT 100");
    assert_eq!(
        history["commits"].as_array().map(Vec::len),
        Some(WRITES.len())
    );
    assert_eq!(kip2(&n, past), serde_json::json!([1815]));
    assert!(n.admin().wal_len() > 0, "the writes are in the log only");
    snapshot(&live, &crashed, &[DB_FILE, WAL_FILE]);
    let r = Nexus::open(&crashed).expect("reopen after the crash");
    assert_eq!(
        kip2(&r, "HISTORY SPACE LIMIT 100"),
        history,
        "same commits, same times"
    );
    assert_eq!(kip2(&r, past), serde_json::json!([1815]));
    assert_eq!(
        kip2(
            &r,
            r#"FIND(?p.attributes.born) WHERE { ?p CONCEPT {type: "Person", name: "Ada"} }"#
        ),
        serde_json::json!([1816])
    );
    // The next commit continues the sequence.
    ok(
        &r,
        r#"UPSERT { CONCEPT ?d { {type: "Person", name: "Grace"} } }"#,
    );
    assert_eq!(
        kip2(&r, "SNAPSHOT")["snapshot_seq"],
        WRITES.len() as u64 + 1
    );
    drop(n);
}

/// Issue 48: after a PURGE the write-ahead log file no longer holds the records that
/// wrote the purged content (a checkpoint only zeroes the log's first header).
#[test]
fn a_purge_erases_the_write_ahead_log() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("live");
    let n = Nexus::open(&dir).expect("open");
    let kip2 = |cmd: &str, params: serde_json::Value| {
        let r = n
            .execute_json(
                &serde_json::json!({"kip": "2.0", "operations": [{"command": cmd, "parameters": params}]}),
                kip_engine::Access::ReadWrite,
            )
            .to_json();
        assert_eq!(r["status"], "succeeded", "{cmd}: {r}");
        r["results"][0]["result"].clone()
    };
    let h = kip2(
        r#"CREATE EVIDENCE ?e { SET FIELDS { evidence_class: "user_statement", payload: "my Zanzibarine diary" } }"#,
        serde_json::json!({}),
    );
    let wal = std::fs::read(dir.join(WAL_FILE)).expect("log");
    let holds = |bytes: &[u8]| bytes.windows(11).any(|w| w == b"Zanzibarine");
    assert!(holds(&wal), "the write went through the log");
    kip2(
        r#"PURGE :e CONFIRM "PURGE""#,
        serde_json::json!({"e": h["handles"]["e"]}),
    );
    let wal = std::fs::read(dir.join(WAL_FILE)).expect("log");
    assert!(!holds(&wal), "the log no longer holds the purged content");
    drop(n);
    // The memory opens as it was left.
    let r = Nexus::open(&dir).expect("reopen");
    assert_eq!(
        r.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
}
