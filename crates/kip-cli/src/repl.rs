//! `kip repl`: an interactive shell over one open nexus. A command ends with `;` or an
//! empty line; history is kept in `<data dir>/repl_history`.

use crate::{open_nexus_embedding, print_json, render, Format};
use anyhow::Result;
use kip_engine::v2::Dialect;
use kip_engine::Access;
use rustyline::error::ReadlineError;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

const REPL_HELP: &str = "KIP commands: type them and end with ';' or an empty line (FIND, SEARCH, DESCRIBE, UPSERT, DELETE).
Shell commands (on a line of their own):
  .help     this help
  .primer   DESCRIBE PRIMER, as JSON
  .table    show FIND results as tables (default)
  .json     show responses as JSON
  .quit     leave (also .exit and ctrl-d)
ctrl-c drops the command being typed.";

/// Runs the shell until end of input (ctrl-d) or `.quit`. With [`Dialect::Kip2`] the
/// commands typed are KIP 2.0 and the answers 2.0 response envelopes (shown as JSON).
pub fn run(data: &Path, mut format: Format, dialect: Dialect) -> Result<ExitCode> {
    let nexus = open_nexus_embedding(data)?;
    let mut rl = rustyline::DefaultEditor::new()?;
    let history = data.join("repl_history");
    let _ = rl.load_history(&history);
    eprintln!(
        "kip-nexus repl: end a command with ';' or an empty line; .help for help, .quit to leave."
    );
    let mut buf = String::new();
    loop {
        let prompt = if buf.is_empty() { "kip> " } else { "...> " };
        match rl.readline(prompt) {
            Ok(line) => {
                let trimmed = line.trim();
                if buf.is_empty() && trimmed.starts_with('.') {
                    // Dot-commands are the shell's own, never sent as KIP.
                    match trimmed {
                        ".quit" | ".exit" => break,
                        ".help" => eprintln!("{REPL_HELP}"),
                        ".primer" => {
                            let request = match dialect {
                                Dialect::Kip1 => json!({"command": "DESCRIBE PRIMER"}),
                                Dialect::Kip2 => kip_engine::v2::text_request(
                                    &["DESCRIBE PRIMER".to_string()],
                                    Default::default(),
                                    false,
                                ),
                            };
                            let response =
                                nexus.execute_json(&request, Access::ReadWrite).to_json();
                            print_json(&response);
                        }
                        ".json" => format = Format::Json,
                        ".table" => format = Format::Table,
                        other => {
                            eprintln!("unknown command {other}: .help lists the shell's commands")
                        }
                    }
                    continue;
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
                    let request = match dialect {
                        Dialect::Kip1 => json!({"command": text}),
                        Dialect::Kip2 => kip_engine::v2::text_request(
                            &[text.trim().to_string()],
                            Default::default(),
                            false,
                        ),
                    };
                    let response = nexus.execute_json(&request, Access::ReadWrite).to_json();
                    match (format, dialect) {
                        (Format::Table, Dialect::Kip1) => {
                            crate::out(&render::render(&text, &response))
                        }
                        _ => print_json(&response),
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
