//! The daemon's core: the holder of the parts — the sessions' table, the live config, the
//! event log, the chat tables, tmux — and what every operation shares (recording an event,
//! persisting the registry, changing a state). The core calls no feature: recording an event
//! publishes it on the bus (`core/bus.rs`), where automatic answers, delegation, outcomes and metrics
//! follow it; starting the daemon (adopting its sessions) is `session/startup.rs`'s. The
//! operations themselves live with their concern in `session/`; the core knows nothing of gRPC
//! (`rpc/` translates) and nothing below it names it.
//!
//! Locking: the sessions' table keeps its lock to itself (`core/sessions.rs`): it is short-lived
//! and never held across an await. Each session
//! has its own async input lock, a fair FIFO queue, so input to one session is delivered in
//! arrival order while other sessions proceed in parallel. Stopping does not take the input
//! lock: a stop must never wait behind a long paste.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::Settings;
use crate::error::CoreError;
use crate::locking::lock;
use crate::model::Actor;
use crate::model::{SessionRecord, State};
use crate::paths::create_private_dir;
use crate::store::events::{Event, EventKind, EventLog};
use crate::store::{RegistryFile, load_registry, now_ms, save_registry};
use crate::tmux::{Mux, MuxError};

/// The safety net's period grows by this much per running session (10 s at 500 sessions).
pub(crate) const SAFETY_NET_PER_SESSION: Duration = Duration::from_millis(20);

/// A spawn request.
#[derive(Debug, Clone, Default)]
pub struct SpawnRequest {
    pub name: String,
    pub cli: String,
    pub dir: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// The chat user it is made for ("PLATFORM:USER"); empty on the machine.
    pub owner: String,
    /// Hand the work to another CLI on an error listed in `[delegation] on`.
    pub delegate: bool,
    /// The CLIs the work went through before (set by a delegation).
    pub delegated_from: Vec<String>,
    /// Why the work left each of those CLIs (set by a delegation).
    pub delegated_reasons: Vec<String>,
    /// A conversation of the CLI to continue (`spawn --resume ID`); empty: a new one.
    pub resume: String,
    /// An account profile of the CLI (`[cli.NAME.profiles.PROFILE]`); empty: none.
    pub profile: String,
    /// Start it in a git worktree of its own (`--worktree [BRANCH] [--from REF]`).
    pub worktree: Option<crate::worktrees::WorktreeAsk>,
}

/// Filters for [`Daemon::list`]; empty fields match everything.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub cli: String,
    pub dir: Option<PathBuf>,
    pub state: Option<State>,
}

/// How a stop went.
#[derive(Debug, Clone, PartialEq)]
pub struct StopOutcome {
    pub forced: bool,
    pub exit_status: Option<i32>,
}

/// Daemon-wide facts for `Status`.
#[derive(Debug, Clone)]
pub struct StatusInfo {
    pub uptime: Duration,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub config_file: Option<PathBuf>,
    /// When the config in use was read (Unix ms).
    pub config_read_ms: i64,
    pub tmux_args: Vec<String>,
    pub tmux_version: Option<String>,
    pub sessions: usize,
    pub last_seq: u64,
    pub clis: Vec<String>,
    pub warnings: Vec<String>,
    /// Prompts waiting for an answer, in every session.
    pub pending_prompts: usize,
}

pub(crate) struct Inner {
    settings: Settings,
    /// What `reload` replaces: CLIs, allowed roots, rules, guard, decider, delegation.
    live: std::sync::RwLock<Arc<crate::core::live::Live>>,
    /// The secret paths no session may start in (see [`crate::confine::secrets`]).
    secrets: Vec<PathBuf>,
    mux: Arc<dyn Mux>,
    /// The user's other tmux servers that sessions adopted in place run on: socket → its
    /// multiplexer (one control connection each, made when first needed).
    servers: Mutex<std::collections::HashMap<String, Arc<dyn Mux>>>,
    /// Every session, by name: the table's lock is its own ([`Sessions`]).
    sessions: Sessions,
    events: EventLog,
    registry_path: PathBuf,
    /// False when the registry exists but could not be read at start: it is not saved over.
    registry_writable: bool,
    /// Serialises registry writes so an older snapshot never overwrites a newer one.
    /// The registry is being written (true), and changed meanwhile (true): see `persist`.
    persist: Mutex<(bool, bool)>,
    started: Instant,
    warnings: Mutex<Vec<String>>,
    /// The per-session hook sockets of jailed sessions.
    hook_sockets: Mutex<crate::confine::HookSockets>,
    paste_counter: AtomicU64,
    /// Cancelled when the daemon shuts down; every watcher and waiting hook ends with it.
    shutdown: CancellationToken,
    access: crate::chat::access::Access,
    chats: crate::chat::chats::Chats,
    /// Recently accepted chat messages, so that one handed over twice is typed once.
    seen_inputs: Arc<crate::chat::dedupe::Dedupe>,
    /// Each session's queued input, on disk ([`crate::store::queue_file`]).
    queues: crate::store::queue_file::QueueFiles,
    audit: crate::store::audit::Audit,
    /// What became of automatic answers ([`crate::store::outcomes`]).
    outcomes: crate::store::outcomes::Outcomes,
    /// The jobs, what they did and when they are due ([`crate::jobs::table`]).
    jobs: crate::jobs::Jobs,
    /// The sessions' goals ([`crate::jobs::goals`]).
    goals: crate::jobs::goals::Goals,
    /// The worktrees clibot made ([`crate::worktrees::kept`]).
    worktrees: crate::worktrees::kept::KeptWorktrees,
    /// The counted turns' usage ([`crate::usage::ledger`]).
    usage: crate::usage::ledger::Ledger,
    /// What the budgets did in their periods ([`crate::usage::budgets`]).
    budgets: crate::usage::budgets::Budgets,
    metrics: Arc<crate::ops::metrics::Metrics>,
    /// tmux's global PATH, once read (see `check_program`).
    global_path: Mutex<Option<String>>,
    /// `[gateway.PLATFORM] default_chat`, as the gateways set it: platform → chat.
    default_chats: Mutex<std::collections::BTreeMap<String, String>>,
    /// The parts that follow the events recorded ([`bus`]).
    bus: bus::Bus,
    /// Work started in the background that a shutdown lets finish ([`Daemon::in_background`]).
    tasks: tokio_util::task::TaskTracker,
}

/// The core. Cheap to clone; all clones share one state.
#[derive(Clone)]
pub struct Daemon {
    pub(crate) inner: Arc<Inner>,
}

impl Daemon {
    /// Opens the state directory and every store in it, and prepares the tmux server; returns
    /// the daemon, with no session in its table yet, and the registry as the last daemon left
    /// it (brought up to the event log). Events are published to `bus`. Adopting the sessions
    /// and starting their watchers is the caller's (`session/startup.rs`).
    pub(crate) async fn open(
        settings: Settings,
        mux: Arc<dyn Mux>,
        bus: bus::Bus,
    ) -> Result<(Daemon, RegistryFile), CoreError> {
        let state_dir = settings.state_dir.clone();
        create_private_dir(&state_dir).map_err(|source| CoreError::State {
            path: state_dir.clone(),
            source,
        })?;
        let mut warnings = crate::store::tighten_files(&state_dir);
        let registry_path = state_dir.join("sessions.json");
        let (registry, w, registry_writable) = load_registry(&registry_path);
        warnings.extend(w);
        // The delivery cursors before the log: numbering must continue above every event a
        // chat was told about, even if the log lost its tail (a power loss) or was set aside.
        let (chats, w) = crate::chat::chats::Chats::open(&state_dir);
        warnings.extend(w);
        let (events, w) = EventLog::open_bounded(
            &state_dir.join("events.jsonl"),
            settings.config.daemon.event_retention,
            settings.config.daemon.event_memory_bytes,
            registry.last_seq.max(chats.max_seq()),
        );
        warnings.extend(w);
        // The registry is a snapshot of where the log had got to: what the log recorded after
        // it is applied to it ([`crate::store::catch_up`]).
        let mut registry = registry;
        let after = events.read_after(registry.last_seq, usize::MAX).events;
        let caught = crate::store::catch_up::catch_up(&mut registry, &after);
        if caught > 0 {
            info!(
                events = caught,
                "the session registry was behind the event log: brought up to it"
            );
        }
        // A binding whose cursor was damage and had no other chat to resume from starts at
        // the log's end, not at its beginning.
        chats.place_unplaced(events.last_seq());

        let secrets = crate::confine::secrets::for_daemon(
            settings.config_file.as_deref(),
            &settings.state_dir,
        );
        // Jailed sessions' own homes: what lies there is read with no link followed (their
        // files, `sessions/ID`, are registered as each is jailed or names a record).
        crate::confine::beneath::confine_below(state_dir.join("jails"));
        let (live, w) = crate::core::live::Live::build(&settings.config, &secrets)?;
        warnings.extend(w);
        match mux.ensure_server(settings.config.tmux.history_limit).await {
            Ok(()) => {}
            Err(e @ MuxError::Spawn { .. }) => return Err(e.into()),
            Err(e) => warnings.push(format!("could not prepare the tmux server: {e}")),
        }
        if let Ok(v) = mux.version().await
            && let Some(warning) = old_tmux_warning(&v)
        {
            warnings.push(warning);
        }
        let (access, w) =
            crate::chat::access::Access::open(&state_dir, settings.config.access.clone());
        warnings.extend(w);
        let (audit, w) = crate::store::audit::Audit::open(
            &state_dir,
            crate::store::audit::Limits {
                max_bytes: settings.config.daemon.audit_max_bytes,
                files: settings.config.daemon.audit_files,
            },
        );
        warnings.extend(w);
        let (seen_inputs, w) = crate::chat::dedupe::Dedupe::open(&state_dir);
        warnings.extend(w);
        let (outcomes, w) = crate::store::outcomes::Outcomes::open(&state_dir, now_ms());
        warnings.extend(w);
        let (jobs, w) = crate::jobs::Jobs::open(&state_dir, now_ms());
        warnings.extend(w);
        let (goals, w) = crate::jobs::goals::Goals::open(&state_dir);
        warnings.extend(w);
        let (worktrees, w) = crate::worktrees::kept::KeptWorktrees::open(&state_dir);
        warnings.extend(w);
        let (usage, w) = crate::usage::ledger::Ledger::open(&state_dir);
        warnings.extend(w);
        let (budgets, w) = crate::usage::budgets::Budgets::open(&state_dir);
        warnings.extend(w);
        for w in &warnings {
            warn!("{w}");
        }
        let daemon = Daemon {
            inner: Arc::new(Inner {
                access,
                audit,
                outcomes,
                jobs,
                goals,
                worktrees,
                usage,
                budgets,
                chats,
                seen_inputs,
                queues: crate::store::queue_file::QueueFiles::new(&state_dir),
                shutdown: CancellationToken::new(),
                live: std::sync::RwLock::new(Arc::new(live)),
                secrets,
                settings,
                mux,
                servers: Mutex::new(Default::default()),
                sessions: Sessions::default(),
                events,
                registry_path,
                registry_writable,
                persist: Mutex::new((false, false)),
                started: Instant::now(),
                warnings: Mutex::new(warnings),
                hook_sockets: Mutex::new(crate::confine::HookSockets::new()),
                paste_counter: AtomicU64::new(0),
                metrics: Arc::new(crate::ops::metrics::Metrics::new()),
                global_path: Mutex::new(None),
                default_chats: Mutex::new(Default::default()),
                bus,
                tasks: tokio_util::task::TaskTracker::new(),
            }),
        };
        Ok((daemon, registry))
    }

    /// Cancelled when the daemon shuts down; every watcher and waiting hook ends with it.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// Writes an audit record.
    pub fn audit(&self, actor: &Actor, session: &str, action: &str, result: Result<(), &str>) {
        let (outcome, detail) = match result {
            Ok(()) => ("accepted", ""),
            Err(e) => ("refused", e),
        };
        let mut record = crate::store::audit::Audit::now(
            &actor.user,
            &actor.platform,
            &actor.chat,
            session,
            action,
            outcome,
            detail,
        );
        record.via = &actor.via;
        self.inner.audit.record(record);
    }

    /// Chat bindings and delivery cursors.
    pub fn chats(&self) -> &crate::chat::chats::Chats {
        &self.inner.chats
    }

    /// Access state, for pairing management.
    pub fn access(&self) -> &crate::chat::access::Access {
        &self.inner.access
    }

    pub(crate) fn warn(&self, w: String) {
        warn!("{w}");
        lock(&self.inner.warnings).push(w);
    }

    /// Records an event and publishes it on the bus: each subscriber may first amend it (a
    /// prompt is looked at by the guard and the rules, so that what the log and the chats show
    /// says whether it is being answered automatically), then sees it as written. Never called
    /// with the session table locked.
    pub(crate) fn event(&self, session: &str, id: &str, kind: EventKind) -> u64 {
        self.event_full(session, id, kind).seq
    }

    /// [`Daemon::event`], returning the event as written (long texts cut to their head).
    pub(crate) fn event_full(&self, session: &str, id: &str, mut kind: EventKind) -> Event {
        let follow_ups = self.inner.bus.amend(self, session, &mut kind);
        // Only kinds that carry text are looked at: gathering every session's token for each
        // state change would cost O(sessions) on the busiest path.
        let kind = if crate::confine::secrets::carries_text(&kind) {
            crate::confine::secrets::scrub_event(kind, &self.own_secrets())
        } else {
            kind
        };
        let ev = self.inner.events.append(session, id, kind);
        self.inner.bus.publish(self, &ev, follow_ups);
        ev
    }

    /// Runs `work` in its own task, one that a shutdown waits for (a while): a message being
    /// typed, an answer, a stop's clean-up, a wake. What waits on something that may never
    /// come (a watcher, a timer, a person's answer) is spawned plainly and ends with the
    /// shutdown token, or with the runtime.
    pub(crate) fn in_background<F>(&self, work: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.inner.tasks.spawn(work);
    }

    /// The daemon's own secrets (every session's hook token, which is also OpenCode's server
    /// password): never in a text it sends out.
    pub fn own_secrets(&self) -> Vec<String> {
        self.inner
            .sessions
            .filter_map(|e| Some(e.rec.hook_token.clone()).filter(|t| !t.is_empty()))
    }

    /// The compiled `[[rules]]`, `[guard]` and `[decider]`.
    pub fn automation(&self) -> Arc<crate::automation::Automation> {
        self.live().automation.clone()
    }

    /// The daemon's metrics registry.
    pub fn metrics(&self) -> &Arc<crate::ops::metrics::Metrics> {
        &self.inner.metrics
    }

    /// The metrics in the Prometheus text format, the session gauge read from the table now.
    pub fn metrics_text(&self) -> String {
        let sessions: Vec<(String, String, State)> = self
            .inner
            .sessions
            .filter_map(|e| Some((e.rec.cli.clone(), e.rec.cli_version.clone(), e.rec.state)));
        self.inner.metrics.encode(
            sessions
                .iter()
                .map(|(cli, version, state)| (cli.as_str(), version.as_str(), *state)),
        )
    }

    /// Writes the registry (atomically). A failure is logged: the in-memory state and the event
    /// log stay authoritative, and the next change retries.
    ///
    /// Writes are coalesced: while one is under way, a second caller only marks the registry
    /// changed and returns; the writer then writes once more with the newest state. So a slow
    /// disk costs one writer, not every caller (each would otherwise wait its turn on a
    /// worker thread), and the file always ends with the newest state.
    pub(crate) fn persist(&self) {
        if !self.inner.registry_writable {
            return;
        }
        {
            let mut p = lock(&self.inner.persist);
            if p.0 {
                p.1 = true;
                return;
            }
            *p = (true, false);
        }
        loop {
            // The log's end is read before the sessions are copied (fields are evaluated in
            // order): the copy holds at least what the log held then, and a restart applies
            // the events after it ([`crate::store::catch_up`]).
            let file = RegistryFile {
                version: 1,
                last_seq: self.inner.events.last_seq(),
                sessions: self
                    .inner
                    .sessions
                    .filter_map(|e| (!e.rec.unmanaged).then(|| e.rec.clone())),
            };
            if let Err(e) = save_registry(&self.inner.registry_path, &file) {
                tracing::error!(path = %self.inner.registry_path.display(), "cannot save the session registry: {e}");
            }
            let mut p = lock(&self.inner.persist);
            if std::mem::take(&mut p.1) {
                continue;
            }
            p.0 = false;
            return;
        }
    }

    /// The current reloadable parts.
    pub(crate) fn live(&self) -> Arc<crate::core::live::Live> {
        self.inner
            .live
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The event log.
    pub fn events(&self) -> &EventLog {
        &self.inner.events
    }

    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// Changes a session's state and records the change.
    pub(crate) fn set_state(&self, name: &str, to: State, reason: &str) {
        let change = self
            .inner
            .sessions
            .update(name, |e| {
                let from = e.change_state(to, now_ms())?;
                Some((from, e.rec.id.clone()))
            })
            .flatten();
        if let Some((from, id)) = change {
            self.event(
                name,
                &id,
                EventKind::StateChanged {
                    from,
                    to,
                    reason: reason.to_string(),
                },
            );
        }
    }

    pub(crate) fn lookup(
        &self,
        name: &str,
    ) -> Result<(SessionRecord, Arc<tokio::sync::Mutex<()>>), CoreError> {
        self.inner
            .sessions
            .usable(name, |e| (e.rec.clone(), e.input.clone()))
    }

    /// One session.
    pub fn get(&self, name: &str) -> Result<SessionRecord, CoreError> {
        self.inner
            .sessions
            .record(name)
            .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))
    }

    /// Daemon-wide facts.
    pub async fn status(&self) -> StatusInfo {
        let tmux_version = self
            .inner
            .mux
            .version()
            .await
            .ok()
            .filter(|v| !v.is_empty());
        // Both counts from one look at the table: each session says whether a prompt of its
        // waits.
        let waiting = self.inner.sessions.filter_map(|e| {
            Some(e.rec.state == crate::model::State::Waiting && e.rec.prompt.is_some())
        });
        let (sessions, pending_prompts) = (waiting.len(), waiting.iter().filter(|w| **w).count());
        StatusInfo {
            uptime: self.inner.started.elapsed(),
            socket: self.inner.settings.socket.clone(),
            state_dir: self.inner.settings.state_dir.clone(),
            config_file: self.inner.settings.config_file.clone(),
            config_read_ms: self.live().read_ms,
            tmux_args: self.inner.mux.server_args(),
            tmux_version,
            sessions,
            pending_prompts,
            last_seq: self.inner.events.last_seq(),
            clis: self.live().clis.keys().cloned().collect(),
            warnings: lock(&self.inner.warnings).clone(),
        }
    }

    /// Saves everything before the process ends. tmux and its sessions are left running.
    ///
    /// What is in flight is let finish first, for at most `DRAIN`:
    /// the work started in the background (`in_background`) — a message being typed
    /// gets its Enter (or is left whole in its queue), an answer is given, a stop's clean-up
    /// ends its processes, a wake sees its CLI started. Each session's input lock is then held
    /// to the end, so nothing new is typed by a daemon that is going away.
    pub async fn shutdown(&self) {
        const DRAIN: Duration = Duration::from_secs(10);
        let deadline = tokio::time::Instant::now() + DRAIN;
        self.inner.tasks.close();
        if tokio::time::timeout_at(deadline, self.inner.tasks.wait())
            .await
            .is_err()
        {
            warn!(
                tasks = self.inner.tasks.len(),
                "work still under way when the daemon stopped; the next daemon takes it up"
            );
        }
        let inputs: Vec<(String, Arc<tokio::sync::Mutex<()>>)> = self
            .inner
            .sessions
            .filter_map(|e| Some((e.rec.name.clone(), e.input.clone())));
        let mut held = Vec::with_capacity(inputs.len());
        for (name, input) in inputs {
            match tokio::time::timeout_at(deadline, input.lock_owned()).await {
                Ok(g) => held.push(g),
                Err(_) => {
                    warn!(session = %name, "still typing when the daemon stopped; the next daemon finishes it")
                }
            }
        }
        self.persist();
        drop(held);
    }
}

/// clibot relies on tmux 3.2 features (`-e` on new-session, `-D`, bracketed paste handling).
/// The last 15 non-blank lines of a screen, without tmux's own "Pane is dead (…)" line.
pub(crate) fn tail_lines(screen: &str) -> String {
    const LINES: usize = 15;
    let lines: Vec<&str> = screen
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.starts_with("Pane is dead"))
        .collect();
    let end = lines
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .map_or(0, |i| i + 1);
    lines[end.saturating_sub(LINES)..end].join("\n")
}

fn old_tmux_warning(version: &str) -> Option<String> {
    let num = version
        .split_whitespace()
        .last()?
        .trim_start_matches("next-");
    let mut parts = num.split('.');
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    ((major, minor) < (3, 2))
        .then(|| format!("{version} is older than 3.2, which clibot needs: upgrade tmux"))
}

/// Keeps the last `lines` lines (all when 0), without trailing blank lines or trailing spaces.
pub(crate) fn trim_capture(raw: &str, lines: usize, escapes: bool) -> String {
    let mut v: Vec<&str> = raw
        .lines()
        .map(|l| if escapes { l } else { l.trim_end() })
        .collect();
    while v.last().is_some_and(|l| l.trim().is_empty()) {
        v.pop();
    }
    if lines > 0 && v.len() > lines {
        v.drain(..v.len() - lines);
    }
    let mut out = v.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// Quotes a word for a POSIX shell.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// How long session `e` has been idle: no input, no output, nothing queued or being typed, no
/// prompt, no turn running. `None` unless it is idle in all these ways.
pub(crate) fn idle_for(e: &Entry) -> Option<Duration> {
    let quiet = e.rec.state == State::Idle
        && !e.stopping
        && e.rec.queue.is_empty()
        && e.rec.prompt.is_none()
        && !e.rt.delivering
        && e.rt.turn.started.is_none()
        && e.rt.waiters.is_empty();
    if !quiet {
        return None;
    }
    let since_activity =
        Duration::from_millis(u64::try_from(now_ms() - e.rec.last_activity_ms).unwrap_or(0));
    Some(since_activity.min(e.rt.turn.last_output.elapsed()))
}

/// A port on 127.0.0.1 that nothing listens on now, for a CLI's own server. (The CLI binds it
/// a moment later; should another program take it first, the CLI fails to start and says so.)
pub(crate) fn free_local_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    Ok(l.local_addr()?.port())
}

pub(crate) mod bus;
mod entry;
pub(crate) mod live;
mod parts;
pub(crate) mod sessions;

pub(crate) use entry::Entry;
pub(crate) use sessions::{Sessions, Table};

#[cfg(test)]
mod tests;
