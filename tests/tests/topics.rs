//! A topic per session (`[gateway.PLATFORM] topics = true`): a session chosen in a chat's
//! general part gets a topic of its own (a Telegram forum topic, a Discord thread, a Feishu
//! thread), what is written in a topic goes to its session with no `!!use`, its replies and
//! prompts come back there, and the topic closes when the session ends and reopens when it
//! starts again. Tried as a group member who may not use another's session would, and across a
//! gateway killed with -9. Real clibotd and clibot-gateway against the fakes, bash in tmux.

use std::time::{Duration, Instant};

use clibot_tests::Harness;
use clibot_tests::asker::{ASK_FN, ASKER};
use clibot_tests::fake_telegram::{FakeTelegram, Sent, TEST_TOKEN};

const ADMIN: i64 = 100;
const ANN: i64 = 200;
const FORUM: i64 = -1_001_234_567_890;

/// Messages the bot sent to `chat` in topic `thread` (`None`: outside any topic).
fn in_topic(sent: &[Sent], chat: i64, thread: Option<i64>) -> Vec<String> {
    sent.iter()
        .filter(|s| s.chat_id == chat && s.method == "sendmessage" && s.thread == thread)
        .map(|s| s.text.clone())
        .collect()
}

fn said_in(tg: &FakeTelegram, chat: i64, thread: Option<i64>, needle: &str) {
    tg.wait_sent(&format!("{needle:?} in topic {thread:?}"), |s| {
        in_topic(s, chat, thread).iter().any(|t| t.contains(needle))
    });
}

/// The one topic named `name` in `chat`: (id, closed). Waits up to 20 s for it.
fn topic(tg: &FakeTelegram, chat: i64, name: &str) -> (i64, bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let named: Vec<(i64, String, bool)> = tg
            .topics(chat)
            .into_iter()
            .filter(|(_, n, _)| n == name)
            .collect();
        match named.as_slice() {
            [(id, _, closed)] => return (*id, *closed),
            [] if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            _ => panic!("topics named {name}: {named:?}"),
        }
    }
}

fn wait_closed(tg: &FakeTelegram, chat: i64, name: &str, closed: bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while topic(tg, chat, name).1 != closed {
        assert!(
            Instant::now() < deadline,
            "topic {name} closed should be {closed}: {:?}",
            tg.topics(chat)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn screen(h: &Harness, name: &str) -> String {
    String::from_utf8_lossy(&h.ctl(&["screen", name, "--lines", "200"]).stdout).into_owned()
}

/// A running gateway, ended (killed and reaped) when dropped.
struct Gateway(std::process::Child);

impl Gateway {
    /// `kill -9`, as a crash would.
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

fn gateway(h: &Harness, tg: &FakeTelegram) -> Gateway {
    let g = clibot_tests::fake_telegram::gateway(h, tg);
    assert!(
        tg.wait_polling(Duration::from_secs(20)),
        "the gateway polls"
    );
    Gateway(g)
}

fn config(extra: &str) -> String {
    format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"*\"]\ngroups = [\"{FORUM}\"]\nsandbox = \"off\"\n\n[gateway.telegram]\ntopics = true\n{extra}\n{ASKER}"
    )
}

#[test]
fn telegram_forum_gives_each_session_its_own_topic() {
    let mut h = Harness::with_config(&config(""));
    h.start_daemon();
    let tg = FakeTelegram::start(TEST_TOKEN);
    tg.make_forum(FORUM);
    let mut g = gateway(&h, &tg);
    let dir = h.work.clone();

    // Started from the general topic: the session gets a topic named after it, which says
    // what it is for; the general topic is told where it went.
    tg.push_message(
        FORUM,
        ADMIN,
        "Owner",
        &format!("!!new api asker {}", dir.display()),
    );
    said_in(&tg, FORUM, None, "started api");
    said_in(&tg, FORUM, None, "own topic");
    let (api, closed) = topic(&tg, FORUM, "api");
    assert!(!closed);
    said_in(&tg, FORUM, Some(api), "what you write here goes to it");

    // Plain text in the general topic goes nowhere: it says where to write.
    tg.push_message(FORUM, ADMIN, "Owner", "echo lost");
    said_in(&tg, FORUM, None, "each session talks in a topic of its own");

    // A second session, a second topic; each topic talks to its own session.
    tg.push_message(
        FORUM,
        ADMIN,
        "Owner",
        &format!("!!new web asker {}", dir.display()),
    );
    let (web, _) = topic(&tg, FORUM, "web");
    assert_ne!(api, web);
    tg.push_topic_message(FORUM, api, ADMIN, "Owner", "echo api-$((6*7))");
    tg.push_topic_message(FORUM, web, ADMIN, "Owner", "echo web-$((7*8))");
    h.wait_screen("api", "api's output", |s| s.contains("api-42"));
    h.wait_screen("web", "web's output", |s| s.contains("web-56"));
    assert!(
        !screen(&h, "api").contains("web-56"),
        "web's text reached api"
    );
    // Each reply comes back in its own topic.
    said_in(&tg, FORUM, Some(api), "api-42");
    said_in(&tg, FORUM, Some(web), "web-56");
    assert!(
        !in_topic(&tg.sent(), FORUM, Some(web))
            .iter()
            .any(|t| t.contains("api-42")),
        "api's reply went to web's topic"
    );

    // A prompt shows in its topic with buttons, and a press there answers it.
    tg.push_topic_message(FORUM, api, ADMIN, "Owner", ASK_FN);
    tg.push_topic_message(FORUM, api, ADMIN, "Owner", "ask 'make deploy'");
    let sent = tg.wait_sent("the prompt's buttons in api's topic", |s| {
        s.iter().any(|m| {
            m.chat_id == FORUM
                && m.thread == Some(api)
                && m.reply_markup.is_some()
                && m.text.contains("make deploy")
        })
    });
    let prompt = sent
        .iter()
        .rev()
        .find(|m| m.thread == Some(api) && m.reply_markup.is_some())
        .expect("the prompt");
    let data =
        prompt.reply_markup.as_ref().expect("buttons")["inline_keyboard"][0][0]["callback_data"]
            .as_str()
            .expect("a callback button")
            .to_string();
    tg.push_callback(FORUM, ADMIN, prompt.message_id, &data);
    h.wait_screen("api", "the answer ran", |s| {
        s.contains("decided make deploy: y")
    });
    // A plain question goes without a picture; a dialog showing a table goes with one,
    // drawn from the pane, before its buttons.
    assert!(tg.photos().is_empty(), "a picture of a plain question");
    tg.push_topic_message(
        FORUM,
        api,
        ADMIN,
        "Owner",
        r"printf '\n| file | size | action |\n| a.txt | 10 | delete |\n| b.txt | 20 | delete |\n'; ask 'rm a.txt b.txt'",
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while tg.photos().is_empty() {
        assert!(
            Instant::now() < deadline,
            "no picture of the table's dialog"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let photo = &tg.photos()[0];
    assert_eq!(
        (photo.chat_id, photo.filename.as_str()),
        (FORUM, "dialog.png")
    );
    assert!(photo.content.starts_with(b"\x89PNG"));
    let sent = tg.wait_sent("the table's prompt", |s| {
        s.iter().any(|m| {
            m.thread == Some(api) && m.reply_markup.is_some() && m.text.contains("rm a.txt")
        })
    });
    let photo_at = sent
        .iter()
        .position(|m| m.method == "sendphoto" && m.thread == Some(api))
        .expect("the picture went to api's topic");
    let prompt_at = sent
        .iter()
        .position(|m| m.reply_markup.is_some() && m.text.contains("rm a.txt"))
        .expect("the prompt");
    assert!(photo_at < prompt_at, "the picture comes before the buttons");
    tg.push_topic_message(FORUM, api, ADMIN, "Owner", "n");
    h.wait_screen("api", "the answer ran", |s| {
        s.contains("decided rm a.txt b.txt: n")
    });

    // Another member of the group, allowed to use clibot, may not use the admin's session
    // by writing in its topic.
    tg.push_topic_message(FORUM, api, ANN, "Ann", "echo ann-was-here");
    said_in(&tg, FORUM, Some(api), "you may not use");
    std::thread::sleep(Duration::from_millis(500));
    assert!(!screen(&h, "api").contains("ann-was-here"));

    // The gateway holds nothing: killed with -9 and started again, the topics still lead to
    // their sessions.
    g.kill();
    let _g = gateway(&h, &tg);
    tg.push_topic_message(FORUM, web, ADMIN, "Owner", "echo again-$((8*8))");
    h.wait_screen("web", "web's output after the restart", |s| {
        s.contains("again-64")
    });

    // Stopped, its topic closes; started again from the general topic, the same topic opens.
    tg.push_topic_message(FORUM, api, ADMIN, "Owner", "!!stop");
    wait_closed(&tg, FORUM, "api", true);
    tg.push_message(
        FORUM,
        ADMIN,
        "Owner",
        &format!("!!new api asker {}", dir.display()),
    );
    wait_closed(&tg, FORUM, "api", false);
    assert_eq!(topic(&tg, FORUM, "api").0, api, "a second topic for api");
    tg.push_topic_message(FORUM, api, ADMIN, "Owner", "echo back-$((9*9))");
    said_in(&tg, FORUM, Some(api), "back-81");

    // `!!use` in the general topic leads to the session's topic, never binds the general one.
    tg.push_message(FORUM, ADMIN, "Owner", "!!use web");
    said_in(&tg, FORUM, None, "web: it talks in its topic");
    tg.push_message(FORUM, ADMIN, "Owner", "echo still-lost");
    std::thread::sleep(Duration::from_millis(500));
    assert!(!screen(&h, "web").contains("still-lost"));
}

#[test]
fn telegram_private_chat_topics_and_a_chat_without_topics() {
    // The admin's private chat is the default chat: sessions started at the desk reach it.
    let mut h = Harness::with_config(&config(&format!("default_chat = \"{ADMIN}\"")));
    h.start_daemon();
    let tg = FakeTelegram::start(TEST_TOKEN);
    // The bot has topics in private chats (Bot API 9.3), which only getMe says.
    tg.enable_private_topics();
    let mut g = gateway(&h, &tg);
    let dir = h.work.clone();

    // A session started at the desk gets a topic of its own in the default chat the first
    // time it has something to say, and its replies go there.
    let work = dir.display().to_string();
    h.ctl_ok(&["spawn", "desk", "--cli", "asker", "--dir", &work]);
    h.ctl_ok(&["send", "desk", "echo desk-$((2*21))"]);
    let (desk, _) = topic(&tg, ADMIN, "desk");
    said_in(&tg, ADMIN, Some(desk), "started on the machine");
    said_in(&tg, ADMIN, Some(desk), "desk-42");
    // The topic is the session's binding: a new gateway finds it, and a message written in
    // it reaches the session.
    g.kill();
    let _g = gateway(&h, &tg);
    tg.push_topic_message(ADMIN, desk, ADMIN, "Owner", "echo phone-$((3*7))");
    said_in(&tg, ADMIN, Some(desk), "phone-21");
    assert_eq!(tg.topics(ADMIN).len(), 1, "{:?}", tg.topics(ADMIN));
    assert!(
        in_topic(&tg.sent(), ADMIN, None)
            .iter()
            .all(|t| !t.contains("desk-42")),
        "desk's reply went to the chat itself"
    );

    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        &format!("!!new mine asker {}", dir.display()),
    );
    said_in(&tg, ADMIN, None, "started mine");
    let (mine, _) = topic(&tg, ADMIN, "mine");
    said_in(&tg, ADMIN, None, "own topic");
    tg.push_topic_message(ADMIN, mine, ADMIN, "Owner", "echo mine-$((3*3))");
    said_in(&tg, ADMIN, Some(mine), "mine-9");

    // A plain group (no topics) works as before: `!!new` binds the group itself.
    let group = -42;
    let mut h2 = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nadmins = [\"{ADMIN}\"]\nclis = [\"*\"]\ngroups = [\"{group}\"]\nsandbox = \"off\"\n\n[gateway.telegram]\ntopics = true\n{ASKER}"
    ));
    h2.start_daemon();
    let tg2 = FakeTelegram::start(TEST_TOKEN);
    let _g2 = gateway(&h2, &tg2);
    tg2.push_message(
        group,
        ADMIN,
        "Owner",
        &format!("!!new g asker {}", h2.work.display()),
    );
    said_in(&tg2, group, None, "this chat now talks to it");
    assert!(tg2.topics(group).is_empty());
    tg2.push_message(group, ADMIN, "Owner", "echo plain-$((2*5))");
    said_in(&tg2, group, None, "plain-10");
}

#[test]
fn discord_channel_gives_each_session_its_own_thread() {
    use clibot_tests::fake_discord::{self, SentMessage};
    const D_ADMIN: u64 = 1_500_000_000_000_000_001;
    const D_MEMBER: u64 = 1_500_000_000_000_000_003;
    const GUILD: u64 = 1_500_000_000_000_000_002;
    const CHANNEL: u64 = 1_500_000_000_000_000_200;
    let (h, dc, _g) = fake_discord::started(&format!(
        "\n[access.discord]\npolicy = \"allowlist\"\nallow = [\"{D_MEMBER}\"]\nadmins = [\"{D_ADMIN}\"]\nclis = [\"*\"]\ngroups = [\"{CHANNEL}\"]\nsandbox = \"off\"\n\n[gateway.discord]\ntopics = true\n{ASKER}"
    ));
    let dir = h.work.display().to_string();
    let posted = |channel: u64, needle: &str| {
        dc.wait_sent(needle, |s: &[SentMessage]| {
            s.iter()
                .any(|m| m.channel_id == channel && m.text().contains(needle))
        });
    };

    dc.send_as_user_in_guild(
        GUILD,
        CHANNEL,
        D_ADMIN,
        "owner",
        &format!("!!new api asker {dir}"),
    );
    posted(CHANNEL, "own topic");
    let threads = dc.threads();
    let [(api, parent, name, false)] = threads.as_slice() else {
        panic!("one open thread: {threads:?}");
    };
    assert_eq!((*parent, name.as_str()), (CHANNEL, "api"));
    let api = *api;
    posted(api, "what you write here goes to it");

    // In the thread: to the session, and its reply and prompt come back there.
    dc.send_as_user_in_thread(GUILD, api, D_ADMIN, "owner", "echo d-$((4*4))");
    posted(api, "d-16");
    dc.send_as_user_in_thread(GUILD, api, D_ADMIN, "owner", ASK_FN);
    dc.send_as_user_in_thread(GUILD, api, D_ADMIN, "owner", "ask 'rm -r build'");
    let sent = dc.wait_sent(
        "the prompt's buttons in the thread",
        |s: &[SentMessage]| {
            s.iter()
                .any(|m| m.channel_id == api && m.components.is_some())
        },
    );
    let prompt = sent
        .iter()
        .rev()
        .find(|m| m.channel_id == api && m.components.is_some())
        .expect("the prompt");
    // The dialog is an embed, its buttons under it.
    assert!(
        prompt.embeds.iter().any(|e| e["description"]
            .as_str()
            .is_some_and(|d| d.contains("rm -r build"))),
        "{prompt:?}"
    );
    let custom_id = prompt.components.as_ref().expect("buttons")[0]["components"][0]["custom_id"]
        .as_str()
        .expect("a button")
        .to_string();
    dc.push_button(api, D_ADMIN, prompt.id, &custom_id);
    h.wait_screen("api", "the answer ran", |s| {
        s.contains("decided rm -r build: y")
    });

    // Another member may not drive the admin's session from its thread.
    dc.send_as_user_in_thread(GUILD, api, D_MEMBER, "mel", "echo mel-was-here");
    posted(api, "you may not use");
    assert!(!screen(&h, "api").contains("mel-was-here"));

    // Plain text in the channel itself goes to no session.
    dc.send_as_user_in_guild(GUILD, CHANNEL, D_ADMIN, "owner", "echo nowhere");
    posted(CHANNEL, "each session talks in a topic of its own");

    // Stopped: the thread says so and is archived; started again, the same thread is used.
    dc.send_as_user_in_thread(GUILD, api, D_ADMIN, "owner", "!!stop");
    posted(api, "this topic is closed");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dc.threads().iter().any(|t| t.0 == api && t.3) {
        assert!(Instant::now() < deadline, "archived: {:?}", dc.threads());
        std::thread::sleep(Duration::from_millis(100));
    }
    dc.send_as_user_in_guild(
        GUILD,
        CHANNEL,
        D_ADMIN,
        "owner",
        &format!("!!new api asker {dir}"),
    );
    posted(CHANNEL, "it talks in its topic");
    assert_eq!(dc.threads().len(), 1, "{:?}", dc.threads());
    dc.send_as_user_in_thread(GUILD, api, D_ADMIN, "owner", "echo again-$((5*5))");
    posted(api, "again-25");
    assert!(
        dc.threads().iter().any(|t| t.0 == api && !t.3),
        "{:?}",
        dc.threads()
    );
}

#[test]
fn feishu_group_gives_each_session_its_own_thread() {
    use clibot_tests::fake_feishu::{
        APP_ID, APP_SECRET, BOT_OPEN_ID, FakeFeishu, Sent as FSent, gateway as feishu_gateway,
        gateway_config, in_thread, text_event,
    };
    const F_ADMIN: &str = "ou_admin000000000000000000000000000";
    const GROUP: &str = "oc_group0000000000000000000000000000";
    let fs = FakeFeishu::start(APP_ID, APP_SECRET);
    let mut h = Harness::with_config(&gateway_config(
        &fs,
        &format!(
            "topics = true\n[access.feishu]\npolicy = \"allowlist\"\nadmins = [\"{F_ADMIN}\"]\nclis = [\"*\"]\ngroups = [\"{GROUP}\"]\nsandbox = \"off\"\n{ASKER}"
        ),
    ));
    h.start_daemon();
    let _g = Gateway(feishu_gateway(&h, &fs));
    let mut n = 0;
    let mut say = |root: Option<&str>, text: &str| {
        n += 1;
        let ev = text_event(
            &format!("ev{n}"),
            &format!("om_user{n}"),
            GROUP,
            "group",
            F_ADMIN,
            &format!("@_user_1 {text}"),
            &[("@_user_1", BOT_OPEN_ID, "clibot")],
        );
        fs.push_event(&match root {
            Some(r) => in_thread(ev, r),
            None => ev,
        });
    };
    let text_of = |m: &FSent| m.text();
    let posted = |root: &str, needle: &str| {
        fs.wait_sent(needle, |s: &[FSent]| {
            s.iter()
                .any(|m| m.chat == GROUP && m.root == root && text_of(m).contains(needle))
        })
    };
    let dir = h.work.display().to_string();

    say(None, &format!("!!new api asker {dir}"));
    posted("", "own topic");
    // The thread grows from a message of the bot's naming the session.
    let sent = posted("", "🧵 api");
    let root = sent
        .iter()
        .find(|m| text_of(m).contains("🧵 api"))
        .map(|m| m.message_id.clone())
        .expect("the thread's first message");
    posted(&root, "what you write here goes to it");

    say(Some(&root), "echo f-$((3*4))");
    let sent = posted(&root, "f-12");
    // Replies are rich text (Markdown).
    assert!(
        sent.iter()
            .any(|m| m.root == root && m.msg_type == "post" && text_of(m).contains("f-12"))
    );
    say(None, "echo nowhere");
    posted("", "each session talks in a topic of its own");
    assert!(!screen(&h, "api").contains("nowhere"));

    // Stopped: the thread is told (Feishu threads cannot be closed).
    say(Some(&root), "!!stop");
    posted(&root, "this topic is closed");
    // Started again, it talks in the same thread.
    say(None, &format!("!!new api asker {dir}"));
    posted("", "it talks in its topic");
    say(Some(&root), "echo again-$((6*6))");
    posted(&root, "again-36");
}

#[test]
fn slack_channel_gives_each_session_its_own_thread() {
    use clibot_tests::fake_slack::{
        FakeSlack, Sent as SSent, TEAM, gateway as slack_gateway, gateway_config,
    };
    const S_ADMIN: &str = "U0ADMIN";
    const CHANNEL: &str = "C0DEV";
    let fs = FakeSlack::start();
    let mut h = Harness::with_config(&gateway_config(
        &fs,
        &format!(
            "topics = true\n[access.slack]\npolicy = \"allowlist\"\nadmins = [\"{TEAM}:{S_ADMIN}\"]\nclis = [\"*\"]\ngroups = [\"{CHANNEL}\"]\nsandbox = \"off\"\n{ASKER}"
        ),
    ));
    h.start_daemon();
    let _g = Gateway(slack_gateway(&h, &fs));
    let say = |thread: Option<&str>, text: &str| match thread {
        Some(t) => fs.push_thread_message(CHANNEL, t, S_ADMIN, text),
        None => fs.push_message(
            CHANNEL,
            S_ADMIN,
            &format!("<@{}> {text}", clibot_tests::fake_slack::BOT_USER),
        ),
    };
    let posted = |thread: &str, needle: &str| {
        fs.wait_sent(needle, |s: &[SSent]| {
            s.iter().any(|m| {
                m.channel == CHANNEL && m.thread_ts == thread && m.shown().contains(needle)
            })
        })
    };
    let dir = h.work.display().to_string();

    say(None, &format!("!!new api asker {dir}"));
    // The thread grows from a message of the bot's naming the session (in bold).
    let sent = posted("", "🧵 *api*");
    let root = sent
        .iter()
        .find(|m| m.shown().contains("🧵 *api*"))
        .map(|m| m.ts.clone())
        .expect("the thread's first message");
    posted(&root, "what you write here goes to it");

    say(Some(&root), "echo s-$((3*4))");
    posted(&root, "s-12");
    say(None, "echo nowhere");
    posted("", "each session talks in a topic of its own");
    assert!(!screen(&h, "api").contains("nowhere"));

    // A prompt in the thread is answered by its button there.
    say(Some(&root), ASK_FN);
    say(Some(&root), "ask 'make deploy'");
    let sent = fs.wait_sent("the prompt in the thread", |s: &[SSent]| {
        s.iter()
            .any(|m| m.thread_ts == root && !m.buttons().is_empty())
    });
    let prompt = sent
        .iter()
        .rev()
        .find(|m| m.thread_ts == root && !m.buttons().is_empty())
        .expect("prompt")
        .clone();
    fs.press(CHANNEL, S_ADMIN, &prompt.ts, "1.");
    h.wait_screen("api", "the answer", |t| {
        t.contains("decided make deploy: y")
    });

    // Stopped: the thread is marked ended; started again, it talks in the same thread, unmarked.
    say(Some(&root), "!!stop");
    assert!(
        fs.wait_until(Duration::from_secs(20), |f| f
            .reactions(CHANNEL, &root)
            .iter()
            .any(|r| r == "white_check_mark")),
        "the ended thread is marked"
    );
    say(None, &format!("!!new api asker {dir}"));
    posted("", "it talks in its topic");
    assert!(fs.wait_until(Duration::from_secs(20), |f| {
        f.reactions(CHANNEL, &root).is_empty()
    }));
    say(Some(&root), "echo again-$((6*6))");
    posted(&root, "again-36");
}

/// A session name the admin freed hands nothing to the member who takes it next: the member's
/// new session gets a topic of its own, the admin's old topic stays closed and leads nowhere,
/// and what the admin writes there never reaches the member's session.
#[test]
fn a_freed_name_hands_neither_topic_nor_binding_to_whoever_reuses_it() {
    let mut h = Harness::with_config(&config(""));
    h.start_daemon();
    let tg = FakeTelegram::start(TEST_TOKEN);
    tg.make_forum(FORUM);
    let _g = gateway(&h, &tg);
    let dir = h.work.clone();
    tg.push_message(
        FORUM,
        ADMIN,
        "Owner",
        &format!("!!new a1 asker {}", dir.display()),
    );
    let (admins, _) = topic(&tg, FORUM, "a1");
    tg.push_topic_message(FORUM, admins, ADMIN, "Owner", "!!stop");
    wait_closed(&tg, FORUM, "a1", true);
    tg.push_message(FORUM, ANN, "Ann", "!!new a1 bash");
    said_in(&tg, FORUM, None, "started a1");
    let deadline = Instant::now() + Duration::from_secs(20);
    let theirs = loop {
        let named: Vec<(i64, String, bool)> = tg
            .topics(FORUM)
            .into_iter()
            .filter(|(_, n, _)| n == "a1")
            .collect();
        if let Some((id, _, _)) = named.iter().find(|(id, _, _)| *id != admins) {
            assert!(
                named.iter().any(|(id, _, closed)| *id == admins && *closed),
                "the admin's topic stays closed: {named:?}"
            );
            break *id;
        }
        assert!(Instant::now() < deadline, "Ann's own topic: {named:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_ne!(theirs, admins);
    tg.push_topic_message(FORUM, admins, ADMIN, "Owner", "echo admin-$((2*3))");
    tg.push_topic_message(FORUM, theirs, ANN, "Ann", "echo ann-$((3*4))");
    h.wait_screen("a1", "Ann's own text", |s| s.contains("ann-12"));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !screen(&h, "a1").contains("admin-6"),
        "the admin's old topic typed into Ann's session"
    );
}

#[test]
fn each_run_of_a_job_that_starts_sessions_gets_a_topic_of_its_own() {
    let mut h = Harness::with_config(&config(&format!("default_chat = \"{ADMIN}\"")));
    h.start_daemon();
    let tg = FakeTelegram::start(TEST_TOKEN);
    tg.enable_private_topics();
    let _g = gateway(&h, &tg);
    let work = h.work.display().to_string();
    h.ctl_ok(&[
        "jobs",
        "add",
        "nightly",
        "--cli",
        "asker",
        "--dir",
        &work,
        "--prompt",
        "echo nightly-$((6*7))",
        "--every",
        "1h",
        "--overlap",
        "parallel",
    ]);
    for run in [1, 2] {
        h.ctl_ok(&["jobs", "run", "nightly"]);
        let name = format!("nightly-{run}");
        let (t, _) = topic(&tg, ADMIN, &name);
        said_in(
            &tg,
            ADMIN,
            Some(t),
            &format!("⏰ job nightly (run {run}, run by hand)"),
        );
        said_in(&tg, ADMIN, Some(t), "nightly-42");
    }
    assert_eq!(tg.topics(ADMIN).len(), 2, "{:?}", tg.topics(ADMIN));
    assert!(
        in_topic(&tg.sent(), ADMIN, None)
            .iter()
            .all(|t| !t.contains("nightly-42")),
        "no run's reply went to the chat itself"
    );
}
