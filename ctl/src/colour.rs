//! Colour for people at a terminal, never for pipes and scripts: only when standard output is
//! a terminal, `NO_COLOR` is unset (<https://no-color.org>) and `TERM` is not `dumb`.

use std::io::IsTerminal;

/// What a word means, and so its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Busy,
    Attention,
    Bad,
    Quiet,
}

/// Whether to colour what goes to standard output.
pub fn enabled() -> bool {
    decide(
        std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        std::env::var("TERM").is_ok_and(|t| t == "dumb"),
        std::io::stdout().is_terminal(),
    )
}

fn decide(no_color: bool, dumb: bool, terminal: bool) -> bool {
    terminal && !no_color && !dumb
}

/// `text` in its tone's colour when `on`.
pub fn paint(text: &str, tone: Tone, on: bool) -> String {
    if !on {
        return text.to_string();
    }
    let code = match tone {
        Tone::Good => "32",
        Tone::Busy => "33",
        Tone::Attention => "1;35",
        Tone::Bad => "1;31",
        Tone::Quiet => "2",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_for_a_terminal_without_no_color() {
        assert!(decide(false, false, true));
        assert!(!decide(true, false, true), "NO_COLOR");
        assert!(!decide(false, true, true), "TERM=dumb");
        assert!(!decide(false, false, false), "piped");
        assert_eq!(paint("ok", Tone::Good, false), "ok");
        assert_eq!(paint("ok", Tone::Good, true), "\x1b[32mok\x1b[0m");
    }
}
