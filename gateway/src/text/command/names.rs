//! The command words: their order in help, their argument synopses and one-line summaries.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The command words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandName {
    Help,
    Sessions,
    Discover,
    Adopt,
    Pending,
    Use,
    New,
    Whoami,
    Status,
    Screen,
    Shot,
    Get,
    Keys,
    Stop,
    Cancel,
    Queue,
    Drop,
    Start,
    Restart,
    Ask,
    Last,
    Answer,
    Pair,
    Share,
    History,
    Rules,
    Delegate,
    Jobs,
    Usage,
    Job,
    Goal,
    Budget,
    Worktree,
    Discard,
    Board,
}

impl CommandName {
    /// All commands, in help order.
    pub const ALL: [CommandName; 35] = [
        CommandName::Help,
        CommandName::Sessions,
        CommandName::Discover,
        CommandName::Adopt,
        CommandName::Pending,
        CommandName::Use,
        CommandName::New,
        CommandName::Whoami,
        CommandName::Status,
        CommandName::Screen,
        CommandName::Shot,
        CommandName::Get,
        CommandName::Keys,
        CommandName::Stop,
        CommandName::Cancel,
        CommandName::Queue,
        CommandName::Drop,
        CommandName::Start,
        CommandName::Restart,
        CommandName::Ask,
        CommandName::Last,
        CommandName::Answer,
        CommandName::Pair,
        CommandName::Share,
        CommandName::History,
        CommandName::Rules,
        CommandName::Delegate,
        CommandName::Jobs,
        CommandName::Usage,
        CommandName::Job,
        CommandName::Goal,
        CommandName::Budget,
        CommandName::Worktree,
        CommandName::Discard,
        CommandName::Board,
    ];

    /// The word typed after the prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            CommandName::Help => "help",
            CommandName::Sessions => "sessions",
            CommandName::Discover => "discover",
            CommandName::Adopt => "adopt",
            CommandName::Pending => "pending",
            CommandName::Use => "use",
            CommandName::New => "new",
            CommandName::Whoami => "whoami",
            CommandName::Status => "status",
            CommandName::Screen => "screen",
            CommandName::Shot => "shot",
            CommandName::Get => "get",
            CommandName::Keys => "keys",
            CommandName::Stop => "stop",
            CommandName::Cancel => "cancel",
            CommandName::Queue => "queue",
            CommandName::Drop => "drop",
            CommandName::Restart => "restart",
            CommandName::Start => "start",
            CommandName::Ask => "ask",
            CommandName::Last => "last",
            CommandName::Answer => "answer",
            CommandName::Pair => "pair",
            CommandName::Share => "share",
            CommandName::History => "history",
            CommandName::Rules => "rules",
            CommandName::Delegate => "delegate",
            CommandName::Jobs => "jobs",
            CommandName::Usage => "usage",
            CommandName::Job => "job",
            CommandName::Goal => "goal",
            CommandName::Budget => "budget",
            CommandName::Worktree => "worktree",
            CommandName::Discard => "discard",
            CommandName::Board => "board",
        }
    }

    /// The argument synopsis (`NAME CLI [DIR]`), empty for none.
    pub fn args(self) -> &'static str {
        match self {
            CommandName::Help => "[COMMAND]",
            CommandName::Use => "NAME",
            CommandName::New => "NAME CLI [DIR] [--profile P] [delegate] [wt[=BRANCH]]",
            CommandName::Screen => "[N]",
            CommandName::Get => "[--force] PATH",
            CommandName::Keys => "KEY…",
            CommandName::Stop => "[NAME]",
            CommandName::Cancel => "[NAME]",
            CommandName::Drop => "[N|all]",
            CommandName::Restart => "[NAME] [fresh]",
            CommandName::Start => "NAME",
            CommandName::Adopt => "ID [NAME]",
            CommandName::Ask => "TEXT",
            CommandName::Answer => "CHOICE",
            CommandName::Pair => "[CODE]",
            CommandName::Share => "NAME USER [off]",
            CommandName::History => "[N]",
            CommandName::Delegate => "[CLI]",
            CommandName::Job => "add|run|pause|resume|remove NAME",
            CommandName::Goal => "NAME [CMD…|off]",
            CommandName::Usage => "[day|week|month]",
            CommandName::Budget => "[lift NAME]",
            CommandName::Worktree => "[NAME] [diff [FILE]|merge [BRANCH]|pr|keep]",
            CommandName::Discard => "NAME",
            CommandName::Board => "[off]",
            CommandName::Rules
            | CommandName::Jobs
            | CommandName::Sessions
            | CommandName::Discover
            | CommandName::Pending
            | CommandName::Shot
            | CommandName::Queue
            | CommandName::Whoami
            | CommandName::Status
            | CommandName::Last => "",
        }
    }

    /// One line saying what it does.
    pub fn summary(self) -> &'static str {
        match self {
            CommandName::Help => "list commands, or show one command's usage",
            CommandName::Sessions => "list sessions",
            CommandName::Discover => {
                "list the AI CLIs running on the machine outside clibot (admins)"
            }
            CommandName::Adopt => {
                "take over CLI ID that !!discover found in a tmux pane, where it runs, and talk to it from this chat (admins)"
            }
            CommandName::Pending => {
                "every prompt waiting for an answer, oldest first, with its buttons"
            }
            CommandName::Use => "talk to session NAME from this chat",
            CommandName::New => {
                "start CLI (claude, codex, …) in a new session NAME (delegate: hand its work to another CLI if it hits its limits; wt: in a git worktree of its own)"
            }
            CommandName::Whoami => "show your user id",
            CommandName::Status => "show the current session's state",
            CommandName::Screen => "show the screen, or its last N lines",
            CommandName::Shot => "a picture of the screen, with its colours",
            CommandName::Get => {
                "send PATH from the session's directory (--force: a git-ignored file, or one that holds a secret, too; admins)"
            }
            CommandName::Keys => {
                "press keys: Enter Escape Tab Up Down C-c y 1 … (admins, and a session's owner in it)"
            }
            CommandName::Stop => "stop the current session, or NAME",
            CommandName::Cancel => "interrupt the running turn of the current session, or NAME",
            CommandName::Queue => "show the messages queued behind the running turn",
            CommandName::Drop => "take back queued message N, or all of them",
            CommandName::Restart => {
                "start the CLI again, resuming its conversation (fresh: a new one)"
            }
            CommandName::Start => {
                "start session NAME as the machine's config declares it (admins; !!sessions lists them)"
            }
            CommandName::Ask => {
                "start a session of the CLI best suited to TEXT (the machine's routes decide) and send it TEXT"
            }
            CommandName::Last => "repeat the last reply",
            CommandName::Answer => "answer the waiting prompt",
            CommandName::Pair => "pair this chat with the gateway",
            CommandName::Share => {
                "let another user (their id, from their !!whoami) use session NAME; off takes it back"
            }
            CommandName::History => "show this chat's last N messages, sent and received (20)",
            CommandName::Rules => "show the approval rules and how often each fired",
            CommandName::Delegate => {
                "hand the current session's work to CLI (or the next configured one) and move this chat there"
            }
            CommandName::Jobs => "list the jobs you may see: when each runs, what it did last",
            CommandName::Usage => {
                "what your sessions' turns cost in tokens today (or this week, month), and the plan's windows where the CLI tells them"
            }
            CommandName::Job => {
                "add a job (shown on a card with Add and Cancel first), run one now, pause or resume it, or remove it (its owner or an admin)"
            }
            CommandName::Goal => {
                "keep session NAME working until the shell command CMD succeeds (checked after each turn); off ends it"
            }
            CommandName::Budget => {
                "the budgets and what they used this period; lift NAME lets the input a spent budget holds go (admins)"
            }
            CommandName::Worktree => {
                "session NAME's git worktree on a card: Diff, Merge, Open PR, Keep, Discard (without NAME: the worktrees you may finish)"
            }
            CommandName::Discard => {
                "delete session NAME's worktree and its branch, whatever they hold (typing the name is the confirmation)"
            }
            CommandName::Board => {
                "pin a board here that stays up to date: each session's state, what waits for you, usage, worktree, next job; off takes it down"
            }
        }
    }

    /// `help COMMAND`: the usage line, what it does, and an example or what to know. `{p}`
    /// in the text stands for the prefix.
    pub fn help(self, prefix: &str) -> String {
        let more = match self {
            CommandName::Help => "{p}help new shows how to start a session.",
            CommandName::Sessions => {
                "Each: name, CLI, state, whether this chat talks to it (▶), how long it has run, and what it last did and when."
            }
            CommandName::Discover => "Then {p}adopt ID [NAME] takes one over where it runs.",
            CommandName::Adopt => {
                "Example: {p}adopt 3 api. Its replies may be empty until the CLI writes its first conversation."
            }
            CommandName::Pending => {
                "Answer with the buttons, or 1–9, y or n in the session's chat."
            }
            CommandName::Use => "Example: {p}use api. Messages without the prefix then go to api.",
            CommandName::New => {
                "Example: {p}new api claude ~/src/api. Without DIR it starts in your workspace."
            }
            CommandName::Whoami => {
                "Give the id to an admin to be allowed in, or to share a session with you."
            }
            CommandName::Status => "The state, the running turn and what waits in the queue.",
            CommandName::Screen => "Example: {p}screen 20. Blank rows are left out.",
            CommandName::Shot => "Sent as an image.",
            CommandName::Get => {
                "Example: {p}get target/report.html. A path outside the session's directory is refused."
            }
            CommandName::Keys => "Example: {p}keys Escape, {p}keys C-c, {p}keys Down Enter.",
            CommandName::Stop => {
                "A dialog on screen is dismissed first; the CLI is asked to quit before it is ended."
            }
            CommandName::Cancel => {
                "Like Escape at the desk: the queue stays, {p}drop all empties it."
            }
            CommandName::Queue => "Numbered: {p}drop N takes one back.",
            CommandName::Drop => "Example: {p}drop 2, or {p}drop all.",
            CommandName::Restart => "Example: {p}restart api fresh starts a new conversation.",
            CommandName::Start => "Example: {p}start api.",
            CommandName::Ask => "Example: {p}ask write tests for the parser.",
            CommandName::Last => "Long replies come as a file.",
            CommandName::Answer => {
                "Example: {p}answer 2. A bare 1–9, y or n does the same while a prompt waits."
            }
            CommandName::Pair => {
                "Send {p}pair, then give the code to the machine's owner: clibotctl pair approve CODE."
            }
            CommandName::Share => {
                "Example: {p}share api 123456789, then {p}share api 123456789 off."
            }
            CommandName::History => "Example: {p}history 50.",
            CommandName::Rules => "Rules are set in the machine's config ([[rules]]).",
            CommandName::Delegate => "Example: {p}delegate codex.",
            CommandName::Jobs => {
                "Jobs are added with {p}job add, or on the machine: clibotctl jobs add (docs/JOBS.md)."
            }
            CommandName::Usage => "Example: {p}usage week. Admins see every session's.",
            CommandName::Budget => {
                "Budgets are set in the config ([[budgets]]); a lift lasts until the period ends."
            }
            CommandName::Worktree => {
                "Example: {p}worktree api, then a button; or {p}worktree api merge, {p}worktree api diff src/main.rs (docs/WORKTREES.md)."
            }
            CommandName::Discard => {
                "Example: {p}discard api. Nothing asks again: the name typed is the confirmation."
            }
            CommandName::Board => {
                "Example: {p}board, then {p}board off. Its buttons show what waits, the screen, jobs and usage."
            }
            CommandName::Job => {
                "Example: {p}job add nightly session=api cron=\"0 9 * * 1-5\" tz=Europe/Berlin prompt=Run the tests — fields key=value (session, cli, dir, cron, tz, every, at, after, idle, gate, overlap, missed, max_runs_per_day, quiet, pause_after_failures), prompt=TEXT last; {p}job run nightly, {p}job pause nightly."
            }
            CommandName::Goal => {
                "Example: {p}goal api cargo test — at most 10 rounds and 2 hours; {p}goal api shows it."
            }
        };
        format!(
            "{} — {}\n{}",
            self.usage(prefix),
            self.summary(),
            more.replace("{p}", prefix)
        )
    }

    /// The usage line with `prefix`: `!!new NAME CLI [DIR]`.
    pub fn usage(self, prefix: &str) -> String {
        match self.args() {
            "" => format!("{prefix}{}", self.as_str()),
            args => format!("{prefix}{} {args}", self.as_str()),
        }
    }

    /// Looks a command word up, ignoring ASCII case.
    pub fn parse(word: &str) -> Option<CommandName> {
        CommandName::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(word))
    }
}

impl fmt::Display for CommandName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `help COMMAND` gives the usage with the chat's prefix, what it does, and more; every
    /// command has its own words.
    #[test]
    fn each_command_has_its_help() {
        let new = CommandName::New.help("!!");
        assert!(new.starts_with("!!new NAME CLI [DIR]"), "{new}");
        assert!(new.contains("Example: !!new api claude ~/src/api"), "{new}");
        assert!(CommandName::Keys.help("/").contains("/keys Escape"));
        for c in CommandName::ALL {
            let h = c.help("!!");
            assert!(h.contains(c.summary()) && !h.contains("{p}"), "{h}");
        }
    }
}
