//! The jobs' table: every job, what it did and when it is due next, kept in `jobs.json` in
//! the state directory behind one lock that only this file takes.
//!
//! Why the due time is written before a run starts: a daemon killed between "due" and
//! "done" must neither run the job again on restart nor forget it ran. The file is replaced
//! atomically with the next due time and the run marked as started, and only then is the run
//! made: at most once, always accounted for.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::proposals::Proposals;
use super::spec::{JobSpec, Missed, Overlap, When};
use super::webhook::SeenIds;
pub use crate::model::{JobOutcome as Outcome, JobTrigger as Trigger};
use crate::store::json_file::JsonFile;

/// A run this late (the machine asleep, the daemon stalled) was missed; one due before the
/// daemon started was missed whatever its lateness.
pub const LATE_MS: i64 = 60_000;
/// The most jobs kept.
pub const MAX_JOBS: usize = 256;

/// Where a job came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `[[jobs]]` in the config: replaced on reload, removed with its entry.
    Config,
    /// `clibotctl jobs add` or `!!job add`.
    #[default]
    Added,
}

/// A run in flight.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Running {
    pub run: u64,
    pub trigger: Trigger,
    pub started_ms: i64,
    /// The session it types into, once known.
    pub session: String,
    /// The head of what it types, to know its turn when it was queued behind others.
    pub text_head: String,
    /// Its input was typed: the session's next turn end is the run's.
    pub typed: bool,
}

/// The last run that ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastRun {
    pub run: u64,
    pub trigger: Trigger,
    pub started_ms: i64,
    pub ended_ms: i64,
    pub outcome: Outcome,
    #[serde(default)]
    pub detail: String,
}

/// One job and what it did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Job {
    pub spec: JobSpec,
    pub origin: Origin,
    /// Who added it ("local" or "PLATFORM:USER"): its runs act with their rights.
    pub owner: String,
    pub added_ms: i64,
    pub paused: bool,
    /// Why it paused itself (failures, its owner's access); empty when a person paused it.
    pub paused_why: String,
    /// When it is due next (ms since the epoch); 0: not by the clock.
    pub next_due_ms: i64,
    /// Runs started so far (the next run's number is one more).
    pub runs: u64,
    pub running: Option<Running>,
    /// The local day (in its zone) `runs_today` counts.
    pub day: String,
    pub runs_today: u32,
    pub failures_in_row: u32,
    pub missed: u64,
    pub skipped: u64,
    pub last: Option<LastRun>,
    /// The time a run was last missed or skipped, and why.
    pub last_miss: String,
}

/// A run the clock says is due now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub name: String,
    /// Run it (false: only say it was missed).
    pub run: bool,
    pub trigger: Trigger,
    /// When it was due.
    pub due_ms: i64,
    /// How many times it was missed (0: on time).
    pub missed: u64,
}

/// Why a run does not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoRun {
    #[error("no job {0:?} (clibotctl jobs list shows them)")]
    NoSuchJob(String),
    #[error("job {0:?} is paused (clibotctl jobs resume {0})")]
    Paused(String),
    #[error("job {0:?} still runs (run {1}): overlap = \"skip\"")]
    StillRunning(String, u64),
    #[error("job {0:?} ran {1} times today: max_runs_per_day = {1}")]
    DailyLimit(String, u32),
}

/// A run that started: what the runner needs.
#[derive(Debug, Clone)]
pub struct Started {
    pub run: u64,
    pub spec: JobSpec,
    pub owner: String,
}

/// A run that ended: whether the job paused itself for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub paused_now: bool,
    pub failures_in_row: u32,
}

#[derive(Default, Serialize, Deserialize)]
#[serde(default)]
struct File {
    jobs: BTreeMap<String, Job>,
}

/// The table and its file.
pub struct Jobs {
    file: JsonFile,
    /// When this daemon opened the table: a due time before it fell while no daemon ran.
    opened_ms: i64,
    jobs: Mutex<BTreeMap<String, Job>>,
    /// Woken when a job is added, changed or removed: the clock looks again.
    changed: tokio::sync::Notify,
    /// The webhook deliveries taken (their ids), against replays.
    deliveries: Mutex<SeenIds>,
    /// Jobs proposed from a chat, waiting for their button.
    proposals: Proposals,
}

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The local day of `ms` in the job's zone, "2026-11-29".
fn day_of(spec: &JobSpec, ms: i64) -> String {
    ts(ms).to_zoned(spec.zone()).date().to_string()
}

/// When `job` is due next after `after_ms` (0: not by the clock).
fn next_due(job: &Job, when: &When, after_ms: i64) -> i64 {
    when.next_after(ts(after_ms), ts(job.added_ms))
        .map_or(0, |t| t.as_millisecond())
}

impl Jobs {
    /// Reads `jobs.json` in `state_dir`; one that cannot be parsed is set aside and the table
    /// starts empty, said in the warning.
    pub fn open(state_dir: &Path, now_ms: i64) -> (Jobs, Option<String>) {
        let (file, json, warning): (File, _, _) = JsonFile::open(
            state_dir,
            "jobs.json",
            "the jobs",
            "jobs added by clibotctl or a chat are lost until restored",
        );
        // A job whose spec no longer checks (a zone removed from the machine) stays listed,
        // paused, rather than lost.
        let mut jobs = file.jobs;
        for (name, j) in jobs.iter_mut() {
            j.spec.name = name.clone();
            if let Err(e) = j.spec.check(ts(now_ms), true) {
                j.paused = true;
                j.paused_why = e;
            }
        }
        let (deliveries, seen_warning) = SeenIds::open(state_dir);
        let (proposals, proposals_warning) = Proposals::open(state_dir);
        let warnings: Vec<String> = [warning, seen_warning, proposals_warning]
            .into_iter()
            .flatten()
            .collect();
        let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
        (
            Jobs {
                file: json,
                opened_ms: now_ms,
                jobs: Mutex::new(jobs),
                changed: tokio::sync::Notify::new(),
                deliveries: Mutex::new(deliveries),
                proposals,
            },
            warning,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Job>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The jobs proposed from chats, waiting for their button.
    pub fn proposals(&self) -> &Proposals {
        &self.proposals
    }

    /// Takes webhook delivery `id` for job `name`: false when it was taken before (a replay).
    pub fn take_delivery(&self, name: &str, id: &str, now_ms: i64) -> bool {
        self.deliveries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(name, id, now_ms)
    }

    /// Writes the table (under its lock, so that an older state never lands last).
    fn save(&self, jobs: &BTreeMap<String, Job>) {
        self.file.save(&File { jobs: jobs.clone() });
    }

    /// Waits until a job is added, changed or removed.
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    /// Every job, by name.
    pub fn list(&self) -> Vec<Job> {
        self.lock().values().cloned().collect()
    }

    pub fn get(&self, name: &str) -> Option<Job> {
        self.lock().get(name).cloned()
    }

    /// Adds a job (or replaces one of the same name when `replace`), checked; its first due
    /// time counts from `now_ms`.
    pub fn add(
        &self,
        spec: JobSpec,
        owner: &str,
        origin: Origin,
        now_ms: i64,
        replace: bool,
    ) -> Result<Job, String> {
        let checked = spec.check(ts(now_ms), origin == Origin::Config)?;
        let mut jobs = self.lock();
        let old = jobs.get(&spec.name);
        if let Some(old) = old {
            if !replace {
                return Err(format!(
                    "name: a job {:?} exists (clibotctl jobs remove {} first, or add it with --replace)",
                    spec.name, spec.name
                ));
            }
            if old.origin == Origin::Config && origin == Origin::Added {
                return Err(format!(
                    "name: job {:?} is defined in the config; change it there",
                    spec.name
                ));
            }
        } else if jobs.len() >= MAX_JOBS {
            return Err(format!("at most {MAX_JOBS} jobs; remove one first"));
        }
        let mut job = Job {
            spec: spec.clone(),
            origin,
            owner: owner.to_string(),
            added_ms: now_ms,
            ..Default::default()
        };
        // Replacing keeps the job's history and whatever runs.
        if let Some(old) = old {
            job.runs = old.runs;
            job.running = old.running.clone();
            job.last = old.last.clone();
            job.missed = old.missed;
            job.skipped = old.skipped;
            job.paused = old.paused && old.paused_why.is_empty();
            // A config job reloaded unchanged keeps its rhythm and its next time.
            if old.spec == spec {
                job.added_ms = old.added_ms;
                job.next_due_ms = old.next_due_ms;
                job.day = old.day.clone();
                job.runs_today = old.runs_today;
                job.failures_in_row = old.failures_in_row;
                job.paused = old.paused;
                job.paused_why = old.paused_why.clone();
            }
        }
        if job.next_due_ms == 0 {
            job.next_due_ms = next_due(&job, &checked.when, now_ms);
        }
        jobs.insert(spec.name.clone(), job.clone());
        self.save(&jobs);
        drop(jobs);
        self.changed.notify_one();
        Ok(job)
    }

    /// Makes the config's jobs the table's `Config` jobs: new ones added, changed ones
    /// replaced, those no longer in the config removed. Returns what could not be taken.
    pub fn sync_config(&self, specs: &[JobSpec], now_ms: i64) -> Vec<String> {
        let mut problems = Vec::new();
        let stale: Vec<String> = self
            .lock()
            .values()
            .filter(|j| j.origin == Origin::Config && !specs.iter().any(|s| s.name == j.spec.name))
            .map(|j| j.spec.name.clone())
            .collect();
        for name in stale {
            let _ = self.remove(&name);
        }
        for spec in specs {
            if let Some(old) = self.get(&spec.name)
                && old.origin == Origin::Added
            {
                problems.push(format!(
                    "[[jobs]] {:?}: a job of that name was added by {}; it is kept (remove it to use the config's)",
                    spec.name, old.owner
                ));
                continue;
            }
            if let Err(e) = self.add(
                spec.clone(),
                crate::model::Actor::LOCAL,
                Origin::Config,
                now_ms,
                true,
            ) {
                problems.push(format!("[[jobs]] {:?}: {e}", spec.name));
            }
        }
        problems
    }

    pub fn remove(&self, name: &str) -> Result<Job, NoRun> {
        let mut jobs = self.lock();
        let job = jobs
            .remove(name)
            .ok_or_else(|| NoRun::NoSuchJob(name.to_string()))?;
        self.save(&jobs);
        drop(jobs);
        self.changed.notify_one();
        Ok(job)
    }

    /// Pauses or resumes a job; `why` says why it paused itself (empty: a person did).
    /// Resuming counts its next time from `now_ms` and forgets its failures.
    pub fn set_paused(
        &self,
        name: &str,
        paused: bool,
        why: &str,
        now_ms: i64,
    ) -> Result<Job, NoRun> {
        let mut jobs = self.lock();
        let job = jobs
            .get_mut(name)
            .ok_or_else(|| NoRun::NoSuchJob(name.to_string()))?;
        job.paused = paused;
        job.paused_why = if paused {
            why.to_string()
        } else {
            String::new()
        };
        if !paused {
            job.failures_in_row = 0;
            if let Ok(c) = job.spec.check(ts(now_ms), true)
                && (job.next_due_ms == 0 || job.next_due_ms < now_ms)
            {
                job.next_due_ms = next_due(job, &c.when, now_ms);
            }
        }
        let job = job.clone();
        self.save(&jobs);
        drop(jobs);
        self.changed.notify_one();
        Ok(job)
    }

    /// The earliest time a job is due (ms since the epoch).
    pub fn next_wake(&self) -> Option<i64> {
        self.lock()
            .values()
            .filter(|j| !j.paused && j.next_due_ms > 0)
            .map(|j| j.next_due_ms)
            .min()
    }

    /// The runs due at `now_ms`, each job's next time moved on and saved before they are
    /// returned (see the module's notes). A run due before the daemon started, or more than
    /// [`LATE_MS`] late, was missed: with
    /// `missed = "skip"` it is only told; with `run_once` it runs once however many times it
    /// was missed. The next time counts from now, so a long sleep never becomes a storm.
    pub fn take_due(&self, now_ms: i64) -> Vec<Due> {
        let mut jobs = self.lock();
        let mut due = Vec::new();
        for job in jobs.values_mut() {
            if job.paused || job.next_due_ms == 0 || job.next_due_ms > now_ms {
                continue;
            }
            let Ok(checked) = job.spec.check(ts(now_ms), true) else {
                continue;
            };
            let due_ms = job.next_due_ms;
            let late = due_ms < self.opened_ms || now_ms - due_ms > LATE_MS;
            if late {
                // How many times it fell due meanwhile (at most a thousand are counted).
                let mut missed = 1u64;
                let mut t = due_ms;
                while missed < 1000 {
                    let n = next_due(job, &checked.when, t);
                    if n == 0 || n > now_ms {
                        break;
                    }
                    missed += 1;
                    t = n;
                }
                job.missed += missed;
                job.last_miss = format!("due {} ({} missed)", ts(due_ms), missed);
                let run = job.spec.missed == Missed::RunOnce;
                job.next_due_ms = next_due(job, &checked.when, now_ms);
                due.push(Due {
                    name: job.spec.name.clone(),
                    run,
                    trigger: Trigger::Late,
                    due_ms,
                    missed,
                });
            } else {
                job.next_due_ms = next_due(job, &checked.when, due_ms.max(now_ms));
                due.push(Due {
                    name: job.spec.name.clone(),
                    run: true,
                    trigger: Trigger::Schedule,
                    due_ms,
                    missed: 0,
                });
            }
        }
        if !due.is_empty() {
            self.save(&jobs);
        }
        due
    }

    /// Starts run of job `name`, unless its rules say no (paused, still running with
    /// `overlap = "skip"`, its daily limit reached); a refusal is counted as a skip.
    pub fn begin(&self, name: &str, trigger: Trigger, now_ms: i64) -> Result<Started, NoRun> {
        let mut jobs = self.lock();
        let job = jobs
            .get_mut(name)
            .ok_or_else(|| NoRun::NoSuchJob(name.to_string()))?;
        let refusal = if job.paused && trigger != Trigger::Manual {
            Some(NoRun::Paused(name.to_string()))
        } else if let Some(r) = job
            .running
            .as_ref()
            .filter(|_| job.spec.overlap == Overlap::Skip)
        {
            Some(NoRun::StillRunning(name.to_string(), r.run))
        } else {
            let today = day_of(&job.spec, now_ms);
            if job.day != today {
                job.day = today;
                job.runs_today = 0;
            }
            let max = job.spec.max_runs_per_day;
            (max > 0 && job.runs_today >= max && trigger != Trigger::Manual)
                .then(|| NoRun::DailyLimit(name.to_string(), max))
        };
        if let Some(no) = refusal {
            job.skipped += 1;
            job.last_miss = format!("{} skipped: {no}", ts(now_ms));
            self.save(&jobs);
            return Err(no);
        }
        job.runs += 1;
        job.runs_today += 1;
        job.running = Some(Running {
            run: job.runs,
            trigger,
            started_ms: now_ms,
            ..Default::default()
        });
        let started = Started {
            run: job.runs,
            spec: job.spec.clone(),
            owner: job.owner.clone(),
        };
        self.save(&jobs);
        Ok(started)
    }

    /// Run `run` of job `name` types `text` into `session` (typed now, or queued).
    pub fn typing(&self, name: &str, run: u64, session: &str, text: &str, typed: bool) {
        let mut jobs = self.lock();
        if let Some(r) = jobs
            .get_mut(name)
            .and_then(|j| j.running.as_mut())
            .filter(|r| r.run == run)
        {
            r.session = session.to_string();
            r.text_head = text.chars().take(200).collect();
            r.typed = typed;
            self.save(&jobs);
        }
    }

    /// Input typed into `session`: the runs whose queued text it is are typed now.
    pub fn typed_into(&self, session: &str, text: &str) {
        let mut jobs = self.lock();
        let mut changed = false;
        for r in jobs.values_mut().filter_map(|j| j.running.as_mut()) {
            if r.session == session
                && !r.typed
                && !r.text_head.is_empty()
                && text.starts_with(&r.text_head)
            {
                r.typed = true;
                changed = true;
            }
        }
        if changed {
            self.save(&jobs);
        }
    }

    /// The runs whose turn in `session` is the running one: (job, run).
    pub fn typed_in(&self, session: &str) -> Vec<(String, u64)> {
        self.lock()
            .values()
            .filter_map(|j| {
                let r = j.running.as_ref()?;
                (r.session == session && r.typed).then(|| (j.spec.name.clone(), r.run))
            })
            .collect()
    }

    /// The jobs that run when `session` ends a turn with nothing queued.
    pub fn on_idle_of(&self, session: &str) -> Vec<String> {
        self.lock()
            .values()
            .filter(|j| !j.paused && j.spec.when_idle == session)
            .map(|j| j.spec.name.clone())
            .collect()
    }

    /// Run `run` of job `name` ended: its failures in a row counted, and the job paused when
    /// they reach its limit. `None` when that run is not the one in flight.
    pub fn finish(
        &self,
        name: &str,
        run: u64,
        outcome: Outcome,
        detail: &str,
        now_ms: i64,
    ) -> Option<Ended> {
        let mut jobs = self.lock();
        let job = jobs.get_mut(name)?;
        let running = job.running.take_if(|r| r.run == run)?;
        job.last = Some(LastRun {
            run,
            trigger: running.trigger,
            started_ms: running.started_ms,
            ended_ms: now_ms,
            outcome,
            detail: detail.chars().take(500).collect(),
        });
        match outcome {
            Outcome::Failed => job.failures_in_row += 1,
            Outcome::Done | Outcome::GateSkipped => job.failures_in_row = 0,
            Outcome::Cancelled => {}
        }
        let limit = job.spec.failures_to_pause();
        let paused_now = outcome == Outcome::Failed && job.failures_in_row >= limit && !job.paused;
        if paused_now {
            job.paused = true;
            job.paused_why = format!("{} failed runs in a row", job.failures_in_row);
        }
        let ended = Ended {
            paused_now,
            failures_in_row: job.failures_in_row,
        };
        self.save(&jobs);
        Some(ended)
    }
}

#[cfg(test)]
mod tests;
