//! `kip repl`: an interactive shell over one open nexus. A command ends with `;` or an
//! empty line; history is kept in `<data dir>/repl_history`.

use crate::{open_nexus, print_json, render, Format};
use anyhow::Result;
use kip_engine::Access;
use rustyline::error::ReadlineError;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

/// Runs the shell until end of input (ctrl-d) or `.quit`.
pub fn run(data: &Path, format: Format) -> Result<ExitCode> {
    let nexus = open_nexus(data)?;
    let mut rl = rustyline::DefaultEditor::new()?;
    let history = data.join("repl_history");
    let _ = rl.load_history(&history);
    eprintln!("kip-nexus repl: end a command with ';' or an empty line; .quit to leave.");
    let mut buf = String::new();
    loop {
        let prompt = if buf.is_empty() { "kip> " } else { "...> " };
        match rl.readline(prompt) {
            Ok(line) => {
                let trimmed = line.trim();
                if buf.is_empty() && (trimmed == ".quit" || trimmed == ".exit") {
                    break;
                }
                if buf.is_empty() && trimmed.is_empty() {
                    continue;
                }
                let done = trimmed.is_empty() || trimmed.ends_with(';');
                buf.push_str(line.trim_end().trim_end_matches(';'));
                buf.push('\n');
                if done {
                    let text = std::mem::take(&mut buf);
                    let _ = rl.add_history_entry(text.trim());
                    let response = nexus
                        .execute_json(&json!({"command": text}), Access::ReadWrite)
                        .to_json();
                    match format {
                        Format::Json => print_json(&response),
                        Format::Table => println!("{}", render::render(&text, &response)),
                    }
                }
            }
            Err(ReadlineError::Interrupted) => buf.clear(),
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    let _ = rl.save_history(&history);
    Ok(ExitCode::SUCCESS)
}
