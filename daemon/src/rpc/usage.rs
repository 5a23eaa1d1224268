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
