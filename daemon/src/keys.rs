//! Named keys a client may press, checked before anything reaches tmux.
//!
//! The set is tmux's own key names plus a few friendly aliases (`Esc`, `Return`,
//! `Backspace`, `Ctrl-c`). A single character is sent as that literal character.

use std::fmt;

/// A validated key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A tmux key name, possibly with modifiers (`Enter`, `C-c`, `M-Left`).
    Named(String),
    /// One literal character (`y`, `1`, `;`).
    Char(char),
}

/// Why a key name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown key {0:?}: use a tmux key name (Enter, Escape, Tab, BSpace, Space, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, Insert, BTab, F1..F12), a modifier form (C-c, M-x, S-Up), or a single character"
)]
pub struct UnknownKey(pub String);

const NAMED: &[&str] = &[
    "Enter", "Escape", "Tab", "BTab", "BSpace", "Space", "Up", "Down", "Left", "Right", "Home",
    "End", "PageUp", "PageDown", "PgUp", "PgDn", "PPage", "NPage", "Delete", "DC", "Insert", "IC",
    "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9", "F10", "F11", "F12",
];

const ALIASES: &[(&str, &str)] = &[
    ("esc", "Escape"),
    ("escape", "Escape"),
    ("return", "Enter"),
    ("enter", "Enter"),
    ("backspace", "BSpace"),
    ("bspace", "BSpace"),
    ("del", "Delete"),
    ("delete", "Delete"),
    ("tab", "Tab"),
    ("space", "Space"),
    ("up", "Up"),
    ("down", "Down"),
    ("left", "Left"),
    ("right", "Right"),
    ("home", "Home"),
    ("end", "End"),
    ("pageup", "PageUp"),
    ("pagedown", "PageDown"),
];

impl Key {
    /// Parses one key name.
    pub fn parse(s: &str) -> Result<Key, UnknownKey> {
        let mut chars = s.chars();
        if let (Some(c), None) = (chars.next(), chars.next()) {
            return if c.is_control() {
                Err(UnknownKey(s.to_string()))
            } else {
                Ok(Key::Char(c))
            };
        }
        // Modifiers: C-, M-, S- in any order; "Ctrl-", "Alt-", "Shift-" as friendly spellings.
        let mut rest = s;
        let mut prefix = String::new();
        loop {
            let lower = rest.to_ascii_lowercase();
            let (tmux, len) = if lower.starts_with("c-") {
                ("C-", 2)
            } else if lower.starts_with("ctrl-") {
                ("C-", 5)
            } else if lower.starts_with("m-") {
                ("M-", 2)
            } else if lower.starts_with("alt-") {
                ("M-", 4)
            } else if lower.starts_with("s-") {
                ("S-", 2)
            } else if lower.starts_with("shift-") {
                ("S-", 6)
            } else {
                break;
            };
            if rest.len() == len {
                break;
            }
            prefix.push_str(tmux);
            rest = &rest[len..];
        }
        let base = if let Some(n) = NAMED.iter().find(|n| **n == rest) {
            n.to_string()
        } else if let Some((_, n)) = ALIASES.iter().find(|(a, _)| a.eq_ignore_ascii_case(rest)) {
            n.to_string()
        } else {
            let mut cs = rest.chars();
            match (cs.next(), cs.next()) {
                // A modified single character: C-c, M-x. Without a modifier it was handled above.
                (Some(c), None) if !prefix.is_empty() && c.is_ascii_graphic() => {
                    if prefix.contains("C-") {
                        c.to_ascii_lowercase().to_string()
                    } else {
                        c.to_string()
                    }
                }
                _ => return Err(UnknownKey(s.to_string())),
            }
        };
        Ok(Key::Named(format!("{prefix}{base}")))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Named(n) => f.write_str(n),
            Key::Char(c) => write!(f, "{c}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_aliases() {
        assert_eq!(Key::parse("Enter"), Ok(Key::Named("Enter".into())));
        assert_eq!(Key::parse("esc"), Ok(Key::Named("Escape".into())));
        assert_eq!(Key::parse("C-c"), Ok(Key::Named("C-c".into())));
        assert_eq!(Key::parse("Ctrl-C"), Ok(Key::Named("C-c".into())));
        assert_eq!(Key::parse("M-Left"), Ok(Key::Named("M-Left".into())));
        assert_eq!(Key::parse("S-Tab"), Ok(Key::Named("S-Tab".into())));
        assert_eq!(Key::parse("y"), Ok(Key::Char('y')));
        assert_eq!(Key::parse("1"), Ok(Key::Char('1')));
        assert_eq!(Key::parse("F12"), Ok(Key::Named("F12".into())));
    }

    #[test]
    fn unknown() {
        for bad in [
            "", "Hyper-Q", "Entr", "C-", "\u{7}", "rm -rf", "C-Entr", "F13",
        ] {
            assert!(Key::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
