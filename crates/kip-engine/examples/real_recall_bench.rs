//! The vector graph on real embeddings: `cargo run --release -p kip-engine --example
//! real_recall_bench -- N MODEL_DIR [CACHE_FILE]`. Generates N short memory-like
//! sentences from a seeded vocabulary of everyday English, embeds them with the local
//! model (a sentence-transformers directory, e.g. target/models/all-MiniLM-L6-v2; the
//! vectors are kept in CACHE_FILE when given, so a rerun with the same or a smaller N
//! skips the model), builds the
//! HNSW graph over them (threshold lowered to N / 2), then embeds 200 new sentences as
//! queries and reports recall@10 of the graph against the exact search, the median
//! search time of both, and the median time of a whole semantic lookup of a new text
//! (embedding it included).

use kip_embed::Embedder;
use kip_engine::Nexus;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../tests/common/embedders.rs"]
mod embedders;

const PEOPLE: &[&str] = &[
    "Alice",
    "Bob",
    "Carol",
    "Dan",
    "Erin",
    "Frank",
    "Grace",
    "Hugo",
    "Ines",
    "Jack",
    "Kira",
    "Liam",
    "Maya",
    "Noah",
    "Olga",
    "Pablo",
    "Quinn",
    "Rosa",
    "Sam",
    "Tara",
    "my sister",
    "my manager",
    "the landlord",
    "the dentist",
    "our neighbour",
    "the team",
    "the client",
    "my father",
    "the doctor",
    "the teacher",
];
const VERBS: &[&str] = &[
    "asked about",
    "recommended",
    "complained about",
    "forgot",
    "booked",
    "cancelled",
    "paid for",
    "fixed",
    "ordered",
    "returned",
    "reviewed",
    "postponed",
    "planned",
    "finished",
    "lost",
    "found",
    "bought",
    "sold",
    "borrowed",
    "painted",
    "cleaned",
    "moved",
    "rescheduled",
    "approved",
    "rejected",
    "discussed",
    "signed",
    "renewed",
    "sent",
    "printed",
];
const THINGS: &[&str] = &[
    "the quarterly budget",
    "a dinner reservation",
    "the car insurance",
    "the roof repair",
    "a flight to Lisbon",
    "the kitchen sink",
    "the marketing plan",
    "a birthday present",
    "the lease contract",
    "the server migration",
    "a yoga class",
    "the tax return",
    "the wedding venue",
    "a new laptop",
    "the garden fence",
    "the database backup",
    "the school trip",
    "a concert ticket",
    "the medical report",
    "the website redesign",
    "the hiking trip",
    "a piano lesson",
    "the electricity bill",
    "the job interview",
    "the book club",
    "the project deadline",
    "a bike repair",
    "the vaccination",
    "the conference talk",
    "the phone contract",
    "the moving boxes",
    "the holiday photos",
    "a loan application",
    "the team offsite",
    "the security audit",
    "the grocery list",
    "the passport renewal",
    "a gym membership",
    "the podcast episode",
    "the bakery order",
];
const WHEN: &[&str] = &[
    "last Monday",
    "yesterday",
    "this morning",
    "next week",
    "in March",
    "before the holidays",
    "after lunch",
    "on Friday evening",
    "two days ago",
    "at the end of the month",
    "during the call",
    "over the weekend",
];
const DETAILS: &[&str] = &[
    "it was expensive",
    "it took longer than expected",
    "needs a follow-up",
    "was urgent",
    "went well",
    "caused some stress",
    "is still pending",
    "was cheaper online",
    "needs a signature",
    "must be done before the deadline",
    "was a nice surprise",
    "is blocked by the bank",
    "depends on the weather",
    "requires two approvals",
    "was mentioned twice",
    "can wait",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
    fn sentence(&mut self) -> String {
        format!(
            "{} {} {} {}; {}.",
            self.pick(PEOPLE),
            self.pick(VERBS),
            self.pick(THINGS),
            self.pick(WHEN),
            self.pick(DETAILS)
        )
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn embed_all(e: &kip_embed::LocalEmbedder, texts: &[String]) -> Vec<Vec<f32>> {
    let mut out = Vec::with_capacity(texts.len());
    let t = Instant::now();
    for (i, chunk) in texts.chunks(64).enumerate() {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        out.extend(e.embed(&refs).expect("embed"));
        if i % 100 == 0 {
            eprintln!(
                "embedded {} / {} ({:.0} texts/s)",
                out.len(),
                texts.len(),
                out.len() as f64 / t.elapsed().as_secs_f64().max(1e-9)
            );
        }
    }
    out
}

fn main() {
    kip_embed::pin_thread_count();
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let model = args.get(2).expect("MODEL_DIR");
    let e = kip_embed::LocalEmbedder::open(std::path::Path::new(model)).expect("model");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let texts: Vec<String> = (0..n).map(|_| rng.sentence()).collect();
    let distinct: std::collections::HashSet<&String> = texts.iter().collect();
    let vectors: Vec<Vec<f32>> = match args.get(3).map(std::path::Path::new) {
        Some(p) if p.exists() => {
            let mut b = Vec::new();
            std::fs::File::open(p)
                .and_then(|mut f| f.read_to_end(&mut b))
                .expect("cache");
            b.chunks_exact(384 * 4)
                .map(|r| {
                    r.chunks_exact(4)
                        .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                        .collect()
                })
                .collect()
        }
        cache => {
            let t = Instant::now();
            let v = embed_all(&e, &texts);
            println!(
                "embedded {n} texts in {:.0} s ({:.0} texts/s)",
                t.elapsed().as_secs_f64(),
                n as f64 / t.elapsed().as_secs_f64()
            );
            if let Some(p) = cache {
                let mut f = std::fs::File::create(p).expect("cache");
                for x in v.iter().flatten() {
                    f.write_all(&x.to_le_bytes()).expect("write");
                }
            }
            v
        }
    };
    // A cache made for more texts serves fewer (the same generator, in order).
    let mut vectors = vectors;
    assert!(vectors.len() >= n, "the cache holds fewer vectors than N");
    vectors.truncate(n);
    let mut nexus = Nexus::in_memory().expect("nexus");
    nexus
        .set_embedder(Arc::new(embedders::Never(384)))
        .expect("embedder");
    let sem = nexus.semantic().expect("semantic").clone();
    sem.set_ann_min(n / 2);
    for (chunk, vs) in vectors.chunks(10_000).enumerate() {
        let items: Vec<(u64, &str, Vec<f32>)> = vs
            .iter()
            .enumerate()
            .map(|(i, v)| ((chunk * 10_000 + i + 1) as u64, "Note", v.clone()))
            .collect();
        sem.insert_raw(&items);
    }
    let t = Instant::now();
    assert!(sem.wait_for_ann(Duration::from_secs(7200)), "graph");
    let build = t.elapsed();
    let mut qrng = Rng(0x9e37_79b9_7f4a_7c15);
    let queries: Vec<String> = (0..200).map(|_| qrng.sentence()).collect();
    let (mut recall, mut graph_t, mut exact_t, mut whole_t) = (0.0, vec![], vec![], vec![]);
    for q in &queries {
        let t = Instant::now();
        let v = e.embed(&[q.as_str()]).expect("embed").remove(0);
        let a = sem.nearest(&v, 10, None);
        whole_t.push(t.elapsed());
        let t = Instant::now();
        let a2 = sem.nearest(&v, 10, None);
        graph_t.push(t.elapsed());
        assert_eq!(a, a2);
        let t = Instant::now();
        let x = sem.nearest_exact(&v, 10);
        exact_t.push(t.elapsed());
        let want: std::collections::HashSet<u64> = x.iter().map(|y| y.1).collect();
        recall += a.iter().filter(|y| want.contains(&y.1)).count() as f64 / 10.0;
    }
    println!(
        "{n} real embeddings ({} distinct texts): graph built in {:.1} s; recall@10 {:.3} over 200 new queries; search median {:?} (graph) vs {:?} (exact); a new text embedded and searched: median {:?}",
        distinct.len(),
        build.as_secs_f64(),
        recall / queries.len() as f64,
        median(graph_t),
        median(exact_t),
        median(whole_t)
    );
}
