//! Every KIP example in the bundled documents parses: the code blocks of
//! `spec/SPECIFICATION.md`, `spec/KIPSyntax.md`, `spec/SystemInstructions.md` and
//! `spec/SelfInstructions.md`, and every bundled capsule. Blocks are extracted at test
//! time, so a new example is covered automatically.
//!
//! A block that starts with a command keyword is parsed as a script; a block that starts
//! with a WHERE-body clause (`?x {...}`, `(...)`, `FILTER`, `NOT`, ...) is parsed as a
//! WHERE body. Grammar templates (`<Type>`, `...`, `N`) are not examples; they are
//! recognised by their placeholders and must stay few.

use kip_lang::{parse_script, parse_where_clauses};
use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (document, first line number, text) of every ```prolog / ```kip block.
fn kip_blocks(doc: &str) -> Vec<(String, usize, String)> {
    let text = fs::read_to_string(repo().join(doc)).expect("read doc");
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        match &mut cur {
            None => {
                if t == "```prolog" || t == "```kip" {
                    cur = Some((i + 2, String::new()));
                }
            }
            Some((start, body)) => {
                if t.starts_with("```") {
                    out.push((doc.to_string(), *start, std::mem::take(body)));
                    cur = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    out
}

fn strip_comments(s: &str) -> String {
    s.lines()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A grammar template rather than an example: it uses `<placeholders>` outside strings,
/// `...` elisions, `[ASC|DESC]`-style alternatives or a bare `N`.
fn is_template(s: &str) -> bool {
    let mut outside = String::new();
    let mut in_str = false;
    let mut esc = false;
    for c in s.chars() {
        if in_str {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        if c == '"' {
            in_str = true;
            continue;
        }
        outside.push(c);
    }
    let no_comments: String = outside
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let angle_placeholder = no_comments
        .split('<')
        .skip(1)
        .any(|rest| rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'));
    no_comments.contains("...")
        || angle_placeholder
        || no_comments.contains("[ASC|DESC]")
        || no_comments.contains("LIMIT N")
}

const STATEMENTS: [&str; 8] = [
    "FIND", "UPSERT", "UPDATE", "MERGE", "DELETE", "DESCRIBE", "SEARCH", "EXPORT",
];

fn check_doc(
    doc: &str,
    parsed: &mut usize,
    templates: &mut Vec<String>,
    failures: &mut Vec<String>,
) {
    for (doc, line, block) in kip_blocks(doc) {
        let code = strip_comments(&block);
        if code.is_empty() {
            continue;
        }
        if is_template(&code) {
            templates.push(format!("{doc}:{line}"));
            continue;
        }
        let first = code.split_whitespace().next().unwrap_or("");
        let is_statement = STATEMENTS.iter().any(|k| first.starts_with(k));
        let result = if is_statement {
            parse_script(&block).map(|_| ())
        } else if first.starts_with("CONCEPT") || first.starts_with("PROPOSITION") {
            // A block of an UPSERT shown on its own (e.g. the EXPECT VERSION example).
            parse_script(&format!("UPSERT {{\n{block}\n}}")).map(|_| ())
        } else {
            parse_where_clauses(&block).map(|_| ())
        };
        match result {
            Ok(()) => *parsed += 1,
            Err(e) => failures.push(format!("{doc}:{line}: {e}\n{block}")),
        }
    }
}

#[test]
fn every_document_example_parses() {
    let mut parsed = 0;
    let mut templates = Vec::new();
    let mut failures = Vec::new();
    for doc in [
        "spec/SPECIFICATION.md",
        "spec/KIPSyntax.md",
        "spec/SystemInstructions.md",
        "spec/SelfInstructions.md",
    ] {
        check_doc(doc, &mut parsed, &mut templates, &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} examples fail:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(parsed >= 50, "only {parsed} examples parsed");
    // Templates are grammar synopses, not examples: keep the list short and visible.
    eprintln!("parsed {parsed} examples; templates skipped: {templates:?}");
    assert!(
        templates.len() <= 12,
        "too many blocks skipped as templates: {templates:?}"
    );
}

/// The RC11 texts (the protocol now): every example parses, RC11 statements included.
#[test]
fn every_rc11_document_example_parses() {
    let mut parsed = 0;
    let mut templates = Vec::new();
    let mut failures = Vec::new();
    for doc in [
        "spec/rc11/SPECIFICATION.md",
        "spec/rc11/KIPSyntax.md",
        "spec/rc11/SystemInstructions.md",
        "spec/rc11/SelfInstructions.md",
        "spec/rc11/brain/BrainFormation.md",
        "spec/rc11/brain/BrainRecall.md",
        "spec/rc11/brain/BrainMaintenance.md",
    ] {
        check_doc(doc, &mut parsed, &mut templates, &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} examples fail:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(parsed >= 50, "only {parsed} examples parsed");
    eprintln!("parsed {parsed} examples; templates skipped: {templates:?}");
}

fn capsules(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).expect("read capsules") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            capsules(&p, out);
        } else if p.extension().is_some_and(|x| x == "kip") {
            out.push(p);
        }
    }
}

#[test]
fn every_bundled_capsule_parses() {
    let mut files = Vec::new();
    capsules(&repo().join("spec/capsules"), &mut files);
    capsules(&repo().join("spec/rc11/capsules"), &mut files);
    assert!(files.len() >= 28, "found {} capsules", files.len());
    for f in files {
        let src = fs::read_to_string(&f).expect("read capsule");
        let cmds = parse_script(&src).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(!cmds.is_empty());
        // Printing and re-parsing the capsule gives the same commands.
        let again = parse_script(&kip_lang::printer::script(&cmds)).expect("reparse");
        assert_eq!(again, cmds, "{}", f.display());
    }
}
