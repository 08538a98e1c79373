//! Bad input never panics and never corrupts: random KML/KQL sequences and arbitrary
//! text against a store, with the store's invariants checked after every sequence.

mod common;
use common::*;
use kip_engine::Access;
use proptest::prelude::*;
use serde_json::json;

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["A", "B", "C", "D", "Aspirin", "$self"]).prop_map(str::to_string)
}

fn ty() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["Drug", "Symptom", "Person", "drug", "Nope"]).prop_map(str::to_string)
}

fn pred() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "treats",
        "follows",
        "stated",
        "belongs_to_domain",
        "nope",
    ])
    .prop_map(str::to_string)
}

fn value() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "1",
        "\"x\"",
        "null",
        "[1, 2]",
        "{k: true}",
        "-2.5",
        "\"2025-01-01\"",
    ])
    .prop_map(str::to_string)
}

fn target() -> impl Strategy<Value = String> {
    prop_oneof![
        (ty(), name()).prop_map(|(t, n)| format!("{{type: \"{t}\", name: \"{n}\"}}")),
        (1u64..60).prop_map(|i| format!("{{id: \"C:{i}\"}}")),
        (1u64..40).prop_map(|i| format!("(id: \"P:{i}\")")),
        Just("?h0".to_string()),
        Just("?h1".to_string()),
    ]
}

fn command() -> impl Strategy<Value = String> {
    let concept = (
        ty(),
        name(),
        prop::option::of((value(), value())),
        prop::collection::vec((pred(), target()), 0..3),
        0usize..3,
    )
        .prop_map(|(t, n, attrs, props, h)| {
            let mut s = format!("CONCEPT ?h{h} {{ {{type: \"{t}\", name: \"{n}\"}}");
            if let Some((a, b)) = attrs {
                s.push_str(&format!(" SET ATTRIBUTES {{ a: {a}, b: {b} }}"));
            }
            if !props.is_empty() {
                s.push_str(" SET PROPOSITIONS {");
                for (p, t) in props {
                    s.push_str(&format!(" (\"{p}\", {t})"));
                }
                s.push_str(" }");
            }
            s.push_str(" }");
            s
        });
    let prop_block = (target(), pred(), target()).prop_map(|(s, p, o)| {
        format!("PROPOSITION {{ ({s}, \"{p}\", {o}) SET ATTRIBUTES {{ w: 1 }} }}")
    });
    let upsert = (
        prop::collection::vec(prop_oneof![concept, prop_block], 1..4),
        prop::option::of(value()),
    )
        .prop_map(|(blocks, m)| {
            let meta = m
                .map(|v| format!(" WITH METADATA {{ m: {v} }}"))
                .unwrap_or_default();
            format!("UPSERT {{ {} }}{meta}", blocks.join(" "))
        });
    let delete = prop_oneof![
        (ty(), name()).prop_map(|(t, n)| format!(
            "DELETE CONCEPT ?x DETACH WHERE {{ ?x {{type: \"{t}\", name: \"{n}\"}} }}"
        )),
        ty().prop_map(|t| format!("DELETE CONCEPT ?x DETACH WHERE {{ ?x {{type: \"{t}\"}} }}")),
        pred().prop_map(|p| format!(
            "DELETE PROPOSITIONS ?l WHERE {{ ?l (?s, \"{p}\", ?o) FILTER(?l.attributes.w == 1) }}"
        )),
        ty().prop_map(|t| format!(
            "DELETE ATTRIBUTES {{\"a\"}} FROM ?x WHERE {{ ?x {{type: \"{t}\"}} }}"
        )),
        pred().prop_map(|p| format!(
            "DELETE METADATA {{\"m\"}} FROM ?l WHERE {{ ?l (?s, \"{p}\", ?o) }}"
        )),
    ];
    let query = prop_oneof![
        (ty(), pred()).prop_map(|(t, p)| format!("FIND(?x, ?y.name) WHERE {{ ?x {{type: \"{t}\"}} OPTIONAL {{ (?x, \"{p}\", ?y) }} }}")),
        pred().prop_map(|p| format!("FIND(?a.name, COUNT(?b)) WHERE {{ (?a, \"{p}\"{{0,3}}, ?b) }} ORDER BY COUNT(?b) DESC LIMIT 3")),
        (pred(), value()).prop_map(|(p, v)| format!("FIND(?l) WHERE {{ ?l (?s, \"{p}\", ?o) NOT {{ ?s {{name: \"A\"}} }} FILTER(?l.attributes.w != {v} || REGEX(?s.name, \"^A\")) }}")),
    ];
    prop_oneof![3 => upsert, 2 => delete, 2 => query, 1 => "\\PC{0,80}"]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_7021), ..ProptestConfig::default() })]

    #[test]
    fn random_command_sequences_never_panic_or_corrupt(cmds in prop::collection::vec(command(), 1..10)) {
        let n = nexus();
        medical_schema(&n);
        for c in &cmds {
            let dry = n.execute_json(&json!({"command": c, "dry_run": true}), Access::ReadWrite).to_json();
            let before = n.admin().dump().expect("dump");
            let r = n.execute_json(&json!({"command": c}), Access::ReadWrite).to_json();
            prop_assert!(r.get("result").is_some() || r.get("error").is_some());
            if r.get("error").is_some() {
                // A failed command changes nothing, and dry_run predicted the failure.
                prop_assert_eq!(n.admin().dump().expect("dump"), before.clone(), "{} changed the graph", c);
                prop_assert!(dry.get("error").is_some(), "dry_run accepted {} but it failed: {}", c, r);
            }
        }
        let problems = n.admin().check_integrity().expect("integrity check");
        prop_assert!(problems.is_empty(), "{:?} after {:?}", problems, cmds);
    }
}
