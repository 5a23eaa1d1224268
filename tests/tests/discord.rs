//! End to end: a fake Discord (REST and gateway websocket on 127.0.0.1) → the real
//! clibot-gateway (serenity) → the real clibotd → bash in tmux → the reply back in the fake
//! channel. Pairing keeps an unknown user out; a prompt is answered by a button; a 429 delays but
//! does not lose the reply; killing the gateway mid-turn delivers the reply exactly once.

use std::process::Child;
use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::fake_discord::{self, FakeDiscord, SentMessage, rate_limit_body};

use clibot_tests::fake_discord::TEST_TOKEN as TOKEN;
const ADMIN: u64 = 1_300_000_000_000_000_100;
const STRANGER: u64 = 1_300_000_000_000_000_555;
const ADMIN_DM: u64 = 1_400_000_000_000_000_100;
const STRANGER_DM: u64 = 1_400_000_000_000_000_555;

fn gateway(h: &Harness, dc: &FakeDiscord) -> Child {
    h.gateway(
        &["--discord", "--discord-api-url", &dc.url()],
        &[("DISCORD_TOKEN", TOKEN)],
    )
}

fn contents(sent: &[SentMessage], channel: u64) -> Vec<String> {
    sent.iter()
        .filter(|m| m.channel_id == channel)
        .map(|m| m.text())
        .collect()
}

fn setup() -> (Harness, FakeDiscord, Child) {
    fake_discord::started(&format!("\n[access.discord]\nadmins = [\"{ADMIN}\"]\n"))
}

#[test]
fn a_discord_message_runs_in_the_cli_and_the_reply_comes_back() {
    let (h, dc, mut g) = setup();
    let work = h.work.display().to_string();

    dc.push_message(STRANGER_DM, STRANGER, "eve", "echo should-not-run");
    dc.wait_sent("a pairing code", |s| {
        contents(s, STRANGER_DM)
            .iter()
            .any(|t| t.contains("pairing code"))
    });

    dc.push_message(ADMIN_DM, ADMIN, "owner", &format!("!!new d bash {work}"));
    dc.wait_sent("started", |s| {
        contents(s, ADMIN_DM)
            .iter()
            .any(|t| t.contains("started d"))
    });
    dc.push_message(ADMIN_DM, ADMIN, "owner", "echo dc-$((6*7))");
    dc.wait_sent("the reply", |s| {
        contents(s, ADMIN_DM).iter().any(|t| t.contains("dc-42"))
    });
    assert!(
        !h.events().iter().any(|e| e["text"]
            .as_str()
            .is_some_and(|t| t.contains("should-not-run"))),
        "the stranger's text never reached a CLI"
    );

    // A prompt comes with buttons; pressing one answers it.
    dc.push_message(
        ADMIN_DM,
        ADMIN,
        "owner",
        "read -p 'Merge it? [y/N] ' a; echo merge=$a",
    );
    let sent = dc.wait_sent("the prompt", |s| {
        s.iter().any(|m| {
            m.channel_id == ADMIN_DM && m.text().contains("Merge it?") && m.components.is_some()
        })
    });
    let prompt = sent
        .iter()
        .rev()
        .find(|m| m.channel_id == ADMIN_DM && m.text().contains("Merge it?"))
        .expect("prompt")
        .clone();
    // Each button carries its prompt's id and its option: `a:<prompt id>:<n>`.
    let waiting = h
        .events()
        .into_iter()
        .rfind(|e| e["type"] == "waiting")
        .expect("waiting event");
    let data = format!("a:{}:1", waiting["prompt_id"].as_str().expect("prompt id"));
    assert!(
        prompt
            .components
            .as_ref()
            .is_some_and(|c| c.to_string().contains(&data)),
        "{:?}",
        prompt.components
    );
    dc.push_button(ADMIN_DM, ADMIN, prompt.id, &data);
    dc.wait_sent("the answer's effect", |s| {
        contents(s, ADMIN_DM).iter().any(|t| t.contains("merge=y"))
    });

    // A rate limit delays the reply but does not lose it.
    dc.fail_next("/messages", 429, rate_limit_body(0.5));
    dc.push_message(ADMIN_DM, ADMIN, "owner", "echo after-limit-$((1+1))");
    dc.wait_sent("the reply after a 429", |s| {
        contents(s, ADMIN_DM)
            .iter()
            .any(|t| t.contains("after-limit-2"))
    });
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn killing_the_discord_gateway_mid_turn_delivers_the_reply_exactly_once() {
    let (h, dc, mut g) = setup();
    let work = h.work.display().to_string();
    dc.push_message(ADMIN_DM, ADMIN, "owner", &format!("!!new k bash {work}"));
    dc.wait_sent("started", |s| {
        contents(s, ADMIN_DM)
            .iter()
            .any(|t| t.contains("started k"))
    });
    dc.push_message(ADMIN_DM, ADMIN, "owner", "sleep 2; echo late-$((3*3))");
    dc.wait_calls("typing", |c| {
        c.iter().any(|(_, p, _)| p.ends_with("/typing"))
    });
    let _ = g.kill();
    let _ = g.wait();
    std::thread::sleep(Duration::from_secs(3));
    let mut g = gateway(&h, &dc);
    dc.wait_sent("the late reply", |s| {
        contents(s, ADMIN_DM).iter().any(|t| t.contains("late-9"))
    });
    std::thread::sleep(Duration::from_secs(2));
    let n = contents(&dc.sent(), ADMIN_DM)
        .iter()
        .filter(|t| t.contains("late-9"))
        .count();
    assert_eq!(n, 1, "exactly once: {:#?}", contents(&dc.sent(), ADMIN_DM));
    let _ = g.kill();
    let _ = g.wait();
}

/// In a server channel bound to the admin's session, a member who owns a session of their own
/// does not take the channel over by writing there: refused, and the channel stays bound.
#[test]
fn a_member_cannot_take_over_a_server_channel_bound_to_the_admins_session() {
    const GUILD: u64 = 1_500_000_000_000_000_002;
    const CHANNEL: u64 = 1_500_000_000_000_000_200;
    const MEMBER: u64 = 1_300_000_000_000_000_400;
    const MEMBER_DM: u64 = 1_400_000_000_000_000_400;
    let (h, dc, mut g) = fake_discord::started(&format!(
        "\n[access.discord]\npolicy = \"allowlist\"\nallow = [\"{MEMBER}\"]\nclis = [\"bash\"]\nadmins = [\"{ADMIN}\"]\ngroups = [\"{CHANNEL}\"]\n"
    ));
    let work = h.work.display().to_string();
    dc.session_bound_to_channel((ADMIN, ADMIN_DM), (GUILD, CHANNEL), "f", &work);
    // A member works in a workspace of their own: no directory given.
    dc.send_as_user(MEMBER_DM, MEMBER, "mel", "!!new mine bash");
    dc.wait_sent("the member's own session", |s| {
        contents(s, MEMBER_DM)
            .iter()
            .any(|t| t.contains("started mine"))
    });
    dc.send_as_user_in_guild(GUILD, CHANNEL, MEMBER, "mel", "echo takeover-$((1+1))");
    dc.wait_sent("the refusal", |s| {
        contents(s, CHANNEL)
            .iter()
            .any(|t| t.contains("bound to a session you may not use"))
    });
    let chats = h.ctl_ok(&["chats"]);
    assert!(
        chats
            .lines()
            .any(|l| l.contains(&format!("discord:{CHANNEL} ")) && l.contains("→ f ")),
        "{chats}"
    );
    assert!(
        !h.events().iter().any(|e| e["type"] == "input_sent"
            && e["text"].as_str().is_some_and(|t| t.contains("takeover"))),
        "nothing of the member's reached the admin's session"
    );
    // The admin's channel still works for the admin.
    dc.send_as_user_in_guild(GUILD, CHANNEL, ADMIN, "owner", "echo still-$((2+2))");
    dc.wait_sent("the admin's reply", |s| {
        contents(s, CHANNEL).iter().any(|t| t.contains("still-4"))
    });
    let _ = g.kill();
    let _ = g.wait();
}
