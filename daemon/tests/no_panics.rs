//! Property tests: no input makes the daemon panic. The state-file loaders are fed arbitrary
//! bytes and arbitrary JSON shaped roughly like their files (then used, saved and read again),
//! and the hook intake — what a CLI's hook hands the daemon, and what OpenCode's server sends —
//! is fed arbitrary text and JSON.

use std::collections::BTreeMap;
use std::path::Path;

use clibotd::chat::access::{Access, PlatformAccess, Policy};
use clibotd::chat::chats::{ChatAck, Chats};
use clibotd::chat::dedupe::{Claim, Dedupe};
use clibotd::cli::detect::AnswerStyle;
use clibotd::cli::{self, Choice, opencode};
use clibotd::model::Prompt;
use clibotd::store::events::{EventKind, EventLog};
use clibotd::store::{load_registry, save_registry};
use proptest::prelude::*;
use serde_json::Value;

/// Field names found in the state files and hook payloads, so that generated objects often
/// look like the real thing.
const KEYS: &[&str] = &[
    "version",
    "last_seq",
    "sessions",
    "cursors",
    "bindings",
    "ingress",
    "approved",
    "pending",
    "keys",
    "platform",
    "user",
    "chat",
    "session",
    "name",
    "code",
    "created_ms",
    "approved_ms",
    "cursor",
    "parts",
    "broken",
    "group",
    "id",
    "cli",
    "dir",
    "state",
    "created_at_ms",
    "tmux_session",
    "tmux_id",
    "env",
    "queue",
    "owner",
    "shared_with",
    "prompt",
    "seq",
    "time_ms",
    "type",
    "text",
    "options",
    "kind",
    "source",
    "answer",
    "hook_event_name",
    "last_assistant_message",
    "transcript_path",
    "tool_name",
    "tool_input",
    "questions",
    "question",
    "label",
    "header",
    "permission_suggestions",
    "error",
    "error_details",
    "notification_type",
    "details",
    "message",
    "prompt_response",
    "input-messages",
    "last-assistant-message",
    "properties",
    "sessionID",
    "status",
    "permission",
    "patterns",
    "info",
    "role",
    "parts",
    "synthetic",
    "time",
    "completed",
];

const EVENTS: &[&str] = &[
    "",
    "UserPromptSubmit",
    "Stop",
    "StopFailure",
    "PermissionRequest",
    "BeforeAgent",
    "AfterAgent",
    "Notification",
    "agent-turn-complete",
    "session.status",
    "session.idle",
    "permission.asked",
    "question.asked",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[A-Z2-9]{4,10}",
        "[a-z0-9_-]{1,12}",
        ".{0,40}",
        "\\PC{0,300}",
        Just("ToolPermission".to_string()),
        Just("AskUserQuestion".to_string()),
        Just("assistant".to_string()),
        Just("user".to_string()),
        Just("telegram".to_string()),
        Just("/dev/null".to_string()),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (0u64..64).prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        4 => prop::sample::select(KEYS).prop_map(str::to_string),
                        1 => text(),
                    ],
                    inner
                ),
                0..8
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// What a state file may hold: arbitrary bytes, arbitrary JSON, or JSON cut short.
fn file_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        json().prop_map(|v| v.to_string().into_bytes()),
        (json(), any::<prop::sample::Index>()).prop_map(|(v, at)| {
            let s = v.to_string().into_bytes();
            let cut = at.index(s.len() + 1);
            s[..cut].to_vec()
        }),
    ]
}

/// An event log: lines of JSON (some of them events), or bytes.
fn log_bytes() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        json().prop_map(|v| v.to_string()),
        (any::<u64>(), any::<i64>(), text()).prop_map(|(seq, t, m)| {
            serde_json::json!({"seq": seq % 100, "time_ms": t, "type": "error", "message": m})
                .to_string()
        }),
        (0u64..50, text()).prop_map(|(seq, ty)| {
            serde_json::json!({"seq": seq, "time_ms": 1, "type": ty}).to_string()
        }),
        "\\PC{0,80}",
    ];
    prop_oneof![
        prop::collection::vec(line, 0..12).prop_map(|l| l.join("\n").into_bytes()),
        prop::collection::vec(any::<u8>(), 0..512),
    ]
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).expect("write the test file");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn access_config() -> BTreeMap<String, PlatformAccess> {
    let mut c = BTreeMap::new();
    c.insert(
        "telegram".to_string(),
        PlatformAccess {
            policy: Policy::Pairing,
            allow: vec!["42".into()],
            admins: vec!["1".into()],
            groups: vec![],
            ..Default::default()
        },
    );
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn chats_file(bytes in file_bytes(), chat in text(), seq in any::<u64>()) {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "chats.json", &bytes);
        let (c, _) = Chats::open(dir.path());
        c.max_seq();
        c.cursor("telegram");
        c.ack("telegram", seq);
        c.bind("telegram", &chat, "api", false, seq, "telegram:u");
        c.ack_chat("telegram", &chat, &ChatAck { seq, parts: 1, ..Default::default() });
        c.ack_ingress("discord", &chat, "12", true);
        c.bindings("", "", "");
        drop(c);
        let (c, w) = Chats::open(dir.path());
        c.max_seq();
        prop_assert!(w.iter().all(|w| !w.contains("corrupt")), "what was saved reads back: {w:?}");
    }

    #[test]
    fn access_file(bytes in file_bytes(), user in text(), name in text()) {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "access.json", &bytes);
        let (a, _) = Access::open(dir.path(), access_config());
        for p in a.pending() {
            a.approve(&p.code).ok();
        }
        a.approved();
        a.check("telegram", &user, &name);
        a.check_chat("telegram", &user, &name);
        a.check("discord", &user, &name);
        a.known("telegram", &user);
        a.revoke("telegram", "nobody").ok();
        drop(a);
        let (a, w) = Access::open(dir.path(), access_config());
        a.pending();
        prop_assert!(w.iter().all(|w| !w.contains("corrupt")), "what was saved reads back: {w:?}");
    }

    #[test]
    fn session_registry(bytes in file_bytes()) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sessions.json");
        std::fs::write(&path, &bytes).expect("write");
        let (mut reg, _, writable) = load_registry(&path);
        prop_assert!(writable);
        reg.last_seq = reg.last_seq.saturating_add(1);
        save_registry(&path, &reg).expect("save");
        let (again, w, _) = load_registry(&path);
        prop_assert!(w.is_empty(), "what was saved reads back whole: {w:?}");
        prop_assert_eq!(again.sessions.len(), reg.sessions.len());
        prop_assert_eq!(again.last_seq, reg.last_seq);
    }

    #[test]
    fn recent_message_ids(bytes in file_bytes(), key in "\\PC{1,40}") {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "inputs.json", &bytes);
        runtime().block_on(async {
            let (d, _) = Dedupe::open(dir.path());
            if let Claim::Mine(r) = d.claim(&key).await {
                r.done(9);
            }
            drop(d);
            let (d, w) = Dedupe::open(dir.path());
            assert!(w.is_empty(), "what was saved reads back whole: {w:?}");
            assert!(matches!(d.claim(&key).await, Claim::Seen(_)));
        });
    }

    #[test]
    fn event_log(bytes in log_bytes(), retention in 3usize..20, min in 0u64..200) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, &bytes).expect("write");
        let (log, _) = EventLog::open(&path, retention, min);
        let first = log.last_seq();
        prop_assert!(first >= min);
        for _ in 0..3 {
            log.append("s", "", EventKind::Released);
        }
        prop_assert_eq!(log.last_seq(), first + 3);
        log.read_after(0, 100);
        log.sync_through(first + 3).expect("sync");
        drop(log);
        let (log, w) = EventLog::open(&path, retention, 0);
        prop_assert_eq!(log.last_seq(), first + 3, "{:?}", w);
        let kept = log.read_after(first, 100).events;
        prop_assert_eq!(kept.len(), 3, "every appended event reads back: {:?}", w);
    }

    #[test]
    fn hook_payloads_as_text(payload in "\\PC{0,200}", event in prop::sample::select(EVENTS)) {
        // The daemon parses the text first; only JSON reaches an adapter.
        if let Ok(v) = serde_json::from_str::<Value>(&payload) {
            feed_adapters(event, &v);
        }
    }

    #[test]
    fn hook_payloads(v in json(), event in prop::sample::select(EVENTS), other in text()) {
        feed_adapters(event, &v);
        feed_adapters(&other, &v);
        opencode::interpret(&v);
        opencode::permission_prompt(&v);
        opencode::question_prompt(&v);
        opencode::last_reply(&v);
        opencode::finished_turn_reply(&v, 0);
        opencode::finished_turn_reply(&v, i64::MAX);
    }

    #[test]
    fn transcripts(bytes in log_bytes()) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("transcript.jsonl");
        std::fs::write(&path, &bytes).expect("write");
        cli::claude_transcript_reply(&path);
        cli::gemini_transcript_reply(&path);
    }

    #[test]
    fn answers(answer in text(), options in prop::collection::vec(text(), 0..5), kind in text()) {
        let p = prompt(&kind, options);
        if let Ok(choice) = cli::parse_choice(&answer, &p) {
            cli::answer_strokes(&p, &choice).ok();
        }
    }
}

fn prompt(kind: &str, options: Vec<String>) -> Prompt {
    Prompt {
        id: "p".into(),
        kind: kind.into(),
        text: "Proceed?".into(),
        options,
        subject: String::new(),
        source: clibotd::model::PromptSource::Hook,
        answer: AnswerStyle::Digit,
        ..Default::default()
    }
}

/// Every adapter interprets the payload, and where it answers through the hook, answers it.
fn feed_adapters(event: &str, payload: &Value) {
    for name in cli::adapter_names() {
        let a = cli::adapter(name);
        a.hook(event, payload);
        for kind in ["permission", "question"] {
            let p = prompt(
                kind,
                vec!["Yes".into(), "Yes, and don't ask again".into(), "No".into()],
            );
            for choice in [
                Choice::Option(0),
                Choice::Option(1),
                Choice::Option(2),
                Choice::Option(7),
                Choice::Text("x".into()),
            ] {
                a.decision(&p, &choice, payload);
            }
        }
    }
}
