//! Bootstrap: the capsules a new nexus loads, in one transaction, through the privileged
//! path (DECISIONS.md items 8 and 33): the RC11 Genesis (with the `CoreSchema`,
//! `Unsorted`, `Archived` and `System` domains), every type and predicate capsule of
//! `spec/rc11/capsules/` (Person, Event, SleepTask, Preference, Insight, Commitment,
//! Experience, ExperienceStep, Skill; caused_by, compiled_to, consolidated_to,
//! derived_from, derived_insight, has_step, involves, mentions), then the `$self` and
//! `$system` persons.
//!
//! A store bootstrapped by an earlier release gains, when it is opened, whatever of
//! this it lacks (the concepts and links it does not have), and nothing it has is
//! changed ([`RC11_BOOTSTRAP_KEY`]).

use crate::kml::upsert;
use crate::store::GraphWrite;
use kip_lang::{Command, KipError};
use serde_json::Value;

/// The bootstrap capsules, in load order: `(file name, text)`.
pub const BOOTSTRAP_CAPSULES: [(&str, &str); 20] = [
    (
        "Genesis.kip",
        include_str!("../../../spec/rc11/capsules/Genesis.kip"),
    ),
    (
        "Person.kip",
        include_str!("../../../spec/rc11/capsules/Person.kip"),
    ),
    (
        "Event.kip",
        include_str!("../../../spec/rc11/capsules/Event.kip"),
    ),
    (
        "SleepTask.kip",
        include_str!("../../../spec/rc11/capsules/SleepTask.kip"),
    ),
    (
        "Preference.kip",
        include_str!("../../../spec/rc11/capsules/Preference.kip"),
    ),
    (
        "Insight.kip",
        include_str!("../../../spec/rc11/capsules/Insight.kip"),
    ),
    (
        "Commitment.kip",
        include_str!("../../../spec/rc11/capsules/Commitment.kip"),
    ),
    (
        "Experience.kip",
        include_str!("../../../spec/rc11/capsules/Experience.kip"),
    ),
    (
        "ExperienceStep.kip",
        include_str!("../../../spec/rc11/capsules/ExperienceStep.kip"),
    ),
    (
        "Skill.kip",
        include_str!("../../../spec/rc11/capsules/Skill.kip"),
    ),
    (
        "caused_by.kip",
        include_str!("../../../spec/rc11/capsules/caused_by.kip"),
    ),
    (
        "compiled_to.kip",
        include_str!("../../../spec/rc11/capsules/compiled_to.kip"),
    ),
    (
        "consolidated_to.kip",
        include_str!("../../../spec/rc11/capsules/consolidated_to.kip"),
    ),
    (
        "derived_from.kip",
        include_str!("../../../spec/rc11/capsules/derived_from.kip"),
    ),
    (
        "derived_insight.kip",
        include_str!("../../../spec/rc11/capsules/derived_insight.kip"),
    ),
    (
        "has_step.kip",
        include_str!("../../../spec/rc11/capsules/has_step.kip"),
    ),
    (
        "involves.kip",
        include_str!("../../../spec/rc11/capsules/involves.kip"),
    ),
    (
        "mentions.kip",
        include_str!("../../../spec/rc11/capsules/mentions.kip"),
    ),
    (
        "persons/self.kip",
        include_str!("../../../spec/rc11/capsules/persons/self.kip"),
    ),
    (
        "persons/system.kip",
        include_str!("../../../spec/rc11/capsules/persons/system.kip"),
    ),
];

/// The `meta` key marking that the RC11 capsules were loaded (or added to an older
/// store).
pub const RC11_BOOTSTRAP_KEY: &str = "bootstrap_rc11";

/// The `meta` key marking a completed bootstrap.
pub const BOOTSTRAPPED_KEY: &str = "bootstrapped";

/// The engine's part of opening a store: the bootstrap capsules, once; then the
/// engine-level migrations (each once, in order).
pub fn bootstrap(w: &mut dyn GraphWrite) -> Result<(), KipError> {
    bootstrap_with(w, &BOOTSTRAP_CAPSULES)
}

/// Whether [`bootstrap`] has anything to do (read-only): a store shared by many
/// processes is opened without taking its writers' lock when it has not.
pub fn bootstrap_needed(r: &dyn crate::store::GraphRead) -> Result<bool, KipError> {
    Ok(r.meta(RC11_BOOTSTRAP_KEY)?.is_none()
        || r.meta(VERSIONED_KEY)?.is_none()
        || !kip_storage::history::is_on(r)?
        || !crate::v2::tokens::has_key(r)?)
}

/// [`bootstrap`] with the given capsules.
pub fn bootstrap_with(w: &mut dyn GraphWrite, capsules: &[(&str, &str)]) -> Result<(), KipError> {
    if w.meta(RC11_BOOTSTRAP_KEY)?.is_none() {
        // A new store loads the capsules; one bootstrapped by an earlier release gains
        // only what it lacks.
        let upgrade = w.meta(BOOTSTRAPPED_KEY)?.is_some();
        for (name, text) in capsules {
            let cmds = kip_lang::parse_script(text).map_err(|e| {
                KipError::internal(format!("bootstrap capsule {name} does not parse: {e}"))
            })?;
            for cmd in &cmds {
                let Command::Upsert(u) = cmd else {
                    return Err(KipError::internal(format!(
                        "bootstrap capsule {name} holds a non-UPSERT command"
                    )));
                };
                let done = if upgrade {
                    upsert::upsert_missing(w, u)
                } else {
                    upsert::upsert(w, u, upsert::Privilege::System)
                };
                done.map_err(|e| {
                    KipError::internal(format!("bootstrap capsule {name} failed: {e}"))
                })?;
            }
        }
        crate::store::GraphWrite::set_meta(w, BOOTSTRAPPED_KEY, b"1")?;
        crate::store::GraphWrite::set_meta(w, RC11_BOOTSTRAP_KEY, b"1")?;
    }
    if w.meta(VERSIONED_KEY)?.is_none() {
        add_versions(w)?;
        crate::store::GraphWrite::set_meta(w, VERSIONED_KEY, b"1")?;
    }
    // History starts from the bootstrapped state (commit 0 of the default space; a
    // memory from before history starts from what it holds when first opened).
    kip_storage::history::start(w)?;
    crate::v2::tokens::ensure_key(w)?;
    Ok(())
}

/// Set once every element carries `_version` (RC11).
const VERSIONED_KEY: &str = "rc11_versions";

/// RC11 migration: every concept and link written before versions existed gets
/// `_version: 1` (its `_updated_at` stays unknown). Elements that have one are left
/// alone, so the migration is idempotent; it runs in the open transaction.
fn add_versions(w: &mut dyn GraphWrite) -> Result<(), KipError> {
    use crate::kml::primitives::VERSION_KEY;
    let mut concepts = Vec::new();
    w.scan_concepts(&mut |n| {
        concepts.push(n);
        Ok(true)
    })?;
    let mut links = Vec::new();
    w.scan_props(&mut |n| {
        links.push(n);
        Ok(true)
    })?;
    let total = concepts.len() + links.len();
    let mut done = 0usize;
    let mut changed = 0usize;
    const WHAT: &str = "adding _version to the elements of an older store";
    let progress = |done: usize| {
        if done.is_multiple_of(10_000) || done == total {
            crate::progress::report(WHAT, done as u64, total as u64);
        }
        if total >= 100_000 && done.is_multiple_of(100_000) {
            tracing::info!("{WHAT}: {done} of {total}");
        }
    };
    for n in concepts {
        if let Some(old) = w.concept(n)? {
            if !old.metadata.contains_key(VERSION_KEY) {
                let mut new = old.clone();
                new.metadata.insert(VERSION_KEY.into(), Value::from(1u64));
                w.put_concept(n, &new, Some(&old))?;
                changed += 1;
            }
        }
        done += 1;
        progress(done);
    }
    for n in links {
        if let Some(old) = w.prop(n)? {
            if !old.metadata.contains_key(VERSION_KEY) {
                let mut new = old.clone();
                new.metadata.insert(VERSION_KEY.into(), Value::from(1u64));
                w.put_prop(n, &new, Some(&old))?;
                changed += 1;
            }
        }
        done += 1;
        progress(done);
    }
    if changed > 0 {
        tracing::info!("gave {changed} elements of an older store _version 1 (RC11)");
    }
    Ok(())
}
