//! Every prompt waiting anywhere, at a glance: `clibotctl pending` (oldest first, with how long
//! each has waited), `clibotctl status` leading with the count, and `!!pending` in a chat showing
//! each again with its buttons, which answer it.

use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::fake_telegram::{self, texts};
use serde_json::Value;

const ADMIN: i64 = 100;

#[test]
fn pending_lists_every_waiting_prompt_oldest_first_and_a_chat_gets_their_buttons_again() {
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"
    ));
    h.start_daemon();
    let work = h.work.display().to_string();
    for name in ["first", "second"] {
        h.ctl_ok(&["spawn", name, "--cli", "bash", "--dir", &work]);
        h.wait_screen(name, "the shell", |t| t.contains('$'));
    }
    let status: Value = serde_json::from_str(&h.ctl_ok(&["status", "--json"])).expect("json");
    assert_eq!(status["pending_prompts"], 0);
    assert!(h.ctl_ok(&["pending"]).contains("no prompt is waiting"));

    h.ctl_ok(&["send", "first", "read -p 'Ship it? [y/N] ' a; echo ship=$a"]);
    h.wait_event("first", "the first prompt", Duration::from_secs(30), |e| {
        e["type"] == "waiting" && e["session"] == "first"
    });
    std::thread::sleep(Duration::from_millis(20));
    h.ctl_ok(&[
        "send",
        "second",
        "read -p 'Deploy? (y/n) ' b; echo deploy=$b",
    ]);
    h.wait_event(
        "second",
        "the second prompt",
        Duration::from_secs(30),
        |e| e["type"] == "waiting" && e["session"] == "second",
    );

    let pending: Value = serde_json::from_str(&h.ctl_ok(&["pending", "--json"])).expect("json");
    let list = pending.as_array().expect("array");
    let names: Vec<&str> = list.iter().filter_map(|p| p["session"].as_str()).collect();
    assert_eq!(names, ["first", "second"], "oldest first: {pending:#}");
    for p in list {
        for key in [
            "prompt_id",
            "kind",
            "text",
            "options",
            "subject",
            "waiting_since_ms",
            "age_ms",
        ] {
            assert!(p.get(key).is_some(), "{key} in {p}");
        }
        assert!(p["waiting_since_ms"].as_i64().is_some_and(|t| t > 0), "{p}");
        assert!(p["age_ms"].as_i64().is_some_and(|a| a >= 0), "{p}");
    }
    assert!(
        list[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Ship it?"))
    );
    assert!(
        list[0]["waiting_since_ms"].as_i64() <= list[1]["waiting_since_ms"].as_i64(),
        "{pending:#}"
    );
    let text = h.ctl_ok(&["status"]);
    assert!(text.starts_with("2 prompts waiting"), "{text}");
    let status: Value = serde_json::from_str(&h.ctl_ok(&["status", "--json"])).expect("json");
    assert_eq!(status["pending_prompts"], 2);

    // From the phone: each again, with buttons that answer it.
    let (tg, _g) = fake_telegram::with_gateway(&h);
    tg.push_message(ADMIN, ADMIN, "Owner", "!!pending");
    let sent = tg.wait_sent("both prompts with buttons", |s| {
        s.iter()
            .filter(|m| m.chat_id == ADMIN && m.reply_markup.is_some())
            .count()
            >= 2
    });
    let shown: Vec<_> = sent
        .iter()
        .filter(|m| m.chat_id == ADMIN && m.reply_markup.is_some())
        .collect();
    assert!(
        shown[0].text.contains("[first]") && shown[0].text.contains("Ship it?"),
        "{:?}",
        shown[0].text
    );
    assert!(shown[1].text.contains("[second]"), "{:?}", shown[1].text);
    let data =
        shown[0].reply_markup.as_ref().expect("buttons")["inline_keyboard"][0][0]["callback_data"]
            .as_str()
            .expect("data")
            .to_string();
    tg.push_callback(ADMIN, ADMIN, shown[0].message_id, &data);
    h.wait_screen("first", "the answer typed", |t| t.contains("ship=y"));
    h.wait_list("one left", |l| {
        l.as_array()
            .is_some_and(|a| a.iter().filter(|s| s["state"] == "waiting").count() == 1)
    });
    let pending: Value = serde_json::from_str(&h.ctl_ok(&["pending", "--json"])).expect("json");
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{pending:#}");
    assert_eq!(pending[0]["session"], "second");
    assert!(
        texts(&tg.sent(), ADMIN)
            .iter()
            .any(|t| t.contains("2 waiting"))
    );
}
