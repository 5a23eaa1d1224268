//! The CLIs clibot knows: their specs (built-in and `[cli.NAME]`), one adapter per CLI,
//! screen detection with pattern packs, the program check, and the local HTTP client OpenCode's
//! API is reached with. May not touch: sessions, tmux, the store — an adapter interprets, the
//! daemon acts.
//!
//! What differs between CLIs, behind one small trait: how to launch one so that its hooks reach
//! the daemon, what its hook payloads mean, and how a decision goes back through a hook.
//! Screens are read by [`crate::cli::detect`] with the CLI's pattern pack; answers by keys come from
//! the prompt itself ([`answer_strokes`]).

pub mod detect;
pub mod local_http;
pub mod program;
pub mod running;
pub mod version;

use serde_json::Value;

use crate::cli::detect::AnswerStyle;
use crate::cli::running::Running;
use crate::keys::Key;
use crate::model::Prompt;

/// Set in the spec a session's records are read with (never in a CLI's environment): the
/// session's private directory of files, where an adapter may have placed its launch's state
/// (Gemini CLI's per-session home).
pub const SESSION_FILES: &str = "CLIBOT_SESSION_FILES";

/// Where a CLI keeps its records: its setting `var` (`CODEX_HOME`) in the session's spec, else
/// in the daemon's environment, else `below_home` in the spec's (or the daemon's) `HOME`.
pub(crate) fn records_dir(
    cli: Option<&CliSpec>,
    var: &str,
    below_home: &str,
) -> Option<std::path::PathBuf> {
    let env = |k: &str| {
        cli.and_then(|c| c.env.get(k).cloned())
            .or_else(|| std::env::var(k).ok())
    };
    match env(var) {
        Some(d) => Some(d.into()),
        None => Some(std::path::PathBuf::from(env("HOME")?).join(below_home)),
    }
}

/// A CLI's own conversation id, when it can name a file of its records: not empty, and no
/// path of its own (`/`, `..`).
pub(crate) fn record_id(id: &str) -> Option<&str> {
    (!id.is_empty() && !id.contains('/') && !id.contains("..")).then_some(id)
}

/// The tail of a CLI's transcript (its last [`TRANSCRIPT_TAIL`] bytes, whole lines), read
/// without following a link a session could plant.
///
/// [`TRANSCRIPT_TAIL`]: crate::confine::beneath::TRANSCRIPT_TAIL
pub(crate) fn transcript_tail(path: &std::path::Path) -> Option<String> {
    crate::confine::beneath::read_record_tail(path, crate::confine::beneath::TRANSCRIPT_TAIL).ok()
}

/// What a launch needs to know.
pub struct LaunchContext<'a> {
    /// The shell command a hook runs (`'/path/clibotctl' hook --cli NAME`).
    pub hook_command: &'a str,
    /// The CLI session id clibot chose (a UUID).
    pub cli_session_id: &'a str,
    /// How long a permission hook may wait for a person, in seconds.
    pub permission_wait_secs: u64,
    /// The hook command as an argv (for CLIs that run it without a shell and append the payload
    /// as the last argument).
    pub hook_argv: &'a [String],
    /// A private directory where the adapter may place per-session files (settings).
    pub files_dir: &'a std::path::Path,
    /// The home directory the CLI will see (its `HOME`).
    pub home: &'a std::path::Path,
    /// A free port on 127.0.0.1 for a CLI that serves an API (0 for the others).
    pub api_port: u16,
    /// The password that API must demand (the session's hook token).
    pub api_secret: &'a str,
    /// Continue the CLI's previous conversation (a restart) rather than start a new one.
    pub resume: bool,
    /// The conversation to continue, when one was named (`spawn --resume ID`, `resume`);
    /// empty: the CLI's own choice (clibot's id for Claude Code, the latest for the others).
    pub conversation: &'a str,
    /// The environment the CLI is given by its `[cli.NAME] env` and the spawn request (the
    /// latter wins), before clibot's own variables.
    pub env: &'a std::collections::BTreeMap<String, String>,
}

impl LaunchContext<'_> {
    /// A variable of [`LaunchContext::env`].
    pub fn env_value(&self, key: &str) -> Option<&str> {
        self.env.get(key).map(String::as_str)
    }
}

/// Extra arguments and environment for a launch.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Launch {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Files to write (mode 0600) before the CLI starts.
    pub files: Vec<(std::path::PathBuf, String)>,
    /// Symbolic links to create (link, target) before the CLI starts.
    pub links: Vec<(std::path::PathBuf, std::path::PathBuf)>,
    /// Directories to create (mode 0700, when missing) before the links: targets the CLI
    /// would create itself on a first run.
    pub dirs: Vec<std::path::PathBuf>,
}

/// What a hook call means.
#[derive(Debug, Clone, PartialEq)]
pub enum HookSignal {
    /// The CLI accepted the user's input: a turn started.
    TurnStarted,
    /// A turn ended with this final reply.
    TurnCompleted { text: String },
    /// A turn ended; its reply is in the CLI's records at `path`, which the CLI may write only
    /// after the hook returns: the daemon reads it with `read(path, stamp)` (`None`: not there
    /// yet) for a few seconds, after answering the hook.
    TurnCompletedIn {
        path: std::path::PathBuf,
        stamp: i64,
        read: ReplyReader,
    },
    /// The CLI asks for permission or asks a question; the hook can carry the answer back.
    Prompt {
        kind: String,
        text: String,
        options: Vec<String>,
        subject: String,
        /// The hook waits for the answer and carries it back (else it returns at once and the
        /// answer goes by keys).
        wait: bool,
    },
    /// The turn ended with an error.
    Error { kind: String, message: String },
    /// The CLI waits for input again: a turn that ended without its completion hook (refused
    /// at a dialog, cancelled at the desk) is over, if the screen agrees.
    Idle,
    /// The plan's windows as the CLI knows them now (Claude Code's status line): kept for the
    /// next counted turn.
    PlanWindows(Vec<crate::usage::PlanWindow>),
    /// Nothing the daemon acts on.
    Ignore,
}

/// Reads a turn's reply from a CLI's records ([`HookSignal::TurnCompletedIn`]). Code, not
/// data: any two compare equal.
#[derive(Clone, Copy)]
pub struct ReplyReader(pub fn(&std::path::Path, i64) -> Option<String>);

impl PartialEq for ReplyReader {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for ReplyReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReplyReader")
    }
}

/// A chosen answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// Option index (0-based).
    Option(usize),
    /// Free text for an open question.
    Text(String),
}

/// One CLI's integration.
pub trait Adapter: Send + Sync {
    /// "generic", "claude", ...
    fn name(&self) -> &'static str;
    /// The keys that interrupt a running turn (Ctrl-C for most programs).
    fn cancel_keys(&self) -> &'static [&'static str] {
        &["C-c"]
    }
    /// Keys pressed a moment after the interrupt, to empty the input box of what the CLI put
    /// back in it (Claude Code returns the interrupted message to its prompt).
    fn after_cancel_keys(&self) -> &'static [&'static str] {
        &[]
    }
    /// True when turn completion comes from a hook; otherwise from output going quiet.
    fn completes_by_hook(&self) -> bool {
        false
    }
    /// True when a hook tells that the CLI took a prompt (Claude Code's `UserPromptSubmit`,
    /// Gemini CLI's `BeforeAgent`), typed by clibot or at the desk. Then only that hook (or
    /// clibot's own input) starts a turn: a busy frame drawn after the completion hook is a
    /// leftover, not a new turn.
    fn signals_turn_start(&self) -> bool {
        false
    }
    /// True when the CLI serves a local API that the daemon follows for turns and prompts and
    /// answers through (`session::opencode_link`); it needs [`LaunchContext::api_port`].
    fn serves_api(&self) -> bool {
        false
    }
    /// True when the CLI keeps conversations that a restart can resume (its launch takes
    /// [`LaunchContext`]'s resume request); a shell or any program clibot only types into
    /// keeps none.
    fn resumes_conversations(&self) -> bool {
        true
    }
    /// Arguments and environment that wire the CLI's hooks to the daemon.
    fn launch(&self, _ctx: &LaunchContext<'_>) -> Launch {
        Launch::default()
    }
    /// Interprets a hook call.
    fn hook(&self, _event: &str, _payload: &Value) -> HookSignal {
        HookSignal::Ignore
    }
    /// The conversation process `r` of this CLI holds, from its command line and its own
    /// records; `None` when that cannot be told for certain (several, or none): a wrong guess
    /// would resume the wrong conversation.
    fn running_conversation(&self, _r: &Running<'_>) -> Option<String> {
        None
    }
    /// True when its hooks can carry a person's answer ([`Adapter::decision`]): a prompt of
    /// one of its processes that clibot does not run can then be answered from a chat.
    fn answers_through_hooks(&self) -> bool {
        false
    }
    /// The hook's output that answers `prompt` with `choice`, when the CLI accepts answers that
    /// way (the hook is then still waiting).
    fn decision(&self, _prompt: &Prompt, _choice: &Choice, _payload: &Value) -> Option<String> {
        None
    }
    /// The final reply of a turn whose completion hook nobody received (the daemon was down),
    /// from the CLI's own records.
    fn recover_reply(
        &self,
        _rec: &crate::model::SessionRecord,
        _cli: Option<&crate::cli::CliSpec>,
    ) -> Option<String> {
        None
    }
    /// What the session's last turn cost, from the CLI's own records; `None` where it keeps
    /// none (a generic CLI) or they hold nothing for the turn.
    fn turn_usage(
        &self,
        _rec: &crate::model::SessionRecord,
        _cli: Option<&crate::cli::CliSpec>,
    ) -> Option<crate::usage::TurnUsage> {
        None
    }
    /// The environment variables that hold an API key for the CLI: set for a session, its
    /// turns are billed per token, and money is estimated for them (`[usage] money = "api"`).
    fn api_key_vars(&self) -> &'static [&'static str] {
        &[]
    }
    /// The home of the CLI's records for a session started with `cli` (`CLAUDE_CONFIG_DIR`,
    /// `CODEX_HOME`), and the file below it its resume reads session `rec`'s conversation
    /// from: a switch of account profile copies that file to the same place in the other
    /// account's home, so the conversation goes on there. `None` where the CLI keeps none
    /// clibot knows (the switch then starts a new conversation with a handoff).
    fn conversation_record(
        &self,
        _rec: &crate::model::SessionRecord,
        _cli: Option<&crate::cli::CliSpec>,
    ) -> Option<(std::path::PathBuf, Option<std::path::PathBuf>)> {
        None
    }
}

mod spec;
pub(crate) use spec::builtin_clis;
pub use spec::{
    CliOverride, CliSpec, OnPromptTimeout, OnTurnTimeout, Profile, PromptPolicy, RestartPolicy,
};
mod claude;
mod codex;
mod copilot;
mod gemini;
pub mod opencode;
pub mod option_words;
mod qwen;

pub use claude::{Claude, claude_transcript_reply};
pub use codex::Codex;
pub use copilot::{Copilot, copilot_transcript_reply};
pub use gemini::{Gemini, gemini_messages, gemini_transcript_reply};
pub use opencode::OpenCode;
pub use qwen::{Qwen, qwen_chats, qwen_transcript_reply};

/// Any program: completion by quiescence, prompts by patterns.
pub struct Generic;

impl Adapter for Generic {
    fn name(&self) -> &'static str {
        "generic"
    }
    fn resumes_conversations(&self) -> bool {
        false
    }
}

/// The adapter for a CLI, by adapter name: one row per CLI of `clibot_proto::clis`, whose
/// code (hooks, records, screens) lives in its own file here.
pub fn adapter(name: &str) -> Box<dyn Adapter> {
    match name {
        "claude" => Box::new(Claude),
        "gemini" => Box::new(Gemini),
        "codex" => Box::new(Codex),
        "opencode" => Box::new(OpenCode),
        "copilot" => Box::new(Copilot),
        "qwen" => Box::new(Qwen),
        _ => Box::new(Generic),
    }
}

/// Known adapter names, for config validation: `generic` and every AI CLI's.
pub fn adapter_names() -> Vec<&'static str> {
    std::iter::once("generic")
        .chain(clibot_proto::clis::names())
        .collect()
}

/// Turns the person's answer into a choice: an option number, a word ("yes", "no",
/// "always"), an option's label, or free text where the prompt takes it.
pub fn parse_choice(answer: &str, p: &Prompt) -> Result<Choice, String> {
    if p.is_secret() {
        // Typed exactly as given (spaces are part of a password); one line.
        let a = answer.strip_suffix('\n').unwrap_or(answer);
        let a = a.strip_suffix('\r').unwrap_or(a);
        if a.contains(['\n', '\r']) {
            return Err("a password or secret is one line: send it without line breaks".into());
        }
        return Ok(Choice::Text(a.to_string()));
    }
    let a = answer.trim();
    let n = p.options.len();
    if a.is_empty() {
        return Err("the answer is empty: give an option number or text".into());
    }
    if let Ok(i) = a.parse::<usize>() {
        if (1..=n).contains(&i) {
            return Ok(Choice::Option(i - 1));
        }
        return Err(format!(
            "there is no option {i}: choose 1 to {n} ({})",
            numbered(&p.options)
        ));
    }
    let lower = a.to_lowercase();
    let find = |pred: &dyn Fn(&str) -> bool| p.options.iter().position(|o| pred(&o.to_lowercase()));
    // Where free words are feedback that says no, plainer ways of saying yes are yes.
    if p.answer == AnswerStyle::DigitFeedback
        && n > 0
        && matches!(
            lower.trim_end_matches(['.', '!']),
            "yep"
                | "yeah"
                | "sure"
                | "go"
                | "go ahead"
                | "do it"
                | "yes please"
                | "please do"
                | "run it"
                | "proceed"
                | "approved"
                | "allowed"
                | "👍"
        )
    {
        return Ok(Choice::Option(0));
    }
    // Yes and no by the options' words, never by their place ([`option_words`]).
    let pick = match lower.as_str() {
        "y" | "yes" | "ok" | "allow" | "approve" => option_words::yes_option(&p.options),
        "n" | "no" | "deny" | "reject" => option_words::deny_option(&p.options),
        "always" | "a" => {
            find(&|o| o.contains("always") || o.contains("don't ask") || o.contains("this session"))
        }
        _ => find(&|o| o == lower),
    };
    if let Some(i) = pick {
        return Ok(Choice::Option(i));
    }
    // Words that pick no option: an open question's answer, or the feedback that says no.
    if p.kind == crate::model::PromptKind::Question
        || (p.answer == AnswerStyle::DigitFeedback && n > 0)
    {
        return Ok(Choice::Text(a.to_string()));
    }
    Err(format!(
        "{a:?} does not answer this prompt: choose 1 to {n} ({})",
        numbered(&p.options)
    ))
}

fn numbered(options: &[String]) -> String {
    options
        .iter()
        .enumerate()
        .map(|(i, o)| format!("{}. {o}", i + 1))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A keystroke or literal text, in the order to deliver.
#[derive(Clone, PartialEq)]
pub enum Stroke {
    Key(Key),
    Text(String),
    /// A password or secret: typed through a tmux buffer fed on stdin, so that it never
    /// appears in a process's arguments, and never logged.
    Secret(String),
}

impl std::fmt::Debug for Stroke {
    /// A secret shows as its length only, wherever strokes are printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stroke::Key(k) => f.debug_tuple("Key").field(k).finish(),
            Stroke::Text(t) => f.debug_tuple("Text").field(t).finish(),
            Stroke::Secret(t) => f
                .debug_tuple("Secret")
                .field(&crate::model::secret_placeholder(t))
                .finish(),
        }
    }
}

/// The keys that answer `prompt` with `choice` on screen.
pub fn answer_strokes(p: &Prompt, choice: &Choice) -> Result<Vec<Stroke>, String> {
    let enter = Stroke::Key(Key::Named("Enter".into()));
    if p.is_secret() {
        return match choice {
            Choice::Text(t) => Ok(vec![Stroke::Secret(t.clone()), enter]),
            Choice::Option(_) => {
                Err("this prompt asks for a password or secret: send it as text".into())
            }
        };
    }
    Ok(match (p.answer, choice) {
        (AnswerStyle::DigitFeedback, Choice::Option(i)) if *i < 9 => {
            let digit = Stroke::Key(Key::Char(char::from(b'1' + *i as u8)));
            if *i + 1 == p.options.len() {
                vec![digit, Stroke::Text("No".into()), enter]
            } else {
                vec![digit]
            }
        }
        (AnswerStyle::DigitFeedback, Choice::Text(t)) if (1..=9).contains(&p.options.len()) => {
            let last = char::from(b'0' + p.options.len() as u8);
            let line = t.replace(['\n', '\r'], " ");
            vec![Stroke::Key(Key::Char(last)), Stroke::Text(line), enter]
        }
        (AnswerStyle::Digit, Choice::Option(i)) if *i < 9 => {
            vec![Stroke::Key(Key::Char(char::from(b'1' + *i as u8)))]
        }
        (AnswerStyle::Digit | AnswerStyle::DigitFeedback, Choice::Option(i)) => {
            // Menus longer than nine: move down from the first option.
            let mut v = vec![Stroke::Key(Key::Named("Home".into()))];
            v.extend((0..*i).map(|_| Stroke::Key(Key::Named("Down".into()))));
            v.push(enter);
            v
        }
        (AnswerStyle::Line, Choice::Option(i)) => {
            vec![
                Stroke::Text(p.options.get(*i).cloned().unwrap_or_default()),
                enter,
            ]
        }
        (AnswerStyle::Line, Choice::Text(t)) => vec![Stroke::Text(t.clone()), enter],
        (AnswerStyle::Enter, _) => vec![enter],
        (AnswerStyle::Down, Choice::Option(i)) => {
            let mut v: Vec<Stroke> = (0..*i)
                .map(|_| Stroke::Key(Key::Named("Down".into())))
                .collect();
            v.push(enter);
            v
        }
        // Free words go to the menu's own field ("Other (type your answer)"), when it has one.
        (AnswerStyle::Down, Choice::Text(t))
            if p.options.last().is_some_and(|o| {
                let o = o.to_lowercase();
                o.starts_with("other") || o.contains("type your")
            }) =>
        {
            let mut v: Vec<Stroke> = (1..p.options.len())
                .map(|_| Stroke::Key(Key::Named("Down".into())))
                .collect();
            v.push(Stroke::Text(t.replace(['\n', '\r'], " ")));
            v.push(enter);
            v
        }
        (AnswerStyle::Arrows, Choice::Option(i)) => {
            let mut v: Vec<Stroke> = (0..*i)
                .map(|_| Stroke::Key(Key::Named("Right".into())))
                .collect();
            v.push(enter);
            v
        }
        (_, Choice::Text(_)) => {
            return Err("this prompt takes an option number, not free text".into());
        }
    })
}

/// A user's JSON settings file (Gemini CLI, Qwen Code), read as those CLIs read it: comments
/// (`//`, `/* */`) allowed. An object, or `{}` — said in the log — when it is missing or
/// unreadable, so that the session still starts.
pub fn read_settings(path: &std::path::Path) -> Value {
    let Ok(text) = crate::confine::beneath::read_record(path, 4 << 20) else {
        return Value::Object(Default::default());
    };
    match serde_json::from_str::<Value>(&strip_json_comments(&text)) {
        Ok(v) if v.is_object() => v,
        _ => {
            tracing::warn!(path = %path.display(), "settings that are not a JSON object are left out of the session's own copy");
            Value::Object(Default::default())
        }
    }
}

/// Adds clibot's hook (`entry(event)`) to each of `events` in a settings object's
/// `hooks.EVENT` lists, after the user's own hooks, which keep running first.
pub(crate) fn add_hooks(settings: &mut Value, events: &[&str], entry: impl Fn(&str) -> Value) {
    if !settings.get("hooks").is_some_and(Value::is_object) {
        settings["hooks"] = Value::Object(Default::default());
    }
    for event in events {
        match settings
            .pointer_mut(&format!("/hooks/{event}"))
            .and_then(Value::as_array_mut)
        {
            Some(list) => list.push(entry(event)),
            None => settings["hooks"][*event] = Value::Array(vec![entry(event)]),
        }
    }
}

/// Links in a per-session home `private` to each entry of the user's CLI home `user` but those
/// named in `except` (what the session's own copy replaces).
pub(crate) fn link_entries(
    user: &std::path::Path,
    private: &std::path::Path,
    except: &[&str],
) -> Vec<(std::path::PathBuf, std::path::PathBuf)> {
    std::fs::read_dir(user)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| !except.iter().any(|x| e.file_name() == *x))
                .map(|e| (private.join(e.file_name()), e.path()))
                .collect()
        })
        .unwrap_or_default()
}

/// `text` with its `//` and `/* */` comments blanked out (never inside strings).
fn strip_json_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                }
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for n in chars.by_ref() {
                    if last == '*' && n == '/' {
                        break;
                    }
                    last = n;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

/// Recognises common failure messages.
pub fn classify_error(message: &str) -> &'static str {
    let m = message.to_lowercase().replace('\u{2019}', "'");
    // A plan's limit first: its messages may also carry a rate-limit error code (Claude Code's
    // `StopFailure` says `rate_limit` for both), and Claude Code says of a plain rate limit
    // that it is "not your usage limit".
    if (m.contains("you've hit your") && m.contains("limit"))
        || m.contains("usage limit reached")
        || m.contains("quota exhausted")
        || m.contains("exhausted your daily quota")
    {
        return "usage_limit";
    }
    if m.contains("rate limit")
        || m.contains("rate_limit")
        || m.contains("429")
        || m.contains("overloaded")
    {
        "rate_limit"
    } else if (m.contains("usage limit") && !m.contains("not your usage limit"))
        || m.contains("credit balance")
        || m.contains("limit reached")
    {
        "usage_limit"
    } else if m.contains("auth")
        || m.contains("api key")
        || m.contains("401")
        || m.contains("login")
    {
        "auth"
    } else if m.contains("connection") || m.contains("network") || m.contains("timeout") {
        "network"
    } else {
        "other"
    }
}

/// A launch context for the adapters' tests: no API, no resume, an empty environment.
#[cfg(test)]
pub(crate) fn test_ctx<'a>(
    hook_command: &'a str,
    cli_session_id: &'a str,
    files_dir: &'a std::path::Path,
    home: &'a std::path::Path,
) -> LaunchContext<'a> {
    static NO_ENV: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    LaunchContext {
        hook_command,
        cli_session_id,
        permission_wait_secs: 600,
        hook_argv: &[],
        files_dir,
        home,
        api_port: 0,
        api_secret: "",
        resume: false,
        conversation: "",
        env: &NO_ENV,
    }
}

/// A prompt for the adapters' tests.
#[cfg(test)]
pub(crate) fn test_prompt(kind: &str, options: &[&str], answer: AnswerStyle) -> Prompt {
    Prompt {
        id: "p1".into(),
        kind: kind.into(),
        text: "?".into(),
        options: options.iter().map(|s| s.to_string()).collect(),
        subject: String::new(),
        source: crate::model::PromptSource::Screen,
        answer,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_typed_as_given_and_never_printed() {
        let p = test_prompt("secret", &[], AnswerStyle::Line);
        // Digits and "yes" would pick options elsewhere; spaces are part of a password.
        for a in ["1", "yes", " two words ", "$HOME;rm -rf ~"] {
            assert_eq!(
                parse_choice(a, &p),
                Ok(Choice::Text(a.to_string())),
                "{a:?}"
            );
        }
        assert_eq!(parse_choice("pw\n", &p), Ok(Choice::Text("pw".into())));
        assert!(parse_choice("a\nb", &p).is_err());
        let strokes = answer_strokes(&p, &Choice::Text("hunter2".into())).expect("strokes");
        assert_eq!(
            strokes,
            [
                Stroke::Secret("hunter2".into()),
                Stroke::Key(Key::Named("Enter".into()))
            ]
        );
        let shown = format!("{strokes:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("[secret, 7 chars]"),
            "{shown}"
        );
        assert!(answer_strokes(&p, &Choice::Option(0)).is_err());
    }

    #[test]
    fn choices() {
        let p = test_prompt(
            "permission",
            &["Yes", "Yes, and always allow access to proj/", "No"],
            AnswerStyle::Digit,
        );
        assert_eq!(parse_choice("1", &p), Ok(Choice::Option(0)));
        assert_eq!(parse_choice("yes", &p), Ok(Choice::Option(0)));
        assert_eq!(parse_choice("no", &p), Ok(Choice::Option(2)));
        assert_eq!(parse_choice("always", &p), Ok(Choice::Option(1)));
        assert!(
            parse_choice("4", &p)
                .expect_err("no option 4")
                .contains("1 to 3")
        );
        assert!(parse_choice("maybe", &p).is_err());
        let q = test_prompt("question", &["Postgres", "SQLite"], AnswerStyle::Digit);
        assert_eq!(parse_choice("sqlite", &q), Ok(Choice::Option(1)));
        assert_eq!(
            parse_choice("MySQL please", &q),
            Ok(Choice::Text("MySQL please".into()))
        );
        let yn = test_prompt("confirm", &["y", "n"], AnswerStyle::Line);
        assert_eq!(parse_choice("n", &yn), Ok(Choice::Option(1)));
        assert_eq!(parse_choice("yes", &yn), Ok(Choice::Option(0)));
        // Yes and no go by the options' words, in the packs' languages, never by their place:
        // "no" to this menu once chose "wipe the database", the last option.
        let menu = test_prompt(
            "menu",
            &[
                "1) deploy to staging",
                "2) deploy to production",
                "3) wipe the database",
            ],
            AnswerStyle::Digit,
        );
        for a in ["no", "n", "deny", "yes", "y", "ok"] {
            let e = parse_choice(a, &menu).expect_err("no option says it");
            assert!(e.contains("choose 1 to 3"), "{a}: {e}");
        }
        let zh = test_prompt("confirm", &["是", "否"], AnswerStyle::Digit);
        assert_eq!(parse_choice("no", &zh), Ok(Choice::Option(1)));
        assert_eq!(parse_choice("yes", &zh), Ok(Choice::Option(0)));
        let wider_first = test_prompt(
            "permission",
            &["Yes, allow all edits during this session", "Yes", "No"],
            AnswerStyle::Digit,
        );
        assert_eq!(parse_choice("yes", &wider_first), Ok(Choice::Option(1)));
    }

    #[test]
    fn feedback_and_menus() {
        let p = test_prompt(
            "permission",
            &[
                "Yes",
                "Yes, and don't ask again",
                "No, and tell Copilot what to do differently (Esc to stop)",
            ],
            AnswerStyle::DigitFeedback,
        );
        assert_eq!(parse_choice("go ahead", &p), Ok(Choice::Option(0)));
        assert_eq!(parse_choice("no", &p), Ok(Choice::Option(2)));
        assert_eq!(
            answer_strokes(&p, &Choice::Option(2)),
            Ok(vec![
                Stroke::Key(Key::Char('3')),
                Stroke::Text("No".into()),
                Stroke::Key(Key::Named("Enter".into()))
            ])
        );
        assert_eq!(
            parse_choice("use echo instead", &p),
            Ok(Choice::Text("use echo instead".into()))
        );
        assert_eq!(
            answer_strokes(&p, &Choice::Text("use echo\ninstead".into())),
            Ok(vec![
                Stroke::Key(Key::Char('3')),
                Stroke::Text("use echo instead".into()),
                Stroke::Key(Key::Named("Enter".into()))
            ])
        );
        let menu = test_prompt(
            "question",
            &["Red", "Blue", "Other (type your answer)"],
            AnswerStyle::Down,
        );
        assert_eq!(
            answer_strokes(&menu, &Choice::Option(1)),
            Ok(vec![
                Stroke::Key(Key::Named("Down".into())),
                Stroke::Key(Key::Named("Enter".into()))
            ])
        );
        assert_eq!(
            answer_strokes(&menu, &Choice::Text("Green".into())).map(|s| s.len()),
            Ok(4)
        );
        let closed = test_prompt("question", &["Red", "Blue"], AnswerStyle::Down);
        assert!(
            answer_strokes(&closed, &Choice::Text("Green".into())).is_err(),
            "no field for free words: never the last option instead"
        );
    }

    #[test]
    fn strokes() {
        let p = test_prompt("permission", &["Yes", "No"], AnswerStyle::Digit);
        assert_eq!(
            answer_strokes(&p, &Choice::Option(1)),
            Ok(vec![Stroke::Key(Key::Char('2'))])
        );
        let yn = test_prompt("confirm", &["y", "n"], AnswerStyle::Line);
        assert_eq!(
            answer_strokes(&yn, &Choice::Option(0)),
            Ok(vec![
                Stroke::Text("y".into()),
                Stroke::Key(Key::Named("Enter".into()))
            ])
        );
        let row = test_prompt(
            "permission",
            &["Allow once", "Allow always", "Reject"],
            AnswerStyle::Arrows,
        );
        assert_eq!(
            answer_strokes(&row, &Choice::Option(2)).expect("ok").len(),
            3
        );
        assert!(answer_strokes(&p, &Choice::Text("x".into())).is_err());
    }

    #[test]
    fn settings_may_hold_comments() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("settings.json");
        std::fs::write(
            &p,
            "{\n  // the provider\n  \"url\": \"http://x//y\", /* a \"quoted\" note */\n  \"n\": 1\n}",
        )
        .expect("write");
        assert_eq!(
            read_settings(&p),
            serde_json::json!({"url": "http://x//y", "n": 1})
        );
        std::fs::write(&p, "[1]").expect("write");
        assert_eq!(read_settings(&p), serde_json::json!({}));
        assert_eq!(read_settings(&d.path().join("none")), serde_json::json!({}));
    }

    #[test]
    fn errors_are_classified() {
        assert_eq!(
            classify_error("API Error: 429 rate_limit_error"),
            "rate_limit"
        );
        assert_eq!(classify_error("Invalid API key"), "auth");
        assert_eq!(classify_error("Credit balance is too low"), "usage_limit");
        assert_eq!(classify_error("something odd"), "other");
        // Claude Code's StopFailure says `rate_limit` for a plan's limit too: its words decide.
        assert_eq!(
            classify_error(
                "rate_limit: You've hit your 5-hour limit · resets 6:58pm (Europe/Paris)"
            ),
            "usage_limit"
        );
        assert_eq!(
            classify_error("You’ve hit your usage limit. Try again at 7:00 PM."),
            "usage_limit"
        );
        assert_eq!(
            classify_error(
                "rate_limit: API Error: Server is temporarily limiting requests (not your usage limit)"
            ),
            "rate_limit"
        );
    }
}
