//! Taking over sessions: a tmux session started by hand, and at daemon start every session of the registry (or found in tmux) that still runs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tracing::{info, warn};

use crate::core::*;
use crate::error::CoreError;
use crate::ids::new_id;
use crate::model::{SessionRecord, State};
use crate::names::is_valid_name;
use crate::store::events::EventKind;
use crate::store::{RegistryFile, now_ms};
use crate::tmux::{MuxError, SessionMeta};

impl Daemon {
    /// Starts managing an existing tmux session on clibot's tmux server.
    pub async fn adopt(
        &self,
        tmux_session: &str,
        cli: &str,
        name: &str,
    ) -> Result<SessionRecord, CoreError> {
        let cli = self.cli(cli)?.clone();
        let live = match self.mux().list_sessions().await {
            Ok(l) => l,
            Err(MuxError::NoServer(_)) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let list_cmd = {
            let mut v = vec!["tmux".to_string()];
            v.extend(self.mux().server_args());
            v.push("list-sessions".into());
            v.join(" ")
        };
        let s = live
            .iter()
            .find(|s| s.name == tmux_session || s.id == tmux_session)
            .ok_or_else(|| CoreError::NoSuchTmuxSession(tmux_session.to_string(), list_cmd))?;
        // A session clibot started once (and released) still carries its id and hook token:
        // keeping them keeps its CLI's hooks working.
        let env = self.session_env(&s.id).await;
        let var = |k: &str| env.get(k).cloned().unwrap_or_default();
        let name = if name.is_empty() {
            s.name.clone()
        } else {
            name.to_string()
        };
        if !is_valid_name(&name) {
            return Err(CoreError::BadSpawn(format!(
                "{name:?} is not a valid session name (1 to 64 of A-Z a-z 0-9 _ -): pass --name"
            )));
        }
        if crate::names::is_reserved(&name) {
            return Err(CoreError::ReservedName(name));
        }
        // A transaction: the tmux session is checked unmanaged and the name free among all the
        // sessions, and the name taken, as one step.
        let rec = self.sessions().transaction(|sessions| {
            if let Some(e) = sessions
                .values()
                .find(|e| e.rec.tmux_id == s.id || (!s.meta.id.is_empty() && e.rec.id == s.meta.id))
            {
                return Err(CoreError::AlreadyManaged(
                    tmux_session.to_string(),
                    e.rec.name.clone(),
                ));
            }
            if sessions.contains_key(&name) {
                return Err(CoreError::AlreadyExists(name.clone()));
            }
            let now = now_ms();
            let known_id = var("CLIBOT_SESSION_ID");
            let id = if !known_id.is_empty()
                && !var("CLIBOT_HOOK_TOKEN").is_empty()
                && !sessions.values().any(|e| e.rec.id == known_id)
            {
                known_id
            } else {
                new_id()
            };
            let mut rec = SessionRecord {
                id,
                name: name.clone(),
                cli: cli.name.clone(),
                dir: PathBuf::from(&s.path),
                state: if s.dead { State::Exited } else { State::Idle },
                created_at_ms: now,
                last_activity_ms: now,
                tmux_session: s.name.clone(),
                tmux_id: s.id.clone(),
                pane: s.pane.clone(),
                pid: s.pid,
                exit_status: s.dead_status,
                adopted: true,
                args: Vec::new(),
                ..Default::default()
            };
            if rec.id == var("CLIBOT_SESSION_ID") {
                self.recover_links(&mut rec, &var);
            } else if self
                .kind_of(&rec.cli)
                .is_some_and(|(a, _)| a.completes_by_hook())
            {
                warn!(
                    session = %name,
                    "adopted without clibot's hooks: its turns are read off the screen"
                );
            }
            sessions.insert(name.clone(), Entry::new(rec.clone()));
            Ok(rec)
        })?;
        let meta = SessionMeta {
            id: rec.id.clone(),
            name: rec.name.clone(),
            cli: rec.cli.clone(),
            dir: rec.dir.display().to_string(),
            created_ms: rec.created_at_ms.to_string(),
        };
        if let Err(e) = self.mux().set_meta(&rec.tmux_id, Some(&meta)).await {
            self.sessions().remove(&name);
            return Err(e.into());
        }
        self.event(
            &name,
            &rec.id,
            EventKind::Adopted {
                cli: rec.cli.clone(),
                tmux_session: rec.tmux_session.clone(),
            },
        );
        self.persist();
        info!(session = %name, tmux = %rec.tmux_session, "adopted");
        self.start_watcher(&name);
        Ok(rec)
    }

    /// Matches the registry against tmux: live sessions are managed again (same ids, names and
    /// state), vanished ones are marked exited, and sessions tmux knows as clibot's that the
    /// registry lost (a corrupt file) are recovered from their tmux options.
    pub(crate) async fn reconcile_at_start(&self, mut registry: RegistryFile) -> u32 {
        // Queued input lives in files of its own; a registry written before that still holds
        // it, and hands it over once.
        for rec in registry.sessions.iter_mut() {
            let crate::store::queue_file::Loaded {
                mut queue,
                typing_from,
                entering,
                warnings,
            } = self.queues().load(&rec.id);
            for w in warnings {
                self.warn(w);
            }
            // The last daemon began typing the head: submitted (the log says so), it leaves
            // the queue now; otherwise it is typed again, a half-typed line completed.
            if let Some(from) = typing_from {
                let after = self.events().read_after(from, usize::MAX).events;
                let submitted = crate::store::catch_up::submitted_since(&after, &rec.id, from);
                rec.queue_entering = entering && !submitted;
                if submitted {
                    info!(session = %rec.name, "the queued message being typed when the last daemon stopped was submitted: not typed again");
                    queue.remove(0);
                    if let Err(e) = self.queues().pop(&rec.id, &queue) {
                        self.warn(format!(
                            "session {}: cannot record that a queued message was typed: {e}",
                            rec.name
                        ));
                    }
                }
            }
            if queue.is_empty() && !rec.queue.is_empty() {
                if let Err(e) = self.queues().rewrite(&rec.id, &rec.queue) {
                    self.warn(format!(
                        "session {}: cannot move its queued input to its own file: {e}",
                        rec.name
                    ));
                }
            } else {
                rec.queue = queue;
            }
        }
        // Sessions adopted where they run, on other tmux servers of the user's, are matched
        // there.
        let (others, own): (Vec<SessionRecord>, Vec<SessionRecord>) =
            std::mem::take(&mut registry.sessions)
                .into_iter()
                .partition(|r| !r.server.is_empty());
        registry.sessions = own;
        let in_place = self.readopt_in_place(others).await;
        let live = match self.mux().list_sessions().await {
            Ok(l) => l,
            Err(MuxError::NoServer(_)) => Vec::new(),
            Err(e) => {
                self.warn(format!(
                    "cannot list tmux sessions at start: {e}; sessions are kept as they were"
                ));
                // A transaction: the registry fills the table as one step.
                self.sessions().transaction(|sessions| {
                    for rec in registry.sessions {
                        sessions.insert(rec.name.clone(), Entry::new(rec));
                    }
                });
                return in_place;
            }
        };
        // Sessions tmux knows as clibot's that the registry lost: what they need to be followed
        // (the hook token above all) is in their tmux environment.
        let mut lost_env = std::collections::HashMap::new();
        for s in &live {
            if !s.meta.id.is_empty() && !registry.sessions.iter().any(|r| r.id == s.meta.id) {
                lost_env.insert(s.id.clone(), self.session_env(&s.id).await);
            }
        }
        let mut readopted = in_place;
        let mut exited = Vec::new();
        // A transaction: the registry and what tmux runs are reconciled into the table as one
        // step (a session tmux knows is recovered only if no other holds its id or name).
        self.sessions().transaction(|sessions| {
            for mut rec in registry.sessions {
                match live.iter().find(|s| s.meta.id == rec.id) {
                    Some(s) => {
                        rec.tmux_id = s.id.clone();
                        rec.pane = s.pane.clone();
                        rec.tmux_session = s.name.clone();
                        rec.pid = s.pid;
                        if !rec.state.is_exited() {
                            readopted += 1;
                            if s.dead {
                                let mid_turn = matches!(rec.state, State::Working | State::Waiting);
                                exited.push((
                                    rec.name.clone(),
                                    s.dead_status,
                                    "the CLI exited while the daemon was down",
                                    Some(mid_turn),
                                ));
                            }
                        }
                    }
                    None if !rec.state.is_exited() => {
                        exited.push((
                            rec.name.clone(),
                            None,
                            "its tmux session is gone (was the tmux server restarted?)",
                            None,
                        ));
                    }
                    None => {}
                }
                if let Some(t) = self.events().last_activity(&rec.name) {
                    rec.last_activity_ms = rec.last_activity_ms.max(t);
                }
                sessions.insert(rec.name.clone(), Entry::new(rec));
            }
            for s in &live {
                let m = &s.meta;
                if m.id.is_empty() || sessions.values().any(|e| e.rec.id == m.id) {
                    continue;
                }
                if !is_valid_name(&m.name) || sessions.contains_key(&m.name) {
                    continue;
                }
                let env = lost_env.get(&s.id);
                let var = |k: &str| env.and_then(|e| e.get(k)).cloned().unwrap_or_default();
                let mut rec = SessionRecord {
                    id: m.id.clone(),
                    name: m.name.clone(),
                    cli: m.cli.clone(),
                    dir: PathBuf::from(if m.dir.is_empty() { &s.path } else { &m.dir }),
                    state: if s.dead { State::Exited } else { State::Idle },
                    created_at_ms: m.created_ms.parse().unwrap_or_else(|_| now_ms()),
                    last_activity_ms: now_ms(),
                    tmux_session: s.name.clone(),
                    tmux_id: s.id.clone(),
                    pane: s.pane.clone(),
                    pid: s.pid,
                    exit_status: s.dead_status,
                    adopted: false,
                    args: Vec::new(),
                    ..Default::default()
                };
                self.recover_links(&mut rec, &var);
                readopted += 1;
                self.warn(format!(
                    "session {} was missing from the registry and was recovered from tmux",
                    rec.name
                ));
                sessions.insert(rec.name.clone(), Entry::new(rec));
            }
        });
        // A CLI that died while no daemon watched gets its restart policy as if it had been
        // seen dying (its pane is still there to start it in again).
        for (name, status, reason, crashed) in exited {
            if self.mark_exited(&name, status, reason)
                && let Some(mid_turn) = crashed
            {
                self.consider_crash_restart(&name, status, mid_turn);
            }
        }
        // Jailed sessions' hooks reach the daemon through sockets of their own: serve them
        // again.
        let jailed: Vec<(String, String)> = self.sessions().filter_map(|e| {
            (!e.rec.jail_home.is_empty() && !e.rec.state.is_exited())
                .then(|| (e.rec.name.clone(), e.rec.id.clone()))
        });
        for (name, id) in jailed {
            if let Err(e) = self.hook_socket(&id) {
                self.warn(format!(
                    "session {name}: its hooks cannot reach clibot: {e}"
                ));
            }
        }
        readopted
    }

    /// A tmux session's own environment (empty when it cannot be read).
    async fn session_env(&self, tmux_id: &str) -> BTreeMap<String, String> {
        self.mux()
            .environment(Some(tmux_id))
            .await
            .unwrap_or_default()
    }

    /// Fills in what links a session to its CLI — the hook token, the CLI's own session id,
    /// its API port — from the variables clibot set in the session's tmux environment. Without
    /// a token the CLI's hooks are refused, so its turns are read off the screen; that is said.
    pub(crate) fn recover_links(&self, rec: &mut SessionRecord, var: &dyn Fn(&str) -> String) {
        rec.hook_token = var("CLIBOT_HOOK_TOKEN");
        rec.cli_session_id = var("CLIBOT_CLI_SESSION_ID");
        rec.api_port = var("CLIBOT_API_PORT").parse().unwrap_or(0);
        let hooked = self
            .kind_of(&rec.cli)
            .is_some_and(|(a, _)| a.completes_by_hook());
        if hooked && rec.hook_token.is_empty() {
            self.warn(format!(
                "session {}: no hook token in its tmux environment, so its CLI's hooks cannot reach clibot; its turns are read off the screen (restart it with `clibotctl restart {}` to wire them again)",
                rec.name, rec.name
            ));
        }
    }
}
