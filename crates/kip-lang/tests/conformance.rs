//! Runs the public parse conformance corpus (`conformance/parse/`): every valid file
//! parses (and round-trips through the printer), every invalid file fails with the code
//! named in its `// expect:` header. One runner, all files: a new file is covered as
//! soon as it is added.

use kip_lang::{parse_command, parse_script, printer};
use std::fs;
use std::path::PathBuf;

fn corpus(dir: &str) -> Vec<(String, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../conformance/parse")
        .join(dir);
    let mut out: Vec<(String, String)> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("read {}: {e}", root.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "kip"))
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, fs::read_to_string(&p).expect("read corpus file"))
        })
        .collect();
    out.sort();
    out
}

/// Parses every file, prints it, parses the print: the ASTs must be equal.
fn parse_and_round_trip(files: &[(String, String)]) {
    let mut failures = Vec::new();
    for (name, src) in files {
        match parse_command(src) {
            Ok(cmd) => {
                let printed = cmd.to_string();
                match parse_command(&printed) {
                    Ok(again) if again == cmd => {}
                    Ok(_) => {
                        failures.push(format!("{name}: round trip changed the AST:\n{printed}"))
                    }
                    Err(e) => failures.push(format!(
                        "{name}: printed text does not parse: {e}\n{printed}"
                    )),
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_valid_corpus_file_parses_and_round_trips() {
    let files = corpus("valid");
    assert!(files.len() >= 119, "corpus has {} valid files", files.len());
    parse_and_round_trip(&files);
}

/// RC9-RC11 syntax (UPDATE, MERGE, EXPORT, EXPECT VERSION, SEARCH MODE/THRESHOLD,
/// predicate variables): valid, like the v1 corpus.
#[test]
fn every_rc9_plus_corpus_file_parses_and_round_trips() {
    let files = corpus("valid_rc9plus");
    // The corpus must be there: a missing directory or file must fail, not pass.
    assert!(files.len() >= 12, "valid_rc9plus has {} files", files.len());
    parse_and_round_trip(&files);
}

#[test]
fn every_invalid_corpus_file_fails_with_the_expected_code() {
    let files = corpus("invalid");
    assert!(
        files.len() >= 62,
        "corpus has {} invalid files",
        files.len()
    );
    let mut failures = Vec::new();
    for (name, src) in &files {
        let header = src.lines().next().unwrap_or_default();
        let expected: Vec<&str> = header
            .strip_prefix("// expect:")
            .unwrap_or_else(|| panic!("{name}: missing // expect: header"))
            .trim()
            .split('|')
            .map(str::trim)
            .collect();
        match parse_script(src) {
            Ok(cmds) => failures.push(format!(
                "{name}: parsed but must fail ({})",
                printer::script(&cmds)
            )),
            Err(e) => {
                if !expected.contains(&e.code.as_str()) {
                    failures.push(format!(
                        "{name}: got {} ({}), expected {:?}",
                        e.code, e.message, expected
                    ));
                }
                if e.line.is_none() || e.column.is_none() {
                    failures.push(format!("{name}: error without line/column: {e}"));
                }
                if e.hint.is_none() {
                    failures.push(format!("{name}: error without a hint: {e}"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
