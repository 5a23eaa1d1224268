//! Cron lines (`0 9 * * 1-5`) and the next time one is due, in a time zone.
//!
//! Why our own small evaluator: the five fields are a few lines to read, and the part that is
//! easy to get wrong — a local time that happens twice or never when the clocks change — is
//! decided here, once, on `jiff`'s time zones, with tests, rather than inside a crate.
//!
//! What a change of the clocks does (documented in docs/JOBS.md):
//! - A local time that does not exist that day (02:30 on a spring-forward night) is due as
//!   soon as the clock passes it: 03:30, the same instant as 02:30 of the old offset.
//! - A local time that happens twice (01:30 on a fall-back night) is due once, at its first
//!   occurrence.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// A parsed cron line: the minutes, hours, days of the month, months and days of the week
/// it matches, each as a bit set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Both days of the month and of the week were restricted: either matches (as in every
    /// cron since Vixie's).
    either_day: bool,
}

/// How far ahead a next time is looked for: a line that matches no day in this many years
/// (`0 0 30 2 *`, February 30th) matches none.
const YEARS_AHEAD: i64 = 5;

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Cron {
    /// Parses five fields (minute hour day-of-month month day-of-week) or one of `@hourly`,
    /// `@daily`, `@midnight`, `@weekly`, `@monthly`, `@yearly`, `@annually`. Each field takes
    /// `*`, numbers, ranges `1-5`, steps `*/15` and `8-18/2`, and lists `1,15`; months and days
    /// may be named (`jan`, `mon-fri`); Sunday is 0 or 7.
    pub fn parse(line: &str) -> Result<Cron, String> {
        let line = line.trim();
        let expanded = match line {
            "@hourly" => "0 * * * *",
            "@daily" | "@midnight" => "0 0 * * *",
            "@weekly" => "0 0 * * 0",
            "@monthly" => "0 0 1 * *",
            "@yearly" | "@annually" => "0 0 1 1 *",
            l if l.starts_with('@') => {
                return Err(format!(
                    "{l:?} is no cron shortcut: use @hourly, @daily, @weekly, @monthly or @yearly, or five fields"
                ));
            }
            l => l,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(format!(
                "{line:?} has {} fields; a cron line has five: minute hour day-of-month month day-of-week (e.g. \"0 9 * * 1-5\")",
                fields.len()
            ));
        };
        let weekdays = field(weekday, "day of the week", 0, 7, &WEEKDAYS, 0)?;
        // 7 is Sunday too.
        let weekdays = (weekdays | (weekdays >> 7)) & 0x7f;
        Ok(Cron {
            minutes: field(minute, "minute", 0, 59, &[], 0)?,
            hours: field(hour, "hour", 0, 23, &[], 0)? as u32,
            days: field(day, "day of the month", 1, 31, &[], 0)? as u32,
            months: field(month, "month", 1, 12, &MONTHS, 1)? as u16,
            weekdays: weekdays as u8,
            either_day: day != "*" && weekday != "*",
        })
    }

    /// The first time after `after` this line is due in `tz` (see the module's notes on the
    /// clocks' changes); `None` when no day in the next years matches.
    pub fn next_after(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let start = after.to_zoned(tz.clone()).datetime();
        // The next whole minute of the local clock.
        let start = DateTime::from_parts(
            start.date(),
            Time::new(start.hour(), start.minute(), 0, 0).ok()?,
        )
        .checked_add(1.minute())
        .ok()?;
        let last = start.date().checked_add((YEARS_AHEAD * 366).days()).ok()?;
        let mut date = start.date();
        let mut first_day = true;
        while date <= last {
            if self.day_matches(date) {
                for hour in 0..24i8 {
                    if self.hours & (1 << hour) == 0 || (first_day && hour < start.hour()) {
                        continue;
                    }
                    for minute in 0..60i8 {
                        if self.minutes & (1 << minute) == 0
                            || (first_day && hour == start.hour() && minute < start.minute())
                        {
                            continue;
                        }
                        let dt = DateTime::from_parts(date, Time::new(hour, minute, 0, 0).ok()?);
                        let ts = tz.to_ambiguous_timestamp(dt).compatible().ok()?;
                        if ts > after {
                            return Some(ts);
                        }
                    }
                }
            }
            date = date.tomorrow().ok()?;
            first_day = false;
        }
        None
    }

    fn day_matches(&self, date: Date) -> bool {
        let month = self.months & (1 << date.month()) != 0;
        let day = self.days & (1 << date.day()) != 0;
        let weekday = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        month
            && if self.either_day {
                day || weekday
            } else {
                day && weekday
            }
    }
}

/// One field as a bit set of the values `lo..=hi` it matches; `names[i]` stands for
/// `i + name_base`.
fn field(
    text: &str,
    what: &str,
    lo: u32,
    hi: u32,
    names: &[&str],
    name_base: u32,
) -> Result<u64, String> {
    let value = |s: &str| -> Result<u32, String> {
        let lower = s.to_ascii_lowercase();
        if let Some(i) = names.iter().position(|n| *n == lower) {
            return Ok(i as u32 + name_base);
        }
        let v: u32 = s
            .parse()
            .map_err(|_| format!("{s:?} is not a {what} (use {lo}-{hi})"))?;
        if v < lo || v > hi {
            return Err(format!("{what} {v} is out of range: {lo}-{hi}"));
        }
        Ok(v)
    };
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 =
                    s.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                        format!("{s:?} is no step for the {what}: a number from 1")
                    })?;
                (r, step)
            }
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                // `5/15`: from 5 to the end, every 15.
                None if step > 1 => (value(r)?, hi),
                None => {
                    let v = value(r)?;
                    (v, v)
                }
            },
        };
        if from > to {
            return Err(format!("{part:?}: the {what} range runs backwards"));
        }
        let mut v = from;
        while v <= to {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(tz: &str, civil: &str) -> Timestamp {
        let dt: DateTime = civil.parse().expect("civil time");
        TimeZone::get(tz)
            .expect("zone")
            .to_ambiguous_timestamp(dt)
            .compatible()
            .expect("instant")
    }

    fn local(ts: Timestamp, tz: &str) -> String {
        ts.to_zoned(TimeZone::get(tz).expect("zone"))
            .strftime("%Y-%m-%d %H:%M %:z")
            .to_string()
    }

    fn nexts(line: &str, tz: &str, from: &str, n: usize) -> Vec<String> {
        let c = Cron::parse(line).expect("parses");
        let zone = TimeZone::get(tz).expect("zone");
        let mut t = at(tz, from);
        (0..n)
            .map(|_| {
                t = c.next_after(t, &zone).expect("a next time");
                local(t, tz)
            })
            .collect()
    }

    #[test]
    fn weekdays_at_nine() {
        // 2026-11-27 is a Friday.
        assert_eq!(
            nexts("0 9 * * 1-5", "Europe/Berlin", "2026-11-27T09:00", 3),
            [
                "2026-11-30 09:00 +01:00",
                "2026-12-01 09:00 +01:00",
                "2026-12-02 09:00 +01:00"
            ]
        );
    }

    #[test]
    fn steps_lists_names_and_shortcuts() {
        assert_eq!(
            nexts("*/20 8-9 * * mon", "UTC", "2026-11-30T08:15", 4),
            [
                "2026-11-30 08:20 +00:00",
                "2026-11-30 08:40 +00:00",
                "2026-11-30 09:00 +00:00",
                "2026-11-30 09:20 +00:00"
            ]
        );
        assert_eq!(
            nexts("@monthly", "UTC", "2026-11-30T08:15", 2),
            ["2026-12-01 00:00 +00:00", "2027-01-01 00:00 +00:00"]
        );
        assert_eq!(
            Cron::parse("0 0 * * 7").expect("sunday"),
            Cron::parse("0 0 * * sun").expect("sunday")
        );
        // Both days restricted: either matches (the 1st, and Mondays).
        assert_eq!(
            nexts("0 12 1 * mon", "UTC", "2026-11-28T00:00", 3),
            [
                "2026-11-30 12:00 +00:00",
                "2026-12-01 12:00 +00:00",
                "2026-12-07 12:00 +00:00"
            ]
        );
    }

    /// Spring forward in New York (2026-03-08, 02:00 → 03:00): 02:30 does not exist and is
    /// due at 03:30; the next day it is 02:30 again.
    #[test]
    fn a_skipped_local_time_is_due_when_the_clock_passes_it() {
        assert_eq!(
            nexts("30 2 * * *", "America/New_York", "2026-03-07T03:00", 2),
            ["2026-03-08 03:30 -04:00", "2026-03-09 02:30 -04:00"]
        );
    }

    /// Fall back in New York (2026-11-01, 02:00 → 01:00): 01:30 happens twice and is due
    /// once; an hourly line runs once in the doubled hour too.
    #[test]
    fn a_doubled_local_time_is_due_once() {
        assert_eq!(
            nexts("30 1 * * *", "America/New_York", "2026-10-31T12:00", 2),
            ["2026-11-01 01:30 -04:00", "2026-11-02 01:30 -05:00"]
        );
        assert_eq!(
            nexts("30 * * * *", "America/New_York", "2026-11-01T00:00", 3),
            [
                "2026-11-01 00:30 -04:00",
                "2026-11-01 01:30 -04:00",
                "2026-11-01 02:30 -05:00"
            ]
        );
    }

    #[test]
    fn a_line_that_matches_no_day_has_no_next_time() {
        let c = Cron::parse("0 0 30 2 *").expect("parses");
        assert_eq!(c.next_after(Timestamp::UNIX_EPOCH, &TimeZone::UTC), None);
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        for (line, says) in [
            ("0 9 * *", "has 4 fields"),
            ("61 * * * *", "minute 61 is out of range"),
            ("* 25 * * *", "hour 25 is out of range"),
            ("* * * * funday", "not a day of the week"),
            ("*/0 * * * *", "no step"),
            ("5-1 * * * *", "runs backwards"),
            ("@often", "no cron shortcut"),
        ] {
            let e = Cron::parse(line).expect_err(line);
            assert!(e.contains(says), "{line}: {e}");
        }
    }
}
