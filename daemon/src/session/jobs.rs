//! Running jobs: their clock, a run from its gate to its turn's end, and what ends a run.
//!
//! Why the clock sleeps to the next due time and no longer than a minute: due times are on
//! the wall clock, which a suspended machine or a changed time zone moves under a sleeping
//! task; the minute's cap is the slow safety net, the due time is the push. Why a run is
//! followed on the bus: a run ends when its turn does (or its CLI errs, or ends), which only
//! the session's events say — the table is told, and the chats hear it as `job_finished`.

use std::time::Duration;

use jiff::Timestamp;

use crate::core::bus::Subscriber;
use crate::core::{Daemon, SpawnRequest};
use crate::error::CoreError;
use crate::jobs::spec::Target;
use crate::jobs::table::{Due, NoRun};
use crate::jobs::{JobSpec, Outcome, Trigger};
use crate::model::{Actor, SessionRecord};
use crate::session::job_gate::Gate;
use crate::store::events::{Event, EventKind};
use crate::store::now_ms;

/// The longest the clock sleeps between two looks.
const CLOCK_MAX_SLEEP: Duration = Duration::from_secs(60);

/// A run that started: its number and the session it types into; `skipped` says why its
/// gate said there was nothing to do (the run then ended at once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunStarted {
    pub run: u64,
    pub session: String,
    pub skipped: Option<String>,
}

/// Follows the sessions' events for the jobs and goals: a run's turn that ended ends the run;
/// a session's turn that ended with nothing queued starts its `when_idle` jobs; a session's
/// goal is checked after each turn and stopped when a person is needed.
pub(crate) struct JobWatch;

impl Subscriber for JobWatch {
    fn name(&self) -> &'static str {
        "jobs"
    }

    fn on_event(&self, d: &Daemon, ev: &Event) {
        let session = ev.session.as_str();
        if session.is_empty() {
            return;
        }
        d.goal_follows(session, &ev.kind);
        let ended = match &ev.kind {
            EventKind::InputSent { text, .. } => {
                d.jobs().typed_into(session, text);
                return;
            }
            EventKind::TurnCompleted { text, .. } => {
                Some((Outcome::Done, String::new(), text.trim().is_empty()))
            }
            EventKind::TurnCancelled { by, .. } => {
                Some((Outcome::Cancelled, format!("cancelled by {by}"), false))
            }
            EventKind::Error { message, .. } => Some((Outcome::Failed, message.clone(), false)),
            EventKind::Exited { .. } | EventKind::Stopped { .. } => {
                Some((Outcome::Failed, "the session ended".into(), false))
            }
            _ => None,
        };
        let Some((outcome, detail, empty)) = ended else {
            return;
        };
        let runs = d.jobs().typed_in(session);
        for (job, run) in &runs {
            let (d, job, run, detail) = (d.clone(), job.clone(), *run, detail.clone());
            let session = session.to_string();
            d.clone().in_background(async move {
                d.end_job_run(&job, run, &session, outcome, &detail, empty);
            });
        }
        if !matches!(ev.kind, EventKind::TurnCompleted { .. }) {
            return;
        }
        // A turn that ended with nothing queued: the session is idle. A job's turn starts no
        // `when_idle` job: jobs that start each other would loop, or chain without end.
        let idle = d.queued(session).is_ok_and(|q| q.is_empty());
        if !idle || !runs.is_empty() {
            return;
        }
        for job in d.jobs().on_idle_of(session) {
            let d2 = d.clone();
            d.in_background(async move {
                if let Err(e) = d2.run_job(&job, Trigger::Idle, "").await {
                    tracing::info!(job, "an idle job did not run: {e}");
                }
            });
        }
    }
}

impl Daemon {
    /// The jobs' clock: runs what is due until the daemon stops (see the module's notes).
    pub async fn job_clock(&self) {
        let stop = self.shutdown_token().clone();
        loop {
            for due in self.jobs().take_due(now_ms()) {
                self.job_due(due);
            }
            let wait = self.jobs().next_wake().map_or(CLOCK_MAX_SLEEP, |at| {
                Duration::from_millis(
                    (at - now_ms()).clamp(10, CLOCK_MAX_SLEEP.as_millis() as i64) as u64,
                )
            });
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.jobs().changed() => {}
                _ = stop.cancelled() => return,
            }
        }
    }

    /// A job the clock says is due: told when missed, run when it should.
    fn job_due(&self, due: Due) {
        if due.missed > 0 {
            let session = self.job_session(&due.name);
            self.job_event(
                &session,
                EventKind::JobMissed {
                    job: due.name.clone(),
                    due_ms: due.due_ms,
                    count: due.missed,
                    ran: due.run,
                },
            );
        }
        if !due.run {
            return;
        }
        let d = self.clone();
        self.in_background(async move {
            if let Err(e) = d.run_job(&due.name, due.trigger, "").await {
                tracing::info!(job = %due.name, "a due job did not run: {e}");
            }
        });
    }

    /// The session a job's events go to: the one it types into; for a job that starts
    /// sessions, the one its run in flight started (empty: none).
    fn job_session(&self, name: &str) -> String {
        self.jobs().get(name).map_or_else(String::new, |j| {
            if !j.spec.session.is_empty() {
                j.spec.session
            } else {
                j.running.map(|r| r.session).unwrap_or_default()
            }
        })
    }

    fn job_event(&self, session: &str, kind: EventKind) {
        let id = self.sessions().id_of(session).unwrap_or_default();
        self.event(session, &id, kind);
    }

    /// Runs job `name` now: its owner's access checked, its gate run, its prompt (with
    /// `added`, what a webhook's delivery brought) typed into its session (queued behind a
    /// running turn) or a new session started for it. The run then ends with its turn (the
    /// `JobWatch` subscriber).
    pub async fn run_job(
        &self,
        name: &str,
        trigger: Trigger,
        added: &str,
    ) -> Result<RunStarted, CoreError> {
        let started = match self.jobs().begin(name, trigger, now_ms()) {
            Ok(s) => s,
            Err(no) => {
                if !matches!(no, NoRun::NoSuchJob(_)) {
                    self.job_event(
                        &self.job_session(name),
                        EventKind::JobSkipped {
                            job: name.to_string(),
                            reason: no.to_string(),
                        },
                    );
                }
                return Err(no.into());
            }
        };
        let run = started.run;
        let fail = |d: &Daemon, session: &str, why: String| {
            d.end_job_run(name, run, session, Outcome::Failed, &why, false);
            CoreError::JobFailed(why)
        };
        // A job acts with its owner's rights: one whose owner lost access stops.
        if let Some(actor) = Actor::from_key(&started.owner).filter(|a| !a.is_local())
            && self.access().known(&actor.platform, &actor.user).is_none()
        {
            let why = format!("its owner {} no longer has access", started.owner);
            let _ = self.jobs().set_paused(name, true, &why, now_ms());
            return Err(fail(self, &started.spec.session, why));
        }
        let checked = started
            .spec
            .check(Timestamp::now(), true)
            .map_err(|e| fail(self, &started.spec.session, e))?;
        let rec = match &checked.target {
            Target::Session(s) => self.get(s).map_err(|e| fail(self, s, e.to_string()))?,
            Target::New { cli, dir } => SessionRecord {
                id: format!("job-{name}"),
                name: format!("{name}-{run}"),
                cli: cli.clone(),
                dir: crate::paths::expand_home(std::path::Path::new(dir)),
                owner: if started.owner == Actor::LOCAL {
                    String::new()
                } else {
                    started.owner.clone()
                },
                ..Default::default()
            },
        };
        let mut prompt = started.spec.prompt.clone();
        if !added.is_empty() {
            prompt.push_str("\n\n");
            prompt.push_str(added);
        }
        if !started.spec.gate.is_empty() {
            let gate = self
                // Jailed as the target's session is, whoever owns the job: the gate runs in
                // that session's directory, among files its CLI may have written.
                .run_gate(&rec.owner, &rec, &started.spec.gate)
                .await
                .map_err(|e| fail(self, &started.spec.session, e.to_string()))?;
            match gate {
                Gate::Run(out) if !out.is_empty() => {
                    prompt.push_str("\n\n");
                    prompt.push_str(&out);
                }
                Gate::Run(_) => {}
                Gate::Skip(why) => {
                    self.end_job_run(
                        name,
                        run,
                        &started.spec.session,
                        Outcome::GateSkipped,
                        &why,
                        true,
                    );
                    return Ok(RunStarted {
                        run,
                        session: started.spec.session.clone(),
                        skipped: Some(why),
                    });
                }
                Gate::Failed(why) => return Err(fail(self, &started.spec.session, why)),
            }
        }
        let session = match &checked.target {
            Target::Session(s) => s.clone(),
            Target::New { cli, dir } => {
                self.spawn(SpawnRequest {
                    name: rec.name.clone(),
                    cli: cli.clone(),
                    dir: dir.clone(),
                    owner: if started.owner == Actor::LOCAL {
                        String::new()
                    } else {
                        started.owner.clone()
                    },
                    ..Default::default()
                })
                .await
                .map_err(|e| fail(self, "", e.to_string()))?
                .name
            }
        };
        self.jobs().typing(name, run, &session, &prompt, false);
        self.job_event(
            &session,
            EventKind::JobStarted {
                job: name.to_string(),
                run,
                trigger,
                prompt: prompt.clone(),
            },
        );
        let mut actor = Actor::from_key(&started.owner).unwrap_or_else(Actor::local);
        actor.via = format!("job:{name}");
        let sent = self
            .send_input_once(
                &session,
                &prompt,
                true,
                &format!("job:{name}:{run}"),
                &format!("job:{name}"),
            )
            .await;
        match sent {
            Ok(_) => {
                self.audit(&actor, &session, "job run", Ok(()));
                Ok(RunStarted {
                    run,
                    session,
                    skipped: None,
                })
            }
            Err(e) => {
                self.audit(&actor, &session, "job run", Err(&e.to_string()));
                Err(fail(self, &session, e.to_string()))
            }
        }
    }

    /// Run `run` of job `name` ended: the table told, the chats of `session` too (unless the
    /// job is quiet and had nothing to say), and the job paused when it failed too often.
    pub(crate) fn end_job_run(
        &self,
        name: &str,
        run: u64,
        session: &str,
        outcome: Outcome,
        detail: &str,
        nothing_said: bool,
    ) {
        let quiet = self.jobs().get(name).is_some_and(|j| j.spec.quiet);
        let Some(ended) = self.jobs().finish(name, run, outcome, detail, now_ms()) else {
            return;
        };
        self.job_event(
            session,
            EventKind::JobFinished {
                job: name.to_string(),
                run,
                outcome,
                detail: detail.to_string(),
                quiet: quiet && nothing_said && !ended.paused_now,
                paused: ended.paused_now,
            },
        );
    }

    /// Adds a job for `actor`: admins and the machine's user any; a chat user one that types
    /// into a session they own.
    pub fn add_job(
        &self,
        actor: &Actor,
        spec: JobSpec,
        replace: bool,
    ) -> Result<crate::jobs::table::Job, CoreError> {
        self.vet_job(actor, &spec)?;
        self.jobs()
            .add(
                spec,
                &actor.key(),
                crate::jobs::table::Origin::Added,
                now_ms(),
                replace,
            )
            .map_err(CoreError::JobInvalid)
    }

    /// Checks a job `actor` proposes from a chat as `add_job` would, and keeps it for its
    /// card's Add button: the job as it would be (its next due time) and the card's id. A
    /// webhook job is not proposed from a chat: its secret would pass through the chat.
    pub fn propose_job(
        &self,
        actor: &Actor,
        spec: JobSpec,
    ) -> Result<(crate::jobs::table::Job, String), CoreError> {
        if spec.webhook.is_some() {
            return Err(CoreError::JobInvalid(
                "webhook: webhook jobs are added on the machine (clibotctl jobs add --webhook): their secret must not pass through a chat".into(),
            ));
        }
        self.vet_job(actor, &spec)?;
        let now = now_ms();
        let checked = spec
            .check(
                Timestamp::from_millisecond(now).unwrap_or(Timestamp::UNIX_EPOCH),
                false,
            )
            .map_err(CoreError::JobInvalid)?;
        if self.jobs().get(&spec.name).is_some() {
            return Err(CoreError::JobInvalid(format!(
                "name: a job {:?} exists (!!job remove {} first, or choose another name)",
                spec.name, spec.name
            )));
        }
        let added = Timestamp::from_millisecond(now).unwrap_or(Timestamp::UNIX_EPOCH);
        let preview = crate::jobs::table::Job {
            next_due_ms: checked
                .when
                .next_after(added, added)
                .map_or(0, |t| t.as_millisecond()),
            spec: spec.clone(),
            owner: actor.key(),
            added_ms: now,
            ..Default::default()
        };
        let id = self.jobs().proposals().propose(spec, &actor.key(), now);
        Ok((preview, id))
    }

    /// The Add (`accept`) or Cancel button of job card `id`, pressed by `actor` (its proposer
    /// only): the job added — its rights checked again, as they may have changed since —
    /// or `None` when cancelled.
    pub fn confirm_job(
        &self,
        actor: &Actor,
        id: &str,
        accept: bool,
    ) -> Result<Option<crate::jobs::table::Job>, CoreError> {
        let p = self
            .jobs()
            .proposals()
            .take(id, &actor.key(), now_ms())
            .map_err(|e| CoreError::JobInvalid(e.to_string()))?;
        if !accept {
            return Ok(None);
        }
        self.add_job(actor, p.spec, false).map(Some)
    }

    /// What `add_job` and `propose_job` check before a job exists: its sessions, its CLI, its
    /// gate's program, and that `actor` may add it.
    fn vet_job(&self, actor: &Actor, spec: &JobSpec) -> Result<(), CoreError> {
        for (field, session) in [("session", &spec.session), ("when_idle", &spec.when_idle)] {
            if !session.is_empty() && self.get(session).is_err() {
                return Err(CoreError::JobInvalid(format!(
                    "{field}: no session named {session:?} (clibotctl list shows them)"
                )));
            }
        }
        if !spec.cli.is_empty() {
            self.cli(&spec.cli)
                .map_err(|e| CoreError::JobInvalid(format!("cli: {e}")))?;
        }
        if let Some(program) = spec.gate.first() {
            let global = self.global_path().unwrap_or_default();
            if !crate::jobs::spec::runnable(program, &global) {
                return Err(CoreError::JobInvalid(format!(
                    "gate: {program:?} is not an executable program here (nor on tmux's PATH): give its full path"
                )));
            }
        }
        if !self.is_admin(actor) {
            if spec.session.is_empty() {
                return Err(CoreError::JobInvalid(
                    "session: only admins add jobs that start sessions; name a session of yours"
                        .into(),
                ));
            }
            self.check_owner(actor, &spec.session, true)?;
        }
        Ok(())
    }

    /// Pauses at once the jobs whose owner lost access (revoked, or dropped from the config),
    /// each said in its session's chats, rather than at their next run: a revoked user's work
    /// must not stay scheduled.
    pub fn pause_jobs_of_lost_owners(&self) {
        for job in self.jobs().list() {
            let lost = Actor::from_key(&job.owner)
                .filter(|a| !a.is_local())
                .is_some_and(|a| self.access().known(&a.platform, &a.user).is_none());
            if !lost || job.paused {
                continue;
            }
            let name = job.spec.name.clone();
            let why = format!("its owner {} no longer has access", job.owner);
            if self.jobs().set_paused(&name, true, &why, now_ms()).is_ok() {
                tracing::info!(job = %name, "paused: {why}");
                self.job_event(
                    &self.job_session(&name),
                    EventKind::Notice {
                        text: format!("⏰ job {name} paused: {why}"),
                        kind: "job".into(),
                    },
                );
            }
        }
    }

    /// Whether `actor` may change or run job `name` (`manage`), or see it: admins and the
    /// machine's user every job; a chat user their own jobs, and the jobs that type into a
    /// session they own (to see: one they may use). Anyone else is told there is no such job.
    pub fn check_job(
        &self,
        actor: &Actor,
        name: &str,
        manage: bool,
    ) -> Result<crate::jobs::table::Job, CoreError> {
        let job = self
            .jobs()
            .get(name)
            .ok_or_else(|| NoRun::NoSuchJob(name.to_string()))?;
        let target = &job.spec.session;
        let theirs = self.is_admin(actor)
            || job.owner == actor.key()
            || (!target.is_empty() && self.check_owner(actor, target, manage).is_ok());
        if theirs {
            Ok(job)
        } else {
            Err(NoRun::NoSuchJob(name.to_string()).into())
        }
    }
}
