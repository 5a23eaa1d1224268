//! One chat platform as a user lives it, the same way on each: the admin writes in a private
//! chat, a stranger in theirs, prompts are answered by their buttons, pictures and boards
//! arrive. Telegram, Discord, Feishu and Slack against their fakes, each with the real
//! gateway; scenarios written once against [`Chat`] run on all four.

use std::process::Child;
use std::time::Duration;

use crate::Harness;
use crate::fake_discord::{self, FakeDiscord};
use crate::fake_feishu::{self, FakeFeishu, button_values, card_action_event, text_event};
use crate::fake_slack::{self, FakeSlack};
use crate::fake_telegram::{self, FakeTelegram, texts};

/// The platforms, for tables of tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Telegram,
    Discord,
    Feishu,
    Slack,
}

/// A running gateway, killed when dropped.
pub struct Gateway(Child);

impl Gateway {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A daemon with `config` added (and the platform's admin), its fake, and the gateway serving
/// it: how a test of `kind` begins.
pub fn start(kind: Kind, config: &str) -> (Harness, Box<dyn Chat>) {
    match kind {
        Kind::Telegram => {
            let tg = FakeTelegram::start(fake_telegram::TEST_TOKEN);
            let mut h = Harness::with_config(&format!(
                "{config}\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{TG_ADMIN}\"]\n"
            ));
            h.start_daemon();
            let g = Gateway(fake_telegram::gateway(&h, &tg));
            assert!(
                tg.wait_polling(Duration::from_secs(30)),
                "the gateway polls"
            );
            (h, Box::new(Telegram(tg, g)))
        }
        Kind::Discord => {
            let mut h = Harness::with_config(&format!(
                "{config}\n[access.discord]\npolicy = \"pairing\"\nadmins = [\"{DC_ADMIN}\"]\n"
            ));
            h.start_daemon();
            let (dc, g) = fake_discord::with_gateway(&h);
            (h, Box::new(Discord(dc, Gateway(g))))
        }
        Kind::Feishu => {
            let fs = FakeFeishu::start(fake_feishu::APP_ID, fake_feishu::APP_SECRET);
            let mut h = Harness::with_config(&format!(
                "{config}\n{}",
                fake_feishu::gateway_config(
                    &fs,
                    &format!("[access.feishu]\npolicy = \"pairing\"\nadmins = [\"{FS_ADMIN}\"]\n"),
                )
            ));
            h.start_daemon();
            let g = Gateway(fake_feishu::gateway(&h, &fs));
            (h, Box::new(Feishu(fs, 0, g)))
        }
        Kind::Slack => {
            let fs = FakeSlack::start();
            let mut h = Harness::with_config(&format!(
                "{config}\n{}",
                fake_slack::gateway_config(
                    &fs,
                    &format!(
                        "[access.slack]\npolicy = \"pairing\"\nadmins = [\"{}:{SL_ADMIN}\"]\n",
                        fake_slack::TEAM
                    ),
                )
            ));
            h.start_daemon();
            let g = Gateway(fake_slack::gateway(&h, &fs));
            (h, Box::new(Slack(fs, g)))
        }
    }
}

/// One platform as a user lives it: the admin in a private chat, and a stranger in theirs.
pub trait Chat {
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
    /// Every version of the messages with a board's buttons (the first sent, then each edit),
    /// in order: (message id, what it shows).
    fn board_versions(&self) -> Vec<(String, String)>;
    /// The messages pinned in the admin's chat.
    fn pinned(&self) -> Vec<String>;
    /// Kills the gateway (-9) and starts it again.
    fn restart_gateway(&mut self, h: &Harness);
}

pub fn wait(what: &str, platform: &str, f: impl FnMut() -> bool) {
    assert!(
        crate::poll_until(Duration::from_secs(30), f),
        "{platform}: timed out waiting for {what}"
    );
}

/// Waits until one more text than `before` holds `needle`.
pub fn said_more(c: &dyn Chat, needle: &str, before: usize) {
    wait(needle, c.name(), || count(c, needle) > before);
}

pub fn count(c: &dyn Chat, needle: &str) -> usize {
    c.said().iter().filter(|t| t.contains(needle)).count()
}

/// The scenarios, the same for every platform.
pub const TG_ADMIN: i64 = 100;
pub const TG_STRANGER: i64 = 666;

pub struct Telegram(FakeTelegram, Gateway);

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
    fn board_versions(&self) -> Vec<(String, String)> {
        let sent = self.0.sent();
        let ids: Vec<i64> = sent
            .iter()
            .filter(|m| {
                m.chat_id == TG_ADMIN
                    && m.reply_markup
                        .as_ref()
                        .is_some_and(|r| r.to_string().contains("Pending"))
            })
            .map(|m| m.message_id)
            .collect();
        sent.iter()
            .filter(|m| {
                ids.contains(&m.message_id)
                    && m.chat_id == TG_ADMIN
                    && matches!(m.method.as_str(), "sendmessage" | "editmessagetext")
            })
            .map(|m| (m.message_id.to_string(), m.text.clone()))
            .collect()
    }
    fn pinned(&self) -> Vec<String> {
        self.0.pinned(TG_ADMIN).iter().map(i64::to_string).collect()
    }
    fn restart_gateway(&mut self, h: &Harness) {
        self.1.kill();
        self.1 = Gateway(fake_telegram::gateway(h, &self.0));
        assert!(
            self.0.wait_polling(Duration::from_secs(30)),
            "the gateway polls again"
        );
    }
}

pub const DC_ADMIN: u64 = 1_300_000_000_000_000_100;
pub const DC_DM: u64 = 1_400_000_000_000_000_100;
pub const DC_STRANGER: u64 = 1_300_000_000_000_000_666;
pub const DC_STRANGER_DM: u64 = 1_400_000_000_000_000_666;

pub struct Discord(FakeDiscord, Gateway);

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
    fn board_versions(&self) -> Vec<(String, String)> {
        let sent = self.0.sent();
        let ids: Vec<u64> = sent
            .iter()
            .filter(|m| {
                m.channel_id == DC_DM
                    && m.components
                        .as_ref()
                        .is_some_and(|c| c.to_string().contains("Pending"))
            })
            .map(|m| m.id)
            .collect();
        sent.iter()
            .filter(|m| ids.contains(&m.id) && matches!(m.kind.as_str(), "create" | "edit"))
            .map(|m| (m.id.to_string(), m.text()))
            .collect()
    }
    fn pinned(&self) -> Vec<String> {
        self.0.pinned(DC_DM).iter().map(u64::to_string).collect()
    }
    fn restart_gateway(&mut self, h: &Harness) {
        self.1.kill();
        wait("the old gateway's session to close", "discord", || {
            self.0.ready_sessions() == 0
        });
        let g = h.gateway(
            &["--discord", "--discord-api-url", &self.0.url()],
            &[("DISCORD_TOKEN", fake_discord::TEST_TOKEN)],
        );
        self.1 = Gateway(g);
        assert!(
            self.0.wait_ready(Duration::from_secs(30)),
            "the gateway connects to Discord again"
        );
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

pub const FS_ADMIN: &str = "ou_admin000000000000000000000000000";
pub const FS_CHAT: &str = "oc_admin0000000000000000000000000000";
pub const FS_STRANGER: &str = "ou_eve00000000000000000000000000000";
pub const FS_STRANGER_CHAT: &str = "oc_eve000000000000000000000000000000";

pub struct Feishu(FakeFeishu, usize, Gateway);

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
    fn board_versions(&self) -> Vec<(String, String)> {
        let sent = self.0.sent();
        let ids: Vec<String> = sent
            .iter()
            .filter(|m| m.chat == FS_CHAT && m.content.to_string().contains("Pending"))
            .map(|m| m.message_id.clone())
            .collect();
        sent.iter()
            .filter(|m| ids.contains(&m.message_id))
            .map(|m| (m.message_id.clone(), m.text()))
            .collect()
    }
    fn pinned(&self) -> Vec<String> {
        self.0.pinned(FS_CHAT)
    }
    fn restart_gateway(&mut self, h: &Harness) {
        self.2.kill();
        let before = self.0.connections().0;
        let g = h.gateway(&[], &[("TEST_FEISHU_SECRET", fake_feishu::APP_SECRET)]);
        self.2 = Gateway(g);
        assert!(
            self.0
                .wait_until(Duration::from_secs(30), |f| f.connections().0 > before
                    && f.connections().1 > 0),
            "the gateway holds the long connection again"
        );
    }
}

pub const SL_ADMIN: &str = "U0ADMIN";
pub const SL_DM: &str = "D0ADMIN";
pub const SL_STRANGER: &str = "U0STRANGE";
pub const SL_STRANGER_DM: &str = "D0STRANGE";

pub struct Slack(FakeSlack, Gateway);

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
    fn board_versions(&self) -> Vec<(String, String)> {
        let sent = self.0.sent();
        let ids: Vec<String> = sent
            .iter()
            .filter(|m| m.channel == SL_DM && m.buttons().iter().any(|b| b.0.contains("Pending")))
            .map(|m| m.ts.clone())
            .collect();
        sent.iter()
            .filter(|m| ids.contains(&m.ts) && matches!(m.kind.as_str(), "post" | "update"))
            .map(|m| (m.ts.clone(), m.shown()))
            .collect()
    }
    fn pinned(&self) -> Vec<String> {
        self.0.pinned(SL_DM)
    }
    fn restart_gateway(&mut self, h: &Harness) {
        self.1.kill();
        self.1 = Gateway(fake_slack::gateway(h, &self.0));
    }
}

/// What a Slack client sends for typed text: `&`, `<` and `>` escaped.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
