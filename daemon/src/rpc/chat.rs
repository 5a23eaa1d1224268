//! What the gateway needs: access and pairing, delivery cursors, bindings, ingress cursors, once-only claims, transcripts, its own health. Translation only: the core decides.

use super::*;

pub(super) async fn report_gateway(
    svc: &Service,
    req: Request<v1::ReportGatewayRequest>,
) -> Result<Response<v1::ReportGatewayResponse>, Status> {
    let r = req.into_inner();
    let mut reports = svc.gateways.lock().unwrap_or_else(|p| p.into_inner());
    for mut p in r.platforms {
        if p.platform.is_empty() || p.platform.len() > 32 {
            return Err(Status::invalid_argument(
                "a platform name of 1 to 32 characters",
            ));
        }
        p.reported_ms = crate::store::now_ms();
        svc.daemon
            .metrics()
            .gateway_report(&p.platform, p.deliveries, p.deliveries_failed);
        svc.daemon
            .metrics()
            .gateway_progress(&p.platform, p.last_progress_ms, p.restarts);
        reports.insert(p.platform.clone(), (p, Instant::now()));
    }
    let platforms: Vec<String> = reports.keys().cloned().collect();
    drop(reports);
    let mut notice_chats = Vec::new();
    for platform in platforms {
        for chat in svc.daemon.admin_notice_chats(&platform) {
            notice_chats.push(format!("{platform}:{chat}"));
        }
    }
    Ok(Response::new(v1::ReportGatewayResponse { notice_chats }))
}

pub(super) async fn check_access(
    svc: &Service,
    req: Request<v1::CheckAccessRequest>,
) -> Result<Response<v1::CheckAccessResponse>, Status> {
    let r = req.into_inner();
    if r.platform.is_empty() || r.user.is_empty() {
        return Err(Status::invalid_argument("platform and user are required"));
    }
    let actor = Actor::chat_user(&r.platform, &r.user, &r.chat);
    if r.group {
        // Groups are off unless named; and in a group, where everyone reads along, a
        // stranger gets no pairing code and no reply: pairing happens in a direct message.
        let access = svc.daemon.access();
        let refusal = if !access.group_enabled(&actor.platform, &actor.chat) {
            let first = access.first_refusal_in_group(
                &actor.platform,
                crate::chat::access::group_of(&actor.chat),
            );
            svc.daemon
                .audit(&actor, "", "message", Err("group not enabled"));
            Some(if first {
                format!(
                    "clibot is not enabled in this group: its owner can add the chat id {} to `groups` under [access.{}] in the config",
                    crate::chat::access::group_of(&actor.chat),
                    actor.platform
                )
            } else {
                String::new()
            })
        } else if access.known(&actor.platform, &actor.user).is_none() {
            svc.daemon
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
        match svc.daemon.check_access(&actor, &r.user_name) {
            Decision::Allowed { admin } => {
                svc.daemon
                    .note_chat(&actor.platform, &actor.chat, admin, r.group);
                v1::CheckAccessResponse {
                    allowed: true,
                    admin,
                    message: String::new(),
                    pairing_code: String::new(),
                }
            }
            Decision::Denied { reason, code } => {
                // Groups were answered above: this is the direct chat the code is given in,
                // told there once it is approved.
                if code.is_some() {
                    svc.daemon.access().note_pairing_chat(
                        &actor.platform,
                        &actor.user,
                        &actor.chat,
                    );
                }
                v1::CheckAccessResponse {
                    allowed: false,
                    admin: false,
                    message: reason,
                    pairing_code: code.unwrap_or_default(),
                }
            }
        },
    ))
}

pub(super) async fn list_pairings(
    svc: &Service,
    _: Request<v1::ListPairingsRequest>,
) -> Result<Response<v1::ListPairingsResponse>, Status> {
    let a = svc.daemon.access();
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

pub(super) async fn approve_pairing(
    svc: &Service,
    req: Request<v1::ApprovePairingRequest>,
) -> Result<Response<v1::ApprovePairingResponse>, Status> {
    let actor = actor(&req);
    if !actor.is_local() {
        return Err(Status::permission_denied(
            "pairings are approved on the machine, with `clibotctl pairing approve`",
        ));
    }
    let code = req.into_inner().code;
    let r = svc
        .daemon
        .access()
        .approve_in_chat(&code)
        .map_err(|e| Status::not_found(e.to_string()));
    svc.daemon.audit(
        &actor,
        "",
        "pairing approve",
        r.as_ref().map(|_| ()).map_err(|e| e.message()),
    );
    let (platform, user, chat) = r?;
    if !chat.is_empty() {
        // The phone is told: its chat gets a cursor from now, and the event that says so.
        let last = svc.daemon.events().last_seq();
        svc.daemon.chats().ensure_home(&platform, &chat, last);
        svc.daemon.event(
            "",
            "",
            crate::store::events::EventKind::Paired {
                platform: platform.clone(),
                user: user.clone(),
                chat,
            },
        );
    }
    Ok(Response::new(v1::ApprovePairingResponse { platform, user }))
}

pub(super) async fn ack_events(
    svc: &Service,
    req: Request<v1::AckEventsRequest>,
) -> Result<Response<v1::AckEventsResponse>, Status> {
    let r = req.into_inner();
    let last = svc.daemon.events().last_seq();
    if r.seq > last {
        return Err(Status::out_of_range(format!(
            "seq {} is beyond the newest event {last}",
            r.seq
        )));
    }
    // An event is on disk before any cursor passes it: a power loss must not leave a chat
    // told about events the log no longer has (their numbers would be given out again). A
    // `sending` ack moves no cursor but syncs too: the acknowledgement after the send then finds
    // it done, which keeps the window between a send and its acknowledgement short.
    svc.daemon.events().sync_through(r.seq).map_err(|e| {
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
        let ack = crate::chat::chats::ChatAck {
            seq: r.seq,
            parts: r.parts,
            prompt: &r.prompt,
            message: &r.message,
            sending: r.sending,
            status: r.status.map(|s| crate::chat::chats::TurnStatus {
                message: s.message,
                session: s.session,
                started_ms: s.started_ms,
            }),
        };
        let before = svc
            .daemon
            .chats()
            .bindings(&r.platform, &r.chat, "")
            .into_iter()
            .find(|b| b.platform == r.platform && b.chat == r.chat);
        let cursor = svc
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
            svc.record_out(&r.platform, &r.chat, &b.session, r.seq);
        }
        return Ok(Response::new(v1::AckEventsResponse { cursor }));
    }
    if r.consumer.is_empty() {
        return Err(Status::invalid_argument("consumer is required"));
    }
    if r.sending || r.status.is_some() {
        return Err(Status::invalid_argument(
            "sending and status are for one chat's delivery: set platform and chat",
        ));
    }
    Ok(Response::new(v1::AckEventsResponse {
        cursor: svc.daemon.chats().ack(&r.consumer, r.seq),
    }))
}

pub(super) async fn get_cursor(
    svc: &Service,
    req: Request<v1::GetCursorRequest>,
) -> Result<Response<v1::GetCursorResponse>, Status> {
    Ok(Response::new(v1::GetCursorResponse {
        cursor: svc.daemon.chats().cursor(&req.into_inner().consumer),
    }))
}

pub(super) async fn set_binding(
    svc: &Service,
    req: Request<v1::SetBindingRequest>,
) -> Result<Response<v1::SetBindingResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    if r.platform.is_empty() || r.chat.is_empty() {
        return Err(Status::invalid_argument("platform and chat are required"));
    }
    if !r.session.is_empty()
        && svc.daemon.get(&r.session).is_err()
        && svc.daemon.declaration(&r.session).is_some()
    {
        let how = if actor.is_local() {
            format!("clibotctl start {}", r.session)
        } else {
            format!("!!start {}", r.session)
        };
        return Err(Status::failed_precondition(format!(
            "{} is declared in the config but not started: {how} starts it",
            r.session
        )));
    }
    if !r.session.is_empty() {
        svc.permit(&actor, who, &r.session)?;
        if r.group && !svc.daemon.access().group_enabled(&r.platform, &r.chat) {
            let why = format!(
                "clibot is not enabled in this group: add the chat id {} to `groups` under [access.{}]",
                crate::chat::access::group_of(&r.chat),
                r.platform
            );
            svc.daemon.audit(&actor, &r.session, "bind", Err(&why));
            return Err(Status::permission_denied(why));
        }
    }
    if r.group
        && !svc
            .daemon
            .may_bind_group(&actor, &r.platform, &r.chat, &r.session)
    {
        let why =
            "only an admin or the session's owner may bind this group (it stays bound as it is)";
        svc.daemon.audit(&actor, &r.session, "bind", Err(why));
        return Err(Status::permission_denied(why));
    }
    let mut last = svc.daemon.events().last_seq();
    // A topic the gateway opened for an event (as the machine's user) starts at that event.
    if r.from_seq > 0 && actor.is_local() {
        last = last.min(r.from_seq - 1);
    }
    svc.daemon.chats().bind(
        &r.platform,
        &r.chat,
        &r.session,
        r.group,
        last,
        &actor.key(),
    );
    svc.daemon.audit(&actor, &r.session, "bind", Ok(()));
    Ok(Response::new(v1::SetBindingResponse {}))
}

pub(super) async fn set_default_chat(
    svc: &Service,
    req: Request<v1::SetDefaultChatRequest>,
) -> Result<Response<v1::SetDefaultChatResponse>, Status> {
    // Only the machine's user reaches it (its row in `policy.rs`).
    let actor = actor(&req);
    let r = req.into_inner();
    match svc.daemon.set_default_chat(&r.platform, &r.chat) {
        Ok(()) => {
            svc.daemon.audit(&actor, "", "default_chat", Ok(()));
            Ok(Response::new(v1::SetDefaultChatResponse {}))
        }
        Err(e) => {
            svc.daemon
                .audit(&actor, "", "default_chat", Err(&e.to_string()));
            Err(Status::permission_denied(e.to_string()))
        }
    }
}

pub(super) async fn list_bindings(
    svc: &Service,
    req: Request<v1::ListBindingsRequest>,
) -> Result<Response<v1::ListBindingsResponse>, Status> {
    let r = req.into_inner();
    // Delivery stops at once for a chat whose binder lost the session.
    svc.daemon.enforce_binders();
    let access = svc.daemon.access();
    let mut list = svc
        .daemon
        .chats()
        .bindings(&r.platform, &r.chat, &r.session);
    // A default chat's cursor with no session is no binding to the chat itself.
    if !r.chat.is_empty() {
        list.retain(|b| !b.session.is_empty());
    }
    if list.is_empty() && !r.session.is_empty() && !r.platform.is_empty() {
        let unmanaged = svc.daemon.unmanaged_bindings(&r.platform, &r.session);
        if !unmanaged.is_empty() {
            list = unmanaged;
        } else if let Some(b) = svc.daemon.default_chat_binding(&r.platform, &r.session) {
            list.push(b);
        }
    }
    // Some events go further: an escalated prompt to the admins' chats.
    if r.seq > 0 && !r.session.is_empty() && !r.platform.is_empty() {
        for b in svc
            .daemon
            .escalation_bindings(&r.platform, &r.session, r.seq)
        {
            if !list.iter().any(|x| x.chat == b.chat) {
                list.push(b);
            }
        }
    }
    let bindings = list
        .into_iter()
        .map(|b| {
            // A group taken out of the config is suspended at once, whatever was bound.
            let broken = b.broken.clone().or_else(|| {
                (b.group && !access.group_enabled(&b.platform, &b.chat))
                    .then(|| "the group is not enabled in the config".to_string())
            }).or_else(|| {
                svc.daemon.held(&b).map(|crate::chat::bind_rights::Hold::NoBinder| {
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
                sending_seq: b.sending.map_or(0, |(seq, _)| seq),
                sending_part: b.sending.map_or(0, |(_, part)| part),
                status: b.status.map(|s| v1::StatusMessage {
                    message: s.message,
                    session: s.session,
                    started_ms: s.started_ms,
                }),
            }
        })
        .collect();
    Ok(Response::new(v1::ListBindingsResponse { bindings }))
}

pub(super) async fn mark_chat_broken(
    svc: &Service,
    req: Request<v1::MarkChatBrokenRequest>,
) -> Result<Response<v1::MarkChatBrokenResponse>, Status> {
    let actor = actor(&req);
    let r = req.into_inner();
    if r.platform.is_empty() || r.chat.is_empty() {
        return Err(Status::invalid_argument("platform and chat are required"));
    }
    if let Some(session) = svc
        .daemon
        .chats()
        .mark_broken(&r.platform, &r.chat, &r.reason)
    {
        svc.daemon
            .chat_suspended(&session, &r.platform, &r.chat, &r.reason);
        svc.daemon.audit(&actor, &session, "suspend chat", Ok(()));
    }
    Ok(Response::new(v1::MarkChatBrokenResponse {}))
}

pub(super) async fn share_session(
    svc: &Service,
    req: Request<v1::ShareSessionRequest>,
) -> Result<Response<v1::ShareSessionResponse>, Status> {
    let actor = actor(&req);
    let r = req.into_inner();
    let res = svc.daemon.share(&actor, &r.session, &r.user, r.revoke);
    let outcome = res.as_ref().map(|_| ()).map_err(|e| e.to_string());
    svc.daemon.audit(
        &actor,
        &r.session,
        if r.revoke { "unshare" } else { "share" },
        outcome.as_ref().map(|_| ()).map_err(String::as_str),
    );
    Ok(Response::new(v1::ShareSessionResponse {
        shared_with: res?,
    }))
}

pub(super) async fn ack_ingress(
    svc: &Service,
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
        !r.user.is_empty() && svc.daemon.access().known(&r.platform, &r.user).is_some();
    svc.daemon
        .chats()
        .ack_ingress(&r.platform, &r.chat, &r.id, may_create);
    Ok(Response::new(v1::AckIngressResponse {}))
}

pub(super) async fn list_ingress(
    svc: &Service,
    req: Request<v1::ListIngressRequest>,
) -> Result<Response<v1::ListIngressResponse>, Status> {
    let cursors = svc
        .daemon
        .chats()
        .ingress(&req.into_inner().platform)
        .into_iter()
        .map(|(chat, id)| v1::IngressCursor { chat, id })
        .collect();
    Ok(Response::new(v1::ListIngressResponse { cursors }))
}

pub(super) async fn revoke_access(
    svc: &Service,
    req: Request<v1::RevokeAccessRequest>,
) -> Result<Response<v1::RevokeAccessResponse>, Status> {
    let actor = actor(&req);
    if !actor.is_local() {
        return Err(Status::permission_denied(
            "access is revoked on the machine, with `clibotctl pairing revoke`",
        ));
    }
    let r = req.into_inner();
    let res = svc
        .daemon
        .access()
        .revoke(&r.platform, &r.user)
        .map_err(|e| Status::not_found(e.to_string()));
    svc.daemon.audit(
        &actor,
        "",
        "pairing revoke",
        res.as_ref().map(|_| ()).map_err(|e| e.message()),
    );
    res?;
    svc.daemon.pause_jobs_of_lost_owners();
    Ok(Response::new(v1::RevokeAccessResponse {}))
}

pub(super) async fn claim_once(
    svc: &Service,
    req: Request<v1::ClaimOnceRequest>,
) -> Result<Response<v1::ClaimOnceResponse>, Status> {
    let key = req.into_inner().key;
    if key.is_empty() || key.len() > 512 || key.chars().any(char::is_control) {
        return Err(Status::invalid_argument(
            "ClaimOnce needs a key of 1 to 512 printable characters",
        ));
    }
    let fresh = svc.daemon.claim_once(&key).await;
    Ok(Response::new(v1::ClaimOnceResponse { fresh }))
}

pub(super) async fn get_transcript(
    svc: &Service,
    req: Request<v1::GetTranscriptRequest>,
) -> Result<Response<v1::GetTranscriptResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    if r.platform.is_empty() || r.chat.is_empty() {
        return Err(Status::invalid_argument("platform and chat are required"));
    }
    if !actor.is_local() {
        svc.permit(&actor, who, "")?;
        if actor.platform != r.platform || actor.chat != r.chat {
            let why = "a chat may read only its own transcript";
            svc.daemon.audit(&actor, "", "history", Err(why));
            return Err(Status::permission_denied(why));
        }
        svc.daemon.audit(&actor, "", "history", Ok(()));
    }
    let entries = svc
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
