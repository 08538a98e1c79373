//! Human output: FIND results as tables (one column per FIND expression), everything
//! else as indented JSON.

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use kip_lang::ast::Command;
use serde_json::Value;

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
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        Value::Object(m) if m.contains_key("type") && m.contains_key("name") => {
            let text = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("");
            let mut out = format!("{} ({}, {})", text("name"), text("type"), text("id"));
            let attrs = m.get("attributes").and_then(Value::as_object);
            if let Some(d) = attrs
                .and_then(|a| a.get("description"))
                .and_then(Value::as_str)
            {
                out.push('\n');
                out.push_str(&clip(d, 120));
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
            let text = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("");
            format!(
                "{} -{}-> {} ({})",
                text("subject"),
                text("predicate"),
                text("object"),
                text("id")
            )
        }
        other => clip(&other.to_string(), 400),
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
                .map(kip_lang::printer::projection)
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
        out.push_str(&format!("; more with CURSOR \"{c}\""));
    }
    out
}
