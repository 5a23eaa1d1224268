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
use crate::model::SessionRecord;

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

impl Entry {
    pub(crate) fn new(rec: SessionRecord) -> Entry {
        Entry {
            rec,
            input: Arc::new(tokio::sync::Mutex::new(())),
            stopping: false,
            rt: Runtime::default(),
        }
    }
}
