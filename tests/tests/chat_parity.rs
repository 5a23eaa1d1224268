//! The same chat scenarios, run on every platform: Telegram, Discord, Feishu and Slack, each
//! against its fake, with the real clibotd and clibot-gateway and bash in tmux. Starting a
//! session, text both ways, `!!sessions`, a prompt answered by its button and the stale press
//! refused, `!!screen`, `!!shot`, a stranger kept out, `!!stop`: what a user of one platform
//! can do, a user of another can do the same way.

use clibot_tests::Harness;
use clibot_tests::chats::{self, Chat, Kind, count, said_more, wait};

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

#[test]
fn the_same_commands_work_the_same_on_telegram() {
    let (h, mut c) = chats::start(Kind::Telegram, "");
    scenarios(c.as_mut(), &h);
}

#[test]
fn the_same_commands_work_the_same_on_discord() {
    let (h, mut c) = chats::start(Kind::Discord, "");
    scenarios(c.as_mut(), &h);
}

#[test]
fn the_same_commands_work_the_same_on_feishu() {
    let (h, mut c) = chats::start(Kind::Feishu, "");
    scenarios(c.as_mut(), &h);
}

#[test]
fn the_same_commands_work_the_same_on_slack() {
    let (h, mut c) = chats::start(Kind::Slack, "");
    scenarios(c.as_mut(), &h);
}

/// A program with no pack of its own asking in words ("Shall I continue?") or in Chinese
/// ("是否继续？") gets buttons like any prompt, and the press types its answer.
fn confirmations_in_words(kind: Kind) {
    let (h, mut c) = chats::start(kind, "");
    let c = c.as_mut();
    let work = h.work.display().to_string();
    c.say(&format!("!!new cf bash {work}"));
    said_more(c, "started cf", 0);
    c.say("read -p 'Shall I continue? ' a; echo answered=$a");
    c.press("Shall I continue?", 1);
    said_more(c, "answered=yes", 0);
    c.say("read -p '是否继续？' b; echo 回答=$b");
    c.press("是否继续", 2);
    said_more(c, "回答=否", 0);
}

#[test]
fn confirmations_in_words_on_telegram() {
    confirmations_in_words(Kind::Telegram);
}

#[test]
fn confirmations_in_words_on_slack() {
    confirmations_in_words(Kind::Slack);
}
