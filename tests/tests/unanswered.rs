//! Prompts nobody answers: shown again to their chats every `remind_after`, shown to the
//! admins' chats after `escalate_after`, and after `prompt_timeout` given their
//! `on_prompt_timeout` — denied, answered by the decider, or left waiting (always, for a
//! prompt the guard keeps for a person); a CLI's own settings win over `[daemon]`'s. Each is an
//! event, an audit record and a metric.

use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::asker::{ASK_FN, ASKER};
use clibot_tests::fake_telegram::{self, texts};
use serde_json::Value;

const ADMIN: i64 = 100;
const OTHER_ADMIN: i64 = 101;

/// Sets `keys` at the top of `[daemon]`.
fn daemon_keys(h: &Harness, keys: &str) {
    h.set_daemon_keys(keys);
}

fn events_of(h: &Harness, kind: &str) -> Vec<Value> {
    h.events()
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

#[test]
fn an_unanswered_prompt_is_reminded_escalated_to_the_admins_and_denied_at_its_timeout() {
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\", \"{OTHER_ADMIN}\"]\n"
    ));
    daemon_keys(
        &h,
        "remind_after = \"1s\"\nescalate_after = \"3s\"\nprompt_timeout = \"6s\"\non_prompt_timeout = \"deny\"",
    );
    h.start_daemon();
    let (tg, _g) = fake_telegram::with_gateway(&h);
    let work = h.work.display().to_string();
    // The first admin only ever wrote to the bot privately; the other one talks to the session.
    tg.push_message(ADMIN, ADMIN, "Admin", "!!list");
    tg.wait_sent("the admin's list", |s| !texts(s, ADMIN).is_empty());
    h.ctl_ok(&["spawn", "job", "--cli", "bash", "--dir", &work]);
    h.wait_screen("job", "the shell", |t| t.contains('$'));
    tg.push_message(OTHER_ADMIN, OTHER_ADMIN, "Other", "!!use job");
    tg.wait_sent("bound", |s| {
        texts(s, OTHER_ADMIN)
            .iter()
            .any(|t| t.contains("now talks to job"))
    });

    tg.push_message(
        OTHER_ADMIN,
        OTHER_ADMIN,
        "Other",
        "read -p 'Ship it? [y/N] ' a; echo ship=$a",
    );
    let waiting = h.wait_event("job", "the prompt", Duration::from_secs(30), |e| {
        e["type"] == "waiting"
    });
    let id = waiting["prompt_id"].as_str().expect("id").to_string();

    // Reminded: the bound chat sees it again, with its buttons.
    let reminded = h.wait_event("job", "a reminder", Duration::from_secs(30), |e| {
        e["type"] == "prompt_reminded"
    });
    assert_eq!(reminded["count"], 1, "{reminded}");
    assert_eq!(reminded["prompt"]["prompt_id"], id.as_str(), "{reminded}");
    assert!(reminded["age_ms"].as_u64().is_some_and(|a| a >= 1000));
    tg.wait_sent("the reminder in the bound chat", |s| {
        s.iter().any(|m| {
            m.chat_id == OTHER_ADMIN
                && m.text.contains("still waiting for you")
                && m.text.contains("Ship it?")
                && m.reply_markup.is_some()
        })
    });

    // Escalated: the admin who is not bound to it gets it too, with buttons.
    let escalated = h.wait_event("job", "the escalation", Duration::from_secs(30), |e| {
        e["type"] == "prompt_escalated"
    });
    assert_eq!(escalated["prompt"]["prompt_id"], id.as_str());
    tg.wait_sent("the escalation in the admin's chat", |s| {
        s.iter().any(|m| {
            m.chat_id == ADMIN
                && m.text.contains("nobody has answered")
                && m.text.contains("Ship it?")
                && m.reply_markup.is_some()
        })
    });

    // Timed out: denied, and both chats are told.
    let timed_out = h.wait_event("job", "the timeout", Duration::from_secs(30), |e| {
        e["type"] == "prompt_timed_out"
    });
    assert_eq!(timed_out["action"], "deny", "{timed_out}");
    assert_eq!(timed_out["prompt_id"], id.as_str());
    let resolved = h.wait_event("job", "the denial", Duration::from_secs(30), |e| {
        e["type"] == "prompt_resolved"
    });
    assert_eq!(resolved["by"], "prompt_timeout", "{resolved}");
    h.wait_screen("job", "the no typed", |t| {
        t.lines().any(|l| l.trim().eq_ignore_ascii_case("ship=n"))
    });
    for chat in [ADMIN, OTHER_ADMIN] {
        tg.wait_sent("the timeout told", |s| {
            texts(s, chat)
                .iter()
                .any(|t| t.contains("nobody answered the prompt in") && t.contains("denied"))
        });
    }
    // Each step once, though the monitor looked many times.
    assert_eq!(events_of(&h, "prompt_escalated").len(), 1);
    assert_eq!(events_of(&h, "prompt_timed_out").len(), 1);
    let reminders = events_of(&h, "prompt_reminded");
    let counts: Vec<u64> = reminders
        .iter()
        .filter_map(|e| e["count"].as_u64())
        .collect();
    assert!(
        counts.windows(2).all(|w| w[0] < w[1]),
        "one reminder per interval: {counts:?}"
    );
    // The admin who was not bound gets nothing else of the session.
    assert!(
        !texts(&tg.sent(), ADMIN)
            .iter()
            .any(|t| t.contains("still waiting for you")),
        "a reminder reached an unbound admin"
    );

    let metrics = h.ctl_ok(&["metrics"]);
    for line in [
        "clibot_prompt_escalations_total{cli=\"bash\"} 1",
        "clibot_prompt_timeouts_total{cli=\"bash\",action=\"deny\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
    assert!(
        metrics.contains("clibot_prompt_reminders_total{cli=\"bash\"}"),
        "{metrics}"
    );
    let audit = h.ctl_ok(&["audit", "--session", "job"]);
    for action in ["prompt_reminded", "prompt_escalated", "prompt_timed_out"] {
        assert!(audit.contains(action), "{action} in:\n{audit}");
    }
}

#[test]
fn at_its_timeout_the_decider_answers_a_prompt_but_a_guarded_one_and_a_waiting_cli_keep_waiting() {
    let mut h = Harness::with_config(ASKER);
    let script = h.dir.path().join("decide.py");
    std::fs::write(
        &script,
        "import json, sys\njson.load(sys.stdin)\nprint(json.dumps({\"choice\": \"y\", \"note\": \"harmless\"}))\n",
    )
    .expect("decider");
    let mut text = std::fs::read_to_string(&h.config).expect("config");
    text.push_str(&format!(
        "\n[decider]\ncommand = [\"python3\", {:?}]\ntimeout_ms = 5000\non = \"timeout\"\n",
        script.display().to_string()
    ));
    // The shell CLI waits, whatever [daemon] says.
    let text = text.replacen(
        "quiet_ms = 300\n",
        "quiet_ms = 300\non_prompt_timeout = \"wait\"\n",
        1,
    );
    std::fs::write(&h.config, text).expect("config");
    daemon_keys(
        &h,
        "remind_after = \"0\"\nescalate_after = \"0\"\nprompt_timeout = \"2s\"\non_prompt_timeout = \"decider\"",
    );
    // `on = "timeout"`: a person first, the decider only for what nobody answered.
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "dc", "--cli", "asker", "--dir", &work]);
    h.wait_screen("dc", "the shell", |s| s.contains('$'));
    h.ctl_ok(&["send", "dc", ASK_FN]);

    // Unanswered for 2 s: the decider answers it.
    h.ctl_ok(&["send", "dc", "ask 'ls src'"]);
    let w = h.wait_event("dc", "the prompt", Duration::from_secs(20), |e| {
        e["type"] == "waiting" && e["subject"] == "ls src"
    });
    assert_eq!(w["auto"], "", "the decider is not asked before the timeout");
    let t = h.wait_event("dc", "the timeout", Duration::from_secs(20), |e| {
        e["type"] == "prompt_timed_out"
    });
    assert_eq!(t["action"], "decider", "{t}");
    let r = h.wait_event("dc", "the decider's answer", Duration::from_secs(20), |e| {
        e["type"] == "prompt_resolved" && e["by"] == "decider"
    });
    assert_eq!(r["answer"], "y");
    h.wait_screen("dc", "the answer ran", |s| s.contains("decided ls src: y"));

    // A guarded subject never goes to the decider: it goes on waiting.
    h.ctl_ok(&["send", "dc", "ask 'sudo make install'"]);
    let t = h.wait_event("dc", "the guarded timeout", Duration::from_secs(20), |e| {
        e["type"] == "prompt_timed_out" && e["action"] == "wait"
    });
    assert!(
        t["detail"].as_str().is_some_and(|d| d.contains("guard")),
        "{t}"
    );
    std::thread::sleep(Duration::from_millis(800));
    let pending: Value = serde_json::from_str(&h.ctl_ok(&["pending", "--json"])).expect("json");
    assert_eq!(pending[0]["subject"], "sudo make install", "{pending:#}");
    h.ctl_ok(&["answer", "dc", "n"]);
    h.wait_screen("dc", "the person's answer", |s| {
        s.contains("decided sudo make install: n")
    });

    // A CLI whose own on_prompt_timeout is "wait": told, and left waiting.
    h.ctl_ok(&["spawn", "sh", "--cli", "bash", "--dir", &work]);
    h.wait_screen("sh", "the shell", |t| t.contains('$'));
    h.ctl_ok(&["send", "sh", "read -p 'Ship it? [y/N] ' a; echo ship=$a"]);
    let t = h.wait_event("sh", "its timeout", Duration::from_secs(20), |e| {
        e["type"] == "prompt_timed_out" && e["session"] == "sh"
    });
    assert_eq!(t["action"], "wait", "{t}");
    std::thread::sleep(Duration::from_millis(800));
    h.wait_list("still waiting", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == "sh" && s["state"] == "waiting")
        })
    });
    // Nothing reminded or escalated: both are off.
    assert!(events_of(&h, "prompt_reminded").is_empty());
    assert!(events_of(&h, "prompt_escalated").is_empty());
    let metrics = h.ctl_ok(&["metrics"]);
    for line in [
        "clibot_prompt_timeouts_total{cli=\"asker\",action=\"decider\"} 1",
        "clibot_prompt_timeouts_total{cli=\"asker\",action=\"wait\"} 1",
        "clibot_prompt_timeouts_total{cli=\"bash\",action=\"wait\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }

    // A daemon killed and started again does not time the prompt out a second time.
    h.kill_daemon();
    h.start_daemon();
    h.wait_list("readopted, still waiting", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == "sh" && s["state"] == "waiting")
        })
    });
    std::thread::sleep(Duration::from_secs(2));
    let sh_timeouts = events_of(&h, "prompt_timed_out")
        .into_iter()
        .filter(|e| e["session"] == "sh")
        .count();
    assert_eq!(sh_timeouts, 1, "timed out again after the restart");
}
