//! Parameter binding on the AST: every `:name` placeholder is replaced by a JSON value.
//!
//! Binding never touches text, so a parameter can never change the structure of a
//! command: a string parameter that contains `"} DELETE ...` is just a string. A
//! placeholder inside a quoted string is literal text (the lexer never sees it as a
//! placeholder). A missing parameter is `KIP_3001` naming it; a parameter whose JSON
//! type does not fit its position (a number where a type name goes) is `KIP_2003`,
//! except LIMIT: any value that is not a positive integer is `KIP_1001`, as `LIMIT 0`
//! and a malformed LIMIT in the text are.

use crate::ast::*;
use crate::error::{ErrorCode, KipError, KipResult};
use serde_json::{Map, Value};

/// Binds `params` into `cmd`, returning a command with no placeholders left.
pub fn bind(cmd: &Command, params: &Map<String, Value>) -> KipResult<Command> {
    bind_owned(cmd.clone(), params)
}

/// [`bind`] on a command the caller owns: binds in place, without copying the tree (a
/// 1,000-block capsule is a large tree).
pub fn bind_owned(mut cmd: Command, params: &Map<String, Value>) -> KipResult<Command> {
    Binder { params }.command(&mut cmd)?;
    Ok(cmd)
}

struct Binder<'a> {
    params: &'a Map<String, Value>,
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Binder<'_> {
    fn lookup(&self, p: &Param) -> KipResult<&Value> {
        self.params.get(&p.name).ok_or_else(|| {
            KipError::new(
                ErrorCode::ReferenceError,
                format!(
                    "missing parameter :{} (no value for it in `parameters`)",
                    p.name
                ),
            )
            .with_hint({
                let mut hint = format!(
                    "add \"{}\" to the `parameters` object, or replace :{} with a literal value",
                    p.name, p.name
                );
                // A slip in the name is the usual cause: show what was sent.
                let sent: Vec<&str> = self.params.keys().take(8).map(String::as_str).collect();
                if !sent.is_empty() {
                    hint.push_str(&format!(
                        " (`parameters` has {}; a placeholder is written :name with the same name)",
                        sent.iter()
                            .map(|k| format!("\"{k}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                hint
            })
        })
    }

    fn str_slot(&self, s: &mut StrSlot, what: &str) -> KipResult<()> {
        if let Slot::Param(p) = s {
            let v = self.lookup(p)?;
            match v {
                Value::String(x) => *s = Slot::Literal(x.clone(), p.span),
                other => {
                    return Err(KipError::new(
                        ErrorCode::InvalidValueType,
                        format!(
                            "parameter :{} is used as {what} and must be a string, but it is a {}",
                            p.name,
                            json_type(other)
                        ),
                    )
                    .with_hint(format!("pass \"{}\" as a JSON string", p.name)))
                }
            }
        }
        Ok(())
    }

    fn limit(&self, s: &mut Slot<u64>) -> KipResult<()> {
        if let Slot::Param(p) = s {
            let v = self.lookup(p)?;
            match v.as_u64() {
                Some(0) => {
                    return Err(KipError::syntax(format!(
                        "parameter :{} gives LIMIT 0, which is not allowed",
                        p.name
                    ))
                    .with_hint("LIMIT takes a positive integer"))
                }
                Some(n) => *s = Slot::Literal(n, p.span),
                None => {
                    // One code for every wrong LIMIT, as for LIMIT 0 and a bad LIMIT in
                    // the text (DECISIONS 18): the command's LIMIT is malformed.
                    return Err(KipError::new(
                        ErrorCode::InvalidSyntax,
                        format!(
                            "parameter :{} is used as LIMIT and must be a positive integer, but it is {}",
                            p.name, v
                        ),
                    )
                    .with_hint(format!("pass \"{}\" as a JSON integer such as 20", p.name)));
                }
            }
        }
        Ok(())
    }

    fn value(&self, v: &mut ValueExpr) -> KipResult<()> {
        match &mut v.kind {
            ValueKind::Param(p) => {
                let j = self.lookup(p)?;
                *v = ValueExpr::from_json(j, p.span);
            }
            ValueKind::Array(items) => {
                for i in items {
                    self.value(i)?;
                }
            }
            ValueKind::Object(entries) => {
                for (_, e) in entries {
                    self.value(e)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn typed<T>(
        &self,
        s: &mut Slot<T>,
        what: &str,
        expected: &str,
        convert: impl Fn(&Value) -> Option<T>,
    ) -> KipResult<()> {
        if let Slot::Param(p) = s {
            let v = self.lookup(p)?;
            match convert(v) {
                Some(x) => *s = Slot::Literal(x, p.span),
                None => {
                    return Err(KipError::new(
                        ErrorCode::InvalidValueType,
                        format!(
                            "parameter :{} is used as {what} and must be {expected}, but it is {v}",
                            p.name
                        ),
                    )
                    .with_hint(format!("pass \"{}\" as {expected}", p.name)))
                }
            }
        }
        Ok(())
    }

    fn update_value(&self, v: &mut UpdateValue) -> KipResult<()> {
        match v {
            UpdateValue::Value(x) => self.value(x),
            UpdateValue::Path(_) => Ok(()),
            UpdateValue::Call { args, .. } => {
                for a in args {
                    self.update_value(a)?;
                }
                Ok(())
            }
        }
    }

    fn update_object(&self, o: &mut Option<UpdateObject>) -> KipResult<()> {
        if let Some(o) = o {
            for (_, v) in &mut o.entries {
                self.update_value(v)?;
            }
        }
        Ok(())
    }

    fn expect_version(&self, s: &mut Option<Slot<u64>>) -> KipResult<()> {
        match s {
            Some(s) => self.typed(
                s,
                "EXPECT VERSION",
                "a whole number >= 0 (the element's _version, or 0 for create-only)",
                Value::as_u64,
            ),
            None => Ok(()),
        }
    }

    fn object(&self, o: &mut Option<ObjectExpr>) -> KipResult<()> {
        if let Some(o) = o {
            for (_, v) in &mut o.entries {
                self.value(v)?;
            }
        }
        Ok(())
    }

    fn matcher(&self, m: &mut ConceptMatcher) -> KipResult<()> {
        if let Some(s) = &mut m.id {
            self.str_slot(s, "a concept id")?;
        }
        if let Some(s) = &mut m.concept_type {
            self.str_slot(s, "a concept type")?;
        }
        if let Some(s) = &mut m.name {
            self.str_slot(s, "a concept name")?;
        }
        Ok(())
    }

    fn endpoint(&self, e: &mut Endpoint) -> KipResult<()> {
        match e {
            Endpoint::Var(_) => Ok(()),
            Endpoint::Concept { matcher, .. } => self.matcher(matcher),
            Endpoint::Proposition(p) => self.proposition(p),
        }
    }

    fn proposition(&self, p: &mut PropositionPattern) -> KipResult<()> {
        match &mut p.matcher {
            PropositionMatcher::Id(id) => self.str_slot(id, "a proposition id"),
            PropositionMatcher::Triple(t) => {
                self.endpoint(&mut t.subject)?;
                if let PredicatePattern::Literal { alternatives, .. } = &mut t.predicate {
                    for a in alternatives {
                        self.str_slot(a, "a predicate")?;
                    }
                }
                self.endpoint(&mut t.object)
            }
        }
    }

    fn expr(&self, e: &mut Expr) -> KipResult<()> {
        match e {
            Expr::Value(v) => self.value(v),
            Expr::Path(_) => Ok(()),
            Expr::Not(inner, _) => self.expr(inner),
            Expr::Binary { left, right, .. } => {
                self.expr(left)?;
                self.expr(right)
            }
            Expr::Call { func, args, .. } => {
                for a in args.iter_mut() {
                    self.expr(a)?;
                }
                if *func == Function::In {
                    if let Some(Expr::Value(v)) = args.get(1) {
                        if !matches!(v.kind, ValueKind::Array(_)) {
                            return Err(KipError::new(
                                ErrorCode::InvalidValueType,
                                "the second argument of IN must be an array",
                            )
                            .with_hint("pass the IN list parameter as a JSON array"));
                        }
                    }
                }
                Ok(())
            }
        }
    }

    fn clauses(&self, cs: &mut [WhereClause]) -> KipResult<()> {
        for c in cs {
            match c {
                WhereClause::Concept(cp) => self.matcher(&mut cp.matcher)?,
                WhereClause::Proposition(p) => self.proposition(p)?,
                WhereClause::Filter(f) => self.expr(&mut f.expr)?,
                WhereClause::Not(g) | WhereClause::Optional(g) | WhereClause::Union(g) => {
                    self.clauses(&mut g.clauses)?
                }
            }
        }
        Ok(())
    }

    fn command(&self, c: &mut Command) -> KipResult<()> {
        match c {
            Command::Find(q) => {
                self.clauses(&mut q.where_clauses)?;
                if let Some(l) = &mut q.limit {
                    self.limit(l)?;
                }
                if let Some(cur) = &mut q.cursor {
                    self.str_slot(cur, "a CURSOR token")?;
                }
            }
            Command::Upsert(u) => {
                for b in &mut u.blocks {
                    match b {
                        UpsertBlock::Concept(cb) => {
                            self.matcher(&mut cb.identity)?;
                            self.expect_version(&mut cb.expect_version)?;
                            self.object(&mut cb.set_attributes)?;
                            if let Some(props) = &mut cb.set_propositions {
                                for p in props {
                                    self.str_slot(&mut p.predicate, "a predicate")?;
                                    self.endpoint(&mut p.target)?;
                                    self.object(&mut p.metadata)?;
                                }
                            }
                            self.object(&mut cb.metadata)?;
                        }
                        UpsertBlock::Proposition(pb) => {
                            self.proposition(&mut pb.identity)?;
                            self.expect_version(&mut pb.expect_version)?;
                            self.object(&mut pb.set_attributes)?;
                            self.object(&mut pb.metadata)?;
                        }
                    }
                }
                self.object(&mut u.metadata)?;
            }
            Command::Delete(d) => {
                match &mut d.target {
                    DeleteTarget::Attributes { keys, .. } | DeleteTarget::Metadata { keys, .. } => {
                        for k in keys {
                            self.str_slot(k, "a key to delete")?;
                        }
                    }
                    _ => {}
                }
                self.clauses(&mut d.where_clauses)?;
            }
            Command::Describe(d) => match &mut d.target {
                DescribeTarget::ConceptTypes { limit, cursor }
                | DescribeTarget::PropositionTypes { limit, cursor } => {
                    if let Some(l) = limit {
                        self.limit(l)?;
                    }
                    if let Some(c) = cursor {
                        self.str_slot(c, "a CURSOR token")?;
                    }
                }
                DescribeTarget::ConceptType(n) => self.str_slot(n, "a concept type name")?,
                DescribeTarget::PropositionType(n) => self.str_slot(n, "a predicate name")?,
                DescribeTarget::Primer | DescribeTarget::Domains => {}
            },
            Command::Search(s) => {
                self.str_slot(&mut s.term, "a search term")?;
                if let Some(t) = &mut s.with_type {
                    self.str_slot(t, "a type name")?;
                }
                if let Some(m) = &mut s.mode {
                    self.typed(m, "MODE", "\"keyword\", \"semantic\" or \"hybrid\"", |v| {
                        v.as_str().and_then(SearchMode::parse)
                    })?;
                }
                if let Some(t) = &mut s.threshold {
                    self.typed(t, "THRESHOLD", "a number between 0 and 1", |v| {
                        v.as_f64().filter(|x| (0.0..=1.0).contains(x))
                    })?;
                }
                if let Some(l) = &mut s.limit {
                    self.limit(l)?;
                }
            }
            Command::Update(u) => {
                self.update_object(&mut u.set_attributes)?;
                self.update_object(&mut u.set_metadata)?;
                self.clauses(&mut u.where_clauses)?;
                if let Some(l) = &mut u.limit {
                    self.limit(l)?;
                }
            }
            Command::Merge(m) => self.clauses(&mut m.where_clauses)?,
            Command::Export(e) => {
                self.clauses(&mut e.where_clauses)?;
                if let Some(l) = &mut e.limit {
                    self.limit(l)?;
                }
                if let Some(cur) = &mut e.cursor {
                    self.str_slot(cur, "a CURSOR token")?;
                }
            }
        }
        Ok(())
    }
}
