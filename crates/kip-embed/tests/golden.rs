//! The local embedder against the reference implementation: `tests/data/golden.json`
//! holds the embeddings sentence-transformers computed for 20 texts (short, empty,
//! accented, CJK, emoji, longer than the 256-token window) with the same model
//! directory; every vector here must have a cosine >= 0.999 with its reference.
//!
//! Needs the model unpacked by `scripts/setup-test-env.sh` (or `KIP_TEST_MODEL` set to a
//! model directory), so it is `#[ignore]`d in a plain `cargo test` and included by
//! `scripts/test.sh`.

use kip_embed::{dot, Embedder, EmbedderSpec, LocalEmbedder};
use serde_json::Value;
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    std::env::var_os("KIP_TEST_MODEL").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/models/all-MiniLM-L6-v2"),
        PathBuf::from,
    )
}

fn golden() -> Vec<(String, Vec<f32>)> {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden.json"),
    )
    .expect("golden.json");
    let v: Value = serde_json::from_str(&text).expect("golden.json is JSON");
    v["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| {
            (
                c["text"].as_str().expect("text").to_string(),
                c["embedding"]
                    .as_array()
                    .expect("embedding")
                    .iter()
                    .map(|x| x.as_f64().expect("number") as f32)
                    .collect(),
            )
        })
        .collect()
}

fn open() -> LocalEmbedder {
    let dir = model_dir();
    LocalEmbedder::open(&dir).unwrap_or_else(|e| {
        panic!(
            "{e}\n(the model is unpacked by scripts/setup-test-env.sh into {}; or set KIP_TEST_MODEL)",
            dir.display()
        )
    })
}

#[test]
#[ignore = "needs the model from scripts/setup-test-env.sh"]
fn local_embeddings_match_the_reference_implementation() {
    let e = open();
    assert_eq!(e.dim(), 384);
    assert!(
        e.model_id().starts_with("local:all-MiniLM-L6-v2@"),
        "{}",
        e.model_id()
    );
    let cases = golden();
    let texts: Vec<&str> = cases.iter().map(|(t, _)| t.as_str()).collect();
    // All in one call (batched, padded to each batch's longest text) ...
    let got = e.embed(&texts).expect("embed");
    assert_eq!(got.len(), cases.len());
    for ((text, want), v) in cases.iter().zip(&got) {
        assert_eq!(v.len(), 384);
        let norm = dot(v, v).sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{text:?}: norm {norm}");
        let cos = dot(v, want);
        assert!(cos >= 0.999, "{text:?}: cosine {cos} with the reference");
    }
    // ... and one at a time (no padding; a text of at most 64 tokens goes through the
    // single-text path, src/fast.rs) give the same vectors.
    for (text, want) in &cases {
        let one = e.embed(&[text.as_str()]).expect("embed one");
        let cos = dot(&one[0], want);
        assert!(cos >= 0.999, "{text:?} alone: cosine {cos}");
    }
}

#[test]
#[ignore = "needs the model from scripts/setup-test-env.sh"]
fn the_single_text_path_alone_or_in_a_batch_gives_candles_vectors() {
    let e = open();
    let mut texts: Vec<String> = golden().into_iter().map(|(t, _)| t).collect();
    texts.extend(
        [
            "a",
            "database storage engine",
            "which project did I say was running late because of the vendor",
            "Ünïcödé façade — 東京の天気 🌧️ and numbers 3.14159, 2^64, 1e-9",
        ]
        .map(String::from),
    );
    // 62 words: about 64 tokens with [CLS] and [SEP], around the single-text path's limit.
    texts.push(vec!["memory"; 62].join(" "));
    texts.push(vec!["memory"; 63].join(" "));
    // Enough short texts that a batch fills several forward passes of the single-text
    // path (256 tokens each), with sequences of different lengths side by side.
    for i in 0..40 {
        texts.push(format!(
            "note {i}: {}",
            vec!["the meeting moved to Thursday"; 1 + i % 7].join(", ")
        ));
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // candle, the path checked against the reference above for the long texts.
    let candle = e.embed_through_candle(&refs).expect("candle");
    // All in one call: short texts several per pass of the single-text path.
    let batch = e.embed(&refs).expect("batch");
    for ((text, c), b) in refs.iter().zip(&candle).zip(&batch) {
        // Alone: the single-text path (when short enough).
        let one = e.embed(&[text]).expect("one");
        let norm = dot(&one[0], &one[0]).sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{text:?}: norm {norm}");
        for (what, v) in [("alone", &one[0]), ("in a batch", b)] {
            let cos = dot(v, c);
            assert!(
                cos >= 0.9999,
                "{text:?} {what}: cosine {cos} with candle's vector"
            );
        }
    }
}

#[test]
#[ignore = "needs the model from scripts/setup-test-env.sh"]
fn meaning_is_closer_than_spelling() {
    let e = open();
    let v = e
        .embed(&[
            "database",
            "Embedded key-value store",
            "Chocolate cake recipe",
        ])
        .expect("embed");
    assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.1);
}

#[test]
fn a_missing_or_wrong_model_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = LocalEmbedder::open(&dir.path().join("nope")).expect_err("no dir");
    assert!(err.to_string().contains("not a model directory"), "{err}");
    let err = LocalEmbedder::open(dir.path()).expect_err("no config");
    assert!(err.to_string().contains("config.json"), "{err}");
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"model_type": "t5", "vocab_size": 1, "hidden_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 8, "max_position_embeddings": 8}"#,
    )
    .expect("write");
    let err = LocalEmbedder::open(dir.path()).expect_err("t5");
    assert!(err.to_string().contains("not supported"), "{err}");
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"model_type": "bert", "vocab_size": 1, "hidden_size": 0, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 8, "max_position_embeddings": 8}"#,
    )
    .expect("write");
    let err = LocalEmbedder::open(dir.path()).expect_err("no width");
    assert!(err.to_string().contains("positive multiple"), "{err}");
    let err = "local:".parse::<EmbedderSpec>().expect_err("empty dir");
    assert!(err.to_string().contains("model directory"), "{err}");
}
