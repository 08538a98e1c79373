//! A table of invalid commands with the code, line and column each must report, and
//! checks of the hints an agent acts on.

use kip_lang::{parse_command, parse_script, parse_script_bytes, ErrorCode, ParseOptions};

struct Case {
    src: &'static str,
    code: &'static str,
    line: usize,
    column: usize,
    hint_contains: &'static str,
}

const CASES: &[Case] = &[
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} ", code: "KIP_1001", line: 1, column: 36, hint_contains: "'}'" },
    Case { src: "DELETE CONCEPT ?d\nWHERE { ?d {type: \"Drug\", name: \"X\"} }", code: "KIP_1001", line: 2, column: 1, hint_contains: "DELETE CONCEPT requires DETACH" },
    Case { src: "FIND(?1x) WHERE { ?1x {type: \"Drug\"} }", code: "KIP_1002", line: 1, column: 6, hint_contains: "[a-zA-Z_]" },
    Case { src: "UPSERT {\n  CONCEPT ?d {\n    {type: \"Drug\", name: \"A\"}\n    SET ATTRIBUTES { 1st: true }\n  }\n}", code: "KIP_1002", line: 4, column: 22, hint_contains: "digit" },
    Case { src: "FIND(?x.name) WHERE {\n  ?x {type: 'Drug'}\n}", code: "KIP_1001", line: 2, column: 13, hint_contains: "double quotes" },
    Case { src: "FIND(?x.name) WHERE { ?x {type: \"Drug\"} FILTER(?x.name = \"A\") }", code: "KIP_1001", line: 1, column: 56, hint_contains: "==" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} FILTER(?x.attributes.a > 1 AND ?x.attributes.b < 2) }", code: "KIP_1001", line: 1, column: 63, hint_contains: "&&" },
    Case { src: "find(?x) WHERE { ?x {type: \"Drug\"} }", code: "KIP_1001", line: 1, column: 1, hint_contains: "uppercase" },
    Case { src: "FIND(?x.risk_level) WHERE { ?x {type: \"Drug\"} }", code: "KIP_1001", line: 1, column: 6, hint_contains: "?x.attributes.risk_level" },
    Case { src: "FIND(?x) WHERE { ?x {type: Drug} }", code: "KIP_1001", line: 1, column: 28, hint_contains: "\"Drug\"" },
    Case { src: "FIND(?b) WHERE { (?a, \"follows\"{3,1}, ?b) }", code: "KIP_1001", line: 1, column: 32, hint_contains: "0 <= m <= n" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} } LIMIT 0", code: "KIP_1001", line: 1, column: 44, hint_contains: "positive integer" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} } LIMIT 99999999999999999999999", code: "KIP_1001", line: 1, column: 44, hint_contains: "whole number" },
    Case { src: "FIND(?x) WHERE { ?x {kind: \"Drug\"} }", code: "KIP_1001", line: 1, column: 22, hint_contains: "id, type and/or name" },
    Case { src: "UPSERT { CONCEPT ?d { {type: \"Drug\"} } }", code: "KIP_1001", line: 1, column: 23, hint_contains: "{type: \"Drug\", name: \"Aspirin\"}" },
    Case { src: "UPSERT { CONCEPT ?d { {type: \"Drug\", name: \"A\"} SET PROPOSITIONS { (\"p\", ?x {type: \"T\"}) } } }", code: "KIP_1001", line: 1, column: 77, hint_contains: "inline name" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} } ORDER BY ?x.name DOWN", code: "KIP_1001", line: 1, column: 55, hint_contains: "ASC or DESC" },
    Case { src: "DESCRIBE CONCEPT TYPE \"Drug\" LIMIT 5", code: "KIP_1001", line: 1, column: 30, hint_contains: "only to DESCRIBE CONCEPT TYPES" },
    Case { src: "SELECT ?x WHERE { ?x {type: \"Drug\"} }", code: "KIP_1001", line: 1, column: 1, hint_contains: "FIND" },
    Case { src: "FIND(?x) WHERE { ?x {name: \"\\ud800\"} }", code: "KIP_1001", line: 1, column: 29, hint_contains: "surrogate" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} } LIMIT :2n", code: "KIP_1002", line: 1, column: 45, hint_contains: "" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} FILTER(IN(?x.name, \"a\")) }", code: "KIP_1001", line: 1, column: 55, hint_contains: "IN(" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} FILTER(CONTAINS(?x.name)) }", code: "KIP_1001", line: 1, column: 43, hint_contains: "CONTAINS(?x.name, \"sub\")" },
    Case { src: "", code: "KIP_1001", line: 1, column: 1, hint_contains: "start with FIND" },
    Case { src: "DESCRIBE PRIMER DESCRIBE DOMAINS", code: "KIP_1001", line: 1, column: 17, hint_contains: "`commands` array" },
    // A missing comma is named as such, not as an unclosed bracket.
    Case { src: "UPSERT { CONCEPT ?d { {type: \"Drug\", name: \"A\"} SET ATTRIBUTES { a: 1 b: 2 } } }", code: "KIP_1001", line: 1, column: 71, hint_contains: "separate object entries with commas" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\" name: \"A\"} }", code: "KIP_1001", line: 1, column: 35, hint_contains: "separate entries with commas" },
    Case { src: "FIND(?x ?y) WHERE { ?x {type: \"Drug\"} }", code: "KIP_1001", line: 1, column: 9, hint_contains: "FIND(?x, ?y.name)" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} FILTER(IN(?x.name, [\"a\" \"b\"])) }", code: "KIP_1001", line: 1, column: 60, hint_contains: "separate array items" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} FILTER(CONTAINS(?x.name \"a\")) }", code: "KIP_1001", line: 1, column: 60, hint_contains: "separate the arguments" },
    Case { src: "DELETE ATTRIBUTES {\"a\" \"b\"} FROM ?x WHERE { ?x {type: \"Drug\"} }", code: "KIP_1001", line: 1, column: 24, hint_contains: "separate the keys" },
    Case { src: "UPDATE ?x SET ATTRIBUTES { a: 1 b: 2 } WHERE { ?x {type: \"Drug\"} }", code: "KIP_1001", line: 1, column: 33, hint_contains: "separate the entries" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} FILTER(CONTAINS(?x.name, \"a\") }", code: "KIP_1001", line: 1, column: 66, hint_contains: "not closed" },
    Case { src: "UPSERT { CONCEPT ?d { {type: \"Drug\", name: \"A\"} SET ATTRIBUTES { a = 1 } } }", code: "KIP_1001", line: 1, column: 68, hint_contains: "key: value" },
    Case { src: "{\"command\": \"DESCRIBE PRIMER\", \"parameters\": {}}", code: "KIP_1001", line: 1, column: 1, hint_contains: "execute_kip request object" },
    Case { src: "{ ?x {type: \"Drug\"} }", code: "KIP_1001", line: 1, column: 1, hint_contains: "unbalanced braces" },
    Case { src: "FIND(?x WHERE { ?x {type: \"Drug\"} }", code: "KIP_1001", line: 1, column: 9, hint_contains: "not closed" },
    Case { src: "MERGE CONCEPT {type: \"Drug\", name: \"A\"} INTO {type: \"Drug\", name: \"B\"}", code: "KIP_1001", line: 1, column: 15, hint_contains: "MERGE CONCEPT ?dup INTO ?keep WHERE" },
    Case { src: "DELETE CONCEPT {type: \"Drug\", name: \"A\"} DETACH", code: "KIP_1001", line: 1, column: 16, hint_contains: "DELETE CONCEPT ?x DETACH WHERE" },
    Case { src: "FIND(COUNT(?x)) WHERE { ?x {type: \"Drug\"} } GROUP BY ?x", code: "KIP_1001", line: 1, column: 45, hint_contains: "no GROUP BY" },
    Case { src: "FIND(?x) WHERE { ?x {type: \"Drug\"} } LIMIT 10 OFFSET 20", code: "KIP_1001", line: 1, column: 47, hint_contains: "CURSOR" },
    Case { src: "FIND ?x WHERE { ?x {type: \"Drug\"} }", code: "KIP_1001", line: 1, column: 6, hint_contains: "FIND(?x)" },
    Case { src: "UPDATE ?x SET ATTRIBUTES { n: 1 } WHERE { ?x {type: \"Drug\"} } EXPECT VERSION 2", code: "KIP_1001", line: 1, column: 63, hint_contains: "UPSERT blocks only" },
];

#[test]
fn invalid_commands_report_code_position_and_hint() {
    let mut failures = Vec::new();
    for c in CASES {
        let e = match parse_command(c.src) {
            Ok(cmd) => {
                failures.push(format!("{:?}: parsed as {cmd}", c.src));
                continue;
            }
            Err(e) => e,
        };
        let got = (e.code.as_str(), e.line, e.column);
        if got != (c.code, Some(c.line), Some(c.column)) {
            failures.push(format!(
                "{:?}: got {:?} ({}), expected ({}, {}, {})",
                c.src, got, e.message, c.code, c.line, c.column
            ));
        }
        let hint = e.hint.clone().unwrap_or_default();
        if !hint.contains(c.hint_contains) {
            failures.push(format!(
                "{:?}: hint {:?} lacks {:?}",
                c.src, hint, c.hint_contains
            ));
        }
        if e.code == ErrorCode::InvalidSyntax && e.found.is_some() {
            assert!(e.expected.is_some(), "{:?}: found without expected", c.src);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn syntax_errors_name_what_was_found_and_expected() {
    let e = parse_command("FIND(?x) WHERE { ?x {type: \"Drug\"}").expect_err("unclosed");
    assert_eq!(e.found.as_deref(), Some("end of input"));
    assert!(e.expected.expect("expected").contains('}'));
    assert!(e.message.contains("line 1"));
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let opts = ParseOptions::default();
    let depth = 100_000;
    let filter = format!(
        "FIND(?x) WHERE {{ ?x {{type: \"T\"}} FILTER({}?x.name == 1{}) }}",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    let nots = format!(
        "FIND(?x) WHERE {{ ?x {{type: \"T\"}} FILTER({}true) }}",
        "!".repeat(depth)
    );
    let arrays = format!(
        "UPSERT {{ CONCEPT ?x {{ {{type: \"T\", name: \"n\"}} SET ATTRIBUTES {{ a: {}1{} }} }} }}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let groups = format!(
        "FIND(?x) WHERE {{ {}?x {{type: \"T\"}}{} }}",
        "NOT { ".repeat(depth),
        " }".repeat(depth)
    );
    let props = format!(
        "FIND(?x) WHERE {{ {}?x, \"p\", ?y{} }}",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    for src in [filter, nots, arrays, groups, props] {
        let e = parse_command(&src).expect_err("too deep");
        assert_eq!(e.code, ErrorCode::InvalidSyntax);
        assert!(
            e.message
                .contains(&format!("deeper than {}", opts.max_depth)),
            "{}",
            e.message
        );
    }
    // Nesting within the bound is fine.
    let ok = format!(
        "FIND(?x) WHERE {{ ?x {{type: \"T\"}} FILTER({}true{}) }}",
        "(".repeat(20),
        ")".repeat(20)
    );
    parse_command(&ok).expect("20 levels parse");
}

#[test]
fn oversized_input_is_resource_exhausted() {
    let opts = ParseOptions {
        max_input_bytes: 64,
        ..ParseOptions::default()
    };
    let src = format!("FIND(?x) WHERE {{ ?x {{name: \"{}\"}} }}", "a".repeat(100));
    let e = kip_lang::parse_command_with(&src, opts).expect_err("too big");
    assert_eq!(e.code, ErrorCode::ResourceExhausted);
}

#[test]
fn invalid_utf8_is_a_syntax_error_with_the_offset() {
    let e = parse_script_bytes(b"FIND(?x) WHERE { ?x {name: \"\xff\"} }").expect_err("bad utf8");
    assert_eq!(e.code, ErrorCode::InvalidSyntax);
    assert!(e.message.contains("offset 28"), "{}", e.message);
}

#[test]
fn scripts_hold_several_commands() {
    let cmds =
        parse_script("DESCRIBE PRIMER\nDESCRIBE DOMAINS; SEARCH CONCEPT \"x\"").expect("script");
    assert_eq!(cmds.len(), 3);
}

/// A capsule split into commands (for loading one at a time) reports errors at their
/// line in the whole capsule, and names an oversized command by its line.
#[test]
fn script_parts_report_positions_in_the_whole_script() {
    let src = "// capsule\nUPSERT { CONCEPT ?a { {type: \"T\", name: \"a\"} } }\n\nUPSERT { CONCEPT ?b { {type: \"T\", name: \"b\"} } };\nUPSERT { CONCEPT ?c { {type: \"T\" name: \"c\"} } }\n";
    let ranges = kip_lang::script_ranges(src).expect("lexes");
    assert_eq!(ranges.len(), 3);
    assert!(src[ranges[1].clone()].ends_with("};"));
    let opts = kip_lang::ParseOptions::default();
    assert!(kip_lang::parse_script_part(src, ranges[0].clone(), opts).is_ok());
    let e = kip_lang::parse_script_part(src, ranges[2].clone(), opts).expect_err("missing comma");
    assert_eq!(e.code.as_str(), "KIP_1001");
    assert_eq!((e.line, e.column), (Some(5), Some(34)), "{e}");
    assert!(e.message.contains("line 5"), "{}", e.message);

    let small = kip_lang::ParseOptions {
        max_input_bytes: 40,
        ..kip_lang::ParseOptions::default()
    };
    let e = kip_lang::parse_script_part(src, ranges[1].clone(), small).expect_err("too big");
    assert_eq!(e.code.as_str(), "KIP_4002");
    assert_eq!(e.line, Some(4));

    // A leading `;` is not a command; separators between commands are fine.
    let e = kip_lang::script_ranges(";FIND(?a) WHERE { ?a {type: \"T\"} }")
        .and_then(|r| {
            kip_lang::parse_script_part(";FIND(?a) WHERE { ?a {type: \"T\"} }", r[0].clone(), opts)
        })
        .expect_err("leading semicolon");
    assert_eq!(e.code.as_str(), "KIP_1001");
    assert_eq!(
        kip_lang::script_ranges("FIND(?a) WHERE { ?a {type: \"T\"} };;\n;")
            .expect("lexes")
            .len(),
        1
    );
    // Only comments: no commands.
    assert!(kip_lang::script_ranges("// nothing\n")
        .expect("lexes")
        .is_empty());
}

/// Flat shapes have no nesting but are as deep for the engine: a chain of `||`, many
/// patterns, many sibling blocks. They are bounded per command (KIP_4002 with a hint),
/// counted at every level; at the limit they parse.
#[test]
fn flat_chains_are_bounded_per_command() {
    let opts = ParseOptions::default();
    let chain = |op: &str, n: usize| {
        let terms: Vec<String> = (0..n).map(|i| format!("?x.name == {i}")).collect();
        format!(
            "FIND(?x) WHERE {{ ?x {{type: \"T\"}} FILTER({}) }}",
            terms.join(op)
        )
    };
    let patterns = |n: usize| {
        let p: Vec<String> = (0..n)
            .map(|i| format!("(?x{i}, \"p\", ?x{})", i + 1))
            .collect();
        format!("FIND(?x0) WHERE {{ {} }}", p.join(" "))
    };
    let blocks = |n: usize| {
        format!(
            "FIND(?x) WHERE {{ ?x {{type: \"T\"}} {} }}",
            "OPTIONAL { ?x {name: \"n\"} } ".repeat(n)
        )
    };
    // Each `name == i` is one operator, each `||` one more.
    parse_command(&chain(" || ", opts.max_operators / 2)).expect("at the limit");
    parse_command(&patterns(opts.max_clauses)).expect("at the limit");
    // one clause for the concept pattern, two per OPTIONAL (the block and its pattern)
    parse_command(&blocks((opts.max_clauses - 1) / 2)).expect("at the limit");
    for src in [
        chain(" || ", 3000),
        chain(" && ", 5000),
        chain(" || ", opts.max_operators / 2 + 1),
        patterns(opts.max_clauses + 1),
        blocks(10_000),
        format!(
            "DELETE CONCEPT ?x0 DETACH WHERE {{ {} }}",
            (0..300)
                .map(|i| format!("?x{i} {{type: \"T\"}}"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    ] {
        let e = parse_command(&src).expect_err("too many");
        assert_eq!(e.code, ErrorCode::ResourceExhausted, "{e}");
        assert!(e.hint.is_some() && e.line.is_some(), "{e:?}");
    }
    // The budget is per command: a script of many commands at the limit parses.
    let script = vec![patterns(opts.max_clauses); 3].join("\n");
    assert_eq!(parse_script(&script).expect("three commands").len(), 3);
}
