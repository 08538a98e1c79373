//! The `openai:` embedder against a small local HTTP server speaking the embeddings API
//! (`POST /v1/embeddings`), so no network is needed: retries on 5xx/429, the endpoint's
//! error message on a 4xx, the bearer key, batching, and (with the real model, ignored
//! in a plain `cargo test`) the same vectors as the local embedder when the server
//! answers from it.

use kip_embed::{dot, EmbedError, Embedder, EmbedderSpec, LocalEmbedder, OpenAiEmbedder};
use kip_openai::HttpError;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// What the server saw: (authorization header, number of inputs) per request.
type Seen = Arc<Mutex<Vec<(Option<String>, usize)>>>;

/// Serves the embeddings API on a free port. `fail_first` requests get `fail_status`;
/// the others are answered by `answer(texts)`. Returns the base URL and the log.
fn serve(
    fail_first: usize,
    fail_status: u16,
    answer: impl Fn(&[String]) -> Vec<Vec<f32>> + Send + 'static,
) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let seen: Seen = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        let mut served = 0usize;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let mut len = 0usize;
            let mut auth = None;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                let lower = h.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
                if lower.starts_with("authorization:") {
                    auth = Some(h["authorization:".len()..].trim().to_string());
                }
            }
            let mut body = vec![0u8; len];
            let _ = reader.read_exact(&mut body);
            let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let texts: Vec<String> = req["input"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            log.lock().expect("log").push((auth, texts.len()));
            served += 1;
            let (status, out) = if served <= fail_first {
                (
                    fail_status,
                    json!({"error": {"message": format!("simulated {fail_status}")}}),
                )
            } else if req["model"] != "test-model" {
                (404, json!({"error": {"message": "model not found"}}))
            } else {
                let data: Vec<Value> = answer(&texts)
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
                    .collect();
                (
                    200,
                    json!({"object": "list", "data": data, "model": "test-model"}),
                )
            };
            let body = out.to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, seen)
}

/// Vectors that tell texts apart: the length and the first byte, not normalized (the
/// client normalizes).
fn fake(texts: &[String]) -> Vec<Vec<f32>> {
    texts
        .iter()
        .map(|t| {
            vec![
                t.len() as f32 + 1.0,
                f32::from(t.bytes().next().unwrap_or(0)),
                3.0,
            ]
        })
        .collect()
}

#[test]
fn the_client_batches_normalizes_and_sends_the_key() {
    let (url, seen) = serve(0, 500, fake);
    let e = OpenAiEmbedder::connect(&url, "test-model", Some("sk-test".into())).expect("connect");
    assert_eq!(e.dim(), 3);
    assert_eq!(e.model_id(), format!("openai:{url}/embeddings#test-model"));
    let texts: Vec<String> = (0..150).map(|i| format!("text {i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let v = e.embed(&refs).expect("embed");
    assert_eq!(v.len(), 150);
    for (t, x) in texts.iter().zip(&v) {
        assert!((dot(x, x) - 1.0).abs() < 1e-5);
        let want = &fake(std::slice::from_ref(t))[0];
        let n = dot(want, want).sqrt();
        assert!((x[0] - want[0] / n).abs() < 1e-5, "{t}");
    }
    let seen = seen.lock().expect("log").clone();
    // The dimension probe, then 64 + 64 + 22.
    assert_eq!(
        seen.iter().map(|s| s.1).collect::<Vec<_>>(),
        vec![1, 64, 64, 22]
    );
    assert!(seen
        .iter()
        .all(|s| s.0.as_deref() == Some("Bearer sk-test")));
}

#[test]
fn server_errors_are_retried_and_client_errors_explained() {
    // Two 503s, then answers: the retries absorb them.
    let (url, seen) = serve(2, 503, fake);
    let e = OpenAiEmbedder::connect(&url, "test-model", None).expect("connect after retries");
    assert_eq!(e.embed(&["a"]).expect("embed").len(), 1);
    assert_eq!(seen.lock().expect("log").len(), 4);
    assert!(seen.lock().expect("log").iter().all(|s| s.0.is_none()));
    // A 401 is not retried and its message is shown.
    let (url, seen) = serve(usize::MAX, 401, fake);
    let err = OpenAiEmbedder::connect(&url, "test-model", None).expect_err("401");
    assert!(
        matches!(&err, EmbedError::Http(HttpError::Status { status: 401, message, .. }) if message == "simulated 401"),
        "{err}"
    );
    assert_eq!(seen.lock().expect("log").len(), 1);
    // An unknown model.
    let (url, _) = serve(0, 500, fake);
    let err = OpenAiEmbedder::connect(&url, "other", None).expect_err("404");
    assert!(
        matches!(&err, EmbedError::Http(HttpError::Status { status: 404, message, .. }) if message.contains("model not found")),
        "{err}"
    );
    // Nobody listening: a clear error after the retries.
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let spec: EmbedderSpec = format!("openai:http://127.0.0.1:{port}/v1#m")
        .parse()
        .expect("spec");
    let err = spec.open().expect_err("refused");
    assert!(
        matches!(&err, EmbedError::Http(HttpError::Transport { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("embeddings endpoint"), "{err}");
}

#[test]
#[ignore = "needs the model from scripts/setup-test-env.sh"]
fn a_server_answering_from_the_local_model_gives_its_vectors() {
    let dir = std::env::var_os("KIP_TEST_MODEL").map_or_else(
        || {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/models/all-MiniLM-L6-v2")
        },
        std::path::PathBuf::from,
    );
    let local = Arc::new(LocalEmbedder::open(&dir).expect("model"));
    let served = local.clone();
    let (url, _) = serve(0, 500, move |texts| {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        served.embed(&refs).expect("embed")
    });
    let remote =
        OpenAiEmbedder::connect(&format!("{url}/embeddings"), "test-model", None).expect("connect");
    assert_eq!(remote.dim(), 384);
    let texts = ["Embedded key-value store", "a trip abroad", "dessert"];
    let a = local.embed(&texts).expect("local");
    let b = remote.embed(&texts).expect("remote");
    for (x, y) in a.iter().zip(&b) {
        assert!(dot(x, y) > 0.9999);
    }
}
