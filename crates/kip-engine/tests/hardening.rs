//! Hostile shapes of a single request: each must end in a KIP error or a normal
//! result, never a crash (stack overflow), an unbounded response or a hang.

mod common;
use common::*;
use kip_engine::kql::QueryLimits;
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
