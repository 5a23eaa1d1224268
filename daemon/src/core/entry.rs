//! What the daemon keeps per session: the persisted record, and the runtime state of the turn
//! state machine beside it, which no file holds.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::cli::Adapter;
use crate::cli::detect::Pack;
use crate::model::{Prompt, SessionRecord, State};

/// One session in the table.
pub(crate) struct Entry {
    pub(crate) rec: SessionRecord,
    pub(crate) input: Arc<tokio::sync::Mutex<()>>,
    pub(crate) stopping: bool,
    pub(crate) rt: Runtime,
}

/// The integration of one configured CLI.
pub(crate) struct CliKind {
    pub(crate) adapter: Arc<dyn Adapter>,
    pub(crate) pack: Arc<Pack>,
}

/// What the daemon keeps per session besides the persisted record.
pub(crate) struct Runtime {
    /// The turn state machine's part ([`crate::turn`]).
    pub(crate) turn: crate::turn::Turn,
    /// Permission hooks waiting for a decision, by prompt id, with their payloads.
    pub(crate) waiters: HashMap<String, (oneshot::Sender<String>, Value)>,
    /// Recently resolved prompts and by whom, so that a late answer gets a clear error.
    pub(crate) resolved: VecDeque<(String, String)>,
    /// When a prompt was last answered through clibot (by keys or through its hook): the
    /// dialog may stay drawn for a moment while the CLI closes it, and that is not a new
    /// prompt. Cleared as soon as a screen without a dialog is seen; after that, whatever
    /// dialog appears is new.
    /// With it: the answered dialog's signature (kind, text, options, subject) when it was
    /// answered by keys — only that very dialog lingers; `None` when it was answered through
    /// its hook or API, whose words differ from the screen's — any dialog lingers then (the
    /// CLI's next prompt comes through the hook again). The flag: a screen check is already
    /// scheduled for when the lingering ends.
    pub(crate) answered_screen: Option<(Option<String>, Instant, bool)>,
    pub(crate) watcher: Option<CancellationToken>,
    /// Wakes the watcher for an immediate screen read.
    pub(crate) poke: Arc<Notify>,
    pub(crate) last_error_line: Option<String>,
    pub(crate) delivering: bool,
    /// This daemon is interrupting the running turn (`cancel`): its end is reported by the
    /// cancel, not as a completion.
    pub(crate) cancelling: bool,
    /// Set at start for a session with input queued: the last daemon may have died between
    /// typing the first message and pressing Enter, leaving it on the input line.
    pub(crate) maybe_half_typed: bool,
    /// Set at start when the last daemon was pressing the queue head's Enter as it stopped:
    /// the message is not typed again, only its Enter pressed (harmless if it had landed).
    pub(crate) maybe_entered: bool,
    /// The start (Unix ms; 0: unknown) of the turn already reported as running past
    /// `turn_timeout`.
    pub(crate) timed_out_turn: Option<i64>,
    /// When the CLI was started again after failures (`restart = "on-failure"`), newest last.
    pub(crate) crash_restarts: Vec<Instant>,
    /// The pane's foreground process while the CLI waits for input (`bash` for a shell). A quiet
    /// pane whose foreground process is another one (`sleep`, `make`) is still working.
    pub(crate) idle_foreground: Option<String>,
    /// The CLI's own API, while connected ([`crate::opencode_link`]): it, not the screen,
    /// tells about turns and prompts, and takes the input.
    pub(crate) api: Option<crate::cli::local_http::LocalHttp>,
    /// The link to the CLI's API gave up (the port refused the session's password): the
    /// session is read off the screen like any program's.
    pub(crate) api_gave_up: bool,
    /// What the turn being completed cost, as the CLI's API told it with the turn's end: set by
    /// the link right before it completes the turn, taken when the turn is counted
    /// (`Daemon::count_turn`), cleared right after.
    pub(crate) api_usage: Option<crate::usage::TurnUsage>,
    /// The plan's windows as the CLI last told them outside its records (Claude Code's status
    /// line), for the turns counted next.
    pub(crate) plan_windows: Vec<crate::usage::PlanWindow>,
    /// When the CLI's status line last reported (with windows or without).
    pub(crate) status_at: Option<Instant>,
    /// The last screen read, for the last words of a CLI whose dead pane lost them.
    pub(crate) last_screen: String,
    /// The prompt last looked at for an automatic answer, and who is answering it now
    /// ("rule 2", "decider"; empty once done or left to a person).
    pub(crate) auto_for: Option<(String, String)>,
    /// Prompts shown to the admins' chats (`escalate_after`), newest last: how they end goes
    /// there too.
    pub(crate) escalated: VecDeque<String>,
    /// A hibernated session being woken: what else comes meanwhile only queues.
    pub(crate) waking: bool,
    /// Being stopped to hibernate: a message that comes meanwhile is queued, and wakes it.
    pub(crate) hibernating: bool,
    /// The files in the outbox at the last look, with their sizes: one the same size at the
    /// next look is complete and is sent.
    pub(crate) outbox: Vec<(String, u64)>,
    /// Why the outbox was last refused (a link, not a folder), as its chats were told: the
    /// same refusal is not told again.
    pub(crate) outbox_told: Option<String>,
    /// The chats were told that the CLI runs its tools without asking.
    pub(crate) unasked_told: bool,
    /// The chats were told of a mode the CLI's pack does not know.
    pub(crate) new_mode_told: bool,
    /// When a person last did something in a client attached at the desk (Unix seconds), as
    /// read when the session's dialog went away.
    pub(crate) desk_at: Option<i64>,
    /// Keys pressed through clibot (when, and by whom): a dialog gone right after was
    /// answered by them, not at the terminal.
    pub(crate) keys_by: Option<(i64, String)>,
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime {
            turn: crate::turn::Turn::new(Instant::now()),
            waiters: HashMap::new(),
            resolved: VecDeque::new(),
            answered_screen: None,
            watcher: None,
            poke: Arc::new(Notify::new()),
            last_error_line: None,
            delivering: false,
            cancelling: false,
            maybe_half_typed: false,
            maybe_entered: false,
            timed_out_turn: None,
            crash_restarts: Vec::new(),
            idle_foreground: None,
            api: None,
            api_gave_up: false,
            api_usage: None,
            plan_windows: Vec::new(),
            status_at: None,
            last_screen: String::new(),
            auto_for: None,
            escalated: VecDeque::new(),
            waking: false,
            hibernating: false,
            outbox: Vec::new(),
            outbox_told: None,
            unasked_told: false,
            new_mode_told: false,
            desk_at: None,
            keys_by: None,
        }
    }
}

/// How many resolved prompts a session remembers, for late answers' errors.
const RESOLVED_KEPT: usize = 32;

/// The session's transitions that more than one feature makes: each keeps the record and the
/// runtime beside it in agreement (the record's state, dialog, exit and turn fields are written
/// only here and when the log is replayed: a structure test checks it).
impl Entry {
    pub(crate) fn new(rec: SessionRecord) -> Entry {
        Entry {
            rec,
            input: Arc::new(tokio::sync::Mutex::new(())),
            stopping: false,
            rt: Runtime::default(),
        }
    }

    /// The session's state becomes `to`: the state it left, or `None` when it was in it
    /// already. Wakes the session's watcher: the new state may need its clock (quiescence,
    /// stalls).
    pub(crate) fn change_state(&mut self, to: State, now_ms: i64) -> Option<State> {
        if self.rec.state == to {
            return None;
        }
        let from = self.rec.state;
        self.rec.state = to;
        self.rec.last_activity_ms = now_ms;
        self.rt.poke.notify_one();
        Some(from)
    }

    /// The CLI waits on `prompt` now (announced by its hook or API, or read on its screen).
    pub(crate) fn show_prompt(&mut self, prompt: Option<Prompt>) {
        self.rec.prompt = prompt;
    }

    /// The dialog the session waited on is gone, resolved `by` ("cli", "terminal", "cancel",
    /// who answered): remembered, so that a late answer to it is told who did. The prompt it
    /// was; `None` when none waited.
    pub(crate) fn resolve_prompt(&mut self, by: &str) -> Option<Prompt> {
        let p = self.rec.prompt.take()?;
        self.remember_resolved(&p.id, by);
        Some(p)
    }

    /// Prompt `id` was resolved `by`: kept for late answers' errors (the latest few).
    pub(crate) fn remember_resolved(&mut self, id: &str, by: &str) {
        self.rt.resolved.push_back((id.to_string(), by.to_string()));
        while self.rt.resolved.len() > RESOLVED_KEPT {
            self.rt.resolved.pop_front();
        }
    }

    /// A turn began with the input typed: where its output starts (`anchor`) and when.
    pub(crate) fn turn_began(&mut self, anchor: Option<i64>, now_ms: i64) {
        self.rec.turn_anchor = anchor;
        self.rec.turn_input_lines = self.rt.turn.input_lines.min(u32::MAX as usize) as u32;
        self.rec.turn_started_ms = now_ms;
    }

    /// The running turn ended (completed, cancelled): the turn machine and the record's turn
    /// fields are cleared together.
    pub(crate) fn turn_ended(&mut self, now: Instant) {
        self.rt.turn.completed(now);
        self.rec.turn_anchor = None;
        self.rec.turn_input_lines = 0;
        self.rec.turn_started_ms = 0;
        self.rec.stalled = false;
    }

    /// The CLI exited with `status` for `reason`; false when its exit was recorded already.
    pub(crate) fn exited(&mut self, status: Option<i32>, reason: &str) -> bool {
        if self.rec.state.is_exited() {
            return false;
        }
        self.rec.exit_status = status;
        self.rec.exit_reason = reason.to_string();
        true
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The record's state, dialog, exit and turn fields are written only by [`super::Entry`]'s
    /// transitions (and where the log is replayed or a loaded record mended): a feature that
    /// wrote them itself would leave the runtime beside them disagreeing.
    #[test]
    fn the_record_s_transition_fields_are_written_only_here() {
        const FIELDS: [&str; 7] = [
            "state",
            "prompt",
            "exit_status",
            "exit_reason",
            "turn_started_ms",
            "turn_anchor",
            "turn_input_lines",
        ];
        const WRITERS: [&str; 3] = ["core/entry.rs", "store/catch_up.rs", "store/mod.rs"];
        fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        walk(&src, &mut files);
        assert!(files.len() > 50, "{}", src.display());
        let mut found = Vec::new();
        for f in files {
            let rel = f.strip_prefix(&src).map(|r| r.display().to_string());
            let rel = rel.unwrap_or_default();
            if WRITERS.contains(&rel.as_str())
                || rel.ends_with("tests.rs")
                || rel.contains("/tests/")
            {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            // Only the file's code before its test module.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (n, line) in code.lines().enumerate() {
                for field in FIELDS {
                    if line.contains(&format!("rec.{field} = ")) {
                        found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "write these through Entry's transitions (core/entry.rs): {found:#?}"
        );
    }
}
