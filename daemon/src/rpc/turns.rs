//! The running turn and what waits behind it: cancel, the queue, dropping from it.
//! Translation only: the core decides.

use super::*;

pub(super) async fn cancel_turn(
    svc: &Service,
    req: Request<v1::CancelTurnRequest>,
) -> Result<Response<v1::CancelTurnResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    // A cancel presses keys: the same people as `keys` may.
    svc.permit(&actor, who, &r.session)?;
    // Refused after the row's check: the gate audits it.
    svc.daemon.check_keys(&actor, &r.session)?;
    let by = actor.key();
    let c = svc.daemon.cancel_turn(&r.session, &by).await?;
    Ok(Response::new(v1::CancelTurnResponse {
        how: c.how,
        queued: c.queued as u32,
    }))
}

#[allow(clippy::result_large_err)]
pub(super) fn list_queue(
    svc: &Service,
    req: Request<v1::ListQueueRequest>,
) -> Result<Response<v1::ListQueueResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    svc.permit(&actor, who, &r.session)?;
    let mut inputs = svc.daemon.queued(&r.session)?;
    // One answer stays well under gRPC's 4 MiB: what does not fit is counted, not sent.
    const ANSWER_BYTES: usize = 3 * 1024 * 1024;
    let mut used = 0;
    let fit = inputs
        .iter()
        .take_while(|t| {
            used += t.len() + 8;
            used <= ANSWER_BYTES
        })
        .count();
    let rest = inputs.split_off(fit);
    Ok(Response::new(v1::ListQueueResponse {
        inputs,
        omitted: rest.len() as u32,
        omitted_bytes: rest.iter().map(|t| t.len() as u64).sum(),
    }))
}

#[allow(clippy::result_large_err)]
pub(super) fn drop_queued(
    svc: &Service,
    req: Request<v1::DropQueuedRequest>,
) -> Result<Response<v1::DropQueuedResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    svc.permit(&actor, who, &r.session)?;
    let which = (r.position > 0).then_some(r.position as usize);
    let result = svc.daemon.drop_queued(&r.session, which);
    match &result {
        Ok(_) => svc.daemon.audit(&actor, &r.session, "drop", Ok(())),
        Err(e) => svc
            .daemon
            .audit(&actor, &r.session, "drop", Err(&e.to_string())),
    }
    let (dropped, left) = result?;
    Ok(Response::new(v1::DropQueuedResponse {
        dropped: dropped as u32,
        left: left as u32,
    }))
}
