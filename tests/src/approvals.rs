//! A permission dialog of a real CLI, answered as its users answer it: Yes then No from the
//! fake Telegram, and at the terminal. The CLI's session is started and ready; the mock model
//! runs `touch <work>/<file>` (asking first) for `please RUNCMD one|two|desk` and then says
//! [`DONE`], and answers `please say hello` with text ending in `This is line two.`.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Harness;
use crate::fake_telegram::{self, FakeTelegram, Sent, texts};
use crate::live::last_seq;
use crate::mock_llm::Rule;

/// What the model says after the command.
pub const DONE: &str = "All done: the command ran.";

/// The chat (and admin) the Telegram answers come from; the config needs [`ACCESS`].
pub const ADMIN: i64 = 100;

/// The access section that makes [`ADMIN`] an admin of the fake Telegram.
pub const ACCESS: &str = "\n[access.telegram]\npolicy = \"allowlist\"\nadmins = [\"100\"]\n";

/// The rule that has the model run `touch <work>/<file>` with the CLI's shell tool `tool`
/// (taking `extra` arguments besides `command`), then say [`DONE`].
pub fn touch_rule(work: &Path, trigger: &str, file: &str, tool: &str, extra: Value) -> Rule {
    let mut input = json!({ "command": format!("touch {}", work.join(file).display()) });
    if let (Some(i), Some(e)) = (input.as_object_mut(), extra.as_object()) {
        i.extend(e.clone());
    }
    Rule::tool(trigger, tool, input, DONE)
}

/// The rules this module's scenarios need, for a CLI whose shell tool is `tool`, and `reply`
/// for `please say hello`.
pub fn rules(work: &Path, tool: &str, extra: Value, reply: &str) -> Vec<Rule> {
    vec![
        Rule::text("say hello", reply),
        touch_rule(work, "RUNCMD one", "one.txt", tool, extra.clone()),
        touch_rule(work, "RUNCMD two", "two.txt", tool, extra.clone()),
        touch_rule(work, "RUNCMD desk", "desk.txt", tool, extra),
    ]
}

fn said(tg: &FakeTelegram, what: &str, needle: &str) -> Vec<Sent> {
    tg.wait_sent(what, |s| texts(s, ADMIN).iter().any(|t| t.contains(needle)))
}

/// The newest prompt message in the chat whose text holds `needle`, with its buttons.
fn prompt_message(tg: &FakeTelegram, needle: &str) -> Sent {
    let has = |m: &Sent| m.chat_id == ADMIN && m.text.contains(needle) && m.reply_markup.is_some();
    let sent = tg.wait_sent("the prompt with buttons", |s| s.iter().any(has));
    sent.into_iter().rev().find(has).expect("prompt")
}

/// The callback data of the button on row `row`.
fn button(m: &Sent, row: usize) -> String {
    m.reply_markup.as_ref().expect("buttons")["inline_keyboard"][row][0]["callback_data"]
        .as_str()
        .expect("callback data")
        .to_string()
}

fn wait_after(
    h: &Harness,
    session: &str,
    seq: u64,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    h.wait_event(session, what, Duration::from_secs(60), |e| {
        e["seq"].as_u64().is_some_and(|s| s > seq) && pred(e)
    })
}

/// Session `session`'s dialog answered from the chat: Yes (the command runs, the reply reaches
/// the chat), then No — the last of its `options` buttons — (nothing runs, the turn ends, the
/// answer resolved by clibot); `after_no` checks what the CLI does with a No; then the next
/// message gets its reply.
pub fn yes_then_no_from_telegram(h: &Harness, session: &str, options: usize, after_no: impl Fn()) {
    let (tg, mut g) = fake_telegram::with_gateway(h);
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!use {session}"));
    said(&tg, "bound", session);

    tg.push_message(ADMIN, ADMIN, "Owner", "please RUNCMD one");
    let prompt = prompt_message(&tg, "one.txt");
    assert!(
        prompt.text.contains("touch ") && prompt.text.contains("Yes"),
        "{}",
        prompt.text
    );
    let rows = prompt.reply_markup.as_ref().expect("buttons")["inline_keyboard"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(rows, options, "a button per option: {prompt:?}");
    tg.push_callback(ADMIN, ADMIN, prompt.message_id, &button(&prompt, 0));
    said(&tg, "the reply after Yes", DONE);
    assert!(h.work.join("one.txt").exists(), "the command ran");

    let since = last_seq(h);
    tg.push_message(ADMIN, ADMIN, "Owner", "please RUNCMD two");
    let prompt = prompt_message(&tg, "two.txt");
    tg.push_callback(
        ADMIN,
        ADMIN,
        prompt.message_id,
        &button(&prompt, options - 1),
    );
    let resolved = wait_after(h, session, since, "the No", |e| {
        e["type"] == "prompt_resolved"
    });
    assert_eq!(resolved["by"], "clibot", "{resolved}");
    wait_after(h, session, since, "the turn after the No", |e| {
        e["type"] == "turn_completed"
    });
    assert!(!h.work.join("two.txt").exists(), "the command did not run");
    after_no();
    tg.push_message(ADMIN, ADMIN, "Owner", "please say hello");
    said(&tg, "the next reply", "This is line two.");
    let _ = g.kill();
    let _ = g.wait();
}

/// Session `session`'s dialog (with `options` options) answered by a 1 pressed in its real
/// terminal: resolved at the terminal, the command runs, the turn ends with [`DONE`], and a
/// late answer through clibot is refused.
pub fn answered_at_the_terminal(h: &Harness, session: &str, options: usize) {
    let since = last_seq(h);
    h.ctl_ok(&["send", session, "please RUNCMD desk"]);
    let waiting = wait_after(h, session, since, "the dialog", |e| {
        e["type"] == "waiting" && e["options"].as_array().is_some_and(|o| o.len() == options)
    });
    assert_eq!(waiting["kind"], "permission", "{waiting}");
    assert!(
        waiting["subject"]
            .as_str()
            .is_some_and(|t| t.ends_with("desk.txt")),
        "{waiting}"
    );
    // The person at the desk reads the dialog, then presses 1 in the real terminal.
    std::thread::sleep(Duration::from_millis(500));
    let mut desk = crate::desk::Desk::attach(h, session);
    desk.type_text("1");
    let resolved = wait_after(h, session, since, "resolved at the terminal", |e| {
        e["type"] == "prompt_resolved"
    });
    assert_eq!(resolved["by"], "terminal", "{resolved}");
    let done = wait_after(h, session, since, "the turn", |e| {
        e["type"] == "turn_completed"
    });
    assert_eq!(done["text"], DONE, "{done}");
    assert!(h.work.join("desk.txt").exists());
    let late = h.ctl_err(&["answer", session, "1"]);
    assert!(!late.is_empty());
}
