//! Administrative commands: parse, capsule load / import, export, reindex, check, explain.

use crate::{open_nexus, print_json, read_input};
use anyhow::{Context, Result};
use kip_open::Open;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn spinner(quiet: bool, msg: &'static str) -> indicatif::ProgressBar {
    if quiet {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_message(msg);
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// `kip parse`: `{"result":"ok"}` or the error object.
pub fn parse(file: &str) -> Result<ExitCode> {
    let bytes = read_input(file)?;
    match kip_lang::parse_script_bytes(&bytes) {
        Ok(_) => {
            print_json(&json!({"result": "ok"}));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({"error": e.to_json()}));
            Ok(ExitCode::from(1))
        }
    }
}

/// `kip capsule load` / `kip import`: one transaction, every statement or none.
pub fn capsule_load(data: &Path, file: &str, quiet: bool) -> Result<ExitCode> {
    let bytes = read_input(file)?;
    let nexus = open_nexus(data)?;
    let bar = spinner(quiet, "loading capsule");
    let outcome = kip_lang::utf8(&bytes).and_then(|text| nexus.load_capsule(text));
    bar.finish_and_clear();
    match outcome {
        Ok(results) => {
            print_json(&json!({ "result": results }));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({ "error": e.to_json() }));
            Ok(ExitCode::from(1))
        }
    }
}

/// `kip import FILE`: a capsule (typically a `kip export`) in one transaction, every
/// statement or none. Prints counts, not every created id (an export of a large graph
/// creates millions).
pub fn import_capsule(data: &Path, file: &str, quiet: bool) -> Result<ExitCode> {
    let bytes = read_input(file)?;
    if looks_like_memory_jsonl(&bytes) {
        print_json(&json!({"error": {
            "code": "KIP_1001",
            "message": format!("{file} is a Knowledge Graph Memory Server JSONL file, not a KIP capsule; nothing was imported"),
            "hint": format!("import it with: kip import --memory-jsonl {file}"),
        }}));
        return Ok(ExitCode::from(1));
    }
    let nexus = open_nexus(data)?;
    let bar = spinner(quiet, "importing capsule");
    let (mut statements, mut blocks, mut concepts, mut propositions) = (0u64, 0u64, 0u64, 0u64);
    let count = |v: &serde_json::Value, key: &str| {
        v.get(key)
            .and_then(|a| a.as_array())
            .map_or(0, |a| a.len() as u64)
    };
    let outcome = kip_lang::utf8(&bytes).and_then(|text| {
        nexus.load_capsule_each(text, &mut |v| {
            statements += 1;
            blocks += v.get("blocks").and_then(|b| b.as_u64()).unwrap_or(0);
            concepts += count(&v, "upsert_concept_nodes");
            propositions += count(&v, "upsert_proposition_links");
        })
    });
    bar.finish_and_clear();
    match outcome {
        Ok(()) => {
            print_json(&json!({ "result": {
                "statements": statements,
                "blocks": blocks,
                "upsert_concept_nodes": concepts,
                "upsert_proposition_links": propositions,
            }}));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({ "error": e.to_json() }));
            Ok(ExitCode::from(1))
        }
    }
}

/// Runs an EXPORT command page by page (following `next_cursor`) and writes each
/// page's capsule, separated by blank lines: a script `kip import` loads.
fn export_pages(nexus: &kip_engine::Nexus, query: &str, w: &mut dyn std::io::Write) -> Result<()> {
    use kip_lang::ast::{Command, Slot};
    let cmd = kip_lang::parse_command(query).map_err(|e| anyhow::anyhow!("{e}"))?;
    let Command::Export(mut export) = cmd else {
        anyhow::bail!("--query takes an EXPORT command: EXPORT ?x WHERE {{ ... }} [LIMIT n]");
    };
    loop {
        let page = nexus.execute_command(&Command::Export(export.clone()), false);
        let kip_engine::Outcome::Ok {
            result,
            next_cursor,
        } = page
        else {
            anyhow::bail!("{}", page.to_json()["error"]);
        };
        let capsule = result["capsule"].as_str().unwrap_or_default();
        w.write_all(capsule.as_bytes())
            .and_then(|()| w.write_all(b"\n\n"))
            .context("writing the export")?;
        match next_cursor {
            Some(c) => export.cursor = Some(Slot::Literal(c, export.span)),
            None => return Ok(()),
        }
    }
}

/// `kip export`: the whole graph as a capsule, or the pages of an EXPORT command.
pub fn export(data: &Path, output: Option<PathBuf>, query: Option<&str>) -> Result<ExitCode> {
    let nexus = open_existing(data, "export")?;
    let write = |w: &mut dyn std::io::Write| -> Result<()> {
        match query {
            None => nexus
                .admin()
                .export_capsule_to(w)
                .map_err(|e| anyhow::anyhow!("{}", e.message)),
            Some(q) => export_pages(&nexus, q, w),
        }
    };
    match output {
        Some(path) => {
            // Written next to the target and renamed into place, so a failed export never
            // leaves a truncated capsule under the requested name.
            let dir = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let tmp = tempfile::NamedTempFile::new_in(&dir)
                .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, tmp);
            write(&mut w)?;
            let tmp = w
                .into_inner()
                .map_err(|e| anyhow::anyhow!("writing {}: {}", path.display(), e.error()))?;
            tmp.as_file()
                .sync_all()
                .with_context(|| format!("writing {}", path.display()))?;
            tmp.persist(&path)
                .with_context(|| format!("writing {}", path.display()))?;
            // The rename itself survives a crash once the directory is synced (best
            // effort: not every platform can open a directory).
            if let Ok(d) = std::fs::File::open(&dir) {
                let _ = d.sync_all();
            }
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
            write(&mut w)?;
            std::io::Write::flush(&mut w).context("writing to stdout")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `kip reindex`: rebuild the text index and the attribute value index, with a progress bar.
/// `kip reindex --vectors`: marks every concept whose vector is missing or stale, then
/// waits (with a progress bar) until the worker has embedded them all.
pub fn reindex_vectors(data: &Path, quiet: bool) -> Result<ExitCode> {
    if crate::embedder()?.is_none() {
        anyhow::bail!("reindex --vectors needs an embedder: --embedder local:DIR or openai:URL#MODEL (or KIP_EMBEDDER)");
    }
    if !crate::store_exists(data) {
        return Err(crate::no_store(data, "reindex"));
    }
    let nexus = crate::open_nexus_embedding(data)?;
    let marked = match nexus.recall().mark_stale_embeddings() {
        Ok(n) => n,
        Err(e) => {
            print_json(&json!({"error": e.to_json()}));
            return Ok(ExitCode::from(1));
        }
    };
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("embed {bar:40} {pos}/{len} concepts ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut total = 0u64;
    let r = nexus.recall().wait_for_embeddings(
        std::time::Duration::from_secs(365 * 86_400),
        &mut |left| {
            total = total.max(left);
            bar.set_length(total);
            bar.set_position(total - left);
        },
    );
    bar.finish_and_clear();
    match r {
        Ok(left) => {
            print_json(&json!({"result": {"marked": marked, "not_embedded": left}}));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({"error": e.to_json()}));
            Ok(ExitCode::from(1))
        }
    }
}

pub fn reindex(data: &Path, quiet: bool) -> Result<ExitCode> {
    let nexus = open_existing(data, "reindex")?;
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("reindex {bar:40} {pos}/{len} elements ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let r = nexus.admin().reindex(&mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    match r {
        Ok(()) => {
            print_json(&json!({"result": "ok"}));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({"error": e.to_json()}));
            Ok(ExitCode::from(1))
        }
    }
}

/// Opens an existing nexus for a command that only reads or maintains one (`check`,
/// `export`, `explain`, `reindex`): a directory without a database is refused, since
/// opening it would create an empty store and a mistyped path would look like an empty
/// but healthy memory.
fn open_existing(data: &Path, what: &str) -> Result<kip_engine::Nexus> {
    if !crate::store_exists(data) {
        return Err(crate::no_store(data, what));
    }
    open_nexus(data)
}

/// `kip schema install FILE [--activate]`: a KIP 2.0 Schema Package into the memory.
pub fn schema_install(data: &Path, file: &str, activate: bool, space: &str) -> Result<ExitCode> {
    if space != "default" {
        anyhow::bail!(
            "the memory has one space, \"default\", until memory spaces land; leave --space out"
        );
    }
    let text = if file == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
        s
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?
    };
    let artifact: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{file} is not JSON"))?;
    let nexus = open_nexus(data)?;
    match nexus.admin().install_schema_package(&artifact, activate) {
        Ok(v) => {
            print_json(&json!({ "result": v }));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({ "error": e.to_json() }));
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `kip migrate [--dry-run]`: the migration report (nothing to rewrite: 1.x data is
/// read as 2.0 in place).
pub fn migrate(data: &Path, dry_run: bool) -> Result<ExitCode> {
    let nexus = open_existing(data, "report on")?;
    match nexus.admin().migration_report() {
        Ok(mut v) => {
            v["dry_run"] = json!(dry_run);
            v["changed"] = json!(false);
            print_json(&json!({ "result": v }));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({ "error": e.to_json() }));
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `kip schema list`: the memory's schema packages.
pub fn schema_list(data: &Path) -> Result<ExitCode> {
    let nexus = open_existing(data, "list the schema packages of")?;
    match nexus.admin().schema_packages() {
        Ok(v) => {
            print_json(&json!({ "result": v }));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({ "error": e.to_json() }));
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `kip check`: the integrity checker.
pub fn check(data: &Path) -> Result<ExitCode> {
    if crate::store_exists(data) {
        // A store that does not open (a corrupt log, a newer format) is a finding of
        // the check, reported like the others.
        if let Err(e) = kip_engine::Nexus::open(data) {
            print_json(&json!({"result": {"ok": false, "problems": [e.message], "hint": e.hint}}));
            return Ok(ExitCode::from(1));
        }
    }
    let nexus = open_existing(data, "check")?;
    let problems = nexus
        .admin()
        .check_integrity()
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let ok = problems.is_empty();
    print_json(&json!({"result": {"ok": ok, "problems": problems}}));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `kip storage stats`: the footprint by table and file.
pub fn storage_stats(data: &Path, json: bool) -> Result<ExitCode> {
    let nexus = open_existing(data, "measure")?;
    let report = nexus
        .admin()
        .storage_usage()
        .map_err(|e| anyhow::anyhow!("{}", crate::error_text(&e)))?;
    if json {
        print_json(&json!({ "result": report }));
        return Ok(ExitCode::SUCCESS);
    }
    crate::out(&usage_table(&report));
    Ok(ExitCode::SUCCESS)
}

/// `kip storage compact`: the database file cut to the pages in use.
pub fn storage_compact(data: &Path) -> Result<ExitCode> {
    if data.to_str().is_some_and(kip_open::is_database_url) {
        anyhow::bail!(
            "kip storage compact works on a data directory; a PostgreSQL database is compacted by its server (VACUUM FULL on the kip_* tables of its schema, which locks them while it runs)"
        );
    }
    if !crate::store_exists(data) {
        return Err(crate::no_store(data, "compact"));
    }
    let started = std::time::Instant::now();
    let (before, after) =
        kip_open::compact(data).map_err(|e| anyhow::anyhow!("{}", crate::error_text(&e)))?;
    print_json(&json!({"result": {
        "file_bytes_before": before,
        "file_bytes_after": after,
        "seconds": (started.elapsed().as_secs_f64() * 100.0).round() / 100.0,
    }}));
    Ok(ExitCode::SUCCESS)
}

/// The human form of [`storage_stats`]: the graph's size, each table with its share
/// and bytes per entry, each file with the bytes it uses.
fn usage_table(r: &kip_engine::UsageReport) -> String {
    use std::fmt::Write;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{} at {}: {} concepts, {} links, {:.1} MiB ({:.0} bytes per element)",
        r.backend,
        r.location,
        r.concepts,
        r.links,
        mib(r.usage.total_bytes),
        r.bytes_per_element()
    );
    let _ = writeln!(
        t,
        "{:<28} {:>12} {:>10} {:>10} {:>10} {:>10} {:>9}",
        "table", "entries", "stored", "metadata", "fragment", "total MiB", "B/entry"
    );
    for u in &r.usage.tables {
        let per_entry = if u.entries == 0 {
            0.0
        } else {
            u.total_bytes() as f64 / u.entries as f64
        };
        let _ = writeln!(
            t,
            "{:<28} {:>12} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>9.1}",
            u.name,
            u.entries,
            mib(u.stored_bytes),
            mib(u.metadata_bytes),
            mib(u.fragmented_bytes),
            mib(u.total_bytes()),
            per_entry
        );
    }
    for f in &r.usage.files {
        let _ = writeln!(
            t,
            "file {:<23} {:>10.2} MiB long, {:.2} MiB of disk blocks, {:.2} MiB in use",
            f.name,
            mib(f.bytes),
            mib(f.disk_bytes),
            mib(f.used_bytes)
        );
    }
    t.trim_end().to_string()
}

/// `kip explain`: the plan of a FIND.
pub fn explain(data: &Path, query: &str) -> Result<ExitCode> {
    let nexus = open_existing(data, "explain")?;
    match nexus.explain(query) {
        Ok(lines) => {
            for l in lines {
                crate::out(&l);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({ "error": e.to_json() }));
            Ok(ExitCode::from(1))
        }
    }
}

/// `kip import --memory-jsonl`: with a progress bar; prints what was imported, the
/// placeholder entities created for relation ends the file does not define, and every
/// malformed line left out (with `--skip-bad-lines`) with its number.
pub fn import_memory(
    data: &Path,
    file: &str,
    skip_bad_lines: bool,
    quiet: bool,
) -> Result<ExitCode> {
    let bytes = read_input(file)?;
    let nexus = open_nexus(data)?;
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "importing {bar:40} {pos}/{len} lines ({per_sec})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    };
    let outcome = kip_lang::utf8(&bytes).and_then(|text| {
        nexus
            .memory()
            .import_jsonl_with(text, skip_bad_lines, &mut |done, total| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            })
    });
    bar.finish_and_clear();
    match outcome {
        Ok((report, bad)) => {
            for (line, why) in &bad {
                eprintln!(
                    "kip: line {line} left out: {}",
                    crate::render::printable_lines(why)
                );
            }
            print_json(&json!({"result": {
                "entities": report.entities,
                "relations": report.relations,
                "placeholder_entities": report.placeholders,
                "already_present": report.already_present,
                "skipped_lines": bad.iter().map(|(l, _)| l).collect::<Vec<_>>(),
            }}));
            if !report.placeholders.is_empty() {
                eprintln!(
                    "kip: {} relation end(s) were not defined in the file; they were created as placeholder entities (entityType \"unknown\", metadata placeholder: true): {}",
                    report.placeholders.len(),
                    crate::render::printable(&report.placeholders.iter().take(10).cloned().collect::<Vec<_>>().join(", "))
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            print_json(&json!({"error": e.to_json()}));
            Ok(ExitCode::from(1))
        }
    }
}

/// Whether `bytes` look like a Knowledge Graph Memory Server JSONL file: the first
/// non-empty line is a JSON object with `"type": "entity"` or `"relation"`.
pub fn looks_like_memory_jsonl(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 16)]);
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .is_some_and(|v| {
            matches!(
                v.get("type").and_then(|t| t.as_str()),
                Some("entity" | "relation")
            )
        })
}

/// `kip export --memory-jsonl`.
pub fn export_memory(data: &Path, file: &str) -> Result<ExitCode> {
    let nexus = open_existing(data, "export")?;
    let text = nexus
        .memory()
        .export_jsonl()
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    if file == "-" {
        if !text.is_empty() {
            crate::out_raw(text.trim_end_matches('\n'));
        }
    } else {
        std::fs::write(file, text).with_context(|| format!("writing {file}"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `kip recover --salvage-wal`: opens a nexus whose write-ahead log is corrupt as of
/// the last good record, after keeping a copy of the log.
pub fn salvage_wal(data: &Path) -> Result<ExitCode> {
    if !crate::store_exists(data) {
        anyhow::bail!(
            "no kip-nexus database at {}: there is nothing to salvage into (restore nexus.redb from a backup first)",
            data.display()
        );
    }
    let nexus = kip_engine::Nexus::open_with(data, kip_open::OpenMode::SalvageWal)
        .map_err(|e| anyhow::anyhow!("{}", crate::error_text(&e)))?;
    let problems = nexus
        .admin()
        .check_integrity()
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let (concepts, propositions) = nexus
        .admin()
        .totals()
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    print_json(
        &json!({"result": {"salvaged": true, "concepts": concepts, "propositions": propositions, "problems": problems}}),
    );
    eprintln!("kip: the damaged log was kept next to the database as nexus.wal.damaged-<time>; the writes logged after the damage are not in the nexus");
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
