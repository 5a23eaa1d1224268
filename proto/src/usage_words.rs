//! Usage in words, the same in `clibotctl usage`, the chats' `!!usage` and a reply's footer:
//! token counts as people read them ("1.2k") and plan windows with their reset
//! ("5h 42 % (resets in 1h 10m) · 7d 30 %"). Relative times, because the phone reading them may
//! be in another time zone than the machine.

use crate::v1;

/// `950`, `1.2k`, `34k`, `5.6M`.
pub fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..10_000 => format!("{:.1}k", n as f64 / 1e3),
        10_000..1_000_000 => format!("{}k", n / 1_000),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// Dollars as an estimate: "≈ $0.42", "≈ $12", "< $0.01".
pub fn money(usd: f64) -> String {
    if usd <= 0.0 {
        "≈ $0".into()
    } else if usd < 0.01 {
        "< $0.01".into()
    } else if usd < 10.0 {
        format!("≈ ${usd:.2}")
    } else {
        format!("≈ ${usd:.0}")
    }
}

/// `1h 10m`, `3d 4h`, `45s`.
pub fn span(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h {}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// A CLI's windows at `now_ms`: "5h 42 % (resets in 1h 10m) · 7d 30 % (resets in 6d 2h)"; a
/// window whose reset passed is said as reset.
pub fn windows(ws: &[v1::PlanWindow], now_ms: i64) -> String {
    ws.iter()
        .map(|w| {
            let pct = format!("{} {:.0} %", w.name, w.used_percent);
            match w.resets_at_ms {
                0 => pct,
                at if at <= now_ms => format!("{} (reset since)", w.name),
                at => format!("{pct} (resets in {})", span((at - now_ms) / 1000)),
            }
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_windows_read_as_people_say_them() {
        assert_eq!(
            [950, 1_234, 34_567, 5_600_000].map(tokens),
            ["950", "1.2k", "34k", "5.6M"]
        );
        let w = |name: &str, pct: f64, at: i64| v1::PlanWindow {
            name: name.into(),
            used_percent: pct,
            resets_at_ms: at,
        };
        assert_eq!(
            windows(&[w("5h", 42.0, 4_200_000), w("7d", 30.4, 0)], 0),
            "5h 42 % (resets in 1h 10m) · 7d 30 %"
        );
        assert_eq!(windows(&[w("5h", 99.0, 10)], 20), "5h (reset since)");
        assert_eq!(
            [0.4249, 0.004, 12.4].map(money),
            ["≈ $0.42", "< $0.01", "≈ $12"]
        );
    }
}
