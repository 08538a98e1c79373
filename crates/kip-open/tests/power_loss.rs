//! Power loss, simulated: the database file and the write-ahead log live on a
//! [`Disk`] that keeps only what was synced; the power is cut at a random I/O
//! operation of a run of writes (mid-commit, mid-checkpoint, mid-append), and the disk
//! is then found with a random subset of the unsynced writes applied, some torn. Every
//! time, the nexus must open, hold every acknowledged write, and pass the integrity
//! check (`kip check`). Also: injected EIO and ENOSPC on the log and on the database.

use kip_engine::{Access, Nexus};
use kip_open::crashsim::{Disk, Fault, SimFile};
use kip_open::Open;
use serde_json::json;

const TYPES: &str = r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Note"} SET ATTRIBUTES { description: "a note", display_hint: "N" } } }"#;

fn files(disk: &Disk) -> (SimFile, SimFile) {
    (
        disk.existing(0).expect("database file"),
        disk.existing(1).expect("log file"),
    )
}

/// A disk holding a bootstrapped nexus with the `Note` type, closed cleanly.
fn base() -> Disk {
    let disk = Disk::new();
    let (db, log) = (disk.file(), disk.file());
    let n = Nexus::open_simulated(db, log).expect("create");
    let r = n
        .execute_json(&json!({ "command": TYPES }), Access::ReadWrite)
        .to_json();
    assert!(r.get("error").is_none(), "{r}");
    drop(n);
    disk.power_loss(0) // everything was synced at the clean close
}

fn write(n: &Nexus, name: &str, i: usize) -> bool {
    let cmd = json!({
        "command": "UPSERT { CONCEPT ?n { {type: \"Note\", name: :name} SET ATTRIBUTES { i: :i, text: :text } } }",
        "parameters": {"name": name, "i": i, "text": "x".repeat(i * 37 % 700)}
    });
    let r = n.execute_json(&cmd, Access::ReadWrite).to_json();
    r.get("error").is_none()
}

fn names(n: &Nexus) -> std::collections::HashSet<String> {
    let r = n
        .execute_json(
            &json!({"command": "FIND(?n.name) WHERE { ?n {type: \"Note\"} } LIMIT 10000"}),
            Access::ReadOnly,
        )
        .to_json();
    r["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// One run: open, write (checkpointing now and then), with the power cut after
/// `crash_after` operations; returns the acknowledged names and the disk after the loss.
fn run(base: &Disk, seed: u64, crash_after: Option<u64>, writes: usize) -> (Vec<String>, Disk) {
    let disk = base.power_loss(0);
    if let Some(c) = crash_after {
        disk.crash_after(c);
    }
    let mut acked = Vec::new();
    let (db, log) = files(&disk);
    if let Ok(n) = Nexus::open_simulated(db, log) {
        for i in 0..writes {
            let name = format!("s{seed}_{i}");
            if write(&n, &name, i) {
                acked.push(name);
            }
            if (seed + i as u64) % 7 == 3 {
                let _ = n.admin().checkpoint();
            }
        }
        drop(n); // a clean close checkpoints, unless the power is already off
    }
    (
        acked,
        disk.power_loss(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1),
    )
}

#[test]
fn a_power_loss_anywhere_loses_no_acknowledged_write() {
    let base = base();
    const WRITES: usize = 12;
    // How many operations a whole run takes: the crash points are drawn below it.
    let full = {
        let disk = base.power_loss(0);
        let (db, log) = files(&disk);
        let n = Nexus::open_simulated(db, log).expect("open");
        for i in 0..WRITES {
            assert!(write(&n, &format!("full_{i}"), i));
            if (1 + i as u64) % 7 == 3 {
                n.admin().checkpoint().expect("checkpoint");
            }
        }
        drop(n);
        disk.ops()
    };
    assert!(full > 20, "a run does real I/O ({full} operations)");
    let iterations: u64 = std::env::var("KIP_POWER_LOSS_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut lost_power_mid_write = 0;
    for seed in 1..=iterations {
        let crash = 1 + (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11) % full;
        let (acked, after) = run(&base, seed, Some(crash), WRITES);
        if acked.len() < WRITES {
            lost_power_mid_write += 1;
        }
        let (db, log) = files(&after);
        let n = Nexus::open_simulated(db, log).unwrap_or_else(|e| {
            panic!("seed {seed} (power off after {crash} of {full} operations): the nexus does not open: {e:?}")
        });
        let present = names(&n);
        let lost: Vec<&String> = acked.iter().filter(|a| !present.contains(*a)).collect();
        assert!(
            lost.is_empty(),
            "seed {seed} (power off after {crash} of {full} operations): acknowledged writes lost: {lost:?}"
        );
        let problems = n.admin().check_integrity().expect("check");
        assert!(
            problems.is_empty(),
            "seed {seed} (power off after {crash} of {full} operations): {problems:?}"
        );
        // And the survivor takes writes again (checked on every tenth run: a write
        // costs as much as the rest of a run).
        if seed % 10 == 0 {
            assert!(
                write(&n, "after", 1),
                "seed {seed}: no write after reopening"
            );
        }
    }
    assert!(
        lost_power_mid_write > iterations / 2,
        "most runs must be cut short ({lost_power_mid_write} of {iterations})"
    );
}

#[test]
fn a_failed_log_write_refuses_further_writes_and_loses_nothing() {
    for fault in [Fault::NoSpace, Fault::Io] {
        let base = base();
        let disk = base.power_loss(0);
        let (db, log) = files(&disk);
        let n = Nexus::open_simulated(db, log.clone()).expect("open");
        assert!(write(&n, "before", 1));
        disk.inject(&log, Some(fault));
        let r = n
            .execute_json(
                &json!({"command": "UPSERT { CONCEPT ?n { {type: \"Note\", name: \"failed\"} } }"}),
                Access::ReadWrite,
            )
            .to_json();
        let message = r["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"));
        assert_eq!(r["error"]["code"], "KIP_4003");
        match fault {
            Fault::NoSpace => assert!(message.contains("no space left on device"), "{message}"),
            Fault::Io => assert!(message.contains("I/O error"), "{message}"),
        }
        // The disk recovers, but the log's state after a failed write is unknown: the
        // nexus refuses writes until it is reopened, and says so.
        disk.inject(&log, None);
        let r = n
            .execute_json(
                &json!({"command": "UPSERT { CONCEPT ?n { {type: \"Note\", name: \"later\"} } }"}),
                Access::ReadWrite,
            )
            .to_json();
        let message = r["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"));
        assert!(message.contains("refused"), "{message}");
        assert!(r["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("restart")));
        // Reads still work.
        assert!(names(&n).contains("before"));
        let after = disk.power_loss(7);
        drop(n);
        let (db, log) = files(&after);
        let m = Nexus::open_simulated(db, log).expect("reopen");
        let present = names(&m);
        assert!(present.contains("before"), "acknowledged write kept");
        assert!(!present.contains("failed"), "the failed write left nothing");
        assert!(m.admin().check_integrity().expect("check").is_empty());
        assert!(write(&m, "again", 2), "writes work after reopening");
    }
}

#[test]
fn a_failed_checkpoint_refuses_writes_until_reopened_and_loses_nothing() {
    let base = base();
    let disk = base.power_loss(0);
    let (db, log) = files(&disk);
    let n = Nexus::open_simulated(db.clone(), log).expect("open");
    assert!(write(&n, "one", 1));
    disk.inject(&db, Some(Fault::NoSpace));
    let e = n
        .admin()
        .checkpoint()
        .expect_err("the database file cannot be written");
    assert!(
        e.message.contains("no space left on device"),
        "{}",
        e.message
    );
    // The disk recovers, but the database file's state after a failed write is not
    // known: writes are refused, clearly, until the nexus is reopened.
    disk.inject(&db, None);
    let r = n
        .execute_json(
            &json!({"command": "UPSERT { CONCEPT ?n { {type: \"Note\", name: \"two\"} } }"}),
            Access::ReadWrite,
        )
        .to_json();
    let message = r["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(
        message.contains("an earlier write to the database file failed"),
        "{message}"
    );
    assert!(
        r["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("restart")),
        "{r}"
    );
    assert!(names(&n).contains("one"), "reads still work");
    let after = disk.power_loss(3);
    drop(n);
    let (db, log) = files(&after);
    let m = Nexus::open_simulated(db, log).expect("reopen");
    let present = names(&m);
    assert!(present.contains("one"), "{present:?}");
    assert!(!present.contains("two"), "the refused write left nothing");
    assert!(write(&m, "three", 3), "writes work after reopening");
    assert!(m.admin().check_integrity().expect("check").is_empty());
}
