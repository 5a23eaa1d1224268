//! A turn read off the screen is replied whole although tmux trims the pane's scrollback at
//! its `history-limit` (10,000 lines by default): a 2,000-row turn in a pane whose scrollback
//! is already nearly full, and a 15,000-row turn, longer than tmux keeps at all — its reply
//! says so and is what the turn printed, from the copy kept outside tmux. Real clibotd,
//! clibotctl and bash in tmux, at the default limit.

use clibot_tests::Harness;

/// A bash session, idle.
fn spawn_bash(h: &Harness, name: &str) {
    h.spawn_bash(name);
    h.wait_list("idle", |l| l[0]["state"] == "idle");
}

/// The reply of a turn, by `ask`.
fn ask(h: &Harness, name: &str, text: &str) -> String {
    h.ctl_ok(&["ask", name, text, "--timeout", "60s"])
}

fn numbers(reply: &str) -> Vec<u32> {
    reply
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[test]
fn a_2000_row_turn_in_a_full_scrollback_is_replied_whole() {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "s");
    // Nearly the default 10,000 lines of scrollback already.
    let filler = ask(&h, "s", "for i in $(seq 1 9700); do echo fill-$i; done");
    assert!(
        filler.contains("fill-9700"),
        "{}",
        &filler[filler.len().saturating_sub(200)..]
    );
    let reply = ask(&h, "s", "seq 1 2000");
    let got = numbers(&reply);
    assert_eq!(
        got,
        (1..=2000).collect::<Vec<u32>>(),
        "the whole turn, nothing before it: {}…",
        reply.chars().take(300).collect::<String>()
    );
    assert!(!reply.contains("fill-"), "nothing of the turn before");
    assert!(!reply.contains("history_limit"), "nothing was lost");
}

#[test]
fn a_turn_longer_than_tmux_keeps_says_so_and_comes_whole_from_the_copy() {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "s");
    let reply = ask(&h, "s", "seq 1 15000");
    let first = reply.lines().next().unwrap_or_default();
    assert!(
        first.contains("more than the 10000 lines tmux keeps") && first.contains("whole output"),
        "it says so: {first}"
    );
    assert_eq!(
        numbers(&reply),
        (1..=15000).collect::<Vec<u32>>(),
        "every row: {}…{}",
        reply.chars().take(300).collect::<String>(),
        &reply[reply.len().saturating_sub(300)..]
    );
    assert!(!reply.contains("seq 1 15000"), "not the input");
    // The next turn is read off the screen again, from its own start.
    let next = ask(&h, "s", "echo after-$((6*7))");
    assert_eq!(next.trim(), "after-42");
}
