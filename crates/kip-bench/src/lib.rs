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

mod generate;
mod kip2;
mod load2;
mod measure;
mod plot;

use generate::*;
pub use kip2::{ComparisonReport, LoadPair, ReadPair, ScaleComparison, Side, WritePair};
use measure::*;
pub use measure::{Machine, Report, ScaleResult, Stat};
use plot::plot;

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
    /// Measure the PostgreSQL backend: each scale's graph goes into the schema
    /// `kip_bench_<scale>` of this database (`postgres://...`; emptied first unless
    /// `--reuse-data`) instead of a directory in `--work-dir`.
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// Blocks per UPSERT capsule (one transaction each) when loading the graph.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    capsule_blocks: u64,
    /// Measure KIP 2.0 beside KIP 1.x with this workload (e.g.
    /// `bench/workload-kip2.json`) instead of `--workload`: each scale's graph is
    /// loaded through 1.x and written through 2.0 (directories `scale-N` and
    /// `scale-N-kip2`), each entry's two texts run in alternating rounds, and the figures
    /// go to `results-kip2.json`.
    #[arg(long, value_name = "FILE")]
    kip2_workload: Option<PathBuf>,
}

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
    let mut known: Vec<&str> = ["queries", "writes", "reads"]
        .iter()
        .flat_map(|part| workload[part].as_array().into_iter().flatten())
        .filter_map(|e| e["name"].as_str())
        .collect();
    if args.kip2_workload.is_none() {
        known.push("concurrent_writers");
    } else if args.postgres.is_some() {
        anyhow::bail!("--kip2-workload measures the embedded store only; leave out --postgres");
    }
    known.push("none");
    if let Some(bad) = args.only.iter().find(|o| !known.contains(&o.as_str())) {
        anyhow::bail!(
            "--only: no workload entry named '{bad}'; known: {} ('none' runs no query, only the load)",
            known.join(", ")
        );
    }
    Ok(())
}

/// Runs `kip bench`: every scale, then `results.json` and `latency.svg` in `--out`.
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
    let file = args.kip2_workload.as_ref().unwrap_or(&args.workload);
    let workload: Value = serde_json::from_slice(
        &std::fs::read(file).with_context(|| format!("reading {}", file.display()))?,
    )
    .with_context(|| format!("parsing {}", file.display()))?;
    check_args(&args, &workload)?;
    std::fs::create_dir_all(&args.out)?;
    if args.kip2_workload.is_some() {
        return run_kip2(&args, &workload, file);
    }
    let mut results = Vec::new();
    for &n in &args.scales {
        results.push(scale_run(&args, &workload, n)?);
    }
    let report = Report {
        machine: machine(),
        seed: args.seed,
        results,
    };
    let json_path = args.out.join("results.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&report)?)?;
    let svg = plot(
        &report.results,
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
    std::fs::write(&svg_path, svg?)?;
    eprintln!("wrote {} and {}", json_path.display(), svg_path.display());
    Ok(ExitCode::SUCCESS)
}

/// `kip bench --kip2-workload FILE`: every scale, then `results-kip2.json` in `--out`.
fn run_kip2(args: &BenchArgs, workload: &Value, file: &Path) -> Result<ExitCode> {
    let mut results = Vec::new();
    for &n in &args.scales {
        results.push(kip2::compare_run(args, workload, n)?);
    }
    let report = ComparisonReport {
        machine: machine(),
        seed: args.seed,
        workload: file.display().to_string(),
        results,
    };
    let json_path = args.out.join("results-kip2.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&report)?)?;
    eprintln!("wrote {}", json_path.display());
    Ok(ExitCode::SUCCESS)
}

fn machine() -> Machine {
    Machine {
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        os: std::env::consts::OS,
        arch: std::env::consts::ARCH,
    }
}
