//! The KIP 2.0 runtime (Specification §70-87, DECISIONS.md items 37-46): a JSON request
//! with `"kip": "2.0"` is read against `kip-request.schema.json`, its operations are
//! parsed with the 2.0 grammars (`kip_lang::v2`), classified, checked and run in their
//! execution mode, and the answer is a response envelope (`kip-response.schema.json`)
//! with per-operation and top-level status. A request without `kip` is KIP 1.x,
//! answered by the 1.x envelope as before (item 38).
//!
//! What runs today: the envelope and its rules (modes, readonly, language labels,
//! parameters, isolation, capability requirements, critical extensions), and `DESCRIBE
//! PROTOCOL / CAPABILITIES / EXECUTION CONTEXT / PRIMER`. Every other valid 2.0
//! statement is answered `UnsupportedCapability`, and `DESCRIBE CAPABILITIES` says so
//! (no silent downgrade, KIP2-RT-020).
//!
//! - `error.rs`: the §87 registry and the 2.0 error object, converted from 1.x errors
//!   once.
//! - `request.rs`: the request envelope and its checks.
//! - `runtime.rs`: modes, operations, the response envelope.
//! - `describe.rs`: the DESCRIBE answers and the capability list.

mod describe;
pub mod error;
mod request;
mod runtime;

pub use error::{Code, V2Error};
pub use runtime::execute;

/// Whether a JSON request is a KIP 2.0 request (it names a protocol version with
/// `"kip"`); any other is KIP 1.x (DECISIONS.md item 38).
pub fn is_kip2(request: &serde_json::Value) -> bool {
    request.get("kip").is_some()
}
