//! The concept view as an MCP App (SEP-1865), spoken over `kip serve`'s stdio transport
//! as a host would: a client that declares `io.modelcontextprotocol/ui` sees the
//! `show_concept` tool (with `_meta.ui.resourceUri`) and the `ui://` page; a client that
//! does not sees exactly the tools it saw before.

mod common;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
    init: Value,
}

impl Session {
    fn start(data: &std::path::Path, capabilities: Value) -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
            .arg("--data")
            .arg(data)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kip serve");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut s = Session {
            child,
            stdin,
            stdout,
            next: 1,
            init: Value::Null,
        };
        let init = s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": {"name": "host", "version": "1"}}),
        );
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s.init = init;
        s
    }

    fn send(&mut self, msg: Value) {
        writeln!(self.stdin, "{msg}").expect("write");
        self.stdin.flush().expect("flush");
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read");
            assert!(n > 0, "the server closed stdout");
            let v: Value = serde_json::from_str(&line).expect("JSON-RPC line");
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    fn tool_names(&mut self) -> Vec<String> {
        let r = self.request("tools/list", json!({}));
        r["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn seeded() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(common::location(dir.path()))
        .args(["exec", "-q"])
        .arg("UPSERT { CONCEPT ?b { {type: \"Person\", name: \"Bob\"} } CONCEPT ?a { {type: \"Person\", name: \"Alice\"} SET ATTRIBUTES { role: \"engineer\" } SET PROPOSITIONS { (\"belongs_to_domain\", {type: \"Domain\", name: \"CoreSchema\"}) } } }")
        .output()
        .expect("kip exec");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

#[test]
fn a_host_that_renders_mcp_apps_gets_the_concept_view() {
    let dir = seeded();
    let mut s = Session::start(
        &common::location(dir.path()),
        json!({"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}),
    );
    let tools = s.request("tools/list", json!({}));
    let show = tools["result"]["tools"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["name"] == "show_concept"))
        .cloned()
        .expect("show_concept is listed");
    assert_eq!(
        show["_meta"]["ui"]["resourceUri"],
        "ui://kip-nexus/concept.html"
    );
    assert_eq!(show["annotations"]["readOnlyHint"], true);
    let resources = s.request("resources/list", json!({}));
    let page = resources["result"]["resources"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["uri"] == "ui://kip-nexus/concept.html"))
        .cloned()
        .expect("the ui:// resource is listed");
    assert_eq!(page["mimeType"], "text/html;profile=mcp-app");
    let read = s.request(
        "resources/read",
        json!({"uri": "ui://kip-nexus/concept.html"}),
    );
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["mimeType"], "text/html;profile=mcp-app");
    let html = contents["text"].as_str().expect("html");
    assert!(html.contains("ui/initialize") && html.contains("ui/notifications/tool-result"));
    assert!(
        html.contains("tools/call"),
        "the page walks to neighbours through the host"
    );
    assert!(
        !html.contains("innerHTML"),
        "stored strings are rendered as text"
    );
    assert_eq!(contents["_meta"]["ui"]["csp"]["connectDomains"], json!([]));
    // The tool's result is the page's data.
    let r = s.request(
        "tools/call",
        json!({"name": "show_concept", "arguments": {"type": "Person", "name": "Alice"}}),
    );
    let result = &r["result"];
    assert_ne!(result["isError"], true, "{r}");
    let view = &result["structuredContent"];
    assert_eq!(view["concept"]["attributes"]["role"], "engineer");
    assert_eq!(view["outgoing"]["items"][0]["other"]["name"], "CoreSchema");
    assert!(result["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.starts_with("Alice (Person")));
    let missing = s.request(
        "tools/call",
        json!({"name": "show_concept", "arguments": {"type": "Person", "name": "Nobody"}}),
    );
    assert_eq!(missing["result"]["isError"], true);
    assert_eq!(
        missing["result"]["structuredContent"]["error"]["code"],
        "KIP_3002"
    );
    // The server says it speaks the extension.
    assert!(
        s.init["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/ui"].is_object(),
        "{}",
        s.init
    );
}

#[test]
fn hosts_without_mcp_apps_see_the_same_tools_as_before() {
    let dir = seeded();
    let mut plain = Session::start(&common::location(dir.path()), json!({}));
    let names = plain.tool_names();
    assert!(!names.iter().any(|n| n == "show_concept"), "{names:?}");
    assert!(names.iter().any(|n| n == "execute_kip"));
    let resources = plain.request("resources/list", json!({}));
    assert!(!resources.to_string().contains("ui://"), "{resources}");
    drop(plain);
    let mut apps = Session::start(
        &common::location(dir.path()),
        json!({"extensions": {"io.modelcontextprotocol/ui": {}}}),
    );
    let mut with_app = apps.tool_names();
    with_app.retain(|n| n != "show_concept");
    assert_eq!(with_app, names, "only show_concept is added");
}
