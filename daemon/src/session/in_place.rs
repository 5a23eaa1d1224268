//! Sessions adopted where they run: a CLI in a pane of another tmux server of the user's (one
//! started by hand before leaving the desk). clibot follows and drives that pane through a
//! multiplexer of its own for that server — one control connection per server, made when
//! first needed — and never moves, restarts or reconfigures it: no server option is set, no
//! option is written on the user's session, and when clibot follows nothing there any more,
//! what it added (its monitor session) goes, so the server ends with the user's last session
//! as it would have.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::core::*;
use crate::error::CoreError;
use crate::ids::new_id;
use crate::model::{SessionRecord, State};
use crate::names::is_valid_name;
use crate::store::events::EventKind;
use crate::store::now_ms;
use crate::tmux::{Mux, MuxError, MuxSession};

/// What a hand adoption in place names.
pub struct InPlace<'a> {
    /// The other server's socket path.
    pub server: &'a str,
    /// The pane (`%7`).
    pub pane: &'a str,
    /// The configured CLI; empty: the one the process tree shows in the pane.
    pub cli: &'a str,
    pub name: &'a str,
}

impl Daemon {
    /// The multiplexer of tmux server `server` (a socket path; empty: clibot's own).
    pub(crate) fn mux_on(&self, server: &str) -> Result<Arc<dyn Mux>, CoreError> {
        if server.is_empty() {
            return Ok(self.mux().clone());
        }
        let mut servers = self.servers();
        if let Some(m) = servers.get(server) {
            return Ok(m.clone());
        }
        let mux = self.mux().on_server(Path::new(server)).ok_or_else(|| {
            CoreError::CannotAdoptHere(
                "this daemon cannot follow panes on other tmux servers".into(),
            )
        })?;
        servers.insert(server.to_string(), mux.clone());
        Ok(mux)
    }

    /// The command that attaches a terminal to the session.
    pub fn attach_command(&self, rec: &SessionRecord) -> Vec<String> {
        if rec.unmanaged {
            // In a terminal clibot does not know: nothing to attach to.
            return Vec::new();
        }
        self.mux_of(&rec.name).attach_command(&rec.tmux_id)
    }

    /// The multiplexer session `name` runs on. A session on another server whose multiplexer
    /// cannot be made is never sent to clibot's own server (its pane ids name other panes
    /// there): such a session cannot exist, as adoption refuses it first.
    pub(crate) fn mux_of(&self, name: &str) -> Arc<dyn Mux> {
        let server = self
            .sessions()
            .get(name, |e| e.rec.server.clone())
            .unwrap_or_default();
        self.mux_on(&server).unwrap_or_else(|_| self.mux().clone())
    }

    /// Starts managing a CLI that discovery found in a tmux pane (`found`: its id, CLI-PID),
    /// where it runs; named `name`, or its id.
    pub async fn adopt_found(&self, found: &str, name: &str) -> Result<SessionRecord, CoreError> {
        let all = self.discover().await;
        let f = all.iter().find(|f| f.id == found).ok_or_else(|| {
            CoreError::PaneGone(format!(
                "no CLI {found:?} runs outside clibot now (discover again: its list is a snapshot)"
            ))
        })?;
        let crate::discover::Place::Tmux { server, pane } = &f.place else {
            return Err(CoreError::CannotAdoptHere(format!(
                "{found} does not run in tmux, so it cannot be driven where it runs: resume its conversation in a new session instead (`clibotctl resume {found}`)"
            )));
        };
        let server = server.display().to_string();
        self.adopt_in_place(InPlace {
            server: &server,
            pane,
            cli: &f.cli,
            name: if name.is_empty() { found } else { name },
        })
        .await
    }

    /// Starts managing the CLI in pane `pane` of the tmux server at `server` (empty: clibot's
    /// own), where it runs.
    pub async fn adopt_in_place(&self, req: InPlace<'_>) -> Result<SessionRecord, CoreError> {
        let own = self
            .mux()
            .server_socket()
            .and_then(|p| std::fs::canonicalize(p).ok());
        let server = match (req.server.is_empty(), &own) {
            (true, Some(own)) => own.clone(),
            _ => checked_socket(req.server)?,
        };
        if !req.pane.starts_with('%') || req.pane.len() < 2 {
            return Err(CoreError::AdoptRequest(format!(
                "{:?} is not a tmux pane id: pass --pane %N (from `clibotctl discover`, or `tmux -S {} list-panes -a -F '#{{pane_id}} #{{pane_current_command}}'`)",
                req.pane,
                server.display()
            )));
        }
        if !is_valid_name(req.name) {
            return Err(CoreError::AdoptRequest(format!(
                "{:?} is not a valid session name (1 to 64 of A-Z a-z 0-9 _ -)",
                req.name
            )));
        }
        if crate::names::is_reserved(req.name) {
            return Err(CoreError::ReservedName(req.name.to_string()));
        }
        let server_s = server.display().to_string();
        let mux = if own.as_deref() == Some(server.as_path()) {
            self.mux().clone()
        } else {
            self.mux_on(&server_s)?
        };
        let panes = match mux.list_panes().await {
            Ok(p) => p,
            Err(MuxError::NoServer(_)) => {
                return Err(CoreError::PaneGone(format!(
                    "no tmux server answers at {server_s}: is it still running?"
                )));
            }
            Err(e) => return Err(e.into()),
        };
        let row = panes
            .into_iter()
            .find(|p| p.pane == req.pane)
            .ok_or_else(|| {
                CoreError::PaneGone(format!(
                    "no pane {} on the tmux server at {server_s} (`clibotctl discover` lists the CLIs running in panes)",
                    req.pane
                ))
            })?;
        if row.dead {
            return Err(CoreError::CannotAdoptHere(format!(
                "the program in pane {} has exited",
                req.pane
            )));
        }
        if own.as_deref() != Some(server.as_path())
            && let Some(holder) = self.sessions().find_map(|e| {
                (!e.rec.state.is_exited() && e.rec.server == server_s && e.rec.pane == row.pane)
                    .then(|| e.rec.name.clone())
            })
        {
            return Err(CoreError::AlreadyManaged(req.pane.to_string(), holder));
        }
        let found = self.found_in_pane(&server_s, &row).await;
        let cli = match (&found, req.cli) {
            (_, cli) if !cli.is_empty() => cli.to_string(),
            (Some(f), _) if self.cli(&f.cli).is_ok() => f.cli.clone(),
            (Some(f), _) => {
                return Err(CoreError::AdoptRequest(format!(
                    "pane {} runs {}, which is not a configured CLI: configure [cli.{}] or pass --cli",
                    row.pane, f.cli, f.cli
                )));
            }
            (None, _) => {
                return Err(CoreError::AdoptRequest(format!(
                    "no AI CLI found in pane {}: pass --cli NAME to say which configured CLI it runs",
                    row.pane
                )));
            }
        };
        // Its conversation, where discovery could tell: the reply of a turn whose end no hook
        // reports is read from it, and a later resume continues it.
        let conversation = found
            .filter(|f| f.cli == cli)
            .and_then(|f| f.conversation_id)
            .unwrap_or_default();
        if own.as_deref() == Some(server.as_path()) {
            // On clibot's own server: the usual adoption, of the pane's session.
            return self.adopt(&row.id, &cli, req.name).await;
        }
        let cli = self.cli(&cli)?.clone();
        let server_field = server_s.clone();
        // A transaction: the pane is checked unmanaged and the name free among all the
        // sessions, and the name taken, as one step.
        let rec = self.sessions().transaction(|sessions| {
            if let Some(e) = sessions.values().find(|e| {
                !e.rec.state.is_exited() && e.rec.server == server_field && e.rec.pane == row.pane
            }) {
                return Err(CoreError::AlreadyManaged(
                    req.pane.to_string(),
                    e.rec.name.clone(),
                ));
            }
            if sessions.contains_key(req.name) {
                return Err(CoreError::AlreadyExists(req.name.to_string()));
            }
            let now = now_ms();
            let rec = SessionRecord {
                id: new_id(),
                name: req.name.to_string(),
                cli: cli.name.clone(),
                dir: PathBuf::from(&row.path),
                state: State::Idle,
                created_at_ms: now,
                last_activity_ms: now,
                tmux_session: row.name.clone(),
                tmux_id: row.id.clone(),
                pane: row.pane.clone(),
                server: server_field,
                pid: row.pid,
                adopted: true,
                cli_session_id: conversation,
                ..Default::default()
            };
            sessions.insert(rec.name.clone(), Entry::new(rec.clone()));
            Ok(rec)
        })?;
        self.event(
            &rec.name,
            &rec.id,
            EventKind::Adopted {
                cli: rec.cli.clone(),
                tmux_session: rec.tmux_session.clone(),
            },
        );
        self.persist();
        info!(session = %rec.name, server = %server_s, pane = %rec.pane, "adopted in place");
        self.start_watcher(&rec.name);
        Ok(rec)
    }

    /// What discovery sees in pane `row` of `server`: the CLI the process tree shows there,
    /// and its conversation (a best guess, from the CLI's own records).
    async fn found_in_pane(
        &self,
        server: &str,
        row: &MuxSession,
    ) -> Option<crate::discover::Found> {
        self.discover().await.into_iter().find(|f| match &f.place {
            crate::discover::Place::Tmux { server: s, pane } => {
                s.as_path() == Path::new(server) && *pane == row.pane
            }
            _ => false,
        })
    }

    /// Re-adopts, at daemon start, the sessions the registry has on other servers: each is
    /// followed again when its pane is still there with the same process; the rest exited.
    /// Returns how many run.
    pub(crate) async fn readopt_in_place(&self, recs: Vec<SessionRecord>) -> u32 {
        let mut readopted = 0;
        let mut exited = Vec::new();
        let mut listed: std::collections::HashMap<String, Option<Vec<MuxSession>>> =
            Default::default();
        for rec in recs {
            if !listed.contains_key(&rec.server) {
                let rows = match self.mux_on(&rec.server) {
                    Ok(m) => m.list_panes().await.ok(),
                    Err(_) => None,
                };
                listed.insert(rec.server.clone(), rows);
            }
            let rows = listed
                .get(&rec.server)
                .cloned()
                .flatten()
                .unwrap_or_default();
            let live = rows
                .iter()
                .find(|p| p.pane == rec.pane && p.id == rec.tmux_id && p.pid == rec.pid);
            if !rec.state.is_exited() {
                match live {
                    Some(p) if !p.dead => readopted += 1,
                    _ => exited.push(rec.name.clone()),
                }
            }
            self.sessions().insert(rec.name.clone(), Entry::new(rec));
        }
        for name in exited {
            self.mark_exited(&name, None, "its pane on the other tmux server is gone");
        }
        readopted
    }

    /// Stops following server `server` when no running session is on it any more.
    pub(crate) async fn close_server_if_unused(&self, server: &str) {
        if server.is_empty() {
            return;
        }
        let used = self
            .sessions()
            .any(|e| e.rec.server == server && !e.rec.state.is_exited());
        if used {
            return;
        }
        let mux = self.servers().remove(server);
        if let Some(m) = mux {
            m.close().await;
            info!(server, "no longer following this tmux server");
        }
    }

    /// Stops a session adopted in place: the CLI's quit keys (unless `force`), and after
    /// `timeout` the processes under the pane are ended. The pane, its shell and the user's
    /// tmux session stay: they were never clibot's.
    pub(crate) async fn stop_in_place(
        &self,
        rec: &SessionRecord,
        force: bool,
        timeout: Duration,
    ) -> StopOutcome {
        let mux = self.mux_of(&rec.name);
        let running = |mux: Arc<dyn Mux>, rec: SessionRecord| async move {
            let rows = mux.list_panes().await.unwrap_or_default();
            rows.into_iter()
                .find(|p| p.pane == rec.pane && p.pid == rec.pid && !p.dead)
                .map(|_| cli_below(rec.pid))
                .unwrap_or_default()
        };
        let mut left = running(mux.clone(), rec.clone()).await;
        if !force && !left.is_empty() {
            self.ask_to_quit(mux.as_ref(), rec).await;
            let deadline = Instant::now() + timeout;
            while Instant::now() < deadline && !left.is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
                left = running(mux.clone(), rec.clone()).await;
            }
        }
        let forced = !left.is_empty();
        if forced {
            let killed = crate::procs::kill_all(&left);
            warn!(session = %rec.name, killed, "the CLI did not quit; its processes were ended");
        }
        if let Err(e) = mux.unwatch(&rec.tmux_id).await {
            warn!(session = %rec.name, "cannot stop following the pane: {e}");
        }
        StopOutcome {
            forced,
            exit_status: None,
        }
    }
}

/// The processes of the CLI in a pane whose process is `pane_pid`: what runs below the pane's
/// shell, or the pane's own process when the CLI is what the pane runs.
fn cli_below(pane_pid: u32) -> Vec<u32> {
    let tree = crate::procs::tree(pane_pid);
    let below: Vec<u32> = tree.iter().copied().filter(|p| *p != pane_pid).collect();
    let shell = std::fs::read_to_string(format!("/proc/{pane_pid}/comm"))
        .map(|c| {
            matches!(
                c.trim(),
                "bash" | "zsh" | "sh" | "fish" | "dash" | "ksh" | "tcsh"
            )
        })
        .unwrap_or(false);
    if shell { below } else { tree }
}

/// `server` as an absolute, canonical path to a socket owned by this user.
fn checked_socket(server: &str) -> Result<PathBuf, CoreError> {
    let p = Path::new(server);
    if server.is_empty() || !p.is_absolute() {
        return Err(CoreError::AdoptRequest(format!(
            "--server needs the absolute path of a tmux socket (e.g. /tmp/tmux-{}/default), not {server:?}",
            rustix::process::getuid().as_raw()
        )));
    }
    let canon = std::fs::canonicalize(p)
        .map_err(|e| CoreError::PaneGone(format!("no tmux socket at {server}: {e}")))?;
    let meta = std::fs::metadata(&canon)
        .map_err(|e| CoreError::PaneGone(format!("no tmux socket at {server}: {e}")))?;
    if !meta.file_type().is_socket() {
        return Err(CoreError::AdoptRequest(format!(
            "{server} is not a socket: pass the tmux server's socket (`tmux display -p '#{{socket_path}}'` inside it)"
        )));
    }
    if meta.uid() != rustix::process::getuid().as_raw() {
        return Err(CoreError::OthersTmuxServer {
            server: server.to_string(),
        });
    }
    Ok(canon)
}
