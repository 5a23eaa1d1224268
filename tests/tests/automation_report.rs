//! End to end with the real daemon: what follows each automatic answer is kept and reported.
//! A rule approves a prompt of a bash CLI and the turn completes; the same rule's next approval
//! is followed by an error; another rule's approval is undone by C-c within a minute; an `ask`
//! rule leaves a prompt to a person; the decider approves one whose turn completes.
//! `clibotctl automation report --json` shows each per rule and for the decider, and so it does
//! after the daemon restarted.

use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::asker::ASK_FN;
use serde_json::Value;

/// A bash whose `Run: COMMAND [y/n]` lines are permission prompts about COMMAND, and whose
/// "connection refused" is an error.
const ASKER: &str = r#"
[cli.asker]
argv = ["bash", "--norc", "--noprofile"]
env = { PS1 = "$ ", HISTFILE = "/dev/null" }
submit_delay_ms = 50
quiet_ms = 300

[cli.asker.patterns]
check_lines = 3
prompts = [
  { kind = "permission", pattern = '(?m)^Run: .+ \[y/n\]\s*$', options = ["y", "n"], answer = "line", subject = '(?m)^Run: (.+?) \[y/n\]\s*$' },
]
errors = [{ kind = "network", pattern = '(?i)connection refused' }]

[[rules]]
cli = "asker"
command = ["git status"]
action = "allow"

[[rules]]
cli = "asker"
command = ["make build"]
action = "allow"

[[rules]]
subject = '^deploy'
action = "ask"
"#;

fn report(h: &Harness) -> Value {
    serde_json::from_str(&h.ctl_ok(&["automation", "report", "--json"])).expect("report is JSON")
}

/// The report's row for rule `index` (0: the decider).
fn row(r: &Value, index: u64) -> Value {
    r["rows"]
        .as_array()
        .and_then(|rows| {
            rows.iter().find(|x| {
                if index == 0 {
                    x["by"] == "decider"
                } else {
                    x["by"] == "rule" && x["index"] == index
                }
            })
        })
        .cloned()
        .unwrap_or_else(|| panic!("no row {index} in {r:#}"))
}

/// (answers, approved, denied, completed, errored, undone, pending, left to a person).
fn tally(x: &Value) -> [u64; 8] {
    let n = |v: &Value| v.as_u64().unwrap_or(u64::MAX);
    let o = &x["outcomes"];
    [
        n(&x["answers"]),
        n(&x["approved"]),
        n(&x["denied"]),
        n(&o["completed"]),
        n(&o["errored"]),
        n(&o["undone"]),
        n(&o["pending"]),
        n(&x["left_to_person"]),
    ]
}

/// Waits until the report satisfies `pred`.
fn wait_report(h: &Harness, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = report(h);
        if pred(&r) {
            return r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; report:\n{r:#}\nevents:\n{:#?}\nlog:\n{}",
            h.events(),
            h.daemon_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn resolved_by(h: &Harness, by: &str, subject_seen: &str) {
    h.wait_event("rs", by, Duration::from_secs(20), |e| {
        e["type"] == "prompt_resolved" && e["by"] == by
    });
    h.wait_screen("rs", subject_seen, |s| s.contains(subject_seen));
}

#[test]
fn the_report_shows_what_followed_each_automatic_answer_and_survives_a_restart() {
    let mut h = Harness::with_config(ASKER);
    let script = h.dir.path().join("decide.py");
    std::fs::write(
        &script,
        "import json, sys\njson.load(sys.stdin)\nprint(json.dumps({\"choice\": \"y\", \"note\": \"fine\"}))\n",
    )
    .expect("decider");
    let mut text = std::fs::read_to_string(&h.config).expect("config");
    text.push_str(&format!(
        "\n[decider]\ncommand = [\"python3\", {:?}]\ntimeout_ms = 10000\n",
        script.display().to_string()
    ));
    std::fs::write(&h.config, text).expect("config");
    h.start_daemon();

    // Nothing fired yet: every rule and the decider are listed, with nothing counted.
    let r = report(&h);
    assert_eq!(r["rows"].as_array().map(Vec::len), Some(4), "{r:#}");
    assert_eq!(
        row(&r, 1)["about"],
        "allow when cli=asker kind=permission|confirm command=git status"
    );
    assert_eq!(row(&r, 1)["configured"], true);
    assert_eq!(row(&r, 1)["last_fired_ms"], Value::Null);
    assert_eq!(tally(&row(&r, 0)), [0; 8]);

    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "rs", "--cli", "asker", "--dir", &work]);
    h.wait_screen("rs", "the shell", |s| s.contains("$"));
    h.ctl_ok(&["send", "rs", ASK_FN]);

    // Rule 1 approves; the turn completes.
    h.ctl_ok(&["send", "rs", "ask 'git status'"]);
    resolved_by(&h, "rule 1", "decided git status: y");
    wait_report(&h, "rule 1's completed turn", |r| {
        tally(&row(r, 1)) == [1, 1, 0, 1, 0, 0, 0, 0]
    });

    // Rule 1 again; an error follows.
    h.ctl_ok(&[
        "send",
        "rs",
        "ask 'git status' && echo \"Error: connection $(echo refused)\"",
    ]);
    h.wait_event("rs", "the error", Duration::from_secs(20), |e| {
        e["type"] == "error" && e["kind"] == "network"
    });
    wait_report(&h, "rule 1's errored turn", |r| {
        tally(&row(r, 1)) == [2, 2, 0, 1, 1, 0, 0, 0]
    });

    // Rule 2 approves a build that runs on; C-c within the minute undoes it.
    h.ctl_ok(&["send", "rs", "ask 'make build' && sleep 30"]);
    resolved_by(&h, "rule 2", "decided make build: y");
    let r = wait_report(&h, "rule 2's answer pending", |r| {
        tally(&row(r, 2)) == [1, 1, 0, 0, 0, 0, 1, 0]
    });
    assert!(row(&r, 2)["last_fired_ms"].as_i64().is_some_and(|t| t > 0));
    h.ctl_ok(&["keys", "rs", "C-c"]);
    wait_report(&h, "rule 2's answer undone", |r| {
        tally(&row(r, 2)) == [1, 1, 0, 0, 0, 1, 0, 0]
    });
    h.wait_list("rs idle again", |l| {
        l.as_array()
            .and_then(|a| a.iter().find(|s| s["name"] == "rs"))
            .is_some_and(|s| s["state"] == "idle")
    });

    // No rule answers this one: the decider approves, and the turn completes.
    h.ctl_ok(&["send", "rs", "ask 'ls src'"]);
    resolved_by(&h, "decider", "decided ls src: y");
    wait_report(&h, "the decider's completed turn", |r| {
        tally(&row(r, 0)) == [1, 1, 0, 1, 0, 0, 0, 0]
    });

    // Rule 3 leaves this one to a person.
    h.ctl_ok(&["send", "rs", "ask 'deploy prod'"]);
    h.wait_event(
        "rs",
        "the prompt for a person",
        Duration::from_secs(20),
        |e| e["type"] == "waiting" && e["subject"] == "deploy prod",
    );
    let r = wait_report(&h, "rule 3 left it to a person", |r| {
        tally(&row(r, 3)) == [0, 0, 0, 0, 0, 0, 0, 1]
    });
    h.ctl_ok(&["answer", "rs", "n"]);

    // The latest answers, oldest first, each with what followed it.
    let recent: Vec<(String, String, String)> = r["recent"]
        .as_array()
        .expect("recent")
        .iter()
        .map(|a| {
            (
                a["by"].as_str().unwrap_or("").to_string(),
                a["subject"].as_str().unwrap_or("").to_string(),
                a["outcome"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want = [
        ("rule 1", "git status", "completed"),
        ("rule 1", "git status", "errored"),
        ("rule 2", "make build", "undone"),
        ("decider", "ls src", "completed"),
    ]
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
    assert_eq!(recent, want, "{r:#}");
    assert_eq!(r["recent"][2]["detail"], "C-c");
    assert_eq!(r["recent"][2]["answer"], "y");
    assert_eq!(r["recent"][2]["approved"], true);
    assert_eq!(
        r["recent"][1]["detail"],
        "network: Error: connection refused"
    );
    assert_eq!(r["recent"][0]["session"], "rs");

    // For people: a table per rule, then the latest answers.
    let table = h.ctl_ok(&["automation", "report"]);
    // Who, then answers, approved, denied, completed, errored, undone, pending, to a person.
    let line = |who: &str| {
        let words = who.split_whitespace().count();
        table
            .lines()
            .find(|l| l.starts_with(&format!("{who} ")))
            .unwrap_or_else(|| panic!("no {who} in:\n{table}"))
            .split_whitespace()
            .take(words + 8)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(table.starts_with("WHO "), "{table}");
    assert_eq!(line("rule 1"), "rule 1 2 2 0 1 1 0 0 0");
    assert_eq!(line("rule 2"), "rule 2 1 1 0 0 0 1 0 0");
    assert_eq!(line("rule 3"), "rule 3 0 0 0 0 0 0 0 1");
    assert_eq!(line("decider"), "decider 1 1 0 1 0 0 0 0");
    assert!(
        table.contains("rs  rule 2: approved make build → undone (C-c)"),
        "{table}"
    );

    // Kept in the state directory: the same after a restart.
    let before = report(&h);
    h.terminate_daemon();
    h.start_daemon();
    let after = report(&h);
    assert_eq!(after["rows"], before["rows"]);
    assert_eq!(after["recent"], before["recent"]);
    assert_eq!(after["since_ms"], before["since_ms"]);
}
