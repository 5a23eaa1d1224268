//! `!!board` on every platform: one message, pinned, edited in place as a prompt appears and is
//! answered; no edit when nothing changed; a burst of fifty changes costs a few edits, not
//! fifty; a gateway killed with -9 keeps editing the same message, and `!!board` again re-pins
//! it rather than sending another (the daemon, killed too, kept which message it is); `!!board off` takes it down. Its buttons run the commands
//! they name. Real clibotd and clibot-gateway against each platform's fake, bash in tmux.

use std::time::{Duration, Instant};

use clibot_tests::chats::{self, Chat, Kind, count, said_more, wait};

/// The board's message ids (distinct) and its versions so far.
fn board(c: &dyn Chat) -> (Vec<String>, Vec<String>) {
    let versions = c.board_versions();
    let mut ids: Vec<String> = versions.iter().map(|(id, _)| id.clone()).collect();
    ids.dedup();
    (ids, versions.into_iter().map(|(_, t)| t).collect())
}

/// Waits until the board's newest version shows `needle`.
fn board_shows(c: &dyn Chat, needle: &str) {
    wait(&format!("the board to show {needle:?}"), c.name(), || {
        board(c).1.last().is_some_and(|t| t.contains(needle))
    });
}

fn scenario(kind: Kind) {
    let (mut h, mut c) = chats::start(kind, "");
    let c = c.as_mut();
    let work = h.work.display().to_string();
    c.say(&format!("!!new bd bash {work}"));
    said_more(c, "started bd", 0);

    c.say("!!board");
    said_more(c, "board pinned", 0);
    board_shows(c, "bd (bash)");
    let (ids, _) = board(c);
    assert_eq!(ids.len(), 1, "{}: one board message", c.name());
    let id = ids[0].clone();
    assert!(
        c.pinned().contains(&id),
        "{}: pinned: {:?}",
        c.name(),
        c.pinned()
    );

    // A prompt appears: the board says so; answered, it says so again.
    c.say("read -p 'Board? [y/N] ' a; echo board=$a");
    board_shows(c, "1 waiting for you");
    c.press("Board?", 1);
    said_more(c, "board=y", 0);
    board_shows(c, "none waiting for you");

    // Nothing changes: no edit (the keeper draws at most every 3 s; two such windows pass).
    let settled = board(c).1.len();
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(
        board(c).1.len(),
        settled,
        "{}: no edit without a change",
        c.name()
    );

    // A burst of fifty changes: a few edits, and the replies are not held up.
    let t0 = Instant::now();
    for i in 0..50 {
        h.ctl_ok(&["send", "bd", &format!("true {i}")]);
    }
    c.say("echo after-burst-$((2*3))");
    said_more(c, "after-burst-6", 0);
    let burst = t0.elapsed();
    board_shows(c, "bd (bash) idle");
    std::thread::sleep(Duration::from_secs(4));
    let edits = board(c).1.len() - settled;
    let most = (burst.as_secs() / 3) as usize + 3;
    assert!(
        edits <= most,
        "{}: {edits} edits for 50 changes over {burst:?} (at most {most})",
        c.name()
    );

    // The gateway killed with -9, and the daemon too: the same message is edited after.
    c.restart_gateway(&h);
    h.kill_daemon();
    h.start_daemon();
    c.say("read -p 'Again? [y/N] ' b; echo again=$b");
    board_shows(c, "1 waiting for you");
    c.press("Again?", 1);
    said_more(c, "again=y", 0);
    // `!!board` again: the same message, re-pinned, never sent anew.
    c.say("!!board");
    said_more(c, "board pinned", 1);
    let (ids, _) = board(c);
    assert_eq!(
        ids,
        vec![id.clone()],
        "{}: still one board message",
        c.name()
    );

    // Its buttons run the commands they name.
    let jobs = count(c, "job");
    c.press("bd (bash)", 3);
    wait("!!jobs from the board", c.name(), || count(c, "job") > jobs);

    c.say("!!board off");
    said_more(c, "board taken down", 0);
    wait("unpinned", c.name(), || !c.pinned().contains(&id));
}

#[test]
fn a_board_on_telegram() {
    scenario(Kind::Telegram);
}

#[test]
fn a_board_on_discord() {
    scenario(Kind::Discord);
}

#[test]
fn a_board_on_feishu() {
    scenario(Kind::Feishu);
}

#[test]
fn a_board_on_slack() {
    scenario(Kind::Slack);
}
