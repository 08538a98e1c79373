//! Differential test of the KQL engine: random small graphs and random queries, each
//! answered by the planned, index-driven engine and by a naive reference evaluator
//! written here (nested loops over every element, clauses in the reference order:
//! required patterns, then OPTIONAL, then FILTER, then NOT, then UNION). The answers
//! must be the same set of rows.

mod common;
use common::*;
use kip_lang::ast::*;
use kip_lang::{parse_command, Command};
use kip_open::Open;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashSet};

// ---------------------------------------------------------------- random graphs

#[derive(Debug, Clone)]
struct GraphSpec {
    concepts: Vec<(bool, u8, Option<i64>)>, // (is type A, index, attribute v)
    links: Vec<(usize, bool, usize)>,       // (subject concept, predicate p?, object concept)
    meta: Vec<(usize, usize)>,              // (subject concept, object link): "q" links to links
}

fn graph() -> impl Strategy<Value = GraphSpec> {
    (2usize..7, 2usize..7).prop_flat_map(|(na, nb)| {
        let n = na + nb;
        let concepts = (0..n)
            .map(|i| {
                (
                    Just(i < na),
                    Just(if i < na { i as u8 } else { (i - na) as u8 }),
                    prop::option::of(0i64..4),
                )
            })
            .collect::<Vec<_>>();
        (
            concepts,
            prop::collection::vec((0..n, any::<bool>(), 0..n), 0..18),
            prop::collection::vec((0..n, 0usize..18), 0..4),
        )
            .prop_map(|(concepts, links, meta)| GraphSpec {
                concepts,
                links,
                meta,
            })
    })
}

fn cname(c: &(bool, u8, Option<i64>)) -> String {
    format!("{}{}", if c.0 { "a" } else { "b" }, c.1)
}

fn load(spec: &GraphSpec) -> kip_engine::Nexus {
    // On the test matrix's PostgreSQL leg (scripts/test.sh), in a schema of its own.
    // Genesis only: the naive evaluator joins over every element, and the standard
    // capsules would multiply its work without adding anything to compare.
    let n = if kip_open::testing::on_postgres() {
        let url = kip_open::testing::scratch_url("d").expect("a test schema");
        kip_engine::Nexus::open_postgres_genesis_only(&url).expect("a nexus in PostgreSQL")
    } else {
        kip_engine::Nexus::in_memory_genesis_only().expect("nexus")
    };
    ok(
        &n,
        r#"UPSERT {
            CONCEPT ?a { {type: "$ConceptType", name: "A"} SET ATTRIBUTES { description: "A" } }
            CONCEPT ?b { {type: "$ConceptType", name: "B"} SET ATTRIBUTES { description: "B" } }
            CONCEPT ?p { {type: "$PropositionType", name: "p"} SET ATTRIBUTES { description: "p", subject_types: ["*"], object_types: ["*"] } }
            CONCEPT ?q { {type: "$PropositionType", name: "q"} SET ATTRIBUTES { description: "q", subject_types: ["*"], object_types: ["*"] } }
        }"#,
    );
    let mut s = String::from("UPSERT {");
    for (i, c) in spec.concepts.iter().enumerate() {
        let attrs =
            c.2.map(|v| format!(" SET ATTRIBUTES {{ v: {v} }}"))
                .unwrap_or_default();
        s.push_str(&format!(
            r#" CONCEPT ?c{i} {{ {{type: "{}", name: "{}"}}{attrs} }}"#,
            if c.0 { "A" } else { "B" },
            cname(c)
        ));
    }
    let mut handles = Vec::new();
    for (i, (sj, p, o)) in spec.links.iter().enumerate() {
        s.push_str(&format!(
            r#" PROPOSITION ?l{i} {{ (?c{sj}, "{}", ?c{o}) }}"#,
            if *p { "p" } else { "q" }
        ));
        handles.push(i);
    }
    for (sj, li) in &spec.meta {
        if let Some(h) = handles.get(li % handles.len().max(1)) {
            if !handles.is_empty() {
                s.push_str(&format!(r#" PROPOSITION {{ (?c{sj}, "q", ?l{h}) }}"#));
            }
        }
    }
    s.push('}');
    ok(&n, &s);
    n
}

// ---------------------------------------------------------------- random queries

fn var() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["?x", "?y", "?z", "?w"]).prop_map(str::to_string)
}

fn matcher() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#"{type: "A"}"#.to_string()),
        Just(r#"{type: "B"}"#.to_string()),
        (0u8..4).prop_map(|i| format!(r#"{{name: "a{i}"}}"#)),
        (0u8..4).prop_map(|i| format!(r#"{{type: "B", name: "b{i}"}}"#)),
    ]
}

fn endpoint() -> impl Strategy<Value = String> {
    prop_oneof![4 => var(), 1 => matcher(), 1 => (var(), var()).prop_map(|(a, b)| format!("({a}, \"p\", {b})"))]
}

fn pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (var(), matcher()).prop_map(|(v, m)| format!("{v} {m}")),
        3 => (endpoint(), prop::sample::select(vec!["\"p\"", "\"q\"", "\"p\" | \"q\"", "?pr"]), endpoint())
            .prop_map(|(s, p, o)| format!("({s}, {p}, {o})")),
        1 => (var(), var(), var()).prop_map(|(l, s, o)| format!("{l} ({s}, \"p\", {o})")),
        1 => (var(), 0u32..3, 0u32..3, var()).prop_map(|(s, a, b, o)| format!("({s}, \"p\"{{{},{}}}, {o})", a.min(b), a.max(b))),
    ]
}

fn filter() -> impl Strategy<Value = String> {
    prop_oneof![
        (var(), 0i64..4).prop_map(|(v, k)| format!("FILTER({v}.attributes.v > {k})")),
        (var(), 0u8..4).prop_map(|(v, i)| format!("FILTER({v}.name != \"a{i}\")")),
        var().prop_map(|v| format!("FILTER(IS_NULL({v}.attributes.v) || {v}.attributes.v <= 1)")),
        (var(), var()).prop_map(|(a, b)| format!("FILTER(!({a}.name == {b}.name))")),
    ]
}

fn where_body() -> impl Strategy<Value = String> {
    let clause = prop_oneof![4 => pattern(), 1 => filter()];
    let flat = prop::collection::vec(clause, 1..4).prop_map(|v| v.join("\n"));
    flat.prop_recursive(2, 6, 2, |inner| {
        (
            inner.clone(),
            prop::sample::select(vec!["OPTIONAL", "NOT", "UNION"]),
            inner,
        )
            .prop_map(|(a, kw, b)| format!("{a}\n{kw} {{\n{b}\n}}"))
    })
}

// ---------------------------------------------------------------- reference evaluator

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum RV {
    Id(String),
    Pred(String),
}

type RRow = BTreeMap<String, RV>;

struct Data {
    concepts: BTreeMap<String, Value>,
    links: BTreeMap<String, Value>,
}

fn lit(s: &StrSlot) -> String {
    s.literal().cloned().unwrap_or_default()
}

impl Data {
    fn element(&self, id: &str) -> Option<&Value> {
        self.concepts.get(id).or_else(|| self.links.get(id))
    }

    fn bind(row: &RRow, v: &str, val: RV) -> Option<RRow> {
        match row.get(v) {
            Some(x) if *x != val => None,
            Some(_) => Some(row.clone()),
            None => {
                let mut r = row.clone();
                r.insert(v.to_string(), val);
                Some(r)
            }
        }
    }

    fn concept_ok(&self, m: &ConceptMatcher, id: &str) -> bool {
        let Some(c) = self.concepts.get(id) else {
            return false;
        };
        m.id.as_ref().is_none_or(|x| lit(x) == id)
            && m.concept_type
                .as_ref()
                .is_none_or(|t| c["type"] == lit(t).as_str())
            && m.name.as_ref().is_none_or(|n| c["name"] == lit(n).as_str())
    }

    fn accept(&self, e: &Endpoint, id: &str, row: &RRow) -> Vec<RRow> {
        match e {
            Endpoint::Var(v) => Self::bind(row, &v.name, RV::Id(id.to_string()))
                .into_iter()
                .collect(),
            Endpoint::Concept { var, matcher } => {
                if !self.concept_ok(matcher, id) {
                    return vec![];
                }
                match var {
                    Some(v) => Self::bind(row, &v.name, RV::Id(id.to_string()))
                        .into_iter()
                        .collect(),
                    None => vec![row.clone()],
                }
            }
            Endpoint::Proposition(p) => match self.links.get(id) {
                Some(_) => self.check_link(p, id, row),
                None => vec![],
            },
        }
    }

    fn check_link(&self, p: &PropositionPattern, id: &str, row: &RRow) -> Vec<RRow> {
        let row = match &p.var {
            Some(v) => match Self::bind(row, &v.name, RV::Id(id.to_string())) {
                Some(r) => r,
                None => return vec![],
            },
            None => row.clone(),
        };
        let l = &self.links[id];
        match &p.matcher {
            PropositionMatcher::Id(x) => {
                if lit(x) == id {
                    vec![row]
                } else {
                    vec![]
                }
            }
            PropositionMatcher::Triple(t) => {
                let rows = match &t.predicate {
                    PredicatePattern::Var(v) => Self::bind(
                        &row,
                        &v.name,
                        RV::Pred(l["predicate"].as_str().unwrap_or("").to_string()),
                    )
                    .into_iter()
                    .collect(),
                    PredicatePattern::Literal {
                        alternatives, hops, ..
                    } => {
                        if hops.is_some()
                            || !alternatives
                                .iter()
                                .any(|a| l["predicate"] == lit(a).as_str())
                        {
                            vec![]
                        } else {
                            vec![row]
                        }
                    }
                };
                let s = l["subject"].as_str().unwrap_or("").to_string();
                let o = l["object"].as_str().unwrap_or("").to_string();
                rows.iter()
                    .flat_map(|r| self.accept(&t.subject, &s, r))
                    .flat_map(|r| self.accept(&t.object, &o, &r))
                    .collect()
            }
        }
    }

    fn bound_value(e: &Endpoint, row: &RRow) -> Option<String> {
        match e {
            Endpoint::Var(v) => match row.get(&v.name) {
                Some(RV::Id(x)) => Some(x.clone()),
                _ => None,
            },
            _ => None,
        }
    }

    /// Walks of length min..=max over `preds`; zero-hop pairs are (c, c) for concepts.
    fn path(
        &self,
        s: &Endpoint,
        preds: &[String],
        min: u32,
        max: u32,
        o: &Endpoint,
        row: &RRow,
    ) -> Vec<RRow> {
        let edges: Vec<(String, String)> = self
            .links
            .values()
            .filter(|l| preds.iter().any(|p| l["predicate"] == p.as_str()))
            .map(|l| {
                (
                    l["subject"].as_str().unwrap_or("").to_string(),
                    l["object"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        let walk = |start: &str, forward: bool| -> BTreeSet<String> {
            let mut out = BTreeSet::new();
            let mut level: BTreeSet<String> = [start.to_string()].into();
            if min == 0 && self.concepts.contains_key(start) {
                out.insert(start.to_string());
            }
            for d in 1..=max {
                let next: BTreeSet<String> = edges
                    .iter()
                    .filter(|(a, b)| level.contains(if forward { a } else { b }))
                    .map(|(a, b)| if forward { b.clone() } else { a.clone() })
                    .collect();
                if d >= min {
                    out.extend(next.iter().cloned());
                }
                level = next;
            }
            out
        };
        let mut rows = Vec::new();
        if let Some(sv) = Self::bound_value(s, row) {
            for e in walk(&sv, true) {
                rows.extend(self.accept(o, &e, row));
            }
        } else if let Some(ov) = Self::bound_value(o, row) {
            for st in walk(&ov, false) {
                rows.extend(self.accept(s, &st, row));
            }
        } else {
            let mut starts: BTreeSet<String> = edges.iter().map(|(a, _)| a.clone()).collect();
            if min == 0 {
                starts.extend(self.concepts.keys().cloned());
            }
            for st in starts {
                for r1 in self.accept(s, &st, row) {
                    for e in walk(&st, true) {
                        rows.extend(self.accept(o, &e, &r1));
                    }
                }
            }
        }
        rows
    }

    fn pattern(&self, c: &WhereClause, row: &RRow) -> Vec<RRow> {
        match c {
            WhereClause::Concept(cp) => self
                .concepts
                .keys()
                .filter(|id| self.concept_ok(&cp.matcher, id))
                .filter_map(|id| Self::bind(row, &cp.var.name, RV::Id(id.clone())))
                .collect(),
            WhereClause::Proposition(p) => {
                if let PropositionMatcher::Triple(t) = &p.matcher {
                    if let PredicatePattern::Literal {
                        alternatives,
                        hops: Some(h),
                        ..
                    } = &t.predicate
                    {
                        let preds: Vec<String> = alternatives.iter().map(lit).collect();
                        let max = h.max.unwrap_or(16);
                        if h.min == 1 && max == 1 {
                            let single = PropositionPattern {
                                var: p.var.clone(),
                                matcher: PropositionMatcher::Triple(Box::new(TriplePattern {
                                    subject: t.subject.clone(),
                                    predicate: PredicatePattern::Literal {
                                        alternatives: alternatives.clone(),
                                        hops: None,
                                        span: Default::default(),
                                    },
                                    object: t.object.clone(),
                                })),
                                span: Default::default(),
                            };
                            return self
                                .links
                                .keys()
                                .flat_map(|id| self.check_link(&single, id, row))
                                .collect();
                        }
                        return self.path(&t.subject, &preds, h.min, max, &t.object, row);
                    }
                }
                self.links
                    .keys()
                    .flat_map(|id| self.check_link(p, id, row))
                    .collect()
            }
            _ => vec![row.clone()],
        }
    }

    fn value(&self, e: &Expr, row: &RRow) -> Value {
        match e {
            Expr::Value(v) => v.to_json().unwrap_or(Value::Null),
            Expr::Path(p) => match row.get(&p.var.name) {
                None => Value::Null,
                Some(RV::Pred(s)) => {
                    if p.path.is_empty() {
                        json!(s)
                    } else {
                        Value::Null
                    }
                }
                Some(RV::Id(id)) => {
                    if p.path.is_empty() {
                        return json!(id);
                    }
                    let el = self.element(id).cloned().unwrap_or(Value::Null);
                    let mut cur = &el;
                    for seg in &p.path {
                        cur = match cur.get(seg) {
                            Some(v) => v,
                            None => return Value::Null,
                        };
                    }
                    cur.clone()
                }
            },
            Expr::Not(inner, _) => json!(self.value(inner, row) != json!(true)),
            Expr::Binary {
                op, left, right, ..
            } => {
                let (l, r) = (self.value(left, row), self.value(right, row));
                let num = |v: &Value| v.as_f64();
                let ord = match (&l, &r) {
                    (Value::Number(_), Value::Number(_)) => {
                        num(&l).zip(num(&r)).and_then(|(a, b)| a.partial_cmp(&b))
                    }
                    (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
                    _ => None,
                };
                use std::cmp::Ordering::*;
                json!(match op {
                    BinaryOp::And => l == json!(true) && r == json!(true),
                    BinaryOp::Or => l == json!(true) || r == json!(true),
                    BinaryOp::Eq => ord.map(|o| o == Equal).unwrap_or(l == r),
                    BinaryOp::Ne => !ord.map(|o| o == Equal).unwrap_or(l == r),
                    BinaryOp::Lt => ord == Some(Less),
                    BinaryOp::Le => matches!(ord, Some(Less | Equal)),
                    BinaryOp::Gt => ord == Some(Greater),
                    BinaryOp::Ge => matches!(ord, Some(Greater | Equal)),
                })
            }
            Expr::Call { func, args, .. } => {
                let a = self.value(&args[0], row);
                json!(match func {
                    Function::IsNull => a.is_null(),
                    Function::IsNotNull => !a.is_null(),
                    _ => false,
                })
            }
        }
    }

    fn group(&self, clauses: &[WhereClause], input: &RRow) -> Vec<RRow> {
        let mut rows = vec![input.clone()];
        for c in clauses {
            if matches!(c, WhereClause::Concept(_) | WhereClause::Proposition(_)) {
                rows = rows.iter().flat_map(|r| self.pattern(c, r)).collect();
            }
        }
        for c in clauses {
            if let WhereClause::Optional(g) = c {
                rows = rows
                    .iter()
                    .flat_map(|r| {
                        let ext = self.group(&g.clauses, r);
                        if ext.is_empty() {
                            vec![r.clone()]
                        } else {
                            ext
                        }
                    })
                    .collect();
            }
        }
        for c in clauses {
            if let WhereClause::Filter(f) = c {
                rows.retain(|r| self.value(&f.expr, r) == json!(true));
            }
        }
        for c in clauses {
            if let WhereClause::Not(g) = c {
                rows.retain(|r| self.group(&g.clauses, r).is_empty());
            }
        }
        for c in clauses {
            if let WhereClause::Union(g) = c {
                for r in self.group(&g.clauses, &RRow::new()) {
                    let mut merged = input.clone();
                    if r.iter().all(|(k, v)| merged.get(k).is_none_or(|x| x == v)) {
                        merged.extend(r);
                        rows.push(merged);
                    }
                }
            }
        }
        rows
    }
}

fn project(data: &Data, row: &RRow, vars: &[String]) -> Vec<Value> {
    vars.iter()
        .map(|v| match row.get(v) {
            None => Value::Null,
            Some(RV::Pred(p)) => json!(p),
            Some(RV::Id(id)) => data.element(id).cloned().unwrap_or(Value::Null),
        })
        .collect()
}

fn bound_vars(clauses: &[WhereClause], out: &mut BTreeSet<String>) {
    fn ep(e: &Endpoint, out: &mut BTreeSet<String>) {
        match e {
            Endpoint::Var(v) => {
                out.insert(v.name.clone());
            }
            Endpoint::Concept { var: Some(v), .. } => {
                out.insert(v.name.clone());
            }
            Endpoint::Concept { .. } => {}
            Endpoint::Proposition(p) => prop(p, out),
        }
    }
    fn prop(p: &PropositionPattern, out: &mut BTreeSet<String>) {
        if let Some(v) = &p.var {
            out.insert(v.name.clone());
        }
        if let PropositionMatcher::Triple(t) = &p.matcher {
            ep(&t.subject, out);
            ep(&t.object, out);
            if let PredicatePattern::Var(v) = &t.predicate {
                out.insert(v.name.clone());
            }
        }
    }
    for c in clauses {
        match c {
            WhereClause::Concept(cp) => {
                out.insert(cp.var.name.clone());
            }
            WhereClause::Proposition(p) => prop(p, out),
            WhereClause::Optional(g) | WhereClause::Union(g) => bound_vars(&g.clauses, out),
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_7021), ..ProptestConfig::default() })]

    #[test]
    fn engine_agrees_with_the_naive_evaluator(spec in graph(), body in where_body()) {
        let n = load(&spec);
        let where_src = format!("FIND(?x) WHERE {{\n{body}\n}}");
        let Ok(Command::Find(q)) = parse_command(&where_src) else {
            if std::env::var("KIP_DIFF_TRACE").is_ok() {
                eprintln!("unparsed: {where_src}");
            }
            return Ok(());
        };
        let mut vars = BTreeSet::new();
        bound_vars(&q.where_clauses, &mut vars);
        if vars.is_empty() {
            return Ok(());
        }
        let vars: Vec<String> = vars.into_iter().collect();
        let find = format!(
            "FIND({}) WHERE {{\n{body}\n}} LIMIT 10000",
            vars.iter().map(|v| format!("?{v}")).collect::<Vec<_>>().join(", ")
        );
        let dump = n.admin().dump().expect("dump");
        let data = Data {
            concepts: dump["concepts"].as_array().expect("c").iter().map(|c| (c["id"].as_str().unwrap_or("").to_string(), c.clone())).collect(),
            links: dump["propositions"].as_array().expect("p").iter().map(|p| (p["id"].as_str().unwrap_or("").to_string(), p.clone())).collect(),
        };
        let mut expected: Vec<Vec<Value>> = data
            .group(&q.where_clauses, &RRow::new())
            .iter()
            .map(|r| project(&data, r, &vars))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        expected.sort_by_key(|r| serde_json::to_string(r).unwrap_or_default());
        let r = run(&n, &find);
        prop_assert!(r.get("error").is_none(), "{}\n=> {}", find, r);
        let cols: Vec<Vec<Value>> = if vars.len() == 1 {
            vec![r["result"].as_array().cloned().unwrap_or_default()]
        } else {
            r["result"].as_array().cloned().unwrap_or_default().into_iter().map(|c| c.as_array().cloned().unwrap_or_default()).collect()
        };
        let rows = cols.first().map(Vec::len).unwrap_or(0);
        let mut got: Vec<Vec<Value>> = (0..rows).map(|i| cols.iter().map(|c| c[i].clone()).collect()).collect();
        got.sort_by_key(|r| serde_json::to_string(r).unwrap_or_default());
        if std::env::var("KIP_DIFF_TRACE").is_ok() {
            eprintln!("rows={} vars={}", got.len(), vars.len());
        }
        prop_assert_eq!(got, expected, "query:\n{}", find);
    }
}
