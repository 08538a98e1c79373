//! Progress of the long work an open may do once (an engine migration over every element
//! of an older store), for a front end that wants to show it: the CLI draws a progress
//! bar. Without a hook the work is silent apart from the log.

use std::sync::OnceLock;

/// Told `(what, done, total)` now and then during open-time work, and once with
/// `done == total` at its end.
pub type OpenProgress = dyn Fn(&str, u64, u64) + Send + Sync;

static HOOK: OnceLock<Box<OpenProgress>> = OnceLock::new();

/// Installs the process's progress hook (once; returns false if one was set already).
pub fn set_open_progress(hook: Box<OpenProgress>) -> bool {
    HOOK.set(hook).is_ok()
}

/// Reports progress to the hook, if any.
pub(crate) fn report(what: &str, done: u64, total: u64) {
    if let Some(h) = HOOK.get() {
        h(what, done, total);
    }
}
