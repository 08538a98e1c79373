//! Cancellation of a request: a flag the interface that received the request sets (on
//! timeout or when the client goes away) and the engine checks between commands and
//! inside its matching loops. It has no dependencies, so the envelope and the query
//! engine can both use it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A request's cancellation flag, shared by the interface that received the request
/// (which sets it on timeout or disconnect) and the engine (which checks it).
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// A flag not set.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Sets the flag: running queries stop at their next check, commands not yet
    /// started are not run.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Interrupt::cancel`] was called.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
