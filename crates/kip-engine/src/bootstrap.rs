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
