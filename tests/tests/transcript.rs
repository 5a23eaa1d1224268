//! Transcripts end to end: a fake Telegram → the real clibot-gateway → the real clibotd → bash
//! in tmux. What the chat sent and what it was shown back is kept per chat, read with
//! `clibotctl transcript` and with `!!history` in the chat; another chat cannot read it.

use std::process::Child;
use std::time::Duration;

use clibot_proto::v1;
use clibot_tests::Harness;
use clibot_tests::fake_telegram::{self, FakeTelegram, texts};

const ADMIN: i64 = 100;
const OTHER: i64 = 101;

fn setup_with(access: &str) -> (Harness, FakeTelegram, Child) {
    fake_telegram::started(&format!("\n[access.telegram]\n{access}\n"))
}

/// `clibotctl transcript telegram:CHAT --json`, one object a line.
fn transcript(h: &Harness, chat: i64) -> Vec<serde_json::Value> {
    h.ctl_ok(&["transcript", &format!("telegram:{chat}"), "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn a_chats_exchange_is_kept_and_only_that_chat_reads_it() {
    let (h, tg, mut g) = setup_with(&format!("admins = [\"{ADMIN}\", \"{OTHER}\"]"));
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new t bash {work}"));
    tg.wait_sent("started", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("started t"))
    });
    tg.push_message(ADMIN, ADMIN, "Owner", "echo hi-$((1+1))");
    tg.wait_sent("the reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("hi-2"))
    });

    // The ack of the reply is what records it: wait for it to be on file.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let entries = loop {
        let entries = transcript(&h, ADMIN);
        if entries.iter().any(|e| e["dir"] == "out") {
            break entries;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no reply in the transcript: {entries:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let sent = entries
        .iter()
        .find(|e| e["dir"] == "in")
        .unwrap_or_else(|| panic!("the sent text is kept: {entries:?}"));
    assert_eq!(sent["text"], "echo hi-$((1+1))");
    assert_eq!(sent["user"], ADMIN.to_string());
    assert_eq!(sent["session"], "t");
    let shown = entries
        .iter()
        .find(|e| e["dir"] == "out")
        .unwrap_or_else(|| panic!("the reply is kept: {entries:?}"));
    assert!(
        shown["text"].as_str().is_some_and(|t| t.contains("hi-2")),
        "{shown}"
    );
    assert_eq!(shown["session"], "t");
    // Commands are not sent text.
    assert!(
        !entries
            .iter()
            .any(|e| e["text"].as_str().is_some_and(|t| t.contains("!!new"))),
        "{entries:?}"
    );
    // The file is the chat's own, private.
    let file = h.state_dir.join("transcripts/telegram/100.jsonl");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&file)
            .expect("the transcript file")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    // In the chat: both directions, one line each.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!history");
    let sent = tg.wait_sent("the history", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("› you:"))
    });
    let history = texts(&sent, ADMIN)
        .into_iter()
        .find(|t| t.contains("› you:"))
        .expect("history reply");
    assert!(history.contains("› you: echo hi-$((1+1))"), "{history}");
    assert!(history.contains("‹ [t] "), "{history}");
    assert!(history.contains("hi-2"), "{history}");

    // Another chat's user may not read it; their own (empty) transcript they may.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let mut c = h.client().await;
        let as_other = |chat: &str| {
            let mut r = tonic::Request::new(v1::GetTranscriptRequest {
                platform: "telegram".into(),
                chat: chat.into(),
                since_ms: 0,
                limit: 0,
            });
            for (k, v) in [
                ("clibot-platform", "telegram".to_string()),
                ("clibot-user", OTHER.to_string()),
                ("clibot-chat", OTHER.to_string()),
            ] {
                r.metadata_mut()
                    .insert(k, v.parse().expect("ascii metadata"));
            }
            r
        };
        let err = c
            .get_transcript(as_other(&ADMIN.to_string()))
            .await
            .expect_err("another chat's transcript is refused");
        assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
        let own = c
            .get_transcript(as_other(&OTHER.to_string()))
            .await
            .expect("their own chat's");
        assert!(own.into_inner().entries.is_empty());
    });
    let audit = h.ctl_ok(&["audit", "--json"]);
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"history\"") && l.contains("refused")),
        "the refusal is audited: {audit}"
    );
    let _ = g.kill();
    let _ = g.wait();
}
