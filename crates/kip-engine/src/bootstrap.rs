//! Bootstrap: the capsules a new nexus loads, in one transaction, through the privileged
//! path (DECISIONS.md item 8): Genesis, then Person, Event and SleepTask (which brings
//! the `Unsorted` and `Archived` domains), then the `$self` and `$system` persons.
//! The other bundled capsules load on request.

/// The bootstrap capsules, in load order: `(file name, text)`.
pub const BOOTSTRAP_CAPSULES: [(&str, &str); 6] = [
    (
        "Genesis.kip",
        include_str!("../../../spec/capsules/Genesis.kip"),
    ),
    (
        "Person.kip",
        include_str!("../../../spec/capsules/Person.kip"),
    ),
    (
        "Event.kip",
        include_str!("../../../spec/capsules/Event.kip"),
    ),
    (
        "SleepTask.kip",
        include_str!("../../../spec/capsules/SleepTask.kip"),
    ),
    (
        "persons/self.kip",
        include_str!("../../../spec/capsules/persons/self.kip"),
    ),
    (
        "persons/system.kip",
        include_str!("../../../spec/capsules/persons/system.kip"),
    ),
];

/// Capsules shipped with the product that load on request (`kip capsule load`).
pub const OPTIONAL_CAPSULES: [(&str, &str); 2] = [
    (
        "Insight.kip",
        include_str!("../../../spec/capsules/Insight.kip"),
    ),
    (
        "Preference.kip",
        include_str!("../../../spec/capsules/Preference.kip"),
    ),
];

/// The `meta` key marking a completed bootstrap.
pub const BOOTSTRAPPED_KEY: &str = "bootstrapped";
