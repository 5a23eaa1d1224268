//! Usage: the ledger summed for the caller. Translation only: the core decides what the caller
//! may see.

use super::*;

#[allow(clippy::result_large_err)]
pub(super) fn get_usage(
    svc: &Service,
    req: Request<v1::GetUsageRequest>,
) -> Result<Response<v1::GetUsageResponse>, Status> {
    let actor = actor(&req);
    let r = req.into_inner();
    let (rows, windows) = svc
        .daemon
        .usage_view(&actor, &r.by, r.since_ms, &r.session)?;
    Ok(Response::new(v1::GetUsageResponse {
        rows: rows
            .into_iter()
            .map(|r| v1::UsageRow {
                key: r.key,
                turns: r.turns,
                calls: r.calls,
                input: r.tokens.input,
                output: r.tokens.output,
                cache_read: r.tokens.cache_read,
                cache_write: r.tokens.cache_write,
                usd: r.usd,
                priced: r.priced,
            })
            .collect(),
        windows: windows
            .iter()
            .map(|w| v1::CliWindows {
                cli: w.cli.clone(),
                windows: w.windows.iter().map(plan_window).collect(),
                at_ms: w.at_ms,
            })
            .collect(),
    }))
}

#[allow(clippy::result_large_err)]
pub(super) fn list_budgets(
    svc: &Service,
    req: Request<v1::ListBudgetsRequest>,
) -> Result<Response<v1::ListBudgetsResponse>, Status> {
    let actor = actor(&req);
    let budgets = svc
        .daemon
        .budget_views(&actor)
        .into_iter()
        .map(|b| {
            let plan = b.spec.plan_percent.is_some();
            let (used, percent) = match &b.used {
                Some(u) => (crate::session::budget_amount_words(&b.spec, u), u.percent()),
                None => ("its CLI has told no such window yet".to_string(), 0.0),
            };
            v1::Budget {
                scope: b.spec.scope_words(),
                per: if plan {
                    "window".into()
                } else {
                    format!("{:?}", b.spec.per).to_lowercase()
                },
                used,
                percent,
                action: format!("{:?}", b.spec.action).to_lowercase(),
                in_force: b.in_force,
                warned: b.state.warned,
                lifted_by: b.state.lifted_by,
                period: b.used.map(|u| u.period).unwrap_or(b.state.period),
                name: b.spec.name,
            }
        })
        .collect();
    Ok(Response::new(v1::ListBudgetsResponse { budgets }))
}

#[allow(clippy::result_large_err)]
pub(super) fn lift_budget(
    svc: &Service,
    req: Request<v1::LiftBudgetRequest>,
) -> Result<Response<v1::LiftBudgetResponse>, Status> {
    let actor = actor(&req);
    let r = req.into_inner();
    svc.daemon.lift_budget(&actor, &r.name)?;
    Ok(Response::new(v1::LiftBudgetResponse {}))
}

pub(super) async fn limit_action(
    svc: &Service,
    req: Request<v1::LimitActionRequest>,
) -> Result<Response<v1::LimitActionResponse>, Status> {
    let actor = actor(&req);
    let r = req.into_inner();
    let action = crate::session::LimitAction::parse(&r.action).ok_or_else(|| {
        Status::invalid_argument(format!(
            "action {:?}: resume, delegate or switch:PROFILE",
            r.action
        ))
    })?;
    let result = svc.daemon.limit_action(&actor, r.seq, action).await;
    let refused = result.as_ref().err().map(ToString::to_string);
    svc.daemon.audit(
        &actor,
        "",
        &format!("limit {}", r.action),
        refused.as_deref().map_or(Ok(()), Err),
    );
    Ok(Response::new(v1::LimitActionResponse { text: result? }))
}
