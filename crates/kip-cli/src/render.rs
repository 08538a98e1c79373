//! Human output: FIND results as tables (one column per FIND expression), everything
//! else as indented JSON; and [`printable`], the one escaping of control characters
//! that every human-readable printer applies (tables, `kip logs`, the REPL, the
//! reports), so that a stored name or a command text cannot move the cursor, erase
//! lines or retitle the terminal. JSON output (`--format json`, `--json`) is left as
//! it is.

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use kip_lang::ast::Command;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt::Write as _;

/// True for the characters a terminal acts on instead of showing: the C0 controls
/// (escape, carriage return, backspace, line breaks, ...), DEL, the C1 controls
/// (8-bit CSI and OSC among them), and the bidirectional formatting characters that
/// reorder what follows them.
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `s` made safe to print on a terminal: every control character written as an
/// escape (`\n`, `\r`, `\t`, else `\u{1b}`), everything else unchanged (a backslash
/// too, so already printable text passes through as it is).
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(acts_on_terminal) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if acts_on_terminal(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`printable`] applied to each line of `text`, its line breaks kept: for output that
/// is several lines by design (tables, reports).
pub fn printable_lines(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && acts_on_terminal(c)) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.split('\n')
            .map(printable)
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// At most `n` characters of `s`, with an ellipsis when cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A table cell: a whole concept as `name (Type, C:12)` with its description, a whole
/// proposition as `C:1 -predicate-> C:2 (P:3)`, other values as text or compact JSON.
fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => printable(s).into_owned(),
        Value::Null => "null".into(),
        Value::Object(m) if m.contains_key("type") && m.contains_key("name") => {
            let text = |k: &str| printable(m.get(k).and_then(Value::as_str).unwrap_or(""));
            let mut out = format!("{} ({}, {})", text("name"), text("type"), text("id"));
            let attrs = m.get("attributes").and_then(Value::as_object);
            if let Some(d) = attrs
                .and_then(|a| a.get("description"))
                .and_then(Value::as_str)
            {
                out.push('\n');
                out.push_str(&clip(&printable(d), 120));
            }
            let others = attrs
                .map(|a| a.len() - usize::from(a.contains_key("description")))
                .unwrap_or(0);
            if others > 0 {
                out.push_str(&format!("\n[{others} more attribute(s)]"));
            }
            out
        }
        Value::Object(m) if m.contains_key("subject") && m.contains_key("predicate") => {
            let text = |k: &str| printable(m.get(k).and_then(Value::as_str).unwrap_or(""));
            format!(
                "{} -{}-> {} ({})",
                text("subject"),
                text("predicate"),
                text("object"),
                text("id")
            )
        }
        other => clip(&printable(&other.to_string()), 400),
    }
}

/// The width to fit tables to: the terminal's, else `$COLUMNS`, else none (output to a
/// pipe or file is not wrapped).
fn width(table: &Table) -> Option<u16> {
    table.width().or_else(|| {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<u16>().ok())
            .filter(|w| *w >= 20)
    })
}

/// Renders one command's response object for a person.
pub fn render(command_text: &str, response: &Value) -> String {
    if response.get("error").is_some() {
        return serde_json::to_string_pretty(response).unwrap_or_default();
    }
    let headers = match kip_lang::parse_command(command_text) {
        Ok(Command::Find(q))
            if q.projections
                .iter()
                .all(|p| matches!(p, kip_lang::ast::Projection::Path(_)))
                || q.projections.len() > 1 =>
        {
            q.projections
                .iter()
                .map(|p| printable(&kip_lang::printer::projection(p)).into_owned())
                .collect::<Vec<_>>()
        }
        _ => return serde_json::to_string_pretty(response).unwrap_or_default(),
    };
    let result = &response["result"];
    let columns: Vec<Vec<Value>> = if headers.len() == 1 {
        vec![result.as_array().cloned().unwrap_or_default()]
    } else {
        match result.as_array() {
            Some(cols) if cols.iter().all(Value::is_array) => cols
                .iter()
                .map(|c| c.as_array().cloned().unwrap_or_default())
                .collect(),
            _ => return serde_json::to_string_pretty(response).unwrap_or_default(),
        }
    };
    let rows = columns.first().map(Vec::len).unwrap_or(0);
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    match width(&table) {
        Some(w) => {
            table.set_content_arrangement(ContentArrangement::Dynamic);
            table.set_width(w);
        }
        None => {
            table.set_content_arrangement(ContentArrangement::Disabled);
        }
    }
    table.set_header(headers);
    for i in 0..rows {
        table.add_row(
            columns
                .iter()
                .map(|c| cell(c.get(i).unwrap_or(&Value::Null)))
                .collect::<Vec<_>>(),
        );
    }
    let mut out = table.to_string();
    out.push_str(&format!("\n{rows} row(s)"));
    if let Some(c) = response.get("next_cursor").and_then(Value::as_str) {
        out.push_str(&format!("; more with CURSOR \"{}\"", printable(c)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_every_control_character_and_keeps_the_rest() {
        assert_eq!(
            printable("\u{1b}[2K\u{1b}[1A\u{1b}]0;title\u{7}ok"),
            r"\u{1b}[2K\u{1b}[1A\u{1b}]0;title\u{7}ok"
        );
        assert_eq!(printable("a\nb\tc\rd"), r"a\nb\tc\rd");
        // DEL, an 8-bit CSI, a right-to-left override.
        assert_eq!(printable("\u{7f}\u{9b}\u{202e}"), r"\u{7f}\u{9b}\u{202e}");
        assert!(matches!(printable("Ann — 東京 C:\\x"), Cow::Borrowed(_)));
    }

    #[test]
    fn printable_lines_keeps_line_breaks_and_escapes_within_lines() {
        assert_eq!(printable_lines("a\u{1b}c\nd\re"), "a\\u{1b}c\nd\\re");
        assert!(matches!(printable_lines("a\nb"), Cow::Borrowed(_)));
        // Escaping twice changes nothing more.
        let once = printable_lines("x\u{1b}[2K\ny").into_owned();
        assert_eq!(printable_lines(&once), once);
    }
}
