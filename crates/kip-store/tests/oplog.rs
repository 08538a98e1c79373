//! Replaying operation logs: any payload (a damaged log record that passed its
//! checksum by chance, a bug) is applied or refused, never a panic, and inside an
//! aborted transaction it changes nothing.

use kip_storage::GraphRead;
use kip_store::db::Store;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_7021), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_payloads_fail_cleanly_on_replay(payload in prop::collection::vec(any::<u8>(), 0..512)) {
        let store = Store::in_memory(&mut |_| Ok(())).expect("store");
        let state = |s: &Store| s.read(|r| Ok((r.totals()?, r.meta("next_concept_id")?))).expect("read");
        let before = state(&store);
        let _ = store.write(|w| w.apply_log(&payload), true);
        prop_assert_eq!(state(&store), before);
    }
}
