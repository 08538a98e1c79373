//! META: `DESCRIBE` ([`describe`]) and `SEARCH` ([`search`]).

pub mod describe;
pub mod search;
pub mod text;
