//! Compiles a `WHERE` body into executable steps and chooses their order.
//!
//! Variables get slots in one table per query. Within a group, required patterns are
//! ordered greedily by estimated cost given the variables already bound (statistics:
//! concepts per type, links per predicate); each FILTER goes right after the step that
//! binds its last variable; OPTIONAL blocks follow in written order, then the FILTERs
//! that read optional variables, then NOT blocks. UNION branches are compiled as
//! independent groups. The written order of patterns does not matter.
//!
//! One file: the compiler and `explain` share the step types and the cost model, and
//! `explain` must describe exactly the access paths the compiler chose.

use crate::schema;
use crate::store::{ElemRef, GraphRead};
use kip_lang::ast::*;
use kip_lang::{ErrorCode, KipError};
use std::collections::{BTreeSet, HashMap};

/// Variable name -> slot.
#[derive(Debug, Default, Clone)]
pub struct Vars {
    /// Slot names, by slot.
    pub names: Vec<String>,
    index: HashMap<String, usize>,
}

impl Vars {
    /// The name of a slot.
    pub fn name(&self, slot: usize) -> Option<&str> {
        self.names.get(slot).map(String::as_str)
    }

    /// The slot of `name`, allocating one if new.
    pub fn slot(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len();
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        i
    }

    /// The slot of `name`, if the query uses it.
    pub fn get(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.names.len()
    }
}

/// A concept matcher with literals resolved.
#[derive(Debug, Clone)]
pub struct ConceptMatch {
    /// `{id}`: the concept number, or `None` for an id that names no concept.
    pub id: Option<Option<u64>>,
    /// `{type}`
    pub concept_type: Option<String>,
    /// `{name}`
    pub name: Option<String>,
}

/// A concept pattern `?x {...}`.
#[derive(Debug, Clone)]
pub struct ConceptStep {
    /// The bound variable.
    pub var: usize,
    /// The matcher.
    pub matcher: ConceptMatch,
    /// When the variable is not bound before this step: the attribute value index range
    /// its FILTERs allow, scanned instead of the whole type (the FILTERs still run).
    pub index: Option<super::index::AttrRange>,
}

/// A subject or object.
#[derive(Debug, Clone)]
pub enum EndpointC {
    /// `?x`
    Var(usize),
    /// `{...}` or `?x {...}`
    Concept(Option<usize>, ConceptMatch),
    /// A nested proposition.
    Prop(Box<PropStep>),
}

/// The predicate of a proposition pattern.
#[derive(Debug, Clone)]
pub enum PredC {
    /// `?p` binds the predicate name.
    Var(usize),
    /// Literal alternatives with an optional hop range `(min, max)`.
    Lits(Vec<String>, Option<(u32, u32)>),
}

/// The shape of a proposition pattern.
#[derive(Debug, Clone)]
pub enum PropKind {
    /// `(id: ...)`: the link number, or `None` when the id names no link.
    Id(Option<u64>),
    /// `(s, p, o)`
    Triple(EndpointC, PredC, EndpointC),
}

/// A proposition pattern.
#[derive(Debug, Clone)]
pub struct PropStep {
    /// `?link`
    pub var: Option<usize>,
    /// What it matches.
    pub kind: PropKind,
}

/// One step of a group.
#[derive(Debug, Clone)]
pub enum Step {
    /// Match a concept pattern.
    Concept(ConceptStep),
    /// Match a proposition pattern.
    Prop(PropStep),
    /// Keep rows where the expression is true.
    Filter(Expr),
    /// Left join.
    Optional(Group),
    /// Anti join.
    Not(Group),
}

/// A compiled group: steps, then the UNION branches evaluated independently.
#[derive(Debug, Clone, Default)]
pub struct Group {
    /// Steps in execution order.
    pub steps: Vec<Step>,
    /// The planner's estimate of the rows each pattern step yields per input row (from
    /// the store's statistics; `None` for filters and blocks), index-aligned with
    /// `steps`: what `kip explain` shows.
    pub estimates: Vec<Option<u64>>,
    /// UNION branches.
    pub unions: Vec<Group>,
}

/// A compiled WHERE body.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Variable slots.
    pub vars: Vars,
    /// The root group.
    pub root: Group,
}

struct Compiler<'g> {
    g: &'g dyn GraphRead,
    vars: Vars,
    max_hops: u32,
    attr_index: bool,
}

fn not_found(what: String) -> KipError {
    KipError::new(
        ErrorCode::NotFound,
        format!("NotFound: {what} does not exist"),
    )
    .with_hint("the id matches nothing; use SEARCH or FIND to look up the current id")
}

fn lit(s: &StrSlot) -> Result<String, KipError> {
    crate::kml::text(s).map(str::to_string)
}

/// Compiles `clauses`. `required` ids (`{id}` / `(id: ...)` outside OPTIONAL, NOT and
/// UNION) that match nothing are `KIP_3002`.
pub fn compile(
    g: &dyn GraphRead,
    clauses: &[WhereClause],
    vars: Vars,
    limits: &super::QueryLimits,
) -> Result<Plan, KipError> {
    let mut c = Compiler {
        g,
        vars,
        max_hops: limits.max_hops,
        attr_index: limits.attr_index,
    };
    let root = c.group(clauses, &BTreeSet::new(), true)?;
    Ok(Plan { vars: c.vars, root })
}

/// Variables a clause list binds (NOT bodies excluded: their variables are private).
pub fn bound_names(clauses: &[WhereClause], out: &mut BTreeSet<String>) {
    for c in clauses {
        match c {
            WhereClause::Concept(cp) => {
                out.insert(cp.var.name.clone());
            }
            WhereClause::Proposition(p) => prop_names(p, out),
            WhereClause::Filter(_) | WhereClause::Not(_) => {}
            WhereClause::Optional(gr) | WhereClause::Union(gr) => bound_names(&gr.clauses, out),
        }
    }
}

fn prop_names(p: &PropositionPattern, out: &mut BTreeSet<String>) {
    if let Some(v) = &p.var {
        out.insert(v.name.clone());
    }
    if let PropositionMatcher::Triple(t) = &p.matcher {
        for e in [&t.subject, &t.object] {
            match e {
                Endpoint::Var(v) => {
                    out.insert(v.name.clone());
                }
                Endpoint::Concept { var, .. } => {
                    if let Some(v) = var {
                        out.insert(v.name.clone());
                    }
                }
                Endpoint::Proposition(inner) => prop_names(inner, out),
            }
        }
        if let PredicatePattern::Var(v) = &t.predicate {
            out.insert(v.name.clone());
        }
    }
}

fn expr_vars(e: &Expr, out: &mut BTreeSet<String>) {
    match e {
        Expr::Value(_) => {}
        Expr::Path(p) => {
            out.insert(p.var.name.clone());
        }
        Expr::Not(inner, _) => expr_vars(inner, out),
        Expr::Binary { left, right, .. } => {
            expr_vars(left, out);
            expr_vars(right, out);
        }
        Expr::Call { args, .. } => args.iter().for_each(|a| expr_vars(a, out)),
    }
}

impl Compiler<'_> {
    fn concept_match(&self, m: &ConceptMatcher, required: bool) -> Result<ConceptMatch, KipError> {
        let id = match &m.id {
            Some(s) => {
                let text = lit(s)?;
                let found = match ElemRef::parse_id(&text) {
                    Some(ElemRef::Concept(n)) if self.g.concept(n)?.is_some() => Some(n),
                    _ => None,
                };
                if found.is_none() && required {
                    return Err(not_found(format!("concept {{id: \"{text}\"}}")));
                }
                Some(found)
            }
            None => None,
        };
        let concept_type = match &m.concept_type {
            Some(t) => {
                let t = lit(t)?;
                schema::require_concept_type(self.g, &t)?;
                Some(t)
            }
            None => None,
        };
        let name = m.name.as_ref().map(lit).transpose()?;
        Ok(ConceptMatch {
            id,
            concept_type,
            name,
        })
    }

    fn endpoint(&mut self, e: &Endpoint, required: bool) -> Result<EndpointC, KipError> {
        Ok(match e {
            Endpoint::Var(v) => EndpointC::Var(self.vars.slot(&v.name)),
            Endpoint::Concept { var, matcher } => {
                let slot = var.as_ref().map(|v| self.vars.slot(&v.name));
                EndpointC::Concept(slot, self.concept_match(matcher, required)?)
            }
            Endpoint::Proposition(p) => EndpointC::Prop(Box::new(self.prop(p, required)?)),
        })
    }

    fn prop(&mut self, p: &PropositionPattern, required: bool) -> Result<PropStep, KipError> {
        let var = p.var.as_ref().map(|v| self.vars.slot(&v.name));
        let kind = match &p.matcher {
            PropositionMatcher::Id(id) => {
                let text = lit(id)?;
                let found = match ElemRef::parse_id(&text) {
                    Some(ElemRef::Prop(n)) if self.g.prop(n)?.is_some() => Some(n),
                    _ => None,
                };
                if found.is_none() && required {
                    return Err(not_found(format!("proposition (id: \"{text}\")")));
                }
                PropKind::Id(found)
            }
            PropositionMatcher::Triple(t) => {
                let s = self.endpoint(&t.subject, required)?;
                let o = self.endpoint(&t.object, required)?;
                let pred = match &t.predicate {
                    PredicatePattern::Var(v) => PredC::Var(self.vars.slot(&v.name)),
                    PredicatePattern::Literal {
                        alternatives, hops, ..
                    } => {
                        let mut names = Vec::new();
                        for a in alternatives {
                            let n = lit(a)?;
                            schema::require_predicate(self.g, &n)?;
                            if !names.contains(&n) {
                                names.push(n);
                            }
                        }
                        let hops = match hops {
                            None => None,
                            Some(h) => {
                                let max = match h.max {
                                    Some(m) => m,
                                    None => self.max_hops.max(h.min),
                                };
                                if max > self.max_hops {
                                    return Err(KipError::new(
                                        ErrorCode::ResourceExhausted,
                                        format!("the hop range asks for up to {max} hops; the limit is {}", self.max_hops),
                                    )
                                    .with_hint(format!("use a range within {{0,{}}}", self.max_hops)));
                                }
                                if h.min == 1 && max == 1 {
                                    None
                                } else {
                                    Some((h.min, max))
                                }
                            }
                        };
                        if hops.is_some() && var.is_some() {
                            return Err(KipError::syntax(
                                "a link variable cannot bind a multi-hop path",
                            )
                            .with_hint("drop the ?link before a pattern with a hop range, or use a single hop"));
                        }
                        PredC::Lits(names, hops)
                    }
                };
                PropKind::Triple(s, pred, o)
            }
        };
        Ok(PropStep { var, kind })
    }

    /// Estimated rows a pattern yields given the bound set (lower is better).
    fn cost(&self, step: &Step, bound: &BTreeSet<usize>) -> u64 {
        match step {
            Step::Concept(c) => {
                if bound.contains(&c.var) {
                    return 0;
                }
                let m = &c.matcher;
                if m.id.is_some() || (m.concept_type.is_some() && m.name.is_some()) {
                    1
                } else if let Some(r) = &c.index {
                    r.estimate + 1
                } else if m.name.is_some() {
                    3
                } else if let Some(t) = &m.concept_type {
                    self.g
                        .stat(crate::store::Stat::Type(t))
                        .unwrap_or(u64::MAX / 4)
                        .max(1)
                        + 1
                } else {
                    u64::MAX / 2
                }
            }
            Step::Prop(p) => self.prop_cost(p, bound),
            _ => 0,
        }
    }

    fn endpoint_known(e: &EndpointC, bound: &BTreeSet<usize>) -> bool {
        match e {
            EndpointC::Var(v) => bound.contains(v),
            EndpointC::Concept(var, m) => {
                var.is_some_and(|v| bound.contains(&v))
                    || m.id.is_some()
                    || (m.concept_type.is_some() && m.name.is_some())
            }
            EndpointC::Prop(p) => {
                p.var.is_some_and(|v| bound.contains(&v)) || matches!(p.kind, PropKind::Id(_))
            }
        }
    }

    fn prop_cost(&self, p: &PropStep, bound: &BTreeSet<usize>) -> u64 {
        if p.var.is_some_and(|v| bound.contains(&v)) {
            return 1;
        }
        match &p.kind {
            PropKind::Id(_) => 1,
            PropKind::Triple(s, pred, o) => {
                let sk = Self::endpoint_known(s, bound);
                let ok = Self::endpoint_known(o, bound);
                let pred_count = match pred {
                    PredC::Lits(names, _) => names
                        .iter()
                        .map(|n| self.g.stat(crate::store::Stat::Predicate(n)).unwrap_or(0))
                        .sum::<u64>()
                        .max(1),
                    PredC::Var(_) => self.g.totals().map(|t| t.1).unwrap_or(u64::MAX / 4).max(1),
                };
                let hops = matches!(pred, PredC::Lits(_, Some(_)));
                let base = match (sk, ok) {
                    (true, true) => 1,
                    (true, false) | (false, true) => 10.min(pred_count) + 1,
                    (false, false) => {
                        let nested =
                            matches!(s, EndpointC::Prop(_)) || matches!(o, EndpointC::Prop(_));
                        let concept_side = [s, o].iter().any(|e| {
                            matches!(e, EndpointC::Concept(_, m) if m.name.is_some() || m.concept_type.is_some())
                        });
                        if concept_side {
                            pred_count.min(1000) + 2
                        } else if nested {
                            pred_count + 2
                        } else {
                            pred_count + 5
                        }
                    }
                };
                if hops {
                    base.saturating_mul(20)
                } else {
                    base
                }
            }
        }
    }

    fn step_vars(step: &Step, out: &mut BTreeSet<usize>) {
        fn ep(e: &EndpointC, out: &mut BTreeSet<usize>) {
            match e {
                EndpointC::Var(v) => {
                    out.insert(*v);
                }
                EndpointC::Concept(v, _) => {
                    if let Some(v) = v {
                        out.insert(*v);
                    }
                }
                EndpointC::Prop(p) => prop(p, out),
            }
        }
        fn prop(p: &PropStep, out: &mut BTreeSet<usize>) {
            if let Some(v) = p.var {
                out.insert(v);
            }
            if let PropKind::Triple(s, pred, o) = &p.kind {
                ep(s, out);
                ep(o, out);
                if let PredC::Var(v) = pred {
                    out.insert(*v);
                }
            }
        }
        match step {
            Step::Concept(c) => {
                out.insert(c.var);
            }
            Step::Prop(p) => prop(p, out),
            _ => {}
        }
    }

    fn group(
        &mut self,
        clauses: &[WhereClause],
        outer: &BTreeSet<usize>,
        required: bool,
    ) -> Result<Group, KipError> {
        let mut patterns = Vec::new();
        let mut filters = Vec::new();
        let mut optionals = Vec::new();
        let mut nots = Vec::new();
        let mut unions = Vec::new();
        for c in clauses {
            match c {
                WhereClause::Concept(cp) => {
                    let var = self.vars.slot(&cp.var.name);
                    let matcher = self.concept_match(&cp.matcher, required)?;
                    patterns.push(Step::Concept(ConceptStep {
                        var,
                        matcher,
                        index: None,
                    }));
                }
                WhereClause::Proposition(p) => patterns.push(Step::Prop(self.prop(p, required)?)),
                WhereClause::Filter(f) => filters.push(&f.expr),
                WhereClause::Optional(gr) => optionals.push(gr),
                WhereClause::Not(gr) => nots.push(gr),
                WhereClause::Union(gr) => unions.push(gr),
            }
        }
        // Filter variable sets, by slot.
        let mut filter_sets = Vec::new();
        for f in &filters {
            let mut names = BTreeSet::new();
            expr_vars(f, &mut names);
            let slots: BTreeSet<usize> = names.iter().map(|n| self.vars.slot(n)).collect();
            filter_sets.push(slots);
        }
        // Concept scans narrowed by an attribute value index range from the FILTERs
        // that read only their variable.
        for p in patterns.iter_mut() {
            if let Step::Concept(c) = p {
                if outer.contains(&c.var) {
                    continue;
                }
                let own: Vec<&Expr> = filters
                    .iter()
                    .zip(&filter_sets)
                    .filter(|(_, vs)| vs.len() == 1 && vs.contains(&c.var))
                    .map(|(f, _)| *f)
                    .collect();
                if own.is_empty() || !self.attr_index {
                    continue;
                }
                let name = self.vars.name(c.var).unwrap_or_default().to_string();
                c.index = super::index::choose(self.g, c, &name, &own);
            }
        }
        let mut bound = outer.clone();
        let mut steps = Vec::new();
        let mut estimates: Vec<Option<u64>> = Vec::new();
        let mut placed = vec![false; filters.len()];
        let place_ready = |bound: &BTreeSet<usize>,
                           steps: &mut Vec<Step>,
                           estimates: &mut Vec<Option<u64>>,
                           placed: &mut Vec<bool>| {
            for (i, f) in filters.iter().enumerate() {
                if !placed[i] && filter_sets[i].is_subset(bound) {
                    steps.push(Step::Filter((*f).clone()));
                    estimates.push(None);
                    placed[i] = true;
                }
            }
        };
        place_ready(&bound, &mut steps, &mut estimates, &mut placed);
        while !patterns.is_empty() {
            // Cheapest first; ties go to links (an index step from a bound end) before
            // concept scans, then to a fixed textual order, so the written order of the
            // patterns never changes the plan.
            let (best, (cost, _, _)) = patterns
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let rank = match s {
                        Step::Prop(_) => 0,
                        _ => 1,
                    };
                    (i, (self.cost(s, &bound), rank, step_text(s, &self.vars)))
                })
                .min_by(|a, b| a.1.cmp(&b.1))
                .unwrap_or((0, (0, 0, String::new())));
            let step = patterns.remove(best);
            Self::step_vars(&step, &mut bound);
            steps.push(step);
            estimates.push(Some(cost));
            place_ready(&bound, &mut steps, &mut estimates, &mut placed);
        }
        for gr in optionals {
            let sub = self.group(&gr.clauses, &bound, false)?;
            let mut names = BTreeSet::new();
            bound_names(&gr.clauses, &mut names);
            for n in names {
                bound.insert(self.vars.slot(&n));
            }
            steps.push(Step::Optional(sub));
            estimates.push(None);
        }
        // Remaining filters read variables that only OPTIONAL binds (or none at all).
        for (i, f) in filters.iter().enumerate() {
            if !placed[i] {
                steps.push(Step::Filter((*f).clone()));
                estimates.push(None);
            }
        }
        for gr in nots {
            steps.push(Step::Not(self.group(&gr.clauses, &bound, false)?));
            estimates.push(None);
        }
        let mut union_groups = Vec::new();
        for gr in unions {
            union_groups.push(self.group(&gr.clauses, &BTreeSet::new(), false)?);
        }
        Ok(Group {
            steps,
            estimates,
            unions: union_groups,
        })
    }
}

/// Describes a plan for `kip explain`.
pub fn explain(plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    explain_group(&plan.root, &plan.vars, 0, &mut out);
    out
}

fn vname(vars: &Vars, i: usize) -> String {
    format!("?{}", vars.names.get(i).map(String::as_str).unwrap_or("_"))
}

fn explain_match(m: &ConceptMatch) -> String {
    let mut parts = Vec::new();
    if let Some(id) = &m.id {
        parts.push(match id {
            Some(n) => format!("id C:{n}"),
            None => "id <none>".to_string(),
        });
    }
    if let Some(t) = &m.concept_type {
        parts.push(format!("type {t}"));
    }
    if let Some(n) = &m.name {
        parts.push(format!("name {n:?}"));
    }
    parts.join(", ")
}

fn explain_endpoint(e: &EndpointC, vars: &Vars) -> String {
    match e {
        EndpointC::Var(v) => vname(vars, *v),
        EndpointC::Concept(v, m) => format!(
            "{}{{{}}}",
            v.map(|v| format!("{} ", vname(vars, v)))
                .unwrap_or_default(),
            explain_match(m)
        ),
        EndpointC::Prop(p) => explain_prop(p, vars),
    }
}

fn explain_prop(p: &PropStep, vars: &Vars) -> String {
    let head = p
        .var
        .map(|v| format!("{} ", vname(vars, v)))
        .unwrap_or_default();
    match &p.kind {
        PropKind::Id(id) => format!(
            "{head}(id {})",
            id.map(|n| format!("P:{n}"))
                .unwrap_or_else(|| "<none>".into())
        ),
        PropKind::Triple(s, pred, o) => {
            let pred = match pred {
                PredC::Var(v) => vname(vars, *v),
                PredC::Lits(names, hops) => {
                    let mut s = names.join("|");
                    if let Some((a, b)) = hops {
                        s.push_str(&format!("{{{a},{b}}}"));
                    }
                    s
                }
            };
            format!(
                "{head}({}, {pred}, {})",
                explain_endpoint(s, vars),
                explain_endpoint(o, vars)
            )
        }
    }
}

fn step_text(s: &Step, vars: &Vars) -> String {
    match s {
        Step::Concept(c) => format!("{} {}", vname(vars, c.var), explain_match(&c.matcher)),
        Step::Prop(p) => explain_prop(p, vars),
        _ => String::new(),
    }
}

/// An estimate for people: `~1,234`, or `unknown` for the planner's "no statistics".
fn rows(n: u64) -> String {
    if n >= u64::MAX / 8 {
        return "unknown".into();
    }
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("~{out}")
}

/// Explains a group: each step with the planner's estimate of the rows it yields per
/// input row and of the rows after it (the running product; a filter or a NOT keeps
/// at most as many, an OPTIONAL at least as many).
fn explain_group(gr: &Group, vars: &Vars, depth: usize, out: &mut Vec<String>) {
    explain_group_from(gr, vars, depth, 1, &BTreeSet::new(), out);
}

/// How a concept step finds its concepts (what `exec::match_concept` does).
fn concept_access(c: &ConceptStep, bound: &BTreeSet<usize>) -> String {
    if bound.contains(&c.var) {
        return "check of the bound concept".into();
    }
    let m = &c.matcher;
    match (&m.id, &m.concept_type, &m.name, &c.index) {
        (Some(_), _, _, _) => "lookup by id".into(),
        (None, Some(_), Some(_), _) => "lookup in the (type, name) index".into(),
        (None, Some(t), None, Some(r)) => format!(
            "range of the attribute index {t}.{} where {} ({} entries)",
            r.attr, r.text, r.estimate
        ),
        (None, Some(t), None, None) => format!("scan of the type index ({t})"),
        (None, None, Some(_), _) => "scan of the name index".into(),
        (None, None, None, _) => "scan of every concept".into(),
    }
}

/// How a link step finds its links (what `exec::match_prop` does).
fn prop_access(p: &PropStep, bound: &BTreeSet<usize>) -> String {
    if p.var.is_some_and(|v| bound.contains(&v)) {
        return "check of the bound link".into();
    }
    let (s, pred, o) = match &p.kind {
        PropKind::Id(_) => return "lookup by id".into(),
        PropKind::Triple(s, pred, o) => (s, pred, o),
    };
    let sk = Compiler::endpoint_known(s, bound);
    let ok = Compiler::endpoint_known(o, bound);
    if let PredC::Lits(_, Some((a, b))) = pred {
        let from = match (sk, ok) {
            (true, _) => "from the subject",
            (false, true) => "from the object",
            _ => "from every start",
        };
        return format!("path walk of {a} to {b} hops {from}, level by level");
    }
    let by_pred = matches!(pred, PredC::Lits(..));
    match (sk, ok) {
        (true, _) if by_pred => "out-links of the subject by predicate (spo index)".into(),
        (true, _) => "out-links of the subject (spo index)".into(),
        (false, true) if by_pred => "in-links of the object by predicate (osp index)".into(),
        (false, true) => "in-links of the object (osp index)".into(),
        _ if matches!(s, EndpointC::Prop(_)) || matches!(o, EndpointC::Prop(_)) => {
            "links of each matching nested proposition".into()
        }
        _ if by_pred => "scan of the predicate index (pos)".into(),
        _ => "scan of every link".into(),
    }
}

fn explain_group_from(
    gr: &Group,
    vars: &Vars,
    depth: usize,
    input: u64,
    outer: &BTreeSet<usize>,
    out: &mut Vec<String>,
) {
    let pad = "  ".repeat(depth);
    let mut flow = input;
    let mut bound = outer.clone();
    for (i, s) in gr.steps.iter().enumerate() {
        let est = gr.estimates.get(i).copied().flatten();
        let cost = |per: u64, flow: &mut u64| -> String {
            *flow = if per >= u64::MAX / 8 || *flow >= u64::MAX / 8 {
                u64::MAX / 4
            } else {
                flow.saturating_mul(per.max(1))
            };
            if per == 0 {
                // The variable is bound already: a check, not a lookup.
                format!(
                    "  [check of a bound variable, at most {} rows after]",
                    rows(*flow)
                )
            } else {
                format!(
                    "  [est. {} per input row, {} rows after]",
                    rows(per),
                    rows(*flow)
                )
            }
        };
        match s {
            Step::Concept(c) => {
                let note = est.map(|e| cost(e, &mut flow)).unwrap_or_default();
                out.push(format!(
                    "{pad}match concept {} {{{}}}: {}{note}",
                    vname(vars, c.var),
                    explain_match(&c.matcher),
                    concept_access(c, &bound)
                ));
                Compiler::step_vars(s, &mut bound);
            }
            Step::Prop(p) => {
                let note = est.map(|e| cost(e, &mut flow)).unwrap_or_default();
                let merged = match (i.checked_sub(1).and_then(|j| gr.steps.get(j)), s) {
                    (Some(Step::Concept(c)), next) if !outer.contains(&c.var) => {
                        super::join::in_links_of(c, next).map(|_| {
                            format!(
                                ", or one pass over the predicate index (pos) merged with the scan above when the predicate has fewer than {} links per scanned concept",
                                super::join::SEEK_COST
                            )
                        })
                    }
                    _ => None,
                }
                .unwrap_or_default();
                out.push(format!(
                    "{pad}match link {}: {}{merged}{note}",
                    explain_prop(p, vars),
                    prop_access(p, &bound)
                ));
                Compiler::step_vars(s, &mut bound);
            }
            Step::Filter(e) => out.push(format!(
                "{pad}filter {}  [at most {} rows after]",
                kip_lang::printer::expr(e),
                rows(flow)
            )),
            Step::Optional(g) => {
                out.push(format!("{pad}optional (left join)"));
                explain_group_from(g, vars, depth + 1, flow, &bound, out);
                group_vars(g, &mut bound);
            }
            Step::Not(g) => {
                out.push(format!(
                    "{pad}not (anti join)  [at most {} rows after]",
                    rows(flow)
                ));
                explain_group_from(g, vars, depth + 1, flow, &bound, out);
            }
        }
    }
    for u in &gr.unions {
        out.push(format!("{pad}union (independent branch)"));
        explain_group_from(u, vars, depth + 1, 1, &BTreeSet::new(), out);
    }
}

/// The variables an OPTIONAL group's patterns bind (for the steps after it).
fn group_vars(g: &Group, out: &mut BTreeSet<usize>) {
    for s in &g.steps {
        match s {
            Step::Optional(inner) => group_vars(inner, out),
            other => Compiler::step_vars(other, out),
        }
    }
}
