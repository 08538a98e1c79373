//! Source spans: where in the command text an AST node came from.
//!
//! Spans never take part in equality, so two ASTs that differ only in layout compare
//! equal (`parse(print(ast)) == ast`).

use std::fmt;
use std::hash::{Hash, Hasher};

/// A half-open byte range `[start, end)` into the command text.
///
/// `PartialEq` always returns `true` and `Hash` hashes nothing: a span is an annotation,
/// not part of the structure of a command.
#[derive(Clone, Copy, Default)]
pub struct Span {
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
}

impl Span {
    /// A span covering `start..end`.
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }

    /// The smallest span covering both `self` and `other`.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// The 1-based line and column (in characters) of the start of this span in `source`.
    pub fn line_col(&self, source: &str) -> (usize, usize) {
        line_col(source, self.start)
    }
}

/// The 1-based line and column (counted in characters) of byte offset `offset` in `source`.
/// Offsets past the end or inside a multi-byte character are clamped to a valid position.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(source.len());
    while offset > 0 && !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

impl PartialEq for Span {
    fn eq(&self, _other: &Span) -> bool {
        true
    }
}

impl Eq for Span {}

impl Hash for Span {
    fn hash<H: Hasher>(&self, _state: &mut H) {}
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters_not_bytes() {
        let src = "ab\n中文x";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 3), (2, 1));
        // byte 9 is 'x' after two 3-byte characters
        assert_eq!(line_col(src, 9), (2, 3));
        // inside a multi-byte char clamps to its start
        assert_eq!(line_col(src, 4), (2, 1));
        assert_eq!(line_col(src, 1000), (2, 4));
    }

    #[test]
    fn spans_never_affect_equality() {
        assert_eq!(Span::new(0, 1), Span::new(5, 9));
    }
}
