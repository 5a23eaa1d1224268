//! The gRPC service: translates `clibot.v1` messages to core calls and core results back, and
//! maps every core error to a precise status code. No logic lives here.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use clibot_proto::v1::{self, clibot_server::Clibot, event::Kind};
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;
use tonic::{Code, Request, Response, Status};

use crate::caller::Caller;
use crate::chat::access::Decision;
use crate::chat::transcript::{Entry as TranscriptEntry, Transcripts};
use crate::core::{Daemon, ListFilter, SpawnRequest};
use crate::error::CoreError;
use crate::model::Actor;
use crate::model::{SessionRecord, State};
use crate::store::events::{Event, EventKind};
use crate::tmux::MuxError;
use policy::{Rights, Who};

mod boards;
mod chat;
pub(crate) mod convert;
mod io;
mod jobs;
mod ops;
pub(crate) mod policy;
mod sessions;
mod turns;
mod usage;
mod watch;
mod worktrees;

pub use convert::event_to_proto;
use convert::*;

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
    /// Each chat's board message (`!!board`).
    boards: Arc<crate::chat::boards::Boards>,
}

/// A gateway that has not reported for this long is shown as not running.
const GATEWAY_SILENT: Duration = Duration::from_secs(30);

/// How a gateway's last report is shown once it has been `silent` that long: as it said while
/// it may still run, as stopped past [`GATEWAY_SILENT`]; a `--console` trial that ended is no
/// gateway that stopped and is not shown (doctor would fail on it for good).
fn as_shown(g: &v1::GatewayStatus, silent: Duration) -> Option<v1::GatewayStatus> {
    if silent <= GATEWAY_SILENT {
        return Some(g.clone());
    }
    if g.platform == "console" {
        return None;
    }
    let mut g = g.clone();
    g.detail = format!(
        "no report for {} s: the gateway is not running (last state: {})",
        silent.as_secs(),
        g.state
    );
    g.state = "stopped".into();
    Some(g)
}

impl Service {
    pub fn new(daemon: Daemon, shutdown: CancellationToken) -> Service {
        let settings = daemon.settings();
        let transcripts = Arc::new(Transcripts::new(
            &settings.state_dir,
            settings.config.daemon.transcript_max_bytes,
        ));
        let boards = Arc::new(crate::chat::boards::Boards::open(&settings.state_dir));
        Service {
            daemon,
            shutdown,
            gateways: Arc::default(),
            transcripts,
            boards,
        }
    }

    /// The core, for the layer that tells who calls.
    pub(crate) fn daemon(&self) -> Daemon {
        self.daemon.clone()
    }

    /// The daemon's metrics registry, for the layer that times the calls.
    pub(crate) fn metrics(&self) -> Arc<crate::ops::metrics::Metrics> {
        self.daemon.metrics().clone()
    }

    /// The gateways' last reports, with the chats bound per platform; a gateway silent for
    /// long is shown as such rather than as it last said.
    fn gateway_status(&self) -> Vec<v1::GatewayStatus> {
        let reports = self.gateways.lock().unwrap_or_else(|p| p.into_inner());
        reports
            .values()
            .filter_map(|(g, at)| as_shown(g, at.elapsed()))
            .map(|mut g| {
                g.chats_bound = self.daemon.chats().bindings(&g.platform, "", "").len() as u32;
                g
            })
            .collect()
    }

    /// What the method's row (`policy.rs`, handed on by the gate: [`rights`]) asks of a chat
    /// caller, checked for `session` (the one the request names; empty when none). The local
    /// user passes; refusals are audited under the row's action.
    #[allow(clippy::result_large_err)]
    fn permit(&self, actor: &Actor, rights: Rights, session: &str) -> Result<(), Status> {
        match rights.who {
            // The gate refused a chat user already; the handler decides the rest.
            Who::Anyone | Who::Machine { .. } => {}
            Who::Member { action } => self.authorize(actor, session, action, false)?,
            Who::Admin { action } => self.authorize(actor, session, action, true)?,
            Who::Owner { action } => self.owned(actor, session, action, (false, false))?,
            Who::Manager { action, admin } => self.owned(actor, session, action, (admin, true))?,
        }
        rights.let_in(session);
        Ok(())
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
        if actor.is_local() {
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
    /// or any for admins and the local user; to `manage` it, not only shared). Refusals are
    /// audited.
    #[allow(clippy::result_large_err)]
    fn owned(
        &self,
        actor: &Actor,
        session: &str,
        action: &str,
        (admin_only, manage): (bool, bool),
    ) -> Result<(), Status> {
        self.authorize(actor, session, action, admin_only)?;
        if let Err(e) = self.daemon.check_owner(actor, session, manage) {
            if matches!(e, CoreError::NotYours(_) | CoreError::NotOwner(_)) {
                self.daemon
                    .audit(actor, session, action, Err(&e.to_string()));
            }
            return Err(e.into());
        }
        Ok(())
    }
}

impl Service {
    /// Records what a chat user sent to `session` in their chat's transcript.
    fn record_in(&self, actor: &Actor, session: &str, text: &str) {
        if actor.chat.is_empty() {
            return;
        }
        // The local user's only chat is the console gateway's.
        let platform = if actor.is_local() {
            "console"
        } else {
            actor.platform.as_str()
        };
        self.transcripts.record(
            platform,
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

/// Each method hands its call to its area's handler. A chat caller reads the core's errors in
/// chat words: the gate rewords every response (`convert::word_for_caller`); a chat is
/// told chat commands, `clibotctl` its own.
#[tonic::async_trait]
impl Clibot for Service {
    async fn status(
        &self,
        _req: Request<v1::StatusRequest>,
    ) -> Result<Response<v1::StatusResponse>, Status> {
        ops::status(self, _req).await
    }

    async fn report_gateway(
        &self,
        req: Request<v1::ReportGatewayRequest>,
    ) -> Result<Response<v1::ReportGatewayResponse>, Status> {
        chat::report_gateway(self, req).await
    }

    async fn list_sessions(
        &self,
        req: Request<v1::ListSessionsRequest>,
    ) -> Result<Response<v1::ListSessionsResponse>, Status> {
        sessions::list_sessions(self, req).await
    }

    async fn get_session(
        &self,
        req: Request<v1::GetSessionRequest>,
    ) -> Result<Response<v1::Session>, Status> {
        sessions::get_session(self, req).await
    }

    async fn spawn_session(
        &self,
        req: Request<v1::SpawnSessionRequest>,
    ) -> Result<Response<v1::Session>, Status> {
        sessions::spawn_session(self, req).await
    }

    async fn send_input(
        &self,
        req: Request<v1::SendInputRequest>,
    ) -> Result<Response<v1::SendInputResponse>, Status> {
        io::send_input(self, req).await
    }

    async fn send_keys(
        &self,
        req: Request<v1::SendKeysRequest>,
    ) -> Result<Response<v1::SendKeysResponse>, Status> {
        io::send_keys(self, req).await
    }

    async fn cancel_turn(
        &self,
        req: Request<v1::CancelTurnRequest>,
    ) -> Result<Response<v1::CancelTurnResponse>, Status> {
        turns::cancel_turn(self, req).await
    }

    async fn list_queue(
        &self,
        req: Request<v1::ListQueueRequest>,
    ) -> Result<Response<v1::ListQueueResponse>, Status> {
        turns::list_queue(self, req)
    }

    async fn drop_queued(
        &self,
        req: Request<v1::DropQueuedRequest>,
    ) -> Result<Response<v1::DropQueuedResponse>, Status> {
        turns::drop_queued(self, req)
    }

    async fn capture(
        &self,
        req: Request<v1::CaptureRequest>,
    ) -> Result<Response<v1::CaptureResponse>, Status> {
        io::capture(self, req).await
    }

    async fn stop_session(
        &self,
        req: Request<v1::StopSessionRequest>,
    ) -> Result<Response<v1::StopSessionResponse>, Status> {
        sessions::stop_session(self, req).await
    }

    async fn adopt_session(
        &self,
        req: Request<v1::AdoptSessionRequest>,
    ) -> Result<Response<v1::Session>, Status> {
        sessions::adopt_session(self, req).await
    }

    async fn release_session(
        &self,
        req: Request<v1::ReleaseSessionRequest>,
    ) -> Result<Response<v1::ReleaseSessionResponse>, Status> {
        sessions::release_session(self, req).await
    }

    async fn route(
        &self,
        req: Request<v1::RouteRequest>,
    ) -> Result<Response<v1::RouteResponse>, Status> {
        sessions::route(self, req).await
    }

    async fn start_session(
        &self,
        req: Request<v1::StartSessionRequest>,
    ) -> Result<Response<v1::Session>, Status> {
        sessions::start_session(self, req).await
    }

    async fn restart_session(
        &self,
        req: Request<v1::RestartSessionRequest>,
    ) -> Result<Response<v1::Session>, Status> {
        sessions::restart_session(self, req).await
    }

    async fn answer_prompt(
        &self,
        req: Request<v1::AnswerPromptRequest>,
    ) -> Result<Response<v1::AnswerPromptResponse>, Status> {
        io::answer_prompt(self, req).await
    }

    async fn check_access(
        &self,
        req: Request<v1::CheckAccessRequest>,
    ) -> Result<Response<v1::CheckAccessResponse>, Status> {
        chat::check_access(self, req).await
    }

    async fn list_pairings(
        &self,
        _req: Request<v1::ListPairingsRequest>,
    ) -> Result<Response<v1::ListPairingsResponse>, Status> {
        chat::list_pairings(self, _req).await
    }

    async fn approve_pairing(
        &self,
        req: Request<v1::ApprovePairingRequest>,
    ) -> Result<Response<v1::ApprovePairingResponse>, Status> {
        chat::approve_pairing(self, req).await
    }

    async fn ack_events(
        &self,
        req: Request<v1::AckEventsRequest>,
    ) -> Result<Response<v1::AckEventsResponse>, Status> {
        chat::ack_events(self, req).await
    }

    async fn get_cursor(
        &self,
        req: Request<v1::GetCursorRequest>,
    ) -> Result<Response<v1::GetCursorResponse>, Status> {
        chat::get_cursor(self, req).await
    }

    async fn set_binding(
        &self,
        req: Request<v1::SetBindingRequest>,
    ) -> Result<Response<v1::SetBindingResponse>, Status> {
        chat::set_binding(self, req).await
    }

    async fn list_bindings(
        &self,
        req: Request<v1::ListBindingsRequest>,
    ) -> Result<Response<v1::ListBindingsResponse>, Status> {
        chat::list_bindings(self, req).await
    }

    async fn discover(
        &self,
        req: Request<v1::DiscoverRequest>,
    ) -> Result<Response<v1::DiscoverResponse>, Status> {
        let actor = actor(&req);
        // What runs on the machine is the admins' to see.
        self.permit(&actor, rights(&req), "")?;
        let found = self
            .daemon
            .discover()
            .await
            .into_iter()
            .map(convert::discovered_to_proto)
            .collect();
        self.daemon.audit(&actor, "", "discover", Ok(()));
        Ok(Response::new(v1::DiscoverResponse { found }))
    }

    async fn set_default_chat(
        &self,
        req: Request<v1::SetDefaultChatRequest>,
    ) -> Result<Response<v1::SetDefaultChatResponse>, Status> {
        chat::set_default_chat(self, req).await
    }

    async fn mark_chat_broken(
        &self,
        req: Request<v1::MarkChatBrokenRequest>,
    ) -> Result<Response<v1::MarkChatBrokenResponse>, Status> {
        chat::mark_chat_broken(self, req).await
    }

    async fn share_session(
        &self,
        req: Request<v1::ShareSessionRequest>,
    ) -> Result<Response<v1::ShareSessionResponse>, Status> {
        chat::share_session(self, req).await
    }

    async fn ack_ingress(
        &self,
        req: Request<v1::AckIngressRequest>,
    ) -> Result<Response<v1::AckIngressResponse>, Status> {
        chat::ack_ingress(self, req).await
    }

    async fn list_ingress(
        &self,
        req: Request<v1::ListIngressRequest>,
    ) -> Result<Response<v1::ListIngressResponse>, Status> {
        chat::list_ingress(self, req).await
    }

    async fn revoke_access(
        &self,
        req: Request<v1::RevokeAccessRequest>,
    ) -> Result<Response<v1::RevokeAccessResponse>, Status> {
        chat::revoke_access(self, req).await
    }

    async fn get_last_reply(
        &self,
        req: Request<v1::GetLastReplyRequest>,
    ) -> Result<Response<v1::GetLastReplyResponse>, Status> {
        io::get_last_reply(self, req).await
    }

    type ReadBlobStream = BlobStream;
    type GetFileStream = BlobStream;

    async fn put_file(
        &self,
        req: Request<tonic::Streaming<v1::PutFileChunk>>,
    ) -> Result<Response<v1::PutFileResponse>, Status> {
        io::put_file(self, req).await
    }

    async fn get_file(
        &self,
        req: Request<v1::GetFileRequest>,
    ) -> Result<Response<BlobStream>, Status> {
        io::get_file(self, req).await
    }

    async fn read_blob(
        &self,
        req: Request<v1::ReadBlobRequest>,
    ) -> Result<Response<BlobStream>, Status> {
        io::read_blob(self, req).await
    }

    async fn claim_once(
        &self,
        req: Request<v1::ClaimOnceRequest>,
    ) -> Result<Response<v1::ClaimOnceResponse>, Status> {
        chat::claim_once(self, req).await
    }

    async fn hook(
        &self,
        req: Request<v1::HookRequest>,
    ) -> Result<Response<v1::HookResponse>, Status> {
        io::hook(self, req).await
    }

    async fn reload(
        &self,
        req: Request<v1::ReloadRequest>,
    ) -> Result<Response<v1::ReloadResponse>, Status> {
        ops::reload(self, req).await
    }

    async fn list_rules(
        &self,
        _req: Request<v1::ListRulesRequest>,
    ) -> Result<Response<v1::ListRulesResponse>, Status> {
        ops::list_rules(self, _req).await
    }

    async fn test_patterns(
        &self,
        req: Request<v1::TestPatternsRequest>,
    ) -> Result<Response<v1::TestPatternsResponse>, Status> {
        ops::test_patterns(self, req).await
    }

    async fn delegate(
        &self,
        req: Request<v1::DelegateRequest>,
    ) -> Result<Response<v1::Session>, Status> {
        sessions::delegate(self, req).await
    }

    async fn automation_report(
        &self,
        req: Request<v1::AutomationReportRequest>,
    ) -> Result<Response<v1::AutomationReportResponse>, Status> {
        ops::automation_report(self, req).await
    }

    async fn check_jail(
        &self,
        req: Request<v1::CheckJailRequest>,
    ) -> Result<Response<v1::CheckJailResponse>, Status> {
        ops::check_jail(self, req).await
    }

    async fn get_metrics(
        &self,
        req: Request<v1::GetMetricsRequest>,
    ) -> Result<Response<v1::GetMetricsResponse>, Status> {
        ops::get_metrics(self, req).await
    }

    async fn get_transcript(
        &self,
        req: Request<v1::GetTranscriptRequest>,
    ) -> Result<Response<v1::GetTranscriptResponse>, Status> {
        chat::get_transcript(self, req).await
    }

    async fn add_job(&self, req: Request<v1::AddJobRequest>) -> Result<Response<v1::Job>, Status> {
        jobs::add_job(self, req).await
    }

    async fn list_jobs(
        &self,
        req: Request<v1::ListJobsRequest>,
    ) -> Result<Response<v1::ListJobsResponse>, Status> {
        jobs::list_jobs(self, req)
    }

    async fn remove_job(&self, req: Request<v1::JobRequest>) -> Result<Response<v1::Job>, Status> {
        jobs::remove_job(self, req).await
    }

    async fn pause_job(
        &self,
        req: Request<v1::PauseJobRequest>,
    ) -> Result<Response<v1::Job>, Status> {
        jobs::pause_job(self, req).await
    }

    async fn run_job(
        &self,
        req: Request<v1::JobRequest>,
    ) -> Result<Response<v1::RunJobResponse>, Status> {
        jobs::run_job(self, req).await
    }

    async fn set_goal(
        &self,
        req: Request<v1::SetGoalRequest>,
    ) -> Result<Response<v1::Goal>, Status> {
        jobs::set_goal(self, req).await
    }

    async fn get_usage(
        &self,
        req: Request<v1::GetUsageRequest>,
    ) -> Result<Response<v1::GetUsageResponse>, Status> {
        usage::get_usage(self, req)
    }

    async fn limit_action(
        &self,
        req: Request<v1::LimitActionRequest>,
    ) -> Result<Response<v1::LimitActionResponse>, Status> {
        usage::limit_action(self, req).await
    }

    async fn worktree(
        &self,
        req: Request<v1::WorktreeRequest>,
    ) -> Result<Response<v1::WorktreeResponse>, Status> {
        worktrees::worktree(self, req).await
    }

    async fn board(
        &self,
        req: Request<v1::BoardRequest>,
    ) -> Result<Response<v1::BoardResponse>, Status> {
        boards::board(self, req)
    }

    async fn list_budgets(
        &self,
        req: Request<v1::ListBudgetsRequest>,
    ) -> Result<Response<v1::ListBudgetsResponse>, Status> {
        usage::list_budgets(self, req)
    }

    async fn lift_budget(
        &self,
        req: Request<v1::LiftBudgetRequest>,
    ) -> Result<Response<v1::LiftBudgetResponse>, Status> {
        usage::lift_budget(self, req)
    }

    type WatchEventsStream = EventStream;

    async fn watch_events(
        &self,
        req: Request<v1::WatchEventsRequest>,
    ) -> Result<Response<EventStream>, Status> {
        watch::watch_events(self, req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(platform: &str) -> v1::GatewayStatus {
        v1::GatewayStatus {
            platform: platform.into(),
            state: "connected".into(),
            ..Default::default()
        }
    }

    /// On the daemon's clock: a gateway is shown as it said for 30 s after its last report,
    /// then as stopped; a console trial is then gone (paused time: no test waits 30 s).
    #[tokio::test(start_paused = true)]
    async fn a_silent_gateway_is_stopped_and_an_ended_console_trial_gone() {
        let at = Instant::now();
        let (tg, console) = (report("telegram"), report("console"));
        tokio::time::advance(Duration::from_secs(29)).await;
        assert_eq!(
            as_shown(&tg, at.elapsed()).map(|g| g.state),
            Some("connected".into())
        );
        assert!(as_shown(&console, at.elapsed()).is_some());
        tokio::time::advance(Duration::from_secs(2)).await;
        let shown = as_shown(&tg, at.elapsed()).expect("still listed");
        assert_eq!(shown.state, "stopped");
        assert!(
            shown.detail.contains("no report for 31 s"),
            "{}",
            shown.detail
        );
        assert!(
            shown.detail.contains("last state: connected"),
            "{}",
            shown.detail
        );
        assert_eq!(as_shown(&console, at.elapsed()), None);
    }
}
