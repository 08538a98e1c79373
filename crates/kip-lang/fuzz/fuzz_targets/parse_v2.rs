//! Fuzz target for the KIP 2.0 parser: any bytes go through it without a panic, what
//! parses prints to text that parses back to the same statement, a statement parses
//! alone as it does as a one-statement script, and every syntax error carries its
//! registry name, line, column and a hint.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let one = kip_lang::v2::parse_bytes(data);
    let Ok(text) = std::str::from_utf8(data) else {
        assert!(one.is_err(), "invalid UTF-8 must be refused");
        return;
    };
    match &one {
        Ok(st) => {
            let printed = st.to_string();
            let again = kip_lang::v2::parse(&printed).expect("printed text must parse");
            assert_eq!(again.kind, st.kind, "round trip changed the statement");
            let script = kip_lang::v2::parse_script(text).expect("a statement is a script");
            assert_eq!(script.as_slice(), std::slice::from_ref(st));
        }
        Err(e) => {
            assert!(
                ["InvalidSyntax", "InvalidIdentifier", "ResourceExhausted"].contains(&e.v2_code()),
                "unexpected error {e}"
            );
            if e.v2_code() != "ResourceExhausted" {
                assert!(e.line.is_some() && e.column.is_some(), "no position: {e}");
                assert!(e.hint.is_some(), "no hint: {e}");
            }
        }
    }
    let _ = kip_lang::v2::parse_where_clauses(text);
});
