//! One scale: load, open, run the workload's queries and writes, the 64-writer phase,
//! and the figures (latency statistics, fsync baseline, memory, sizes) as typed results.

use super::*;
use kip_open::Open;

pub(crate) fn run_ok(nexus: &Nexus, cmd: &str) -> Result<Value> {
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

pub(crate) struct Params<'a> {
    pub(crate) sizes: &'a Sizes,
    pub(crate) words: &'a [String],
    pub(crate) rng: Rng,
    pub(crate) fresh: usize,
}

impl Params<'_> {
    pub(crate) fn value(&mut self, template: &str) -> Value {
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

    /// Expands the text templates of a setup command: `{about_1000}` becomes 1,000
    /// `SET PROPOSITIONS` entries `("about", {type: "Topic", name: "topic:<i>"})` to
    /// distinct topics (fewer when the graph has fewer topics).
    pub(crate) fn expand(&mut self, text: &str) -> String {
        const LINKS: &str = "{about_1000}";
        if !text.contains(LINKS) {
            return text.to_string();
        }
        let topics = self.sizes.topic.max(1);
        let start = self.rng.below(topics);
        let entries: Vec<String> = (0..1000.min(topics))
            .map(|i| {
                format!(
                    "(\"about\", {{type: \"Topic\", name: \"topic:{}\"}})",
                    (start + i) % topics
                )
            })
            .collect();
        text.replace(LINKS, &entries.join(" "))
    }

    pub(crate) fn bind(&mut self, params: &Value) -> Value {
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

/// The latency figures of one workload entry.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Stat {
    /// The workload entry's name.
    pub name: String,
    /// Median latency, microseconds.
    pub median_us: f64,
    /// 95th percentile latency, microseconds.
    pub p95_us: f64,
    /// Operations per second at the median.
    #[serde(rename = "ops_per_s")]
    pub ops: f64,
    /// Samples.
    pub n: usize,
}

/// What one scale measured (an element of `results` in `results.json`).
#[derive(Debug, serde::Serialize)]
pub struct ScaleResult {
    /// Concepts generated.
    pub scale: usize,
    /// Concepts in the nexus after the load (generated plus bootstrap).
    pub concepts: u64,
    /// Propositions in the nexus after the load.
    pub propositions: u64,
    /// Median load time (none when a kept directory was reused).
    pub load_seconds: Option<f64>,
    /// Every load's time, sorted.
    pub load_runs_seconds: Option<Vec<f64>>,
    /// Propositions loaded per second at the median load time.
    pub load_propositions_per_s: Option<f64>,
    /// The reads of the workload.
    pub queries: Vec<Stat>,
    /// The writes of the workload.
    pub writes: Vec<Stat>,
    /// A 4 KiB write plus `fdatasync` on the data directory's file system.
    pub fsync_baseline_us: f64,
    /// Commits per second of 64 concurrent writers (median of three rounds).
    pub concurrent_64_commits_per_s: f64,
    /// Commits per second of one writer (`small_upsert`).
    pub single_client_commits_per_s: f64,
    /// Opening the loaded nexus (median of three).
    pub cold_open_ms: f64,
    /// Size of the data directory.
    pub data_dir_bytes: u64,
    /// Peak resident memory while the queries ran.
    pub peak_rss_kib_queries: u64,
}

/// The machine a report was measured on.
#[derive(Debug, serde::Serialize)]
pub struct Machine {
    /// Logical CPUs.
    pub cpus: usize,
    /// Operating system.
    pub os: &'static str,
    /// CPU architecture.
    pub arch: &'static str,
}

/// `results.json`.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    /// Where it ran.
    pub machine: Machine,
    /// The graph's and the parameters' seed.
    pub seed: u64,
    /// One entry per scale.
    pub results: Vec<ScaleResult>,
}

pub(crate) fn stat(name: &str, mut samples: Vec<Duration>) -> Stat {
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

pub(crate) fn timed(nexus: &Nexus, cmd: &str, params: Value) -> Result<(Duration, Value)> {
    let req = json!({"command": cmd, "parameters": params});
    let t = Instant::now();
    let r = nexus.execute_json(&req, Access::ReadWrite).to_json();
    let d = t.elapsed();
    if let Some(e) = r.get("error") {
        anyhow::bail!("workload command failed: {e}\n{cmd}");
    }
    Ok((d, r))
}

pub(crate) fn dir_size(p: &Path) -> u64 {
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

pub(crate) fn peak_rss_kib() -> u64 {
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

pub(crate) fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

pub(crate) fn fsync_baseline(dir: &Path) -> Result<Duration> {
    let mut samples = fsync_samples(dir, 200)?;
    samples.sort();
    Ok(samples[samples.len() / 2])
}

/// `count` times a 4 KiB append plus `fdatasync` to a probe file in `dir`.
pub(crate) fn fsync_samples(dir: &Path, count: u32) -> Result<Vec<Duration>> {
    use std::io::Write;
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path)?;
    let mut samples = Vec::new();
    for i in 0..count {
        let t = Instant::now();
        f.write_all(&i.to_le_bytes().repeat(1024))?;
        f.sync_data()?;
        samples.push(t.elapsed());
    }
    drop(f);
    let _ = std::fs::remove_file(&path);
    Ok(samples)
}

/// A per-run number (from the clock) for runs on a reused data directory.
pub(crate) fn run_salt() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1
}

/// The bulk-load measurement of one scale.
pub(crate) struct Loaded {
    /// The median of `times` (the upper of the two middle ones for an even count).
    pub(crate) median: Duration,
    /// Every load's time, sorted.
    pub(crate) times: Vec<Duration>,
    pub(crate) concepts: usize,
    pub(crate) links: usize,
}

/// Where the graph of one scale lives (`name`: `scale-{n}` or `scale-{n}-load-{run}`):
/// a directory in `--work-dir`, or a schema of the `--postgres` database (emptied when
/// `fresh`).
pub(crate) fn location(args: &BenchArgs, name: &str, fresh: bool) -> Result<std::path::PathBuf> {
    match &args.postgres {
        Some(url) => {
            let schema = format!("kip_bench_{}", name.replace('-', "_"));
            let url = if fresh {
                kip_open::postgres::fresh_schema(url, &schema)?
            } else {
                kip_open::postgres::url_with_schema(url, &schema)
            };
            Ok(url.into())
        }
        None => {
            let dir = args.work_dir.join(name);
            if fresh {
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir)?;
            }
            Ok(dir)
        }
    }
}

/// One scale of the benchmark: load (or reuse) the graph, prewarm, run the workload,
/// the concurrent writers and the cold open, and collect the results.
///
/// Long (about 270 lines): the phases run in a fixed order on one nexus and report into
/// one result; the script of a benchmark run is read top to bottom here.
pub(crate) fn scale_run(args: &BenchArgs, workload: &Value, n: usize) -> Result<ScaleResult> {
    let reuse = args.reuse_data
        && (args.postgres.is_some()
            || args
                .work_dir
                .join(format!("scale-{n}"))
                .join(kip_open::DB_FILE)
                .exists());
    let dir = location(args, &format!("scale-{n}"), !reuse)?;
    let nexus = Nexus::open(&dir).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let loaded = if reuse {
        eprintln!("[{n}] reusing {}", dir.display());
        None
    } else {
        let mut times = Vec::new();
        for run in 1..args.load_runs {
            let extra = location(args, &format!("scale-{n}-load-{run}"), true)?;
            eprintln!("[{n}] load {run} of {}...", args.load_runs);
            let nx = Nexus::open(&extra).map_err(|e| anyhow::anyhow!("{}", e.message))?;
            let (t, _, _) = load(&nx, n, args.seed, args.capsule_blocks as usize)?;
            drop(nx);
            if args.postgres.is_none() {
                std::fs::remove_dir_all(&extra)?;
            }
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
        .admin()
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
    let warmed = nexus.admin().prewarm(u64::MAX)?;
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
    let fsync = match &args.postgres {
        // The database's disk is not ours to probe; this machine's is the reference.
        Some(_) => {
            std::fs::create_dir_all(&args.work_dir)?;
            fsync_baseline(&args.work_dir)?
        }
        None => fsync_baseline(&dir)?,
    };
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
            let p = params.bind(&wd["parameters"]);
            // An untimed setup with the same parameters (MERGE needs a fresh source).
            if let Some(setup) = wd["setup"].as_str() {
                let setup = params.expand(setup);
                timed(&nexus, &setup, p.clone())?;
            }
            samples.push(timed(&nexus, cmd, p)?.0);
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

    Ok(ScaleResult {
        scale: n,
        concepts: c,
        propositions: p,
        load_seconds,
        load_runs_seconds: loaded
            .as_ref()
            .map(|l| l.times.iter().map(|t| t.as_secs_f64()).collect()),
        load_propositions_per_s: links_per_s,
        queries: stats,
        writes,
        fsync_baseline_us: fsync.as_secs_f64() * 1e6,
        concurrent_64_commits_per_s: concurrent_rate,
        single_client_commits_per_s: single_rate,
        cold_open_ms: opens[1].as_secs_f64() * 1e3,
        data_dir_bytes: size,
        peak_rss_kib_queries: query_rss,
    })
}
