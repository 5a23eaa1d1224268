//! End to end: Discord's gateway does not replay what a gateway that was down missed, so the
//! real clibot-gateway reads each channel's history after the last message it handled (which
//! the real clibotd records) at start and after reconnects. Messages sent while the gateway is
//! killed reach the session once each, in order, and are answered once. A channel the bot lost
//! access to (403 Missing Access) is suspended while the DM keeps its replies.

use std::process::Child;
use std::time::{Duration, Instant};

use clibot_proto::v1;
use clibot_tests::Harness;
use clibot_tests::fake_discord::{self, FakeDiscord, SentMessage};

use clibot_tests::fake_discord::TEST_TOKEN as TOKEN;
const ADMIN: u64 = 1_300_000_000_000_000_100;
const ADMIN_DM: u64 = 1_400_000_000_000_000_100;

fn gateway(h: &Harness, dc: &FakeDiscord) -> Child {
    h.gateway(
        &["--discord", "--discord-api-url", &dc.url()],
        &[("DISCORD_TOKEN", TOKEN)],
    )
}

fn contents(sent: &[SentMessage], channel: u64) -> Vec<String> {
    sent.iter()
        .filter(|m| m.channel_id == channel && m.kind == "create")
        .map(|m| m.text())
        .collect()
}

/// The daemon's record of the last message handled in a Discord channel.
fn cursor(h: &Harness, chat: u64) -> Option<String> {
    h.with_client(|mut c| async move {
        c.list_ingress(v1::ListIngressRequest {
            platform: "discord".into(),
        })
        .await
        .expect("ListIngress")
        .into_inner()
        .cursors
        .into_iter()
        .find(|c| c.chat == chat.to_string())
        .map(|c| c.id)
    })
}

fn wait_cursor(h: &Harness, chat: u64, id: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while cursor(h, chat) != Some(id.to_string()) {
        assert!(
            Instant::now() < deadline,
            "message {id} was never recorded as handled (cursor {:?}); gateway log:\n{}",
            cursor(h, chat),
            h.gateway_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The texts typed into session `name`, in order.
fn typed(h: &Harness, name: &str) -> Vec<String> {
    h.events()
        .into_iter()
        .filter(|e| e["session"] == name && e["type"] == "input_sent")
        .filter_map(|e| e["text"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn messages_sent_while_the_gateway_is_down_are_handled_once_in_order() {
    let (h, dc, mut g) =
        fake_discord::started(&format!("\n[access.discord]\nadmins = [\"{ADMIN}\"]\n"));
    let work = h.work.display().to_string();
    dc.send_as_user(ADMIN_DM, ADMIN, "owner", &format!("!!new i bash {work}"));
    dc.wait_sent("started", |s| {
        contents(s, ADMIN_DM)
            .iter()
            .any(|t| t.contains("started i"))
    });
    let warm = dc.send_as_user(ADMIN_DM, ADMIN, "owner", "echo warm-$((0+1))");
    dc.wait_sent("the first reply", |s| {
        contents(s, ADMIN_DM).iter().any(|t| t.contains("warm-1"))
    });
    // Handled, and recorded as such in the daemon (it happens right after the reply); and
    // the reply's delivery acknowledged, or the restarted gateway would send it again.
    wait_cursor(&h, ADMIN_DM, warm);
    let replied = h
        .events()
        .iter()
        .filter(|e| e["type"] == "turn_completed")
        .filter_map(|e| e["seq"].as_u64())
        .max()
        .expect("the first turn's reply");
    h.wait_delivered("discord", &ADMIN_DM.to_string(), replied);

    // Killed: nothing is connected to Discord's gateway while the user writes.
    let _ = g.kill();
    let _ = g.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while dc.ready_sessions() > 0 {
        assert!(
            Instant::now() < deadline,
            "the killed gateway's session ends"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    dc.send_as_user(ADMIN_DM, ADMIN, "owner", "echo a-$((1+1))");
    dc.send_as_user(ADMIN_DM, ADMIN, "owner", "echo b-$((2+2))");
    // One that also arrives live after the next READY (as a resumed session's replay would):
    // it comes both from history and from the gateway.
    let last = dc.push_message(ADMIN_DM, ADMIN, "owner", "echo c-$((3+3))");

    let mut g = gateway(&h, &dc);
    dc.wait_sent("the replies to what was missed", |s| {
        let c = contents(s, ADMIN_DM);
        ["a-2", "b-4", "c-6"]
            .iter()
            .all(|want| c.iter().any(|t| t.contains(want)))
    });
    wait_cursor(&h, ADMIN_DM, last);
    // Room for a duplicate to show up.
    std::thread::sleep(Duration::from_secs(2));

    let inputs = typed(&h, "i");
    assert_eq!(
        inputs,
        [
            "echo warm-$((0+1))",
            "echo a-$((1+1))",
            "echo b-$((2+2))",
            "echo c-$((3+3))"
        ],
        "each message typed once, in the order sent"
    );
    let replies = contents(&dc.sent(), ADMIN_DM);
    for want in ["warm-1", "a-2", "b-4", "c-6"] {
        let n = replies.iter().filter(|t| t.contains(want)).count();
        assert_eq!(n, 1, "one reply with {want}: {replies:#?}");
    }
    let at = |want: &str| replies.iter().position(|t| t.contains(want));
    assert!(
        at("a-2") < at("b-4") && at("b-4") < at("c-6"),
        "replies in order: {replies:#?}"
    );
    let history_reads = dc
        .calls()
        .iter()
        .filter(|(m, p, _)| m == "GET" && p == &format!("/api/v10/channels/{ADMIN_DM}/messages"))
        .count();
    assert!(history_reads >= 1, "the restarted gateway read the history");
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn a_channel_the_bot_lost_access_to_is_suspended_while_the_dm_keeps_its_replies() {
    const GUILD: u64 = 1_500_000_000_000_000_001;
    const CHANNEL: u64 = 1_500_000_000_000_000_100;
    let (h, dc, mut g) = fake_discord::started(&format!(
        "\n[access.discord]\nadmins = [\"{ADMIN}\"]\ngroups = [\"{CHANNEL}\"]\n"
    ));
    let work = h.work.display().to_string();
    dc.session_bound_to_channel((ADMIN, ADMIN_DM), (GUILD, CHANNEL), "f", &work);
    dc.send_as_user(ADMIN_DM, ADMIN, "owner", "echo both-$((1+1))");
    dc.wait_sent("the reply in both channels", |s| {
        contents(s, ADMIN_DM).iter().any(|t| t.contains("both-2"))
            && contents(s, CHANNEL).iter().any(|t| t.contains("both-2"))
    });

    let posts = || {
        dc.calls()
            .iter()
            .filter(|(m, p, _)| {
                m == "POST" && p == &format!("/api/v10/channels/{CHANNEL}/messages")
            })
            .count()
    };
    // The bot loses access to the server channel: Discord answers 403 Missing Access.
    dc.forbid_channel(CHANNEL);
    let before = posts();
    for i in 0..3 {
        dc.send_as_user(ADMIN_DM, ADMIN, "owner", &format!("echo dm{i}-$((40+2))"));
        dc.wait_sent("the DM's reply", |s| {
            contents(s, ADMIN_DM)
                .iter()
                .any(|t| t.contains(&format!("dm{i}-42")))
        });
    }
    let suspended = h.wait_event("f", "chat_suspended", Duration::from_secs(20), |e| {
        e["type"] == "chat_suspended" && e["chat"].as_str() == Some(CHANNEL.to_string().as_str())
    });
    assert_eq!(suspended["platform"], "discord");
    let sent = dc.sent();
    for i in 0..3 {
        let n = contents(&sent, ADMIN_DM)
            .iter()
            .filter(|t| t.contains(&format!("dm{i}-42")))
            .count();
        assert_eq!(n, 1, "turn {i} reached the DM once");
    }
    // Nothing reached the forbidden channel, and it is not retried over and over.
    std::thread::sleep(Duration::from_secs(2));
    let tries = posts() - before;
    assert!(
        tries <= 6,
        "the channel was tried {tries} times: it must be suspended, not retried"
    );
    let chats = h.ctl_ok(&["chats"]);
    assert!(
        chats
            .lines()
            .any(|l| l.contains(&CHANNEL.to_string()) && l.contains("SUSPENDED")),
        "{chats}"
    );
    let _ = g.kill();
    let _ = g.wait();
}

/// One message in a channel's history that serenity cannot read (a lone surrogate in its
/// text, as Discord's JSON sometimes holds): catch-up reads it with a replacement character
/// and goes on to the next, instead of failing the channel at that page for ever.
#[test]
fn one_unreadable_message_in_the_history_does_not_stop_the_catch_up() {
    let (h, dc, mut g) =
        fake_discord::started(&format!("\n[access.discord]\nadmins = [\"{ADMIN}\"]\n"));
    let work = h.work.display().to_string();
    dc.send_as_user(ADMIN_DM, ADMIN, "owner", &format!("!!new i bash {work}"));
    dc.wait_sent("started", |s| {
        contents(s, ADMIN_DM)
            .iter()
            .any(|t| t.contains("started i"))
    });
    let warm = dc.send_as_user(ADMIN_DM, ADMIN, "owner", "echo warm-$((0+1))");
    wait_cursor(&h, ADMIN_DM, warm);
    let _ = g.kill();
    let _ = g.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while dc.ready_sessions() > 0 {
        assert!(
            Instant::now() < deadline,
            "the killed gateway's session ends"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    dc.send_as_user(
        ADMIN_DM,
        ADMIN,
        "owner",
        &format!("echo odd-{}-$((1+1))", fake_discord::LONE_SURROGATE),
    );
    let last = dc.send_as_user(ADMIN_DM, ADMIN, "owner", "echo after-$((2+2))");
    let mut g = gateway(&h, &dc);
    dc.wait_sent("the reply to the message after the odd one", |s| {
        contents(s, ADMIN_DM).iter().any(|t| t.contains("after-4"))
    });
    wait_cursor(&h, ADMIN_DM, last);
    let inputs = typed(&h, "i");
    assert!(
        inputs.iter().any(|t| t.starts_with("echo odd-\u{FFFD}")),
        "{inputs:?}"
    );
    let _ = g.kill();
    let _ = g.wait();
}
