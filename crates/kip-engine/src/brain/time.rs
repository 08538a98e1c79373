//! Timestamps as the brain reads them: ISO-8601 / RFC 3339 strings in metadata and
//! attributes (`expires_at`, `start_time`, ...).

use std::time::{Duration, SystemTime};

/// Formats `t` as RFC 3339 UTC with milliseconds (`2026-01-02T03:04:05.678Z`), the form
/// the engine writes everywhere.
pub fn format(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// Parses an ISO-8601 timestamp: `2026-01-02T03:04:05Z`, with fractional seconds, with a
/// `+HH:MM`/`-HH:MM` offset, without a zone (read as UTC), with a space for the `T`, or
/// a bare date (midnight UTC). `None` for anything else.
pub fn parse(s: &str) -> Option<SystemTime> {
    let s = s.trim();
    if s.len() == 10 {
        return humantime::parse_rfc3339_weak(&format!("{s}T00:00:00Z")).ok();
    }
    // A trailing numeric offset (after the time part).
    let (body, offset) = match s
        .len()
        .checked_sub(6)
        .and_then(|i| s.get(i..).map(|t| (i, t)))
    {
        Some((i, tail))
            if i > 10
                && (tail.starts_with('+') || tail.starts_with('-'))
                && tail.as_bytes()[3] == b':' =>
        {
            let h: u64 = tail.get(1..3)?.parse().ok()?;
            let m: u64 = tail.get(4..6)?.parse().ok()?;
            if h > 23 || m > 59 {
                return None;
            }
            let secs = Duration::from_secs(h * 3600 + m * 60);
            (s.get(..i)?, Some((tail.starts_with('+'), secs)))
        }
        _ => (s, None),
    };
    let t = humantime::parse_rfc3339_weak(body.trim_end_matches(['Z', 'z'])).ok()?;
    Some(match offset {
        // Local time ahead of UTC: UTC is earlier.
        Some((true, d)) => t.checked_sub(d)?,
        Some((false, d)) => t.checked_add(d)?,
        None => t,
    })
}

/// Whether timestamp text `value` is before `now` (`None`: not a timestamp we read).
pub fn is_before(value: &str, now: SystemTime) -> Option<bool> {
    parse(value).map(|t| t < now)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(is_before("2020-01-01", base), Some(true));
        assert_eq!(is_before("2030-01-01", base), Some(false));
        assert_eq!(is_before("never", base), None);
    }
}
