//! The core's errors. Each variant names what went wrong in the daemon's own terms (a file
//! refused, a pane gone, a session clibot does not run), and its text says what to do about it.
//! The gRPC status code is chosen in one place only, `rpc/convert.rs`: a variant says nothing
//! of how it travels, so the core never picks a code for one site and another for the next.

use std::path::PathBuf;

use crate::keys::UnknownKey;
use crate::tmux::MuxError;

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("invalid session name {0:?}: use 1 to 64 characters from A-Z a-z 0-9 _ -")]
    InvalidName(String),
    #[error(
        "names of the form u-CLI-NUMBER are clibot's own (CLIs started outside clibot, u-claude-4242): choose another name than {0:?}"
    )]
    ReservedName(String),
    #[error(
        "unknown CLI {name:?}: the configured CLIs are {known}; add a [cli.{name}] section with argv to the config to allow it"
    )]
    UnknownCli { name: String, known: String },
    #[error("directory {0} does not exist: create it or choose another --dir")]
    DirNotFound(PathBuf),
    #[error("{0} is not a directory: choose a directory for --dir")]
    NotADirectory(PathBuf),
    #[error(
        "directory {0:?} is not an absolute path: pass a full path (clibotctl resolves relative ones)"
    )]
    DirNotAbsolute(String),
    #[error(
        "directory {dir} is outside the allowed roots ({roots}): choose a directory inside them or add a root to [daemon] allowed_roots"
    )]
    DirNotAllowed { dir: PathBuf, roots: String },
    #[error(
        "you may start only: {allowed} (not {cli}); an admin can allow more in [access.PLATFORM] clis"
    )]
    CliNotAllowed { cli: String, allowed: String },
    #[error(
        "sessions of non-admins run in a bubblewrap jail, and bubblewrap is not installed on this machine: install the package `bubblewrap` (e.g. `sudo apt-get install bubblewrap`), or an admin sets [access.PLATFORM] sandbox = \"off\""
    )]
    NoSandbox,
    #[error("the operating system gave no random bytes for a session secret: {0}")]
    NoRandom(#[source] std::io::Error),
    #[error(
        "directory {dir} is inside {secret}, which holds secrets: sessions never start there; choose another directory (only an [daemon] allowed_roots entry naming exactly {secret} lifts this)"
    )]
    SecretDir { dir: PathBuf, secret: PathBuf },
    #[error(
        "directory {dir} is not in your workspace: your sessions work in {roots} (leave the directory out to start in your own workspace; an admin can add roots in [access.PLATFORM] member_roots)"
    )]
    NotMemberDir { dir: PathBuf, roots: String },
    #[error(
        "directory {dir} holds, or lies in, the directory of a session that is not yours: choose a directory of your own"
    )]
    OthersDir { dir: PathBuf },
    #[error("{0}")]
    SessionFiles(#[from] crate::confine::beneath::BeneathError),
    #[error(
        "{cli} cannot run in the jail of a non-admin's session: {why}; an admin can show its installation with [access.PLATFORM] jail_read, or install it outside the home directory"
    )]
    NotRunnableInJail { cli: String, why: String },
    #[error(
        "a session named {0:?} already exists: choose another name, or remove it first with `clibotctl stop {0}`"
    )]
    AlreadyExists(String),
    #[error(
        "a tmux session named {0:?} already exists on clibot's tmux server: adopt it with `clibotctl adopt {0} --cli CLI`, or choose another name"
    )]
    TmuxNameTaken(String),
    #[error("no session named {0:?}: see `clibotctl list` for the sessions there are")]
    NoSuchSession(String),
    /// A job as written does not check: the message names the field.
    #[error("the job is not valid: {0}")]
    JobInvalid(String),
    /// A usage query that cannot be answered as asked (its grouping).
    #[error("{0}")]
    UsageQuery(String),
    /// A job's run that started and failed (its gate, its session), and why.
    #[error("the job's run failed: {0}")]
    JobFailed(String),
    /// A job that does not exist, or a run its rules refuse (paused, still running, its
    /// daily limit).
    #[error("{0}")]
    JobNotRun(#[from] crate::jobs::table::NoRun),
    #[error(
        "no session named {0:?} that you may use: a session belongs to the chat user who made it; its owner can share it with `!!share {0} PLATFORM:USER`"
    )]
    NotYours(String),
    #[error("only the owner of {0:?} or an admin may do that; it is only shared with you")]
    NotOwner(String),
    /// A press on a usage limit's card that cannot be done.
    #[error("{0}")]
    LimitCard(String),
    /// A worktree that cannot be made or read (not a repository, a branch that exists, ...).
    #[error("worktree: {0}")]
    Worktree(String),
    #[error("no tmux session {0:?} on clibot's tmux server: see `{1}` for the sessions there are")]
    NoSuchTmuxSession(String, String),
    #[error("tmux session {0:?} is already managed as session {1:?}")]
    AlreadyManaged(String, String),
    #[error(
        "text is {len} bytes, more than the {max} bytes one send may carry: split it, or raise [daemon] max_input_bytes"
    )]
    TextTooLong { len: usize, max: usize },
    // The config, as loaded or reloaded.
    /// The config cannot be used: a file that does not parse, patterns, rules or routes that
    /// do not compile, a reload that would drop every admin of a platform. Nothing was changed;
    /// the text says what to fix in the file.
    #[error("{0}")]
    Config(String),

    // What a request carries.
    /// A hook call whose payload cannot be read (not JSON, or too many values to parse safely):
    /// the CLI's hook sent something clibot refuses to look into.
    #[error("{0}")]
    HookPayload(String),
    /// Text, keys or an answer that cannot be typed as given (a control character in text,
    /// nothing to send, an answer that is none of the prompt's options); the text says how to
    /// say it instead.
    #[error("{0}")]
    Input(String),
    /// A spawn, adoption or restart asked for in a form that cannot be honoured (an environment
    /// variable name, a NUL byte, a conversation id, a resume the CLI cannot do); nothing started.
    #[error("{0}")]
    BadSpawn(String),
    /// A task whose CLI could not be chosen: no route matches and the decider is absent,
    /// failed, or left the choice to the asker, who can name the CLI instead.
    #[error("{0}")]
    Routing(String),
    /// More in one call than [`crate::ops::limits`] takes (keys, arguments, environment):
    /// refused before tmux would fail on it with a message that blames the installation.
    #[error("{0}")]
    TooMuchInOneCall(String),
    /// A default chat for a platform that cannot be one: no platform named, or not an admin's
    /// chat (anyone else's would be sent what sessions started at the desk say).
    #[error("{0}")]
    DefaultChat(String),

    // Files to and from a session's directory.
    /// A file never sent to a chat: outside the session's directory, in a secret path, named
    /// like a key, or reached through a symbolic link.
    #[error("{0}")]
    FileRefused(String),
    /// A file that is not one clibot sends or stores: no name given, not a regular file, or
    /// larger than the limit.
    #[error("{0}")]
    FileUnusable(String),
    /// The file asked for is not in the session's directory.
    #[error("there is no {path} in {session}'s directory ({})", .dir.display())]
    FileMissing {
        path: String,
        session: String,
        dir: PathBuf,
    },
    /// A file that is there but cannot be read or stored now (an I/O error, an inbox that
    /// cannot be made), or that git ignores and was not forced.
    #[error("{0}")]
    FileUnreadable(String),

    // Adopting a CLI in a pane where it runs.
    /// An adoption asked for with a pane, socket or name that cannot be one, or of a pane
    /// whose CLI is not configured or not found; the text says what to pass.
    #[error("{0}")]
    AdoptRequest(String),
    /// The CLI, pane, tmux server or socket to adopt is not there (any more).
    #[error("{0}")]
    PaneGone(String),
    /// The CLI cannot be adopted where it runs: not in tmux, exited, or on a tmux server this
    /// daemon cannot follow.
    #[error("{0}")]
    CannotAdoptHere(String),
    /// A tmux server of another user: clibot would type into someone else's panes.
    #[error("{server} belongs to another user: clibot follows only this user's tmux servers")]
    OthersTmuxServer { server: String },

    // Sessions clibot hears from but does not run, and the state a session is in.
    /// A session clibot did not start (it reports through the global hooks, or was adopted in
    /// a pane of the user's own server): clibot does not type into it, read its screen or
    /// restart it; the text says how to take it over.
    #[error("{0}")]
    NotRunByClibot(String),
    /// Text was not typed because a dialog is on the screen: typed into it, it would answer it.
    #[error(
        "{name} shows a dialog: nothing was typed (answer it first: clibotctl pending, or !!pending)"
    )]
    DialogShown { name: String },
    /// A 🔒 answer not typed: the terminal was not shown to read a hidden line, so what was
    /// typed could be shown, echoed into the chat and kept in the logs.
    #[error("{0}")]
    SecretNotTyped(String),
    /// A cancel of a session that runs no turn.
    #[error("{name} is not working on a turn (it is {state}): there is nothing to cancel")]
    NothingToCancel { name: String, state: String },
    /// The CLI's own server did not take the cancel; keys still can interrupt it.
    #[error(
        "OpenCode did not take the cancel ({why}); `clibotctl keys {name} Escape` interrupts it by keys"
    )]
    CancelNotTaken { name: String, why: String },
    /// Queued input taken back that is not there: nothing is queued, or no input has that
    /// number.
    #[error("{0}")]
    NoQueuedInput(String),
    /// A jailed session cannot start without clibotd's own binary, the launcher that hands
    /// the jail its seccomp filter.
    #[error(
        "clibotd's own binary cannot be found to start a jailed session: reinstall clibot (./install.sh)"
    )]
    NoOwnBinary,

    // Who may do what to a session.
    /// Control keys (and a cancel, which presses them) from someone a session is only shared
    /// with: they interrupt or quit the CLI.
    #[error("control keys are for admins and the session's owner (a cancel too: it presses them)")]
    KeysNotAllowed,
    /// A share with something that is not a chat user (PLATFORM:USER).
    #[error(
        "{user:?} is not a chat user: write PLATFORM:USER, e.g. telegram:123456789 (`!!whoami` shows it)"
    )]
    NotAChatUser { user: String },
    /// A share by someone the session is only shared with: its owner or an admin shares it.
    #[error("only the owner of {name} ({owner}) or an admin may share it")]
    OnlyOwnerShares { name: String, owner: String },
    #[error(transparent)]
    UnknownKey(#[from] UnknownKey),
    #[error(
        "session {0:?} has exited: `clibotctl restart {0}` starts it again, `clibotctl screen {0}` shows its last screen, `clibotctl stop {0}` removes it"
    )]
    Exited(String),
    #[error(
        "session {0:?} is hibernated (stopped after being idle): a message wakes it, or `clibotctl restart {0}` starts it now"
    )]
    Hibernated(String),
    #[error("session {0:?} is being stopped")]
    Stopping(String),
    #[error(
        "this hook call does not belong to a session clibot started (unknown session id or token)"
    )]
    HookDenied,
    #[error(
        "that prompt is no longer waiting: it was already resolved (by {1}), so this answer changed nothing"
    )]
    AlreadyResolved(String, String),
    #[error(
        "that prompt is no longer waiting: {session} now waits on another prompt ({current}); answer that one, so nothing was changed"
    )]
    NotThatPrompt {
        session: String,
        prompt: String,
        current: String,
    },
    #[error(
        "that prompt is no longer waiting (prompt {0:?} is unknown: its session ended, or the daemon restarted); nothing was changed"
    )]
    UnknownPrompt(String),
    #[error("session {0:?} is not waiting for an answer: see `clibotctl screen {0}`")]
    NotWaiting(String),
    /// A delegation that cannot happen, and why.
    #[error("{0}")]
    Delegation(String),
    #[error("tmux: {0}")]
    Mux(#[from] MuxError),
    #[error(
        "no session named {0:?} is declared in the config: declare it in a [[sessions]] entry (name, cli, dir), or start a new one with `clibotctl spawn {0} --cli CLI`"
    )]
    NotDeclared(String),
    #[error(
        "cannot start {cli}: the program {program:?} was not found on the PATH that clibot's tmux server gives new sessions ({path}): install it, or set [cli.{cli}] argv to its full path"
    )]
    ProgramNotFound {
        cli: String,
        program: String,
        path: String,
    },
    #[error(
        "cannot start {cli}: {program} is not an executable file: fix its permissions, or set [cli.{cli}] argv to the right program"
    )]
    ProgramNotExecutable { cli: String, program: PathBuf },
    #[error(
        "cannot start {name}: {running} sessions run, the limit ([daemon] max_sessions); {hint}"
    )]
    TooManySessions {
        name: String,
        running: usize,
        hint: String,
    },
    #[error(
        "cannot start {name}: {user} already runs {running}, the limit for one chat user ([access.{platform}] max_sessions_per_user); {hint}"
    )]
    TooManyForUser {
        name: String,
        user: String,
        platform: String,
        /// "1 session", "4 sessions".
        running: String,
        hint: String,
    },
    #[error(
        "session {name:?} cannot queue more input: {detail}; wait for the running turn, or interrupt it (`clibotctl keys {name} Escape` / C-c)"
    )]
    QueueFull { name: String, detail: String },
    /// A budget in force refuses new sessions in its scope (`action = "stop"` or `"hold"`).
    #[error(
        "budget {name:?} is spent ({detail}): no session starts in its scope until the period ends or an admin lifts it (`clibotctl budget lift {name}`, or `!!budget lift {name}` in a chat)"
    )]
    OverBudget { name: String, detail: String },
    #[error("no budget named {0:?} is in force: `clibotctl budgets` lists them and what they used")]
    NoBudgetInForce(String),
    /// Input that could not be kept on disk is not confirmed as queued: a restart would lose it.
    #[error(
        "the message was not queued: it could not be written to clibot's state directory ({0}); free space there (is the disk full?) and send it again"
    )]
    NotQueued(#[source] std::io::Error),
    #[error("no free port on 127.0.0.1 for the CLI's own server: {0}")]
    NoPort(#[source] std::io::Error),
    #[error("state directory {path}: {source}")]
    State {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl CoreError {
    /// The error as a chat user should read it, when it differs from the text for the machine's
    /// user: what to do is a chat command (`!!sessions`, `!!restart NAME`), not a `clibotctl`
    /// one they cannot run. The gateway's default prefix, `!!`, is the one named.
    pub fn chat_text(&self) -> Option<String> {
        Some(match self {
            CoreError::NoSuchSession(name) => format!(
                "no session named {name:?}: !!sessions lists the sessions there are, !!new NAME CLI [DIR] starts one"
            ),
            CoreError::Exited(name) => format!(
                "session {name:?} has exited: !!restart {name} starts it again (resuming its conversation where its CLI can), !!screen shows its last screen, !!stop {name} removes it"
            ),
            CoreError::Hibernated(name) => format!(
                "session {name:?} is hibernated (stopped after being idle): send it a message to wake it, or !!restart {name} starts it now"
            ),
            CoreError::NotWaiting(name) => format!(
                "session {name:?} is not waiting for an answer: !!screen shows what it shows now"
            ),
            CoreError::AlreadyExists(name) => format!(
                "a session named {name:?} already exists: choose another name, or talk to it with !!use {name} (!!stop {name} removes it)"
            ),
            CoreError::TmuxNameTaken(name) => format!(
                "a tmux session named {name:?} already exists on clibot's tmux server: choose another name"
            ),
            CoreError::QueueFull { name, detail } => format!(
                "session {name:?} cannot queue more input: {detail}; wait for the running turn, or interrupt it (!!keys Escape, or !!keys C-c)"
            ),
            CoreError::DirNotFound(dir) => format!(
                "directory {} does not exist: create it or choose another (!!new NAME CLI DIR)",
                dir.display()
            ),
            CoreError::NotADirectory(dir) => format!(
                "{} is not a directory: choose a directory (!!new NAME CLI DIR)",
                dir.display()
            ),
            CoreError::NotDeclared(name) => format!(
                "no session named {name:?} is declared in the machine's config: !!sessions lists the sessions there are, !!new {name} CLI [DIR] starts a new one"
            ),
            CoreError::DirNotAbsolute(dir) => format!(
                "directory {dir:?} is not an absolute path: give a full path, such as ~/src/app"
            ),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every error that names a `clibotctl` command has chat words that name none; the machine's
    /// user keeps the `clibotctl` advice.
    #[test]
    fn chats_are_told_chat_commands_and_the_machine_clibotctl() {
        let errors = [
            CoreError::NoSuchSession("api".into()),
            CoreError::Exited("api".into()),
            CoreError::NotWaiting("api".into()),
            CoreError::AlreadyExists("api".into()),
            CoreError::TmuxNameTaken("api".into()),
            CoreError::QueueFull {
                name: "api".into(),
                detail: "100 messages wait".into(),
            },
            CoreError::DirNotFound("/nope".into()),
            CoreError::NotADirectory("/etc/hosts".into()),
            CoreError::DirNotAbsolute("src".into()),
            CoreError::NotDeclared("api".into()),
        ];
        for e in &errors {
            let chat = e
                .chat_text()
                .unwrap_or_else(|| panic!("no chat text for {e}"));
            assert!(
                !chat.contains("clibotctl") && !chat.contains("--"),
                "{chat}"
            );
            assert!(
                chat.contains("!!") || chat.contains("~/") || chat.contains("another name"),
                "{chat}"
            );
        }
        let exited = CoreError::Exited("api".into());
        assert!(
            exited.to_string().contains("`clibotctl screen api`"),
            "{exited}"
        );
        let chat = exited.chat_text().unwrap_or_default();
        assert!(
            chat.contains("!!restart api") && chat.contains("!!stop api"),
            "{chat}"
        );
        let none = CoreError::NoSuchSession("x".into());
        assert!(none.to_string().contains("clibotctl list"), "{none}");
        assert!(
            none.chat_text().unwrap_or_default().contains("!!sessions"),
            "{none}"
        );
        // Texts without a clibotctl command are the same for both.
        assert_eq!(CoreError::Stopping("api".into()).chat_text(), None);
    }

    /// The variants that build their own text read as the sites that formatted it did: a
    /// chat, a script or a test that knows the words still finds them.
    #[test]
    fn structured_variants_keep_their_words() {
        let missing = CoreError::FileMissing {
            path: "a.txt".into(),
            session: "api".into(),
            dir: "/srv/api".into(),
        };
        assert_eq!(
            missing.to_string(),
            "there is no a.txt in api's directory (/srv/api)"
        );
        let idle = CoreError::NothingToCancel {
            name: "api".into(),
            state: "idle".into(),
        };
        assert_eq!(
            idle.to_string(),
            "api is not working on a turn (it is idle): there is nothing to cancel"
        );
        let user = CoreError::NotAChatUser { user: "bob".into() };
        assert!(
            user.to_string().starts_with("\"bob\" is not a chat user"),
            "{user}"
        );
        let share = CoreError::OnlyOwnerShares {
            name: "api".into(),
            owner: "the machine's user".into(),
        };
        assert_eq!(
            share.to_string(),
            "only the owner of api (the machine's user) or an admin may share it"
        );
    }
}
