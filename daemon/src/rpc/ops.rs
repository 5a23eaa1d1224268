//! The daemon itself: status, reload, rules, the automation report, metrics. Translation only:
//! the core decides.

use super::*;
use crate::session::JailVerdict as Verdict;

pub(super) async fn status(
    svc: &Service,
    _: Request<v1::StatusRequest>,
) -> Result<Response<v1::StatusResponse>, Status> {
    let s = svc.daemon.status().await;
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
        gateways: svc.gateway_status(),
        pending_prompts: s.pending_prompts as u32,
        config_read_ms: s.config_read_ms,
    }))
}

pub(super) async fn reload(
    svc: &Service,
    req: Request<v1::ReloadRequest>,
) -> Result<Response<v1::ReloadResponse>, Status> {
    // Only the machine's user reaches it (its row in `policy.rs`).
    let actor = actor(&req);
    let r = svc.daemon.reload_and_start().await;
    match &r {
        Ok(_) => svc.daemon.audit(&actor, "", "reload", Ok(())),
        Err(e) => svc.daemon.audit(&actor, "", "reload", Err(&e.to_string())),
    }
    let r = r?;
    Ok(Response::new(v1::ReloadResponse {
        reloaded: r.reloaded,
        needs_restart: r.needs_restart,
        warnings: r.warnings,
    }))
}

/// `clibotctl patterns test`: a screen read by a CLI's pack, as the watcher reads panes.
pub(super) async fn test_patterns(
    svc: &Service,
    req: Request<v1::TestPatternsRequest>,
) -> Result<Response<v1::TestPatternsResponse>, Status> {
    // Only the machine's user reaches it (its row in `policy.rs`).
    let r = req.into_inner();
    if r.screen.len() > 1 << 20 {
        return Err(Status::invalid_argument(
            "the screen is over 1 MiB: capture the pane (tmux capture-pane -p) instead",
        ));
    }
    let (name, pack) = if r.cli.is_empty() {
        let generic = crate::cli::detect::builtin_packs()
            .get("generic")
            .and_then(|c| crate::cli::detect::Pack::compile(c, None).ok())
            .ok_or_else(|| Status::internal("the generic pack does not compile"))?;
        ("generic".to_string(), std::sync::Arc::new(generic))
    } else {
        let (_, pack) = svc.daemon.kind_of(&r.cli).ok_or_else(|| {
            Status::not_found(format!(
                "no CLI named {:?} in the config: clibotctl status lists the configured CLIs",
                r.cli
            ))
        })?;
        (r.cli.clone(), pack)
    };
    let a = pack.analyze(&r.screen);
    let prompt = a.prompt.map(|sp| {
        let mut p = crate::session::shared::new_prompt(&sp);
        p.id = String::new();
        prompt_to_proto(p)
    });
    let (error_kind, error_line) = a.error.unwrap_or_default();
    Ok(Response::new(v1::TestPatternsResponse {
        pack: name,
        busy: a.busy,
        idle: a.idle,
        ready: a.ready,
        interrupted: a.interrupted,
        settled: a.settled,
        prompt,
        error_kind,
        error_line,
    }))
}

pub(super) async fn list_rules(
    svc: &Service,
    _req: Request<v1::ListRulesRequest>,
) -> Result<Response<v1::ListRulesResponse>, Status> {
    // The rules are the machine owner's configuration: any allowed user may read them, as
    // they decide what gets approved in that user's sessions.
    let a = svc.daemon.automation();
    let live = svc.daemon.live();
    let cfg = &live.config;
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
        delegation_chains: cfg
            .delegation
            .chains
            .iter()
            .map(|(kind, c)| v1::DelegationChain {
                kind: kind.clone(),
                to: c.to.clone(),
                max_attempts: c.max_attempts.unwrap_or(cfg.delegation.max_attempts),
            })
            .collect(),
    }))
}

pub(super) async fn get_metrics(
    svc: &Service,
    _req: Request<v1::GetMetricsRequest>,
) -> Result<Response<v1::GetMetricsResponse>, Status> {
    // Only the machine's user reaches it (its row in `policy.rs`).
    Ok(Response::new(v1::GetMetricsResponse {
        text: svc.daemon.metrics_text(),
    }))
}

pub(super) async fn check_jail(
    svc: &Service,
    req: Request<v1::CheckJailRequest>,
) -> Result<Response<v1::CheckJailResponse>, Status> {
    // It runs programs: only the machine's user reaches it (its row in `policy.rs`).
    let cli = req.into_inner().cli;
    let (checks, skipped) = svc.daemon.check_jail(&cli).await?;
    let checks = checks
        .into_iter()
        .map(|(platform, cli, verdict)| {
            let (verdict, why) = match verdict {
                Verdict::Runs => (v1::JailVerdict::JailRuns, String::new()),
                Verdict::Unknown => (v1::JailVerdict::JailUnknown, String::new()),
                Verdict::Fails(why) => (v1::JailVerdict::JailFails, why),
            };
            v1::JailCheck {
                platform,
                cli,
                verdict: verdict as i32,
                why,
            }
        })
        .collect();
    Ok(Response::new(v1::CheckJailResponse { checks, skipped }))
}

pub(super) async fn automation_report(
    svc: &Service,
    _req: Request<v1::AutomationReportRequest>,
) -> Result<Response<v1::AutomationReportResponse>, Status> {
    // Only the machine's user reaches it (its row in `policy.rs`).
    let r = svc.daemon.automation_report();
    Ok(Response::new(v1::AutomationReportResponse {
        since_ms: r.since_ms,
        rows: r
            .rows
            .into_iter()
            .map(|x| v1::AutomationRow {
                by: x.by.to_string(),
                index: x.index,
                about: x.about,
                configured: x.configured,
                answers: x.tally.answers,
                approved: x.tally.approved,
                denied: x.tally.denied,
                completed: x.tally.completed,
                errored: x.tally.errored,
                undone: x.tally.undone,
                pending: x.tally.pending(),
                left_to_person: x.tally.left_to_person,
                last_fired_ms: x.tally.last_fired_ms,
            })
            .collect(),
        recent: r
            .recent
            .into_iter()
            .map(|a| v1::AutomationAnswer {
                outcome: a.outcome().as_str().to_string(),
                time_ms: a.at_ms,
                session: a.session,
                by: a.by,
                subject: a.subject,
                approved: a.approved,
                answer: a.answer,
                outcome_ms: a.outcome_ms,
                detail: a.detail,
            })
            .collect(),
    }))
}
