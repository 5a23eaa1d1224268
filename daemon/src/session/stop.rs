//! Ending a session: gracefully (the CLI's stop keys, then a kill after the timeout), releasing one clibot should no longer follow, and recording an exit with its last words.

use std::time::{Duration, Instant};

use tracing::{Instrument, info, info_span, warn};

use crate::core::*;
use crate::error::CoreError;
use crate::keys::Key;
use crate::model::{SessionRecord, State};
use crate::store::events::EventKind;
use crate::tmux::{MuxError, MuxSession};

impl Daemon {
    /// Stops a session: the CLI's own quit keys first, then a kill after `timeout` (or at once
    /// when `force`). The session is then forgotten; its events stay in the log.
    pub async fn stop(
        &self,
        name: &str,
        force: bool,
        timeout: Option<Duration>,
    ) -> Result<StopOutcome, CoreError> {
        let rec = self.reserve(name)?;
        self.stop_watcher(name);
        let span = info_span!("session", session = %name);
        let outcome = self.stop_inner(&rec, force, timeout).instrument(span).await;
        match outcome {
            Ok(outcome) => {
                if !rec.state.is_exited() {
                    self.event(
                        name,
                        &rec.id,
                        EventKind::Exited {
                            status: outcome.exit_status,
                            reason: "stopped".into(),
                            output: String::new(),
                        },
                    );
                }
                if let Some(w) = &rec.worktree {
                    self.worktree_left(name, w).await;
                }
                self.event(
                    name,
                    &rec.id,
                    EventKind::Stopped {
                        forced: outcome.forced,
                    },
                );
                self.sessions().remove(name);
                self.close_server_if_unused(&rec.server).await;
                self.remove_session_files(&rec.id);
                self.persist();
                info!(session = name, forced = outcome.forced, "stopped");
                Ok(outcome)
            }
            Err(e) => {
                self.sessions().unreserve(name);
                self.start_watcher(name);
                Err(e)
            }
        }
    }

    /// The CLI's own quit: its stop keys, then its stop text. Failures are ignored: the
    /// session may already be gone, which the caller's wait sees.
    ///
    /// A dialog on screen is dismissed first (Escape, its "no"): the quit keys and text typed
    /// into it would answer it — `/exit` and Enter could take its first option. One that stays
    /// up gets nothing typed: the caller's wait ends and the session is ended instead.
    pub(crate) async fn ask_to_quit(&self, mux: &dyn crate::tmux::Mux, rec: &SessionRecord) {
        let Ok(cli) = self.cli(&rec.cli) else {
            return;
        };
        if self.dialog_on(mux, rec).await {
            let _ = mux
                .send_keys(rec.target(), &[Key::Named("Escape".into())])
                .await;
            let mut gone = false;
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                if !self.dialog_on(mux, rec).await {
                    gone = true;
                    break;
                }
            }
            if !gone {
                warn!(session = %rec.name, "a dialog stays on screen: nothing typed to quit");
                return;
            }
            info!(session = %rec.name, "the dialog on screen was dismissed before quitting");
        }
        let keys = cli
            .stop_keys
            .iter()
            .filter_map(|k| Key::parse(k).ok())
            .collect::<Vec<_>>();
        let _ = mux.send_keys(rec.target(), &keys).await;
        if let Some(text) = &cli.stop_text {
            tokio::time::sleep(Duration::from_millis(cli.submit_delay_ms)).await;
            let _ = mux.send_text(rec.target(), text).await;
            tokio::time::sleep(Duration::from_millis(cli.submit_delay_ms)).await;
            let _ = mux
                .send_keys(rec.target(), &[Key::Named("Enter".into())])
                .await;
        }
    }

    /// Whether `rec`'s pane shows a dialog (a prompt its pack reads, not a password prompt).
    async fn dialog_on(&self, mux: &dyn crate::tmux::Mux, rec: &SessionRecord) -> bool {
        self.dialog_on_screen(mux, rec.target(), &rec.cli)
            .await
            .is_some()
    }

    pub(crate) async fn stop_inner(
        &self,
        rec: &SessionRecord,
        force: bool,
        timeout: Option<Duration>,
    ) -> Result<StopOutcome, CoreError> {
        let mux = &self.mux();
        let timeout = timeout.unwrap_or(Duration::from_millis(
            self.settings().config.daemon.stop_timeout_ms,
        ));
        if rec.unmanaged {
            // Not clibot's to end: it is only forgotten (its next report brings it back).
            return Ok(StopOutcome {
                forced: false,
                exit_status: None,
            });
        }
        if !rec.server.is_empty() {
            return Ok(self
                .stop_in_place(rec, force || rec.state.is_exited(), timeout)
                .await);
        }
        let mut status = rec.exit_status;
        let mut ended = rec.state.is_exited();
        if !force && !ended {
            self.ask_to_quit(mux.as_ref(), rec).await;
            let deadline = Instant::now() + timeout;
            while Instant::now() < deadline {
                match self.find_tmux(rec).await {
                    Ok(Some(s)) if s.dead => {
                        status = match s.dead_status {
                            Some(st) => Some(st),
                            None => self.settled_exit_status(&rec.id, &rec.tmux_id).await,
                        };
                        ended = true;
                        break;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        ended = true;
                        break;
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // Everything the CLI started, collected before the pane goes away.
        let tree = match self.find_tmux(rec).await {
            Ok(Some(s)) if s.pid > 0 && !s.dead => crate::procs::tree(s.pid),
            _ => Vec::new(),
        };
        match mux.kill_session(&rec.tmux_id).await {
            Ok(()) | Err(MuxError::NoSuchTarget(_)) | Err(MuxError::NoServer(_)) => {}
            Err(e) => return Err(e.into()),
        }
        // Closing the pane sent SIGHUP; whatever ignored it is killed a moment later, without
        // making the caller wait: the CLI's process tree, and what its session kept after
        // it ended (a CLI that had crashed left its children to init).
        let leader = rec.pid;
        self.in_background(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let killed = crate::procs::kill_all(&tree)
                + crate::procs::kill_all(&crate::procs::left_in_session(leader));
            if killed > 0 {
                warn!(
                    killed,
                    "processes survived the session's end and were killed"
                );
            }
        });
        Ok(StopOutcome {
            forced: !ended,
            exit_status: status,
        })
    }

    /// tmux marks a pane dead when its terminal closes and records the exit status a moment
    /// later, when it reaps the process; wait briefly for the status.
    pub(crate) async fn settled_exit_status(&self, id: &str, tmux_id: &str) -> Option<i32> {
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(30)).await;
            if let Ok(l) = self.mux().list_sessions().await {
                match l.into_iter().find(|s| s.meta.id == id || s.id == tmux_id) {
                    Some(s) if s.dead_status.is_some() => return s.dead_status,
                    Some(_) => {}
                    None => return None,
                }
            }
        }
        None
    }

    async fn find_tmux(&self, rec: &SessionRecord) -> Result<Option<MuxSession>, MuxError> {
        if !rec.server.is_empty() {
            // Adopted in place: its pane, with the same process (pane ids are reused after
            // the server restarts).
            let mux = self
                .mux_on(&rec.server)
                .map_err(|e| MuxError::NoServer(e.to_string()))?;
            return match mux.list_panes().await {
                Ok(l) => Ok(l
                    .into_iter()
                    .find(|p| p.pane == rec.pane && p.id == rec.tmux_id && p.pid == rec.pid)),
                Err(MuxError::NoServer(_)) => Ok(None),
                Err(e) => Err(e),
            };
        }
        match self.mux().list_sessions().await {
            Ok(l) => Ok(l
                .into_iter()
                .find(|s| s.meta.id == rec.id || (!rec.tmux_id.is_empty() && s.id == rec.tmux_id))),
            Err(MuxError::NoServer(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Stops managing a session; it keeps running in tmux.
    pub async fn release(&self, name: &str) -> Result<(), CoreError> {
        let (rec, _) = self.lookup(name)?;
        // A session adopted in place never had clibot's options written on it.
        if rec.server.is_empty() && !rec.unmanaged {
            match self.mux().set_meta(&rec.tmux_id, None).await {
                Ok(()) | Err(MuxError::NoSuchTarget(_)) | Err(MuxError::NoServer(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.stop_watcher(name);
        if !rec.unmanaged
            && let Err(e) = self.mux_of(name).unwatch(&rec.tmux_id).await
        {
            warn!(session = %name, "cannot stop following the released session in tmux: {e}");
        }
        self.sessions().remove(name);
        self.close_server_if_unused(&rec.server).await;
        self.remove_session_files(&rec.id);
        self.event(name, &rec.id, EventKind::Released);
        self.persist();
        info!(session = %name, "released");
        Ok(())
    }

    /// Per-session files (generated CLI settings) go with the session.
    pub(crate) fn remove_session_files(&self, id: &str) {
        self.drop_hook_socket(id);
        if let Err(e) = self.queues().remove(id) {
            warn!("cannot remove the queued input of session {id}: {e}");
        }
        // A jail may have left any number of files there: removed on the blocking pool (std's
        // removal never follows a link out of the tree), without holding anything up.
        let jail = self.settings().state_dir.join("jails").join(id);
        let _ = std::fs::remove_file(super::early::path(&self.settings().state_dir, id));
        let _ = std::fs::remove_file(super::scrollback::path(&self.settings().state_dir, id));
        let dir = self.settings().state_dir.join("sessions").join(id);
        let remove = move || {
            let _ = std::fs::remove_dir_all(&jail);
            if dir.exists()
                && let Err(e) = std::fs::remove_dir_all(&dir)
            {
                warn!(dir = %dir.display(), "cannot remove session files: {e}");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(remove)),
            Err(_) => remove(),
        }
    }

    /// Records that session `name`'s CLI ended; `false` when it was already recorded (one exit
    /// is handled once, however many checks saw it).
    pub(crate) fn mark_exited(&self, name: &str, status: Option<i32>, reason: &str) -> bool {
        self.mark_exited_with(name, status, reason, String::new())
    }

    /// Records that session `name`'s CLI ended, with what its pane last showed.
    pub(crate) fn mark_exited_with(
        &self,
        name: &str,
        status: Option<i32>,
        reason: &str,
        output: String,
    ) -> bool {
        self.mark_ended(name, State::Exited, status, reason, output)
    }

    /// Ends what session `name`'s CLI left running in its terminal's session when it ended by
    /// itself (a crash): children that ignored the SIGHUP would otherwise pile up with each
    /// restart.
    fn end_what_was_left(&self, name: &str) {
        let leader = self
            .sessions()
            .get(name, |e| {
                // Only a CLI clibot started: an adopted pane's session is a person's shell,
                // whose `nohup` jobs are theirs.
                (e.rec.server.is_empty() && !e.rec.unmanaged && !e.rec.adopted).then_some(e.rec.pid)
            })
            .flatten()
            .unwrap_or(0);
        if leader == 0 {
            return;
        }
        self.in_background(async move {
            // tmux reaps the pane's process first; until then the session still has its leader.
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if !std::path::Path::new(&format!("/proc/{leader}")).exists() {
                    break;
                }
            }
            let killed = crate::procs::kill_all(&crate::procs::left_in_session(leader));
            if killed > 0 {
                warn!(
                    killed,
                    "processes the CLI left running when it ended were killed"
                );
            }
        });
    }

    /// Records that idle session `name` was stopped to be woken by its next message
    /// ([`super::hibernate`]).
    pub(crate) fn mark_hibernated(&self, name: &str, status: Option<i32>, reason: &str) {
        self.mark_ended(name, State::Hibernated, status, reason, String::new());
    }

    /// Session `name`'s CLI is gone: `Exited`, or `Hibernated` with its conversation kept.
    /// `false` when it had ended already: the caller then does nothing more about this exit.
    fn mark_ended(
        &self,
        name: &str,
        to: State,
        status: Option<i32>,
        reason: &str,
        output: String,
    ) -> bool {
        let id = self
            .sessions()
            .update(name, |e| e.exited(status, reason).then(|| e.rec.id.clone()));
        let Some(id) = id.flatten() else {
            return false;
        };
        info!(session = name, ?status, "{reason}");
        self.stop_watcher(name);
        self.end_what_was_left(name);
        self.sessions().update(name, |e| {
            // A hook still waiting for an answer will get none: the CLI is gone.
            for (_, (tx, _)) in e.rt.waiters.drain() {
                let _ = tx.send(String::new());
            }
            e.show_prompt(None);
        });
        self.set_state(name, to, reason);
        let kind = if to == State::Hibernated {
            let cli = self.sessions().cli_of(name).unwrap_or_default();
            EventKind::Hibernated {
                reason: reason.to_string(),
                resumes: self.resumes_conversations(&cli),
            }
        } else {
            EventKind::Exited {
                status,
                reason: reason.to_string(),
                output,
            }
        };
        self.event(name, &id, kind);
        self.persist();
        true
    }

    /// The last lines an exited CLI left in its pane (tmux keeps a dead pane visible): what it
    /// printed as it died is usually why. tmux may mark a pane dead before it has drawn the last
    /// bytes its process wrote (3.3a can lose them altogether), so an empty pane is read again
    /// for up to a second, and then the last screen the watcher read while the CLI ran is used.
    pub(crate) async fn last_words(&self, name: &str, tmux_id: &str) -> String {
        for _ in 0..10 {
            let Ok(screen) = self.mux_of(name).capture(tmux_id, None, false).await else {
                break;
            };
            let words = tail_lines(&screen);
            if !words.is_empty() {
                return words;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (seen, id) = self
            .sessions()
            .get(name, |e| (tail_lines(&e.rt.last_screen), e.rec.id.clone()))
            .unwrap_or_default();
        if !seen.is_empty() || id.is_empty() {
            return seen;
        }
        // Nothing on the screen, ever: what the CLI printed first (it died as it started).
        let file = super::early::path(&self.settings().state_dir, &id);
        tokio::task::spawn_blocking(move || tail_lines(&super::early::read(&file)))
            .await
            .unwrap_or_default()
    }
}
