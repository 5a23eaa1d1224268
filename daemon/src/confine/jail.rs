//! The jail non-admins' sessions run in: bubblewrap (`bwrap`), built as an argv here.
//!
//! Why a jail and not caller checks: a process running as the user can do anything the user
//! can — `tmux send-keys` to any session, read any session's environment, edit the config. The
//! owner boundary therefore rests on what a non-admin's program can reach, and the jail is
//! built from an allow-list: the system's directories read-only, the CLI's own installation
//! read-only, the session's directory and its own home writable, the hook socket — and nothing
//! else: no other part of the user's home, no other project or session, no `/run` (no sockets
//! of the user's agents, display or container engine). Its `/dev` holds only the harmless
//! devices and a private set of ptys (the pane's own terminal stays reachable through the
//! descriptors it inherits), its `/tmp`, `/var/tmp` and `/dev/shm` are its own and limited in
//! size, it has its own pid, IPC and UTS namespaces, and `TIOCSTI` is refused by a seccomp
//! filter the launcher hands to bubblewrap. Hooks reach the daemon through a per-session
//! socket that serves that session's hook calls only.

use std::path::{Path, PathBuf};

use crate::confine::beneath::{BeneathError, Dir, Kind};

/// Paths of the CLI's own state below its home, seeded into each jailed session's own home
/// from the user's (their top-level files: config and credentials, not history), so that
/// nothing a jailed CLI writes reaches the settings the owner's other sessions read (a hook
/// written into `~/.claude/settings.json` would run unjailed there).
pub fn cli_state_paths(adapter: &str) -> &'static [(&'static str, bool)] {
    clibot_proto::clis::cli(adapter).map_or(&[], |c| c.state_paths)
}

/// Variables that name a way out of the jail (a display, an agent, a bus, a container
/// engine, the tmux server): unset inside it.
pub const UNSET_ENV: &[&str] = &[
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "XDG_RUNTIME_DIR",
    "TMUX",
    "TMUX_PANE",
    "KRB5CCNAME",
];

/// What a session's jail shows. Built from an allow-list: nothing is there unless named here,
/// so what appears on the machine later (another session, a new project) is out of reach too.
#[derive(Debug, Clone, PartialEq)]
pub struct JailSpec {
    /// The session's directory: writable.
    pub session_dir: PathBuf,
    /// Shown read-only at the same place: the CLI's installation, the hook program, what the
    /// config adds (`jail_read`).
    pub read_only: Vec<PathBuf>,
    /// Links made in the jail: (target as the link has it, the link's path).
    pub links: Vec<(PathBuf, PathBuf)>,
    /// The CLI's home: (the session's own home on the host, the home path the CLI sees).
    pub home: Option<(PathBuf, PathBuf)>,
    /// Bound writable: (source on the host, where the jail sees it).
    pub rw: Vec<(PathBuf, PathBuf)>,
    /// Bound writable at the same place from a descriptor opened with no link followed, like
    /// the session's directory: folders the session can change (a worktree's repository's
    /// `.git`), where a planted link must bind nothing else.
    pub rw_pinned: Vec<PathBuf>,
    /// Inside the session's directory, made read-only again (git's ways to run code:
    /// `.git/config`, `.git/hooks`).
    pub read_only_inside: Vec<PathBuf>,
    /// Whether the jail shares the machine's network (else its own, with only loopback).
    pub network: bool,
    /// The size of its `/tmp`, `/var/tmp` and `/dev/shm`, each.
    pub tmp_bytes: u64,
}

impl Default for JailSpec {
    fn default() -> Self {
        JailSpec {
            session_dir: PathBuf::new(),
            read_only: Vec::new(),
            links: Vec::new(),
            home: None,
            rw: Vec::new(),
            rw_pinned: Vec::new(),
            read_only_inside: Vec::new(),
            network: true,
            tmp_bytes: DEFAULT_TMP_BYTES,
        }
    }
}

/// `bwrap`'s options that take a descriptor; in the argv the daemon writes they are followed
/// by the path the launcher opens (with no link followed) and replaces by its descriptor.
pub const BIND_FD: &str = "--bind-fd";
pub const RO_BIND_FD: &str = "--ro-bind-fd";

/// The default size of a jail's `/tmp` (and of its `/var/tmp` and `/dev/shm`).
pub const DEFAULT_TMP_BYTES: u64 = 1 << 30;

/// The argv that runs `program` in the jail `spec` with `bwrap`.
pub fn argv(bwrap: &Path, spec: &JailSpec, program: &[String]) -> Vec<String> {
    let s = |p: &Path| p.display().to_string();
    let mut a: Vec<String> = vec![s(bwrap)];
    let mut push = |xs: &[&str]| a.extend(xs.iter().map(|s| s.to_string()));
    push(&[
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]);
    if !spec.network {
        push(&["--unshare-net"]);
    }
    for d in crate::confine::install::SYSTEM_DIRS {
        let p = Path::new(d);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(t) = std::fs::read_link(p) {
                    a.extend(["--symlink".into(), s(&t), s(p)]);
                }
            }
            Ok(m) if m.is_dir() => a.extend(["--ro-bind".into(), s(p), s(p)]),
            _ => {}
        }
    }
    // `/etc/resolv.conf` may lead to a resolver's directory under `/run`: shown, read-only.
    if let Ok(resolv) = std::fs::canonicalize("/etc/resolv.conf")
        && !crate::confine::install::in_system(&resolv)
        && let Some(dir) = resolv.parent()
    {
        a.extend(["--ro-bind".into(), s(dir), s(dir)]);
    }
    let size = spec.tmp_bytes.to_string();
    a.extend([
        "--proc".into(),
        "/proc".into(),
        "--dev".into(),
        "/dev".into(),
    ]);
    for tmp in ["/tmp", "/var/tmp", "/dev/shm"] {
        a.extend(["--size".into(), size.clone(), "--tmpfs".into(), tmp.into()]);
    }
    if let Some((own, home)) = &spec.home {
        a.extend(["--bind".into(), s(own), s(home)]);
    }
    for p in &spec.read_only {
        a.extend(["--ro-bind".into(), s(p), s(p)]);
    }
    for (target, link) in &spec.links {
        a.extend(["--symlink".into(), s(target), s(link)]);
    }
    // What the session can change is bound from a descriptor the launcher opens with no
    // link followed (`--bind-fd PATH`: the launcher puts the descriptor in PATH's place), so a
    // link planted there never binds anything else into the jail.
    let d = s(&spec.session_dir);
    a.extend([BIND_FD.into(), d.clone(), d.clone()]);
    for (src, dst) in &spec.rw {
        a.extend(["--bind".into(), s(src), s(dst)]);
    }
    for p in &spec.rw_pinned {
        a.extend([BIND_FD.into(), s(p), s(p)]);
    }
    for p in &spec.read_only_inside {
        a.extend([RO_BIND_FD.into(), s(p), s(p)]);
    }
    // The root the mounts hang from: nothing may be written there.
    a.extend(["--remount-ro".into(), "/".into()]);
    for v in UNSET_ENV {
        a.extend(["--unsetenv".into(), (*v).to_string()]);
    }
    a.extend(["--chdir".into(), d, "--".into()]);
    a.extend(program.iter().cloned());
    a
}

/// What of the session's directory is made read-only again in its jail: git's ways to run
/// code (`.git/config`, `.git/hooks`) where they exist.
pub fn read_only_inside(session_dir: &Path) -> Vec<PathBuf> {
    let git = session_dir.join(".git");
    [git.join("config"), git.join("hooks")]
        .into_iter()
        .filter(|p| {
            std::fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink())
                && std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir())
        })
        .collect()
}

/// Prepares the session's own home `own` for a CLI of `adapter` whose home on the machine is
/// `home`: seeds it (once: a restart keeps it, so a resumed conversation finds its history)
/// with the top-level files of the CLI's state paths in `home` (config and credentials, not
/// history). Everything in `own` is written through [`Dir`]: the jail can write there, so
/// nothing in it is followed.
pub fn prepare_home(adapter: &str, home: &Path, own: &Path) -> Result<(), BeneathError> {
    const MAX_SEED_BYTES: u64 = 1 << 20;
    crate::paths::create_private_dir(own).map_err(|source| BeneathError::Io {
        path: own.to_path_buf(),
        source,
    })?;
    let own = Dir::open(own)?;
    for (rel, is_dir) in cli_state_paths(adapter) {
        let rel = Path::new(rel);
        let real = home.join(rel);
        if *is_dir {
            if own.exists(rel) {
                continue;
            }
            let copy = own.create_dir_all(rel, 0o700)?;
            let Ok(source) = Dir::open(&real) else {
                continue;
            };
            for e in source.entries(Path::new("")).unwrap_or_default() {
                if e.kind == Kind::File && e.len <= MAX_SEED_BYTES {
                    let name = Path::new(&e.name);
                    let _ = source.copy_to(name, &copy, name, MAX_SEED_BYTES, 0o600);
                }
            }
        } else if !own.exists(rel) {
            if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
                own.create_dir_all(parent, 0o700)?;
            }
            let seeded = real
                .parent()
                .and_then(|p| Dir::open(p).ok())
                .zip(real.file_name())
                .is_some_and(|(d, name)| {
                    d.copy_to(Path::new(name), &own, rel, MAX_SEED_BYTES, 0o600)
                        .is_ok()
                });
            if !seeded {
                own.write(rel, b"{}", 0o600)?;
            }
        }
    }
    Ok(())
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
    fn the_jail_is_built_from_an_allow_list_in_order() {
        let spec = JailSpec {
            session_dir: PathBuf::from("/d/members/ann/p"),
            read_only: vec![PathBuf::from("/home/u/.npm/lib")],
            links: vec![(PathBuf::from("../x/cli.js"), PathBuf::from("/home/u/bin/x"))],
            home: Some((PathBuf::from("/st/jails/1/home"), PathBuf::from("/home/u"))),
            rw: vec![(PathBuf::from("/st/s/1"), PathBuf::from("/st/s/1"))],
            rw_pinned: vec![PathBuf::from("/d/members/ann/r/.git")],
            read_only_inside: vec![PathBuf::from("/d/members/ann/p/.git/hooks")],
            network: false,
            tmp_bytes: 1024,
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
        assert!(j.contains("--unshare-net"), "{j}");
        assert!(!j.contains("--ro-bind / /"), "never the whole machine: {j}");
        assert!(!j.contains("--dev-bind"), "never the host's devices: {j}");
        assert!(j.contains("--dev /dev"), "{j}");
        assert!(j.contains("--size 1024 --tmpfs /tmp"), "{j}");
        assert!(j.contains("--size 1024 --tmpfs /dev/shm"), "{j}");
        assert!(j.contains("--unsetenv SSH_AUTH_SOCK"), "{j}");
        assert!(j.contains("--unsetenv DISPLAY"), "{j}");
        let pos = |needle: &str| j.find(needle).unwrap_or_else(|| panic!("{needle} in {j}"));
        assert!(pos("--ro-bind /usr /usr") < pos("--bind /st/jails/1/home /home/u"));
        assert!(
            pos("--bind /st/jails/1/home /home/u") < pos("--ro-bind /home/u/.npm/lib"),
            "the installation is shown over the jail's own home"
        );
        assert!(pos("--symlink ../x/cli.js /home/u/bin/x") < pos("--bind-fd /d/members/ann/p"));
        assert!(pos("--bind-fd /d/members/ann/p") < pos("--bind /st/s/1 /st/s/1"));
        assert!(
            pos("--bind-fd /d/members/ann/p") < pos("--ro-bind-fd /d/members/ann/p/.git/hooks"),
            "git's hooks stay read-only over the writable directory"
        );
        assert!(
            pos("--bind-fd /d/members/ann/r/.git")
                < pos("--ro-bind-fd /d/members/ann/p/.git/hooks"),
            "a worktree's repository is bound pinned, before what is made read-only again"
        );
        assert!(pos("--remount-ro /") < pos("--chdir /d/members/ann/p --"));
        assert!(j.ends_with("-- claude -x"), "{j}");
        let with_net = argv(
            Path::new("bwrap"),
            &JailSpec {
                network: true,
                ..spec
            },
            &["sh".into()],
        );
        assert!(!with_net.iter().any(|a| a == "--unshare-net"));
    }

    #[test]
    fn git_config_and_hooks_are_made_read_only_where_they_exist() {
        let t = tempfile::tempdir().expect("tempdir");
        assert!(read_only_inside(t.path()).is_empty());
        std::fs::create_dir_all(t.path().join(".git/hooks")).expect("dirs");
        std::fs::write(t.path().join(".git/config"), "").expect("write");
        assert_eq!(
            read_only_inside(t.path()),
            vec![t.path().join(".git/config"), t.path().join(".git/hooks")]
        );
    }

    #[test]
    fn the_home_is_seeded_once_with_the_clis_config_only() {
        let t = tempfile::tempdir().expect("tempdir");
        let home = t.path().join("home");
        std::fs::create_dir_all(home.join(".claude/projects")).expect("dirs");
        std::fs::create_dir_all(home.join(".ssh")).expect("dirs");
        std::fs::write(home.join(".claude/settings.json"), "{\"a\":1}").expect("write");
        std::fs::write(home.join(".claude/projects/secret.jsonl"), "history").expect("write");
        let own = t.path().join("own");
        prepare_home("claude", &home, &own).expect("prepare");
        assert_eq!(
            std::fs::read_to_string(own.join(".claude/settings.json")).expect("seeded"),
            "{\"a\":1}"
        );
        assert!(
            !own.join(".claude/projects").exists(),
            "history is not copied"
        );
        assert!(!own.join(".ssh").exists(), "nothing else of the home");
        assert_eq!(
            std::fs::read_to_string(own.join(".claude.json")).expect("made"),
            "{}"
        );
        std::fs::write(own.join(".claude/settings.json"), "changed").expect("write");
        prepare_home("claude", &home, &own).expect("again");
        assert_eq!(
            std::fs::read_to_string(own.join(".claude/settings.json")).expect("kept"),
            "changed"
        );
        prepare_home("opencode", &home, &own).expect("opencode");
        assert!(own.join(".config/opencode").is_dir());
    }

    #[test]
    fn a_link_the_jail_left_in_its_home_is_never_written_through() {
        let t = tempfile::tempdir().expect("tempdir");
        let home = t.path().join("home");
        std::fs::create_dir_all(home.join(".codex")).expect("dirs");
        std::fs::write(home.join(".claude.json"), "{\"real\":1}").expect("write");
        let victim = t.path().join("victim");
        std::fs::write(&victim, "keep").expect("write");
        let own = t.path().join("own");
        std::fs::create_dir_all(&own).expect("own");
        // A dangling link where the seed will go, and a link as the CLI's state directory.
        std::os::unix::fs::symlink(t.path().join("planted"), own.join(".claude.json"))
            .expect("link");
        std::os::unix::fs::symlink(t.path(), own.join(".codex")).expect("link");
        let _ = prepare_home("claude", &home, &own);
        let _ = prepare_home("codex", &home, &own);
        assert!(
            !t.path().join("planted").exists(),
            "no file made through the link"
        );
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "keep");
    }
}
