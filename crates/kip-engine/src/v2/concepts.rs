//! Writing Concepts (Specification §10-11, §54, §58): CREATE, UPSERT by stable identity
//! (id or key within its type, §7.3, §54.3-54.4), UPDATE of mutable state, ARCHIVE;
//! attributes and facets checked against the active Schema Environment.
//!
//! Where the parts live is [`super::model`]'s rule: the graph row's name is the
//! concept's identity within its type (its key; a keyless concept's name, or
//! `name~C:n` when another concept of the type holds that name), and the record `C:n`
//! holds `schema_ref`, `key`, a display name that differs from the row's, facets and
//! the lifecycle state, with the version.

use super::error::{Code, V2Error, V2Result};
use super::eval::{self, Ctx, Row};
use super::model::{self, LITERAL_TYPE, SPACE};
use super::schema_env::{active, Definition, SymbolKind};
use super::structural::{self, Field};
use super::validate::{check_attributes, check_facet};
use crate::store::{ConceptRecord, ElementId, ElementKind, ElementRecord, GraphRead, GraphWrite};
use kip_lang::v2::ast::{Clause, Symbol};
use serde_json::{json, Map, Value};

/// What a CREATE or UPSERT CONCEPT block says.
#[derive(Default)]
pub struct Spec {
    ty: Option<Definition>,
    key: Option<String>,
    match_id: Option<Value>,
    match_key: Option<String>,
    match_name: bool,
    name: Option<String>,
    client_key: Option<Value>,
    expect_version: Option<Value>,
    change: Change,
}

/// The mutable-state changes of a CREATE, UPSERT or UPDATE.
#[derive(Default, Clone)]
pub struct Change {
    name: Option<String>,
    set_attributes: Map<String, Value>,
    unset_attributes: Vec<String>,
    set_facets: Vec<(Definition, Map<String, Value>)>,
    unset_facets: Vec<(Definition, Vec<String>)>,
    set_structural: Vec<(Field, ElementId, Map<String, Value>)>,
    unset_structural: Vec<(Field, ElementId)>,
}

fn string(field: &str, v: Value) -> V2Result<String> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(eval::type_mismatch(field, &other)),
    }
}

fn symbol(ctx: &Ctx, s: &Symbol) -> V2Result<String> {
    match s {
        Symbol::Name(n) => Ok(n.clone()),
        Symbol::Param(p) => string("symbol", ctx.param(p)?),
    }
}

fn immutable(field: &str) -> V2Error {
    V2Error::new(
        Code::ImmutableField,
        format!("a concept's {field} is fixed at creation (§7.3, §10.3)"),
    )
    .with_hint("create another concept, or MERGE CONCEPT the two")
    .with_detail("field", field)
}

impl Change {
    /// The field paths this change sets, with their values (for the one-final-value
    /// rule of a MUTATE plan).
    pub fn paths(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        if let Some(n) = &self.name {
            out.push(("name".to_string(), json!(n)));
        }
        for (k, v) in &self.set_attributes {
            out.push((format!("attributes.{k}"), v.clone()));
        }
        for k in &self.unset_attributes {
            out.push((format!("attributes.{k}"), Value::Null));
        }
        for (d, m) in &self.set_facets {
            for (k, v) in m {
                out.push((format!("facets.{}.{k}", d.local), v.clone()));
            }
        }
        out
    }

    /// Reads the mutable-state clauses; `row` binds the handles (and UPDATE's target).
    fn clause(&mut self, ctx: &Ctx, row: &Row, c: &Clause) -> V2Result<bool> {
        match c {
            Clause::SetAttributes(ms) => {
                for (k, v) in ms {
                    self.set_attributes
                        .insert(k.clone(), eval::write_value(ctx, row, v)?);
                }
            }
            Clause::UnsetAttributes(names) => self.unset_attributes.extend(names.iter().cloned()),
            Clause::SetFacet(sym, ms) => {
                let def = ctx.resolve(SymbolKind::Facet, &symbol(ctx, sym)?)?;
                let mut m = Map::new();
                for (k, v) in ms {
                    m.insert(k.clone(), eval::write_value(ctx, row, v)?);
                }
                check_facet(&def, &m)?;
                self.set_facets.push((def, m));
            }
            Clause::UnsetFacet(sym, names) => {
                let def = ctx.resolve(SymbolKind::Facet, &symbol(ctx, sym)?)?;
                self.unset_facets.push((def, names.clone()));
            }
            Clause::SetStructural(entries) | Clause::UnsetStructural(entries) => {
                let set = matches!(c, Clause::SetStructural(_));
                for e in entries {
                    let f = structural::field(ctx.g, &symbol(ctx, &e.field)?)?;
                    let target = eval::write_value(ctx, row, &e.target)?;
                    let Some(id) = target.as_str().and_then(eval::parse_id) else {
                        return Err(V2Error::new(
                            Code::StructuralReferenceInvalid,
                            format!("the target of \"{}\" is an element, not {target}", f.local),
                        )
                        .with_hint("name the target by a handle or a parameter holding its id"));
                    };
                    if set {
                        let mut opts = Map::new();
                        for (k, v) in e.options.iter().flatten() {
                            opts.insert(k.clone(), eval::write_value(ctx, row, v)?);
                        }
                        self.set_structural.push((f, id, opts));
                    } else {
                        self.unset_structural.push((f, id));
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Reads an UPDATE's actions for target `id` (§58): only a concept's mutable state;
    /// an assertion's payload needs a revision (§58.2), evidence a correction, a
    /// proposition's tuple never changes (§12.5).
    pub fn read(ctx: &Ctx, row: &Row, id: ElementId, actions: &[Clause]) -> V2Result<Change> {
        match id.kind {
            ElementKind::Concept => {}
            ElementKind::Assertion => {
                return Err(V2Error::new(
                    Code::EpistemicRevisionRequired,
                    format!(
                        "{} is an assertion: its stance, confidence and payload are history, not state (§13.7, §58.2)",
                        id.id_string()
                    ),
                )
                .with_hint("record the new view as a new assertion: ASSERT ... SUPERSEDING the old one, or RETRACT ASSERTION"))
            }
            ElementKind::Evidence => {
                return Err(V2Error::new(
                    Code::EvidenceCorrectionRequired,
                    format!("{} is evidence: its payload is immutable (§15.5)", id.id_string()),
                )
                .with_hint("CREATE EVIDENCE with the corrected content, then CORRECT EVIDENCE old BY new"))
            }
            ElementKind::Proposition => return Err(immutable_tuple(id)),
            ElementKind::Activity => {
                return Err(V2Error::new(
                    Code::ImmutableField,
                    format!("{}: an activity changes through TRANSITION ACTIVITY", id.id_string()),
                ))
            }
        }
        let mut ch = Change::default();
        for a in actions {
            if ch.clause(ctx, row, a)? {
                continue;
            }
            match a {
                Clause::SetFields(ms) => {
                    for (k, v) in ms {
                        let v = eval::write_value(ctx, row, v)?;
                        ch.field(k, v)?;
                    }
                }
                other => {
                    return Err(V2Error::new(
                        Code::InvalidSyntax,
                        format!("{other:?} is not an UPDATE action"),
                    ))
                }
            }
        }
        Ok(ch)
    }

    fn field(&mut self, k: &str, v: Value) -> V2Result<()> {
        let mut m = Map::new();
        m.insert(k.to_string(), Value::Null);
        super::records::protected(&m)?;
        match k {
            "name" => self.name = Some(string("name", v)?),
            "key" | "schema_ref" | "type" => return Err(immutable(k)),
            _ => return Err(V2Error::new(
                Code::SchemaFieldNotFound,
                format!("\"{k}\" is not a native field of a concept"),
            )
            .with_hint(
                "a concept's fields are name and key; other values go in SET ATTRIBUTES or a facet",
            )
            .with_detail("field", k)),
        }
        Ok(())
    }
}

fn immutable_tuple(id: ElementId) -> V2Error {
    V2Error::new(
        Code::ImmutableField,
        format!(
            "{} is a proposition: its tuple never changes (§12.5)",
            id.id_string()
        ),
    )
    .with_hint("ENSURE the other proposition and assert about it")
}

impl Spec {
    /// Reads a CREATE (`upsert` false) or UPSERT block.
    pub fn read(ctx: &Ctx, handles: &Row, clauses: &[Clause], upsert: bool) -> V2Result<Spec> {
        let mut s = Spec::default();
        for c in clauses {
            if s.change.clause(ctx, handles, c)? {
                continue;
            }
            match c {
                Clause::Type(sym) => {
                    s.ty = Some(active().resolve(
                        ctx.g,
                        SymbolKind::ConceptType,
                        &symbol(ctx, sym)?,
                    )?)
                }
                Clause::Name(v) => s.name = Some(string("NAME", eval::scalar(ctx, v)?)?),
                Clause::ClientKey(v) => s.client_key = Some(eval::scalar(ctx, v)?),
                Clause::ExpectVersion(v) => s.expect_version = Some(eval::scalar(ctx, v)?),
                Clause::Match(pattern) if upsert => {
                    let row = handles.clone();
                    for (k, p) in pattern {
                        let v = match p {
                            kip_lang::v2::ast::Pattern::Var(h) => match row.get(h) {
                                Some(b) => eval::bound_json(b),
                                None => {
                                    return Err(V2Error::new(
                                        Code::ReferenceError,
                                        format!("?{h} is not bound in MATCH"),
                                    ))
                                }
                            },
                            kip_lang::v2::ast::Pattern::Param(n) => ctx.param(n)?,
                            kip_lang::v2::ast::Pattern::Literal(v) => v.clone(),
                            _ => {
                                return Err(V2Error::new(
                                    Code::TypeMismatch,
                                    format!("MATCH member \"{k}\" takes a scalar"),
                                ))
                            }
                        };
                        match k.as_str() {
                            "type" => {
                                let t = string("type", v)?;
                                s.ty = Some(ctx.resolve(SymbolKind::ConceptType, &t)?);
                            }
                            "key" => s.match_key = Some(string("key", v)?),
                            "id" => s.match_id = Some(v),
                            "name" => s.match_name = true,
                            _ => {}
                        }
                    }
                }
                Clause::SetFields(ms) => {
                    let mut m = Map::new();
                    for (k, v) in ms {
                        m.insert(k.clone(), eval::write_value(ctx, handles, v)?);
                    }
                    super::records::protected(&m)?;
                    for (k, v) in m {
                        match k.as_str() {
                            "key" => s.key = Some(string("key", v)?),
                            "name" => s.change.name = Some(string("name", v)?),
                            _ => s.change.field(&k, v)?,
                        }
                    }
                }
                other => {
                    return Err(V2Error::new(
                        Code::InvalidSyntax,
                        format!(
                            "{other:?} is not a clause of {}",
                            if upsert {
                                "UPSERT CONCEPT"
                            } else {
                                "CREATE CONCEPT"
                            }
                        ),
                    ))
                }
            }
        }
        if s.name.is_none() {
            s.name = s.change.name.take();
        }
        Ok(s)
    }
}

impl Spec {
    /// The field paths an UPSERT sets on the concept it resolves.
    pub fn change_paths(&self) -> Vec<(String, Value)> {
        let mut out = self.change.paths();
        if let Some(n) = &self.name {
            out.push(("name".to_string(), json!(n)));
        }
        out
    }
}

/// The concept an UPSERT names (§54.3): by id (resolve only) or by key within its type;
/// a key without a type that names several concepts is `IdentityConflict` (§7.3).
pub fn resolve(ctx: &Ctx, s: &Spec) -> V2Result<Option<ElementId>> {
    let g = ctx.g;
    if let Some(idv) = &s.match_id {
        let id = idv
            .as_str()
            .and_then(eval::parse_id)
            .filter(|id| id.kind == ElementKind::Concept);
        let found = match id {
            Some(id) => ctx.view(id)?.map(|v| (id, v)),
            None => None,
        };
        let fits = |v: &Value| match &s.ty {
            Some(t) => v.get("schema_ref") == Some(&json!(t.exact)),
            None => true,
        };
        return match found {
            Some((id, v)) if fits(&v) => Ok(Some(id)),
            _ => Err(V2Error::new(
                Code::NotFoundOrNotVisible,
                format!("no visible concept {idv} to upsert"),
            )
            .with_hint("an upsert by id resolves an existing concept only; to create, MATCH by type and key")),
        };
    }
    let Some(key) = s.match_key.as_deref().or(s.key.as_deref()) else {
        let code = if s.match_name {
            Code::NameIdentityForbidden
        } else {
            Code::IdentitySelectorRequired
        };
        return Err(V2Error::new(
            code,
            "UPSERT CONCEPT resolves by stable identity: MATCH {type, key} or MATCH {id} (§54.3)",
        )
        .with_hint("names may repeat, so a name does not identify; give the concept a key"));
    };
    let mut found = Vec::new();
    match &s.ty {
        Some(t) => {
            if let Some(n) = g.concept_by_key(&t.local, key)? {
                found.push(n);
            }
        }
        None => g.scan_name(key, &mut |n| {
            found.push(n);
            Ok(true)
        })?,
    }
    let mut hits = Vec::new();
    for n in found {
        let id = ElementId::new(ElementKind::Concept, n);
        if let Some(v) = ctx.view(id)? {
            if v.get("key") == Some(&json!(key)) && v.get("type") != Some(&json!(LITERAL_TYPE)) {
                hits.push(id);
            }
        }
    }
    match hits.len() {
        0 => Ok(None),
        1 => Ok(Some(super::merge::canonical(g, hits[0])?)),
        _ => Err(V2Error::new(
            Code::IdentityConflict,
            format!(
                "the key \"{key}\" names {} concepts of different types ({})",
                hits.len(),
                hits.iter()
                    .map(|i| i.id_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .with_hint("a key is identity within its type (§7.3): add the type to MATCH")),
    }
}

fn version_of(g: &dyn GraphRead, id: ElementId) -> V2Result<u64> {
    Ok(g.element(SPACE, id)?.map_or(1, |r| r.version))
}

pub(super) fn check_version(
    g: &dyn GraphRead,
    id: ElementId,
    expect: Option<&Value>,
) -> V2Result<()> {
    let Some(e) = expect else { return Ok(()) };
    let actual = version_of(g, id)?;
    if e.as_u64() != Some(actual) {
        return Err(V2Error::new(
            Code::VersionConflict,
            format!("{} is at version {actual}, not {e}", id.id_string()),
        )
        .with_hint("read the element again (?x._system.version) and decide on its current state")
        .with_detail("actual_version", actual));
    }
    Ok(())
}

/// UPSERT: updates the concept found, or creates it under the MATCH's type and key.
/// Returns the id and whether it was created.
/// The concept and whether it was created, else whether anything of it changed (an
/// upsert that sets what is already there changes nothing and bumps no version).
pub fn upsert(
    w: &mut dyn GraphWrite,
    s: &Spec,
    found: Option<ElementId>,
) -> V2Result<(ElementId, bool, bool)> {
    if let Some(id) = found {
        check_version(w, id, s.expect_version.as_ref())?;
        if let Some(k) = &s.key {
            let current = model::view(w, id)?.and_then(|v| v.get("key").cloned());
            if current != Some(json!(k)) {
                return Err(immutable("key"));
            }
        }
        let mut ch = s.change.clone();
        if s.name.is_some() {
            ch.name = s.name.clone();
        }
        let changed = apply_change(w, id, &ch)?;
        return Ok((id, false, changed));
    }
    if let Some(v) = &s.expect_version {
        if v.as_u64() != Some(0) {
            return Err(V2Error::new(
                Code::VersionConflict,
                format!("no concept matches, so it is not at version {v}"),
            )
            .with_hint(
                "EXPECT VERSION 0 creates only; leave EXPECT VERSION out to create or update",
            ));
        }
    }
    if s.ty.is_none() {
        return Err(V2Error::new(
            Code::SchemaSymbolNotFound,
            "no concept matches, and an upsert that declares no type cannot create one (§54.4)",
        )
        .with_hint("add the type to MATCH: MATCH {type: \"Person\", key: \"...\"}"));
    }
    let create_spec = Spec {
        ty: s.ty.clone(),
        key: s.match_key.clone().or_else(|| s.key.clone()),
        name: s.name.clone(),
        client_key: s.client_key.clone(),
        change: Change {
            name: None,
            unset_attributes: Vec::new(),
            unset_facets: Vec::new(),
            unset_structural: Vec::new(),
            ..s.change.clone()
        },
        ..Spec::default()
    };
    Ok((create(w, &create_spec)?, true, true))
}

/// CREATE CONCEPT (§54.1): a new, historically distinct concept.
pub fn create(w: &mut dyn GraphWrite, s: &Spec) -> V2Result<ElementId> {
    let Some(ty) = &s.ty else {
        return Err(V2Error::new(
            Code::SchemaSymbolNotFound,
            "a concept needs a type: there is no untyped concept (§10.3)",
        )
        .with_hint("add TYPE \"Person\" (or another type of the schema environment)"));
    };
    check_attributes(ty, &s.change.set_attributes, true)?;
    let ck = super::client_keys::key_of(s.client_key.as_ref())?;
    if let Some(k) = &ck {
        if let Some(existing) = super::client_keys::lookup(w, ElementKind::Concept, k)? {
            // A retry: the same type, key and name resolve to what the first made.
            let v = model::view(w, existing)?.unwrap_or(Value::Null);
            let same = v.get("schema_ref") == Some(&json!(ty.exact))
                && v.get("key") == Some(&s.key.clone().map_or(Value::Null, Value::String))
                && s.name
                    .as_ref()
                    .is_none_or(|n| v.get("name") == Some(&json!(n)));
            return if same {
                Ok(existing)
            } else {
                Err(super::client_keys::conflict(k, existing))
            };
        }
    }
    let n = w.alloc_concept_id()?;
    let id = ElementId::new(ElementKind::Concept, n);
    let row_name = match &s.key {
        Some(key) => {
            if let Some(m) = w.concept_by_key(&ty.local, key)? {
                let occupant = ElementId::new(ElementKind::Concept, m);
                let keyed = model::view(w, occupant)?.and_then(|v| v.get("key").cloned());
                if keyed == Some(json!(key)) {
                    return Err(V2Error::new(
                        Code::IdentityConflict,
                        format!(
                            "the key \"{key}\" already names {} ({})",
                            occupant.id_string(),
                            ty.local
                        ),
                    )
                    .with_hint(
                        "UPSERT CONCEPT with MATCH {type, key} resolves it instead of creating",
                    )
                    .with_detail("existing", occupant.id_string()));
                }
                // A keyless concept held the key as its name: it steps aside.
                step_aside(w, m)?;
            }
            key.clone()
        }
        None => match &s.name {
            Some(name) if w.concept_by_key(&ty.local, name)?.is_none() => name.clone(),
            Some(name) => format!("{name}~{}", id.id_string()),
            None => format!("~{}", id.id_string()),
        },
    };
    let mut attributes = Map::new();
    for (k, v) in &s.change.set_attributes {
        if !v.is_null() {
            attributes.insert(k.clone(), v.clone());
        }
    }
    let row = ConceptRecord {
        concept_type: ty.local.clone(),
        name: row_name.clone(),
        attributes,
        metadata: Map::new(),
    };
    w.put_concept(n, &row, None)?;
    let mut payload = Map::new();
    payload.insert("schema_ref".into(), json!(ty.exact));
    payload.insert(
        "key".into(),
        s.key.clone().map_or(Value::Null, Value::String),
    );
    let mut state = Map::new();
    let name = s.name.clone().unwrap_or_default();
    if name != row_name {
        state.insert("name".into(), json!(name));
    }
    let mut facets = Map::new();
    for (def, m) in &s.change.set_facets {
        merge_facet(&mut facets, def, m, &[]);
    }
    if !facets.is_empty() {
        state.insert("facets".into(), Value::Object(facets));
    }
    apply_structural(w, &mut state, &ty.exact, &s.change)?;
    if let Some(ck) = &s.client_key {
        state.insert("client_key".into(), ck.clone());
    }
    let listed = state
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut payload = payload;
    model::stamp(&mut payload);
    w.create_element(SPACE, id, payload, state, &[])?;
    super::names::change(w, n, None, listed.as_deref())?;
    if let Some(k) = &ck {
        super::client_keys::bind(w, ElementKind::Concept, k, id)?;
    }
    Ok(id)
}

/// Moves a keyless concept's row name out of the way of a key (`name~C:n`).
fn step_aside(w: &mut dyn GraphWrite, n: u64) -> V2Result<()> {
    let id = ElementId::new(ElementKind::Concept, n);
    let Some(old) = w.concept(n)? else {
        return Ok(());
    };
    let rec = ensure_record(w, id, &old)?;
    let mut row = old.clone();
    row.name = format!("{}~{}", old.name, id.id_string());
    w.put_concept(n, &row, Some(&old))?;
    let mut state = rec.state.clone();
    if !state.contains_key("name") {
        state.insert("name".into(), json!(old.name));
        super::names::change(w, n, None, Some(&old.name))?;
    }
    w.set_element_state(SPACE, id, state)?;
    Ok(())
}

/// The concept's record, created (version 1: the state 1.x wrote) when 2.0 writes a
/// concept for the first time.
pub(super) fn ensure_record(
    w: &mut dyn GraphWrite,
    id: ElementId,
    row: &ConceptRecord,
) -> V2Result<ElementRecord> {
    if let Some(r) = w.element(SPACE, id)? {
        return Ok(r);
    }
    let mut payload = Map::new();
    payload.insert(
        "schema_ref".into(),
        json!(active().exact_of(SymbolKind::ConceptType, &row.concept_type)),
    );
    payload.insert("key".into(), json!(row.name));
    Ok(w.create_element(SPACE, id, payload, Map::new(), &[])?)
}

/// UPDATE of one concept (§58), after its EXPECT VERSION.
pub fn update(
    w: &mut dyn GraphWrite,
    id: ElementId,
    ch: &Change,
    expect: Option<&Value>,
) -> V2Result<bool> {
    check_version(w, id, expect)?;
    apply_change(w, id, ch)
}

/// Applies a change to a concept; whether anything of it changed.
fn apply_change(w: &mut dyn GraphWrite, id: ElementId, ch: &Change) -> V2Result<bool> {
    let Some(old) = w.concept(id.n)?.filter(|r| !model::hidden(r)) else {
        return Err(super::mutate::not_found(id));
    };
    let ty = active().resolve(w, SymbolKind::ConceptType, &old.concept_type)?;
    check_attributes(&ty, &ch.set_attributes, false)?;
    let rec = ensure_record(w, id, &old)?;
    let mut row = old.clone();
    for (k, v) in &ch.set_attributes {
        if v.is_null() {
            row.attributes.remove(k);
        } else {
            row.attributes.insert(k.clone(), v.clone());
        }
    }
    for k in &ch.unset_attributes {
        row.attributes.remove(k);
    }
    if row != old {
        w.put_concept(id.n, &row, Some(&old))?;
    }
    let mut state = rec.state.clone();
    if let Some(name) = &ch.name {
        if *name == row.name {
            state.remove("name");
        } else {
            state.insert("name".into(), json!(name));
        }
    }
    let mut facets = state
        .get("facets")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (def, m) in &ch.set_facets {
        merge_facet(&mut facets, def, m, &[]);
    }
    for (def, names) in &ch.unset_facets {
        merge_facet(&mut facets, def, &Map::new(), names);
    }
    if facets.is_empty() {
        state.remove("facets");
    } else {
        state.insert("facets".into(), Value::Object(facets));
    }
    let schema_ref = rec
        .payload
        .get("schema_ref")
        .and_then(Value::as_str)
        .unwrap_or(&ty.exact)
        .to_string();
    apply_structural(w, &mut state, &schema_ref, ch)?;
    let was = rec.state.get("name").and_then(Value::as_str);
    let now = state.get("name").and_then(Value::as_str);
    super::names::change(w, id.n, was, now)?;
    // The version moves with a change of the row or of the record's state, only.
    let changed = row != old || state != rec.state;
    if changed {
        w.set_element_state(SPACE, id, state)?;
    }
    Ok(changed)
}

/// SET / UNSET STRUCTURAL of a concept whose type is `schema_ref`, field by field.
fn apply_structural(
    w: &dyn GraphWrite,
    state: &mut Map<String, Value>,
    schema_ref: &str,
    ch: &Change,
) -> V2Result<()> {
    let mut fields: Vec<&Field> = Vec::new();
    for (f, _, _) in &ch.set_structural {
        if !fields.iter().any(|x| x.local == f.local) {
            fields.push(f);
        }
    }
    for (f, _) in &ch.unset_structural {
        if !fields.iter().any(|x| x.local == f.local) {
            fields.push(f);
        }
    }
    for f in fields {
        let set: Vec<(ElementId, Map<String, Value>)> = ch
            .set_structural
            .iter()
            .filter(|(x, _, _)| x.local == f.local)
            .map(|(_, id, o)| (*id, o.clone()))
            .collect();
        for (id, _) in &set {
            structural::check(w, f, schema_ref, *id)?;
        }
        let unset: Vec<ElementId> = ch
            .unset_structural
            .iter()
            .filter(|(x, _)| x.local == f.local)
            .map(|(_, id)| *id)
            .collect();
        structural::apply(state, f, &set, &unset)?;
    }
    Ok(())
}

/// A facet assignment merges members rather than replacing the facet.
fn merge_facet(
    facets: &mut Map<String, Value>,
    def: &Definition,
    set: &Map<String, Value>,
    unset: &[String],
) {
    let mut f = facets
        .get(&def.local)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, v) in set {
        f.insert(k.clone(), v.clone());
    }
    for k in unset {
        f.remove(k);
    }
    if f.is_empty() {
        facets.remove(&def.local);
    } else {
        facets.insert(def.local.clone(), Value::Object(f));
    }
}
