//! The statements RC9-RC11 added: `UPDATE` (with its update expressions), `MERGE
//! CONCEPT`, `EXPORT`, and the `EXPECT VERSION` guard of UPSERT blocks.

use super::Parser;
use crate::ast::*;
use crate::error::{ErrorCode, KipResult};
use crate::lexer::Tok;

const UPDATE_FORM: &str = "UPDATE ?x SET ATTRIBUTES { key: value_or_expr } SET METADATA { key: value_or_expr } WHERE { ... } [LIMIT n]";

impl Parser<'_> {
    /// `UPDATE ?target SET ATTRIBUTES {...} SET METADATA {...} WHERE {...} [LIMIT n]`.
    pub(crate) fn update(&mut self) -> KipResult<Update> {
        let start = self.bump().span; // UPDATE
        let target = self.target_var("UPDATE")?;
        let mut set_attributes = None;
        let mut set_metadata = None;
        while self.at_kw("SET") {
            self.bump();
            if self.at_kw("ATTRIBUTES") {
                if set_attributes.is_some() {
                    return Err(self.duplicate_clause("SET ATTRIBUTES"));
                }
                self.bump();
                set_attributes = Some(self.update_object(&target, "SET ATTRIBUTES")?);
            } else if self.at_kw("METADATA") {
                if set_metadata.is_some() {
                    return Err(self.duplicate_clause("SET METADATA"));
                }
                self.bump();
                set_metadata = Some(self.update_object(&target, "SET METADATA")?);
            } else {
                return Err(self
                    .unexpected("ATTRIBUTES or METADATA after SET")
                    .with_hint(UPDATE_FORM));
            }
        }
        if set_attributes.is_none() && set_metadata.is_none() {
            return Err(self
                .unexpected("SET ATTRIBUTES or SET METADATA")
                .with_hint(format!("an UPDATE changes something: {UPDATE_FORM}")));
        }
        if self.at_kw("EXPECT") {
            return Err(self.unexpected("keyword WHERE").with_hint(
                "EXPECT VERSION guards UPSERT blocks only; guard an UPDATE's targets with FILTER conditions in its WHERE (e.g. FILTER(?x.metadata._version == 3))",
            ));
        }
        if !self.at_kw("WHERE") {
            return Err(self.unexpected("keyword WHERE").with_hint(format!(
                "an UPDATE needs WHERE {{ ... }} binding ?{}: {UPDATE_FORM}",
                target.name
            )));
        }
        let where_clauses = self.where_body()?;
        let limit = if self.eat_kw("LIMIT") {
            Some(self.limit_value()?)
        } else {
            None
        };
        if self.at_kw("CURSOR") || self.at_kw("ORDER") {
            return Err(self.unexpected("the end of the UPDATE").with_hint(
                "an UPDATE takes only LIMIT; to sweep more than LIMIT elements, write a marker in the same UPDATE and exclude marked elements in WHERE, then repeat until updated < LIMIT",
            ));
        }
        Ok(Update {
            target,
            set_attributes,
            set_metadata,
            where_clauses,
            limit,
            span: start.to(self.prev_span()),
        })
    }

    fn update_object(&mut self, target: &Variable, clause: &str) -> KipResult<UpdateObject> {
        if *self.peek_tok() != Tok::LBrace {
            return Err(self
                .unexpected(&format!("'{{' after {clause}"))
                .with_hint(format!(
                    "{clause} takes an object: {clause} {{ key: value, ... }}"
                )));
        }
        self.enter()?;
        let start = self.bump().span;
        let mut entries = Vec::new();
        loop {
            if *self.peek_tok() == Tok::RBrace {
                break;
            }
            let key = self.object_key()?;
            self.expect(&Tok::Colon, "':' after an object key")?;
            let v = if let Tok::Var(_) = self.peek_tok() {
                let p = self.dot_path()?;
                return Err(self
                    .error_at(
                        ErrorCode::InvalidSyntax,
                        p.span,
                        "a dot path is an operand of an update expression, not a value on its own",
                    )
                    .with_hint(format!(
                        "wrap it in an expression, e.g. {key}: COALESCE({}, 0)",
                        crate::printer::dot_path(&p)
                    )));
            } else {
                self.update_value(target, false)?
            };
            entries.push((key, v));
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        let end = self.expect_list_end(
            &Tok::RBrace,
            "',' or '}'",
            "separate the entries with commas: {a: 1, b: ADD(?x.attributes.b, 1)}",
        )?;
        self.leave();
        Ok(UpdateObject {
            entries,
            span: start.to(end),
        })
    }

    /// A value position: a JSON value or an update expression; `operand` restricts
    /// it to what an expression takes (numbers, placeholders, paths on the target,
    /// nested expressions).
    fn update_value(&mut self, target: &Variable, operand: bool) -> KipResult<UpdateValue> {
        if let Tok::Ident(w) = self.peek_tok() {
            if let Some(func) = UpdateFunc::parse(w) {
                if *self.peek_nth(1) == Tok::LParen {
                    return self.update_call(target, func);
                }
            }
            let upper = w.to_uppercase();
            if UpdateFunc::parse(&upper).is_some() && *self.peek_nth(1) == Tok::LParen {
                return Err(self.unexpected("an update expression").with_hint(format!(
                    "update functions are written in capitals: {upper}(...)"
                )));
            }
            if *self.peek_nth(1) == Tok::LParen && w != "true" && w != "false" && w != "null" {
                return Err(self.unexpected("a value or an update expression").with_hint(
                    "the update expressions are ADD(a, b), MUL(a, b), CLAMP(x, lo, hi) and COALESCE(x, default)",
                ));
            }
        }
        if !operand {
            return Ok(UpdateValue::Value(self.value()?));
        }
        if let Tok::Var(_) = self.peek_tok() {
            let p = self.dot_path()?;
            if p.var.name != target.name {
                return Err(self
                    .error_at(
                        ErrorCode::InvalidSyntax,
                        p.span,
                        format!(
                            "an update expression may only read the target ?{}, not ?{}",
                            target.name, p.var.name
                        ),
                    )
                    .with_hint("each element's new value is computed from its own state; bind a value that depends on other elements as a parameter"));
            }
            if p.path.len() != 2 || (p.path[0] != "attributes" && p.path[0] != "metadata") {
                return Err(self
                    .error_at(
                        ErrorCode::InvalidSyntax,
                        p.span,
                        format!(
                            "{} is not a number field of the target",
                            crate::printer::dot_path(&p)
                        ),
                    )
                    .with_hint(format!(
                        "operands read ?{t}.attributes.<key> or ?{t}.metadata.<key>",
                        t = target.name
                    )));
            }
            return Ok(UpdateValue::Path(p));
        }
        let v = self.value()?;
        match &v.kind {
            ValueKind::Number(_) | ValueKind::Param(_) | ValueKind::Null => {
                Ok(UpdateValue::Value(v))
            }
            _ => Err(self
                .error_at(
                    ErrorCode::InvalidSyntax,
                    v.span,
                    "an update-expression operand must be a number, a :placeholder, a path on the target or another expression",
                )
                .with_hint("e.g. ADD(COALESCE(?x.attributes.count, 0), 1)")),
        }
    }

    fn update_call(&mut self, target: &Variable, func: UpdateFunc) -> KipResult<UpdateValue> {
        self.enter()?;
        let start = self.bump().span; // the name
        self.bump(); // (
        let mut args = Vec::new();
        loop {
            if *self.peek_tok() == Tok::RParen {
                break;
            }
            self.count_operator(self.peek().span)?;
            args.push(self.update_value(target, true)?);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        let end = self.expect_list_end(
            &Tok::RParen,
            "',' or ')' closing the update expression",
            "separate the arguments with commas",
        )?;
        self.leave();
        let span = start.to(end);
        if args.len() != func.arity() {
            let form = match func {
                UpdateFunc::Add => "ADD(a, b)",
                UpdateFunc::Mul => "MUL(a, b)",
                UpdateFunc::Clamp => "CLAMP(x, lo, hi)",
                UpdateFunc::Coalesce => "COALESCE(x, default)",
            };
            return Err(self
                .error_at(
                    ErrorCode::InvalidSyntax,
                    span,
                    format!(
                        "{} takes {} operands, found {}",
                        func.as_str(),
                        func.arity(),
                        args.len()
                    ),
                )
                .with_hint(format!("write {form}")));
        }
        Ok(UpdateValue::Call { func, args, span })
    }

    /// `MERGE CONCEPT ?source INTO ?target WHERE {...}`.
    pub(crate) fn merge(&mut self) -> KipResult<Merge> {
        const FORM: &str = "MERGE CONCEPT ?source INTO ?target WHERE { ?source {type: \"T\", name: \"dup\"} ?target {type: \"T\", name: \"canonical\"} }";
        let start = self.bump().span; // MERGE
        if !self.at_kw("CONCEPT") {
            return Err(self
                .unexpected("keyword CONCEPT after MERGE")
                .with_hint(format!("only concepts are merged: {FORM}")));
        }
        self.bump();
        let source = self.target_var("MERGE CONCEPT")?;
        if !self.at_kw("INTO") {
            return Err(self.unexpected("keyword INTO").with_hint(FORM));
        }
        self.bump();
        let target = self.target_var("INTO")?;
        if !self.at_kw("WHERE") {
            return Err(self.unexpected("keyword WHERE").with_hint(FORM));
        }
        let where_clauses = self.where_body()?;
        Ok(Merge {
            source,
            target,
            where_clauses,
            span: start.to(self.prev_span()),
        })
    }

    /// `EXPORT ?target WHERE {...} [LIMIT n] [CURSOR "t"]`.
    pub(crate) fn export(&mut self) -> KipResult<Export> {
        let start = self.bump().span; // EXPORT
        let target = self.target_var("EXPORT")?;
        if !self.at_kw("WHERE") {
            return Err(self.unexpected("keyword WHERE").with_hint(format!(
                "EXPORT ?{} WHERE {{ ... }} [LIMIT n] [CURSOR \"...\"]",
                target.name
            )));
        }
        let where_clauses = self.where_body()?;
        let (limit, cursor) = self.limit_cursor()?;
        Ok(Export {
            target,
            where_clauses,
            limit,
            cursor,
            span: start.to(self.prev_span()),
        })
    }

    /// Optional `EXPECT VERSION n` right after a block's identity.
    pub(crate) fn expect_version(&mut self) -> KipResult<Option<Slot<u64>>> {
        if !self.at_kw("EXPECT") {
            return Ok(None);
        }
        self.bump();
        if !self.at_kw("VERSION") {
            return Err(self.unexpected("keyword VERSION after EXPECT").with_hint(
                "write EXPECT VERSION n (the element's current _version, or 0 for create-only)",
            ));
        }
        self.bump();
        if self.at_param() {
            return Ok(Some(Slot::Param(self.param()?)));
        }
        match self.peek_tok().clone() {
            Tok::Num(n) => {
                let span = self.bump().span;
                match n.as_u64() {
                    Some(v) => Ok(Some(Slot::Literal(v, span))),
                    None => Err(self
                        .error_at(
                            ErrorCode::InvalidSyntax,
                            span,
                            format!("EXPECT VERSION takes a whole number >= 0, found {n}"),
                        )
                        .with_hint("read the element's ?x.metadata._version and pass it, or 0 for create-only")),
                }
            }
            _ => Err(self
                .unexpected("a whole number or :placeholder after EXPECT VERSION")
                .with_hint("write EXPECT VERSION 3 or EXPECT VERSION :v")),
        }
    }
}
