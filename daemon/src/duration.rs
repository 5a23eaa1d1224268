//! Durations as people write them in the config (`"90s"`, `"12h"`) and read them in messages.

use std::time::Duration;

pub use clibot_proto::duration::parse_duration;

/// `20261127-065312` (UTC): a time in a file name, sorting as it reads.
pub fn stamp(ms: i64) -> String {
    let [y, m, d, hh, mm, ss] = clibot_proto::utc(ms);
    format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}")
}

/// A duration in the units [`parse_duration`] reads, exact: "12h", "1m30s", "2d".
pub fn format_duration(d: Duration) -> String {
    let mut s = d.as_secs();
    if s == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, len) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if s >= len {
            out.push_str(&format!("{}{unit}", s / len));
            s %= len;
        }
    }
    out
}

/// A rough age for people: the largest whole unit ("3h", "40m", "12s").
pub fn format_age(d: Duration) -> String {
    let s = d.as_secs();
    for (unit, len) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if s >= len {
            return format!("{}{unit}", s / len);
        }
    }
    format!("{s}s")
}

/// A duration in words for a message, to the two largest units: "1 hour", "1 hour 30 minutes",
/// "47 minutes", "2 days 3 hours", "30 seconds".
pub fn format_words(d: Duration) -> String {
    let units = [
        ("day", 86_400),
        ("hour", 3600),
        ("minute", 60),
        ("second", 1),
    ];
    let s = d.as_secs();
    let word = |n: u64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    let Some(i) = units.iter().position(|(_, len)| s >= *len) else {
        return word(0, "second");
    };
    let (unit, len) = units[i];
    let mut out = word(s / len, unit);
    if let Some((next, next_len)) = units.get(i + 1) {
        let n = s % len / next_len;
        if n > 0 {
            out.push(' ');
            out.push_str(&word(n, next));
        }
    }
    out
}

/// Reads a duration from the config: a string with a unit, or 0 (off).
struct DurationVisitor;

impl serde::de::Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a duration such as \"90s\", \"30m\", \"12h\", \"2d\" or \"0\" (off)")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
        parse_duration(v).map_err(E::custom)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Duration, E> {
        if v == 0 {
            Ok(Duration::ZERO)
        } else {
            Err(E::custom(format!(
                "{v} has no unit: write it as a string with one, e.g. \"{v}s\" or \"{v}m\""
            )))
        }
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Duration, E> {
        self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

pub fn de_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    d.deserialize_any(DurationVisitor)
}

pub fn de_opt_duration<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Duration>, D::Error> {
    d.deserialize_any(DurationVisitor).map(Some)
}
