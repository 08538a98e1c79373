//! Every command text of the cross-engine KIP 2.0 fixtures (`spec/kip2/anda-fixtures/`,
//! setup and cases) parses with the 2.0 parser. No fixture case expects `InvalidSyntax`
//! for a text the grammar refuses: the four that expect it are the writes of
//! DECISIONS.md item 45, which the grammar accepts and the Specification refuses
//! semantically (§58.1-58.2), so they must parse here too.

use std::fs;
use std::path::PathBuf;

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec/kip2/anda-fixtures")
}

/// (file, case name or "setup #n", command, expected error name if any).
fn fixture_commands() -> Vec<(String, String, String, Option<String>)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = fs::read_dir(fixtures_dir())
        .expect("fixtures dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for path in files {
        let file = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        let doc: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).expect("read")).expect("json");
        for (i, s) in doc["setup"].as_array().into_iter().flatten().enumerate() {
            let cmd = s.as_str().expect("setup command").to_string();
            out.push((file.clone(), format!("setup #{i}"), cmd, None));
        }
        for case in doc["cases"].as_array().expect("cases") {
            let name = case["name"].as_str().expect("case name").to_string();
            let cmd = case["command"].as_str().expect("command").to_string();
            let err = case["expect"]["error"].as_str().map(str::to_string);
            out.push((file.clone(), name, cmd, err));
        }
    }
    out
}

/// The four cases of DECISIONS.md item 45 (grammatical writes refused semantically).
const ITEM_45: [&str; 4] = [
    "an Assertion's epistemic payload cannot be edited",
    "an Assertion's stance cannot be rewritten in place",
    "an element's Governance block is not an author-writable field",
    "and neither is it writable at creation",
];

#[test]
fn every_anda_fixture_command_parses() {
    let cmds = fixture_commands();
    assert!(
        cmds.len() >= 80,
        "only {} fixture commands found",
        cmds.len()
    );
    let mut failures = Vec::new();
    for (file, name, cmd, err) in &cmds {
        let expects_syntax = err.as_deref() == Some("InvalidSyntax");
        if expects_syntax {
            assert!(
                ITEM_45.contains(&name.as_str()),
                "{file}: {name}: a new InvalidSyntax case; decide whether the grammar refuses it"
            );
        }
        if let Err(e) = kip_lang::v2::parse(cmd) {
            failures.push(format!("{file}: {name}: {e} (hint: {:?})\n  {cmd}", e.hint));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixture commands fail:\n{}",
        failures.len(),
        cmds.len(),
        failures.join("\n")
    );
}

#[test]
fn decisions_item_45_cases_are_grammatical() {
    let cmds = fixture_commands();
    let found: Vec<_> = cmds
        .iter()
        .filter(|(_, name, _, _)| ITEM_45.contains(&name.as_str()))
        .collect();
    assert_eq!(found.len(), 4);
    for (file, name, cmd, err) in found {
        assert_eq!(err.as_deref(), Some("InvalidSyntax"), "{file}: {name}");
        kip_lang::v2::parse(cmd).unwrap_or_else(|e| panic!("{file}: {name}: {e}"));
    }
}

#[test]
fn every_anda_fixture_command_prints_and_parses_back_to_the_same_tree() {
    for (file, name, cmd, _) in fixture_commands() {
        let st = kip_lang::v2::parse(&cmd).unwrap_or_else(|e| panic!("{file}: {name}: {e}"));
        let printed = st.to_string();
        let again = kip_lang::v2::parse(&printed)
            .unwrap_or_else(|e| panic!("{file}: {name}: printed text fails: {e}\n{printed}"));
        assert_eq!(again.kind, st.kind, "{file}: {name}: {printed}");
    }
}

#[test]
fn every_parameter_a_fixture_case_binds_is_one_its_command_uses() {
    let dir = fixtures_dir();
    let mut checked = 0;
    for entry in fs::read_dir(&dir).expect("dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let doc: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).expect("read")).expect("json");
        for case in doc["cases"].as_array().expect("cases") {
            let Some(params) = case["params"].as_object() else {
                continue;
            };
            let cmd = case["command"].as_str().expect("command");
            let used = kip_lang::v2::parse(cmd).expect("parses").parameters();
            let given: std::collections::BTreeSet<String> = params.keys().cloned().collect();
            // A case may leave a parameter unbound on purpose (its expected error is then
            // about the request); it never binds one the command does not use.
            assert!(
                given.is_subset(&used),
                "{}: {}: binds {given:?}, uses {used:?}",
                path.display(),
                case["name"]
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no fixture case binds parameters");
}
