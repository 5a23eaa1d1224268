//! A managed session as the daemon records it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    #[default]
    Starting,
    Idle,
    Working,
    Waiting,
    Exited,
    Error,
    /// Declared in the config (`[[sessions]]`) and not started: no tmux session, no process.
    Declared,
    /// Stopped after being idle (`idle_stop_after`), its conversation kept: the next message
    /// starts the CLI again, resuming it, and is typed once it is ready.
    Hibernated,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Idle => "idle",
            State::Working => "working",
            State::Waiting => "waiting",
            State::Exited => "exited",
            State::Error => "error",
            State::Declared => "declared",
            State::Hibernated => "hibernated",
        }
    }

    /// The process is gone: no input can reach it.
    pub fn is_exited(self) -> bool {
        matches!(self, State::Exited | State::Declared | State::Hibernated)
    }
}

/// The persisted record of one session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) cli: String,
    /// The version of the CLI's program when it was last started (empty: unknown).
    #[serde(default)]
    pub(crate) cli_version: String,
    pub(crate) dir: PathBuf,
    pub(crate) state: State,
    pub(crate) created_at_ms: i64,
    #[serde(default)]
    pub(crate) last_activity_ms: i64,
    /// The tmux session's name and id (`$3`); the daemon targets the id.
    pub(crate) tmux_session: String,
    pub(crate) tmux_id: String,
    /// The CLI's pane (`%7`): what input, keys and screen reads target, so that a window or
    /// pane opened later in the session never receives them. Empty in records written before
    /// it was kept: the session (its active pane) is targeted then, until re-adoption fills it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) pane: String,
    /// The socket of the tmux server the pane is on, for a session adopted where it runs on
    /// another server of the user's; empty: clibot's own server. tmux ids (`$3`, `%7`) are
    /// unique only per server.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) server: String,
    /// A CLI clibot did not start that reports through the global hooks (`u-CLI-PID`): no
    /// pane clibot knows, never typed into, never persisted (its next hook call brings it
    /// back after a restart).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) unmanaged: bool,
    #[serde(default)]
    pub(crate) pid: u32,
    #[serde(default)]
    pub(crate) exit_status: Option<i32>,
    #[serde(default)]
    pub(crate) adopted: bool,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    /// Environment variables given at spawn (kept for a restart).
    #[serde(default)]
    pub(crate) env: std::collections::BTreeMap<String, String>,
    /// The prompt the session waits on.
    #[serde(default)]
    pub(crate) prompt: Option<Prompt>,
    /// Working without output for longer than the stall time.
    #[serde(default)]
    pub(crate) stalled: bool,
    /// The final reply of the last completed turn, and its event's sequence number.
    #[serde(default)]
    pub(crate) last_reply: Option<String>,
    #[serde(default)]
    pub(crate) last_reply_seq: u64,
    /// When the last reply was longer than an event carries, the blob that holds it whole
    /// ([`crate::store::blobs`]) and its length; `last_reply` is then its head.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) last_reply_blob: String,
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub(crate) last_reply_bytes: u64,
    /// The CLI's last error message.
    #[serde(default)]
    pub(crate) error: Option<String>,
    /// Secret that a hook call must present (given to the CLI as CLIBOT_HOOK_TOKEN).
    #[serde(default)]
    pub(crate) hook_token: String,
    /// The CLI's own session id when clibot chose it (Claude Code `--session-id`).
    #[serde(default)]
    pub(crate) cli_session_id: String,
    /// Inputs waiting behind the running turn, oldest first. Kept on disk in a file of their
    /// own ([`crate::store::queue_file`]), not in the registry: one message queued costs one line.
    /// Read from a registry written before that, once.
    #[serde(default, skip_serializing)]
    pub(crate) queue: Vec<String>,
    /// What the pane runs while the CLI waits for input (`bash` for a shell), learned while it
    /// was idle. Kept, so that a daemon restarted while a command runs (`sleep 6`) knows the
    /// turn is not over, instead of learning the command as the idle program.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) idle_program: String,
    /// Where the running turn's output begins in the pane (absolute line) and how many lines
    /// its input took: a turn that outlives a daemon restart is still reported whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) turn_anchor: Option<i64>,
    #[serde(default, skip_serializing_if = "crate::model::is_zero_u32")]
    pub(crate) turn_input_lines: u32,
    /// When the running turn's input was sent (ms since the epoch), 0 when none runs.
    #[serde(default, skip_serializing_if = "crate::model::is_zero_i64")]
    pub(crate) turn_started_ms: i64,
    /// The port of the API the CLI serves on 127.0.0.1 (OpenCode), 0 if none.
    #[serde(default)]
    pub(crate) api_port: u16,
    /// "PLATFORM:USER" of the chat user who made it; empty for a session made on the machine.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) owner: String,
    /// Chat users ("PLATFORM:USER") the owner shared it with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) shared_with: Vec<String>,
    /// Why it exited ("the CLI exited", "idle for 12h"); empty while it runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) exit_reason: String,
    /// When a restart after a failure is due (Unix ms; 0: none): a daemon restarted during
    /// the backoff makes it all the same.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub(crate) restart_due_ms: i64,
    /// The last text typed and submitted through clibot: the request a delegation repeats.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) last_input: String,
    /// Hands its work to another CLI on an error listed in `[delegation] on`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) delegate: bool,
    /// The CLIs the work went through before this session, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) delegated_from: Vec<String>,
    /// Why the work left each of `delegated_from` (an error kind, `crash`, `stalled`, or
    /// `manual`), in the same order: each chain counts its own hops.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) delegated_reasons: Vec<String>,
    /// The session this one handed its work to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) delegated_to: String,
    /// The account profile it was started with (`[cli.NAME.profiles.PROFILE]`; its
    /// environment is in `env`); empty: none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) profile: String,
    /// Its git worktree (`spawn --worktree`): where it works, on which branch, from what.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) worktree: Option<Worktree>,
    /// Who asked to cancel the running turn, written before the CLI is interrupted: a daemon
    /// that dies before it records the cancel leaves the next one to report the turn's end as
    /// cancelled, not completed. Empty when no cancel is under way.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) cancel_by: String,
    /// Found at start: the last daemon had typed the queue's head whole and was pressing its
    /// Enter when it stopped (never saved: taken into the session's runtime at start).
    #[serde(skip)]
    pub(crate) queue_entering: bool,
    /// Where the jailed CLI's home is (its per-session state is bound over parts of it);
    /// empty for a session that runs unjailed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) jail_home: String,
}

/// What a prompt asks. The names are what the event log, `--json`, the proto and the rules'
/// `kind = "…"` say; a pattern pack of the user's may name kinds of its own ("deploy").
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum PromptKind {
    /// May the CLI use a tool (run a command, write a file, fetch a page)?
    #[default]
    Permission,
    /// An open question, or one with choices, answered by a person's words.
    Question,
    /// A yes/no confirmation.
    Confirm,
    /// A choice from a menu.
    Select,
    /// Whether to trust a folder or a workspace.
    Trust,
    /// A password, passphrase or token: typed, never kept, never answered automatically.
    Secret,
    /// Whether to go on (a long run paused, "Press Enter to continue").
    Continue,
    /// A kind a pattern pack names that clibot gives no meaning of its own.
    Other(String),
}

impl PromptKind {
    /// The contract's enum for this kind (OTHER for a pack's own), whose name is the kind's.
    pub fn proto(&self) -> clibot_proto::v1::PromptKind {
        use clibot_proto::v1::PromptKind as P;
        match self {
            PromptKind::Permission => P::Permission,
            PromptKind::Question => P::Question,
            PromptKind::Confirm => P::Confirm,
            PromptKind::Select => P::Select,
            PromptKind::Trust => P::Trust,
            PromptKind::Secret => P::Secret,
            PromptKind::Continue => P::Continue,
            PromptKind::Other(_) => P::Other,
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            PromptKind::Other(k) => k,
            k => k.proto().name(),
        }
    }
}

impl From<&str> for PromptKind {
    fn from(name: &str) -> PromptKind {
        use clibot_proto::v1::PromptKind as P;
        match P::named(name) {
            Some(P::Permission) => PromptKind::Permission,
            Some(P::Question) => PromptKind::Question,
            Some(P::Confirm) => PromptKind::Confirm,
            Some(P::Select) => PromptKind::Select,
            Some(P::Trust) => PromptKind::Trust,
            Some(P::Secret) => PromptKind::Secret,
            Some(P::Continue) => PromptKind::Continue,
            _ => PromptKind::Other(name.to_string()),
        }
    }
}

impl From<String> for PromptKind {
    fn from(name: String) -> PromptKind {
        PromptKind::from(name.as_str())
    }
}

impl From<PromptKind> for String {
    fn from(k: PromptKind) -> String {
        k.as_str().to_string()
    }
}

/// A kind compared with its name (`kind == "deploy"`): how a user's pack and rules name it.
impl PartialEq<&str> for PromptKind {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

impl std::fmt::Display for PromptKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the logs keep instead of a secret typed in answer: its length only.
pub fn secret_placeholder(text: &str) -> String {
    format!("[secret, {} chars]", text.chars().count())
}

/// Where a prompt was seen. The names are what the event log, `--json` and the proto say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptSource {
    /// A hook of the CLI's (Claude Code's `PermissionRequest`, ...), which may wait for the
    /// answer and carry it back.
    Hook,
    /// Read off the screen with the CLI's pattern pack: answered by keys.
    #[default]
    Screen,
    /// The CLI's own API (OpenCode's server), answered through it.
    Api,
}

impl PromptSource {
    /// The contract's enum, whose name is this source's.
    pub fn proto(self) -> clibot_proto::v1::PromptSource {
        use clibot_proto::v1::PromptSource as P;
        match self {
            PromptSource::Hook => P::Hook,
            PromptSource::Screen => P::Screen,
            PromptSource::Api => P::Api,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.proto().name()
    }
}

/// What a prompt is about: only a `command` rule approves a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubjectKind {
    /// A shell command.
    Command,
    /// A file to write or edit.
    Path,
    /// A web address to fetch.
    Url,
}

impl SubjectKind {
    /// The contract's enum, whose name is this kind's.
    pub fn proto(self) -> clibot_proto::v1::SubjectKind {
        use clibot_proto::v1::SubjectKind as P;
        match self {
            SubjectKind::Command => P::Command,
            SubjectKind::Path => P::Path,
            SubjectKind::Url => P::Url,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.proto().name()
    }

    /// The kind named `name` ("command", "path", "url").
    pub fn parse(name: &str) -> Option<SubjectKind> {
        [SubjectKind::Command, SubjectKind::Path, SubjectKind::Url]
            .into_iter()
            .find(|k| k.as_str() == name)
    }
}

/// How the end of a turn was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEnd {
    /// The CLI's completion hook (Claude Code's `Stop`, Codex's `notify`, ...).
    Hook,
    /// The CLI's own API said so (OpenCode's event stream).
    Api,
    /// The screen shows the CLI idle again, read with its pattern pack.
    Screen,
    /// The CLI's records hold the reply of a turn whose hook nobody received (the daemon was
    /// down): read from them.
    Transcript,
    /// Output went quiet and no completion hook came: the screen is the reply.
    Idle,
}

impl TurnEnd {
    /// The contract's enum, whose name is this ending's.
    pub fn proto(self) -> clibot_proto::v1::TurnEnd {
        use clibot_proto::v1::TurnEnd as P;
        match self {
            TurnEnd::Hook => P::Hook,
            TurnEnd::Api => P::Api,
            TurnEnd::Screen => P::Screen,
            TurnEnd::Transcript => P::Transcript,
            TurnEnd::Idle => P::Idle,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.proto().name()
    }
}

/// A question the CLI waits on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    pub id: String,
    pub kind: PromptKind,
    pub text: String,
    pub options: Vec<String>,
    #[serde(default)]
    pub subject: String,
    /// What the subject is; `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_kind: Option<SubjectKind>,
    /// The subject was read off the screen and may not be all of it: nothing automatic.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subject_partial: bool,
    /// Where it was seen.
    pub source: PromptSource,
    /// How an option is chosen with keys.
    #[serde(default)]
    pub answer: AnswerStyle,
    /// Why the guard keeps it for a person; empty when it has no concern.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub warning: String,
    /// Who answers it automatically right now ("rule 2", "decider"); empty: a person.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub auto: String,
    /// The dialog's lines above the question that explain it (a warning, a title), as the
    /// screen shows them; empty when there are none or the prompt was not read off a screen.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub context: String,
    /// When it began to wait (Unix ms): set when it is first published, kept when it is
    /// published again; 0 before that.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub since_ms: i64,
    /// Reminders sent while nobody answered (`remind_after`).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub reminded: u32,
    /// Shown to the admins' chats as well (`escalate_after`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub escalated: bool,
    /// Its `prompt_timeout` passed and its `on_prompt_timeout` was carried out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
}

impl Prompt {
    /// It asks for a password, passphrase or token: its answer is typed but never kept
    /// anywhere, and nothing automatic answers it.
    pub fn is_secret(&self) -> bool {
        self.kind == PromptKind::Secret
    }

    /// Two sightings of the same dialog.
    pub fn same_question(&self, kind: &PromptKind, text: &str, options: &[String]) -> bool {
        self.kind == *kind && self.text == text && self.options == options
    }
}

impl SessionRecord {
    /// When the session was made (ms since the epoch).
    pub fn created_at_ms(&self) -> i64 {
        self.created_at_ms
    }

    /// The event that carried its last reply.
    pub fn last_reply_seq(&self) -> u64 {
        self.last_reply_seq
    }

    /// The tmux target of the CLI's pane: its pane id, or the session for an old record.
    pub fn target(&self) -> &str {
        if self.pane.is_empty() {
            &self.tmux_id
        } else {
            &self.pane
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

/// How a prompt's option is chosen with keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerStyle {
    /// Press the option's number.
    #[default]
    Digit,
    /// Type the option's text and press Enter.
    Line,
    /// Enter accepts (the only option).
    Enter,
    /// Right arrow N-1 times, then Enter (a horizontal button row).
    Arrows,
    /// Press the option's number; the last option is a field for feedback ("No, and tell
    /// Copilot what to do differently"): its number, a line of text (`No`, or the person's own
    /// words), Enter. Free text answers through it too.
    DigitFeedback,
    /// Down arrow N-1 times from the first, then Enter (a vertical menu without numbers, its
    /// options the lines below the question up to the key hints); free text goes to its last
    /// option ("Other (type your answer)").
    Down,
}

/// What started a job's run ([`crate::jobs`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobTrigger {
    /// Its time came.
    #[default]
    Schedule,
    /// Its time passed while the daemon was down, and it runs once now (`missed = "run_once"`).
    Late,
    /// `clibotctl jobs run` or the chat's Run button.
    Manual,
    /// Its `when_idle` session ended a turn with nothing queued.
    Idle,
    /// A signed delivery came to its webhook.
    Webhook,
}

impl JobTrigger {
    /// The contract's enum, whose name is this trigger's.
    pub fn proto(self) -> clibot_proto::v1::JobTrigger {
        use clibot_proto::v1::JobTrigger as P;
        match self {
            JobTrigger::Schedule => P::Schedule,
            JobTrigger::Late => P::Late,
            JobTrigger::Manual => P::Manual,
            JobTrigger::Idle => P::Idle,
            JobTrigger::Webhook => P::Webhook,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.proto().name()
    }
}

/// How a job's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobOutcome {
    /// The turn completed.
    Done,
    /// Its gate said there is nothing to do (exit 1).
    GateSkipped,
    /// The gate failed, the session could not be reached, the CLI erred or ended.
    Failed,
    /// Somebody cancelled the turn.
    Cancelled,
}

impl JobOutcome {
    /// The contract's enum, whose name is this outcome's.
    pub fn proto(self) -> clibot_proto::v1::JobOutcome {
        use clibot_proto::v1::JobOutcome as P;
        match self {
            JobOutcome::Done => P::Done,
            JobOutcome::GateSkipped => P::GateSkipped,
            JobOutcome::Failed => P::Failed,
            JobOutcome::Cancelled => P::Cancelled,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.proto().name()
    }
}

/// Why a session's goal ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalEnd {
    /// Its check passed.
    Reached,
    /// It used its rounds and the check still fails.
    Turns,
    /// It ran out of time.
    Time,
    /// A prompt waits for a person, or a person cancelled the turn.
    Person,
    /// Turned off.
    Off,
    /// The session ended, or the check could not be run.
    Ended,
}

impl GoalEnd {
    /// The contract's enum, whose name is this one's.
    pub fn proto(self) -> clibot_proto::v1::GoalEnd {
        use clibot_proto::v1::GoalEnd as P;
        match self {
            GoalEnd::Reached => P::Reached,
            GoalEnd::Turns => P::Turns,
            GoalEnd::Time => P::Time,
            GoalEnd::Person => P::Person,
            GoalEnd::Off => P::Off,
            GoalEnd::Ended => P::Ended,
        }
    }
}

/// What kind of caller an [`Actor`] is: what decides which rights apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorKind {
    /// The machine's user (clibotctl, the console gateway, a process in a session made on the
    /// machine): every right.
    Local,
    /// A chat user relayed by the gateway, or a process in a session a chat user owns, acting
    /// on its owner's behalf: the access policy decides.
    Chat,
}

impl ActorKind {
    /// The contract's enum, whose name is this kind's.
    pub fn proto(self) -> clibot_proto::v1::ActorKind {
        match self {
            ActorKind::Local => clibot_proto::v1::ActorKind::Local,
            ActorKind::Chat => clibot_proto::v1::ActorKind::Chat,
        }
    }
}

/// Who asks: the local user, or a chat user relayed by the gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Actor {
    pub kind: ActorKind,
    /// "local" for the machine's user; the chat platform otherwise.
    pub platform: String,
    pub user: String,
    pub chat: String,
    /// "session:NAME" when the call came from a process inside that session (the actor is
    /// then its owner); empty otherwise. Kept in the audit log.
    pub via: String,
}

impl Actor {
    /// The key, platform and user the machine's user goes by in owners, binders and the audit
    /// log.
    pub const LOCAL: &'static str = "local";

    pub fn local() -> Actor {
        Actor {
            kind: ActorKind::Local,
            platform: Actor::LOCAL.into(),
            user: Actor::LOCAL.into(),
            chat: String::new(),
            via: String::new(),
        }
    }

    /// A chat user of `platform`, in `chat` (empty when no chat is known).
    pub fn chat_user(platform: &str, user: &str, chat: &str) -> Actor {
        Actor {
            kind: ActorKind::Chat,
            platform: platform.to_string(),
            user: user.to_string(),
            chat: chat.to_string(),
            via: String::new(),
        }
    }

    /// The actor a key names ("local" or "PLATFORM:USER", as [`Actor::key`] makes them);
    /// `None` for anything else.
    pub fn from_key(key: &str) -> Option<Actor> {
        if key == Actor::LOCAL {
            return Some(Actor::local());
        }
        let (platform, user) = key.split_once(':')?;
        Some(Actor::chat_user(platform, user, ""))
    }

    /// "PLATFORM:USER", or "local": how sessions name their owner and who answered.
    pub fn key(&self) -> String {
        match self.kind {
            ActorKind::Local => Actor::LOCAL.into(),
            ActorKind::Chat => format!("{}:{}", self.platform, self.user),
        }
    }

    pub fn is_local(&self) -> bool {
        self.kind == ActorKind::Local
    }
}

/// Tokens, by kind. `input` is what was not read from the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Tokens {
    pub fn add(&mut self, o: &Tokens) {
        self.input += o.input;
        self.output += o.output;
        self.cache_read += o.cache_read;
        self.cache_write += o.cache_write;
    }

    pub fn is_zero(&self) -> bool {
        *self == Tokens::default()
    }

    /// `(kind, count)` for each kind, as metrics and CSV name them.
    pub fn kinds(&self) -> [(&'static str, u64); 4] {
        [
            ("input", self.input),
            ("output", self.output),
            ("cache_read", self.cache_read),
            ("cache_write", self.cache_write),
        ]
    }
}

/// One of a plan's usage windows, as the CLI recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanWindow {
    /// Its length, as people say it: "5h", "7d".
    pub name: String,
    pub used_percent: f64,
    /// When it resets (ms since the epoch); 0: not said.
    pub resets_at_ms: i64,
}

/// A session's worktree, kept in its record.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Worktree {
    /// The repository's top folder (the user's checkout).
    pub repo: PathBuf,
    /// The worktree's folder: where the session works.
    pub path: PathBuf,
    /// Its branch (`clibot/NAME` unless named).
    pub branch: String,
    /// What it was made from, as given (`main`, a tag, a commit) or the branch `HEAD` was on.
    pub base: String,
    /// The commit it was made from.
    pub base_commit: String,
}

#[cfg(test)]
mod kind_tests {
    use super::*;

    /// The enums keep the names the event log, the registry and users' scripts read.
    #[test]
    fn kinds_keep_their_names_on_disk() {
        let p = Prompt {
            kind: PromptKind::Other("deploy".into()),
            source: PromptSource::Api,
            subject_kind: Some(SubjectKind::Url),
            ..Default::default()
        };
        let v = serde_json::to_value(&p).expect("json");
        assert_eq!(
            (&v["kind"], &v["source"], &v["subject_kind"]),
            (
                &serde_json::json!("deploy"),
                &serde_json::json!("api"),
                &serde_json::json!("url")
            )
        );
        let old: Prompt = serde_json::from_str(
            r#"{"id":"p1","kind":"secret","text":"Password:","options":[],"source":"screen"}"#,
        )
        .expect("an old record reads");
        assert!(old.is_secret());
        assert_eq!((old.source, old.subject_kind), (PromptSource::Screen, None));
        assert_eq!(PromptKind::from("deploy").as_str(), "deploy");
        assert_eq!(PromptKind::from("trust"), PromptKind::Trust);
        assert_eq!(
            serde_json::to_value(TurnEnd::Transcript).expect("json"),
            serde_json::json!("transcript")
        );
    }
}
