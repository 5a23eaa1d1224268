//! `jobs add|list|show|remove|pause|resume|run`: work that starts itself; `goal`: a session's
//! goal.

use clibot_proto::Client;
use clibot_proto::v1;
use serde_json::{Value, json};

use super::output::{ago, human, now_ms, print_json};

/// `jobs remove NAME`.
pub async fn remove(c: &mut Client, name: String) -> anyhow::Result<()> {
    c.remove_job(v1::JobRequest { name: name.clone() }).await?;
    println!("job {name} removed");
    Ok(())
}

/// `jobs run NAME`.
pub async fn run_now(c: &mut Client, name: String, json_out: bool) -> anyhow::Result<()> {
    let r = c
        .run_job(v1::JobRequest { name: name.clone() })
        .await?
        .into_inner();
    if json_out {
        return print_json(&json!({
            "job": name, "run": r.run, "session": r.session,
            "skipped": r.skipped, "detail": r.detail,
        }));
    }
    if r.skipped {
        println!(
            "job {name}: run {} skipped by its gate: {}",
            r.run, r.detail
        );
    } else {
        println!("job {name}: run {} started in {}", r.run, r.session);
    }
    Ok(())
}

/// `jobs add`: `spec` as the flags gave it; `secret`, a webhook secret made for it, is
/// printed once (the daemon never shows it again).
pub async fn add(
    c: &mut Client,
    spec: v1::JobSpec,
    secret: Option<String>,
    replace: bool,
    json_out: bool,
) -> anyhow::Result<()> {
    let job = c
        .add_job(v1::AddJobRequest {
            spec: Some(spec),
            replace,
            ..Default::default()
        })
        .await?
        .into_inner();
    if json_out {
        let mut v = job_json(&job);
        if let Some(s) = &secret {
            v["webhook_secret"] = json!(s);
        }
        return print_json(&v);
    }
    let name = job.spec.as_ref().map(|s| s.name.as_str()).unwrap_or("");
    println!("job {name} added; {}", next_words(&job));
    if let Some(s) = secret {
        println!(
            "webhook: POST /hooks/{name} on [triggers] listen, signed with this secret (shown once):\n  {s}"
        );
    }
    Ok(())
}

/// `jobs pause|resume NAME`.
pub async fn pause(c: &mut Client, name: &str, paused: bool) -> anyhow::Result<()> {
    let job = c
        .pause_job(v1::PauseJobRequest {
            name: name.to_string(),
            paused,
        })
        .await?
        .into_inner();
    if paused {
        println!("job {name} paused");
    } else {
        println!("job {name} resumed; {}", next_words(&job));
    }
    Ok(())
}

/// `jobs list`.
pub async fn list(c: &mut Client, json_out: bool) -> anyhow::Result<()> {
    let jobs = c.list_jobs(v1::ListJobsRequest {}).await?.into_inner().jobs;
    if json_out {
        return print_json(&Value::Array(jobs.iter().map(job_json).collect()));
    }
    if jobs.is_empty() {
        println!(
            "no jobs: clibotctl jobs add NAME --session S --prompt TEXT --every 1h (docs/JOBS.md)"
        );
        return Ok(());
    }
    println!(
        "{:<20} {:<22} {:<16} {:<30} MISSED/SKIPPED",
        "NAME", "WHEN", "TARGET", "STATE"
    );
    for j in &jobs {
        let Some(s) = j.spec.as_ref() else { continue };
        println!(
            "{:<20} {:<22} {:<16} {:<30} {}/{}",
            s.name,
            when_words(s),
            target_words(s),
            state_words(j),
            j.missed,
            j.skipped
        );
    }
    Ok(())
}

/// `jobs show NAME`.
pub async fn show(c: &mut Client, name: &str, json_out: bool) -> anyhow::Result<()> {
    let jobs = c.list_jobs(v1::ListJobsRequest {}).await?.into_inner().jobs;
    let Some(j) = jobs
        .iter()
        .find(|j| j.spec.as_ref().is_some_and(|s| s.name == name))
    else {
        anyhow::bail!("no job {name:?} (clibotctl jobs list shows them)");
    };
    if json_out {
        return print_json(&job_json(j));
    }
    let s = j.spec.clone().unwrap_or_default();
    println!("job {}  ({}, owner {})", s.name, j.origin, j.owner);
    println!("  when:    {}", when_words(&s));
    println!("  target:  {}", target_words(&s));
    println!("  prompt:  {}", s.prompt);
    if let Some(w) = &s.webhook {
        let mut m: Vec<String> = w.r#match.iter().map(|(k, v)| format!("{k}={v}")).collect();
        m.sort();
        println!(
            "  webhook: POST /hooks/{}{}{}",
            s.name,
            if w.fields.is_empty() {
                String::new()
            } else {
                format!("; fields {}", w.fields.join(", "))
            },
            if m.is_empty() {
                String::new()
            } else {
                format!("; only when {}", m.join(", "))
            }
        );
    }
    if !s.gate.is_empty() {
        println!("  gate:    {}", s.gate.join(" "));
    }
    println!(
        "  rules:   overlap {}, missed {}, max {} a day, pause after {} failures{}",
        or(&s.overlap, "skip"),
        or(&s.missed, "skip"),
        if s.max_runs_per_day == 0 {
            "∞".to_string()
        } else {
            s.max_runs_per_day.to_string()
        },
        if s.pause_after_failures == 0 {
            3
        } else {
            s.pause_after_failures
        },
        if s.quiet { ", quiet" } else { "" }
    );
    println!("  state:   {}", state_words(j));
    println!(
        "  runs:    {} ({} today); missed {}, skipped {}",
        j.runs, j.runs_today, j.missed, j.skipped
    );
    if let Some(l) = &j.last {
        println!(
            "  last:    run {} ({}) {} {} ago{}",
            l.run,
            l.trigger().name(),
            l.outcome().name(),
            ago(l.ended_ms),
            if l.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", l.detail)
            }
        );
    }
    if !j.last_miss.is_empty() {
        println!("  missed:  {}", j.last_miss);
    }
    Ok(())
}

fn or<'a>(s: &'a str, default: &'a str) -> &'a str {
    if s.is_empty() { default } else { s }
}

fn when_words(s: &v1::JobSpec) -> String {
    let tz = if s.tz.is_empty() {
        String::new()
    } else {
        format!(" {}", s.tz)
    };
    if !s.cron.is_empty() {
        format!("cron {}{tz}", s.cron)
    } else if !s.every.is_empty() {
        format!("every {}", s.every)
    } else if !s.at.is_empty() {
        format!("at {}{tz}", s.at)
    } else if !s.after.is_empty() {
        format!("after {}", s.after)
    } else if s.webhook.is_some() {
        "on its webhook".into()
    } else {
        format!("when {} is idle", s.when_idle)
    }
}

fn target_words(s: &v1::JobSpec) -> String {
    if s.session.is_empty() {
        format!("new {} in {}", s.cli, s.dir)
    } else {
        s.session.clone()
    }
}

/// "next in 25m", "running (run 3)", "paused: 3 failed runs in a row".
fn state_words(j: &v1::Job) -> String {
    if j.running_run > 0 {
        return format!("running (run {}) in {}", j.running_run, j.running_session);
    }
    if j.paused {
        return if j.paused_why.is_empty() {
            "paused".into()
        } else {
            format!("paused: {}", j.paused_why)
        };
    }
    next_words(j)
}

fn next_words(j: &v1::Job) -> String {
    if j.next_due_ms > 0 {
        let secs = ((j.next_due_ms - now_ms()).max(0) / 1000) as u64;
        format!("next in {}", human(std::time::Duration::from_secs(secs)))
    } else if j.spec.as_ref().is_some_and(|s| !s.when_idle.is_empty()) {
        "waits for its session to go idle".into()
    } else if j.spec.as_ref().is_some_and(|s| s.webhook.is_some()) {
        format!(
            "runs on POST /hooks/{}",
            j.spec.as_ref().map_or("", |s| s.name.as_str())
        )
    } else {
        "not due again".into()
    }
}

/// The JSON form (documented in docs/JOBS.md).
fn job_json(j: &v1::Job) -> Value {
    let s = j.spec.clone().unwrap_or_default();
    json!({
        "name": s.name, "session": s.session, "cli": s.cli, "dir": s.dir, "prompt": s.prompt,
        "cron": s.cron, "tz": s.tz, "every": s.every, "at": s.at, "after": s.after,
        "when_idle": s.when_idle, "gate": s.gate, "overlap": or(&s.overlap, "skip"),
        "missed_policy": or(&s.missed, "skip"), "max_runs_per_day": s.max_runs_per_day,
        "quiet": s.quiet, "pause_after_failures": s.pause_after_failures,
        "webhook": s.webhook.as_ref().map(|w| json!({
            "fields": w.fields, "match": w.r#match, "secret_set": w.secret_set,
        })),
        "origin": j.origin, "owner": j.owner, "paused": j.paused, "paused_why": j.paused_why,
        "next_due_ms": (j.next_due_ms > 0).then_some(j.next_due_ms),
        "runs": j.runs, "runs_today": j.runs_today, "failures_in_row": j.failures_in_row,
        "missed": j.missed, "skipped": j.skipped, "last_miss": j.last_miss,
        "running": (j.running_run > 0).then(|| json!({"run": j.running_run, "session": j.running_session})),
        "last": j.last.as_ref().map(|l| json!({
            "run": l.run, "trigger": l.trigger().name(), "started_ms": l.started_ms,
            "ended_ms": l.ended_ms, "outcome": l.outcome().name(), "detail": l.detail,
        })),
    })
}

/// `goal NAME [--until CMD] [--max-turns N] [--max-time D] [--off]`.
pub async fn goal(
    c: &mut Client,
    name: String,
    until: Option<String>,
    (max_turns, max_time): (u32, Option<String>),
    off: bool,
    json_out: bool,
) -> anyhow::Result<()> {
    let max_time_ms = match max_time {
        Some(t) => clibot_proto::duration::parse_duration(&t)
            .map_err(|e| anyhow::anyhow!("--max-time: {e}"))?
            .as_millis() as u64,
        None => 0,
    };
    let setting = until.is_some();
    let g = c
        .set_goal(v1::SetGoalRequest {
            session: name.clone(),
            until: until.unwrap_or_default(),
            max_turns,
            max_time_ms,
            off,
        })
        .await?
        .into_inner();
    if json_out {
        return print_json(&json!({
            "session": g.session, "until": (!g.until.is_empty()).then_some(&g.until),
            "max_turns": g.max_turns, "max_time_ms": g.max_time_ms, "rounds": g.rounds,
            "started_ms": (g.started_ms > 0).then_some(g.started_ms), "owner": g.owner,
        }));
    }
    match (off, setting, g.until.is_empty()) {
        (true, _, true) => println!("{name} has no goal"),
        (true, _, false) => println!(
            "{name}'s goal `{}` is off after {} rounds",
            g.until, g.rounds
        ),
        (false, true, _) => println!(
            "{name} works until `{}` succeeds (at most {} rounds, {}); checking now",
            g.until,
            g.max_turns,
            human(std::time::Duration::from_millis(g.max_time_ms))
        ),
        (false, false, true) => println!("{name} has no goal"),
        (false, false, false) => println!(
            "{name} works until `{}` succeeds: round {} of at most {}, started {} ago",
            g.until,
            g.rounds,
            g.max_turns,
            ago(g.started_ms)
        ),
    }
    Ok(())
}
