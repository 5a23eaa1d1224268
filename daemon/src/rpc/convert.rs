//! Between the core's types and `clibot.v1`'s: states, prompts, sessions, events, and core
//! errors as precise status codes.

use super::*;

/// What a chat is shown of an event, for its transcript; `None` for kinds chats do not see.
pub(super) fn shown_text(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::TurnCompleted { text, .. } => text.clone(),
        // Answered by a rule or the decider: the chat saw only the answer.
        EventKind::Waiting { prompt } if !prompt.auto.is_empty() => return None,
        EventKind::Waiting { prompt } => {
            let mut t = if prompt.context.is_empty() {
                prompt.text.clone()
            } else {
                format!("{}\n{}", prompt.context, prompt.text)
            };
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
        EventKind::PromptReminded { prompt, .. } if prompt.auto.is_empty() => {
            format!("still waiting: {}", prompt.text)
        }
        EventKind::PromptEscalated { prompt, .. } => {
            format!("nobody has answered: {}", prompt.text)
        }
        EventKind::FileSent { name, bytes, .. } => format!("[file {name}, {bytes} bytes]"),
        EventKind::PromptTimedOut { action, detail, .. } => {
            format!("nobody answered in time ({action}) {detail}")
        }
        _ => return None,
    })
}

/// From a chat, text is typed as it reads: a control character in it (an ESC sequence, a
/// Ctrl-C) would act on the CLI as a key press, which only `!!keys` may do. Line breaks and tabs
/// are text.
#[allow(clippy::result_large_err)]
pub(super) fn no_control_chars(actor: &Actor, text: &str, what: &str) -> Result<(), Status> {
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
/// The gate reads it once per call and hands it on with the request.
pub(super) fn actor<T>(req: &Request<T>) -> Actor {
    match req.extensions().get::<Actor>() {
        Some(a) => a.clone(),
        None => actor_of(req.extensions().get::<Caller>(), req.metadata().as_ref()),
    }
}

/// What a chat user needs to make this call: its row in `policy.rs`, which the gate handed
/// on. A call that did not pass the gate has none: only the machine's user may make it.
pub(super) fn rights<T>(req: &Request<T>) -> super::policy::Rights {
    req.extensions()
        .get::<super::policy::Rights>()
        .cloned()
        .unwrap_or_else(|| {
            super::policy::Rights::new(super::policy::Who::Machine {
                why: "this call did not pass the daemon's gate",
                audit: None,
            })
        })
}

/// [`actor`], from what the gate knows of a call: its caller and its headers.
pub(crate) fn actor_of(
    caller: Option<&Caller>,
    metadata: &tonic::codegen::http::HeaderMap,
) -> Actor {
    if let Some(Caller::Session { name, owner }) = caller {
        let mut a = match owner.split_once(':') {
            Some((platform, user)) => Actor::chat_user(platform, user, ""),
            None => Actor::local(),
        };
        a.via = format!("session:{name}");
        return a;
    }
    let get = |k: &str| {
        metadata
            .get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    match (get("clibot-platform"), get("clibot-user")) {
        (Some(platform), Some(user)) if !platform.is_empty() && platform != Actor::LOCAL => {
            Actor::chat_user(&platform, &user, &get("clibot-chat").unwrap_or_default())
        }
        // The local user, possibly through the console gateway, which names its one chat so
        // that what is typed there lands in its transcript too.
        _ => Actor {
            chat: get("clibot-chat").unwrap_or_default(),
            ..Actor::local()
        },
    }
}

impl From<CoreError> for Status {
    fn from(e: CoreError) -> Status {
        let code = match &e {
            CoreError::InvalidName(_)
            | CoreError::ReservedName(_)
            | CoreError::DirNotFound(_)
            | CoreError::NotADirectory(_)
            | CoreError::DirNotAbsolute(_)
            | CoreError::TextTooLong { .. }
            | CoreError::Config(_)
            | CoreError::HookPayload(_)
            | CoreError::Input(_)
            | CoreError::BadSpawn(_)
            | CoreError::Routing(_)
            | CoreError::TooMuchInOneCall(_)
            | CoreError::DefaultChat(_)
            | CoreError::FileUnusable(_)
            | CoreError::AdoptRequest(_)
            | CoreError::NoQueuedInput(_)
            | CoreError::NotAChatUser { .. }
            | CoreError::OnlyOwnerShares { .. }
            | CoreError::UnknownKey(_)
            | CoreError::JobInvalid(_)
            | CoreError::UsageQuery(_) => Code::InvalidArgument,
            CoreError::JobNotRun(crate::jobs::table::NoRun::NoSuchJob(_)) => Code::NotFound,
            CoreError::JobNotRun(_) | CoreError::JobFailed(_) => Code::FailedPrecondition,
            CoreError::UnknownCli { .. }
            | CoreError::NoSuchSession(_)
            | CoreError::NotDeclared(_)
            | CoreError::FileMissing { .. }
            | CoreError::PaneGone(_)
            | CoreError::NoSuchTmuxSession(..) => Code::NotFound,
            CoreError::DirNotAllowed { .. }
            | CoreError::SecretDir { .. }
            | CoreError::NotMemberDir { .. }
            | CoreError::OthersDir { .. }
            | CoreError::SessionFiles(_)
            | CoreError::CliNotAllowed { .. }
            | CoreError::NotYours(_)
            | CoreError::FileRefused(_)
            | CoreError::OthersTmuxServer { .. }
            | CoreError::KeysNotAllowed
            | CoreError::NotOwner(_) => Code::PermissionDenied,
            CoreError::AlreadyExists(_)
            | CoreError::TmuxNameTaken(_)
            | CoreError::AlreadyManaged(..) => Code::AlreadyExists,
            CoreError::Exited(_)
            | CoreError::Hibernated(_)
            | CoreError::Stopping(_)
            | CoreError::NotWaiting(_)
            | CoreError::Delegation(_)
            | CoreError::NotThatPrompt { .. }
            | CoreError::UnknownPrompt(_)
            | CoreError::ProgramNotFound { .. }
            | CoreError::NoSandbox
            | CoreError::NotRunnableInJail { .. }
            | CoreError::ProgramNotExecutable { .. }
            | CoreError::FileUnreadable(_)
            | CoreError::CannotAdoptHere(_)
            | CoreError::NotRunByClibot(_)
            | CoreError::DialogShown { .. }
            | CoreError::SecretNotTyped(_)
            | CoreError::NothingToCancel { .. }
            | CoreError::LimitCard(_)
            | CoreError::Worktree(_)
            | CoreError::NoBudgetInForce(_)
            | CoreError::CancelNotTaken { .. }
            | CoreError::NoOwnBinary
            | CoreError::AlreadyResolved(..) => Code::FailedPrecondition,
            CoreError::HookDenied => Code::PermissionDenied,
            CoreError::TooManySessions { .. }
            | CoreError::TooManyForUser { .. }
            | CoreError::QueueFull { .. }
            | CoreError::OverBudget { .. } => Code::ResourceExhausted,
            CoreError::Mux(MuxError::NoServer(_))
            | CoreError::Mux(MuxError::Spawn { .. })
            | CoreError::NoPort(_)
            | CoreError::NoRandom(_)
            | CoreError::NotQueued(_) => Code::Unavailable,
            CoreError::Mux(MuxError::NoSuchTarget(_)) => Code::FailedPrecondition,
            CoreError::Mux(MuxError::DuplicateSession(_)) => Code::AlreadyExists,
            CoreError::Mux(MuxError::Failed { .. }) | CoreError::State { .. } => Code::Internal,
        };
        match e.chat_text() {
            // Carried along for [`for_caller`], which keeps one of the two texts.
            Some(chat) => {
                let mut md = tonic::metadata::MetadataMap::new();
                md.insert_bin(
                    CHAT_TEXT_KEY,
                    tonic::metadata::MetadataValue::from_bytes(chat.as_bytes()),
                );
                Status::with_metadata(code, e.to_string(), md)
            }
            None => Status::new(code, e.to_string()),
        }
    }
}

/// Where a status carries a core error's words for chats ([`CoreError::chat_text`]).
const CHAT_TEXT_KEY: &str = "clibot-chat-text-bin";

/// Whether a call's errors are read in a chat: it comes through the gateway for a chat user,
/// or from the console gateway (the local user typing `!!` commands in a chat of their own).
/// A process in a session calling as its owner runs `clibotctl`: not a chat.
#[cfg(test)]
fn from_chat<T>(req: &Request<T>) -> bool {
    reads_in_chat(&actor(req))
}

/// [`from_chat`], for the actor the gate found.
pub(crate) fn reads_in_chat(a: &Actor) -> bool {
    a.via.is_empty() && (!a.is_local() || !a.chat.is_empty())
}

/// A response as its caller should read it ([`for_caller`]), for every RPC alike: the gate
/// calls it on each response. Only an error that carries chat words is rebuilt.
pub(crate) fn word_for_caller(
    chat: bool,
    resp: tonic::codegen::http::Response<tonic::body::Body>,
) -> tonic::codegen::http::Response<tonic::body::Body> {
    match resp.extensions().get::<Status>() {
        Some(s) if s.metadata().get_bin(CHAT_TEXT_KEY).is_some() => {
            for_caller(chat, s.clone()).into_http()
        }
        _ => resp,
    }
}

/// A status as its caller should read it: for a chat, a core error's chat words (chat commands
/// instead of `clibotctl` ones); for anyone else, the words for the machine. The chat words are
/// never passed on as they were carried.
fn for_caller(chat: bool, s: Status) -> Status {
    let Some(words) = s.metadata().get_bin(CHAT_TEXT_KEY) else {
        return s;
    };
    let chat_text = words
        .to_bytes()
        .ok()
        .and_then(|b| String::from_utf8(b.to_vec()).ok());
    let mut md = s.metadata().clone();
    md.remove_bin(CHAT_TEXT_KEY);
    let message = match chat_text {
        Some(t) if chat => t,
        _ => s.message().to_string(),
    };
    Status::with_metadata(s.code(), message, md)
}

pub(super) fn discovered_to_proto(f: crate::discover::Found) -> v1::Discovered {
    use crate::discover::Place;
    let (where_kind, server, pane, tty) = match f.place {
        Place::Tmux { server, pane } => ("tmux", server.display().to_string(), pane, String::new()),
        Place::Tty { tty } => ("tty", String::new(), String::new(), tty),
        Place::Detached => ("none", String::new(), String::new(), String::new()),
    };
    v1::Discovered {
        id: f.id,
        cli: f.cli,
        version: f.version,
        pid: f.pid,
        dir: f.dir.display().to_string(),
        started_ms: f.started_ms,
        where_kind: where_kind.into(),
        server,
        pane,
        tty,
        conversation_id: f.conversation_id.unwrap_or_default(),
        actions: f.actions,
        watched: f.watched,
    }
}

pub(super) fn state_to_proto(s: State) -> v1::SessionState {
    match s {
        State::Starting => v1::SessionState::Starting,
        State::Idle => v1::SessionState::Idle,
        State::Working => v1::SessionState::Working,
        State::Waiting => v1::SessionState::Waiting,
        State::Exited => v1::SessionState::Exited,
        State::Error => v1::SessionState::Error,
        State::Declared => v1::SessionState::Declared,
        State::Hibernated => v1::SessionState::Hibernated,
    }
}

pub(super) fn state_from_proto(s: v1::SessionState) -> Option<State> {
    Some(match s {
        v1::SessionState::Unspecified => return None,
        v1::SessionState::Starting => State::Starting,
        v1::SessionState::Idle => State::Idle,
        v1::SessionState::Working => State::Working,
        v1::SessionState::Waiting => State::Waiting,
        v1::SessionState::Exited => State::Exited,
        v1::SessionState::Error => State::Error,
        v1::SessionState::Declared => State::Declared,
        v1::SessionState::Hibernated => State::Hibernated,
    })
}

pub(super) fn prompt_to_proto(p: crate::model::Prompt) -> v1::Prompt {
    let mut out = v1::Prompt {
        id: p.id,
        text: p.text,
        options: p.options,
        subject: p.subject,
        warning: p.warning,
        auto: p.auto,
        context: p.context,
        waiting_since_ms: p.since_ms,
        ..Default::default()
    };
    out.set_kind_name(p.kind.as_str());
    out.set_source(p.source.proto());
    out.set_subject_kind(p.subject_kind.map_or(
        v1::SubjectKind::Unspecified,
        crate::model::SubjectKind::proto,
    ));
    out
}

pub(super) fn session_to_proto(d: &Daemon, r: SessionRecord) -> v1::Session {
    let resumable = d.resumes_conversations(&r.cli);
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
        resumable,
        server: r.server.clone(),
        unmanaged: r.unmanaged,
        cli_version: r.cli_version,
        conversation_id: r.cli_session_id,
        profile: r.profile,
        worktree: r.worktree.map(worktree_to_proto),
        isolate: String::new(),
        last_input: one_line(&r.last_input),
        last_reply: one_line(r.last_reply.as_deref().unwrap_or_default()),
    }
}

/// The first line of `text` that says something, at most 200 characters.
fn one_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let mut out: String = line.chars().take(200).collect();
    if line.chars().count() > 200 {
        out.push('…');
    }
    out
}

/// A worktree as the contract has it (its counts unread).
pub(crate) fn worktree_to_proto(w: crate::worktrees::Worktree) -> v1::Worktree {
    v1::Worktree {
        repo: w.repo.display().to_string(),
        path: w.path.display().to_string(),
        branch: w.branch,
        base: w.base,
        base_commit: w.base_commit,
        ..Default::default()
    }
}

/// `w` with how it stands read into it.
pub(crate) fn with_status(
    mut w: v1::Worktree,
    st: crate::worktrees::WorktreeStatus,
) -> v1::Worktree {
    w.read = true;
    w.dirty = st.dirty;
    w.ahead = st.ahead;
    w.behind = st.behind;
    w.missing = st.missing;
    w
}

/// Converts a logged event; `None` for kinds this build does not know.
pub fn event_to_proto(e: Event) -> Option<v1::Event> {
    let time_ms = e.time_ms;
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
        EventKind::Spawned {
            cli,
            dir,
            args,
            cli_version,
        } => Kind::Spawned(v1::SessionSpawned {
            cli,
            dir,
            args,
            cli_version,
        }),
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
        EventKind::Error { message, kind } => {
            // Read against the event's own time: a time of day is the next one after it.
            let resets_at_ms = if kind == "usage_limit" {
                crate::usage::limits::reset_of(&message, time_ms, &jiff::tz::TimeZone::system())
                    .unwrap_or(0)
            } else {
                0
            };
            Kind::Error(v1::Error {
                message,
                kind,
                resets_at_ms,
                // Filled in by the event stream, which knows the configuration.
                switch_profiles: Vec::new(),
            })
        }
        EventKind::TurnCompleted {
            text,
            source,
            blob_id,
            full_bytes,
        } => Kind::TurnCompleted(v1::TurnCompleted {
            text,
            source: source.proto().into(),
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
            actor_kind: clibot_proto::v1::ActorKind::of_key(&actor).into(),
            actor,
            note,
        }),
        EventKind::Notice { text, kind } => Kind::Notice(v1::Notice { text, kind }),
        EventKind::TurnCancelled { by, how } => Kind::TurnCancelled(v1::TurnCancelled { by, how }),
        EventKind::PromptReminded {
            prompt,
            count,
            age_ms,
        } => Kind::PromptReminded(v1::PromptReminded {
            prompt: Some(prompt_to_proto(prompt)),
            count,
            age_ms,
        }),
        EventKind::PromptEscalated { prompt, age_ms } => {
            Kind::PromptEscalated(v1::PromptEscalated {
                prompt: Some(prompt_to_proto(prompt)),
                age_ms,
            })
        }
        EventKind::Hibernated { reason, resumes } => {
            Kind::Hibernated(v1::Hibernated { reason, resumes })
        }
        EventKind::Woken { resumed } => Kind::Woken(v1::Woken { resumed }),
        EventKind::FileSent { name, path, bytes } => {
            Kind::FileSent(v1::FileSent { name, path, bytes })
        }
        EventKind::Paired {
            platform,
            user,
            chat,
        } => Kind::Paired(v1::Paired {
            platform,
            user,
            chat,
        }),
        EventKind::JobStarted {
            job,
            run,
            trigger,
            prompt,
        } => Kind::JobStarted(v1::JobStarted {
            job,
            run,
            trigger: trigger.proto().into(),
            prompt,
        }),
        EventKind::JobFinished {
            job,
            run,
            outcome,
            detail,
            quiet,
            paused,
        } => Kind::JobFinished(v1::JobFinished {
            job,
            run,
            outcome: outcome.proto().into(),
            detail,
            quiet,
            paused,
        }),
        EventKind::JobSkipped { job, reason } => Kind::JobSkipped(v1::JobSkipped { job, reason }),
        EventKind::GoalRound {
            until,
            round,
            exit_code,
            output,
        } => Kind::GoalRound(v1::GoalRound {
            until,
            round,
            exit_code,
            output,
        }),
        EventKind::GoalEnded {
            until,
            reason,
            rounds,
            detail,
        } => Kind::GoalEnded(v1::GoalEnded {
            until,
            reason: reason.proto().into(),
            rounds,
            detail,
        }),
        EventKind::TurnUsage {
            turn_seq,
            tokens,
            model,
            calls,
            windows,
            footer,
            usd,
        } => Kind::TurnUsage(v1::TurnUsage {
            turn_seq,
            input: tokens.input,
            output: tokens.output,
            cache_read: tokens.cache_read,
            cache_write: tokens.cache_write,
            model,
            calls,
            windows: windows.iter().map(plan_window).collect(),
            footer,
            usd: usd.unwrap_or(0.0),
            priced: usd.is_some(),
        }),
        EventKind::JobMissed {
            job,
            due_ms,
            count,
            ran,
        } => Kind::JobMissed(v1::JobMissed {
            job,
            due_ms,
            count,
            ran,
        }),
        EventKind::PromptTimedOut {
            prompt_id,
            action,
            age_ms,
            detail,
        } => Kind::PromptTimedOut(v1::PromptTimedOut {
            prompt_id,
            action,
            age_ms,
            detail,
        }),
        EventKind::Delegated {
            to_session,
            to_cli,
            reason,
            detail,
            attempt,
            skipped,
        } => Kind::Delegated(v1::Delegated {
            to_session,
            to_cli,
            reason,
            detail,
            attempt,
            skipped,
        }),
        EventKind::InputQueued { text, position } => {
            Kind::InputQueued(v1::InputQueued { text, position })
        }
        EventKind::Stalled {
            silent_ms,
            working_ms,
            screen,
        } => Kind::Stalled(v1::Stalled {
            silent_ms,
            working_ms,
            screen,
        }),
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

pub(super) type EventStream =
    Pin<Box<dyn Stream<Item = Result<v1::Event, Status>> + Send + 'static>>;
pub(super) type BlobStream =
    Pin<Box<dyn Stream<Item = Result<v1::BlobChunk, Status>> + Send + 'static>>;

/// A blob that cannot be read, as the status a client can act on.
pub(super) fn blob_status(e: crate::store::blobs::BlobError) -> Status {
    use crate::store::blobs::BlobError as E;
    match e {
        E::NotFound(_) => Status::not_found(e.to_string()),
        E::PastEnd { .. } => Status::out_of_range(e.to_string()),
        E::Io { .. } => Status::internal(e.to_string()),
    }
}

/// A plan window on the wire.
pub(crate) fn plan_window(w: &crate::usage::PlanWindow) -> v1::PlanWindow {
    v1::PlanWindow {
        name: w.name.clone(),
        used_percent: w.used_percent,
        resets_at_ms: w.resets_at_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(md: &[(&'static str, &str)]) -> Request<()> {
        let mut r = Request::new(());
        for (k, v) in md {
            r.metadata_mut()
                .insert(*k, v.parse().expect("ascii metadata"));
        }
        r
    }

    #[test]
    fn a_chat_reads_chat_commands_and_clibotctl_its_own() {
        let status = || Status::from(CoreError::Exited("api".into()));
        let chat = for_caller(true, status());
        assert_eq!(chat.code(), Code::FailedPrecondition);
        assert!(
            chat.message().contains("!!restart api") && !chat.message().contains("clibotctl"),
            "{}",
            chat.message()
        );
        let local = for_caller(false, status());
        assert!(
            local.message().contains("`clibotctl restart api`"),
            "{}",
            local.message()
        );
        for s in [&chat, &local] {
            assert!(
                s.metadata().get_bin(CHAT_TEXT_KEY).is_none(),
                "not passed on"
            );
        }
        // An error with one text for everyone is left as it is.
        let same = for_caller(true, Status::from(CoreError::Stopping("api".into())));
        assert_eq!(same.message(), "session \"api\" is being stopped");
        // Who reads it in a chat: a chat user through the gateway, the console; not clibotctl.
        assert!(from_chat(&request(&[
            ("clibot-platform", "telegram"),
            ("clibot-user", "7"),
            ("clibot-chat", "7"),
        ])));
        assert!(from_chat(&request(&[("clibot-chat", "console")])));
        assert!(!from_chat(&request(&[])));
    }

    /// The gate rewords any method's error response for its caller, and passes on the rest.
    #[test]
    fn the_gate_rewords_every_error_response_for_its_caller() {
        let resp = |chat: bool| {
            let r = Status::from(CoreError::NoSuchSession("api".into())).into_http();
            let r = word_for_caller(chat, r);
            let s = Status::from_header_map(r.headers()).expect("a status");
            assert!(
                s.metadata().get_bin(CHAT_TEXT_KEY).is_none(),
                "not passed on"
            );
            s.message().to_string()
        };
        assert!(resp(true).contains("!!sessions"), "{}", resp(true));
        assert!(resp(false).contains("clibotctl list"), "{}", resp(false));
        let ok = tonic::codegen::http::Response::new(tonic::body::Body::empty());
        assert!(word_for_caller(true, ok).headers().is_empty());
    }
}
