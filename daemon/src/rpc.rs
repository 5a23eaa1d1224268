//! The gRPC service: translates `clibot.v1` messages to core calls and core results back, and
//! maps every core error to a precise status code. No logic lives here.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clibot_proto::v1::{self, clibot_server::Clibot, event::Kind};
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;
use tonic::{Code, Request, Response, Status};

use crate::access::Decision;
use crate::caller::Caller;
use crate::core::{Actor, Daemon, ListFilter, SpawnRequest};
use crate::error::CoreError;
use crate::events::{Event, EventKind};
use crate::session::{SessionRecord, State};
use crate::tmux::MuxError;
use crate::transcript::{Entry as TranscriptEntry, Transcripts};

/// Largest `lines` a capture may ask for.
const MAX_CAPTURE_LINES: u32 = 100_000;
/// Events sent per batch while replaying.
const BATCH: usize = 256;

/// The `clibot.v1.Clibot` service.
#[derive(Clone)]
pub struct Service {
    daemon: Daemon,
    shutdown: CancellationToken,
    /// What the gateways last reported, per platform, and when: shown by Status, kept in
    /// memory only (a gateway reports again within seconds of a daemon restart).
    gateways: Arc<Mutex<BTreeMap<String, (v1::GatewayStatus, Instant)>>>,
    /// What each chat sent and was shown.
    transcripts: Arc<Transcripts>,
}

/// A gateway that has not reported for this long is shown as not running.
const GATEWAY_SILENT: Duration = Duration::from_secs(30);

impl Service {
    pub fn new(daemon: Daemon, shutdown: CancellationToken) -> Service {
        let settings = daemon.settings();
        let transcripts = Arc::new(Transcripts::new(
            &settings.state_dir,
            settings.config.daemon.transcript_max_bytes,
        ));
        Service {
            daemon,
            shutdown,
            gateways: Arc::default(),
            transcripts,
        }
    }

    /// The core, for the layer that tells who calls.
    pub(crate) fn daemon(&self) -> Daemon {
        self.daemon.clone()
    }

    /// The daemon's metrics registry, for the layer that times the calls.
    pub(crate) fn metrics(&self) -> Arc<crate::metrics::Metrics> {
        self.daemon.metrics().clone()
    }

    /// The gateways' last reports, with the chats bound per platform; a gateway silent for
    /// long is shown as such rather than as it last said.
    fn gateway_status(&self) -> Vec<v1::GatewayStatus> {
        let reports = self.gateways.lock().unwrap_or_else(|p| p.into_inner());
        reports
            .values()
            .map(|(g, at)| {
                let mut g = g.clone();
                g.chats_bound = self.daemon.chats().bindings(&g.platform, "", "").len() as u32;
                if at.elapsed() > GATEWAY_SILENT {
                    g.detail = format!(
                        "no report for {} s: the gateway is not running (last state: {})",
                        at.elapsed().as_secs(),
                        g.state
                    );
                    g.state = "stopped".into();
                }
                g
            })
            .collect()
    }

    /// A chat user must be allowed (and for `admin_only` actions, an admin); the local user
    /// always is. Refusals are audited.
    #[allow(clippy::result_large_err)]
    fn authorize(
        &self,
        actor: &Actor,
        session: &str,
        action: &str,
        admin_only: bool,
    ) -> Result<(), Status> {
        if actor.platform == "local" {
            return Ok(());
        }
        let refusal = match self.daemon.access().check(&actor.platform, &actor.user, "") {
            Decision::Allowed { admin } if admin || !admin_only => return Ok(()),
            Decision::Allowed { .. } => format!("only admins may {action}"),
            Decision::Denied { reason, .. } => reason,
        };
        self.daemon.audit(actor, session, action, Err(&refusal));
        Err(Status::permission_denied(refusal))
    }

    /// [`Self::authorize`], and the session must be the actor's (their own, shared with them,
    /// or any for admins and the local user). Refusals are audited.
    #[allow(clippy::result_large_err)]
    fn owned(
        &self,
        actor: &Actor,
        session: &str,
        action: &str,
        admin_only: bool,
    ) -> Result<(), Status> {
        self.authorize(actor, session, action, admin_only)?;
        let manage = matches!(action, "stop" | "restart" | "release");
        if let Err(e) = self.daemon.check_owner(actor, session, manage) {
            if matches!(e, CoreError::NotYours(_) | CoreError::NotOwner(_)) {
                self.daemon
                    .audit(actor, session, action, Err(&e.to_string()));
            }
            return Err(e.into());
        }
        Ok(())
    }

    /// Runs a changing action to its end, whoever hangs up, then audits it. tonic drops a
    /// handler's future when its client disconnects (a `clibotctl` killed by Ctrl-C, a gateway
    /// restarting mid-call); an action cut off halfway — a session left "being stopped", text
    /// typed without its Enter, a chat message typed but its key not recorded — is worse than
    /// one that finishes with nobody waiting for the answer.
    async fn detached<T, F, Fut>(
        &self,
        actor: &Actor,
        session: &str,
        action: &'static str,
        f: F,
    ) -> Result<T, Status>
    where
        F: FnOnce(Daemon) -> Fut,
        Fut: std::future::Future<Output = Result<T, CoreError>> + Send + 'static,
        T: Send + 'static,
    {
        let d = self.daemon.clone();
        let (actor, session) = (actor.clone(), session.to_string());
        let work = f(d.clone());
        let task = tokio::spawn(async move {
            let r = work.await;
            match &r {
                Ok(_) => d.audit(&actor, &session, action, Ok(())),
                Err(e) => d.audit(&actor, &session, action, Err(&e.to_string())),
            }
            r
        });
        match task.await {
            Ok(r) => r.map_err(Status::from),
            Err(e) => Err(Status::internal(format!(
                "the daemon failed while doing {action}: {e}; see its log"
            ))),
        }
    }
}

impl Service {
    /// Records what a chat user sent to `session` in their chat's transcript.
    fn record_in(&self, actor: &Actor, session: &str, text: &str) {
        if actor.is_local() || actor.chat.is_empty() {
            return;
        }
        self.transcripts.record(
            &actor.platform,
            &actor.chat,
            &TranscriptEntry {
                time_ms: crate::store::now_ms(),
                dir: "in".into(),
                user: actor.user.clone(),
                session: session.to_string(),
                text: text.to_string(),
            },
        );
    }

    /// Records in a chat's transcript what event `seq` showed it, when it is of a kind chats
    /// are shown and of the session the chat is bound to.
    fn record_out(&self, platform: &str, chat: &str, session: &str, seq: u64) {
        let Some(ev) = self
            .daemon
            .events()
            .read_after(seq.saturating_sub(1), 1)
            .events
            .into_iter()
            .next()
            .filter(|e| e.seq == seq && e.session == session)
        else {
            return;
        };
        let Some(text) = shown_text(&ev.kind) else {
            return;
        };
        self.transcripts.record(
            platform,
            chat,
            &TranscriptEntry {
                time_ms: ev.time_ms,
                dir: "out".into(),
                user: String::new(),
                session: ev.session,
                text,
            },
        );
    }
}

/// What a chat is shown of an event, for its transcript; `None` for kinds chats do not see.
fn shown_text(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::TurnCompleted { text, .. } => text.clone(),
        // Answered by a rule or the decider: the chat saw only the answer.
        EventKind::Waiting { prompt } if !prompt.auto.is_empty() => return None,
        EventKind::Waiting { prompt } => {
            let mut t = prompt.text.clone();
            for (i, o) in prompt.options.iter().enumerate() {
                t.push_str(&format!("\n{}. {o}", i + 1));
            }
            t
        }
        EventKind::PromptResolved { note, .. } if !note.is_empty() => note.clone(),
        EventKind::PromptResolved { answer, by, .. } => {
            if answer.is_empty() {
                format!("prompt resolved ({by})")
            } else {
                format!("answered: {answer}")
            }
        }
        EventKind::Exited { status, reason, .. } => match status {
            Some(s) => format!("exited with status {s}: {reason}"),
            None => format!("exited: {reason}"),
        },
        EventKind::Error { message, .. } => format!("error: {message}"),
        EventKind::Notice { text, .. } => text.clone(),
        _ => return None,
    })
}

/// From a chat, text is typed as it reads: a control character in it (an ESC sequence, a
/// Ctrl-C) would act on the CLI as a key press, which only `!!keys` may do. Line breaks and tabs
/// are text.
#[allow(clippy::result_large_err)]
fn no_control_chars(actor: &Actor, text: &str, what: &str) -> Result<(), Status> {
    let bad = text
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r'));
    match bad {
        Some(c) if !actor.is_local() => Err(Status::invalid_argument(format!(
            "{what} contains the control character U+{:04X}, which would act as a key press: remove it, or press keys with !!keys",
            c as u32
        ))),
        _ => Ok(()),
    }
}

/// Who a call is for. A process inside a managed session acts as that session's owner (the
/// machine's user for a session made on the machine), whatever chat metadata it sends; any
/// other caller is the chat user named in its metadata (the gateway), else the local user.
fn actor<T>(req: &Request<T>) -> Actor {
    if let Some(Caller::Session { name, owner }) = req.extensions().get::<Caller>() {
        let mut a = match owner.split_once(':') {
            Some((platform, user)) => Actor {
                platform: platform.to_string(),
                user: user.to_string(),
                chat: String::new(),
                via: String::new(),
            },
            None => Actor::local(),
        };
        a.via = format!("session:{name}");
        return a;
    }
    let get = |k: &str| {
        req.metadata()
            .get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    match (get("clibot-platform"), get("clibot-user")) {
        (Some(platform), Some(user)) if !platform.is_empty() && platform != "local" => Actor {
            platform,
            user,
            chat: get("clibot-chat").unwrap_or_default(),
            via: String::new(),
        },
        _ => Actor::local(),
    }
}

impl From<CoreError> for Status {
    fn from(e: CoreError) -> Status {
        let code = match &e {
            CoreError::InvalidName(_)
            | CoreError::DirNotFound(_)
            | CoreError::NotADirectory(_)
            | CoreError::DirNotAbsolute(_)
            | CoreError::TextTooLong { .. }
            | CoreError::InvalidArgument(_)
            | CoreError::UnknownKey(_) => Code::InvalidArgument,
            CoreError::UnknownCli { .. }
            | CoreError::NoSuchSession(_)
            | CoreError::NoSuchTmuxSession(..) => Code::NotFound,
            CoreError::DirNotAllowed { .. }
            | CoreError::SecretDir { .. }
            | CoreError::CliNotAllowed { .. }
            | CoreError::NotYours(_)
            | CoreError::NotOwner(_) => Code::PermissionDenied,
            CoreError::AlreadyExists(_)
            | CoreError::TmuxNameTaken(_)
            | CoreError::AlreadyManaged(..) => Code::AlreadyExists,
            CoreError::Exited(_)
            | CoreError::Stopping(_)
            | CoreError::NotWaiting(_)
            | CoreError::Delegation(_)
            | CoreError::NotThatPrompt { .. }
            | CoreError::UnknownPrompt(_)
            | CoreError::ProgramNotFound { .. }
            | CoreError::NoSandbox
            | CoreError::ProgramNotExecutable { .. }
            | CoreError::AlreadyResolved(..) => Code::FailedPrecondition,
            CoreError::HookDenied => Code::PermissionDenied,
            CoreError::TooManySessions { .. }
            | CoreError::TooManyForUser { .. }
            | CoreError::QueueFull { .. } => Code::ResourceExhausted,
            CoreError::Mux(MuxError::NoServer(_))
            | CoreError::Mux(MuxError::Spawn { .. })
            | CoreError::NoPort(_)
            | CoreError::NoRandom(_) => Code::Unavailable,
            CoreError::Mux(MuxError::NoSuchTarget(_)) => Code::FailedPrecondition,
            CoreError::Mux(MuxError::DuplicateSession(_)) => Code::AlreadyExists,
            CoreError::Mux(MuxError::Failed { .. }) | CoreError::State { .. } => Code::Internal,
        };
        Status::new(code, e.to_string())
    }
}

fn state_to_proto(s: State) -> v1::SessionState {
    match s {
        State::Starting => v1::SessionState::Starting,
        State::Idle => v1::SessionState::Idle,
        State::Working => v1::SessionState::Working,
        State::Waiting => v1::SessionState::Waiting,
        State::Exited => v1::SessionState::Exited,
        State::Error => v1::SessionState::Error,
    }
}

fn state_from_proto(s: v1::SessionState) -> Option<State> {
    Some(match s {
        v1::SessionState::Unspecified => return None,
        v1::SessionState::Starting => State::Starting,
        v1::SessionState::Idle => State::Idle,
        v1::SessionState::Working => State::Working,
        v1::SessionState::Waiting => State::Waiting,
        v1::SessionState::Exited => State::Exited,
        v1::SessionState::Error => State::Error,
    })
}

fn prompt_to_proto(p: crate::session::Prompt) -> v1::Prompt {
    v1::Prompt {
        id: p.id,
        kind: p.kind,
        text: p.text,
        options: p.options,
        subject: p.subject,
        source: p.source,
        warning: p.warning,
        auto: p.auto,
        subject_kind: p.subject_kind,
    }
}

fn session_to_proto(d: &Daemon, r: SessionRecord) -> v1::Session {
    v1::Session {
        attach_command: d.attach_command(&r),
        id: r.id,
        name: r.name,
        cli: r.cli,
        dir: r.dir.display().to_string(),
        state: state_to_proto(r.state) as i32,
        created_at_ms: r.created_at_ms,
        last_activity_ms: r.last_activity_ms,
        tmux_session: r.tmux_session,
        tmux_session_id: r.tmux_id,
        pid: r.pid,
        exit_status: r.exit_status,
        adopted: r.adopted,
        args: r.args,
        prompt: r.prompt.map(prompt_to_proto),
        stalled: r.stalled,
        queued_inputs: r.queue.len() as u32,
        error: r.error.unwrap_or_default(),
        owner: r.owner,
        shared_with: r.shared_with,
        exit_reason: r.exit_reason,
        delegate: r.delegate,
        delegated_from: r.delegated_from,
        delegated_to: r.delegated_to,
    }
}

/// Converts a logged event; `None` for kinds this build does not know.
pub fn event_to_proto(e: Event) -> Option<v1::Event> {
    let kind = match e.kind {
        EventKind::DaemonStarted {
            pid,
            version,
            readopted,
        } => Kind::DaemonStarted(v1::DaemonStarted {
            pid,
            version,
            readopted,
        }),
        EventKind::Spawned { cli, dir, args } => {
            Kind::Spawned(v1::SessionSpawned { cli, dir, args })
        }
        EventKind::Adopted { cli, tmux_session } => {
            Kind::Adopted(v1::SessionAdopted { cli, tmux_session })
        }
        EventKind::Released => Kind::Released(v1::SessionReleased {}),
        EventKind::InputSent {
            text,
            submitted,
            blob_id,
            full_bytes,
        } => Kind::InputSent(v1::InputSent {
            text,
            submitted,
            blob_id,
            full_bytes,
        }),
        EventKind::KeysSent { keys } => Kind::KeysSent(v1::KeysSent { keys }),
        EventKind::StateChanged { from, to, reason } => Kind::StateChanged(v1::StateChanged {
            from: state_to_proto(from) as i32,
            to: state_to_proto(to) as i32,
            reason,
        }),
        EventKind::Exited {
            status,
            reason,
            output,
        } => Kind::Exited(v1::SessionExited {
            status,
            reason,
            output,
        }),
        EventKind::Stopped { forced } => Kind::Stopped(v1::SessionStopped { forced }),
        EventKind::Error { message, kind } => Kind::Error(v1::Error { message, kind }),
        EventKind::TurnCompleted {
            text,
            source,
            blob_id,
            full_bytes,
        } => Kind::TurnCompleted(v1::TurnCompleted {
            text,
            source,
            blob_id,
            full_bytes,
        }),
        EventKind::Waiting { prompt } => Kind::Waiting(v1::Waiting {
            prompt: Some(prompt_to_proto(prompt)),
        }),
        EventKind::PromptResolved {
            prompt_id,
            by,
            answer,
            actor,
            note,
        } => Kind::PromptResolved(v1::PromptResolved {
            prompt_id,
            by,
            answer,
            actor,
            note,
        }),
        EventKind::Notice { text, kind } => Kind::Notice(v1::Notice { text, kind }),
        EventKind::Delegated {
            to_session,
            to_cli,
            reason,
            detail,
            attempt,
        } => Kind::Delegated(v1::Delegated {
            to_session,
            to_cli,
            reason,
            detail,
            attempt,
        }),
        EventKind::InputQueued { text, position } => {
            Kind::InputQueued(v1::InputQueued { text, position })
        }
        EventKind::Stalled { silent_ms } => Kind::Stalled(v1::Stalled { silent_ms }),
        EventKind::ChatSuspended {
            platform,
            chat,
            reason,
        } => Kind::ChatSuspended(v1::ChatSuspended {
            platform,
            chat,
            reason,
        }),
        EventKind::Unknown => return None,
    };
    Some(v1::Event {
        seq: e.seq,
        time_ms: e.time_ms,
        session: e.session,
        session_id: e.session_id,
        kind: Some(kind),
    })
}

type EventStream = Pin<Box<dyn Stream<Item = Result<v1::Event, Status>> + Send + 'static>>;
type BlobStream = Pin<Box<dyn Stream<Item = Result<v1::BlobChunk, Status>> + Send + 'static>>;

/// A blob that cannot be read, as the status a client can act on.
fn blob_status(e: crate::blobs::BlobError) -> Status {
    use crate::blobs::BlobError as E;
    match e {
        E::NotFound(_) => Status::not_found(e.to_string()),
        E::PastEnd { .. } => Status::out_of_range(e.to_string()),
        E::Io { .. } => Status::internal(e.to_string()),
    }
}

#[tonic::async_trait]
impl Clibot for Service {
    async fn status(
        &self,
        _: Request<v1::StatusRequest>,
    ) -> Result<Response<v1::StatusResponse>, Status> {
        let s = self.daemon.status().await;
        Ok(Response::new(v1::StatusResponse {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            uptime_ms: s.uptime.as_millis() as u64,
            socket: s.socket.display().to_string(),
            state_dir: s.state_dir.display().to_string(),
            tmux_args: s.tmux_args,
            tmux_reachable: s.tmux_version.is_some(),
            tmux_version: s.tmux_version.unwrap_or_default(),
            sessions: s.sessions as u32,
            last_seq: s.last_seq,
            clis: s.clis,
            config_file: s
                .config_file
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            warnings: s.warnings,
            gateways: self.gateway_status(),
        }))
    }

    async fn report_gateway(
        &self,
        req: Request<v1::ReportGatewayRequest>,
    ) -> Result<Response<v1::ReportGatewayResponse>, Status> {
        let r = req.into_inner();
        let mut reports = self.gateways.lock().unwrap_or_else(|p| p.into_inner());
        for mut p in r.platforms {
            if p.platform.is_empty() || p.platform.len() > 32 {
                return Err(Status::invalid_argument(
                    "a platform name of 1 to 32 characters",
                ));
            }
            p.reported_ms = crate::store::now_ms();
            self.daemon
                .metrics()
                .gateway_report(&p.platform, p.deliveries, p.deliveries_failed);
            reports.insert(p.platform.clone(), (p, Instant::now()));
        }
        Ok(Response::new(v1::ReportGatewayResponse {}))
    }

    async fn list_sessions(
        &self,
        req: Request<v1::ListSessionsRequest>,
    ) -> Result<Response<v1::ListSessionsResponse>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        let state = v1::SessionState::try_from(r.state)
            .map_err(|_| Status::invalid_argument(format!("unknown session state {}", r.state)))?;
        let filter = ListFilter {
            cli: r.cli,
            dir: (!r.dir.is_empty()).then(|| std::path::PathBuf::from(&r.dir)),
            state: state_from_proto(state),
        };
        let sessions = self
            .daemon
            .list(&filter)
            .into_iter()
            .filter(|s| self.daemon.may_use(&actor, s))
            .map(|s| session_to_proto(&self.daemon, s))
            .collect();
        Ok(Response::new(v1::ListSessionsResponse { sessions }))
    }

    async fn get_session(
        &self,
        req: Request<v1::GetSessionRequest>,
    ) -> Result<Response<v1::Session>, Status> {
        let actor = actor(&req);
        let name = req.into_inner().name;
        self.owned(&actor, &name, "status", false)?;
        let rec = self.daemon.get(&name)?;
        Ok(Response::new(session_to_proto(&self.daemon, rec)))
    }

    async fn spawn_session(
        &self,
        req: Request<v1::SpawnSessionRequest>,
    ) -> Result<Response<v1::Session>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        let name = r.name.clone();
        // Any allowed chat user may start a session; it is theirs (see `owned`).
        self.authorize(&actor, &name, "spawn", false)?;
        let req = SpawnRequest {
            name: r.name,
            cli: r.cli,
            dir: r.dir,
            args: r.args,
            env: r.env.into_iter().collect(),
            owner: if actor.is_local() {
                String::new()
            } else {
                actor.key()
            },
            delegate: r.delegate,
            delegated_from: Vec::new(),
        };
        let rec = self
            .detached(&actor, &name, "spawn", move |d| async move {
                d.spawn(req).await
            })
            .await?;
        Ok(Response::new(session_to_proto(&self.daemon, rec)))
    }

    async fn send_input(
        &self,
        req: Request<v1::SendInputRequest>,
    ) -> Result<Response<v1::SendInputResponse>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        self.owned(&actor, &r.session, "send", false)?;
        no_control_chars(&actor, &r.text, "text")?;
        let session = r.session.clone();
        let text = r.text.clone();
        let (seq, queued) = self
            .detached(&actor, &session, "send", move |d| async move {
                d.send_input_once(&r.session, &r.text, r.submit, &r.dedupe_key)
                    .await
            })
            .await?;
        self.record_in(&actor, &session, &text);
        Ok(Response::new(v1::SendInputResponse { seq, queued }))
    }

    async fn send_keys(
        &self,
        req: Request<v1::SendKeysRequest>,
    ) -> Result<Response<v1::SendKeysResponse>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        // Control keys can interrupt or quit a CLI: from a chat, admins, and owners in their own
        // sessions; never someone it is only shared with.
        self.owned(&actor, &r.session, "keys", false)?;
        if !actor.is_local()
            && !self.daemon.is_admin(&actor)
            && self.daemon.get(&r.session)?.owner != actor.key()
        {
            let why = "control keys are for admins and the session's owner";
            self.daemon.audit(&actor, &r.session, "keys", Err(why));
            return Err(Status::permission_denied(why));
        }
        let session = r.session.clone();
        let seq = self
            .detached(&actor, &session, "keys", move |d| async move {
                d.send_keys(&r.session, &r.keys).await
            })
            .await?;
        Ok(Response::new(v1::SendKeysResponse { seq }))
    }

    async fn capture(
        &self,
        req: Request<v1::CaptureRequest>,
    ) -> Result<Response<v1::CaptureResponse>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        self.owned(&actor, &r.session, "screen", false)?;
        if r.lines > MAX_CAPTURE_LINES {
            return Err(Status::invalid_argument(format!(
                "lines is {}; at most {MAX_CAPTURE_LINES} lines can be captured at once",
                r.lines
            )));
        }
        let text = self.daemon.capture(&r.session, r.lines, r.escapes).await;
        if !actor.is_local() {
            // What leaves the machine for a chat is on record.
            let res = text.as_ref().map(|_| ()).map_err(|e| e.to_string());
            self.daemon.audit(
                &actor,
                &r.session,
                "screen",
                res.as_ref().map(|_| ()).map_err(String::as_str),
            );
        }
        let text = crate::secrets::scrub(&text?, &self.daemon.own_secrets());
        Ok(Response::new(v1::CaptureResponse { text }))
    }

    async fn stop_session(
        &self,
        req: Request<v1::StopSessionRequest>,
    ) -> Result<Response<v1::StopSessionResponse>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        self.owned(&actor, &r.session, "stop", false)?;
        let timeout = (r.timeout_ms > 0).then(|| Duration::from_millis(r.timeout_ms.into()));
        let session = r.session.clone();
        let out = self
            .detached(&actor, &session, "stop", move |d| async move {
                d.stop(&r.session, r.force, timeout).await
            })
            .await?;
        Ok(Response::new(v1::StopSessionResponse {
            forced: out.forced,
            exit_status: out.exit_status,
        }))
    }

    async fn adopt_session(
        &self,
        req: Request<v1::AdoptSessionRequest>,
    ) -> Result<Response<v1::Session>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        self.authorize(&actor, &r.tmux_session, "adopt", true)?;
        let tmux_session = r.tmux_session.clone();
        let rec = self
            .detached(&actor, &tmux_session, "adopt", move |d| async move {
                d.adopt(&r.tmux_session, &r.cli, &r.name).await
            })
            .await?;
        Ok(Response::new(session_to_proto(&self.daemon, rec)))
    }

    async fn release_session(
        &self,
        req: Request<v1::ReleaseSessionRequest>,
    ) -> Result<Response<v1::ReleaseSessionResponse>, Status> {
        let actor = actor(&req);
        let session = req.into_inner().session;
        self.owned(&actor, &session, "release", true)?;
        let name = session.clone();
        self.detached(&actor, &session, "release", move |d| async move {
            d.release(&name).await
        })
        .await?;
        Ok(Response::new(v1::ReleaseSessionResponse {}))
    }

    async fn restart_session(
        &self,
        req: Request<v1::RestartSessionRequest>,
    ) -> Result<Response<v1::Session>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        self.owned(&actor, &r.session, "restart", false)?;
        let session = r.session.clone();
        let rec = self
            .detached(&actor, &session, "restart", move |d| async move {
                d.restart(&r.session, !r.fresh).await
            })
            .await?;
        Ok(Response::new(session_to_proto(&self.daemon, rec)))
    }

    async fn answer_prompt(
        &self,
        req: Request<v1::AnswerPromptRequest>,
    ) -> Result<Response<v1::AnswerPromptResponse>, Status> {
        let actor = actor(&req);
        let mut r = req.into_inner();
        if r.session.is_empty() && !r.prompt_id.is_empty() {
            // A button names its prompt only: whose session it is decides who may press it.
            r.session = self.daemon.session_of_prompt(&r.prompt_id)?;
        }
        self.owned(&actor, &r.session, "answer", false)?;
        no_control_chars(&actor, &r.answer, "an answer")?;
        // From a chat, an answer must name the prompt it answers: the one whose buttons were
        // pressed, or the one last shown in that chat. "Whatever waits now" could be a newer,
        // different prompt than the one the user read.
        if actor.platform != "local" && r.prompt_id.is_empty() {
            return Err(Status::invalid_argument(
                "this answer does not say which prompt it answers: use the prompt's buttons",
            ));
        }
        let session = r.session.clone();
        let answer = r.answer.clone();
        let by = actor.key();
        let (prompt_id, via) = self
            .detached(&actor, &session, "answer", move |d| async move {
                d.answer_prompt(&r.session, &r.prompt_id, &r.answer, &by)
                    .await
            })
            .await?;
        self.record_in(&actor, &session, &answer);
        Ok(Response::new(v1::AnswerPromptResponse { prompt_id, via }))
    }

    async fn check_access(
        &self,
        req: Request<v1::CheckAccessRequest>,
    ) -> Result<Response<v1::CheckAccessResponse>, Status> {
        let r = req.into_inner();
        if r.platform.is_empty() || r.user.is_empty() {
            return Err(Status::invalid_argument("platform and user are required"));
        }
        let actor = Actor {
            platform: r.platform,
            user: r.user,
            chat: r.chat,
            via: String::new(),
        };
        if r.group {
            // Groups are off unless named; and in a group, where everyone reads along, a
            // stranger gets no pairing code and no reply: pairing happens in a direct message.
            let access = self.daemon.access();
            let refusal = if !access.group_enabled(&actor.platform, &actor.chat) {
                let first = access.first_refusal_in_group(&actor.platform, &actor.chat);
                self.daemon
                    .audit(&actor, "", "message", Err("group not enabled"));
                Some(if first {
                    format!(
                        "clibot is not enabled in this group: its owner can add the chat id {} to `groups` under [access.{}] in the config",
                        actor.chat, actor.platform
                    )
                } else {
                    String::new()
                })
            } else if access.known(&actor.platform, &actor.user).is_none() {
                self.daemon
                    .audit(&actor, "", "message", Err("not paired (in a group)"));
                Some(String::new())
            } else {
                None
            };
            if let Some(message) = refusal {
                return Ok(Response::new(v1::CheckAccessResponse {
                    allowed: false,
                    admin: false,
                    message,
                    pairing_code: String::new(),
                }));
            }
        }
        Ok(Response::new(
            match self.daemon.check_access(&actor, &r.user_name) {
                Decision::Allowed { admin } => v1::CheckAccessResponse {
                    allowed: true,
                    admin,
                    message: String::new(),
                    pairing_code: String::new(),
                },
                Decision::Denied { reason, code } => v1::CheckAccessResponse {
                    allowed: false,
                    admin: false,
                    message: reason,
                    pairing_code: code.unwrap_or_default(),
                },
            },
        ))
    }

    async fn list_pairings(
        &self,
        _: Request<v1::ListPairingsRequest>,
    ) -> Result<Response<v1::ListPairingsResponse>, Status> {
        let a = self.daemon.access();
        let pending = a
            .pending()
            .into_iter()
            .map(|p| v1::Pairing {
                platform: p.platform,
                user: p.user,
                name: p.name,
                code: p.code,
                created_at_ms: p.created_ms,
            })
            .collect();
        let approved = a
            .approved()
            .into_iter()
            .map(|(platform, user, name)| v1::Pairing {
                platform,
                user,
                name,
                ..Default::default()
            })
            .collect();
        Ok(Response::new(v1::ListPairingsResponse {
            pending,
            approved,
        }))
    }

    async fn approve_pairing(
        &self,
        req: Request<v1::ApprovePairingRequest>,
    ) -> Result<Response<v1::ApprovePairingResponse>, Status> {
        let actor = actor(&req);
        if actor.platform != "local" {
            return Err(Status::permission_denied(
                "pairings are approved on the machine, with `clibotctl pairing approve`",
            ));
        }
        let code = req.into_inner().code;
        let r = self
            .daemon
            .access()
            .approve(&code)
            .map_err(|e| Status::not_found(e.to_string()));
        self.daemon.audit(
            &actor,
            "",
            "pairing approve",
            r.as_ref().map(|_| ()).map_err(|e| e.message()),
        );
        let (platform, user) = r?;
        Ok(Response::new(v1::ApprovePairingResponse { platform, user }))
    }

    async fn ack_events(
        &self,
        req: Request<v1::AckEventsRequest>,
    ) -> Result<Response<v1::AckEventsResponse>, Status> {
        let r = req.into_inner();
        let last = self.daemon.events().last_seq();
        if r.seq > last {
            return Err(Status::out_of_range(format!(
                "seq {} is beyond the newest event {last}",
                r.seq
            )));
        }
        // An event is on disk before any cursor passes it: a power loss must not leave a chat
        // told about events the log no longer has (their numbers would be given out again).
        self.daemon.events().sync_through(r.seq).map_err(|e| {
            Status::unavailable(format!(
                "cannot sync the event log to disk ({e}); the acknowledgement was not recorded: check the disk holding clibotd's state directory, then retry"
            ))
        })?;
        if !r.chat.is_empty() || !r.platform.is_empty() {
            if r.chat.is_empty() || r.platform.is_empty() {
                return Err(Status::invalid_argument(
                    "a chat's ack needs both platform and chat",
                ));
            }
            let ack = crate::chats::ChatAck {
                seq: r.seq,
                parts: r.parts,
                prompt: &r.prompt,
                message: &r.message,
            };
            let before = self
                .daemon
                .chats()
                .bindings(&r.platform, &r.chat, "")
                .into_iter()
                .find(|b| b.platform == r.platform && b.chat == r.chat);
            let cursor = self
                .daemon
                .chats()
                .ack_chat(&r.platform, &r.chat, &ack)
                .ok_or_else(|| {
                    Status::not_found(format!("{} chat {} is not bound", r.platform, r.chat))
                })?;
            // Fully delivered, and for the first time: what the chat was shown goes in its
            // transcript.
            if r.parts == 0
                && let Some(b) = before
                && b.cursor < r.seq
                && cursor >= r.seq
            {
                self.record_out(&r.platform, &r.chat, &b.session, r.seq);
            }
            return Ok(Response::new(v1::AckEventsResponse { cursor }));
        }
        if r.consumer.is_empty() {
            return Err(Status::invalid_argument("consumer is required"));
        }
        Ok(Response::new(v1::AckEventsResponse {
            cursor: self.daemon.chats().ack(&r.consumer, r.seq),
        }))
    }

    async fn get_cursor(
        &self,
        req: Request<v1::GetCursorRequest>,
    ) -> Result<Response<v1::GetCursorResponse>, Status> {
        Ok(Response::new(v1::GetCursorResponse {
            cursor: self.daemon.chats().cursor(&req.into_inner().consumer),
        }))
    }

    async fn set_binding(
        &self,
        req: Request<v1::SetBindingRequest>,
    ) -> Result<Response<v1::SetBindingResponse>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        if r.platform.is_empty() || r.chat.is_empty() {
            return Err(Status::invalid_argument("platform and chat are required"));
        }
        if !r.session.is_empty() {
            self.owned(&actor, &r.session, "bind", false)?;
            if r.group && !self.daemon.access().group_enabled(&r.platform, &r.chat) {
                let why = format!(
                    "clibot is not enabled in this group: add the chat id {} to `groups` under [access.{}]",
                    r.chat, r.platform
                );
                self.daemon.audit(&actor, &r.session, "bind", Err(&why));
                return Err(Status::permission_denied(why));
            }
        }
        if r.group
            && !self
                .daemon
                .may_bind_group(&actor, &r.platform, &r.chat, &r.session)
        {
            let why = "only an admin or the session's owner may bind this group (it stays bound as it is)";
            self.daemon.audit(&actor, &r.session, "bind", Err(why));
            return Err(Status::permission_denied(why));
        }
        let last = self.daemon.events().last_seq();
        self.daemon.chats().bind(
            &r.platform,
            &r.chat,
            &r.session,
            r.group,
            last,
            &actor.key(),
        );
        self.daemon.audit(&actor, &r.session, "bind", Ok(()));
        Ok(Response::new(v1::SetBindingResponse {}))
    }

    async fn list_bindings(
        &self,
        req: Request<v1::ListBindingsRequest>,
    ) -> Result<Response<v1::ListBindingsResponse>, Status> {
        let r = req.into_inner();
        // Delivery stops at once for a chat whose binder lost the session.
        self.daemon.enforce_binders();
        let access = self.daemon.access();
        let bindings = self
            .daemon
            .chats()
            .bindings(&r.platform, &r.chat, &r.session)
            .into_iter()
            .map(|b| {
                // A group taken out of the config is suspended at once, whatever was bound.
                let broken = b.broken.clone().or_else(|| {
                    (b.group && !access.group_enabled(&b.platform, &b.chat))
                        .then(|| "the group is not enabled in the config".to_string())
                }).or_else(|| {
                    self.daemon.held(&b).map(|crate::bind_rights::Hold::NoBinder| {
                        "bound before clibot recorded who binds chats: the next message of an allowed user here binds it again".to_string()
                    })
                });
                v1::Binding {
                    platform: b.platform,
                    chat: b.chat,
                    session: b.session,
                    cursor: b.cursor,
                    parts: b.parts,
                    broken: broken.is_some(),
                    broken_reason: broken.unwrap_or_default(),
                    group: b.group,
                    shown_prompt: b.shown_prompt,
                    shown_message: b.shown_message,
                    until_seq: b.until_seq,
                }
            })
            .collect();
        Ok(Response::new(v1::ListBindingsResponse { bindings }))
    }

    async fn mark_chat_broken(
        &self,
        req: Request<v1::MarkChatBrokenRequest>,
    ) -> Result<Response<v1::MarkChatBrokenResponse>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        if r.platform.is_empty() || r.chat.is_empty() {
            return Err(Status::invalid_argument("platform and chat are required"));
        }
        if let Some(session) = self
            .daemon
            .chats()
            .mark_broken(&r.platform, &r.chat, &r.reason)
        {
            self.daemon
                .chat_suspended(&session, &r.platform, &r.chat, &r.reason);
            self.daemon.audit(&actor, &session, "suspend chat", Ok(()));
        }
        Ok(Response::new(v1::MarkChatBrokenResponse {}))
    }

    async fn share_session(
        &self,
        req: Request<v1::ShareSessionRequest>,
    ) -> Result<Response<v1::ShareSessionResponse>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        let res = self.daemon.share(&actor, &r.session, &r.user, r.revoke);
        let outcome = res.as_ref().map(|_| ()).map_err(|e| e.to_string());
        self.daemon.audit(
            &actor,
            &r.session,
            if r.revoke { "unshare" } else { "share" },
            outcome.as_ref().map(|_| ()).map_err(String::as_str),
        );
        Ok(Response::new(v1::ShareSessionResponse {
            shared_with: res?,
        }))
    }

    async fn ack_ingress(
        &self,
        req: Request<v1::AckIngressRequest>,
    ) -> Result<Response<v1::AckIngressResponse>, Status> {
        let r = req.into_inner();
        if r.platform.is_empty() || r.chat.is_empty() || r.id.is_empty() {
            return Err(Status::invalid_argument(
                "platform, chat and id are required",
            ));
        }
        // Strangers cost no durable state: only a sender who may use clibot makes a chat known.
        let may_create =
            !r.user.is_empty() && self.daemon.access().known(&r.platform, &r.user).is_some();
        self.daemon
            .chats()
            .ack_ingress(&r.platform, &r.chat, &r.id, may_create);
        Ok(Response::new(v1::AckIngressResponse {}))
    }

    async fn list_ingress(
        &self,
        req: Request<v1::ListIngressRequest>,
    ) -> Result<Response<v1::ListIngressResponse>, Status> {
        let cursors = self
            .daemon
            .chats()
            .ingress(&req.into_inner().platform)
            .into_iter()
            .map(|(chat, id)| v1::IngressCursor { chat, id })
            .collect();
        Ok(Response::new(v1::ListIngressResponse { cursors }))
    }

    async fn revoke_access(
        &self,
        req: Request<v1::RevokeAccessRequest>,
    ) -> Result<Response<v1::RevokeAccessResponse>, Status> {
        let actor = actor(&req);
        if actor.platform != "local" {
            return Err(Status::permission_denied(
                "access is revoked on the machine, with `clibotctl pairing revoke`",
            ));
        }
        let r = req.into_inner();
        let res = self
            .daemon
            .access()
            .revoke(&r.platform, &r.user)
            .map_err(|e| Status::not_found(e.to_string()));
        self.daemon.audit(
            &actor,
            "",
            "pairing revoke",
            res.as_ref().map(|_| ()).map_err(|e| e.message()),
        );
        res?;
        Ok(Response::new(v1::RevokeAccessResponse {}))
    }

    async fn get_last_reply(
        &self,
        req: Request<v1::GetLastReplyRequest>,
    ) -> Result<Response<v1::GetLastReplyResponse>, Status> {
        let actor = actor(&req);
        let session = req.into_inner().session;
        self.owned(&actor, &session, "last", false)?;
        if !actor.is_local() {
            self.daemon.audit(&actor, &session, "last", Ok(()));
        }
        let last = self.daemon.last_reply(&session)?;
        let text = crate::secrets::scrub(&last.text, &self.daemon.own_secrets());
        Ok(Response::new(v1::GetLastReplyResponse {
            text,
            seq: last.seq,
            blob_id: last.blob_id,
            full_bytes: last.full_bytes,
        }))
    }

    type ReadBlobStream = BlobStream;

    async fn read_blob(
        &self,
        req: Request<v1::ReadBlobRequest>,
    ) -> Result<Response<BlobStream>, Status> {
        let r = req.into_inner();
        let blobs = self.daemon.events().blobs().clone();
        // The first chunk is read here, so that a wrong id is an error of the call itself.
        let (first, total) = blobs.read_chunk(&r.blob_id, r.offset).map_err(blob_status)?;
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<v1::BlobChunk, Status>>(2);
        tokio::spawn(async move {
            let mut offset = r.offset;
            let mut data = first;
            loop {
                let n = data.len() as u64;
                let chunk = v1::BlobChunk {
                    data,
                    offset,
                    total,
                };
                if tx.send(Ok(chunk)).await.is_err() {
                    return;
                }
                offset += n;
                if n == 0 || offset >= total {
                    return;
                }
                let blobs = blobs.clone();
                let id = r.blob_id.clone();
                let next = tokio::task::spawn_blocking(move || blobs.read_chunk(&id, offset))
                    .await
                    .map_err(|e| Status::internal(format!("reading blob: {e}")))
                    .and_then(|r| r.map_err(blob_status));
                match next {
                    Ok((d, _)) => data = d,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn claim_once(
        &self,
        req: Request<v1::ClaimOnceRequest>,
    ) -> Result<Response<v1::ClaimOnceResponse>, Status> {
        let key = req.into_inner().key;
        if key.is_empty() || key.len() > 512 || key.chars().any(char::is_control) {
            return Err(Status::invalid_argument(
                "ClaimOnce needs a key of 1 to 512 printable characters",
            ));
        }
        let fresh = self.daemon.claim_once(&key).await;
        Ok(Response::new(v1::ClaimOnceResponse { fresh }))
    }

    async fn hook(
        &self,
        req: Request<v1::HookRequest>,
    ) -> Result<Response<v1::HookResponse>, Status> {
        if let Some(Caller::HookSocket { id }) = req.extensions().get::<Caller>()
            && *id != req.get_ref().session_id
        {
            return Err(Status::permission_denied(
                "this socket serves only its own session's hook calls",
            ));
        }
        let r = req.into_inner();
        let output = self
            .daemon
            .hook(&r.session_id, &r.token, &r.event, &r.payload)
            .await?;
        Ok(Response::new(v1::HookResponse { output }))
    }

    async fn reload(
        &self,
        req: Request<v1::ReloadRequest>,
    ) -> Result<Response<v1::ReloadResponse>, Status> {
        let actor = actor(&req);
        if !actor.is_local() {
            let why = "only the machine's user may reload the config";
            self.daemon.audit(&actor, "", "reload", Err(why));
            return Err(Status::permission_denied(why));
        }
        let d = self.daemon.clone();
        let r = tokio::task::spawn_blocking(move || d.reload_from_file())
            .await
            .map_err(|e| {
                Status::internal(format!("the reload failed: {e}; see the daemon's log"))
            })?;
        match &r {
            Ok(_) => self.daemon.audit(&actor, "", "reload", Ok(())),
            Err(e) => self.daemon.audit(&actor, "", "reload", Err(&e.to_string())),
        }
        let r = r?;
        Ok(Response::new(v1::ReloadResponse {
            reloaded: r.reloaded,
            needs_restart: r.needs_restart,
        }))
    }

    async fn list_rules(
        &self,
        _req: Request<v1::ListRulesRequest>,
    ) -> Result<Response<v1::ListRulesResponse>, Status> {
        // The rules are the machine owner's configuration: any allowed user may read them, as
        // they decide what gets approved in that user's sessions.
        let a = self.daemon.automation();
        let cfg = &self.daemon.settings().config;
        Ok(Response::new(v1::ListRulesResponse {
            rules: a
                .rules()
                .into_iter()
                .enumerate()
                .map(|(i, (r, fired))| v1::Rule {
                    index: i as u32 + 1,
                    cli: r.cli.unwrap_or_default(),
                    session: r.session.unwrap_or_default(),
                    kind: r.kind.unwrap_or_default(),
                    subject: r.subject.unwrap_or_default(),
                    command: r.command.unwrap_or_default(),
                    action: r.action.as_str().into(),
                    fired,
                })
                .collect(),
            guard: a.guard_list(),
            decider: a
                .decider
                .as_ref()
                .map(|d| d.command.clone())
                .unwrap_or_default(),
            decider_timeout_ms: a.decider.as_ref().map_or(0, |d| d.timeout_ms),
            decider_answered: a
                .decider_answered
                .load(std::sync::atomic::Ordering::Relaxed),
            decider_asked: a.decider_asked.load(std::sync::atomic::Ordering::Relaxed),
            delegation_on: cfg.delegation.on.clone(),
            delegation_to: cfg.delegation.to.clone(),
            delegation_max_attempts: cfg.delegation.max_attempts,
            delegation_default: cfg.delegation.default,
        }))
    }

    async fn delegate(
        &self,
        req: Request<v1::DelegateRequest>,
    ) -> Result<Response<v1::Session>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        self.owned(&actor, &r.session, "delegate", false)?;
        let session = r.session.clone();
        let who = actor.key();
        let rec = self
            .detached(&actor, &session, "delegate", move |d| async move {
                let to = Some(r.cli.as_str()).filter(|c| !c.is_empty());
                d.delegate(&r.session, to, "manual", &who).await
            })
            .await?;
        Ok(Response::new(session_to_proto(&self.daemon, rec)))
    }

    async fn get_metrics(
        &self,
        req: Request<v1::GetMetricsRequest>,
    ) -> Result<Response<v1::GetMetricsResponse>, Status> {
        if !actor(&req).is_local() {
            return Err(Status::permission_denied(
                "the metrics are for the local user only",
            ));
        }
        Ok(Response::new(v1::GetMetricsResponse {
            text: self.daemon.metrics_text(),
        }))
    }

    async fn get_transcript(
        &self,
        req: Request<v1::GetTranscriptRequest>,
    ) -> Result<Response<v1::GetTranscriptResponse>, Status> {
        let actor = actor(&req);
        let r = req.into_inner();
        if r.platform.is_empty() || r.chat.is_empty() {
            return Err(Status::invalid_argument("platform and chat are required"));
        }
        if !actor.is_local() {
            self.authorize(&actor, "", "history", false)?;
            if actor.platform != r.platform || actor.chat != r.chat {
                let why = "a chat may read only its own transcript";
                self.daemon.audit(&actor, "", "history", Err(why));
                return Err(Status::permission_denied(why));
            }
            self.daemon.audit(&actor, "", "history", Ok(()));
        }
        let entries = self
            .transcripts
            .read(&r.platform, &r.chat, r.since_ms, r.limit as usize)
            .into_iter()
            .map(|e| v1::TranscriptEntry {
                time_ms: e.time_ms,
                dir: e.dir,
                user: e.user,
                session: e.session,
                text: e.text,
            })
            .collect();
        Ok(Response::new(v1::GetTranscriptResponse { entries }))
    }

    type WatchEventsStream = EventStream;

    async fn watch_events(
        &self,
        req: Request<v1::WatchEventsRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let r = req.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<v1::Event, Status>>(BATCH);
        let daemon = self.daemon.clone();
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let log = daemon.events();
            // Subscribe before reading, so nothing appended in between is missed.
            let mut changed = log.subscribe();
            let mut cursor = r.since.unwrap_or_else(|| log.last_seq());
            loop {
                let read = log.read_after(cursor, BATCH);
                if let Some((first, last)) = read.dropped {
                    let gap = v1::Event {
                        seq: 0,
                        time_ms: crate::store::now_ms(),
                        session: String::new(),
                        session_id: String::new(),
                        kind: Some(Kind::EventsDropped(v1::EventsDropped {
                            first_seq: first,
                            last_seq: last,
                        })),
                    };
                    if tx.send(Ok(gap)).await.is_err() {
                        return;
                    }
                }
                let n = read.events.len();
                for ev in read.events {
                    cursor = ev.seq;
                    if !r.sessions.is_empty() && !r.sessions.contains(&ev.session) {
                        continue;
                    }
                    if let Some(pe) = event_to_proto(ev)
                        && tx.send(Ok(pe)).await.is_err()
                    {
                        return;
                    }
                }
                if n == BATCH {
                    continue;
                }
                if !r.follow {
                    return;
                }
                tokio::select! {
                    res = changed.changed() => if res.is_err() { return },
                    _ = tx.closed() => return,
                    _ = shutdown.cancelled() => {
                        let _ = tx.send(Err(Status::unavailable("clibotd is shutting down; reconnect and resume with since"))).await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}
