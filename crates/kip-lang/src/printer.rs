//! Renders an AST back to canonical KIP text (`Display` on every command).
//!
//! The output always re-parses to an equal AST: `parse(print(ast)) == ast`.

use crate::ast::*;
use crate::lexer::is_identifier;
use std::fmt::{self, Write};

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

fn key(k: &str) -> String {
    if is_identifier(k) && !matches!(k, "true" | "false" | "null") {
        k.to_string()
    } else {
        quote(k)
    }
}

struct Out {
    buf: String,
    indent: usize,
}

impl Out {
    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.buf.push_str("  ");
        }
        self.buf.push_str(s);
        self.buf.push('\n');
    }
}

/// Canonical text of a value.
pub fn value_to_string(v: &ValueExpr) -> String {
    let mut s = String::new();
    write_value(&mut s, v);
    s
}

fn write_value(s: &mut String, v: &ValueExpr) {
    match &v.kind {
        ValueKind::Null => s.push_str("null"),
        ValueKind::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
        ValueKind::Number(n) => {
            let _ = write!(s, "{n}");
        }
        ValueKind::String(x) => s.push_str(&quote(x)),
        ValueKind::Array(items) => {
            s.push('[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                write_value(s, it);
            }
            s.push(']');
        }
        ValueKind::Object(entries) => write_entries(s, entries),
        ValueKind::Param(p) => {
            s.push(':');
            s.push_str(&p.name);
        }
    }
}

fn write_entries(s: &mut String, entries: &[(String, ValueExpr)]) {
    if entries.is_empty() {
        s.push_str("{}");
        return;
    }
    s.push_str("{ ");
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&key(k));
        s.push_str(": ");
        write_value(s, v);
    }
    s.push_str(" }");
}

fn object(o: &ObjectExpr) -> String {
    let mut s = String::new();
    write_entries(&mut s, &o.entries);
    s
}

fn slot_str(s: &StrSlot) -> String {
    match s {
        Slot::Literal(v, _) => quote(v),
        Slot::Param(p) => format!(":{}", p.name),
    }
}

fn slot_u64(s: &Slot<u64>) -> String {
    match s {
        Slot::Literal(v, _) => v.to_string(),
        Slot::Param(p) => format!(":{}", p.name),
    }
}

/// Canonical text of a dot path.
pub fn dot_path(p: &DotPath) -> String {
    let mut s = format!("?{}", p.var.name);
    for seg in &p.path {
        s.push('.');
        if is_identifier(seg) {
            s.push_str(seg);
        } else {
            s.push_str(&quote(seg));
        }
    }
    s
}

/// Canonical text of a FIND/ORDER BY expression.
pub fn projection(p: &Projection) -> String {
    match p {
        Projection::Path(d) => dot_path(d),
        Projection::Aggregate(a) => format!(
            "{}({}{})",
            a.func.keyword(),
            if a.distinct { "DISTINCT " } else { "" },
            dot_path(&a.arg)
        ),
    }
}

fn matcher(m: &ConceptMatcher) -> String {
    let mut parts = Vec::new();
    if let Some(id) = &m.id {
        parts.push(format!("id: {}", slot_str(id)));
    }
    if let Some(t) = &m.concept_type {
        parts.push(format!("type: {}", slot_str(t)));
    }
    if let Some(n) = &m.name {
        parts.push(format!("name: {}", slot_str(n)));
    }
    format!("{{{}}}", parts.join(", "))
}

fn endpoint(e: &Endpoint) -> String {
    match e {
        Endpoint::Var(v) => format!("?{}", v.name),
        Endpoint::Concept { var, matcher: m } => match var {
            Some(v) => format!("?{} {}", v.name, matcher(m)),
            None => matcher(m),
        },
        Endpoint::Proposition(p) => proposition(p),
    }
}

fn predicate(p: &PredicatePattern) -> String {
    match p {
        PredicatePattern::Var(v) => format!("?{}", v.name),
        PredicatePattern::Literal {
            alternatives, hops, ..
        } => {
            let mut s = alternatives
                .iter()
                .map(slot_str)
                .collect::<Vec<_>>()
                .join(" | ");
            if let Some(h) = hops {
                match (h.exact, h.max) {
                    (true, _) => {
                        let _ = write!(s, "{{{}}}", h.min);
                    }
                    (false, Some(max)) => {
                        let _ = write!(s, "{{{},{}}}", h.min, max);
                    }
                    (false, None) => {
                        let _ = write!(s, "{{{},}}", h.min);
                    }
                }
            }
            s
        }
    }
}

/// Canonical text of a proposition clause (with its `?link` if bound).
pub fn proposition(p: &PropositionPattern) -> String {
    let body = match &p.matcher {
        PropositionMatcher::Id(id) => format!("(id: {})", slot_str(id)),
        PropositionMatcher::Triple(t) => format!(
            "({}, {}, {})",
            endpoint(&t.subject),
            predicate(&t.predicate),
            endpoint(&t.object)
        ),
    };
    match &p.var {
        Some(v) => format!("?{} {}", v.name, body),
        None => body,
    }
}

/// Canonical text of a FILTER expression.
pub fn expr(e: &Expr) -> String {
    expr_prec(e, 0)
}

fn expr_prec(e: &Expr, parent: u8) -> String {
    match e {
        Expr::Value(v) => value_to_string(v),
        Expr::Path(p) => dot_path(p),
        Expr::Not(inner, _) => format!("!{}", expr_prec(inner, 4)),
        Expr::Binary {
            op, left, right, ..
        } => {
            let prec = op.precedence();
            // Comparisons are non-associative: parenthesize comparison operands that are
            // comparisons; && and || are left-associative.
            let (lp, rp) = if prec == 3 { (4, 4) } else { (prec, prec + 1) };
            let s = format!(
                "{} {} {}",
                expr_prec(left, lp),
                op.symbol(),
                expr_prec(right, rp)
            );
            if prec < parent {
                format!("({s})")
            } else {
                s
            }
        }
        Expr::Call { func, args, .. } => format!(
            "{}({})",
            func.keyword(),
            args.iter().map(expr).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn clauses(out: &mut Out, cs: &[WhereClause]) {
    for c in cs {
        match c {
            WhereClause::Concept(cp) => {
                out.line(&format!("?{} {}", cp.var.name, matcher(&cp.matcher)))
            }
            WhereClause::Proposition(p) => out.line(&proposition(p)),
            WhereClause::Filter(f) => out.line(&format!("FILTER({})", expr(&f.expr))),
            WhereClause::Not(g) => group(out, "NOT", g),
            WhereClause::Optional(g) => group(out, "OPTIONAL", g),
            WhereClause::Union(g) => group(out, "UNION", g),
        }
    }
}

fn group(out: &mut Out, kw: &str, g: &GroupClause) {
    out.line(&format!("{kw} {{"));
    out.indent += 1;
    clauses(out, &g.clauses);
    out.indent -= 1;
    out.line("}");
}

fn where_block(out: &mut Out, cs: &[WhereClause]) {
    out.line("WHERE {");
    out.indent += 1;
    clauses(out, cs);
    out.indent -= 1;
    out.line("}");
}

fn limit_cursor(out: &mut Out, limit: &Option<Slot<u64>>, cursor: &Option<StrSlot>) {
    if let Some(l) = limit {
        out.line(&format!("LIMIT {}", slot_u64(l)));
    }
    if let Some(c) = cursor {
        out.line(&format!("CURSOR {}", slot_str(c)));
    }
}

fn with_metadata(m: &Option<ObjectExpr>) -> String {
    match m {
        Some(o) => format!(" WITH METADATA {}", object(o)),
        None => String::new(),
    }
}

fn upsert(out: &mut Out, u: &Upsert) {
    out.line("UPSERT {");
    out.indent += 1;
    for b in &u.blocks {
        match b {
            UpsertBlock::Concept(c) => {
                let h = c
                    .handle
                    .as_ref()
                    .map(|h| format!(" ?{}", h.name))
                    .unwrap_or_default();
                out.line(&format!("CONCEPT{h} {{"));
                out.indent += 1;
                out.line(&matcher(&c.identity));
                if let Some(v) = &c.expect_version {
                    out.line(&format!("EXPECT VERSION {}", slot_u64(v)));
                }
                if let Some(a) = &c.set_attributes {
                    out.line(&format!("SET ATTRIBUTES {}", object(a)));
                }
                if let Some(props) = &c.set_propositions {
                    out.line("SET PROPOSITIONS {");
                    out.indent += 1;
                    for p in props {
                        out.line(&format!(
                            "({}, {}){}",
                            slot_str(&p.predicate),
                            endpoint(&p.target),
                            with_metadata(&p.metadata)
                        ));
                    }
                    out.indent -= 1;
                    out.line("}");
                }
                out.indent -= 1;
                out.line(&format!("}}{}", with_metadata(&c.metadata)));
            }
            UpsertBlock::Proposition(p) => {
                let h = p
                    .handle
                    .as_ref()
                    .map(|h| format!(" ?{}", h.name))
                    .unwrap_or_default();
                out.line(&format!("PROPOSITION{h} {{"));
                out.indent += 1;
                out.line(&proposition(&p.identity));
                if let Some(v) = &p.expect_version {
                    out.line(&format!("EXPECT VERSION {}", slot_u64(v)));
                }
                if let Some(a) = &p.set_attributes {
                    out.line(&format!("SET ATTRIBUTES {}", object(a)));
                }
                out.indent -= 1;
                out.line(&format!("}}{}", with_metadata(&p.metadata)));
            }
        }
    }
    out.indent -= 1;
    out.line(&format!("}}{}", with_metadata(&u.metadata)));
}

/// Canonical text of an update value (a JSON value or an update expression).
pub fn update_value(v: &UpdateValue) -> String {
    match v {
        UpdateValue::Value(x) => value_to_string(x),
        UpdateValue::Path(p) => dot_path(p),
        UpdateValue::Call { func, args, .. } => format!(
            "{}({})",
            func.as_str(),
            args.iter().map(update_value).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn update_object(o: &UpdateObject) -> String {
    if o.entries.is_empty() {
        return "{}".into();
    }
    let entries: Vec<String> = o
        .entries
        .iter()
        .map(|(k, v)| format!("{}: {}", key(k), update_value(v)))
        .collect();
    format!("{{ {} }}", entries.join(", "))
}

fn keys(ks: &[StrSlot]) -> String {
    ks.iter().map(slot_str).collect::<Vec<_>>().join(", ")
}

fn command(out: &mut Out, c: &Command) {
    match c {
        Command::Find(q) => {
            out.line(&format!(
                "FIND({})",
                q.projections
                    .iter()
                    .map(projection)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            where_block(out, &q.where_clauses);
            if !q.order_by.is_empty() {
                let ks: Vec<String> = q
                    .order_by
                    .iter()
                    .map(|k| {
                        let dir = match (k.direction, k.explicit_direction) {
                            (Direction::Asc, true) => " ASC",
                            (Direction::Desc, _) => " DESC",
                            (Direction::Asc, false) => "",
                        };
                        format!("{}{}", projection(&k.expr), dir)
                    })
                    .collect();
                out.line(&format!("ORDER BY {}", ks.join(", ")));
            }
            limit_cursor(out, &q.limit, &q.cursor);
        }
        Command::Upsert(u) => upsert(out, u),
        Command::Delete(d) => {
            let head = match &d.target {
                DeleteTarget::Attributes { keys: k, var } => {
                    format!("DELETE ATTRIBUTES {{{}}} FROM ?{}", keys(k), var.name)
                }
                DeleteTarget::Metadata { keys: k, var } => {
                    format!("DELETE METADATA {{{}}} FROM ?{}", keys(k), var.name)
                }
                DeleteTarget::Propositions { var } => format!("DELETE PROPOSITIONS ?{}", var.name),
                DeleteTarget::Concept { var } => format!("DELETE CONCEPT ?{} DETACH", var.name),
            };
            out.line(&head);
            where_block(out, &d.where_clauses);
        }
        Command::Describe(d) => match &d.target {
            DescribeTarget::Primer => out.line("DESCRIBE PRIMER"),
            DescribeTarget::Domains => out.line("DESCRIBE DOMAINS"),
            DescribeTarget::ConceptTypes { limit, cursor } => {
                out.line("DESCRIBE CONCEPT TYPES");
                limit_cursor(out, limit, cursor);
            }
            DescribeTarget::PropositionTypes { limit, cursor } => {
                out.line("DESCRIBE PROPOSITION TYPES");
                limit_cursor(out, limit, cursor);
            }
            DescribeTarget::ConceptType(n) => {
                out.line(&format!("DESCRIBE CONCEPT TYPE {}", slot_str(n)))
            }
            DescribeTarget::PropositionType(n) => {
                out.line(&format!("DESCRIBE PROPOSITION TYPE {}", slot_str(n)))
            }
        },
        Command::Search(s) => {
            let mut line = format!(
                "SEARCH {} {}",
                match s.target {
                    SearchTarget::Concept => "CONCEPT",
                    SearchTarget::Proposition => "PROPOSITION",
                },
                slot_str(&s.term)
            );
            if let Some(t) = &s.with_type {
                let _ = write!(line, " WITH TYPE {}", slot_str(t));
            }
            if let Some(m) = &s.mode {
                let m = match m {
                    Slot::Literal(m, _) => quote(m.as_str()),
                    Slot::Param(p) => format!(":{}", p.name),
                };
                let _ = write!(line, " MODE {m}");
            }
            if let Some(t) = &s.threshold {
                let t = match t {
                    Slot::Literal(t, _) => t.to_string(),
                    Slot::Param(p) => format!(":{}", p.name),
                };
                let _ = write!(line, " THRESHOLD {t}");
            }
            if let Some(l) = &s.limit {
                let _ = write!(line, " LIMIT {}", slot_u64(l));
            }
            out.line(&line);
        }
        Command::Update(u) => {
            out.line(&format!("UPDATE ?{}", u.target.name));
            if let Some(o) = &u.set_attributes {
                out.line(&format!("SET ATTRIBUTES {}", update_object(o)));
            }
            if let Some(o) = &u.set_metadata {
                out.line(&format!("SET METADATA {}", update_object(o)));
            }
            where_block(out, &u.where_clauses);
            limit_cursor(out, &u.limit, &None);
        }
        Command::Merge(m) => {
            out.line(&format!(
                "MERGE CONCEPT ?{} INTO ?{}",
                m.source.name, m.target.name
            ));
            where_block(out, &m.where_clauses);
        }
        Command::Export(e) => {
            out.line(&format!("EXPORT ?{}", e.target.name));
            where_block(out, &e.where_clauses);
            limit_cursor(out, &e.limit, &e.cursor);
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Out {
            buf: String::new(),
            indent: 0,
        };
        command(&mut out, self);
        f.write_str(out.buf.trim_end())
    }
}

/// Canonical text of a script (commands separated by blank lines).
pub fn script(cmds: &[Command]) -> String {
    cmds.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join("\n\n")
}
