//! META: the six `DESCRIBE` forms and `SEARCH`.

use super::Parser;
use crate::ast::*;
use crate::error::{ErrorCode, KipResult};
use crate::lexer::Tok;

const DESCRIBE_FORMS: &str = "DESCRIBE PRIMER | DOMAINS | CONCEPT TYPES | CONCEPT TYPE \"Name\" | PROPOSITION TYPES | PROPOSITION TYPE \"predicate\"";

impl Parser<'_> {
    pub(crate) fn describe(&mut self) -> KipResult<Describe> {
        let start = self.bump().span; // DESCRIBE
        let target = match self.peek_tok().clone() {
            Tok::Ident(w) if w == "PRIMER" => {
                self.bump();
                DescribeTarget::Primer
            }
            Tok::Ident(w) if w == "DOMAINS" => {
                self.bump();
                DescribeTarget::Domains
            }
            Tok::Ident(w) if w == "CONCEPT" || w == "PROPOSITION" => {
                self.bump();
                let concept = w == "CONCEPT";
                if self.eat_kw("TYPES") {
                    let (limit, cursor) = self.limit_cursor()?;
                    if concept {
                        DescribeTarget::ConceptTypes { limit, cursor }
                    } else {
                        DescribeTarget::PropositionTypes { limit, cursor }
                    }
                } else if self.eat_kw("TYPE") {
                    let what = if concept {
                        "a quoted concept type name"
                    } else {
                        "a quoted predicate name"
                    };
                    let name = self.str_slot(what).map_err(|e| {
                        if e.hint.is_none() {
                            e.with_hint(format!("write DESCRIBE {w} TYPE \"Name\""))
                        } else {
                            e
                        }
                    })?;
                    if concept {
                        DescribeTarget::ConceptType(name)
                    } else {
                        DescribeTarget::PropositionType(name)
                    }
                } else {
                    return Err(self
                        .unexpected(&format!("TYPES or TYPE after DESCRIBE {w}"))
                        .with_hint(DESCRIBE_FORMS));
                }
            }
            _ => {
                return Err(self
                    .unexpected("PRIMER, DOMAINS, CONCEPT or PROPOSITION after DESCRIBE")
                    .with_hint(DESCRIBE_FORMS))
            }
        };
        if let Tok::Ident(w) = self.peek_tok() {
            if !super::STATEMENT_KEYWORDS.contains(&w.as_str()) {
                let hint = if w == "LIMIT" || w == "CURSOR" {
                    "LIMIT and CURSOR apply only to DESCRIBE CONCEPT TYPES and DESCRIBE PROPOSITION TYPES"
                } else {
                    DESCRIBE_FORMS
                };
                return Err(self
                    .unexpected("the end of the DESCRIBE command")
                    .with_hint(hint));
            }
        }
        Ok(Describe {
            target,
            span: start.to(self.prev_span()),
        })
    }

    pub(crate) fn search(&mut self) -> KipResult<Search> {
        let start = self.bump().span; // SEARCH
        let target = if self.eat_kw("CONCEPT") {
            SearchTarget::Concept
        } else if self.eat_kw("PROPOSITION") {
            SearchTarget::Proposition
        } else {
            return Err(self
                .unexpected("CONCEPT or PROPOSITION after SEARCH")
                .with_hint("write SEARCH CONCEPT \"term\" or SEARCH PROPOSITION \"term\""));
        };
        let term = self.str_slot("a quoted search term")?;
        let mut with_type = None;
        let mut limit = None;
        let mut mode = None;
        let mut threshold = None;
        loop {
            if self.at_kw("WITH") {
                if with_type.is_some() {
                    return Err(self.duplicate_clause("WITH TYPE"));
                }
                self.bump();
                self.expect_kw("TYPE", "write WITH TYPE \"TypeName\"")?;
                with_type = Some(self.str_slot("a quoted type name after WITH TYPE")?);
            } else if self.at_kw("LIMIT") {
                if limit.is_some() {
                    return Err(self.duplicate_clause("LIMIT"));
                }
                self.bump();
                limit = Some(self.limit_value()?);
            } else if self.at_kw("MODE") {
                if mode.is_some() {
                    return Err(self.duplicate_clause("MODE"));
                }
                self.bump();
                mode = Some(self.search_mode()?);
            } else if self.at_kw("THRESHOLD") {
                if threshold.is_some() {
                    return Err(self.duplicate_clause("THRESHOLD"));
                }
                self.bump();
                threshold = Some(self.threshold()?);
            } else {
                break;
            }
        }
        if let Tok::Ident(w) = self.peek_tok() {
            if !super::STATEMENT_KEYWORDS.contains(&w.as_str()) {
                return Err(self
                    .unexpected("WITH TYPE, MODE, THRESHOLD, LIMIT or the end of the SEARCH command")
                    .with_hint("SEARCH CONCEPT|PROPOSITION \"term\" [WITH TYPE \"T\"] [MODE \"keyword\"|\"semantic\"|\"hybrid\"] [THRESHOLD 0.5] [LIMIT n]"));
            }
        }
        Ok(Search {
            target,
            term,
            with_type,
            mode,
            threshold,
            limit,
            span: start.to(self.prev_span()),
        })
    }

    fn search_mode(&mut self) -> KipResult<Slot<SearchMode>> {
        if self.at_param() {
            return Ok(Slot::Param(self.param()?));
        }
        match self.peek_tok().clone() {
            Tok::Str(m) => {
                let span = self.bump().span;
                match SearchMode::parse(&m) {
                    Some(mode) => Ok(Slot::Literal(mode, span)),
                    None => Err(self
                        .error_at(
                            ErrorCode::InvalidSyntax,
                            span,
                            format!("unknown search mode \"{m}\""),
                        )
                        .with_hint(
                            "MODE is \"keyword\", \"semantic\" or \"hybrid\" (lowercase, quoted)",
                        )),
                }
            }
            _ => Err(self
                .unexpected("a quoted mode or :placeholder after MODE")
                .with_hint("write MODE \"keyword\", MODE \"semantic\" or MODE \"hybrid\"")),
        }
    }

    fn threshold(&mut self) -> KipResult<Slot<f64>> {
        if self.at_param() {
            return Ok(Slot::Param(self.param()?));
        }
        match self.peek_tok().clone() {
            Tok::Num(n) => {
                let span = self.bump().span;
                match n.as_f64().filter(|x| (0.0..=1.0).contains(x)) {
                    Some(x) => Ok(Slot::Literal(x, span)),
                    None => Err(self
                        .error_at(
                            ErrorCode::InvalidSyntax,
                            span,
                            format!("THRESHOLD must be between 0 and 1, found {n}"),
                        )
                        .with_hint("scores are normalized to [0, 1]: e.g. THRESHOLD 0.5")),
                }
            }
            _ => Err(self
                .unexpected("a number in [0, 1] or :placeholder after THRESHOLD")
                .with_hint("write THRESHOLD 0.75")),
        }
    }
}
