//! A turn's output grows in its chat while it runs: the status message is edited with the
//! newest lines the turn printed, then says the turn is done, and the reply comes as its own
//! message. Real clibotd and clibot-gateway, fake Telegram, bash in tmux.

use clibot_tests::fake_telegram::{self, texts};

const ADMIN: i64 = 100;

/// The numbers N of the `stream-N` lines in a status text.
fn streamed(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("stream-"))
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// Runs `for i in 1..=N; echo stream-$i` in a bash session from the admin's chat, with
/// `gateway` added to the config, and returns the status message's edits once it says done.
fn status_edits(gateway: &str, n: u32) -> Vec<String> {
    let (h, tg, _g) = fake_telegram::started(&format!(
        "\n{gateway}[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"
    ));
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new s bash {work}"));
    tg.wait_sent("started", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("started s"))
    });
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        &format!("for i in $(seq 1 {n}); do echo stream-$i; sleep 1; done; echo all-done"),
    );
    tg.wait_sent("the reply", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("all-done") && !t.contains("working"))
    });
    // The status is closed by its own edit, which may land just after the reply.
    tg.wait_sent("the status closed", |_| {
        tg.calls_of("editMessageText").iter().any(|p| {
            p["text"]
                .as_str()
                .is_some_and(|t| t.contains("[s] done in"))
        })
    });
    tg.calls_of("editMessageText")
        .iter()
        .filter_map(|p| p["text"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_running_turn_shows_its_newest_output_in_the_status_message() {
    let edits = status_edits("", 6);
    let growing: Vec<Vec<u32>> = edits
        .iter()
        .filter(|t| t.contains("working"))
        .map(|t| streamed(t))
        .filter(|n| !n.is_empty())
        .collect();
    assert!(
        growing.len() >= 2,
        "at least two edits with output: {edits:#?}"
    );
    let newest: Vec<u32> = growing.iter().filter_map(|n| n.last().copied()).collect();
    assert!(
        newest.windows(2).all(|w| w[0] <= w[1]) && newest.first() < newest.last(),
        "the output grows from edit to edit: {edits:#?}"
    );
    assert!(
        edits.iter().any(|t| t.contains("done in")),
        "the status ends saying it is done: {edits:#?}"
    );
}

/// A turn cancelled from the chat is not "done": its status says it was cancelled, with how
/// long it ran by the daemon's clock.
#[test]
fn a_cancelled_turn_says_cancelled_not_done() {
    let (h, tg, _g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"
    ));
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new c bash {work}"));
    tg.wait_sent("started", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("started c"))
    });
    tg.push_message(ADMIN, ADMIN, "Owner", "sleep 30");
    h.wait_list("working", |l| l[0]["state"] == "working");
    std::thread::sleep(std::time::Duration::from_secs(2));
    tg.push_message(ADMIN, ADMIN, "Owner", "!!cancel");
    let edits = tg.wait_sent("the status closed", |_| {
        tg.calls_of("editMessageText").iter().any(|p| {
            p["text"]
                .as_str()
                .is_some_and(|t| t.contains("[c] cancelled after"))
        })
    });
    drop(edits);
    let all: Vec<String> = tg
        .calls_of("editMessageText")
        .iter()
        .filter_map(|p| p["text"].as_str().map(str::to_string))
        .collect();
    assert!(!all.iter().any(|t| t.contains("[c] done in")), "{all:#?}");
    let closed = all
        .iter()
        .find(|t| t.contains("cancelled after"))
        .cloned()
        .unwrap_or_default();
    let secs: u64 = closed
        .split("after ")
        .nth(1)
        .and_then(|r| r.trim_end_matches('s').parse().ok())
        .unwrap_or(0);
    assert!((1..30).contains(&secs), "{closed}");
}

/// `[gateway] stream = false`: the status message shows how long the turn has worked, never
/// what it printed; the reply still carries the output.
#[test]
fn with_stream_off_the_status_shows_the_time_only() {
    let edits = status_edits("[gateway]\nstream = false\n", 4);
    assert!(
        edits.iter().all(|t| streamed(t).is_empty()),
        "no output in the status: {edits:#?}"
    );
}
