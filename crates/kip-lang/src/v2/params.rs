//! The `:parameter` names a statement uses, for checking a request's parameters before
//! binding (a missing one is reported by name, an unused one can be warned about).

use super::ast::*;
use std::collections::BTreeSet;

impl Statement {
    /// Every `:parameter` name the statement uses (without `:`), sorted, each once.
    pub fn parameters(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        match &self.kind {
            StatementKind::Query(q) => query(q, &mut out),
            StatementKind::Mutation(m) => mutation(m, &mut out),
            StatementKind::Meta(m) => meta(m, &mut out),
        }
        out
    }
}

type Out = BTreeSet<String>;

fn scalar(s: &Scalar, out: &mut Out) {
    if let Scalar::Param(p) = s {
        out.insert(p.clone());
    }
}

fn opt(s: &Option<Scalar>, out: &mut Out) {
    if let Some(s) = s {
        scalar(s, out);
    }
}

fn symbol(s: &Symbol, out: &mut Out) {
    if let Symbol::Param(p) = s {
        out.insert(p.clone());
    }
}

fn target(t: &TargetRef, out: &mut Out) {
    if let TargetRef::Param(p) = t {
        out.insert(p.clone());
    }
}

fn predicate(p: &PredicateAtom, out: &mut Out) {
    if let PredicateAtom::Param(p) = p {
        out.insert(p.clone());
    }
}

fn object(o: &[(String, Value)], out: &mut Out) {
    for (_, v) in o {
        value(v, out);
    }
}

fn value(v: &Value, out: &mut Out) {
    match v {
        Value::Param(p) => {
            out.insert(p.clone());
        }
        Value::Literal(_) | Value::Field(_) => {}
        Value::Array(items) => items.iter().for_each(|i| value(i, out)),
        Value::Object(o) => object(o, out),
        Value::Call(c) => c.args.iter().for_each(|a| expr(a, out)),
    }
}

fn expr(e: &Expr, out: &mut Out) {
    match e {
        Expr::Value(v) => value(v, out),
        Expr::Not(e) | Expr::Neg(e) | Expr::Group(e) => expr(e, out),
        Expr::Binary(_, l, r) => {
            expr(l, out);
            expr(r, out);
        }
    }
}

fn pattern(p: &Pattern, out: &mut Out) {
    match p {
        Pattern::Param(p) => {
            out.insert(p.clone());
        }
        Pattern::Var(_) | Pattern::Literal(_) => {}
        Pattern::Array(items) => items.iter().for_each(|i| pattern(i, out)),
        Pattern::Object(o) => o.iter().for_each(|(_, v)| pattern(v, out)),
        Pattern::Tuple(t) => tuple(t, out),
    }
}

fn tuple(t: &PropTuple, out: &mut Out) {
    match t {
        PropTuple::Id(v) => scalar(v, out),
        PropTuple::Triple(s, path, o) => {
            pattern(s, out);
            path.iter().for_each(|a| predicate(&a.atom, out));
            pattern(o, out);
        }
    }
}

fn clauses(w: &[WhereClause], out: &mut Out) {
    for c in w {
        match c {
            WhereClause::Concept { pattern: p, .. } | WhereClause::Record { pattern: p, .. } => {
                p.iter().for_each(|(_, v)| pattern(v, out))
            }
            WhereClause::Proposition { tuple: t, .. } => tuple(t, out),
            WhereClause::Structural {
                from, field, to, ..
            } => {
                pattern(from, out);
                symbol(field, out);
                pattern(to, out);
            }
            WhereClause::Belief { target: t, .. } => match t {
                BeliefTarget::Var(_) => {}
                BeliefTarget::Id(v) => scalar(v, out),
                BeliefTarget::Triple(s, p, o) => {
                    pattern(s, out);
                    predicate(p, out);
                    pattern(o, out);
                }
            },
            WhereClause::BeliefSlot {
                subject,
                predicate: p,
                ..
            } => {
                pattern(subject, out);
                predicate(p, out);
            }
            WhereClause::Filter(e) => expr(e, out),
            WhereClause::Not(b) | WhereClause::Optional(b) | WhereClause::Union(b) => {
                clauses(b, out)
            }
        }
    }
}

fn as_of(a: &Option<AsOf>, out: &mut Out) {
    match a {
        Some(AsOf::Seq(v) | AsOf::Tx(v) | AsOf::Time(v)) => scalar(v, out),
        None => {}
    }
}

fn projection(p: &Projection, out: &mut Out) {
    match p {
        Projection::Aggregate { arg, .. } => expr(arg, out),
        Projection::Expr(e) => expr(e, out),
    }
}

fn query(q: &Query, out: &mut Out) {
    q.projection.iter().for_each(|p| projection(p, out));
    clauses(&q.where_clauses, out);
    as_of(&q.as_of, out);
    opt(&q.for_time, out);
    if let Some(e) = &q.epistemic {
        object(e, out);
    }
    q.order_by.iter().for_each(|o| projection(&o.key, out));
    opt(&q.limit, out);
    opt(&q.cursor, out);
}

fn clause(c: &Clause, out: &mut Out) {
    match c {
        Clause::Type(s) => symbol(s, out),
        Clause::ClientKey(v) | Clause::Name(v) | Clause::ExpectVersion(v) => scalar(v, out),
        Clause::Match(o) => o.iter().for_each(|(_, v)| pattern(v, out)),
        Clause::SetFields(o) | Clause::SetAttributes(o) => object(o, out),
        Clause::SetFacet(s, o) => {
            symbol(s, out);
            object(o, out);
        }
        Clause::UnsetAttributes(_) => {}
        Clause::UnsetFacet(s, _) => symbol(s, out),
        Clause::SetStructural(e) | Clause::UnsetStructural(e) => {
            for entry in e {
                symbol(&entry.field, out);
                value(&entry.target, out);
                if let Some(o) = &entry.options {
                    object(o, out);
                }
            }
        }
    }
}

fn selection(s: &Selection, out: &mut Out) {
    if let Some(w) = &s.where_clauses {
        clauses(w, out);
    }
    opt(&s.limit, out);
}

fn mutation(m: &Mutation, out: &mut Out) {
    match m {
        Mutation::Mutate(items) => items.iter().for_each(|i| mutation(i, out)),
        Mutation::CreateConcept { clauses: c, .. }
        | Mutation::UpsertConcept { clauses: c, .. }
        | Mutation::CreateRecord { clauses: c, .. } => c.iter().for_each(|c| clause(c, out)),
        Mutation::EnsureProposition {
            tuple: t,
            expect_version,
            ..
        } => {
            tuple(t, out);
            opt(expect_version, out);
        }
        Mutation::Assert {
            tuple: t,
            members,
            superseding,
            ..
        } => {
            tuple(t, out);
            object(members, out);
            if let Some(s) = superseding {
                target(s, out);
            }
        }
        Mutation::Update {
            target: t,
            expect_version,
            actions,
            selection: s,
        } => {
            target(t, out);
            opt(expect_version, out);
            actions.iter().for_each(|c| clause(c, out));
            selection(s, out);
        }
        Mutation::Retract {
            target: t,
            selection: s,
            expect_state,
        }
        | Mutation::Lifecycle {
            target: t,
            selection: s,
            expect_state,
            ..
        } => {
            target(t, out);
            selection(s, out);
            opt(expect_state, out);
        }
        Mutation::Replace {
            target: t,
            by,
            expect_state,
            ..
        } => {
            target(t, out);
            target(by, out);
            opt(expect_state, out);
        }
        Mutation::Transition {
            target: t,
            to,
            finalize,
            expect_state,
        } => {
            target(t, out);
            scalar(to, out);
            finalize.iter().for_each(|c| clause(c, out));
            opt(expect_state, out);
        }
        Mutation::SetRetention {
            target: t,
            policy,
            selection: s,
            expect_version,
        } => {
            target(t, out);
            object(policy, out);
            selection(s, out);
            opt(expect_version, out);
        }
        Mutation::Purge {
            target: t,
            selection: s,
            reference_policy,
        } => {
            target(t, out);
            selection(s, out);
            opt(reference_policy, out);
        }
        Mutation::MergeConcept {
            source,
            into,
            where_clauses,
            expect_version,
        } => {
            target(source, out);
            target(into, out);
            if let Some(w) = where_clauses {
                clauses(w, out);
            }
            opt(expect_version, out);
        }
    }
}

fn meta(m: &Meta, out: &mut Out) {
    match m {
        Meta::Describe(d) => match d {
            Describe::Primer(v) => opt(v, out),
            Describe::SchemaEnvironment(a) | Describe::Snapshot(a) => as_of(a, out),
            Describe::Compatibility(a, b) => {
                scalar(a, out);
                scalar(b, out);
            }
            Describe::TransactionByIdempotencyKey(k) => scalar(k, out),
            Describe::Access(o) => {
                if let Some(o) = o {
                    object(o, out);
                }
            }
            Describe::Named { value, .. } => opt(value, out),
            Describe::Protocol
            | Describe::ExecutionContext
            | Describe::Capabilities
            | Describe::ProjectionCapability => {}
        },
        Meta::List {
            status,
            limit,
            cursor,
            ..
        } => {
            opt(status, out);
            opt(limit, out);
            opt(cursor, out);
        }
        Meta::Search(s) => {
            scalar(&s.query, out);
            for o in [
                &s.with_type,
                &s.with_predicate,
                &s.mode,
                &s.threshold,
                &s.as_of_seq,
                &s.limit,
                &s.cursor,
            ] {
                opt(o, out);
            }
        }
        Meta::Verify { value, .. } | Meta::PreviewKml(value) => scalar(value, out),
        Meta::Validate { value, options, .. } => {
            scalar(value, out);
            if let Some(o) = options {
                object(o, out);
            }
        }
        Meta::PreviewImportCapsule { capsule, into } => {
            scalar(capsule, out);
            scalar(into, out);
        }
        Meta::History {
            element,
            from_seq,
            to_seq,
            limit,
            cursor,
        } => {
            for o in [element, from_seq, to_seq, limit, cursor] {
                opt(o, out);
            }
        }
        Meta::Changes { from, limit, .. } => {
            scalar(from, out);
            opt(limit, out);
        }
        Meta::Snapshot(a) => as_of(a, out),
        Meta::ExportCapsule {
            target: t,
            where_clauses,
            options,
            as_of: a,
        } => {
            target(t, out);
            clauses(where_clauses, out);
            if let Some(o) = options {
                object(o, out);
            }
            as_of(a, out);
        }
    }
}
