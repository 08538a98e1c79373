//! Fuzz target: any bytes go through the parser without a panic, whatever parses prints
//! to text that parses back to the same commands, and a script split into commands (as
//! capsules are loaded) parses to the same commands as the whole script. The parser lexes
//! as it goes, yet a lexing error anywhere is what it reports, as if the whole input had
//! been tokenized first.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = kip_lang::parse_script_bytes(data);
    if let Ok(cmds) = &whole {
        let printed = kip_lang::printer::script(cmds);
        let again = kip_lang::parse_script(&printed).expect("printed text must parse");
        assert_eq!(&again, cmds, "round trip changed the commands");
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(lexed) = kip_lang::lexer::tokenize(text) {
            assert_eq!(
                whole.as_ref().err(),
                Some(&lexed),
                "a lexing error must win"
            );
            assert_eq!(
                kip_lang::parse_command(text).err(),
                Some(lexed),
                "a lexing error must win"
            );
        }
        let parts = kip_lang::script_ranges(text).and_then(|ranges| {
            ranges
                .into_iter()
                .map(|r| kip_lang::parse_script_part(text, r, kip_lang::ParseOptions::default()))
                .collect::<Result<Vec<_>, _>>()
        });
        if let (Ok(w), Ok(p)) = (&whole, &parts) {
            assert_eq!(w, p, "split parsing differs from whole parsing");
        }
        if whole.is_err() && !text.trim().is_empty() {
            if let Ok(p) = &parts {
                // Only whitespace/comments can make the whole fail and the parts pass
                // (no commands at all).
                assert!(
                    p.is_empty(),
                    "split parsing accepted a script the parser rejects"
                );
            }
        }
    }
});
