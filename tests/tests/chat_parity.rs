//! The same chat scenarios, run on every platform: Telegram, Discord, Feishu and Slack, each
//! against its fake, with the real clibotd and clibot-gateway and bash in tmux. Starting a
//! session, text both ways, `!!sessions`, a prompt answered by its button and the stale press
//! refused, `!!screen`, `!!shot`, a stranger kept out, `!!stop`: what a user of one platform
//! can do, a user of another can do the same way.

use std::process::Child;
use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::fake_discord::{self, FakeDiscord};
use clibot_tests::fake_feishu::{self, FakeFeishu, button_values, card_action_event, text_event};
use clibot_tests::fake_slack::{self, FakeSlack};
use clibot_tests::fake_telegram::{self, FakeTelegram, texts};

/// One platform as a user lives it: the admin in a private chat, and a stranger in theirs.
trait Chat {
    fn name(&self) -> &'static str;
    /// The admin writes `text`.
    fn say(&mut self, text: &str);
    /// A stranger writes `text`.
    fn stranger_says(&mut self, text: &str);
    /// The texts sent to the admin's chat so far.
    fn said(&self) -> Vec<String>;
    /// Whether the stranger was answered.
    fn stranger_answered(&self) -> bool;
    /// The admin presses option `n` (from 1) of the newest prompt showing `needle`.
    fn press(&mut self, needle: &str, n: usize);
    /// Whether a picture reached the admin's chat.
    fn got_picture(&self) -> bool;
}

fn wait(what: &str, platform: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "{platform}: timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until one more text than `before` holds `needle`.
fn said_more(c: &dyn Chat, needle: &str, before: usize) {
    wait(needle, c.name(), || count(c, needle) > before);
}

fn count(c: &dyn Chat, needle: &str) -> usize {
    c.said().iter().filter(|t| t.contains(needle)).count()
}

/// The scenarios, the same for every platform.
fn scenarios(c: &mut dyn Chat, h: &Harness) {
    let work = h.work.display().to_string();
    c.say(&format!("!!new par bash {work}"));
    said_more(c, "started par", 0);

    c.say("echo par-$((6*7))");
    said_more(c, "par-42", 0);

    c.say("!!sessions");
    wait("the session list", c.name(), || {
        c.said()
            .iter()
            .any(|t| t.contains("par") && t.contains("bash") && !t.contains("started"))
    });

    c.say("read -p 'Go on? [y/N] ' a; echo go=$a");
    c.press("Go on?", 1);
    said_more(c, "go=y", 0);
    let refused = count(c, "no longer waiting");
    c.press("Go on?", 1);
    said_more(c, "no longer waiting", refused);

    let shown = count(c, "go=y");
    c.say("!!screen");
    said_more(c, "go=y", shown);

    c.say("!!shot");
    wait("the screenshot", c.name(), || c.got_picture());

    c.stranger_says("echo stranger-$((1+1))");
    wait("the stranger's answer", c.name(), || c.stranger_answered());
    assert!(
        !h.ctl_ok(&["screen", "par"]).contains("stranger-2"),
        "{}: a stranger's text reached the session",
        c.name()
    );

    c.say("!!stop");
    said_more(c, "stopped par", 0);
}

struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const TG_ADMIN: i64 = 100;
const TG_STRANGER: i64 = 666;

struct Telegram(FakeTelegram);

impl Chat for Telegram {
    fn name(&self) -> &'static str {
        "telegram"
    }
    fn say(&mut self, text: &str) {
        self.0.push_message(TG_ADMIN, TG_ADMIN, "Owner", text);
    }
    fn stranger_says(&mut self, text: &str) {
        self.0.push_message(TG_STRANGER, TG_STRANGER, "Eve", text);
    }
    fn said(&self) -> Vec<String> {
        texts(&self.0.sent(), TG_ADMIN)
    }
    fn stranger_answered(&self) -> bool {
        !texts(&self.0.sent(), TG_STRANGER).is_empty()
    }
    fn press(&mut self, needle: &str, n: usize) {
        let (message, data) = self.0.buttons(TG_ADMIN, needle);
        self.0
            .push_callback(TG_ADMIN, TG_ADMIN, message, &data[n - 1]);
    }
    fn got_picture(&self) -> bool {
        self.0.photos().iter().any(|p| p.chat_id == TG_ADMIN)
    }
}

const DC_ADMIN: u64 = 1_300_000_000_000_000_100;
const DC_DM: u64 = 1_400_000_000_000_000_100;
const DC_STRANGER: u64 = 1_300_000_000_000_000_666;
const DC_STRANGER_DM: u64 = 1_400_000_000_000_000_666;

struct Discord(FakeDiscord);

impl Chat for Discord {
    fn name(&self) -> &'static str {
        "discord"
    }
    fn say(&mut self, text: &str) {
        self.0.push_message(DC_DM, DC_ADMIN, "owner", text);
    }
    fn stranger_says(&mut self, text: &str) {
        self.0
            .push_message(DC_STRANGER_DM, DC_STRANGER, "eve", text);
    }
    fn said(&self) -> Vec<String> {
        self.0
            .sent()
            .iter()
            .filter(|m| m.channel_id == DC_DM)
            .map(|m| m.text())
            .collect()
    }
    fn stranger_answered(&self) -> bool {
        self.0.sent().iter().any(|m| m.channel_id == DC_STRANGER_DM)
    }
    fn press(&mut self, needle: &str, n: usize) {
        // The newest version that shows buttons: a second press is a phone that has not yet
        // shown the update that took them away.
        let with = |m: &fake_discord::SentMessage| {
            m.channel_id == DC_DM
                && m.text().contains(needle)
                && m.components
                    .as_ref()
                    .is_some_and(|c| !custom_ids(c).is_empty())
        };
        let sent = self.0.wait_sent(needle, |s| s.iter().any(with));
        let m = sent.iter().rev().find(|m| with(m)).expect("the prompt");
        let ids = custom_ids(m.components.as_ref().expect("buttons"));
        self.0.push_button(DC_DM, DC_ADMIN, m.id, &ids[n - 1]);
    }
    fn got_picture(&self) -> bool {
        self.0.sent().iter().any(|m| {
            m.channel_id == DC_DM && m.files.iter().any(|(_, d)| d.starts_with(b"\x89PNG"))
        })
    }
}

/// The `custom_id`s of a message's buttons, in order.
fn custom_ids(components: &serde_json::Value) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(id) = m.get("custom_id").and_then(|i| i.as_str()) {
                    out.push(id.to_string());
                }
                m.values().for_each(|x| walk(x, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(components, &mut out);
    out
}

const FS_ADMIN: &str = "ou_admin000000000000000000000000000";
const FS_CHAT: &str = "oc_admin0000000000000000000000000000";
const FS_STRANGER: &str = "ou_eve00000000000000000000000000000";
const FS_STRANGER_CHAT: &str = "oc_eve000000000000000000000000000000";

struct Feishu(FakeFeishu, usize);

impl Feishu {
    fn push(&mut self, chat: &str, user: &str, text: &str) {
        self.1 += 1;
        let n = self.1;
        self.0.push_event(&text_event(
            &format!("ev{n}"),
            &format!("om_u{n}"),
            chat,
            "p2p",
            user,
            text,
            &[],
        ));
    }
}

impl Chat for Feishu {
    fn name(&self) -> &'static str {
        "feishu"
    }
    fn say(&mut self, text: &str) {
        self.push(FS_CHAT, FS_ADMIN, text);
    }
    fn stranger_says(&mut self, text: &str) {
        self.push(FS_STRANGER_CHAT, FS_STRANGER, text);
    }
    fn said(&self) -> Vec<String> {
        self.0
            .sent()
            .iter()
            .filter(|m| m.chat == FS_CHAT)
            .map(|m| m.text())
            .collect()
    }
    fn stranger_answered(&self) -> bool {
        self.0.sent().iter().any(|m| m.chat == FS_STRANGER_CHAT)
    }
    fn press(&mut self, needle: &str, n: usize) {
        let with = |m: &fake_feishu::Sent| {
            m.chat == FS_CHAT && m.msg_type == "interactive" && m.text().contains(needle)
        };
        let sent = self.0.wait_sent(needle, |s| {
            s.iter()
                .any(|m| with(m) && !button_values(&m.content).is_empty())
        });
        let card = sent
            .iter()
            .rev()
            .find(|m| with(m) && !button_values(&m.content).is_empty())
            .expect("the card");
        let value = button_values(&card.content)[n - 1].clone();
        self.1 += 1;
        self.0.push_event(&card_action_event(
            &format!("ev-press{}", self.1),
            FS_ADMIN,
            FS_CHAT,
            &card.message_id,
            value,
        ));
    }
    fn got_picture(&self) -> bool {
        self.0
            .sent()
            .iter()
            .any(|m| m.chat == FS_CHAT && m.msg_type == "image")
    }
}

const SL_ADMIN: &str = "U0ADMIN";
const SL_DM: &str = "D0ADMIN";
const SL_STRANGER: &str = "U0STRANGE";
const SL_STRANGER_DM: &str = "D0STRANGE";

struct Slack(FakeSlack);

impl Chat for Slack {
    fn name(&self) -> &'static str {
        "slack"
    }
    fn say(&mut self, text: &str) {
        self.0.push_message(SL_DM, SL_ADMIN, &slack_escape(text));
    }
    fn stranger_says(&mut self, text: &str) {
        self.0
            .push_message(SL_STRANGER_DM, SL_STRANGER, &slack_escape(text));
    }
    fn said(&self) -> Vec<String> {
        self.0
            .sent()
            .iter()
            .filter(|m| m.channel == SL_DM)
            .map(|m| m.shown())
            .collect()
    }
    fn stranger_answered(&self) -> bool {
        self.0.sent().iter().any(|m| m.channel == SL_STRANGER_DM)
    }
    fn press(&mut self, needle: &str, n: usize) {
        let with = |m: &fake_slack::Sent| {
            m.channel == SL_DM && m.shown().contains(needle) && !m.buttons().is_empty()
        };
        let sent = self.0.wait_sent(needle, |s| s.iter().any(with));
        // As the phone shows it: a second press may come before the update that took the
        // buttons away.
        let m = sent.iter().rev().find(|m| with(m)).expect("the prompt");
        self.0.press_shown(SL_ADMIN, m, &format!("{n}."));
    }
    fn got_picture(&self) -> bool {
        self.0
            .uploads()
            .iter()
            .any(|u| u.channel == SL_DM && u.data.starts_with(b"\x89PNG"))
    }
}

/// What a Slack client sends for typed text: `&`, `<` and `>` escaped.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[test]
fn the_same_commands_work_the_same_on_telegram() {
    let tg = FakeTelegram::start(fake_telegram::TEST_TOKEN);
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{TG_ADMIN}\"]\n"
    ));
    h.start_daemon();
    let _g = Gateway(fake_telegram::gateway(&h, &tg));
    assert!(
        tg.wait_polling(Duration::from_secs(30)),
        "the gateway polls"
    );
    scenarios(&mut Telegram(tg), &h);
}

#[test]
fn the_same_commands_work_the_same_on_discord() {
    let mut h = Harness::with_config(&format!(
        "\n[access.discord]\npolicy = \"pairing\"\nadmins = [\"{DC_ADMIN}\"]\n"
    ));
    h.start_daemon();
    let (dc, g) = fake_discord::with_gateway(&h);
    let _g = Gateway(g);
    scenarios(&mut Discord(dc), &h);
}

#[test]
fn the_same_commands_work_the_same_on_feishu() {
    let fs = FakeFeishu::start(fake_feishu::APP_ID, fake_feishu::APP_SECRET);
    let mut h = Harness::with_config(&fake_feishu::gateway_config(
        &fs,
        &format!("[access.feishu]\npolicy = \"pairing\"\nadmins = [\"{FS_ADMIN}\"]\n"),
    ));
    h.start_daemon();
    let _g = Gateway(fake_feishu::gateway(&h, &fs));
    scenarios(&mut Feishu(fs, 0), &h);
}

#[test]
fn the_same_commands_work_the_same_on_slack() {
    let fs = FakeSlack::start();
    let mut h = Harness::with_config(&fake_slack::gateway_config(
        &fs,
        &format!(
            "[access.slack]\npolicy = \"pairing\"\nadmins = [\"{}:{SL_ADMIN}\"]\n",
            fake_slack::TEAM
        ),
    ));
    h.start_daemon();
    let _g = Gateway(fake_slack::gateway(&h, &fs));
    scenarios(&mut Slack(fs), &h);
}
