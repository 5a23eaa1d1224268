//! `[gateway.PLATFORM] default_chat`: a session started at the desk sends its replies and
//! prompts to the admin's default chat without `!!use`, until a chat binds it; a default chat
//! that is not an admin's is refused and the gateway does not start.

use std::time::Duration;

use clibot_tests::fake_telegram::{self, FakeTelegram, texts};
use clibot_tests::{Harness, lines};

const ADMIN: i64 = 100;
const OTHER_ADMIN: i64 = 101;

fn harness(default_chat: i64) -> Harness {
    Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\", \"{OTHER_ADMIN}\"]\n\n[gateway.telegram]\ndefault_chat = \"{default_chat}\"\n"
    ))
}

#[test]
fn a_session_spawned_at_the_desk_reaches_the_default_chat_until_a_chat_binds_it() {
    let mut h = harness(ADMIN);
    h.start_daemon();
    let (tg, mut g) = fake_telegram::with_gateway(&h);
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "desk", "--cli", "bash", "--dir", &work]);
    h.wait_screen("desk", "the shell", |t| t.contains('$'));

    // Its reply reaches the default chat, which never bound it.
    h.ctl_ok(&["send", "desk", "echo desk-$((40+2))"]);
    tg.wait_sent("the reply in the default chat", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("desk-42"))
    });
    // Another chat binds it: from then on its output goes there, not to the default chat.
    tg.push_message(OTHER_ADMIN, OTHER_ADMIN, "Other", "!!use desk");
    tg.wait_sent("bound", |s| {
        texts(s, OTHER_ADMIN)
            .iter()
            .any(|t| t.contains("now talks to desk"))
    });
    h.ctl_ok(&["send", "desk", "echo bound-$((40+3))"]);
    tg.wait_sent("the reply in the bound chat", |s| {
        texts(s, OTHER_ADMIN).iter().any(|t| t.contains("bound-43"))
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !texts(&tg.sent(), ADMIN)
            .iter()
            .any(|t| t.contains("bound-43")),
        "the default chat got a bound session's reply"
    );
    // A session a chat user made is theirs: it never goes to the default chat.
    tg.push_message(
        OTHER_ADMIN,
        OTHER_ADMIN,
        "Other",
        &format!("!!new mine bash {work}"),
    );
    tg.wait_sent("started", |s| {
        texts(s, OTHER_ADMIN)
            .iter()
            .any(|t| t.contains("started mine"))
    });
    tg.push_message(OTHER_ADMIN, OTHER_ADMIN, "Other", "echo mine-$((40+4))");
    tg.wait_sent("mine's reply", |s| {
        texts(s, OTHER_ADMIN).iter().any(|t| t.contains("mine-44"))
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !texts(&tg.sent(), ADMIN)
            .iter()
            .any(|t| t.contains("mine-44")),
        "the default chat got a chat user's session"
    );
    // A prompt of another desk session reaches it too, with buttons that answer it (pressing
    // one binds the chat, which had none, as any message would).
    h.ctl_ok(&["spawn", "desk2", "--cli", "bash", "--dir", &work]);
    h.wait_screen("desk2", "the shell", |t| t.contains('$'));
    h.ctl_ok(&["send", "desk2", "read -p 'Ship it? [y/N] ' a; echo ship=$a"]);
    let sent = tg.wait_sent("the prompt", |s| {
        s.iter()
            .any(|m| m.chat_id == ADMIN && m.text.contains("Ship it?") && m.reply_markup.is_some())
    });
    let prompt = sent
        .iter()
        .rev()
        .find(|m| m.chat_id == ADMIN && m.text.contains("Ship it?"))
        .expect("prompt")
        .clone();
    let data =
        prompt.reply_markup.as_ref().expect("buttons")["inline_keyboard"][0][0]["callback_data"]
            .as_str()
            .expect("data")
            .to_string();
    tg.push_callback(ADMIN, ADMIN, prompt.message_id, &data);
    h.wait_screen("desk2", "the answer", |t| lines(t).contains(&"ship=y"));

    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn a_default_chat_that_is_not_an_admins_is_refused() {
    let mut h = harness(555);
    h.start_daemon();
    let tg = FakeTelegram::start(fake_telegram::TEST_TOKEN);
    let mut g = fake_telegram::gateway(&h, &tg);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = g.try_wait().expect("wait") {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the gateway started with a stranger's chat as its default: {}",
            h.gateway_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(2), "{}", h.gateway_log());
    let log = h.gateway_log();
    assert!(
        log.contains("default_chat") && log.contains("not an admin's chat"),
        "{log}"
    );
}
