//! META: `DESCRIBE` ([`describe`]) and `SEARCH` ([`search`]).

pub mod describe;
pub mod export;
pub mod search;
pub use kip_storage::text;
