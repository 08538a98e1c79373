//! Several windows, one memory: MCP hosts start one `kip serve` per window on the same
//! data directory. The first owns it; the others forward to it over `<dir>/kip.sock`
//! and take over when it dies. Three stdio servers write at once, the owner is killed
//! with SIGKILL in the middle of the run, and not one acknowledged write may be lost.

use kip_engine::{Access, Nexus};
use kip_open::Open;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One MCP host window: a `kip serve` on stdio, spoken to line by line.
struct Window {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
}

impl Window {
    fn start(data: &Path) -> Window {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
            .arg("--data")
            .arg(data)
            .args(["serve", "--no-prewarm"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kip serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut w = Window {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 1,
        };
        let init = w
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "window", "version": "1"}}),
            )
            .expect("initialize");
        assert_eq!(init["result"]["serverInfo"]["name"], "kip-nexus", "{init}");
        w.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .expect("initialized");
        w
    }

    fn send(&mut self, msg: &Value) -> Option<()> {
        let stdin = self.stdin.as_mut()?;
        writeln!(stdin, "{msg}").ok()?;
        stdin.flush().ok()
    }

    /// Sends a request and waits for its answer; `None` when the server is gone.
    fn request(&mut self, method: &str, params: Value) -> Option<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let line = self.lines.recv_timeout(left).ok()?;
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["id"] == json!(id) {
                return Some(v);
            }
        }
    }

    /// Calls a tool; `Some(true)` when it succeeded, `Some(false)` on a tool error.
    fn call(&mut self, tool: &str, arguments: Value) -> Option<Result<Value, Value>> {
        let r = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        let ok = r.get("result").is_some() && r["result"]["isError"] != json!(true);
        Some(if ok { Ok(r) } else { Err(r) })
    }

    /// Closes stdin (the host closed the window) and waits for the process to end.
    fn close(mut self) -> std::process::ExitStatus {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return s;
            }
            assert!(Instant::now() < deadline, "kip serve did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kip_write(window: usize, i: usize) -> (String, Value) {
    let name = format!("w{window}_{i}");
    let args = json!({
        "command": "UPSERT { CONCEPT ?n { {type: \"Person\", name: :name} SET ATTRIBUTES { window: :w, i: :i } } }",
        "parameters": {"name": name, "w": window, "i": i}
    });
    (name, args)
}

/// Writes through one window until told to stop or the window dies; returns the names
/// of the acknowledged writes and the number of failed calls.
fn writer(
    mut w: Window,
    index: usize,
    acked: Arc<AtomicUsize>,
    stop_at: usize,
) -> (Window, Vec<String>, Vec<Value>) {
    let mut names = Vec::new();
    let mut failures = Vec::new();
    for i in 0..stop_at {
        // Every third write of the third window goes through the memory tools.
        let (name, outcome) = if index == 2 && i % 3 == 0 {
            let name = format!("w{index}_{i}");
            let args = json!({"entities": [{"name": name, "entityType": "note", "observations": [format!("written by window {index}")]}]});
            (name, w.call("create_entities", args))
        } else {
            let (name, args) = kip_write(index, i);
            (name, w.call("execute_kip", args))
        };
        match outcome {
            None => break, // the window's process is gone
            Some(Ok(_)) => {
                names.push(name);
                acked.fetch_add(1, Ordering::SeqCst);
            }
            Some(Err(r)) => failures.push(r),
        }
    }
    (w, names, failures)
}

#[test]
fn three_windows_share_one_memory_and_survive_the_owner_being_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("memory");
    let owner = Window::start(&data);
    let socket = data.join("kip.sock");
    assert!(socket.exists(), "the owner answers on {}", socket.display());
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&socket)
            .expect("socket")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the socket is its owner's only");
    }
    let owner_pid = owner.child.id();
    let second = Window::start(&data);
    let third = Window::start(&data);

    let counters: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    // The owner would write forever; it is killed long before.
    let mut handles = Vec::new();
    for (index, (w, stop_at)) in [(owner, 100_000), (second, 150), (third, 150)]
        .into_iter()
        .enumerate()
    {
        let acked = counters[index].clone();
        handles.push(std::thread::spawn(move || writer(w, index, acked, stop_at)));
    }
    // Kill the owner while all three are writing.
    let deadline = Instant::now() + Duration::from_secs(120);
    while counters.iter().any(|c| c.load(Ordering::SeqCst) < 25) {
        assert!(Instant::now() < deadline, "the windows did not get going");
        std::thread::sleep(Duration::from_millis(5));
    }
    let before_kill: Vec<usize> = counters.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    // SIGKILL, by pid (its writer thread holds the window): the owner's writer sees
    // the pipe close and stops; the others' requests in flight must go through.
    let killed = Command::new("kill")
        .args(["-9", &owner_pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());

    let mut results = Vec::new();
    for h in handles {
        results.push(h.join().expect("writer thread"));
    }
    let (owner, owner_names, _) = results.remove(0);
    drop(owner);
    let mut acknowledged = owner_names;
    for (index, (w, names, failures)) in results.into_iter().enumerate() {
        assert!(
            failures.is_empty(),
            "window {} saw failed calls across the takeover: {failures:?}",
            index + 1
        );
        assert_eq!(names.len(), 150, "window {} wrote everything", index + 1);
        assert!(
            names.len() > before_kill[index + 1],
            "window {} kept writing after the kill",
            index + 1
        );
        acknowledged.extend(names);
        let status = w.close();
        assert!(
            status.success(),
            "window {} exited with {status}",
            index + 1
        );
    }

    // Every acknowledged write is there, and the store is consistent.
    let check = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(&data)
        .arg("check")
        .output()
        .expect("kip check");
    assert!(
        check.status.success(),
        "kip check after the takeover: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let nexus = Nexus::open(&data).expect("reopen");
    let found = nexus
        .memory()
        .call("open_nodes", &json!({"names": acknowledged}))
        .expect("open_nodes");
    let present: std::collections::HashSet<&str> = found["entities"]
        .as_array()
        .expect("entities")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    let missing: Vec<&String> = acknowledged
        .iter()
        .filter(|n| !present.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes lost: {missing:?}",
        missing.len(),
        acknowledged.len()
    );
    // The KIP writes are Person concepts (the memory tools' are notes).
    let r = nexus
        .execute_json(
            &json!({"command": "FIND(COUNT(?p)) WHERE { ?p {type: \"Person\"} FILTER(STARTS_WITH(?p.name, \"w\")) }"}),
            Access::ReadOnly,
        )
        .to_json();
    let people = r["result"].as_u64().expect("count");
    let kip_names = acknowledged.iter().filter(|n| !is_memory_write(n)).count() as u64;
    assert!(
        people >= kip_names,
        "{people} people for {kip_names} acknowledged KIP writes"
    );
}

/// The third window writes every third entity through `create_entities`.
fn is_memory_write(name: &str) -> bool {
    name.strip_prefix("w2_")
        .and_then(|i| i.parse::<usize>().ok())
        .is_some_and(|i| i % 3 == 0)
}

fn kip_cmd(data: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .expect("run kip")
}

#[test]
fn exec_forwards_to_a_running_server_and_exclusive_commands_say_why_they_wait() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("memory");
    let mut window = Window::start(&data);
    let w = kip_cmd(
        &data,
        &[
            "exec",
            "--format",
            "json",
            r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Grace"} SET ATTRIBUTES { born: 1906 } } }"#,
        ],
    );
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
    // The window's process sees the write made through `kip exec`.
    let r = window
        .call(
            "execute_kip_readonly",
            json!({"command": "FIND(?p.attributes.born) WHERE { ?p {type: \"Person\", name: \"Grace\"} }"}),
        )
        .expect("window alive")
        .expect("find");
    assert_eq!(
        r["result"]["structuredContent"]["result"],
        json!([1906]),
        "{r}"
    );
    // A batch and an error exit code are forwarded as they are.
    let bad = kip_cmd(&data, &["exec", "--format", "json", "FIND(?x"]);
    assert_eq!(bad.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&bad.stdout).expect("json");
    assert_eq!(v["error"]["code"], "KIP_1001");
    // `kip export` needs the directory to itself: it says so instead of a lock error.
    let export = kip_cmd(&data, &["export"]);
    assert!(!export.status.success());
    let err = String::from_utf8_lossy(&export.stderr);
    assert!(err.contains("in use by another kip process"), "{err}");
    assert!(!err.contains("Cannot acquire lock"), "{err}");
    drop(window);
}

/// A server asked to stop (SIGTERM from a service manager, `docker stop` or an MCP
/// client; SIGINT on stdio) ends like one whose client went away: exit 0, the final
/// checkpoint, and no `kip.sock` left in the directory.
#[test]
fn a_server_stopped_by_a_signal_removes_its_socket() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (signal, http) in [("-TERM", false), ("-INT", false), ("-TERM", true)] {
        let data = dir.path().join(format!("memory{signal}{http}"));
        let socket = data.join("kip.sock");
        // Each is serving when the loop goes on, so its signal handlers are in place.
        let (mut window, mut server) = (None, None);
        if http {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .expect("bind")
                .local_addr()
                .expect("addr")
                .port();
            server = Some(
                Command::new(env!("CARGO_BIN_EXE_kip"))
                    .arg("--data")
                    .arg(&data)
                    .args([
                        "serve",
                        "--no-prewarm",
                        "--http",
                        &format!("127.0.0.1:{port}"),
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("start kip serve --http"),
            );
            let deadline = Instant::now() + Duration::from_secs(30);
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(Instant::now() < deadline, "kip serve --http did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
        } else {
            // It answered `initialize`; its client keeps stdin open, so only the signal
            // stops it.
            window = Some(Window::start(&data));
        }
        let child: &mut Child = match (&mut window, &mut server) {
            (Some(w), _) => &mut w.child,
            (None, Some(c)) => c,
            (None, None) => unreachable!("one of them was started"),
        };
        assert!(socket.exists(), "the owner answers on {}", socket.display());
        let sent = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        let status = child.wait().expect("wait");
        assert!(status.success(), "{signal} http={http}: {status}");
        assert!(
            !socket.exists(),
            "{signal} http={http}: kip.sock was left behind"
        );
    }
}

/// However serving ends, the directory is closed: a client that goes away before
/// `initialize` (serving ends with an error) leaves no `kip.sock` behind either.
#[test]
fn a_server_whose_client_leaves_before_initialize_removes_its_socket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("memory");
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(&data)
        .args(["serve", "--no-prewarm"])
        .stdin(Stdio::null())
        .output()
        .expect("run kip serve");
    assert!(
        data.join("nexus.redb").exists(),
        "the server opened the directory"
    );
    assert!(
        !data.join("kip.sock").exists(),
        "kip.sock was left behind ({})",
        String::from_utf8_lossy(&out.stderr)
    );
}
