//! Property tests: commands generated from the grammar round-trip through the printer
//! (`parse(print(parse(text))) == parse(text)`), and the parser never panics, whatever
//! the input.

use kip_lang::{parse_command, parse_script, parse_script_bytes};
use proptest::prelude::*;

fn ident() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_]{0,6}"
}

fn var() -> impl Strategy<Value = String> {
    ident().prop_map(|i| format!("?{i}"))
}

fn param() -> impl Strategy<Value = String> {
    ident().prop_map(|i| format!(":{i}"))
}

fn json_string() -> impl Strategy<Value = String> {
    any::<String>().prop_map(|s| serde_json::to_string(&s).expect("string"))
}

fn str_or_param() -> impl Strategy<Value = String> {
    prop_oneof![4 => json_string(), 1 => param()]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        (-1e300f64..1e300f64).prop_map(|f| serde_json::to_string(&f).expect("finite")),
        Just("-1.5e3".to_string()),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![ident(), json_string()]
}

fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        number(),
        json_string(),
        param(),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec((key(), inner), 0..4).prop_map(|kv| {
                let body: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{{{}}}", body.join(", "))
            }),
        ]
    })
}

fn object() -> impl Strategy<Value = String> {
    prop::collection::vec((key(), value()), 0..4).prop_map(|kv| {
        let body: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
        format!("{{{}}}", body.join(", "))
    })
}

fn dot_path() -> impl Strategy<Value = String> {
    (
        var(),
        prop_oneof![
            Just(String::new()),
            Just(".id".to_string()),
            Just(".name".to_string()),
            Just(".type".to_string()),
            Just(".subject".to_string()),
            Just(".attributes".to_string()),
            ident().prop_map(|k| format!(".attributes.{k}")),
            ident().prop_map(|k| format!(".metadata.{k}")),
        ],
    )
        .prop_map(|(v, p)| format!("{v}{p}"))
}

fn matcher() -> impl Strategy<Value = String> {
    (
        prop::option::of(str_or_param()),
        prop::option::of(str_or_param()),
        prop::option::of(str_or_param()),
        str_or_param(),
    )
        .prop_map(|(id, t, n, fallback)| {
            let mut parts = Vec::new();
            if let Some(i) = id {
                parts.push(format!("id: {i}"));
            }
            if let Some(t) = t {
                parts.push(format!("type: {t}"));
            }
            if let Some(n) = n {
                parts.push(format!("name: {n}"));
            }
            if parts.is_empty() {
                parts.push(format!("type: {fallback}"));
            }
            format!("{{{}}}", parts.join(", "))
        })
}

fn exact_matcher() -> impl Strategy<Value = String> {
    prop_oneof![
        str_or_param().prop_map(|i| format!("{{id: {i}}}")),
        (str_or_param(), str_or_param()).prop_map(|(t, n)| format!("{{type: {t}, name: {n}}}")),
    ]
}

fn predicate() -> impl Strategy<Value = String> {
    prop_oneof![
        var(),
        (
            prop::collection::vec(str_or_param(), 1..3),
            prop_oneof![
                Just(String::new()),
                (0u32..5, 0u32..5).prop_map(|(a, b)| format!("{{{},{}}}", a.min(b), a.max(b))),
                (0u32..5).prop_map(|a| format!("{{{a},}}")),
                (0u32..5).prop_map(|a| format!("{{{a}}}")),
            ]
        )
            .prop_map(|(alts, hops)| format!("{}{}", alts.join(" | "), hops)),
    ]
}

fn endpoint() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        var(),
        matcher(),
        (var(), matcher()).prop_map(|(v, m)| format!("{v} {m}"))
    ];
    leaf.prop_recursive(3, 8, 2, |inner| {
        (prop::option::of(var()), inner.clone(), predicate(), inner)
            .prop_map(|(v, s, p, o)| format!("{} ({s}, {p}, {o})", v.unwrap_or_default()))
    })
}

fn kml_endpoint() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        var(),
        exact_matcher(),
        str_or_param().prop_map(|i| format!("(id: {i})"))
    ];
    leaf.prop_recursive(3, 8, 2, |inner| {
        (inner.clone(), str_or_param(), inner).prop_map(|(s, p, o)| format!("({s}, {p}, {o})"))
    })
}

fn proposition_clause() -> impl Strategy<Value = String> {
    prop_oneof![
        (prop::option::of(var()), endpoint(), predicate(), endpoint())
            .prop_map(|(v, s, p, o)| format!("{} ({s}, {p}, {o})", v.unwrap_or_default())),
        (var(), str_or_param()).prop_map(|(v, i)| format!("{v} (id: {i})")),
    ]
}

fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![dot_path(), value()];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| format!("!{e}")),
            (
                inner.clone(),
                prop::sample::select(vec!["==", "!=", "<", "<=", ">", ">=", "&&", "||"]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (
                prop::sample::select(vec!["CONTAINS", "STARTS_WITH", "ENDS_WITH", "REGEX"]),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
            (
                prop::sample::select(vec!["IS_NULL", "IS_NOT_NULL"]),
                inner.clone()
            )
                .prop_map(|(f, a)| format!("{f}({a})")),
            (inner, prop::collection::vec(value(), 0..3))
                .prop_map(|(a, l)| format!("IN({a}, [{}])", l.join(", "))),
        ]
    })
}

fn where_clauses() -> impl Strategy<Value = String> {
    let clause = prop_oneof![
        (var(), matcher()).prop_map(|(v, m)| format!("{v} {m}")),
        proposition_clause(),
        expr().prop_map(|e| format!("FILTER({e})")),
    ];
    let leaf = prop::collection::vec(clause, 0..4).prop_map(|v| v.join("\n"));
    leaf.prop_recursive(3, 12, 3, |inner| {
        (
            inner.clone(),
            prop::sample::select(vec!["NOT", "OPTIONAL", "UNION"]),
            inner.clone(),
            inner,
        )
            .prop_map(|(a, kw, b, c)| format!("{a}\n{kw} {{\n{b}\n}}\n{c}"))
    })
}

fn projection() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => dot_path(),
        1 => (
            prop::sample::select(vec!["COUNT", "SUM", "AVG", "MIN", "MAX"]),
            any::<bool>(),
            dot_path()
        )
            .prop_map(|(f, d, p)| format!("{f}({}{p})", if d { "DISTINCT " } else { "" })),
    ]
}

fn limit() -> impl Strategy<Value = String> {
    prop_oneof![(1u64..u64::MAX).prop_map(|n| n.to_string()), param()]
}

fn find() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(projection(), 1..4),
        where_clauses(),
        prop::collection::vec(
            (
                projection(),
                prop::sample::select(vec!["", " ASC", " DESC"]),
            ),
            0..3,
        ),
        prop::option::of(limit()),
        prop::option::of(str_or_param()),
    )
        .prop_map(|(p, w, o, l, c)| {
            let mut s = format!("FIND({})\nWHERE {{\n{w}\n}}", p.join(", "));
            if !o.is_empty() {
                let keys: Vec<String> = o.into_iter().map(|(e, d)| format!("{e}{d}")).collect();
                s.push_str(&format!("\nORDER BY {}", keys.join(", ")));
            }
            if let Some(l) = l {
                s.push_str(&format!("\nLIMIT {l}"));
            }
            if let Some(c) = c {
                s.push_str(&format!("\nCURSOR {c}"));
            }
            s
        })
}

fn with_metadata() -> impl Strategy<Value = String> {
    prop::option::of(object())
        .prop_map(|o| o.map(|o| format!(" WITH METADATA {o}")).unwrap_or_default())
}

/// An optional `EXPECT VERSION` line (RC11).
fn expect_version() -> impl Strategy<Value = String> {
    prop::option::of(prop_oneof![
        (0u64..1_000).prop_map(|n| n.to_string()),
        param()
    ])
    .prop_map(|v| {
        v.map(|v| format!("EXPECT VERSION {v}\n"))
            .unwrap_or_default()
    })
}

/// An update-expression operand on the target `t` (RC11 §4.3): a number, a
/// placeholder, null, a path on the target, or a nested expression.
fn operand(t: String) -> BoxedStrategy<String> {
    let path = prop::sample::select(vec!["attributes", "metadata"]).prop_flat_map(move |c| {
        let t = t.clone();
        ident().prop_map(move |k| format!("?{t}.{c}.{k}"))
    });
    prop_oneof![number(), param(), path, Just("null".to_string())]
        .prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                (
                    prop::sample::select(vec!["ADD", "MUL", "COALESCE"]),
                    inner.clone(),
                    inner.clone()
                )
                    .prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
                (inner.clone(), inner.clone(), inner)
                    .prop_map(|(x, lo, hi)| format!("CLAMP({x}, {lo}, {hi})")),
            ]
        })
        .boxed()
}

/// A value position of UPDATE: a JSON value, or an update expression (a function
/// applied to operands).
fn update_value(t: String) -> BoxedStrategy<String> {
    prop_oneof![
        value(),
        (
            prop::sample::select(vec!["ADD", "MUL", "COALESCE"]),
            operand(t.clone()),
            operand(t.clone())
        )
            .prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
        (operand(t.clone()), operand(t.clone()), operand(t))
            .prop_map(|(x, lo, hi)| format!("CLAMP({x}, {lo}, {hi})")),
    ]
    .boxed()
}

fn update() -> impl Strategy<Value = String> {
    var().prop_flat_map(|v| {
        let t = v.trim_start_matches('?').to_string();
        let set = move || {
            let entry = (key(), update_value(t.clone())).prop_map(|(k, v)| format!("{k}: {v}"));
            prop::option::of(prop::collection::vec(entry, 0..3).prop_map(|e| e.join(", ")))
        };
        (
            Just(v),
            set(),
            set(),
            where_clauses(),
            prop::option::of(limit()),
        )
            .prop_filter("an UPDATE sets something", |(_, a, m, _, _)| {
                a.is_some() || m.is_some()
            })
            .prop_map(|(v, a, m, w, l)| {
                let mut s = format!("UPDATE {v}");
                if let Some(a) = a {
                    s.push_str(&format!("\nSET ATTRIBUTES {{ {a} }}"));
                }
                if let Some(m) = m {
                    s.push_str(&format!("\nSET METADATA {{ {m} }}"));
                }
                s.push_str(&format!("\nWHERE {{\n{w}\n}}"));
                if let Some(l) = l {
                    s.push_str(&format!(" LIMIT {l}"));
                }
                s
            })
    })
}

fn merge_or_export() -> impl Strategy<Value = String> {
    prop_oneof![
        (var(), var(), where_clauses())
            .prop_map(|(a, b, w)| format!("MERGE CONCEPT {a} INTO {b} WHERE {{\n{w}\n}}")),
        (
            var(),
            where_clauses(),
            prop::option::of(limit()),
            prop::option::of(str_or_param())
        )
            .prop_map(|(v, w, l, c)| format!(
                "EXPORT {v} WHERE {{\n{w}\n}}{}{}",
                l.map(|l| format!(" LIMIT {l}")).unwrap_or_default(),
                c.map(|c| format!(" CURSOR {c}")).unwrap_or_default()
            )),
    ]
}

fn upsert() -> impl Strategy<Value = String> {
    let entry = (str_or_param(), kml_endpoint(), with_metadata())
        .prop_map(|(p, t, m)| format!("({p}, {t}){m}"));
    let concept = (
        prop::option::of(var()),
        exact_matcher(),
        expect_version(),
        prop::option::of(object()),
        prop::option::of(prop::collection::vec(entry, 0..3)),
        with_metadata(),
    )
        .prop_map(|(h, id, v, a, p, m)| {
            let mut s = format!("CONCEPT {} {{\n{id}\n{v}", h.unwrap_or_default());
            if let Some(a) = a {
                s.push_str(&format!("SET ATTRIBUTES {a}\n"));
            }
            if let Some(p) = p {
                s.push_str(&format!("SET PROPOSITIONS {{\n{}\n}}\n", p.join("\n")));
            }
            s.push_str(&format!("}}{m}"));
            s
        });
    let identity = prop_oneof![
        (kml_endpoint(), str_or_param(), kml_endpoint())
            .prop_map(|(s, p, o)| format!("({s}, {p}, {o})")),
        str_or_param().prop_map(|i| format!("(id: {i})")),
    ];
    let proposition = (
        prop::option::of(var()),
        identity,
        expect_version(),
        prop::option::of(object()),
        with_metadata(),
    )
        .prop_map(|(h, id, v, a, m)| {
            let attrs = a.map(|a| format!("SET ATTRIBUTES {a}")).unwrap_or_default();
            format!(
                "PROPOSITION {} {{\n{id}\n{v}{attrs}\n}}{m}",
                h.unwrap_or_default()
            )
        });
    (
        prop::collection::vec(prop_oneof![concept, proposition], 0..4),
        with_metadata(),
    )
        .prop_map(|(blocks, m)| format!("UPSERT {{\n{}\n}}{m}", blocks.join("\n")))
}

fn delete() -> impl Strategy<Value = String> {
    let keys = prop::collection::vec(str_or_param(), 1..3).prop_map(|k| k.join(", "));
    (
        prop::sample::select(vec!["ATTRIBUTES", "METADATA", "PROPOSITIONS", "CONCEPT"]),
        keys,
        var(),
        where_clauses(),
    )
        .prop_map(|(kind, keys, v, w)| match kind {
            "ATTRIBUTES" | "METADATA" => {
                format!("DELETE {kind} {{{keys}}} FROM {v} WHERE {{\n{w}\n}}")
            }
            "PROPOSITIONS" => format!("DELETE PROPOSITIONS {v} WHERE {{\n{w}\n}}"),
            _ => format!("DELETE CONCEPT {v} DETACH WHERE {{\n{w}\n}}"),
        })
}

fn meta() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("DESCRIBE PRIMER".to_string()),
        Just("DESCRIBE DOMAINS".to_string()),
        (
            prop::sample::select(vec!["CONCEPT", "PROPOSITION"]),
            prop::option::of(limit()),
            prop::option::of(str_or_param())
        )
            .prop_map(|(k, l, c)| format!(
                "DESCRIBE {k} TYPES{}{}",
                l.map(|l| format!(" LIMIT {l}")).unwrap_or_default(),
                c.map(|c| format!(" CURSOR {c}")).unwrap_or_default()
            )),
        (
            prop::sample::select(vec!["CONCEPT", "PROPOSITION"]),
            str_or_param()
        )
            .prop_map(|(k, n)| format!("DESCRIBE {k} TYPE {n}")),
        (
            prop::sample::select(vec!["CONCEPT", "PROPOSITION"]),
            str_or_param(),
            prop::option::of(str_or_param()),
            prop::option::of(prop_oneof![
                prop::sample::select(vec!["\"keyword\"", "\"semantic\"", "\"hybrid\""])
                    .prop_map(str::to_string),
                param()
            ]),
            prop::option::of(prop_oneof![
                (0u32..=100).prop_map(|n| format!("{}", f64::from(n) / 100.0)),
                param()
            ]),
            prop::option::of(limit())
        )
            .prop_map(|(k, t, w, m, th, l)| format!(
                "SEARCH {k} {t}{}{}{}{}",
                w.map(|w| format!(" WITH TYPE {w}")).unwrap_or_default(),
                m.map(|m| format!(" MODE {m}")).unwrap_or_default(),
                th.map(|t| format!(" THRESHOLD {t}")).unwrap_or_default(),
                l.map(|l| format!(" LIMIT {l}")).unwrap_or_default()
            )),
    ]
}

fn command() -> impl Strategy<Value = String> {
    prop_oneof![
        find(),
        upsert(),
        delete(),
        meta(),
        update(),
        merge_or_export()
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_7021), ..ProptestConfig::default() })]

    #[test]
    fn generated_commands_parse_and_round_trip(src in command()) {
        let ast = parse_command(&src).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        let printed = ast.to_string();
        let again = parse_command(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
        prop_assert_eq!(&again, &ast, "printed:\n{}", printed);
        // Printing is a fixed point after one round.
        prop_assert_eq!(again.to_string(), printed);
    }

    #[test]
    fn parser_never_panics_on_arbitrary_text(src in "\\PC{0,200}") {
        let _ = parse_script(&src);
    }

    #[test]
    fn parser_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_script_bytes(&bytes);
    }

    #[test]
    fn parser_never_panics_on_mutated_commands(
        src in command(),
        cuts in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(vec!["", "{", "}", "(", ")", "\"", ":", "?", ",", "//", "\\", "|", "1", "-", "."])), 1..4),
    ) {
        let mut s = src.clone();
        for (idx, ins) in cuts {
            let mut at = idx.index(s.len() + 1);
            while !s.is_char_boundary(at) { at -= 1; }
            let end = (at + 1).min(s.len());
            let end = if s.is_char_boundary(end) { end } else { at };
            s.replace_range(at..end, ins);
        }
        if let Ok(cmds) = parse_script(&s) {
            // Whatever parses also round-trips.
            let printed = kip_lang::printer::script(&cmds);
            let again = parse_script(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
            prop_assert_eq!(again, cmds);
        }
    }
}

/// A script of generated commands, separated by newlines, `;` or comments.
fn script() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            command(),
            prop::sample::select(vec!["\n", ";\n", " ; ; ", "\n// a comment UPSERT {\n"]),
        ),
        1..5,
    )
    .prop_map(|parts| parts.into_iter().map(|(c, sep)| c + sep).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_7022), ..ProptestConfig::default() })]

    /// Splitting a script with the lexer and parsing the parts one by one gives the same
    /// commands as parsing the whole script.
    #[test]
    fn script_parts_parse_like_the_whole_script(src in script()) {
        let whole = parse_script(&src).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        let ranges = kip_lang::script_ranges(&src).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        let parts = ranges
            .into_iter()
            .map(|r| kip_lang::parse_script_part(&src, r, kip_lang::ParseOptions::default()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        prop_assert_eq!(parts, whole);
    }

    /// Whatever the text, splitting never panics and a script that fails as a whole
    /// fails in one of its parts (nothing is silently dropped).
    #[test]
    fn script_parts_fail_where_the_whole_script_fails(
        src in command(),
        cuts in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(vec!["", "{", "}", "(", ")", "\"", ";", "UPSERT ", "FIND", "//"])), 1..4),
    ) {
        let mut s = format!("{src}\n{src}");
        for (idx, ins) in cuts {
            let mut at = idx.index(s.len() + 1);
            while !s.is_char_boundary(at) { at -= 1; }
            s.insert_str(at, ins);
        }
        let whole = parse_script(&s);
        let parts = kip_lang::script_ranges(&s).and_then(|ranges| {
            if ranges.is_empty() {
                return parse_script(&s);
            }
            ranges
                .into_iter()
                .map(|r| kip_lang::parse_script_part(&s, r, kip_lang::ParseOptions::default()))
                .collect::<Result<Vec<_>, _>>()
        });
        prop_assert_eq!(whole.is_ok(), parts.is_ok(), "{}", s);
        if let (Ok(w), Ok(p)) = (whole, parts) {
            prop_assert_eq!(w, p);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_7023), ..ProptestConfig::default() })]

    /// The parser lexes as it goes, yet reports what lexing the whole input first would:
    /// the first lexing error anywhere wins over any parse error, before or after it.
    #[test]
    fn lexing_errors_take_precedence_wherever_they_are(
        src in command(),
        cuts in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(vec![
            "'", "=", "&", "?1", " 1abc", "\"\\q\"", "-x", "\"\\u12\"", "#", "}", "(", "{", "", "FIND",
        ])), 1..4),
    ) {
        let mut s = format!("{src}\n{src}");
        for (idx, ins) in cuts {
            let mut at = idx.index(s.len() + 1);
            while !s.is_char_boundary(at) { at -= 1; }
            s.insert_str(at, ins);
        }
        if let Err(lexed) = kip_lang::lexer::tokenize(&s) {
            prop_assert_eq!(parse_script(&s).err(), Some(lexed.clone()), "{}", s);
            prop_assert_eq!(parse_command(&s).err(), Some(lexed.clone()), "{}", s);
            prop_assert_eq!(kip_lang::parse_where_clauses(&s).err(), Some(lexed.clone()), "{}", s);
            prop_assert_eq!(
                kip_lang::parse_script_part(&s, 0..s.len(), kip_lang::ParseOptions::default()).err(),
                Some(lexed),
                "{}",
                s
            );
        }
    }
}
