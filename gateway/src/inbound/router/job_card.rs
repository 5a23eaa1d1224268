//! `!!job add …`: the job is checked by the daemon and shown on a card with **Add** and
//! **Cancel** before it exists; the card's id is the daemon's (it keeps the proposal), so a
//! gateway restarted between the card and the press loses nothing.

use clibot_gateway::command::job_add;
use clibot_proto::v1;

use super::{Router, age_words};
use crate::platforms::Inbound;

/// The pseudo prompt id of a job card's buttons: `j.ID`.
pub(crate) const JOB_CARD: &str = "j.";

/// A job spec from the fields a chat wrote; numbers and words checked here, the rest by the
/// daemon (each error names its field).
fn spec_of(name: &str, fields: &[(String, String)]) -> Result<v1::JobSpec, String> {
    let mut s = v1::JobSpec {
        name: name.to_string(),
        ..Default::default()
    };
    let number = |k: &str, v: &str| -> Result<u32, String> {
        v.parse()
            .map_err(|_| format!("{k}: {v:?} is not a whole number"))
    };
    for (k, v) in fields {
        let v = v.clone();
        match k.as_str() {
            "session" => s.session = v,
            "cli" => s.cli = v,
            "dir" => s.dir = v,
            "cron" => s.cron = v,
            "tz" => s.tz = v,
            "every" => s.every = v,
            "at" => s.at = v,
            "after" => s.after = v,
            "when_idle" => s.when_idle = v,
            "gate" => s.gate = job_add::words(&v)?,
            "overlap" => s.overlap = v,
            "missed" => s.missed = v,
            "max_runs_per_day" => s.max_runs_per_day = number(k, &v)?,
            "pause_after_failures" => s.pause_after_failures = number(k, &v)?,
            "quiet" => {
                s.quiet = match v.to_ascii_lowercase().as_str() {
                    "true" | "yes" | "on" | "1" => true,
                    "false" | "no" | "off" | "0" => false,
                    _ => return Err(format!("quiet: {v:?} is neither true nor false")),
                }
            }
            "prompt" => s.prompt = v,
            other => return Err(format!("{other:?} is no job field")),
        }
    }
    Ok(s)
}

/// When a job runs, in a few words: "every 1h", "when idle: api", "on its webhook".
pub(super) fn when_words(s: &v1::JobSpec) -> String {
    [
        ("cron ", &s.cron),
        ("every ", &s.every),
        ("at ", &s.at),
        ("after ", &s.after),
        ("when idle: ", &s.when_idle),
    ]
    .into_iter()
    .find(|(_, v)| !v.is_empty())
    .map(|(k, v)| format!("{k}{v}"))
    .unwrap_or_else(|| {
        if s.webhook.is_some() {
            "on its webhook".into()
        } else {
            String::new()
        }
    })
}

/// What the card says: the job as the daemon read it.
fn card_text(j: &v1::Job, now_ms: i64) -> String {
    let s = j.spec.clone().unwrap_or_default();
    let when = when_words(&s);
    let tz = if s.tz.is_empty() {
        String::new()
    } else {
        format!(" ({})", s.tz)
    };
    let next = if j.next_due_ms > 0 {
        let secs = (j.next_due_ms - now_ms).max(0) / 1000;
        format!("; first run in {}", age_words(secs))
    } else {
        String::new()
    };
    let target = if s.session.is_empty() {
        format!("a new {} session in {}", s.cli, s.dir)
    } else {
        s.session.clone()
    };
    let mut t = format!(
        "⏰ Add job {}?\n• when: {when}{tz}{next}\n• into: {target}\n• prompt: {}",
        s.name, s.prompt
    );
    if !s.gate.is_empty() {
        t.push_str(&format!("\n• gate: {}", s.gate.join(" ")));
    }
    let mut rules = Vec::new();
    if !s.overlap.is_empty() && s.overlap != "skip" {
        rules.push(format!("overlap {}", s.overlap));
    }
    if !s.missed.is_empty() && s.missed != "skip" {
        rules.push(format!("missed {}", s.missed));
    }
    if s.max_runs_per_day > 0 {
        rules.push(format!("at most {} a day", s.max_runs_per_day));
    }
    if s.quiet {
        rules.push("quiet".into());
    }
    if !rules.is_empty() {
        t.push_str(&format!("\n• {}", rules.join(", ")));
    }
    t.push_str("\nIt runs unattended, answered by your rules; the card expires in 15 minutes.");
    t
}

impl Router {
    /// `!!job add NAME …`: the card, or the daemon's reason it cannot be added.
    pub(super) async fn job_card(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        name: &str,
        fields: &[(String, String)],
    ) -> Result<Option<String>, tonic::Status> {
        let spec = match spec_of(name, fields) {
            Ok(s) => s,
            Err(e) => return Ok(Some(format!("job {name} not added: {e}"))),
        };
        let req = v1::AddJobRequest {
            spec: Some(spec),
            propose: true,
            ..Default::default()
        };
        let job = c.add_job(self.req(msg, req)).await?.into_inner();
        let text = card_text(&job, crate::ops::health::now_ms());
        let text = self.platform.redact(&text).into_owned();
        let id = format!("{JOB_CARD}{}", job.proposal);
        let options = ["Add".to_string(), "Cancel".to_string()];
        match self
            .platform
            .send_prompt(&msg.chat, &id, &text, &options)
            .await
        {
            Ok(_) => Ok(None),
            Err(e) => Ok(Some(format!(
                "the job's card could not be sent ({e}); nothing was added"
            ))),
        }
    }

    /// A press on a job card's Add (`1`) or Cancel.
    pub(super) async fn job_card_answer(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        id: &str,
        choice: &str,
    ) -> Result<String, tonic::Status> {
        let req = v1::AddJobRequest {
            proposal: id.to_string(),
            cancel: choice != "1",
            ..Default::default()
        };
        let job = c.add_job(self.req(msg, req)).await?.into_inner();
        if !job.proposal.is_empty() {
            return Ok("not added".into());
        }
        let name = job.spec.as_ref().map_or("", |s| s.name.as_str());
        let next = if job.next_due_ms > 0 {
            let secs = (job.next_due_ms - crate::ops::health::now_ms()).max(0) / 1000;
            format!("; first run in {}", age_words(secs))
        } else {
            String::new()
        };
        Ok(format!(
            "⏰ job {name} added{next} ({}jobs lists it, {}job pause {name} pauses it)",
            self.parser.prefix(),
            self.parser.prefix()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_become_the_spec_and_bad_numbers_name_their_field() {
        let f = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let s = spec_of(
            "n",
            &f(&[
                ("session", "api"),
                ("every", "1h"),
                ("gate", "sh -c 'test -f x'"),
                ("quiet", "yes"),
                ("max_runs_per_day", "4"),
                ("prompt", "go"),
            ]),
        )
        .expect("spec");
        assert_eq!(
            (
                s.session.as_str(),
                s.every.as_str(),
                s.quiet,
                s.max_runs_per_day
            ),
            ("api", "1h", true, 4)
        );
        assert_eq!(s.gate, ["sh", "-c", "test -f x"]);
        let e = spec_of("n", &f(&[("max_runs_per_day", "many")])).expect_err("number");
        assert!(e.starts_with("max_runs_per_day"), "{e}");
        let e = spec_of("n", &f(&[("quiet", "perhaps")])).expect_err("bool");
        assert!(e.starts_with("quiet"), "{e}");
        let card = card_text(
            &v1::Job {
                spec: Some(s),
                next_due_ms: 3_600_000,
                ..Default::default()
            },
            0,
        );
        assert!(
            card.contains("⏰ Add job n?") && card.contains("every 1h"),
            "{card}"
        );
        assert!(
            card.contains("into: api") && card.contains("gate: sh -c test -f x"),
            "{card}"
        );
        assert!(card.contains("at most 4 a day, quiet"), "{card}");
    }
}
