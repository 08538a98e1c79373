//! Time, in one place: the engine's clock ([`now`]), the form it writes timestamps in
//! ([`format()`], [`now_text`]: RFC 3339 UTC with milliseconds), the one strict reader
//! of the timestamps agents write ([`parse`]), and the one expiry rule ([`expired`])
//! that the health report, the sleep cycle's plan and its deletions all use.

use serde_json::{Map, Value};
use std::time::SystemTime;

/// The engine's clock: every "now" the engine stamps or compares with comes from here.
pub fn now() -> SystemTime {
    SystemTime::now()
}

/// [`now`] as the engine writes it (`2026-01-02T03:04:05.678Z`).
pub fn now_text() -> String {
    format(now())
}

/// Formats `t` as RFC 3339 UTC with milliseconds (`2026-01-02T03:04:05.678Z`), the form
/// the engine writes everywhere.
pub fn format(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// Parses a timestamp in exactly one of the ISO-8601 / RFC 3339 forms docs/brain.md
/// lists, and nothing else (no surrounding spaces, no trailing text):
///
/// - a bare date, `2026-01-02` (midnight UTC);
/// - a date and time, `2026-01-02T03:04:05` (`T`, `t` or one space between them),
///   with optional fractional seconds (`.5` to nine digits), and either no zone (UTC),
///   `Z`/`z`, or an offset `+hh:mm`/`-hh:mm` (honoured: `20:00:00+14:00` is 06:00 UTC).
///
/// `None` for anything else, including impossible dates (`2026-02-30`): a value that
/// is not a timestamp is never taken as one.
pub fn parse(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let date_ok = b.len() >= 10
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10);
    if !date_ok {
        return None;
    }
    if b.len() == 10 {
        return humantime::parse_rfc3339(&format!("{s}T00:00:00Z")).ok();
    }
    let time_ok = b.len() >= 19
        && matches!(b[10], b'T' | b't' | b' ')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !time_ok {
        return None;
    }
    let mut end = 19;
    if b.get(end) == Some(&b'.') {
        let frac = b[end + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if !(1..=9).contains(&frac) {
            return None;
        }
        end += 1 + frac;
    }
    let offset_secs: i64 = match &b[end..] {
        [] | [b'Z'] | [b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let two = |a: u8, c: u8| -> Option<i64> {
                (a.is_ascii_digit() && c.is_ascii_digit())
                    .then(|| i64::from(a - b'0') * 10 + i64::from(c - b'0'))
            };
            let (h, m) = (two(*h1, *h2)?, two(*m1, *m2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = h * 3600 + m * 60;
            if *sign == b'+' {
                secs
            } else {
                -secs
            }
        }
        _ => return None,
    };
    let utc_text = format!("{}T{}Z", &s[..10], &s[11..end]);
    let local = humantime::parse_rfc3339(&utc_text).ok()?;
    // Local time ahead of UTC (`+hh:mm`): UTC is earlier.
    let d = std::time::Duration::from_secs(offset_secs.unsigned_abs());
    if offset_secs >= 0 {
        local.checked_sub(d)
    } else {
        local.checked_add(d)
    }
}

/// Whether timestamp text `value` is before `now` (`None`: not a timestamp we read).
pub fn is_before(value: &str, now: SystemTime) -> Option<bool> {
    parse(value).map(|t| t < now)
}

/// The expiry rule: whether the element with this metadata is expired as of `now`.
/// `Some(false)` without `expires_at` (or `null`); `None` when `expires_at` is not a
/// timestamp [`parse`] reads (never treated as expired).
pub fn expired(metadata: &Map<String, Value>, now: SystemTime) -> Option<bool> {
    match metadata.get("expires_at") {
        None | Some(Value::Null) => Some(false),
        Some(Value::String(s)) => is_before(s, now),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn parses_the_usual_forms() {
        let base = parse("2026-01-02T03:04:05Z").expect("utc");
        assert_eq!(format(base), "2026-01-02T03:04:05.000Z");
        assert_eq!(parse("2026-01-02T03:04:05"), Some(base));
        assert_eq!(parse("2026-01-02 03:04:05Z"), Some(base));
        assert_eq!(parse("2026-01-02T05:04:05+02:00"), Some(base));
        assert_eq!(parse("2026-01-02T01:04:05-02:00"), Some(base));
        assert_eq!(
            parse("2026-01-02T03:04:05.250Z"),
            base.checked_add(Duration::from_millis(250))
        );
        assert_eq!(
            parse("2026-01-02"),
            base.checked_sub(Duration::from_secs(3 * 3600 + 4 * 60 + 5))
        );
        for bad in [
            "",
            "soon",
            "2026-13-01",
            "2026-01-02T03:04:05+25:00",
            "12345678901+0",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(parse("2026-01-02t03:04:05z"), Some(base));
        assert_eq!(
            parse("2026-01-02T03:04:05.123456789Z"),
            base.checked_add(Duration::from_nanos(123_456_789))
        );
        assert_eq!(is_before("2020-01-01", base), Some(true));
        assert_eq!(is_before("2030-01-01", base), Some(false));
        assert_eq!(is_before("never", base), None);
    }

    /// Issue 45: lenient reading took junk for a timestamp, and an offset was ignored.
    #[test]
    fn only_the_listed_forms_are_timestamps() {
        for bad in [
            "2020-01-01T00:00:00Z junk",
            " 2020-01-01",
            "2020-01-01 ",
            "2020-01-01T00:00:00ZZ",
            "2020-01-01T00:00:00.Z",
            "2020-01-01T00:00:00.1234567890Z",
            "2020-01-01T00:00Z",
            "2020-01-01T00:00:00+0100",
            "2020-01-01T00:00:00+01",
            "2026-02-30",
            "2026-02-30T00:00:00Z",
            "2020-1-01",
            "20200101",
            "2020-01-01T24:00:00Z",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        // 20:00 at +14:00 is 06:00 UTC the same day.
        assert_eq!(
            parse("2026-11-27T20:00:00+14:00"),
            parse("2026-11-27T06:00:00Z")
        );
    }

    #[test]
    fn the_expiry_rule_reads_only_timestamps() {
        let now = parse("2026-11-27T12:00:00Z").expect("now");
        let meta = |v: Value| {
            let mut m = Map::new();
            m.insert("expires_at".into(), v);
            m
        };
        assert_eq!(expired(&Map::new(), now), Some(false));
        assert_eq!(expired(&meta(Value::Null), now), Some(false));
        assert_eq!(
            expired(&meta("2026-11-27T20:00:00+14:00".into()), now),
            Some(true)
        );
        assert_eq!(
            expired(&meta("2026-11-27T13:00:00+00:00".into()), now),
            Some(false)
        );
        assert_eq!(
            expired(&meta("2020-01-01T00:00:00Z junk".into()), now),
            None
        );
        assert_eq!(expired(&meta(serde_json::json!(12)), now), None);
    }
}
