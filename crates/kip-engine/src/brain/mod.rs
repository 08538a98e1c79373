//! The brain: memory metabolism run by the nexus itself (SystemInstructions.md and
//! `brain/BrainMaintenance.md` of the KIP project; see docs/brain.md).
//!
//! - [`health`](mod@health): the health report (orphans, Unsorted backlog, stale Events,
//!   confidence and memory strength, domain sizes, pending SleepTasks, superseded and
//!   expired elements) and the threshold triggers.
//! - [`sleep`]: the deterministic sleep cycle (decay, TTL reclamation, finalization),
//!   each write an ordinary KIP statement authored by `$system`.

pub mod health;
pub mod reclaim;
pub mod sleep;
/// The engine's time module, where the brain's timestamps are read and written.
pub use crate::time;

pub use health::{health, Health};
pub use sleep::{SleepOptions, SleepReport};
