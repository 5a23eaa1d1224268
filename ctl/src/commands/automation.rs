//! `automation report`: what became of the automatic answers, per rule and for the decider,
//! as a table (and the latest answers), or as JSON.

use clibot_proto::Client;
use clibot_proto::v1;
use serde_json::{Value, json};

use super::output::{ago, print_json};

/// `automation report`.
pub async fn report(c: &mut Client, json: bool) -> anyhow::Result<()> {
    let r = c
        .automation_report(v1::AutomationReportRequest {})
        .await?
        .into_inner();
    if json {
        return print_json(&report_json(&r));
    }
    print!("{}", report_text(&r, ago));
    Ok(())
}

/// The JSON form (documented in docs/AUTOMATION.md).
pub fn report_json(r: &v1::AutomationReportResponse) -> Value {
    json!({
        "since_ms": r.since_ms,
        "rows": r.rows.iter().map(|x| json!({
            "by": x.by, "index": x.index, "about": x.about, "configured": x.configured,
            "answers": x.answers, "approved": x.approved, "denied": x.denied,
            "outcomes": {
                "completed": x.completed, "errored": x.errored,
                "undone": x.undone, "pending": x.pending,
            },
            "left_to_person": x.left_to_person,
            "last_fired_ms": (x.last_fired_ms > 0).then_some(x.last_fired_ms),
        })).collect::<Vec<_>>(),
        "recent": r.recent.iter().map(|a| json!({
            "time_ms": a.time_ms, "session": a.session, "by": a.by, "subject": a.subject,
            "approved": a.approved, "answer": a.answer, "outcome": a.outcome,
            "outcome_ms": (a.outcome_ms > 0).then_some(a.outcome_ms), "detail": a.detail,
        })).collect::<Vec<_>>(),
    })
}

/// Latest answers shown under the table.
const SHOWN: usize = 10;

/// The table for people; `age` renders a time as "5m" (ago).
pub fn report_text(r: &v1::AutomationReportResponse, age: impl Fn(i64) -> String) -> String {
    let mut out = String::new();
    if r.rows.is_empty() {
        out.push_str("no [[rules]] and no [decider]: every prompt waits for a person\n");
    }
    let header = [
        "WHO",
        "ANSWERS",
        "APPROVED",
        "DENIED",
        "COMPLETED",
        "ERRORED",
        "UNDONE",
        "PENDING",
        "TO A PERSON",
        "LAST FIRED",
        "WHAT",
    ]
    .map(String::from);
    let rows: Vec<[String; 11]> = r
        .rows
        .iter()
        .map(|x| {
            let who = match (x.by.as_str(), x.configured) {
                ("decider", true) => "decider".to_string(),
                ("decider", false) => "decider (gone)".to_string(),
                (_, true) => format!("rule {}", x.index),
                (_, false) => format!("rule {} (gone)", x.index),
            };
            let last = if x.last_fired_ms > 0 {
                format!("{} ago", age(x.last_fired_ms))
            } else {
                "never".to_string()
            };
            [
                who,
                x.answers.to_string(),
                x.approved.to_string(),
                x.denied.to_string(),
                x.completed.to_string(),
                x.errored.to_string(),
                x.undone.to_string(),
                x.pending.to_string(),
                x.left_to_person.to_string(),
                last,
                x.about.clone(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        let mut widths = header.clone().map(|h| h.chars().count());
        for row in &rows {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        for row in std::iter::once(&header).chain(&rows) {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
    }
    if r.since_ms > 0 {
        out.push_str(&format!("counted since {} ago\n", age(r.since_ms)));
    }
    if !r.recent.is_empty() {
        out.push_str("latest answers:\n");
        for a in r.recent.iter().rev().take(SHOWN) {
            let mut outcome = a.outcome.clone();
            if !a.detail.is_empty() {
                outcome.push_str(&format!(" ({})", one_line(&a.detail, 80)));
            }
            out.push_str(&format!(
                "  {} ago  {}  {}: {} {} → {}\n",
                age(a.time_ms),
                a.session,
                a.by,
                if a.approved { "approved" } else { "denied" },
                one_line(&a.subject, 80),
                outcome
            ));
        }
    }
    out
}

fn one_line(s: &str, max: usize) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > max {
        format!("{}…", s.chars().take(max).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_reads_per_rule_then_the_latest_answers() {
        let r = v1::AutomationReportResponse {
            since_ms: 1,
            rows: vec![
                v1::AutomationRow {
                    by: "rule".into(),
                    index: 1,
                    about: "allow when cli=asker kind=permission|confirm command=git status".into(),
                    configured: true,
                    answers: 2,
                    approved: 2,
                    completed: 1,
                    undone: 1,
                    last_fired_ms: 5,
                    ..Default::default()
                },
                v1::AutomationRow {
                    by: "rule".into(),
                    index: 4,
                    about: "deny when kind=permission|confirm subject=/^make/".into(),
                    configured: false,
                    ..Default::default()
                },
                v1::AutomationRow {
                    by: "decider".into(),
                    about: "python3 decide.py".into(),
                    configured: true,
                    answers: 1,
                    approved: 1,
                    pending: 1,
                    left_to_person: 3,
                    last_fired_ms: 7,
                    ..Default::default()
                },
            ],
            recent: vec![v1::AutomationAnswer {
                time_ms: 5,
                session: "rs".into(),
                by: "rule 1".into(),
                subject: "git   status".into(),
                approved: true,
                answer: "y".into(),
                outcome: "undone".into(),
                outcome_ms: 6,
                detail: "C-c".into(),
            }],
        };
        let text = report_text(&r, |ms| format!("{ms}m"));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "WHO            ANSWERS  APPROVED  DENIED  COMPLETED  ERRORED  UNDONE  PENDING  TO A PERSON  LAST FIRED  WHAT"
        );
        assert_eq!(
            lines[1],
            "rule 1         2        2         0       1          0        1       0        0            5m ago      allow when cli=asker kind=permission|confirm command=git status"
        );
        assert!(lines[2].starts_with("rule 4 (gone)  0 "), "{text}");
        assert!(lines[2].contains("never"), "{text}");
        assert!(lines[3].starts_with("decider        1 "), "{text}");
        assert_eq!(lines[4], "counted since 1m ago");
        assert_eq!(lines[5], "latest answers:");
        assert_eq!(
            lines[6],
            "  5m ago  rs  rule 1: approved git status → undone (C-c)"
        );
        let j = report_json(&r);
        assert_eq!(j["rows"][0]["outcomes"]["undone"], 1);
        assert_eq!(j["rows"][1]["last_fired_ms"], Value::Null);
        assert_eq!(j["rows"][2]["left_to_person"], 3);
        assert_eq!(j["recent"][0]["outcome"], "undone");
        let empty = report_text(&v1::AutomationReportResponse::default(), |_| String::new());
        assert_eq!(
            empty,
            "no [[rules]] and no [decider]: every prompt waits for a person\n"
        );
    }
}
