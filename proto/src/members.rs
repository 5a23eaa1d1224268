//! Where members (chat users who are not admins) may work: the rule the daemon applies to
//! `[access.PLATFORM] member_roots` and `clibotctl doctor` reports on, in one place.

use std::path::{Path, PathBuf};

/// Why `root` may not hold members' sessions, if it may not: the home directory, a parent of
/// it, a dot-directory of it (or anything below one), or a directory that holds (or lies in)
/// the owner's config or clibot's state.
pub fn unfit_root(root: &Path, home: &Path, owner_dirs: &[PathBuf]) -> Option<String> {
    if home.starts_with(root) {
        return Some(format!(
            "{} is the home directory or a parent of it: members would write where the owner's programs read their settings",
            root.display()
        ));
    }
    if let Ok(rest) = root.strip_prefix(home)
        && rest
            .components()
            .next()
            .is_some_and(|c| c.as_os_str().to_string_lossy().starts_with('.'))
    {
        return Some(format!(
            "{} lies in a dot-directory of the home, where programs keep their settings",
            root.display()
        ));
    }
    for d in owner_dirs {
        if d.starts_with(root) || root.starts_with(d) {
            return Some(format!(
                "{} holds or lies in {}, the owner's config or clibot's state",
                root.display(),
                d.display()
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_roots_never_reach_the_owners_settings() {
        let home = Path::new("/home/u");
        let owner = [
            PathBuf::from("/home/u/.config/clibot"),
            PathBuf::from("/home/u/.local/state/clibot"),
        ];
        for bad in [
            "/home/u",
            "/home",
            "/",
            "/home/u/.config",
            "/home/u/.claude/projects",
            "/home/u/.local/share/clibot",
        ] {
            assert!(unfit_root(Path::new(bad), home, &owner).is_some(), "{bad}");
        }
        for good in ["/home/u/work/team", "/srv/members"] {
            assert!(
                unfit_root(Path::new(good), home, &owner).is_none(),
                "{good}"
            );
        }
    }
}
