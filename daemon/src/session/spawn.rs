//! Starting a session: the CLI checked against the config and the machine, its directory confined, its tmux session created with the hook wiring, then followed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tracing::{Instrument, info, info_span, warn};

use crate::cli::CliSpec;
use crate::core::*;
use crate::error::CoreError;
use crate::ids::new_id;
use crate::ids::new_uuid;
use crate::model::{Actor, SessionRecord, State};
use crate::names::{is_valid_env_key, is_valid_name};
use crate::paths::create_private_dir;
use crate::paths::expand_home;
use crate::store::events::EventKind;
use crate::store::now_ms;
use crate::tmux::{MuxError, MuxSession, NewSession, SessionMeta};

impl Daemon {
    /// Starts a configured CLI in a new tmux session.
    /// Puts account profile `req.profile` of `cli` into the request's environment (what the
    /// request sets itself wins; `~/` is the home directory). Admins' and the machine's
    /// sessions only: a profile points the CLI at an account's credentials, which a member's
    /// jail must not reach.
    fn take_profile(
        &self,
        req: &mut SpawnRequest,
        cli: &crate::cli::CliSpec,
    ) -> Result<(), CoreError> {
        if self.non_admin(&req.owner).is_some() {
            return Err(CoreError::BadSpawn(
                "profile: only admins and the machine's user start sessions with an account profile".into(),
            ));
        }
        let p = super::profile_switch::profile_of(cli, &req.profile)?;
        for (k, v) in &p.env {
            req.env
                .entry(k.clone())
                .or_insert_with(|| super::profile_switch::profile_value(v));
        }
        Ok(())
    }

    pub async fn spawn(&self, req: SpawnRequest) -> Result<SessionRecord, CoreError> {
        let span = info_span!("session", session = %req.name);
        self.spawn_inner(req).instrument(span).await
    }

    async fn spawn_inner(&self, mut req: SpawnRequest) -> Result<SessionRecord, CoreError> {
        if !is_valid_name(&req.name) {
            return Err(CoreError::InvalidName(req.name));
        }
        if crate::names::is_reserved(&req.name) {
            return Err(CoreError::ReservedName(req.name));
        }
        crate::ops::limits::check_spawn(&req.args, req.env.iter())?;
        let cli = self.cli(&req.cli)?.clone();
        self.refuse_over_budget(crate::usage::budgets::Scoped {
            session: &req.name,
            owner: if req.owner.is_empty() {
                crate::model::Actor::LOCAL
            } else {
                &req.owner
            },
            cli: &cli.name,
        })?;
        if !req.profile.is_empty() {
            self.take_profile(&mut req, &cli)?;
        }
        let dir = match self.non_admin(&req.owner) {
            Some(conf) => self.member_dir(&req.owner, &conf, &req.dir)?,
            None => self.resolve_dir(&req.dir, &cli)?,
        };
        for (k, v) in &req.env {
            if !is_valid_env_key(k) {
                return Err(CoreError::BadSpawn(format!(
                    "invalid environment variable name {k:?}: use letters, digits and _ (not starting with a digit)"
                )));
            }
            if v.contains('\0') {
                return Err(CoreError::BadSpawn(format!(
                    "environment variable {k} contains a NUL byte"
                )));
            }
        }
        if req.args.iter().any(|a| a.contains('\0')) {
            return Err(CoreError::BadSpawn(
                "an argument contains a NUL byte".into(),
            ));
        }
        if !req.resume.is_empty() {
            let valid = req.resume.len() <= 128
                && req
                    .resume
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !valid {
                return Err(CoreError::BadSpawn(format!(
                    "{:?} is not a conversation id (letters, digits, - _ . only; at most 128)",
                    req.resume
                )));
            }
            if !self.resumes_conversations(&cli.name) {
                return Err(CoreError::BadSpawn(format!(
                    "{} keeps no conversations to resume: start it without --resume",
                    cli.name
                )));
            }
        }
        // Its own worktree, made last: nothing above can refuse the spawn after it exists.
        let worktree = match &req.worktree {
            None => None,
            Some(_) if self.get(&req.name).is_ok() => {
                return Err(CoreError::AlreadyExists(req.name.clone()));
            }
            Some(ask) => Some(self.make_worktree(&req.name, &req.owner, &dir, ask).await?),
        };
        let taken_up = worktree.as_ref().is_some_and(|(_, t)| *t);
        let worktree = worktree.map(|(w, _)| w);
        let dir = worktree.as_ref().map_or(dir, |w| w.path.clone());
        let id = new_id();
        let created = now_ms();
        let rec = SessionRecord {
            id: id.clone(),
            name: req.name.clone(),
            cli: cli.name.clone(),
            dir: dir.clone(),
            state: State::Starting,
            created_at_ms: created,
            last_activity_ms: created,
            tmux_session: req.name.clone(),
            tmux_id: String::new(),
            pane: String::new(),
            pid: 0,
            exit_status: None,
            adopted: false,
            args: req.args.clone(),
            env: req.env.clone(),
            owner: req.owner.clone(),
            delegate: req.delegate || self.live().config.delegation.default,
            delegated_from: req.delegated_from.clone(),
            delegated_reasons: req.delegated_reasons.clone(),
            hook_token: crate::ids::new_token().map_err(CoreError::NoRandom)?,
            // A resumed conversation keeps its id (Claude Code `--resume ID`, OpenCode's
            // `ses_…`), so that a later restart continues it too.
            cli_session_id: if req.resume.is_empty() {
                new_uuid()
            } else {
                req.resume.clone()
            },
            api_port: if self.kind_of(&cli.name).is_some_and(|(a, _)| a.serves_api()) {
                free_local_port().map_err(CoreError::NoPort)?
            } else {
                0
            },
            profile: req.profile.clone(),
            worktree: worktree.clone(),
            ..Default::default()
        };
        let capped_owner = self.capped_owner(&req.owner);
        // Reserve the name before the slow part, so two spawns of one name cannot both proceed.
        // A transaction: the name is checked free and the limits counted over every session,
        // and the name taken, as one step.
        let reserved = self.sessions().transaction(|sessions| {
            if sessions.contains_key(&req.name) {
                return Err(CoreError::AlreadyExists(req.name.clone()));
            }
            self.check_limits(sessions, &req.name, capped_owner.as_ref())?;
            let mut e = Entry::new(rec.clone());
            e.stopping = true; // not usable until it exists
            sessions.insert(req.name.clone(), e);
            Ok(())
        });
        if let Err(e) = reserved {
            if let Some(w) = &worktree {
                self.undo_worktree(&req.name, w, taken_up).await;
            }
            return Err(e);
        }
        let result = self.create_tmux_session(&rec, &cli, &req, false).await;
        match result {
            Ok(s) => {
                // A new session under a name someone else held before gets none of their chats:
                // a chat user's session keeps only the chats they bound; the machine user's
                // keeps those of the machine's user and the admins.
                let owner = req.owner.as_str();
                let others: Vec<String> = (self.chats().binders_of(&req.name))
                    .into_iter()
                    .filter(|binder| {
                        let admin = binder == Actor::LOCAL
                            || binder
                                .split_once(':')
                                .is_some_and(|(p, u)| self.access().known(p, u) == Some(true));
                        if owner.is_empty() {
                            !admin
                        } else {
                            binder != owner
                        }
                    })
                    .collect();
                let ended = self.chats().end_bindings_by(&req.name, &others);
                if ended > 0 {
                    info!(
                        ended,
                        "chats bound to a former session of this name were let go"
                    );
                }
                self.launched(&req.name, s).await
            }
            Err(e) => {
                self.sessions().remove(&req.name);
                if let Some(w) = &worktree {
                    self.undo_worktree(&req.name, w, taken_up).await;
                }
                Err(e)
            }
        }
    }

    /// The CLI of session `name` runs in tmux session `s`: record it, report it, watch it.
    pub(crate) async fn launched(
        &self,
        name: &str,
        s: MuxSession,
    ) -> Result<SessionRecord, CoreError> {
        let rec = self.sessions().try_update(name, |e| {
            e.rec.tmux_id = s.id;
            e.rec.pane = s.pane;
            e.rec.pid = s.pid;
            e.stopping = false;
            Ok(e.rec.clone())
        })?;
        self.event(
            &rec.name,
            &rec.id,
            EventKind::Spawned {
                cli: rec.cli.clone(),
                dir: rec.dir.display().to_string(),
                args: rec.args.clone(),
                cli_version: rec.cli_version.clone(),
            },
        );
        info!(cli = %rec.cli, version = %rec.cli_version, dir = %rec.dir.display(), "spawned");
        self.check_cli_version(&rec);
        // A CLI with hooks is ready when its screen says so; any other program at once.
        let by_hook = self
            .kind_of(&rec.cli)
            .is_some_and(|(a, _)| a.completes_by_hook());
        if !by_hook {
            self.set_state(&rec.name, State::Idle, "started");
            // A restart keeps the queue: it goes now, as it would after a completed turn.
            self.deliver_queued(&rec.name);
        }
        self.start_watcher(&rec.name);
        if s.dead {
            let output = self.last_words(&rec.name, rec.target()).await;
            self.mark_exited_with(
                &rec.name,
                s.dead_status,
                "the CLI exited right after it started",
                output,
            );
        }
        self.persist();
        self.get(&rec.name)
    }

    pub(crate) fn cli(&self, name: &str) -> Result<Arc<CliSpec>, CoreError> {
        let live = self.live();
        live.clis
            .get(name)
            .cloned()
            .ok_or_else(|| CoreError::UnknownCli {
                name: name.to_string(),
                known: live.clis.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// Resolves and confines a working directory.
    fn resolve_dir(&self, requested: &str, cli: &CliSpec) -> Result<PathBuf, CoreError> {
        let raw = if requested.is_empty() {
            match &cli.dir {
                Some(d) => expand_home(d),
                // The home directory, or — when it lies outside the allowed roots — the first
                // root: a session started with no directory (`!!new NAME CLI`, `!!ask`) starts
                // where it may.
                None => {
                    let home = expand_home(Path::new("~"));
                    let roots = &self.live().roots;
                    let canon = home.canonicalize().unwrap_or_else(|_| home.clone());
                    match roots.first() {
                        Some(first) if !roots.iter().any(|r| canon.starts_with(r)) => first.clone(),
                        _ => home,
                    }
                }
            }
        } else {
            expand_home(Path::new(requested))
        };
        if !raw.is_absolute() {
            return Err(CoreError::DirNotAbsolute(requested.to_string()));
        }
        let dir = raw
            .canonicalize()
            .map_err(|_| CoreError::DirNotFound(raw.clone()))?;
        if !dir.is_dir() {
            return Err(CoreError::NotADirectory(dir));
        }
        let live = self.live();
        if let Some(secret) = crate::confine::secrets::secret_containing(
            &dir,
            self.secret_paths(),
            &live.lifted_secrets,
        ) {
            return Err(CoreError::SecretDir { dir, secret });
        }
        if !live.roots.iter().any(|r| dir.starts_with(r)) {
            let roots = if live.roots.is_empty() {
                "none configured exists".to_string()
            } else {
                live.roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(CoreError::DirNotAllowed { dir, roots });
        }
        Ok(dir)
    }

    pub(crate) async fn create_tmux_session(
        &self,
        rec: &SessionRecord,
        cli: &CliSpec,
        req: &SpawnRequest,
        resume: bool,
    ) -> Result<MuxSession, CoreError> {
        self.check_cli_allowed(&rec.owner, &cli.name)?;
        let mut argv = cli.argv.clone();
        let mut launch_env = Vec::new();
        let mut launch_dirs = Vec::new();
        // The home the CLI will see: its own HOME setting, else the daemon's.
        let home = req
            .env
            .get("HOME")
            .or_else(|| cli.env.get("HOME"))
            .map(PathBuf::from)
            .unwrap_or_else(|| expand_home(Path::new("~")));
        if let Some((adapter, _)) = self.kind_of(&cli.name) {
            let mut given = cli.env.clone();
            given.extend(req.env.iter().map(|(k, v)| (k.clone(), v.clone())));
            let (hook_command, hook_argv) = self.hook_command(&cli.name);
            let files_dir = self.settings().state_dir.join("sessions").join(&rec.id);
            let launch = adapter.launch(&crate::cli::LaunchContext {
                hook_command: &hook_command,
                cli_session_id: &rec.cli_session_id,
                permission_wait_secs: self.settings().config.daemon.permission_wait_ms / 1000,
                hook_argv: &hook_argv,
                files_dir: &files_dir,
                home: &home,
                api_port: rec.api_port,
                api_secret: &rec.hook_token,
                resume: resume || !req.resume.is_empty(),
                conversation: &req.resume,
                env: &given,
            });
            let (files, dirs, links) = (
                launch.files.clone(),
                launch.dirs.clone(),
                launch.links.clone(),
            );
            let fd = files_dir.clone();
            crate::confine::beneath::blocking("the session's launch files", move || {
                write_launch_files(&fd, &files, &dirs, &links)
            })
            .await?;
            launch_dirs.clone_from(&launch.dirs);
            argv.extend(launch.args);
            launch_env = launch.env;
        }
        argv.extend(req.args.iter().cloned());
        let mut env: Vec<(String, String)> = cli
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        env.extend(req.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.extend(launch_env);
        // A daemon started by systemd may have no locale; TUIs then draw boxes as `?`.
        let has_locale = ["LC_ALL", "LC_CTYPE", "LANG"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
        if !has_locale && !env.iter().any(|(k, _)| k == "LANG" || k == "LC_ALL") {
            env.push(("LANG".into(), "C.UTF-8".into()));
        }
        let program = self
            .check_program(&cli.name, argv.first().map(String::as_str), &env, &rec.dir)
            .await?;
        let version_argv = argv.clone();
        env.push(("CLIBOT_SESSION".into(), rec.name.clone()));
        env.push(("CLIBOT_HOOK_TOKEN".into(), rec.hook_token.clone()));
        env.push(("CLIBOT_SESSION_ID".into(), rec.id.clone()));
        // Kept in the session's tmux environment, so that a daemon that lost its registry can
        // recover what it needs to follow the CLI (its transcript, its API).
        env.push(("CLIBOT_CLI_SESSION_ID".into(), rec.cli_session_id.clone()));
        if rec.api_port != 0 {
            env.push(("CLIBOT_API_PORT".into(), rec.api_port.to_string()));
        }
        // A non-admin's program runs jailed; its hooks reach the daemon through a socket of
        // its own, which serves that session's hook calls only.
        let path_for_jail = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, p)| p.clone())
            .or_else(|| self.global_path())
            .unwrap_or_default();
        let (socket, jailed) = match self.jail_for(&rec.owner, &path_for_jail)? {
            Some(bwrap) => {
                let conf = self
                    .non_admin(&rec.owner)
                    .unwrap_or_else(|| self.access().platform(""));
                let (d, rec2, cli2, home2, argv2) = (
                    self.clone(),
                    rec.clone(),
                    cli.clone(),
                    home.clone(),
                    argv.clone(),
                );
                let path2 = path_for_jail.clone();
                let dirs = launch_dirs.clone();
                let (jailed, hook_socket) =
                    crate::confine::beneath::blocking("preparing the jail", move || {
                        let r = d.jailed_argv(
                            &bwrap, &rec2, &cli2, &home2, &argv2, &path2, &conf, false,
                        );
                        // What the CLI's links point to in its home is made in the jail's own
                        // home too, which the jail shows there.
                        let own = (d.settings().state_dir.join("jails"))
                            .join(&rec2.id)
                            .join("home");
                        if r.is_ok()
                            && let Ok(own) = crate::confine::beneath::Dir::open(&own)
                        {
                            for dir in &dirs {
                                if let Ok(rest) = dir.strip_prefix(&home2) {
                                    own.create_dir_all(rest, 0o700)?;
                                }
                            }
                        }
                        Ok(r)
                    })
                    .await??;
                self.check_runs_in_jail(rec, cli, &program, &argv, &jailed, &env)
                    .await?;
                argv = jailed;
                self.set_jail_home(&rec.name, &home.display().to_string());
                (hook_socket, true)
            }
            None => {
                self.set_jail_home(&rec.name, "");
                (self.settings().socket.clone(), false)
            }
        };
        // `PROGRAM --version` runs outside any jail: never for a jailed session (its owner may
        // have chosen what the program name resolves to) nor for a plain program.
        let probe = !jailed && cli.adapter != "generic";
        let version = crate::cli::version::read(&cli.adapter, &program, &version_argv, probe).await;
        self.sessions()
            .update(&rec.name, |e| e.rec.cli_version = version);
        env.push(("CLIBOT_SOCKET".into(), socket.display().to_string()));
        let (argv, env) = self.through_launcher(&rec.id, argv, env, jailed)?;
        let meta = SessionMeta {
            id: rec.id.clone(),
            name: rec.name.clone(),
            cli: rec.cli.clone(),
            dir: rec.dir.display().to_string(),
            created_ms: rec.created_at_ms.to_string(),
        };
        let early = super::early::path(&self.settings().state_dir, &rec.id);
        let early_pipe = match super::early::prepare(&early) {
            Ok(()) => Some(super::early::pipe_command(&early)),
            Err(e) => {
                warn!(
                    "the CLI's first output cannot be kept ({}): {e}",
                    early.display()
                );
                None
            }
        };
        let t = &self.settings().config.tmux;
        let spec = NewSession {
            early_pipe: early_pipe.as_deref(),
            name: &rec.name,
            dir: &rec.dir,
            argv: &argv,
            env: &env,
            width: t.width,
            height: t.height,
            meta: &meta,
        };
        let mux = &self.mux();
        let created = match mux.new_session(&spec).await {
            // The tmux server went away (killed, or its unit restarted): start it and retry once.
            Err(MuxError::NoServer(_)) => {
                mux.ensure_server(t.history_limit).await?;
                mux.new_session(&spec).await
            }
            other => other,
        };
        match created {
            Ok(s) => {
                self.keep_token_in_tmux(&s.id, &rec.hook_token);
                Ok(s)
            }
            Err(MuxError::DuplicateSession(_)) => Err(CoreError::TmuxNameTaken(rec.name.clone())),
            Err(e) => Err(e.into()),
        }
    }

    /// Keeps a session's hook token in its tmux environment, for a daemon that loses its
    /// registry (see `recover_links`). Only over the control connection, which may still be
    /// attaching right after the first spawn: tried for a few seconds.
    fn keep_token_in_tmux(&self, tmux_id: &str, token: &str) {
        let (mux, id, token) = (self.mux().clone(), tmux_id.to_string(), token.to_string());
        self.in_background(async move {
            for _ in 0..50 {
                match mux.set_private_env(&id, "CLIBOT_HOOK_TOKEN", &token).await {
                    Ok(()) => return,
                    Err(MuxError::NoSuchTarget(_)) => return,
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
            warn!("the hook token could not be kept in tmux's environment of {id}");
        });
    }

    /// Refuses to start a session whose program cannot run: looked up on the PATH the new
    /// session will have (its own environment's, else tmux's global one, which new sessions
    /// inherit), so that a missing CLI is an error that says what to do, not a session that
    /// dies at once.
    pub(crate) async fn check_program(
        &self,
        cli: &str,
        program: Option<&str>,
        env: &[(String, String)],
        dir: &Path,
    ) -> Result<PathBuf, CoreError> {
        let program = program.unwrap_or("");
        // tmux's global PATH is asked once and kept: every tmux call costs the server time in
        // proportion to its sessions. A program not found on the kept PATH is looked up again
        // on a fresh one before the spawn is refused.
        let own = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, p)| p.clone());
        let kept = self.global_path();
        let path = match (own, kept) {
            (Some(p), _) => p,
            (None, Some(p)) if crate::cli::program::find(program, &p, dir).is_ok() => p,
            (None, _) => self.fresh_global_path().await,
        };
        match crate::cli::program::find(program, &path, dir) {
            Ok(found) => Ok(found),
            Err(crate::cli::program::Missing::NotFound) => Err(CoreError::ProgramNotFound {
                cli: cli.to_string(),
                program: program.to_string(),
                path,
            }),
            Err(crate::cli::program::Missing::NotExecutable(p)) => {
                Err(CoreError::ProgramNotExecutable {
                    cli: cli.to_string(),
                    program: p,
                })
            }
        }
    }

    /// The shell command the CLI's hooks run: the configured one, or the `clibotctl` installed
    /// next to this `clibotd`, quoted for the shell the CLI runs hooks with.
    pub(crate) fn hook_command(&self, cli: &str) -> (String, Vec<String>) {
        let base: Vec<String> = match &self.settings().config.daemon.hook_command {
            // A configured command is shell text; as an argv it runs through sh, with any
            // arguments the CLI appends passed on.
            Some(c) => vec!["sh".into(), "-c".into(), format!("{c} \"$@\""), "sh".into()],
            None => {
                let ctl = std::env::current_exe()
                    .ok()
                    .and_then(|p| p.parent().map(|d| d.join("clibotctl")))
                    .filter(|p| p.is_file())
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "clibotctl".into());
                vec![ctl, "hook".into()]
            }
        };
        let shell = match &self.settings().config.daemon.hook_command {
            Some(c) => c.clone(),
            None => base
                .iter()
                .map(|a| shell_quote(a))
                .collect::<Vec<_>>()
                .join(" "),
        };
        let mut argv = base;
        argv.extend(["--cli".to_string(), cli.to_string()]);
        (format!("{shell} --cli {}", shell_quote(cli)), argv)
    }

    /// The PATH of tmux's global environment (what new sessions inherit), read now and kept.
    async fn fresh_global_path(&self) -> String {
        let path = match self.mux().environment(None).await {
            Ok(g) if g.contains_key("PATH") => g.get("PATH").cloned().unwrap_or_default(),
            _ => std::env::var("PATH").unwrap_or_default(),
        };
        self.set_global_path(path.clone());
        path
    }
}

/// Writes what a CLI's launch needs in the session's files directory `files_dir` — which the
/// session can write (it is bound into its jail), so everything there is reached beneath it
/// with no link followed: a link planted in place of a settings file is replaced, never
/// written through. `dirs` are the user's own (made when missing, outside any jail's reach).
fn write_launch_files(
    files_dir: &Path,
    files: &[(PathBuf, String)],
    dirs: &[PathBuf],
    links: &[(PathBuf, PathBuf)],
) -> Result<(), crate::confine::beneath::BeneathError> {
    use crate::confine::beneath::{BeneathError, Dir};
    create_private_dir(files_dir).map_err(|source| BeneathError::Io {
        path: files_dir.to_path_buf(),
        source,
    })?;
    let root = Dir::open(files_dir)?;
    let below = |p: &Path| -> Result<PathBuf, BeneathError> {
        p.strip_prefix(files_dir)
            .map(Path::to_path_buf)
            .map_err(|_| BeneathError::BadPath(p.to_path_buf()))
    };
    for (path, content) in files {
        let rel = below(path)?;
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            root.create_dir_all(parent, 0o700)?;
        }
        root.write(&rel, content.as_bytes(), 0o600)?;
    }
    for dir in dirs {
        create_private_dir(dir).map_err(|source| BeneathError::Io {
            path: dir.clone(),
            source,
        })?;
    }
    for (link, target) in links {
        let rel = below(link)?;
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            root.create_dir_all(parent, 0o700)?;
        }
        root.symlink(target, &rel)?;
    }
    Ok(())
}
