//! Where a write lands, and whether that place may be written without a person.
//!
//! Resolution is lexical (`~`, `$HOME`, `$PWD`, `.`, `..`, `//`) against the session's directory,
//! which the caller has made canonical; the file system is never read, because the command has
//! not run yet and the paths it names may not exist.

use std::path::{Path, PathBuf};

use super::GuardContext;
use super::parse::{Base, Word};
use super::rules::glob_match;

/// Targets that are not files in any sense that matters.
const HARMLESS: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr"];

/// Shell start-up files: whatever is written there runs in every later shell.
const RC_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".cshrc",
    ".tcshrc",
    ".kshrc",
];

/// `text` (the literal rest of a word) appended to `base`, then `.`, `..` and `//` folded.
pub(crate) fn normalize(base: &str, text: &str) -> PathBuf {
    let joined = if text.starts_with('/') || base.is_empty() {
        text.to_string()
    } else {
        format!("{base}/{text}")
    };
    let mut segs: Vec<&str> = Vec::new();
    for s in joined.split('/') {
        match s {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    let mut p = PathBuf::from("/");
    p.extend(segs);
    p
}

/// The absolute path a word names when the shell runs in `cwd` (`None`: not known), or `None`
/// when it depends on something only known at run time.
pub(crate) fn resolve(w: &Word, cwd: Option<&Path>, home: &Path) -> Option<PathBuf> {
    let home_s = home.to_string_lossy();
    match &w.base {
        Base::Literal if w.rest.starts_with('/') => Some(normalize("", &w.rest)),
        Base::Literal => cwd.map(|c| normalize(&c.to_string_lossy(), &w.rest)),
        // `$HOME.bak` is `/home/u.bak`: the rest is appended as text, not joined as a path.
        Base::Home => Some(normalize("", &format!("{home_s}{}", w.rest))),
        Base::Cwd => cwd.map(|c| normalize("", &format!("{}{}", c.to_string_lossy(), w.rest))),
        Base::UserHome(u) if home.file_name().is_some_and(|n| n == u.as_str()) => {
            Some(normalize("", &format!("{home_s}{}", w.rest)))
        }
        Base::UserHome(_) | Base::Unknown => None,
    }
}

/// Why writing the file a word names is left to a person, checked in every directory the
/// shell may be in at that point.
pub(crate) fn check_word(w: &Word, cwds: &[Option<PathBuf>], ctx: &GuardContext) -> Option<String> {
    for cwd in cwds {
        match resolve(w, cwd.as_deref(), ctx.home) {
            Some(p) => {
                if let Some(why) = check(&p, w.glob, ctx) {
                    return Some(format!("{why}: {}", w.text));
                }
            }
            None => {
                return Some(format!(
                    "a path only known when the command runs: {}",
                    w.text
                ));
            }
        }
    }
    None
}

/// Why writing `path` (absolute, normalized) is left to a person. `glob`: the path's parts may
/// be wildcards that the shell expands, so a part matches a protected name when its pattern does.
pub(crate) fn check(path: &Path, glob: bool, ctx: &GuardContext) -> Option<String> {
    let s = path.to_string_lossy();
    if HARMLESS.contains(&s.as_ref()) {
        return None;
    }
    let segs: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let is = |seg: &str, name: &str| {
        if glob && seg.contains(['*', '?', '[']) {
            glob_match(seg.as_bytes(), name.as_bytes())
        } else {
            seg == name
        }
    };
    if glob && segs.iter().any(|g| is(g, "..")) {
        return Some("a wildcard that may match `..`".into());
    }
    // Anywhere, whatever `allow_paths` says.
    if segs.iter().any(|g| is(g, ".ssh")) || path.starts_with("/etc/ssh") {
        return Some("an ssh configuration path".into());
    }
    if segs.first().is_some_and(|g| g == "etc")
        && segs
            .get(1)
            .is_some_and(|g| g.starts_with("cron") || is(g, "cron.d") || is(g, "crontab"))
        || path.starts_with("/var/spool/cron")
    {
        return Some("a cron path".into());
    }
    if segs.iter().any(|g| RC_FILES.iter().any(|rc| is(g, rc)))
        || segs
            .windows(2)
            .any(|w| is(&w[0], ".config") && is(&w[1], "fish"))
    {
        return Some("a shell start-up file".into());
    }
    for secret in ctx.secret_paths {
        let secret = expand_home(secret, ctx.home);
        if path.starts_with(&secret) {
            return Some("a secret path".into());
        }
    }
    if segs.first().is_some_and(|g| g == "dev") {
        return Some("a device".into());
    }
    if let Ok(rel) = path.strip_prefix(ctx.session_dir) {
        let rel: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if rel.iter().any(|g| is(g, ".git")) {
            return Some("the repository's .git".into());
        }
        if rel.iter().any(|g| is(g, ".envrc")) {
            return Some(".envrc (run by direnv)".into());
        }
        if rel.first().is_some_and(|g| is(g, ".clibot")) && rel.get(1).is_none_or(|g| g != "outbox")
        {
            return Some("clibot's own files".into());
        }
        return None;
    }
    if let Ok(rel) = path.strip_prefix(ctx.home)
        && rel
            .components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
    {
        return Some("a hidden path in the home directory".into());
    }
    if ctx
        .allow_paths
        .iter()
        .any(|a| path.starts_with(expand_home(a, ctx.home)))
    {
        return None;
    }
    Some("a path outside the session's directory".into())
}

/// `~/x` in configuration means the home directory's `x`.
fn expand_home(p: &Path, home: &Path) -> PathBuf {
    let s = p.to_string_lossy();
    if s == "~" {
        return normalize("", &home.to_string_lossy());
    }
    match s.strip_prefix("~/") {
        Some(rest) => normalize(&home.to_string_lossy(), rest),
        None => normalize("", &s),
    }
}
