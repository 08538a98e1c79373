//! `kip bench` end to end at a small scale: the graph is generated and loaded (three
//! times, the median reported), every workload entry runs, and the results file says so.

mod common;

use serde_json::Value;
use std::process::Command;

#[test]
fn bench_loads_the_graph_and_times_every_workload_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let work = dir.path().join("work");
    let status = Command::new(env!("CARGO_BIN_EXE_kip"))
        .current_dir(common::repo())
        .args([
            "bench",
            "--scales",
            "2000",
            "--iterations-factor",
            "0.01",
            "-q",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--work-dir")
        .arg(&work)
        .arg("--capsule-blocks")
        .arg("100")
        .args(["--load-runs", "3"])
        .output()
        .expect("run kip bench");
    assert!(
        status.status.success(),
        "kip bench failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(stderr.contains("concepts loaded in"), "{stderr}");
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("results.json")).expect("results.json"),
    )
    .expect("results are JSON");
    let r = &results["results"][0];
    assert_eq!(r["scale"], 2000);
    // 2,000 generated concepts plus the schema's and Genesis's own.
    let concepts = r["concepts"].as_u64().expect("concepts");
    assert!((2000..2100).contains(&concepts), "{concepts}");
    // About four links per concept, every one of them loaded.
    let props = r["propositions"].as_u64().expect("propositions");
    assert!((6000..10_000).contains(&props), "{props}");
    assert!(r["load_propositions_per_s"].as_f64().expect("rate") > 0.0);
    // Three loads, sorted; the reported time is their median.
    let runs: Vec<f64> = r["load_runs_seconds"]
        .as_array()
        .expect("load runs")
        .iter()
        .map(|t| t.as_f64().expect("seconds"))
        .collect();
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(
        runs.windows(2).all(|w| w[0] <= w[1]) && runs[0] > 0.0,
        "{runs:?}"
    );
    assert_eq!(r["load_seconds"].as_f64(), Some(runs[1]));
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(stdout.contains("(median of 3 loads"), "{stdout}");
    let workload: Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo().join("bench/workload.json")).expect("workload"),
    )
    .expect("workload is JSON");
    for part in ["queries", "writes"] {
        let expected = workload[part].as_array().expect("workload entries");
        let timed = r[part].as_array().expect("timed entries");
        assert_eq!(timed.len(), expected.len(), "{part}");
        assert!(!timed.is_empty());
    }
    // The chart: one line and one legend entry per plotted query.
    let svg = std::fs::read_to_string(out.join("latency.svg")).expect("latency.svg");
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.contains("median latency vs graph size"), "the caption");
    for name in ["point_lookup", "search", "describe_primer"] {
        assert!(svg.contains(name), "legend entry {name}");
    }
    assert!(svg.matches("<polyline").count() >= 3, "the lines");
    // The generated data directory is removed afterwards unless --keep-data.
    assert!(std::fs::read_dir(&work).map_or(true, |mut d| d.next().is_none()));
}

/// What would fail only after the load, or silently measure nothing, is refused first.
#[test]
fn bench_refuses_a_tiny_scale_and_an_unknown_workload_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (args, says) in [
        (
            vec!["--scales", "10"],
            "--scales: 10 concepts is too small a graph",
        ),
        (
            vec!["--scales", "2000", "--only", "point_lookup,pont_lookup"],
            "--only: no workload entry named 'pont_lookup'",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_kip"))
            .current_dir(common::repo())
            .arg("bench")
            .args(&args)
            .arg("--out")
            .arg(dir.path().join("out"))
            .arg("--work-dir")
            .arg(dir.path().join("work"))
            .output()
            .expect("run kip bench");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        // Refused before anything was generated or written.
        assert!(!dir.path().join("work").exists(), "{args:?}");
        assert!(!dir.path().join("out").exists(), "{args:?}");
    }
}
