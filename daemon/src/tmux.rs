//! The terminal multiplexer behind a small trait, and its tmux implementation.
//!
//! The core only speaks [`Mux`], so it can be tested without tmux. [`Tmux`] runs the tmux
//! client (commands built with `tmux_interface`) without ever going through a shell: every
//! argument reaches tmux as its own argv entry, and the two places where tmux itself would
//! interpret an argument — a trailing `;` (a command separator) and `#` in format-expanded
//! options (`#(…)` runs a shell command) — are escaped here.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use async_trait::async_trait;
use tmux_interface::{
    CapturePane, KillSession, LoadBuffer, PasteBuffer, SendKeys, SetOption, TmuxCommand,
};
use tokio::io::AsyncWriteExt;

use crate::keys::Key;

mod listing;
mod monitor;
use listing::{LIST_FORMAT, parse_panes_rows, parse_sessions};
pub use monitor::MONITOR;

/// What went wrong talking to tmux.
#[derive(Debug, thiserror::Error)]
pub enum MuxError {
    #[error("tmux server at {0} is not running")]
    NoServer(String),
    #[error("tmux has no {0}")]
    NoSuchTarget(String),
    #[error("tmux already has a session named {0}")]
    DuplicateSession(String),
    #[error(
        "cannot run tmux ({binary}): {source}; install tmux 3.2 or newer, or set [tmux] binary"
    )]
    Spawn {
        binary: String,
        #[source]
        source: std::io::Error,
    },
    #[error("tmux {command} failed: {stderr}")]
    Failed { command: String, stderr: String },
}

/// A tmux session as tmux reports it, with the options clibot stores on it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MuxSession {
    /// `$3`
    pub id: String,
    pub name: String,
    /// The CLI's pane (`%7`): the session's first pane. Input, screen reads and exits are
    /// about it, never about whatever pane is active.
    pub pane: String,
    /// Pid of the CLI pane's process.
    pub pid: u32,
    /// The CLI pane's process has exited (kept visible by `remain-on-exit`).
    pub dead: bool,
    pub dead_status: Option<i32>,
    /// The CLI pane's current directory.
    pub path: String,
    /// `@clibot_*` user options (empty when unset).
    pub meta: SessionMeta,
}

/// What clibot records on a tmux session so that a daemon that lost its state files can still
/// recognise its sessions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionMeta {
    pub id: String,
    pub name: String,
    pub cli: String,
    pub dir: String,
    pub created_ms: String,
}

impl SessionMeta {
    fn pairs(&self) -> [(&'static str, &str); 5] {
        [
            ("@clibot_id", &self.id),
            ("@clibot_name", &self.name),
            ("@clibot_cli", &self.cli),
            ("@clibot_dir", &self.dir),
            ("@clibot_created", &self.created_ms),
        ]
    }
}

/// A push notification about a session's pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEvent {
    /// The pane printed something.
    Output,
    /// The control client ended (the session is gone, or tmux went away).
    Closed,
}

/// What a new session runs.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    pub name: &'a str,
    pub dir: &'a Path,
    pub argv: &'a [String],
    pub env: &'a [(String, String)],
    pub width: u16,
    pub height: u16,
    pub meta: &'a SessionMeta,
    /// Where the pane's first output is also kept (`pipe-pane` runs this shell command from
    /// the first byte on): see `session::early`.
    pub early_pipe: Option<&'a str>,
}

/// The multiplexer operations the core needs.
#[async_trait]
pub trait Mux: Send + Sync + 'static {
    /// Starts the server when needed and applies the server-wide options clibot relies on.
    async fn ensure_server(&self, history_limit: u32) -> Result<(), MuxError>;
    /// `tmux -V`.
    async fn version(&self) -> Result<String, MuxError>;
    /// Creates a detached session; returns it as listed.
    async fn new_session(&self, spec: &NewSession<'_>) -> Result<MuxSession, MuxError>;
    /// Every session on the server.
    async fn list_sessions(&self) -> Result<Vec<MuxSession>, MuxError>;
    /// Records (or, with `None`, removes) clibot's options on a session.
    async fn set_meta(&self, target: &str, meta: Option<&SessionMeta>) -> Result<(), MuxError>;
    /// Types text literally (no key-name lookup). Must not contain newlines.
    async fn send_text(&self, target: &str, text: &str) -> Result<(), MuxError>;
    /// Pastes text as one bracketed paste.
    async fn paste(&self, target: &str, buffer: &str, text: &str) -> Result<(), MuxError>;
    /// Types a password or secret: fed to tmux on stdin (never as an argument, which other
    /// processes could read), pasted without bracket codes (a password prompt reads raw
    /// input), its buffer deleted at once.
    async fn type_hidden(&self, target: &str, buffer: &str, text: &str) -> Result<(), MuxError>;
    /// Presses keys in order.
    async fn send_keys(&self, target: &str, keys: &[Key]) -> Result<(), MuxError>;
    /// The pane's text from line `start` (negative: scrollback above the screen; `None`: the
    /// visible screen only) to the bottom, wrapped lines joined.
    async fn capture(
        &self,
        target: &str,
        start: Option<i64>,
        escapes: bool,
    ) -> Result<String, MuxError>;
    /// Scrollback size and cursor row, which together locate the cursor in the pane's history.
    async fn cursor(&self, target: &str) -> Result<(i64, i64), MuxError>;
    /// The name of the pane's foreground process (`sleep` while a shell runs it).
    async fn foreground(&self, target: &str) -> Result<String, MuxError>;
    /// Pipes the pane's output to a shell command from now on (replacing a pipe already
    /// open), or closes the pipe (`None`).
    async fn pipe_output(&self, _target: &str, _command: Option<&str>) -> Result<(), MuxError> {
        Err(MuxError::NoSuchTarget("pipe_output".into()))
    }
    /// When a person last did something in a client attached to the pane's session (Unix
    /// seconds; clibot's own control client left out); `None` when none is attached.
    async fn desk_activity(&self, _target: &str) -> Option<i64> {
        None
    }
    /// The terminal device of the pane (`/dev/pts/N`).
    async fn pane_tty(&self, _target: &str) -> Result<String, MuxError> {
        Err(MuxError::NoSuchTarget("pane_tty".into()))
    }
    /// The environment tmux gives new panes: a session's own (`Some(target)`), or the
    /// server's global one (`None`), which is what a new session's command inherits.
    async fn environment(
        &self,
        target: Option<&str>,
    ) -> Result<std::collections::BTreeMap<String, String>, MuxError>;
    /// Output notifications for the session (through one tmux control-mode client for all
    /// sessions): one `Output` per burst at most (they are change signals, not data); the
    /// channel closes (or says `Closed`) when the session ends.
    async fn watch(
        &self,
        target: &str,
    ) -> Result<tokio::sync::mpsc::Receiver<WatchEvent>, MuxError>;
    /// Stops following the session (released: it goes on without clibot).
    async fn unwatch(&self, _target: &str) -> Result<(), MuxError> {
        Ok(())
    }
    async fn kill_session(&self, target: &str) -> Result<(), MuxError>;
    /// The command a person runs to attach to `target`.
    fn attach_command(&self, target: &str) -> Vec<String>;
    /// The global arguments that select this server (`-S path` or `-L name`).
    fn server_args(&self) -> Vec<String>;
    /// Sets a variable in a session's tmux environment without it ever standing on a command
    /// line (the control connection only); where that cannot be done, it is not set.
    async fn set_private_env(
        &self,
        _target: &str,
        _key: &str,
        _value: &str,
    ) -> Result<(), MuxError> {
        Ok(())
    }
    /// The server's socket file, where known: jailed sessions must not see it.
    fn server_socket(&self) -> Option<PathBuf> {
        None
    }
    /// Every pane on the server, one row each (a session adopted in place is a pane that need
    /// not be its session's first).
    async fn list_panes(&self) -> Result<Vec<MuxSession>, MuxError> {
        self.list_sessions().await
    }
    /// The same multiplexer on another server of the user (`None`: it cannot follow others).
    /// The server is used as it is: no option of it is changed and it is never started.
    fn on_server(&self, _socket: &Path) -> Option<std::sync::Arc<dyn Mux>> {
        None
    }
    /// Stops following this server at all: what clibot added to it goes (the monitor session,
    /// which would otherwise keep a server of the user's alive after its last session).
    async fn close(&self) {}
}

/// Which tmux server.
#[derive(Debug, Clone, PartialEq)]
pub enum TmuxSocket {
    /// `-S path`
    Path(PathBuf),
    /// `-L name`
    Name(String),
}

/// The real tmux.
#[derive(Debug, Clone)]
pub struct Tmux {
    binary: String,
    socket: TmuxSocket,
    config_file: Option<String>,
    /// tmux 3.3a can crash when a session is created or killed while a control client is
    /// still attaching (it notifies the half-attached client). Creating, killing and attaching
    /// take turns on this lock; an attach holds it until tmux confirms the client is in.
    structure: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// Where the one control client sends each pane's output (see [`monitor`]).
    routes: std::sync::Arc<std::sync::Mutex<monitor::Routes>>,
}

/// Field separator in `-F` formats; session names and paths never contain it in practice, and a
/// row that does not split cleanly is skipped rather than misread.
const SEP: char = '\t';

impl Tmux {
    pub fn new(binary: &Path, socket: TmuxSocket, config_file: Option<&Path>) -> Tmux {
        Tmux {
            structure: std::sync::Arc::new(tokio::sync::Mutex::new(())),
            routes: Default::default(),
            binary: binary.to_string_lossy().into_owned(),
            socket,
            config_file: config_file.map(|p| p.to_string_lossy().into_owned()),
        }
    }

    /// `list-panes -a` in clibot's format; a server with no session at all lists nothing.
    async fn listed_panes(&self) -> Result<String, MuxError> {
        let listed = self
            .query(vec![{
                let mut c = TmuxCommand::new();
                c.name("list-panes");
                c.push_flag("-a");
                c.push_option("-F", LIST_FORMAT);
                c
            }])
            .await;
        // tmux 3.3a answers `list-panes -a` on a server with no session with "no current
        // target", where `list-sessions` said nothing.
        match listed {
            Err(MuxError::Failed { stderr, .. }) if stderr.contains("no current target") => {
                Ok(String::new())
            }
            other => other,
        }
    }

    /// Drops the monitor's own rows and completes exit statuses tmux did not report.
    fn finish_rows(&self, rows: &mut Vec<MuxSession>) {
        rows.retain(|s| s.name != MONITOR);
        for s in rows
            .iter_mut()
            .filter(|s| s.dead && s.dead_status.is_none() && s.pid > 0)
        {
            s.dead_status = crate::procs::zombie_exit_status(s.pid);
        }
    }

    /// A tmux client of this server, before its command.
    fn client(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.binary);
        // A daemon started from inside tmux must not talk to that tmux.
        // -u: tmux otherwise assumes a non-UTF-8 client when the daemon has no UTF-8 locale
        // (as under systemd), and turns tabs and every non-ASCII character into `_`.
        cmd.env_remove("TMUX").arg("-u").args(self.server_args());
        if let Some(f) = &self.config_file {
            cmd.arg("-f").arg(f);
        }
        cmd
    }

    /// Runs `commands` (joined with `;`) in one tmux client; `stdin` is fed to it.
    /// Loads `text` into `buffer` from stdin (never an argument) and pastes it into `target`,
    /// deleting the buffer; `bracketed`: with bracket codes when the program asked for them.
    async fn paste_from_stdin(
        &self,
        target: &str,
        buffer: &str,
        text: &str,
        bracketed: bool,
    ) -> Result<(), MuxError> {
        self.load_and_paste(target, buffer, text, bracketed, false)
            .await
    }

    /// [`Tmux::paste_from_stdin`]; `raw`: line feeds go as they are (as `send-keys -l` types
    /// them), not as carriage returns.
    async fn load_and_paste(
        &self,
        target: &str,
        buffer: &str,
        text: &str,
        bracketed: bool,
        raw: bool,
    ) -> Result<(), MuxError> {
        let load = LoadBuffer::new().buffer_name(buffer).path("-").build();
        let mut paste = PasteBuffer::new().delete();
        if bracketed {
            paste = paste.bracket_codes();
        }
        if raw {
            paste = paste.no_replacement();
        }
        let paste = paste.buffer_name(buffer).target_pane(target).build();
        self.run(vec![load, paste], Some(text.as_bytes()))
            .await
            .map(|_| ())
    }

    async fn run(
        &self,
        commands: Vec<TmuxCommand<'_>>,
        stdin: Option<&[u8]>,
    ) -> Result<String, MuxError> {
        self.run_on(self.client(), commands, stdin).await
    }

    /// [`Tmux::run`] on a client command prepared by the caller (e.g. with `-N`).
    async fn run_on(
        &self,
        mut cmd: tokio::process::Command,
        commands: Vec<TmuxCommand<'_>>,
        stdin: Option<&[u8]>,
    ) -> Result<String, MuxError> {
        let mut label = String::new();
        for (i, c) in commands.iter().enumerate() {
            if i > 0 {
                cmd.arg(";");
                label.push_str(" ; ");
            }
            let v = c.to_vec();
            if let Some(first) = v.first() {
                label.push_str(first);
            }
            cmd.args(v.iter().map(|a| a.as_ref()));
        }
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|source| MuxError::Spawn {
            binary: self.binary.clone(),
            source,
        })?;
        if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // A write error shows up as tmux's own failure below.
            let _ = pipe.write_all(data).await;
            drop(pipe);
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|source| MuxError::Spawn {
                binary: self.binary.clone(),
                source,
            })?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(classify(&label, stderr, &self.socket))
    }
}

fn classify(command: &str, stderr: String, socket: &TmuxSocket) -> MuxError {
    let server = match socket {
        TmuxSocket::Path(p) => p.display().to_string(),
        TmuxSocket::Name(n) => format!("-L {n}"),
    };
    if stderr.contains("no server running") || stderr.contains("error connecting to") {
        MuxError::NoServer(server)
    } else if let Some(name) = stderr.strip_prefix("duplicate session: ") {
        MuxError::DuplicateSession(name.to_string())
    } else if stderr.contains("can't find") || stderr.contains("session not found") {
        MuxError::NoSuchTarget(stderr)
    } else {
        MuxError::Failed {
            command: command.to_string(),
            stderr,
        }
    }
}

/// tmux ends a command at an argument that ends in `;` (and turns a trailing `\;` into `;`).
/// Escaping the final `;` makes any string reach tmux unchanged.
pub fn escape_arg(s: &str) -> Cow<'_, str> {
    match s.strip_suffix(';') {
        Some(head) => Cow::Owned(format!("{head}\\;")),
        None => Cow::Borrowed(s),
    }
}

/// Options such as `new-session -c` are format-expanded by tmux: `#(cmd)` would run a shell
/// command. `##` is a literal `#`.
pub fn escape_format(s: &str) -> String {
    s.replace('#', "##")
}

/// `show-environment` output: `NAME=value` lines; `-NAME` (removed) lines are skipped.
fn parse_environment(out: &str) -> std::collections::BTreeMap<String, String> {
    out.lines()
        .filter(|l| !l.starts_with('-'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Sets clibot's options on `target`, or, with `None`, on the session the same tmux call has
/// just created (tmux's `-t` has no exact-match form for session names here).
fn meta_commands<'a>(target: Option<&'a str>, meta: &'a SessionMeta) -> Vec<TmuxCommand<'a>> {
    meta.pairs()
        .into_iter()
        .map(|(k, v)| {
            let mut o = SetOption::new().quiet();
            if let Some(t) = target {
                o = o.target_pane(t);
            }
            o.option(k).value(escape_arg(v)).build()
        })
        .collect()
}

fn send_key_commands<'a>(target: &'a str, keys: &'a [Key]) -> Vec<TmuxCommand<'a>> {
    keys.iter()
        .map(|k| match k {
            Key::Named(n) => SendKeys::new().target_pane(target).key(n.as_str()).build(),
            Key::Char(c) => SendKeys::new()
                .disable_lookup()
                .target_pane(target)
                .key("--")
                .key(escape_arg(&c.to_string()).into_owned())
                .build(),
        })
        .collect()
}

#[async_trait]
impl Mux for Tmux {
    async fn ensure_server(&self, history_limit: u32) -> Result<(), MuxError> {
        // exit-empty off: the server outlives its last session, so a later spawn never has to
        // start a new server (which would then belong to the daemon's cgroup).
        // remain-on-exit on: an exited CLI stays visible, with its exit status.
        let mut start = TmuxCommand::new();
        start.name("start-server");
        let history = history_limit.to_string();
        self.run(
            vec![
                start,
                SetOption::new()
                    .server()
                    .option("exit-empty")
                    .value("off")
                    .build(),
                SetOption::new()
                    .global()
                    .option("remain-on-exit")
                    .value("on")
                    .build(),
                SetOption::new()
                    .global()
                    .option("history-limit")
                    .value(history.as_str())
                    .build(),
            ],
            None,
        )
        .await
        .map(|_| ())
    }

    async fn version(&self) -> Result<String, MuxError> {
        let out = tokio::process::Command::new(&self.binary)
            .arg("-V")
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|source| MuxError::Spawn {
                binary: self.binary.clone(),
                source,
            })?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    async fn new_session(&self, spec: &NewSession<'_>) -> Result<MuxSession, MuxError> {
        let _turn = self.structure.lock().await;
        let mut new = TmuxCommand::new();
        new.name("new-session");
        new.push_flag("-d");
        new.push_flag("-P");
        new.push_option("-F", "#{session_id}\t#{pane_id}\t#{pane_pid}\t#{pane_dead}");
        new.push_option("-s", spec.name);
        new.push_option(
            "-c",
            escape_arg(&escape_format(&spec.dir.to_string_lossy())).into_owned(),
        );
        new.push_option("-x", spec.width.to_string());
        new.push_option("-y", spec.height.to_string());
        for (k, v) in spec.env {
            new.push_option("-e", escape_arg(&format!("{k}={v}")).into_owned());
        }
        new.push_param("--");
        // With exactly one argument tmux would hand the command to `sh -c`; `env --` keeps it
        // an argv that is executed directly.
        if spec.argv.len() == 1 {
            new.push_param("env");
            new.push_param("--");
        }
        for a in spec.argv {
            new.push_param(escape_arg(a).into_owned());
        }
        // The options are set in the same client call: nothing can observe the session
        // without them.
        let mut cmds = vec![new];
        cmds.extend(meta_commands(None, spec.meta));
        if let Some(pipe) = spec.early_pipe {
            // In the same call as new-session: tmux reads the pane's output only once this
            // command list is done, so the pipe sees it from its first byte.
            let mut p = TmuxCommand::new();
            p.name("pipe-pane");
            p.push_param(escape_arg(&escape_format(pipe)).into_owned());
            cmds.push(p);
        }
        let out = self.run(cmds, None).await?;
        let f: Vec<&str> = out.trim_end().split(SEP).collect();
        match f.as_slice() {
            [id, pane, pid, dead] if id.starts_with('$') => Ok(MuxSession {
                id: id.to_string(),
                name: spec.name.to_string(),
                pane: pane.to_string(),
                pid: pid.parse().unwrap_or(0),
                dead: *dead == "1",
                dead_status: None,
                path: spec.dir.display().to_string(),
                meta: spec.meta.clone(),
            }),
            _ => Err(MuxError::Failed {
                command: "new-session".into(),
                stderr: format!("unexpected output {out:?}"),
            }),
        }
    }

    async fn list_sessions(&self) -> Result<Vec<MuxSession>, MuxError> {
        let mut sessions = parse_sessions(&self.listed_panes().await?);
        self.finish_rows(&mut sessions);
        Ok(sessions)
    }

    async fn list_panes(&self) -> Result<Vec<MuxSession>, MuxError> {
        let mut panes = parse_panes_rows(&self.listed_panes().await?);
        self.finish_rows(&mut panes);
        Ok(panes)
    }

    fn on_server(&self, socket: &Path) -> Option<std::sync::Arc<dyn Mux>> {
        Some(std::sync::Arc::new(Tmux::new(
            Path::new(&self.binary),
            TmuxSocket::Path(socket.to_path_buf()),
            None,
        )))
    }

    async fn close(&self) {
        self.monitor_close().await;
    }

    async fn set_meta(&self, target: &str, meta: Option<&SessionMeta>) -> Result<(), MuxError> {
        let cmds = match meta {
            Some(m) => meta_commands(Some(target), m),
            None => SessionMeta::default()
                .pairs()
                .into_iter()
                .map(|(k, _)| {
                    SetOption::new()
                        .quiet()
                        .unset()
                        .target_pane(target)
                        .option(k)
                        .build()
                })
                .collect(),
        };
        self.run(cmds, None).await.map(|_| ())
    }

    /// Typed text never stands on a command line (`/proc/PID/cmdline` is readable by every
    /// local user, and an API key pasted from a phone is text): it is loaded into a buffer of
    /// its own from the client's standard input and pasted raw (no bracket codes, line feeds
    /// as they are), which puts the same bytes into the pane as `send-keys -l` would.
    async fn send_text(&self, target: &str, text: &str) -> Result<(), MuxError> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        if text.is_empty() {
            return Ok(());
        }
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let buffer = format!("clibot-text-{}-{n}", std::process::id());
        self.load_and_paste(target, &buffer, text, false, true)
            .await
    }

    async fn desk_activity(&self, target: &str) -> Option<i64> {
        let mut c = TmuxCommand::new();
        c.name("list-clients");
        c.push_option("-t", target);
        c.push_option("-F", "#{client_control_mode} #{client_activity}");
        let out = self.query(vec![c]).await.ok()?;
        out.lines()
            .filter_map(|l| {
                let (control, at) = l.trim().split_once(' ')?;
                (control == "0").then(|| at.parse::<i64>().ok()).flatten()
            })
            .max()
    }

    async fn pane_tty(&self, target: &str) -> Result<String, MuxError> {
        let mut d = TmuxCommand::new();
        d.name("display-message");
        d.push_flag("-p");
        d.push_option("-t", target);
        d.push_param("#{pane_tty}");
        Ok(self.query(vec![d]).await?.trim().to_string())
    }

    async fn paste(&self, target: &str, buffer: &str, text: &str) -> Result<(), MuxError> {
        self.paste_from_stdin(target, buffer, text, true).await
    }

    async fn type_hidden(&self, target: &str, buffer: &str, text: &str) -> Result<(), MuxError> {
        self.paste_from_stdin(target, buffer, text, false).await
    }

    async fn send_keys(&self, target: &str, keys: &[Key]) -> Result<(), MuxError> {
        if keys.is_empty() {
            return Ok(());
        }
        // Named keys are checked against a fixed list and go over the control connection;
        // typed characters (a person's text, an answer's digit) go as text, from stdin: never
        // on a command line nor through tmux's command parser. Order is kept.
        let mut i = 0;
        while i < keys.len() {
            let run = keys[i..]
                .iter()
                .take_while(|k| matches!(k, Key::Named(_)) == matches!(keys[i], Key::Named(_)))
                .count();
            let part = &keys[i..i + run];
            if matches!(keys[i], Key::Named(_)) {
                self.query(send_key_commands(target, part)).await?;
            } else {
                let text: String = part
                    .iter()
                    .filter_map(|k| match k {
                        Key::Char(c) => Some(*c),
                        Key::Named(_) => None,
                    })
                    .collect();
                self.send_text(target, &text).await?;
            }
            i += run;
        }
        Ok(())
    }

    async fn capture(
        &self,
        target: &str,
        start: Option<i64>,
        escapes: bool,
    ) -> Result<String, MuxError> {
        let mut c = CapturePane::new().stdout().join().target_pane(target);
        if escapes {
            c = c.escape_sequences();
        }
        let start = start.map(|s| s.to_string());
        if let Some(s) = &start {
            c = c.start_line(s.as_str());
        }
        self.query(vec![c.build()]).await
    }

    async fn pipe_output(&self, target: &str, command: Option<&str>) -> Result<(), MuxError> {
        let mut p = TmuxCommand::new();
        p.name("pipe-pane");
        p.push_option("-t", target);
        if let Some(c) = command {
            p.push_param(escape_arg(&escape_format(c)).into_owned());
        }
        self.run(vec![p], None).await.map(drop)
    }

    async fn foreground(&self, target: &str) -> Result<String, MuxError> {
        let mut d = TmuxCommand::new();
        d.name("display-message");
        d.push_flag("-p");
        d.push_option("-t", target);
        d.push_param("#{pane_current_command}");
        Ok(self.query(vec![d]).await?.trim().to_string())
    }

    async fn environment(
        &self,
        target: Option<&str>,
    ) -> Result<std::collections::BTreeMap<String, String>, MuxError> {
        let mut c = TmuxCommand::new();
        c.name("show-environment");
        match target {
            Some(t) => c.push_option("-t", t),
            None => c.push_flag("-g"),
        };
        Ok(parse_environment(&self.query(vec![c]).await?))
    }

    async fn cursor(&self, target: &str) -> Result<(i64, i64), MuxError> {
        let mut d = TmuxCommand::new();
        d.name("display-message");
        d.push_flag("-p");
        d.push_option("-t", target);
        d.push_param("#{history_size} #{cursor_y}");
        let out = self.query(vec![d]).await?;
        let mut it = out
            .split_whitespace()
            .map(|n| n.parse::<i64>().unwrap_or(0));
        Ok((it.next().unwrap_or(0), it.next().unwrap_or(0)))
    }

    async fn watch(
        &self,
        target: &str,
    ) -> Result<tokio::sync::mpsc::Receiver<WatchEvent>, MuxError> {
        self.monitor_watch(target).await
    }

    async fn unwatch(&self, target: &str) -> Result<(), MuxError> {
        self.monitor_unwatch(target).await
    }

    async fn kill_session(&self, target: &str) -> Result<(), MuxError> {
        let _turn = self.structure.lock().await;
        let windows = self.known_windows(target);
        self.query(vec![KillSession::new().target_session(target).build()])
            .await?;
        // Its windows are also linked into the monitor session, which keeps them (and the
        // CLI) alive: they go now.
        self.kill_windows(&windows).await;
        Ok(())
    }

    fn attach_command(&self, target: &str) -> Vec<String> {
        let mut v = vec![self.binary.clone()];
        v.extend(self.server_args());
        v.extend([
            "attach-session".to_string(),
            "-t".to_string(),
            target.to_string(),
        ]);
        v
    }

    async fn set_private_env(&self, target: &str, key: &str, value: &str) -> Result<(), MuxError> {
        let mut c = TmuxCommand::new();
        c.name("set-environment");
        c.push_option("-t", target);
        c.push_param(key);
        c.push_param(value);
        self.query_private(vec![c]).await.map(|_| ())
    }

    fn server_socket(&self) -> Option<PathBuf> {
        Some(match &self.socket {
            TmuxSocket::Path(p) => p.clone(),
            TmuxSocket::Name(n) => {
                let dir = std::env::var_os("TMUX_TMPDIR")
                    .filter(|d| !d.is_empty())
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("/tmp"));
                dir.join(format!("tmux-{}", rustix::process::getuid().as_raw()))
                    .join(n)
            }
        })
    }

    fn server_args(&self) -> Vec<String> {
        match &self.socket {
            TmuxSocket::Path(p) => vec!["-S".into(), p.to_string_lossy().into_owned()],
            TmuxSocket::Name(n) => vec!["-L".into(), n.clone()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_semicolon_is_escaped() {
        assert_eq!(escape_arg("a;"), "a\\;");
        assert_eq!(escape_arg("a\\;"), "a\\\\;");
        assert_eq!(escape_arg(";"), "\\;");
        assert_eq!(escape_arg("a;b"), "a;b");
    }

    #[test]
    fn formats_are_escaped() {
        assert_eq!(escape_format("/tmp/#(touch x)"), "/tmp/##(touch x)");
    }

    #[test]
    fn environment_lines() {
        let env = parse_environment("PATH=/usr/bin:/bin\n-DISPLAY\nA=b=c\nEMPTY=\n");
        assert_eq!(env.get("PATH").map(String::as_str), Some("/usr/bin:/bin"));
        assert_eq!(env.get("A").map(String::as_str), Some("b=c"));
        assert_eq!(env.get("EMPTY").map(String::as_str), Some(""));
        assert!(!env.contains_key("DISPLAY") && !env.contains_key("-DISPLAY"));
    }

    #[test]
    fn a_tab_or_line_break_in_a_path_keeps_the_row() {
        let out = "$1\tapi\t%1\t42\t0\t\tid1\tapi\tshell\t/tmp\t5\t/tmp/a\tb\n$2\tweb\t%2\t43\t0\t\tid2\tweb\tshell\t/tmp\t6\t/tmp/line\nbreak\n";
        let s = parse_sessions(out);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].path, "/tmp/a\tb");
        assert_eq!(s[1].path, "/tmp/line\nbreak");
        assert_eq!(s[1].name, "web");
    }

    #[test]
    fn list_rows() {
        let out = "$1\tapi\t%4\t42\t0\t\tid1\tapi\tshell\t/tmp\t5\t/tmp\n$2\tbad row\n$3\tx\t%9\t0\t1\t3\t\t\t\t\t\t/\n$1\tapi\t%2\t41\t0\t\tid1\tapi\tshell\t/tmp\t5\t/tmp\n";
        let s = parse_sessions(out);
        assert_eq!(s.len(), 2);
        // A second window's pane (%4) does not stand for the session: its first pane does.
        assert_eq!((s[0].pane.as_str(), s[0].pid), ("%2", 41));
        assert_eq!(s[0].meta.cli, "shell");
        assert!(!s[0].dead);
        assert!(s[1].dead);
        assert_eq!(s[1].dead_status, Some(3));
    }

    #[test]
    fn command_vectors() {
        let keys = [Key::Named("Enter".into()), Key::Char(';')];
        let cmds = send_key_commands("$1", &keys);
        let v: Vec<Vec<String>> = cmds
            .iter()
            .map(|c| c.to_vec().iter().map(|a| a.to_string()).collect())
            .collect();
        assert_eq!(v[0], ["send-keys", "-t", "$1", "Enter"]);
        assert_eq!(v[1], ["send-keys", "-l", "-t", "$1", "--", "\\;"]);
    }
}
