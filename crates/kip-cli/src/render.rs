//! Human output: FIND results as tables (one column per FIND expression), everything
//! else as indented JSON.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use kip_lang::ast::Command;
use serde_json::Value;

fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
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
