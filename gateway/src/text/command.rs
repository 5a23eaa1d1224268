//! Telling gateway commands apart from text meant for the CLI.
//!
//! The chat is mostly a remote keyboard for the CLI, so the default is "send it to the
//! CLI as typed". Only messages that start with a prefix (default `!!`) followed by a
//! letter are gateway commands. `/commands` are deliberately **not** gateway commands:
//! `/compact`, `/cost`, `/clear` and friends belong to the CLI and are forwarded untouched
//! (ccbot does the same), and a prefix nobody types by accident keeps it that way.
//!
//! Rules, in order ([`CommandParser::route`]):
//!
//! 1. Leading whitespace is ignored when looking for the prefix.
//! 2. The prefix typed twice (`!!!!ls`) sends the rest with one prefix (`!!ls`) to the CLI;
//!    that is how to send the prefix itself (a shell's `!!`, say). A longer run of the
//!    prefix's first character (`!!!!!`, or `...` with prefix `.`) is text, sent as is.
//! 3. The prefix alone is an error that lists the commands.
//! 4. The prefix, optional spaces, then an ASCII letter: a gateway command. The command
//!    word is case-insensitive (phone keyboards capitalise); arguments are kept as typed.
//!    Unknown words and bad arguments are errors with a usage line, never forwarded.
//! 5. Anything else after the prefix (`!!!`, `!!?`) goes to the CLI untouched.
//! 6. While the CLI shows a prompt, a message that is just `1`–`9`, `y`, `yes`, `n` or
//!    `no` is an answer to it ([`prompt_answer`]); buttons are the primary UX, this is
//!    the typed fallback.
//! 7. Everything else goes to the CLI untouched (the original text, whitespace included).

use serde::{Deserialize, Serialize};

mod choices;
mod error;
pub mod job_add;
mod names;
mod new;
mod suggest;
pub use choices::{JobAction, UsageSpan, WorktreeWord};
pub use error::CommandError;
use error::command_list;
pub use names::CommandName;
use suggest::suggest;

/// The default command prefix.
pub const DEFAULT_PREFIX: &str = "!!";
/// Longest session or CLI name (the daemon's rule: `[A-Za-z0-9_-]{1,64}`).
pub const MAX_NAME_LEN: usize = 64;
/// Most lines `screen N` may ask for (the daemon's capture limit).
pub const MAX_SCREEN_LINES: u32 = 100_000;
/// Most entries `history N` may ask for.
pub const MAX_HISTORY: u32 = 200;
/// Entries `history` shows when not told.
pub const DEFAULT_HISTORY: u32 = 20;
/// Most keys in one `keys` command.
pub const MAX_KEYS: usize = 64;
/// Longest prefix accepted.
pub const MAX_PREFIX_LEN: usize = 8;

/// A parsed gateway command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// `help [COMMAND]`: the command list, or one command's usage.
    Help {
        /// The command asked about.
        topic: Option<CommandName>,
    },
    /// `sessions`: list sessions.
    Sessions,
    /// `discover`: the AI CLIs running on the machine outside clibot (admins).
    Discover,
    /// `cancel [NAME]`: interrupt the running turn.
    Cancel {
        /// A valid session name; none: the chat's session.
        name: Option<String>,
    },
    /// `queue`: the inputs queued behind the running turn.
    Queue,
    /// `drop [N|all]`: take queued input back (none: all).
    Drop {
        /// The position (from 1); none: all.
        n: Option<u32>,
    },
    /// `pending`: every prompt waiting, in the sessions the user may see, with its buttons.
    Pending,
    /// `adopt ID [NAME]`: take over a CLI `discover` found in a tmux pane, where it runs.
    Adopt {
        /// The found id (CLI-PID).
        id: String,
        /// The session's name; none: the id.
        name: Option<String>,
    },
    /// `use NAME`: make NAME the session this chat talks to.
    Use {
        /// A valid session name.
        name: String,
    },
    /// `new NAME CLI [DIR]`: start a CLI in a new session.
    New {
        /// A valid session name.
        name: String,
        /// A valid CLI name (`claude`, `codex`, …); the daemon checks it exists.
        cli: String,
        /// The working directory as typed (the rest of the line, surrounding quotes
        /// removed); `~` is not expanded here.
        dir: Option<String>,
        /// An account profile (`--profile P`: `[cli.NAME.profiles.P]`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
        /// A last word `delegate`: hand the work to another CLI when this one hits its limits.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        delegate: bool,
        /// `wt[=BRANCH]`: in a git worktree of its own (`""`: the branch `clibot/NAME`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worktree: Option<String>,
    },
    /// `whoami`: the sender's platform id (for allowlists).
    Whoami,
    /// `status`: the current session's state.
    Status,
    /// `screen [N]`: what the pane shows, or its last N lines.
    Screen {
        /// 1..=[`MAX_SCREEN_LINES`]; `None` for the visible screen.
        lines: Option<u32>,
    },
    /// `shot`: a picture of the screen.
    Shot,
    /// `get [--force] PATH`: a file from the session's directory.
    Get {
        /// As typed: relative to the session's directory, or absolute inside it.
        path: String,
        /// A git-ignored file, or a text in which the redactor finds a secret, too (admins).
        force: bool,
    },
    /// `keys KEY…`: press named keys (`Enter`, `Escape`, `C-c`, `Up`, `y`, `1`, …).
    Keys {
        /// 1..=[`MAX_KEYS`] key names, as typed; the daemon validates them.
        keys: Vec<String>,
    },
    /// `stop [NAME]`: stop the current session, or NAME.
    Stop {
        /// A valid session name.
        name: Option<String>,
    },
    /// `ask TEXT`: a new session of the CLI the routes (or the decider) choose, with TEXT.
    Ask {
        /// The task, as typed.
        text: String,
    },
    /// `start NAME`: start a session declared in the machine's config.
    Start {
        /// A valid session name.
        name: String,
    },
    /// `restart [NAME] [fresh]`: start the CLI again, resuming its conversation (or a new one).
    Restart {
        /// A valid session name.
        name: Option<String>,
        /// Start a new conversation.
        fresh: bool,
    },
    /// `last`: repeat the last reply.
    Last,
    /// `answer CHOICE`: answer the waiting prompt.
    Answer {
        /// The rest of the message, trimmed (may contain spaces and newlines).
        choice: String,
    },
    /// `pair [CODE]`: pair this chat with the gateway.
    Pair {
        /// The code, upper-cased (codes are shown upper-case; phones type lower-case).
        code: Option<String>,
    },
    /// `share NAME USER [off]`: let another chat user use session NAME (or stop letting them).
    Share {
        name: String,
        /// "PLATFORM:USER", or a bare user id on this platform.
        user: String,
        revoke: bool,
    },
    /// `history [N]`: this chat's last N messages, both ways.
    History {
        /// 1..=[`MAX_HISTORY`]; `None` for [`DEFAULT_HISTORY`].
        n: Option<u32>,
    },
    /// `rules`: the approval rules and how often each fired, the guard, decider, delegation.
    Rules,
    /// `delegate [CLI]`: hand the current session's work to another CLI now.
    Delegate {
        /// A valid CLI name; `None` for the next one of `[delegation] to`.
        cli: Option<String>,
    },
    /// `jobs`: the jobs this user may see.
    Jobs,
    /// `usage [day|week|month]`: tokens by session over that span (a day when not said).
    Usage { span: UsageSpan },
    /// `budget [lift NAME]`: the budgets, or lift one.
    Budget { lift: Option<String> },
    /// `board [off]`: pin this chat's board (or take it down).
    Board { off: bool },
    /// `worktree [NAME] [WORD [ARG]]`: a session's worktree card, or one of its actions
    /// (ARG: the file to diff, the branch to merge into).
    Worktree {
        name: Option<String>,
        word: Option<WorktreeWord>,
        arg: Option<String>,
    },
    /// `discard NAME`: delete NAME's worktree and branch (the name is the confirmation).
    Discard { name: String },
    /// `goal NAME [CMD…|off]`: set, end (`off`) or show (neither) session NAME's goal.
    Goal {
        name: String,
        /// The check, the rest of the line; empty to show the goal.
        until: String,
        off: bool,
    },
    /// `job run|pause|resume|remove NAME`.
    Job { action: JobAction, name: String },
    /// `job add NAME key=value … prompt=TEXT`: the fields as written ([`job_add`]).
    JobAdd {
        name: String,
        fields: Vec<(String, String)>,
    },
}

impl Command {
    /// Which command this is.
    pub fn name(&self) -> CommandName {
        match self {
            Command::Help { .. } => CommandName::Help,
            Command::Sessions => CommandName::Sessions,
            Command::Discover => CommandName::Discover,
            Command::Pending => CommandName::Pending,
            Command::Cancel { .. } => CommandName::Cancel,
            Command::Queue => CommandName::Queue,
            Command::Drop { .. } => CommandName::Drop,
            Command::Adopt { .. } => CommandName::Adopt,
            Command::Use { .. } => CommandName::Use,
            Command::New { .. } => CommandName::New,
            Command::Whoami => CommandName::Whoami,
            Command::Status => CommandName::Status,
            Command::Screen { .. } => CommandName::Screen,
            Command::Shot => CommandName::Shot,
            Command::Get { .. } => CommandName::Get,
            Command::Keys { .. } => CommandName::Keys,
            Command::Stop { .. } => CommandName::Stop,
            Command::Restart { .. } => CommandName::Restart,
            Command::Start { .. } => CommandName::Start,
            Command::Ask { .. } => CommandName::Ask,
            Command::Last => CommandName::Last,
            Command::Answer { .. } => CommandName::Answer,
            Command::Pair { .. } => CommandName::Pair,
            Command::Share { .. } => CommandName::Share,
            Command::History { .. } => CommandName::History,
            Command::Rules => CommandName::Rules,
            Command::Delegate { .. } => CommandName::Delegate,
            Command::Jobs => CommandName::Jobs,
            Command::Usage { .. } => CommandName::Usage,
            Command::Budget { .. } => CommandName::Budget,
            Command::Worktree { .. } => CommandName::Worktree,
            Command::Discard { .. } => CommandName::Discard,
            Command::Board { .. } => CommandName::Board,
            Command::Job { .. } | Command::JobAdd { .. } => CommandName::Job,
            Command::Goal { .. } => CommandName::Goal,
        }
    }
}

/// A prefix [`CommandParser::new`] refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// Empty, too long, or not all ASCII punctuation.
    #[error(
        "a command prefix must be 1 to {MAX_PREFIX_LEN} ASCII punctuation characters, not {0:?}"
    )]
    Invalid(String),
    /// `/` would capture the CLI's own slash commands.
    #[error("the command prefix must not start with '/': slash commands belong to the CLI")]
    Slash,
}

/// An answer typed while the CLI shows a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptAnswer {
    /// A numbered option, 1..=9.
    Choice(u8),
    /// `y` / `yes`.
    Yes,
    /// `n` / `no`.
    No,
}

/// Whether `text` answers a waiting prompt: when `prompt_waiting`, a message that is just
/// `1`..`9` (full-width digits too), `y`, `yes`, `n` or `no`, ignoring case and
/// surrounding whitespace. When no prompt waits, nothing is an answer (a lone `y` then
/// goes to the CLI as text).
pub fn prompt_answer(text: &str, prompt_waiting: bool) -> Option<PromptAnswer> {
    if !prompt_waiting {
        return None;
    }
    let t = text.trim();
    if t.eq_ignore_ascii_case("y") || t.eq_ignore_ascii_case("yes") {
        return Some(PromptAnswer::Yes);
    }
    if t.eq_ignore_ascii_case("n") || t.eq_ignore_ascii_case("no") {
        return Some(PromptAnswer::No);
    }
    let mut chars = t.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else {
        return None;
    };
    let digit = match c {
        '1'..='9' => c as u32 - '0' as u32,
        '１'..='９' => c as u32 - '０' as u32,
        _ => return None,
    };
    u8::try_from(digit).ok().map(PromptAnswer::Choice)
}

/// Where an incoming chat message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route<'a> {
    /// A gateway command.
    Command(Command),
    /// Looked like a command but is not valid: reply with the error, send nothing to the
    /// CLI.
    Invalid(CommandError),
    /// An answer to the waiting prompt.
    Answer(PromptAnswer),
    /// Text for the CLI, exactly as it should be typed.
    Cli(&'a str),
}

/// Parses chat messages with a configured prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandParser {
    prefix: String,
}

impl Default for CommandParser {
    fn default() -> Self {
        CommandParser {
            prefix: DEFAULT_PREFIX.to_string(),
        }
    }
}

impl CommandParser {
    /// A parser for `prefix`: 1 to [`MAX_PREFIX_LEN`] ASCII punctuation characters, not
    /// starting with `/`. Letters are refused so that ordinary words can never be read as
    /// commands.
    pub fn new(prefix: &str) -> Result<Self, PrefixError> {
        if prefix.starts_with('/') {
            return Err(PrefixError::Slash);
        }
        let ok = !prefix.is_empty()
            && prefix.len() <= MAX_PREFIX_LEN
            && prefix.bytes().all(|b| b.is_ascii_punctuation());
        if !ok {
            return Err(PrefixError::Invalid(prefix.to_string()));
        }
        Ok(CommandParser {
            prefix: prefix.to_string(),
        })
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Decides where `text` goes; see the module docs for the rules.
    pub fn route<'a>(&self, text: &'a str, prompt_waiting: bool) -> Route<'a> {
        if let Some(parsed) = self.parse(text) {
            return match parsed {
                Ok(Ok(cmd)) => Route::Command(cmd),
                Ok(Err(cli)) => Route::Cli(cli),
                Err(e) => Route::Invalid(e),
            };
        }
        match prompt_answer(text, prompt_waiting) {
            Some(a) => Route::Answer(a),
            None => Route::Cli(text),
        }
    }

    /// Parses `text` as a command. `None`: not addressed to the gateway. `Some(Ok(Err(s)))`:
    /// the escaped prefix, send `s` to the CLI.
    #[allow(clippy::type_complexity)]
    fn parse<'a>(&self, text: &'a str) -> Option<Result<Result<Command, &'a str>, CommandError>> {
        let t = text.trim_start();
        let rest = t.strip_prefix(self.prefix.as_str())?;
        if let Some(after) = rest.strip_prefix(self.prefix.as_str()) {
            // `!!!!ls` is the escape; a longer run of the prefix character (`......`) is
            // just punctuation.
            let first = self.prefix.chars().next();
            return match after.chars().next() {
                Some(c) if Some(c) == first => None,
                _ => Some(Ok(Err(rest))),
            };
        }
        let rest = rest.trim();
        if rest.is_empty() {
            return Some(Err(CommandError::Empty {
                prefix: self.prefix.clone(),
            }));
        }
        if !rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return None;
        }
        Some(self.parse_command(rest).map(Ok))
    }

    /// Parses a command (`rest` is trimmed and starts with a letter).
    pub fn parse_command(&self, rest: &str) -> Result<Command, CommandError> {
        let (word, args) = rest
            .split_once(char::is_whitespace)
            .map_or((rest, ""), |(w, a)| (w, a.trim()));
        let Some(name) = CommandName::parse(word) else {
            return Err(CommandError::Unknown {
                prefix: self.prefix.clone(),
                word: word.to_string(),
                suggestion: suggest(word),
            });
        };
        let a = Args {
            prefix: &self.prefix,
            command: name,
        };
        let mut tokens = args.split_whitespace();
        let cmd = match name {
            CommandName::Help => {
                let topic = match tokens.next() {
                    None => None,
                    Some(t) => {
                        let w = t.strip_prefix(self.prefix.as_str()).unwrap_or(t);
                        Some(CommandName::parse(w).ok_or_else(|| {
                            a.invalid("COMMAND", t, format!("one of: {}", command_list()))
                        })?)
                    }
                };
                a.no_more(&mut tokens)?;
                Command::Help { topic }
            }
            CommandName::Sessions => a.no_more(&mut tokens).map(|()| Command::Sessions)?,
            CommandName::Discover => a.no_more(&mut tokens).map(|()| Command::Discover)?,
            CommandName::Pending => a.no_more(&mut tokens).map(|()| Command::Pending)?,
            CommandName::Shot => a.no_more(&mut tokens).map(|()| Command::Shot)?,
            CommandName::Get => {
                // The path is the rest of the line: it may hold spaces.
                let (force, path) = match args.trim().strip_prefix("--force") {
                    Some(rest) if rest.is_empty() || rest.starts_with(char::is_whitespace) => {
                        (true, rest.trim())
                    }
                    _ => (false, args.trim()),
                };
                if path.is_empty() {
                    return Err(a.missing("PATH"));
                }
                Command::Get {
                    path: path.to_string(),
                    force,
                }
            }
            CommandName::Queue => a.no_more(&mut tokens).map(|()| Command::Queue)?,
            CommandName::Cancel => {
                let name = tokens.next().map(|t| a.name("NAME", Some(t))).transpose()?;
                a.no_more(&mut tokens)?;
                Command::Cancel { name }
            }
            CommandName::Drop => {
                let n = match tokens.next() {
                    None => None,
                    Some(t) if t.eq_ignore_ascii_case("all") => None,
                    Some(t) => match t.parse::<u32>() {
                        Ok(n) if n >= 1 => Some(n),
                        _ => {
                            return Err(a.invalid(
                                "N",
                                t,
                                "a position from !!queue (1, 2, …) or all".into(),
                            ));
                        }
                    },
                };
                a.no_more(&mut tokens)?;
                Command::Drop { n }
            }
            CommandName::Adopt => {
                let id = a.name("ID", tokens.next())?;
                let name = tokens.next().map(|t| a.name("NAME", Some(t))).transpose()?;
                a.no_more(&mut tokens)?;
                Command::Adopt { id, name }
            }
            CommandName::Whoami => a.no_more(&mut tokens).map(|()| Command::Whoami)?,
            CommandName::Status => a.no_more(&mut tokens).map(|()| Command::Status)?,
            CommandName::Last => a.no_more(&mut tokens).map(|()| Command::Last)?,
            CommandName::Rules => a.no_more(&mut tokens).map(|()| Command::Rules)?,
            CommandName::Jobs => a.no_more(&mut tokens).map(|()| Command::Jobs)?,
            CommandName::Usage => {
                let span = match tokens.next() {
                    None => UsageSpan::Day,
                    Some(w) => UsageSpan::ALL
                        .into_iter()
                        .find(|s| s.as_str().eq_ignore_ascii_case(w))
                        .ok_or_else(|| a.invalid("SPAN", w, "day, week or month".into()))?,
                };
                a.no_more(&mut tokens)?;
                Command::Usage { span }
            }
            CommandName::Board => {
                let off = match tokens.next() {
                    None => false,
                    Some(w) if w.eq_ignore_ascii_case("off") => true,
                    Some(w) => return Err(a.invalid("WORD", w, "off".into())),
                };
                a.no_more(&mut tokens)?;
                Command::Board { off }
            }
            CommandName::Budget => {
                let lift = match tokens.next() {
                    None => None,
                    Some(w) if w.eq_ignore_ascii_case("lift") => {
                        Some(a.name("NAME", tokens.next())?)
                    }
                    Some(w) => return Err(a.invalid("ACTION", w, "lift NAME".into())),
                };
                a.no_more(&mut tokens)?;
                Command::Budget { lift }
            }
            CommandName::Worktree => {
                let name = tokens.next().map(|t| a.name("NAME", Some(t))).transpose()?;
                let word = match tokens.next() {
                    None => None,
                    Some(w) => Some(
                        WorktreeWord::ALL
                            .into_iter()
                            .find(|x| x.as_str().eq_ignore_ascii_case(w))
                            .ok_or_else(|| {
                                a.invalid("ACTION", w, "diff, merge, pr or keep".into())
                            })?,
                    ),
                };
                let arg = match word {
                    Some(WorktreeWord::Diff | WorktreeWord::Merge) => {
                        tokens.next().map(str::to_string)
                    }
                    _ => None,
                };
                a.no_more(&mut tokens)?;
                Command::Worktree { name, word, arg }
            }
            CommandName::Discard => {
                let name = a.name("NAME", tokens.next())?;
                a.no_more(&mut tokens)?;
                Command::Discard { name }
            }
            CommandName::Goal => {
                let name = a.name("NAME", tokens.next())?;
                let rest = nth_rest(args, 1).unwrap_or("");
                let off = rest.eq_ignore_ascii_case("off");
                Command::Goal {
                    name,
                    until: if off { String::new() } else { rest.to_string() },
                    off,
                }
            }
            CommandName::Job => {
                let word = tokens.next().unwrap_or_default();
                if word.eq_ignore_ascii_case("add") {
                    let name = a.name("NAME", tokens.next())?;
                    let fields =
                        job_add::fields(nth_rest(args, 2).unwrap_or("")).map_err(|message| {
                            CommandError::Fields {
                                prefix: a.prefix.to_string(),
                                command: a.command,
                                message,
                            }
                        })?;
                    return Ok(Command::JobAdd { name, fields });
                }
                let action = JobAction::ALL
                    .into_iter()
                    .find(|j| j.as_str().eq_ignore_ascii_case(word))
                    .ok_or_else(|| {
                        a.invalid("ACTION", word, "add, run, pause, resume or remove".into())
                    })?;
                let name = a.name("NAME", tokens.next())?;
                a.no_more(&mut tokens)?;
                Command::Job { action, name }
            }
            CommandName::Delegate => {
                let cli = tokens.next().map(|t| a.name("CLI", Some(t))).transpose()?;
                a.no_more(&mut tokens)?;
                Command::Delegate { cli }
            }
            CommandName::Use => {
                let name = a.name("NAME", tokens.next())?;
                a.no_more(&mut tokens)?;
                Command::Use { name }
            }
            CommandName::New => {
                let name = a.name("NAME", tokens.next())?;
                let cli = a.name("CLI", tokens.next())?;
                let o = new::options(nth_rest(args, 2).unwrap_or("").trim(), |p| {
                    a.name("PROFILE", Some(p))
                })?;
                Command::New {
                    name,
                    cli,
                    dir: o.dir,
                    delegate: o.delegate,
                    profile: o.profile,
                    worktree: o.worktree,
                }
            }
            CommandName::Screen => {
                let lines = match tokens.next() {
                    None => None,
                    Some(t) => Some(
                        t.parse::<u32>()
                            .ok()
                            .filter(|n| (1..=MAX_SCREEN_LINES).contains(n))
                            .ok_or_else(|| {
                                a.invalid(
                                    "N",
                                    t,
                                    format!("a whole number from 1 to {MAX_SCREEN_LINES}"),
                                )
                            })?,
                    ),
                };
                a.no_more(&mut tokens)?;
                Command::Screen { lines }
            }
            CommandName::Keys => {
                let keys: Vec<String> = tokens.map(str::to_string).collect();
                if keys.is_empty() {
                    return Err(a.missing("KEY"));
                }
                if keys.len() > MAX_KEYS {
                    return Err(a.invalid(
                        "KEY…",
                        &format!("{} keys", keys.len()),
                        format!("at most {MAX_KEYS} keys"),
                    ));
                }
                if let Some(k) = keys.iter().find(|k| k.len() > 32) {
                    return Err(a.invalid("KEY", k, "a key name of at most 32 characters".into()));
                }
                Command::Keys { keys }
            }
            CommandName::Stop => {
                let name = tokens.next().map(|t| a.name("NAME", Some(t))).transpose()?;
                a.no_more(&mut tokens)?;
                Command::Stop { name }
            }
            CommandName::Ask => {
                if args.is_empty() {
                    return Err(a.missing("TEXT"));
                }
                Command::Ask {
                    text: args.to_string(),
                }
            }
            CommandName::Start => {
                let name = a.name("NAME", tokens.next())?;
                a.no_more(&mut tokens)?;
                Command::Start { name }
            }
            CommandName::Restart => {
                let mut name = None;
                let mut fresh = false;
                for t in tokens.by_ref() {
                    // Phones turn "--" into a dash.
                    if ["fresh", "--fresh", "—fresh", "–fresh"]
                        .iter()
                        .any(|f| t.eq_ignore_ascii_case(f))
                        && !fresh
                    {
                        fresh = true;
                    } else if name.is_none() {
                        name = Some(a.name("NAME", Some(t))?);
                    } else {
                        return Err(a.too_many(t));
                    }
                }
                Command::Restart { name, fresh }
            }
            CommandName::Answer => {
                if args.is_empty() {
                    return Err(a.missing("CHOICE"));
                }
                Command::Answer {
                    choice: args.to_string(),
                }
            }
            CommandName::Pair => {
                let code = match tokens.next() {
                    None => None,
                    Some(t) => {
                        let ok = (4..=32).contains(&t.len())
                            && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
                        if !ok {
                            return Err(a.invalid(
                                "CODE",
                                t,
                                "the 4 to 32 letters and digits the gateway printed".into(),
                            ));
                        }
                        Some(t.to_ascii_uppercase())
                    }
                };
                a.no_more(&mut tokens)?;
                Command::Pair { code }
            }
            CommandName::Share => {
                let name = a.name("NAME", tokens.next())?;
                let user = tokens.next().ok_or_else(|| a.missing("USER"))?;
                let ok = user.len() <= 128
                    && user
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '-' | '.'));
                if !ok {
                    return Err(a.invalid(
                        "USER",
                        user,
                        "a user id such as 123456789 or telegram:123456789".into(),
                    ));
                }
                let revoke = match tokens.next() {
                    None => false,
                    Some(t) if t.eq_ignore_ascii_case("off") => true,
                    Some(t) => return Err(a.too_many(t)),
                };
                a.no_more(&mut tokens)?;
                Command::Share {
                    name,
                    user: user.to_string(),
                    revoke,
                }
            }
            CommandName::History => {
                let n = match tokens.next() {
                    None => None,
                    Some(t) => Some(
                        t.parse::<u32>()
                            .ok()
                            .filter(|n| (1..=MAX_HISTORY).contains(n))
                            .ok_or_else(|| {
                                a.invalid("N", t, format!("a whole number from 1 to {MAX_HISTORY}"))
                            })?,
                    ),
                };
                a.no_more(&mut tokens)?;
                Command::History { n }
            }
        };
        Ok(cmd)
    }

    /// The command list, for `help`.
    pub fn help_text(&self) -> String {
        let p = &self.prefix;
        let mut out = format!(
            "Gateway commands start with {p}; everything else, /commands included, goes to the CLI as typed.\n"
        );
        for c in CommandName::ALL {
            out.push_str(&format!("{} — {}\n", c.usage(p), c.summary()));
        }
        out.push_str(&format!(
            "While a prompt waits, 1–9, y/yes or n/no answers it. Type {p}{p} to send {p} itself."
        ));
        out
    }
}

/// Error builders for one command.
struct Args<'p> {
    prefix: &'p str,
    command: CommandName,
}

impl Args<'_> {
    fn missing(&self, what: &'static str) -> CommandError {
        CommandError::MissingArgument {
            prefix: self.prefix.to_string(),
            command: self.command,
            what,
        }
    }

    fn invalid(&self, what: &'static str, value: &str, expected: String) -> CommandError {
        CommandError::InvalidArgument {
            prefix: self.prefix.to_string(),
            command: self.command,
            what,
            value: value.to_string(),
            expected,
        }
    }

    fn no_more<'a>(&self, tokens: &mut impl Iterator<Item = &'a str>) -> Result<(), CommandError> {
        match tokens.next() {
            None => Ok(()),
            Some(extra) => Err(self.too_many(extra)),
        }
    }

    fn too_many(&self, extra: &str) -> CommandError {
        CommandError::TooManyArguments {
            prefix: self.prefix.to_string(),
            command: self.command,
            extra: extra.to_string(),
        }
    }

    /// A required session or CLI name.
    fn name(&self, what: &'static str, token: Option<&str>) -> Result<String, CommandError> {
        let t = token.ok_or_else(|| self.missing(what))?;
        if is_valid_name(t) {
            Ok(t.to_string())
        } else {
            Err(self.invalid(
                what,
                t,
                format!("1 to {MAX_NAME_LEN} letters, digits, '_' or '-'"),
            ))
        }
    }
}

/// The daemon's name rule, `[A-Za-z0-9_-]{1,64}` (duplicated so the gateway need not
/// depend on the daemon crate).
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The text after the first `n` whitespace-separated words, trimmed.
fn nth_rest(s: &str, n: usize) -> Option<&str> {
    let mut rest = s.trim_start();
    for _ in 0..n {
        let end = rest.find(char::is_whitespace)?;
        rest = rest[end..].trim_start();
    }
    let rest = rest.trim_end();
    (!rest.is_empty()).then_some(rest)
}

/// Removes one pair of matching surrounding quotes.
fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> CommandParser {
        CommandParser::default()
    }

    fn cmd(text: &str) -> Command {
        match p().route(text, false) {
            Route::Command(c) => c,
            other => panic!("{text:?} routed to {other:?}"),
        }
    }

    fn err(text: &str) -> CommandError {
        match p().route(text, false) {
            Route::Invalid(e) => e,
            other => panic!("{text:?} routed to {other:?}"),
        }
    }

    #[test]
    fn everything_else_goes_to_the_cli_untouched() {
        for text in [
            "fix the tests",
            "/compact",
            "/help",
            "  /cost  ",
            "",
            "   ",
            "!",
            "!!!",
            "!!?",
            "!!1",
            "!! 2",
            "hello !!help",
            "y",
            "1",
        ] {
            assert_eq!(p().route(text, false), Route::Cli(text), "{text:?}");
        }
    }

    #[test]
    fn escaped_prefix() {
        assert_eq!(p().route("!!!!", false), Route::Cli("!!"));
        assert_eq!(p().route("!!!!ls -la", false), Route::Cli("!!ls -la"));
        assert_eq!(p().route("  !!!!help", false), Route::Cli("!!help"));
        assert_eq!(p().route("!!!!!", false), Route::Cli("!!!!!"));
        assert_eq!(p().route("!!!!!!", false), Route::Cli("!!!!!!"));
    }

    #[test]
    fn simple_commands() {
        assert_eq!(cmd("!!help"), Command::Help { topic: None });
        assert_eq!(
            cmd("!!help new"),
            Command::Help {
                topic: Some(CommandName::New)
            }
        );
        assert_eq!(
            cmd("!!help !!use"),
            Command::Help {
                topic: Some(CommandName::Use)
            }
        );
        assert_eq!(cmd("!!sessions"), Command::Sessions);
        assert_eq!(cmd("!!whoami"), Command::Whoami);
        assert_eq!(cmd("!!status"), Command::Status);
        assert_eq!(cmd("!!last"), Command::Last);
        assert_eq!(
            cmd("  !!Status  \n"),
            Command::Status,
            "case and whitespace"
        );
        assert_eq!(cmd("!! status"), Command::Status, "space after the prefix");
        assert_eq!(cmd("!!STOP"), Command::Stop { name: None });
        assert_eq!(
            cmd("!!restart"),
            Command::Restart {
                name: None,
                fresh: false
            }
        );
        assert_eq!(
            cmd("!!restart api —fresh"),
            Command::Restart {
                name: Some("api".into()),
                fresh: true
            }
        );
        assert_eq!(
            cmd("!!restart fresh"),
            Command::Restart {
                name: None,
                fresh: true
            }
        );
    }

    #[test]
    fn commands_with_arguments() {
        assert_eq!(cmd("!!use api"), Command::Use { name: "api".into() });
        assert_eq!(
            cmd("!!new api claude"),
            Command::New {
                name: "api".into(),
                cli: "claude".into(),
                dir: None,
                delegate: false,
                profile: None,
                worktree: None,
            }
        );
        assert_eq!(
            cmd("!!new api claude ~/src/my project "),
            Command::New {
                name: "api".into(),
                cli: "claude".into(),
                dir: Some("~/src/my project".into()),
                delegate: false,
                profile: None,
                worktree: None,
            }
        );
        assert_eq!(
            cmd("!!new web codex \"/tmp/a b\""),
            Command::New {
                name: "web".into(),
                cli: "codex".into(),
                dir: Some("/tmp/a b".into()),
                delegate: false,
                profile: None,
                worktree: None,
            }
        );
        assert_eq!(
            cmd("!!new api claude ~/src/app delegate"),
            Command::New {
                name: "api".into(),
                cli: "claude".into(),
                dir: Some("~/src/app".into()),
                delegate: true,
                profile: None,
                worktree: None,
            }
        );
        assert_eq!(
            cmd("!!new api claude delegate"),
            Command::New {
                name: "api".into(),
                cli: "claude".into(),
                dir: None,
                delegate: true,
                profile: None,
                worktree: None,
            }
        );
        assert_eq!(
            cmd("!!new api claude ~/src/app --profile work delegate"),
            Command::New {
                name: "api".into(),
                cli: "claude".into(),
                dir: Some("~/src/app".into()),
                delegate: true,
                profile: Some("work".into()),
                worktree: None,
            }
        );
        assert_eq!(
            cmd("!!new api claude delegate --profile work"),
            Command::New {
                name: "api".into(),
                cli: "claude".into(),
                dir: None,
                delegate: true,
                profile: Some("work".into()),
                worktree: None,
            }
        );
        assert_eq!(
            cmd("!!new api claude ~/src/my app wt=feat/x delegate"),
            Command::New {
                name: "api".into(),
                cli: "claude".into(),
                dir: Some("~/src/my app".into()),
                profile: None,
                delegate: true,
                worktree: Some("feat/x".into()),
            }
        );
        assert_eq!(
            cmd("!!new api claude ~/src/app wt"),
            Command::New {
                name: "api".into(),
                cli: "claude".into(),
                dir: Some("~/src/app".into()),
                profile: None,
                delegate: false,
                worktree: Some(String::new()),
            }
        );
        assert_eq!(cmd("!!rules"), Command::Rules);
        assert_eq!(cmd("!!delegate"), Command::Delegate { cli: None });
        assert_eq!(
            cmd("!!delegate codex"),
            Command::Delegate {
                cli: Some("codex".into())
            }
        );
        assert_eq!(cmd("!!screen"), Command::Screen { lines: None });
        assert_eq!(cmd("!!history"), Command::History { n: None });
        assert_eq!(cmd("!!history 50"), Command::History { n: Some(50) });
        assert!(matches!(
            err("!!history 0"),
            CommandError::InvalidArgument { .. }
        ));
        assert!(matches!(
            err("!!history 201"),
            CommandError::InvalidArgument { .. }
        ));
        assert!(matches!(
            err("!!history 5 6"),
            CommandError::TooManyArguments { .. }
        ));
        assert_eq!(cmd("!!screen 50"), Command::Screen { lines: Some(50) });
        assert_eq!(
            cmd("!!screen 100000"),
            Command::Screen {
                lines: Some(100_000)
            }
        );
        assert_eq!(
            cmd("!!keys Escape C-c Enter"),
            Command::Keys {
                keys: vec!["Escape".into(), "C-c".into(), "Enter".into()]
            }
        );
        assert_eq!(
            cmd("!!stop web-2"),
            Command::Stop {
                name: Some("web-2".into())
            }
        );
        assert_eq!(cmd("!!answer 2"), Command::Answer { choice: "2".into() });
        assert_eq!(
            cmd("!!answer use the second\napproach"),
            Command::Answer {
                choice: "use the second\napproach".into()
            }
        );
        assert_eq!(cmd("!!pair"), Command::Pair { code: None });
        assert_eq!(
            cmd("!!pair ab3k9xq2"),
            Command::Pair {
                code: Some("AB3K9XQ2".into())
            }
        );
    }

    #[test]
    fn unknown_command_lists_commands_and_suggests() {
        let e = err("!!stpo");
        assert_eq!(
            e,
            CommandError::Unknown {
                prefix: "!!".into(),
                word: "stpo".into(),
                suggestion: Some(CommandName::Stop)
            }
        );
        let msg = e.to_string();
        assert!(
            msg.contains("unknown command !!stpo (did you mean !!stop?)"),
            "{msg}"
        );
        assert!(msg.contains(
            "help, sessions, discover, adopt, pending, use, new, whoami, status, screen, shot, get, keys, stop, cancel, queue, drop, start, restart, ask, last, answer, pair"
        ));
        assert!(matches!(
            err("!!sess"),
            CommandError::Unknown {
                suggestion: Some(CommandName::Sessions),
                ..
            }
        ));
        assert!(matches!(
            err("!!xyzzy"),
            CommandError::Unknown {
                suggestion: None,
                ..
            }
        ));
    }

    #[test]
    fn prefix_alone_is_an_error() {
        let e = err("!!");
        assert_eq!(
            e,
            CommandError::Empty {
                prefix: "!!".into()
            }
        );
        assert!(e.to_string().contains("type it twice"));
        assert_eq!(err("  !!  "), e);
    }

    #[test]
    fn missing_arguments_show_usage() {
        let e = err("!!use");
        assert_eq!(e.to_string(), "!!use needs NAME; usage: !!use NAME");
        assert_eq!(e.command(), Some(CommandName::Use));
        assert_eq!(
            err("!!new api").to_string(),
            "!!new needs CLI; usage: !!new NAME CLI [DIR] [--profile P] [delegate] [wt[=BRANCH]]"
        );
        assert_eq!(
            err("!!new").to_string(),
            "!!new needs NAME; usage: !!new NAME CLI [DIR] [--profile P] [delegate] [wt[=BRANCH]]"
        );
        assert_eq!(
            err("!!keys").to_string(),
            "!!keys needs KEY; usage: !!keys KEY…"
        );
        assert_eq!(
            err("!!answer  ").to_string(),
            "!!answer needs CHOICE; usage: !!answer CHOICE"
        );
    }

    #[test]
    fn too_many_arguments() {
        assert_eq!(
            err("!!status now").to_string(),
            "!!status takes no arguments (got \"now\"); usage: !!status"
        );
        assert_eq!(
            err("!!use a b").to_string(),
            "too many arguments for !!use (from \"b\"); usage: !!use NAME"
        );
        assert!(matches!(
            err("!!stop a b"),
            CommandError::TooManyArguments { .. }
        ));
        assert!(matches!(
            err("!!screen 5 6"),
            CommandError::TooManyArguments { .. }
        ));
        assert!(matches!(
            err("!!pair ABCD EFGH"),
            CommandError::TooManyArguments { .. }
        ));
    }

    #[test]
    fn invalid_arguments() {
        let e = err("!!screen lots");
        assert!(matches!(e, CommandError::InvalidArgument { what: "N", .. }));
        assert!(
            e.to_string().contains("a whole number from 1 to 100000"),
            "{e}"
        );
        assert!(matches!(
            err("!!screen 0"),
            CommandError::InvalidArgument { .. }
        ));
        assert!(matches!(
            err("!!screen 100001"),
            CommandError::InvalidArgument { .. }
        ));
        assert!(matches!(
            err("!!screen -5"),
            CommandError::InvalidArgument { .. }
        ));
        assert!(matches!(
            err("!!use a/b"),
            CommandError::InvalidArgument { what: "NAME", .. }
        ));
        assert!(matches!(
            err("!!use ä"),
            CommandError::InvalidArgument { .. }
        ));
        assert!(matches!(
            err(&format!("!!use {}", "x".repeat(65))),
            CommandError::InvalidArgument { .. }
        ));
        assert!(matches!(
            err("!!new ok bad.cli"),
            CommandError::InvalidArgument { what: "CLI", .. }
        ));
        assert!(matches!(
            err("!!help bogus"),
            CommandError::InvalidArgument {
                what: "COMMAND",
                ..
            }
        ));
        assert!(matches!(
            err("!!pair ab"),
            CommandError::InvalidArgument { what: "CODE", .. }
        ));
        assert!(matches!(
            err("!!pair AB$D"),
            CommandError::InvalidArgument { .. }
        ));
        let many = format!("!!keys {}", "a ".repeat(65));
        assert!(matches!(err(&many), CommandError::InvalidArgument { .. }));
        let long = format!("!!keys {}", "k".repeat(33));
        assert!(matches!(
            err(&long),
            CommandError::InvalidArgument { what: "KEY", .. }
        ));
    }

    #[test]
    fn custom_prefix() {
        let p = CommandParser::new(".").expect("valid");
        assert_eq!(p.route(".status", false), Route::Command(Command::Status));
        assert_eq!(p.route("..status", false), Route::Cli(".status"));
        assert_eq!(p.route("!!status", false), Route::Cli("!!status"));
        assert_eq!(
            p.route("...", false),
            Route::Cli("..."),
            "an ellipsis is text"
        );
        let e = match p.route(".use", false) {
            Route::Invalid(e) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(e.to_string(), ".use needs NAME; usage: .use NAME");
    }

    #[test]
    fn prefix_rules() {
        assert_eq!(CommandParser::new("/"), Err(PrefixError::Slash));
        assert_eq!(CommandParser::new("//"), Err(PrefixError::Slash));
        assert!(matches!(
            CommandParser::new(""),
            Err(PrefixError::Invalid(_))
        ));
        assert!(matches!(
            CommandParser::new("bot"),
            Err(PrefixError::Invalid(_))
        ));
        assert!(matches!(
            CommandParser::new("! "),
            Err(PrefixError::Invalid(_))
        ));
        assert!(matches!(
            CommandParser::new("!!!!!!!!!"),
            Err(PrefixError::Invalid(_))
        ));
        assert!(CommandParser::new("#").is_ok());
        assert_eq!(CommandParser::default().prefix(), DEFAULT_PREFIX);
    }

    #[test]
    fn prompt_answers() {
        for (t, a) in [
            ("1", PromptAnswer::Choice(1)),
            (" 9 ", PromptAnswer::Choice(9)),
            ("３", PromptAnswer::Choice(3)),
            ("y", PromptAnswer::Yes),
            ("Yes", PromptAnswer::Yes),
            ("YES\n", PromptAnswer::Yes),
            ("n", PromptAnswer::No),
            ("No", PromptAnswer::No),
        ] {
            assert_eq!(prompt_answer(t, true), Some(a), "{t:?}");
            assert_eq!(prompt_answer(t, false), None, "{t:?} with no prompt");
        }
        for t in [
            "0",
            "10",
            "yes please",
            "nope",
            "",
            "  ",
            "1.",
            "ye",
            "y y",
            "١",
        ] {
            assert_eq!(prompt_answer(t, true), None, "{t:?}");
        }
    }

    #[test]
    fn route_with_a_waiting_prompt() {
        assert_eq!(p().route("2", true), Route::Answer(PromptAnswer::Choice(2)));
        assert_eq!(p().route("y", true), Route::Answer(PromptAnswer::Yes));
        assert_eq!(p().route("yes do it", true), Route::Cli("yes do it"));
        assert_eq!(
            p().route("!!status", true),
            Route::Command(Command::Status),
            "commands win"
        );
        assert_eq!(p().route("/compact", true), Route::Cli("/compact"));
    }

    #[test]
    fn help_lists_every_command_with_usage() {
        let h = p().help_text();
        for c in CommandName::ALL {
            assert!(h.contains(&c.usage("!!")), "{c}");
        }
        assert!(
            h.contains("!!new NAME CLI [DIR] [--profile P] [delegate] [wt[=BRANCH]] — start CLI")
        );
    }

    #[test]
    fn names_round_trip() {
        for c in CommandName::ALL {
            assert_eq!(CommandName::parse(c.as_str()), Some(c));
            assert_eq!(CommandName::parse(&c.as_str().to_uppercase()), Some(c));
        }
        assert_eq!(CommandName::parse("nope"), None);
    }

    #[test]
    fn commands_serialize_with_a_tag() {
        let json = serde_json::to_string(&cmd("!!new api claude /src")).expect("serialize");
        assert_eq!(
            json,
            r#"{"command":"new","name":"api","cli":"claude","dir":"/src"}"#
        );
        let back: Command = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, cmd("!!new api claude /src"));
        assert_eq!(
            serde_json::to_string(&Command::Status).expect("serialize"),
            r#"{"command":"status"}"#
        );
    }

    #[test]
    fn nth_rest_and_unquote() {
        assert_eq!(nth_rest("a b  c d ", 2), Some("c d"));
        assert_eq!(nth_rest("a b", 2), None);
        assert_eq!(nth_rest("a b ", 2), None);
        assert_eq!(unquote("'x y'"), "x y");
        assert_eq!(unquote("\"x"), "\"x");
        assert_eq!(unquote("\""), "\"");
    }
}

#[cfg(test)]
mod props {
    //! Properties of the parser over generated input: nothing panics, escapes follow rule 2,
    //! and a command written out the way its usage line shows parses back to itself.

    use proptest::prelude::*;

    use super::*;

    /// A valid prefix: 1 to 8 ASCII punctuation characters, not starting with `/`.
    fn prefix() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => Just(DEFAULT_PREFIX.to_string()),
            1 => "[!#$%&*+,.:;<=>?@^_`|~-][!-/:-@\\[-`{-~]{0,7}",
        ]
    }

    fn parser(prefix: &str) -> CommandParser {
        CommandParser::new(prefix).expect("the strategy makes valid prefixes")
    }

    /// Tokens a chat user might put after the prefix: command words in any case, names,
    /// numbers, flags, quotes, punctuation, unicode.
    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::sample::select(CommandName::ALL.to_vec()).prop_flat_map(|c| {
                proptest::collection::vec(any::<bool>(), c.as_str().len()).prop_map(move |up| {
                    c.as_str()
                        .chars()
                        .zip(up)
                        .map(|(ch, u)| if u { ch.to_ascii_uppercase() } else { ch })
                        .collect()
                })
            }),
            "[A-Za-z0-9_-]{1,70}",
            "[0-9]{1,12}",
            Just("fresh".to_string()),
            Just("—fresh".to_string()),
            Just("off".to_string()),
            Just("~/src/my project".to_string()),
            "[\"'][^\"']{0,10}[\"']?",
            "\\PC{1,12}",
            "[!./?-]{1,6}",
        ]
    }

    fn separator() -> impl Strategy<Value = &'static str> {
        proptest::sample::select(vec![" ", "  ", "\t", "\n", " \u{3000}", ""])
    }

    /// Checks what every route must satisfy, whatever the input.
    fn check_route(p: &CommandParser, text: &str, waiting: bool) {
        match p.route(text, waiting) {
            // Text for the CLI is the message, or the escaped prefix's remainder of it.
            Route::Cli(s) => assert!(
                s == text || (text.ends_with(s) && s.starts_with(p.prefix())),
                "{text:?} → Cli({s:?})"
            ),
            Route::Answer(_) => assert!(waiting, "{text:?} answered with no prompt waiting"),
            Route::Command(c) => {
                assert!(
                    text.trim_start().starts_with(p.prefix()),
                    "{text:?} → {c:?}"
                );
                // Every command serialises and reads back.
                let json = serde_json::to_string(&c).expect("serialize");
                let back: Command = serde_json::from_str(&json).expect("deserialize");
                assert_eq!(back, c);
            }
            Route::Invalid(e) => {
                assert!(
                    text.trim_start().starts_with(p.prefix()),
                    "{text:?} → {e:?}"
                );
                let shown = e.to_string();
                assert!(shown.contains(p.prefix()), "{shown}");
                if let Some(c) = e.command() {
                    assert!(shown.contains(&c.usage(p.prefix())), "{shown}");
                }
            }
        }
    }

    /// Writes a command the way its usage line shows (`word` in the given case).
    fn render(prefix: &str, word: &str, c: &Command) -> String {
        let mut parts: Vec<String> = vec![format!("{prefix}{word}")];
        match c {
            Command::Help { topic } => parts.extend(topic.map(|t| t.as_str().to_string())),
            Command::Sessions
            | Command::Discover
            | Command::Pending
            | Command::Shot
            | Command::Whoami
            | Command::Status
            | Command::Last => {}
            Command::Use { name } => parts.push(name.clone()),
            Command::New {
                name,
                cli,
                dir,
                delegate,
                profile,
                worktree,
            } => {
                parts.push(name.clone());
                parts.push(cli.clone());
                parts.extend(dir.clone());
                if let Some(p) = profile {
                    parts.push("--profile".into());
                    parts.push(p.clone());
                }
                if *delegate {
                    parts.push("delegate".into());
                }
                match worktree.as_deref() {
                    Some("") => parts.push("wt".into()),
                    Some(b) => parts.push(format!("wt={b}")),
                    None => {}
                }
            }
            Command::Rules | Command::Jobs => {}
            Command::Usage { span } => parts.push(span.as_str().into()),
            Command::Board { off } => {
                if *off {
                    parts.push("off".into());
                }
            }
            Command::Budget { lift } => {
                if let Some(name) = lift {
                    parts.push("lift".into());
                    parts.push(name.clone());
                }
            }
            Command::Worktree { name, word, arg } => {
                parts.extend(name.clone());
                parts.extend(word.map(|w| w.as_str().to_string()));
                parts.extend(arg.clone());
            }
            Command::Discard { name } => parts.push(name.clone()),
            Command::Job { action, name } => {
                parts.push(action.as_str().into());
                parts.push(name.clone());
            }
            Command::JobAdd { name, fields } => {
                parts.push("add".into());
                parts.push(name.clone());
                parts.extend(fields.iter().map(|(k, v)| format!("{k}=\"{v}\"")));
            }
            Command::Goal { name, until, off } => {
                parts.push(name.clone());
                if *off {
                    parts.push("off".into());
                } else if !until.is_empty() {
                    parts.push(until.clone());
                }
            }
            Command::Delegate { cli } => parts.extend(cli.clone()),
            Command::Screen { lines } => parts.extend(lines.map(|n| n.to_string())),
            Command::Get { path, force } => {
                if *force {
                    parts.push("--force".into());
                }
                parts.push(path.clone());
            }
            Command::History { n } => parts.extend(n.map(|n| n.to_string())),
            Command::Keys { keys } => parts.extend(keys.iter().cloned()),
            Command::Stop { name } => parts.extend(name.clone()),
            Command::Start { name } => parts.push(name.clone()),
            Command::Adopt { id, name } => {
                parts.push(id.clone());
                parts.extend(name.clone());
            }
            Command::Cancel { name } => parts.extend(name.clone()),
            Command::Queue => {}
            Command::Drop { n } => parts.extend(n.map(|n| n.to_string())),
            Command::Ask { text } => parts.push(text.clone()),
            Command::Restart { name, fresh } => {
                parts.extend(name.clone());
                if *fresh {
                    parts.push("fresh".into());
                }
            }
            Command::Answer { choice } => parts.push(choice.clone()),
            Command::Pair { code } => parts.extend(code.clone()),
            Command::Share { name, user, revoke } => {
                parts.push(name.clone());
                parts.push(user.clone());
                if *revoke {
                    parts.push("off".into());
                }
            }
        }
        parts.join(" ")
    }

    fn name() -> impl Strategy<Value = String> + Clone {
        "[A-Za-z0-9_-]{1,64}"
    }

    /// Commands whose arguments are valid as the parser accepts them.
    fn command() -> impl Strategy<Value = Command> {
        let opt_name = proptest::option::of(name());
        prop_oneof![
            proptest::option::of(proptest::sample::select(CommandName::ALL.to_vec()))
                .prop_map(|topic| Command::Help { topic }),
            Just(Command::Sessions),
            Just(Command::Discover),
            Just(Command::Pending),
            Just(Command::Shot),
            ("[A-Za-z0-9_./-]{1,40}", any::<bool>())
                .prop_map(|(path, force)| Command::Get { path, force }),
            Just(Command::Whoami),
            Just(Command::Status),
            Just(Command::Last),
            name().prop_map(|name| Command::Use { name }),
            (
                name(),
                name(),
                // A directory whose last word is "delegate" would read as the flag.
                proptest::option::of("[~/A-Za-z0-9._-][A-Za-z0-9/._ -]{0,40}[A-Za-z0-9/._-]")
                    .prop_filter("not the flag", |d| !d
                        .as_deref()
                        .is_some_and(|d| d == "delegate"
                            || d.ends_with(" delegate")
                            || d.contains("--profile"))),
                any::<bool>(),
                proptest::option::of(name())
            )
                .prop_map(|(name, cli, dir, delegate, profile)| Command::New {
                    name,
                    cli,
                    dir,
                    delegate,
                    profile,
                    worktree: None,
                }),
            Just(Command::Rules),
            Just(Command::Jobs),
            prop::sample::select(UsageSpan::ALL.to_vec()).prop_map(|span| Command::Usage { span }),
            prop::option::of(name()).prop_map(|lift| Command::Budget { lift }),
            any::<bool>().prop_map(|off| Command::Board { off }),
            (
                name(),
                prop::sample::select(WorktreeWord::ALL.to_vec()),
                prop::option::of(name())
            )
                .prop_map(|(name, word, arg)| Command::Worktree {
                    name: Some(name),
                    word: Some(word),
                    arg: arg.filter(|_| matches!(word, WorktreeWord::Diff | WorktreeWord::Merge)),
                }),
            name().prop_map(|name| Command::Discard { name }),
            (name(), "[a-z][a-z0-9 ./_-]{0,30}[a-z0-9]")
                .prop_filter("not off", |(_, u)| !u.eq_ignore_ascii_case("off"))
                .prop_map(|(name, until)| Command::Goal {
                    name,
                    until,
                    off: false
                }),
            (proptest::sample::select(JobAction::ALL.to_vec()), name())
                .prop_map(|(action, name)| Command::Job { action, name }),
            proptest::option::of(name()).prop_map(|cli| Command::Delegate { cli }),
            proptest::option::of(1..=MAX_SCREEN_LINES).prop_map(|lines| Command::Screen { lines }),
            proptest::collection::vec("[A-Za-z0-9-]{1,32}", 1..=MAX_KEYS)
                .prop_map(|keys| Command::Keys { keys }),
            opt_name.clone().prop_map(|name| Command::Stop { name }),
            name().prop_map(|name| Command::Start { name }),
            (name(), proptest::option::of(name()))
                .prop_map(|(id, name)| Command::Adopt { id, name }),
            opt_name.clone().prop_map(|name| Command::Cancel { name }),
            Just(Command::Queue),
            proptest::option::of(1u32..1000).prop_map(|n| Command::Drop { n }),
            "\\PC{1,60}"
                .prop_map(|s| s.trim().to_string())
                .prop_filter("not empty", |s| !s.is_empty())
                .prop_map(|text| Command::Ask { text }),
            // A session named "fresh" would read as the flag: not a round trip.
            (
                opt_name.prop_filter("not the flag", |n| {
                    !n.as_deref()
                        .is_some_and(|n| n.eq_ignore_ascii_case("fresh"))
                }),
                any::<bool>()
            )
                .prop_map(|(name, fresh)| Command::Restart { name, fresh }),
            "\\PC{1,60}"
                .prop_map(|s| s.trim().to_string())
                .prop_filter("not empty", |s| !s.is_empty())
                .prop_map(|choice| Command::Answer { choice }),
            proptest::option::of("[A-Z0-9-]{4,32}").prop_map(|code| Command::Pair { code }),
            (name(), "[A-Za-z0-9:_.-]{1,128}", any::<bool>())
                .prop_map(|(name, user, revoke)| Command::Share { name, user, revoke }),
            proptest::option::of(1..=MAX_HISTORY).prop_map(|n| Command::History { n }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn no_unicode_text_panics(text in "\\PC{0,80}|.{0,80}", waiting in any::<bool>(), pre in prefix()) {
            check_route(&parser(&pre), &text, waiting);
            check_route(&CommandParser::default(), &text, waiting);
        }

        #[test]
        fn prefixed_tokens_never_panic_and_letters_are_commands(
            pre in prefix(),
            lead in "[ \t]{0,2}",
            tokens in proptest::collection::vec((token(), separator()), 0..8),
            waiting in any::<bool>(),
        ) {
            let p = parser(&pre);
            let rest: String = tokens.iter().map(|(t, s)| format!("{t}{s}")).collect();
            let text = format!("{lead}{pre}{rest}");
            check_route(&p, &text, waiting);
            // Rule 4: the prefix, optional spaces, then a letter is a gateway command —
            // valid or refused, never typed into the CLI.
            if rest.trim_start().starts_with(|c: char| c.is_ascii_alphabetic()) {
                prop_assert!(
                    matches!(p.route(&text, waiting), Route::Command(_) | Route::Invalid(_)),
                    "{text:?} → {:?}", p.route(&text, waiting)
                );
            }
        }

        #[test]
        fn the_doubled_prefix_sends_one_prefix_to_the_cli(
            pre in prefix(),
            lead in "[ \t]{0,2}",
            rest in "\\PC{0,40}",
            waiting in any::<bool>(),
        ) {
            let p = parser(&pre);
            let text = format!("{lead}{pre}{pre}{rest}");
            let first = pre.chars().next();
            if rest.chars().next().is_some() && rest.chars().next() == first {
                // A longer run of the prefix's first character is text, as typed.
                prop_assert_eq!(p.route(&text, waiting), Route::Cli(text.as_str()));
            } else {
                let want = format!("{pre}{rest}");
                prop_assert_eq!(p.route(&text, waiting), Route::Cli(want.as_str()));
            }
        }

        #[test]
        fn a_command_written_as_its_usage_shows_parses_back(
            pre in prefix(),
            c in command(),
            upper in proptest::collection::vec(any::<bool>(), 8),
        ) {
            let p = parser(&pre);
            // The word in any case (phones capitalise).
            let word: String = c
                .name()
                .as_str()
                .chars()
                .zip(upper.iter().cycle())
                .map(|(ch, u)| if *u { ch.to_ascii_uppercase() } else { ch })
                .collect();
            let text = render(&pre, &word, &c);
            prop_assert_eq!(p.route(&text, false), Route::Command(c.clone()), "{}", text);
            // The usage line names the command the way it is typed.
            let usage = c.name().usage(&pre);
            let typed = format!("{pre}{} ", c.name().as_str());
            prop_assert!(usage.starts_with(typed.trim_end()), "{}", usage);
            // Too many arguments are refused with that usage, never half-parsed.
            if c.name().args().is_empty() {
                let extra = format!("{text} surplus");
                match p.route(&extra, false) {
                    Route::Invalid(e) => {
                        prop_assert_eq!(e.command(), Some(c.name()));
                        prop_assert!(e.to_string().contains(&usage), "{}", e);
                    }
                    other => prop_assert!(false, "{extra:?} → {other:?}"),
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn very_long_messages_do_not_panic(
            pre in prefix(),
            word in proptest::sample::select(CommandName::ALL.to_vec()),
            unit in "\\PC{1,4}| |[A-Za-z0-9]{1,8} ",
            n in 1_000usize..20_000,
            waiting in any::<bool>(),
        ) {
            let p = parser(&pre);
            let body = unit.repeat(n);
            for text in [
                body.clone(),
                format!("{pre}{body}"),
                format!("{pre}{} {body}", word.as_str()),
                format!("{pre}{pre}{body}"),
                pre.repeat(n),
                format!("{}{body}", " ".repeat(n)),
            ] {
                check_route(&p, &text, waiting);
            }
            // More keys than allowed are refused, not truncated.
            let keys = format!("{pre}keys {}", "Enter ".repeat(MAX_KEYS + n));
            let refused = matches!(
                p.route(&keys, false),
                Route::Invalid(CommandError::InvalidArgument { command: CommandName::Keys, .. })
            );
            prop_assert!(refused);
        }
    }
}
