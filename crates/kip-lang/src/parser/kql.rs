//! KQL: `FIND`, the `WHERE` body (concept and proposition patterns, FILTER, NOT,
//! OPTIONAL, UNION) and FILTER expressions. KML reuses the patterns (`kml == true`
//! restricts them to the forms an UPSERT accepts).
//!
//! One file on purpose (about 800 lines): the WHERE grammar is mutually recursive
//! (patterns, FILTER expressions, NOT/OPTIONAL/UNION nest each other).

use super::Parser;
use crate::ast::*;
use crate::error::{ErrorCode, KipResult};
use crate::lexer::Tok;

/// The fields a dot path may start with.
pub(crate) const TOP_FIELDS: [&str; 8] = [
    "id",
    "type",
    "name",
    "subject",
    "predicate",
    "object",
    "attributes",
    "metadata",
];

impl Parser<'_> {
    pub(crate) fn find(&mut self) -> KipResult<FindQuery> {
        let start = self.expect_kw("FIND", "a query starts with FIND(...)")?;
        if *self.peek_tok() != Tok::LParen {
            return Err(self.unexpected("'(' after FIND").with_hint(
                "FIND takes what to return in parentheses: FIND(?x) or FIND(?x.name, COUNT(?y))",
            ));
        }
        self.bump();
        let mut projections = Vec::new();
        loop {
            if *self.peek_tok() == Tok::RParen {
                if projections.is_empty() {
                    return Err(self
                        .unexpected("at least one variable or aggregation in FIND(...)")
                        .with_hint("name what to return, e.g. FIND(?drug.name)"));
                }
                break;
            }
            projections.push(self.projection()?);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect_list_end(
            &Tok::RParen,
            "',' or ')' closing FIND(...)",
            "separate what FIND returns with commas: FIND(?x, ?y.name)",
        )?;
        if !self.at_kw("WHERE") {
            return Err(self
                .unexpected("keyword WHERE")
                .with_hint("a query is FIND(...) WHERE { patterns }"));
        }
        let where_clauses = self.where_body()?;
        let mut order_by = Vec::new();
        let mut limit = None;
        let mut cursor = None;
        loop {
            if self.at_kw("ORDER") {
                if !order_by.is_empty() {
                    return Err(self.duplicate_clause("ORDER BY"));
                }
                self.bump();
                self.expect_kw("BY", "write ORDER BY followed by an expression")?;
                order_by = self.order_keys()?;
            } else if self.at_kw("LIMIT") || self.at_kw("CURSOR") {
                if (self.at_kw("LIMIT") && limit.is_some())
                    || (self.at_kw("CURSOR") && cursor.is_some())
                {
                    let kw = if self.at_kw("LIMIT") {
                        "LIMIT"
                    } else {
                        "CURSOR"
                    };
                    return Err(self.duplicate_clause(kw));
                }
                let (l, c) = self.limit_cursor()?;
                if l.is_some() {
                    limit = l;
                }
                if c.is_some() {
                    cursor = c;
                }
            } else {
                break;
            }
        }
        Ok(FindQuery {
            projections,
            where_clauses,
            order_by,
            limit,
            cursor,
            span: start.to(self.prev_span()),
        })
    }

    fn order_keys(&mut self) -> KipResult<Vec<OrderKey>> {
        let mut keys = Vec::new();
        loop {
            if !matches!(self.peek_tok(), Tok::Var(_) | Tok::Ident(_))
                || self.at_kw("ASC")
                || self.at_kw("DESC")
            {
                return Err(self
                    .unexpected("a variable, dot path or aggregation after ORDER BY")
                    .with_hint("e.g. ORDER BY ?drug.attributes.risk_level DESC"));
            }
            let expr = self.projection()?;
            let (direction, explicit_direction) = if self.eat_kw("ASC") {
                (Direction::Asc, true)
            } else if self.eat_kw("DESC") {
                (Direction::Desc, true)
            } else {
                (Direction::Asc, false)
            };
            keys.push(OrderKey {
                expr,
                direction,
                explicit_direction,
            });
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        if let Tok::Ident(w) = self.peek_tok() {
            if !["LIMIT", "CURSOR"].contains(&w.as_str())
                && !super::STATEMENT_KEYWORDS.contains(&w.as_str())
            {
                return Err(self
                    .unexpected("ASC, DESC, ',', LIMIT or CURSOR")
                    .with_hint("the sort direction is ASC or DESC"));
            }
        }
        Ok(keys)
    }

    /// A FIND / ORDER BY expression: a dot path or an aggregation.
    pub(crate) fn projection(&mut self) -> KipResult<Projection> {
        match self.peek_tok().clone() {
            Tok::Var(_) => Ok(Projection::Path(self.dot_path()?)),
            Tok::Ident(w) => {
                if let Some(func) = AggregateFunc::from_keyword(&w) {
                    let start = self.bump().span;
                    self.expect(&Tok::LParen, &format!("'(' after {w}"))?;
                    let distinct = self.eat_kw("DISTINCT");
                    if !matches!(self.peek_tok(), Tok::Var(_)) {
                        return Err(self
                            .unexpected(&format!("a variable inside {w}(...)"))
                            .with_hint(format!("write {w}(?var) or {w}(DISTINCT ?var)")));
                    }
                    let arg = self.dot_path()?;
                    let end = self.expect(&Tok::RParen, &format!("')' closing {w}(...)"))?;
                    Ok(Projection::Aggregate(Aggregate {
                        func,
                        distinct,
                        arg,
                        span: start.to(end),
                    }))
                } else {
                    let mut e = self.unexpected("a variable (?name), dot path or aggregation");
                    if e.hint.is_none() {
                        e = e.with_hint(format!("variables start with '?': write ?{w}"));
                    }
                    Err(e)
                }
            }
            _ => Err(self
                .unexpected("a variable (?name), dot path or aggregation")
                .with_hint("e.g. FIND(?drug.name, COUNT(?link))")),
        }
    }

    /// `?var` followed by `.segment`s, validated against the element fields.
    pub(crate) fn dot_path(&mut self) -> KipResult<DotPath> {
        let t = self.bump();
        let Tok::Var(name) = t.tok else {
            return Err(self.error_at(ErrorCode::InvalidSyntax, t.span, "expected a variable"));
        };
        let var = Variable { name, span: t.span };
        let mut path: Vec<String> = Vec::new();
        let mut end = t.span;
        while *self.peek_tok() == Tok::Dot {
            self.bump();
            match self.peek_tok().clone() {
                Tok::Ident(seg) => {
                    end = self.bump().span;
                    path.push(seg);
                }
                Tok::Str(seg) if !path.is_empty() => {
                    end = self.bump().span;
                    path.push(seg);
                }
                _ => {
                    return Err(self.unexpected("a field name after '.'").with_hint(
                        "dot paths look like ?x.name, ?x.attributes.key or ?x.metadata.key",
                    ))
                }
            }
        }
        if let Some(first) = path.first() {
            if !TOP_FIELDS.contains(&first.as_str()) {
                let shown = format!("?{}.{}", var.name, path.join("."));
                return Err(self
                    .error_at(
                        ErrorCode::InvalidSyntax,
                        var.span,
                        format!("unknown field '{first}' in {shown}"),
                    )
                    .with_hint(format!(
                        "attributes and metadata are reached through their container: ?{v}.attributes.{first} or ?{v}.metadata.{first}; top-level fields are id, type, name (concepts) and id, subject, predicate, object (propositions)",
                        v = var.name
                    )));
            }
            if path.len() > 1 && first != "attributes" && first != "metadata" {
                return Err(self
                    .error_at(
                        ErrorCode::InvalidSyntax,
                        var.span,
                        format!(
                            "'{first}' has no sub-fields in ?{}.{}",
                            var.name,
                            path.join(".")
                        ),
                    )
                    .with_hint("only .attributes and .metadata have keys below them"));
            }
        }
        Ok(DotPath {
            var,
            path,
            span: t.span.to(end),
        })
    }

    /// `WHERE { clauses }`.
    pub(crate) fn where_body(&mut self) -> KipResult<Vec<WhereClause>> {
        self.expect_kw(
            "WHERE",
            "add WHERE { ... } with the patterns that bind the variables",
        )?;
        self.expect(&Tok::LBrace, "'{' after WHERE")?;
        let clauses = self.clauses_until(&Tok::RBrace)?;
        self.expect(&Tok::RBrace, "'}' closing WHERE")?;
        Ok(clauses)
    }

    /// Clauses up to (not including) `end`.
    pub(crate) fn clauses_until(&mut self, end: &Tok) -> KipResult<Vec<WhereClause>> {
        let mut out = Vec::new();
        while self.peek_tok() != end {
            if self.at_eof() {
                return Err(self.unexpected("'}'"));
            }
            out.push(self.where_clause()?);
            self.eat(&Tok::Comma);
        }
        Ok(out)
    }

    fn group(&mut self, kw: &str) -> KipResult<GroupClause> {
        let start = self.bump().span;
        if *self.peek_tok() != Tok::LBrace {
            return Err(self
                .unexpected(&format!("'{{' after {kw}"))
                .with_hint(format!("{kw} takes a block: {kw} {{ patterns }}")));
        }
        self.enter()?;
        self.bump();
        let clauses = self.clauses_until(&Tok::RBrace)?;
        let end = self.expect(&Tok::RBrace, &format!("'}}' closing {kw}"))?;
        self.leave();
        Ok(GroupClause {
            clauses,
            span: start.to(end),
        })
    }

    fn where_clause(&mut self) -> KipResult<WhereClause> {
        self.count_clause()?;
        match self.peek_tok().clone() {
            Tok::Ident(w) => match w.as_str() {
                "FILTER" => {
                    let start = self.bump().span;
                    if *self.peek_tok() != Tok::LParen {
                        return Err(self.unexpected("'(' after FILTER").with_hint(
                            "FILTER takes a parenthesized condition: FILTER(?x.attributes.n > 3)",
                        ));
                    }
                    self.bump();
                    let expr = self.expr()?;
                    let end = self.expect(&Tok::RParen, "')' closing FILTER(...)")?;
                    Ok(WhereClause::Filter(Filter {
                        expr,
                        span: start.to(end),
                    }))
                }
                "NOT" => Ok(WhereClause::Not(self.group("NOT")?)),
                "OPTIONAL" => Ok(WhereClause::Optional(self.group("OPTIONAL")?)),
                "UNION" => Ok(WhereClause::Union(self.group("UNION")?)),
                _ => Err(self
                    .unexpected("a pattern, FILTER, NOT, OPTIONAL or UNION")
                    .with_hint("patterns look like ?x {type: \"T\"} or (?s, \"predicate\", ?o)")),
            },
            Tok::Var(_) => {
                let vt = self.bump();
                let Tok::Var(name) = vt.tok else {
                    return Err(self.unexpected("a variable"));
                };
                let var = Variable {
                    name,
                    span: vt.span,
                };
                match self.peek_tok() {
                    Tok::LBrace => {
                        let matcher = self.concept_matcher()?;
                        let span = var.span.to(matcher.span);
                        Ok(WhereClause::Concept(ConceptPattern { var, matcher, span }))
                    }
                    Tok::LParen => {
                        let pattern = self.proposition_pattern(Some(var), false)?;
                        Ok(WhereClause::Proposition(pattern))
                    }
                    _ => Err(self
                        .unexpected(&format!("a concept clause {{...}} or proposition clause (...) after ?{}", var.name))
                        .with_hint(format!(
                            "bind the variable with a pattern, e.g. ?{v} {{type: \"Drug\"}} or ?{v} (?s, \"treats\", ?o)",
                            v = var.name
                        ))),
                }
            }
            Tok::LParen => Ok(WhereClause::Proposition(
                self.proposition_pattern(None, false)?,
            )),
            Tok::LBrace => Err(self
                .unexpected("a pattern, FILTER, NOT, OPTIONAL or UNION")
                .with_hint("a concept clause in WHERE needs a variable: ?x {type: \"Drug\"}")),
            _ => Err(self.unexpected("a pattern, FILTER, NOT, OPTIONAL or UNION")),
        }
    }

    /// `{id: ..., type: ..., name: ...}` (any non-empty subset of the three keys).
    pub(crate) fn concept_matcher(&mut self) -> KipResult<ConceptMatcher> {
        let start = self.expect(&Tok::LBrace, "'{' starting a concept clause")?;
        let mut m = ConceptMatcher {
            id: None,
            concept_type: None,
            name: None,
            span: start,
        };
        loop {
            if *self.peek_tok() == Tok::RBrace {
                break;
            }
            let key_span = self.peek().span;
            let key = self.object_key()?;
            self.expect(&Tok::Colon, "':' after a concept clause key")?;
            let slot =
                self.str_slot(format_args!("a quoted string or :placeholder for '{key}'"))?;
            let place = match key.as_str() {
                "id" => &mut m.id,
                "type" => &mut m.concept_type,
                "name" => &mut m.name,
                other => {
                    return Err(self
                        .error_at(
                            ErrorCode::InvalidSyntax,
                            key_span,
                            format!("unknown key '{other}' in a concept clause"),
                        )
                        .with_hint("a concept clause matches by id, type and/or name, e.g. {type: \"Drug\", name: \"Aspirin\"}; filter other fields with FILTER"))
                }
            };
            if place.is_some() {
                return Err(self
                    .error_at(
                        ErrorCode::InvalidSyntax,
                        key_span,
                        format!("key '{key}' appears twice in a concept clause"),
                    )
                    .with_hint("write each of id, type, name at most once"));
            }
            *place = Some(slot);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        let end = self.expect_list_end(
            &Tok::RBrace,
            "',' or '}' in a concept clause",
            "separate entries with commas: {type: \"Drug\", name: \"Aspirin\"}",
        )?;
        m.span = start.to(end);
        if m.id.is_none() && m.concept_type.is_none() && m.name.is_none() {
            return Err(self
                .error_at(ErrorCode::InvalidSyntax, m.span, "empty concept clause")
                .with_hint(
                    "match by {id: ...}, {type: ..., name: ...}, {type: ...} or {name: ...}",
                ));
        }
        Ok(m)
    }

    /// `(id: ...)` or `(subject, predicate, object)`, starting at `(`.
    pub(crate) fn proposition_pattern(
        &mut self,
        var: Option<Variable>,
        kml: bool,
    ) -> KipResult<PropositionPattern> {
        self.enter()?;
        let open = self.expect(&Tok::LParen, "'(' starting a proposition clause")?;
        let start = var.as_ref().map(|v| v.span).unwrap_or(open);
        // `(key: ...)`: only `id` is valid here.
        if let (Tok::Ident(key), Tok::Colon) = (self.peek_tok().clone(), self.peek_nth(1).clone()) {
            if key != "id" {
                return Err(self
                    .unexpected("(id: \"...\") or (subject, \"predicate\", object)")
                    .with_hint("parentheses match propositions; match concepts with braces: {type: \"Drug\", name: \"Aspirin\"}"));
            }
            self.bump();
            self.bump();
            let id = self.str_slot("a quoted proposition id or :placeholder")?;
            let end = self.expect(&Tok::RParen, "')' closing (id: ...)")?;
            self.leave();
            return Ok(PropositionPattern {
                var,
                matcher: PropositionMatcher::Id(id),
                span: start.to(end),
            });
        }
        let subject = self.endpoint(kml)?;
        self.expect(&Tok::Comma, "',' after the subject")
            .map_err(|e| e.with_hint("a proposition clause is (subject, \"predicate\", object)"))?;
        let predicate = self.predicate(kml)?;
        self.expect(&Tok::Comma, "',' after the predicate")
            .map_err(|e| {
                if e.hint.is_none() {
                    e.with_hint("a proposition clause is (subject, \"predicate\", object)")
                } else {
                    e
                }
            })?;
        let object = self.endpoint(kml)?;
        let end = self.expect(&Tok::RParen, "')' closing the proposition clause")?;
        self.leave();
        Ok(PropositionPattern {
            var,
            matcher: PropositionMatcher::Triple(Box::new(TriplePattern {
                subject,
                predicate,
                object,
            })),
            span: start.to(end),
        })
    }

    /// A subject/object: `?v`, `{...}`, `(...)`, or inline named `?v {...}` / `?v (...)`.
    pub(crate) fn endpoint(&mut self, kml: bool) -> KipResult<Endpoint> {
        match self.peek_tok().clone() {
            Tok::Var(name) => {
                let span = self.bump().span;
                let var = Variable { name, span };
                match self.peek_tok() {
                    Tok::LBrace | Tok::LParen if kml => Err(self
                        .unexpected("',' or ')' after a handle")
                        .with_hint("in UPSERT an endpoint is a ?handle, {type, name}, {id} or (...), without an inline name")),
                    Tok::LBrace => {
                        let matcher = self.concept_matcher()?;
                        Ok(Endpoint::Concept {
                            var: Some(var),
                            matcher,
                        })
                    }
                    Tok::LParen => Ok(Endpoint::Proposition(Box::new(
                        self.proposition_pattern(Some(var), kml)?,
                    ))),
                    _ => Ok(Endpoint::Var(var)),
                }
            }
            Tok::LBrace => {
                let matcher = self.concept_matcher()?;
                if kml {
                    self.check_exact_concept(&matcher)?;
                }
                Ok(Endpoint::Concept { var: None, matcher })
            }
            Tok::LParen => Ok(Endpoint::Proposition(Box::new(
                self.proposition_pattern(None, kml)?,
            ))),
            _ => Err(self
                .unexpected("a subject/object: ?var, {...} or (...)")
                .with_hint("endpoints are variables (?x), concept clauses ({type: \"T\", name: \"N\"}) or nested propositions")),
        }
    }

    /// In KML a concept reference must identify one concept: `{type, name}` or `{id}`.
    pub(crate) fn check_exact_concept(&self, m: &ConceptMatcher) -> KipResult<()> {
        let ok = matches!(
            (&m.id, &m.concept_type, &m.name),
            (Some(_), None, None) | (None, Some(_), Some(_))
        );
        if ok {
            Ok(())
        } else {
            Err(self
                .error_at(
                    ErrorCode::InvalidSyntax,
                    m.span,
                    "a concept reference in UPSERT must be {type: ..., name: ...} or {id: ...}",
                )
                .with_hint("name exactly one concept: {type: \"Drug\", name: \"Aspirin\"} or {id: \"C:12\"}"))
        }
    }

    fn predicate(&mut self, kml: bool) -> KipResult<PredicatePattern> {
        match self.peek_tok() {
            Tok::Var(_) => {
                if kml {
                    return Err(self
                        .unexpected("a quoted predicate")
                        .with_hint("UPSERT writes a concrete predicate: \"treats\""));
                }
                let t = self.bump();
                match t.tok {
                    Tok::Var(name) => Ok(PredicatePattern::Var(Variable { name, span: t.span })),
                    _ => Err(self.unexpected("a quoted predicate")),
                }
            }
            Tok::Str(_) | Tok::Colon => {
                let first = self.str_slot("a quoted predicate")?;
                let start = first.span();
                let mut alternatives = vec![first];
                while *self.peek_tok() == Tok::Pipe {
                    if kml {
                        return Err(self.unexpected("',' after the predicate").with_hint(
                            "UPSERT writes one predicate; alternatives (|) are for queries",
                        ));
                    }
                    self.bump();
                    alternatives.push(self.str_slot("a quoted predicate after '|'")?);
                }
                let hops = if *self.peek_tok() == Tok::LBrace {
                    if kml {
                        return Err(self
                            .unexpected("',' after the predicate")
                            .with_hint("hop ranges {m,n} are for queries, not UPSERT"));
                    }
                    Some(self.hop_range()?)
                } else {
                    None
                };
                Ok(PredicatePattern::Literal {
                    alternatives,
                    hops,
                    span: start.to(self.prev_span()),
                })
            }
            Tok::Ident(w) => Err(self
                .unexpected("a quoted predicate")
                .with_hint(format!("predicates are quoted strings: \"{w}\""))),
            _ => Err(self
                .unexpected("a quoted predicate")
                .with_hint("a proposition clause is (subject, \"predicate\", object)")),
        }
    }

    fn hop_count(&mut self) -> KipResult<u32> {
        match self.peek_tok().clone() {
            Tok::Num(n) => {
                let span = self.bump().span;
                n.as_u64()
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| {
                        self.error_at(
                            ErrorCode::InvalidSyntax,
                            span,
                            format!("hop count must be a non-negative integer, found {n}"),
                        )
                        .with_hint("write hop ranges like {1,3}, {0,5}, {2,} or {2}")
                    })
            }
            _ => Err(self
                .unexpected("a hop count (non-negative integer)")
                .with_hint("write hop ranges like {1,3}, {0,5}, {2,} or {2}")),
        }
    }

    fn hop_range(&mut self) -> KipResult<HopRange> {
        let start = self.expect(&Tok::LBrace, "'{'")?;
        let min = self.hop_count()?;
        let range = if self.eat(&Tok::Comma) {
            if *self.peek_tok() == Tok::RBrace {
                HopRange {
                    min,
                    max: None,
                    exact: false,
                }
            } else {
                let max = self.hop_count()?;
                HopRange {
                    min,
                    max: Some(max),
                    exact: false,
                }
            }
        } else {
            HopRange {
                min,
                max: Some(min),
                exact: true,
            }
        };
        let end = self.expect(&Tok::RBrace, "'}' closing the hop range")?;
        if let Some(max) = range.max {
            if min > max {
                return Err(self
                    .error_at(
                        ErrorCode::InvalidSyntax,
                        start.to(end),
                        format!("invalid hop range {{{min},{max}}}: the minimum is larger than the maximum"),
                    )
                    .with_hint("a hop range {m,n} needs 0 <= m <= n"));
            }
        }
        Ok(range)
    }

    // ---- FILTER expressions ----------------------------------------------------------

    pub(crate) fn expr(&mut self) -> KipResult<Expr> {
        self.enter()?;
        let r = self.or_expr();
        self.leave();
        r
    }

    fn or_expr(&mut self) -> KipResult<Expr> {
        let mut left = self.and_expr()?;
        while *self.peek_tok() == Tok::OrOr {
            let at = self.bump().span;
            self.count_operator(at)?;
            let right = self.and_expr()?;
            let span = left.span().to(right.span());
            left = Expr::Binary {
                op: BinaryOp::Or,
                left: Box::new(left),
                right: Box::new(right),
                span,
            };
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> KipResult<Expr> {
        let mut left = self.cmp_expr()?;
        while *self.peek_tok() == Tok::AndAnd {
            let at = self.bump().span;
            self.count_operator(at)?;
            let right = self.cmp_expr()?;
            let span = left.span().to(right.span());
            left = Expr::Binary {
                op: BinaryOp::And,
                left: Box::new(left),
                right: Box::new(right),
                span,
            };
        }
        Ok(left)
    }

    fn cmp_expr(&mut self) -> KipResult<Expr> {
        let left = self.unary_expr()?;
        let op = match self.peek_tok() {
            Tok::EqEq => BinaryOp::Eq,
            Tok::NotEq => BinaryOp::Ne,
            Tok::Lt => BinaryOp::Lt,
            Tok::Le => BinaryOp::Le,
            Tok::Gt => BinaryOp::Gt,
            Tok::Ge => BinaryOp::Ge,
            _ => return Ok(left),
        };
        let at = self.bump().span;
        self.count_operator(at)?;
        let right = self.unary_expr()?;
        let span = left.span().to(right.span());
        Ok(Expr::Binary {
            op,
            left: Box::new(left),
            right: Box::new(right),
            span,
        })
    }

    fn unary_expr(&mut self) -> KipResult<Expr> {
        if *self.peek_tok() == Tok::Bang {
            let start = self.bump().span;
            self.count_operator(start)?;
            self.enter()?;
            let inner = self.unary_expr();
            self.leave();
            let inner = inner?;
            let span = start.to(inner.span());
            return Ok(Expr::Not(Box::new(inner), span));
        }
        self.primary_expr()
    }

    fn primary_expr(&mut self) -> KipResult<Expr> {
        match self.peek_tok().clone() {
            Tok::LParen => {
                self.bump();
                let e = self.expr()?;
                self.expect(&Tok::RParen, "')'")?;
                Ok(e)
            }
            Tok::Var(_) => Ok(Expr::Path(self.dot_path()?)),
            Tok::Ident(w) => {
                if let Some(func) = Function::from_keyword(&w) {
                    return self.call(func);
                }
                if w == "true" || w == "false" || w == "null" {
                    return Ok(Expr::Value(self.value()?));
                }
                let mut e =
                    self.unexpected("an operand: ?var, a dot path, a JSON value or a function");
                if e.hint.is_none() {
                    let upper = w.to_uppercase();
                    let h = if Function::from_keyword(&upper).is_some() {
                        format!("function names are uppercase: {upper}(...)")
                    } else {
                        format!(
                            "strings are quoted (\"{w}\"); functions are IN, IS_NULL, IS_NOT_NULL, CONTAINS, STARTS_WITH, ENDS_WITH, REGEX"
                        )
                    };
                    e = e.with_hint(h);
                }
                Err(e)
            }
            Tok::Str(_) | Tok::Num(_) | Tok::LBracket | Tok::LBrace | Tok::Colon => {
                Ok(Expr::Value(self.value()?))
            }
            _ => Err(self.unexpected("an operand: ?var, a dot path, a JSON value or a function")),
        }
    }

    fn call(&mut self, func: Function) -> KipResult<Expr> {
        let kw = func.keyword();
        let start = self.bump().span;
        self.count_operator(start)?;
        self.expect(&Tok::LParen, &format!("'(' after {kw}"))?;
        let mut args = Vec::new();
        if *self.peek_tok() != Tok::RParen {
            loop {
                args.push(self.expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        let end = self.expect_list_end(
            &Tok::RParen,
            &format!("',' or ')' closing {kw}(...)"),
            "separate the arguments with commas",
        )?;
        let span = start.to(end);
        let usage = match func {
            Function::In => "IN(?x.attributes.k, [\"a\", \"b\"])",
            Function::IsNull => "IS_NULL(?x.metadata.k)",
            Function::IsNotNull => "IS_NOT_NULL(?x.metadata.k)",
            Function::Contains => "CONTAINS(?x.name, \"sub\")",
            Function::StartsWith => "STARTS_WITH(?x.name, \"prefix\")",
            Function::EndsWith => "ENDS_WITH(?x.name, \"suffix\")",
            Function::Regex => "REGEX(?x.name, \"^pattern\")",
        };
        if args.len() != func.arity() {
            return Err(self
                .error_at(
                    ErrorCode::InvalidSyntax,
                    span,
                    format!(
                        "{kw} takes {} argument(s), found {}",
                        func.arity(),
                        args.len()
                    ),
                )
                .with_hint(format!("write {usage}")));
        }
        if func == Function::In {
            let list_ok = matches!(
                &args[1],
                Expr::Value(ValueExpr {
                    kind: ValueKind::Array(_) | ValueKind::Param(_),
                    ..
                })
            );
            if !list_ok {
                return Err(self
                    .error_at(
                        ErrorCode::InvalidSyntax,
                        args[1].span(),
                        "the second argument of IN must be a list",
                    )
                    .with_hint(format!("write {usage}")));
            }
        }
        Ok(Expr::Call { func, args, span })
    }
}
