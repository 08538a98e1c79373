//! # kip-brain
//!
//! The parts of the kip-nexus brain that need a language model (docs/brain.md):
//!
//! - [`llm`]: a client for any OpenAI-compatible chat-completions endpoint with tool
//!   calling (OpenAI, Ollama, vLLM, llama.cpp server), chosen by a `URL#MODEL` spec.
//! - [`maintain`]: the `$system` agent loop of a sleep cycle's judgement phases
//!   (SleepTasks, Unsorted reclassification, orphans, Event consolidation, duplicates):
//!   the system prompt is the shipped `SystemInstructions.md`, the only tool is
//!   `execute_kip`, and every bound (turns, statements, writes, wall clock) is enforced
//!   here, not left to the model.
//!
//! - [`memory`]: Formation (`remember`: a conversation or trace in, `$self`'s memory
//!   written) and Recall (`recall_memory`: a question in, an answer with its sources
//!   out, read-only), per the KIP project's `brain/` instructions.
//!
//! The deterministic phases (decay, TTL reclamation, finalization) are the engine's
//! (`kip_engine::brain`); this crate never touches the store: it runs KIP through a
//! caller-supplied executor, so it works the same on a nexus this process owns or one
//! it forwards to.

pub mod llm;
pub mod maintain;
pub mod memory;
pub mod scripted;

pub use llm::{ChatClient, LlmError, LlmSpec};
pub use maintain::{run_agent, run_phases, Agent, LoopLimits, LoopReport};
pub use memory::{recall, remember};
