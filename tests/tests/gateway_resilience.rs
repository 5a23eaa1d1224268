//! End to end, the gateway under faults a chat platform or the daemon can hand it: one chat in
//! flood control holds up no other chat (incoming messages never wait on outgoing ones), a
//! redelivered update does not repeat a command's side effects or a button press, a reply
//! longer than an event arrives whole as one file, and strangers' Discord DMs leave no durable
//! trace in the daemon. Real clibot-gateway, real clibotd, bash in tmux, fake Telegram and
//! Discord.

use std::process::Child;
use std::time::{Duration, Instant};

use clibot_proto::v1;
use clibot_tests::fake_discord::{self, SentMessage};
use clibot_tests::fake_telegram::{self, FakeTelegram, gateway, texts};
use clibot_tests::{Harness, lines};

const ADMIN: i64 = 100;
const OTHER: i64 = 200;

fn setup(extra: &str) -> (Harness, FakeTelegram, Child) {
    fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\", \"{OTHER}\"]\n{extra}"
    ))
}

fn new_session(tg: &FakeTelegram, chat: i64, name: &str, work: &str) -> i64 {
    let update = tg.push_message(chat, chat, "Owner", &format!("!!new {name} bash {work}"));
    tg.wait_sent("started", |s| {
        texts(s, chat)
            .iter()
            .any(|t| t.contains(&format!("started {name}")))
    });
    update
}

/// The screen's last line with something on it (the shell's prompt and what is typed).
fn prompt_line(screen: &str) -> String {
    lines(screen)
        .into_iter()
        .rev()
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string()
}

/// Kills the gateway however the test ends (a failed assertion must not leave it running).
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Telegram answers every call for one chat with 429 for a while: that chat's reply waits
/// (and is given up after its budget, the chat told once after the cooldown, later replies
/// still in order), while another chat's commands are answered at once.
#[test]
fn a_chat_in_flood_control_holds_up_no_other_chat() {
    let (h, tg, g) = setup("[gateway]\nrate_limit_wait = \"5s\"\n");
    let g = Gateway(g);
    // Both chats work.
    for chat in [ADMIN, OTHER] {
        tg.push_message(chat, chat, "Owner", "!!whoami");
        tg.wait_sent("whoami", |s| {
            texts(s, chat)
                .iter()
                .any(|t| t.contains(&format!("in chat {chat}")))
        });
    }
    // A 429 that says "retry after 8 s": past the 5 s a message may wait, the reply is given up
    // at once, and the chat's next messages wait for the cooldown.
    tg.throttle(ADMIN, 8, 1);
    tg.push_message(ADMIN, ADMIN, "Owner", "!!sessions");
    tg.push_message(ADMIN, ADMIN, "Owner", "!!help");
    let t0 = Instant::now();
    tg.push_message(OTHER, OTHER, "Owner", "!!sessions");
    tg.wait_sent("the other chat's reply", |s| {
        texts(s, OTHER)
            .iter()
            .any(|t| t.contains("no sessions yet"))
    });
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(6),
        "the other chat waited {took:?} for the limited one"
    );
    let cooling = |tg: &FakeTelegram| !texts(&tg.sent(), ADMIN).iter().any(|t| t.contains("!!new"));
    assert!(cooling(&tg), "the limited chat is still cooling down");
    tg.push_message(OTHER, OTHER, "Owner", "!!whoami");
    tg.wait_sent("the other chat's second reply", |s| {
        texts(s, OTHER)
            .iter()
            .filter(|t| t.contains(&format!("in chat {OTHER}")))
            .count()
            == 2
    });
    assert!(cooling(&tg), "the limited chat is still cooling down");

    // The limited chat: one notice after the cooldown, then the reply that waited behind.
    let sent = tg.wait_sent("the notice and the next reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("!!new"))
    });
    let said = texts(&sent, ADMIN);
    let notice = said
        .iter()
        .position(|t| {
            t.contains("could not be delivered here because Telegram rate-limited this chat")
        })
        .unwrap_or_else(|| panic!("no notice: {said:?}"));
    assert!(said[notice].contains("1 message "), "{}", said[notice]);
    assert!(said[notice].contains("!!last"), "{}", said[notice]);
    let help = said
        .iter()
        .position(|t| t.contains("!!new"))
        .unwrap_or_default();
    assert!(notice < help, "in order: {said:?}");
    assert!(
        !said.iter().any(|t| t.contains("no sessions yet")),
        "the given-up reply is not sent late: {said:?}"
    );
    assert_eq!(
        said.iter()
            .filter(|t| t.contains("could not be delivered"))
            .count(),
        1,
        "{said:?}"
    );
    drop(g);
    drop(h);
}

/// Flood control costs time, not tries: 25 answers of 429 in a row, each saying "retry after
/// 1 s", and four replies queued behind them are each delivered once, in order.
#[test]
fn four_replies_get_through_twenty_five_429s_each_once() {
    let (h, tg, g) = setup("");
    let g = Gateway(g);
    tg.push_message(ADMIN, ADMIN, "Owner", "!!whoami");
    tg.wait_sent("whoami", |s| !texts(s, ADMIN).is_empty());
    tg.throttle(ADMIN, 1, 25);
    // Four commands, four distinct replies (each says which argument it refused).
    for i in 0..4 {
        tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!whoami {i}"));
    }
    let reply = |i: usize| format!("(got \"{i}\")");
    let count = |tg: &FakeTelegram, i: usize| {
        texts(&tg.sent(), ADMIN)
            .iter()
            .filter(|t| t.contains(&reply(i)))
            .count()
    };
    // 25 waits of a second each: longer than the fake's usual patience.
    let deadline = Instant::now() + Duration::from_secs(90);
    while (0..4).any(|i| count(&tg, i) == 0) {
        assert!(Instant::now() < deadline, "{:?}", texts(&tg.sent(), ADMIN));
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    let said = texts(&tg.sent(), ADMIN);
    for i in 0..4 {
        assert_eq!(count(&tg, i), 1, "reply {i} once: {said:?}");
    }
    let at = |i: usize| said.iter().position(|t| t.contains(&reply(i)));
    assert!(
        at(0) < at(1) && at(1) < at(2) && at(2) < at(3),
        "in order: {said:?}"
    );
    assert!(
        !said.iter().any(|t| t.contains("could not be delivered")),
        "nothing given up: {said:?}"
    );
    assert_eq!(tg.throttled_left(ADMIN), 0);
    drop(g);
    drop(h);
}

/// A gateway killed after acting on updates, before confirming them, gets them again from
/// Telegram: `!!new`, `!!keys` and a button press do nothing the second time.
#[test]
fn redelivered_commands_and_button_presses_act_once() {
    let (h, tg, g) = setup("");
    let g = Gateway(g);
    let work = h.work.display().to_string();
    let new = new_session(&tg, ADMIN, "r", &work);
    h.wait_screen("r", "the prompt", |s| s.contains('$'));
    let keys = tg.push_message(ADMIN, ADMIN, "Owner", "!!keys q");
    h.wait_screen("r", "q typed", |s| prompt_line(s).ends_with('q'));
    tg.push_message(ADMIN, ADMIN, "Owner", "!!keys C-u");
    h.wait_screen("r", "the line cleared", |s| !prompt_line(s).ends_with('q'));
    // A prompt answered by a button.
    tg.push_message(ADMIN, ADMIN, "Owner", "read -p 'Go? [y/N] ' a; echo go=$a");
    let prompt = tg
        .wait_sent("the prompt", |s| {
            s.iter()
                .any(|m| m.chat_id == ADMIN && m.text.contains("Go?") && m.reply_markup.is_some())
        })
        .into_iter()
        .rev()
        .find(|m| m.chat_id == ADMIN && m.text.contains("Go?") && m.reply_markup.is_some())
        .expect("prompt");
    let data =
        prompt.reply_markup.as_ref().expect("buttons")["inline_keyboard"][0][0]["callback_data"]
            .as_str()
            .unwrap_or_default()
            .to_string();
    let press = tg.push_callback(ADMIN, ADMIN, prompt.message_id, &data);
    tg.wait_sent("the answer's effect", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("go=y"))
    });
    std::thread::sleep(Duration::from_secs(1));
    let before = texts(&tg.sent(), ADMIN).len();

    // Killed; Telegram hands the same updates over again to the next gateway.
    drop(g);
    for u in [press, keys, new] {
        tg.redeliver(u);
    }
    let g = Gateway(gateway(&h, &tg));
    // A marker after them: once it is typed, the redelivered ones were handled.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!keys z");
    let screen = h.wait_screen("r", "z typed", |s| prompt_line(s).ends_with('z'));
    let last = prompt_line(&screen);
    assert!(
        !last.ends_with("qz"),
        "!!keys q was pressed again: {last:?}"
    );
    std::thread::sleep(Duration::from_secs(1));
    let said = texts(&tg.sent(), ADMIN);
    let new_msgs = &said[before.min(said.len())..];
    assert!(
        new_msgs.is_empty(),
        "the redelivered updates said something (acted again?): {new_msgs:?}"
    );
    assert!(
        h.gateway_log().contains("handled before"),
        "the log says why: {}",
        h.gateway_log()
    );
    drop(g);
}

/// A reply over the event's 256 KiB arrives whole, as one file (no stream of messages).
#[test]
fn a_reply_longer_than_its_event_arrives_whole_as_one_file() {
    let mut h = Harness::with_config(&format!("\n[access.telegram]\nadmins = [\"{ADMIN}\"]\n"));
    let config = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        config.replace("height = 40", "height = 40\nhistory_limit = 200000"),
    )
    .expect("config");
    h.start_daemon();
    let (tg, g) = fake_telegram::with_gateway(&h);
    let g = Gateway(g);
    let work = h.work.display().to_string();
    new_session(&tg, ADMIN, "big", &work);
    let before = texts(&tg.sent(), ADMIN).len();
    // 8 000 lines of 32 `€` (97 bytes each): about 776 KB.
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        &format!("yes {} | head -n 8000; echo END-MARK", "€".repeat(32)),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let doc = loop {
        if let Some(d) = tg.documents().into_iter().find(|d| {
            d.chat_id == ADMIN && String::from_utf8_lossy(&d.content).contains("END-MARK")
        }) {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "no file with the reply; gateway log:\n{}",
            h.gateway_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = String::from_utf8(doc.content.clone()).expect("utf8");
    assert_eq!(
        text.lines()
            .filter(|l| l.ends_with(&"€".repeat(32)))
            .count(),
        8000,
        "every line is in the file"
    );
    let events = h.events();
    let done = events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn_completed" && e["session"] == "big")
        .expect("turn_completed");
    assert!(
        !done["blob_id"].as_str().unwrap_or_default().is_empty(),
        "the reply was longer than its event: {}",
        done["text"].as_str().map_or(0, str::len)
    );
    std::thread::sleep(Duration::from_secs(1));
    let said = texts(&tg.sent(), ADMIN);
    assert!(
        said.len() - before <= 3,
        "a few messages at most besides the file: {:?}",
        &said[before..]
    );
    drop(g);
}

/// Strangers writing to the bot in DMs are answered (a pairing code) but leave no ingress
/// cursor in the daemon; the admin's DM keeps its cursor.
#[test]
fn strangers_discord_dms_leave_no_ingress_cursor() {
    const DC_ADMIN: u64 = 1_300_000_000_000_000_100;
    const ADMIN_DM: u64 = 1_400_000_000_000_000_100;
    let (h, dc, g) = fake_discord::started(&format!(
        "\n[access.discord]\npolicy = \"pairing\"\nadmins = [\"{DC_ADMIN}\"]\n"
    ));
    let g = Gateway(g);
    let created = |s: &[SentMessage], ch: u64| {
        s.iter()
            .filter(|m| m.channel_id == ch && m.kind == "create")
            .count()
    };
    let strangers: Vec<u64> = (0..20).map(|i| 1_400_000_000_000_001_000 + i).collect();
    for (i, ch) in strangers.iter().enumerate() {
        dc.send_as_user(*ch, 1_300_000_000_000_001_000 + i as u64, "eve", "hello");
    }
    dc.wait_sent("every stranger answered", |s| {
        strangers.iter().all(|ch| created(s, *ch) > 0)
    });
    let mark = dc.send_as_user(ADMIN_DM, DC_ADMIN, "owner", "!!whoami");
    // Handled in order: once the admin's message is recorded, the strangers' were handled.
    let deadline = Instant::now() + Duration::from_secs(20);
    let cursors = loop {
        let cursors = ingress(&h);
        if cursors
            .iter()
            .any(|(c, id)| *c == ADMIN_DM.to_string() && *id == mark.to_string())
        {
            break cursors;
        }
        assert!(
            Instant::now() < deadline,
            "the admin's DM was never recorded: {cursors:?}; gateway log:\n{}",
            h.gateway_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let theirs: Vec<_> = cursors
        .iter()
        .filter(|(c, _)| strangers.iter().any(|s| s.to_string() == *c))
        .collect();
    assert!(
        theirs.is_empty(),
        "strangers cost durable state: {theirs:?}"
    );
    drop(g);
}

fn bindings(h: &Harness) -> Vec<v1::Binding> {
    h.with_client(|mut c| async move {
        c.list_bindings(v1::ListBindingsRequest::default())
            .await
            .expect("ListBindings")
            .into_inner()
            .bindings
    })
}

fn ingress(h: &Harness) -> Vec<(String, String)> {
    h.with_client(|mut c| async move {
        c.list_ingress(v1::ListIngressRequest {
            platform: "discord".into(),
        })
        .await
        .expect("ListIngress")
        .into_inner()
        .cursors
        .into_iter()
        .map(|c| (c.chat, c.id))
        .collect()
    })
}

/// The gateway is killed after Telegram took a reply but before the gateway heard so (its
/// answer held): the next gateway cannot know whether it went out, so it sends it again and
/// says first that it may be a repeat. Nothing is lost, and the repeat is never silent; the
/// next reply goes out once, with no such notice.
#[test]
fn a_reply_sent_as_the_gateway_died_is_sent_again_saying_it_may_repeat() {
    let (h, tg, g) = setup("");
    let mut g = Gateway(g);
    let work = h.work.display().to_string();
    new_session(&tg, ADMIN, "d", &work);
    tg.hold_answer_when("sendMessage", "held-7", Duration::from_secs(60));
    tg.push_message(ADMIN, ADMIN, "Owner", "echo held-$((3+4))");
    tg.wait_sent("the reply, its answer held", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("held-7"))
    });
    let _ = g.0.kill();
    let _ = g.0.wait();
    g = Gateway(gateway(&h, &tg));
    let sent = tg.wait_sent("the reply again", |s| {
        texts(s, ADMIN)
            .iter()
            .filter(|t| t.contains("held-7"))
            .count()
            == 2
    });
    let chat = texts(&sent, ADMIN);
    let second = chat
        .iter()
        .rposition(|t| t.contains("held-7"))
        .expect("the second copy");
    assert!(
        chat[second - 1].contains("may be a repeat"),
        "the repeat is announced: {chat:#?}"
    );
    tg.push_message(ADMIN, ADMIN, "Owner", "echo next-$((4+4))");
    let sent = tg.wait_sent("the next reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("next-8"))
    });
    let chat = texts(&sent, ADMIN);
    assert_eq!(
        chat.iter()
            .filter(|t| t.contains("may be a repeat"))
            .count(),
        1,
        "only the message in doubt is announced: {chat:#?}"
    );
    assert_eq!(
        chat.iter().filter(|t| t.contains("held-7")).count(),
        2,
        "{chat:#?}"
    );
    drop(g);
}

/// The gateway is killed while a turn runs: the next one takes up the status message the old
/// one posted, edits it on and closes it when the turn ends, rather than leaving it at
/// "working…" and posting a second one.
#[test]
fn a_restarted_gateway_closes_the_status_message_the_old_one_posted() {
    let (h, tg, g) = setup("");
    let mut g = Gateway(g);
    let work = h.work.display().to_string();
    new_session(&tg, ADMIN, "s", &work);
    tg.push_message(ADMIN, ADMIN, "Owner", "sleep 4; echo slow-$((5*5))");
    let sent = tg.wait_sent("the status", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("[s] working"))
    });
    let status = sent
        .iter()
        .find(|m| m.chat_id == ADMIN && m.method == "sendmessage" && m.text.contains("[s] working"))
        .map(|m| m.message_id)
        .expect("the status message");
    // The status is recorded in the daemon just after it is posted.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !bindings(&h)
        .iter()
        .any(|b| b.status.as_ref().is_some_and(|s| !s.message.is_empty()))
    {
        assert!(Instant::now() < deadline, "the status is never recorded");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = g.0.kill();
    let _ = g.0.wait();
    g = Gateway(gateway(&h, &tg));
    tg.wait_sent("the reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("slow-25"))
    });
    tg.wait_sent("the status closed", |_| {
        tg.calls_of("editMessageText").iter().any(|p| {
            p["message_id"].as_i64() == Some(status)
                && p["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("[s] done in"))
        })
    });
    let posted = texts(&tg.sent(), ADMIN)
        .iter()
        .filter(|t| t.contains("[s] working"))
        .count();
    assert_eq!(posted, 1, "one status message for the turn");
    drop(g);
}
