//! A job as people write it (`[[jobs]]`, `clibotctl jobs add`, `!!job add`), and what it
//! means once checked: when it is due and what it does.
//!
//! Every check names the field that is wrong and says what would be right, because a job is
//! written once and then runs while nobody watches: a mistake must be caught when it is
//! written, not at 3 a.m.

use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

use super::cron::Cron;
use crate::duration::parse_duration;

/// The most bytes of a job's prompt.
pub const MAX_PROMPT: usize = 16 * 1024;
/// The shortest `every`: a job is no busy loop.
pub const MIN_EVERY: Duration = Duration::from_secs(60);
/// Failed runs in a row after which a job pauses itself, unless its spec says otherwise.
pub const PAUSE_AFTER_FAILURES: u32 = 3;

/// What a run does when the job's previous run has not ended yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// The run is skipped (said in `jobs list` and the events).
    #[default]
    Skip,
    /// The prompt is queued behind the running turn.
    Queue,
    /// Runs anyway: a new session beside the one still running (for a job that starts
    /// sessions; one typing into a session queues).
    Parallel,
}

/// What a run that was due while the daemon was down (or the machine asleep) does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Missed {
    /// Not run: told as missed, and the job waits for its next time.
    #[default]
    Skip,
    /// Run once, now, however many times it was missed (never a catch-up storm).
    RunOnce,
}

/// A job as written. Exactly one of `cron`, `every`, `at`, `after`, `when_idle`, `webhook`
/// says when;
/// exactly one of `session` and `cli` says where.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobSpec {
    pub name: String,
    /// A session to type the prompt into (queued behind its running turn).
    pub session: String,
    /// Or a CLI to start a new session of, in `dir`, for each run.
    pub cli: String,
    pub dir: String,
    /// What is typed.
    pub prompt: String,
    /// Five cron fields, in `tz`.
    pub cron: String,
    /// An IANA time zone ("Europe/Berlin") for `cron` and `at`; empty: the machine's.
    pub tz: String,
    /// Every so long ("30m"), from when the job was added.
    pub every: String,
    /// Once, at this local time ("2026-12-01T09:00") in `tz`.
    pub at: String,
    /// Once, this long after the job was added ("2h").
    pub after: String,
    /// The next time this session ends a turn with nothing queued (again each time).
    pub when_idle: String,
    /// A program run first in the target's directory: exit 0 runs the job with its output
    /// added to the prompt, 1 skips the run quietly, anything else fails it.
    pub gate: Vec<String>,
    pub overlap: Overlap,
    pub missed: Missed,
    /// At most this many runs a day (in `tz`); 0: no limit.
    pub max_runs_per_day: u32,
    /// Report a run only when its reply is not empty or its gate said something.
    pub quiet: bool,
    /// Pause after this many failed runs in a row; 0: the default (3).
    pub pause_after_failures: u32,
    /// Or when a signed delivery comes to `/hooks/NAME` (`[triggers] listen`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook: Option<super::webhook::Webhook>,
}

/// When a job is due.
#[derive(Debug, Clone)]
pub enum When {
    Cron {
        cron: Cron,
        tz: TimeZone,
    },
    Every(Duration),
    /// Once, at this instant.
    At(Timestamp),
    /// Once, this long after the job was added.
    After(Duration),
    /// Each time this session ends a turn with nothing queued.
    WhenIdle(String),
    /// Each time a signed delivery comes to its webhook.
    Webhook,
}

/// Where a run goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Session(String),
    New { cli: String, dir: String },
}

/// A job's spec, checked.
#[derive(Debug, Clone)]
pub struct Checked {
    pub when: When,
    pub target: Target,
}

impl JobSpec {
    /// Checks every field; `now` decides whether an `at` lies in the past (only when the job
    /// is first added: `past_ok` for one read back from the store or the config).
    pub fn check(&self, now: Timestamp, past_ok: bool) -> Result<Checked, String> {
        check_name(&self.name)?;
        if self.prompt.trim().is_empty() {
            return Err("prompt: a job needs a prompt to type".into());
        }
        if self.prompt.len() > MAX_PROMPT {
            return Err(format!(
                "prompt: {} bytes; at most {MAX_PROMPT}",
                self.prompt.len()
            ));
        }
        if self
            .prompt
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
        {
            return Err("prompt: control characters are not typed; write plain text".into());
        }
        let target = match (self.session.is_empty(), self.cli.is_empty()) {
            (false, true) if self.dir.is_empty() => Target::Session(self.session.clone()),
            (false, true) => {
                return Err(
                    "dir: a job that types into a session takes no dir (the session has one)"
                        .into(),
                );
            }
            (true, false) => Target::New {
                cli: self.cli.clone(),
                dir: self.dir.clone(),
            },
            (false, false) => {
                return Err(
                    "session, cli: name either a session to type into or a CLI to start, not both"
                        .into(),
                );
            }
            (true, true) => {
                return Err("session: name a session to type into (or cli and dir to start one for each run)".into());
            }
        };
        let tz = match self.tz.as_str() {
            "" => TimeZone::system(),
            name => TimeZone::get(name).map_err(|_| {
                format!("tz: {name:?} is no time zone known here: use an IANA name such as \"Europe/Berlin\" or \"America/New_York\"")
            })?,
        };
        let mut whens = Vec::new();
        if !self.cron.is_empty() {
            let cron = Cron::parse(&self.cron).map_err(|e| format!("cron: {e}"))?;
            whens.push(When::Cron {
                cron,
                tz: tz.clone(),
            });
        }
        if !self.every.is_empty() {
            let d = parse_duration(&self.every).map_err(|e| format!("every: {e}"))?;
            if d < MIN_EVERY {
                return Err(format!("every: {:?} is shorter than a minute", self.every));
            }
            whens.push(When::Every(d));
        }
        if !self.at.is_empty() {
            let dt: jiff::civil::DateTime = self.at.parse().map_err(|_| {
                format!(
                    "at: {:?} is not a local time: write it as 2026-12-01T09:00",
                    self.at
                )
            })?;
            let ts = tz
                .to_ambiguous_timestamp(dt)
                .compatible()
                .map_err(|e| format!("at: {e}"))?;
            if !past_ok && ts <= now {
                return Err(format!("at: {} is in the past", self.at));
            }
            whens.push(When::At(ts));
        }
        if !self.after.is_empty() {
            let d = parse_duration(&self.after).map_err(|e| format!("after: {e}"))?;
            whens.push(When::After(d));
        }
        if !self.when_idle.is_empty() {
            check_name(&self.when_idle).map_err(|e| e.replacen("name", "when_idle", 1))?;
            whens.push(When::WhenIdle(self.when_idle.clone()));
        }
        if let Some(hook) = &self.webhook {
            hook.check()?;
            whens.push(When::Webhook);
        }
        let when = match whens.len() {
            1 => whens.remove(0),
            0 => {
                return Err("cron, every, at, after, when_idle, webhook: say when the job runs (e.g. cron = \"0 9 * * 1-5\" or every = \"30m\")".into());
            }
            _ => {
                return Err(
                    "cron, every, at, after, when_idle, webhook: give only one of them".into(),
                );
            }
        };
        if let Some(first) = self.gate.first()
            && first.trim().is_empty()
        {
            return Err("gate: the first word is the program to run".into());
        }
        if !self.gate.is_empty() && self.gate.iter().any(|w| w.contains('\0')) {
            return Err("gate: a word holds a NUL byte".into());
        }
        Ok(Checked { when, target })
    }

    /// How many failed runs in a row pause the job.
    pub fn failures_to_pause(&self) -> u32 {
        match self.pause_after_failures {
            0 => PAUSE_AFTER_FAILURES,
            n => n,
        }
    }

    /// The time zone its days are counted in (`max_runs_per_day`).
    pub fn zone(&self) -> TimeZone {
        TimeZone::get(&self.tz).unwrap_or_else(|_| TimeZone::system())
    }
}

/// Whether `program` can be run: an executable file at its path, or one found on `path`.
pub fn runnable(program: &str, path: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(std::path::Path::new(program));
    }
    let search = format!("{path}:/usr/local/bin:/usr/bin:/bin");
    search
        .split(':')
        .filter(|d| !d.is_empty())
        .any(|d| executable(&std::path::Path::new(d).join(program)))
}

/// A job's name: 1 to 64 letters, digits, `-`, `_` and `.`, as a session's.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "name: {name:?} is no job name: 1 to 64 letters, digits, '-', '_' or '.'"
        ));
    }
    Ok(())
}

impl When {
    /// The first time after `after` the job is due; `added` is when it was added (for
    /// `every` and `after`); `None`: never again by the clock (a one-off that ran, or
    /// `when_idle`).
    pub fn next_after(&self, after: Timestamp, added: Timestamp) -> Option<Timestamp> {
        match self {
            When::Cron { cron, tz } => cron.next_after(after, tz),
            When::Every(d) => {
                let step = d.as_millis().max(1) as i64;
                let from = added.as_millisecond();
                let since = after.as_millisecond() - from;
                // The next step of the job's own rhythm strictly after `after`.
                let k = if since < 0 { 0 } else { since / step + 1 };
                Timestamp::from_millisecond(from + k * step).ok()
            }
            When::At(t) => (*t > after).then_some(*t),
            When::After(d) => {
                let t = Timestamp::from_millisecond(
                    added.as_millisecond() + d.as_millis().min(i64::MAX as u128) as i64,
                )
                .ok()?;
                (t > after).then_some(t)
            }
            When::WhenIdle(_) | When::Webhook => None,
        }
    }

    /// Whether it runs once only.
    pub fn once(&self) -> bool {
        matches!(self, When::At(_) | When::After(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> JobSpec {
        JobSpec {
            name: "nightly".into(),
            session: "s".into(),
            prompt: "run the tests".into(),
            every: "30m".into(),
            ..Default::default()
        }
    }

    fn now() -> Timestamp {
        "2026-11-29T10:00:00Z".parse().expect("instant")
    }

    #[test]
    fn bad_fields_are_named() {
        type Change = Box<dyn Fn(&mut JobSpec)>;
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(|s: &mut JobSpec| s.name = "a b".into()), "name:"),
            (Box::new(|s: &mut JobSpec| s.prompt.clear()), "prompt:"),
            (
                Box::new(|s: &mut JobSpec| s.cron = "0 9 * * *".into()),
                "only one",
            ),
            (
                Box::new(|s: &mut JobSpec| {
                    s.every.clear();
                    s.cron = "0 9 * *".into()
                }),
                "cron: ",
            ),
            (
                Box::new(|s: &mut JobSpec| {
                    s.every.clear();
                    s.cron = "0 9 * * *".into();
                    s.tz = "Mars/Olympus".into()
                }),
                "tz: ",
            ),
            (
                Box::new(|s: &mut JobSpec| {
                    s.every.clear();
                    s.at = "2020-01-01T09:00".into()
                }),
                "at: 2020-01-01T09:00 is in the past",
            ),
            (
                Box::new(|s: &mut JobSpec| {
                    s.every.clear();
                    s.at = "tomorrow".into()
                }),
                "at: ",
            ),
            (
                Box::new(|s: &mut JobSpec| s.every = "10s".into()),
                "every: ",
            ),
            (
                Box::new(|s: &mut JobSpec| s.every = "soon".into()),
                "every: ",
            ),
            (Box::new(|s: &mut JobSpec| s.every.clear()), "say when"),
            (
                Box::new(|s: &mut JobSpec| s.cli = "claude".into()),
                "not both",
            ),
            (Box::new(|s: &mut JobSpec| s.session.clear()), "session: "),
            (
                Box::new(|s: &mut JobSpec| s.gate = vec![String::new()]),
                "gate: ",
            ),
        ];
        for (change, says) in cases {
            let mut s = spec();
            change(&mut s);
            let e = s.check(now(), false).expect_err(says);
            assert!(e.contains(says), "{says}: {e}");
        }
        assert!(spec().check(now(), false).is_ok());
    }

    #[test]
    fn every_keeps_its_own_rhythm() {
        let when = When::Every(Duration::from_secs(1800));
        let added = now();
        let t = |s: &str| -> Timestamp { s.parse().expect("instant") };
        assert_eq!(
            when.next_after(added, added),
            Some(t("2026-11-29T10:30:00Z"))
        );
        // Long after (the daemon was down): the next step of the rhythm, not a catch-up.
        assert_eq!(
            when.next_after(t("2026-11-29T13:10:00Z"), added),
            Some(t("2026-11-29T13:30:00Z"))
        );
    }

    #[test]
    fn one_offs_are_due_once() {
        let added = now();
        let when = When::After(Duration::from_secs(7200));
        let due = when.next_after(added, added).expect("due");
        assert_eq!(due, "2026-11-29T12:00:00Z".parse().expect("instant"));
        assert_eq!(when.next_after(due, added), None);
        assert!(when.once());
    }
}
