//! `kip bench --kip2-workload FILE`: KIP 2.0 beside KIP 1.x on the same generated graph
//! in the same run (issue 47). Each scale loads the graph twice, through 1.x
//! (`generate::load`) and through 2.0 (`load2::load_kip2`), alternating when
//! `--load-runs` asks for several loads; then each workload entry runs its 1.x text on
//! the 1.x-written graph and its 2.0 text on the 2.0-written graph, in rounds that
//! alternate the two (the same parameters on both sides of a round), so that the
//! machine's drift falls on both. For reference, the 2.0 text also runs on the
//! 1.x-written graph (1.x facts read through their founding assertions) and the 1.x
//! text on the 2.0-written one. Writes run on their own graph only, paired: each of
//! [`WRITE_ROUNDS`] rounds takes 40 fsync samples in both directories, then a block of
//! 1.x writes and a block of 2.0 writes, so that each block is set against an fsync of
//! the same seconds (on this shared machine an `fdatasync` flips between ~0.1 ms and
//! ~4 ms from one second to the next while other work writes to the disk).

use super::*;
use crate::load2::{concept_id, failure, load_kip2, request};
use kip_open::Open;

/// Rounds a read's iterations are split into (fewer when it has fewer iterations).
const ROUNDS: usize = 5;

/// Rounds a write's iterations are split into, each after its own fsync samples.
const WRITE_ROUNDS: usize = 10;

/// The most one text on one graph may spend on its samples (at least one per round):
/// some 2.0 reads scan what 1.x finds by index, and their full iteration counts would
/// take hours at 1M concepts. `n` in the results says how many samples ran.
const SIDE_BUDGET: Duration = Duration::from_secs(20);

/// The figures of one text on one graph.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Side {
    /// Median latency, microseconds (none when the text failed).
    pub median_us: Option<f64>,
    /// 95th percentile latency, microseconds.
    pub p95_us: Option<f64>,
    /// Samples.
    pub n: usize,
    /// Rows (or result objects) the warm-up run answered.
    pub rows: Option<usize>,
    /// The error the text answered, if any (`UnsupportedCapability`: not built yet).
    pub error: Option<String>,
}

/// A read in both dialects.
#[derive(Debug, serde::Serialize)]
pub struct ReadPair {
    /// The workload entry's name.
    pub name: String,
    /// The 1.x text on the graph loaded through 1.x.
    pub kip1: Side,
    /// The 2.0 text on the graph written through 2.0.
    pub kip2: Side,
    /// `kip2` median / `kip1` median.
    pub ratio: Option<f64>,
    /// The most `ratio` may be.
    pub target: Option<f64>,
    /// Whether `ratio` is within `target` (none without a target or a ratio).
    pub met: Option<bool>,
    /// The 2.0 text on the graph loaded through 1.x.
    pub kip2_on_kip1_graph: Side,
    /// The 1.x text on the graph written through 2.0.
    pub kip1_on_kip2_graph: Side,
}

/// A write in both dialects, each on its own graph.
#[derive(Debug, serde::Serialize)]
pub struct WritePair {
    /// The workload entry's name.
    pub name: String,
    /// The 1.x text on the 1.x graph.
    pub kip1: Side,
    /// The 2.0 text on the 2.0 graph.
    pub kip2: Side,
    /// `kip2` median / `kip1` median.
    pub ratio: Option<f64>,
    /// A 4 KiB append plus `fdatasync` in the 1.x graph's directory, microseconds
    /// (median of 40 samples before each round of this entry).
    pub fsync_kip1_dir_us: f64,
    /// The same in the 2.0 graph's directory.
    pub fsync_kip2_dir_us: f64,
    /// `kip1` median / the 1.x directory's fsync baseline.
    pub kip1_fsync_ratio: Option<f64>,
    /// `kip2` median / the 2.0 directory's fsync baseline.
    pub kip2_fsync_ratio: Option<f64>,
    /// The median over rounds of the round's 1.x write median / its fsync median (40
    /// samples just before the round's writes, same directory).
    pub paired_kip1_fsync_ratio: Option<f64>,
    /// The same for the 2.0 writes.
    pub paired_kip2_fsync_ratio: Option<f64>,
    /// The median over rounds of the round's 2.0 write median / its 1.x write median.
    pub paired_ratio: Option<f64>,
    /// The most `paired_kip2_fsync_ratio` may be.
    pub target_fsync: Option<f64>,
    /// Whether `paired_kip2_fsync_ratio` is within `target_fsync`.
    pub met: Option<bool>,
}

/// The two loads.
#[derive(Debug, serde::Serialize)]
pub struct LoadPair {
    /// Every 1.x load's time, seconds, in run order.
    pub kip1_runs_s: Vec<f64>,
    /// Every 2.0 load's time, seconds, in run order (each right after a 1.x load).
    pub kip2_runs_s: Vec<f64>,
    /// Concept blocks generated.
    pub concepts: usize,
    /// Link blocks generated (both rates count these).
    pub links: usize,
    /// Links repeating an earlier tuple: a no-op UPSERT in 1.x, not sent in 2.0.
    pub kip2_duplicates_skipped: usize,
    /// Links per second at the median 1.x load.
    pub kip1_links_per_s: f64,
    /// Links per second at the median 2.0 load.
    pub kip2_links_per_s: f64,
    /// `kip2_links_per_s` / `kip1_links_per_s`.
    pub ratio: f64,
    /// The least `ratio` may be.
    pub target: Option<f64>,
    /// Whether `ratio` reaches `target`.
    pub met: Option<bool>,
}

/// One graph's shape on disk.
#[derive(Debug, serde::Serialize)]
pub struct GraphFigures {
    /// Concepts in the nexus (1.x count).
    pub concepts: u64,
    /// Propositions in the nexus (1.x count).
    pub propositions: u64,
    /// The data directory after the load.
    pub data_dir_bytes: u64,
}

/// One scale of the comparison (an element of `results` in `results-kip2.json`).
#[derive(Debug, serde::Serialize)]
pub struct ScaleComparison {
    /// Concepts generated.
    pub scale: usize,
    /// The graph loaded through 1.x.
    pub kip1_graph: GraphFigures,
    /// The graph written through 2.0.
    pub kip2_graph: GraphFigures,
    /// The loads (none when kept directories were reused).
    pub load: Option<LoadPair>,
    /// The reads.
    pub reads: Vec<ReadPair>,
    /// The writes.
    pub writes: Vec<WritePair>,
    /// The load average when the scale started and when it ended: the machine is
    /// shared, and other work there slows both dialects.
    pub loadavg: [String; 2],
}

/// `results-kip2.json`.
#[derive(Debug, serde::Serialize)]
pub struct ComparisonReport {
    /// Where it ran.
    pub machine: Machine,
    /// The graph's and the parameters' seed.
    pub seed: u64,
    /// The workload file.
    pub workload: String,
    /// One entry per scale.
    pub results: Vec<ScaleComparison>,
}

/// The machine's load average (`/proc/loadavg`: 1, 5 and 15 minutes), or empty.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[derive(Clone, Copy, PartialEq)]
enum Dialect {
    Kip1,
    Kip2,
}

/// One text in one dialect on one graph, with its samples.
struct Run<'a> {
    dialect: Dialect,
    nexus: &'a Nexus,
    text: &'a str,
    samples: Vec<Duration>,
    /// Where each round's samples end in `samples`.
    round_ends: Vec<usize>,
    rows: Option<usize>,
    error: Option<String>,
}

impl<'a> Run<'a> {
    fn new(dialect: Dialect, nexus: &'a Nexus, entry: &'a Value) -> Run<'a> {
        let key = match dialect {
            Dialect::Kip1 => "kip1",
            Dialect::Kip2 => "kip2",
        };
        Run {
            dialect,
            nexus,
            text: entry[key].as_str().unwrap_or_default(),
            samples: Vec::new(),
            round_ends: Vec::new(),
            rows: None,
            error: None,
        }
    }

    /// Runs the text once with `params`: its time and its result, or its error.
    fn once(&self, params: &Value) -> std::result::Result<(Duration, Value), String> {
        let req = match self.dialect {
            Dialect::Kip1 => json!({"command": self.text, "parameters": params}),
            Dialect::Kip2 => request(self.text, params.clone()),
        };
        let t = Instant::now();
        let r = self.nexus.execute_json(&req, Access::ReadWrite).to_json();
        let d = t.elapsed();
        match self.dialect {
            Dialect::Kip1 => match r.get("error") {
                Some(e) => Err(format!(
                    "{}: {}",
                    e["code"].as_str().unwrap_or("?"),
                    e["message"].as_str().unwrap_or("")
                )),
                None => Ok((d, r["result"].clone())),
            },
            Dialect::Kip2 if r["status"] == "succeeded" => {
                Ok((d, r["results"][0]["result"].clone()))
            }
            Dialect::Kip2 => Err(failure(&r)),
        }
    }

    /// The parameters of this side: the shared ones, then (2.0) the entry's
    /// `kip2_parameters`, and names in `kip2_ids` replaced by ids (untimed).
    fn params(&self, shared: &Value, entry: &Value) -> Result<Value> {
        let mut p = shared.as_object().cloned().unwrap_or_default();
        if self.dialect == Dialect::Kip2 {
            for (k, v) in entry["kip2_parameters"].as_object().into_iter().flatten() {
                p.insert(k.clone(), v.clone());
            }
            for (k, ty) in entry["kip2_ids"].as_object().into_iter().flatten() {
                if let (Some(name), Some(ty)) = (p.get(k).and_then(Value::as_str), ty.as_str()) {
                    let id = concept_id(self.nexus, ty, name)?;
                    p.insert(k.clone(), json!(id));
                }
            }
        }
        Ok(Value::Object(p))
    }

    /// Runs the text once per parameter set, unless it failed before or has spent its
    /// share of [`SIDE_BUDGET`] for this round (`round_budget`; one sample at least).
    fn sample(&mut self, all: &[Value], entry: &Value, round_budget: Duration) -> Result<()> {
        let mut spent = Duration::ZERO;
        for (i, shared) in all.iter().enumerate() {
            if self.error.is_some() || (i > 0 && spent >= round_budget) {
                return Ok(());
            }
            let p = self.params(shared, entry)?;
            match self.once(&p) {
                Ok((d, _)) => {
                    spent += d;
                    self.samples.push(d);
                }
                Err(e) => self.error = Some(e),
            }
        }
        Ok(())
    }

    fn warm_up(&mut self, shared: &Value, entry: &Value) -> Result<()> {
        let p = self.params(shared, entry)?;
        match self.once(&p) {
            Ok((_, r)) => {
                self.rows = Some(match &r {
                    // 1.x answers several projections as columns, 2.0 as rows.
                    Value::Array(a) if self.dialect == Dialect::Kip1 && a.len() > 1 => {
                        match a
                            .iter()
                            .map(|c| c.as_array().map(Vec::len))
                            .collect::<Option<Vec<usize>>>()
                        {
                            Some(lens) => lens.into_iter().max().unwrap_or(0),
                            None => a.len(),
                        }
                    }
                    Value::Array(a) => a.len(),
                    Value::Null => 0,
                    _ => 1,
                })
            }
            Err(e) => self.error = Some(e),
        }
        Ok(())
    }

    fn side(self) -> Side {
        let s = stat("", self.samples);
        let measured = self.error.is_none() && s.n > 0;
        Side {
            median_us: measured.then_some(s.median_us),
            p95_us: measured.then_some(s.p95_us),
            n: s.n,
            rows: self.rows,
            error: self.error,
        }
    }
}

/// Runs one entry on its runs in alternating rounds: reads in [`ROUNDS`] rounds after
/// one warm-up run each (which also counts their rows); writes (`paired`) in
/// [`WRITE_ROUNDS`] and no warm-up (a write's first run is a sample, as in the 1.x
/// harness).
/// The 1.x side on its own graph (the first run) must succeed, as every 1.x figure of
/// the harness must.
fn measure_entry(
    args: &BenchArgs,
    params: &mut Params,
    entry: &Value,
    runs: &mut [Run],
    paired: bool,
    between_rounds: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let iters = ((entry["iterations"].as_u64().unwrap_or(10) as f64) * args.iterations_factor)
        .ceil()
        .max(1.0) as usize;
    let rounds = iters.min(if paired { WRITE_ROUNDS } else { ROUNDS });
    let per_round = iters.div_ceil(rounds);
    if !paired {
        let first = params.bind(&entry["parameters"]);
        for r in runs.iter_mut() {
            r.warm_up(&first, entry)?;
        }
    }
    for _ in 0..rounds {
        between_rounds()?;
        let all: Vec<Value> = (0..per_round)
            .map(|_| params.bind(&entry["parameters"]))
            .collect();
        for r in runs.iter_mut() {
            r.sample(&all, entry, SIDE_BUDGET / rounds as u32)?;
            r.round_ends.push(r.samples.len());
        }
    }
    if let Some(e) = &runs[0].error {
        let name = entry["name"].as_str().unwrap_or("?");
        anyhow::bail!(
            "workload entry {name}: the 1.x text failed: {e}\n{}",
            runs[0].text
        );
    }
    Ok(())
}

/// The median of each round's samples, microseconds (none for a run that failed).
fn round_medians(r: &Run) -> Vec<f64> {
    if r.error.is_some() {
        return Vec::new();
    }
    let mut start = 0;
    r.round_ends
        .iter()
        .map(|&end| {
            let m = stat("", r.samples[start..end].to_vec()).median_us;
            start = end;
            m
        })
        .collect()
}

/// The median of `a[i] / b[i]` (none unless both have every round).
fn paired(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.is_empty() || a.len() != b.len() {
        return None;
    }
    let mut r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y.max(1e-3)).collect();
    r.sort_by(f64::total_cmp);
    Some(r[r.len() / 2])
}

fn ratio(a: &Side, b: &Side) -> Option<f64> {
    match (a.median_us, b.median_us) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn open(dir: &Path) -> Result<Nexus> {
    Nexus::open(dir).map_err(|e| anyhow::anyhow!("{}", e.message))
}

fn graph_figures(nexus: &Nexus, dir: &Path) -> Result<GraphFigures> {
    let (concepts, propositions) = nexus
        .admin()
        .totals()
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    Ok(GraphFigures {
        concepts,
        propositions,
        data_dir_bytes: dir_size(dir),
    })
}

/// Loads both graphs `--load-runs` times (1.x then 2.0 in each run; the last run's
/// directories are kept for the queries).
fn load_both(args: &BenchArgs, n: usize, load_target: Option<f64>) -> Result<LoadPair> {
    let size = args.capsule_blocks as usize;
    let (mut t1, mut t2) = (Vec::new(), Vec::new());
    let (mut concepts, mut links, mut duplicates) = (0, 0, 0);
    for run in 1..=args.load_runs {
        let last = run == args.load_runs;
        let suffix = if last { "" } else { "-load" };
        let d1 = location(args, &format!("scale-{n}{suffix}"), true)?;
        let nx = open(&d1)?;
        eprintln!("[{n}] load {run} of {}: 1.x...", args.load_runs);
        let (t, c, l) = load(&nx, n, args.seed, size)?;
        drop(nx);
        eprintln!("[{n}] 1.x loaded in {:.1}s", t.as_secs_f64());
        t1.push(t);
        (concepts, links) = (c, l);
        if !last {
            std::fs::remove_dir_all(&d1)?;
        }
        let d2 = location(args, &format!("scale-{n}-kip2{suffix}"), true)?;
        let nx = open(&d2)?;
        eprintln!("[{n}] load {run} of {}: 2.0...", args.load_runs);
        let l2 = load_kip2(&nx, n, args.seed, size)?;
        drop(nx);
        eprintln!(
            "[{n}] 2.0 written in {:.1}s ({} duplicate links skipped)",
            l2.time.as_secs_f64(),
            l2.duplicates
        );
        anyhow::ensure!(
            (l2.concepts, l2.links) == (c, l),
            "the 2.0 sink saw another graph: {} concepts and {} links against {c} and {l}",
            l2.concepts,
            l2.links
        );
        t2.push(l2.time);
        duplicates = l2.duplicates;
        if !last {
            std::fs::remove_dir_all(&d2)?;
        }
    }
    let median = |ts: &[Duration]| {
        let mut s = ts.to_vec();
        s.sort();
        s[s.len() / 2].as_secs_f64()
    };
    let rate1 = links as f64 / median(&t1);
    let rate2 = links as f64 / median(&t2);
    let ratio = rate2 / rate1;
    Ok(LoadPair {
        kip1_runs_s: t1.iter().map(Duration::as_secs_f64).collect(),
        kip2_runs_s: t2.iter().map(Duration::as_secs_f64).collect(),
        concepts,
        links,
        kip2_duplicates_skipped: duplicates,
        kip1_links_per_s: rate1,
        kip2_links_per_s: rate2,
        ratio,
        target: load_target,
        met: load_target.map(|t| ratio >= t),
    })
}

/// One scale of the comparison.
///
/// Long (about 110 lines): the phases run in a fixed order on the two graphs and
/// report into one result, as `scale_run` does for the 1.x workload.
pub(crate) fn compare_run(args: &BenchArgs, workload: &Value, n: usize) -> Result<ScaleComparison> {
    let loadavg_start = loadavg();
    let (name1, name2) = (format!("scale-{n}"), format!("scale-{n}-kip2"));
    let reuse = args.reuse_data
        && [&name1, &name2]
            .iter()
            .all(|d| args.work_dir.join(d).join(kip_open::DB_FILE).exists());
    let load = if reuse {
        eprintln!(
            "[{n}] reusing {name1} and {name2} in {}",
            args.work_dir.display()
        );
        None
    } else {
        Some(load_both(args, n, workload["load_target"].as_f64())?)
    };
    let (d1, d2) = (
        location(args, &name1, false)?,
        location(args, &name2, false)?,
    );
    let (g1, g2) = (open(&d1)?, open(&d2)?);
    let (kip1_graph, kip2_graph) = (graph_figures(&g1, &d1)?, graph_figures(&g2, &d2)?);
    for g in [&g1, &g2] {
        g.admin().prewarm(u64::MAX)?;
    }
    let sizes = Sizes::new(n);
    let words = vocabulary();
    let mut params = Params {
        sizes: &sizes,
        words: &words,
        rng: Rng((args.seed ^ 0x9e37_79b9_7f4a_7c15) ^ if reuse { run_salt() } else { 0 }),
        fresh: if reuse {
            run_salt() as usize % 1_000_000_000
        } else {
            0
        },
    };
    let selected = |e: &Value| {
        let name = e["name"].as_str().unwrap_or("?");
        args.only.is_empty() || args.only.iter().any(|o| o == name)
    };
    let mut reads = Vec::new();
    for entry in workload["reads"].as_array().into_iter().flatten() {
        if !selected(entry) {
            continue;
        }
        let name = entry["name"].as_str().unwrap_or("?").to_string();
        eprintln!("[{n}] {name}...");
        let mut runs = [
            Run::new(Dialect::Kip1, &g1, entry),
            Run::new(Dialect::Kip2, &g2, entry),
            Run::new(Dialect::Kip2, &g1, entry),
            Run::new(Dialect::Kip1, &g2, entry),
        ];
        measure_entry(args, &mut params, entry, &mut runs, false, &mut || Ok(()))?;
        let [a, b, c, d] = runs.map(Run::side);
        let ratio = ratio(&b, &a);
        let target = entry["target"].as_f64();
        reads.push(ReadPair {
            name,
            met: target.zip(ratio).map(|(t, r)| r <= t),
            kip1: a,
            kip2: b,
            ratio,
            target,
            kip2_on_kip1_graph: c,
            kip1_on_kip2_graph: d,
        });
    }
    let mut writes = Vec::new();
    for entry in workload["writes"].as_array().into_iter().flatten() {
        if !selected(entry) {
            continue;
        }
        let name = entry["name"].as_str().unwrap_or("?").to_string();
        eprintln!("[{n}] {name}...");
        let mut runs = [
            Run::new(Dialect::Kip1, &g1, entry),
            Run::new(Dialect::Kip2, &g2, entry),
        ];
        // Each round: 40 fsync samples per directory, then the two blocks of writes.
        let (mut f1, mut f2) = (Vec::new(), Vec::new());
        let (mut r1, mut r2) = (Vec::new(), Vec::new());
        let mut probe = || -> Result<()> {
            let (s1, s2) = (fsync_samples(&d1, 40)?, fsync_samples(&d2, 40)?);
            r1.push(stat("", s1.clone()).median_us);
            r2.push(stat("", s2.clone()).median_us);
            f1.extend(s1);
            f2.extend(s2);
            Ok(())
        };
        measure_entry(args, &mut params, entry, &mut runs, true, &mut probe)?;
        let (w1, w2) = (round_medians(&runs[0]), round_medians(&runs[1]));
        let paired_kip1_fsync_ratio = paired(&w1, &r1);
        let paired_kip2_fsync_ratio = paired(&w2, &r2);
        let paired_ratio = paired(&w2, &w1);
        let [a, b] = runs.map(Run::side);
        let (fsync1, fsync2) = (stat("", f1).median_us, stat("", f2).median_us);
        let over = |s: &Side, f: f64| s.median_us.map(|m| m / f);
        let target_fsync = entry["target_fsync"].as_f64();
        writes.push(WritePair {
            name,
            ratio: ratio(&b, &a),
            fsync_kip1_dir_us: fsync1,
            fsync_kip2_dir_us: fsync2,
            kip1_fsync_ratio: over(&a, fsync1),
            kip2_fsync_ratio: over(&b, fsync2),
            paired_kip1_fsync_ratio,
            paired_kip2_fsync_ratio,
            paired_ratio,
            met: target_fsync
                .zip(paired_kip2_fsync_ratio)
                .map(|(t, r)| r <= t),
            target_fsync,
            kip1: a,
            kip2: b,
        });
    }
    drop((g1, g2));
    if !args.keep_data {
        let _ = std::fs::remove_dir_all(&d1);
        let _ = std::fs::remove_dir_all(&d2);
    }
    let result = ScaleComparison {
        scale: n,
        kip1_graph,
        kip2_graph,
        load,
        reads,
        writes,
        loadavg: [loadavg_start, loadavg()],
    };
    println!("{}", table(&result));
    Ok(result)
}

fn fmt_us(us: Option<f64>) -> String {
    match us {
        Some(us) if us >= 1000.0 => format!("{:.2} ms", us / 1000.0),
        Some(us) => format!("{us:.0} us"),
        None => "-".to_string(),
    }
}

fn fmt_x(r: Option<f64>) -> String {
    r.map_or("-".to_string(), |r| format!("{r:.2}x"))
}

fn fmt_met(m: Option<bool>) -> &'static str {
    match m {
        Some(true) => "met",
        Some(false) => "NOT met",
        None => "-",
    }
}

/// A side's median, or the start of its error.
fn cell(s: &Side) -> String {
    match &s.error {
        Some(e) => e.split(':').next().unwrap_or("error").to_string(),
        None => fmt_us(s.median_us),
    }
}

/// The printed table of one scale.
fn table(r: &ScaleComparison) -> String {
    let mut t = format!(
        "\n== {} concepts: KIP 2.0 beside 1.x (1.x graph {} concepts / {} propositions, {:.1} MiB; 2.0 graph {} / {}, {:.1} MiB) ==\n",
        r.scale,
        r.kip1_graph.concepts,
        r.kip1_graph.propositions,
        r.kip1_graph.data_dir_bytes as f64 / 1048576.0,
        r.kip2_graph.concepts,
        r.kip2_graph.propositions,
        r.kip2_graph.data_dir_bytes as f64 / 1048576.0,
    );
    let _ = writeln!(
        t,
        "{:<24} {:>10} {:>10} {:>8} {:>7} {:>8} | {:>12} {:>12} | rows 1.x/2.0",
        "read (medians)", "1.x", "2.0", "2.0/1.x", "target", "", "2.0 on 1.x", "1.x on 2.0"
    );
    for p in &r.reads {
        let _ = writeln!(
            t,
            "{:<24} {:>10} {:>10} {:>8} {:>7} {:>8} | {:>12} {:>12} | {}/{}",
            p.name,
            cell(&p.kip1),
            cell(&p.kip2),
            fmt_x(p.ratio),
            p.target.map_or("-".into(), |x| format!("<={x}x")),
            fmt_met(p.met),
            cell(&p.kip2_on_kip1_graph),
            cell(&p.kip1_on_kip2_graph),
            p.kip1.rows.map_or("-".into(), |n| n.to_string()),
            p.kip2.rows.map_or("-".into(), |n| n.to_string()),
        );
    }
    for w in &r.writes {
        let _ = writeln!(
            t,
            "{:<24} 1.x {} (fsync {}; paired {} fsync), 2.0 {} (fsync {}; paired {} fsync, target <= {}: {}), 2.0/1.x {} (paired {})",
            w.name,
            cell(&w.kip1),
            fmt_us(Some(w.fsync_kip1_dir_us)),
            fmt_x(w.paired_kip1_fsync_ratio),
            cell(&w.kip2),
            fmt_us(Some(w.fsync_kip2_dir_us)),
            fmt_x(w.paired_kip2_fsync_ratio),
            w.target_fsync.map_or("-".into(), |x| format!("{x}x")),
            fmt_met(w.met),
            fmt_x(w.ratio),
            fmt_x(w.paired_ratio),
        );
    }
    match &r.load {
        Some(l) => {
            let _ = writeln!(
                t,
                "bulk load ({} concepts + {} links): 1.x {:.0} links/s (runs {:?} s), 2.0 {:.0} links/s (runs {:?} s; {} duplicate links not resent), 2.0/1.x {:.2}x (target >= {}: {})",
                l.concepts,
                l.links,
                l.kip1_links_per_s,
                l.kip1_runs_s.iter().map(|s| (s * 100.0).round() / 100.0).collect::<Vec<_>>(),
                l.kip2_links_per_s,
                l.kip2_runs_s.iter().map(|s| (s * 100.0).round() / 100.0).collect::<Vec<_>>(),
                l.kip2_duplicates_skipped,
                l.ratio,
                l.target.map_or("-".into(), |x| format!("{x}x")),
                fmt_met(l.met),
            );
        }
        None => {
            let _ = writeln!(t, "bulk load: not measured (reused data directories)");
        }
    }
    let _ = writeln!(
        t,
        "load average (1/5/15 min) at the start: {}; at the end: {}",
        r.loadavg[0], r.loadavg[1]
    );
    t
}
