//! The KIP parser: recursive descent over the token stream into [`crate::ast`].
//!
//! One module per language part: [`kql`] (FIND, WHERE patterns, FILTER expressions),
//! [`kml`] (UPSERT, DELETE), [`meta`] (DESCRIBE, SEARCH) and [`values`] (JSON values and
//! placeholders). This file holds the cursor over tokens, the error helpers and the
//! nesting guard shared by all of them.

mod kml;
mod kql;
mod meta;
mod rc11;
pub(crate) mod v2;
mod values;

use crate::ast::{Command, WhereClause};
use crate::error::{ErrorCode, KipError, KipResult};
use crate::lexer::{Lexer, Tok, Token};
use crate::span::{line_col, Span};
use std::collections::VecDeque;

/// Limits that keep parsing bounded whatever the input.
#[derive(Debug, Clone, Copy)]
pub struct ParseOptions {
    /// Maximum nesting of braces, brackets, parentheses, nested propositions and
    /// FILTER sub-expressions. Deeper input is `KIP_1001`, never a stack overflow.
    pub max_depth: usize,
    /// Maximum size of the command text in bytes (`KIP_4002` beyond).
    pub max_input_bytes: usize,
    /// Maximum number of `WHERE` clauses in one command (patterns, FILTER, NOT,
    /// OPTIONAL and UNION blocks, at every nesting level; `KIP_4002` beyond). The query
    /// engine matches clauses by nested calls, so this bounds its recursion and its
    /// planning time whatever the shape of the query (a flat chain of thousands of
    /// patterns included).
    pub max_clauses: usize,
    /// Maximum number of operators (`||`, `&&`, comparisons, `!`, function calls) over
    /// all FILTER expressions of one command (`KIP_4002` beyond). A flat chain of `||`
    /// is a deep tree however few parentheses it has: this bounds it.
    pub max_operators: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            max_depth: 64,
            max_input_bytes: 16 * 1024 * 1024,
            max_clauses: 256,
            max_operators: 512,
        }
    }
}

impl ParseOptions {
    /// The limits for capsules loaded by the user (`kip import`, `kip capsule load`):
    /// deeper nesting, so that every value the engine accepts re-imports from an
    /// export (a JSON parameter may nest 128 levels, serde_json's own limit, and the
    /// statement around it adds a few).
    pub fn capsule() -> ParseOptions {
        ParseOptions {
            max_depth: 192,
            ..ParseOptions::default()
        }
    }
}

/// Parses exactly one KIP command (a trailing `;` is allowed).
pub fn parse_command(src: &str) -> KipResult<Command> {
    parse_command_with(src, ParseOptions::default())
}

/// [`parse_command`] with explicit limits.
pub fn parse_command_with(src: &str, opts: ParseOptions) -> KipResult<Command> {
    Parser::new(src, opts)?.run(|p| {
        if p.at_eof() {
            return Err(p.empty_input());
        }
        let cmd = p.command()?;
        p.eat(&Tok::Semicolon);
        if !p.at_eof() {
            let hint = if p.at_kw("GROUP") || p.at_kw("HAVING") {
                "KIP has no GROUP BY or HAVING: FIND groups by its non-aggregate values, e.g. FIND(?c.name, COUNT(?t)) WHERE { ... } ORDER BY COUNT(?t) DESC"
            } else if p.at_kw("OFFSET") || p.at_kw("SKIP") {
                "KIP pages with cursors, not offsets: send LIMIT n, then the same query with CURSOR \"<next_cursor of the previous response>\""
            } else if p.at_kw("EXPECT") {
                // Not after an UPSERT: its guards sit inside the blocks, so a trailing
                // one follows an UPDATE, DELETE, MERGE or query.
                "EXPECT VERSION guards UPSERT blocks only, right after a block's identity; guard an UPDATE's or DELETE's targets with FILTER conditions in its WHERE (e.g. FILTER(?x.metadata._version == 3))"
            } else if p.at_statement_keyword() {
                "a `command` holds one KIP command: send several as a `commands` array (or load them as a capsule)"
            } else {
                "remove the extra text after the end of the command; check that braces and parentheses are balanced"
            };
            return Err(p.unexpected("the end of the command").with_hint(hint));
        }
        Ok(cmd)
    })
}

/// Parses a script: one or more commands in sequence (a capsule file such as
/// `Genesis.kip` holds several `UPSERT`s). Commands may be separated by `;`.
pub fn parse_script(src: &str) -> KipResult<Vec<Command>> {
    parse_script_with(src, ParseOptions::default())
}

/// [`parse_script`] with explicit limits.
pub fn parse_script_with(src: &str, opts: ParseOptions) -> KipResult<Vec<Command>> {
    Parser::new(src, opts)?.run(|p| {
        if p.at_eof() {
            return Err(p.empty_input());
        }
        let mut out = Vec::new();
        while !p.at_eof() {
            out.push(p.command()?);
            while p.eat(&Tok::Semicolon) {}
        }
        Ok(out)
    })
}

/// The byte range of each command in a script, found with the lexer alone (nothing is
/// parsed or kept): a command starts at a statement keyword (`FIND`, `UPSERT`, `DELETE`,
/// `DESCRIBE`, `SEARCH`) outside any brackets and ends where the next one starts or at
/// a `;` (included). A large capsule can then be parsed and run one command at a time,
/// each within [`ParseOptions::max_input_bytes`], while errors keep their line and
/// column in the whole script ([`parse_script_part`]). Text that is not a command (a
/// stray word, a leading `;`) becomes a range of its own, so parsing it reports the
/// error.
pub fn script_ranges(src: &str) -> KipResult<Vec<std::ops::Range<usize>>> {
    let mut ranges = Vec::new();
    let mut start: Option<usize> = None;
    let mut last_end = 0;
    let mut depth = 0usize;
    crate::lexer::for_each_token(src, 0..src.len(), |t| {
        match &t.tok {
            Tok::Eof => {
                if let Some(s) = start.take() {
                    ranges.push(s..last_end);
                }
                return Ok(());
            }
            Tok::Semicolon if depth == 0 => {
                match start.take() {
                    Some(s) => ranges.push(s..t.span.end),
                    // Separators between commands are allowed; one before any is not.
                    None if ranges.is_empty() => ranges.push(t.span.start..t.span.end),
                    None => {}
                }
                last_end = t.span.end;
                return Ok(());
            }
            Tok::Ident(w) if depth == 0 && STATEMENT_KEYWORDS.contains(&w.as_str()) => {
                if let Some(s) = start.replace(t.span.start) {
                    ranges.push(s..last_end);
                }
            }
            Tok::LBrace | Tok::LParen | Tok::LBracket => depth += 1,
            Tok::RBrace | Tok::RParen | Tok::RBracket => depth = depth.saturating_sub(1),
            _ => {}
        }
        if start.is_none() {
            start = Some(t.span.start);
        }
        last_end = t.span.end;
        Ok(())
    })?;
    Ok(ranges)
}

/// Parses the one command in `src[range]` (a range from [`script_ranges`]); positions
/// in errors are in the whole `src`.
pub fn parse_script_part(
    src: &str,
    range: std::ops::Range<usize>,
    opts: ParseOptions,
) -> KipResult<Command> {
    if range.len() > opts.max_input_bytes {
        let (l, _) = crate::span::line_col(src, range.start);
        return Err(KipError::new(
            ErrorCode::ResourceExhausted,
            format!(
                "the command at line {l} is {} bytes, more than the limit of {} bytes",
                range.len(),
                opts.max_input_bytes
            ),
        )
        .at(l, 1)
        .with_hint("split it into several smaller commands"));
    }
    Parser::over(src, range, opts).run(|p| {
        if p.at_eof() {
            return Err(p.empty_input());
        }
        let cmd = p.command()?;
        p.eat(&Tok::Semicolon);
        if !p.at_eof() {
            return Err(p.unexpected("the end of the command"));
        }
        Ok(cmd)
    })
}

/// Parses the inside of a `WHERE { ... }` body (patterns, FILTER, NOT, OPTIONAL, UNION)
/// without the braces. Useful for checking pattern fragments on their own.
pub fn parse_where_clauses(src: &str) -> KipResult<Vec<WhereClause>> {
    Parser::new(src, ParseOptions::default())?.run(|p| p.clauses_until(&Tok::Eof))
}

/// Parses raw bytes: invalid UTF-8 is `KIP_1001` naming the byte offset.
pub fn parse_script_bytes(bytes: &[u8]) -> KipResult<Vec<Command>> {
    parse_script(utf8(bytes)?)
}

/// Checks that `bytes` is UTF-8, as a KIP error otherwise.
pub fn utf8(bytes: &[u8]) -> KipResult<&str> {
    std::str::from_utf8(bytes).map_err(|e| {
        KipError::syntax(format!(
            "the command is not valid UTF-8 (invalid byte at offset {})",
            e.valid_up_to()
        ))
        .with_hint("send the command text as UTF-8")
    })
}

/// The parser's cursor over a token stream. Tokens are lexed as the parser moves on,
/// into a window of the current and the next token (the most any rule looks ahead).
///
/// Error precedence is that of lexing the whole input first: a lexing error anywhere in
/// the input (the first one) is reported rather than any parse error ([`Parser::run`]).
pub(crate) struct Parser<'a> {
    src: &'a str,
    lexer: Lexer<'a>,
    /// `window[0]` is the current token, `window[1]` the next; shorter only once it ends
    /// with [`Tok::Eof`], which then stays.
    window: VecDeque<Token>,
    /// Span of the last consumed token.
    prev: Option<Span>,
    /// The lexing error that ended the stream (it was replaced by [`Tok::Eof`]).
    lex_error: Option<KipError>,
    depth: usize,
    /// `WHERE` clauses of the current command ([`ParseOptions::max_clauses`]).
    clauses: usize,
    /// FILTER operators of the current command ([`ParseOptions::max_operators`]).
    operators: usize,
    opts: ParseOptions,
}

pub(crate) const STATEMENT_KEYWORDS: [&str; 8] = [
    "FIND", "UPSERT", "UPDATE", "MERGE", "DELETE", "DESCRIBE", "SEARCH", "EXPORT",
];

/// The command list of error messages and hints.
const COMMANDS: &str = "FIND, UPSERT, UPDATE, MERGE, DELETE, DESCRIBE, SEARCH or EXPORT";

impl<'a> Parser<'a> {
    fn new(src: &'a str, opts: ParseOptions) -> KipResult<Self> {
        if src.len() > opts.max_input_bytes {
            return Err(KipError::new(
                ErrorCode::ResourceExhausted,
                format!(
                    "the command is {} bytes, more than the limit of {} bytes",
                    src.len(),
                    opts.max_input_bytes
                ),
            )
            .with_hint("split the work into several smaller commands or capsules"));
        }
        Ok(Parser::over(src, 0..src.len(), opts))
    }

    /// A parser of `src[range]` (positions in errors are in the whole `src`).
    fn over(src: &'a str, range: std::ops::Range<usize>, opts: ParseOptions) -> Self {
        Parser::with_lexer(src, Lexer::new(src, range), opts)
    }

    /// A parser of `src` over a given lexer (the 1.x one or the 2.0 one).
    fn with_lexer(src: &'a str, lexer: Lexer<'a>, opts: ParseOptions) -> Self {
        let mut p = Parser {
            src,
            lexer,
            window: VecDeque::with_capacity(3),
            prev: None,
            lex_error: None,
            depth: 0,
            clauses: 0,
            operators: 0,
            opts,
        };
        p.fill();
        p
    }

    /// Runs a parse to its result, giving lexing errors precedence: the outcome is the
    /// one of tokenizing the whole input before parsing. A lexing error met on the way
    /// wins; after a parse error the rest of the input is lexed and its first lexing
    /// error, if any, wins.
    fn run<T>(mut self, parse: impl FnOnce(&mut Self) -> KipResult<T>) -> KipResult<T> {
        let out = parse(&mut self);
        if let Some(e) = self.lex_error.take() {
            return Err(e);
        }
        if out.is_err() && !self.window.back().is_some_and(|t| t.tok == Tok::Eof) {
            loop {
                match self.lexer.next_token() {
                    Ok(t) if t.tok == Tok::Eof => break,
                    Ok(_) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        out
    }

    /// Lexes until the window holds two tokens or ends with [`Tok::Eof`].
    fn fill(&mut self) {
        while self.window.len() < 2 && !self.window.back().is_some_and(|t| t.tok == Tok::Eof) {
            let t = match self.lexer.next_token() {
                Ok(t) => t,
                Err(e) => {
                    let at = self.window.back().map_or(0, |t| t.span.end);
                    self.lex_error = Some(e);
                    Token {
                        tok: Tok::Eof,
                        span: Span::new(at, at),
                    }
                }
            };
            self.window.push_back(t);
        }
    }

    fn empty_input(&self) -> KipError {
        KipError::syntax("the command is empty")
            .at(1, 1)
            .with_hint("start with FIND, UPSERT, DELETE, DESCRIBE or SEARCH")
    }

    // ---- cursor ------------------------------------------------------------------

    pub(crate) fn peek(&self) -> &Token {
        &self.window[0]
    }

    pub(crate) fn peek_tok(&self) -> &Tok {
        &self.peek().tok
    }

    /// The token `n` places ahead (0 is the current one; at most 1), or the final
    /// [`Tok::Eof`].
    pub(crate) fn peek_token(&self, n: usize) -> &Token {
        let last = self.window.len() - 1;
        &self.window[n.min(last)]
    }

    pub(crate) fn peek_nth(&self, n: usize) -> &Tok {
        &self.peek_token(n).tok
    }

    /// Consumes the current token (moved out: the parser never looks back at a consumed
    /// token's kind, only at its span, [`Parser::prev_span`]). The end-of-input token
    /// stays (and is not a consumed token).
    pub(crate) fn bump(&mut self) -> Token {
        if self.window.len() > 1 {
            let t = self.window.pop_front().unwrap_or_else(|| Token {
                tok: Tok::Eof,
                span: Span::new(0, 0),
            });
            self.prev = Some(t.span);
            self.fill();
            t
        } else {
            self.peek().clone()
        }
    }

    pub(crate) fn at_eof(&self) -> bool {
        matches!(self.peek_tok(), Tok::Eof)
    }

    /// Span of the previously consumed token.
    pub(crate) fn prev_span(&self) -> Span {
        self.prev.unwrap_or(Span::new(0, 0))
    }

    pub(crate) fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek_tok() == tok {
            self.bump();
            true
        } else {
            false
        }
    }

    pub(crate) fn at_kw(&self, kw: &str) -> bool {
        matches!(self.peek_tok(), Tok::Ident(s) if s == kw)
    }

    pub(crate) fn eat_kw(&mut self, kw: &str) -> bool {
        if self.at_kw(kw) {
            self.bump();
            true
        } else {
            false
        }
    }

    pub(crate) fn at_statement_keyword(&self) -> bool {
        STATEMENT_KEYWORDS.iter().any(|k| self.at_kw(k))
    }

    pub(crate) fn expect(&mut self, tok: &Tok, what: &str) -> KipResult<Span> {
        if self.peek_tok() == tok {
            return Ok(self.bump().span);
        }
        let mut e = self.unexpected(what);
        if e.hint.is_none() {
            let hint = match tok {
                Tok::RParen => Some("a '(' is not closed: check that every '(' has a matching ')'"),
                Tok::RBrace => Some("a '{' is not closed: check that every '{' has a matching '}'"),
                Tok::RBracket => {
                    Some("a '[' is not closed: check that every '[' has a matching ']'")
                }
                Tok::LBrace => Some("a block or object starts with '{'"),
                Tok::LParen => Some("a function, FIND or proposition clause starts with '('"),
                Tok::Comma => Some("separate items with ','"),
                Tok::Colon => Some("write entries as key: value"),
                _ => None,
            };
            if let Some(h) = hint {
                e = e.with_hint(h);
            }
        }
        Err(e)
    }

    /// Expects the `close` token ending a comma-separated list. When the next token
    /// could start another item, the likely slip is a missing comma, and `comma_hint`
    /// replaces the generic "not closed" hint.
    pub(crate) fn expect_list_end(
        &mut self,
        close: &Tok,
        what: &str,
        comma_hint: &str,
    ) -> KipResult<Span> {
        // A keyword (`WHERE` after `FIND(?x`) means the list was left open instead.
        let missing_comma = match self.peek_tok() {
            Tok::Ident(w) => !is_known_keyword(w),
            Tok::Str(_) | Tok::Var(_) | Tok::Num(_) | Tok::LBrace | Tok::LBracket => true,
            _ => false,
        };
        self.expect(close, what).map_err(|e| {
            if missing_comma {
                e.with_hint(comma_hint)
            } else {
                e
            }
        })
    }

    pub(crate) fn expect_kw(&mut self, kw: &str, hint: &str) -> KipResult<Span> {
        if self.at_kw(kw) {
            Ok(self.bump().span)
        } else {
            let mut e = self.unexpected(&format!("keyword {kw}"));
            if e.hint.is_none() {
                e = e.with_hint(hint.to_string());
            }
            Err(e)
        }
    }

    // ---- errors ------------------------------------------------------------------

    pub(crate) fn error_at(&self, code: ErrorCode, span: Span, msg: impl Into<String>) -> KipError {
        let (l, c) = line_col(self.src, span.start);
        KipError::new(code, format!("{} at line {l}, column {c}", msg.into())).at(l, c)
    }

    /// `KIP_1001` "expected X, found Y" at the current token, with a hint inferred from
    /// what was found where one applies.
    pub(crate) fn unexpected(&self, expected: &str) -> KipError {
        let t = self.peek();
        let found = t.tok.describe();
        let mut e = self.error_at(
            ErrorCode::InvalidSyntax,
            t.span,
            format!("expected {expected}, found {found}"),
        );
        e.found = Some(found);
        e.expected = Some(expected.to_string());
        if let Some(h) = self.hint_for_found(&t.tok) {
            e = e.with_hint(h);
        }
        e
    }

    fn hint_for_found(&self, tok: &Tok) -> Option<String> {
        match tok {
            Tok::Eof => Some(
                "the command ended early: check for a missing '}', ')' or a missing clause".into(),
            ),
            Tok::Ident(w) if w == "AND" || w == "and" => {
                Some("use && for logical AND in FILTER".into())
            }
            Tok::Ident(w) if w == "OR" || w == "or" => {
                Some("use || for logical OR in FILTER".into())
            }
            Tok::Ident(w)
                if w == "TRUE" || w == "FALSE" || w == "NULL" || w == "True" || w == "False" =>
            {
                Some(format!("JSON literals are lowercase: {}", w.to_lowercase()))
            }
            Tok::Ident(w) => {
                let upper = w.to_uppercase();
                if upper != *w && is_known_keyword(&upper) {
                    Some(format!("KIP keywords are uppercase: write {upper}"))
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    // ---- nesting guard -------------------------------------------------------------

    pub(crate) fn enter(&mut self) -> KipResult<()> {
        self.depth += 1;
        if self.depth > self.opts.max_depth {
            let span = self.peek().span;
            return Err(self
                .error_at(
                    ErrorCode::InvalidSyntax,
                    span,
                    format!("nesting deeper than {} levels", self.opts.max_depth),
                )
                .with_hint("flatten the command: bind intermediate results to variables instead of nesting"));
        }
        Ok(())
    }

    pub(crate) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Counts one `WHERE` clause of the current command against
    /// [`ParseOptions::max_clauses`].
    pub(crate) fn count_clause(&mut self) -> KipResult<()> {
        self.clauses += 1;
        if self.clauses > self.opts.max_clauses {
            let span = self.peek().span;
            return Err(self
                .error_at(
                    ErrorCode::ResourceExhausted,
                    span,
                    format!(
                        "the command has more than {} WHERE clauses (patterns, FILTER, NOT, OPTIONAL and UNION blocks count, at every level)",
                        self.opts.max_clauses
                    ),
                )
                .with_hint("split the query into several smaller FINDs, passing the ids one returns as parameters of the next"));
        }
        Ok(())
    }

    /// Counts one FILTER operator of the current command against
    /// [`ParseOptions::max_operators`].
    pub(crate) fn count_operator(&mut self, at: Span) -> KipResult<()> {
        self.operators += 1;
        if self.operators > self.opts.max_operators {
            return Err(self
                .error_at(
                    ErrorCode::ResourceExhausted,
                    at,
                    format!(
                        "the command's FILTER expressions have more than {} operators",
                        self.opts.max_operators
                    ),
                )
                .with_hint("test a value against a list with IN(?x.name, [\"a\", \"b\", ...]) instead of a chain of || comparisons, or split the query"));
        }
        Ok(())
    }

    // ---- statements ----------------------------------------------------------------

    fn command(&mut self) -> KipResult<Command> {
        self.clauses = 0;
        self.operators = 0;
        match self.peek_tok().clone() {
            Tok::Ident(w) => match w.as_str() {
                "FIND" => self.find().map(Command::Find),
                "UPSERT" => self.upsert().map(Command::Upsert),
                "DELETE" => self.delete().map(Command::Delete),
                "UPDATE" => self.update().map(Command::Update),
                "MERGE" => self.merge().map(Command::Merge),
                "EXPORT" => self.export().map(Command::Export),
                "DESCRIBE" => self.describe().map(Command::Describe),
                "SEARCH" => self.search().map(Command::Search),
                other => {
                    let mut e = self.unexpected(&format!("a KIP command ({COMMANDS})"));
                    let upper = other.to_uppercase();
                    if e.hint.is_none() {
                        let h = if STATEMENT_KEYWORDS.contains(&upper.as_str()) {
                            format!("keywords are written in capitals: {upper}")
                        } else if ["SELECT", "MATCH", "INSERT", "CREATE"].contains(&upper.as_str())
                        {
                            format!("KIP has no {upper}: query with FIND(...) WHERE {{ ... }} and write with UPSERT {{ ... }} (or UPDATE for bulk changes)")
                        } else if let Some(k) =
                            STATEMENT_KEYWORDS.iter().find(|k| upper.starts_with(*k))
                        {
                            format!(
                                "did you mean {k}? keywords must be separated from what follows"
                            )
                        } else {
                            format!("a command starts with {COMMANDS}")
                        };
                        e = e.with_hint(h);
                    }
                    Err(e)
                }
            },
            tok => {
                let rest = self.src.get(self.peek().span.start..).unwrap_or_default();
                let hint = if tok == Tok::LBrace && is_request_object(rest) {
                    "this is an execute_kip request object (JSON), not KIP text: put the KIP command itself in `command` (from the shell: kip exec --json FILE)".to_string()
                } else {
                    format!("a command starts with {COMMANDS}; check for unbalanced braces before this point")
                };
                Err(self
                    .unexpected(&format!("a KIP command ({COMMANDS})"))
                    .with_hint(hint))
            }
        }
    }
}

/// Whether `text` is a JSON object with a `command` or `commands` key: the arguments of
/// an `execute_kip` call sent where the KIP text belongs (nested in `command`, or given
/// to `kip exec` as the command text).
fn is_request_object(text: &str) -> bool {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text.trim_end())
        .is_ok_and(|m| m.contains_key("command") || m.contains_key("commands"))
}

fn is_known_keyword(w: &str) -> bool {
    const KW: [&str; 41] = [
        "FIND",
        "WHERE",
        "FILTER",
        "NOT",
        "OPTIONAL",
        "UNION",
        "ORDER",
        "BY",
        "ASC",
        "DESC",
        "LIMIT",
        "CURSOR",
        "UPSERT",
        "CONCEPT",
        "PROPOSITION",
        "SET",
        "ATTRIBUTES",
        "PROPOSITIONS",
        "WITH",
        "METADATA",
        "DELETE",
        "FROM",
        "DETACH",
        "DESCRIBE",
        "PRIMER",
        "DOMAINS",
        "TYPES",
        "TYPE",
        "SEARCH",
        "COUNT",
        "DISTINCT",
        "IN",
        "REGEX",
        "UPDATE",
        "MERGE",
        "INTO",
        "EXPORT",
        "EXPECT",
        "VERSION",
        "MODE",
        "THRESHOLD",
    ];
    KW.contains(&w)
}
