//! The core's errors. Each says what went wrong and what to do about it; the gRPC layer maps
//! each to a precise status code.

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
    #[error(
        "no session named {0:?} that you may use: a session belongs to the chat user who made it; its owner can share it with `!!share {0} PLATFORM:USER`"
    )]
    NotYours(String),
    #[error("only the owner of {0:?} or an admin may do that; it is only shared with you")]
    NotOwner(String),
    #[error("no tmux session {0:?} on clibot's tmux server: see `{1}` for the sessions there are")]
    NoSuchTmuxSession(String, String),
    #[error("tmux session {0:?} is already managed as session {1:?}")]
    AlreadyManaged(String, String),
    #[error(
        "text is {len} bytes, more than the {max} bytes one send may carry: split it, or raise [daemon] max_input_bytes"
    )]
    TextTooLong { len: usize, max: usize },
    #[error("{0}")]
    InvalidArgument(String),
    /// Something named that does not exist (a pane, a socket); the text says what to look at.
    #[error("{0}")]
    NotFound(String),
    /// The operation cannot happen in the present state; the text says why.
    #[error("{0}")]
    FailedPrecondition(String),
    /// Not this caller's to do; the text says whose.
    #[error("{0}")]
    PermissionDenied(String),
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
}
