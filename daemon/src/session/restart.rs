//! Starting a session's CLI again in place, resuming its conversation or not, keeping its id, history and queue.

use tracing::{Instrument, info_span};

use crate::core::sessions::usable;
use crate::core::*;
use crate::error::CoreError;
use crate::ids::new_uuid;
use crate::model::{SessionRecord, State};
use crate::store::events::EventKind;
use crate::store::now_ms;

impl Daemon {
    /// Whether `cli`'s adapter resumes conversations on a restart (a shell has none).
    pub fn resumes_conversations(&self, cli: &str) -> bool {
        self.kind_of(cli)
            .is_some_and(|(adapter, _)| adapter.resumes_conversations())
    }

    /// Starts session `name`'s CLI again, in a new tmux session with the same name, directory,
    /// arguments and environment, ending the running one first (gracefully, as `stop` does).
    /// With `resume` the CLI continues its conversation, as its adapter knows how (Claude Code
    /// `--resume`, Codex `resume --last`, Gemini CLI `--resume latest`, OpenCode `--session`);
    /// otherwise it starts a new one. The session keeps its id, its event history and its queue
    /// of inputs.
    pub async fn restart(&self, name: &str, resume: bool) -> Result<SessionRecord, CoreError> {
        let span = info_span!("session", session = %name);
        self.restart_inner(name, resume).instrument(span).await
    }

    /// Marks session `name` as being stopped (or restarted), so that nothing else acts on it
    /// meanwhile, and returns its record.
    pub(crate) fn reserve(&self, name: &str) -> Result<SessionRecord, CoreError> {
        self.sessions().usable(name, |e| {
            e.stopping = true;
            // Stopped or restarted by hand: a restart after a failure that was due is not made.
            e.rec.restart_due_ms = 0;
            e.rec.clone()
        })
    }

    pub(crate) async fn restart_inner(
        &self,
        name: &str,
        resume: bool,
    ) -> Result<SessionRecord, CoreError> {
        // An exited session that starts again counts against the limits like a new one.
        let capped_owner = self.get(name).ok().map(|r| self.capped_owner(&r.owner));
        // A transaction: an exited session's room under the limits is counted over every
        // session, and the reservation is made before another start can take that room.
        let rec = self.sessions().transaction(|sessions| {
            let e = usable(sessions, name)?;
            let exited = e.rec.state.is_exited();
            if exited && let Some(owner) = &capped_owner {
                self.check_limits(sessions, name, owner.as_ref())?;
            }
            let e = usable(sessions, name)?;
            e.stopping = true;
            e.rec.restart_due_ms = 0;
            Ok::<_, CoreError>(e.rec.clone())
        })?;
        let release = |d: &Daemon| {
            d.sessions().unreserve(name);
            d.start_watcher(name);
        };
        if rec.unmanaged {
            release(self);
            return Err(CoreError::NotRunByClibot(format!(
                "{name} is not run by clibot (it reports through the global hooks): `clibotctl resume {}-{}` continues its conversation in a session clibot runs",
                rec.cli, rec.pid
            )));
        }
        if !rec.server.is_empty() {
            release(self);
            return Err(CoreError::NotRunByClibot(format!(
                "session {name:?} runs in a pane of your own tmux server ({}), adopted where it runs: clibot does not restart it there; quit it there, or `clibotctl stop {name}`, then start a new one (`clibotctl spawn … --resume ID` continues its conversation)",
                rec.server
            )));
        }
        let cli = match self.cli(&rec.cli) {
            Ok(c) => c.clone(),
            Err(e) => {
                release(self);
                return Err(e);
            }
        };
        if resume && rec.cli_session_id.is_empty() {
            release(self);
            return Err(CoreError::BadSpawn(format!(
                "session {name:?} was not started by clibot, so its conversation cannot be resumed: restart it without resuming"
            )));
        }
        let token = match crate::ids::new_token() {
            Ok(t) => t,
            Err(e) => {
                release(self);
                return Err(CoreError::NoRandom(e));
            }
        };
        self.stop_watcher(name);
        let outcome = match self.stop_inner(&rec, false, None).await {
            Ok(o) => o,
            Err(e) => {
                release(self);
                return Err(e);
            }
        };
        if !rec.state.is_exited() {
            self.event(
                name,
                &rec.id,
                EventKind::Exited {
                    status: outcome.exit_status,
                    reason: "restarted".into(),
                    output: String::new(),
                },
            );
        }
        let serves_api = self.kind_of(&rec.cli).is_some_and(|(a, _)| a.serves_api());
        let mut fresh = SessionRecord {
            state: State::Starting,
            exit_status: None,
            exit_reason: String::new(),
            pid: 0,
            tmux_id: String::new(),
            pane: String::new(),
            adopted: false,
            prompt: None,
            stalled: false,
            error: None,
            last_activity_ms: now_ms(),
            hook_token: token,
            api_port: 0,
            ..rec.clone()
        };
        if !resume {
            fresh.cli_session_id = new_uuid();
        }
        if serves_api {
            match free_local_port() {
                Ok(p) => fresh.api_port = p,
                Err(e) => {
                    self.sessions().unreserve(name);
                    self.mark_exited(name, outcome.exit_status, "restart failed: no free port");
                    self.persist();
                    return Err(CoreError::NoPort(e));
                }
            }
        }
        self.sessions().replace(name, |old| {
            let mut e = Entry::new(fresh.clone());
            e.stopping = true;
            // The restarts after failures count across restarts (a crash loop is one loop).
            // So do a wake under way, and what was queued while the CLI was being stopped.
            if let Some(old) = old {
                e.rt.crash_restarts = old.rt.crash_restarts;
                e.rt.waking = old.rt.waking;
                e.rec.queue = old.rec.queue;
            }
            e
        });
        self.set_state(
            name,
            State::Starting,
            match (resume, self.resumes_conversations(&rec.cli)) {
                (_, false) => "restarted",
                (true, true) => "restarted, resuming the conversation",
                (false, true) => "restarted with a new conversation",
            },
        );
        let req = SpawnRequest {
            name: name.to_string(),
            cli: rec.cli.clone(),
            dir: rec.dir.display().to_string(),
            args: rec.args.clone(),
            env: rec.env.clone(),
            owner: rec.owner.clone(),
            ..Default::default()
        };
        match self.create_tmux_session(&fresh, &cli, &req, resume).await {
            Ok(s) => self.launched(name, s).await,
            Err(e) => {
                self.sessions().unreserve(name);
                self.mark_exited(name, None, &format!("restart failed: {e}"));
                self.persist();
                Err(e)
            }
        }
    }
}
