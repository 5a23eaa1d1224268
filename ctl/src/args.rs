//! The command line clibotctl takes: every command and flag, with the help text `--help`,
//! the man pages and the completions are made from.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::commands::script::{Until, parse_duration};
use crate::hooks;

/// clibotctl — drive AI coding CLIs running under clibotd.
#[derive(Debug, Parser)]
#[command(version, about, propagate_version = true)]
pub struct Cli {
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/clibot/clibotd.sock, or
    /// $TMPDIR/clibot-$UID/clibotd.sock where XDG_RUNTIME_DIR is unset]
    #[arg(long, global = true, env = "CLIBOT_SOCKET", value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// The daemon of another machine, over ssh: `ssh://user@host[:port]` or `user@host`. Runs
    /// `ssh -o BatchMode=yes … HOST clibotctl dial-stdio` with your ssh configuration;
    /// CLIBOT_SSH replaces the ssh command (`ssh -F ~/.ssh/work`), CLIBOT_REMOTE_CLIBOTCTL the
    /// program run there (a non-interactive ssh often lacks ~/.cargo/bin on PATH).
    #[arg(long, global = true, env = "CLIBOT_HOST", value_name = "URL")]
    pub host: Option<String>,
    /// Do not start clibotd when none is running.
    #[arg(long, global = true, env = "CLIBOT_NO_AUTOSTART", value_parser = clap::builder::FalseyValueParser::new())]
    pub no_autostart: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Daemon status: version, paths, tmux, sessions.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List sessions.
    #[command(alias = "ls")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Only sessions of this CLI.
        #[arg(long)]
        cli: Option<String>,
        /// Only sessions in this state (starting, idle, working, waiting, exited, error,
        /// declared, hibernated).
        #[arg(long)]
        state: Option<String>,
        /// Only sessions in this directory or below it.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Show one session.
    Show {
        /// The session's name.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start a CLI in a new session.
    Spawn {
        /// The new session's name.
        name: String,
        /// A configured CLI: claude, codex, gemini, opencode, shell, or one from [cli.NAME].
        #[arg(long)]
        cli: String,
        /// Working directory [default: the current directory].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Extra environment, KEY=VALUE (repeatable).
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// Extra arguments for the CLI, after `--`.
        #[arg(last = true)]
        args: Vec<String>,
        /// Hand the work to another CLI if this one hits an error listed in `[delegation] on`
        /// (its usage limit, a rate limit, ...).
        #[arg(long)]
        delegate: bool,
        /// Continue this conversation of the CLI (an id from `clibotctl discover`, Claude
        /// Code's session id, Codex's thread id, OpenCode's ses_…) instead of a new one.
        #[arg(long, value_name = "CONVERSATION_ID")]
        resume: Option<String>,
        /// Start it in a git worktree of its own, outside the repository --dir is in, on a new
        /// branch (BRANCH, default clibot/NAME); the checkout you work in is not touched.
        #[arg(long, value_name = "BRANCH", num_args = 0..=1, default_missing_value = "")]
        worktree: Option<String>,
        /// With --worktree: the branch, tag or commit to start from [default: HEAD].
        #[arg(long, value_name = "REF", requires = "worktree")]
        from: Option<String>,
        /// Start it with this account profile of its CLI ([cli.NAME.profiles.PROFILE]: its own
        /// config directory, say); its usage is counted under it.
        #[arg(long)]
        profile: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Continue, in a session clibot manages, the conversation of a CLI found by `discover`
    /// (one running outside tmux, or anywhere): same directory, same conversation.
    Resume {
        /// The id `clibotctl discover` shows (e.g. claude-12345).
        id: String,
        /// The new session's name [default: the CLI's name and the process id].
        #[arg(long)]
        name: Option<String>,
        /// First ask the original process to quit (SIGTERM) and wait for it (up to 10 s).
        #[arg(long)]
        quit: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Choose the CLI for a task ([[routes]], else the decider), start a session of it and
    /// type the task in.
    Route {
        /// The task (`-`: read it from stdin).
        text: String,
        /// Working directory [default: the current directory].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The session's name [default: CLI-N].
        #[arg(long)]
        name: Option<String>,
        /// Only say which CLI would take it, and why; start nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Type text into a session and submit it (`-` reads the text from stdin).
    Send {
        /// The session's name.
        name: String,
        /// The text, typed literally (`-`: read it from stdin).
        text: String,
        /// Type the text without pressing Enter.
        #[arg(long)]
        no_submit: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Send a message and print the reply of the turn it starts (behind a running turn, it is
    /// queued and its own turn's reply comes later). Exit 0 replied, 1 error (the turn was
    /// cancelled or failed), 3 a prompt waits (printed, with how to answer it), 4 timed out, 5
    /// the session exited.
    Ask {
        /// The session's name.
        name: String,
        /// The message, typed literally and submitted (`-`: read it from stdin).
        text: String,
        /// Give up after this long (30s, 15m, 2h) and exit 4 [default: wait as long as it
        /// takes].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        timeout: Option<Duration>,
        /// Print {"session", "outcome", "text", "prompt", "seq"}, whatever the outcome
        /// (replied, waiting, timeout, exited, error).
        #[arg(long)]
        json: bool,
    },
    /// Wait until a session is idle, waits on a prompt, or exited. Exit 0 when it is, 1 error,
    /// 3 a prompt waits when idle was asked (it will not get idle without an answer), 4 timed
    /// out, 5 it exited (or is gone) when that was not asked.
    Wait {
        /// The session's name.
        name: String,
        /// The state to wait for.
        #[arg(long, value_enum, default_value = "idle")]
        until: Until,
        /// Give up after this long (30s, 15m, 2h) and exit 4 [default: wait as long as it
        /// takes].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        timeout: Option<Duration>,
        /// Print {"session", "outcome", "text", "prompt", "seq"} (outcome: reached, waiting,
        /// timeout, exited, error).
        #[arg(long)]
        json: bool,
    },
    /// Press named keys: Enter, Escape, Tab, Up, Down, C-c, y, 1, ...
    Keys {
        /// The session's name.
        name: String,
        /// Key names, pressed in order.
        #[arg(required = true)]
        keys: Vec<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print what the session's pane shows.
    Screen {
        /// The session's name.
        name: String,
        /// The last N lines, scrollback included [default: the visible screen].
        #[arg(long, short = 'n')]
        lines: Option<u32>,
        /// Keep colours and attributes (escape sequences).
        #[arg(long, short = 'e')]
        escapes: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stop a session: the CLI's graceful quit, then a kill after the timeout.
    Stop {
        /// The session's name.
        name: String,
        /// Kill at once.
        #[arg(long)]
        force: bool,
        /// Seconds the graceful quit may take, 0.001 to 3600 [default: the daemon's, 5].
        #[arg(long, value_parser = parse_timeout)]
        timeout: Option<f64>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Interrupt the session's running turn the CLI's own way (Esc for Claude Code, Ctrl-C for
    /// others, OpenCode's abort API); what is queued goes next.
    Cancel {
        /// The session's name.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show the inputs queued behind the session's running turn, oldest first.
    Queue {
        /// The session's name.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Take queued inputs back: the Nth (as `clibotctl queue` numbers them), or --all.
    Drop {
        /// The session's name.
        name: String,
        /// Which queued input (from 1).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        n: Option<u32>,
        /// Drop every queued input.
        #[arg(long)]
        all: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Every prompt waiting for an answer, in every session, oldest first (answer one with
    /// `clibotctl answer NAME CHOICE`).
    Pending {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the AI CLIs running as you that clibot does not manage: in a pane of any of your
    /// tmux servers, or in another terminal (what they are comes from the process tree).
    /// Changes nothing.
    Discover {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start a session declared in the config ([[sessions]]) that does not run: an exited one
    /// is restarted, a tmux session of that name on clibot's server is adopted.
    Start {
        /// The declared session's name (`clibotctl list --state declared` shows them).
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start a session's CLI again (after it exited, or ending it first), resuming its
    /// conversation: same name, directory, arguments and environment.
    Restart {
        /// The session's name.
        name: String,
        /// Start a new conversation instead of resuming the previous one.
        #[arg(long)]
        fresh: bool,
        /// Start it with this account profile of its CLI ([cli.NAME.profiles.PROFILE]): its
        /// conversation is carried to that account where the CLI's records allow (Claude
        /// Code, Codex), else it starts a new one and is handed the last request.
        #[arg(long, value_name = "PROFILE")]
        profile: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Manage a CLI that already runs in tmux, where it runs: a tmux session on clibot's
    /// server, or (with --pane) any pane of any of your tmux servers (--server), or (with
    /// --found) a CLI that `clibotctl discover` lists.
    Adopt {
        /// The tmux session's name (or $id) on clibot's server; with --pane or --found, the
        /// name the session gets.
        target: String,
        /// Which configured CLI runs in it (claude, codex, gemini, opencode, shell, ...);
        /// with --pane or --found [default: the one its process tree shows].
        #[arg(long)]
        cli: Option<String>,
        /// The session's clibot name [default: the tmux name].
        #[arg(long, conflicts_with_all = ["pane", "found"])]
        name: Option<String>,
        /// The pane to adopt (%N, from `clibotctl discover` or `tmux list-panes -a`).
        #[arg(long, value_name = "%ID")]
        pane: Option<String>,
        /// The socket of the tmux server the pane is on [default: clibot's own]; a separate
        /// flag, since socket paths may contain `:`.
        #[arg(long, value_name = "SOCKET", requires = "pane")]
        server: Option<String>,
        /// The id `clibotctl discover` gave a CLI in a tmux pane (CLI-PID).
        #[arg(long, value_name = "ID", conflicts_with_all = ["pane", "server"])]
        found: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stop managing a session; it keeps running in tmux.
    Release {
        /// The session's name.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print events from the durable log.
    Events {
        /// Keep printing new events.
        #[arg(long, short = 'f')]
        follow: bool,
        /// Only events after this sequence number [default: 0, everything retained; with
        /// --follow alone: only new ones].
        #[arg(long)]
        since: Option<u64>,
        /// Only this session (repeatable).
        #[arg(long = "session")]
        sessions: Vec<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Attach this terminal to the session (tmux attach); detach with the tmux prefix, then d.
    Attach {
        /// The session's name.
        name: String,
    },
    /// Answer the prompt a session waits on: an option number, yes/no/always, or free text.
    Answer {
        /// The session's name.
        name: String,
        /// An option number, yes/no/always, or the text to type.
        answer: String,
        /// The prompt's id (from the waiting event); refuses to answer a different prompt.
        #[arg(long)]
        prompt: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the final reply of the session's last completed turn.
    Last {
        /// The session's name.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Let a chat user use a session made by someone else (PLATFORM:USER, e.g.
    /// telegram:123456789, as `!!whoami` shows it); --revoke takes it back.
    Share {
        /// The session's name.
        name: String,
        /// The chat user, PLATFORM:USER (e.g. telegram:123456789).
        user: String,
        /// Take the share back.
        #[arg(long)]
        revoke: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// What a chat sent and was shown (PLATFORM:CHAT, e.g. telegram:123456789), oldest first.
    Transcript {
        /// The chat, PLATFORM:CHAT (e.g. telegram:123456789).
        chat: String,
        /// Only entries since: a duration back from now (30s, 15m, 2h, 1d).
        #[arg(long, value_name = "DURATION")]
        since: Option<String>,
        /// Only the last N entries [default: 100, at most 1000].
        #[arg(short = 'n', long = "lines", value_name = "N")]
        lines: Option<u32>,
        /// One JSON object a line.
        #[arg(long)]
        json: bool,
    },
    /// The daemon's metrics, in the Prometheus text format.
    Metrics,
    /// Re-read the config file: access, rules, guard, decider, delegation, allowed roots and
    /// CLIs apply at once; says which changed sections need a daemon restart. An invalid file
    /// changes nothing.
    Reload {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Pattern packs: how clibot reads a CLI's screen.
    Patterns {
        #[command(subcommand)]
        action: PatternsAction,
    },
    /// The approval rules with how often each fired, the guard, the decider and delegation.
    Rules {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Hand a session's work to another CLI now: starts NAME-CLI in the same directory, types
    /// the last request with a handoff, moves the session's chats to it.
    Delegate {
        /// The session's name.
        name: String,
        /// The CLI to continue in [default: the next of `[delegation] to`].
        cli: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Chats bound to sessions: where delivery stands, and which chats are suspended.
    Chats {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Chat users: pending pairing codes, approvals, revocations.
    Pairing {
        #[command(subcommand)]
        action: PairingAction,
    },
    /// A session's goal: after each turn, CMD runs in the session's directory; while it fails,
    /// the session is told what failed and goes on (docs/JOBS.md). Without --until or --off:
    /// show the goal.
    Goal {
        /// The session.
        name: String,
        /// A shell command that exits 0 once the goal is reached.
        #[arg(long, conflicts_with = "off")]
        until: Option<String>,
        /// Rounds at most [default: 10].
        #[arg(long, default_value_t = 0)]
        max_turns: u32,
        /// Time at most, from now ("90m") [default: 2h].
        #[arg(long)]
        max_time: Option<String>,
        /// End the goal.
        #[arg(long)]
        off: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// What the turns cost, from the CLIs' own records: tokens by session, user, CLI, day,
    /// model, profile or machine, and each CLI's plan windows where its records tell them (docs/USAGE.md).
    Usage {
        /// Group by session, user, cli, day, model, profile (CLI:PROFILE) or machine (each
        /// daemon of [[gateway.machines]] asked in turn).
        #[arg(long, default_value = "session")]
        by: String,
        /// Turns of the last D ("7d", "24h"), or since a date ("2026-11-01") [default: 7d].
        #[arg(long)]
        since: Option<String>,
        /// Only this session's turns.
        #[arg(long)]
        session: Option<String>,
        /// Print JSON instead of text.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Print CSV (a header line, then one line per group).
        #[arg(long)]
        csv: bool,
    },
    /// The budgets ([[budgets]] in the config) and what they used in their period.
    Budgets {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Acts on a budget: `budget lift NAME` lets the input it holds go, for the rest of its
    /// period (docs/USAGE.md).
    Budget {
        #[command(subcommand)]
        action: BudgetAction,
    },
    /// The worktrees of sessions started with --worktree: diff, merge, pull request, keep,
    /// discard, prune (docs/WORKTREES.md).
    Worktree {
        #[command(subcommand)]
        action: crate::commands::worktree::WorktreeAction,
    },
    /// Jobs: work that starts itself on a schedule, when a session goes idle, or by hand
    /// (docs/JOBS.md).
    Jobs {
        #[command(subcommand)]
        action: JobsAction,
    },
    /// Print the daemon's log: its clibotd.log in the state directory, else the journal
    /// (`journalctl --user -u clibotd`). Works with the daemon down.
    Logs {
        /// Keep printing what is appended.
        #[arg(long, short = 'f')]
        follow: bool,
        /// The last N lines.
        #[arg(long, short = 'n', default_value_t = 50)]
        lines: usize,
        /// The daemon's state directory [default: the running daemon's, else
        /// CLIBOT_STATE_DIR, the config's [daemon] state_dir, ~/.local/state/clibot].
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Print the completion script for a shell (e.g. `clibotctl completions bash >
    /// ~/.local/share/bash-completion/completions/clibotctl`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Names for shell completion, one per line: the sessions, or the CLIs the daemon can
    /// start (nothing when no daemon runs). The completion scripts call it.
    #[command(name = "__names", hide = true)]
    Names {
        what: crate::commands::completions::NamesOf,
    },
    /// Print the manual page clibotctl(1); with --dir, write one page per command there.
    Man {
        /// Write clibotctl.1 and clibotctl-COMMAND.1 pages into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Check the installation (tmux, daemon, socket and state permissions, CLIs, hooks,
    /// systemd units, gateways, config) and say how to fix each problem; exit 1 on a failure.
    Doctor {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the audit log (every accepted or refused action), oldest first.
    Audit {
        /// Only this session.
        #[arg(long)]
        session: Option<String>,
        /// Only this actor: a chat user's id, PLATFORM:USER, or "local".
        #[arg(long)]
        user: Option<String>,
        /// Only records since: a duration back from now (30s, 15m, 2h, 1d) or Unix ms.
        #[arg(long, value_name = "DURATION_OR_MS")]
        since: Option<String>,
        /// Only the last N matching records.
        #[arg(short = 'n', long = "lines", value_name = "N")]
        lines: Option<usize>,
        /// The state directory [default: the running daemon's].
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Joins standard input and output to the daemon's socket, so that `ssh HOST clibotctl
    /// dial-stdio` is a connection to HOST's daemon as that user (what `--host` and the
    /// gateway's `[[gateway.machines]]` ssh entries run).
    DialStdio,
    /// Entry point for CLI hooks: reads the hook's JSON from stdin and hands it to clibotd.
    /// Never fails the CLI: with no daemon it exits 0 at once.
    #[command(hide = true)]
    Hook {
        /// Which CLI's hook this is.
        #[arg(long)]
        cli: String,
        /// A hook from the CLI's own settings (`hooks install`): reports a session clibot did
        /// not start; does nothing inside one it did.
        #[arg(long)]
        global: bool,
        /// The event name, for CLIs that do not put it in the payload.
        event: Option<String>,
    },
    /// Hooks in the CLIs' own settings, so that every Claude Code, Codex and Gemini CLI
    /// session on this machine (one in a plain terminal too) reports its turns and prompts to
    /// clibotd: install, uninstall, status. Needs no daemon.
    Hooks {
        #[command(subcommand)]
        action: hooks::Action,
    },
    /// Automatic answers (approval rules, the decider): what became of them.
    Automation {
        #[command(subcommand)]
        action: AutomationAction,
    },
}

#[derive(Debug, Subcommand)]
pub enum AutomationAction {
    /// Per rule and for the decider: answers given (approved, denied), what followed them
    /// (the turn completed, errored, undone by an interrupt or a stop within a minute,
    /// pending), prompts left to a person, the last time each fired; then the latest answers.
    Report {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// A job as `jobs add` takes it: the fields of a `[[jobs]]` entry.
#[derive(Debug, clap::Args)]
pub struct JobArgs {
    /// The job's name.
    pub name: String,
    /// Type the prompt into this session (queued behind its running turn).
    #[arg(long, conflicts_with_all = ["cli", "dir"])]
    pub session: Option<String>,
    /// Or start a session of this CLI for each run, in --dir.
    #[arg(long, requires = "dir")]
    pub cli: Option<String>,
    /// The directory the sessions of --cli start in.
    #[arg(long)]
    pub dir: Option<String>,
    /// What is typed.
    #[arg(long)]
    pub prompt: String,
    /// Five cron fields ("0 9 * * 1-5"), in --tz.
    #[arg(long, group = "when")]
    pub cron: Option<String>,
    /// An IANA time zone for --cron and --at [default: the machine's].
    #[arg(long)]
    pub tz: Option<String>,
    /// Every so long ("30m").
    #[arg(long, group = "when")]
    pub every: Option<String>,
    /// Once, at this local time ("2026-12-01T09:00").
    #[arg(long, group = "when")]
    pub at: Option<String>,
    /// Once, this long from now ("2h").
    #[arg(long, group = "when")]
    pub after: Option<String>,
    /// Each time this session ends a turn with nothing queued.
    #[arg(long, group = "when")]
    pub when_idle: Option<String>,
    /// Each time a delivery signed with the job's secret comes to POST /hooks/NAME
    /// ([triggers] listen). A new secret is made and printed once, unless
    /// --webhook-secret-env names a variable holding one.
    #[arg(long, group = "when")]
    pub webhook: bool,
    /// The environment variable holding the webhook's secret (never given on the command
    /// line: other users can read it there).
    #[arg(long, requires = "webhook", value_name = "VAR")]
    pub webhook_secret_env: Option<String>,
    /// A field of the payload added to the prompt ("workflow_run.html_url"); repeatable.
    #[arg(long = "webhook-field", requires = "webhook", value_name = "PATH")]
    pub webhook_fields: Vec<String>,
    /// Run only when a field has this value ("workflow_run.conclusion=failure"); repeatable.
    #[arg(
        long = "webhook-match",
        requires = "webhook",
        value_name = "PATH=VALUE"
    )]
    pub webhook_matches: Vec<String>,
    /// A program (and its arguments) run first in the target's directory: exit 0 runs the
    /// job with its output added, 1 skips the run, anything else fails it. E.g. --gate sh
    /// --gate -c --gate 'test -f TODO'.
    #[arg(long = "gate", allow_hyphen_values = true)]
    pub gate: Vec<String>,
    /// When the previous run has not ended: skip, queue or parallel.
    #[arg(long, default_value = "skip")]
    pub overlap: String,
    /// Runs due while clibotd was down: skip or run_once.
    #[arg(long, default_value = "skip")]
    pub missed: String,
    /// At most N runs a day (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_runs_per_day: u32,
    /// Say nothing in the chats when a run has nothing to say.
    #[arg(long)]
    pub quiet: bool,
    /// Pause after N failed runs in a row [default: 3].
    #[arg(long, default_value_t = 0)]
    pub pause_after_failures: u32,
    /// Replace a job of the same name.
    #[arg(long)]
    pub replace: bool,
}

impl JobArgs {
    /// The job as the daemon takes it; a relative --dir is made absolute here (the daemon
    /// has a directory of its own).
    ///
    /// With `--webhook`, the secret is read from `--webhook-secret-env` or made here; the
    /// second value is a made one, to print once.
    pub fn spec(self) -> anyhow::Result<(clibot_proto::v1::JobSpec, Option<String>)> {
        let mut made = None;
        let webhook = if self.webhook {
            let secret = match &self.webhook_secret_env {
                Some(var) => std::env::var(var).map_err(|_| {
                    anyhow::anyhow!("--webhook-secret-env: ${var} is not set (export it first)")
                })?,
                None => {
                    let s = new_secret()?;
                    made = Some(s.clone());
                    s
                }
            };
            let mut r#match = std::collections::HashMap::new();
            for m in &self.webhook_matches {
                let (path, value) = m.split_once('=').ok_or_else(|| {
                    anyhow::anyhow!(
                        "--webhook-match {m:?}: write PATH=VALUE (workflow_run.conclusion=failure)"
                    )
                })?;
                r#match.insert(path.to_string(), value.to_string());
            }
            Some(clibot_proto::v1::JobWebhook {
                secret,
                fields: self.webhook_fields.clone(),
                r#match,
                secret_set: false,
            })
        } else {
            None
        };
        let dir = self.dir.map(|dir| {
            let p = std::path::Path::new(&dir);
            if p.is_absolute() || dir.starts_with('~') {
                return dir;
            }
            std::env::current_dir()
                .map(|c| c.join(p).display().to_string())
                .unwrap_or(dir)
        });
        let spec = clibot_proto::v1::JobSpec {
            name: self.name,
            session: self.session.unwrap_or_default(),
            cli: self.cli.unwrap_or_default(),
            dir: dir.unwrap_or_default(),
            prompt: self.prompt,
            cron: self.cron.unwrap_or_default(),
            tz: self.tz.unwrap_or_default(),
            every: self.every.unwrap_or_default(),
            at: self.at.unwrap_or_default(),
            after: self.after.unwrap_or_default(),
            when_idle: self.when_idle.unwrap_or_default(),
            gate: self.gate,
            overlap: self.overlap,
            missed: self.missed,
            max_runs_per_day: self.max_runs_per_day,
            quiet: self.quiet,
            pause_after_failures: self.pause_after_failures,
            webhook,
        };
        Ok((spec, made))
    }
}

/// A webhook secret: 32 random bytes from the kernel, in hex.
fn new_secret() -> anyhow::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| anyhow::anyhow!("cannot make a webhook secret (/dev/urandom: {e})"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[derive(Debug, Subcommand)]
pub enum BudgetAction {
    /// Lifts a budget in force for the rest of its period: held input goes, sessions start.
    Lift {
        /// The budget's name (`clibotctl budgets` lists them).
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum JobsAction {
    /// Add a job (checked first: every mistake names its field).
    Add {
        #[command(flatten)]
        job: Box<JobArgs>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The jobs: when each is due, what it did last, what it missed or skipped.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One job, all of it.
    Show {
        /// The job.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove a job (one from the config is removed in the config).
    Remove {
        /// The job.
        name: String,
    },
    /// Pause a job: nothing runs until it is resumed.
    Pause {
        /// The job.
        name: String,
    },
    /// Resume a paused job: its next time counts from now.
    Resume {
        /// The job.
        name: String,
    },
    /// Run a job now, whatever its schedule.
    Run {
        /// The job.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum PairingAction {
    /// Pending codes and approved users.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Let the chat user who was given CODE act.
    Approve {
        /// The pairing code the chat user was given.
        code: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Take access away from a user (platform: telegram, discord, feishu, slack, console).
    Revoke {
        /// telegram, discord, feishu, slack or console.
        platform: String,
        /// The user's id on that platform.
        user: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn parse_timeout(s: &str) -> Result<f64, String> {
    let t: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    // 0 means the default ([daemon] stop_timeout_ms), as the help says.
    if t == 0.0 || (0.001..=3600.0).contains(&t) {
        Ok(t)
    } else {
        Err("must be 0 (the default) or between 0.001 and 3600 seconds".into())
    }
}

#[derive(Debug, Subcommand)]
pub enum PatternsAction {
    /// Runs a captured screen through a CLI's pattern pack, as clibotd reads its panes: the
    /// prompt it would see (kind, question, options, subject, context), busy or idle, errors.
    /// Capture one with `tmux -L clibot capture-pane -p -t NAME > screen.txt` (or `clibotctl
    /// screen NAME`), fix the pack (`[cli.NAME.patterns]`, then `clibotctl reload`), test again.
    Test {
        /// The screen's text; `-` reads it from stdin.
        file: PathBuf,
        /// The CLI whose pack reads it (as in the config) [default: the generic pack].
        #[arg(long)]
        cli: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}
