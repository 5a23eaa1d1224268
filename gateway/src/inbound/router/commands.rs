//! The `!!` commands: what each one does, through the daemon, for the chat that typed it.

use super::*;
use crate::outbound::render::prompt_text;

impl Router {
    /// Adopts CLI `id` that discovery found in a tmux pane, where it runs, and binds this chat
    /// to it.
    async fn adopt_found(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        id: &str,
        name: Option<&str>,
    ) -> Result<String, tonic::Status> {
        let req = v1::AdoptSessionRequest {
            found: id.to_string(),
            name: name.unwrap_or_default().to_string(),
            ..Default::default()
        };
        let s = c.adopt_session(self.req(msg, req)).await?.into_inner();
        let mut took = format!("adopted {} ({}) where it runs, in {}", s.name, s.cli, s.dir);
        if s.resumable && s.conversation_id.is_empty() {
            took.push_str(&format!(
                "\nIt has no conversation on disk yet: replies may be empty until its CLI writes one (after its first answer); {}screen shows what it shows.",
                self.parser.prefix()
            ));
        }
        Ok(match self.place(c, msg, &s.name).await {
            Ok(place) => format!("{took}; {place}"),
            Err(e)
                if matches!(
                    e.code(),
                    tonic::Code::PermissionDenied | tonic::Code::FailedPrecondition
                ) =>
            {
                format!("{took}; {}", e.message())
            }
            Err(e) => return Err(e),
        })
    }

    pub(super) async fn command(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        cmd: Command,
        binding: Option<v1::Binding>,
        foreign: bool,
    ) -> Result<Option<String>, tonic::Status> {
        let bound = binding.as_ref().map(|b| b.session.clone());
        let need = |b: &Option<String>| {
            b.clone().ok_or_else(|| {
                if foreign {
                    return tonic::Status::permission_denied(FOREIGN);
                }
                let p = self.parser.prefix();
                tonic::Status::failed_precondition(format!(
                    "no session chosen: {p}use NAME picks one ({p}sessions lists them, {p}new NAME CLI [DIR] starts one)"
                ))
            })
        };
        Ok(Some(match cmd {
            Command::Help { topic: None } => self.parser.help_text(),
            Command::Help { topic: Some(t) } => t.help(self.parser.prefix()),
            Command::Discover => {
                let found = c.discover(self.req(msg, v1::DiscoverRequest {})).await?.into_inner().found;
                if found.is_empty() {
                    "no AI CLI runs on the machine outside clibot".to_string()
                } else {
                    let p = self.parser.prefix();
                    let mut t = format!("{} running outside clibot:", found.len());
                    for f in &found {
                        let place = match f.where_kind.as_str() {
                            "tmux" => format!("tmux pane {}", f.pane),
                            "tty" => f.tty.clone(),
                            _ => "no terminal".into(),
                        };
                        t.push_str(&format!("\n• {} — {} {} in {} ({place})", f.id, f.cli, f.version, f.dir));
                        if f.actions.iter().any(|a| a == "adopt") {
                            t.push_str(&format!(": {p}adopt {}", f.id));
                        }
                    }
                    // One tap takes over a CLI in a tmux pane: a button per such CLI, after the
                    // list (the button answers the pseudo-prompt `d.ID`).
                    let adoptable: Vec<&v1::Discovered> =
                        found.iter().filter(|f| f.actions.iter().any(|a| a == "adopt")).collect();
                    if adoptable.is_empty() {
                        t
                    } else {
                        self.reply(msg, &t).await;
                        for f in adoptable {
                            let text = self.platform.redact(&format!("{} in {}", f.id, f.dir)).into_owned();
                            let id = format!("{DISCOVERED}{}", f.id);
                            if let Err(e) = self.platform.send_prompt(&msg.chat, &id, &text, &["Adopt here".to_string()]).await {
                                eprintln!("clibot-gateway: cannot offer to adopt {} in {}: {e}", f.id, msg.chat);
                            }
                        }
                        return Ok(None);
                    }
                }
            }
            Command::Adopt { id, name } => self.adopt_found(c, msg, &id, name.as_deref()).await?,
            Command::Pending => {
                let sessions = c.list_sessions(self.req(msg, v1::ListSessionsRequest::default())).await?.into_inner().sessions;
                let mut waiting: Vec<(String, v1::Prompt)> = sessions
                    .into_iter()
                    .filter(|s| s.state == v1::SessionState::Waiting as i32)
                    .filter_map(|s| s.prompt.map(|p| (s.name, p)))
                    .collect();
                waiting.sort_by_key(|(n, p)| (p.waiting_since_ms, n.clone()));
                if waiting.is_empty() {
                    "no prompt is waiting".to_string()
                } else {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_millis() as i64)
                        .unwrap_or(0);
                    self.reply(msg, &format!("{} waiting, oldest first:", waiting.len())).await;
                    for (name, p) in &waiting {
                        let age = (now - p.waiting_since_ms).max(0) / 1000;
                        let text = format!("[{name}] waiting {}\n{}", age_words(age), prompt_text(p));
                        let text = self.platform.redact(&text).into_owned();
                        let options: Vec<String> = p.options.iter().map(|o| self.platform.redact(o).into_owned()).collect();
                        if let Err(e) = self.platform.send_prompt(&msg.chat, &p.id, &text, &options).await {
                            eprintln!("clibot-gateway: cannot show a waiting prompt in {}: {e}", msg.chat);
                        }
                    }
                    return Ok(None);
                }
            }
            Command::Sessions => {
                let sessions = c.list_sessions(self.req(msg, v1::ListSessionsRequest::default())).await?.into_inner().sessions;
                if sessions.is_empty() {
                    self.no_session_hint(c, msg).await?
                } else {
                    let now = crate::ops::health::now_ms();
                    sessions.iter().map(|s| super::choose::session_line(s, bound.as_deref(), now)).collect::<Vec<_>>().join("\n")
                }
            }
            Command::Use { name } => {
                c.get_session(self.req(msg, v1::GetSessionRequest { name: name.clone(), ..Default::default() })).await?;
                let place = self.place(c, msg, &name).await?;
                if msg.topics { format!("{name}: {place}") } else { format!("this chat now talks to {name}") }
            }
            Command::New { name, cli, dir, delegate, profile, worktree } => {
                let req = v1::SpawnSessionRequest {
                    name: name.clone(), cli, dir: dir.unwrap_or_default(), delegate, profile: profile.unwrap_or_default(),
                    worktree: worktree.is_some(), worktree_branch: worktree.unwrap_or_default(), ..Default::default()
                };
                let s = c.spawn_session(self.req(msg, req)).await?.into_inner();
                let wt = s.worktree.as_ref().map(|w| format!(" on branch {} from {} (a worktree of {})", w.branch, w.base, w.repo)).unwrap_or_default();
                let text = match self.place(c, msg, &name).await {
                    Ok(place) => format!("started {} ({}) in {}{wt}; {place}", s.name, s.cli, s.dir),
                    Err(e) if matches!(e.code(), tonic::Code::PermissionDenied | tonic::Code::FailedPrecondition) => {
                        format!("started {} ({}) in {}{wt}; {}", s.name, s.cli, s.dir, e.message())
                    }
                    Err(e) => return Err(e),
                };
                return Ok(self.isolate_offer(msg, &s, text).await);
            }
            Command::Whoami => format!("{} user {} ({}) in chat {}", self.platform.name(), msg.user, msg.user_name, msg.chat),
            Command::Status => {
                let name = need(&bound)?;
                // Details: how its worktree stands (a git read), asked for here only.
                let s = c.get_session(self.req(msg, v1::GetSessionRequest { name, details: true })).await?.into_inner();
                let mut t = format!("{} ({}) {} — {}", s.name, s.cli, state_name(s.state), s.dir);
                if let Some(w) = &s.worktree {
                    t.push_str(&format!("\n🌿 {}", super::worktree_card::standing(w)));
                }
                if let Some(p) = s.prompt {
                    t.push_str(&format!("\n{}", prompt_text(&p)));
                }
                t
            }
            Command::Screen { lines } => {
                let session = need(&bound)?;
                let req = v1::CaptureRequest { session, lines: lines.unwrap_or(0), ..Default::default() };
                let text = c.capture(self.req(msg, req)).await?.into_inner().text;
                // Blank rows and full-width rules push what matters off a phone's screen.
                let text = clibot_gateway::phone_screen::compact(&text);
                // A long screen goes as one file, not as a stream of messages.
                return Ok(self.maybe_file(msg, "screen.txt", text).await);
            }
            Command::Shot => {
                let session = need(&bound)?;
                let req = v1::CaptureRequest { session: session.clone(), escapes: true, ..Default::default() };
                let text = c.capture(self.req(msg, req)).await?.into_inner().text;
                return Ok(self.shot(msg, &session, &text).await);
            }
            Command::Get { path, force } => {
                let session = need(&bound)?;
                let req = v1::GetFileRequest { session: session.clone(), path: path.clone(), force };
                let data = crate::outbound::files::fetch(c, self.req(msg, req)).await?;
                return Ok(self.send_got(msg, &session, &path, data, force).await);
            }
            Command::Keys { keys } => {
                let session = need(&bound)?;
                c.send_keys(self.req(msg, v1::SendKeysRequest { session, keys })).await?;
                return Ok(None);
            }
            Command::Cancel { name } => {
                let session = match name {
                    Some(n) => n,
                    None => need(&bound)?,
                };
                let r = c.cancel_turn(self.req(msg, v1::CancelTurnRequest { session: session.clone() })).await?.into_inner();
                let p = self.parser.prefix();
                match r.queued {
                    0 => format!("cancelled {session}'s turn"),
                    n => format!("cancelled {session}'s turn; {n} queued message(s) go next ({p}queue shows them, {p}drop takes them back)"),
                }
            }
            Command::Queue => {
                let session = need(&bound)?;
                let q = c.list_queue(self.req(msg, v1::ListQueueRequest { session: session.clone() })).await?.into_inner();
                let (inputs, omitted) = (q.inputs, q.omitted);
                if inputs.is_empty() {
                    format!("nothing is queued for {session}")
                } else {
                    let mut t = format!("queued for {session}, next first:");
                    for (i, input) in inputs.iter().enumerate() {
                        let first: String = input.lines().next().unwrap_or("").chars().take(80).collect();
                        t.push_str(&format!("\n{}. {first}", i + 1));
                    }
                    if omitted > 0 {
                        t.push_str(&format!("\n… and {omitted} more"));
                    }
                    let p = self.parser.prefix();
                    t.push_str(&format!("\n{p}drop N takes one back, {p}drop all every one"));
                    t
                }
            }
            Command::Drop { n } => {
                let session = need(&bound)?;
                let req = v1::DropQueuedRequest { session: session.clone(), position: n.unwrap_or(0) };
                let r = c.drop_queued(self.req(msg, req)).await?.into_inner();
                format!("dropped {} from {session}'s queue; {} left", r.dropped, r.left)
            }
            Command::Stop { name } => {
                let session = match name {
                    Some(n) => n,
                    None => need(&bound)?,
                };
                let req = v1::StopSessionRequest { session: session.clone(), force: false, timeout_ms: 0 };
                c.stop_session(self.req(msg, req)).await?;
                format!("stopped {session}")
            }
            Command::Ask { text } => {
                // The new session starts where the chat's session works, if it has one.
                let dir = match &bound {
                    Some(name) => c
                        .get_session(self.req(msg, v1::GetSessionRequest { name: name.clone(), ..Default::default() }))
                        .await
                        .map(|s| s.into_inner().dir)
                        .unwrap_or_default(),
                    None => String::new(),
                };
                let req = v1::RouteRequest { text, dir, name: String::new(), dry_run: false };
                let r = c.route(self.req(msg, req)).await?.into_inner();
                let Some(s) = r.session else {
                    return Ok(Some(format!("{} ({}: {})", r.cli, r.by, r.why)));
                };
                let chose = format!("→ {} ({}: {}); started {} in {} with your task", r.cli, r.by, r.why, s.name, s.dir);
                match self.place(c, msg, &s.name).await {
                    Ok(place) => format!("{chose}; {place}"),
                    Err(e) if matches!(e.code(), tonic::Code::PermissionDenied | tonic::Code::FailedPrecondition) => format!("{chose}; {}", e.message()),
                    Err(e) => return Err(e),
                }
            }
            Command::Start { name } => {
                let req = v1::StartSessionRequest { name: name.clone() };
                let s = c.start_session(self.req(msg, req)).await?.into_inner();
                match self.place(c, msg, &name).await {
                    Ok(place) => format!("started {} ({}) in {}; {place}", s.name, s.cli, s.dir),
                    Err(e) if matches!(e.code(), tonic::Code::PermissionDenied | tonic::Code::FailedPrecondition) => {
                        format!("started {} ({}) in {}; {}", s.name, s.cli, s.dir, e.message())
                    }
                    Err(e) => return Err(e),
                }
            }
            Command::Restart { name, fresh } => {
                let session = match name {
                    Some(n) => n,
                    None => need(&bound)?,
                };
                let req = v1::RestartSessionRequest { session: session.clone(), fresh, ..Default::default() };
                let s = c.restart_session(self.req(msg, req)).await?.into_inner();
                match (fresh, s.resumable) {
                    (_, false) => format!("restarted {session}"),
                    (true, true) => format!("restarted {session} with a new conversation"),
                    (false, true) => format!("restarted {session}, resuming its conversation"),
                }
            }
            Command::Last => {
                let session = need(&bound)?;
                let r = c.get_last_reply(self.req(msg, v1::GetLastReplyRequest { session: session.clone() })).await?.into_inner();
                if r.seq == 0 {
                    format!("{session} has not completed a turn yet")
                } else {
                    // A long reply comes whole from its blob (as far as a file takes it), and
                    // goes as a file, not as a stream of messages.
                    let text = crate::outbound::blob::last_reply(c, &session, r, self.platform.max_file()).await;
                    return Ok(self.maybe_file(msg, "last-reply.txt", text).await);
                }
            }
            Command::Answer { choice } => {
                // A press on a `discover` button: adopt that CLI.
                if let Some(id) = msg.prompt.as_deref().and_then(|p| p.strip_prefix(DISCOVERED)) {
                    return Ok(Some(self.adopt_found(c, msg, id, None).await?));
                }
                // A press on a "which session?" button.
                if let Some(print) = msg.prompt.as_deref().and_then(|p| p.strip_prefix(super::choose::CHOOSE_CARD)) {
                    return self.chosen(c, msg, print, &choice).await;
                }
                // A press on a board's button: the command it names.
                if msg.prompt.as_deref() == Some(crate::outbound::board::BOARD_CARD) {
                    let Some(cmd) = Self::board_press(&choice) else {
                        return Ok(Some("that board button is unknown".into()));
                    };
                    return Box::pin(self.command(c, msg, cmd, binding, foreign)).await;
                }
                // A press on a job card's Add / Cancel.
                if let Some(id) = msg.prompt.as_deref().and_then(|p| p.strip_prefix(super::job_card::JOB_CARD)) {
                    return Ok(Some(self.job_card_answer(c, msg, id, &choice).await?));
                }
                // A press on a worktree's card, its conflict card or an Isolate offer.
                if let Some(id) = msg.prompt.as_deref().filter(|p| super::worktree_card::is_worktree_card(p)) {
                    return self.worktree_answer(c, msg, id, &choice).await;
                }
                // A press on a usage limit's Resume at reset / Delegate now.
                if let Some(id) = msg.prompt.as_deref().and_then(|p| p.strip_prefix(crate::outbound::render::LIMIT_CARD)) {
                    return Ok(Some(self.limit_answer(c, msg, id, &choice).await?));
                }
                // A press on a transcription's Send / Cancel.
                if let Some(id) = msg.prompt.as_deref().filter(|p| p.starts_with(crate::inbound::transcribe::VOICE)) {
                    return Ok(Some(self.voice_answer(c, msg, id, &choice).await?));
                }
                if let Some(refusal) = answer_refusal(&choice) {
                    return Ok(Some(refusal));
                }
                // A button in a chat bound to someone else's session is not theirs to press.
                if msg.prompt.is_none() || foreign {
                    need(&bound)?;
                }
                // `!!answer` with a password: the message carrying it goes, like a plain one.
                if self.answer(c, msg, binding.as_ref(), choice).await? {
                    let session = bound.clone().unwrap_or_default();
                    return Ok(Some(self.secret_sent(msg, &session).await));
                }
                return Ok(None);
            }
            Command::Share { name, user, revoke } => {
                let user = if user.contains(':') { user } else { format!("{}:{user}", self.platform.name()) };
                let req = v1::ShareSessionRequest { session: name.clone(), user: user.clone(), revoke };
                let r = c.share_session(self.req(msg, req)).await?.into_inner();
                match (revoke, r.shared_with.is_empty()) {
                    (true, true) => format!("{name} is no longer shared with anyone"),
                    (true, false) => format!("{user} may no longer use {name}; still shared with {}", r.shared_with.join(", ")),
                    (false, _) => format!("{user} may now use {name} (shared with {})", r.shared_with.join(", ")),
                }
            }
            Command::History { n } => {
                let n = n.unwrap_or(clibot_gateway::command::DEFAULT_HISTORY);
                let req = v1::GetTranscriptRequest {
                    platform: self.platform.name().into(),
                    chat: msg.chat.clone(),
                    since_ms: 0,
                    limit: n,
                };
                let entries = c.get_transcript(self.req(msg, req)).await?.into_inner().entries;
                if entries.is_empty() {
                    return Ok(Some("nothing recorded for this chat yet".into()));
                }
                // Each entry is redacted whole before it is flattened and cut to a line.
                let text = history_text(&entries, |t| self.platform.redact(t).into_owned());
                // Long history goes as one file, like a long screen.
                return Ok(self.maybe_file(msg, "history.txt", text).await);
            }
            Command::Rules => c.list_rules(self.req(msg, v1::ListRulesRequest {})).await?.into_inner().describe(),
            Command::Goal { name, until, off } => {
                let req = v1::SetGoalRequest { session: name.clone(), until: until.clone(), off, ..Default::default() };
                let g = c.set_goal(self.req(msg, req)).await?.into_inner();
                match (off, until.is_empty(), g.until.is_empty()) {
                    (true, ..) => format!("🎯 {name}'s goal is off"),
                    (false, false, _) => format!("🎯 {name} works until `{until}` succeeds (at most {} rounds); checking now", g.max_turns),
                    (false, true, true) => format!("{name} has no goal: {}goal {name} CMD sets one", self.parser.prefix()),
                    (false, true, false) => format!("🎯 {name} works until `{}` succeeds: round {} of at most {}", g.until, g.rounds, g.max_turns),
                }
            }
            Command::Usage { span } => {
                let req = v1::GetUsageRequest {
                    by: "session".into(),
                    since_ms: crate::ops::health::now_ms() - span.ms(),
                    session: String::new(),
                };
                let r = c.get_usage(self.req(msg, req)).await?.into_inner();
                usage_text(&r, span.as_str(), crate::ops::health::now_ms())
            }
            Command::Budget { lift: Some(name) } => {
                c.lift_budget(self.req(msg, v1::LiftBudgetRequest { name: name.clone() })).await?;
                format!("💰 budget {name} lifted for the rest of its period; held input goes now")
            }
            Command::Worktree { name, word, arg } => {
                return self.worktree_command(c, msg, name.or(bound), word, arg).await;
            }
            Command::Discard { name } => return self.worktree_discard(c, msg, name).await,
            Command::Board { off } => return self.board_command(c, msg, off).await,
            Command::Budget { lift: None } => {
                let r = c.list_budgets(self.req(msg, v1::ListBudgetsRequest {})).await?.into_inner();
                budgets_text(&r.budgets)
            }
            Command::Jobs => {
                let jobs = c.list_jobs(self.req(msg, v1::ListJobsRequest {})).await?.into_inner().jobs;
                jobs_text(&jobs, crate::ops::health::now_ms())
            }
            Command::Job { action, name } => {
                use clibot_gateway::command::JobAction;
                let job = v1::JobRequest { name: name.clone() };
                match action {
                    JobAction::Run => {
                        let r = c.run_job(self.req(msg, job)).await?.into_inner();
                        if r.skipped {
                            format!("⏰ job {name}: run {} skipped by its gate: {}", r.run, r.detail)
                        } else {
                            format!("⏰ job {name}: run {} started in {}", r.run, r.session)
                        }
                    }
                    JobAction::Remove => {
                        c.remove_job(self.req(msg, job)).await?;
                        format!("job {name} removed")
                    }
                    JobAction::Pause | JobAction::Resume => {
                        let paused = action == JobAction::Pause;
                        c.pause_job(self.req(msg, v1::PauseJobRequest { name: name.clone(), paused })).await?;
                        format!("job {name} {}", if paused { "paused" } else { "resumed" })
                    }
                }
            }
            Command::JobAdd { name, fields } => return self.job_card(c, msg, &name, &fields).await,
            Command::Delegate { cli } => {
                let session = need(&bound)?;
                let req = v1::DelegateRequest { session, cli: cli.unwrap_or_default() };
                c.delegate(self.req(msg, req)).await?;
                // The daemon moved this chat to the new session and tells it there.
                return Ok(None);
            }
            Command::Pair { .. } => "pairing is approved on the machine: the owner runs `clibotctl pairing approve CODE`".into(),
        }))
    }
}

/// `!!usage`: one line per session, then each CLI's plan windows.
fn usage_text(r: &v1::GetUsageResponse, span: &str, now_ms: i64) -> String {
    use clibot_proto::usage_words::{money, tokens, windows};
    if r.rows.is_empty() {
        return format!(
            "no turns of yours counted in the last {span} (a CLI that keeps no records of its usage is not counted)"
        );
    }
    let mut out = format!("📊 usage, last {span}:");
    for x in &r.rows {
        out.push_str(&format!(
            "\n• {} — {} turns · {} in · {} out · {} cached",
            x.key,
            x.turns,
            tokens(x.input),
            tokens(x.output),
            tokens(x.cache_read)
        ));
        if x.priced > 0 {
            out.push_str(&format!(" · {}", money(x.usd)));
        }
    }
    for w in &r.windows {
        if w.windows.is_empty() {
            out.push_str(&format!("\n{}: its records tell no plan window", w.cli));
        } else {
            out.push_str(&format!("\n{}: {}", w.cli, windows(&w.windows, now_ms)));
        }
    }
    out
}

impl Router {
    /// A press on a usage limit's card (`SEQ` or `SEQ.d`, see `LIMIT_CARD`).
    async fn limit_answer(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        id: &str,
        choice: &str,
    ) -> Result<String, tonic::Status> {
        let (seq, only_delegate) = match id.strip_suffix(".d") {
            Some(seq) => (seq, true),
            None => (id, false),
        };
        let Ok(seq) = seq.parse::<u64>() else {
            return Ok("that button is not one of clibot's".into());
        };
        let fixed = if only_delegate { 1 } else { 2 };
        let action = match (only_delegate, choice.parse::<usize>()) {
            (false, Ok(1)) => "resume".to_string(),
            (false, Ok(2)) | (true, Ok(1)) => "delegate".to_string(),
            // A Switch to PROFILE button: its profile, as the limit's event names them.
            (_, Ok(n)) if n > fixed => match limit_profiles(c, seq).await.get(n - fixed - 1) {
                Some(p) => format!("switch:{p}"),
                None => return Ok("that profile is no longer offered: clibotctl restart NAME --profile P picks one".into()),
            },
            _ => return Ok("that button is not one of clibot's".into()),
        };
        let req = v1::LimitActionRequest { seq, action };
        Ok(c.limit_action(self.req(msg, req)).await?.into_inner().text)
    }
}

/// The profiles the usage limit told as event `seq` offers to switch to, read back from the
/// daemon (the gateway keeps no copy of what its cards showed).
async fn limit_profiles(c: &mut clibot_proto::Client, seq: u64) -> Vec<String> {
    use tokio_stream::StreamExt;
    let req = v1::WatchEventsRequest {
        since: Some(seq.saturating_sub(1)),
        sessions: Vec::new(),
        follow: false,
    };
    let Ok(stream) = c.watch_events(req).await else {
        return Vec::new();
    };
    match stream.into_inner().next().await {
        Some(Ok(v1::Event {
            seq: s,
            kind: Some(v1::event::Kind::Error(e)),
            ..
        })) if s == seq => e.switch_profiles,
        _ => Vec::new(),
    }
}

/// `!!budget`: one line per budget, with what it used and whether it holds.
fn budgets_text(budgets: &[v1::Budget]) -> String {
    if budgets.is_empty() {
        return "no budgets you may see: they are set in the config ([[budgets]], docs/USAGE.md)"
            .into();
    }
    let mut out = String::from("💰 budgets:");
    for b in budgets {
        let state = if b.in_force {
            format!(
                "spent ({}): an admin lifts it with !!budget lift {}",
                b.action, b.name
            )
        } else if !b.lifted_by.is_empty() {
            format!("lifted by {}", b.lifted_by)
        } else {
            format!("at 100 %: {}", b.action)
        };
        out.push_str(&format!(
            "\n• {} ({}, per {}): {} — {:.0} %; {state}",
            b.name, b.scope, b.per, b.used, b.percent
        ));
    }
    out
}

/// The jobs, one line each: name, when, where, and its state.
fn jobs_text(jobs: &[v1::Job], now_ms: i64) -> String {
    if jobs.is_empty() {
        return "no jobs you may see: they are added on the machine (clibotctl jobs add, docs/JOBS.md)".into();
    }
    let mut out = String::from("⏰ jobs:");
    for j in jobs {
        let Some(s) = &j.spec else { continue };
        let when = super::job_card::when_words(s);
        let target = if s.session.is_empty() {
            format!("new {}", s.cli)
        } else {
            s.session.clone()
        };
        let state = if j.running_run > 0 {
            format!("running (run {})", j.running_run)
        } else if j.paused {
            format!(
                "paused{}",
                if j.paused_why.is_empty() {
                    String::new()
                } else {
                    format!(": {}", j.paused_why)
                }
            )
        } else if j.next_due_ms > 0 {
            format!("next in {}", age_words((j.next_due_ms - now_ms) / 1000))
        } else {
            "not due by the clock".into()
        };
        let last = j.last.as_ref().map_or(String::new(), |l| {
            format!(
                " · last {} {} ago",
                l.outcome().name(),
                age_words((now_ms - l.ended_ms) / 1000)
            )
        });
        out.push_str(&format!(
            "\n• {} — {when} → {target} · {state}{last}",
            s.name
        ));
        if j.missed + j.skipped > 0 {
            out.push_str(&format!(" · missed {}, skipped {}", j.missed, j.skipped));
        }
    }
    out
}
