//! Rate-limited warnings: a condition that repeats at every write (a full disk failing
//! every checkpoint) is logged once per interval with the number of repeats in between,
//! not a thousand times in ten seconds.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One call site's state: when it last logged, and how many calls it has swallowed
/// since.
#[derive(Debug)]
pub struct Throttle {
    interval: Duration,
    state: Mutex<Option<(Instant, u64)>>,
}

impl Throttle {
    /// A throttle letting one message through per `interval`.
    pub const fn new(interval: Duration) -> Throttle {
        Throttle {
            interval,
            state: Mutex::new(None),
        }
    }

    /// `Some(suppressed)` when this call may log (with the number of calls swallowed
    /// since the last one that did), `None` when it must stay quiet.
    pub fn allow(&self) -> Option<u64> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match *st {
            Some((last, n)) if now.duration_since(last) < self.interval => {
                *st = Some((last, n + 1));
                None
            }
            Some((_, n)) => {
                *st = Some((now, 0));
                Some(n)
            }
            None => {
                *st = Some((now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_message_per_interval_with_the_count_of_the_others() {
        let t = Throttle::new(Duration::from_millis(200));
        assert_eq!(t.allow(), Some(0));
        for _ in 0..1000 {
            assert_eq!(t.allow(), None);
        }
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(t.allow(), Some(1000));
        assert_eq!(t.allow(), None);
    }
}
