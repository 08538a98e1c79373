//! The memory-tools handle ([`MemoryTools`], from [`Nexus::memory`]): the Knowledge
//! Graph Memory Server's tools over the nexus (the mapping and the tools themselves are
//! [`crate::memory`]) and its JSONL files (`kip import-memory`, `kip export-memory`,
//! `kip serve --memory-file`).
//!
//! A tool call through this handle counts as a write of the nexus (what
//! [`Recall::has_written`](super::Recall::has_written) reports) and wakes the embedding
//! worker, as a KML statement does.

use super::Nexus;
use kip_lang::{ErrorCode, KipError};
use serde_json::Value;

/// The Knowledge Graph Memory Server tools on a nexus; see the module docs. Borrowed
/// from the nexus ([`Nexus::memory`]) and as cheap to make as a reference.
#[derive(Clone, Copy, Debug)]
pub struct MemoryTools<'a> {
    pub(super) nexus: &'a Nexus,
}

impl MemoryTools<'_> {
    /// Runs a Knowledge Graph Memory Server tool by name (see [`crate::memory`]).
    pub fn call(&self, name: &str, args: &Value) -> Result<Value, KipError> {
        let n = self.nexus;
        let r = crate::memory::call(n, name, args);
        n.wrote.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(s) = &n.semantic {
            s.nudge();
        }
        r
    }

    /// [`MemoryTools::call`], recorded in the audit log as a call through `interface`.
    pub fn call_audited(
        &self,
        tool: &str,
        args: &Value,
        interface: &str,
    ) -> Result<Value, KipError> {
        let start = std::time::Instant::now();
        let out = self.call(tool, args);
        self.nexus.audit.record(crate::audit::tool_entry(
            interface,
            tool,
            args,
            out.as_ref(),
            start.elapsed(),
        ));
        out
    }

    /// Imports a memory-server JSONL file in one transaction. A malformed line fails the
    /// whole import, naming its line number, unless `skip_bad_lines`. Returns what was
    /// imported and the malformed lines left out.
    pub fn import_jsonl(
        &self,
        text: &str,
        skip_bad_lines: bool,
    ) -> Result<(crate::memory::ImportReport, Vec<(usize, String)>), KipError> {
        self.import_jsonl_with(text, skip_bad_lines, &mut |_, _| {})
    }

    /// [`MemoryTools::import_jsonl`] telling `progress` (items done, items in all) as
    /// it goes. Returns what was imported and the malformed lines left out (line
    /// number, reason; only with `skip_bad_lines`, else the first one is the error).
    pub fn import_jsonl_with(
        &self,
        text: &str,
        skip_bad_lines: bool,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(crate::memory::ImportReport, Vec<(usize, String)>), KipError> {
        let (items, bad) = crate::memory::parse_jsonl(text);
        if let Some((line, why)) = bad.first() {
            if !skip_bad_lines {
                return Err(KipError::new(
                    ErrorCode::InvalidSyntax,
                    format!(
                        "line {line}: {why} ({} malformed line(s) in all{}); nothing was imported",
                        bad.len(),
                        if bad.len() > 1 {
                            format!(", lines {}", line_list(&bad))
                        } else {
                            String::new()
                        }
                    ),
                )
                .with_hint("fix the lines, or import with --skip-bad-lines to leave malformed lines out (each is reported)"));
            }
        }
        let now = crate::memory::now();
        let total = items.len();
        let report = self.nexus.write(
            |w| crate::memory::import_items(w, &items, &now, &mut |done| progress(done, total)),
            false,
        )?;
        Ok((report, bad))
    }

    /// The memory graph as JSONL (entities, then relations; with createdAt/version).
    pub fn export_jsonl(&self) -> Result<String, KipError> {
        self.nexus.read(|r| crate::memory::export_jsonl(r))
    }
}

/// `3, 7, 12, ...` (at most 20 line numbers).
fn line_list(bad: &[(usize, String)]) -> String {
    let mut s = bad
        .iter()
        .take(20)
        .map(|(l, _)| l.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if bad.len() > 20 {
        s.push_str(", ...");
    }
    s
}
