//! JSON values, object literals, `:name` placeholders and the typed slots (`LIMIT`,
//! `CURSOR`, quoted names) built on them.

use super::Parser;
use crate::ast::{ObjectExpr, Param, Slot, StrSlot, ValueExpr, ValueKind};
use crate::error::{ErrorCode, KipResult};
use crate::lexer::Tok;

impl Parser<'_> {
    /// True when the next tokens are a placeholder: `:` immediately followed by a word.
    pub(crate) fn at_param(&self) -> bool {
        if *self.peek_tok() != Tok::Colon {
            return false;
        }
        let colon = self.peek().span;
        let next = self.peek_token(1);
        next.span.start == colon.end && matches!(next.tok, Tok::Ident(_) | Tok::Num(_))
    }

    /// Parses `:name`; call only when [`Parser::at_param`] is true.
    pub(crate) fn param(&mut self) -> KipResult<Param> {
        let colon = self.bump().span;
        let t = self.bump();
        match t.tok {
            Tok::Ident(name) => Ok(Param {
                name,
                span: colon.to(t.span),
            }),
            _ => Err(self
                .error_at(
                    ErrorCode::InvalidIdentifier,
                    colon,
                    "invalid placeholder name: it must start with a letter or '_'",
                )
                .with_hint("placeholders match :[a-zA-Z_][a-zA-Z0-9_]*, e.g. :limit")),
        }
    }

    /// A JSON value, or a placeholder.
    pub(crate) fn value(&mut self) -> KipResult<ValueExpr> {
        if self.at_param() {
            let p = self.param()?;
            let span = p.span;
            return Ok(ValueExpr {
                kind: ValueKind::Param(p),
                span,
            });
        }
        // Matched by reference and moved out by `bump`: a value's text is not copied.
        let span = self.peek().span;
        let kind = match self.peek_tok() {
            Tok::Str(_) | Tok::Num(_) => match self.bump().tok {
                Tok::Str(s) => ValueKind::String(s),
                Tok::Num(n) => ValueKind::Number(n),
                _ => return Err(self.unexpected("a JSON value")),
            },
            Tok::Ident(w) if w == "true" || w == "false" => {
                let b = w == "true";
                self.bump();
                ValueKind::Bool(b)
            }
            Tok::Ident(w) if w == "null" => {
                self.bump();
                ValueKind::Null
            }
            Tok::LBracket => return self.array(),
            Tok::LBrace => {
                let obj = self.object()?;
                return Ok(ValueExpr {
                    kind: ValueKind::Object(obj.entries),
                    span: obj.span,
                });
            }
            Tok::Ident(w) => {
                let hint =
                    format!("string values must be quoted: write \"{w}\" (or use a :placeholder)");
                let mut e = self.unexpected("a JSON value");
                if e.hint.is_none() {
                    e = e.with_hint(hint);
                }
                return Err(e);
            }
            _ => return Err(self.unexpected("a JSON value")),
        };
        Ok(ValueExpr { kind, span })
    }

    fn array(&mut self) -> KipResult<ValueExpr> {
        self.enter()?;
        let start = self.expect(&Tok::LBracket, "'['")?;
        let mut items = Vec::new();
        loop {
            if *self.peek_tok() == Tok::RBracket {
                break;
            }
            items.push(self.value()?);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        let end = self.expect_list_end(
            &Tok::RBracket,
            "',' or ']'",
            "separate array items with commas: [\"a\", \"b\"]",
        )?;
        self.leave();
        Ok(ValueExpr {
            kind: ValueKind::Array(items),
            span: start.to(end),
        })
    }

    /// An object literal `{ key: value, ... }` with bare or quoted keys.
    pub(crate) fn object(&mut self) -> KipResult<ObjectExpr> {
        self.enter()?;
        let start = self.expect(&Tok::LBrace, "'{' starting an object")?;
        let mut entries = Vec::new();
        loop {
            if *self.peek_tok() == Tok::RBrace {
                break;
            }
            let key = self.object_key()?;
            self.expect(&Tok::Colon, "':' after an object key")?;
            let v = self.value()?;
            entries.push((key, v));
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        let end = self.expect_list_end(
            &Tok::RBrace,
            "',' or '}'",
            "separate object entries with commas: {a: 1, b: 2}",
        )?;
        self.leave();
        Ok(ObjectExpr {
            entries,
            span: start.to(end),
        })
    }

    pub(crate) fn object_key(&mut self) -> KipResult<String> {
        match self.peek_tok() {
            Tok::Ident(_) | Tok::Str(_) => match self.bump().tok {
                Tok::Ident(k) | Tok::Str(k) => Ok(k),
                _ => Err(self.unexpected("an object key (a name or a quoted string)")),
            },
            Tok::Num(_) => Err(self
                .error_at(
                    ErrorCode::InvalidIdentifier,
                    self.peek().span,
                    "an object key must not start with a digit",
                )
                .with_hint("keys match [a-zA-Z_][a-zA-Z0-9_]* or are quoted strings")),
            _ => Err(self
                .unexpected("an object key (a name or a quoted string)")
                .with_hint("objects are written {key: value, ...}")),
        }
    }

    /// A quoted string or a placeholder.
    /// `what` (shown only in the error) may be `format_args!`: nothing is formatted on
    /// the happy path.
    pub(crate) fn str_slot(&mut self, what: impl std::fmt::Display) -> KipResult<StrSlot> {
        if self.at_param() {
            return Ok(Slot::Param(self.param()?));
        }
        match self.peek_tok() {
            Tok::Str(_) => {
                let t = self.bump();
                match t.tok {
                    Tok::Str(s) => Ok(Slot::Literal(s, t.span)),
                    _ => Err(self.unexpected(&what.to_string())),
                }
            }
            Tok::Ident(w) => {
                let hint = format!("quote it: \"{w}\"");
                let mut e = self.unexpected(&what.to_string());
                if e.hint.is_none() {
                    e = e.with_hint(hint);
                }
                Err(e)
            }
            _ => Err(self.unexpected(&what.to_string())),
        }
    }

    /// The value after `LIMIT`: a positive integer or a placeholder.
    pub(crate) fn limit_value(&mut self) -> KipResult<Slot<u64>> {
        if self.at_param() {
            return Ok(Slot::Param(self.param()?));
        }
        match self.peek_tok().clone() {
            Tok::Num(n) => {
                let span = self.bump().span;
                match n.as_u64() {
                    Some(0) => Err(self
                        .error_at(ErrorCode::InvalidSyntax, span, "LIMIT 0 is not allowed")
                        .with_hint("LIMIT takes a positive integer; omit LIMIT to use the default page size")),
                    Some(v) => Ok(Slot::Literal(v, span)),
                    None => Err(self
                        .error_at(
                            ErrorCode::InvalidSyntax,
                            span,
                            format!("LIMIT must be a positive integer, found {n}"),
                        )
                        .with_hint("write LIMIT as a whole number such as LIMIT 20")),
                }
            }
            Tok::Str(_) => Err(self
                .unexpected("a positive integer or :placeholder after LIMIT")
                .with_hint(
                    "LIMIT takes a number, not a string: write LIMIT 10 or LIMIT :limit (unquoted)",
                )),
            _ => Err(self
                .unexpected("a positive integer or :placeholder after LIMIT")
                .with_hint("write LIMIT followed by a number, e.g. LIMIT 10")),
        }
    }

    /// The value after `CURSOR`: a string token or a placeholder.
    pub(crate) fn cursor_value(&mut self) -> KipResult<StrSlot> {
        if self.at_param() {
            return Ok(Slot::Param(self.param()?));
        }
        match self.peek_tok().clone() {
            Tok::Str(s) => {
                let span = self.bump().span;
                Ok(Slot::Literal(s, span))
            }
            _ => Err(self
                .unexpected("a quoted cursor token or :placeholder after CURSOR")
                .with_hint(
                    "pass the next_cursor string of the previous response, in double quotes",
                )),
        }
    }

    /// Optional `LIMIT` and `CURSOR` (in either order, each at most once).
    pub(crate) fn limit_cursor(&mut self) -> KipResult<(Option<Slot<u64>>, Option<StrSlot>)> {
        let mut limit = None;
        let mut cursor = None;
        loop {
            if self.at_kw("LIMIT") {
                if limit.is_some() {
                    return Err(self.duplicate_clause("LIMIT"));
                }
                self.bump();
                limit = Some(self.limit_value()?);
            } else if self.at_kw("CURSOR") {
                if cursor.is_some() {
                    return Err(self.duplicate_clause("CURSOR"));
                }
                self.bump();
                cursor = Some(self.cursor_value()?);
            } else {
                return Ok((limit, cursor));
            }
        }
    }

    pub(crate) fn duplicate_clause(&self, kw: &str) -> crate::error::KipError {
        self.error_at(
            ErrorCode::InvalidSyntax,
            self.peek().span,
            format!("{kw} appears twice"),
        )
        .with_hint(format!("write {kw} once"))
    }
}
