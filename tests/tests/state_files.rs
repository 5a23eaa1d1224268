//! Absurd numbers in the state files (issue 20, item 10), with the real daemon: a chat cursor of
//! `u64::MAX` once wrapped the event numbering and silenced that chat for good. Now the daemon
//! starts, warns naming the problem, keeps a copy of each repaired file (`NAME.bad-<ms>`),
//! numbers events on from the highest number in range, and the chat's binding resumes below
//! the new events, so they reach it.

use clibot_tests::Harness;

fn seqs(h: &Harness) -> Vec<u64> {
    h.events()
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq is a number"))
        .collect()
}

fn copies(h: &Harness, prefix: &str) -> usize {
    std::fs::read_dir(&h.state_dir)
        .expect("state dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .count()
}

#[test]
fn absurd_cursors_and_sequence_numbers_do_not_stop_the_numbering_or_a_chat() {
    let mut h = Harness::with_config("");
    std::fs::create_dir_all(&h.state_dir).expect("state dir");
    std::fs::write(
        h.state_dir.join("chats.json"),
        r#"{"cursors": {"telegram:bot": 3},
            "bindings": [{"platform": "telegram", "chat": "42", "session": "a",
                          "cursor": 18446744073709551615, "parts": 1, "binder": "local"}]}"#,
    )
    .expect("write chats.json");
    std::fs::write(
        h.state_dir.join("sessions.json"),
        r#"{"version": 1, "last_seq": 18446744073709551615, "sessions": []}"#,
    )
    .expect("write sessions.json");
    std::fs::write(
        h.state_dir.join("inputs.json"),
        r#"{"version": 1, "keys": [["telegram:1", 18446744073709551615], ["telegram:2", 2]]}"#,
    )
    .expect("write inputs.json");
    std::fs::write(
        h.state_dir.join("events.jsonl"),
        "{\"seq\":1,\"time_ms\":1,\"type\":\"released\"}\n{\"seq\":2,\"ti\n{\"seq\":18446744073709551615,\"time_ms\":1,\"type\":\"released\"}\n{\"seq\":3,\"time_ms\":1,\"type\":\"released\"}\n",
    )
    .expect("write events.jsonl");
    h.start_daemon();

    let log = h.daemon_log();
    for needle in [
        "chats.json",
        "telegram:42: cursor = 18446744073709551615",
        "last_seq = 18446744073709551615",
        "inputs.json",
        "line 2",
        "above 2^53",
    ] {
        assert!(log.contains(needle), "the log names {needle:?}:\n{log}");
    }
    for prefix in [
        "chats.json.bad-",
        "sessions.json.bad-",
        "inputs.json.bad-",
        "events.jsonl.bad-",
    ] {
        assert_eq!(copies(&h, prefix), 1, "{prefix}");
    }
    assert_eq!(
        copies(&h, "events.jsonl.corrupt-"),
        0,
        "a torn line does not set the log aside"
    );

    // The bound chat resumes where its platform was, below every new event.
    let chats: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["chats", "--json"])).expect("chats JSON");
    assert_eq!(chats[0]["chat"], "42", "{chats}");
    assert_eq!(chats[0]["delivered_through"], 3, "{chats}");

    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "a", "--cli", "bash", "--dir", &work]);
    let numbers = seqs(&h);
    assert_eq!(&numbers[..2], &[1, 3], "the readable events are kept");
    assert!(
        numbers.windows(2).all(|w| w[1] > w[0]),
        "increasing: {numbers:?}"
    );
    assert!(
        numbers[2..].windows(2).all(|w| w[1] == w[0] + 1) && numbers[2] == 4,
        "new events number on from 3, by one: {numbers:?}"
    );
    let for_a = h
        .events()
        .iter()
        .filter(|e| e["session"] == "a")
        .filter_map(|e| e["seq"].as_u64())
        .min()
        .expect("events of session a");
    assert!(
        for_a > 3,
        "the chat's next event ({for_a}) is above its cursor"
    );

    // Repaired for good: the next start warns no more and numbers on.
    let last = *numbers.last().expect("events");
    assert!(h.terminate_daemon().success());
    let before = h.daemon_log().len();
    h.start_daemon();
    let log = h.daemon_log();
    assert!(!log[before..].contains("2^53"), "{}", &log[before..]);
    assert!(seqs(&h).iter().any(|s| *s == last + 1 || *s > last));
    assert!(seqs(&h).iter().all(|s| *s < 1000));
    assert!(h.terminate_daemon().success());
}
