//! The KIP 2.0 parser: recursive descent over the shared token cursor into
//! [`crate::v2::ast`], one rule per production of the normative grammars
//! (`KIP-2.0-KQL.ebnf`, `KIP-2.0-KML.ebnf`, `KIP-2.0-META.ebnf`).
//!
//! Lexing is the 1.x lexer in its 2.0 dialect (a lone `-` is unary minus); keywords are
//! matched ASCII case-insensitively (grammar decision 1); JSON literals (`true`,
//! `false`, `null`) stay lowercase. Method names carry a `k2_` prefix so they never
//! clash with the 1.x rules on the same [`Parser`].
//!
//! One file (about 1,950 lines) for now: the three grammars share the WHERE body,
//! values, paths and selectors, and their rules call each other; splitting it by
//! grammar (query, mutation, meta) the way the 1.x parser is split is the next step
//! once the AST settles with the executors of issue 47.

use super::{ParseOptions, Parser};
use crate::error::{ErrorCode, KipError, KipResult};
use crate::lexer::{Lexer, Tok};
use crate::v2::ast::*;
use serde_json::Value as Json;

/// Words that start a KIP 2.0 statement.
pub(crate) const V2_STATEMENT_KEYWORDS: [&str; 26] = [
    "FIND",
    "MUTATE",
    "CREATE",
    "UPSERT",
    "ENSURE",
    "ASSERT",
    "UPDATE",
    "RETRACT",
    "SUPERSEDE",
    "CORRECT",
    "TRANSITION",
    "SET",
    "ARCHIVE",
    "TOMBSTONE",
    "PURGE",
    "MERGE",
    "DESCRIBE",
    "LIST",
    "SEARCH",
    "VERIFY",
    "VALIDATE",
    "PREVIEW",
    "HISTORY",
    "CHANGES",
    "SNAPSHOT",
    "EXPORT",
];

/// Words that start a `mutation_clause` (a KML statement other than MUTATE).
const MUTATION_CLAUSE_KEYWORDS: [&str; 14] = [
    "CREATE",
    "UPSERT",
    "ENSURE",
    "ASSERT",
    "UPDATE",
    "RETRACT",
    "SUPERSEDE",
    "CORRECT",
    "TRANSITION",
    "SET",
    "ARCHIVE",
    "TOMBSTONE",
    "PURGE",
    "MERGE",
];

const STATEMENTS_HINT: &str = "a KIP 2.0 statement starts with FIND (KQL); MUTATE, CREATE, UPSERT, ENSURE, ASSERT, UPDATE, RETRACT, SUPERSEDE, CORRECT, TRANSITION, SET RETENTION, ARCHIVE, TOMBSTONE, PURGE or MERGE (KML); or DESCRIBE, LIST, SEARCH, VERIFY, VALIDATE, PREVIEW, HISTORY, CHANGES, SNAPSHOT or EXPORT (META)";

const WHERE_HINT: &str = "a WHERE clause is a pattern (?c CONCEPT {...}, ?p PROPOSITION (?s, \"pred\", ?o), ?a ASSERTION {...}, ?e EVIDENCE {...}, ?x ACTIVITY {...}, STRUCTURAL (?a, \"field\", ?b), in KQL also ?b BELIEF (...) / ?b BELIEF SLOT (...)) or FILTER(...), NOT {...}, OPTIONAL {...}, UNION {...}";

fn new_parser(src: &str, opts: ParseOptions) -> KipResult<Parser<'_>> {
    if src.len() > opts.max_input_bytes {
        return Err(KipError::new(
            ErrorCode::ResourceExhausted,
            format!(
                "the command is {} bytes, more than the limit of {} bytes",
                src.len(),
                opts.max_input_bytes
            ),
        )
        .with_hint("split the work into several smaller statements"));
    }
    Ok(Parser::with_lexer(
        src,
        Lexer::new_v2(src, 0..src.len()),
        opts,
    ))
}

/// Parses exactly one KIP 2.0 statement (no `;`: one statement per operation).
pub(crate) fn parse_statement(src: &str, opts: ParseOptions) -> KipResult<Statement> {
    new_parser(src, opts)?.run(|p| {
        if p.at_eof() {
            return Err(p.k2_empty());
        }
        let st = p.k2_statement()?;
        if !p.at_eof() {
            let hint = if *p.peek_tok() == Tok::Semicolon {
                "KIP 2.0 has no ';' (KIPSyntax: one statement per operation): remove it; group writes that must commit together in MUTATE { ... }"
            } else if p.k2_is(0, "WITH") && p.k2_is(1, "METADATA") {
                "WITH METADATA is KIP 1.x: in 2.0 who claimed what, how and how surely is an Assertion: ASSERT (?s, \"pred\", ?o) { by: ..., mode: \"stated\", confidence: 0.9, evidence: [...] }"
            } else if p.k2_at_statement_keyword() {
                "one command holds one KIP 2.0 statement: send several as separate operations, or group writes in MUTATE { ... }"
            } else {
                "remove the extra text after the end of the statement; check that braces and parentheses are balanced and that clauses are in the grammar's order"
            };
            return Err(p.k2_unexpected("the end of the statement", Some(hint)));
        }
        Ok(st)
    })
}

/// Parses a sequence of KIP 2.0 statements, optionally separated by `;`.
pub(crate) fn parse_statements(src: &str, opts: ParseOptions) -> KipResult<Vec<Statement>> {
    new_parser(src, opts)?.run(|p| {
        if p.at_eof() {
            return Err(p.k2_empty());
        }
        let mut out = Vec::new();
        while !p.at_eof() {
            out.push(p.k2_statement()?);
            while p.eat(&Tok::Semicolon) {}
        }
        Ok(out)
    })
}

/// Parses the inside of a KQL `WHERE { ... }` block (BELIEF patterns and raw paths
/// admitted), without the braces.
pub(crate) fn parse_where_body(src: &str, opts: ParseOptions) -> KipResult<Vec<WhereClause>> {
    new_parser(src, opts)?.run(|p| {
        let mut out = Vec::new();
        while !p.at_eof() {
            p.count_clause()?;
            out.push(p.k2_where_clause(true)?);
        }
        Ok(out)
    })
}

fn upper(tok: &Tok) -> Option<String> {
    match tok {
        Tok::Ident(w) => Some(w.to_ascii_uppercase()),
        _ => None,
    }
}

impl Parser<'_> {
    // ---- cursor helpers --------------------------------------------------------------

    fn k2_empty(&self) -> KipError {
        KipError::syntax("the command is empty")
            .at(1, 1)
            .with_hint(STATEMENTS_HINT)
    }

    /// Whether the token `n` ahead (0 or 1) is the keyword `kw` (case-insensitive).
    fn k2_is(&self, n: usize, kw: &str) -> bool {
        matches!(self.peek_nth(n), Tok::Ident(w) if w.eq_ignore_ascii_case(kw))
    }

    fn k2_at(&self, kw: &str) -> bool {
        self.k2_is(0, kw)
    }

    fn k2_eat(&mut self, kw: &str) -> bool {
        if self.k2_at(kw) {
            self.bump();
            true
        } else {
            false
        }
    }

    /// Eats the two keywords `a b` when both are next.
    fn k2_eat2(&mut self, a: &str, b: &str) -> bool {
        if self.k2_is(0, a) && self.k2_is(1, b) {
            self.bump();
            self.bump();
            true
        } else {
            false
        }
    }

    fn k2_at_statement_keyword(&self) -> bool {
        V2_STATEMENT_KEYWORDS.iter().any(|k| self.k2_at(k))
    }

    /// `InvalidSyntax` "expected X, found Y" at the current token, with `hint` (or one
    /// inferred from what was found).
    fn k2_unexpected(&self, expected: &str, hint: Option<&str>) -> KipError {
        let t = self.peek();
        let found = t.tok.describe();
        let mut e = self.error_at(
            ErrorCode::InvalidSyntax,
            t.span,
            format!("expected {expected}, found {found}"),
        );
        e.found = Some(found);
        e.expected = Some(expected.to_string());
        let inferred = match &t.tok {
            Tok::Eof => Some(
                "the statement ended early: check for a missing '}', ')' or a missing clause"
                    .to_string(),
            ),
            Tok::Ident(w) if w.eq_ignore_ascii_case("AND") => {
                Some("use && for logical AND in FILTER".into())
            }
            Tok::Ident(w) if w.eq_ignore_ascii_case("OR") => {
                Some("use || for logical OR in FILTER".into())
            }
            Tok::Ident(w)
                if ["true", "false", "null"].contains(&w.to_ascii_lowercase().as_str())
                    && !["true", "false", "null"].contains(&w.as_str()) =>
            {
                Some(format!(
                    "JSON literals are lowercase: {}",
                    w.to_ascii_lowercase()
                ))
            }
            _ => None,
        };
        // At the end of input the rule's own hint says what is missing; elsewhere a
        // recognised slip (AND for &&, TRUE for true) is the more useful advice.
        let chosen = if t.tok == Tok::Eof {
            hint.map(str::to_string).or(inferred)
        } else {
            inferred.or(hint.map(str::to_string))
        };
        match chosen {
            Some(h) => e.with_hint(h),
            None => e,
        }
    }

    fn k2_kw(&mut self, kw: &str, hint: &str) -> KipResult<()> {
        if self.k2_eat(kw) {
            Ok(())
        } else {
            Err(self.k2_unexpected(&format!("keyword {kw}"), Some(hint)))
        }
    }

    fn k2_tok(&mut self, tok: &Tok, what: &str, hint: &str) -> KipResult<()> {
        if self.eat(tok) {
            Ok(())
        } else {
            Err(self.k2_unexpected(what, Some(hint)))
        }
    }

    // ---- statements --------------------------------------------------------------------

    fn k2_statement(&mut self) -> KipResult<Statement> {
        self.clauses = 0;
        self.operators = 0;
        let start = self.peek().span;
        let word = upper(self.peek_tok()).unwrap_or_default();
        let kind = match word.as_str() {
            "FIND" => StatementKind::Query(Box::new(self.k2_query()?)),
            w if w == "MUTATE" || MUTATION_CLAUSE_KEYWORDS.contains(&w) => {
                StatementKind::Mutation(Box::new(self.k2_mutation(true)?))
            }
            "DESCRIBE" | "LIST" | "SEARCH" | "VERIFY" | "VALIDATE" | "PREVIEW" | "HISTORY"
            | "CHANGES" | "SNAPSHOT" | "EXPORT" => StatementKind::Meta(Box::new(self.k2_meta()?)),
            _ => {
                let hint = match word.as_str() {
                    "SELECT" | "MATCH" | "INSERT" => format!(
                        "KIP has no {word}: read with FIND(...) WHERE {{ ... }}, write with CREATE / UPSERT / ASSERT (grouped in MUTATE {{ ... }})"
                    ),
                    "DELETE" => "KIP 2.0 has no DELETE: end a claim with RETRACT ASSERTION, hide an element with ARCHIVE or TOMBSTONE, erase it with PURGE ... CONFIRM \"PURGE\"".to_string(),
                    _ => STATEMENTS_HINT.to_string(),
                };
                return Err(self.k2_unexpected("a KIP 2.0 statement", Some(&hint)));
            }
        };
        Ok(Statement {
            kind,
            span: start.to(self.prev_span()),
        })
    }

    // ---- values ------------------------------------------------------------------------

    /// A JSON scalar literal at the cursor, consumed.
    fn k2_literal(&mut self) -> Option<Json> {
        let lit = match self.peek_tok() {
            Tok::Str(s) => Json::String(s.clone()),
            Tok::Num(n) => Json::Number(n.clone()),
            Tok::Ident(w) if w == "true" => Json::Bool(true),
            Tok::Ident(w) if w == "false" => Json::Bool(false),
            Tok::Ident(w) if w == "null" => Json::Null,
            _ => return None,
        };
        self.bump();
        Some(lit)
    }

    fn k2_param(&mut self) -> KipResult<Option<String>> {
        if self.at_param() {
            Ok(Some(self.param()?.name))
        } else {
            Ok(None)
        }
    }

    /// `scalar_value` / `meta_value` / `scalar_or_parameter`.
    fn k2_scalar(&mut self, what: &str) -> KipResult<Scalar> {
        match self.k2_opt_scalar()? {
            Some(s) => Ok(s),
            None => Err(self.k2_unexpected(
                &format!("{what} (a :parameter or a JSON literal)"),
                Some("write a quoted string, a number, true, false, null or a :parameter"),
            )),
        }
    }

    fn k2_opt_scalar(&mut self) -> KipResult<Option<Scalar>> {
        if let Some(p) = self.k2_param()? {
            return Ok(Some(Scalar::Param(p)));
        }
        Ok(self.k2_literal().map(Scalar::Literal))
    }

    /// `schema_symbol`.
    fn k2_symbol(&mut self, what: &str) -> KipResult<Symbol> {
        if let Some(p) = self.k2_param()? {
            return Ok(Symbol::Param(p));
        }
        if let Tok::Str(s) = self.peek_tok() {
            let s = s.clone();
            self.bump();
            return Ok(Symbol::Name(s));
        }
        let hint = match self.peek_tok() {
            Tok::Ident(w) => format!("Schema symbols are quoted strings: write \"{w}\""),
            _ => "Schema symbols are quoted strings (\"Person\") or :parameters".into(),
        };
        Err(self.k2_unexpected(
            &format!("{what} (a quoted Schema symbol or a :parameter)"),
            Some(&hint),
        ))
    }

    /// `target_ref`.
    fn k2_target(&mut self) -> KipResult<TargetRef> {
        if let Some(p) = self.k2_param()? {
            return Ok(TargetRef::Param(p));
        }
        match self.peek_tok().clone() {
            Tok::Var(v) => {
                self.bump();
                Ok(TargetRef::Var(v))
            }
            Tok::Str(s) => {
                self.bump();
                Ok(TargetRef::Id(s))
            }
            _ => Err(self.k2_unexpected(
                "a target (?variable, :parameter or quoted id)",
                Some("name the target as a ?variable bound by WHERE, a :parameter or a quoted element id"),
            )),
        }
    }

    fn k2_handle(&mut self, stmt: &str) -> KipResult<String> {
        match self.peek_tok().clone() {
            Tok::Var(v) => {
                self.bump();
                Ok(v)
            }
            _ => Err(self.k2_unexpected(
                "a local handle (?name)",
                Some(&format!(
                    "{stmt} needs a local handle, e.g. {stmt} ?h {{ ... }}"
                )),
            )),
        }
    }

    fn k2_opt_handle(&mut self) -> Option<String> {
        match self.peek_tok().clone() {
            Tok::Var(v) => {
                self.bump();
                Some(v)
            }
            _ => None,
        }
    }

    fn k2_field_name(&mut self) -> KipResult<String> {
        match self.peek_tok().clone() {
            Tok::Ident(w) | Tok::Str(w) => {
                self.bump();
                Ok(w)
            }
            _ => Err(self.k2_unexpected(
                "a field name",
                Some("write members as name: value; quote a name that is not an identifier"),
            )),
        }
    }

    /// `data_value` / `mutation_value` (the same alternatives).
    fn k2_value(&mut self) -> KipResult<Value> {
        if let Some(p) = self.k2_param()? {
            return Ok(Value::Param(p));
        }
        if let Some(l) = self.k2_literal() {
            return Ok(Value::Literal(l));
        }
        match self.peek_tok() {
            Tok::Var(_) => Ok(Value::Field(self.k2_field_access()?)),
            Tok::LBracket => {
                self.enter()?;
                self.bump();
                let mut items = Vec::new();
                if !self.eat(&Tok::RBracket) {
                    loop {
                        items.push(self.k2_value()?);
                        if self.eat(&Tok::Comma) {
                            continue;
                        }
                        self.k2_tok(&Tok::RBracket, "',' or ']'", "separate array items with ',' and close the array with ']'")?;
                        break;
                    }
                }
                self.leave();
                Ok(Value::Array(items))
            }
            Tok::LBrace => Ok(Value::Object(self.k2_object()?)),
            Tok::Ident(_) if *self.peek_nth(1) == Tok::LParen => Ok(Value::Call(self.k2_call()?)),
            Tok::Ident(w) => {
                let h = format!("string values must be quoted: write \"{w}\" (or use a :parameter)");
                Err(self.k2_unexpected("a value", Some(&h)))
            }
            _ => Err(self.k2_unexpected(
                "a value",
                Some("a value is a JSON literal, an array, an object, a :parameter, a ?variable (with .field steps) or a function call"),
            )),
        }
    }

    /// `object_literal`.
    fn k2_object(&mut self) -> KipResult<Vec<(String, Value)>> {
        self.k2_tok(&Tok::LBrace, "'{'", "an object starts with '{'")?;
        self.enter()?;
        let mut out = Vec::new();
        if !self.eat(&Tok::RBrace) {
            loop {
                let name = self.k2_field_name()?;
                self.k2_tok(&Tok::Colon, "':'", "write object members as name: value")?;
                out.push((name, self.k2_value()?));
                if self.eat(&Tok::Comma) {
                    continue;
                }
                self.k2_tok(
                    &Tok::RBrace,
                    "',' or '}'",
                    "separate members with ',' and close the object with '}'",
                )?;
                break;
            }
        }
        self.leave();
        Ok(out)
    }

    fn k2_field_access(&mut self) -> KipResult<FieldAccess> {
        let var = match self.bump().tok {
            Tok::Var(v) => v,
            _ => return Err(self.k2_unexpected("a ?variable", None)),
        };
        let mut steps = Vec::new();
        loop {
            if self.eat(&Tok::Dot) {
                match self.peek_tok().clone() {
                    Tok::Ident(w) => {
                        self.bump();
                        steps.push(w);
                    }
                    _ => {
                        return Err(self.k2_unexpected(
                            "a field name after '.'",
                            Some("write ?var.field, or ?var[\"field name\"] for a name that is not an identifier"),
                        ))
                    }
                }
            } else if *self.peek_tok() == Tok::LBracket && matches!(self.peek_nth(1), Tok::Str(_)) {
                self.bump();
                if let Tok::Str(s) = self.bump().tok {
                    steps.push(s);
                }
                self.k2_tok(&Tok::RBracket, "']'", "close the field step with ']'")?;
            } else {
                return Ok(FieldAccess { var, steps });
            }
        }
    }

    fn k2_call(&mut self) -> KipResult<Call> {
        let at = self.peek().span;
        let name = match self.bump().tok {
            Tok::Ident(w) => w,
            _ => return Err(self.k2_unexpected("a function name", None)),
        };
        self.count_operator(at)?;
        self.k2_tok(&Tok::LParen, "'('", "a function call is name(arguments)")?;
        self.enter()?;
        let mut args = Vec::new();
        if !self.eat(&Tok::RParen) {
            loop {
                args.push(self.k2_expr()?);
                if self.eat(&Tok::Comma) {
                    continue;
                }
                self.k2_tok(
                    &Tok::RParen,
                    "',' or ')'",
                    "separate arguments with ',' and close the call with ')'",
                )?;
                break;
            }
        }
        self.leave();
        Ok(Call { name, args })
    }

    // ---- expressions ---------------------------------------------------------------

    fn k2_expr(&mut self) -> KipResult<Expr> {
        self.enter()?;
        let mut left = self.k2_and()?;
        while *self.peek_tok() == Tok::OrOr {
            let at = self.bump().span;
            self.count_operator(at)?;
            let right = self.k2_and()?;
            left = Expr::Binary(BinOp::Or, Box::new(left), Box::new(right));
        }
        self.leave();
        Ok(left)
    }

    fn k2_and(&mut self) -> KipResult<Expr> {
        let mut left = self.k2_equality()?;
        while *self.peek_tok() == Tok::AndAnd {
            let at = self.bump().span;
            self.count_operator(at)?;
            let right = self.k2_equality()?;
            left = Expr::Binary(BinOp::And, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn k2_equality(&mut self) -> KipResult<Expr> {
        let mut left = self.k2_relational()?;
        loop {
            let op = match self.peek_tok() {
                Tok::EqEq => BinOp::Eq,
                Tok::NotEq => BinOp::Ne,
                _ => return Ok(left),
            };
            let at = self.bump().span;
            self.count_operator(at)?;
            let right = self.k2_relational()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn k2_relational(&mut self) -> KipResult<Expr> {
        let left = self.k2_unary()?;
        let op = match self.peek_tok() {
            Tok::Lt => BinOp::Lt,
            Tok::Gt => BinOp::Gt,
            Tok::Le => BinOp::Le,
            Tok::Ge => BinOp::Ge,
            _ => return Ok(left),
        };
        let at = self.bump().span;
        self.count_operator(at)?;
        let right = self.k2_unary()?;
        if matches!(self.peek_tok(), Tok::Lt | Tok::Gt | Tok::Le | Tok::Ge) {
            return Err(self.k2_unexpected(
                "the end of the comparison",
                Some("comparisons do not chain: write (a < b) && (b < c)"),
            ));
        }
        Ok(Expr::Binary(op, Box::new(left), Box::new(right)))
    }

    fn k2_unary(&mut self) -> KipResult<Expr> {
        let op = match self.peek_tok() {
            Tok::Bang => Some(true),
            Tok::Minus => Some(false),
            _ => None,
        };
        if let Some(not) = op {
            let at = self.bump().span;
            self.count_operator(at)?;
            let e = Box::new(self.k2_primary()?);
            return Ok(if not { Expr::Not(e) } else { Expr::Neg(e) });
        }
        self.k2_primary()
    }

    fn k2_primary(&mut self) -> KipResult<Expr> {
        if *self.peek_tok() == Tok::LParen {
            self.bump();
            let e = self.k2_expr()?;
            self.k2_tok(
                &Tok::RParen,
                "')'",
                "a '(' is not closed: check that every '(' has a matching ')'",
            )?;
            return Ok(Expr::Group(Box::new(e)));
        }
        if matches!(self.peek_tok(), Tok::Bang | Tok::Minus) {
            return Err(self.k2_unexpected(
                "a value",
                Some("one prefix operator at a time: write !(!x) or -(-x) with parentheses"),
            ));
        }
        Ok(Expr::Value(self.k2_value()?))
    }

    // ---- patterns ------------------------------------------------------------------

    /// `pattern_value` (`allow_array`) or `term`; `raw_paths` admits raw predicate paths in
    /// nested tuples (KQL only).
    fn k2_pattern(&mut self, allow_array: bool, raw_paths: bool) -> KipResult<Pattern> {
        if let Some(p) = self.k2_param()? {
            return Ok(Pattern::Param(p));
        }
        if let Some(l) = self.k2_literal() {
            return Ok(Pattern::Literal(l));
        }
        match self.peek_tok().clone() {
            Tok::Var(v) => {
                self.bump();
                Ok(Pattern::Var(v))
            }
            Tok::LBrace => Ok(Pattern::Object(self.k2_object_pattern(raw_paths)?)),
            Tok::LParen => Ok(Pattern::Tuple(Box::new(self.k2_tuple(raw_paths)?))),
            Tok::LBracket if allow_array => {
                self.enter()?;
                self.bump();
                let mut items = Vec::new();
                if !self.eat(&Tok::RBracket) {
                    loop {
                        items.push(self.k2_pattern(true, raw_paths)?);
                        if self.eat(&Tok::Comma) {
                            continue;
                        }
                        self.k2_tok(&Tok::RBracket, "',' or ']'", "separate array items with ',' and close the array with ']'")?;
                        break;
                    }
                }
                self.leave();
                Ok(Pattern::Array(items))
            }
            Tok::Ident(w) => {
                let h = format!("string values must be quoted: write \"{w}\" (or use a :parameter or ?variable)");
                Err(self.k2_unexpected("a pattern value", Some(&h)))
            }
            _ => Err(self.k2_unexpected(
                if allow_array { "a pattern value" } else { "a term" },
                Some("a pattern value is a ?variable, a :parameter, a JSON literal, an object pattern {...} or a Proposition tuple (...)"),
            )),
        }
    }

    /// `object_pattern`.
    fn k2_object_pattern(&mut self, raw_paths: bool) -> KipResult<ObjectPattern> {
        self.k2_tok(
            &Tok::LBrace,
            "'{'",
            "a match object starts with '{', e.g. {type: \"Person\"}",
        )?;
        self.enter()?;
        let mut out = Vec::new();
        if !self.eat(&Tok::RBrace) {
            loop {
                let name = self.k2_field_name()?;
                self.k2_tok(&Tok::Colon, "':'", "write match members as name: value")?;
                out.push((name, self.k2_pattern(true, raw_paths)?));
                if self.eat(&Tok::Comma) {
                    continue;
                }
                self.k2_tok(
                    &Tok::RBrace,
                    "',' or '}'",
                    "separate members with ',' and close the match object with '}'",
                )?;
                break;
            }
        }
        self.leave();
        Ok(out)
    }

    fn k2_predicate_atom(&mut self) -> KipResult<PredicateAtom> {
        if let Some(p) = self.k2_param()? {
            return Ok(PredicateAtom::Param(p));
        }
        match self.peek_tok().clone() {
            Tok::Str(s) => {
                self.bump();
                Ok(PredicateAtom::Name(s))
            }
            Tok::Var(v) => {
                self.bump();
                Ok(PredicateAtom::Var(v))
            }
            Tok::Ident(w) => {
                let h = format!("predicates are quoted strings: write \"{w}\"");
                Err(self.k2_unexpected("a predicate", Some(&h)))
            }
            _ => Err(self.k2_unexpected(
                "a predicate",
                Some("a predicate is a quoted string (\"prefers\"), a :parameter or a ?variable"),
            )),
        }
    }

    fn k2_at_path_syntax(&self) -> bool {
        matches!(self.peek_tok(), Tok::Pipe | Tok::LBrace)
    }

    /// `proposition_tuple`.
    fn k2_tuple(&mut self, raw_paths: bool) -> KipResult<PropTuple> {
        self.k2_tok(
            &Tok::LParen,
            "'('",
            "a Proposition tuple is (subject, \"predicate\", object) or (id: value)",
        )?;
        self.enter()?;
        if self.k2_at("id") && *self.peek_nth(1) == Tok::Colon {
            self.bump();
            self.bump();
            let v = self.k2_scalar("a Proposition id")?;
            self.k2_tok(&Tok::RParen, "')'", "the id form is (id: value)")?;
            self.leave();
            return Ok(PropTuple::Id(v));
        }
        let subject = self.k2_pattern(false, raw_paths)?;
        self.k2_tok(
            &Tok::Comma,
            "','",
            "a Proposition tuple is (subject, \"predicate\", object)",
        )?;
        let mut path = Vec::new();
        loop {
            let atom = self.k2_predicate_atom()?;
            let quantifier = if raw_paths && *self.peek_tok() == Tok::LBrace {
                Some(self.k2_quantifier()?)
            } else {
                None
            };
            path.push(PathAtom { atom, quantifier });
            if raw_paths && self.eat(&Tok::Pipe) {
                continue;
            }
            break;
        }
        if !raw_paths && self.k2_at_path_syntax() {
            return Err(self.k2_unexpected(
                "','",
                Some("raw predicate paths ('|' alternatives, {min,max} quantifiers) are KQL read syntax only: here name one exact predicate"),
            ));
        }
        self.k2_tok(
            &Tok::Comma,
            "','",
            "a Proposition tuple is (subject, \"predicate\", object)",
        )?;
        let object = self.k2_pattern(false, raw_paths)?;
        self.k2_tok(
            &Tok::RParen,
            "')'",
            "a Proposition tuple has exactly three members: (subject, \"predicate\", object)",
        )?;
        self.leave();
        Ok(PropTuple::Triple(subject, path, object))
    }

    fn k2_uint(&mut self) -> KipResult<u64> {
        if let Tok::Num(n) = self.peek_tok() {
            if let Some(v) = n.as_u64() {
                self.bump();
                return Ok(v);
            }
        }
        Err(self.k2_unexpected(
            "an unsigned integer",
            Some("a path quantifier is {n}, {min,} or {min,max} with unsigned integers, e.g. \"knows\"{1,3}"),
        ))
    }

    fn k2_quantifier(&mut self) -> KipResult<Quantifier> {
        self.bump();
        let min = self.k2_uint()?;
        let max = if self.eat(&Tok::Comma) {
            if *self.peek_tok() == Tok::RBrace {
                None
            } else {
                Some(self.k2_uint()?)
            }
        } else {
            Some(min)
        };
        self.k2_tok(
            &Tok::RBrace,
            "'}'",
            "close the path quantifier with '}', e.g. {1,3}",
        )?;
        Ok(Quantifier { min, max })
    }

    /// `where_block`; `kql` admits BELIEF patterns and raw predicate paths.
    fn k2_where_block(&mut self, kql: bool) -> KipResult<Vec<WhereClause>> {
        self.k2_tok(&Tok::LBrace, "'{'", "a WHERE block is { pattern ... }")?;
        self.enter()?;
        let mut out = Vec::new();
        while !self.eat(&Tok::RBrace) {
            if self.at_eof() {
                return Err(self.k2_unexpected("a WHERE clause or '}'", None));
            }
            self.count_clause()?;
            out.push(self.k2_where_clause(kql)?);
        }
        self.leave();
        Ok(out)
    }

    fn k2_record_kind(&self, n: usize) -> Option<RecordKind> {
        if self.k2_is(n, "ASSERTION") {
            Some(RecordKind::Assertion)
        } else if self.k2_is(n, "EVIDENCE") {
            Some(RecordKind::Evidence)
        } else if self.k2_is(n, "ACTIVITY") {
            Some(RecordKind::Activity)
        } else {
            None
        }
    }

    fn k2_where_clause(&mut self, kql: bool) -> KipResult<WhereClause> {
        if let Tok::Var(v) = self.peek_tok().clone() {
            self.bump();
            return match self.peek_tok().clone() {
                Tok::LBrace => Ok(WhereClause::Concept {
                    var: v,
                    pattern: self.k2_object_pattern(kql)?,
                }),
                Tok::LParen => Ok(WhereClause::Proposition {
                    var: Some(v),
                    tuple: self.k2_tuple(kql)?,
                }),
                _ if self.k2_eat("CONCEPT") => Ok(WhereClause::Concept {
                    var: v,
                    pattern: self.k2_object_pattern(kql)?,
                }),
                _ if self.k2_eat("PROPOSITION") => Ok(WhereClause::Proposition {
                    var: Some(v),
                    tuple: self.k2_tuple(kql)?,
                }),
                _ if self.k2_at("STRUCTURAL") => self.k2_structural(Some(v), kql),
                _ if self.k2_at("BELIEF") => {
                    if !kql {
                        return Err(self.k2_unexpected(
                            "a raw pattern",
                            Some("BELIEF and BELIEF SLOT are KQL read patterns: a mutation's or an export's WHERE matches stored elements only (a projection is never a target)"),
                        ));
                    }
                    self.bump();
                    self.k2_belief(v)
                }
                _ => match self.k2_record_kind(0) {
                    Some(kind) => {
                        self.bump();
                        Ok(WhereClause::Record {
                            var: v,
                            kind,
                            pattern: self.k2_object_pattern(kql)?,
                        })
                    }
                    None => {
                        Err(self.k2_unexpected(&format!("a pattern after ?{v}"), Some(WHERE_HINT)))
                    }
                },
            };
        }
        if *self.peek_tok() == Tok::LParen {
            return Ok(WhereClause::Proposition {
                var: None,
                tuple: self.k2_tuple(kql)?,
            });
        }
        if self.k2_eat("PROPOSITION") {
            return Ok(WhereClause::Proposition {
                var: None,
                tuple: self.k2_tuple(kql)?,
            });
        }
        if self.k2_at("STRUCTURAL") {
            return self.k2_structural(None, kql);
        }
        if self.k2_eat("FILTER") {
            self.k2_tok(
                &Tok::LParen,
                "'('",
                "FILTER takes a parenthesized expression: FILTER(?x.confidence >= 0.5)",
            )?;
            let e = self.k2_expr()?;
            self.k2_tok(&Tok::RParen, "')'", "close FILTER's expression with ')'")?;
            return Ok(WhereClause::Filter(e));
        }
        if self.k2_eat("NOT") {
            return Ok(WhereClause::Not(self.k2_where_block(kql)?));
        }
        if self.k2_eat("OPTIONAL") {
            return Ok(WhereClause::Optional(self.k2_where_block(kql)?));
        }
        if self.k2_eat("UNION") {
            return Ok(WhereClause::Union(self.k2_where_block(kql)?));
        }
        Err(self.k2_unexpected("a WHERE clause", Some(WHERE_HINT)))
    }

    fn k2_structural(&mut self, var: Option<String>, kql: bool) -> KipResult<WhereClause> {
        self.bump();
        self.k2_tok(
            &Tok::LParen,
            "'('",
            "a structural pattern is STRUCTURAL (?from, \"field\", ?to)",
        )?;
        self.enter()?;
        let from = self.k2_pattern(false, kql)?;
        self.k2_tok(
            &Tok::Comma,
            "','",
            "a structural pattern is STRUCTURAL (?from, \"field\", ?to)",
        )?;
        let field = self.k2_symbol("a structural field")?;
        self.k2_tok(
            &Tok::Comma,
            "','",
            "a structural pattern is STRUCTURAL (?from, \"field\", ?to)",
        )?;
        let to = self.k2_pattern(false, kql)?;
        self.k2_tok(
            &Tok::RParen,
            "')'",
            "a structural pattern has three members",
        )?;
        self.leave();
        Ok(WhereClause::Structural {
            var,
            from,
            field,
            to,
        })
    }

    fn k2_exact_predicate(&mut self) -> KipResult<PredicateAtom> {
        let p = self.k2_predicate_atom()?;
        if self.k2_at_path_syntax() {
            return Err(self.k2_unexpected(
                "','",
                Some("BELIEF takes one exact predicate: belief is never projected along a path (Specification §45)"),
            ));
        }
        Ok(p)
    }

    fn k2_belief(&mut self, var: String) -> KipResult<WhereClause> {
        if self.k2_eat("SLOT") {
            self.k2_tok(
                &Tok::LParen,
                "'('",
                "BELIEF SLOT addresses a slot: ?b BELIEF SLOT (?subject, \"predicate\")",
            )?;
            self.enter()?;
            let subject = self.k2_pattern(false, true)?;
            self.k2_tok(
                &Tok::Comma,
                "','",
                "BELIEF SLOT addresses a slot: ?b BELIEF SLOT (?subject, \"predicate\")",
            )?;
            let predicate = self.k2_exact_predicate()?;
            self.k2_tok(
                &Tok::RParen,
                "')'",
                "BELIEF SLOT takes (subject, predicate), no object",
            )?;
            self.leave();
            return Ok(WhereClause::BeliefSlot {
                var,
                subject,
                predicate,
            });
        }
        self.k2_tok(
            &Tok::LParen,
            "'('",
            "BELIEF takes (?p), (id: value) or (subject, \"predicate\", object)",
        )?;
        self.enter()?;
        let target = if self.k2_at("id") && *self.peek_nth(1) == Tok::Colon {
            self.bump();
            self.bump();
            BeliefTarget::Id(self.k2_scalar("a Proposition id")?)
        } else {
            let first = self.k2_pattern(false, true)?;
            match (first, self.peek_tok()) {
                (Pattern::Var(v), Tok::RParen) => BeliefTarget::Var(v),
                (first, _) => {
                    self.k2_tok(
                        &Tok::Comma,
                        "','",
                        "BELIEF takes (?p), (id: value) or (subject, \"predicate\", object)",
                    )?;
                    let p = self.k2_exact_predicate()?;
                    self.k2_tok(
                        &Tok::Comma,
                        "','",
                        "BELIEF takes (subject, \"predicate\", object)",
                    )?;
                    let o = self.k2_pattern(false, true)?;
                    BeliefTarget::Triple(first, p, o)
                }
            }
        };
        self.k2_tok(&Tok::RParen, "')'", "close BELIEF's operand with ')'")?;
        self.leave();
        Ok(WhereClause::Belief { var, target })
    }

    fn k2_as_of(&mut self) -> KipResult<Option<AsOf>> {
        if !self.k2_eat2("AS", "OF") {
            return Ok(None);
        }
        let hint = "a coordinate is AS OF SEQ n, AS OF TX \"id\" or AS OF TIME \"timestamp\"";
        Ok(Some(if self.k2_eat("SEQ") {
            AsOf::Seq(self.k2_scalar("a sequence number")?)
        } else if self.k2_eat("TX") {
            AsOf::Tx(self.k2_scalar("a transaction id")?)
        } else if self.k2_eat("TIME") {
            AsOf::Time(self.k2_scalar("a timestamp")?)
        } else {
            return Err(self.k2_unexpected("SEQ, TX or TIME", Some(hint)));
        }))
    }

    // ---- KQL -----------------------------------------------------------------------

    fn k2_projection(&mut self) -> KipResult<Projection> {
        if let Some(w) = upper(self.peek_tok()) {
            if ["COUNT", "SUM", "AVG", "MIN", "MAX"].contains(&w.as_str())
                && *self.peek_nth(1) == Tok::LParen
            {
                self.bump();
                self.bump();
                let distinct = self.k2_eat("DISTINCT");
                let arg = self.k2_expr()?;
                self.k2_tok(
                    &Tok::RParen,
                    "')'",
                    "an aggregate takes one expression: COUNT(?x) or COUNT(DISTINCT ?x)",
                )?;
                return Ok(Projection::Aggregate {
                    func: w,
                    distinct,
                    arg,
                });
            }
        }
        Ok(Projection::Expr(self.k2_expr()?))
    }

    fn k2_query(&mut self) -> KipResult<Query> {
        self.bump();
        self.k2_tok(
            &Tok::LParen,
            "'('",
            "a query starts FIND(?x, ...) WHERE { ... }",
        )?;
        let mut projection = vec![self.k2_projection()?];
        while self.eat(&Tok::Comma) {
            projection.push(self.k2_projection()?);
        }
        self.k2_tok(
            &Tok::RParen,
            "',' or ')'",
            "separate projections with ',' and close FIND's list with ')'",
        )?;
        self.k2_kw("WHERE", "FIND(...) is followed by WHERE { pattern ... }")?;
        let where_clauses = self.k2_where_block(true)?;
        let as_of = self.k2_as_of()?;
        let for_time = if self.k2_eat2("FOR", "TIME") {
            Some(self.k2_scalar("a valid time")?)
        } else {
            None
        };
        let epistemic = if self.k2_eat2("WITH", "EPISTEMIC") {
            Some(self.k2_object()?)
        } else {
            None
        };
        let mut order_by = Vec::new();
        if self.k2_eat("ORDER") {
            self.k2_kw("BY", "write ORDER BY ?x.field [ASC|DESC]")?;
            loop {
                let key = self.k2_projection()?;
                let descending = if self.k2_eat("DESC") {
                    true
                } else {
                    self.k2_eat("ASC");
                    false
                };
                order_by.push(OrderItem { key, descending });
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        let limit = if self.k2_eat("LIMIT") {
            Some(self.k2_scalar("a limit")?)
        } else {
            None
        };
        let cursor = if self.k2_eat("CURSOR") {
            Some(self.k2_scalar("a cursor")?)
        } else {
            None
        };
        Ok(Query {
            projection,
            where_clauses,
            as_of,
            for_time,
            epistemic,
            order_by,
            limit,
            cursor,
        })
    }

    // ---- KML -----------------------------------------------------------------------

    /// The name of the clause at the cursor (`"SET FIELDS"`, `"TYPE"`, ...), if any.
    fn k2_clause_name(&self) -> Option<&'static str> {
        const ONE: [&str; 3] = ["TYPE", "NAME", "MATCH"];
        const TWO: [(&str, &str); 9] = [
            ("CLIENT", "KEY"),
            ("EXPECT", "VERSION"),
            ("SET", "FIELDS"),
            ("SET", "ATTRIBUTES"),
            ("SET", "FACET"),
            ("SET", "STRUCTURAL"),
            ("UNSET", "ATTRIBUTES"),
            ("UNSET", "FACET"),
            ("UNSET", "STRUCTURAL"),
        ];
        const TWO_NAMES: [&str; 9] = [
            "CLIENT KEY",
            "EXPECT VERSION",
            "SET FIELDS",
            "SET ATTRIBUTES",
            "SET FACET",
            "SET STRUCTURAL",
            "UNSET ATTRIBUTES",
            "UNSET FACET",
            "UNSET STRUCTURAL",
        ];
        if let Some(i) = TWO
            .iter()
            .position(|(a, b)| self.k2_is(0, a) && self.k2_is(1, b))
        {
            return Some(TWO_NAMES[i]);
        }
        ONE.iter().find(|k| self.k2_at(k)).copied()
    }

    fn k2_clause(&mut self, allowed: &[&str], stmt: &str) -> KipResult<Clause> {
        let name = match self.k2_clause_name() {
            Some(n) if allowed.contains(&n) => n,
            Some(n) => {
                let h = format!(
                    "{n} is not allowed in {stmt}; allowed here: {}",
                    allowed.join(", ")
                );
                return Err(self.k2_unexpected(&format!("a clause of {stmt}"), Some(&h)));
            }
            None => {
                let h = if self.k2_is(0, "SET") && self.k2_is(1, "PROPOSITIONS") {
                    "SET PROPOSITIONS is KIP 1.x: in 2.0 a claim is ENSURE PROPOSITION (?s, \"pred\", ?o) or ASSERT (?s, \"pred\", ?o) { by: ..., confidence: ... }, in the same MUTATE { ... }".to_string()
                } else {
                    format!("clauses of {stmt}: {}", allowed.join(", "))
                };
                return Err(self.k2_unexpected(&format!("a clause of {stmt}"), Some(&h)));
            }
        };
        self.bump();
        if name.contains(' ') {
            self.bump();
        }
        Ok(match name {
            "TYPE" => Clause::Type(self.k2_symbol("a type")?),
            "NAME" => Clause::Name(self.k2_scalar("a name")?),
            "MATCH" => Clause::Match(self.k2_object_pattern(false)?),
            "CLIENT KEY" => Clause::ClientKey(self.k2_scalar("a client key")?),
            "EXPECT VERSION" => Clause::ExpectVersion(self.k2_scalar("a version")?),
            "SET FIELDS" => Clause::SetFields(self.k2_object()?),
            "SET ATTRIBUTES" => Clause::SetAttributes(self.k2_object()?),
            "SET FACET" => {
                let s = self.k2_symbol("a facet")?;
                Clause::SetFacet(s, self.k2_object()?)
            }
            "UNSET ATTRIBUTES" => Clause::UnsetAttributes(self.k2_unset_fields()?),
            "UNSET FACET" => {
                let s = self.k2_symbol("a facet")?;
                Clause::UnsetFacet(s, self.k2_unset_fields()?)
            }
            "SET STRUCTURAL" => Clause::SetStructural(self.k2_structural_entries(true)?),
            _ => Clause::UnsetStructural(self.k2_structural_entries(false)?),
        })
    }

    fn k2_unset_fields(&mut self) -> KipResult<Vec<String>> {
        self.k2_tok(
            &Tok::LBrace,
            "'{'",
            "UNSET takes a set of names: UNSET ATTRIBUTES { a, \"b\" }",
        )?;
        let mut out = Vec::new();
        if !self.eat(&Tok::RBrace) {
            loop {
                out.push(self.k2_field_name()?);
                if self.eat(&Tok::Comma) {
                    continue;
                }
                self.k2_tok(
                    &Tok::RBrace,
                    "',' or '}'",
                    "UNSET takes names only, separated by ',': UNSET ATTRIBUTES { a, \"b\" }",
                )?;
                break;
            }
        }
        Ok(out)
    }

    fn k2_structural_entries(&mut self, set: bool) -> KipResult<Vec<StructuralEntry>> {
        let shape = if set {
            "SET STRUCTURAL { (\"field\", ?target) {options} ... }"
        } else {
            "UNSET STRUCTURAL { (\"field\", ?target) ... }"
        };
        self.k2_tok(&Tok::LBrace, "'{'", shape)?;
        self.enter()?;
        let mut out = Vec::new();
        while !self.eat(&Tok::RBrace) {
            self.k2_tok(&Tok::LParen, "'(' or '}'", shape)?;
            let field = self.k2_symbol("a structural field")?;
            self.k2_tok(&Tok::Comma, "','", shape)?;
            let target = self.k2_value()?;
            self.k2_tok(&Tok::RParen, "')'", shape)?;
            let options = if set && *self.peek_tok() == Tok::LBrace {
                Some(self.k2_object()?)
            } else {
                None
            };
            out.push(StructuralEntry {
                field,
                target,
                options,
            });
        }
        self.leave();
        Ok(out)
    }

    fn k2_block(&mut self, allowed: &[&str], stmt: &str) -> KipResult<Vec<Clause>> {
        let h = format!(
            "{stmt} takes a block of clauses: {{ {} ... }}",
            allowed.join(" | ")
        );
        self.k2_tok(&Tok::LBrace, "'{'", &h)?;
        let mut out = Vec::new();
        while !self.eat(&Tok::RBrace) {
            out.push(self.k2_clause(allowed, stmt)?);
        }
        Ok(out)
    }

    fn k2_opt_where(&mut self) -> KipResult<Option<Vec<WhereClause>>> {
        if self.k2_eat("WHERE") {
            Ok(Some(self.k2_where_block(false)?))
        } else {
            Ok(None)
        }
    }

    fn k2_selection(&mut self) -> KipResult<Selection> {
        let where_clauses = self.k2_opt_where()?;
        let limit = if self.k2_eat("LIMIT") {
            Some(self.k2_scalar("a limit")?)
        } else {
            None
        };
        Ok(Selection {
            where_clauses,
            limit,
        })
    }

    fn k2_expect(&mut self, what: &str) -> KipResult<Option<Scalar>> {
        if self.k2_eat2("EXPECT", what) {
            Ok(Some(self.k2_scalar(&format!(
                "an expected {}",
                what.to_ascii_lowercase()
            ))?))
        } else {
            Ok(None)
        }
    }

    fn k2_is_update_action(&self) -> bool {
        (self.k2_is(0, "SET") || self.k2_is(0, "UNSET"))
            && ["FIELDS", "ATTRIBUTES", "FACET", "STRUCTURAL"]
                .iter()
                .any(|k| self.k2_is(1, k))
    }

    fn k2_mutation(&mut self, top: bool) -> KipResult<Mutation> {
        let word = upper(self.peek_tok()).unwrap_or_default();
        let kw_span = self.peek().span;
        self.bump();
        const CONCEPT_CREATE: [&str; 7] = [
            "TYPE",
            "CLIENT KEY",
            "NAME",
            "SET FIELDS",
            "SET ATTRIBUTES",
            "SET FACET",
            "SET STRUCTURAL",
        ];
        const UPSERT: [&str; 9] = [
            "MATCH",
            "EXPECT VERSION",
            "SET FIELDS",
            "SET ATTRIBUTES",
            "SET FACET",
            "UNSET ATTRIBUTES",
            "UNSET FACET",
            "SET STRUCTURAL",
            "UNSET STRUCTURAL",
        ];
        const RECORD: [&str; 4] = ["CLIENT KEY", "SET FIELDS", "SET FACET", "SET STRUCTURAL"];
        const UPDATE: [&str; 7] = [
            "SET FIELDS",
            "SET ATTRIBUTES",
            "SET FACET",
            "UNSET ATTRIBUTES",
            "UNSET FACET",
            "SET STRUCTURAL",
            "UNSET STRUCTURAL",
        ];
        Ok(match word.as_str() {
            "MUTATE" => {
                if !top {
                    return Err(self
                        .error_at(ErrorCode::InvalidSyntax, kw_span, "MUTATE cannot be nested")
                        .with_hint("put every clause directly in one MUTATE { ... } block"));
                }
                self.k2_tok(
                    &Tok::LBrace,
                    "'{'",
                    "MUTATE groups clauses: MUTATE { CREATE ... ASSERT ... }",
                )?;
                let mut clauses = Vec::new();
                while !self.eat(&Tok::RBrace) {
                    let word = upper(self.peek_tok()).unwrap_or_default();
                    if word == "MUTATE" || !MUTATION_CLAUSE_KEYWORDS.contains(&word.as_str()) {
                        let h = if word == "MUTATE" {
                            "MUTATE cannot be nested: put every clause directly in one MUTATE { ... } block"
                        } else {
                            "a MUTATE block holds KML clauses (CREATE, UPSERT, ENSURE, ASSERT, UPDATE, RETRACT, SUPERSEDE, CORRECT, TRANSITION, SET RETENTION, ARCHIVE, TOMBSTONE, PURGE, MERGE) and ends with '}'"
                        };
                        return Err(self.k2_unexpected("a mutation clause or '}'", Some(h)));
                    }
                    clauses.push(self.k2_mutation(false)?);
                }
                Mutation::Mutate(clauses)
            }
            "CREATE" => {
                if self.k2_eat("CONCEPT") {
                    let handle = self.k2_handle("CREATE CONCEPT")?;
                    Mutation::CreateConcept {
                        handle,
                        clauses: self.k2_block(&CONCEPT_CREATE, "CREATE CONCEPT")?,
                    }
                } else if let Some(kind) = self.k2_record_kind(0) {
                    self.bump();
                    let stmt = match kind {
                        RecordKind::Assertion => "CREATE ASSERTION",
                        RecordKind::Evidence => "CREATE EVIDENCE",
                        RecordKind::Activity => "CREATE ACTIVITY",
                    };
                    let handle = self.k2_handle(stmt)?;
                    Mutation::CreateRecord {
                        kind,
                        handle,
                        clauses: self.k2_block(&RECORD, stmt)?,
                    }
                } else {
                    return Err(self.k2_unexpected(
                        "CONCEPT, EVIDENCE, ASSERTION or ACTIVITY",
                        Some("CREATE makes a Concept or a record: CREATE CONCEPT ?h { TYPE \"Person\" NAME \"Alice\" }; a Proposition is ensured: ENSURE PROPOSITION (?s, \"pred\", ?o)"),
                    ));
                }
            }
            "UPSERT" => {
                self.k2_kw("CONCEPT", "UPSERT applies to Concepts: UPSERT CONCEPT ?h { MATCH {key: \"...\"} SET FIELDS {...} }")?;
                let handle = self.k2_handle("UPSERT CONCEPT")?;
                Mutation::UpsertConcept {
                    handle,
                    clauses: self.k2_block(&UPSERT, "UPSERT CONCEPT")?,
                }
            }
            "ENSURE" => {
                self.k2_kw(
                    "PROPOSITION",
                    "write ENSURE PROPOSITION [?h] (?s, \"pred\", ?o)",
                )?;
                let handle = self.k2_opt_handle();
                let tuple = self.k2_tuple(false)?;
                Mutation::EnsureProposition {
                    handle,
                    tuple,
                    expect_version: self.k2_expect("VERSION")?,
                }
            }
            "ASSERT" => {
                let handle = self.k2_opt_handle();
                let tuple = self.k2_tuple(false)?;
                if *self.peek_tok() != Tok::LBrace {
                    return Err(self.k2_unexpected(
                        "the Assertion's members { ... }",
                        Some("ASSERT (?s, \"pred\", ?o) is followed by its Assertion: { by: ..., mode: \"stated\", confidence: 0.9 }"),
                    ));
                }
                let members = self.k2_object()?;
                let superseding = if self.k2_eat("SUPERSEDING") {
                    Some(self.k2_target()?)
                } else {
                    None
                };
                Mutation::Assert {
                    handle,
                    tuple,
                    members,
                    superseding,
                }
            }
            "UPDATE" => {
                let target = self.k2_target()?;
                let expect_version = self.k2_expect("VERSION")?;
                let mut actions = Vec::new();
                while self.k2_is_update_action() {
                    actions.push(self.k2_clause(&UPDATE, "UPDATE")?);
                }
                if actions.is_empty() {
                    return Err(self.k2_unexpected(
                        "an update action",
                        Some("UPDATE needs at least one SET FIELDS / SET ATTRIBUTES / SET FACET / SET STRUCTURAL or UNSET clause before WHERE"),
                    ));
                }
                Mutation::Update {
                    target,
                    expect_version,
                    actions,
                    selection: self.k2_selection()?,
                }
            }
            "RETRACT" => {
                self.k2_kw("ASSERTION", "write RETRACT ASSERTION ?a WHERE { ... }")?;
                let target = self.k2_target()?;
                let selection = self.k2_selection()?;
                Mutation::Retract {
                    target,
                    selection,
                    expect_state: self.k2_expect("STATE")?,
                }
            }
            "SUPERSEDE" | "CORRECT" => {
                let (kind, kw) = if word == "SUPERSEDE" {
                    (RecordKind::Assertion, "ASSERTION")
                } else {
                    (RecordKind::Evidence, "EVIDENCE")
                };
                self.k2_kw(kw, &format!("write {word} {kw} ?old BY ?new"))?;
                let target = self.k2_target()?;
                self.k2_kw("BY", &format!("write {word} {kw} ?old BY ?new"))?;
                let by = self.k2_target()?;
                Mutation::Replace {
                    kind,
                    target,
                    by,
                    expect_state: self.k2_expect("STATE")?,
                }
            }
            "TRANSITION" => {
                self.k2_kw("ACTIVITY", "write TRANSITION ACTIVITY ?x TO \"completed\"")?;
                let target = self.k2_target()?;
                self.k2_kw("TO", "write TRANSITION ACTIVITY ?x TO \"completed\"")?;
                let to = self.k2_scalar("a state")?;
                let mut finalize = Vec::new();
                while self.k2_is(0, "SET")
                    && (self.k2_is(1, "FIELDS") || self.k2_is(1, "STRUCTURAL"))
                {
                    finalize.push(
                        self.k2_clause(&["SET FIELDS", "SET STRUCTURAL"], "TRANSITION ACTIVITY")?,
                    );
                }
                Mutation::Transition {
                    target,
                    to,
                    finalize,
                    expect_state: self.k2_expect("STATE")?,
                }
            }
            "SET" => {
                self.k2_kw("RETENTION", "a statement starting with SET is SET RETENTION target { ... }; SET FIELDS and the like are clauses of UPDATE, CREATE and UPSERT")?;
                let target = self.k2_target()?;
                let policy = self.k2_object()?;
                let selection = self.k2_selection()?;
                Mutation::SetRetention {
                    target,
                    policy,
                    selection,
                    expect_version: self.k2_expect("VERSION")?,
                }
            }
            "ARCHIVE" | "TOMBSTONE" => {
                let target = self.k2_target()?;
                let selection = self.k2_selection()?;
                Mutation::Lifecycle {
                    tombstone: word == "TOMBSTONE",
                    target,
                    selection,
                    expect_state: self.k2_expect("STATE")?,
                }
            }
            "PURGE" => {
                let target = self.k2_target()?;
                let selection = self.k2_selection()?;
                let reference_policy = if self.k2_eat2("REFERENCE", "POLICY") {
                    Some(self.k2_scalar("a reference policy")?)
                } else {
                    None
                };
                let hint =
                    "PURGE erases irreversibly and ends with the confirmation CONFIRM \"PURGE\"";
                self.k2_kw("CONFIRM", hint)?;
                match self.peek_tok() {
                    Tok::Str(s) if s == "PURGE" => {
                        self.bump();
                    }
                    _ => return Err(self.k2_unexpected("\"PURGE\"", Some(hint))),
                }
                Mutation::Purge {
                    target,
                    selection,
                    reference_policy,
                }
            }
            "MERGE" => {
                self.k2_kw("CONCEPT", "write MERGE CONCEPT ?source INTO ?target")?;
                let source = self.k2_target()?;
                self.k2_kw("INTO", "write MERGE CONCEPT ?source INTO ?target")?;
                let into = self.k2_target()?;
                let where_clauses = self.k2_opt_where()?;
                Mutation::MergeConcept {
                    source,
                    into,
                    where_clauses,
                    expect_version: self.k2_expect("VERSION")?,
                }
            }
            _ => {
                return Err(self
                    .error_at(
                        ErrorCode::InvalidSyntax,
                        kw_span,
                        "expected a KML statement",
                    )
                    .with_hint(STATEMENTS_HINT))
            }
        })
    }

    // ---- META ----------------------------------------------------------------------

    fn k2_paging(&mut self) -> KipResult<(Option<Scalar>, Option<Scalar>)> {
        let limit = if self.k2_eat("LIMIT") {
            Some(self.k2_scalar("a limit")?)
        } else {
            None
        };
        let cursor = if self.k2_eat("CURSOR") {
            Some(self.k2_scalar("a cursor")?)
        } else {
            None
        };
        Ok((limit, cursor))
    }

    fn k2_meta(&mut self) -> KipResult<Meta> {
        let word = upper(self.peek_tok()).unwrap_or_default();
        self.bump();
        Ok(match word.as_str() {
            "DESCRIBE" => Meta::Describe(self.k2_describe()?),
            "LIST" => {
                let what = if self.k2_eat2("SCHEMA", "PACKAGES") {
                    "SCHEMA PACKAGES"
                } else if self.k2_eat2("STRUCTURAL", "FIELDS") {
                    "STRUCTURAL FIELDS"
                } else if self.k2_eat2("EPISTEMIC", "POLICIES") {
                    "EPISTEMIC POLICIES"
                } else if let Some(w) = ["SPACES", "TYPES", "PREDICATES", "FACETS"]
                    .into_iter()
                    .find(|w| self.k2_at(w))
                {
                    self.bump();
                    w
                } else {
                    return Err(self.k2_unexpected(
                        "what to list",
                        Some("LIST SPACES | SCHEMA PACKAGES | TYPES | PREDICATES | FACETS | STRUCTURAL FIELDS | EPISTEMIC POLICIES"),
                    ));
                };
                let status = if what == "SCHEMA PACKAGES" && self.k2_eat("STATUS") {
                    Some(self.k2_scalar("a status")?)
                } else {
                    None
                };
                let (limit, cursor) = self.k2_paging()?;
                Meta::List {
                    what: what.to_string(),
                    status,
                    limit,
                    cursor,
                }
            }
            "SEARCH" => Meta::Search(Box::new(self.k2_search()?)),
            "VERIFY" => {
                let target = if self.k2_eat2("SCHEMA", "PACKAGE") {
                    "SCHEMA PACKAGE".to_string()
                } else if let Some(w) = ["CAPSULE", "RECEIPT", "BLOB", "CHECKPOINT"]
                    .into_iter()
                    .find(|w| self.k2_at(w))
                {
                    self.bump();
                    w.to_string()
                } else {
                    return Err(self.k2_unexpected(
                        "what to verify",
                        Some("VERIFY CAPSULE | SCHEMA PACKAGE | RECEIPT | BLOB | CHECKPOINT followed by a value"),
                    ));
                };
                Meta::Verify {
                    target,
                    value: self.k2_scalar("the artifact")?,
                }
            }
            "VALIDATE" => {
                let target = if self.k2_eat2("SCHEMA", "PACKAGE") {
                    "SCHEMA PACKAGE".to_string()
                } else if self.k2_eat2("IMPORT", "PLAN") {
                    "IMPORT PLAN".to_string()
                } else if let Some(w) = ["KQL", "KML", "CAPSULE"]
                    .into_iter()
                    .find(|w| self.k2_at(w))
                {
                    self.bump();
                    w.to_string()
                } else {
                    return Err(self.k2_unexpected(
                        "what to validate",
                        Some("VALIDATE KQL | KML | CAPSULE | SCHEMA PACKAGE | IMPORT PLAN followed by a value (the text as a string or :parameter)"),
                    ));
                };
                let value = self.k2_scalar("the text or artifact")?;
                let options = if self.k2_eat("WITH") {
                    Some(self.k2_object()?)
                } else {
                    None
                };
                Meta::Validate {
                    target,
                    value,
                    options,
                }
            }
            "PREVIEW" => {
                if self.k2_eat("KML") {
                    Meta::PreviewKml(self.k2_scalar("the KML text")?)
                } else if self.k2_eat2("IMPORT", "CAPSULE") {
                    let capsule = self.k2_scalar("the capsule")?;
                    self.k2_kw("INTO", "write PREVIEW IMPORT CAPSULE :capsule INTO :space")?;
                    Meta::PreviewImportCapsule {
                        capsule,
                        into: self.k2_scalar("the destination")?,
                    }
                } else {
                    return Err(self.k2_unexpected(
                        "KML or IMPORT CAPSULE",
                        Some("PREVIEW KML :text | PREVIEW IMPORT CAPSULE :capsule INTO :space"),
                    ));
                }
            }
            "HISTORY" => {
                let element = if self.k2_eat("ELEMENT") {
                    Some(self.k2_scalar("an element id")?)
                } else if self.k2_eat("SPACE") {
                    None
                } else {
                    return Err(self.k2_unexpected(
                        "ELEMENT or SPACE",
                        Some("HISTORY ELEMENT \"id\" [FROM SEQ n] [TO SEQ n] | HISTORY SPACE [FROM SEQ n] [TO SEQ n]"),
                    ));
                };
                let from_seq = if self.k2_eat2("FROM", "SEQ") {
                    Some(self.k2_scalar("a sequence number")?)
                } else {
                    None
                };
                let to_seq = if self.k2_eat2("TO", "SEQ") {
                    Some(self.k2_scalar("a sequence number")?)
                } else {
                    None
                };
                let (limit, cursor) = self.k2_paging()?;
                Meta::History {
                    element,
                    from_seq,
                    to_seq,
                    limit,
                    cursor,
                }
            }
            "CHANGES" => {
                let after_seq = if self.k2_eat("SINCE") {
                    false
                } else if self.k2_eat2("AFTER", "SEQ") {
                    true
                } else {
                    return Err(self.k2_unexpected(
                        "SINCE or AFTER SEQ",
                        Some("CHANGES SINCE :cursor [LIMIT n] | CHANGES AFTER SEQ n [LIMIT n]"),
                    ));
                };
                let from = self.k2_scalar("a change cursor or sequence")?;
                let limit = if self.k2_eat("LIMIT") {
                    Some(self.k2_scalar("a limit")?)
                } else {
                    None
                };
                Meta::Changes {
                    after_seq,
                    from,
                    limit,
                }
            }
            "SNAPSHOT" => Meta::Snapshot(self.k2_as_of()?),
            _ => {
                self.k2_kw("CAPSULE", "write EXPORT CAPSULE :target WHERE { ... }")?;
                let target = self.k2_target()?;
                self.k2_kw("WHERE", "EXPORT CAPSULE selects with WHERE { ... }")?;
                let where_clauses = self.k2_where_block(false)?;
                let options = if self.k2_eat("WITH") {
                    Some(self.k2_object()?)
                } else {
                    None
                };
                Meta::ExportCapsule {
                    target,
                    where_clauses,
                    options,
                    as_of: self.k2_as_of()?,
                }
            }
        })
    }

    fn k2_describe(&mut self) -> KipResult<Describe> {
        if self.k2_eat("PRIMER") {
            if !self.k2_eat("MODE") {
                return Ok(Describe::Primer(None));
            }
            let mode = self.k2_scalar("a primer mode")?;
            if let Scalar::Literal(l) = &mode {
                if l != "compact" && l != "full" {
                    return Err(self
                        .error_at(ErrorCode::InvalidSyntax, self.prev_span(), "the primer mode is \"compact\" or \"full\"")
                        .with_hint("write DESCRIBE PRIMER MODE \"compact\" or DESCRIBE PRIMER MODE \"full\""));
                }
            }
            return Ok(Describe::Primer(Some(mode)));
        }
        if self.k2_eat("PROTOCOL") {
            return Ok(Describe::Protocol);
        }
        if self.k2_eat2("EXECUTION", "CONTEXT") {
            return Ok(Describe::ExecutionContext);
        }
        if self.k2_eat("CAPABILITIES") {
            return Ok(Describe::Capabilities);
        }
        if self.k2_eat2("PROJECTION", "CAPABILITY") {
            return Ok(Describe::ProjectionCapability);
        }
        if self.k2_eat2("SCHEMA", "ENVIRONMENT") {
            return Ok(Describe::SchemaEnvironment(self.k2_as_of()?));
        }
        if self.k2_eat("SNAPSHOT") {
            return Ok(Describe::Snapshot(self.k2_as_of()?));
        }
        if self.k2_eat("COMPATIBILITY") {
            self.k2_kw("FROM", "write DESCRIBE COMPATIBILITY FROM \"a\" TO \"b\"")?;
            let from = self.k2_scalar("a version")?;
            self.k2_kw("TO", "write DESCRIBE COMPATIBILITY FROM \"a\" TO \"b\"")?;
            return Ok(Describe::Compatibility(from, self.k2_scalar("a version")?));
        }
        if self.k2_eat("ACCESS") {
            return Ok(Describe::Access(if self.k2_eat("WITH") {
                Some(self.k2_object()?)
            } else {
                None
            }));
        }
        if self.k2_is(0, "TRANSACTION") && self.k2_is(1, "BY") {
            self.bump();
            self.bump();
            self.k2_kw(
                "IDEMPOTENCY",
                "write DESCRIBE TRANSACTION BY IDEMPOTENCY KEY \"k\"",
            )?;
            self.k2_kw("KEY", "write DESCRIBE TRANSACTION BY IDEMPOTENCY KEY \"k\"")?;
            return Ok(Describe::TransactionByIdempotencyKey(
                self.k2_scalar("an idempotency key")?,
            ));
        }
        let (what, optional) = if self.k2_eat2("STRUCTURAL", "FIELD") {
            ("STRUCTURAL FIELD", false)
        } else if self.k2_eat2("EPISTEMIC", "POLICY") {
            ("EPISTEMIC POLICY", true)
        } else if let Some((w, o)) = [
            ("SPACE", true),
            ("TRUST", true),
            ("PACKAGE", false),
            ("TYPE", false),
            ("PREDICATE", false),
            ("FACET", false),
            ("ERROR", false),
            ("TRANSACTION", false),
            ("CAPSULE", false),
        ]
        .into_iter()
        .find(|(w, _)| self.k2_at(w))
        {
            self.bump();
            (w, o)
        } else {
            return Err(self.k2_unexpected(
                "what to describe",
                Some("DESCRIBE PRIMER | PROTOCOL | EXECUTION CONTEXT | CAPABILITIES | SPACE | SCHEMA ENVIRONMENT | PACKAGE | TYPE | PREDICATE | FACET | STRUCTURAL FIELD | COMPATIBILITY | ERROR | TRANSACTION | SNAPSHOT | CAPSULE | EPISTEMIC POLICY | PROJECTION CAPABILITY | TRUST | ACCESS"),
            ));
        };
        let value = if optional {
            self.k2_opt_scalar()?
        } else {
            Some(self.k2_scalar(&format!("the {} to describe", what.to_ascii_lowercase()))?)
        };
        Ok(Describe::Named {
            what: what.to_string(),
            value,
        })
    }

    fn k2_search(&mut self) -> KipResult<Search> {
        let kind = match ["CONCEPT", "PROPOSITION", "ASSERTION", "EVIDENCE", "ACTIVITY", "COGNITION"]
            .into_iter()
            .find(|w| self.k2_at(w))
        {
            Some(w) => {
                self.bump();
                w.to_string()
            }
            None => {
                return Err(self.k2_unexpected(
                    "what to search",
                    Some("SEARCH CONCEPT | PROPOSITION | ASSERTION | EVIDENCE | ACTIVITY | COGNITION \"query text\""),
                ))
            }
        };
        let query = self.k2_scalar("the search text")?;
        let with_type = if self.k2_eat2("WITH", "TYPE") {
            Some(self.k2_scalar("a type")?)
        } else {
            None
        };
        let with_predicate = if self.k2_eat2("WITH", "PREDICATE") {
            Some(self.k2_scalar("a predicate")?)
        } else {
            None
        };
        let mode = if self.k2_eat("MODE") {
            let m = self.k2_scalar("a search mode")?;
            if let Scalar::Literal(l) = &m {
                if !["keyword", "semantic", "hybrid"].iter().any(|k| l == k) {
                    return Err(self
                        .error_at(ErrorCode::InvalidSyntax, self.prev_span(), "the search mode is \"keyword\", \"semantic\" or \"hybrid\"")
                        .with_hint("write MODE \"keyword\", MODE \"semantic\" or MODE \"hybrid\" (or a :parameter)"));
                }
            }
            Some(m)
        } else {
            None
        };
        let threshold = if self.k2_eat("THRESHOLD") {
            Some(self.k2_scalar("a threshold")?)
        } else {
            None
        };
        let as_of_seq = if self.k2_eat2("AS", "OF") {
            self.k2_kw("SEQ", "a historical SEARCH is AS OF SEQ n")?;
            Some(self.k2_scalar("a sequence number")?)
        } else {
            None
        };
        let (limit, cursor) = self.k2_paging()?;
        Ok(Search {
            kind,
            query,
            with_type,
            with_predicate,
            mode,
            threshold,
            as_of_seq,
            limit,
            cursor,
        })
    }
}
