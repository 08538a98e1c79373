//! `kip bench`: a deterministic synthetic memory graph at several scales, loaded through
//! the public KIP interface, and a fixed workload (the data file `bench/workload.json`)
//! timed on it. Prints a table per scale and writes a JSON file and an SVG plot.

use anyhow::{Context, Result};
use kip_engine::{Access, Nexus};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

/// Arguments of `kip bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Graph sizes in concepts (about 4 links per concept; at least 100).
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
    scales: Vec<usize>,
    /// The workload file.
    #[arg(long, default_value = "bench/workload.json")]
    workload: PathBuf,
    /// Where the JSON results and the SVG plot go.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// Where the generated data directories live (removed afterwards).
    #[arg(long, default_value = "target/bench-data")]
    work_dir: PathBuf,
    /// Random seed of the graph and the parameters.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Multiply every iteration count (e.g. 0.1 for a quick run).
    #[arg(long, default_value_t = 1.0)]
    iterations_factor: f64,
    /// Keep the generated data directories (in `--work-dir`) instead of removing them.
    #[arg(long)]
    keep_data: bool,
    /// Reuse a data directory kept by an earlier `--keep-data` run instead of generating
    /// and loading the graph again (for iterating on query performance; the load figures
    /// are then not measured, and earlier write runs have changed the graph a little).
    #[arg(long)]
    reuse_data: bool,
    /// Run only these workload entries (names from the workload file, comma-separated;
    /// `concurrent_writers` names the 64-writer phase, `none` runs nothing but the load).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Load the graph this many times at each scale (each into a fresh data directory,
    /// the last one kept for the queries) and report the median load time, with the
    /// range: one load is one sample of a machine whose speed drifts.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=20))]
    load_runs: u64,
    /// Blocks per UPSERT capsule (one transaction each) when loading the graph.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    capsule_blocks: u64,
}

/// xorshift64*: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % (n.max(1) as u64)) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Skewed towards small indices (a few hubs get most links).
    fn skewed(&mut self, n: usize) -> usize {
        let u = self.unit();
        ((u * u * u) * n as f64) as usize % n.max(1)
    }
}

const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ra", "ten", "vo", "shi", "del", "par", "quin", "zu", "bel", "tor", "nex",
    "sa", "fi", "gor", "hal", "jun", "ly", "mor", "pe", "ri", "ux",
];

/// 13,824 made-up words (three syllables each); descriptions draw them with a skew, so
/// a few words are common and most are rare, as in real text.
fn vocabulary() -> Vec<String> {
    let mut words = Vec::new();
    for a in SYLLABLES {
        for b in SYLLABLES {
            for c in SYLLABLES {
                words.push(format!("{a}{b}{c}"));
            }
        }
    }
    words
}

struct Sizes {
    person: usize,
    project: usize,
    topic: usize,
    document: usize,
    event: usize,
    category: usize,
}

impl Sizes {
    fn new(n: usize) -> Sizes {
        let category = (n / 100).clamp(10, 1000);
        let rest = n.saturating_sub(category);
        Sizes {
            person: rest * 20 / 100,
            project: rest * 10 / 100,
            topic: rest * 30 / 100,
            document: rest * 20 / 100,
            event: rest - rest * 80 / 100,
            category,
        }
    }
}

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

const SCHEMA: &str = r#"UPSERT {
  CONCEPT ?a { {type: "$ConceptType", name: "Project"} SET ATTRIBUTES { description: "A project people work on" } }
  CONCEPT ?b { {type: "$ConceptType", name: "Topic"} SET ATTRIBUTES { description: "A subject of knowledge" } }
  CONCEPT ?c { {type: "$ConceptType", name: "Document"} SET ATTRIBUTES { description: "A written document" } }
  CONCEPT ?d { {type: "$ConceptType", name: "Category"} SET ATTRIBUTES { description: "A category in a hierarchy" } }
  CONCEPT ?e { {type: "$PropositionType", name: "knows"} SET ATTRIBUTES { description: "knows", subject_types: ["Person"], object_types: ["Person"] } }
  CONCEPT ?f { {type: "$PropositionType", name: "works_on"} SET ATTRIBUTES { description: "works on", subject_types: ["Person"], object_types: ["Project"] } }
  CONCEPT ?g { {type: "$PropositionType", name: "about"} SET ATTRIBUTES { description: "is about", subject_types: ["Document"], object_types: ["Topic"] } }
  CONCEPT ?h { {type: "$PropositionType", name: "in_category"} SET ATTRIBUTES { description: "in category", subject_types: ["Topic"], object_types: ["Category"] } }
  CONCEPT ?i { {type: "$PropositionType", name: "is_subclass_of"} SET ATTRIBUTES { description: "subclass", subject_types: ["Category"], object_types: ["Category"] } }
  CONCEPT ?j { {type: "$PropositionType", name: "related_to"} SET ATTRIBUTES { description: "related", subject_types: ["*"], object_types: ["*"] } }
  CONCEPT ?k { {type: "$PropositionType", name: "cites"} SET ATTRIBUTES { description: "cites", subject_types: ["Document"], object_types: ["Document"] } }
  CONCEPT ?l { {type: "$PropositionType", name: "stated"} SET ATTRIBUTES { description: "stated a fact", subject_types: ["Person"], object_types: ["*"] } }
  CONCEPT ?m { {type: "Domain", name: "Work"} SET ATTRIBUTES { description: "Projects and their categories" } }
}"#;

fn describe(rng: &mut Rng, words: &[String], n: usize) -> String {
    (0..n)
        .map(|_| words[rng.skewed(words.len())].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the generator thread hands to the loading thread.
enum Capsule {
    /// One UPSERT capsule to execute.
    Text(String),
    /// All concept capsules (this many blocks) have been sent; the links follow.
    ConceptsDone(usize),
}

/// Collects blocks into 1,000-block UPSERT capsules and hands each one, as it fills, to
/// the loading thread (a bounded channel: the generator never holds the whole graph in
/// memory nor runs far ahead).
struct Loader<'a> {
    tx: &'a SyncSender<Capsule>,
    blocks: Vec<String>,
    loaded: usize,
    metadata: &'static str,
    size: usize,
}

impl Loader<'_> {
    fn push(&mut self, block: String) -> Result<()> {
        self.blocks.push(block);
        if self.blocks.len() >= self.size {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.blocks.is_empty() {
            return Ok(());
        }
        let text = format!("UPSERT {{\n{}\n}}{}", self.blocks.join("\n"), self.metadata);
        self.tx
            .send(Capsule::Text(text))
            .map_err(|_| anyhow::anyhow!("the loading thread stopped"))?;
        self.loaded += self.blocks.len();
        self.blocks.clear();
        Ok(())
    }
}

/// Generates the graph (concepts first, then links) and loads it through execute_kip.
/// Returns the load time and the numbers of concept and link blocks.
///
/// The capsule texts are generated on a second thread while this one executes them, as
/// a client with its capsules ready (read from files, or produced by another process)
/// would send them: the time measured is the engine's, not the generator's (about 7% of
/// a 1M load when both ran on one thread).
fn load(nexus: &Nexus, n: usize, seed: u64, size: usize) -> Result<(Duration, usize, usize)> {
    run_ok(nexus, SCHEMA)?;
    let start = Instant::now();
    let (tx, rx) = std::sync::mpsc::sync_channel(2);
    let (concepts, links) = std::thread::scope(|scope| -> Result<(usize, usize)> {
        let generator = scope.spawn(move || generate(&tx, n, seed, size));
        let loaded = (|| -> Result<()> {
            for capsule in rx {
                match capsule {
                    Capsule::Text(text) => {
                        run_ok(nexus, &text)?;
                    }
                    Capsule::ConceptsDone(blocks) => eprintln!(
                        "[{n}] {blocks} concepts loaded in {:.1}s",
                        start.elapsed().as_secs_f64()
                    ),
                }
            }
            Ok(())
        })();
        // On a failed load the receiver is gone, so the generator's next send fails and
        // it stops; its own error is then only an echo of this one.
        let generated = generator
            .join()
            .map_err(|_| anyhow::anyhow!("the capsule generator panicked"))?;
        loaded?;
        generated
    })?;
    Ok((start.elapsed(), concepts, links))
}

/// Generates the capsules of the graph (concepts first, then links) into `tx`; returns
/// the numbers of concept and link blocks.
fn generate(tx: &SyncSender<Capsule>, n: usize, seed: u64, size: usize) -> Result<(usize, usize)> {
    let s = Sizes::new(n);
    let words = vocabulary();
    let mut rng = Rng(seed | 1);
    let mut concepts = Loader {
        tx,
        blocks: Vec::with_capacity(size),
        loaded: 0,
        metadata: " WITH METADATA { source: \"kip-bench\" }",
        size,
    };
    let concept = |t: &str, name: String, attrs: String| {
        format!(
            "CONCEPT {{ {{type: {}, name: {}}} SET ATTRIBUTES {{ {attrs} }} }}",
            q(t),
            q(&name)
        )
    };
    for i in 0..s.person {
        let d = describe(&mut rng, &words, 6);
        concepts.push(concept(
            "Person",
            format!("person:{i}"),
            format!("description: {}, rank: {}", q(&d), rng.below(100)),
        ))?;
    }
    for i in 0..s.project {
        let d = describe(&mut rng, &words, 8);
        concepts.push(concept(
            "Project",
            format!("project:{i}"),
            format!("description: {}, rank: {}", q(&d), rng.below(100)),
        ))?;
    }
    for i in 0..s.topic {
        let d = describe(&mut rng, &words, 5);
        concepts.push(concept(
            "Topic",
            format!("topic:{i}"),
            format!("description: {}, rank: {}", q(&d), rng.below(100)),
        ))?;
    }
    for i in 0..s.document {
        let d = describe(&mut rng, &words, 10);
        concepts.push(concept(
            "Document",
            format!("document:{i}"),
            format!("description: {}, rank: {}", q(&d), rng.below(100)),
        ))?;
    }
    for i in 0..s.event {
        let day = 1 + rng.below(28);
        let hour = rng.below(24);
        let month = 1 + rng.below(12);
        let summary = describe(&mut rng, &words, 6);
        concepts.push(concept(
            "Event",
            format!("event:{i}"),
            format!("event_class: \"Conversation\", start_time: \"2026-{month:02}-{day:02}T{hour:02}:00:00Z\", content_summary: {}", q(&summary)),
        ))?;
    }
    for i in 0..s.category {
        let d = describe(&mut rng, &words, 3);
        concepts.push(concept(
            "Category",
            format!("category:{i}"),
            format!("description: {}", q(&d)),
        ))?;
    }
    concepts.flush()?;
    tx.send(Capsule::ConceptsDone(concepts.loaded))
        .map_err(|_| anyhow::anyhow!("the loading thread stopped"))?;
    let mut links = Loader {
        tx,
        blocks: Vec::with_capacity(size),
        loaded: 0,
        metadata: "",
        size,
    };
    let c = |t: &str, i: usize| {
        format!(
            "{{type: {}, name: {}}}",
            q(t),
            q(&format!("{}:{i}", t.to_lowercase()))
        )
    };
    let link = |a: String, p: &str, b: String| format!("PROPOSITION {{ ({a}, {}, {b}) }}", q(p));
    let mut about: Vec<(u32, u32)> = Vec::new();
    for i in 0..s.person {
        for _ in 0..4 {
            links.push(link(
                c("Person", i),
                "knows",
                c("Person", rng.skewed(s.person)),
            ))?;
        }
        for _ in 0..rng.below(4) {
            links.push(link(
                c("Person", i),
                "works_on",
                c("Project", rng.skewed(s.project)),
            ))?;
        }
    }
    for i in 0..s.project.min(1000) {
        links.push(link(
            c("Project", i),
            "belongs_to_domain",
            "{type: \"Domain\", name: \"Work\"}".to_string(),
        ))?;
    }
    for i in 0..s.document {
        for _ in 0..3 {
            let t = rng.skewed(s.topic);
            about.push((i as u32, t as u32));
            links.push(link(c("Document", i), "about", c("Topic", t)))?;
        }
        links.push(link(
            c("Document", i),
            "cites",
            c("Document", rng.below(s.document)),
        ))?;
    }
    for i in 0..s.topic {
        links.push(link(
            c("Topic", i),
            "in_category",
            c("Category", rng.skewed(s.category)),
        ))?;
        links.push(link(
            c("Topic", i),
            "related_to",
            c("Topic", rng.below(s.topic)),
        ))?;
    }
    for i in 0..s.event {
        for _ in 0..3 {
            links.push(link(
                c("Event", i),
                "involves",
                c("Person", rng.skewed(s.person)),
            ))?;
        }
        for _ in 0..3 {
            links.push(link(
                c("Event", i),
                "mentions",
                c("Topic", rng.skewed(s.topic)),
            ))?;
        }
    }
    for i in 1..s.category {
        links.push(link(
            c("Category", i),
            "is_subclass_of",
            c("Category", (i - 1) / 4),
        ))?;
    }
    // Higher-order: a person stated that a document is about a topic.
    for i in 0..(s.person / 10) {
        let (d, t) = about[rng.below(about.len())];
        let fact = format!(
            "({}, \"about\", {})",
            c("Document", d as usize),
            c("Topic", t as usize)
        );
        links.push(link(c("Person", i), "stated", fact))?;
    }
    links.flush()?;
    Ok((concepts.loaded, links.loaded))
}

fn run_ok(nexus: &Nexus, cmd: &str) -> Result<Value> {
    let r = nexus
        .execute_json(&json!({ "command": cmd }), Access::ReadWrite)
        .to_json();
    if let Some(e) = r.get("error") {
        anyhow::bail!(
            "benchmark command failed: {e}\n{}",
            cmd.chars().take(300).collect::<String>()
        );
    }
    Ok(r)
}

struct Params<'a> {
    sizes: &'a Sizes,
    words: &'a [String],
    rng: Rng,
    fresh: usize,
}

impl Params<'_> {
    fn value(&mut self, template: &str) -> Value {
        let s = self.sizes;
        let v = match template {
            "{person}" => format!("person:{}", self.rng.below(s.person)),
            "{project}" => format!("project:{}", self.rng.below(s.project)),
            "{topic}" => format!("topic:{}", self.rng.below(s.topic)),
            "{document}" => format!("document:{}", self.rng.below(s.document)),
            "{category}" => format!("category:{}", self.rng.below(s.category)),
            "{word}" => self.words[self.rng.skewed(self.words.len())].clone(),
            "{wordprefix}" => self.words[self.rng.skewed(self.words.len())]
                .chars()
                .take(4)
                .collect(),
            "{new}" => {
                self.fresh += 1;
                format!("bench-new:{}", self.fresh)
            }
            other => return Value::String(other.to_string()),
        };
        Value::String(v)
    }

    fn bind(&mut self, params: &Value) -> Value {
        let mut m = Map::new();
        for (k, v) in params.as_object().into_iter().flatten() {
            let value = match v.as_str() {
                Some(t) => self.value(t),
                None => v.clone(),
            };
            m.insert(k.clone(), value);
        }
        Value::Object(m)
    }
}

#[derive(Clone)]
struct Stat {
    name: String,
    median_us: f64,
    p95_us: f64,
    ops: f64,
    n: usize,
}

fn stat(name: &str, mut samples: Vec<Duration>) -> Stat {
    samples.sort();
    let n = samples.len().max(1);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let median = samples.get(n / 2).copied().map(us).unwrap_or(0.0);
    let p95 = samples
        .get((n * 95 / 100).min(n - 1))
        .copied()
        .map(us)
        .unwrap_or(0.0);
    Stat {
        name: name.to_string(),
        median_us: median,
        p95_us: p95,
        ops: if median > 0.0 { 1e6 / median } else { 0.0 },
        n: samples.len(),
    }
}

fn timed(nexus: &Nexus, cmd: &str, params: Value) -> Result<(Duration, Value)> {
    let req = json!({"command": cmd, "parameters": params});
    let t = Instant::now();
    let r = nexus.execute_json(&req, Access::ReadWrite).to_json();
    let d = t.elapsed();
    if let Some(e) = r.get("error") {
        anyhow::bail!("workload command failed: {e}\n{cmd}");
    }
    Ok((d, r))
}

fn dir_size(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    e.metadata()
                        .map(|m| {
                            if m.is_dir() {
                                dir_size(&e.path())
                            } else {
                                m.len()
                            }
                        })
                        .unwrap_or(0)
                })
                .sum()
        })
        .unwrap_or(0)
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn fsync_baseline(dir: &Path) -> Result<Duration> {
    use std::io::Write;
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path)?;
    let mut samples = Vec::new();
    for i in 0..200u32 {
        let t = Instant::now();
        f.write_all(&i.to_le_bytes().repeat(1024))?;
        f.sync_data()?;
        samples.push(t.elapsed());
    }
    drop(f);
    let _ = std::fs::remove_file(&path);
    samples.sort();
    Ok(samples[samples.len() / 2])
}

/// A per-run number (from the clock) for runs on a reused data directory.
fn run_salt() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1
}

/// The bulk-load measurement of one scale.
struct Loaded {
    /// The median of `times` (the upper of the two middle ones for an even count).
    median: Duration,
    /// Every load's time, sorted.
    times: Vec<Duration>,
    concepts: usize,
    links: usize,
}

fn scale_run(args: &BenchArgs, workload: &Value, n: usize) -> Result<Value> {
    let dir = args.work_dir.join(format!("scale-{n}"));
    let reuse = args.reuse_data && dir.join(kip_engine::nexus::DB_FILE).exists();
    if !reuse {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
    }
    let nexus = Nexus::open(&dir).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let loaded = if reuse {
        eprintln!("[{n}] reusing {}", dir.display());
        None
    } else {
        let mut times = Vec::new();
        for run in 1..args.load_runs {
            let extra = args.work_dir.join(format!("scale-{n}-load-{run}"));
            let _ = std::fs::remove_dir_all(&extra);
            std::fs::create_dir_all(&extra)?;
            eprintln!("[{n}] load {run} of {}...", args.load_runs);
            let nx = Nexus::open(&extra).map_err(|e| anyhow::anyhow!("{}", e.message))?;
            let (t, _, _) = load(&nx, n, args.seed, args.capsule_blocks as usize)?;
            drop(nx);
            std::fs::remove_dir_all(&extra)?;
            eprintln!("[{n}] loaded in {:.1}s", t.as_secs_f64());
            times.push(t);
        }
        eprintln!("[{n}] generating and loading the graph...");
        let (t, concepts, links) = load(&nexus, n, args.seed, args.capsule_blocks as usize)?;
        eprintln!("[{n}] loaded in {:.1}s", t.as_secs_f64());
        times.push(t);
        times.sort();
        Some(Loaded {
            median: times[times.len() / 2],
            times,
            concepts,
            links,
        })
    };
    let (c, p) = nexus
        .totals()
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    drop(nexus);
    let mut opens = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let nx = Nexus::open(&dir).map_err(|e| anyhow::anyhow!("{}", e.message))?;
        opens.push(t.elapsed());
        drop(nx);
    }
    opens.sort();
    let nexus = Nexus::open(&dir).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    // As `kip serve` does at start: queries are measured with the database file in the
    // OS page cache (steady state of a running server), not against a cold disk.
    let t = Instant::now();
    let warmed = nexus.prewarm(u64::MAX)?;
    eprintln!(
        "[{n}] prewarmed {:.0} MiB in {:.1}s",
        warmed as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    let sizes = Sizes::new(n);
    let words = vocabulary();
    let mut params = Params {
        sizes: &sizes,
        words: &words,
        rng: Rng((args.seed ^ 0x9e37_79b9_7f4a_7c15) ^ if reuse { run_salt() } else { 0 }),
        // A reused directory already holds the names and deletions of earlier runs: draw
        // new ones, or the writes would be no-ops.
        fresh: if reuse {
            run_salt() as usize % 1_000_000_000
        } else {
            0
        },
    };
    let mut stats = Vec::new();
    reset_peak_rss();
    let selected = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    for qd in workload["queries"].as_array().into_iter().flatten() {
        let name = qd["name"].as_str().unwrap_or("?");
        if !selected(name) {
            continue;
        }
        let cmd = qd["command"].as_str().unwrap_or_default();
        let iters = ((qd["iterations"].as_u64().unwrap_or(10) as f64) * args.iterations_factor)
            .ceil()
            .max(1.0) as usize;
        let paging = qd["paging_rows"].as_u64().map(|v| v as usize);
        let mut samples = Vec::with_capacity(iters);
        // Warm-up.
        let _ = timed(&nexus, cmd, params.bind(&qd["parameters"]))?;
        for _ in 0..iters {
            let p = params.bind(&qd["parameters"]);
            match paging {
                None => samples.push(timed(&nexus, cmd, p)?.0),
                Some(rows) => {
                    let t = Instant::now();
                    let mut got = 0usize;
                    let mut cursor: Option<String> = None;
                    while got < rows {
                        let text = match &cursor {
                            Some(c) => format!("{cmd} CURSOR {}", q(c)),
                            None => cmd.to_string(),
                        };
                        let (_, r) = timed(&nexus, &text, p.clone())?;
                        got += r["result"].as_array().map(Vec::len).unwrap_or(0);
                        match r["next_cursor"].as_str() {
                            Some(c) => cursor = Some(c.to_string()),
                            None => break,
                        }
                    }
                    samples.push(t.elapsed());
                }
            }
        }
        stats.push(stat(name, samples));
    }
    let query_rss = peak_rss_kib();
    let fsync = fsync_baseline(&dir)?;
    let mut writes = Vec::new();
    for wd in workload["writes"].as_array().into_iter().flatten() {
        let name = wd["name"].as_str().unwrap_or("?");
        if !selected(name) {
            continue;
        }
        let cmd = wd["command"].as_str().unwrap_or_default();
        let iters = ((wd["iterations"].as_u64().unwrap_or(10) as f64) * args.iterations_factor)
            .ceil()
            .max(1.0) as usize;
        let mut samples = Vec::new();
        for _ in 0..iters {
            samples.push(timed(&nexus, cmd, params.bind(&wd["parameters"]))?.0);
        }
        writes.push(stat(name, samples));
    }
    // 64 concurrent writers, each committing small UPSERTs.
    let nexus = std::sync::Arc::new(nexus);
    let per_client = ((20.0 * args.iterations_factor).ceil() as usize).max(25);
    let fresh = params.fresh;
    // Three rounds, the median rate: one round lasts well under a second, so a
    // scheduling hiccup of the shared VM would otherwise decide the figure.
    let mut rates = Vec::new();
    let rounds = if selected("concurrent_writers") { 3 } else { 0 };
    for round in 0..rounds {
        // Every client thread is started before the clock starts, so thread start-up
        // is not timed as commit work.
        let ready = std::sync::Barrier::new(65);
        let mut t = Instant::now();
        std::thread::scope(|sc| {
            for client in 0..64 {
                let nexus = nexus.clone();
                let topic = format!("topic:{}", client % sizes.topic.max(1));
                let ready = &ready;
                sc.spawn(move || {
                    ready.wait();
                    for i in 0..per_client {
                        let cmd = format!("UPSERT {{ CONCEPT ?n {{ {{type: \"Document\", name: \"conc:{fresh}:{round}:{client}:{i}\"}} SET PROPOSITIONS {{ (\"about\", {{type: \"Topic\", name: {}}}) }} }} }}", q(&topic));
                        let r = nexus.execute_json(&json!({"command": cmd}), Access::ReadWrite);
                        assert!(!r.has_error(), "concurrent write failed");
                    }
                });
            }
            ready.wait();
            t = Instant::now();
        });
        rates.push((64 * per_client) as f64 / t.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    let concurrent_rate = rates.get(1).copied().unwrap_or(0.0);
    let single_rate = writes
        .iter()
        .find(|w| w.name == "small_upsert")
        .map(|w| w.ops)
        .unwrap_or(0.0);
    let size = dir_size(&dir);
    drop(nexus);
    if !args.keep_data {
        let _ = std::fs::remove_dir_all(&dir);
    }

    let mut table = format!("\n== {n} concepts ({c} concepts, {p} propositions after load) ==\n");
    let _ = writeln!(
        table,
        "{:<28} {:>12} {:>12} {:>12} {:>7}",
        "operation", "median", "p95", "ops/s", "n"
    );
    let fmt_us = |us: f64| {
        if us >= 1000.0 {
            format!("{:.2} ms", us / 1000.0)
        } else {
            format!("{us:.0} us")
        }
    };
    for s in stats.iter().chain(writes.iter()) {
        let _ = writeln!(
            table,
            "{:<28} {:>12} {:>12} {:>12.0} {:>7}",
            s.name,
            fmt_us(s.median_us),
            fmt_us(s.p95_us),
            s.ops,
            s.n
        );
    }
    let load_seconds = loaded.as_ref().map(|l| l.median.as_secs_f64());
    let links_per_s = loaded
        .as_ref()
        .map(|l| l.links as f64 / l.median.as_secs_f64());
    match &loaded {
        Some(l) => {
            let secs = l.median.as_secs_f64();
            let runs = match (l.times.first(), l.times.last()) {
                (Some(lo), Some(hi)) if l.times.len() > 1 => format!(
                    " (median of {} loads, {:.1}-{:.1} s: {:.0}-{:.0} propositions/s)",
                    l.times.len(),
                    lo.as_secs_f64(),
                    hi.as_secs_f64(),
                    l.links as f64 / hi.as_secs_f64(),
                    l.links as f64 / lo.as_secs_f64()
                ),
                _ => String::new(),
            };
            let _ = writeln!(table, "bulk load: {} concepts + {} propositions in {secs:.1} s ({:.0} propositions/s, {:.0} elements/s){runs}", l.concepts, l.links, l.links as f64 / secs, (l.concepts + l.links) as f64 / secs);
        }
        None => {
            let _ = writeln!(table, "bulk load: not measured (reused data directory)");
        }
    }
    let _ = writeln!(
        table,
        "fsync baseline (4 KiB write + fdatasync): {}",
        fmt_us(fsync.as_secs_f64() * 1e6)
    );
    let _ = writeln!(table, "64 concurrent writers: {concurrent_rate:.0} commits/s vs {single_rate:.0} single-client ({:.1}x)", if single_rate > 0.0 { concurrent_rate / single_rate } else { 0.0 });
    let _ = writeln!(
        table,
        "cold open: {}; data dir: {:.1} MiB; peak RSS during queries: {:.0} MiB",
        fmt_us(opens[1].as_secs_f64() * 1e6),
        size as f64 / 1048576.0,
        query_rss as f64 / 1024.0
    );
    println!("{table}");

    let to_json = |s: &Stat| json!({"name": s.name, "median_us": s.median_us, "p95_us": s.p95_us, "ops_per_s": s.ops, "n": s.n});
    Ok(json!({
        "scale": n,
        "concepts": c,
        "propositions": p,
        "load_seconds": load_seconds,
        "load_runs_seconds": loaded.as_ref().map(|l| l.times.iter().map(|t| t.as_secs_f64()).collect::<Vec<_>>()),
        "load_propositions_per_s": links_per_s,
        "queries": stats.iter().map(to_json).collect::<Vec<_>>(),
        "writes": writes.iter().map(to_json).collect::<Vec<_>>(),
        "fsync_baseline_us": fsync.as_secs_f64() * 1e6,
        "concurrent_64_commits_per_s": concurrent_rate,
        "single_client_commits_per_s": single_rate,
        "cold_open_ms": opens[1].as_secs_f64() * 1e3,
        "data_dir_bytes": size,
        "peak_rss_kib_queries": query_rss,
    }))
}

/// An SVG line chart: median latency (log scale) against graph size (log scale).
fn plot(results: &[Value], names: &[&str]) -> String {
    let (w, h, l, r, t, b) = (760.0, 460.0, 70.0, 190.0, 30.0, 50.0);
    let pts: Vec<(f64, f64)> = results
        .iter()
        .flat_map(|res| {
            let n = res["scale"].as_f64().unwrap_or(1.0);
            res["queries"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|q| names.contains(&q["name"].as_str().unwrap_or("")))
                .map(move |q| (n, q["median_us"].as_f64().unwrap_or(1.0)))
        })
        .collect();
    if pts.is_empty() {
        return String::new();
    }
    let (xmin, xmax) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.0), a.1.max(p.0)));
    let (ymin, ymax) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.1), a.1.max(p.1)));
    let (lx0, lx1) = (
        xmin.log10().floor(),
        xmax.log10().ceil().max(xmin.log10().floor() + 1.0),
    );
    let (ly0, ly1) = (ymin.max(1.0).log10().floor(), ymax.max(10.0).log10().ceil());
    let sx = |x: f64| l + (x.log10() - lx0) / (lx1 - lx0) * (w - l - r);
    let sy = |y: f64| h - b - (y.max(1.0).log10() - ly0) / (ly1 - ly0).max(1.0) * (h - t - b);
    let colors = [
        "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666",
    ];
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    let _ = writeln!(s, "<text x=\"{l}\" y=\"18\" font-size=\"14\">kip-nexus: median latency vs graph size (log-log)</text>");
    for e in (lx0 as i32)..=(lx1 as i32) {
        let x = sx(10f64.powi(e));
        let _ = writeln!(s, "<line x1=\"{x:.1}\" y1=\"{t}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#ddd\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">1e{e}</text>", h - b, h - b + 16.0);
    }
    for e in (ly0 as i32)..=(ly1 as i32) {
        let y = sy(10f64.powi(e));
        let label = if e >= 3 {
            format!("{} ms", 10f64.powi(e - 3))
        } else {
            format!("{} us", 10f64.powi(e))
        };
        let _ = writeln!(s, "<line x1=\"{l}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>", w - r, l - 6.0, y + 4.0);
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">concepts in the graph</text>",
        (l + w - r) / 2.0,
        h - 10.0
    );
    for (i, name) in names.iter().enumerate() {
        let color = colors[i % colors.len()];
        let series: Vec<(f64, f64)> = results
            .iter()
            .filter_map(|res| {
                let n = res["scale"].as_f64()?;
                let q = res["queries"]
                    .as_array()?
                    .iter()
                    .find(|q| q["name"] == *name)?;
                Some((sx(n), sy(q["median_us"].as_f64()?)))
            })
            .collect();
        let path: Vec<String> = series
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = writeln!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" ")
        );
        for (x, y) in &series {
            let _ = writeln!(
                s,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{color}\"/>"
            );
        }
        let ly = t + 20.0 + i as f64 * 18.0;
        let _ = writeln!(s, "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"3\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{name}</text>", w - r + 12.0, ly - 4.0, w - r + 30.0, ly);
    }
    s.push_str("</svg>\n");
    s
}

/// Runs the benchmark at every scale.
/// The smallest graph the bench generates: every concept type needs members for the
/// workload's parameters to name.
const MIN_SCALE: usize = 100;

/// Rejects what would fail only after minutes of loading, or silently measure nothing.
fn check_args(args: &BenchArgs, workload: &Value) -> Result<()> {
    if let Some(n) = args.scales.iter().find(|&&n| n < MIN_SCALE) {
        anyhow::bail!(
            "--scales: {n} concepts is too small a graph; each scale must be at least {MIN_SCALE}"
        );
    }
    let mut known: Vec<&str> = ["queries", "writes"]
        .iter()
        .flat_map(|part| workload[part].as_array().into_iter().flatten())
        .filter_map(|e| e["name"].as_str())
        .collect();
    known.extend(["concurrent_writers", "none"]);
    if let Some(bad) = args.only.iter().find(|o| !known.contains(&o.as_str())) {
        anyhow::bail!(
            "--only: no workload entry named '{bad}'; known: {} ('none' runs no query, only the load)",
            known.join(", ")
        );
    }
    Ok(())
}

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    // KIP_LOG (e.g. `kip_engine=debug`) shows the engine's log on stderr, such as the
    // time each checkpoint spends folding the overlay during the load.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("KIP_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .init();
    }
    let workload: Value = serde_json::from_slice(
        &std::fs::read(&args.workload)
            .with_context(|| format!("reading {}", args.workload.display()))?,
    )?;
    check_args(&args, &workload)?;
    std::fs::create_dir_all(&args.out)?;
    let mut results = Vec::new();
    for &n in &args.scales {
        results.push(scale_run(&args, &workload, n)?);
    }
    let machine = json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    });
    let doc = json!({"machine": machine, "seed": args.seed, "results": results});
    let json_path = args.out.join("results.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)?)?;
    let svg = plot(
        &results,
        &[
            "point_lookup",
            "join_selective",
            "join_selective_reversed",
            "hops_1_3",
            "search",
            "describe_primer",
            "optional_left_join",
            "not_anti_join",
        ],
    );
    let svg_path = args.out.join("latency.svg");
    std::fs::write(&svg_path, svg)?;
    eprintln!("wrote {} and {}", json_path.display(), svg_path.display());
    Ok(ExitCode::SUCCESS)
}
