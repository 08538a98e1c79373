//! Loading a capsule (a `kip export`, a hand-written file of UPSERTs) in one
//! transaction: every statement or none.

use super::Nexus;
use crate::kml::{delete, upsert};
use kip_lang::{Command, ErrorCode, KipError};
use serde_json::Value;

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
        // The syntax of the whole capsule is checked on a thread of its own (one command
        // at a time, nothing kept) while the statements run: a typo near the end stops
        // the load as soon as the check gets there (parsing is faster than executing),
        // not after everything before it was loaded, and the check's time overlaps the
        // load's instead of adding to it. A syntax error always wins over a later
        // statement's own error, and nothing is written either way.
        let failed = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let check = scope.spawn(|| -> Result<(), KipError> {
                for r in &ranges {
                    let parsed = kip_lang::parse_script_part(
                        text,
                        r.clone(),
                        kip_lang::ParseOptions::capsule(),
                    );
                    if let Err(e) = parsed {
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                        return Err(e);
                    }
                }
                Ok(())
            });
            let loaded = self.load_ranges(text, &ranges, &failed, each);
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

    /// The write of [`Nexus::load_capsule_each`]: the statements at `ranges`, in one
    /// transaction, stopping (nothing written) once `failed` says the syntax check
    /// running beside it found an error.
    fn load_ranges(
        &self,
        text: &str,
        ranges: &[std::ops::Range<usize>],
        failed: &std::sync::atomic::AtomicBool,
        each: &mut dyn FnMut(Value),
    ) -> Result<(), KipError> {
        self.write(
            |w| {
                for r in ranges {
                    if failed.load(std::sync::atomic::Ordering::Relaxed) {
                        return Err(KipError::new(
                            ErrorCode::InvalidSyntax,
                            "the capsule has a syntax error further on; nothing was written",
                        ));
                    }
                    let cmd = kip_lang::parse_script_part(
                        text,
                        r.clone(),
                        kip_lang::ParseOptions::capsule(),
                    )?;
                    let bound = kip_lang::bind_owned(cmd, &serde_json::Map::new())?;
                    match &bound {
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
                }
                Ok(())
            },
            false,
        )
    }
}
