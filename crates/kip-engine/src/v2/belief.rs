//! Epistemic Projection (Specification §21-27, §46-47): what the memory believes about
//! a Proposition, computed on read from the Assertions about it, never stored (§21.2).
//!
//! The policy is `kip:policy:baseline` version 1 (docs/semantics.md "BELIEF"):
//! - an Assertion is eligible when its lifecycle is `active`, the element is in
//!   recall, its mode is observed, stated, inferred or imported (hypothetical and
//!   predicted only with `include_hypothetical`), and its valid time holds at the
//!   projection's `valid_at` (now unless given);
//! - eligible Assertions group by their actor (`asserted_by`): one actor asserting
//!   twice is one root, not two (no evidence multiplication, §23.1); a root's strength
//!   is its strongest confidence (a missing confidence counts 1);
//! - a side's score combines its roots as `1 - Π(1 - strength)`, in [0, 1], declared
//!   `normalized_support_not_probability` (§27.3): support and opposition do not sum
//!   to 1;
//! - status: no eligible material is `insufficient` (§21.8, never `rejected`); support
//!   ≥ 0.5 with opposition < 0.5 is `accepted`, the reverse `rejected`, both ≥ 0.5
//!   `contested`; anything else (weak scores, only `uncertain` stances) `uncertain`.
//!
//! BELIEF SLOT (§47) projects every Proposition of a subject and predicate: the
//! accepted values, and `contested` when a functional predicate (§25.1) has more than
//! one.

use super::error::{Code, V2Error, V2Result};
use super::eval::{bound_json, parse_id, Bound, Ctx, Row};
use super::model::{self, SPACE};
use super::schema_env::SymbolKind;
use crate::store::{ElemRef, ElementId, ElementKind};
use kip_lang::v2::ast::{BeliefTarget, Pattern, PredicateAtom, PropTuple};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The policy this runtime projects with.
pub const POLICY_ID: &str = "kip:policy:baseline";
/// Its version.
pub const POLICY_VERSION: u64 = 1;
const SCORE_SEMANTICS: &str = "normalized_support_not_probability";
const THRESHOLD: f64 = 0.5;

/// The projection context of a query (`WITH EPISTEMIC { ... }`, §27.1, §49).
#[derive(Debug, Clone, Default)]
pub struct Policy {
    include_hypothetical: bool,
    ledger: bool,
    valid_at: Option<String>,
}

impl Policy {
    /// `FOR TIME t` (§48.2): the world-valid time the projection is evaluated at, as
    /// `valid_at` (the cognitive snapshot is untouched: that is `AS OF`).
    pub fn for_time(&mut self, at: &Value) -> V2Result<()> {
        match at.as_str() {
            Some(s) if crate::time::parse(s).is_some() => {
                self.valid_at = Some(s.to_string());
                Ok(())
            }
            _ => Err(V2Error::new(
                Code::TypeMismatch,
                format!("FOR TIME takes an RFC 3339 time, not {at}"),
            )
            .with_hint("FOR TIME \"2026-06-01T00:00:00Z\"")),
        }
    }

    /// Reads `WITH EPISTEMIC` members: an unknown policy is named, not defaulted.
    pub fn read(members: &Map<String, Value>) -> V2Result<Policy> {
        let mut p = Policy {
            ledger: true,
            ..Policy::default()
        };
        for (k, v) in members {
            match k.as_str() {
                "policy" => match v.as_str() {
                    Some(POLICY_ID) | Some("baseline") => {}
                    _ => {
                        return Err(V2Error::new(
                            Code::ProjectionPolicyUnavailable,
                            format!("the epistemic policy {v} is not available here"),
                        )
                        .with_hint(format!(
                            "use \"{POLICY_ID}\" (DESCRIBE CAPABILITIES), or leave policy out"
                        ))
                        .with_detail("policy", v.clone()))
                    }
                },
                "include_hypothetical" => p.include_hypothetical = v.as_bool().unwrap_or(false),
                "explanation" => p.ledger = v.as_str() != Some("none"),
                "valid_at" => match v {
                    Value::String(s) if crate::time::parse(s).is_some() => {
                        p.valid_at = Some(s.clone())
                    }
                    Value::Null => {}
                    other => {
                        return Err(V2Error::new(
                            Code::TypeMismatch,
                            format!("valid_at is an RFC 3339 time, not {other}"),
                        ))
                    }
                },
                "purpose" | "risk" | "include_historical" => {}
                other => return Err(V2Error::new(
                    Code::SchemaFieldNotFound,
                    format!("\"{other}\" is not a member of WITH EPISTEMIC"),
                )
                .with_hint(
                    "members: policy, purpose, risk, valid_at, include_hypothetical, explanation",
                )),
            }
        }
        Ok(p)
    }

    /// The default context.
    pub fn baseline() -> Policy {
        Policy {
            ledger: true,
            ..Policy::default()
        }
    }
}

fn eligible_mode(mode: &str, p: &Policy) -> bool {
    matches!(mode, "observed" | "stated" | "inferred" | "imported")
        || (p.include_hypothetical && matches!(mode, "hypothetical" | "predicted"))
}

/// Whether `valid_time` holds at `at`.
fn valid_at(valid_time: Option<&Value>, at: std::time::SystemTime) -> bool {
    let Some(vt) = valid_time else { return true };
    let bound = |k: &str| {
        vt.get(k)
            .and_then(Value::as_str)
            .and_then(crate::time::parse)
    };
    bound("from").is_none_or(|f| f <= at) && bound("until").is_none_or(|u| at < u)
}

struct Side {
    roots: BTreeMap<String, f64>,
    ids: Vec<String>,
}

impl Side {
    fn new() -> Side {
        Side {
            roots: BTreeMap::new(),
            ids: Vec::new(),
        }
    }

    fn add(&mut self, actor: String, strength: f64, id: String) {
        let e = self.roots.entry(actor).or_insert(0.0);
        *e = e.max(strength);
        self.ids.push(id);
    }

    /// `1 - Π(1 - strength)`, to six decimals (a strength, not a measurement).
    fn score(&self) -> f64 {
        let s = 1.0 - self.roots.values().fold(1.0, |acc, s| acc * (1.0 - s));
        (s * 1e6).round() / 1e6
    }

    fn json(&self, ledger: bool) -> Value {
        json!({
            "score": self.score(),
            "score_semantics": SCORE_SEMANTICS,
            "assertion_ids": if ledger { json!(self.ids) } else { json!([]) },
            "root_groups": if ledger { json!(self.roots.keys().collect::<Vec<_>>()) } else { json!([]) },
        })
    }
}

/// The projection of proposition `p` (`None`: a fully grounded tuple no proposition
/// has, §46.4).
pub fn project(ctx: &Ctx, p: Option<ElementId>) -> V2Result<Value> {
    let policy = ctx.policy.borrow().clone();
    let at = match &policy.valid_at {
        Some(s) => crate::time::parse(s).unwrap_or_else(crate::time::now),
        None => crate::time::now(),
    };
    let mut support = Side::new();
    let mut opposition = Side::new();
    let mut uncertain = Vec::new();
    let mut excluded = Vec::new();
    if let Some(pid) = p {
        let mut ids = Vec::new();
        ctx.g.scan_referrers(SPACE, pid, &mut |role, src| {
            if role == "proposition" && src.kind == ElementKind::Assertion {
                ids.push(src);
            }
            Ok(true)
        })?;
        super::eval::founding_of(ctx.g, pid.n, &mut ids)?;
        for id in ids {
            let Some(a) = ctx.view(id)? else { continue };
            let ids = id.id_string();
            let status = a
                .pointer("/lifecycle/status")
                .and_then(Value::as_str)
                .unwrap_or("active");
            let state = a
                .pointer("/_system/state")
                .and_then(Value::as_str)
                .unwrap_or("active");
            let mode = a.get("mode").and_then(Value::as_str).unwrap_or("");
            if status != "active"
                || state != model::ACTIVE
                || !eligible_mode(mode, &policy)
                || !valid_at(a.get("valid_time"), at)
            {
                excluded.push(ids);
                continue;
            }
            let actor = a
                .get("asserted_by")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let strength = a
                .get("confidence")
                .and_then(Value::as_f64)
                .unwrap_or(1.0)
                .clamp(0.0, 1.0);
            match a.get("stance").and_then(Value::as_str) {
                Some("support") => support.add(actor, strength, ids),
                Some("reject") => opposition.add(actor, strength, ids),
                _ => uncertain.push(ids),
            }
        }
    }
    let (s, o) = (support.score(), opposition.score());
    let nothing = support.roots.is_empty() && opposition.roots.is_empty();
    let status = if nothing && uncertain.is_empty() {
        "insufficient"
    } else if s >= THRESHOLD && o >= THRESHOLD {
        "contested"
    } else if s >= THRESHOLD {
        "accepted"
    } else if o >= THRESHOLD {
        "rejected"
    } else {
        "uncertain"
    };
    let level = match status {
        "insufficient" => "total",
        "contested" | "uncertain" => "high",
        _ if s.min(o) > 0.0 => "medium",
        _ => "low",
    };
    let mut reasons = Vec::new();
    if nothing {
        reasons.push("no eligible assertion");
    }
    if !uncertain.is_empty() {
        reasons.push("assertions with an uncertain stance");
    }
    if !excluded.is_empty() {
        reasons.push("assertions excluded by lifecycle, mode or valid time");
    }
    let mut out = json!({
        "proposition_id": p.map(|id| id.id_string()),
        "status": status,
        "support": support.json(policy.ledger),
        "opposition": opposition.json(policy.ledger),
        "uncertainty": {"level": level, "reasons": reasons},
        "temporal": {"valid_at": policy.valid_at.clone().unwrap_or_else(|| crate::time::format(at))},
        "policy": {"id": POLICY_ID, "version": POLICY_VERSION},
    });
    if policy.ledger {
        out["explanation"] =
            json!({"uncertain_assertions": uncertain, "excluded_assertions": excluded});
    }
    Ok(out)
}

fn term(ctx: &Ctx, row: &Row, p: &Pattern) -> V2Result<Option<Bound>> {
    Ok(match p {
        Pattern::Var(v) => row.get(v).cloned(),
        Pattern::Param(n) => {
            let v = ctx.param(n)?;
            Some(match v.as_str().and_then(parse_id) {
                Some(id) => Bound::Elem(id),
                None => Bound::Val(v),
            })
        }
        Pattern::Literal(v) => Some(Bound::Val(v.clone())),
        Pattern::Tuple(t) => match t.as_ref() {
            PropTuple::Id(s) => super::eval::scalar(ctx, s)?
                .as_str()
                .and_then(parse_id)
                .map(Bound::Elem),
            PropTuple::Triple(..) => {
                return Err(super::eval::unsupported("nested tuples in BELIEF"))
            }
        },
        Pattern::Array(_) | Pattern::Object(_) => None,
    })
}

fn end_ref(ctx: &Ctx, b: &Bound) -> V2Result<Option<ElemRef>> {
    match b {
        Bound::Elem(id) => Ok(model::graph_ref(*id)),
        Bound::Val(v) => Ok(super::eval::literal_concept(ctx.g, v)?.map(ElemRef::Concept)),
    }
}

fn predicate(
    ctx: &Ctx,
    row: &Row,
    atom: &PredicateAtom,
) -> V2Result<super::schema_env::Definition> {
    let name = match atom {
        PredicateAtom::Name(n) => n.clone(),
        PredicateAtom::Param(p) => match ctx.param(p)? {
            Value::String(s) => s,
            other => return Err(super::eval::type_mismatch("predicate", &other)),
        },
        PredicateAtom::Var(v) => match row.get(v).map(bound_json) {
            Some(Value::String(s)) => s,
            _ => {
                return Err(V2Error::new(
                    Code::ProjectionTargetUnbounded,
                    format!("BELIEF needs its predicate; ?{v} is not bound"),
                )
                .with_hint("name the predicate: BELIEF (?s, \"prefers\", ?o)"))
            }
        },
    };
    ctx.resolve(SymbolKind::Predicate, &name)
}

fn unbounded(what: &str) -> V2Error {
    V2Error::new(
        Code::ProjectionTargetUnbounded,
        format!("BELIEF needs a bound subject ({what}); a projection over the whole memory is refused (§46.3)"),
    )
    .with_hint("bind the subject first, e.g. ?s CONCEPT {key: \"...\"}, then ?b BELIEF (?s, \"predicate\", ?o)")
}

/// `?var BELIEF (...)`: binds `var` to the projection for each row.
pub fn belief(
    ctx: &Ctx,
    row: &Row,
    var: &str,
    target: &BeliefTarget,
    out: &mut Vec<Row>,
) -> V2Result<()> {
    let mut push = |value: Value, extra: Option<(String, Bound)>| {
        let mut r = row.clone();
        if let Some((k, b)) = extra {
            r.insert(k, b);
        }
        match r.get(var) {
            Some(Bound::Val(v)) if *v != value => return,
            _ => {}
        }
        r.insert(var.to_string(), Bound::Val(value));
        out.push(r);
    };
    match target {
        BeliefTarget::Var(v) => match row.get(v) {
            Some(Bound::Elem(id)) if id.kind == ElementKind::Proposition => {
                push(project(ctx, Some(*id))?, None)
            }
            Some(other) => {
                return Err(V2Error::new(
                    Code::TypeMismatch,
                    format!(
                        "BELIEF projects a proposition; ?{v} is {}",
                        bound_json(other)
                    ),
                ))
            }
            None => {
                return Err(V2Error::new(
                    Code::ProjectionTargetUnbound,
                    format!("BELIEF (?{v}): ?{v} is not bound to a proposition"),
                )
                .with_hint(format!(
                    "bind it first: ?{v} PROPOSITION (?s, \"predicate\", ?o)"
                )))
            }
        },
        BeliefTarget::Id(s) => {
            let v = super::eval::scalar(ctx, s)?;
            match v.as_str().and_then(parse_id) {
                Some(id) if id.kind == ElementKind::Proposition && ctx.view(id)?.is_some() => {
                    push(project(ctx, Some(id))?, None)
                }
                _ => return Err(super::mutate::not_found_value(&v)),
            }
        }
        BeliefTarget::Triple(s, atom, o) => {
            let Some(sb) = term(ctx, row, s)? else {
                return Err(unbounded("the tuple's subject"));
            };
            let pred = predicate(ctx, row, atom)?;
            let Some(s_ref) = end_ref(ctx, &sb)? else {
                return Ok(());
            };
            match term(ctx, row, o)? {
                Some(ob) => {
                    // Fully grounded: a missing proposition is insufficient (§46.4).
                    let p = match end_ref(ctx, &ob)? {
                        Some(o_ref) => ctx.g.prop_by_spo(s_ref, &pred.local, o_ref)?,
                        None => None,
                    };
                    let p = p.map(|n| ElementId::new(ElementKind::Proposition, n));
                    push(project(ctx, p)?, None)
                }
                None => {
                    let Pattern::Var(ov) = o else {
                        return Err(unbounded("the tuple's object"));
                    };
                    let mut found = Vec::new();
                    ctx.g.scan_out(s_ref, Some(&pred.local), &mut |_, o, id| {
                        found.push((o, id));
                        Ok(true)
                    })?;
                    for (o, n) in found {
                        let id = ElementId::new(ElementKind::Proposition, n);
                        if ctx.view(id)?.is_none() {
                            continue;
                        }
                        let ov_value = model::end_value(ctx.g, o)?;
                        let b = match ov_value.as_str().and_then(parse_id) {
                            Some(e) => Bound::Elem(e),
                            None => Bound::Val(ov_value),
                        };
                        push(project(ctx, Some(id))?, Some((ov.clone(), b)));
                    }
                }
            }
        }
    }
    Ok(())
}

/// `?var BELIEF SLOT (subject, predicate)` (§47).
pub fn slot(
    ctx: &Ctx,
    row: &Row,
    var: &str,
    subject: &Pattern,
    atom: &PredicateAtom,
    out: &mut Vec<Row>,
) -> V2Result<()> {
    let Some(sb) = term(ctx, row, subject)? else {
        return Err(unbounded("BELIEF SLOT's subject"));
    };
    let pred = predicate(ctx, row, atom)?;
    let functional = pred
        .body
        .get("functional")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut candidates = Vec::new();
    let mut accepted = Vec::new();
    let mut any_material = false;
    if let Some(s_ref) = end_ref(ctx, &sb)? {
        let mut found = Vec::new();
        ctx.g.scan_out(s_ref, Some(&pred.local), &mut |_, o, id| {
            found.push((o, id));
            Ok(true)
        })?;
        for (o, n) in found {
            let id = ElementId::new(ElementKind::Proposition, n);
            if ctx.view(id)?.is_none() {
                continue;
            }
            let b = project(ctx, Some(id))?;
            let status = b["status"].as_str().unwrap_or("insufficient").to_string();
            let value = model::end_value(ctx.g, o)?;
            if status != "insufficient" {
                any_material = true;
            }
            if status == "accepted" {
                accepted.push(value.clone());
            }
            candidates.push(json!({"value": value, "proposition_id": id.id_string(), "status": status, "support": b["support"]["score"], "opposition": b["opposition"]["score"]}));
        }
    }
    let status = if accepted.len() > 1 && functional {
        "contested"
    } else if !accepted.is_empty() {
        "accepted"
    } else if any_material {
        "uncertain"
    } else {
        "insufficient"
    };
    let value = json!({
        "status": status,
        "subject": bound_json(&sb),
        "predicate_ref": pred.exact,
        "functional": functional,
        "accepted_values": accepted,
        "candidate_projections": candidates,
        "policy": {"id": POLICY_ID, "version": POLICY_VERSION},
    });
    let mut r = row.clone();
    r.insert(var.to_string(), Bound::Val(value));
    out.push(r);
    Ok(())
}
