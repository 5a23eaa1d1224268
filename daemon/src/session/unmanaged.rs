//! Sessions clibot did not start, reporting through the global hooks that
//! `clibotctl hooks install` puts in the user's own CLI settings: a Claude Code, Codex or
//! Gemini CLI in any terminal reports its turns and prompts, and appears as the unmanaged
//! session `u-CLI-PID`.
//!
//! Who a call is about comes from the calling process's ancestry, never from the request:
//! the hook runs as a child of its CLI, so the nearest ancestor the process tree identifies as
//! that CLI is the one reporting, and a process can report only about the CLI it runs under.
//! A CLI that runs under a session clibot manages (one adopted by hand, which has no hooks of
//! clibot's) reports to that session. Unmanaged sessions are never typed into: their prompts
//! are answered through the hook's decision (Claude Code, Codex) or only watched (Gemini CLI),
//! by admins and the machine's user; nothing automatic answers them.

use std::ops::ControlFlow;
use std::time::Duration;

use serde_json::Value;
use tracing::{Instrument, debug, info, info_span};

use crate::core::*;
use crate::error::CoreError;
use crate::ids::new_id;
use crate::model::{SessionRecord, State};
use crate::store::events::EventKind;
use crate::store::now_ms;

/// How long a global hook's permission request is held for an answer from a chat. The
/// terminal's own dialog stays answerable meanwhile (the first answer wins); the installed
/// hook's own timeout is a day.
pub(crate) const UNMANAGED_WAIT: Duration = Duration::from_secs(86_000);

impl Daemon {
    /// A call from a global hook, made by process `caller` (its peer credentials).
    pub async fn global_hook(
        &self,
        caller: Option<i32>,
        cli: &str,
        event: &str,
        payload: &str,
    ) -> Result<String, CoreError> {
        let pid = caller.filter(|p| *p > 1).ok_or(CoreError::HookDenied)?;
        let chain = crate::caller::ancestry(pid).ok_or(CoreError::HookDenied)?;
        // The CLI it reports about: the nearest ancestor that is `cli` (a hook runs under a
        // shell the CLI started), or the launcher above it that is the same CLI (Codex's node
        // script above its native binary: the process the user started, as discovery names it).
        let is_cli = |p: i32| crate::discover::identify_pid(p as u32) == Some(cli);
        let first = chain
            .iter()
            .position(|p| is_cli(*p))
            .ok_or(CoreError::HookDenied)?;
        let last = chain[first..].iter().take_while(|p| is_cli(**p)).count() + first - 1;
        let cli_pid = chain[last] as u32;
        super::shared::check_payload_shape(payload)?;
        let payload: Value = serde_json::from_str(payload)
            .map_err(|e| CoreError::HookPayload(format!("hook payload is not JSON: {e}")))?;
        let managed = self.sessions().find_map(|e| {
            (!e.rec.unmanaged
                && !e.rec.state.is_exited()
                && e.rec.pid != 0
                && chain.contains(&(e.rec.pid as i32)))
            .then(|| (e.rec.name.clone(), e.rec.cli.clone()))
        });
        let name = match managed {
            // Its hooks speak the session's CLI's language only.
            Some((name, session_cli)) if session_cli == cli => name,
            Some(_) => return Ok(String::new()),
            None => match self.unmanaged_session(cli, cli_pid, &payload) {
                n if n.is_empty() => return Ok(String::new()),
                n => n,
            },
        };
        let event = if event.is_empty() {
            payload
                .get("hook_event_name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        } else {
            event.to_string()
        };
        let Some((adapter, _)) = self.kind_of(cli) else {
            return Ok(String::new());
        };
        let span = info_span!("session", session = %name);
        async {
            debug!(event, "global hook");
            // Interpreting may read the CLI's records: off the async workers.
            let (ev, body) = (event.clone(), payload.clone());
            let signal = tokio::task::spawn_blocking(move || adapter.hook(&ev, &body))
                .await
                .unwrap_or(crate::cli::HookSignal::Ignore);
            let out = self.apply_signal(&name, signal, payload).await;
            if event == "SessionEnd" {
                self.end_unmanaged(&name);
            }
            out
        }
        .instrument(span)
        .await
    }

    /// The unmanaged session of `cli` process `pid`, made on its first report.
    fn unmanaged_session(&self, cli: &str, pid: u32, payload: &Value) -> String {
        let name = format!("u-{cli}-{pid}");
        // Copilot CLI names it `sessionId`.
        let conversation = ["session_id", "sessionId"]
            .iter()
            .find_map(|k| payload.get(*k).and_then(Value::as_str))
            .unwrap_or("")
            .to_string();
        // A transaction: the name is checked and taken (or the session found already there
        // updated) as one step, so that two hooks of one CLI make one session.
        let rec = self.sessions().transaction(|sessions| {
            match sessions.get_mut(&name) {
                Some(e) if e.rec.unmanaged && !e.rec.state.is_exited() => {
                    if !conversation.is_empty() {
                        e.rec.cli_session_id = conversation;
                    }
                    return ControlFlow::Break(name.clone());
                }
                // A session clibot manages holds the name (one from before names were
                // reserved): it is never replaced by a terminal's CLI.
                Some(e) if !e.rec.unmanaged => return ControlFlow::Break(String::new()),
                _ => {}
            }
            let now = now_ms();
            let rec = SessionRecord {
                id: new_id(),
                name: name.clone(),
                cli: cli.to_string(),
                dir: std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default(),
                state: State::Idle,
                created_at_ms: now,
                last_activity_ms: now,
                pid,
                cli_session_id: conversation,
                unmanaged: true,
                ..Default::default()
            };
            sessions.insert(name.clone(), Entry::new(rec.clone()));
            ControlFlow::Continue(rec)
        });
        // Found there already, or the name is not to be had: what the hook is told.
        let rec = match rec {
            ControlFlow::Continue(rec) => rec,
            ControlFlow::Break(answer) => return answer,
        };
        let how = if crate::cli::adapter(cli).answers_through_hooks() {
            "its permission prompts can be answered here"
        } else {
            "its prompts are shown here but answered at its terminal (its hooks cannot carry an answer while its dialog stays answerable there)"
        };
        self.event(
            &name,
            &rec.id,
            EventKind::Notice {
                text: format!(
                    "{cli} (pid {pid}) in {} reports through clibot's global hooks as {name}: {how}; clibot never types into it (adopt it or resume it to drive it)",
                    rec.dir.display()
                ),
                kind: "unmanaged".into(),
            },
        );
        info!(session = %name, "an unmanaged session reports through the global hooks");
        name
    }

    /// The CLI of unmanaged session `name` ended (its `SessionEnd`, or its process is gone).
    fn end_unmanaged(&self, name: &str) {
        self.mark_exited(name, None, "the CLI ended");
        // Nothing of it stays to act on: it leaves the list (its events stay in the log).
        self.sessions().remove(name);
    }

    /// The safety net for unmanaged sessions: one whose process is gone ended.
    pub(crate) fn check_unmanaged(&self) {
        let gone: Vec<String> = self.sessions().filter_map(|e| {
            (e.rec.unmanaged && !crate::procs::alive(e.rec.pid)).then(|| e.rec.name.clone())
        });
        for name in gone {
            self.end_unmanaged(&name);
        }
    }

    /// Refuses typing, keys and screens for a session clibot only hears from.
    pub(crate) fn refuse_unmanaged(&self, rec: &SessionRecord) -> Result<(), CoreError> {
        if !rec.unmanaged {
            return Ok(());
        }
        Err(CoreError::NotRunByClibot(format!(
            "{} is not run by clibot (it reports through the global hooks), so clibot does not type into it or read its screen: answer its prompts here, or take it over with `clibotctl adopt NAME --found {}-{}` (in tmux) or `clibotctl resume {}-{}`",
            rec.name, rec.cli, rec.pid, rec.cli, rec.pid
        )))
    }
}
