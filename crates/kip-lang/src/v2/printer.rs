//! Canonical KIP 2.0 text of a [`Statement`]: uppercase keywords, one space between
//! tokens, JSON literals. Printing a parsed statement and parsing the text again gives
//! the same tree ([`std::fmt::Display`] on [`Statement`]).

use super::ast::*;
use crate::lexer::is_identifier;
use serde_json::Value as Json;
use std::fmt::{self, Display, Formatter, Write};

fn json(v: &Json) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

fn quoted(s: &str) -> String {
    json(&Json::String(s.to_string()))
}

fn field(name: &str) -> String {
    if is_identifier(name) {
        name.to_string()
    } else {
        quoted(name)
    }
}

fn list<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    items.iter().map(f).collect::<Vec<_>>().join(", ")
}

fn scalar(s: &Scalar) -> String {
    match s {
        Scalar::Param(p) => format!(":{p}"),
        Scalar::Literal(l) => json(l),
    }
}

fn symbol(s: &Symbol) -> String {
    match s {
        Symbol::Name(n) => quoted(n),
        Symbol::Param(p) => format!(":{p}"),
    }
}

fn target(t: &TargetRef) -> String {
    match t {
        TargetRef::Var(v) => format!("?{v}"),
        TargetRef::Param(p) => format!(":{p}"),
        TargetRef::Id(s) => quoted(s),
    }
}

fn predicate(p: &PredicateAtom) -> String {
    match p {
        PredicateAtom::Name(n) => quoted(n),
        PredicateAtom::Param(p) => format!(":{p}"),
        PredicateAtom::Var(v) => format!("?{v}"),
    }
}

fn object(members: &[(String, Value)]) -> String {
    format!(
        "{{{}}}",
        list(members, |(k, v)| format!("{}: {}", field(k), value(v)))
    )
}

fn value(v: &Value) -> String {
    match v {
        Value::Param(p) => format!(":{p}"),
        Value::Literal(l) => json(l),
        Value::Array(items) => format!("[{}]", list(items, value)),
        Value::Object(members) => object(members),
        Value::Call(c) => format!("{}({})", c.name, list(&c.args, expr)),
        Value::Field(f) => {
            let mut s = format!("?{}", f.var);
            for step in &f.steps {
                if is_identifier(step) {
                    let _ = write!(s, ".{step}");
                } else {
                    let _ = write!(s, "[{}]", quoted(step));
                }
            }
            s
        }
    }
}

fn expr(e: &Expr) -> String {
    match e {
        Expr::Value(v) => value(v),
        Expr::Not(e) => format!("!{}", expr(e)),
        // A space, so that `- 5` stays a negation and is not read as the literal -5.
        Expr::Neg(e) => format!("- {}", expr(e)),
        Expr::Group(e) => format!("({})", expr(e)),
        Expr::Binary(op, l, r) => {
            let op = match op {
                BinOp::Or => "||",
                BinOp::And => "&&",
                BinOp::Eq => "==",
                BinOp::Ne => "!=",
                BinOp::Lt => "<",
                BinOp::Gt => ">",
                BinOp::Le => "<=",
                BinOp::Ge => ">=",
            };
            format!("{} {op} {}", expr(l), expr(r))
        }
    }
}

fn pattern(p: &Pattern) -> String {
    match p {
        Pattern::Var(v) => format!("?{v}"),
        Pattern::Param(p) => format!(":{p}"),
        Pattern::Literal(l) => json(l),
        Pattern::Array(items) => format!("[{}]", list(items, pattern)),
        Pattern::Object(o) => object_pattern(o),
        Pattern::Tuple(t) => tuple(t),
    }
}

fn object_pattern(o: &ObjectPattern) -> String {
    format!(
        "{{{}}}",
        list(o, |(k, v)| format!("{}: {}", field(k), pattern(v)))
    )
}

fn tuple(t: &PropTuple) -> String {
    match t {
        PropTuple::Id(v) => format!("(id: {})", scalar(v)),
        PropTuple::Triple(s, path, o) => {
            let path = path
                .iter()
                .map(|a| {
                    let q = match a.quantifier {
                        None => String::new(),
                        Some(Quantifier { min, max: None }) => format!("{{{min},}}"),
                        Some(Quantifier { min, max: Some(m) }) if m == min => format!("{{{min}}}"),
                        Some(Quantifier { min, max: Some(m) }) => format!("{{{min},{m}}}"),
                    };
                    format!("{}{q}", predicate(&a.atom))
                })
                .collect::<Vec<_>>()
                .join(" | ");
            format!("({}, {path}, {})", pattern(s), pattern(o))
        }
    }
}

fn record_kind(k: RecordKind) -> &'static str {
    match k {
        RecordKind::Assertion => "ASSERTION",
        RecordKind::Evidence => "EVIDENCE",
        RecordKind::Activity => "ACTIVITY",
    }
}

fn opt_var(v: &Option<String>) -> String {
    v.as_ref().map(|v| format!("?{v} ")).unwrap_or_default()
}

fn where_block(clauses: &[WhereClause]) -> String {
    if clauses.is_empty() {
        return "{ }".into();
    }
    format!(
        "{{ {} }}",
        clauses
            .iter()
            .map(where_clause)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

fn where_clause(c: &WhereClause) -> String {
    match c {
        WhereClause::Concept { var, pattern } => {
            format!("?{var} CONCEPT {}", object_pattern(pattern))
        }
        WhereClause::Proposition { var, tuple: t } => {
            format!("{}PROPOSITION {}", opt_var(var), tuple(t))
        }
        WhereClause::Record { var, kind, pattern } => {
            format!("?{var} {} {}", record_kind(*kind), object_pattern(pattern))
        }
        WhereClause::Structural {
            var,
            from,
            field,
            to,
        } => format!(
            "{}STRUCTURAL ({}, {}, {})",
            opt_var(var),
            pattern(from),
            symbol(field),
            pattern(to)
        ),
        WhereClause::Belief { var, target } => {
            let operand = match target {
                BeliefTarget::Var(v) => format!("?{v}"),
                BeliefTarget::Id(v) => format!("id: {}", scalar(v)),
                BeliefTarget::Triple(s, p, o) => {
                    format!("{}, {}, {}", pattern(s), predicate(p), pattern(o))
                }
            };
            format!("?{var} BELIEF ({operand})")
        }
        WhereClause::BeliefSlot {
            var,
            subject,
            predicate: p,
        } => format!(
            "?{var} BELIEF SLOT ({}, {})",
            pattern(subject),
            predicate(p)
        ),
        WhereClause::Filter(e) => format!("FILTER({})", expr(e)),
        WhereClause::Not(b) => format!("NOT {}", where_block(b)),
        WhereClause::Optional(b) => format!("OPTIONAL {}", where_block(b)),
        WhereClause::Union(b) => format!("UNION {}", where_block(b)),
    }
}

fn as_of(a: &AsOf) -> String {
    match a {
        AsOf::Seq(v) => format!(" AS OF SEQ {}", scalar(v)),
        AsOf::Tx(v) => format!(" AS OF TX {}", scalar(v)),
        AsOf::Time(v) => format!(" AS OF TIME {}", scalar(v)),
    }
}

fn projection(p: &Projection) -> String {
    match p {
        Projection::Aggregate {
            func,
            distinct,
            arg,
        } => format!(
            "{func}({}{})",
            if *distinct { "DISTINCT " } else { "" },
            expr(arg)
        ),
        Projection::Expr(e) => expr(e),
    }
}

fn opt(prefix: &str, v: &Option<Scalar>) -> String {
    v.as_ref()
        .map(|v| format!(" {prefix} {}", scalar(v)))
        .unwrap_or_default()
}

fn query(q: &Query) -> String {
    let mut s = format!(
        "FIND({}) WHERE {}",
        list(&q.projection, projection),
        where_block(&q.where_clauses)
    );
    if let Some(a) = &q.as_of {
        s.push_str(&as_of(a));
    }
    s.push_str(&opt("FOR TIME", &q.for_time));
    if let Some(e) = &q.epistemic {
        let _ = write!(s, " WITH EPISTEMIC {}", object(e));
    }
    if !q.order_by.is_empty() {
        let items = list(&q.order_by, |o| {
            format!(
                "{}{}",
                projection(&o.key),
                if o.descending { " DESC" } else { " ASC" }
            )
        });
        let _ = write!(s, " ORDER BY {items}");
    }
    s.push_str(&opt("LIMIT", &q.limit));
    s.push_str(&opt("CURSOR", &q.cursor));
    s
}

fn names(n: &[String]) -> String {
    format!("{{{}}}", list(n, |f| field(f)))
}

fn structural(entries: &[StructuralEntry]) -> String {
    let inner = entries
        .iter()
        .map(|e| {
            let mut s = format!("({}, {})", symbol(&e.field), value(&e.target));
            if let Some(o) = &e.options {
                let _ = write!(s, " {}", object(o));
            }
            s
        })
        .collect::<Vec<_>>()
        .join(" ");
    if inner.is_empty() {
        "{ }".into()
    } else {
        format!("{{ {inner} }}")
    }
}

fn clause(c: &Clause) -> String {
    match c {
        Clause::Type(s) => format!("TYPE {}", symbol(s)),
        Clause::ClientKey(v) => format!("CLIENT KEY {}", scalar(v)),
        Clause::Name(v) => format!("NAME {}", scalar(v)),
        Clause::Match(o) => format!("MATCH {}", object_pattern(o)),
        Clause::ExpectVersion(v) => format!("EXPECT VERSION {}", scalar(v)),
        Clause::SetFields(o) => format!("SET FIELDS {}", object(o)),
        Clause::SetAttributes(o) => format!("SET ATTRIBUTES {}", object(o)),
        Clause::SetFacet(f, o) => format!("SET FACET {} {}", symbol(f), object(o)),
        Clause::UnsetAttributes(n) => format!("UNSET ATTRIBUTES {}", names(n)),
        Clause::UnsetFacet(f, n) => format!("UNSET FACET {} {}", symbol(f), names(n)),
        Clause::SetStructural(e) => format!("SET STRUCTURAL {}", structural(e)),
        Clause::UnsetStructural(e) => format!("UNSET STRUCTURAL {}", structural(e)),
    }
}

fn clauses(c: &[Clause], sep: &str) -> String {
    c.iter().map(clause).collect::<Vec<_>>().join(sep)
}

fn block(c: &[Clause]) -> String {
    if c.is_empty() {
        "{ }".into()
    } else {
        format!("{{ {} }}", clauses(c, " "))
    }
}

fn selection(s: &Selection) -> String {
    let mut out = String::new();
    if let Some(w) = &s.where_clauses {
        let _ = write!(out, " WHERE {}", where_block(w));
    }
    out.push_str(&opt("LIMIT", &s.limit));
    out
}

fn mutation(m: &Mutation) -> String {
    match m {
        Mutation::Mutate(items) => {
            if items.is_empty() {
                "MUTATE { }".into()
            } else {
                format!(
                    "MUTATE {{ {} }}",
                    items.iter().map(mutation).collect::<Vec<_>>().join(" ")
                )
            }
        }
        Mutation::CreateConcept { handle, clauses } => {
            format!("CREATE CONCEPT ?{handle} {}", block(clauses))
        }
        Mutation::UpsertConcept { handle, clauses } => {
            format!("UPSERT CONCEPT ?{handle} {}", block(clauses))
        }
        Mutation::EnsureProposition {
            handle,
            tuple: t,
            expect_version,
        } => format!(
            "ENSURE PROPOSITION {}{}{}",
            opt_var(handle),
            tuple(t),
            opt("EXPECT VERSION", expect_version)
        ),
        Mutation::Assert {
            handle,
            tuple: t,
            members,
            superseding,
        } => {
            let mut s = format!("ASSERT {}{} {}", opt_var(handle), tuple(t), object(members));
            if let Some(old) = superseding {
                let _ = write!(s, " SUPERSEDING {}", target(old));
            }
            s
        }
        Mutation::CreateRecord {
            kind,
            handle,
            clauses,
        } => format!("CREATE {} ?{handle} {}", record_kind(*kind), block(clauses)),
        Mutation::Update {
            target: t,
            expect_version,
            actions,
            selection: sel,
        } => format!(
            "UPDATE {}{} {}{}",
            target(t),
            opt("EXPECT VERSION", expect_version),
            clauses(actions, " "),
            selection(sel)
        ),
        Mutation::Retract {
            target: t,
            selection: sel,
            expect_state,
        } => format!(
            "RETRACT ASSERTION {}{}{}",
            target(t),
            selection(sel),
            opt("EXPECT STATE", expect_state)
        ),
        Mutation::Replace {
            kind,
            target: t,
            by,
            expect_state,
        } => {
            let head = match kind {
                RecordKind::Evidence => "CORRECT EVIDENCE",
                _ => "SUPERSEDE ASSERTION",
            };
            format!(
                "{head} {} BY {}{}",
                target(t),
                target(by),
                opt("EXPECT STATE", expect_state)
            )
        }
        Mutation::Transition {
            target: t,
            to,
            finalize,
            expect_state,
        } => {
            let mut s = format!("TRANSITION ACTIVITY {} TO {}", target(t), scalar(to));
            if !finalize.is_empty() {
                let _ = write!(s, " {}", clauses(finalize, " "));
            }
            s.push_str(&opt("EXPECT STATE", expect_state));
            s
        }
        Mutation::SetRetention {
            target: t,
            policy,
            selection: sel,
            expect_version,
        } => format!(
            "SET RETENTION {} {}{}{}",
            target(t),
            object(policy),
            selection(sel),
            opt("EXPECT VERSION", expect_version)
        ),
        Mutation::Lifecycle {
            tombstone,
            target: t,
            selection: sel,
            expect_state,
        } => format!(
            "{} {}{}{}",
            if *tombstone { "TOMBSTONE" } else { "ARCHIVE" },
            target(t),
            selection(sel),
            opt("EXPECT STATE", expect_state)
        ),
        Mutation::Purge {
            target: t,
            selection: sel,
            reference_policy,
        } => format!(
            "PURGE {}{}{} CONFIRM \"PURGE\"",
            target(t),
            selection(sel),
            opt("REFERENCE POLICY", reference_policy)
        ),
        Mutation::MergeConcept {
            source,
            into,
            where_clauses,
            expect_version,
        } => {
            let mut s = format!("MERGE CONCEPT {} INTO {}", target(source), target(into));
            if let Some(w) = where_clauses {
                let _ = write!(s, " WHERE {}", where_block(w));
            }
            s.push_str(&opt("EXPECT VERSION", expect_version));
            s
        }
    }
}

fn describe(d: &Describe) -> String {
    let tail = match d {
        Describe::Primer(m) => format!("PRIMER{}", opt("MODE", m)),
        Describe::Protocol => "PROTOCOL".into(),
        Describe::ExecutionContext => "EXECUTION CONTEXT".into(),
        Describe::Capabilities => "CAPABILITIES".into(),
        Describe::ProjectionCapability => "PROJECTION CAPABILITY".into(),
        Describe::SchemaEnvironment(a) => format!(
            "SCHEMA ENVIRONMENT{}",
            a.as_ref().map(as_of).unwrap_or_default()
        ),
        Describe::Snapshot(a) => format!("SNAPSHOT{}", a.as_ref().map(as_of).unwrap_or_default()),
        Describe::Compatibility(f, t) => {
            format!("COMPATIBILITY FROM {} TO {}", scalar(f), scalar(t))
        }
        Describe::TransactionByIdempotencyKey(k) => {
            format!("TRANSACTION BY IDEMPOTENCY KEY {}", scalar(k))
        }
        Describe::Access(o) => format!(
            "ACCESS{}",
            o.as_ref()
                .map(|o| format!(" WITH {}", object(o)))
                .unwrap_or_default()
        ),
        Describe::Named { what, value } => {
            format!(
                "{what}{}",
                value
                    .as_ref()
                    .map(|v| format!(" {}", scalar(v)))
                    .unwrap_or_default()
            )
        }
    };
    format!("DESCRIBE {tail}")
}

fn meta(m: &Meta) -> String {
    match m {
        Meta::Describe(d) => describe(d),
        Meta::List {
            what,
            status,
            limit,
            cursor,
        } => format!(
            "LIST {what}{}{}{}",
            opt("STATUS", status),
            opt("LIMIT", limit),
            opt("CURSOR", cursor)
        ),
        Meta::Search(s) => format!(
            "SEARCH {} {}{}{}{}{}{}{}{}",
            s.kind,
            scalar(&s.query),
            opt("WITH TYPE", &s.with_type),
            opt("WITH PREDICATE", &s.with_predicate),
            opt("MODE", &s.mode),
            opt("THRESHOLD", &s.threshold),
            opt("AS OF SEQ", &s.as_of_seq),
            opt("LIMIT", &s.limit),
            opt("CURSOR", &s.cursor)
        ),
        Meta::Verify { target, value } => format!("VERIFY {target} {}", scalar(value)),
        Meta::Validate {
            target,
            value,
            options,
        } => format!(
            "VALIDATE {target} {}{}",
            scalar(value),
            options
                .as_ref()
                .map(|o| format!(" WITH {}", object(o)))
                .unwrap_or_default()
        ),
        Meta::PreviewKml(v) => format!("PREVIEW KML {}", scalar(v)),
        Meta::PreviewImportCapsule { capsule, into } => format!(
            "PREVIEW IMPORT CAPSULE {} INTO {}",
            scalar(capsule),
            scalar(into)
        ),
        Meta::History {
            element,
            from_seq,
            to_seq,
            limit,
            cursor,
        } => format!(
            "HISTORY {}{}{}{}{}",
            match element {
                Some(e) => format!("ELEMENT {}", scalar(e)),
                None => "SPACE".into(),
            },
            opt("FROM SEQ", from_seq),
            opt("TO SEQ", to_seq),
            opt("LIMIT", limit),
            opt("CURSOR", cursor)
        ),
        Meta::Changes {
            after_seq,
            from,
            limit,
        } => format!(
            "CHANGES {} {}{}",
            if *after_seq { "AFTER SEQ" } else { "SINCE" },
            scalar(from),
            opt("LIMIT", limit)
        ),
        Meta::Snapshot(a) => format!("SNAPSHOT{}", a.as_ref().map(as_of).unwrap_or_default()),
        Meta::ExportCapsule {
            target: t,
            where_clauses,
            options,
            as_of: a,
        } => format!(
            "EXPORT CAPSULE {} WHERE {}{}{}",
            target(t),
            where_block(where_clauses),
            options
                .as_ref()
                .map(|o| format!(" WITH {}", object(o)))
                .unwrap_or_default(),
            a.as_ref().map(as_of).unwrap_or_default()
        ),
    }
}

impl Display for Statement {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(&match &self.kind {
            StatementKind::Query(q) => query(q),
            StatementKind::Mutation(m) => mutation(m),
            StatementKind::Meta(m) => meta(m),
        })
    }
}
