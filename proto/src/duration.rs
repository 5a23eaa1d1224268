//! Durations as people write them — in the config (`stall_after = "90s"`), on the command line
//! (`clibotctl events --since 15m`, `wait --timeout 2m`) and in chat commands: the one parser
//! daemon, gateway and clibotctl share, so a duration reads the same everywhere.
//!
//! A duration is one or more whole numbers each with a unit — `ms`, `s`, `m`, `h`, `d` — largest
//! first: `"500ms"`, `"90s"`, `"1h30m"`, `"2d"`. `"0"` alone is zero (where a setting can be
//! off, off). No fractions, no signs, no bare numbers (is `"30"` seconds or minutes?).

use std::time::Duration;

/// What to write, said with every refusal.
const HELP: &str = "write whole numbers with units (ms, s, m, h, d): \"90s\", \"30m\", \"12h\", \"1h30m\" (\"0\": off)";

/// Reads a duration (see the module's doc); the error names the text and says what to write.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.is_empty() {
        return Err(format!("{text:?} is not a duration: {HELP}"));
    }
    let mut total: u64 = 0;
    let mut rest = t;
    let mut last_unit = u64::MAX;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (num, after) = rest.split_at(split);
        if num.is_empty() {
            return Err(format!("{text:?} is not a duration: {HELP}"));
        }
        let n: u64 = num
            .parse()
            .map_err(|_| format!("{text:?} is too large a duration: {HELP}"))?;
        let unit_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let ms: u64 = match unit {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(format!("{text:?} has no unit: {HELP}")),
            _ => return Err(format!("{text:?} has an unknown unit {unit:?}: {HELP}")),
        };
        if ms >= last_unit {
            return Err(format!(
                "{text:?} repeats a unit or puts a small one first: {HELP}"
            ));
        }
        last_unit = ms;
        total = n
            .checked_mul(ms)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("{text:?} is too large a duration: {HELP}"))?;
        rest = next;
    }
    Ok(Duration::from_millis(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_their_units() {
        let ok = |s: &str| parse_duration(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("90s"), Duration::from_secs(90));
        assert_eq!(ok("30m"), Duration::from_secs(1800));
        assert_eq!(ok("12h"), Duration::from_secs(43_200));
        assert_eq!(ok("2d"), Duration::from_secs(172_800));
        assert_eq!(ok(" 5s "), Duration::from_secs(5));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        let huge = "9999999999999999999d";
        for bad in [
            "", "h", "12", "12x", "1.5h", "-3s", "30m1h", "1m1m", "1 h", "soon", huge,
        ] {
            let e = parse_duration(bad).expect_err(bad);
            assert!(
                e.contains("\"12h\"") && e.contains(&format!("{bad:?}")),
                "{bad}: {e}"
            );
        }
    }
}
