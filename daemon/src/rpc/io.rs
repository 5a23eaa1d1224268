//! Input and output of a session: text, keys, screens, answers to prompts, the last reply and its blob, hook calls. Translation only: the core decides.

use super::*;

pub(super) async fn send_input(
    svc: &Service,
    req: Request<v1::SendInputRequest>,
) -> Result<Response<v1::SendInputResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    svc.permit(&actor, who, &r.session)?;
    no_control_chars(&actor, &r.text, "text")?;
    let session = r.session.clone();
    let text = r.text.clone();
    let by = actor.key();
    let sent = svc
        .daemon
        .send_input_once(&r.session, &r.text, r.submit, &r.dedupe_key, &by)
        .await?;
    if sent.secret {
        svc.record_in(&actor, &session, &crate::model::secret_placeholder(&text));
    } else {
        svc.record_in(&actor, &session, &text);
    }
    Ok(Response::new(v1::SendInputResponse {
        seq: sent.seq,
        queued: sent.queued,
        secret: sent.secret,
    }))
}

pub(super) async fn send_keys(
    svc: &Service,
    req: Request<v1::SendKeysRequest>,
) -> Result<Response<v1::SendKeysResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    // Control keys can interrupt or quit a CLI: from a chat, admins, and owners in their own
    // sessions; never someone it is only shared with.
    svc.permit(&actor, who, &r.session)?;
    // Refused after the row's check: the gate audits it.
    svc.daemon.check_keys(&actor, &r.session)?;
    let by = actor.key();
    let seq = svc.daemon.send_keys_by(&r.session, &r.keys, &by).await?;
    Ok(Response::new(v1::SendKeysResponse { seq }))
}

pub(super) async fn capture(
    svc: &Service,
    req: Request<v1::CaptureRequest>,
) -> Result<Response<v1::CaptureResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    svc.permit(&actor, who, &r.session)?;
    if r.lines > MAX_CAPTURE_LINES {
        return Err(Status::invalid_argument(format!(
            "lines is {}; at most {MAX_CAPTURE_LINES} lines can be captured at once",
            r.lines
        )));
    }
    let text = if r.turn {
        svc.daemon.capture_turn(&r.session, r.lines).await
    } else {
        svc.daemon.capture(&r.session, r.lines, r.escapes).await
    };
    if !actor.is_local() {
        // What leaves the machine for a chat is on record.
        let res = text.as_ref().map(|_| ()).map_err(|e| e.to_string());
        svc.daemon.audit(
            &actor,
            &r.session,
            "screen",
            res.as_ref().map(|_| ()).map_err(String::as_str),
        );
    }
    let text = crate::confine::secrets::scrub(&text?, &svc.daemon.own_secrets());
    Ok(Response::new(v1::CaptureResponse { text }))
}

pub(super) async fn answer_prompt(
    svc: &Service,
    req: Request<v1::AnswerPromptRequest>,
) -> Result<Response<v1::AnswerPromptResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let mut r = req.into_inner();
    if r.session.is_empty() && !r.prompt_id.is_empty() {
        // A button names its prompt only: whose session it is decides who may press it.
        r.session = svc.daemon.session_of_prompt(&r.prompt_id)?;
    }
    svc.permit(&actor, who, &r.session)?;
    no_control_chars(&actor, &r.answer, "an answer")?;
    // From a chat, an answer must name the prompt it answers: the one whose buttons were
    // pressed, or the one last shown in that chat. "Whatever waits now" could be a newer,
    // different prompt than the one the user read.
    if !actor.is_local() && r.prompt_id.is_empty() {
        return Err(Status::invalid_argument(
            "this answer does not say which prompt it answers: use the prompt's buttons",
        ));
    }
    let session = r.session.clone();
    let answer = r.answer.clone();
    let by = actor.key();
    let a = svc
        .daemon
        .answer_prompt(&r.session, &r.prompt_id, &r.answer, &by)
        .await?;
    if a.secret {
        svc.record_in(&actor, &session, &crate::model::secret_placeholder(&answer));
    } else {
        svc.record_in(&actor, &session, &answer);
    }
    Ok(Response::new(v1::AnswerPromptResponse {
        prompt_id: a.prompt_id,
        via: a.via,
        secret: a.secret,
    }))
}

pub(super) async fn get_last_reply(
    svc: &Service,
    req: Request<v1::GetLastReplyRequest>,
) -> Result<Response<v1::GetLastReplyResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let session = req.into_inner().session;
    svc.permit(&actor, who, &session)?;
    if !actor.is_local() {
        svc.daemon.audit(&actor, &session, "last", Ok(()));
    }
    let last = svc.daemon.last_reply(&session)?;
    let text = crate::confine::secrets::scrub(&last.text, &svc.daemon.own_secrets());
    Ok(Response::new(v1::GetLastReplyResponse {
        text,
        seq: last.seq,
        blob_id: last.blob_id,
        full_bytes: last.full_bytes,
    }))
}

pub(super) async fn read_blob(
    svc: &Service,
    req: Request<v1::ReadBlobRequest>,
) -> Result<Response<BlobStream>, Status> {
    let r = req.into_inner();
    let blobs = svc.daemon.events().blobs().clone();
    // The first chunk is read here, so that a wrong id is an error of the call itself.
    let (first, total) = blobs
        .read_chunk(&r.blob_id, r.offset)
        .map_err(blob_status)?;
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

pub(super) async fn get_file(
    svc: &Service,
    req: Request<v1::GetFileRequest>,
) -> Result<Response<BlobStream>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    svc.permit(&actor, who, &r.session)?;
    if r.force && !svc.daemon.is_admin(&actor) {
        let why = "--force sends a git-ignored file, which only admins may do";
        svc.daemon.audit(&actor, &r.session, "get", Err(why));
        return Err(Status::permission_denied(why));
    }
    let read = svc
        .daemon
        .read_session_file(&r.session, &r.path, r.force)
        .await;
    // What leaves the machine is on record, with its path.
    let outcome = read.as_ref().map(|_| ()).map_err(|e| e.to_string());
    svc.daemon.audit(
        &actor,
        &r.session,
        "get",
        outcome.as_ref().map(|_| ()).map_err(String::as_str),
    );
    let file = read?;
    let total = file.data.len() as u64;
    let chunks: Vec<Result<v1::BlobChunk, Status>> = if file.data.is_empty() {
        vec![Ok(v1::BlobChunk {
            data: Vec::new(),
            offset: 0,
            total: 0,
        })]
    } else {
        file.data
            .chunks(1 << 20)
            .enumerate()
            .map(|(i, c)| {
                Ok(v1::BlobChunk {
                    data: c.to_vec(),
                    offset: (i as u64) << 20,
                    total,
                })
            })
            .collect()
    };
    Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
}

pub(super) async fn put_file(
    svc: &Service,
    req: Request<tonic::Streaming<v1::PutFileChunk>>,
) -> Result<Response<v1::PutFileResponse>, Status> {
    use tokio_stream::StreamExt;
    let (actor, who) = (actor(&req), rights(&req));
    let mut stream = req.into_inner();
    let first = stream
        .next()
        .await
        .ok_or_else(|| Status::invalid_argument("no file was sent"))??;
    let (session, name) = (first.session.clone(), first.name.clone());
    // Whoever may send to the session may send it a file.
    svc.permit(&actor, who, &session)?;
    let max = crate::session::MAX_FILE_BYTES as usize;
    let mut data = first.data;
    while let Some(chunk) = stream.next().await {
        data.extend_from_slice(&chunk?.data);
        if data.len() > max {
            return Err(Status::invalid_argument(format!(
                "the file is larger than {} MiB",
                max >> 20
            )));
        }
    }
    let bytes = data.len() as u64;
    let stored = svc.daemon.write_inbox(&session, &name, data).await;
    let outcome = stored.as_ref().map(|_| ()).map_err(|e| e.to_string());
    svc.daemon.audit(
        &actor,
        &session,
        "put",
        outcome.as_ref().map(|_| ()).map_err(String::as_str),
    );
    Ok(Response::new(v1::PutFileResponse {
        path: stored?,
        bytes,
    }))
}

pub(super) async fn hook(
    svc: &Service,
    req: Request<v1::HookRequest>,
) -> Result<Response<v1::HookResponse>, Status> {
    if let Some(Caller::HookSocket { id }) = req.extensions().get::<Caller>()
        && *id != req.get_ref().session_id
    {
        return Err(Status::permission_denied(
            "this socket serves only its own session's hook calls",
        ));
    }
    if req.get_ref().global {
        // Known by its process ancestry: the peer credentials of the call.
        let pid = req
            .extensions()
            .get::<tonic::transport::server::UdsConnectInfo>()
            .and_then(|ci| ci.peer_cred)
            .and_then(|c| c.pid());
        if matches!(
            req.extensions().get::<Caller>(),
            Some(Caller::HookSocket { .. })
        ) {
            return Err(Status::permission_denied(
                "this socket serves only its own session's hook calls",
            ));
        }
        let r = req.into_inner();
        let output = svc
            .daemon
            .global_hook(pid, &r.cli, &r.event, &r.payload)
            .await?;
        return Ok(Response::new(v1::HookResponse { output }));
    }
    let r = req.into_inner();
    let output = svc
        .daemon
        .hook(&r.session_id, &r.token, &r.event, &r.payload)
        .await?;
    Ok(Response::new(v1::HookResponse { output }))
}
