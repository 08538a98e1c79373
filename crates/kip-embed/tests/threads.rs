//! `pin_thread_count` keeps a thread count the user set and otherwise sets the
//! machine's. One test in its own binary: it changes the process environment, which no
//! other test may be reading at the same time.

#[test]
fn the_thread_count_is_pinned_once_and_a_set_value_is_kept() {
    std::env::set_var("RAYON_NUM_THREADS", "3");
    assert_eq!(kip_embed::pin_thread_count(), 3);
    assert_eq!(std::env::var("RAYON_NUM_THREADS").as_deref(), Ok("3"));
    // Unset, or not a positive number: the available parallelism is set.
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    for unset in [None, Some("0"), Some("many")] {
        match unset {
            None => std::env::remove_var("RAYON_NUM_THREADS"),
            Some(v) => std::env::set_var("RAYON_NUM_THREADS", v),
        }
        assert_eq!(kip_embed::pin_thread_count(), cores, "{unset:?}");
        assert_eq!(
            std::env::var("RAYON_NUM_THREADS").ok(),
            Some(cores.to_string())
        );
    }
}
