//! Confining a session as it starts: the jail a chat user's CLI runs in, the CLIs they may start, the hook socket that serves only their session.

use crate::chat::access::Sandbox;
use crate::cli::CliSpec;
use crate::confine::*;
use crate::core::Daemon;
use crate::error::CoreError;
use crate::model::SessionRecord;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use tracing::warn;

impl Daemon {
    /// Whether chat user `owner` ("PLATFORM:USER"; empty on the machine) is a non-admin, with
    /// their platform's access settings.
    pub(crate) fn non_admin(&self, owner: &str) -> Option<crate::chat::access::PlatformAccess> {
        let (platform, user) = owner.split_once(':')?;
        (self.access().known(platform, user) != Some(true))
            .then(|| self.access().platform(platform))
    }

    /// Refuses a CLI that `owner` may not start: non-admins only those their platform's
    /// `clis` lists (by default every CLI with a real adapter, not `generic` programs).
    pub(crate) fn check_cli_allowed(&self, owner: &str, cli: &str) -> Result<(), CoreError> {
        let Some(conf) = self.non_admin(owner) else {
            return Ok(());
        };
        let allowed: Vec<String> = match &conf.clis {
            Some(list) if list.iter().any(|c| c == "*") => return Ok(()),
            Some(list) => list.clone(),
            None => self
                .live()
                .clis
                .values()
                .filter(|c| c.adapter != "generic")
                .map(|c| c.name.clone())
                .collect(),
        };
        if allowed.iter().any(|c| c == cli) {
            Ok(())
        } else {
            Err(CoreError::CliNotAllowed {
                cli: cli.to_string(),
                allowed: if allowed.is_empty() {
                    "none".into()
                } else {
                    allowed.join(", ")
                },
            })
        }
    }

    /// The bubblewrap binary a session of `owner` runs in, or `None` to run unjailed
    /// (admins, the local user, or `sandbox = "off"`). A non-admin's session on a machine
    /// without bubblewrap is refused.
    pub(crate) fn jail_for(&self, owner: &str, path: &str) -> Result<Option<PathBuf>, CoreError> {
        let Some(conf) = self.non_admin(owner) else {
            return Ok(None);
        };
        if conf.sandbox == Sandbox::Off {
            return Ok(None);
        }
        let search = format!("{path}:/usr/bin:/bin:/usr/local/bin");
        match crate::confine::jail::find_bwrap(&search) {
            Some(b) => Ok(Some(b)),
            None => Err(CoreError::NoSandbox),
        }
    }

    /// Binds (once per session id) the socket through which a jailed session's hooks reach
    /// the daemon, and hands it to the server layer. Returns the socket's directory and path.
    pub(crate) fn hook_socket(&self, id: &str) -> Result<(PathBuf, PathBuf), CoreError> {
        let dir = self.settings().state_dir.join("hooks").join(id);
        let path = dir.join("s");
        let mut hs = self.hook_sockets();
        if hs.served.contains_key(id) && path.exists() {
            return Ok((dir, path));
        }
        let err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CoreError::State { path, source }
        };
        crate::paths::create_private_dir(&dir).map_err(err(&dir))?;
        let _ = std::fs::remove_file(&path);
        // The socket's mode is not set by path: the jail can replace the name with a link in
        // between. Its directory is 0700, which is what keeps others out.
        let listener = UnixListener::bind(&path).map_err(err(&path))?;
        listener.set_nonblocking(true).map_err(err(&path))?;
        let stop = self.shutdown_token().child_token();
        if let Some(old) = hs.served.insert(id.to_string(), stop.clone()) {
            old.cancel();
        }
        if let Some(tx) = &hs.tx {
            let _ = tx.send(HookListener {
                id: id.to_string(),
                listener,
                stop,
            });
        }
        Ok((dir, path))
    }

    /// Stops serving session `id`'s hook socket and removes it.
    pub(crate) fn drop_hook_socket(&self, id: &str) {
        if let Some(stop) = self.hook_sockets().served.remove(id) {
            stop.cancel();
        }
        let _ = std::fs::remove_dir_all(self.settings().state_dir.join("hooks").join(id));
    }

    /// The hook sockets to serve, for the server layer (once).
    pub fn take_hook_listeners(
        &self,
    ) -> Option<tokio::sync::mpsc::UnboundedReceiver<HookListener>> {
        self.hook_sockets().rx.take()
    }

    /// Whether showing `p` read-only in a jail would show a secret: the home directory itself
    /// or a parent of it, a secret path, or a directory holding one (clibot's state and config
    /// among them).
    fn shows_secret(&self, p: &Path) -> bool {
        let home = crate::paths::expand_home(Path::new("~"));
        let canon = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        home.starts_with(&canon)
            || self
                .secret_paths()
                .iter()
                .any(|s| s.starts_with(&canon) || canon.starts_with(s))
    }

    /// Wraps `argv` in the jail for session `rec` whose CLI sees `home` and finds programs on
    /// `path`; prepares the CLI's per-session home and the hook socket. Returns the new argv
    /// and the hook socket path (none is bound for a jail that only checks whether the CLI runs
    /// there, `check`). Runs blocking file work: call it off the async workers.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn jailed_argv(
        &self,
        bwrap: &Path,
        rec: &SessionRecord,
        cli: &CliSpec,
        home: &Path,
        argv: &[String],
        path: &str,
        conf: &crate::chat::access::PlatformAccess,
        check: bool,
    ) -> Result<(Vec<String>, PathBuf), CoreError> {
        let state = &self.settings().state_dir;
        let state_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CoreError::State { path, source }
        };
        let own = state.join("jails").join(&rec.id).join("home");
        crate::confine::jail::prepare_home(&cli.adapter, home, &own)?;
        let files = state.join("sessions").join(&rec.id);
        crate::paths::create_private_dir(&files).map_err(state_err(&files))?;
        crate::confine::beneath::confine_area(files.clone());
        let mut rw = vec![(files.clone(), files.clone())];
        let (hook_dir, hook_path) = if check {
            let dir = files.join("hooks");
            crate::paths::create_private_dir(&dir).map_err(state_err(&dir))?;
            let path = dir.join("s");
            (dir, path)
        } else {
            self.hook_socket(&rec.id)?
        };
        rw.push((hook_dir.clone(), hook_dir));
        let mut needs = crate::confine::install::needs(argv, path, &rec.dir);
        // The program the CLI's hooks run (`clibotctl hook`), where it is.
        let (_, hook_argv) = self.hook_command(&cli.name);
        if let Some(p) = hook_argv
            .first()
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            && !crate::confine::install::in_system(&p)
        {
            needs.read_only.push(p);
        }
        // What the program itself needs must be shown, or it dies at once in the jail with
        // an error the user never sees: refused here, saying where it is installed.
        if let Some(p) = needs.read_only.iter().find(|p| self.shows_secret(p)) {
            return Err(CoreError::NotRunnableInJail {
                cli: cli.name.clone(),
                why: format!(
                    "its program is installed in {}, which the jail does not show (the home directory itself, a parent of it, or a place holding secrets)",
                    p.display()
                ),
            });
        }
        for p in &conf.jail_read {
            let p = crate::paths::expand_home(p);
            if p.exists() {
                needs.read_only.push(p);
            }
        }
        let mut read_only = Vec::new();
        for p in needs.read_only {
            if self.shows_secret(&p) {
                warn!(
                    session = %rec.name,
                    "{} is not shown in the jail: it is the home directory, a parent of it, or holds secrets",
                    p.display()
                );
            } else if !read_only.contains(&p) {
                read_only.push(p);
            }
        }
        let links = needs
            .links
            .into_iter()
            .filter(|(_, link)| !read_only.iter().any(|r| link.starts_with(r)))
            .collect();
        // A worktree's commits, branches and index live in its repository's `.git`: bound
        // writable from a descriptor opened with no link followed, its config and hooks
        // read-only again, as in a repository the session works in directly.
        let mut read_only_inside = crate::confine::jail::read_only_inside(&rec.dir);
        let mut rw_pinned = Vec::new();
        if let Some(w) = &rec.worktree {
            rw_pinned.push(w.repo.join(".git"));
            read_only_inside.extend(crate::confine::jail::read_only_inside(&w.repo));
        }
        let spec = crate::confine::jail::JailSpec {
            session_dir: rec.dir.clone(),
            rw_pinned,
            read_only,
            links,
            home: Some((own, home.to_path_buf())),
            rw,
            read_only_inside,
            network: conf.network.shared_for(&cli.adapter),
            tmp_bytes: conf.jail_tmp.0,
        };
        Ok((crate::confine::jail::argv(bwrap, &spec, argv), hook_path))
    }

    /// Records where a jailed session's CLI has its home (empty: not jailed).
    pub(crate) fn set_jail_home(&self, name: &str, home: &str) {
        self.sessions()
            .update(name, |e| e.rec.jail_home = home.to_string());
    }

    /// Where a record a jailed CLI names (its transcript) lies on the host, when it lies in the
    /// session's own home or files; `None` otherwise: a jailed session names no other file for
    /// the daemon to read. A link in the session's files that points into the home as the jail
    /// shows it (the CLI's per-session home links into its home) is followed as the jail does;
    /// any other link is not. What is returned lies in a session area, which the readers open
    /// beneath it with no link followed (`confine::beneath::read_record`).
    pub(crate) fn jailed_record_path(&self, rec: &SessionRecord, seen: &str) -> Option<PathBuf> {
        let state = &self.settings().state_dir;
        let own = state.join("jails").join(&rec.id).join("home");
        let files = state.join("sessions").join(&rec.id);
        // What this returns is read beneath these areas (a daemon restarted since the jail
        // was made learns the files' area here).
        crate::confine::beneath::confine_area(files.clone());
        let home = Path::new(&rec.jail_home);
        let seen = Path::new(seen);
        if !seen.is_absolute()
            || seen
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return None;
        }
        if let Ok(rest) = seen.strip_prefix(&files) {
            let root = crate::confine::beneath::Dir::open(&files).ok()?;
            let mut at = PathBuf::new();
            for c in rest.components() {
                at.push(c);
                if let Some(target) = root.read_link(&at) {
                    // A link into the home as the jail shows it: the jail's own home.
                    let in_home = target.strip_prefix(home).ok()?;
                    let after = rest.strip_prefix(&at).unwrap_or(Path::new(""));
                    return Some(own.join(in_home).join(after));
                }
            }
            return Some(seen.to_path_buf());
        }
        let rest = seen.strip_prefix(home).ok()?;
        Some(own.join(rest))
    }

    /// Hands `argv` with `env` to the launcher through a private file; returns what tmux runs
    /// and the part of `env` tmux may keep. Without a launcher binary (it cannot be found),
    /// the program is given to tmux directly, as it was before the launcher existed.
    pub(crate) fn through_launcher(
        &self,
        id: &str,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        jailed: bool,
    ) -> Result<(Vec<String>, Env), CoreError> {
        let tmux_env: Vec<(String, String)> = env
            .iter()
            .filter(|(k, _)| TMUX_ENV.contains(&k.as_str()))
            .cloned()
            .collect();
        let state = &self.settings().state_dir;
        let spec = crate::confine::launch::LaunchSpec {
            argv,
            env,
            seccomp: jailed,
        };
        let file =
            crate::confine::launch::write(state, id, &spec).map_err(|source| CoreError::State {
                path: crate::confine::launch::dir(state),
                source,
            })?;
        match crate::confine::launch::launcher_argv(&file) {
            Some(a) => Ok((a, tmux_env)),
            // A jail is never started without the launcher, which hands it its seccomp filter.
            None if jailed => {
                let _ = std::fs::remove_file(&file);
                Err(CoreError::NoOwnBinary)
            }
            None => {
                let _ = std::fs::remove_file(&file);
                tracing::warn!(
                    "clibotd's own binary cannot be found to launch the session; starting it directly"
                );
                Ok((spec.argv, spec.env))
            }
        }
    }
}
