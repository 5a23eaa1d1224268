//! Worktrees: what `clibotctl worktree` and a worktree card's buttons ask. Translation only:
//! the core decides who may and does it; every action is audited here, refused or not.

use super::*;
use crate::session::WorktreeOp;

pub(super) async fn worktree(
    svc: &Service,
    req: Request<v1::WorktreeRequest>,
) -> Result<Response<v1::WorktreeResponse>, Status> {
    use v1::WorktreeAction as A;
    let actor = actor(&req);
    let r = req.into_inner();
    let action = A::try_from(r.action).unwrap_or(A::Unspecified);
    let op = match action {
        A::List => return Ok(Response::new(list(svc, &actor, &r.session).await)),
        A::Prune => {
            let p = if svc.daemon.is_admin(&actor) {
                Ok(svc.daemon.prune_worktrees().await)
            } else {
                Err(CoreError::Worktree(
                    "the clean-up acts on every session's worktree: admins and the machine's user only".into(),
                ))
            };
            let refused = p.as_ref().err().map(ToString::to_string);
            svc.daemon.audit(
                &actor,
                "",
                "worktree prune",
                refused.as_deref().map_or(Ok(()), Err),
            );
            let p = p?;
            let text = if p.removed.is_empty() {
                "no worktree to remove".to_string()
            } else {
                format!("removed the worktrees of {}", p.removed.join(", "))
            };
            return Ok(Response::new(v1::WorktreeResponse {
                text,
                removed: p.removed,
                stale: p
                    .stale
                    .into_iter()
                    .map(|(s, why)| format!("{s}: {why}"))
                    .collect(),
                ..Default::default()
            }));
        }
        A::Isolate => {
            let done = svc.daemon.isolate(&actor, &r.session).await;
            let refused = done.as_ref().err().map(ToString::to_string);
            svc.daemon.audit(
                &actor,
                &r.session,
                "worktree isolate",
                refused.as_deref().map_or(Ok(()), Err),
            );
            let rec = done?;
            let w = rec.worktree.clone().unwrap_or_default();
            return Ok(Response::new(v1::WorktreeResponse {
                text: format!(
                    "{} started again in a worktree of its own, on branch {} from {} ({})",
                    rec.name,
                    w.branch,
                    w.base,
                    w.path.display()
                ),
                ..Default::default()
            }));
        }
        A::Diff => WorktreeOp::Diff { file: r.file },
        A::Merge => WorktreeOp::Merge { into: r.into },
        A::Pr => WorktreeOp::Pr,
        A::Keep => WorktreeOp::Keep,
        A::Discard => WorktreeOp::Discard { confirm: r.confirm },
        A::Resolve => WorktreeOp::Resolve { into: r.into },
        A::Unspecified => {
            return Err(Status::invalid_argument(
                "action: list, diff, merge, pr, keep, discard, resolve, prune or isolate",
            ));
        }
    };
    let what = format!(
        "worktree {}",
        action
            .as_str_name()
            .trim_start_matches("WORKTREE_ACTION_")
            .to_ascii_lowercase()
    );
    let done = svc.daemon.worktree_op(&actor, &r.session, op).await;
    let refused = done.as_ref().err().map(ToString::to_string);
    svc.daemon.audit(
        &actor,
        &r.session,
        &what,
        refused.as_deref().map_or(Ok(()), Err),
    );
    let d = done?;
    Ok(Response::new(v1::WorktreeResponse {
        text: d.text,
        patch: d.patch,
        conflicts: d.conflicts,
        ..Default::default()
    }))
}

/// The kept worktrees `actor` may finish (one session's with `session`), with how each stands.
async fn list(svc: &Service, actor: &Actor, session: &str) -> v1::WorktreeResponse {
    let mut out = Vec::new();
    for (k, running) in svc.daemon.list_worktrees(actor) {
        if !session.is_empty() && k.session != session {
            continue;
        }
        let st = svc.daemon.worktree_status(&k.worktree).await;
        out.push(v1::KeptWorktree {
            session: k.session,
            worktree: Some(with_status(worktree_to_proto(k.worktree), st)),
            running,
            keep: k.keep,
            pr_url: k.pr_url,
            made_ms: k.made_ms,
        });
    }
    v1::WorktreeResponse {
        worktrees: out,
        ..Default::default()
    }
}
