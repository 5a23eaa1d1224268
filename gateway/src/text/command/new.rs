//! `new NAME CLI [DIR] [options]`: the directory is the rest of the line, so that paths with
//! spaces need no quotes; the last words `delegate`, `--profile P` and `wt[=BRANCH]`, in any
//! order, are options (a directory of one of those names is written `./delegate`).

use super::CommandError;

/// What follows `new NAME CLI`.
#[derive(Debug, Default, PartialEq)]
pub(super) struct NewOptions {
    pub dir: Option<String>,
    pub delegate: bool,
    pub profile: Option<String>,
    /// `wt` (`Some("")`: the branch `clibot/NAME`) or `wt=BRANCH`.
    pub worktree: Option<String>,
}

/// Reads `rest` (the line after `new NAME CLI`); `name` checks a profile's name.
pub(super) fn options(
    mut rest: &str,
    name: impl Fn(&str) -> Result<String, CommandError>,
) -> Result<NewOptions, CommandError> {
    let mut o = NewOptions::default();
    loop {
        let (head, last) = rest
            .rsplit_once(char::is_whitespace)
            .map_or(("", rest), |(h, l)| (h.trim_end(), l));
        if last == "delegate" && !o.delegate {
            o.delegate = true;
            rest = head;
            continue;
        }
        if o.worktree.is_none()
            && let Some(branch) = (last == "wt")
                .then_some("")
                .or_else(|| last.strip_prefix("wt="))
        {
            o.worktree = Some(branch.to_string());
            rest = head;
            continue;
        }
        let (before, flag) = head
            .rsplit_once(char::is_whitespace)
            .map_or(("", head), |(h, l)| (h.trim_end(), l));
        if flag == "--profile" && o.profile.is_none() && !last.is_empty() {
            o.profile = Some(name(last)?);
            rest = before;
            continue;
        }
        break;
    }
    o.dir = Some(super::unquote(rest))
        .filter(|d| !d.is_empty())
        .map(str::to_string);
    Ok(o)
}
