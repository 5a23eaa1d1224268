//! End to end: a fake Feishu (endpoint discovery, the long connection speaking pbbp2, the REST
//! calls) → the real clibot-gateway → the real clibotd → bash in tmux → the reply back in the
//! fake chat. A stranger runs nothing; a prompt comes as a card whose button answers it; the
//! socket dropped comes back; the gateway killed -9 mid-turn delivers the reply exactly once.

use std::process::Child;
use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::fake_feishu::{
    self, APP_ID, APP_SECRET, FakeFeishu, Sent, button_values, card_action_event, text_event,
};

const ADMIN: &str = "ou_admin000000000000000000000000000";
const STRANGER: &str = "ou_eve00000000000000000000000000000";
const ADMIN_CHAT: &str = "oc_admin0000000000000000000000000000";
const STRANGER_CHAT: &str = "oc_eve000000000000000000000000000000";

fn gateway(h: &Harness) -> Child {
    h.gateway(&[], &[("TEST_FEISHU_SECRET", APP_SECRET)])
}

/// The text of every text or rich-text message sent to `chat`.
fn texts(sent: &[Sent], chat: &str) -> Vec<String> {
    sent.iter()
        .filter(|s| {
            s.kind == "create" && s.chat == chat && matches!(s.msg_type.as_str(), "text" | "post")
        })
        .map(Sent::text)
        .collect()
}

struct Setup {
    h: Harness,
    fs: FakeFeishu,
    g: Child,
    n: std::cell::Cell<u32>,
}

impl Setup {
    fn new() -> Setup {
        let fs = FakeFeishu::start(APP_ID, APP_SECRET);
        let mut h = Harness::with_config(&fake_feishu::gateway_config(
            &fs,
            &format!("[access.feishu]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"),
        ));
        h.start_daemon();
        let g = fake_feishu::gateway(&h, &fs);
        Setup {
            h,
            fs,
            g,
            n: std::cell::Cell::new(0),
        }
    }

    /// A direct message from `user` in `chat`; returns the pushed event's index.
    fn say(&self, chat: &str, user: &str, text: &str) -> usize {
        let n = self.n.get() + 1;
        self.n.set(n);
        self.fs.push_event(&text_event(
            &format!("ev{n}"),
            &format!("om_m{n}"),
            chat,
            "p2p",
            user,
            text,
            &[],
        ))
    }

    fn wait_text(&self, chat: &str, needle: &str) -> Vec<Sent> {
        self.fs.wait_sent(needle, |s| {
            texts(s, chat).iter().any(|t| t.contains(needle))
        })
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = self.g.kill();
        let _ = self.g.wait();
    }
}

#[test]
fn a_feishu_message_runs_in_the_cli_a_card_answers_a_prompt_and_strangers_run_nothing() {
    let s = Setup::new();
    let work = s.h.work.display().to_string();
    let ev = s.say(STRANGER_CHAT, STRANGER, "echo should-not-run");
    s.wait_text(STRANGER_CHAT, "pairing code");
    assert!(
        s.fs.wait_until(Duration::from_secs(3), |f| !f.acks_of(ev).is_empty()),
        "every event is acknowledged within Feishu's 3 s"
    );

    s.say(ADMIN_CHAT, ADMIN, &format!("!!new f bash {work}"));
    s.wait_text(ADMIN_CHAT, "started f");
    s.say(ADMIN_CHAT, ADMIN, "echo fs-$((6*7))");
    s.wait_text(ADMIN_CHAT, "fs-42");
    assert!(
        !s.h.events().iter().any(|e| e["text"]
            .as_str()
            .is_some_and(|t| t.contains("should-not-run"))),
        "the stranger's text never reached a CLI"
    );

    // A prompt comes as a card; its button answers it, and the card loses its buttons.
    s.say(
        ADMIN_CHAT,
        ADMIN,
        "read -p 'Ship it? [y/N] ' a; echo ship=$a",
    );
    let sent = s.fs.wait_sent("the prompt card", |v| {
        v.iter().any(|m| {
            m.chat == ADMIN_CHAT
                && m.msg_type == "interactive"
                && m.content.to_string().contains("Ship it?")
        })
    });
    let card = sent
        .iter()
        .rev()
        .find(|m| m.msg_type == "interactive" && m.content.to_string().contains("Ship it?"))
        .expect("card")
        .clone();
    let values = button_values(&card.content);
    assert_eq!(values.len(), 2, "{:#}", card.content);
    s.fs.push_event(&card_action_event(
        "ev-click",
        ADMIN,
        ADMIN_CHAT,
        &card.message_id,
        values[0].clone(),
    ));
    s.wait_text(ADMIN_CHAT, "ship=y");
    s.fs.wait_sent("the card updated without buttons", |v| {
        v.iter().any(|m| {
            m.kind == "patch"
                && m.message_id == card.message_id
                && button_values(&m.content).is_empty()
        })
    });
    // Pressed again (a stale card): refused, nothing typed.
    s.fs.push_event(&card_action_event(
        "ev-click-again",
        ADMIN,
        ADMIN_CHAT,
        &card.message_id,
        values[0].clone(),
    ));
    s.wait_text(ADMIN_CHAT, "no longer waiting");
}

#[test]
fn the_socket_dropped_comes_back_and_a_kill_9_mid_turn_delivers_once() {
    let mut s = Setup::new();
    let work = s.h.work.display().to_string();
    s.say(ADMIN_CHAT, ADMIN, &format!("!!new k bash {work}"));
    s.wait_text(ADMIN_CHAT, "started k");

    let before = s.fs.discoveries();
    s.fs.drop_connections();
    assert!(
        s.fs.wait_until(Duration::from_secs(30), |f| f.discoveries() > before
            && f.connections().1 > 0),
        "reconnected, with the endpoint discovered again"
    );
    s.say(ADMIN_CHAT, ADMIN, "echo again-$((2+3))");
    s.wait_text(ADMIN_CHAT, "again-5");

    s.say(ADMIN_CHAT, ADMIN, "sleep 2; echo late-$((3*3))");
    std::thread::sleep(Duration::from_millis(700));
    let _ = s.g.kill();
    let _ = s.g.wait();
    std::thread::sleep(Duration::from_secs(3));
    s.g = gateway(&s.h);
    s.wait_text(ADMIN_CHAT, "late-9");
    std::thread::sleep(Duration::from_secs(2));
    let n = texts(&s.fs.sent(), ADMIN_CHAT)
        .iter()
        .filter(|t| t.contains("late-9"))
        .count();
    assert_eq!(n, 1, "exactly once");
}
