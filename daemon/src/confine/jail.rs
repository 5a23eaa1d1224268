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

/// Paths of the CLI's own state below its home, seeded into each jailed session's own home
/// from the user's (their top-level files: config and credentials, not history), so that
/// nothing a jailed CLI writes reaches the settings the owner's other sessions read (a hook
/// written into `~/.claude/settings.json` would run unjailed there).
pub fn cli_state_paths(adapter: &str) -> &'static [(&'static str, bool)] {
    // (path below home, is a directory)
    match adapter {
        "claude" => &[(".claude", true), (".claude.json", false)],
        "codex" => &[(".codex", true)],
        "gemini" => &[(".gemini", true)],
        "copilot" => &[(".copilot", true)],
        "qwen" => &[(".qwen", true)],
        "opencode" => &[
            (".config/opencode", true),
            (".local/share/opencode", true),
            (".local/state/opencode", true),
        ],
        _ => &[],
    }
}

/// What a session's jail shows and hides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JailSpec {
    /// The session's directory: writable.
    pub session_dir: PathBuf,
    /// Shown read-only before anything else (a program kept under `/tmp`, which the jail
    /// otherwise replaces with an empty one).
    pub early_ro: Vec<PathBuf>,
    /// The CLI's home: (the session's own home on the host, the home path the CLI sees, the
    /// entries of the user's home shown read-only in it).
    pub home: Option<(PathBuf, PathBuf, Vec<PathBuf>)>,
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
    push(&[
        "--ro-bind",
        "/",
        "/",
        "--dev-bind",
        "/dev",
        "/dev",
        "--proc",
        "/proc",
    ]);
    push(&["--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]);
    let s = |p: &Path| p.display().to_string();
    for p in &spec.early_ro {
        a.extend(["--ro-bind".into(), s(p), s(p)]);
    }
    if let Some((own, home, entries)) = &spec.home {
        a.extend(["--bind".into(), s(own), s(home)]);
        for e in entries {
            if let Some(name) = e.file_name() {
                a.extend(["--ro-bind".into(), s(e), s(&home.join(name))]);
            }
        }
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

/// Pairs of (source on the host, where the jail sees it).
pub type Binds = Vec<(PathBuf, PathBuf)>;

/// Prepares the session's own home `own` for a CLI of `adapter` whose home is `home`: seeds
/// it (once: a restart keeps it, so a resumed conversation finds its history) with the CLI's
/// state paths' top-level files from `home`. Returns the entries of `home` to show read-only
/// in it (all but the CLI's state, the `hidden` ones and what is not there), and the nested
/// state paths to bind writable (their mount points are made in `home` when missing).
pub fn prepare_home(
    adapter: &str,
    home: &Path,
    own: &Path,
    hidden: &[PathBuf],
) -> std::io::Result<(Vec<PathBuf>, Binds)> {
    const MAX_SEED_BYTES: u64 = 1 << 20;
    crate::paths::create_private_dir(own)?;
    let state = cli_state_paths(adapter);
    let mut nested = Vec::new();
    for (rel, is_dir) in state {
        let real = home.join(rel);
        let copy = own.join(rel);
        if let Some(parent) = copy.parent() {
            crate::paths::create_private_dir(parent)?;
        }
        if *is_dir {
            if !copy.exists() {
                crate::paths::create_private_dir(&copy)?;
                if let Ok(dir) = std::fs::read_dir(&real) {
                    for entry in dir.flatten() {
                        let Ok(meta) = entry.metadata() else { continue };
                        if meta.is_file() && meta.len() <= MAX_SEED_BYTES {
                            let _ = std::fs::copy(entry.path(), copy.join(entry.file_name()));
                        }
                    }
                }
            }
        } else if !copy.exists() {
            let seeded = std::fs::metadata(&real)
                .is_ok_and(|m| m.is_file() && m.len() <= MAX_SEED_BYTES)
                && std::fs::copy(&real, &copy).is_ok();
            if !seeded {
                crate::paths::write_private(&copy, "{}")?;
            }
        }
        if rel.contains('/') {
            // Below an entry shown read-only: bound over it, on a mount point in `home`.
            if !real.exists() {
                crate::paths::create_private_dir(&real)?;
            }
            nested.push((copy, real));
        }
    }
    let top: Vec<&str> = state
        .iter()
        .filter(|(rel, _)| !rel.contains('/'))
        .map(|(rel, _)| *rel)
        .collect();
    let mut entries = Vec::new();
    if let Ok(dir) = std::fs::read_dir(home) {
        for entry in dir.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if top.iter().any(|t| name == std::ffi::OsStr::new(t)) || hidden.contains(&path) {
                continue;
            }
            entries.push(path);
        }
    }
    entries.sort();
    Ok((entries, nested))
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
            session_dir: PathBuf::from("/home/u/src/p"),
            early_ro: vec![PathBuf::from("/tmp/bin")],
            home: Some((
                PathBuf::from("/st/jails/1/home"),
                PathBuf::from("/home/u"),
                vec![PathBuf::from("/home/u/src")],
            )),
            hide: vec![secret.clone(), file.clone(), t.path().join("absent")],
            rw: vec![(PathBuf::from("/st/s/1"), PathBuf::from("/st/s/1"))],
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
        assert!(pos("--ro-bind /tmp/bin /tmp/bin") < pos("--bind /st/jails/1/home /home/u"));
        assert!(pos("--bind /st/jails/1/home /home/u") < pos("--ro-bind /home/u/src /home/u/src"));
        assert!(
            pos("--ro-bind /home/u/src /home/u/src") < pos("--bind /home/u/src/p /home/u/src/p")
        );
        assert!(pos(&format!("--tmpfs {}", secret.display())) > pos("--bind /home/u/src/p"));
        assert!(j.contains(&format!("--ro-bind /dev/null {}", file.display())));
        assert!(!j.contains("absent"));
        assert!(pos("--bind /st/s/1 /st/s/1") > pos(&format!("--tmpfs {}", secret.display())));
        assert!(j.ends_with("-- claude -x"), "{j}");
    }

    #[test]
    fn a_parent_of_the_session_is_never_hidden() {
        let t = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(t.path().join("a/b")).expect("dirs");
        let spec = JailSpec {
            session_dir: t.path().join("a/b"),
            hide: vec![t.path().join("a")],
            ..Default::default()
        };
        let j = argv(Path::new("bwrap"), &spec, &["sh".into()]).join(" ");
        let parent = format!("--tmpfs {} ", t.path().join("a").display());
        assert!(!j.contains(&parent), "{j}");
    }

    #[test]
    fn the_home_is_seeded_once_and_shows_the_rest_read_only() {
        let t = tempfile::tempdir().expect("tempdir");
        let home = t.path().join("home");
        std::fs::create_dir_all(home.join(".claude/projects")).expect("dirs");
        std::fs::create_dir_all(home.join("src")).expect("dirs");
        std::fs::create_dir_all(home.join(".ssh")).expect("dirs");
        std::fs::write(home.join(".claude/settings.json"), "{\"a\":1}").expect("write");
        std::fs::write(home.join(".claude/projects/secret.jsonl"), "history").expect("write");
        let own = t.path().join("own");
        let (entries, nested) =
            prepare_home("claude", &home, &own, &[home.join(".ssh")]).expect("prepare");
        assert_eq!(
            entries,
            vec![home.join("src")],
            "not the CLI's state, not secrets"
        );
        assert!(nested.is_empty());
        assert_eq!(
            std::fs::read_to_string(own.join(".claude/settings.json")).expect("seeded"),
            "{\"a\":1}"
        );
        assert!(
            !own.join(".claude/projects").exists(),
            "history is not copied"
        );
        assert_eq!(
            std::fs::read_to_string(own.join(".claude.json")).expect("made"),
            "{}"
        );
        std::fs::write(own.join(".claude/settings.json"), "changed").expect("write");
        prepare_home("claude", &home, &own, &[]).expect("again");
        assert_eq!(
            std::fs::read_to_string(own.join(".claude/settings.json")).expect("kept"),
            "changed"
        );
        let (_, nested) = prepare_home("opencode", &home, &own, &[]).expect("opencode");
        assert!(nested.contains(&(own.join(".config/opencode"), home.join(".config/opencode"))));
        assert!(
            home.join(".config/opencode").is_dir(),
            "a mount point is made"
        );
    }
}
