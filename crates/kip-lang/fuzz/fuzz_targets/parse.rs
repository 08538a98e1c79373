//! Fuzz target: any bytes go through the parser without a panic, and whatever parses
//! prints to text that parses back to the same commands.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(cmds) = kip_lang::parse_script_bytes(data) {
        let printed = kip_lang::printer::script(&cmds);
        let again = kip_lang::parse_script(&printed).expect("printed text must parse");
        assert_eq!(again, cmds, "round trip changed the commands");
    }
});
