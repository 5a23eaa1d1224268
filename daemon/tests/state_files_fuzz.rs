//! Property test over the state-file loaders (issue 20, item 10): the event log, `chats.json`,
//! `sessions.json` and `inputs.json` fed absurd numbers (`u64::MAX`, `i64::MIN`, negatives,
//! fractions, numbers past 2^53, huge strings) and torn lines never panic, never let a number
//! above 2^53 into the numbering, keep the numbering going up by one from the highest number in
//! range, and say in a warning what they dropped.

use std::path::Path;

use clibotd::chat::chats::Chats;
use clibotd::chat::dedupe::Dedupe;
use clibotd::store::events::{EventKind, EventLog};
use clibotd::store::{MAX_SEQ, load_registry};
use proptest::prelude::*;

/// A JSON number (or something standing where one should be), and its value when it is an
/// integer from 0 to u64::MAX.
fn number() -> impl Strategy<Value = (String, Option<u64>)> {
    prop_oneof![
        (0u64..50).prop_map(|n| (n.to_string(), Some(n))),
        Just((u64::MAX.to_string(), Some(u64::MAX))),
        Just(((MAX_SEQ + 1).to_string(), Some(MAX_SEQ + 1))),
        Just((MAX_SEQ.to_string(), Some(MAX_SEQ))),
        any::<u64>().prop_map(|n| (n.to_string(), Some(n))),
        Just((i64::MIN.to_string(), None)),
        Just(("-1".to_string(), None)),
        Just(("1.5".to_string(), None)),
        Just(("1e300".to_string(), None)),
        Just(("184467440737095516150".to_string(), None)),
        Just(("null".to_string(), None)),
        (1usize..5000).prop_map(|n| (format!("\"{}\"", "9".repeat(n)), None)),
    ]
}

/// Whether the number is an integer above the bound (it must be told about).
fn absurd(n: &Option<u64>) -> bool {
    n.is_some_and(|n| n > MAX_SEQ)
}

/// One line of an event log.
fn log_line() -> impl Strategy<Value = (String, Option<u64>)> {
    prop_oneof![
        4 => number().prop_map(|(n, v)| (
            format!("{{\"seq\":{n},\"time_ms\":1,\"type\":\"released\"}}\n"),
            v
        )),
        1 => (number(), 1usize..30).prop_map(|((n, _), cut)| {
            let line = format!("{{\"seq\":{n},\"time_ms\":1,\"type\":\"released\"}}");
            let at = cut.min(line.len() - 1);
            (format!("{}\n", &line[..at]), None)
        }),
        1 => "[^\n]{0,40}".prop_map(|s| (format!("{s}\n"), None)),
        1 => (1usize..100_000).prop_map(|n| (format!("\"{}\"\n", "x".repeat(n)), None)),
    ]
}

fn kind() -> EventKind {
    EventKind::Released
}

/// The loaders never panic, the numbering stays in range and goes up by one.
fn check_log(dir: &Path, lines: &[(String, Option<u64>)], torn_end: bool, min: u64) {
    let p = dir.join("events.jsonl");
    let mut text: String = lines.iter().map(|(l, _)| l.as_str()).collect();
    if torn_end {
        text.push_str("{\"seq\":1");
    }
    std::fs::write(&p, &text).expect("write");
    let (log, w) = EventLog::open(&p, 1000, min);
    let kept = log.read_after(0, 100_000).events;
    assert!(kept.iter().all(|e| e.seq <= MAX_SEQ), "{kept:?}");
    assert!(
        kept.windows(2).all(|w| w[0].seq < w[1].seq),
        "increasing: {kept:?}"
    );
    if lines.iter().any(|(_, v)| absurd(v)) || min > MAX_SEQ {
        assert!(
            w.iter().any(|w| w.contains("2^53")),
            "a number above 2^53 is told: {w:?}"
        );
    }
    let start = log.last_seq();
    assert!(start <= MAX_SEQ, "{start}");
    // A number past the bound that reaches the log anyway is clamped, never wrapped.
    assert!(start >= min.min(MAX_SEQ));
    assert!(kept.last().is_none_or(|e| e.seq <= start));
    for i in 1..=3 {
        assert_eq!(log.append("s", "", kind()).seq, start + i);
    }
    drop(log);
    let (again, w) = EventLog::open(&p, 1000, 0);
    if start + 3 <= MAX_SEQ {
        assert!(w.is_empty(), "repaired once for good: {w:?}");
        assert_eq!(again.last_seq(), start + 3);
    } else {
        // Edited to the bound itself: the events past it are dropped next time (store::MAX_SEQ).
        assert!(again.last_seq() <= MAX_SEQ);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn the_event_log_survives_absurd_lines(
        lines in prop::collection::vec(log_line(), 0..12),
        torn_end in any::<bool>(),
        min in prop_oneof![Just(0u64), Just(u64::MAX), Just(MAX_SEQ + 1), 0u64..100, any::<u64>()],
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        check_log(dir.path(), &lines, torn_end, min);
    }

    #[test]
    fn chats_registry_and_dedupe_drop_absurd_numbers_and_numbering_goes_on(
        consumer in number(),
        cursor in number(),
        until in number(),
        parts in 0u32..3,
        last_seq in number(),
        reply_seq in number(),
        key_seq in number(),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        std::fs::write(
            d.join("chats.json"),
            format!(
                r#"{{"cursors": {{"telegram:bot": {}}}, "bindings": [
                    {{"platform": "telegram", "chat": "1", "session": "a", "cursor": {}, "parts": {parts}, "binder": "telegram:1"}},
                    {{"platform": "telegram", "chat": "2", "session": "a", "cursor": 3, "until_seq": {}, "binder": "telegram:2"}}
                ]}}"#,
                consumer.0, cursor.0, until.0
            ),
        )
        .expect("write chats");
        std::fs::write(
            d.join("sessions.json"),
            format!(
                r#"{{"version": 1, "last_seq": {}, "sessions": [{{"id": "1", "name": "a", "cli": "shell", "dir": "/", "state": "idle",
                    "created_at_ms": {}, "tmux_session": "", "tmux_id": "", "last_reply_seq": {}}}]}}"#,
                last_seq.0, reply_seq.0, reply_seq.0
            ),
        )
        .expect("write registry");
        std::fs::write(
            d.join("inputs.json"),
            format!(r#"{{"version": 1, "keys": [["t:1", {}], ["t:2", 4]]}}"#, key_seq.0),
        )
        .expect("write inputs");

        let (chats, cw) = Chats::open(d);
        for b in chats.bindings("", "", "") {
            prop_assert!(b.cursor <= MAX_SEQ && b.until_seq <= MAX_SEQ, "{b:?}");
        }
        prop_assert!(chats.max_seq() <= MAX_SEQ + 1);
        if absurd(&consumer.1) || absurd(&cursor.1) || absurd(&until.1) {
            prop_assert!(cw.iter().any(|w| w.contains("2^53")), "{cw:?}");
        }
        let (reg, rw, _) = load_registry(&d.join("sessions.json"));
        prop_assert!(reg.last_seq <= MAX_SEQ);
        prop_assert!(reg.sessions.iter().all(|s| s.last_reply_seq() <= MAX_SEQ && s.created_at_ms() >= 0));
        if absurd(&last_seq.1) {
            prop_assert!(rw.iter().any(|w| w.contains("last_seq") && w.contains("2^53")), "{rw:?}");
        }
        if absurd(&reply_seq.1) {
            prop_assert!(rw.iter().any(|w| w.contains("last_reply_seq")), "{rw:?}");
        }
        let (_, dw) = Dedupe::open(d);
        if absurd(&key_seq.1) {
            prop_assert!(dw.iter().any(|w| w.contains("2^53")), "{dw:?}");
        }
        // As the daemon starts: the log numbers above everything in range, and on by one.
        let min = reg.last_seq.max(chats.max_seq());
        let (log, _) = EventLog::open(&d.join("events.jsonl"), 100, min);
        let first = log.append("s", "", kind()).seq;
        prop_assert!(first >= min.max(1) && first <= MAX_SEQ + 2, "{first} after {min}");
        prop_assert_eq!(log.append("s", "", kind()).seq, first + 1);
    }
}
