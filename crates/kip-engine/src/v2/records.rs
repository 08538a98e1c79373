//! KML's record kinds (Specification §13-16, §56-57): CREATE ASSERTION / EVIDENCE /
//! ACTIVITY with their payload written once, the ASSERT sugar's members (§55.1), and
//! the assertion lifecycle changes RETRACT and SUPERSEDE (§57.3-57.4).

use super::client_keys;
use super::error::{Code, V2Error, V2Result};
use super::eval::{self, Bound, Ctx, Row};
use super::model::{self, SPACE};
use super::mutate::{field_not_found, members, not_found, symbol, value_of, Failed, Stop};
use crate::store::{ElementId, ElementKind, ElementRecord, GraphWrite};
use kip_lang::v2::ast::{Clause, Mutation, RecordKind, StructuralEntry};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub(super) type Structural = Vec<(String, ElementId, Option<String>)>;

/// Evidence an assertion cites, with its role.
pub(super) type Citations = Vec<(ElementId, Option<String>)>;

/// A record block's fields, structural references and client key.
pub(super) type RecordParts = (Map<String, Value>, Structural, Option<Value>);

/// `ahead` are ids given to elements this MUTATE creates later (`mutate::reserve`):
/// a structural reference may point at them before they exist.
pub(super) fn record_clauses(
    ctx: &Ctx,
    handles: &Row,
    clauses: &[Clause],
    ahead: &[ElementId],
) -> Result<RecordParts, Stop> {
    let mut fields = Map::new();
    let mut structural = Vec::new();
    let mut client_key = None;
    for c in clauses {
        match c {
            Clause::SetFields(ms) => {
                for (k, v) in members(ctx, handles, ms)? {
                    fields.insert(k, v);
                }
            }
            Clause::SetStructural(entries) => {
                for e in entries {
                    structural.push(structural_entry(ctx, handles, e, ahead)?);
                }
            }
            Clause::ClientKey(s) => client_key = Some(eval::scalar(ctx, s)?),
            Clause::SetFacet(..) => {
                return Err(Failed(V2Error::new(
                    Code::ConstraintViolation,
                    "facets apply to concepts (MnemonicState is a concept facet)",
                )))
            }
            other => {
                return Err(Failed(
                    V2Error::new(
                        Code::InvalidSyntax,
                        format!(
                            "{other:?} is not a clause of CREATE ASSERTION / EVIDENCE / ACTIVITY"
                        ),
                    )
                    .with_hint("use SET FIELDS, SET STRUCTURAL and CLIENT KEY"),
                ))
            }
        }
    }
    protected(&fields)?;
    Ok((fields, structural, client_key))
}

fn structural_entry(
    ctx: &Ctx,
    handles: &Row,
    e: &StructuralEntry,
    ahead: &[ElementId],
) -> Result<(String, ElementId, Option<String>), Stop> {
    let field = symbol(ctx, &e.field)?;
    let target = value_of(ctx, handles, &e.target)?;
    let Some(id) = target.as_str().and_then(eval::parse_id) else {
        return Err(Failed(
            V2Error::new(
                Code::StructuralReferenceInvalid,
                format!("the target of \"{field}\" is an element, not {target}"),
            )
            .with_hint("name the target by a handle or a parameter holding its id"),
        ));
    };
    if !ahead.contains(&id) && ctx.view(id)?.is_none() {
        return Err(Failed(
            V2Error::new(
                Code::StructuralReferenceInvalid,
                format!(
                    "\"{field}\" points at {}, which is not a visible element",
                    id.id_string()
                ),
            )
            .with_detail("id", id.id_string()),
        ));
    }
    let role = match &e.options {
        Some(opts) => {
            let o = members(ctx, handles, opts)?;
            o.get("role").and_then(Value::as_str).map(str::to_string)
        }
        None => None,
    };
    Ok((field, id, role))
}

/// Fields the engine owns (§6.3) or governance holds (§28): never author-written.
pub(super) fn protected(fields: &Map<String, Value>) -> V2Result<()> {
    for k in fields.keys() {
        if k == "_system" || k == "id" || k == "kind" || k == "state" || k == "version" {
            return Err(V2Error::new(
                Code::ProtectedSystemField,
                format!("\"{k}\" is engine-maintained (§6.3)"),
            )
            .with_hint("leave it out; the engine sets it")
            .with_detail("field", k.as_str()));
        }
        if k == "governance" {
            return Err(V2Error::new(
                Code::ProtectedGovernanceField,
                "an element's governance is not an author-writable field (§28)",
            )
            .with_hint("governance changes go through the owner's protected operations")
            .with_detail("field", "governance"));
        }
    }
    Ok(())
}

const STANCES: &[&str] = &["support", "reject", "uncertain"];
const MODES: &[&str] = &[
    "observed",
    "stated",
    "inferred",
    "predicted",
    "hypothetical",
    "imported",
];

fn one_of(field: &str, v: Option<&Value>, allowed: &[&str], required: bool) -> V2Result<()> {
    match v {
        None | Some(Value::Null) if !required => Ok(()),
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(()),
        other => Err(V2Error::new(
            if matches!(other, Some(Value::String(_))) {
                Code::ConstraintViolation
            } else {
                Code::TypeMismatch
            },
            format!(
                "an assertion's {field} is one of {}; got {}",
                allowed.join(", "),
                other.cloned().unwrap_or(Value::Null)
            ),
        )
        .with_hint(format!("{field}: \"{}\"", allowed[0]))
        .with_detail("field", field)),
    }
}

fn ref_field(
    w: &dyn GraphWrite,
    fields: &Map<String, Value>,
    name: &str,
    kind: ElementKind,
) -> V2Result<ElementId> {
    let v = fields.get(name).cloned().unwrap_or(Value::Null);
    let id = v
        .as_str()
        .and_then(eval::parse_id)
        .filter(|id| id.kind == kind);
    let Some(id) = id else {
        return Err(V2Error::new(
            Code::TypeMismatch,
            format!(
                "an assertion's {name} is a {} reference, not {v}",
                model::kind_word(kind)
            ),
        )
        .with_hint(format!(
            "{name}: ?handle (bound in the same MUTATE) or :param holding the id"
        ))
        .with_detail("field", name));
    };
    if model::view(w, id)?.is_none() {
        return Err(not_found(id));
    }
    Ok(id)
}

const ASSERTION_FIELDS: &[&str] = &[
    "proposition",
    "asserted_by",
    "stance",
    "mode",
    "confidence",
    "asserted_at",
    "valid_time",
    "context_refs",
    "client_key",
];

/// CREATE ASSERTION (§56.2): one attributed stance toward one Proposition, its payload
/// written once.
pub(super) fn create_assertion(
    w: &mut dyn GraphWrite,
    mut fields: Map<String, Value>,
    evidence: Citations,
) -> V2Result<ElementId> {
    if let Some(k) = fields
        .keys()
        .find(|k| !ASSERTION_FIELDS.contains(&k.as_str()))
    {
        return Err(
            field_not_found("field of an assertion", k).with_hint(format!(
                "an assertion's fields are {}",
                ASSERTION_FIELDS.join(", ")
            )),
        );
    }
    let p = ref_field(w, &fields, "proposition", ElementKind::Proposition)?;
    let by = ref_field(w, &fields, "asserted_by", ElementKind::Concept)?;
    one_of("stance", fields.get("stance"), STANCES, true)?;
    one_of("mode", fields.get("mode"), MODES, true)?;
    match fields.get("confidence") {
        None | Some(Value::Null) => {}
        Some(Value::Number(n)) if n.as_f64().is_some_and(|x| (0.0..=1.0).contains(&x)) => {}
        Some(other) => {
            return Err(V2Error::new(
                Code::ConstraintViolation,
                format!("confidence is a number from 0 to 1, not {other}"),
            )
            .with_hint("confidence: 0.8")
            .with_detail("field", "confidence"))
        }
    }
    let ck = client_keys::key_of(fields.get("client_key"))?;
    if let Some(k) = &ck {
        if let Some(existing) = client_keys::lookup(w, ElementKind::Assertion, k)? {
            return retried(w, existing, k, &fields);
        }
    }
    if !fields.contains_key("asserted_at") {
        fields.insert("asserted_at".into(), json!(crate::time::now_text()));
    }
    let mut refs = vec![
        ("proposition".to_string(), p),
        ("asserted_by".to_string(), by),
    ];
    if !evidence.is_empty() {
        let mut cites = Vec::new();
        for (e, role) in &evidence {
            if e.kind != ElementKind::Evidence {
                return Err(V2Error::new(
                    Code::StructuralReferenceInvalid,
                    format!(
                        "an assertion cites evidence; {} is not evidence",
                        e.id_string()
                    ),
                ));
            }
            let role = role.clone().unwrap_or_else(|| "support".into());
            if !["support", "challenge", "context"].contains(&role.as_str()) {
                return Err(V2Error::new(
                    Code::ConstraintViolation,
                    format!("an evidence role is support, challenge or context, not \"{role}\""),
                ));
            }
            cites.push(json!({"id": e.id_string(), "role": role}));
            refs.push(("evidence".to_string(), *e));
        }
        fields.insert("evidence".into(), Value::Array(cites));
    }
    let n = w.alloc_element_number(ElementKind::Assertion)?;
    let id = ElementId::new(ElementKind::Assertion, n);
    let mut state = Map::new();
    state.insert("lifecycle".into(), json!({"status": "active"}));
    let mut fields = fields;
    model::stamp(&mut fields);
    w.create_element(SPACE, id, fields, state, &refs)?;
    if let Some(k) = &ck {
        client_keys::bind(w, ElementKind::Assertion, k, id)?;
    }
    Ok(id)
}

/// The ASSERT sugar's members, desugared (§55.1).
pub(super) fn desugar_assert(
    p: ElementId,
    given: Map<String, Value>,
) -> V2Result<(Map<String, Value>, Citations)> {
    let mut fields = Map::new();
    fields.insert("proposition".into(), json!(p.id_string()));
    fields.insert("stance".into(), json!("support"));
    let mut evidence = Vec::new();
    for (k, v) in given {
        match k.as_str() {
            "by" => {
                fields.insert("asserted_by".into(), v);
            }
            "mode" | "stance" | "confidence" => {
                fields.insert(k, v);
            }
            "at" => {
                fields.insert("asserted_at".into(), v);
            }
            "valid" => {
                fields.insert("valid_time".into(), v);
            }
            "key" => {
                fields.insert("client_key".into(), v);
            }
            "evidence" => {
                let items = match v {
                    Value::Array(a) => a,
                    one => vec![one],
                };
                for i in items {
                    match i.as_str().and_then(eval::parse_id) {
                        Some(id) => evidence.push((id, Some("support".to_string()))),
                        None => {
                            return Err(V2Error::new(
                                Code::TypeMismatch,
                                format!(
                                "evidence is an Evidence reference or an array of them, not {i}"
                            ),
                            ))
                        }
                    }
                }
            }
            other => {
                return Err(field_not_found("member of ASSERT", other).with_hint(
                    "ASSERT takes by, mode, stance, confidence, at, valid, evidence, key",
                ))
            }
        }
    }
    for required in ["asserted_by", "mode"] {
        if !fields.contains_key(required) {
            let member = if required == "asserted_by" {
                "by"
            } else {
                "mode"
            };
            return Err(V2Error::new(
                Code::ConstraintViolation,
                format!("ASSERT requires {member}"),
            )
            .with_hint("ASSERT (...) { by: :actor, mode: \"stated\" }"));
        }
    }
    Ok((fields, evidence))
}

/// A retried creation: the element the client key made, when the content is the same.
fn retried(
    w: &dyn GraphWrite,
    existing: ElementId,
    key: &str,
    given: &Map<String, Value>,
) -> V2Result<ElementId> {
    let mut given = given.clone();
    given.remove("status");
    match w.element(SPACE, existing)? {
        Some(rec) if client_keys::same_content(&given, &rec.payload) => Ok(existing),
        _ => Err(client_keys::conflict(key, existing)),
    }
}

pub(super) fn create_other(
    w: &mut dyn GraphWrite,
    kind: ElementKind,
    mut fields: Map<String, Value>,
    structural: Structural,
    client_key: Option<Value>,
    preset: Option<ElementId>,
) -> V2Result<ElementId> {
    let class = if kind == ElementKind::Evidence {
        "evidence_class"
    } else {
        "activity_class"
    };
    match fields.get(class) {
        Some(Value::String(_)) => {}
        other => {
            return Err(V2Error::new(
                Code::ConstraintViolation,
                format!(
                    "{} requires {class} (a string), got {}",
                    model::kind_word(kind),
                    other.cloned().unwrap_or(Value::Null)
                ),
            )
            .with_hint(format!("SET FIELDS {{ {class}: \"...\" }}"))
            .with_detail("field", class))
        }
    }
    if let Some(k) = client_key {
        fields.insert("client_key".into(), k);
    }
    let mut refs = Vec::new();
    let mut grouped: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (field, id, role) in structural {
        let entry = match role {
            Some(r) => json!({"id": id.id_string(), "role": r}),
            None => json!(id.id_string()),
        };
        grouped.entry(field.clone()).or_default().push(entry);
        refs.push((field, id));
    }
    for (f, v) in grouped {
        fields.insert(f, Value::Array(v));
    }
    let ck = client_keys::key_of(fields.get("client_key"))?;
    if let Some(k) = &ck {
        if let Some(existing) = client_keys::lookup(w, kind, k)? {
            return retried(w, existing, k, &fields);
        }
    }
    let id = match preset {
        Some(id) => id,
        None => ElementId::new(kind, w.alloc_element_number(kind)?),
    };
    if let Some(k) = &ck {
        client_keys::bind(w, kind, k, id)?;
    }
    let mut state = Map::new();
    if kind == ElementKind::Activity {
        if let Some(s) = fields.remove("status") {
            state.insert("status".into(), s);
        }
    }
    let mut fields = fields;
    model::stamp(&mut fields);
    w.create_element(SPACE, id, fields, state, &refs)?;
    Ok(id)
}

fn assertion_record(w: &mut dyn GraphWrite, id: ElementId) -> V2Result<ElementRecord> {
    if id.kind != ElementKind::Assertion {
        return Err(V2Error::new(
            Code::TypeMismatch,
            format!("{} is not an assertion", id.id_string()),
        ));
    }
    if let Some(r) = w.element(SPACE, id)? {
        return Ok(r);
    }
    // A 1.x link's founding assertion is recorded when 2.0 first changes it.
    let Some(v) = model::founding(&*w, id.n)? else {
        return Err(not_found(id));
    };
    let mut payload = Map::new();
    for k in [
        "proposition",
        "asserted_by",
        "stance",
        "mode",
        "confidence",
        "asserted_at",
        "facets",
    ] {
        if let Some(x) = v.get(k).filter(|x| !x.is_null()) {
            payload.insert(k.to_string(), x.clone());
        }
    }
    let mut state = Map::new();
    state.insert("lifecycle".into(), json!({"status": "active"}));
    let p = ElementId::new(ElementKind::Proposition, id.n);
    let mut refs = vec![("proposition".to_string(), p)];
    if let Some(by) = v
        .get("asserted_by")
        .and_then(Value::as_str)
        .and_then(eval::parse_id)
    {
        refs.push(("asserted_by".to_string(), by));
    }
    Ok(w.create_element(SPACE, id, payload, state, &refs)?)
}

fn status_of(rec: &ElementRecord) -> String {
    rec.state
        .get("lifecycle")
        .and_then(|l| l.get("status"))
        .and_then(Value::as_str)
        .unwrap_or("active")
        .to_string()
}

fn check_expected(actual: &str, expect: Option<&str>, id: ElementId) -> V2Result<()> {
    match expect {
        Some(e) if e != actual => Err(V2Error::new(
            Code::PreconditionFailed,
            format!("{} is {actual}, not {e}", id.id_string()),
        )
        .with_hint("read the element again and decide on its current state")
        .with_detail("actual", actual)),
        _ => Ok(()),
    }
}

/// RETRACT ASSERTION (§57.3): the claim is withdrawn, not deleted; its payload stays.
pub(super) fn retract(w: &mut dyn GraphWrite, id: ElementId, expect: Option<&str>) -> V2Result<()> {
    let rec = assertion_record(w, id)?;
    let status = status_of(&rec);
    check_expected(&status, expect, id)?;
    if status != "active" {
        return Err(V2Error::new(
            Code::InvalidLifecycleTransition,
            format!(
                "{} is {status}; only an active assertion is retracted",
                id.id_string()
            ),
        ));
    }
    let mut state = rec.state.clone();
    let mut life = state
        .get("lifecycle")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    life.insert("status".into(), json!("retracted"));
    life.insert("retracted_at".into(), json!(crate::time::now_text()));
    state.insert("lifecycle".into(), Value::Object(life));
    w.set_element_state(SPACE, id, state)?;
    Ok(())
}

/// SUPERSEDE ASSERTION old BY new (§57.4): both about one proposition.
pub(super) fn supersede(
    w: &mut dyn GraphWrite,
    old: ElementId,
    new: ElementId,
    expect: Option<&str>,
) -> V2Result<()> {
    let o = assertion_record(w, old)?;
    let n = assertion_record(w, new)?;
    check_expected(&status_of(&o), expect, old)?;
    if o.payload.get("proposition") != n.payload.get("proposition") {
        return Err(V2Error::new(
            Code::SupersessionMismatch,
            format!(
                "{} and {} are about different propositions",
                old.id_string(),
                new.id_string()
            ),
        )
        .with_hint("a new assertion supersedes one about the same proposition"));
    }
    if o.payload.get("asserted_by") != n.payload.get("asserted_by") {
        return Err(V2Error::new(
            Code::SupersessionMismatch,
            format!(
                "{} was asserted by {}, {} by {}: an actor revises only its own claim (§57.4)",
                old.id_string(),
                o.payload.get("asserted_by").cloned().unwrap_or(Value::Null),
                new.id_string(),
                n.payload.get("asserted_by").cloned().unwrap_or(Value::Null)
            ),
        )
        .with_hint("a disagreement is a new assertion of its own (stance \"reject\"), beside the old one; BELIEF weighs both"));
    }
    if status_of(&o) != "active" {
        return Err(V2Error::new(
            Code::InvalidLifecycleTransition,
            format!(
                "{} is {}; only an active assertion is superseded",
                old.id_string(),
                status_of(&o)
            ),
        ));
    }
    let link = |rec: &ElementRecord, status: Option<&str>, key: &str, other: ElementId| {
        let mut state = rec.state.clone();
        let mut life = state
            .get("lifecycle")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(s) = status {
            life.insert("status".into(), json!(s));
        }
        let mut list = life
            .get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        list.push(json!(other.id_string()));
        life.insert(key.into(), Value::Array(list));
        state.insert("lifecycle".into(), Value::Object(life));
        state
    };
    let old_state = link(&o, Some("superseded"), "superseded_by", new);
    let new_state = link(&n, None, "supersedes", old);
    w.set_element_state(SPACE, old, old_state)?;
    w.set_element_state(SPACE, new, new_state)?;
    Ok(())
}

/// CORRECT EVIDENCE old BY new (§57.2): the old evidence stays, immutable and
/// addressable; the correction links the two.
pub(super) fn correct(
    w: &mut dyn GraphWrite,
    old: ElementId,
    new: ElementId,
    expect: Option<&str>,
) -> V2Result<()> {
    let mut recs = Vec::new();
    for id in [old, new] {
        if id.kind != ElementKind::Evidence {
            return Err(V2Error::new(
                Code::TypeMismatch,
                format!("CORRECT EVIDENCE takes evidence; {} is not", id.id_string()),
            ));
        }
        recs.push(w.element(SPACE, id)?.ok_or_else(|| not_found(id))?);
    }
    let (Some(old_rec), Some(new_rec)) = (recs.first(), recs.get(1)) else {
        return Err(not_found(old));
    };
    let status = old_rec
        .state
        .get("correction")
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        .unwrap_or("current")
        .to_string();
    check_expected(&status, expect, old)?;
    if status == "corrected" || old == new {
        return Err(V2Error::new(
            Code::EvidenceCorrectionConflict,
            format!("{} is already corrected", old.id_string()),
        )
        .with_hint("correct the newest evidence of the chain"));
    }
    let mut o = old_rec.state.clone();
    o.insert(
        "correction".into(),
        json!({"status": "corrected", "corrected_by": new.id_string()}),
    );
    let mut n = new_rec.state.clone();
    n.insert(
        "correction".into(),
        json!({"status": "current", "corrects": old.id_string()}),
    );
    w.set_element_state(SPACE, old, o)?;
    w.set_element_state(SPACE, new, n)?;
    Ok(())
}

const TERMINAL: &[&str] = &["completed", "failed", "cancelled"];

/// TRANSITION ACTIVITY (§16.6): a running activity moves on; once terminal its
/// topology and fields are fixed (`ActivityTerminal`).
pub(super) fn transition(
    w: &mut dyn GraphWrite,
    id: ElementId,
    to: &str,
    parts: RecordParts,
    expect: Option<&str>,
) -> V2Result<()> {
    if id.kind != ElementKind::Activity {
        return Err(V2Error::new(
            Code::TypeMismatch,
            format!(
                "TRANSITION ACTIVITY takes an activity; {} is not",
                id.id_string()
            ),
        ));
    }
    let rec = w.element(SPACE, id)?.ok_or_else(|| not_found(id))?;
    let current = rec
        .state
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("running")
        .to_string();
    check_expected(&current, expect, id)?;
    if TERMINAL.contains(&current.as_str()) {
        return Err(V2Error::new(
            Code::ActivityTerminal,
            format!(
                "{} is {current}: a terminal activity does not change (§16.6)",
                id.id_string()
            ),
        )
        .with_hint("record a new activity"));
    }
    if to == current {
        return Err(V2Error::new(
            Code::InvalidLifecycleTransition,
            format!("{} is {current} already", id.id_string()),
        ));
    }
    let (fields, structural, _) = parts;
    protected(&fields)?;
    let mut state = rec.state.clone();
    for (k, v) in fields {
        if rec.payload.contains_key(&k) {
            return Err(V2Error::new(
                Code::ImmutableField,
                format!("{k} was set when the activity was created"),
            ));
        }
        state.insert(k, v);
    }
    for (field, target, role) in structural {
        let entry = match role {
            Some(r) => json!({"id": target.id_string(), "role": r}),
            None => json!(target.id_string()),
        };
        let mut list = state
            .get(&field)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        list.push(entry);
        state.insert(field, Value::Array(list));
    }
    state.insert("status".into(), json!(to));
    w.set_element_state(SPACE, id, state)?;
    Ok(())
}

/// When the waiting clauses only wait for each other: gives the CREATE EVIDENCE and
/// CREATE ACTIVITY among them (without a CLIENT KEY, which may resolve to an existing
/// element) their ids now, so each can refer to the other; whether any was given.
pub(super) fn reserve(
    w: &mut dyn GraphWrite,
    clauses: &[&Mutation],
    waiting: &[usize],
    handles: &mut Row,
    reserved: &mut BTreeMap<String, ElementId>,
) -> V2Result<bool> {
    let mut any = false;
    for &i in waiting {
        let Some(Mutation::CreateRecord {
            kind: kind @ (RecordKind::Evidence | RecordKind::Activity),
            handle,
            clauses: cs,
        }) = clauses.get(i)
        else {
            continue;
        };
        if handles.contains_key(handle) || cs.iter().any(|c| matches!(c, Clause::ClientKey(_))) {
            continue;
        }
        let kind = match kind {
            RecordKind::Evidence => ElementKind::Evidence,
            _ => ElementKind::Activity,
        };
        let id = ElementId::new(kind, w.alloc_element_number(kind)?);
        handles.insert(handle.clone(), Bound::Elem(id));
        reserved.insert(handle.clone(), id);
        any = true;
    }
    Ok(any)
}
