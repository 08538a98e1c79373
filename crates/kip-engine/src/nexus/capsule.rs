//! Loading a capsule (a `kip export`, a hand-written file of UPSERTs) in one
//! transaction: every statement or none.

use super::Nexus;
use crate::kml::{delete, upsert};
use kip_lang::{Command, ErrorCode, KipError};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;

/// Statements parsed ahead of the write (each may hold thousands of blocks).
const PARSED_AHEAD: usize = 4;

impl Nexus {
    /// Loads a capsule (one or more UPSERTs) in one transaction with agent privileges:
    /// every statement or none. Returns each statement's result.
    ///
    /// The capsule may be of any size (an export of a large graph is hundreds of MiB):
    /// its commands are found with the lexer, then parsed and run one at a time, each
    /// within the usual per-command size limit. A syntax error anywhere is reported
    /// before anything is written.
    pub fn load_capsule(&self, text: &str) -> Result<Vec<Value>, KipError> {
        let mut out = Vec::new();
        self.load_capsule_each(text, &mut |v| out.push(v))?;
        Ok(out)
    }

    /// [`Nexus::load_capsule`], handing each statement's result to `each` instead of
    /// collecting them (a large import need not hold millions of ids). The results
    /// describe the transaction only if this returns `Ok` (it committed).
    pub fn load_capsule_each(
        &self,
        text: &str,
        each: &mut dyn FnMut(Value),
    ) -> Result<(), KipError> {
        let ranges = kip_lang::script_ranges(text)?;
        if ranges.is_empty() {
            // Nothing but whitespace and comments: the parser's own error.
            kip_lang::parse_script(text)?;
        }
        // Two threads beside the write: one checks the syntax of the whole capsule (one
        // command at a time, nothing kept), so a typo near the end stops the load as
        // soon as the check gets there (parsing is faster than executing) rather than
        // after everything before it was loaded; the other parses the statements for
        // the write, a few ahead of it. A syntax error always wins over a statement's
        // own error, and nothing is written either way.
        let failed = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let check = scope.spawn(|| -> Result<(), KipError> {
                for r in &ranges {
                    let parsed = kip_lang::parse_script_part(
                        text,
                        r.clone(),
                        kip_lang::ParseOptions::capsule(),
                    );
                    if let Err(e) = parsed {
                        failed.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
                Ok(())
            });
            let (tx, rx) = std::sync::mpsc::sync_channel(PARSED_AHEAD);
            let (ranges, failed) = (&ranges, &failed);
            scope.spawn(move || {
                for r in ranges {
                    if failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let cmd = kip_lang::parse_script_part(
                        text,
                        r.clone(),
                        kip_lang::ParseOptions::capsule(),
                    )
                    .and_then(|c| kip_lang::bind_owned(c, &serde_json::Map::new()));
                    let stop = cmd.is_err();
                    // The write stopped (an error): nothing more to parse.
                    if tx.send(cmd).is_err() || stop {
                        break;
                    }
                }
            });
            let loaded = self.load_parsed(&rx, ranges.len(), failed, each);
            // The parser stops at its next send once the receiver is gone.
            drop(rx);
            match check.join() {
                Ok(Err(syntax)) => Err(syntax),
                Ok(Ok(())) => loaded,
                Err(_) => Err(KipError::new(
                    ErrorCode::InternalError,
                    "the capsule's syntax check stopped unexpectedly",
                )),
            }
        })
    }

    /// The write of [`Nexus::load_capsule_each`]: the `count` statements `parsed`
    /// delivers, in one transaction, stopping (nothing written) once `failed` says the
    /// syntax check running beside it found an error, and refusing to commit fewer
    /// statements than the capsule holds.
    fn load_parsed(
        &self,
        parsed: &Receiver<Result<Command, KipError>>,
        count: usize,
        failed: &AtomicBool,
        each: &mut dyn FnMut(Value),
    ) -> Result<(), KipError> {
        self.write(
            |w| {
                let mut done = 0;
                for cmd in parsed.iter().take(count) {
                    if failed.load(Ordering::Relaxed) {
                        return Err(KipError::new(
                            ErrorCode::InvalidSyntax,
                            "the capsule has a syntax error further on; nothing was written",
                        ));
                    }
                    match &cmd? {
                        Command::Upsert(u) => {
                            each(upsert::upsert(w, u, upsert::Privilege::Capsule)?)
                        }
                        Command::Delete(d) => each(delete::delete(w, d, &self.limits)?),
                        _ => {
                            return Err(KipError::new(
                                ErrorCode::InvalidSyntax,
                                "a capsule holds UPSERT and DELETE statements only",
                            ))
                        }
                    }
                    done += 1;
                }
                if done < count {
                    return Err(KipError::new(
                        ErrorCode::InternalError,
                        "the capsule's statements stopped arriving; nothing was written",
                    ));
                }
                Ok(())
            },
            false,
        )
    }
}
