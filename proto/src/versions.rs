//! Versions of the AI CLIs, as their `--version` prints them and as ranges a pattern pack
//! names (`">=2.1, <3"`): shared by the daemon, which warns when a session's CLI is outside its
//! pack's range, and `clibotctl doctor`, which compares what a machine has with what clibot was
//! tested with.

/// The first version in what `--version` printed: `2.1.332 (Claude Code)`, `codex-cli
/// 0.171.0`, `GitHub Copilot CLI 1.0.102.`, `v22.1.0`. At least `MAJOR.MINOR`; a pre-release
/// tail (`-nightly.2`) is kept.
pub fn from_output(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let boundary =
            i == 0 || !(b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b'.' | b'_'));
        let start = if boundary && b[i] == b'v' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i + 1
        } else {
            i
        };
        if boundary
            && b[start].is_ascii_digit()
            && let Some(end) = version_end(b, start)
        {
            return Some(text[start..end].to_string());
        }
        i += 1;
    }
    None
}

/// Where a version starting at `start` ends: two or three dot-separated numbers, then an
/// optional `-tail` of dot-separated words. `None`: not a version.
fn version_end(b: &[u8], start: usize) -> Option<usize> {
    let digits = |mut j: usize| {
        let s = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        (j > s).then_some(j)
    };
    let mut j = digits(start)?;
    let mut parts = 1;
    while parts < 3 && b.get(j) == Some(&b'.') {
        match digits(j + 1) {
            Some(k) => {
                j = k;
                parts += 1;
            }
            None => break,
        }
    }
    if parts < 2 {
        return None;
    }
    if b.get(j) == Some(&b'-') {
        let word = |mut k: usize| {
            let s = k;
            while k < b.len() && b[k].is_ascii_alphanumeric() {
                k += 1;
            }
            (k > s).then_some(k)
        };
        if let Some(mut k) = word(j + 1) {
            while b.get(k) == Some(&b'.') {
                match word(k + 1) {
                    Some(n) => k = n,
                    None => break,
                }
            }
            j = k;
        }
    }
    Some(j)
}

/// A version range a pack was made for, as written (`">=2.1, <3"`).
#[derive(Debug, Clone)]
pub struct Range {
    pub text: String,
    req: semver::VersionReq,
}

/// Where a version stands against a pack's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    Inside,
    /// Past an upper bound: the CLI may have redrawn its dialogs since the pack was made.
    Newer,
    Older,
    /// Not a version semver can read, or none was found.
    Unknown,
}

impl Range {
    pub fn parse(text: &str) -> Result<Range, String> {
        semver::VersionReq::parse(text)
            .map(|req| Range {
                text: text.to_string(),
                req,
            })
            .map_err(|e| {
                format!("versions {text:?} is not a version range ({e}); write e.g. \">=2.1, <3\"")
            })
    }

    pub fn fit(&self, version: &str) -> Fit {
        let Some(v) = parse_loose(version) else {
            return Fit::Unknown;
        };
        // A pre-release (a nightly) stands where its release does: semver would keep it out
        // of every range that does not name a pre-release.
        let v = semver::Version::new(v.major, v.minor, v.patch);
        if self.req.matches(&v) {
            return Fit::Inside;
        }
        // Missing a bound that caps the range (`<3`, `~2.1`, `=2.1.0`) from above is newer;
        // missing a lower bound (`>=2.1`), older.
        let over = self.req.comparators.iter().any(|c| {
            let base = semver::Version::new(c.major, c.minor.unwrap_or(0), c.patch.unwrap_or(0));
            !c.matches(&v)
                && !matches!(c.op, semver::Op::Greater | semver::Op::GreaterEq)
                && v >= base
        });
        if over { Fit::Newer } else { Fit::Older }
    }
}

/// `1.2` reads as `1.2.0`; a build or pre-release tail is kept when semver takes it.
fn parse_loose(v: &str) -> Option<semver::Version> {
    if let Ok(x) = semver::Version::parse(v) {
        return Some(x);
    }
    let (core, tail) = match v.find('-') {
        Some(i) => (&v[..i], &v[i..]),
        None => (v, ""),
    };
    let parts = core.split('.').count();
    let padded = match parts {
        1 => format!("{core}.0.0{tail}"),
        2 => format!("{core}.0{tail}"),
        _ => return None,
    };
    semver::Version::parse(&padded).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_clis_print() {
        assert_eq!(
            from_output("2.1.332 (Claude Code)\n").as_deref(),
            Some("2.1.332")
        );
        assert_eq!(from_output("codex-cli 0.171.0").as_deref(), Some("0.171.0"));
        assert_eq!(
            from_output("GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.")
                .as_deref(),
            Some("1.0.102")
        );
        assert_eq!(from_output("v22.1.0").as_deref(), Some("22.1.0"));
        assert_eq!(
            from_output("0.24.4-nightly.2").as_deref(),
            Some("0.24.4-nightly.2")
        );
        assert_eq!(from_output("no version here"), None);
    }

    #[test]
    fn a_range_says_newer_older_or_inside() {
        let r = Range::parse(">=2.1, <3").expect("range");
        assert_eq!(r.fit("2.1.332"), Fit::Inside);
        assert_eq!(r.fit("2.9"), Fit::Inside);
        assert_eq!(r.fit("3.0.0"), Fit::Newer);
        assert_eq!(r.fit("4.1.0"), Fit::Newer);
        assert_eq!(r.fit("2.0.9"), Fit::Older);
        assert_eq!(r.fit(""), Fit::Unknown);
        assert_eq!(r.fit("nightly"), Fit::Unknown);
        let r = Range::parse(">=0.60, <0.62").expect("range");
        assert_eq!(r.fit("0.61.0"), Fit::Inside);
        assert_eq!(r.fit("0.62.0"), Fit::Newer);
        assert_eq!(r.fit("0.59.1"), Fit::Older);
        assert!(Range::parse("about two").is_err());
        let r = Range::parse(">=0.24, <0.30").expect("range");
        assert_eq!(r.fit("0.24.4-nightly.2"), Fit::Inside);
        let r = Range::parse(">=2.1, <3").expect("range");
        assert_eq!(r.fit("3.0.0-beta.1"), Fit::Newer);
    }
}
