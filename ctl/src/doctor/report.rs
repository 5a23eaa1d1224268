//! What a doctor check finds: its level, what it saw and how to fix it.

/// How bad a finding is: only a failure makes `doctor` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

impl Level {
    pub(super) fn word(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        }
    }
}

/// One finding: `name` is what was checked, `fix` how to mend it (empty when ok).
#[derive(Debug)]
pub struct Check {
    pub name: String,
    pub level: Level,
    pub detail: String,
    pub fix: String,
}

/// A [`Check`] from anything string-like.
pub fn check(
    name: impl Into<String>,
    level: Level,
    detail: impl Into<String>,
    fix: impl Into<String>,
) -> Check {
    Check {
        name: name.into(),
        level,
        detail: detail.into(),
        fix: fix.into(),
    }
}
