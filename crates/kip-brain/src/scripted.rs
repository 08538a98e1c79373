//! A scripted OpenAI-compatible chat endpoint for tests and demos: a small HTTP/1.1
//! server on a loopback port that answers each `POST .../chat/completions` with the
//! next pre-written assistant message (tool calls or text) and records every request
//! body. No network and no model needed; the client under test is the real one.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// What the server answers: `steps` in order, then `repeat` for every later request
/// (`None`: an HTTP 400 "script exhausted").
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// Assistant messages, one per request.
    pub steps: Vec<Value>,
    /// The message answered once the steps are used up.
    pub repeat: Option<Value>,
}

/// A running scripted server (it stops with the process).
#[derive(Debug, Clone)]
pub struct ScriptedServer {
    /// The API base URL (`http://127.0.0.1:PORT/v1`).
    pub url: String,
    seen: Arc<Mutex<Vec<Value>>>,
}

/// An assistant message calling `execute_kip` with `args`.
pub fn kip_call(id: &str, args: &Value) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": "execute_kip", "arguments": args.to_string()}}
    ]})
}

/// An assistant message with text only (the loop's end).
pub fn text(content: &str) -> Value {
    json!({"role": "assistant", "content": content})
}

impl ScriptedServer {
    /// Starts the server on a free loopback port.
    pub fn start(script: Script) -> std::io::Result<ScriptedServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}/v1", listener.local_addr()?);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let script = Arc::new(Mutex::new((script, 0usize)));
        std::thread::Builder::new()
            .name("scripted-llm".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    let (log, script) = (log.clone(), script.clone());
                    let _ = std::thread::Builder::new()
                        .name("scripted-llm-conn".into())
                        .spawn(move || serve(stream, &log, &script));
                }
            })?;
        Ok(ScriptedServer { url, seen })
    }

    /// The request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.seen.lock().map(|g| g.clone()).unwrap_or_default()
    }

    /// The `content` of every tool message in the last request (what the model was
    /// told about its calls).
    pub fn tool_answers(&self) -> Vec<String> {
        self.requests()
            .last()
            .and_then(|r| r["messages"].as_array().cloned())
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

type Shared = Arc<Mutex<(Script, usize)>>;

/// Serves the requests of one (keep-alive) connection.
fn serve(stream: std::net::TcpStream, log: &Mutex<Vec<Value>>, script: &Shared) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; len.min(64 << 20)];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if let Ok(mut g) = log.lock() {
            g.push(serde_json::from_slice(&body).unwrap_or(Value::Null));
        }
        let message = match script.lock() {
            Ok(mut g) => {
                let (s, i) = &mut *g;
                let m = s.steps.get(*i).cloned().or_else(|| s.repeat.clone());
                *i += 1;
                m
            }
            Err(_) => None,
        };
        let (status, body) = match message {
            Some(m) => (
                200,
                json!({"id": "chatcmpl-scripted", "object": "chat.completion", "choices": [{"index": 0, "message": m, "finish_reason": "stop"}]}),
            ),
            None => (400, json!({"error": {"message": "script exhausted"}})),
        };
        let text = body.to_string();
        if write!(
            stream,
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        )
        .is_err()
        {
            return;
        }
    }
}
