//! The daemon's metrics, in the Prometheus text exposition format (version 0.0.4), encoded by
//! `prometheus-client`.
//!
//! Most are counted from the events as they are written (`Metrics::on_event`, called by
//! `Daemon::event`): one place sees every turn, prompt and error. Turn durations are the time
//! from a session's move to `working` to its `turn_completed`; prompt waits, from the first
//! `waiting` of a prompt to its `prompt_resolved`. The session gauge and the resident memory
//! are read when the metrics are encoded. RPC durations are timed by a layer around the gRPC
//! service (server.rs), up to the response's headers (for a stream, its start).
//!
//! With `[daemon] metrics_listen` set, `serve_http` also serves them on `GET /metrics`.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::locking::lock;
use crate::model::State;
use crate::store::events::EventKind;

use super::http;

/// The `Content-Type` of what `/metrics` serves.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

type Labels = Vec<(&'static str, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Open turns and prompts kept for timing; past this (sessions that vanished without an
/// event that ends them) they are forgotten rather than kept forever.
const MAX_OPEN: usize = 4096;

fn seconds_buckets() -> Histogram {
    // 10 ms to ~ 1.5 h.
    Histogram::new(exponential_buckets(0.01, 2.0, 20))
}

fn rpc_buckets() -> Histogram {
    // 0.1 ms to ~ 100 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 21))
}

fn label(key: &'static str, value: &str) -> Labels {
    vec![(key, value.to_string())]
}

/// What is timed between two events.
#[derive(Default)]
struct Open {
    /// Session → when it last started working with no turn open.
    turns: HashMap<String, Instant>,
    /// Prompt id → (session, when it was first published).
    prompts: HashMap<String, (String, Instant)>,
    /// Session a delegation started → (the CLI it runs, when the first CLI failed): timed
    /// until the request is typed into it.
    delegations: HashMap<String, (String, Instant)>,
}

/// The daemon's metrics registry. One per daemon, shared by the core, the RPC layer and the
/// HTTP endpoint.
pub struct Metrics {
    registry: Registry,
    sessions: Family<Labels, Gauge>,
    turns: Family<Labels, Counter>,
    turn_duration: HistogramFamily,
    prompts: Family<Labels, Counter>,
    answered: Family<Labels, Counter>,
    prompt_wait: Histogram,
    errors: Family<Labels, Counter>,
    events_written: Counter,
    gateway_failed: Family<Labels, Gauge>,
    gateway_delivered: Family<Labels, Gauge>,
    gateway_last_progress: Family<Labels, Gauge<f64, AtomicU64>>,
    gateway_restarts: Family<Labels, Gauge>,
    /// Platform → when its receive loop last completed a cycle (Unix ms), as last reported:
    /// the seconds since are worked out when the metrics are encoded.
    gateway_progress: Mutex<BTreeMap<String, i64>>,
    rpc_duration: HistogramFamily,
    delegations: Family<Labels, Counter>,
    job_runs: Family<Labels, Counter>,
    tokens: Family<Labels, Counter>,
    plan_used: Family<Labels, Gauge<f64, AtomicU64>>,
    delegation_seconds: HistogramFamily,
    prompt_reminders: Family<Labels, Counter>,
    prompt_escalations: Family<Labels, Counter>,
    prompt_timeouts: Family<Labels, Counter>,
    cli_versions: Family<Labels, Gauge>,
    detection_failures: Family<Labels, Counter>,
    resident: Gauge,
    open: Mutex<Open>,
    /// One encoding at a time: the gauges read at scrape time are cleared and set under it.
    encoding: Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("clibot");
        let m = Metrics {
            registry: Registry::default(),
            sessions: Family::default(),
            turns: Family::default(),
            turn_duration: Family::new_with_constructor(seconds_buckets),
            prompts: Family::default(),
            answered: Family::default(),
            prompt_wait: seconds_buckets(),
            errors: Family::default(),
            events_written: Counter::default(),
            gateway_failed: Family::default(),
            gateway_delivered: Family::default(),
            gateway_last_progress: Family::default(),
            gateway_restarts: Family::default(),
            gateway_progress: Mutex::default(),
            rpc_duration: Family::new_with_constructor(rpc_buckets),
            delegations: Family::default(),
            job_runs: Family::default(),
            tokens: Family::default(),
            plan_used: Family::default(),
            delegation_seconds: Family::new_with_constructor(seconds_buckets),
            prompt_reminders: Family::default(),
            prompt_escalations: Family::default(),
            prompt_timeouts: Family::default(),
            cli_versions: Family::default(),
            detection_failures: Family::default(),
            resident: Gauge::default(),
            open: Mutex::default(),
            encoding: Mutex::default(),
        };
        registry.register(
            "sessions",
            "Managed sessions, by CLI and state",
            m.sessions.clone(),
        );
        registry.register("turns", "Turns completed, by CLI", m.turns.clone());
        registry.register(
            "turn_duration_seconds",
            "From a session starting to work to its turn completing, by CLI",
            m.turn_duration.clone(),
        );
        registry.register(
            "prompts",
            "Prompts (questions from a CLI) published, by kind",
            m.prompts.clone(),
        );
        registry.register(
            "prompts_answered",
            "Prompts resolved, by who answered: chat, local (clibotctl), terminal (at the desk), cli (withdrawn by the CLI)",
            m.answered.clone(),
        );
        registry.register(
            "prompt_wait_seconds",
            "From a prompt's publication to its resolution",
            m.prompt_wait.clone(),
        );
        registry.register("errors", "Error events, by kind", m.errors.clone());
        registry.register(
            "events_written",
            "Events appended to the event log",
            m.events_written.clone(),
        );
        registry.register(
            "gateway_deliveries",
            "Events the gateway delivered to chats, by platform (its last report)",
            m.gateway_delivered.clone(),
        );
        registry.register(
            "gateway_deliveries_failed",
            "Deliveries the gateway reports as failed, by platform (its last report)",
            m.gateway_failed.clone(),
        );
        registry.register(
            "gateway_last_progress_seconds",
            "Seconds since the platform's receive loop last completed a cycle (a batch fetched and handled), by platform; absent until its first",
            m.gateway_last_progress.clone(),
        );
        registry.register(
            "gateway_restarts",
            "Times the gateway restarted a platform's receive loop because it stalled, by platform (its last report)",
            m.gateway_restarts.clone(),
        );
        registry.register(
            "rpc_duration_seconds",
            "gRPC calls on the daemon's socket, until the response starts, by method",
            m.rpc_duration.clone(),
        );
        registry.register(
            "delegations",
            "Work handed to another CLI, by the CLI it left, the CLI it went to, and why (an error kind, crash, stalled, manual)",
            m.delegations.clone(),
        );
        registry.register(
            "jobs_runs",
            "Job runs by job and outcome: done, gate_skipped, failed, cancelled; skipped (not started) and missed (due while the daemon was down)",
            m.job_runs.clone(),
        );
        registry.register(
            "tokens",
            "Tokens the CLIs' turns used, from their own records, by CLI and kind (input, output, cache_read, cache_write)",
            m.tokens.clone(),
        );
        registry.register(
            "plan_window_used_ratio",
            "The share of a plan's usage window used (0 to 1), as the CLI last recorded it, by CLI and window (5h, 7d)",
            m.plan_used.clone(),
        );
        registry.register(
            "delegation_seconds",
            "From the failure that handed work on to the new session having been typed the request, by the CLI it went to",
            m.delegation_seconds.clone(),
        );
        registry.register(
            "prompt_reminders",
            "Prompts shown again because nobody answered them for remind_after, by CLI",
            m.prompt_reminders.clone(),
        );
        registry.register(
            "prompt_escalations",
            "Prompts shown to the admins' chats because nobody answered them for escalate_after, by CLI",
            m.prompt_escalations.clone(),
        );
        registry.register(
            "prompt_timeouts",
            "Prompts nobody answered within prompt_timeout, by CLI and what followed (wait, deny, decider)",
            m.prompt_timeouts.clone(),
        );
        registry.register(
            "cli_sessions",
            "Live sessions (not exited), by CLI and the version of its program (empty: unknown)",
            m.cli_versions.clone(),
        );
        registry.register(
            "detection_failures",
            "What the screen patterns missed, by CLI, its version and kind: no_completion (a turn ended by the idle safety net, its completion signal never came), no_options (a prompt published without its choices)",
            m.detection_failures.clone(),
        );
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory of clibotd",
            m.resident.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Counts an event about to be written to the log.
    pub(crate) fn on_event(&self, session: &str, kind: &EventKind) {
        self.events_written.inc();
        match kind {
            EventKind::StateChanged { to, .. } => {
                let mut open = lock(&self.open);
                match to {
                    State::Working => {
                        if open.turns.len() >= MAX_OPEN {
                            open.turns.clear();
                        }
                        open.turns
                            .entry(session.to_string())
                            .or_insert_with(Instant::now);
                    }
                    // Waiting keeps the turn open; anything else ends it, completed or not.
                    State::Waiting => {}
                    _ => {
                        open.turns.remove(session);
                    }
                }
            }
            EventKind::Waiting { prompt } => {
                let mut open = lock(&self.open);
                if !open.prompts.contains_key(&prompt.id) {
                    if open.prompts.len() >= MAX_OPEN {
                        open.prompts.clear();
                    }
                    open.prompts
                        .insert(prompt.id.clone(), (session.to_string(), Instant::now()));
                    drop(open);
                    self.prompts
                        .get_or_create(&label("kind", non_empty(prompt.kind.as_str())))
                        .inc();
                }
            }
            EventKind::PromptResolved {
                prompt_id,
                by,
                actor,
                ..
            } => {
                self.answered
                    .get_or_create(&label("by", answered_by(by, actor)))
                    .inc();
                let opened = lock(&self.open).prompts.remove(prompt_id);
                if let Some((_, at)) = opened {
                    self.prompt_wait.observe(at.elapsed().as_secs_f64());
                }
            }
            EventKind::JobFinished { job, outcome, .. } => self.job_run(job, outcome.as_str()),
            EventKind::JobSkipped { job, .. } => self.job_run(job, "skipped"),
            EventKind::JobMissed { job, .. } => self.job_run(job, "missed"),
            EventKind::Error { kind, .. } => {
                self.errors
                    .get_or_create(&label("kind", non_empty(kind)))
                    .inc();
            }
            EventKind::InputSent { .. } => {
                let started = lock(&self.open).delegations.remove(session);
                if let Some((to, at)) = started {
                    self.delegation_seconds
                        .get_or_create(&label("to", &to))
                        .observe(at.elapsed().as_secs_f64());
                }
            }
            EventKind::Exited { .. } | EventKind::Stopped { .. } | EventKind::Released => {
                let mut open = lock(&self.open);
                open.turns.remove(session);
                open.prompts.retain(|_, (s, _)| s != session);
                open.delegations.remove(session);
            }
            _ => {}
        }
    }

    /// A turn of `session` (running `cli`) completed: counted, and timed from its start.
    pub(crate) fn turn_completed(&self, session: &str, cli: &str) {
        let labels = label("cli", cli);
        self.turns.get_or_create(&labels).inc();
        let started = lock(&self.open).turns.remove(session);
        if let Some(at) = started {
            self.turn_duration
                .get_or_create(&labels)
                .observe(at.elapsed().as_secs_f64());
        }
    }

    /// A job's run counted by how it ended (or that it did not start, or was missed).
    /// A turn of `cli` used `u`.
    pub(crate) fn turn_usage(&self, cli: &str, u: &crate::usage::TurnUsage) {
        for (kind, n) in u.tokens.kinds() {
            self.tokens
                .get_or_create(&vec![("cli", cli.to_string()), ("kind", kind.to_string())])
                .inc_by(n);
        }
        for w in &u.windows {
            self.plan_used
                .get_or_create(&vec![("cli", cli.to_string()), ("window", w.name.clone())])
                .set(w.used_percent / 100.0);
        }
    }

    fn job_run(&self, job: &str, outcome: &str) {
        self.job_runs
            .get_or_create(&vec![
                ("job", job.to_string()),
                ("outcome", outcome.to_string()),
            ])
            .inc();
    }

    /// Work moved from a session of `from` to `session`, which runs `to`, because of `reason`;
    /// `since`: when the first CLI failed (or the hand-on was asked for). Timed until the
    /// request is typed into `session`.
    pub(crate) fn delegated(
        &self,
        from: &str,
        to: &str,
        reason: &str,
        session: &str,
        since: Instant,
    ) {
        self.delegations
            .get_or_create(&vec![
                ("from", from.to_string()),
                ("to", to.to_string()),
                ("reason", non_empty(reason).to_string()),
            ])
            .inc();
        let mut open = lock(&self.open);
        if open.delegations.len() >= MAX_OPEN {
            open.delegations.clear();
        }
        open.delegations
            .insert(session.to_string(), (to.to_string(), since));
    }

    /// A prompt nobody answered was shown again (`reminder`), to the admins (`escalation`), or
    /// timed out (`timeout`, with the `action` that followed).
    pub(crate) fn prompt_nudged(&self, what: &str, cli: &str, action: &str) {
        match what {
            "reminder" => self
                .prompt_reminders
                .get_or_create(&label("cli", cli))
                .inc(),
            "escalation" => self
                .prompt_escalations
                .get_or_create(&label("cli", cli))
                .inc(),
            _ => self
                .prompt_timeouts
                .get_or_create(&vec![
                    ("cli", cli.to_string()),
                    ("action", action.to_string()),
                ])
                .inc(),
        };
    }

    /// Screen detection missed something for `cli` at `version` (see `detection_failures`).
    pub(crate) fn detection_failure(&self, cli: &str, version: &str, kind: &str) {
        self.detection_failures
            .get_or_create(&vec![
                ("cli", cli.to_string()),
                ("version", version.to_string()),
                ("kind", kind.to_string()),
            ])
            .inc();
    }

    /// A gateway's report: how many deliveries it made and saw fail on `platform`.
    pub(crate) fn gateway_report(&self, platform: &str, deliveries: u64, deliveries_failed: u64) {
        self.gateway_delivered
            .get_or_create(&label("platform", platform))
            .set(i64::try_from(deliveries).unwrap_or(i64::MAX));
        self.gateway_failed
            .get_or_create(&label("platform", platform))
            .set(i64::try_from(deliveries_failed).unwrap_or(i64::MAX));
    }

    /// A gateway's report of `platform`'s receive loop: its last completed cycle (Unix ms, 0 =
    /// none yet) and how often it was restarted.
    pub(crate) fn gateway_progress(&self, platform: &str, last_progress_ms: i64, restarts: u32) {
        self.gateway_restarts
            .get_or_create(&label("platform", platform))
            .set(i64::from(restarts));
        let mut all = lock(&self.gateway_progress);
        if last_progress_ms > 0 && (all.len() < 64 || all.contains_key(platform)) {
            all.insert(platform.to_string(), last_progress_ms);
        }
    }

    /// One gRPC call, by its path (`/clibot.v1.Clibot/Method`).
    pub(crate) fn rpc(&self, path: &str, took: Duration) {
        self.rpc_duration
            .get_or_create(&label("method", rpc_method(path)))
            .observe(took.as_secs_f64());
    }

    /// The metrics as text, with the session gauge set from `sessions` (cli, state) and the
    /// resident memory read now.
    pub(crate) fn encode<'a>(
        &self,
        sessions: impl IntoIterator<Item = (&'a str, &'a str, State)>,
    ) -> String {
        let _one = lock(&self.encoding);
        let mut counts: HashMap<(&str, &str), i64> = HashMap::new();
        let mut versions: HashMap<(&str, &str), i64> = HashMap::new();
        for (cli, version, state) in sessions {
            *counts.entry((cli, state.as_str())).or_default() += 1;
            if state != State::Exited {
                *versions.entry((cli, version)).or_default() += 1;
            }
        }
        self.cli_versions.clear();
        for ((cli, version), n) in versions {
            self.cli_versions
                .get_or_create(&vec![
                    ("cli", cli.to_string()),
                    ("version", version.to_string()),
                ])
                .set(n);
        }
        self.sessions.clear();
        for ((cli, state), n) in counts {
            self.sessions
                .get_or_create(&vec![
                    ("cli", cli.to_string()),
                    ("state", state.to_string()),
                ])
                .set(n);
        }
        let now = crate::store::now_ms();
        for (platform, at) in lock(&self.gateway_progress).iter() {
            self.gateway_last_progress
                .get_or_create(&label("platform", platform))
                .set((now - at).max(0) as f64 / 1000.0);
        }
        if let Some(rss) = resident_bytes() {
            self.resident.set(i64::try_from(rss).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        if let Err(e) = prometheus_text::encode(&mut text, &self.registry) {
            tracing::error!("cannot encode the metrics: {e}");
        }
        text
    }
}

/// Who answered a prompt, for the label: an answer through clibot is "local" (clibotctl) or
/// "chat" (a chat user, "PLATFORM:USER"); "terminal" and "cli" are kept as they are.
fn answered_by<'a>(by: &'a str, actor: &str) -> &'a str {
    match by {
        "clibot" if actor.is_empty() || actor == "local" => "local",
        "clibot" => "chat",
        // One label for all rules: their numbers change with the config.
        b if b.starts_with("rule") => "rule",
        other => non_empty(other),
    }
}

fn non_empty(s: &str) -> &str {
    if s.is_empty() { "unknown" } else { s }
}

/// The method of a gRPC path; anything that is not a clibot.v1 method is "other", so that a
/// client cannot make up label values.
fn rpc_method(path: &str) -> &str {
    match path.strip_prefix("/clibot.v1.Clibot/") {
        Some(m)
            if !m.is_empty() && m.len() <= 64 && m.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            m
        }
        _ => "other",
    }
}

/// This process's resident memory: /proc/self/statm's second field, in pages.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages.saturating_mul(rustix::param::page_size() as u64))
}

/// Why `[daemon] metrics_listen` is refused.
pub fn check_listen(addr: SocketAddr, allow_remote: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || allow_remote {
        Ok(())
    } else {
        Err(format!(
            "[daemon] metrics_listen = \"{addr}\" is not a loopback address: the metrics name your sessions' CLIs and the gateways' platforms; set [daemon] metrics_allow_remote = true to serve them there anyway"
        ))
    }
}

/// Serves `GET /metrics` on `listener` until `shutdown` is cancelled; anything else is 404
/// (405 for another method on /metrics). At most [`http::MAX_CONNECTIONS`] connections, each
/// closed after [`http::IDLE_TIMEOUT`] without traffic: see [`http`].
/// `text` renders the metrics at each scrape (the daemon's `metrics_text`).
pub async fn serve_http<F>(
    listener: tokio::net::TcpListener,
    text: F,
    shutdown: tokio_util::sync::CancellationToken,
) where
    F: Fn() -> String + Clone + Send + Sync + 'static,
{
    let handle = move |req: hyper::Request<hyper::body::Incoming>| {
        let body =
            (req.method() == hyper::Method::GET && req.uri().path() == "/metrics").then(&text);
        let path_is_metrics = req.uri().path() == "/metrics";
        async move {
            match body {
                Some(body) => {
                    let mut r = http::text(200, body);
                    r.headers_mut().insert(
                        hyper::header::CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static(CONTENT_TYPE),
                    );
                    r
                }
                None if path_is_metrics => http::text(405, "GET only\n"),
                None => http::text(404, "the metrics are on /metrics\n"),
            }
        }
    };
    http::serve(
        listener,
        handle,
        http::Limits::new("metrics endpoint"),
        shutdown,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Prompt;

    fn prompt(id: &str) -> Prompt {
        Prompt {
            id: id.into(),
            kind: "confirm".into(),
            text: "Go?".into(),
            options: vec![],
            subject: String::new(),
            source: crate::model::PromptSource::Screen,
            answer: Default::default(),
            ..Default::default()
        }
    }

    fn state(to: State) -> EventKind {
        EventKind::StateChanged {
            from: State::Idle,
            to,
            reason: String::new(),
        }
    }

    #[test]
    fn counts_turns_prompts_and_errors_from_events() {
        let m = Metrics::new();
        m.on_event("a", &state(State::Working));
        m.on_event(
            "a",
            &EventKind::Waiting {
                prompt: prompt("p1"),
            },
        );
        // Published again (the screen confirmed it): still one prompt.
        m.on_event(
            "a",
            &EventKind::Waiting {
                prompt: prompt("p1"),
            },
        );
        m.on_event("a", &state(State::Waiting));
        m.on_event(
            "a",
            &EventKind::PromptResolved {
                prompt_id: "p1".into(),
                by: "clibot".into(),
                answer: "y".into(),
                actor: "local".into(),
                note: String::new(),
            },
        );
        m.on_event(
            "a",
            &EventKind::PromptResolved {
                prompt_id: "p0".into(),
                by: "clibot".into(),
                answer: "y".into(),
                actor: "telegram:42".into(),
                note: String::new(),
            },
        );
        m.on_event("a", &state(State::Working));
        m.turn_completed("a", "bash");
        m.on_event(
            "a",
            &EventKind::Error {
                message: "boom".into(),
                kind: String::new(),
            },
        );
        m.detection_failure("claude", "2.1.332", "no_options");
        m.gateway_report("telegram", 40, 3);
        m.gateway_progress("telegram", crate::store::now_ms() - 12_000, 2);
        m.gateway_progress("discord", 0, 0);
        m.rpc("/clibot.v1.Clibot/Status", Duration::from_millis(2));
        m.rpc("/evil/made-up", Duration::from_millis(2));
        let text = m.encode([
            ("bash", "", State::Idle),
            ("bash", "", State::Idle),
            ("claude", "2.1.332", State::Working),
        ]);
        for line in [
            "clibot_sessions{cli=\"bash\",state=\"idle\"} 2",
            "clibot_sessions{cli=\"claude\",state=\"working\"} 1",
            "clibot_cli_sessions{cli=\"claude\",version=\"2.1.332\"} 1",
            "clibot_detection_failures_total{cli=\"claude\",version=\"2.1.332\",kind=\"no_options\"} 1",
            "clibot_turns_total{cli=\"bash\"} 1",
            "clibot_turn_duration_seconds_count{cli=\"bash\"} 1",
            "clibot_prompts_total{kind=\"confirm\"} 1",
            "clibot_prompts_answered_total{by=\"local\"} 1",
            "clibot_prompts_answered_total{by=\"chat\"} 1",
            "clibot_prompt_wait_seconds_count 1",
            "clibot_errors_total{kind=\"unknown\"} 1",
            "clibot_events_written_total 8",
            "clibot_gateway_deliveries{platform=\"telegram\"} 40",
            "clibot_gateway_deliveries_failed{platform=\"telegram\"} 3",
            "clibot_gateway_restarts{platform=\"telegram\"} 2",
            "clibot_rpc_duration_seconds_count{method=\"Status\"} 1",
            "clibot_rpc_duration_seconds_count{method=\"other\"} 1",
            "# TYPE clibot_process_resident_memory_bytes gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        // Seconds since the last cycle, worked out now; none for a platform without one.
        let progress = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("clibot_gateway_last_progress_seconds{platform=\"telegram\"} ")
            })
            .and_then(|v| v.parse::<f64>().ok());
        assert!(
            progress.is_some_and(|s| (12.0..60.0).contains(&s)),
            "{text}"
        );
        assert!(!text.contains("clibot_gateway_last_progress_seconds{platform=\"discord\"}"));
        // A session gone from the table is gone from the gauge.
        let text = m.encode([("bash", "", State::Exited)]);
        assert!(!text.contains("state=\"idle\""), "{text}");
        assert!(
            text.contains("clibot_sessions{cli=\"bash\",state=\"exited\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn a_turn_ended_without_completion_is_not_timed_later() {
        let m = Metrics::new();
        m.on_event("a", &state(State::Working));
        m.on_event(
            "a",
            &EventKind::Exited {
                status: None,
                reason: String::new(),
                output: String::new(),
            },
        );
        m.turn_completed("a", "bash");
        let text = m.encode([]);
        assert!(
            text.contains("clibot_turns_total{cli=\"bash\"} 1"),
            "{text}"
        );
        assert!(
            !text.contains("clibot_turn_duration_seconds_count"),
            "{text}"
        );
    }

    #[test]
    fn delegations_are_counted_and_timed_until_the_request_is_typed() {
        let m = Metrics::new();
        let failed = Instant::now() - Duration::from_millis(1500);
        m.delegated("claude", "codex", "usage_limit", "api-codex", failed);
        m.delegated(
            "codex",
            "gemini",
            "crash",
            "api-codex-gemini",
            Instant::now(),
        );
        // Not typed yet: counted, not timed.
        let text = m.encode([]);
        assert!(
            text.contains(
                "clibot_delegations_total{from=\"claude\",to=\"codex\",reason=\"usage_limit\"} 1"
            ),
            "{text}"
        );
        assert!(!text.contains("clibot_delegation_seconds_count"), "{text}");
        let typed = EventKind::InputSent {
            text: "(Handoff: …)".into(),
            submitted: true,
            blob_id: String::new(),
            full_bytes: 0,
        };
        m.on_event("api-codex", &typed);
        // Typed again later: timed once.
        m.on_event("api-codex", &typed);
        // The other one's session went away before its request was typed.
        m.on_event("api-codex-gemini", &EventKind::Released);
        m.on_event("api-codex-gemini", &typed);
        let text = m.encode([]);
        assert!(
            text.contains("clibot_delegation_seconds_count{to=\"codex\"} 1"),
            "{text}"
        );
        assert!(
            !text.contains("clibot_delegation_seconds_count{to=\"gemini\"}"),
            "{text}"
        );
        let sum: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("clibot_delegation_seconds_sum{to=\"codex\"} "))
            .and_then(|v| v.parse().ok())
            .expect("a sum");
        assert!(sum >= 1.5, "{sum}");
    }

    #[test]
    fn resident_memory_is_read() {
        assert!(resident_bytes().is_some_and(|b| b > 0));
    }

    #[test]
    fn remote_listen_needs_the_explicit_key() {
        let local: SocketAddr = "127.0.0.1:9477".parse().expect("addr");
        let v6: SocketAddr = "[::1]:9477".parse().expect("addr");
        let any: SocketAddr = "0.0.0.0:9477".parse().expect("addr");
        assert!(check_listen(local, false).is_ok());
        assert!(check_listen(v6, false).is_ok());
        assert!(check_listen(any, false).is_err());
        assert!(check_listen(any, true).is_ok());
    }
}
