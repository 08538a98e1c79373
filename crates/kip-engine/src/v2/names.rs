//! The display-name index of KIP 2.0 concepts (Specification §7.2): a concept whose
//! name differs from its graph row's name (a keyed concept, whose row name is its key,
//! or one renamed by 2.0) is listed under that name, so `{name: ...}` finds it with a
//! lookup instead of a scan. The row's own name is indexed by the graph tables; this
//! covers only the difference. One `meta` record per name (`kip2.name.<name>` -> the
//! concept numbers), written in the transaction that sets the name. Format 3's `names`
//! table (docs/storage.md §1.2) replaces it.

use super::error::V2Result;
use crate::store::{GraphRead, GraphWrite};

fn key(name: &str) -> String {
    format!("kip2.name.{name}")
}

/// The concepts listed under `name` (candidates: callers check the name). In a read
/// of the past the list is today's, so every concept changed since is a candidate too.
pub fn lookup(g: &dyn GraphRead, name: &str) -> V2Result<Vec<u64>> {
    let mut out: Vec<u64> = g
        .meta(&key(name))?
        .and_then(|b| serde_json::from_slice::<Vec<u64>>(&b).ok())
        .unwrap_or_default();
    if let Some(changed) = g.past_changed() {
        out.extend(
            changed
                .iter()
                .filter_map(|k| kip_storage::ElementId::decode(*k))
                .filter(|id| id.kind == kip_storage::ElementKind::Concept)
                .map(|id| id.n),
        );
    }
    Ok(out)
}

/// Moves concept `n` from the list of `old` to the list of `new` (either may be none).
pub fn change(
    w: &mut dyn GraphWrite,
    n: u64,
    old: Option<&str>,
    new: Option<&str>,
) -> V2Result<()> {
    if old == new {
        return Ok(());
    }
    if let Some(o) = old {
        let mut list = lookup(w, o)?;
        list.retain(|x| *x != n);
        write(w, o, &list)?;
    }
    if let Some(nw) = new {
        let mut list = lookup(w, nw)?;
        if !list.contains(&n) {
            list.push(n);
            list.sort_unstable();
        }
        write(w, nw, &list)?;
    }
    Ok(())
}

fn write(w: &mut dyn GraphWrite, name: &str, list: &[u64]) -> V2Result<()> {
    let bytes = serde_json::to_vec(list).unwrap_or_default();
    w.set_meta(&key(name), &bytes)?;
    Ok(())
}
