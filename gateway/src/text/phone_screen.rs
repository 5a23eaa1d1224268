//! `!!screen` on a phone: the pane as text, made to fit a narrow chat bubble. A terminal
//! screen is mostly blank rows and full-width rules (a CLI's composer box, its separators),
//! which on a phone push what matters off the screen; they are dropped or shortened, and the
//! text that is there is kept as it is.

/// The longest a rule (a row of `─`, `━`, `═`, `-`, …) is shown.
const RULE: usize = 12;

/// `screen` without blank rows, trailing spaces, or rules longer than `RULE`.
pub fn compact(screen: &str) -> String {
    let mut out = String::with_capacity(screen.len());
    for line in screen.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        out.push_str(&shorten_rules(line));
        out.push('\n');
    }
    out
}

fn is_rule_char(c: char) -> bool {
    matches!(
        c,
        '─' | '━' | '═' | '-' | '_' | '=' | '╌' | '┄' | '┈' | '╍' | '┅' | '┉' | '▔' | '▁'
    )
}

/// Each run of more than [`RULE`] rule characters is cut to [`RULE`] of them.
fn shorten_rules(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut run: Option<(char, usize)> = None;
    let flush = |out: &mut String, run: Option<(char, usize)>| {
        if let Some((c, n)) = run {
            out.extend(std::iter::repeat_n(c, n.min(RULE)));
        }
    };
    for c in line.chars() {
        match run {
            Some((r, n)) if is_rule_char(c) && c == r => run = Some((r, n + 1)),
            _ if is_rule_char(c) => {
                flush(&mut out, run.take());
                run = Some((c, 1));
            }
            _ => {
                flush(&mut out, run.take());
                out.push(c);
            }
        }
    }
    flush(&mut out, run);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_rows_go_and_rules_shrink_but_text_stays() {
        let screen = format!(
            "\n\n● Done: 3 files changed\n   \n{}\n❯ next\n{}\n  ? for shortcuts   \n\n",
            "─".repeat(80),
            "─".repeat(80)
        );
        assert_eq!(
            compact(&screen),
            format!(
                "● Done: 3 files changed\n{r}\n❯ next\n{r}\n  ? for shortcuts\n",
                r = "─".repeat(RULE)
            )
        );
        // Short dashes in text are text.
        assert_eq!(compact("a -- b --- c\n"), "a -- b --- c\n");
        assert_eq!(compact("╭───────────────────────╮\n"), "╭────────────╮\n");
    }
}
