//! Command patterns: what a user approves ("git diff *"), matched word by word against a
//! parsed command rather than as text, so that `git diff; rm x` can never match `git diff *`.

/// A pattern for one simple command, word by word.
///
/// Each word matches one argument: literally, or as a glob when it holds `*` or `?` (`--format=*`).
/// A lone `*` as the last word stands for any further arguments, none included, so that
/// `git log *` approves `git log` and `git log -p src`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPattern {
    words: Vec<String>,
    /// The last word was a lone `*`.
    rest: bool,
}

impl CommandPattern {
    /// Splits on whitespace; an empty pattern matches nothing.
    pub fn parse(pattern: &str) -> CommandPattern {
        let mut words: Vec<String> = pattern.split_whitespace().map(str::to_string).collect();
        let rest = words.last().is_some_and(|w| w == "*");
        // A lone "*" stays as the name's word: it approves every command.
        if rest && words.len() > 1 {
            words.pop();
        }
        CommandPattern { words, rest }
    }

    /// Whether `argv` (the command name first) is approved by this pattern.
    pub fn matches(&self, argv: &[String]) -> bool {
        if self.words.is_empty() {
            return false;
        }
        if argv.len() < self.words.len() || (!self.rest && argv.len() != self.words.len()) {
            return false;
        }
        self.words
            .iter()
            .zip(argv)
            .all(|(p, a)| glob_match(p.as_bytes(), a.as_bytes()))
    }
}

impl std::fmt::Display for CommandPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.words.join(" "))?;
        if self.rest && self.words != ["*"] {
            write!(f, " *")?;
        }
        Ok(())
    }
}

/// `*` any run of bytes, `?` one byte; everything else literal. Iterative, with one backtrack
/// point, so that no pattern can take more than linear-times-pattern time.
pub(crate) fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, si));
                pi += 1;
            }
            Some(&c) if c == b'?' || c == s[si] => {
                pi += 1;
                si += 1;
            }
            _ => match star {
                Some((sp, ss)) => {
                    pi = sp + 1;
                    si = ss + 1;
                    star = Some((sp, ss + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn words_match_literally_and_a_last_star_takes_the_rest() {
        let p = CommandPattern::parse("git diff *");
        assert!(p.matches(&argv("git diff")));
        assert!(p.matches(&argv("git diff --stat HEAD~1")));
        assert!(!p.matches(&argv("git push")));
        assert!(!p.matches(&argv("git")));
        let exact = CommandPattern::parse("git status");
        assert!(exact.matches(&argv("git status")));
        assert!(!exact.matches(&argv("git status -s")));
        let g = CommandPattern::parse("cargo --format=* test");
        assert!(g.matches(&argv("cargo --format=x test")));
        assert!(!g.matches(&argv("cargo --format=x build")));
        assert!(CommandPattern::parse("ca?go").matches(&argv("cargo")));
        assert!(!CommandPattern::parse("").matches(&argv("x")));
        assert!(CommandPattern::parse("*").matches(&argv("x")));
        assert!(CommandPattern::parse("*").matches(&argv("x y")));
        assert_eq!(CommandPattern::parse("ls  *").to_string(), "ls *");
    }

    #[test]
    fn glob() {
        assert!(glob_match(b"a*b*c", b"aXXbYYc"));
        assert!(!glob_match(b"a*b*c", b"aXXbYY"));
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b".*", b".git"));
        assert!(!glob_match(b"?", b""));
    }
}
