//! Choosing among sessions from a chat: `!!sessions` says how long each has run and what it last
//! did; a message in a chat bound to no session, while several could take it, gets one button
//! per session, and the press sends it there (and binds the chat). A press on a list that has
//! changed since is refused and the list offered again, the message still waiting. On Telegram
//! and Slack, real clibotd and clibot-gateway against the fakes, bash in tmux.

use clibot_tests::chats::{self, Kind, count, said_more, wait};

fn scenario(kind: Kind) {
    let (h, mut c) = chats::start(kind, "");
    let c = c.as_mut();
    h.spawn_bash("aa");
    h.spawn_bash("bb");
    h.ctl_ok(&["send", "bb", "echo did-bb-$((1+1))"]);
    h.wait_screen("bb", "its reply", |s| s.contains("did-bb-2"));

    c.say("!!sessions");
    wait("the list with run time and last deed", c.name(), || {
        c.said().iter().any(|t| {
            t.contains("aa (bash)")
                && t.contains("bb (bash)")
                && t.contains("up ")
                && t.contains("did-bb")
        })
    });

    // Bound to nothing, two sessions: the message waits for a button.
    c.say("echo chosen-$((6*7))");
    wait("the choice", c.name(), || {
        count(c, "which session should take it?") > 0
    });
    // A session comes meanwhile: the old buttons pick nothing, the list comes again.
    h.spawn_bash("cc");
    c.press("which session should take it?", 2);
    wait("the list offered again", c.name(), || {
        count(c, "the sessions changed since") > 0
    });
    for s in ["aa", "bb", "cc"] {
        assert!(
            !h.ctl_ok(&["screen", s]).contains("chosen-42"),
            "{}: nothing typed into {s} before a valid choice",
            c.name()
        );
    }
    c.press("the sessions changed since", 2);
    said_more(c, "your message went to it", 0);
    h.wait_screen("bb", "the message typed into the chosen session", |s| {
        s.contains("chosen-42")
    });
    assert!(!h.ctl_ok(&["screen", "aa"]).contains("chosen-42"));
    // The chat is bound now: the next message goes straight there.
    c.say("echo next-$((2*5))");
    h.wait_screen("bb", "the next message", |s| s.contains("next-10"));
}

#[test]
fn choosing_a_session_on_telegram() {
    scenario(Kind::Telegram);
}

#[test]
fn choosing_a_session_on_slack() {
    scenario(Kind::Slack);
}
