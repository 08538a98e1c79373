//! KML: `UPSERT` (CONCEPT / PROPOSITION blocks, SET ATTRIBUTES, SET PROPOSITIONS,
//! WITH METADATA) and the four `DELETE` forms.

use super::Parser;
use crate::ast::*;
use crate::error::{ErrorCode, KipResult};
use crate::lexer::Tok;

impl Parser<'_> {
    pub(crate) fn upsert(&mut self) -> KipResult<Upsert> {
        let start = self.expect_kw("UPSERT", "")?;
        if *self.peek_tok() != Tok::LBrace {
            return Err(self.unexpected("'{' after UPSERT").with_hint(
                "an UPSERT is UPSERT { CONCEPT ?h { ... } ... } WITH METADATA { ... }",
            ));
        }
        self.bump();
        let mut blocks = Vec::new();
        loop {
            if self.eat(&Tok::RBrace) {
                break;
            }
            if self.at_kw("CONCEPT") {
                blocks.push(UpsertBlock::Concept(self.concept_block()?));
            } else if self.at_kw("PROPOSITION") {
                blocks.push(UpsertBlock::Proposition(self.proposition_block()?));
            } else {
                return Err(self.unexpected("CONCEPT, PROPOSITION or '}'").with_hint(
                    "an UPSERT body holds CONCEPT ?h { ... } and PROPOSITION ?h { ... } blocks",
                ));
            }
        }
        let metadata = self.with_metadata()?;
        Ok(Upsert {
            blocks,
            metadata,
            span: start.to(self.prev_span()),
        })
    }

    /// Optional `WITH METADATA { ... }`.
    fn with_metadata(&mut self) -> KipResult<Option<ObjectExpr>> {
        if !self.at_kw("WITH") || !matches!(self.peek_nth(1), Tok::Ident(w) if w == "METADATA") {
            if self.at_kw("WITH") {
                self.bump();
                return Err(self
                    .unexpected("keyword METADATA after WITH")
                    .with_hint("write WITH METADATA { key: value, ... }"));
            }
            return Ok(None);
        }
        self.bump();
        self.bump();
        if *self.peek_tok() != Tok::LBrace {
            return Err(self.unexpected("'{' after WITH METADATA").with_hint(
                "metadata is an object: WITH METADATA { source: \"...\", confidence: 0.9 }",
            ));
        }
        Ok(Some(self.object()?))
    }

    fn handle(&mut self, kw: &str) -> KipResult<Option<Variable>> {
        match self.peek_tok().clone() {
            Tok::Var(name) => {
                let span = self.bump().span;
                Ok(Some(Variable { name, span }))
            }
            Tok::LBrace => Ok(None),
            Tok::Ident(w) => Err(self
                .unexpected(&format!("a ?handle or '{{' after {kw}"))
                .with_hint(format!("handles start with '?': {kw} ?{w} {{ ... }}"))),
            _ => Err(self.unexpected(&format!("a ?handle or '{{' after {kw}"))),
        }
    }

    fn set_attributes(&mut self, slot: &mut Option<ObjectExpr>) -> KipResult<()> {
        if slot.is_some() {
            return Err(self.duplicate_clause("SET ATTRIBUTES"));
        }
        self.bump(); // ATTRIBUTES
        if *self.peek_tok() != Tok::LBrace {
            return Err(self
                .unexpected("'{' after SET ATTRIBUTES")
                .with_hint("attributes are an object: SET ATTRIBUTES { key: value, ... }"));
        }
        *slot = Some(self.object()?);
        Ok(())
    }

    fn concept_block(&mut self) -> KipResult<ConceptBlock> {
        let start = self.bump().span; // CONCEPT
        let handle = self.handle("CONCEPT")?;
        self.expect(&Tok::LBrace, "'{' opening the CONCEPT block")?;
        if *self.peek_tok() != Tok::LBrace {
            return Err(self
                .unexpected("the concept identity {type: ..., name: ...} or {id: ...}")
                .with_hint("a CONCEPT block starts with its identity, e.g. { {type: \"Drug\", name: \"Aspirin\"} SET ATTRIBUTES { ... } }"));
        }
        let identity = self.concept_matcher()?;
        self.check_exact_concept(&identity)?;
        let expect_version = self.expect_version()?;
        let mut set_attributes = None;
        let mut set_propositions: Option<Vec<SetProposition>> = None;
        loop {
            if self.eat(&Tok::RBrace) {
                break;
            }
            if self.at_kw("SET") {
                self.bump();
                if self.at_kw("ATTRIBUTES") {
                    self.set_attributes(&mut set_attributes)?;
                } else if self.at_kw("PROPOSITIONS") {
                    if set_propositions.is_some() {
                        return Err(self.duplicate_clause("SET PROPOSITIONS"));
                    }
                    self.bump();
                    set_propositions = Some(self.set_propositions()?);
                } else {
                    return Err(self
                        .unexpected("ATTRIBUTES or PROPOSITIONS after SET")
                        .with_hint(
                        "a CONCEPT block takes SET ATTRIBUTES { ... } and SET PROPOSITIONS { ... }",
                    ));
                }
            } else if self.at_kw("EXPECT") {
                return Err(self
                    .unexpected("SET ATTRIBUTES, SET PROPOSITIONS or '}'")
                    .with_hint(
                        "EXPECT VERSION comes right after the block's identity, before SET",
                    ));
            } else {
                return Err(self
                    .unexpected("SET ATTRIBUTES, SET PROPOSITIONS or '}'")
                    .with_hint("a CONCEPT block is { identity  SET ATTRIBUTES {...}  SET PROPOSITIONS {...} }; put WITH METADATA after its closing brace"));
            }
        }
        let metadata = self.with_metadata()?;
        Ok(ConceptBlock {
            handle,
            identity,
            expect_version,
            set_attributes,
            set_propositions,
            metadata,
            span: start.to(self.prev_span()),
        })
    }

    fn set_propositions(&mut self) -> KipResult<Vec<SetProposition>> {
        if *self.peek_tok() != Tok::LBrace {
            return Err(self
                .unexpected("'{' after SET PROPOSITIONS")
                .with_hint("write SET PROPOSITIONS { (\"predicate\", target) ... }"));
        }
        self.enter()?;
        self.bump();
        let mut out = Vec::new();
        loop {
            if self.eat(&Tok::RBrace) {
                break;
            }
            if *self.peek_tok() != Tok::LParen {
                return Err(self.unexpected("(\"predicate\", target) or '}'").with_hint(
                    "each entry is (\"predicate\", ?handle | {type, name} | {id} | (...))",
                ));
            }
            let start = self.bump().span;
            let predicate = self.str_slot("a quoted predicate")?;
            self.expect(&Tok::Comma, "',' after the predicate")
                .map_err(|e| {
                    if e.hint.is_none() {
                        e.with_hint(
                            "an entry is (\"predicate\", target), with a comma between them",
                        )
                    } else {
                        e
                    }
                })?;
            let target = self.endpoint(true)?;
            self.expect(&Tok::RParen, "')' closing the entry")?;
            let metadata = self.with_metadata()?;
            out.push(SetProposition {
                predicate,
                target,
                metadata,
                span: start.to(self.prev_span()),
            });
            self.eat(&Tok::Comma);
        }
        self.leave();
        Ok(out)
    }

    fn proposition_block(&mut self) -> KipResult<PropositionBlock> {
        let start = self.bump().span; // PROPOSITION
        let handle = self.handle("PROPOSITION")?;
        self.expect(&Tok::LBrace, "'{' opening the PROPOSITION block")?;
        if *self.peek_tok() != Tok::LParen {
            return Err(self
                .unexpected("the proposition identity (subject, \"predicate\", object) or (id: ...)")
                .with_hint("a PROPOSITION block starts with its identity, e.g. { (?a, \"treats\", ?b) SET ATTRIBUTES { ... } }"));
        }
        let identity = self.proposition_pattern(None, true)?;
        let expect_version = self.expect_version()?;
        let mut set_attributes = None;
        loop {
            if self.eat(&Tok::RBrace) {
                break;
            }
            if self.at_kw("SET") && matches!(self.peek_nth(1), Tok::Ident(w) if w == "ATTRIBUTES") {
                self.bump();
                self.set_attributes(&mut set_attributes)?;
            } else if self.at_kw("EXPECT") {
                return Err(self.unexpected("SET ATTRIBUTES or '}'").with_hint(
                    "EXPECT VERSION comes right after the block's identity, before SET",
                ));
            } else {
                return Err(self
                    .unexpected("SET ATTRIBUTES or '}'")
                    .with_hint("a PROPOSITION block takes SET ATTRIBUTES { ... }; put WITH METADATA after its closing brace"));
            }
        }
        let metadata = self.with_metadata()?;
        Ok(PropositionBlock {
            handle,
            identity,
            expect_version,
            set_attributes,
            metadata,
            span: start.to(self.prev_span()),
        })
    }

    pub(crate) fn delete(&mut self) -> KipResult<Delete> {
        let start = self.bump().span; // DELETE
        let target = match self.peek_tok().clone() {
            Tok::Ident(w) if w == "ATTRIBUTES" || w == "METADATA" => {
                self.bump();
                let keys = self.key_list(&w)?;
                self.expect_kw("FROM", &format!("write DELETE {w} {{\"key\"}} FROM ?var WHERE {{ ... }}"))?;
                let var = self.target_var(&format!("DELETE {w} ... FROM"))?;
                if w == "ATTRIBUTES" {
                    DeleteTarget::Attributes { keys, var }
                } else {
                    DeleteTarget::Metadata { keys, var }
                }
            }
            Tok::Ident(w) if w == "PROPOSITIONS" => {
                self.bump();
                let var = self.target_var("DELETE PROPOSITIONS")?;
                DeleteTarget::Propositions { var }
            }
            Tok::Ident(w) if w == "CONCEPT" => {
                self.bump();
                let var = self.target_var("DELETE CONCEPT")?;
                if !self.at_kw("DETACH") {
                    return Err(self
                        .unexpected("keyword DETACH")
                        .with_hint("DELETE CONCEPT requires DETACH: DELETE CONCEPT ?x DETACH WHERE { ... } (it also removes the concept's propositions)"));
                }
                self.bump();
                DeleteTarget::Concept { var }
            }
            _ => {
                return Err(self
                    .unexpected("ATTRIBUTES, METADATA, PROPOSITIONS or CONCEPT after DELETE")
                    .with_hint("forms: DELETE ATTRIBUTES {...} FROM ?x WHERE {...}, DELETE METADATA {...} FROM ?x WHERE {...}, DELETE PROPOSITIONS ?l WHERE {...}, DELETE CONCEPT ?c DETACH WHERE {...}"))
            }
        };
        if self.at_kw("EXPECT") {
            return Err(self.unexpected("keyword WHERE").with_hint(
                "EXPECT VERSION guards UPSERT blocks only; guard a DELETE's targets with FILTER conditions in its WHERE (e.g. FILTER(?x.metadata._version == 3))",
            ));
        }
        if !self.at_kw("WHERE") {
            return Err(self.unexpected("keyword WHERE").with_hint(format!(
                "DELETE needs WHERE {{ ... }} binding ?{}",
                target.var().name
            )));
        }
        let where_clauses = self.where_body()?;
        Ok(Delete {
            target,
            where_clauses,
            span: start.to(self.prev_span()),
        })
    }

    fn key_list(&mut self, what: &str) -> KipResult<Vec<StrSlot>> {
        if *self.peek_tok() != Tok::LBrace {
            return Err(self
                .unexpected(&format!("'{{' with the {} keys to delete", what.to_lowercase()))
                .with_hint(format!("write the keys in braces: DELETE {what} {{\"key1\", \"key2\"}} FROM ?x WHERE {{ ... }}")));
        }
        let open = self.bump().span;
        let mut keys = Vec::new();
        loop {
            if *self.peek_tok() == Tok::RBrace {
                break;
            }
            keys.push(self.str_slot("a quoted key")?);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        let close = self.expect_list_end(
            &Tok::RBrace,
            "',' or '}'",
            "separate the keys with commas: {\"key1\", \"key2\"}",
        )?;
        if keys.is_empty() {
            return Err(self
                .error_at(ErrorCode::InvalidSyntax, open.to(close), "empty key list")
                .with_hint(format!(
                    "name at least one key: DELETE {what} {{\"key\"}} ..."
                )));
        }
        Ok(keys)
    }

    pub(crate) fn target_var(&mut self, ctx: &str) -> KipResult<Variable> {
        match self.peek_tok().clone() {
            Tok::Var(name) => {
                let span = self.bump().span;
                Ok(Variable { name, span })
            }
            _ => {
                // The statement's whole form, since a target written inline (a concept
                // clause where the variable goes) is the usual slip.
                let form = if ctx.starts_with("MERGE") || ctx == "INTO" {
                    "MERGE CONCEPT ?dup INTO ?keep WHERE { ?dup {type: \"Person\", name: \"Bo\"} ?keep {type: \"Person\", name: \"Robert\"} }"
                } else if ctx == "UPDATE" {
                    "UPDATE ?x SET ATTRIBUTES { key: value } WHERE { ?x {type: \"Person\", name: \"Bo\"} }"
                } else if ctx == "DELETE CONCEPT" {
                    "DELETE CONCEPT ?x DETACH WHERE { ?x {type: \"Person\", name: \"Bo\"} }"
                } else if ctx == "DELETE PROPOSITIONS" {
                    "DELETE PROPOSITIONS ?link WHERE { ?link (?s, \"knows\", ?o) }"
                } else if ctx == "EXPORT" {
                    "EXPORT ?x WHERE { ?x {type: \"Person\"} }"
                } else {
                    "DELETE ATTRIBUTES {\"key\"} FROM ?x WHERE { ?x {type: \"Person\", name: \"Bo\"} }"
                };
                Err(self
                    .unexpected(&format!("a ?variable after {ctx}"))
                    .with_hint(format!(
                        "name the target with a variable and bind it in WHERE: {form}"
                    )))
            }
        }
    }
}
