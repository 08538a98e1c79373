//! Hostile shapes of a single request: each must end in a KIP error or a normal
//! result, never a crash (stack overflow), an unbounded response or a hang.

mod common;
use common::*;
use kip_engine::QueryLimits;
use kip_engine::{Access, Nexus};
use proptest::prelude::*;
use serde_json::json;

/// Runs `f` on a thread with `stack` bytes of stack, as the server's workers do.
fn on_stack<T: Send + 'static>(stack: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("the command must not crash its thread")
}

/// A nexus whose queries give up early (the shapes below are also cartesian products).
fn small_budget() -> Nexus {
    let mut n = nexus();
    n.set_limits(QueryLimits {
        max_work: 200_000,
        ..QueryLimits::default()
    });
    n
}

fn code(v: &serde_json::Value) -> Option<String> {
    v.pointer("/error/code")
        .and_then(|c| c.as_str())
        .map(str::to_string)
}

/// A WHERE body of `n` clauses of one shape.
fn shape(kind: u8, n: usize) -> String {
    let body: Vec<String> = (0..n)
        .map(|i| match kind {
            0 => format!("(?a{i}, \"belongs_to_domain\", ?a{})", i + 1),
            1 => format!("?a{i} {{type: \"Domain\"}}"),
            2 => "OPTIONAL { ?a0 {name: \"CoreSchema\"} }".to_string(),
            3 => "NOT { ?a0 {name: \"nothing\"} }".to_string(),
            _ => "UNION { ?a0 {type: \"Domain\"} }".to_string(),
        })
        .collect();
    let head = if kind >= 2 {
        "?a0 {type: \"Domain\"} "
    } else {
        ""
    };
    format!("FIND(?a0) WHERE {{ {head}{} }}", body.join(" "))
}

fn filter_chain(op: &str, n: usize) -> String {
    let terms: Vec<String> = (0..n).map(|i| format!("?a.name == \"x{i}\"")).collect();
    format!(
        "FIND(?a) WHERE {{ ?a {{type: \"Domain\"}} FILTER({}) }}",
        terms.join(&format!(" {op} "))
    )
}

/// The shapes of the hardening report, far past the limits: refused by the parser with
/// KIP_4002 (not a stack overflow), on any interface.
#[test]
fn flat_chains_past_the_limits_are_refused() {
    let n = nexus();
    let big = [
        filter_chain("||", 3000),
        filter_chain("&&", 5000),
        shape(0, 3000),
        shape(1, 4000),
        shape(2, 10_000),
        shape(3, 10_000),
    ];
    for cmd in big {
        let r = run(&n, &cmd);
        assert_eq!(code(&r).as_deref(), Some("KIP_4002"), "{r}");
        let hint = r
            .pointer("/error/hint")
            .and_then(|h| h.as_str())
            .unwrap_or("");
        assert!(!hint.is_empty(), "{r}");
    }
}

/// At the limits every shape runs (or ends in a budget error) on a thread with the
/// server's worker stack. Run in a debug build, whose frames are several times those of
/// the release build (a nested concept scan: about 18 KiB per level unoptimized), so the
/// release server keeps a wide margin.
#[test]
fn deep_shapes_fit_the_worker_stack() {
    let opts = kip_lang::ParseOptions::default();
    let mut cmds = vec![
        filter_chain("||", opts.max_operators / 2),
        filter_chain("&&", opts.max_operators / 2),
        format!(
            "FIND(?a) WHERE {{ ?a {{type: \"Domain\"}} FILTER({}?a.name == \"x\"{}) }}",
            "!(".repeat(opts.max_depth / 2 - 2),
            ")".repeat(opts.max_depth / 2 - 2)
        ),
    ];
    for kind in 0..5 {
        cmds.push(shape(kind, opts.max_clauses - 1));
    }
    // Nested blocks as deep as allowed, each holding patterns.
    let mut nested = String::from("?a0 {type: \"Domain\"}");
    for i in 0..(opts.max_depth - 2) {
        nested = format!(
            "?a0 {{type: \"Domain\"}} OPTIONAL {{ {nested} (?a0, \"belongs_to_domain\", ?b{i}) }}"
        );
    }
    cmds.push(format!("FIND(?a0) WHERE {{ {nested} }}"));
    for cmd in cmds {
        let r = on_stack(kip_engine::WORKER_STACK_BYTES, move || {
            let n = small_budget();
            let out = n
                .execute_json(&json!({ "command": cmd }), Access::ReadWrite)
                .to_json();
            // The same through DELETE's WHERE (dry run: validated, not applied).
            out
        });
        if let Some(c) = code(&r) {
            assert!(["KIP_4001", "KIP_4002"].contains(&c.as_str()), "{r}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Random flat shapes around the limits: a result or KIP_4002, never a crash.
    #[test]
    fn random_flat_shapes_never_crash(kind in 0u8..7, n in 1usize..1200) {
        let cmd = match kind {
            5 => filter_chain("||", n),
            6 => filter_chain("&&", n),
            k => shape(k, n),
        };
        let r = on_stack(kip_engine::WORKER_STACK_BYTES, move || {
            small_budget().execute_json(&json!({ "command": cmd }), Access::ReadWrite).to_json()
        });
        if let Some(c) = code(&r) {
            prop_assert!(["KIP_4001", "KIP_4002"].contains(&c.as_str()), "{}", r);
        }
    }
}

/// The regression of a 20 KB batch of 500 identical FINDs answered with 68 MB: the
/// response is bounded (the read that would pass the limit is KIP_4002 and the batch
/// stops), the number of commands per batch is bounded, and so is a page.
#[test]
fn responses_batches_and_pages_are_bounded() {
    let mut n = nexus();
    let mut capsule = String::from("UPSERT {");
    for i in 0..300 {
        capsule.push_str(&format!(
            " CONCEPT ?p{i} {{ {{type: \"Person\", name: \"person {i}\"}} SET ATTRIBUTES {{ bio: \"{}\" }} }}",
            "x".repeat(200)
        ));
    }
    capsule.push_str(" }");
    n.load_capsule(&capsule).expect("people");
    n.set_limits(QueryLimits {
        max_response_bytes: 256 * 1024,
        ..QueryLimits::default()
    });
    let find = "FIND(?p) WHERE { ?p {type: \"Person\"} }";
    let cmds = vec![json!(find); 200];
    let r = n
        .execute_json(&json!({ "commands": cmds }), Access::ReadWrite)
        .to_json();
    let out = r["result"].as_array().expect("batch");
    assert!(out.len() < 200, "the batch must stop");
    let last = out.last().expect("some");
    assert_eq!(last["error"]["code"], "KIP_4002", "{last}");
    assert!(last["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("bytes"));
    let size = r.to_string().len();
    assert!(size < 400 * 1024, "response of {size} bytes");
    // Writes are never replaced by the size error: a committed write is reported.
    let mixed = json!({"commands": [find, find, find, find, "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Zed\"} } }"]});
    let r = n.execute_json(&mixed, Access::ReadWrite).to_json();
    let out = r["result"].as_array().expect("batch");
    if out.len() == 5 {
        assert!(out[4].get("error").is_none(), "{}", out[4]);
    } else {
        assert_eq!(out.last().expect("some")["error"]["code"], "KIP_4002");
        // stopped before the UPSERT: it was not run
        assert_eq!(
            ok(
                &n,
                "FIND(COUNT(?p)) WHERE { ?p {type: \"Person\", name: \"Zed\"} }"
            ),
            json!(0)
        );
    }

    // Too many commands: nothing runs.
    let many = vec![json!("UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Many\"} } }"); 257];
    let r = n
        .execute_json(&json!({ "commands": many }), Access::ReadWrite)
        .to_json();
    assert_eq!(code(&r).as_deref(), Some("KIP_4002"), "{r}");
    assert_eq!(
        ok(
            &n,
            "FIND(COUNT(?p)) WHERE { ?p {type: \"Person\", name: \"Many\"} }"
        ),
        json!(0)
    );

    // A giant LIMIT is refused with a hint to page.
    for cmd in [
        "FIND(?p.name) WHERE { ?p {type: \"Person\"} } LIMIT 10001",
        "FIND(?p.name) WHERE { ?p {type: \"Person\"} } LIMIT 18446744073709551615",
        "DESCRIBE CONCEPT TYPES LIMIT 99999999",
    ] {
        let r = run(&n, cmd);
        assert_eq!(code(&r).as_deref(), Some("KIP_4002"), "{cmd}: {r}");
        assert!(r["error"]["hint"].as_str().unwrap_or("").contains("CURSOR"));
    }
    let r = run(
        &n,
        "FIND(?p.name) WHERE { ?p {type: \"Person\"} } LIMIT 10000",
    );
    assert!(r.get("error").is_none(), "{r}");
}

/// A cancelled request starts no further command and stops the running query.
#[test]
fn an_interrupted_request_runs_nothing_more() {
    let n = nexus();
    let interrupt = kip_engine::Interrupt::new();
    interrupt.cancel();
    let budget = kip_engine::Budget {
        deadline: None,
        interrupt: Some(interrupt),
        length: None,
    };
    let r = n
        .execute_json_with(
            &json!({"commands": ["UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Never\"} } }"]}),
            Access::ReadWrite,
            &budget,
        )
        .to_json();
    assert_eq!(r["result"][0]["error"]["code"], "KIP_4001", "{r}");
    assert_eq!(
        ok(
            &n,
            "FIND(COUNT(?p)) WHERE { ?p {type: \"Person\", name: \"Never\"} }"
        ),
        json!(0)
    );
    // A deadline already past: the same.
    let late = kip_engine::Budget {
        deadline: Some(std::time::Instant::now()),
        interrupt: None,
        length: None,
    };
    std::thread::sleep(std::time::Duration::from_millis(2));
    let r = n
        .execute_json_with(
            &json!({"command": "DESCRIBE PRIMER"}),
            Access::ReadWrite,
            &late,
        )
        .to_json();
    assert_eq!(code(&r).as_deref(), Some("KIP_4001"), "{r}");
}

/// A query stopped by its request's deadline names the request's budget, not the
/// per-query limit (10 s by default) that did not bind.
#[test]
fn a_timed_out_request_names_its_own_budget() {
    let mut n = nexus();
    people(&n, 300);
    n.set_limits(QueryLimits {
        max_work: u64::MAX,
        ..QueryLimits::default()
    });
    let budget = kip_engine::Budget::with_timeout(std::time::Duration::from_millis(300));
    // 27 million combinations: far more than 300 ms of work.
    let r = n
        .execute_json_with(
            &json!({"command": "FIND(COUNT(?a)) WHERE { ?a {type: \"Person\"} ?b {type: \"Person\"} ?c {type: \"Person\"} }"}),
            Access::ReadOnly,
            &budget,
        )
        .to_json();
    assert_eq!(code(&r).as_deref(), Some("KIP_4001"), "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("time budget (300 ms)"), "{message}");
    assert!(!message.contains("10"), "{message}");

    // Without a request deadline, the per-query limit is the one named.
    n.set_limits(QueryLimits {
        max_work: u64::MAX,
        timeout: std::time::Duration::from_millis(200),
        ..QueryLimits::default()
    });
    let r = run(
        &n,
        "FIND(COUNT(?a)) WHERE { ?a {type: \"Person\"} ?b {type: \"Person\"} ?c {type: \"Person\"} }",
    );
    assert_eq!(code(&r).as_deref(), Some("KIP_4001"), "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("time limit (200 ms)"), "{message}");
}

/// A dry-run batch is validated cumulatively: a command that depends on an earlier one
/// (a type it registers, a concept it creates) is valid, as it would be for real, and
/// nothing is written.
#[test]
fn dry_run_batches_see_their_earlier_commands() {
    let n = nexus();
    let batch = json!({
        "dry_run": true,
        "commands": [
            "UPSERT { CONCEPT ?t { {type: \"$ConceptType\", name: \"Gadget\"} SET ATTRIBUTES { description: \"a gadget\" } } }",
            "UPSERT { CONCEPT ?g { {type: \"Gadget\", name: \"Widget\"} SET PROPOSITIONS { (\"belongs_to_domain\", {type: \"Domain\", name: \"Unsorted\"}) } } }",
            "FIND(?g.name) WHERE { ?g {type: \"Gadget\"} }",
            "DELETE CONCEPT ?g DETACH WHERE { ?g {type: \"Gadget\", name: \"Widget\"} }"
        ]
    });
    let r = n.execute_json(&batch, Access::ReadWrite).to_json();
    let out = r["result"].as_array().expect("batch");
    assert_eq!(out.len(), 4, "{r}");
    for o in out {
        assert!(o.get("error").is_none(), "{r}");
        assert_eq!(o["result"]["valid"], true);
    }
    assert_eq!(
        out[3]["result"]["effect"]["deleted_concepts"],
        json!(1),
        "{r}"
    );
    // Nothing was written.
    let r = run(
        &n,
        "FIND(?t.name) WHERE { ?t {type: \"$ConceptType\", name: \"Gadget\"} }",
    );
    assert_eq!(r["result"], json!([]), "{r}");
    // And a real error is still found, at its command, stopping the batch.
    let bad = json!({"dry_run": true, "commands": [
        "UPSERT { CONCEPT ?g { {type: \"Gadget\", name: \"Widget\"} } }",
        "DESCRIBE PRIMER"
    ]});
    let r = n.execute_json(&bad, Access::ReadWrite).to_json();
    assert_eq!(r["result"][0]["error"]["code"], "KIP_2001", "{r}");
    assert_eq!(r["result"].as_array().map(Vec::len), Some(1));
}

/// New type and predicate names follow the naming rules (KIP_1002 with the corrected
/// spelling); names already in a store stay usable; a capsule restoring them loads.
#[test]
fn new_schema_names_follow_the_naming_rules() {
    let n = nexus();
    for (cmd, want, hint) in [
        ("UPSERT { CONCEPT ?t { {type: \"$ConceptType\", name: \"bad type!\"} SET ATTRIBUTES { description: \"x\" } } }", "KIP_1002", "BadType"),
        ("UPSERT { CONCEPT ?t { {type: \"$ConceptType\", name: \"$Foo\"} SET ATTRIBUTES { description: \"x\" } } }", "KIP_1002", "Foo"),
        ("UPSERT { CONCEPT ?t { {type: \"$PropositionType\", name: \"RelatesTo\"} SET ATTRIBUTES { description: \"x\", subject_types: [\"*\"], object_types: [\"*\"] } } }", "KIP_1002", "relates_to"),
        ("UPSERT { CONCEPT ?p { {type: \"Person\", name: \"\"} } }", "KIP_2002", "name"),
    ] {
        let r = run(&n, cmd);
        assert_eq!(code(&r).as_deref(), Some(want), "{cmd}: {r}");
        assert!(r["error"]["hint"].as_str().unwrap_or("").contains(hint), "{r}");
    }
    // A store that already holds such a name (here restored from a capsule, as from an
    // older build's export) keeps using it.
    n.load_capsule("UPSERT { CONCEPT ?t { {type: \"$ConceptType\", name: \"legacy type\"} SET ATTRIBUTES { description: \"from an old store\" } } }")
        .expect("a capsule restores legacy names");
    ok(
        &n,
        "UPSERT { CONCEPT ?x { {type: \"legacy type\", name: \"old\"} SET ATTRIBUTES { k: 1 } } }",
    );
    ok(&n, "UPSERT { CONCEPT ?t { {type: \"$ConceptType\", name: \"legacy type\"} SET ATTRIBUTES { description: \"still here\" } } }");
    let r = ok(
        &n,
        "FIND(?x.attributes.k) WHERE { ?x {type: \"legacy type\"} }",
    );
    assert_eq!(r, json!([1]));
    ok(
        &n,
        "DELETE CONCEPT ?x DETACH WHERE { ?x {type: \"legacy type\", name: \"old\"} }",
    );
}

/// Reads every page of `cmd` (which ends without LIMIT/CURSOR) with `limit` rows each.
fn all_pages(n: &Nexus, cmd: &str, limit: usize) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10_000 {
        let text = match &cursor {
            Some(c) => format!("{cmd} LIMIT {limit} CURSOR \"{c}\""),
            None => format!("{cmd} LIMIT {limit}"),
        };
        let r = run(n, &text);
        assert!(r.get("error").is_none(), "{text}: {r}");
        out.extend(r["result"].as_array().cloned().unwrap_or_default());
        match r.get("next_cursor").and_then(|c| c.as_str()) {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
    panic!("paging did not end");
}

fn people(n: &Nexus, count: usize) {
    let mut capsule = String::from("UPSERT {");
    for i in 0..count {
        capsule.push_str(&format!(
            " CONCEPT ?p{i} {{ {{type: \"Person\", name: \"person {i:05}\"}} SET ATTRIBUTES {{ group: {}, rank: {} }} }}",
            i % 7,
            (i * 37) % 1000
        ));
    }
    capsule.push_str(" }");
    n.load_capsule(&capsule).expect("people");
}

/// Paging is linear: a page deep in a result costs what the first one does. With a
/// work budget that a position-based cursor exceeds within a few pages (it re-reads
/// every row before the page), every page of 20,000 rows is read.
#[test]
fn cursors_page_in_linear_time() {
    let mut n = nexus();
    people(&n, 20_000);
    n.set_limits(QueryLimits {
        max_work: 5_000,
        ..QueryLimits::default()
    });
    for cmd in [
        "FIND(?p.name) WHERE { ?p {type: \"Person\"} FILTER(STARTS_WITH(?p.name, \"person\")) }",
        "FIND(?p) WHERE { ?p {type: \"Person\"} FILTER(STARTS_WITH(?p.name, \"person\")) }",
    ] {
        let rows = all_pages(&n, cmd, 100);
        assert_eq!(rows.len(), 20_000, "{cmd}");
        let mut names: Vec<String> = rows
            .iter()
            .map(|r| {
                r.as_str()
                    .or_else(|| r["name"].as_str())
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 20_000, "every row exactly once: {cmd}");
    }
}

/// A keyset cursor resumes after the last row seen: rows deleted or added before it
/// between pages shift nothing, so no surviving row is skipped or repeated; in every
/// page order (by first concept, by values, by ORDER BY keys).
#[test]
fn a_delete_between_pages_skips_no_surviving_row() {
    for cmd in [
        "FIND(?p.name) WHERE { ?p {type: \"Person\"} FILTER(STARTS_WITH(?p.name, \"person\")) }",
        "FIND(?p.attributes.rank, ?p.name) WHERE { ?p {type: \"Person\"} FILTER(STARTS_WITH(?p.name, \"person\")) } ORDER BY ?p.attributes.rank DESC",
        "FIND(?p.name, ?d.name) WHERE { (?p, \"belongs_to_domain\", ?d) ?p {type: \"Person\"} }",
    ] {
        let n = nexus();
        people(&n, 300);
        ok(&n, "UPSERT { CONCEPT ?d { {type: \"Domain\", name: \"Team\"} SET ATTRIBUTES { description: \"a team\" } } }");
        for i in 0..300 {
            ok(&n, &format!("UPSERT {{ CONCEPT ?p {{ {{type: \"Person\", name: \"person {i:05}\"}} SET PROPOSITIONS {{ (\"belongs_to_domain\", {{type: \"Domain\", name: \"Team\"}}) }} }} }}"));
        }
        let first = run(&n, &format!("{cmd} LIMIT 50"));
        let cursor = first["next_cursor"].as_str().expect("more pages").to_string();
        let seen: Vec<serde_json::Value> = match &first["result"][0] {
            serde_json::Value::Array(_) => first["result"][1].as_array().cloned().unwrap_or_default(),
            _ => first["result"].as_array().cloned().unwrap_or_default(),
        };
        // Delete ten people already returned, then read on.
        for v in seen.iter().take(10) {
            let name = v.as_str().expect("name");
            ok(&n, &format!("DELETE CONCEPT ?p DETACH WHERE {{ ?p {{type: \"Person\", name: \"{name}\"}} }}"));
        }
        let mut rest = Vec::new();
        let mut next = Some(cursor);
        while let Some(c) = next {
            let r = run(&n, &format!("{cmd} LIMIT 50 CURSOR \"{c}\""));
            assert!(r.get("error").is_none(), "{cmd}: {r}");
            let col = match &r["result"][0] {
                serde_json::Value::Array(_) if cmd.contains("ORDER BY") => r["result"][1].clone(),
                serde_json::Value::Array(_) => r["result"][0].clone(),
                _ => r["result"].clone(),
            };
            rest.extend(col.as_array().cloned().unwrap_or_default());
            next = r.get("next_cursor").and_then(|c| c.as_str()).map(str::to_string);
        }
        let first_names: Vec<String> = match &first["result"][0] {
            serde_json::Value::Array(_) if cmd.contains("ORDER BY") => first["result"][1].clone(),
            serde_json::Value::Array(_) => first["result"][0].clone(),
            _ => first["result"].clone(),
        }
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
        let mut all: Vec<String> = first_names;
        all.extend(rest.iter().filter_map(|v| v.as_str().map(str::to_string)));
        let mut unique = all.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), all.len(), "no row twice: {cmd}");
        assert_eq!(all.len(), 300, "every person once (the deleted ones on page 1): {cmd}");
    }
}

/// One page too large for the response limit fails while its rows are gathered, not
/// after the whole page is built (both page orders).
#[test]
fn a_page_larger_than_the_response_limit_fails_early() {
    let mut n = nexus();
    people(&n, 300);
    n.set_limits(QueryLimits {
        max_response_bytes: 20_000,
        ..QueryLimits::default()
    });
    for cmd in [
        "FIND(?p) WHERE { ?p {type: \"Person\"} } LIMIT 1000",
        "FIND(?p) WHERE { ?p {type: \"Person\"} } ORDER BY ?p.attributes.rank LIMIT 1000",
    ] {
        let r = run(&n, cmd);
        assert_eq!(code(&r).as_deref(), Some("KIP_4002"), "{cmd}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("page"),
            "{r}"
        );
    }
    let r = run(
        &n,
        "FIND(?p.name) WHERE { ?p {type: \"Person\"} } LIMIT 100",
    );
    assert!(r.get("error").is_none(), "{r}");
}
