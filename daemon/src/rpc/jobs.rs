//! Jobs: add, list, remove, pause and resume, run now; and sessions' goals. Translation only:
//! the core decides (who may, what a job is, when it runs, what a check says).

use super::*;
use crate::jobs::table::{Job, Origin};
use crate::jobs::{JobSpec, Missed, Overlap};

/// A job's spec from the wire; `overlap` and `missed` name their choice.
fn spec_from(s: v1::JobSpec) -> Result<JobSpec, CoreError> {
    let overlap = match s.overlap.as_str() {
        "" | "skip" => Overlap::Skip,
        "queue" => Overlap::Queue,
        "parallel" => Overlap::Parallel,
        o => {
            return Err(CoreError::JobInvalid(format!(
                "overlap: {o:?} is none of skip, queue, parallel"
            )));
        }
    };
    let missed = match s.missed.as_str() {
        "" | "skip" => Missed::Skip,
        "run_once" => Missed::RunOnce,
        m => {
            return Err(CoreError::JobInvalid(format!(
                "missed: {m:?} is neither skip nor run_once"
            )));
        }
    };
    Ok(JobSpec {
        name: s.name,
        session: s.session,
        cli: s.cli,
        dir: s.dir,
        prompt: s.prompt,
        cron: s.cron,
        tz: s.tz,
        every: s.every,
        at: s.at,
        after: s.after,
        when_idle: s.when_idle,
        gate: s.gate,
        overlap,
        missed,
        max_runs_per_day: s.max_runs_per_day,
        quiet: s.quiet,
        pause_after_failures: s.pause_after_failures,
        webhook: s.webhook.map(|w| crate::jobs::webhook::Webhook {
            secret: w.secret,
            fields: w.fields,
            matches: w.r#match.into_iter().collect(),
        }),
    })
}

fn spec_to(s: &JobSpec) -> v1::JobSpec {
    v1::JobSpec {
        name: s.name.clone(),
        session: s.session.clone(),
        cli: s.cli.clone(),
        dir: s.dir.clone(),
        prompt: s.prompt.clone(),
        cron: s.cron.clone(),
        tz: s.tz.clone(),
        every: s.every.clone(),
        at: s.at.clone(),
        after: s.after.clone(),
        when_idle: s.when_idle.clone(),
        gate: s.gate.clone(),
        overlap: match s.overlap {
            Overlap::Skip => "skip",
            Overlap::Queue => "queue",
            Overlap::Parallel => "parallel",
        }
        .into(),
        missed: match s.missed {
            Missed::Skip => "skip",
            Missed::RunOnce => "run_once",
        }
        .into(),
        max_runs_per_day: s.max_runs_per_day,
        quiet: s.quiet,
        pause_after_failures: s.pause_after_failures,
        // The secret never leaves the daemon.
        webhook: s.webhook.as_ref().map(|w| v1::JobWebhook {
            secret: String::new(),
            fields: w.fields.clone(),
            r#match: w.matches.clone().into_iter().collect(),
            secret_set: !w.secret.is_empty(),
        }),
    }
}

pub(super) fn job_to(j: &Job) -> v1::Job {
    v1::Job {
        spec: Some(spec_to(&j.spec)),
        origin: match j.origin {
            Origin::Config => "config",
            Origin::Added => "added",
        }
        .into(),
        owner: j.owner.clone(),
        paused: j.paused,
        paused_why: j.paused_why.clone(),
        next_due_ms: j.next_due_ms,
        runs: j.runs,
        running_run: j.running.as_ref().map_or(0, |r| r.run),
        running_session: j
            .running
            .as_ref()
            .map(|r| r.session.clone())
            .unwrap_or_default(),
        runs_today: j.runs_today,
        failures_in_row: j.failures_in_row,
        missed: j.missed,
        skipped: j.skipped,
        last: j.last.as_ref().map(|l| v1::JobRun {
            run: l.run,
            trigger: l.trigger.proto().into(),
            started_ms: l.started_ms,
            ended_ms: l.ended_ms,
            outcome: l.outcome.proto().into(),
            detail: l.detail.clone(),
        }),
        last_miss: j.last_miss.clone(),
        added_ms: j.added_ms,
        proposal: String::new(),
    }
}

pub(super) async fn add_job(
    svc: &Service,
    req: Request<v1::AddJobRequest>,
) -> Result<Response<v1::Job>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    if !r.proposal.is_empty() {
        svc.permit(&actor, who, "")?;
        return match svc.daemon.confirm_job(&actor, &r.proposal, !r.cancel)? {
            Some(job) => Ok(Response::new(job_to(&job))),
            None => Ok(Response::new(v1::Job {
                proposal: r.proposal,
                ..Default::default()
            })),
        };
    }
    let spec = spec_from(r.spec.unwrap_or_default())?;
    svc.permit(&actor, who, &spec.session)?;
    if r.propose {
        let (job, id) = svc.daemon.propose_job(&actor, spec)?;
        return Ok(Response::new(v1::Job {
            proposal: id,
            ..job_to(&job)
        }));
    }
    let job = svc.daemon.add_job(&actor, spec, r.replace)?;
    Ok(Response::new(job_to(&job)))
}

#[allow(clippy::result_large_err)]
pub(super) fn list_jobs(
    svc: &Service,
    req: Request<v1::ListJobsRequest>,
) -> Result<Response<v1::ListJobsResponse>, Status> {
    let actor = actor(&req);
    let jobs = svc
        .daemon
        .jobs()
        .list()
        .iter()
        .filter(|j| svc.daemon.check_job(&actor, &j.spec.name, false).is_ok())
        .map(job_to)
        .collect();
    Ok(Response::new(v1::ListJobsResponse { jobs }))
}

pub(super) async fn remove_job(
    svc: &Service,
    req: Request<v1::JobRequest>,
) -> Result<Response<v1::Job>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let name = req.into_inner().name;
    svc.permit(&actor, who, "")?;
    let job = svc.daemon.check_job(&actor, &name, true)?;
    if job.origin == Origin::Config {
        return Err(CoreError::JobInvalid(format!(
            "name: job {name:?} is defined in the config ([[jobs]]); remove it there and run clibotctl reload"
        ))
        .into());
    }
    let job = svc.daemon.jobs().remove(&name).map_err(CoreError::from)?;
    Ok(Response::new(job_to(&job)))
}

pub(super) async fn pause_job(
    svc: &Service,
    req: Request<v1::PauseJobRequest>,
) -> Result<Response<v1::Job>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    svc.permit(&actor, who, "")?;
    svc.daemon.check_job(&actor, &r.name, true)?;
    let job = svc
        .daemon
        .jobs()
        .set_paused(&r.name, r.paused, "", crate::store::now_ms())
        .map_err(CoreError::from)?;
    Ok(Response::new(job_to(&job)))
}

pub(super) async fn run_job(
    svc: &Service,
    req: Request<v1::JobRequest>,
) -> Result<Response<v1::RunJobResponse>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let name = req.into_inner().name;
    svc.permit(&actor, who, "")?;
    svc.daemon.check_job(&actor, &name, true)?;
    let started = svc
        .daemon
        .run_job(&name, crate::jobs::Trigger::Manual, "")
        .await?;
    Ok(Response::new(v1::RunJobResponse {
        run: started.run,
        session: started.session,
        skipped: started.skipped.is_some(),
        detail: started.skipped.unwrap_or_default(),
    }))
}

fn goal_to(g: &crate::jobs::goals::Goal) -> v1::Goal {
    v1::Goal {
        session: g.session.clone(),
        until: g.until.clone(),
        max_turns: g.max_turns,
        max_time_ms: g.max_time_ms,
        rounds: g.rounds,
        started_ms: g.started_ms,
        owner: g.owner.clone(),
    }
}

pub(super) async fn set_goal(
    svc: &Service,
    req: Request<v1::SetGoalRequest>,
) -> Result<Response<v1::Goal>, Status> {
    let (actor, who) = (actor(&req), rights(&req));
    let r = req.into_inner();
    svc.permit(&actor, who, &r.session)?;
    let goal = if r.off {
        svc.daemon.end_goal(
            &r.session,
            crate::model::GoalEnd::Off,
            &format!("by {}", actor.key()),
        )
    } else if r.until.is_empty() {
        svc.daemon.get(&r.session)?;
        svc.daemon.goals().get(&r.session)
    } else {
        Some(
            svc.daemon
                .set_goal(&actor, &r.session, &r.until, r.max_turns, r.max_time_ms)
                .await?,
        )
    };
    Ok(Response::new(goal.as_ref().map(goal_to).unwrap_or(
        v1::Goal {
            session: r.session,
            ..Default::default()
        },
    )))
}
