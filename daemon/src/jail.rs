//! The jail non-admins' sessions run in: bubblewrap (`bwrap`), built as an argv here.
//!
//! Why a jail and not caller checks: a process running as the user can do anything the user
//! can — `tmux send-keys` to any session, read any session's environment, edit the config. The
//! owner boundary therefore rests on what a non-admin's program can reach: inside the jail the
//! root is read-only, only the session's directory (and the CLI's own per-session state) is
//! writable, `/tmp` is private, clibot's sockets, config and state, the tmux server's socket,
//! the secret paths and other sessions' directories are hidden, and the jail has its own pid
//! namespace (no `/proc` view of other processes' environments). Hooks reach the daemon through
//! a per-session socket that serves that session's hook calls only.

use std::path::{Path, PathBuf};

/// Paths of the CLI's own state below its home that a jailed CLI may write: each jailed
/// session gets its own copy (seeded from the user's top-level config files, not their
/// history), so that nothing it writes reaches the settings the owner's other sessions read
/// (a hook written into `~/.claude/settings.json` would run unjailed there).
pub fn cli_state_paths(adapter: &str) -> &'static [(&'static str, bool)] {
    // (path below home, is a directory)
    match adapter {
        "claude" => &[(".claude", true), (".claude.json", false), (".cache", true)],
        "codex" => &[(".codex", true), (".cache", true)],
        "gemini" => &[(".gemini", true), (".cache", true)],
        "opencode" => &[
            (".config/opencode", true),
            (".local/share/opencode", true),
            (".local/state/opencode", true),
            (".cache", true),
        ],
        _ => &[(".cache", true)],
    }
}

/// What a session's jail shows and hides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JailSpec {
    /// The session's directory: writable.
    pub session_dir: PathBuf,
    /// Shown read-only before anything is hidden (a CLI home or program under `/tmp`, which
    /// the jail otherwise replaces with an empty one).
    pub early_ro: Vec<PathBuf>,
    /// Hidden: a directory by an empty tmpfs, anything else by `/dev/null`.
    pub hide: Vec<PathBuf>,
    /// Bound writable after the hiding: (source on the host, where the jail sees it).
    pub rw: Vec<(PathBuf, PathBuf)>,
}

/// The argv that runs `program` in the jail `spec` with `bwrap`.
pub fn argv(bwrap: &Path, spec: &JailSpec, program: &[String]) -> Vec<String> {
    let mut a: Vec<String> = vec![bwrap.display().to_string()];
    let mut push = |xs: &[&str]| a.extend(xs.iter().map(|s| s.to_string()));
    push(&["--die-with-parent", "--unshare-pid", "--unshare-ipc"]);
    push(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
    push(&["--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run"]);
    let s = |p: &Path| p.display().to_string();
    for p in &spec.early_ro {
        a.extend(["--ro-bind".into(), s(p), s(p)]);
    }
    let d = s(&spec.session_dir);
    a.extend(["--bind".into(), d.clone(), d.clone()]);
    for p in &spec.hide {
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            continue; // nothing there to hide
        };
        if spec.session_dir.starts_with(p) {
            continue; // hiding it would hide the session's own directory
        }
        if meta.is_dir() {
            a.extend(["--tmpfs".into(), s(p)]);
        } else {
            a.extend(["--ro-bind".into(), "/dev/null".into(), s(p)]);
        }
    }
    for (src, dst) in &spec.rw {
        a.extend(["--bind".into(), s(src), s(dst)]);
    }
    a.extend(["--chdir".into(), d, "--".into()]);
    a.extend(program.iter().cloned());
    a
}

/// Translates a path the jailed CLI reported (a transcript's) to where it lies on the host.
pub fn host_path(spec: &JailSpec, seen: &Path) -> PathBuf {
    for (src, dst) in spec.rw.iter().rev() {
        if let Ok(rest) = seen.strip_prefix(dst) {
            return src.join(rest);
        }
    }
    seen.to_path_buf()
}

/// Creates the session's own copies of the CLI state paths in `copies` (once: a restart keeps
/// them, so a resumed conversation finds its history), seeded from `home`'s top-level config
/// files, and makes sure each path exists in `home` so that the jail can mount over it.
/// Returns the (copy, path in home) pairs to bind.
pub fn prepare_state(
    adapter: &str,
    home: &Path,
    copies: &Path,
) -> std::io::Result<Vec<(PathBuf, PathBuf)>> {
    const MAX_SEED_BYTES: u64 = 1 << 20;
    let mut out = Vec::new();
    for (rel, is_dir) in cli_state_paths(adapter) {
        let real = home.join(rel);
        let copy = copies.join(rel);
        if let Some(parent) = copy.parent() {
            crate::core::create_private_dir(parent)?;
        }
        if *is_dir {
            if !real.exists() {
                crate::core::create_private_dir(&real)?;
            }
            if !copy.exists() {
                crate::core::create_private_dir(&copy)?;
                for entry in std::fs::read_dir(&real)?.flatten() {
                    let Ok(meta) = entry.metadata() else { continue };
                    if meta.is_file() && meta.len() <= MAX_SEED_BYTES {
                        let _ = std::fs::copy(entry.path(), copy.join(entry.file_name()));
                    }
                }
            }
        } else {
            if !real.exists() {
                if let Some(parent) = real.parent() {
                    crate::core::create_private_dir(parent)?;
                }
                crate::core::write_private(&real, "{}")?;
            }
            if !copy.exists() {
                let seeded = std::fs::metadata(&real)
                    .is_ok_and(|m| m.is_file() && m.len() <= MAX_SEED_BYTES)
                    && std::fs::copy(&real, &copy).is_ok();
                if !seeded {
                    crate::core::write_private(&copy, "{}")?;
                }
            }
        }
        out.push((copy, real));
    }
    Ok(out)
}

/// `bwrap` on `path`, if installed.
pub fn find_bwrap(path: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argv_binds_in_order_and_hides_what_exists() {
        let t = tempfile::tempdir().expect("tempdir");
        let secret = t.path().join("ssh");
        std::fs::create_dir(&secret).expect("dir");
        let file = t.path().join("netrc");
        std::fs::write(&file, "x").expect("file");
        let spec = JailSpec {
            session_dir: t.path().join("work"),
            early_ro: vec![PathBuf::from("/tmp/home")],
            hide: vec![secret.clone(), file.clone(), t.path().join("absent")],
            rw: vec![(PathBuf::from("/s/copy"), PathBuf::from("/tmp/home/.claude"))],
        };
        let a = argv(
            Path::new("/usr/bin/bwrap"),
            &spec,
            &["claude".into(), "-x".into()],
        );
        let j = a.join(" ");
        assert!(
            j.starts_with("/usr/bin/bwrap --die-with-parent --unshare-pid"),
            "{j}"
        );
        let pos = |needle: &str| j.find(needle).unwrap_or_else(|| panic!("{needle} in {j}"));
        assert!(pos("--ro-bind /tmp/home /tmp/home") < pos("--bind /tmp"));
        assert!(pos(&format!("--tmpfs {}", secret.display())) > pos("--tmpfs /tmp"));
        assert!(j.contains(&format!("--ro-bind /dev/null {}", file.display())));
        assert!(!j.contains("absent"));
        assert!(
            pos("--bind /s/copy /tmp/home/.claude") > pos(&format!("--tmpfs {}", secret.display()))
        );
        assert!(j.ends_with("-- claude -x"), "{j}");
    }

    #[test]
    fn a_parent_of_the_session_is_never_hidden() {
        let t = tempfile::tempdir().expect("tempdir");
        let spec = JailSpec {
            session_dir: t.path().join("a/b"),
            hide: vec![t.path().join("a")],
            ..Default::default()
        };
        std::fs::create_dir_all(t.path().join("a/b")).expect("dirs");
        let j = argv(Path::new("bwrap"), &spec, &["sh".into()]).join(" ");
        let parent = format!("--tmpfs {} ", t.path().join("a").display());
        assert!(!j.contains(&parent), "{j}");
    }

    #[test]
    fn reported_paths_map_back_to_the_copies() {
        let spec = JailSpec {
            rw: vec![(
                PathBuf::from("/st/jails/1/.claude"),
                PathBuf::from("/home/u/.claude"),
            )],
            ..Default::default()
        };
        assert_eq!(
            host_path(&spec, Path::new("/home/u/.claude/projects/x.jsonl")),
            PathBuf::from("/st/jails/1/.claude/projects/x.jsonl")
        );
        assert_eq!(
            host_path(&spec, Path::new("/elsewhere")),
            PathBuf::from("/elsewhere")
        );
    }

    #[test]
    fn state_copies_are_seeded_once_from_top_level_files() {
        let t = tempfile::tempdir().expect("tempdir");
        let home = t.path().join("home");
        std::fs::create_dir_all(home.join(".claude/projects")).expect("dirs");
        std::fs::write(home.join(".claude/settings.json"), "{\"a\":1}").expect("write");
        std::fs::write(home.join(".claude/projects/secret.jsonl"), "history").expect("write");
        let copies = t.path().join("copies");
        let pairs = prepare_state("claude", &home, &copies).expect("prepare");
        assert!(pairs.contains(&(copies.join(".claude"), home.join(".claude"))));
        assert_eq!(
            std::fs::read_to_string(copies.join(".claude/settings.json")).expect("seeded"),
            "{\"a\":1}"
        );
        assert!(
            !copies.join(".claude/projects").exists(),
            "history is not copied"
        );
        assert!(home.join(".claude.json").exists(), "a mount point is made");
        std::fs::write(copies.join(".claude/settings.json"), "changed").expect("write");
        prepare_state("claude", &home, &copies).expect("again");
        assert_eq!(
            std::fs::read_to_string(copies.join(".claude/settings.json")).expect("kept"),
            "changed"
        );
    }
}
