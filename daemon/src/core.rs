//! The daemon's core: the session registry, what each operation does, and the reconciliation
//! with tmux at start and afterwards. It knows nothing of gRPC; `rpc.rs` translates.
//!
//! Locking: `sessions` is a short-lived std mutex (never held across an await). Each session
//! has its own async input lock, a fair FIFO queue, so input to one session is delivered in
//! arrival order while other sessions proceed in parallel. Stopping does not take the input
//! lock: a stop must never wait behind a long paste.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use crate::config::{CliSpec, Config, expand_home};
use crate::error::CoreError;
use crate::events::{Event, EventKind, EventLog};
use crate::keys::Key;
use crate::names::{is_valid_env_key, is_valid_name};
use crate::session::{SessionRecord, State};
use crate::store::{RegistryFile, load_registry, now_ms, save_registry};
use crate::supervisor::Runtime;
use crate::tmux::{Mux, MuxError, MuxSession, NewSession, SessionMeta};

/// What the daemon was started with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub config_file: Option<PathBuf>,
    pub state_dir: PathBuf,
    /// The gRPC socket, passed to CLIs as `CLIBOT_SOCKET` so their hooks can reach the daemon.
    pub socket: PathBuf,
}

/// Who asks: the local user, or a chat user relayed by the gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Actor {
    pub platform: String,
    pub user: String,
    pub chat: String,
    /// "session:NAME" when the call came from a process inside that session (the actor is
    /// then its owner); empty otherwise. Kept in the audit log.
    pub via: String,
}

impl Actor {
    pub fn local() -> Actor {
        Actor {
            platform: "local".into(),
            user: "local".into(),
            chat: String::new(),
            via: String::new(),
        }
    }

    /// "PLATFORM:USER", or "local": how sessions name their owner and who answered.
    pub fn key(&self) -> String {
        if self.is_local() {
            "local".into()
        } else {
            format!("{}:{}", self.platform, self.user)
        }
    }

    pub fn is_local(&self) -> bool {
        self.platform == "local"
    }
}

/// The safety net's period grows by this much per running session (10 s at 500 sessions).
const SAFETY_NET_PER_SESSION: Duration = Duration::from_millis(20);

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
    pub tmux_args: Vec<String>,
    pub tmux_version: Option<String>,
    pub sessions: usize,
    pub last_seq: u64,
    pub clis: Vec<String>,
    pub warnings: Vec<String>,
}

pub(crate) struct Entry {
    pub(crate) rec: SessionRecord,
    pub(crate) input: Arc<tokio::sync::Mutex<()>>,
    pub(crate) stopping: bool,
    pub(crate) rt: Runtime,
}

pub(crate) struct Inner {
    pub(crate) settings: Settings,
    /// What `reload` replaces: CLIs, allowed roots, rules, guard, decider, delegation.
    pub(crate) live: std::sync::RwLock<Arc<crate::reload::Live>>,
    /// The secret paths no session may start in (see [`crate::secrets`]).
    pub(crate) secrets: Vec<PathBuf>,
    pub(crate) mux: Arc<dyn Mux>,
    pub(crate) sessions: Mutex<BTreeMap<String, Entry>>,
    pub(crate) events: EventLog,
    pub(crate) registry_path: PathBuf,
    /// False when the registry exists but could not be read at start: it is not saved over.
    pub(crate) registry_writable: bool,
    /// Serialises registry writes so an older snapshot never overwrites a newer one.
    pub(crate) persist: Mutex<()>,
    pub(crate) started: Instant,
    pub(crate) warnings: Mutex<Vec<String>>,
    /// The per-session hook sockets of jailed sessions.
    pub(crate) hook_sockets: Mutex<crate::confine::HookSockets>,
    pub(crate) paste_counter: AtomicU64,
    /// Cancelled when the daemon shuts down; every watcher and waiting hook ends with it.
    pub(crate) shutdown: CancellationToken,
    pub(crate) access: crate::access::Access,
    pub(crate) chats: crate::chats::Chats,
    /// Recently accepted chat messages, so that one handed over twice is typed once.
    pub(crate) seen_inputs: Arc<crate::dedupe::Dedupe>,
    /// Each session's queued input, on disk ([`crate::queue_file`]).
    pub(crate) queues: crate::queue_file::QueueFiles,
    pub(crate) audit: crate::audit::Audit,
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    /// tmux's global PATH, once read (see `check_program`).
    pub(crate) global_path: Mutex<Option<String>>,
}

/// The core. Cheap to clone; all clones share one state.
#[derive(Clone)]
pub struct Daemon {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A fresh random-looking id: time plus process and counter entropy, hex. Unique per daemon
/// state dir, which is all it needs to be.
pub(crate) fn new_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut x =
        (t as u64) ^ ((std::process::id() as u64) << 32) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // splitmix64 finaliser: spreads the bits so ids do not share long prefixes.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    format!("{x:016x}")
}

impl Daemon {
    /// Opens the state directory, re-adopts the sessions that are still alive in tmux and marks
    /// the others exited.
    pub async fn start(settings: Settings, mux: Arc<dyn Mux>) -> Result<Daemon, CoreError> {
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
        let (chats, w) = crate::chats::Chats::open(&state_dir);
        warnings.extend(w);
        let (events, w) = EventLog::open(
            &state_dir.join("events.jsonl"),
            settings.config.daemon.event_retention,
            registry.last_seq.max(chats.max_seq()),
        );
        warnings.extend(w);

        let secrets = crate::secrets::for_settings(&settings);
        let (live, w) = crate::reload::Live::build(&settings.config, &secrets)?;
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
        let (access, w) = crate::access::Access::open(&state_dir, settings.config.access.clone());
        warnings.extend(w);
        let (audit, w) = crate::audit::Audit::open(
            &state_dir,
            crate::audit::Limits {
                max_bytes: settings.config.daemon.audit_max_bytes,
                files: settings.config.daemon.audit_files,
            },
        );
        warnings.extend(w);
        let (seen_inputs, w) = crate::dedupe::Dedupe::open(&state_dir);
        warnings.extend(w);
        for w in &warnings {
            warn!("{w}");
        }
        let daemon = Daemon {
            inner: Arc::new(Inner {
                access,
                audit,
                chats,
                seen_inputs,
                queues: crate::queue_file::QueueFiles::new(&state_dir),
                shutdown: CancellationToken::new(),
                live: std::sync::RwLock::new(Arc::new(live)),
                secrets,
                settings,
                mux,
                sessions: Mutex::new(BTreeMap::new()),
                events,
                registry_path,
                registry_writable,
                persist: Mutex::new(()),
                started: Instant::now(),
                warnings: Mutex::new(warnings),
                hook_sockets: Mutex::new(crate::confine::HookSockets::new()),
                paste_counter: AtomicU64::new(0),
                metrics: Arc::new(crate::metrics::Metrics::new()),
                global_path: Mutex::new(None),
            }),
        };
        let readopted = daemon.reconcile_at_start(registry).await;
        daemon.event(
            "",
            "",
            EventKind::DaemonStarted {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                readopted,
            },
        );
        daemon.persist();
        // A prompt that was being answered automatically when the last daemon stopped: its
        // answer may never have been given. It is looked at again (the rules and the decider
        // run anew; what they leave goes to the chats), never left waiting unseen.
        let unfinished: Vec<(String, String, crate::session::Prompt)> =
            lock(&daemon.inner.sessions)
                .values()
                .filter_map(|e| {
                    let p = e.rec.prompt.clone().filter(|p| !p.auto.is_empty())?;
                    Some((e.rec.name.clone(), e.rec.id.clone(), p))
                })
                .collect();
        for (name, id, p) in unfinished {
            daemon.event(&name, &id, EventKind::Waiting { prompt: p });
        }
        let names: Vec<String> = {
            let mut sessions = lock(&daemon.inner.sessions);
            for e in sessions.values_mut() {
                if !e.rec.idle_program.is_empty() {
                    e.rt.idle_foreground = Some(e.rec.idle_program.clone());
                }
                if e.rec.state != State::Working {
                    continue;
                }
                // The turn ran on while no daemon watched: time and the screen finish it, its
                // output read from where it began.
                e.rt.turn_started = Some(Instant::now());
                e.rt.recovered = true;
                e.rt.anchor = e.rec.turn_anchor;
                e.rt.input_lines = (e.rec.turn_input_lines as usize).max(1);
                if e.rt.idle_foreground.is_none() {
                    // Learned by no daemon yet: the CLI's own program is the best guess, and
                    // far better than whatever command the pane runs now.
                    e.rt.idle_foreground = daemon
                        .live()
                        .clis
                        .get(&e.rec.cli)
                        .and_then(|c| c.argv.first())
                        .and_then(|p| Path::new(p).file_name())
                        .map(|n| n.to_string_lossy().into_owned());
                }
            }
            sessions.keys().cloned().collect()
        };
        for n in names {
            daemon.start_watcher(&n);
        }
        Ok(daemon)
    }

    /// The PATH of tmux's global environment (what new sessions inherit), read now and kept.
    async fn fresh_global_path(&self) -> String {
        let path = match self.inner.mux.environment(None).await {
            Ok(g) if g.contains_key("PATH") => g.get("PATH").cloned().unwrap_or_default(),
            _ => std::env::var("PATH").unwrap_or_default(),
        };
        *lock(&self.inner.global_path) = Some(path.clone());
        path
    }

    /// Cancelled when the daemon shuts down.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }

    /// Writes an audit record.
    pub fn audit(&self, actor: &Actor, session: &str, action: &str, result: Result<(), &str>) {
        let (outcome, detail) = match result {
            Ok(()) => ("accepted", ""),
            Err(e) => ("refused", e),
        };
        let mut record = crate::audit::Audit::now(
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

    /// Whether `actor` is an admin (the local user counts as one).
    pub fn is_admin(&self, actor: &Actor) -> bool {
        actor.is_local() || self.inner.access.known(&actor.platform, &actor.user) == Some(true)
    }

    /// Whether `actor` may see and use session `rec`: the local user and admins use all; a
    /// chat user their own and those shared with them.
    pub fn may_use(&self, actor: &Actor, rec: &SessionRecord) -> bool {
        if actor.is_local() {
            return true;
        }
        let key = actor.key();
        rec.owner == key
            || rec.shared_with.contains(&key)
            || self.inner.access.known(&actor.platform, &actor.user) == Some(true)
    }

    /// Refuses `actor` a session that is not theirs, in the words used for one that does not
    /// exist: another user's sessions are not even named to them.
    /// With `manage` (stop, restart, release) a share is not enough: only the owner or an
    /// admin may.
    pub fn check_owner(&self, actor: &Actor, name: &str, manage: bool) -> Result<(), CoreError> {
        match self.get(name) {
            Ok(_) if actor.is_local() => Ok(()),
            Ok(rec) if !self.may_use(actor, &rec) => Err(CoreError::NotYours(name.to_string())),
            Ok(rec)
                if manage
                    && rec.owner != actor.key()
                    && self.inner.access.known(&actor.platform, &actor.user) != Some(true) =>
            {
                Err(CoreError::NotOwner(name.to_string()))
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Shares session `name` with `user` ("PLATFORM:USER"), or takes the share back; only its
    /// owner, an admin or the local user may. Returns who it is shared with now.
    pub fn share(
        &self,
        actor: &Actor,
        name: &str,
        user: &str,
        revoke: bool,
    ) -> Result<Vec<String>, CoreError> {
        let valid = user
            .split_once(':')
            .is_some_and(|(p, u)| !p.is_empty() && !u.is_empty() && !u.contains(':'))
            && !user.chars().any(|c| c.is_control() || c.is_whitespace());
        if !valid {
            return Err(CoreError::InvalidArgument(format!(
                "{user:?} is not a chat user: write PLATFORM:USER, e.g. telegram:123456789 (`!!whoami` shows it)"
            )));
        }
        let admin =
            actor.is_local() || self.inner.access.known(&actor.platform, &actor.user) == Some(true);
        let shared = {
            let mut sessions = lock(&self.inner.sessions);
            let e = sessions
                .get_mut(name)
                .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))?;
            if !admin && e.rec.owner != actor.key() {
                return Err(if self.may_use_rec(actor, &e.rec) {
                    CoreError::InvalidArgument(format!(
                        "only the owner of {name} ({}) or an admin may share it",
                        if e.rec.owner.is_empty() {
                            "the machine's user"
                        } else {
                            &e.rec.owner
                        }
                    ))
                } else {
                    CoreError::NotYours(name.to_string())
                });
            }
            if revoke {
                e.rec.shared_with.retain(|u| u != user);
            } else if !e.rec.shared_with.iter().any(|u| u == user) {
                e.rec.shared_with.push(user.to_string());
            }
            e.rec.shared_with.clone()
        };
        self.persist();
        Ok(shared)
    }

    fn may_use_rec(&self, actor: &Actor, rec: &SessionRecord) -> bool {
        let key = actor.key();
        rec.owner == key || rec.shared_with.contains(&key)
    }

    /// Tells a session's other chats that one of them was suspended.
    pub fn chat_suspended(&self, session: &str, platform: &str, chat: &str, reason: &str) {
        let id = self.get(session).map(|r| r.id).unwrap_or_default();
        self.event(
            session,
            &id,
            EventKind::ChatSuspended {
                platform: platform.into(),
                chat: chat.into(),
                reason: reason.into(),
            },
        );
    }

    /// A refused user is answered only now and then (an empty reason: say nothing), and their
    /// repeated refusals are folded into one audit line a minute.
    pub fn check_access(&self, actor: &Actor, name: &str) -> crate::access::Decision {
        let (d, issued) = self
            .inner
            .access
            .check_chat(&actor.platform, &actor.user, name);
        let detail = match &d {
            crate::access::Decision::Allowed { .. } => Ok(()),
            crate::access::Decision::Denied { code: Some(_), .. } if issued => {
                Err("not paired; pairing code issued")
            }
            crate::access::Decision::Denied { code: Some(_), .. } => {
                Err("not paired; pairing code pending")
            }
            crate::access::Decision::Denied { .. } => Err("not allowed"),
        };
        self.audit(actor, "", "access", detail);
        d
    }

    /// Chat bindings and delivery cursors.
    pub fn chats(&self) -> &crate::chats::Chats {
        &self.inner.chats
    }

    /// Access state, for pairing management.
    pub fn access(&self) -> &crate::access::Access {
        &self.inner.access
    }

    /// Matches the registry against tmux: live sessions are managed again (same ids, names and
    /// state), vanished ones are marked exited, and sessions tmux knows as clibot's that the
    /// registry lost (a corrupt file) are recovered from their tmux options.
    async fn reconcile_at_start(&self, mut registry: RegistryFile) -> u32 {
        // Queued input lives in files of its own; a registry written before that still holds
        // it, and hands it over once.
        for rec in registry.sessions.iter_mut() {
            let (queue, warnings) = self.inner.queues.load(&rec.id);
            for w in warnings {
                self.warn(w);
            }
            if queue.is_empty() && !rec.queue.is_empty() {
                if let Err(e) = self.inner.queues.rewrite(&rec.id, &rec.queue) {
                    self.warn(format!(
                        "session {}: cannot move its queued input to its own file: {e}",
                        rec.name
                    ));
                }
            } else {
                rec.queue = queue;
            }
        }
        let live = match self.inner.mux.list_sessions().await {
            Ok(l) => l,
            Err(MuxError::NoServer(_)) => Vec::new(),
            Err(e) => {
                self.warn(format!(
                    "cannot list tmux sessions at start: {e}; sessions are kept as they were"
                ));
                let mut sessions = lock(&self.inner.sessions);
                for rec in registry.sessions {
                    sessions.insert(rec.name.clone(), Entry::new(rec));
                }
                return 0;
            }
        };
        // Sessions tmux knows as clibot's that the registry lost: what they need to be followed
        // (the hook token above all) is in their tmux environment.
        let mut lost_env = std::collections::HashMap::new();
        for s in &live {
            if !s.meta.id.is_empty() && !registry.sessions.iter().any(|r| r.id == s.meta.id) {
                lost_env.insert(s.id.clone(), self.session_env(&s.id).await);
            }
        }
        let mut readopted = 0;
        let mut exited = Vec::new();
        {
            let mut sessions = lock(&self.inner.sessions);
            for mut rec in registry.sessions {
                match live.iter().find(|s| s.meta.id == rec.id) {
                    Some(s) => {
                        rec.tmux_id = s.id.clone();
                        rec.pane = s.pane.clone();
                        rec.tmux_session = s.name.clone();
                        rec.pid = s.pid;
                        if !rec.state.is_exited() {
                            readopted += 1;
                            if s.dead {
                                exited.push((
                                    rec.name.clone(),
                                    s.dead_status,
                                    "the CLI exited while the daemon was down",
                                ));
                            }
                        }
                    }
                    None if !rec.state.is_exited() => {
                        exited.push((
                            rec.name.clone(),
                            None,
                            "its tmux session is gone (was the tmux server restarted?)",
                        ));
                    }
                    None => {}
                }
                if let Some(t) = self.inner.events.last_activity(&rec.name) {
                    rec.last_activity_ms = rec.last_activity_ms.max(t);
                }
                sessions.insert(rec.name.clone(), Entry::new(rec));
            }
            for s in &live {
                let m = &s.meta;
                if m.id.is_empty() || sessions.values().any(|e| e.rec.id == m.id) {
                    continue;
                }
                if !is_valid_name(&m.name) || sessions.contains_key(&m.name) {
                    continue;
                }
                let env = lost_env.get(&s.id);
                let var = |k: &str| env.and_then(|e| e.get(k)).cloned().unwrap_or_default();
                let mut rec = SessionRecord {
                    id: m.id.clone(),
                    name: m.name.clone(),
                    cli: m.cli.clone(),
                    dir: PathBuf::from(if m.dir.is_empty() { &s.path } else { &m.dir }),
                    state: if s.dead { State::Exited } else { State::Idle },
                    created_at_ms: m.created_ms.parse().unwrap_or_else(|_| now_ms()),
                    last_activity_ms: now_ms(),
                    tmux_session: s.name.clone(),
                    tmux_id: s.id.clone(),
                    pane: s.pane.clone(),
                    pid: s.pid,
                    exit_status: s.dead_status,
                    adopted: false,
                    args: Vec::new(),
                    ..Default::default()
                };
                self.recover_links(&mut rec, &var);
                readopted += 1;
                self.warn(format!(
                    "session {} was missing from the registry and was recovered from tmux",
                    rec.name
                ));
                sessions.insert(rec.name.clone(), Entry::new(rec));
            }
        }
        for (name, status, reason) in exited {
            self.mark_exited(&name, status, reason);
        }
        // Jailed sessions' hooks reach the daemon through sockets of their own: serve them
        // again.
        let jailed: Vec<(String, String)> = lock(&self.inner.sessions)
            .values()
            .filter(|e| !e.rec.jail_home.is_empty() && !e.rec.state.is_exited())
            .map(|e| (e.rec.name.clone(), e.rec.id.clone()))
            .collect();
        for (name, id) in jailed {
            if let Err(e) = self.hook_socket(&id) {
                self.warn(format!(
                    "session {name}: its hooks cannot reach clibot: {e}"
                ));
            }
        }
        readopted
    }

    /// A tmux session's own environment (empty when it cannot be read).
    async fn session_env(&self, tmux_id: &str) -> BTreeMap<String, String> {
        self.inner
            .mux
            .environment(Some(tmux_id))
            .await
            .unwrap_or_default()
    }

    /// Fills in what links a session to its CLI — the hook token, the CLI's own session id,
    /// its API port — from the variables clibot set in the session's tmux environment. Without
    /// a token the CLI's hooks are refused, so its turns are read off the screen; that is said.
    fn recover_links(&self, rec: &mut SessionRecord, var: &dyn Fn(&str) -> String) {
        rec.hook_token = var("CLIBOT_HOOK_TOKEN");
        rec.cli_session_id = var("CLIBOT_CLI_SESSION_ID");
        rec.api_port = var("CLIBOT_API_PORT").parse().unwrap_or(0);
        let hooked = self
            .kind_of(&rec.cli)
            .is_some_and(|(a, _)| a.completes_by_hook());
        if hooked && rec.hook_token.is_empty() {
            self.warn(format!(
                "session {}: no hook token in its tmux environment, so its CLI's hooks cannot reach clibot; its turns are read off the screen (restart it with `clibotctl restart {}` to wire them again)",
                rec.name, rec.name
            ));
        }
    }

    pub(crate) fn warn(&self, w: String) {
        warn!("{w}");
        lock(&self.inner.warnings).push(w);
    }

    /// Records an event. A prompt is first looked at by the guard and the rules (so that what
    /// the log and the chats show says whether it is being answered automatically); after it
    /// is recorded, an automatic answer or a delegation it calls for starts in its own task.
    /// Never called with the session table locked.
    pub(crate) fn event(&self, session: &str, id: &str, kind: EventKind) -> u64 {
        self.event_full(session, id, kind).seq
    }

    /// [`Daemon::event`], returning the event as written (long texts cut to their head).
    pub(crate) fn event_full(&self, session: &str, id: &str, kind: EventKind) -> Event {
        let mut plan = None;
        let kind = match kind {
            EventKind::Waiting { prompt } => {
                let (prompt, p) = self.prepare_prompt(session, prompt);
                plan = p.map(|p| (prompt.clone(), p));
                EventKind::Waiting { prompt }
            }
            k => k,
        };
        // Only kinds that carry text are looked at: gathering every session's token for each
        // state change would cost O(sessions) on the busiest path.
        let kind = if crate::secrets::carries_text(&kind) {
            crate::secrets::scrub_event(kind, &self.own_secrets())
        } else {
            kind
        };
        self.inner.metrics.on_event(session, &kind);
        let follow = match &kind {
            EventKind::Error { kind, message } => Some((kind.clone(), message.clone())),
            EventKind::Stalled { silent_ms } => Some((
                "stalled".to_string(),
                format!(
                    "no output for {}",
                    crate::config::format_duration(Duration::from_millis(*silent_ms))
                ),
            )),
            _ => None,
        };
        let ev = self.inner.events.append(session, id, kind);
        if let Some((prompt, plan)) = plan {
            self.answer_automatically(session, prompt, plan);
        }
        if let Some((kind, detail)) = follow {
            self.consider_delegation(session, &kind, &detail);
        }
        ev
    }

    /// The daemon's own secrets (every session's hook token, which is also OpenCode's server
    /// password): never in a text it sends out.
    pub fn own_secrets(&self) -> Vec<String> {
        lock(&self.inner.sessions)
            .values()
            .map(|e| e.rec.hook_token.clone())
            .filter(|t| !t.is_empty())
            .collect()
    }

    /// The compiled `[[rules]]`, `[guard]` and `[decider]`.
    pub fn automation(&self) -> Arc<crate::automation::Automation> {
        self.live().automation.clone()
    }

    /// The daemon's metrics registry.
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.inner.metrics
    }

    /// The metrics in the Prometheus text format, the session gauge read from the table now.
    pub fn metrics_text(&self) -> String {
        let sessions: Vec<(String, State)> = lock(&self.inner.sessions)
            .values()
            .map(|e| (e.rec.cli.clone(), e.rec.state))
            .collect();
        self.inner
            .metrics
            .encode(sessions.iter().map(|(cli, state)| (cli.as_str(), *state)))
    }

    /// Writes the registry (atomically). A failure is logged: the in-memory state and the event
    /// log stay authoritative, and the next change retries.
    pub(crate) fn persist(&self) {
        if !self.inner.registry_writable {
            return;
        }
        let _guard = lock(&self.inner.persist);
        let file = RegistryFile {
            version: 1,
            last_seq: self.inner.events.last_seq(),
            sessions: lock(&self.inner.sessions)
                .values()
                .map(|e| e.rec.clone())
                .collect(),
        };
        if let Err(e) = save_registry(&self.inner.registry_path, &file) {
            tracing::error!(path = %self.inner.registry_path.display(), "cannot save the session registry: {e}");
        }
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
        let change = {
            let mut sessions = lock(&self.inner.sessions);
            match sessions.get_mut(name) {
                Some(e) if e.rec.state != to => {
                    let from = e.rec.state;
                    e.rec.state = to;
                    e.rec.last_activity_ms = now_ms();
                    // Wake the watcher: the new state may need its clock (quiescence, stalls).
                    e.rt.poke.notify_one();
                    Some((from, e.rec.id.clone()))
                }
                _ => None,
            }
        };
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

    /// The last lines an exited CLI left in its pane (tmux keeps a dead pane visible): what it
    /// printed as it died is usually why. tmux may mark a pane dead before it has drawn the last
    /// bytes its process wrote (3.3a can lose them altogether), so an empty pane is read again
    /// for up to a second, and then the last screen the watcher read while the CLI ran is used.
    pub(crate) async fn last_words(&self, name: &str, tmux_id: &str) -> String {
        for _ in 0..10 {
            let Ok(screen) = self.inner.mux.capture(tmux_id, None, false).await else {
                break;
            };
            let words = tail_lines(&screen);
            if !words.is_empty() {
                return words;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        lock(&self.inner.sessions)
            .get(name)
            .map(|e| tail_lines(&e.rt.last_screen))
            .unwrap_or_default()
    }

    pub(crate) fn mark_exited(&self, name: &str, status: Option<i32>, reason: &str) {
        self.mark_exited_with(name, status, reason, String::new());
    }

    /// Records that session `name`'s CLI ended, with what its pane last showed.
    pub(crate) fn mark_exited_with(
        &self,
        name: &str,
        status: Option<i32>,
        reason: &str,
        output: String,
    ) {
        let id = {
            let mut sessions = lock(&self.inner.sessions);
            match sessions.get_mut(name) {
                Some(e) if !e.rec.state.is_exited() => {
                    e.rec.exit_status = status;
                    e.rec.exit_reason = reason.to_string();
                    e.rec.id.clone()
                }
                _ => return,
            }
        };
        info!(session = name, ?status, "{reason}");
        self.stop_watcher(name);
        if let Some(e) = lock(&self.inner.sessions).get_mut(name) {
            // A hook still waiting for an answer will get none: the CLI is gone.
            for (_, (tx, _)) in e.rt.waiters.drain() {
                let _ = tx.send(String::new());
            }
            e.rec.prompt = None;
        }
        self.set_state(name, State::Exited, reason);
        self.event(
            name,
            &id,
            EventKind::Exited {
                status,
                reason: reason.to_string(),
                output,
            },
        );
        self.persist();
    }

    pub(crate) fn lookup(
        &self,
        name: &str,
    ) -> Result<(SessionRecord, Arc<tokio::sync::Mutex<()>>), CoreError> {
        let mut sessions = lock(&self.inner.sessions);
        let e = usable(&mut sessions, name)?;
        Ok((e.rec.clone(), e.input.clone()))
    }

    pub(crate) fn cli(&self, name: &str) -> Result<Arc<CliSpec>, CoreError> {
        let live = self.live();
        live.clis
            .get(name)
            .cloned()
            .ok_or_else(|| CoreError::UnknownCli {
                name: name.to_string(),
                known: live.clis.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// Resolves and confines a working directory.
    fn resolve_dir(&self, requested: &str, cli: &CliSpec) -> Result<PathBuf, CoreError> {
        let raw = if requested.is_empty() {
            match &cli.dir {
                Some(d) => expand_home(d),
                None => expand_home(Path::new("~")),
            }
        } else {
            expand_home(Path::new(requested))
        };
        if !raw.is_absolute() {
            return Err(CoreError::DirNotAbsolute(requested.to_string()));
        }
        let dir = raw
            .canonicalize()
            .map_err(|_| CoreError::DirNotFound(raw.clone()))?;
        if !dir.is_dir() {
            return Err(CoreError::NotADirectory(dir));
        }
        let live = self.live();
        if let Some(secret) =
            crate::secrets::secret_containing(&dir, &self.inner.secrets, &live.lifted_secrets)
        {
            return Err(CoreError::SecretDir { dir, secret });
        }
        if !live.roots.iter().any(|r| dir.starts_with(r)) {
            let roots = if live.roots.is_empty() {
                "none configured exists".to_string()
            } else {
                live.roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(CoreError::DirNotAllowed { dir, roots });
        }
        Ok(dir)
    }

    /// Starts a configured CLI in a new tmux session.
    pub async fn spawn(&self, req: SpawnRequest) -> Result<SessionRecord, CoreError> {
        let span = info_span!("session", session = %req.name);
        self.spawn_inner(req).instrument(span).await
    }

    async fn spawn_inner(&self, req: SpawnRequest) -> Result<SessionRecord, CoreError> {
        if !is_valid_name(&req.name) {
            return Err(CoreError::InvalidName(req.name));
        }
        crate::limits::check_spawn(&req.args, req.env.iter())?;
        let cli = self.cli(&req.cli)?.clone();
        let dir = self.resolve_dir(&req.dir, &cli)?;
        for (k, v) in &req.env {
            if !is_valid_env_key(k) {
                return Err(CoreError::InvalidArgument(format!(
                    "invalid environment variable name {k:?}: use letters, digits and _ (not starting with a digit)"
                )));
            }
            if v.contains('\0') {
                return Err(CoreError::InvalidArgument(format!(
                    "environment variable {k} contains a NUL byte"
                )));
            }
        }
        if req.args.iter().any(|a| a.contains('\0')) {
            return Err(CoreError::InvalidArgument(
                "an argument contains a NUL byte".into(),
            ));
        }
        let id = new_id();
        let created = now_ms();
        let rec = SessionRecord {
            id: id.clone(),
            name: req.name.clone(),
            cli: cli.name.clone(),
            dir: dir.clone(),
            state: State::Starting,
            created_at_ms: created,
            last_activity_ms: created,
            tmux_session: req.name.clone(),
            tmux_id: String::new(),
            pane: String::new(),
            pid: 0,
            exit_status: None,
            adopted: false,
            args: req.args.clone(),
            env: req.env.clone(),
            owner: req.owner.clone(),
            delegate: req.delegate || self.live().config.delegation.default,
            delegated_from: req.delegated_from.clone(),
            hook_token: crate::secrets::new_token().map_err(CoreError::NoRandom)?,
            cli_session_id: new_uuid(),
            api_port: if self.kind_of(&cli.name).is_some_and(|(a, _)| a.serves_api()) {
                free_local_port().map_err(CoreError::NoPort)?
            } else {
                0
            },
            ..Default::default()
        };
        let capped_owner = self.capped_owner(&req.owner);
        // Reserve the name before the slow part, so two spawns of one name cannot both proceed.
        {
            let mut sessions = lock(&self.inner.sessions);
            if sessions.contains_key(&req.name) {
                return Err(CoreError::AlreadyExists(req.name));
            }
            self.check_limits(&sessions, &req.name, capped_owner.as_ref())?;
            let mut e = Entry::new(rec.clone());
            e.stopping = true; // not usable until it exists
            sessions.insert(req.name.clone(), e);
        }
        let result = self.create_tmux_session(&rec, &cli, &req, false).await;
        let mut sessions = lock(&self.inner.sessions);
        match result {
            Ok(s) => {
                drop(sessions);
                self.launched(&req.name, s).await
            }
            Err(e) => {
                sessions.remove(&req.name);
                Err(e)
            }
        }
    }

    /// The CLI of session `name` runs in tmux session `s`: record it, report it, watch it.
    async fn launched(&self, name: &str, s: MuxSession) -> Result<SessionRecord, CoreError> {
        let rec = {
            let mut sessions = lock(&self.inner.sessions);
            let e = sessions
                .get_mut(name)
                .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))?;
            e.rec.tmux_id = s.id;
            e.rec.pane = s.pane;
            e.rec.pid = s.pid;
            e.stopping = false;
            e.rec.clone()
        };
        self.event(
            &rec.name,
            &rec.id,
            EventKind::Spawned {
                cli: rec.cli.clone(),
                dir: rec.dir.display().to_string(),
                args: rec.args.clone(),
            },
        );
        info!(cli = %rec.cli, dir = %rec.dir.display(), "spawned");
        // A CLI with hooks is ready when its screen says so; any other program at once.
        let by_hook = self
            .kind_of(&rec.cli)
            .is_some_and(|(a, _)| a.completes_by_hook());
        if !by_hook {
            self.set_state(&rec.name, State::Idle, "started");
            // A restart keeps the queue: it goes now, as it would after a completed turn.
            self.deliver_queued(&rec.name);
        }
        self.start_watcher(&rec.name);
        if s.dead {
            let output = self.last_words(&rec.name, rec.target()).await;
            self.mark_exited_with(
                &rec.name,
                s.dead_status,
                "the CLI exited right after it started",
                output,
            );
        }
        self.persist();
        self.get(&rec.name)
    }

    /// Starts session `name`'s CLI again, in a new tmux session with the same name, directory,
    /// arguments and environment, ending the running one first (gracefully, as `stop` does).
    /// With `resume` the CLI continues its conversation, as its adapter knows how (Claude Code
    /// `--resume`, Codex `resume --last`, Gemini CLI `--resume latest`, OpenCode `--session`);
    /// otherwise it starts a new one. The session keeps its id, its event history and its queue
    /// of inputs.
    pub async fn restart(&self, name: &str, resume: bool) -> Result<SessionRecord, CoreError> {
        let span = info_span!("session", session = %name);
        self.restart_inner(name, resume).instrument(span).await
    }

    /// Marks session `name` as being stopped (or restarted), so that nothing else acts on it
    /// meanwhile, and returns its record.
    fn reserve(&self, name: &str) -> Result<SessionRecord, CoreError> {
        let mut sessions = lock(&self.inner.sessions);
        let e = usable(&mut sessions, name)?;
        e.stopping = true;
        Ok(e.rec.clone())
    }

    async fn restart_inner(&self, name: &str, resume: bool) -> Result<SessionRecord, CoreError> {
        // An exited session that starts again counts against the limits like a new one.
        let capped_owner = self.get(name).ok().map(|r| self.capped_owner(&r.owner));
        let rec = {
            let mut sessions = lock(&self.inner.sessions);
            let e = usable(&mut sessions, name)?;
            let exited = e.rec.state.is_exited();
            if exited && let Some(owner) = &capped_owner {
                self.check_limits(&sessions, name, owner.as_ref())?;
            }
            let e = usable(&mut sessions, name)?;
            e.stopping = true;
            e.rec.clone()
        };
        let release = |d: &Daemon| {
            if let Some(e) = lock(&d.inner.sessions).get_mut(name) {
                e.stopping = false;
            }
            d.start_watcher(name);
        };
        let cli = match self.cli(&rec.cli) {
            Ok(c) => c.clone(),
            Err(e) => {
                release(self);
                return Err(e);
            }
        };
        if resume && rec.cli_session_id.is_empty() {
            release(self);
            return Err(CoreError::InvalidArgument(format!(
                "session {name:?} was not started by clibot, so its conversation cannot be resumed: restart it without resuming"
            )));
        }
        let token = match crate::secrets::new_token() {
            Ok(t) => t,
            Err(e) => {
                release(self);
                return Err(CoreError::NoRandom(e));
            }
        };
        self.stop_watcher(name);
        let outcome = match self.stop_inner(&rec, false, None).await {
            Ok(o) => o,
            Err(e) => {
                release(self);
                return Err(e);
            }
        };
        if !rec.state.is_exited() {
            self.event(
                name,
                &rec.id,
                EventKind::Exited {
                    status: outcome.exit_status,
                    reason: "restarted".into(),
                    output: String::new(),
                },
            );
        }
        let serves_api = self.kind_of(&rec.cli).is_some_and(|(a, _)| a.serves_api());
        let mut fresh = SessionRecord {
            state: State::Starting,
            exit_status: None,
            exit_reason: String::new(),
            pid: 0,
            tmux_id: String::new(),
            pane: String::new(),
            adopted: false,
            prompt: None,
            stalled: false,
            error: None,
            last_activity_ms: now_ms(),
            hook_token: token,
            api_port: 0,
            ..rec.clone()
        };
        if !resume {
            fresh.cli_session_id = new_uuid();
        }
        if serves_api {
            match free_local_port() {
                Ok(p) => fresh.api_port = p,
                Err(e) => {
                    if let Some(entry) = lock(&self.inner.sessions).get_mut(name) {
                        entry.stopping = false;
                    }
                    self.mark_exited(name, outcome.exit_status, "restart failed: no free port");
                    self.persist();
                    return Err(CoreError::NoPort(e));
                }
            }
        }
        {
            let mut sessions = lock(&self.inner.sessions);
            let mut e = Entry::new(fresh.clone());
            e.stopping = true;
            sessions.insert(name.to_string(), e);
        }
        self.set_state(
            name,
            State::Starting,
            if resume {
                "restarted, resuming the conversation"
            } else {
                "restarted with a new conversation"
            },
        );
        let req = SpawnRequest {
            name: name.to_string(),
            cli: rec.cli.clone(),
            dir: rec.dir.display().to_string(),
            args: rec.args.clone(),
            env: rec.env.clone(),
            owner: rec.owner.clone(),
            ..Default::default()
        };
        match self.create_tmux_session(&fresh, &cli, &req, resume).await {
            Ok(s) => self.launched(name, s).await,
            Err(e) => {
                if let Some(entry) = lock(&self.inner.sessions).get_mut(name) {
                    entry.stopping = false;
                }
                self.mark_exited(name, None, &format!("restart failed: {e}"));
                self.persist();
                Err(e)
            }
        }
    }

    async fn create_tmux_session(
        &self,
        rec: &SessionRecord,
        cli: &CliSpec,
        req: &SpawnRequest,
        resume: bool,
    ) -> Result<MuxSession, CoreError> {
        self.check_cli_allowed(&rec.owner, &cli.name)?;
        let mut argv = cli.argv.clone();
        let mut launch_env = Vec::new();
        // The home the CLI will see: its own HOME setting, else the daemon's.
        let home = req
            .env
            .get("HOME")
            .or_else(|| cli.env.get("HOME"))
            .map(PathBuf::from)
            .unwrap_or_else(|| expand_home(Path::new("~")));
        if let Some((adapter, _)) = self.kind_of(&cli.name) {
            let (hook_command, hook_argv) = self.hook_command(&cli.name);
            let files_dir = self.inner.settings.state_dir.join("sessions").join(&rec.id);
            let launch = adapter.launch(&crate::adapter::LaunchContext {
                hook_command: &hook_command,
                cli_session_id: &rec.cli_session_id,
                permission_wait_secs: self.inner.settings.config.daemon.permission_wait_ms / 1000,
                hook_argv: &hook_argv,
                files_dir: &files_dir,
                home: &home,
                api_port: rec.api_port,
                api_secret: &rec.hook_token,
                resume,
            });
            let state_err = |path: &Path| {
                let path = path.to_path_buf();
                move |source| CoreError::State { path, source }
            };
            for (path, content) in &launch.files {
                if let Some(parent) = path.parent() {
                    create_private_dir(parent).map_err(state_err(parent))?;
                }
                write_private(path, content).map_err(state_err(path))?;
            }
            for (link, target) in &launch.links {
                if let Some(parent) = link.parent() {
                    create_private_dir(parent).map_err(state_err(parent))?;
                }
                let _ = std::fs::remove_file(link);
                std::os::unix::fs::symlink(target, link).map_err(state_err(link))?;
            }
            argv.extend(launch.args);
            launch_env = launch.env;
        }
        argv.extend(req.args.iter().cloned());
        let mut env: Vec<(String, String)> = cli
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        env.extend(req.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.extend(launch_env);
        // A daemon started by systemd may have no locale; TUIs then draw boxes as `?`.
        let has_locale = ["LC_ALL", "LC_CTYPE", "LANG"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
        if !has_locale && !env.iter().any(|(k, _)| k == "LANG" || k == "LC_ALL") {
            env.push(("LANG".into(), "C.UTF-8".into()));
        }
        self.check_program(&cli.name, argv.first().map(String::as_str), &env, &rec.dir)
            .await?;
        env.push(("CLIBOT_SESSION".into(), rec.name.clone()));
        env.push(("CLIBOT_HOOK_TOKEN".into(), rec.hook_token.clone()));
        env.push(("CLIBOT_SESSION_ID".into(), rec.id.clone()));
        // Kept in the session's tmux environment, so that a daemon that lost its registry can
        // recover what it needs to follow the CLI (its transcript, its API).
        env.push(("CLIBOT_CLI_SESSION_ID".into(), rec.cli_session_id.clone()));
        if rec.api_port != 0 {
            env.push(("CLIBOT_API_PORT".into(), rec.api_port.to_string()));
        }
        // A non-admin's program runs jailed; its hooks reach the daemon through a socket of
        // its own, which serves that session's hook calls only.
        let path_for_jail = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, p)| p.clone())
            .or_else(|| lock(&self.inner.global_path).clone())
            .unwrap_or_default();
        let socket = match self.jail_for(&rec.owner, &path_for_jail)? {
            Some(bwrap) => {
                let (jailed, hook_socket) = self.jailed_argv(&bwrap, rec, cli, &home, &argv)?;
                argv = jailed;
                self.set_jail_home(&rec.name, &home.display().to_string());
                hook_socket
            }
            None => {
                self.set_jail_home(&rec.name, "");
                self.inner.settings.socket.clone()
            }
        };
        env.push(("CLIBOT_SOCKET".into(), socket.display().to_string()));
        let (argv, env) = self.through_launcher(&rec.id, argv, env)?;
        let meta = SessionMeta {
            id: rec.id.clone(),
            name: rec.name.clone(),
            cli: rec.cli.clone(),
            dir: rec.dir.display().to_string(),
            created_ms: rec.created_at_ms.to_string(),
        };
        let t = &self.inner.settings.config.tmux;
        let spec = NewSession {
            name: &rec.name,
            dir: &rec.dir,
            argv: &argv,
            env: &env,
            width: t.width,
            height: t.height,
            meta: &meta,
        };
        let mux = &self.inner.mux;
        let created = match mux.new_session(&spec).await {
            // The tmux server went away (killed, or its unit restarted): start it and retry once.
            Err(MuxError::NoServer(_)) => {
                mux.ensure_server(t.history_limit).await?;
                mux.new_session(&spec).await
            }
            other => other,
        };
        match created {
            Ok(s) => {
                self.keep_token_in_tmux(&s.id, &rec.hook_token);
                Ok(s)
            }
            Err(MuxError::DuplicateSession(_)) => Err(CoreError::TmuxNameTaken(rec.name.clone())),
            Err(e) => Err(e.into()),
        }
    }

    /// Keeps a session's hook token in its tmux environment, for a daemon that loses its
    /// registry (see `recover_links`). Only over the control connection, which may still be
    /// attaching right after the first spawn: tried for a few seconds.
    fn keep_token_in_tmux(&self, tmux_id: &str, token: &str) {
        let (mux, id, token) = (
            self.inner.mux.clone(),
            tmux_id.to_string(),
            token.to_string(),
        );
        tokio::spawn(async move {
            for _ in 0..50 {
                match mux.set_private_env(&id, "CLIBOT_HOOK_TOKEN", &token).await {
                    Ok(()) => return,
                    Err(MuxError::NoSuchTarget(_)) => return,
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
            warn!("the hook token could not be kept in tmux's environment of {id}");
        });
    }

    /// Refuses to start a session whose program cannot run: looked up on the PATH the new
    /// session will have (its own environment's, else tmux's global one, which new sessions
    /// inherit), so that a missing CLI is an error that says what to do, not a session that
    /// dies at once.
    async fn check_program(
        &self,
        cli: &str,
        program: Option<&str>,
        env: &[(String, String)],
        dir: &Path,
    ) -> Result<(), CoreError> {
        let program = program.unwrap_or("");
        // tmux's global PATH is asked once and kept: every tmux call costs the server time in
        // proportion to its sessions. A program not found on the kept PATH is looked up again
        // on a fresh one before the spawn is refused.
        let own = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, p)| p.clone());
        let kept = lock(&self.inner.global_path).clone();
        let path = match (own, kept) {
            (Some(p), _) => p,
            (None, Some(p)) if crate::program::find(program, &p, dir).is_ok() => p,
            (None, _) => self.fresh_global_path().await,
        };
        match crate::program::find(program, &path, dir) {
            Ok(_) => Ok(()),
            Err(crate::program::Missing::NotFound) => Err(CoreError::ProgramNotFound {
                cli: cli.to_string(),
                program: program.to_string(),
                path,
            }),
            Err(crate::program::Missing::NotExecutable(p)) => {
                Err(CoreError::ProgramNotExecutable {
                    cli: cli.to_string(),
                    program: p,
                })
            }
        }
    }

    /// The shell command the CLI's hooks run: the configured one, or the `clibotctl` installed
    /// next to this `clibotd`, quoted for the shell the CLI runs hooks with.
    fn hook_command(&self, cli: &str) -> (String, Vec<String>) {
        let base: Vec<String> = match &self.inner.settings.config.daemon.hook_command {
            // A configured command is shell text; as an argv it runs through sh, with any
            // arguments the CLI appends passed on.
            Some(c) => vec!["sh".into(), "-c".into(), format!("{c} \"$@\""), "sh".into()],
            None => {
                let ctl = std::env::current_exe()
                    .ok()
                    .and_then(|p| p.parent().map(|d| d.join("clibotctl")))
                    .filter(|p| p.is_file())
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "clibotctl".into());
                vec![ctl, "hook".into()]
            }
        };
        let shell = match &self.inner.settings.config.daemon.hook_command {
            Some(c) => c.clone(),
            None => base
                .iter()
                .map(|a| shell_quote(a))
                .collect::<Vec<_>>()
                .join(" "),
        };
        let mut argv = base;
        argv.extend(["--cli".to_string(), cli.to_string()]);
        (format!("{shell} --cli {}", shell_quote(cli)), argv)
    }

    /// Per-session files (generated CLI settings) go with the session.
    fn remove_session_files(&self, id: &str) {
        self.drop_hook_socket(id);
        if let Err(e) = self.inner.queues.remove(id) {
            warn!("cannot remove the queued input of session {id}: {e}");
        }
        let _ = std::fs::remove_dir_all(self.inner.settings.state_dir.join("jails").join(id));
        let dir = self.inner.settings.state_dir.join("sessions").join(id);
        if dir.exists()
            && let Err(e) = std::fs::remove_dir_all(&dir)
        {
            warn!(dir = %dir.display(), "cannot remove session files: {e}");
        }
    }

    /// One session.
    pub fn get(&self, name: &str) -> Result<SessionRecord, CoreError> {
        lock(&self.inner.sessions)
            .get(name)
            .map(|e| e.rec.clone())
            .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))
    }

    /// All sessions matching `filter`, by name.
    pub fn list(&self, filter: &ListFilter) -> Vec<SessionRecord> {
        lock(&self.inner.sessions)
            .values()
            .filter(|e| filter.cli.is_empty() || e.rec.cli == filter.cli)
            .filter(|e| filter.dir.as_ref().is_none_or(|d| e.rec.dir.starts_with(d)))
            .filter(|e| filter.state.is_none_or(|s| e.rec.state == s))
            .map(|e| e.rec.clone())
            .collect()
    }

    /// Types `text` into the session and, when `submit`, presses Enter after the CLI's settle
    /// time. Multi-line text goes as one bracketed paste. While a turn runs the text is queued
    /// and delivered when the CLI is ready. Returns the event's sequence number and whether the
    /// text was queued.
    /// [`Daemon::send_input`] for a chat message: a key seen before (a gateway that restarted
    /// before confirming the message to its platform hands it over again) is accepted without
    /// typing the text a second time.
    pub async fn send_input_once(
        &self,
        name: &str,
        text: &str,
        submit: bool,
        key: &str,
    ) -> Result<(u64, bool), CoreError> {
        if key.is_empty() {
            return self.send_input(name, text, submit).await;
        }
        match self.inner.seen_inputs.claim(key).await {
            crate::dedupe::Claim::Seen(seq) => {
                info!(
                    session = name,
                    key, "chat message seen before; not typed again"
                );
                Ok((seq, false))
            }
            crate::dedupe::Claim::Mine(reservation) => {
                // On an error the reservation is dropped: the message was not taken, and a
                // redelivery may try again.
                let r = self.send_input(name, text, submit).await?;
                reservation.done(r.0);
                Ok(r)
            }
        }
    }

    /// Claims a chat command or button press by its key: true the first time only, so that a
    /// redelivered update does not restart, stop or press anything twice. Kept with the keys of
    /// typed messages, under their own prefix.
    pub async fn claim_once(&self, key: &str) -> bool {
        match self.inner.seen_inputs.claim(&format!("once:{key}")).await {
            crate::dedupe::Claim::Seen(_) => false,
            crate::dedupe::Claim::Mine(reservation) => {
                reservation.done(0);
                true
            }
        }
    }

    pub async fn send_input(
        &self,
        name: &str,
        text: &str,
        submit: bool,
    ) -> Result<(u64, bool), CoreError> {
        let max = self.inner.settings.config.daemon.max_input_bytes;
        if text.len() > max {
            return Err(CoreError::TextTooLong {
                len: text.len(),
                max,
            });
        }
        if let Some(c) = text
            .chars()
            .find(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
        {
            return Err(CoreError::InvalidArgument(format!(
                "text contains the control character U+{:04X}, which a terminal would take as a key: text is typed as it is written, so send keys separately (`clibotctl keys SESSION C-d`, or !!keys from a chat)",
                c as u32
            )));
        }
        // One newline convention; trailing newlines would be typed as extra blank lines —
        // submitting is what Enter is for.
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let text = text.trim_end_matches('\n');
        if text.is_empty() && !submit {
            return Err(CoreError::InvalidArgument(
                "nothing to send: the text is empty and submit is off".into(),
            ));
        }
        let span = info_span!("session", session = %name);
        self.submit_input(name, text.to_string(), submit)
            .instrument(span)
            .await
    }

    /// Presses named keys, in order, at once: never behind queued input, so that Escape or
    /// C-c interrupts the running turn. Only input being typed right now goes first (keys
    /// wait for the paste or the keystrokes in progress, never inside them).
    pub async fn send_keys(&self, name: &str, keys: &[String]) -> Result<u64, CoreError> {
        if keys.is_empty() {
            return Err(CoreError::InvalidArgument(
                "no keys given: name at least one, e.g. Enter or Escape".into(),
            ));
        }
        crate::limits::check_keys(keys)?;
        let parsed = keys
            .iter()
            .map(|k| Key::parse(k))
            .collect::<Result<Vec<_>, _>>()?;
        let (rec, input) = self.lookup(name)?;
        if rec.state.is_exited() {
            return Err(CoreError::Exited(name.to_string()));
        }
        let _turn = input.lock().await;
        self.inner.mux.send_keys(rec.target(), &parsed).await?;
        self.touch(name);
        let names = parsed.iter().map(|k| k.to_string()).collect();
        Ok(self.event(name, &rec.id, EventKind::KeysSent { keys: names }))
    }

    fn touch(&self, name: &str) {
        if let Some(e) = lock(&self.inner.sessions).get_mut(name) {
            e.rec.last_activity_ms = now_ms();
        }
    }

    /// The pane's text: the last `lines` lines (scrollback included), or the visible screen
    /// when `lines` is 0. Trailing blank lines are dropped.
    pub async fn capture(
        &self,
        name: &str,
        lines: u32,
        escapes: bool,
    ) -> Result<String, CoreError> {
        let rec = self.get(name)?;
        let start = (lines > 0).then(|| -i64::from(lines));
        let raw = self.inner.mux.capture(rec.target(), start, escapes).await?;
        Ok(trim_capture(&raw, lines as usize, escapes))
    }

    /// Stops a session: the CLI's own quit keys first, then a kill after `timeout` (or at once
    /// when `force`). The session is then forgotten; its events stay in the log.
    pub async fn stop(
        &self,
        name: &str,
        force: bool,
        timeout: Option<Duration>,
    ) -> Result<StopOutcome, CoreError> {
        let rec = self.reserve(name)?;
        self.stop_watcher(name);
        let span = info_span!("session", session = %name);
        let outcome = self.stop_inner(&rec, force, timeout).instrument(span).await;
        match outcome {
            Ok(outcome) => {
                if !rec.state.is_exited() {
                    self.event(
                        name,
                        &rec.id,
                        EventKind::Exited {
                            status: outcome.exit_status,
                            reason: "stopped".into(),
                            output: String::new(),
                        },
                    );
                }
                self.event(
                    name,
                    &rec.id,
                    EventKind::Stopped {
                        forced: outcome.forced,
                    },
                );
                lock(&self.inner.sessions).remove(name);
                self.remove_session_files(&rec.id);
                self.persist();
                info!(session = name, forced = outcome.forced, "stopped");
                Ok(outcome)
            }
            Err(e) => {
                if let Some(entry) = lock(&self.inner.sessions).get_mut(name) {
                    entry.stopping = false;
                }
                self.start_watcher(name);
                Err(e)
            }
        }
    }

    async fn stop_inner(
        &self,
        rec: &SessionRecord,
        force: bool,
        timeout: Option<Duration>,
    ) -> Result<StopOutcome, CoreError> {
        let mux = &self.inner.mux;
        let timeout = timeout.unwrap_or(Duration::from_millis(
            self.inner.settings.config.daemon.stop_timeout_ms,
        ));
        let mut status = rec.exit_status;
        let mut ended = rec.state.is_exited();
        if !force && !ended {
            if let Ok(cli) = self.cli(&rec.cli) {
                let keys = cli
                    .stop_keys
                    .iter()
                    .filter_map(|k| Key::parse(k).ok())
                    .collect::<Vec<_>>();
                // Ignore failures: the session may already be gone, which the wait below sees.
                let _ = mux.send_keys(rec.target(), &keys).await;
                if let Some(text) = &cli.stop_text {
                    tokio::time::sleep(Duration::from_millis(cli.submit_delay_ms)).await;
                    let _ = mux.send_text(rec.target(), text).await;
                    tokio::time::sleep(Duration::from_millis(cli.submit_delay_ms)).await;
                    let _ = mux
                        .send_keys(rec.target(), &[Key::Named("Enter".into())])
                        .await;
                }
            }
            let deadline = Instant::now() + timeout;
            while Instant::now() < deadline {
                match self.find_tmux(rec).await {
                    Ok(Some(s)) if s.dead => {
                        status = match s.dead_status {
                            Some(st) => Some(st),
                            None => self.settled_exit_status(&rec.id, &rec.tmux_id).await,
                        };
                        ended = true;
                        break;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        ended = true;
                        break;
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // Everything the CLI started, collected before the pane goes away.
        let tree = match self.find_tmux(rec).await {
            Ok(Some(s)) if s.pid > 0 && !s.dead => crate::procs::tree(s.pid),
            _ => Vec::new(),
        };
        match mux.kill_session(&rec.tmux_id).await {
            Ok(()) | Err(MuxError::NoSuchTarget(_)) | Err(MuxError::NoServer(_)) => {}
            Err(e) => return Err(e.into()),
        }
        if !tree.is_empty() {
            // Closing the pane sent SIGHUP; whatever ignored it is killed a moment later,
            // without making the caller wait.
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let killed = crate::procs::kill_all(&tree);
                if killed > 0 {
                    warn!(
                        killed,
                        "processes survived the session's end and were killed"
                    );
                }
            });
        }
        Ok(StopOutcome {
            forced: !ended,
            exit_status: status,
        })
    }

    /// tmux marks a pane dead when its terminal closes and records the exit status a moment
    /// later, when it reaps the process; wait briefly for the status.
    async fn settled_exit_status(&self, id: &str, tmux_id: &str) -> Option<i32> {
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(30)).await;
            if let Ok(l) = self.inner.mux.list_sessions().await {
                match l.into_iter().find(|s| s.meta.id == id || s.id == tmux_id) {
                    Some(s) if s.dead_status.is_some() => return s.dead_status,
                    Some(_) => {}
                    None => return None,
                }
            }
        }
        None
    }

    async fn find_tmux(&self, rec: &SessionRecord) -> Result<Option<MuxSession>, MuxError> {
        match self.inner.mux.list_sessions().await {
            Ok(l) => Ok(l
                .into_iter()
                .find(|s| s.meta.id == rec.id || (!rec.tmux_id.is_empty() && s.id == rec.tmux_id))),
            Err(MuxError::NoServer(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Starts managing an existing tmux session on clibot's tmux server.
    pub async fn adopt(
        &self,
        tmux_session: &str,
        cli: &str,
        name: &str,
    ) -> Result<SessionRecord, CoreError> {
        let cli = self.cli(cli)?.clone();
        let live = match self.inner.mux.list_sessions().await {
            Ok(l) => l,
            Err(MuxError::NoServer(_)) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let list_cmd = {
            let mut v = vec!["tmux".to_string()];
            v.extend(self.inner.mux.server_args());
            v.push("list-sessions".into());
            v.join(" ")
        };
        let s = live
            .iter()
            .find(|s| s.name == tmux_session || s.id == tmux_session)
            .ok_or_else(|| CoreError::NoSuchTmuxSession(tmux_session.to_string(), list_cmd))?;
        // A session clibot started once (and released) still carries its id and hook token:
        // keeping them keeps its CLI's hooks working.
        let env = self.session_env(&s.id).await;
        let var = |k: &str| env.get(k).cloned().unwrap_or_default();
        let name = if name.is_empty() {
            s.name.clone()
        } else {
            name.to_string()
        };
        if !is_valid_name(&name) {
            return Err(CoreError::InvalidArgument(format!(
                "{name:?} is not a valid session name (1 to 64 of A-Z a-z 0-9 _ -): pass --name"
            )));
        }
        let rec = {
            let mut sessions = lock(&self.inner.sessions);
            if let Some(e) = sessions
                .values()
                .find(|e| e.rec.tmux_id == s.id || (!s.meta.id.is_empty() && e.rec.id == s.meta.id))
            {
                return Err(CoreError::AlreadyManaged(
                    tmux_session.to_string(),
                    e.rec.name.clone(),
                ));
            }
            if sessions.contains_key(&name) {
                return Err(CoreError::AlreadyExists(name));
            }
            let now = now_ms();
            let known_id = var("CLIBOT_SESSION_ID");
            let id = if !known_id.is_empty()
                && !var("CLIBOT_HOOK_TOKEN").is_empty()
                && !sessions.values().any(|e| e.rec.id == known_id)
            {
                known_id
            } else {
                new_id()
            };
            let mut rec = SessionRecord {
                id,
                name: name.clone(),
                cli: cli.name.clone(),
                dir: PathBuf::from(&s.path),
                state: if s.dead { State::Exited } else { State::Idle },
                created_at_ms: now,
                last_activity_ms: now,
                tmux_session: s.name.clone(),
                tmux_id: s.id.clone(),
                pane: s.pane.clone(),
                pid: s.pid,
                exit_status: s.dead_status,
                adopted: true,
                args: Vec::new(),
                ..Default::default()
            };
            if rec.id == var("CLIBOT_SESSION_ID") {
                self.recover_links(&mut rec, &var);
            } else if self
                .kind_of(&rec.cli)
                .is_some_and(|(a, _)| a.completes_by_hook())
            {
                warn!(
                    session = %name,
                    "adopted without clibot's hooks: its turns are read off the screen"
                );
            }
            sessions.insert(name.clone(), Entry::new(rec.clone()));
            rec
        };
        let meta = SessionMeta {
            id: rec.id.clone(),
            name: rec.name.clone(),
            cli: rec.cli.clone(),
            dir: rec.dir.display().to_string(),
            created_ms: rec.created_at_ms.to_string(),
        };
        if let Err(e) = self.inner.mux.set_meta(&rec.tmux_id, Some(&meta)).await {
            lock(&self.inner.sessions).remove(&name);
            return Err(e.into());
        }
        self.event(
            &name,
            &rec.id,
            EventKind::Adopted {
                cli: rec.cli.clone(),
                tmux_session: rec.tmux_session.clone(),
            },
        );
        self.persist();
        info!(session = %name, tmux = %rec.tmux_session, "adopted");
        self.start_watcher(&name);
        Ok(rec)
    }

    /// Stops managing a session; it keeps running in tmux.
    pub async fn release(&self, name: &str) -> Result<(), CoreError> {
        let (rec, _) = self.lookup(name)?;
        match self.inner.mux.set_meta(&rec.tmux_id, None).await {
            Ok(()) | Err(MuxError::NoSuchTarget(_)) | Err(MuxError::NoServer(_)) => {}
            Err(e) => return Err(e.into()),
        }
        self.stop_watcher(name);
        if let Err(e) = self.inner.mux.unwatch(&rec.tmux_id).await {
            warn!(session = %name, "cannot stop following the released session in tmux: {e}");
        }
        lock(&self.inner.sessions).remove(name);
        self.remove_session_files(&rec.id);
        self.event(name, &rec.id, EventKind::Released);
        self.persist();
        info!(session = %name, "released");
        Ok(())
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
        StatusInfo {
            uptime: self.inner.started.elapsed(),
            socket: self.inner.settings.socket.clone(),
            state_dir: self.inner.settings.state_dir.clone(),
            config_file: self.inner.settings.config_file.clone(),
            tmux_args: self.inner.mux.server_args(),
            tmux_version,
            sessions: lock(&self.inner.sessions).len(),
            last_seq: self.inner.events.last_seq(),
            clis: self.live().clis.keys().cloned().collect(),
            warnings: lock(&self.inner.warnings).clone(),
        }
    }

    /// The command that attaches a terminal to the session.
    pub fn attach_command(&self, rec: &SessionRecord) -> Vec<String> {
        self.inner.mux.attach_command(&rec.tmux_id)
    }

    /// Compares every managed session with tmux and records those whose process exited or
    /// whose tmux session vanished. This is the slow safety net; it costs one tmux call.
    pub async fn check_sessions(&self) {
        // Which sessions to check is decided before tmux is asked: a session spawned while the
        // list is in flight is not in it, and must not be taken for gone.
        let candidates: Vec<(String, String, String)> = lock(&self.inner.sessions)
            .values()
            .filter(|e| !e.stopping && !e.rec.state.is_exited())
            .map(|e| (e.rec.name.clone(), e.rec.id.clone(), e.rec.tmux_id.clone()))
            .collect();
        let live = match self.inner.mux.list_sessions().await {
            Ok(l) => l,
            Err(MuxError::NoServer(_)) => Vec::new(),
            Err(e) => {
                warn!("cannot list tmux sessions: {e}");
                return;
            }
        };
        for (name, id, tmux_id) in candidates {
            match live.iter().find(|s| s.meta.id == id || s.id == tmux_id) {
                Some(s) if s.dead => {
                    let status = match s.dead_status {
                        Some(st) => Some(st),
                        None => self.settled_exit_status(&id, &tmux_id).await,
                    };
                    let output = self.last_words(&name, &s.pane).await;
                    self.mark_exited_with(&name, status, "the CLI exited", output)
                }
                Some(_) => {}
                None => self.mark_exited(&name, None, "its tmux session is gone"),
            }
        }
    }

    /// The chat user a spawn for `owner` is capped for, with their platform's cap: `None` for
    /// the local user and for admins, who are not capped per user.
    fn capped_owner(&self, owner: &str) -> Option<(String, String, usize)> {
        let (platform, user) = owner.split_once(':')?;
        if self.inner.access.known(platform, user) == Some(true) {
            return None;
        }
        let cap = self.inner.access.platform(platform).max_sessions_per_user;
        Some((platform.to_string(), user.to_string(), cap))
    }

    /// Refuses to start session `name` when `[daemon] max_sessions` run already, or when its
    /// chat user (`owner`: platform, user, cap) runs their cap. Exited sessions do not count.
    /// The refusal names the idle sessions that could be stopped to make room.
    fn check_limits(
        &self,
        sessions: &BTreeMap<String, Entry>,
        name: &str,
        owner: Option<&(String, String, usize)>,
    ) -> Result<(), CoreError> {
        // An exited session being restarted counts: it is about to run, and two restarts at
        // once must not both find room for one.
        let running =
            |e: &&Entry| e.rec.name != name && (!e.rec.state.is_exited() || e.stopping);
        let hint = |of: &dyn Fn(&Entry) -> bool, raise: &str| {
            let mut idle: Vec<(Duration, &str)> = sessions
                .values()
                .filter(|e| running(e) && of(e))
                .filter_map(|e| idle_for(e).map(|d| (d, e.rec.name.as_str())))
                .collect();
            idle.sort_by_key(|(d, _)| std::cmp::Reverse(*d));
            if idle.is_empty() {
                format!("none of them is idle now: stop one you no longer need, or {raise}")
            } else {
                // The longest idle first, a few of them: a message, not a listing.
                const SHOWN: usize = 5;
                let mut list = idle
                    .iter()
                    .take(SHOWN)
                    .map(|(d, n)| format!("{n} (idle {})", crate::config::format_age(*d)))
                    .collect::<Vec<_>>()
                    .join(", ");
                if idle.len() > SHOWN {
                    list.push_str(&format!(
                        " and {} more (`clibotctl list --state idle`)",
                        idle.len() - SHOWN
                    ));
                }
                format!("idle ones you could stop: {list}")
            }
        };
        let total = sessions.values().filter(running).count();
        let max = self.inner.settings.config.daemon.max_sessions;
        if total >= max {
            return Err(CoreError::TooManySessions {
                name: name.to_string(),
                running: total,
                hint: hint(&|_| true, "raise [daemon] max_sessions"),
            });
        }
        if let Some((platform, user, cap)) = owner {
            let key = format!("{platform}:{user}");
            let theirs = |e: &Entry| e.rec.owner == key;
            let count = sessions
                .values()
                .filter(running)
                .filter(|e| theirs(e))
                .count();
            if count >= *cap {
                return Err(CoreError::TooManyForUser {
                    name: name.to_string(),
                    user: key.clone(),
                    platform: platform.clone(),
                    running: match count {
                        1 => "1 session".to_string(),
                        n => format!("{n} sessions"),
                    },
                    hint: hint(&theirs, "ask an admin"),
                });
            }
        }
        Ok(())
    }

    /// Stops, gracefully, every session idle for longer than its CLI's `idle_stop_after` (else
    /// `[daemon] idle_stop_after`), and keeps it as exited with the reason, so that `restart`
    /// resumes its conversation. Adopted sessions are left alone: clibot did not start them.
    pub async fn reap_idle(&self) {
        let default = self.inner.settings.config.daemon.idle_stop_after;
        let live = self.live();
        let after_for = |cli: &str| {
            live.clis
                .get(cli)
                .and_then(|c| c.idle_stop_after)
                .unwrap_or(default)
        };
        let due: Vec<(String, Duration)> = lock(&self.inner.sessions)
            .values()
            .filter(|e| !e.rec.adopted)
            .filter_map(|e| {
                let after = after_for(&e.rec.cli);
                let idle = idle_for(e)?;
                (!after.is_zero() && idle >= after).then(|| (e.rec.name.clone(), after))
            })
            .collect();
        for (name, after) in due {
            let span = info_span!("session", session = %name);
            self.reap(&name, after).instrument(span).await;
        }
    }

    async fn reap(&self, name: &str, after: Duration) {
        // Checked again as it is reserved: input may have come meanwhile.
        let rec = {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = sessions.get_mut(name) else {
                return;
            };
            if idle_for(e).is_none_or(|d| d < after) {
                return;
            }
            e.stopping = true;
            e.rec.clone()
        };
        self.stop_watcher(name);
        let reason = format!("idle for {}", crate::config::format_duration(after));
        info!("stopping the session: {reason}");
        match self.stop_inner(&rec, false, None).await {
            Ok(outcome) => {
                if let Some(e) = lock(&self.inner.sessions).get_mut(name) {
                    e.stopping = false;
                }
                self.mark_exited(name, outcome.exit_status, &reason);
            }
            Err(e) => {
                if let Some(entry) = lock(&self.inner.sessions).get_mut(name) {
                    entry.stopping = false;
                }
                self.start_watcher(name);
                warn!("could not stop the idle session: {e}");
            }
        }
    }

    /// Runs [`Daemon::check_sessions`] and [`Daemon::reap_idle`] every `poll_interval_ms`
    /// until `shutdown` — or, with many sessions, every 20 ms per running session: the check
    /// is one `list-sessions`, which costs the tmux server time in proportion to its sessions,
    /// and it is only the safety net (each session's watcher reports its end at once).
    pub async fn run_monitor(self, shutdown: CancellationToken) {
        let base =
            Duration::from_millis(self.inner.settings.config.daemon.poll_interval_ms.max(100));
        loop {
            let running = lock(&self.inner.sessions)
                .values()
                .filter(|e| !e.rec.state.is_exited())
                .count() as u32;
            let period = base.max(SAFETY_NET_PER_SESSION * running);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(period) => {
                    self.check_sessions().await;
                    self.reap_idle().await;
                }
            }
        }
    }

    /// Saves everything before the process ends. tmux and its sessions are left running.
    pub fn shutdown(&self) {
        self.persist();
    }
}

impl Entry {
    fn new(rec: SessionRecord) -> Entry {
        Entry {
            rec,
            input: Arc::new(tokio::sync::Mutex::new(())),
            stopping: false,
            rt: Runtime::default(),
        }
    }
}

/// clibot relies on tmux 3.2 features (`-e` on new-session, `-D`, bracketed paste handling).
/// The last 15 non-blank lines of a screen, without tmux's own "Pane is dead (…)" line.
fn tail_lines(screen: &str) -> String {
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
fn trim_capture(raw: &str, lines: usize, escapes: bool) -> String {
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
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Writes a file only this user can read (settings that name the hook command).
pub(crate) fn write_private(path: &Path, content: impl AsRef<[u8]>) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(content.as_ref())
}

/// A random version-4 UUID (for CLIs that take a session id chosen up front).
pub(crate) fn new_uuid() -> String {
    let a = u64::from_str_radix(&new_id(), 16).unwrap_or(0);
    let b = u64::from_str_radix(&new_id(), 16).unwrap_or(0);
    let a = (a & 0xffff_ffff_ffff_0fff) | 0x4000;
    let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// Creates `dir` (and parents) with mode 0700 for the parts it creates.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // An existing directory (made by an older version, or by hand) is tightened too.
    let mode = std::fs::metadata(dir)?.permissions().mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o700))?;
    }
    Ok(())
}

/// How long session `e` has been idle: no input, no output, nothing queued or being typed, no
/// prompt, no turn running. `None` unless it is idle in all these ways.
fn idle_for(e: &Entry) -> Option<Duration> {
    let quiet = e.rec.state == State::Idle
        && !e.stopping
        && e.rec.queue.is_empty()
        && e.rec.prompt.is_none()
        && !e.rt.delivering
        && e.rt.turn_started.is_none()
        && e.rt.waiters.is_empty();
    if !quiet {
        return None;
    }
    let since_activity =
        Duration::from_millis(u64::try_from(now_ms() - e.rec.last_activity_ms).unwrap_or(0));
    Some(since_activity.min(e.rt.last_output.elapsed()))
}

/// Session `name`, unless it is unknown or being stopped (or restarted).
pub(crate) fn usable<'a>(
    sessions: &'a mut BTreeMap<String, Entry>,
    name: &str,
) -> Result<&'a mut Entry, CoreError> {
    let e = sessions
        .get_mut(name)
        .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))?;
    if e.stopping {
        return Err(CoreError::Stopping(name.to_string()));
    }
    Ok(e)
}

/// A port on 127.0.0.1 that nothing listens on now, for a CLI's own server. (The CLI binds it
/// a moment later; should another program take it first, the CLI fails to start and says so.)
fn free_local_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    Ok(l.local_addr()?.port())
}

#[cfg(test)]
mod tests;
