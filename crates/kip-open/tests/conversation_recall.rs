//! Recall on conversations with the real model (all-MiniLM-L6-v2), on two sets written
//! for this repository, each turn filed as an `Event` whose `content_summary` is
//! "Speaker: text", with questions whose evidence turns are known:
//!
//! - `tests/data/conversations/`: 473 turns of four two-person conversations in five
//!   sessions each, 94 questions often worded by meaning (the vector side is the
//!   stronger one);
//! - `tests/data/conversations2/`: 1,147 turns of five long, chatty conversations in six
//!   sessions each, the detail a question asks about (a name, a place, a number, a
//!   title) said once, inside longer turns, among many turns on the same threads with
//!   other specifics; 119 questions, 19 with evidence over several turns (the keyword
//!   side is the stronger one, as on the hidden set of long conversations).
//!
//! Each question is asked as `SEARCH CONCEPT :q WITH TYPE "Event" MODE m LIMIT 10`; R@k
//! is the mean share of a question's evidence turns in the top k.
//!
//! Measured in the same run, as baselines: plain BM25 over the turns' text (lower-cased
//! alphanumeric words, k1 1.2, b 0.75, no stop words), exact cosine of the model's
//! embeddings of the same text, and reciprocal-rank fusion of the two (k = 60). The
//! test prints the table (docs/performance.md, "Recall on conversations") and asserts
//! the floors measured when the set was made minus a margin, and that hybrid search
//! beats keyword, semantic and the plain fusion at R@5 and R@10.
//!
//! `KIP_RECALL_DUMP=PREFIX` also writes each question's keyword and semantic rankings
//! (200 deep, with their `_score`s) to `PREFIX-<set>.json` (`conversations`,
//! `conversations2`), the material the fusion's constants were measured on.
//!
//! `#[ignore]`d in a plain `cargo test` (it needs the model that scripts/setup-test-env.sh
//! unpacks); scripts/test.sh includes it.

use kip_embed::Embedder;
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// One dialogue turn: its id ("c1:D2:5"), session date and text ("Speaker: text").
struct Turn {
    id: String,
    date: String,
    speakers: [String; 2],
    text: String,
}

/// A question and the ids of its evidence turns.
struct Question {
    text: String,
    evidence: Vec<String>,
}

/// One recall set: its name (the folder under `tests/data/`), its files' text, and the
/// floors of keyword, semantic and hybrid (R@5, R@10).
struct Set {
    name: &'static str,
    dialogues: &'static str,
    questions: &'static str,
    floors: [(f64, f64); 3],
}

fn load(set: &Set) -> (Vec<Turn>, Vec<Question>) {
    let mut turns = Vec::new();
    let (mut conv, mut speakers) = (String::new(), [String::new(), String::new()]);
    let (mut session, mut date, mut n) = (String::new(), String::new(), 0);
    for line in set.dialogues.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix("== ") {
            let mut parts = rest.split_whitespace();
            session = parts.next().expect("session number").to_string();
            date = parts.next().expect("session date").to_string();
            n = 0;
        } else if let Some(rest) = line.strip_prefix("= ") {
            let parts: Vec<&str> = rest.split_whitespace().collect();
            conv = parts[0].to_string();
            speakers = [parts[1].to_string(), parts[2].to_string()];
        } else {
            n += 1;
            let (speaker, _) = line.split_once(": ").expect("Speaker: text");
            assert!(speakers.iter().any(|s| s == speaker), "{line}");
            turns.push(Turn {
                id: format!("{conv}:D{session}:{n}"),
                date: date.clone(),
                speakers: speakers.clone(),
                text: line.to_string(),
            });
        }
    }
    let ids: HashSet<&str> = turns.iter().map(|t| t.id.as_str()).collect();
    let mut questions = Vec::new();
    for line in set.questions.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split(" | ").collect();
        assert_eq!(parts.len(), 3, "{line}");
        let evidence: Vec<String> = parts[2]
            .split_whitespace()
            .map(|e| format!("{}:{e}", parts[0]))
            .collect();
        for e in &evidence {
            assert!(ids.contains(e.as_str()), "{line}: no turn {e}");
        }
        questions.push(Question {
            text: parts[1].to_string(),
            evidence,
        });
    }
    (turns, questions)
}

/// R@5 and R@10 of rankings (one per question, best first).
#[derive(Clone, Copy)]
struct Recall {
    at5: f64,
    at10: f64,
}

fn recall(questions: &[Question], ranked: &[Vec<String>]) -> Recall {
    let share = |q: &Question, r: &[String], k: usize| {
        let top: HashSet<&str> = r.iter().take(k).map(String::as_str).collect();
        q.evidence
            .iter()
            .filter(|e| top.contains(e.as_str()))
            .count() as f64
            / q.evidence.len() as f64
    };
    let n = questions.len() as f64;
    Recall {
        at5: questions
            .iter()
            .zip(ranked)
            .map(|(q, r)| share(q, r, 5))
            .sum::<f64>()
            / n,
        at10: questions
            .iter()
            .zip(ranked)
            .map(|(q, r)| share(q, r, 10))
            .sum::<f64>()
            / n,
    }
}

/// The words of plain BM25: lower-cased runs of letters and digits.
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Plain BM25 (k1 1.2, b 0.75, no stop words): every turn's score, best first.
fn bm25(turns: &[Turn], query: &str) -> Vec<String> {
    let docs: Vec<Vec<String>> = turns.iter().map(|t| words(&t.text)).collect();
    let n = docs.len() as f64;
    let avgdl = docs.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let mut df: HashMap<&str, f64> = HashMap::new();
    for d in &docs {
        for w in d.iter().map(String::as_str).collect::<HashSet<_>>() {
            *df.entry(w).or_default() += 1.0;
        }
    }
    let mut scored: Vec<(f64, usize)> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let s: f64 = words(query)
                .iter()
                .map(|w| {
                    let f = d.iter().filter(|x| *x == w).count() as f64;
                    let dfw = df.get(w.as_str()).copied().unwrap_or(0.0);
                    let idf = ((n - dfw + 0.5) / (dfw + 0.5) + 1.0).ln();
                    idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * d.len() as f64 / avgdl))
                })
                .sum();
            (s, i)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored
        .into_iter()
        .filter(|(s, _)| *s > 0.0)
        .map(|(_, i)| turns[i].id.clone())
        .collect()
}

/// Every turn by cosine with the query, best first: `(id, cosine)`.
fn by_cosine(turns: &[Turn], vecs: &[Vec<f32>], q: &[f32]) -> Vec<(String, f32)> {
    let mut scored: Vec<(String, f32)> = turns
        .iter()
        .zip(vecs)
        .map(|(t, v)| (t.id.clone(), kip_embed::dot(q, v)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
}

/// Reciprocal-rank fusion (k = 60) of rankings.
fn rrf(lists: &[&[String]]) -> Vec<String> {
    let mut score: HashMap<&str, f64> = HashMap::new();
    for list in lists {
        for (i, id) in list.iter().enumerate() {
            *score.entry(id.as_str()).or_default() += 1.0 / (60.0 + i as f64 + 1.0);
        }
    }
    let mut out: Vec<(&str, f64)> = score.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    out.into_iter().map(|(id, _)| id.to_string()).collect()
}

fn model() -> Arc<kip_embed::LocalEmbedder> {
    let dir = std::env::var_os("KIP_TEST_MODEL").map_or_else(
        || {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/models/all-MiniLM-L6-v2")
        },
        std::path::PathBuf::from,
    );
    Arc::new(
        kip_embed::LocalEmbedder::open(&dir)
            .unwrap_or_else(|e| panic!("{e} (scripts/setup-test-env.sh unpacks the model)")),
    )
}

/// A SEARCH's hits: `(name, _score)`, best first.
fn search(n: &Nexus, q: &str, mode: &str, limit: usize) -> Vec<(String, f64)> {
    let r = n
        .execute_json(
            &json!({
                "command": format!("SEARCH CONCEPT :q WITH TYPE \"Event\" MODE \"{mode}\" LIMIT {limit}"),
                "parameters": {"q": q}
            }),
            Access::ReadOnly,
        )
        .to_json();
    r["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{q}: {r}"))
        .iter()
        .map(|x| {
            (
                x["name"].as_str().unwrap_or_default().to_string(),
                x["metadata"]["_score"].as_f64().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs the model from scripts/setup-test-env.sh"]
fn hybrid_recalls_conversation_turns_better_than_its_parts() {
    run(&Set {
        name: "conversations",
        dialogues: include_str!("data/conversations/dialogues.txt"),
        questions: include_str!("data/conversations/questions.txt"),
        floors: [FLOOR_KEYWORD, FLOOR_SEMANTIC, FLOOR_HYBRID],
    });
}

#[test]
#[ignore = "needs the model from scripts/setup-test-env.sh"]
fn hybrid_recalls_details_of_long_chats_better_than_its_parts() {
    run(&Set {
        name: "conversations2",
        dialogues: include_str!("data/conversations2/dialogues.txt"),
        questions: include_str!("data/conversations2/questions.txt"),
        floors: [FLOOR2_KEYWORD, FLOOR2_SEMANTIC, FLOOR2_HYBRID],
    });
}

/// Files `set`'s turns, prints its table and asserts its floors and that hybrid beats
/// its parts and the plain fusion.
fn run(set: &Set) {
    let (turns, questions) = load(set);
    assert!(turns.len() >= 450 && questions.len() >= 90);
    let model = model();
    let mut n = kip_open::testing::nexus().expect("nexus");
    n.set_embedder(model.clone()).expect("embedder");
    for t in &turns {
        let r = n
            .execute_json(
                &json!({
                    "command": "UPSERT { CONCEPT ?e { {type: \"Event\", name: :name} SET ATTRIBUTES { event_class: \"Conversation\", start_time: :date, participants: :who, content_summary: :text } } }",
                    "parameters": {"name": t.id, "date": t.date, "who": t.speakers, "text": t.text}
                }),
                Access::ReadWrite,
            )
            .to_json();
        assert!(r.get("error").is_none(), "{r}");
    }
    let left = n
        .recall()
        .wait_for_embeddings(Duration::from_secs(600), &mut |_| {})
        .expect("embedding");
    assert_eq!(left, 0);

    // The baselines, over the turns' own text.
    let texts: Vec<&str> = turns.iter().map(|t| t.text.as_str()).collect();
    let vecs = model.embed(&texts).expect("embed turns");
    let qtexts: Vec<&str> = questions.iter().map(|q| q.text.as_str()).collect();
    let qvecs = model.embed(&qtexts).expect("embed questions");
    let plain: Vec<Vec<String>> = questions.iter().map(|q| bm25(&turns, &q.text)).collect();
    let cosines: Vec<Vec<(String, f32)>> =
        qvecs.iter().map(|q| by_cosine(&turns, &vecs, q)).collect();
    let exact: Vec<Vec<String>> = cosines
        .iter()
        .map(|c| c.iter().map(|(id, _)| id.clone()).collect())
        .collect();
    let fusion: Vec<Vec<String>> = plain
        .iter()
        .zip(&exact)
        .map(|(b, c)| rrf(&[b, c]))
        .collect();

    let mut table = Vec::new();
    let mut of_mode = HashMap::new();
    for mode in ["keyword", "semantic", "hybrid"] {
        let ranked: Vec<Vec<String>> = questions
            .iter()
            .map(|q| {
                search(&n, &q.text, mode, 10)
                    .into_iter()
                    .map(|h| h.0)
                    .collect()
            })
            .collect();
        let r = recall(&questions, &ranked);
        of_mode.insert(mode, r);
        table.push((format!("kip MODE \"{mode}\""), r));
    }
    table.push(("plain BM25".to_string(), recall(&questions, &plain)));
    table.push(("exact cosine".to_string(), recall(&questions, &exact)));
    table.push((
        "RRF of plain BM25 and exact cosine".to_string(),
        recall(&questions, &fusion),
    ));
    eprintln!(
        "| {}: {} questions, {} turns | R@5 | R@10 |",
        set.name,
        questions.len(),
        turns.len()
    );
    eprintln!("| --- | ---: | ---: |");
    for (name, r) in &table {
        eprintln!("| {name} | {:.3} | {:.3} |", r.at5, r.at10);
    }

    // The rankings are dumped before the checks, so a failing fusion can be replayed.
    if let Some(prefix) = std::env::var_os("KIP_RECALL_DUMP") {
        let dump: Vec<Value> = questions
            .iter()
            .zip(&cosines)
            .map(|(q, cos)| {
                json!({
                    "question": q.text,
                    "evidence": q.evidence,
                    "keyword": search(&n, &q.text, "keyword", 200),
                    "semantic": search(&n, &q.text, "semantic", 200),
                    "cosine": cos,
                    "bm25": bm25(&turns, &q.text),
                })
            })
            .collect();
        let mut path = prefix;
        path.push(format!("-{}.json", set.name));
        std::fs::write(path, serde_json::to_string(&dump).expect("json")).expect("dump");
    }

    // Hybrid beats each of its parts and the plain fusion of the two signals.
    let hy = of_mode["hybrid"];
    let fused = recall(&questions, &fusion);
    for (other, r) in [
        ("keyword", of_mode["keyword"]),
        ("semantic", of_mode["semantic"]),
        ("RRF of plain BM25 and exact cosine", fused),
    ] {
        assert!(
            hy.at5 > r.at5 && hy.at10 > r.at10,
            "{}: hybrid {:.3}/{:.3} vs {other} {:.3}/{:.3}",
            set.name,
            hy.at5,
            hy.at10,
            r.at5,
            r.at10
        );
    }
    // Floors: measured figures minus a margin (docs/performance.md).
    for (mode, (floor5, floor10)) in ["keyword", "semantic", "hybrid"]
        .into_iter()
        .zip(set.floors)
    {
        let r = of_mode[mode];
        assert!(
            r.at5 >= floor5 && r.at10 >= floor10,
            "{}, {mode}: R@5 {:.3} R@10 {:.3} below the floors {floor5} / {floor10}",
            set.name,
            r.at5,
            r.at10
        );
    }
}

// Measured (2026-11-28, all-MiniLM-L6-v2, R@5 / R@10): keyword 0.649 / 0.691, semantic
// 0.718 / 0.787, hybrid 0.755 / 0.809; plain BM25 0.516 / 0.574, exact cosine 0.681 /
// 0.798, their RRF 0.654 / 0.750. Before issue 50: keyword 0.553 / 0.638, hybrid 0.729
// / 0.798; with the fixed keyword weight 0.3 (2026-11-27): hybrid 0.750 / 0.809.
const FLOOR_KEYWORD: (f64, f64) = (0.62, 0.66);
const FLOOR_SEMANTIC: (f64, f64) = (0.69, 0.76);
const FLOOR_HYBRID: (f64, f64) = (0.72, 0.78);

// The second set, measured (2026-11-28, all-MiniLM-L6-v2, R@5 / R@10): keyword 0.791 /
// 0.876, semantic 0.641 / 0.744, hybrid 0.818 / 0.894; plain BM25 0.561 / 0.703, exact
// cosine 0.555 / 0.658, their RRF 0.631 / 0.781. With the fixed keyword weight 0.3
// (before the weight by matched share): hybrid 0.746 / 0.855, below keyword.
const FLOOR2_KEYWORD: (f64, f64) = (0.76, 0.85);
const FLOOR2_SEMANTIC: (f64, f64) = (0.61, 0.71);
const FLOOR2_HYBRID: (f64, f64) = (0.79, 0.86);
