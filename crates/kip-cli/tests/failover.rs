//! Exactly once across failover (issue 45), with real processes and `kill -9`: writers
//! run `kip exec` (each a process that forwards its request to the directory's owner)
//! while a killer SIGKILLs the serving processes again and again, one of which owns the
//! directory at any time. Every request increments its own counter once; afterwards
//! every acknowledged request's counter is exactly 1 and its answer said so, and no
//! counter is above 1 (a request re-sent to the next owner after the first one applied
//! it used to be applied twice).

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn serve(data: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(data)
        .args(["serve", "--no-prewarm"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kip serve")
}

fn exec(data: &Path, args: &[&str], input: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(data)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kip exec");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    child.wait_with_output().expect("kip exec ends")
}

/// One request: create counter `name` and increment it once, then read it back.
fn increment(data: &Path, name: &str) -> Option<Value> {
    let request = json!({"commands": [
        format!(r#"UPSERT {{ CONCEPT ?c {{ {{type: "Event", name: "{name}"}} SET ATTRIBUTES {{ event_class: "Counter", start_time: "2026-01-01", content_summary: "counter" }} }} }}"#),
        format!(r#"UPDATE ?c SET ATTRIBUTES {{ n: ADD(COALESCE(?c.attributes.n, 0), 1) }} WHERE {{ ?c {{type: "Event", name: "{name}"}} }}"#),
        r#"FIND(COUNT(?e)) WHERE { ?e {type: "Event"} }"#,
    ]});
    let out = exec(data, &["exec", "--json", "-"], &request.to_string());
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

#[test]
fn forwarded_writes_apply_exactly_once_while_owners_are_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data: PathBuf = dir.path().join("memory");
    let servers = Arc::new(Mutex::new(vec![serve(&data), serve(&data)]));
    // Let the first one own the directory before the writers start.
    std::thread::sleep(Duration::from_millis(800));
    let stop = Arc::new(AtomicBool::new(false));
    let killer = {
        let servers = servers.clone();
        let stop = stop.clone();
        let data = data.clone();
        std::thread::spawn(move || {
            let mut kills = 0u32;
            let mut turn = 0usize;
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(350 + u64::from(kills % 5) * 70));
                let mut s = servers.lock().unwrap_or_else(|p| p.into_inner());
                turn = (turn + 1) % s.len();
                let victim = &mut s[turn];
                let _ = Command::new("kill")
                    .args(["-9", &victim.id().to_string()])
                    .status();
                let _ = victim.wait();
                s[turn] = serve(&data);
                kills += 1;
            }
            kills
        })
    };
    let deadline = Instant::now() + Duration::from_secs(12);
    let results: Vec<(String, Option<Value>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3)
            .map(|w| {
                let data = &data;
                scope.spawn(move || {
                    let mut out = Vec::new();
                    let mut i = 0;
                    while Instant::now() < deadline {
                        let name = format!("c{w}_{i}");
                        let answer = increment(data, &name);
                        out.push((name, answer));
                        i += 1;
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("writer"))
            .collect()
    });
    stop.store(true, Ordering::SeqCst);
    let kills = killer.join().expect("killer");
    assert!(kills >= 10, "the owner was killed {kills} times");
    // Let the last servers go, then read the counters with the directory to ourselves.
    for mut s in servers.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
        let _ = s.kill();
        let _ = s.wait();
    }
    let dump = exec(
        &data,
        &["exec", "--json", "-"],
        &json!({"command": r#"FIND(?c.name, ?c.attributes.n) WHERE { ?c {type: "Event"} } LIMIT 10000"#}).to_string(),
    );
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let v: Value = serde_json::from_slice(&dump.stdout).expect("json");
    let names = v["result"][0].as_array().expect("names").clone();
    let ns = v["result"][1].as_array().expect("values").clone();
    let counts: std::collections::HashMap<String, Value> = names
        .iter()
        .zip(ns)
        .filter_map(|(name, n)| Some((name.as_str()?.to_string(), n)))
        .collect();
    let mut acked = 0;
    for (name, answer) in &results {
        let n = counts.get(name).cloned().unwrap_or(Value::Null);
        assert!(
            n == Value::Null || n == json!(1),
            "{name} was applied {n} times"
        );
        if let Some(answer) = answer {
            acked += 1;
            assert_eq!(
                answer["result"][1]["result"],
                json!({"updated": 1, "matched": 1}),
                "{name}: {answer}"
            );
            assert_eq!(n, json!(1), "{name} was acknowledged but not applied");
        }
    }
    assert!(
        acked * 4 >= results.len() && acked >= 10,
        "most requests are acknowledged ({acked} of {})",
        results.len()
    );
}
