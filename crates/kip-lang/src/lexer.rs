//! The KIP lexer: turns command text into tokens with spans.
//!
//! Keywords are not special here: every word is an [`Tok::Ident`] and the parser decides
//! from context whether `LIMIT` is a keyword or an attribute key. Comments (`//` to end of
//! line) and whitespace are skipped.

use crate::error::{ErrorCode, KipError, KipResult};
use crate::span::{line_col, Span};

/// A token kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A bare word: keyword, key or identifier.
    Ident(String),
    /// A variable or handle `?name` (the name without `?`).
    Var(String),
    /// A JSON string literal, decoded.
    Str(String),
    /// A JSON number literal.
    Num(serde_json::Number),
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `,`
    Comma,
    /// `:`
    Colon,
    /// `;`
    Semicolon,
    /// `.`
    Dot,
    /// `|`
    Pipe,
    /// `!`
    Bang,
    /// `==`
    EqEq,
    /// `!=`
    NotEq,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `<=`
    Le,
    /// `>=`
    Ge,
    /// `&&`
    AndAnd,
    /// `||`
    OrOr,
    /// A `-` not followed by a digit: unary minus, produced only by the KIP 2.0 dialect
    /// (the 1.x lexer refuses a lone `-`).
    Minus,
    /// End of input.
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Var(s) => format!("'?{s}'"),
            Tok::Str(s) => {
                let shown: String = s.chars().take(40).collect();
                let more = if s.chars().count() > 40 { "..." } else { "" };
                format!("string \"{shown}{more}\"")
            }
            Tok::Num(n) => format!("number {n}"),
            Tok::LBrace => "'{'".into(),
            Tok::RBrace => "'}'".into(),
            Tok::LParen => "'('".into(),
            Tok::RParen => "')'".into(),
            Tok::LBracket => "'['".into(),
            Tok::RBracket => "']'".into(),
            Tok::Comma => "','".into(),
            Tok::Colon => "':'".into(),
            Tok::Semicolon => "';'".into(),
            Tok::Dot => "'.'".into(),
            Tok::Pipe => "'|'".into(),
            Tok::Bang => "'!'".into(),
            Tok::EqEq => "'=='".into(),
            Tok::NotEq => "'!='".into(),
            Tok::Lt => "'<'".into(),
            Tok::Gt => "'>'".into(),
            Tok::Le => "'<='".into(),
            Tok::Ge => "'>='".into(),
            Tok::AndAnd => "'&&'".into(),
            Tok::OrOr => "'||'".into(),
            Tok::Minus => "'-'".into(),
            Tok::Eof => "end of input".into(),
        }
    }
}

/// A token with its place in the source.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// The kind.
    pub tok: Tok,
    /// Where it is.
    pub span: Span,
}

/// True for a character that may start an identifier.
pub fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// True for a character that may continue an identifier.
pub fn is_ident_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// True when `s` is a valid KIP identifier (`[a-zA-Z_][a-zA-Z0-9_]*`).
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if is_ident_start(c) => chars.all(is_ident_continue),
        _ => false,
    }
}

/// A streaming lexer over `src[range]`: [`Lexer::next_token`] yields one token at a
/// time (the parser keeps only a two-token window, never the whole token vector).
pub(crate) struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// KIP 2.0 lexing: a lone `-` is [`Tok::Minus`] (unary minus of the 2.0 expression
    /// grammar) instead of an error. Everything else lexes alike in both dialects.
    v2: bool,
}

/// Splits `src` into tokens, ending with [`Tok::Eof`].
pub fn tokenize(src: &str) -> KipResult<Vec<Token>> {
    tokenize_range(src, 0..src.len())
}

/// Splits `src[range]` into tokens, ending with [`Tok::Eof`] at `range.end`. Spans (and
/// the line and column of errors) are positions in the whole `src`.
pub fn tokenize_range(src: &str, range: std::ops::Range<usize>) -> KipResult<Vec<Token>> {
    let mut out = Vec::with_capacity(range.len() / 4 + 1);
    for_each_token(src, range, |t| {
        out.push(t);
        Ok(())
    })?;
    Ok(out)
}

/// Calls `f` with each token of `src[range]` in order, the last one [`Tok::Eof`] at
/// `range.end`, without keeping them. A range that does not fall on character
/// boundaries is treated as empty.
pub fn for_each_token(
    src: &str,
    range: std::ops::Range<usize>,
    mut f: impl FnMut(Token) -> KipResult<()>,
) -> KipResult<()> {
    let mut lx = Lexer::new(src, range);
    loop {
        let t = lx.next_token()?;
        let eof = t.tok == Tok::Eof;
        f(t)?;
        if eof {
            return Ok(());
        }
    }
}

impl<'a> Lexer<'a> {
    /// A lexer over `src[range]`; positions stay those of the whole `src`. A range that
    /// does not fall on character boundaries is treated as empty.
    pub(crate) fn new(src: &'a str, range: std::ops::Range<usize>) -> Lexer<'a> {
        let head = src.get(..range.end).unwrap_or("");
        Lexer {
            src: head,
            bytes: head.as_bytes(),
            pos: if head.is_char_boundary(range.start) {
                range.start.min(head.len())
            } else {
                head.len()
            },
            v2: false,
        }
    }

    /// A KIP 2.0 lexer ([`Tok::Minus`] for a lone `-`).
    pub(crate) fn new_v2(src: &'a str, range: std::ops::Range<usize>) -> Lexer<'a> {
        Lexer {
            v2: true,
            ..Lexer::new(src, range)
        }
    }

    fn err(&self, code: ErrorCode, at: usize, msg: impl Into<String>) -> KipError {
        let (l, c) = line_col(self.src, at);
        KipError::new(code, format!("{} at line {l}, column {c}", msg.into())).at(l, c)
    }

    fn peek_char(&self) -> Option<char> {
        match self.bytes.get(self.pos) {
            Some(&b) if b.is_ascii() => Some(char::from(b)),
            Some(_) => self.src.get(self.pos..).and_then(|s| s.chars().next()),
            None => None,
        }
    }

    fn char_at(&self, at: usize) -> Option<char> {
        self.src.get(at..).and_then(|s| s.chars().next())
    }

    fn skip_trivia(&mut self) {
        loop {
            // ASCII whitespace, the common case, a byte at a time.
            while matches!(self.bytes.get(self.pos), Some(b' ' | b'\n' | b'\t' | b'\r')) {
                self.pos += 1;
            }
            match self.peek_char() {
                Some(c) if c.is_whitespace() => self.pos += c.len_utf8(),
                Some('/') if self.bytes.get(self.pos + 1) == Some(&b'/') => {
                    match self.src[self.pos..].find('\n') {
                        Some(i) => self.pos += i + 1,
                        None => self.pos = self.src.len(),
                    }
                }
                _ => return,
            }
        }
    }

    fn ident_end(&self, from: usize) -> usize {
        let mut end = from;
        while let Some(&b) = self.bytes.get(end) {
            if b.is_ascii_alphanumeric() || b == b'_' {
                end += 1;
            } else {
                break;
            }
        }
        end
    }

    /// The next token; after the end of the range, [`Tok::Eof`] again and again.
    pub(crate) fn next_token(&mut self) -> KipResult<Token> {
        self.skip_trivia();
        let start = self.pos;
        let Some(c) = self.peek_char() else {
            return Ok(Token {
                tok: Tok::Eof,
                span: Span::new(start, start),
            });
        };
        let two = |lx: &mut Lexer, tok: Tok| {
            lx.pos += 2;
            Ok(Token {
                tok,
                span: Span::new(start, start + 2),
            })
        };
        let next = self.bytes.get(start + 1).copied();
        let single = match c {
            '{' => Some(Tok::LBrace),
            '}' => Some(Tok::RBrace),
            '(' => Some(Tok::LParen),
            ')' => Some(Tok::RParen),
            '[' => Some(Tok::LBracket),
            ']' => Some(Tok::RBracket),
            ',' => Some(Tok::Comma),
            ':' => Some(Tok::Colon),
            ';' => Some(Tok::Semicolon),
            '.' => Some(Tok::Dot),
            _ => None,
        };
        if let Some(tok) = single {
            self.pos += 1;
            return Ok(Token {
                tok,
                span: Span::new(start, start + 1),
            });
        }
        match c {
            '=' if next == Some(b'=') => two(self, Tok::EqEq),
            '=' => Err(self
                .err(ErrorCode::InvalidSyntax, start, "unexpected '='")
                .with_hint("a single '=' is not a KIP operator: compare with '==' (FILTER(?x.name == \"A\")); write attributes and object entries as key: value")),
            '!' if next == Some(b'=') => two(self, Tok::NotEq),
            '!' => {
                self.pos += 1;
                Ok(Token {
                    tok: Tok::Bang,
                    span: Span::new(start, start + 1),
                })
            }
            '<' if next == Some(b'=') => two(self, Tok::Le),
            '>' if next == Some(b'=') => two(self, Tok::Ge),
            '<' | '>' => {
                self.pos += 1;
                Ok(Token {
                    tok: if c == '<' { Tok::Lt } else { Tok::Gt },
                    span: Span::new(start, start + 1),
                })
            }
            '&' if next == Some(b'&') => two(self, Tok::AndAnd),
            '&' => Err(self
                .err(ErrorCode::InvalidSyntax, start, "unexpected '&'")
                .with_hint("logical AND is '&&'")),
            '|' if next == Some(b'|') => two(self, Tok::OrOr),
            '|' => {
                self.pos += 1;
                Ok(Token {
                    tok: Tok::Pipe,
                    span: Span::new(start, start + 1),
                })
            }
            '"' => self.string(),
            '\'' => Err(self
                .err(
                    ErrorCode::InvalidSyntax,
                    start,
                    "single-quoted strings are not allowed",
                )
                .with_hint("KIP values are JSON: write strings in double quotes, e.g. \"Drug\"")),
            '?' => self.variable(),
            '-' if self.v2 && !next.is_some_and(|b| b.is_ascii_digit()) => {
                self.pos += 1;
                Ok(Token {
                    tok: Tok::Minus,
                    span: Span::new(start, start + 1),
                })
            }
            '-' | '0'..='9' => self.number(),
            c if is_ident_start(c) => {
                let end = self.ident_end(start);
                self.pos = end;
                Ok(Token {
                    tok: Tok::Ident(self.src[start..end].to_string()),
                    span: Span::new(start, end),
                })
            }
            other => Err(self
                .err(
                    ErrorCode::InvalidSyntax,
                    start,
                    format!("unexpected character {other:?}"),
                )
                .with_hint(
                    "check the command for stray characters; strings must be in double quotes",
                )),
        }
    }

    fn variable(&mut self) -> KipResult<Token> {
        let start = self.pos;
        let name_start = start + 1;
        match self.char_at(name_start) {
            Some(c) if is_ident_start(c) => {
                let end = self.ident_end(name_start);
                self.pos = end;
                Ok(Token {
                    tok: Tok::Var(self.src[name_start..end].to_string()),
                    span: Span::new(start, end),
                })
            }
            Some(c) if c.is_ascii_digit() => {
                let end = self.ident_end(name_start);
                Err(self
                    .err(
                        ErrorCode::InvalidIdentifier,
                        start,
                        format!(
                            "invalid variable name '?{}': a name must not start with a digit",
                            &self.src[name_start..end]
                        ),
                    )
                    .with_hint("variable names match [a-zA-Z_][a-zA-Z0-9_]*, e.g. ?drug or ?x1"))
            }
            _ => Err(self
                .err(
                    ErrorCode::InvalidSyntax,
                    start,
                    "'?' must be followed by a variable name",
                )
                .with_hint("write a variable as ?name, e.g. ?drug")),
        }
    }

    fn number(&mut self) -> KipResult<Token> {
        let start = self.pos;
        let mut end = start;
        if self.bytes.get(end) == Some(&b'-') {
            end += 1;
            if !self.bytes.get(end).is_some_and(|b| b.is_ascii_digit()) {
                return Err(self
                    .err(
                        ErrorCode::InvalidSyntax,
                        start,
                        "'-' must be followed by a number",
                    )
                    .with_hint("negative numbers are written like -1.5"));
            }
        }
        let digits = |end: &mut usize, bytes: &[u8]| {
            while bytes.get(*end).is_some_and(|b| b.is_ascii_digit()) {
                *end += 1;
            }
        };
        digits(&mut end, self.bytes);
        if self.bytes.get(end) == Some(&b'.')
            && self.bytes.get(end + 1).is_some_and(|b| b.is_ascii_digit())
        {
            end += 1;
            digits(&mut end, self.bytes);
        }
        if matches!(self.bytes.get(end), Some(b'e') | Some(b'E')) {
            let mut e = end + 1;
            if matches!(self.bytes.get(e), Some(b'+') | Some(b'-')) {
                e += 1;
            }
            if self.bytes.get(e).is_some_and(|b| b.is_ascii_digit()) {
                end = e;
                digits(&mut end, self.bytes);
            }
        }
        if self
            .char_at(end)
            .is_some_and(|c| is_ident_start(c) || c.is_ascii_digit())
        {
            let word_end = self.ident_end(end);
            return Err(self
                .err(
                    ErrorCode::InvalidIdentifier,
                    start,
                    format!(
                        "invalid identifier '{}': identifiers must not start with a digit",
                        &self.src[start..word_end]
                    ),
                )
                .with_hint(format!(
                    "identifiers must not start with a digit ([a-zA-Z_][a-zA-Z0-9_]*): rename '{w}' or, for an object key, quote it as \"{w}\"",
                    w = &self.src[start..word_end]
                )));
        }
        let text = &self.src[start..end];
        match serde_json::from_str::<serde_json::Number>(text) {
            Ok(n) => {
                self.pos = end;
                Ok(Token {
                    tok: Tok::Num(n),
                    span: Span::new(start, end),
                })
            }
            Err(e) => Err(self
                .err(
                    ErrorCode::InvalidSyntax,
                    start,
                    format!("invalid number '{text}' ({e})"),
                )
                .with_hint("numbers follow JSON: no leading zeros, finite and within ±1.7e308")),
        }
    }

    fn string(&mut self) -> KipResult<Token> {
        let start = self.pos;
        let mut i = start + 1;
        let mut out = String::new();
        loop {
            // Copy the run up to the next quote or backslash (or, in 2.0, control character)
            // in one piece: all are ASCII,
            // so they never occur inside a multi-byte character and the run ends on a
            // character boundary.
            let run = self.bytes[i.min(self.bytes.len())..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || (self.v2 && b < 0x20))
                .map_or(self.bytes.len(), |n| i + n);
            if run > i {
                out.push_str(&self.src[i..run]);
                i = run;
            }
            let Some(c) = self.char_at(i) else {
                return Err(self
                    .err(ErrorCode::InvalidSyntax, start, "unterminated string")
                    .with_hint(
                        "close the string with a double quote; escape inner quotes as \\\"",
                    ));
            };
            match c {
                '"' => {
                    self.pos = i + 1;
                    return Ok(Token {
                        tok: Tok::Str(out),
                        span: Span::new(start, i + 1),
                    });
                }
                '\\' => {
                    let esc_at = i;
                    let Some(e) = self.char_at(i + 1) else {
                        return Err(self
                            .err(ErrorCode::InvalidSyntax, start, "unterminated string")
                            .with_hint("close the string with a double quote"));
                    };
                    i += 2;
                    match e {
                        '"' => out.push('"'),
                        '\\' => out.push('\\'),
                        '/' => out.push('/'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'u' => {
                            let hi = self.hex4(i, esc_at)?;
                            i += 4;
                            let ch = if (0xD800..0xDC00).contains(&hi) {
                                if self.bytes.get(i) == Some(&b'\\')
                                    && self.bytes.get(i + 1) == Some(&b'u')
                                {
                                    let lo = self.hex4(i + 2, i)?;
                                    if !(0xDC00..0xE000).contains(&lo) {
                                        return Err(self.bad_surrogate(esc_at));
                                    }
                                    i += 6;
                                    let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                    char::from_u32(cp).ok_or_else(|| self.bad_surrogate(esc_at))?
                                } else {
                                    return Err(self.bad_surrogate(esc_at));
                                }
                            } else if (0xDC00..0xE000).contains(&hi) {
                                return Err(self.bad_surrogate(esc_at));
                            } else {
                                char::from_u32(hi).ok_or_else(|| self.bad_surrogate(esc_at))?
                            };
                            out.push(ch);
                        }
                        other => {
                            return Err(self
                                .err(
                                    ErrorCode::InvalidSyntax,
                                    esc_at,
                                    format!("invalid escape '\\{other}' in string"),
                                )
                                .with_hint(
                                    "valid escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX",
                                ))
                        }
                    }
                }
                c if self.v2 && c < ' ' => {
                    return Err(self
                        .err(
                            ErrorCode::InvalidSyntax,
                            i,
                            format!("control character U+{:04X} inside a string", u32::from(c)),
                        )
                        .with_hint(
                            "KIP 2.0 strings are JSON strings: write a line break as \\n, a tab as \\t, other control characters as \\u00XX",
                        ));
                }
                c => {
                    out.push(c);
                    i += c.len_utf8();
                }
            }
        }
    }

    fn hex4(&self, at: usize, esc_at: usize) -> KipResult<u32> {
        let digits = self
            .src
            .get(at..at + 4)
            .filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()));
        match digits {
            Some(d) => u32::from_str_radix(d, 16).map_err(|_| self.bad_unicode(esc_at)),
            None => Err(self.bad_unicode(esc_at)),
        }
    }

    fn bad_unicode(&self, at: usize) -> KipError {
        self.err(ErrorCode::InvalidSyntax, at, "invalid \\u escape in string")
            .with_hint("\\u must be followed by exactly four hex digits, e.g. \\u00e9")
    }

    fn bad_surrogate(&self, at: usize) -> KipError {
        self.err(
            ErrorCode::InvalidSyntax,
            at,
            "unpaired UTF-16 surrogate in \\u escape",
        )
        .with_hint("a character above U+FFFF is written as a surrogate pair, e.g. \\ud83d\\ude00")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s)
            .expect("lex")
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    #[test]
    fn lexes_operators_and_words() {
        assert_eq!(
            toks("FIND(?x.name) == != <= >= && || ! | < >"),
            vec![
                Tok::Ident("FIND".into()),
                Tok::LParen,
                Tok::Var("x".into()),
                Tok::Dot,
                Tok::Ident("name".into()),
                Tok::RParen,
                Tok::EqEq,
                Tok::NotEq,
                Tok::Le,
                Tok::Ge,
                Tok::AndAnd,
                Tok::OrOr,
                Tok::Bang,
                Tok::Pipe,
                Tok::Lt,
                Tok::Gt,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn decodes_json_string_escapes_and_surrogates() {
        assert_eq!(
            toks(r#""a\"b\\c\/\n\t\u0041\ud83d\ude00""#),
            vec![Tok::Str("a\"b\\c/\n\tA😀".into()), Tok::Eof]
        );
        for bad in [
            r#""\ud83d""#,
            r#""\ude00x""#,
            r#""\u12""#,
            r#""\q""#,
            "\"abc",
        ] {
            let e = tokenize(bad).expect_err(bad);
            assert_eq!(e.code, ErrorCode::InvalidSyntax, "{bad}");
        }
    }

    #[test]
    fn comments_are_skipped_but_not_inside_strings() {
        assert_eq!(
            toks("// a \"quote\n\"http://x\" // tail"),
            vec![Tok::Str("http://x".into()), Tok::Eof]
        );
    }

    #[test]
    fn numbers_follow_json() {
        assert_eq!(
            toks("-1.5e3 0 42"),
            vec![
                Tok::Num(serde_json::Number::from_f64(-1500.0).expect("finite")),
                Tok::Num(0.into()),
                Tok::Num(42.into()),
                Tok::Eof
            ]
        );
        assert_eq!(
            tokenize("1e400").expect_err("overflow").code,
            ErrorCode::InvalidSyntax
        );
        assert_eq!(
            tokenize("1st").expect_err("digit ident").code,
            ErrorCode::InvalidIdentifier
        );
        assert_eq!(
            tokenize("?1x").expect_err("digit var").code,
            ErrorCode::InvalidIdentifier
        );
        assert_eq!(
            tokenize("? x").expect_err("bare ?").code,
            ErrorCode::InvalidSyntax
        );
    }

    #[test]
    fn errors_carry_line_and_column() {
        let e = tokenize("FIND\n  'x'").expect_err("single quote");
        assert_eq!((e.line, e.column), (Some(2), Some(3)));
        assert!(e.hint.expect("hint").contains("double quotes"));
    }
}
