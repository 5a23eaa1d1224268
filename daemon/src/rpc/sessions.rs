//! Sessions: list, get, spawn, stop, adopt, release, restart, delegate. Translation only: the core decides.

use super::*;
use crate::session::InPlace;

pub(super) async fn list_sessions(
    svc: &Service,
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
    let sessions = svc
        .daemon
        .list(&filter)
        .into_iter()
        .filter(|s| svc.daemon.may_use(&actor, s))
        .map(|s| session_to_proto(&svc.daemon, s))
        .collect();
    let wanted = svc.daemon.live().config.daemon.default_session.clone();
    let default_session = svc
        .daemon
        .list(&ListFilter::default())
        .into_iter()
        .find(|s| s.name == wanted && svc.daemon.may_use(&actor, s))
        .map(|s| s.name)
        .unwrap_or_default();
    Ok(Response::new(v1::ListSessionsResponse {
        sessions,
        default_session,
    }))
}

pub(super) async fn start_session(
    svc: &Service,
    req: Request<v1::StartSessionRequest>,
) -> Result<Response<v1::Session>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let name = req.into_inner().name;
    // A declared session runs as the machine's user, unjailed: like spawning on the machine.
    svc.permit(&actor, who, &name)?;
    let rec = svc.daemon.start_declared(&name).await?;
    Ok(Response::new(session_to_proto(&svc.daemon, rec)))
}

pub(super) async fn route(
    svc: &Service,
    req: Request<v1::RouteRequest>,
) -> Result<Response<v1::RouteResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    // Like a spawn: any allowed chat user, for a session of their own.
    svc.permit(&actor, who, &r.name)?;
    no_control_chars(&actor, &r.text, "text")?;
    let task = crate::session::RouteTask {
        text: r.text,
        dir: r.dir,
        name: r.name.clone(),
        owner: if actor.is_local() {
            String::new()
        } else {
            actor.key()
        },
        dry_run: r.dry_run,
    };
    let routed = svc.daemon.route_task(task).await?;
    Ok(Response::new(v1::RouteResponse {
        cli: routed.choice.cli,
        by: routed.choice.by,
        why: routed.choice.why,
        session: routed.session.map(|s| session_to_proto(&svc.daemon, s)),
    }))
}

pub(super) async fn get_session(
    svc: &Service,
    req: Request<v1::GetSessionRequest>,
) -> Result<Response<v1::Session>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let v1::GetSessionRequest { name, details } = req.into_inner();
    // Declared in the config and not started: shown as such to those who may use it. (Asked
    // only for a name that is not a session: this call runs for every chat message.)
    if svc.daemon.get(&name).is_err()
        && let Some(rec) = svc
            .daemon
            .declared_not_started()
            .into_iter()
            .find(|r| r.name == name && svc.daemon.may_use(&actor, r))
    {
        return Ok(Response::new(session_to_proto(&svc.daemon, rec)));
    }
    svc.permit(&actor, who, &name)?;
    let rec = svc.daemon.get(&name)?;
    let worktree = rec.worktree.clone().filter(|_| details);
    let mut s = session_to_proto(&svc.daemon, rec);
    if let Some(wt) = worktree {
        let st = svc.daemon.worktree_status(&wt).await;
        s.worktree = Some(with_status(worktree_to_proto(wt), st));
    }
    Ok(Response::new(s))
}

pub(super) async fn spawn_session(
    svc: &Service,
    req: Request<v1::SpawnSessionRequest>,
) -> Result<Response<v1::Session>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    let name = r.name.clone();
    // Any allowed chat user may start a session; it is theirs (see `owned`).
    svc.permit(&actor, who, &name)?;
    // Arguments and environment change what a CLI may do unasked (a flag that skips its
    // permission prompts, a preloaded library): never from inside a session, whose program
    // could otherwise start a sibling freer than itself.
    if actor.via.starts_with("session:")
        && (!r.args.is_empty() || !r.env.is_empty() || !r.profile.is_empty())
    {
        // The gate audits the refusal.
        return Err(Status::permission_denied(
            "a session started from inside a session takes no arguments, environment or profile: start it from the machine (clibotctl at a terminal) or from a chat",
        ));
    }
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
        delegated_reasons: Vec::new(),
        resume: r.resume,
        profile: r.profile,
        worktree: r.worktree.then_some(crate::worktrees::WorktreeAsk {
            branch: r.worktree_branch,
            from: r.worktree_from,
        }),
    };
    let rec = svc.daemon.spawn(req).await?;
    let isolate = svc.daemon.isolate_hint(&rec).await;
    let mut s = session_to_proto(&svc.daemon, rec);
    s.isolate = isolate;
    Ok(Response::new(s))
}

pub(super) async fn stop_session(
    svc: &Service,
    req: Request<v1::StopSessionRequest>,
) -> Result<Response<v1::StopSessionResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    svc.permit(&actor, who, &r.session)?;
    let timeout = (r.timeout_ms > 0).then(|| Duration::from_millis(r.timeout_ms.into()));
    let out = svc.daemon.stop(&r.session, r.force, timeout).await?;
    Ok(Response::new(v1::StopSessionResponse {
        forced: out.forced,
        exit_status: out.exit_status,
    }))
}

pub(super) async fn adopt_session(
    svc: &Service,
    req: Request<v1::AdoptSessionRequest>,
) -> Result<Response<v1::Session>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    let subject = [&r.found, &r.pane, &r.tmux_session]
        .into_iter()
        .find(|s| !s.is_empty())
        .cloned()
        .unwrap_or_default();
    svc.permit(&actor, who, &subject)?;
    let d = &svc.daemon;
    let rec = if !r.found.is_empty() {
        d.adopt_found(&r.found, &r.name).await?
    } else if !r.pane.is_empty() {
        let req = InPlace {
            server: &r.server,
            pane: &r.pane,
            cli: &r.cli,
            name: &r.name,
        };
        d.adopt_in_place(req).await?
    } else {
        d.adopt(&r.tmux_session, &r.cli, &r.name).await?
    };
    Ok(Response::new(session_to_proto(&svc.daemon, rec)))
}

pub(super) async fn release_session(
    svc: &Service,
    req: Request<v1::ReleaseSessionRequest>,
) -> Result<Response<v1::ReleaseSessionResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let session = req.into_inner().session;
    svc.permit(&actor, who, &session)?;
    svc.daemon.release(&session).await?;
    Ok(Response::new(v1::ReleaseSessionResponse {}))
}

pub(super) async fn restart_session(
    svc: &Service,
    req: Request<v1::RestartSessionRequest>,
) -> Result<Response<v1::Session>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    svc.permit(&actor, who, &r.session)?;
    let rec = if r.profile.is_empty() {
        svc.daemon.restart(&r.session, !r.fresh).await?
    } else {
        svc.daemon
            .switch_profile(&r.session, &r.profile, r.fresh)
            .await?
    };
    Ok(Response::new(session_to_proto(&svc.daemon, rec)))
}

pub(super) async fn delegate(
    svc: &Service,
    req: Request<v1::DelegateRequest>,
) -> Result<Response<v1::Session>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    svc.permit(&actor, who, &r.session)?;
    let who = actor.key();
    let to = Some(r.cli.as_str()).filter(|c| !c.is_empty());
    let rec = svc.daemon.delegate(&r.session, to, "manual", &who).await?;
    Ok(Response::new(session_to_proto(&svc.daemon, rec)))
}
