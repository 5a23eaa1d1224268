//! When a plan's limit resets, as the CLI's own message says it. Each CLI words it its own way
//! (the pinned versions, checked against their mocks):
//!
//! - Claude Code: `You've hit your 5-hour limit · resets 6:58pm (Europe/Paris)`, or
//!   `… · resets Dec 1, 7:57pm (Europe/Paris)` beyond a day;
//! - Codex: `You’ve hit your usage limit. … try again at 7:00 PM.` (the machine's local time), or
//!   `Try again at Dec 2nd, 2026 1:31 AM.`;
//! - Gemini CLI: `Access resets at 7:01 PM GMT+1.`;
//! - Qwen Code shows the provider's words, e.g. `… will reset at 2026-11-29 18:00:00 UTC`;
//! - Copilot CLI shows GitHub's, e.g. `… within a specific time period. Please try again in 2
//!   hours.` (its quota messages, `You have no quota`, say no reset).
//!
//! Why from the words: the message is what every path carries (a hook's payload, the screen),
//! and a time of day without a date is the next such time after the message was written. What
//! cannot be read gives `None`: the chat then offers no "resume at reset" rather than a guess.

use std::sync::LazyLock;

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use regex::Regex;

static CLAUDE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"resets (?:(?P<mon>[A-Z][a-z]{2}) (?P<day>\d{1,2}), (?:(?P<year>\d{4}),? )?)?(?P<h>\d{1,2})(?::(?P<m>\d{2}))?(?P<ap>[ap]m)(?: \((?P<tz>[A-Za-z_+\-/0-9]+)\))?",
    )
    .ok()
});
static CODEX: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i:try again at) (?:(?P<mon>[A-Z][a-z]{2}) (?P<day>\d{1,2})(?:st|nd|rd|th)?, (?P<year>\d{4}) )?(?P<h>\d{1,2}):(?P<m>\d{2})\s?(?P<ap>[AP]M)",
    )
    .ok()
});
static GEMINI: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"resets at (?P<h>\d{1,2}):(?P<m>\d{2})[\s\u{202f}](?P<ap>[AP]M)(?: (?P<tz>GMT[+-]\d{1,2}(?::\d{2})?|UTC|GMT))?",
    )
    .ok()
});
static STAMP: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i:reset(?:s)? at) (?P<date>\d{4}-\d{2}-\d{2})[ T](?P<time>\d{2}:\d{2}(?::\d{2})?)(?P<utc> ?(?:UTC|Z))?",
    )
    .ok()
});

/// A span ahead of the message: Copilot CLI's `Please try again in 2 hours.`
static AFTER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i:try again in) (?P<n>\d{1,4}) (?P<unit>minute|hour|day)s?\b").ok()
});

/// The month of a three-letter English abbreviation.
fn month(mon: &str) -> Option<i8> {
    let i = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == mon)?;
    i8::try_from(i + 1).ok()
}

/// A 12-hour clock time.
fn clock(h: &str, m: Option<&str>, ap: &str) -> Option<Time> {
    let h: i8 = h.parse().ok()?;
    let m: i8 = m.map_or(Ok(0), str::parse).ok()?;
    if !(1..=12).contains(&h) {
        return None;
    }
    let pm = ap.eq_ignore_ascii_case("pm");
    let h24 = match (h, pm) {
        (12, false) => 0,
        (12, true) => 12,
        (h, true) => h + 12,
        (h, false) => h,
    };
    Time::new(h24, m, 0, 0).ok()
}

/// A zone named in the message: an IANA name, UTC/GMT, or a GMT offset.
fn zone(name: Option<&str>, local: &TimeZone) -> TimeZone {
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        return local.clone();
    };
    if let Some(off) = name.strip_prefix("GMT").filter(|o| !o.is_empty()) {
        let (sign, rest) = off.split_at(1);
        let (h, m) = rest.split_once(':').unwrap_or((rest, "0"));
        let secs = h.parse::<i32>().unwrap_or(0) * 3600 + m.parse::<i32>().unwrap_or(0) * 60;
        let secs = if sign == "-" { -secs } else { secs };
        return jiff::tz::Offset::from_seconds(secs)
            .map(TimeZone::fixed)
            .unwrap_or_else(|_| local.clone());
    }
    if matches!(name, "UTC" | "GMT" | "Z") {
        return TimeZone::UTC;
    }
    TimeZone::get(name).unwrap_or_else(|_| local.clone())
}

/// The instant of `time` on `date` (or, without one, the next such time after `now`) in `tz`.
fn instant(date: Option<Date>, time: Time, tz: &TimeZone, now_ms: i64) -> Option<i64> {
    let now = jiff::Timestamp::from_millisecond(now_ms).ok()?;
    let day = match date {
        Some(d) => d,
        None => now.to_zoned(tz.clone()).date(),
    };
    let at = DateTime::from_parts(day, time).to_zoned(tz.clone()).ok()?;
    let mut ms = at.timestamp().as_millisecond();
    // A time of day already past (by more than a minute: the message may be a moment old)
    // is tomorrow's.
    if date.is_none() && ms < now_ms - 60_000 {
        let next = day.tomorrow().ok()?;
        ms = DateTime::from_parts(next, time)
            .to_zoned(tz.clone())
            .ok()?
            .timestamp()
            .as_millisecond();
    }
    Some(ms)
}

/// When the limit `text` speaks of resets (ms since the epoch), read at `now_ms` with `local`
/// the machine's zone; `None` when it does not say.
pub fn reset_of(text: &str, now_ms: i64, local: &TimeZone) -> Option<i64> {
    let text = text.replace('\u{2019}', "'");
    // The screen wraps long lines: one space for any run of whitespace.
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let year_now = || {
        jiff::Timestamp::from_millisecond(now_ms)
            .ok()
            .map(|t| t.to_zoned(local.clone()).year())
    };
    let dated = |c: &regex::Captures<'_>| -> Option<Option<Date>> {
        let Some(mon) = c.name("mon") else {
            return Some(None);
        };
        let year = match c.name("year") {
            Some(y) => y.as_str().parse().ok()?,
            None => year_now()?,
        };
        let day: i8 = c.name("day")?.as_str().parse().ok()?;
        Some(Some(Date::new(year, month(mon.as_str())?, day).ok()?))
    };
    for re in [&*CLAUDE, &*CODEX, &*GEMINI].into_iter().flatten() {
        if let Some(c) = re.captures(&text) {
            let time = clock(&c["h"], c.name("m").map(|m| m.as_str()), &c["ap"])?;
            let tz = zone(c.name("tz").map(|t| t.as_str()), local);
            let date = dated(&c)?;
            let mut ms = instant(date, time, &tz, now_ms)?;
            // "Dec 1" said in late December of the year before.
            if date.is_some() && c.name("year").is_none() && ms < now_ms - 86_400_000 {
                let d = date.and_then(|d| d.checked_add(jiff::Span::new().years(1)).ok());
                ms = instant(d, time, &tz, now_ms)?;
            }
            return Some(ms);
        }
    }
    if let Some(c) = AFTER.as_ref().and_then(|re| re.captures(&text)) {
        let n: i64 = c["n"].parse().ok()?;
        let unit: i64 = match &c["unit"].to_ascii_lowercase()[..] {
            "minute" => 60_000,
            "hour" => 3_600_000,
            _ => 86_400_000,
        };
        return Some(now_ms + n * unit);
    }
    let c = STAMP.as_ref()?.captures(&text)?;
    let date: Date = c["date"].parse().ok()?;
    let time: Time = c["time"].parse().ok()?;
    let tz = if c.name("utc").is_some() {
        TimeZone::UTC
    } else {
        local.clone()
    };
    instant(Some(date), time, &tz, now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-29T17:00:00Z (18:00 in Paris).
    const NOW: i64 = 1_795_971_600_000;

    fn utc(s: &str) -> i64 {
        s.parse::<jiff::Timestamp>()
            .expect("a time")
            .as_millisecond()
    }

    #[test]
    fn claude_codes_words_with_their_zone() {
        let local = TimeZone::UTC;
        let r = |t: &str| reset_of(t, NOW, &local);
        assert_eq!(
            r("You've hit your 5-hour limit · resets 6:58pm (Europe/Paris)"),
            Some(utc("2026-11-29T17:58:00Z"))
        );
        assert_eq!(
            r("You've hit your 5-hour limit · resets 7pm (UTC)"),
            Some(utc("2026-11-29T19:00:00Z"))
        );
        // Past today: tomorrow's.
        assert_eq!(
            r("You've hit your 5-hour limit · resets 9am (UTC)"),
            Some(utc("2026-11-30T09:00:00Z"))
        );
        assert_eq!(
            r("You've hit your weekly limit · resets Dec 1, 7:57pm (Europe/Paris)"),
            Some(utc("2026-12-01T18:57:00Z"))
        );
    }

    #[test]
    fn codex_gemini_and_qwen_words() {
        let paris = TimeZone::get("Europe/Paris").expect("zone");
        let r = |t: &str| reset_of(t, NOW, &paris);
        // The typographic apostrophe, and a line the screen wrapped.
        assert_eq!(
            r("■ You’ve hit your usage limit. Upgrade to Pro, or try again\n  at 7:00 PM."),
            Some(utc("2026-11-29T18:00:00Z"))
        );
        assert_eq!(
            r("You’ve hit your usage limit. Try again at Dec 2nd, 2026 1:31 AM."),
            Some(utc("2026-12-02T00:31:00Z"))
        );
        assert_eq!(
            r("Usage limit reached for all Pro models. Access resets at 7:01 PM GMT+1."),
            Some(utc("2026-11-29T18:01:00Z"))
        );
        assert_eq!(
            r(
                "Quota exhausted: the 5-hour quota is exhausted and will reset at 2026-11-29 18:00:00 UTC."
            ),
            Some(utc("2026-11-29T18:00:00Z"))
        );
        assert_eq!(
            r(
                "✗ Sorry, you've hit a rate limit that restricts the number of Copilot model requests you can make within a specific time period. Please try again in 2 hours."
            ),
            Some(NOW + 2 * 3_600_000)
        );
        assert_eq!(
            r(
                "✘ Quota exceeded. Upgrade to increase your limit: https://github.com/features/copilot/plans"
            ),
            None
        );
        assert_eq!(r("You've hit your usage limit. Try again later."), None);
        assert_eq!(r("rate limit exceeded"), None);
    }
}
