//! Cancelling a running turn, and the queue behind it: `clibotctl cancel` interrupts the turn
//! (a shell's running command by Ctrl-C), reports `turn_cancelled`, and the next queued input
//! goes; `queue` shows what waits and `drop` takes it back; from a chat, `!!cancel`, `!!queue`
//! and `!!drop`, for those who may send to the session only.

use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::fake_telegram::{self, texts};
use serde_json::Value;

const ADMIN: i64 = 100;
const STRANGER: i64 = 300;

#[test]
fn cancel_interrupts_the_turn_and_the_queue_can_be_seen_and_dropped() {
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nadmins = [\"{ADMIN}\"]\nallow = [\"{STRANGER}\"]\n"
    ));
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "sh", "--cli", "bash", "--dir", &work]);
    h.wait_screen("sh", "the shell", |t| t.contains('$'));
    let err = h.ctl_err(&["cancel", "sh"]);
    assert!(err.contains("nothing to cancel"), "{err}");

    // A long turn, and three inputs queued behind it.
    h.ctl_ok(&["send", "sh", "sleep 600; echo slept"]);
    h.wait_list("working", |l| l[0]["state"] == "working");
    for i in 1..=3 {
        h.ctl_ok(&["send", "sh", &format!("echo queued-{i}")]);
    }
    let q: Value = serde_json::from_str(&h.ctl_ok(&["queue", "sh", "--json"])).expect("json");
    let texts_q: Vec<&str> = q
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(texts_q, ["echo queued-1", "echo queued-2", "echo queued-3"]);
    let out = h.ctl_ok(&["drop", "sh", "2"]);
    assert!(out.contains("dropped 1") && out.contains("2 left"), "{out}");
    let bad = h.ctl_err(&["drop", "sh", "9"]);
    assert!(bad.contains("not 9"), "{bad}");

    // Cancel: Ctrl-C ends the sleep; the event says so; the queue goes on.
    let out = h.ctl_ok(&["cancel", "sh"]);
    assert!(
        out.contains("keys C-c") && out.contains("2 queued"),
        "{out}"
    );
    let ev = h.wait_event("sh", "the cancel", Duration::from_secs(20), |e| {
        e["type"] == "turn_cancelled"
    });
    assert_eq!(ev["by"], "local");
    h.wait_screen("sh", "the queued inputs ran", |t| {
        t.contains("queued-1") && t.contains("queued-3")
    });
    let screen = h.ctl_ok(&["screen", "sh"]);
    assert!(
        !screen.contains("\nslept"),
        "the sleep was interrupted: {screen}"
    );
    assert!(
        !screen.contains("\nqueued-2"),
        "the dropped one never ran: {screen}"
    );

    h.wait_event("sh", "the last queued turn", Duration::from_secs(20), |e| {
        e["type"] == "turn_completed" && e["text"].as_str().is_some_and(|t| t.contains("queued-3"))
    });
    h.wait_list("idle after the queue", |l| {
        l[0]["state"] == "idle" && l[0]["queued_inputs"] == 0
    });

    // From a chat: the owner (an admin here) cancels; a user it is not shared with cannot.
    let (tg, _g) = fake_telegram::with_gateway(&h);
    tg.push_message(ADMIN, ADMIN, "Owner", "!!use sh");
    tg.wait_sent("bound", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("now talks to sh"))
    });
    tg.push_message(ADMIN, ADMIN, "Owner", "sleep 600");
    h.wait_list("working again", |l| l[0]["state"] == "working");
    tg.push_message(ADMIN, ADMIN, "Owner", "echo after-cancel");
    tg.push_message(ADMIN, ADMIN, "Owner", "!!queue");
    tg.wait_sent("the queue", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("1. echo after-cancel"))
    });
    tg.push_message(STRANGER, STRANGER, "Stranger", "!!cancel sh");
    tg.wait_sent("refused", |s| !texts(s, STRANGER).is_empty());
    assert!(
        !texts(&tg.sent(), STRANGER)
            .iter()
            .any(|t| t.contains("cancelled")),
        "{:?}",
        texts(&tg.sent(), STRANGER)
    );
    tg.push_message(ADMIN, ADMIN, "Owner", "!!drop all");
    tg.wait_sent("dropped", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("dropped 1") && t.contains("0 left"))
    });
    tg.push_message(ADMIN, ADMIN, "Owner", "!!cancel");
    tg.wait_sent("cancelled", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("cancelled sh's turn"))
    });
    h.wait_list("idle", |l| l[0]["state"] == "idle");
    let cancels: Vec<Value> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "turn_cancelled")
        .collect();
    assert_eq!(cancels.len(), 2, "{cancels:#?}");
    assert_eq!(cancels[1]["by"], format!("telegram:{ADMIN}").as_str());
}
