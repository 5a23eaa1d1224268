//! The Feishu platform against the fake Feishu: the long connection (discovery, pings, acks
//! within 3 s, split frames, repeats, reconnection) and the REST calls behind the `Platform`
//! methods (bodies, rate limits, token renewal, chats that are gone).

use std::time::{Duration, Instant};

use clibot_tests::fake_feishu::{
    ACK_DEADLINE, APP_ID, APP_SECRET, BOT_OPEN_ID, FakeFeishu, SERVICE_ID, Sent, button_values,
    card_action_event, text_event,
};
use serde_json::json;

use super::*;

struct Rig {
    fake: FakeFeishu,
    feishu: Feishu,
    rx: mpsc::Receiver<Inbound>,
    _dir: tempfile::TempDir,
}

/// `[gateway.feishu]` for a fake.
fn config<'a>(app_id: &'a str, app_secret: &'a str, api_url: &'a str) -> Settings<'a> {
    Settings {
        app_id,
        app_secret,
        api_url,
        topics: false,
    }
}

/// The platform started against a fake, its long connection up.
async fn rig() -> Rig {
    let fake = FakeFeishu::start(APP_ID, APP_SECRET);
    let dir = tempfile::tempdir().expect("a lock directory");
    let (feishu, rx) = start(
        &config(APP_ID, APP_SECRET, &fake.url()),
        "!!",
        dir.path(),
        &crate::platforms::Receiving::default(),
    )
    .await
    .expect("Feishu starts against the fake");
    let r = Rig {
        fake,
        feishu,
        rx,
        _dir: dir,
    };
    until("the long connection", Duration::from_secs(10), || {
        r.fake.connections().1 == 1
    })
    .await;
    r
}

/// Waits until `f` holds; panics with `what` after `timeout`.
async fn until(what: &str, timeout: Duration, f: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn next(rx: &mut mpsc::Receiver<Inbound>) -> Inbound {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a message handed over within 10 s")
        .expect("the platform runs")
}

async fn quiet(rx: &mut mpsc::Receiver<Inbound>, ms: u64) -> Option<Inbound> {
    tokio::time::timeout(Duration::from_millis(ms), rx.recv())
        .await
        .ok()
        .flatten()
}

fn created(sent: &[Sent]) -> Vec<&Sent> {
    sent.iter().filter(|s| s.kind == "create").collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_arrives_with_its_fields_and_is_acknowledged_within_3_s() {
    let mut r = rig().await;
    let n = r.fake.push_event(&text_event(
        "ev-1",
        "om_user1",
        "oc_dm",
        "p2p",
        "ou_ann",
        "run the tests",
        &[],
    ));
    let m = next(&mut r.rx).await;
    assert_eq!(
        (
            m.chat.as_str(),
            m.user.as_str(),
            m.text.as_str(),
            m.id.as_str(),
            m.group,
            m.prompt.as_deref()
        ),
        ("oc_dm", "ou_ann", "run the tests", "om_user1", false, None)
    );
    assert!(m.ack.is_none(), "acknowledged to Feishu on receipt already");
    until("the acknowledgement", Duration::from_secs(5), || {
        !r.fake.acks_of(n).is_empty()
    })
    .await;
    let ack = &r.fake.acks_of(n)[0];
    assert!(
        ack.latency < ACK_DEADLINE,
        "acknowledged after {:?}",
        ack.latency
    );
    assert_eq!(ack.payload["code"], 200, "{}", ack.payload);
    assert_eq!(ack.frame.method, 1);
    assert_eq!(ack.frame.service, SERVICE_ID);
    assert_eq!(ack.frame.header("type"), Some("event"));
    let biz_rt: u64 = ack
        .frame
        .header("biz_rt")
        .and_then(|v| v.parse().ok())
        .expect("a biz_rt header in ms");
    assert!(biz_rt < 3000);

    // Pings: at once after connecting, for the endpoint's service, ids zero but present.
    let pings = r.fake.pings();
    assert!(!pings.is_empty());
    for p in &pings {
        assert_eq!((p.frame.method, p.frame.service), (0, SERVICE_ID));
        assert_eq!((p.frame.seq_id, p.frame.log_id), (0, 0));
        assert_eq!(p.frame.header("type"), Some("ping"));
    }
    // With 1 s intervals, more follow.
    until("pings every interval", Duration::from_secs(5), || {
        r.fake.pings().len() >= 3
    })
    .await;

    // Acknowledged in time: Feishu does not push it again, and nothing more is handed over.
    tokio::time::sleep(ACK_DEADLINE + Duration::from_millis(500)).await;
    assert_eq!(r.fake.pushes_of(n), 1);
    assert!(quiet(&mut r.rx, 100).await.is_none());
    assert_eq!(r.fake.discoveries(), 1, "one connection all along");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_pushed_again_is_handed_over_once() {
    let mut r = rig().await;
    let first = text_event("ev-2", "om_2", "oc_dm", "p2p", "ou_ann", "once", &[]);
    let a = r.fake.push_event(&first);
    let b = r.fake.push_event(&first);
    // Feishu at times pushes a message again under a new event id.
    let c = r.fake.push_event(&text_event(
        "ev-2-again",
        "om_2",
        "oc_dm",
        "p2p",
        "ou_ann",
        "once",
        &[],
    ));
    let d = r.fake.push_event(&text_event(
        "ev-3",
        "om_3",
        "oc_dm",
        "p2p",
        "ou_ann",
        "twice",
        &[],
    ));
    assert_eq!(next(&mut r.rx).await.text, "once");
    assert_eq!(next(&mut r.rx).await.text, "twice");
    assert!(quiet(&mut r.rx, 500).await.is_none(), "each message once");
    until("every push acknowledged", Duration::from_secs(5), || {
        [a, b, c, d].iter().all(|n| !r.fake.acks_of(*n).is_empty())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_message_counts_only_when_it_mentions_the_bot() {
    let mut r = rig().await;
    let chatter = r.fake.push_event(&text_event(
        "ev-g1",
        "om_g1",
        "oc_group",
        "group",
        "ou_ann",
        "lunch anyone?",
        &[],
    ));
    let other = r.fake.push_event(&text_event(
        "ev-g2",
        "om_g2",
        "oc_group",
        "group",
        "ou_ann",
        "@_user_1 lunch?",
        &[("@_user_1", "ou_bob", "Bob")],
    ));
    r.fake.push_event(&text_event(
        "ev-g3",
        "om_g3",
        "oc_group",
        "group",
        "ou_ann",
        "@_user_1 status of @_user_2",
        &[
            ("@_user_1", BOT_OPEN_ID, "clibot"),
            ("@_user_2", "ou_bob", "Bob"),
        ],
    ));
    let m = next(&mut r.rx).await;
    assert_eq!(m.text, "status of @Bob");
    assert!(m.group);
    assert_eq!((m.chat.as_str(), m.id.as_str()), ("oc_group", "om_g3"));
    assert!(quiet(&mut r.rx, 300).await.is_none());
    // Ignored ones are acknowledged too (else Feishu would push them again).
    until(
        "the ignored messages acknowledged",
        Duration::from_secs(5),
        || !r.fake.acks_of(chatter).is_empty() && !r.fake.acks_of(other).is_empty(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_event_is_reassembled_and_acknowledged_once() {
    let mut r = rig().await;
    let text = "a long message ".repeat(40);
    let n = r.fake.push_event_split(
        &text_event("ev-s", "om_s", "oc_dm", "p2p", "ou_ann", &text, &[]),
        3,
    );
    assert_eq!(next(&mut r.rx).await.text, text.trim());
    until("the acknowledgement", Duration::from_secs(5), || {
        !r.fake.acks_of(n).is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let acks = r.fake.acks_of(n);
    assert_eq!(acks.len(), 1, "only the fragment that completes it");
    assert_eq!(acks[0].frame.header("sum"), Some("3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_is_made_again_with_a_new_endpoint() {
    let mut r = rig().await;
    assert_eq!(r.fake.discoveries(), 1);
    r.fake.drop_connections();
    // Pushed while the connection is down: delivered once it is back.
    r.fake.push_event(&text_event(
        "ev-d",
        "om_d",
        "oc_dm",
        "p2p",
        "ou_ann",
        "still there?",
        &[],
    ));
    until("a new connection", Duration::from_secs(15), || {
        let (total, live) = r.fake.connections();
        total == 2 && live == 1
    })
    .await;
    assert_eq!(
        r.fake.discoveries(),
        2,
        "every connection starts with discovery"
    );
    assert_eq!(next(&mut r.rx).await.text, "still there?");
    // And it carries on: pings on the new connection.
    until(
        "pings on the new connection",
        Duration::from_secs(5),
        || r.fake.pings().iter().any(|p| p.connection == 2),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_pings_go_unanswered_is_replaced() {
    let mut r = rig().await;
    r.fake.silence(true);
    // Pings every 1 s: after 3 s without an answer the connection is given up.
    until("a new connection", Duration::from_secs(15), || {
        r.fake.connections().0 >= 2
    })
    .await;
    r.fake.silence(false);
    assert!(r.fake.discoveries() >= 2);
    until("the new connection", Duration::from_secs(10), || {
        r.fake.connections().1 == 1
    })
    .await;
    r.fake.push_event(&text_event(
        "ev-w",
        "om_w",
        "oc_dm",
        "p2p",
        "ou_ann",
        "back",
        &[],
    ));
    assert_eq!(next(&mut r.rx).await.text, "back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_is_a_card_whose_buttons_answer_it_and_go_away() {
    let mut r = rig().await;
    let options = vec!["Yes".to_string(), "No".to_string()];
    let mid = r
        .feishu
        .send_prompt("oc_dm", "p42", "[s] Allow `rm -rf target`?", &options)
        .await
        .expect("sent")
        .expect("the card's message id");
    let sent = r.fake.sent();
    let card = created(&sent)
        .into_iter()
        .find(|s| s.message_id == mid)
        .expect("the card was created");
    assert_eq!(
        (
            card.chat.as_str(),
            card.receive_id_type.as_str(),
            card.msg_type.as_str()
        ),
        ("oc_dm", "chat_id", "interactive")
    );
    assert!(!card.uuid.is_empty());
    assert!(
        card.content.to_string().contains("Allow `rm -rf target`?"),
        "{}",
        card.content
    );
    let values = button_values(&card.content);
    assert_eq!(
        values,
        vec![json!({ "d": "a:p42:1" }), json!({ "d": "a:p42:2" })]
    );

    // The press: its chat's kind is asked of Feishu (no message came from it yet).
    r.fake.set_chat_mode("oc_dm", "p2p");
    let n = r.fake.push_event(&card_action_event(
        "ev-press",
        "ou_ann",
        "oc_dm",
        &mid,
        values[1].clone(),
    ));
    let m = next(&mut r.rx).await;
    assert_eq!(m.prompt.as_deref(), Some("p42"));
    assert_eq!(m.text, "!!answer 2");
    assert_eq!(
        (m.chat.as_str(), m.user.as_str(), m.group),
        ("oc_dm", "ou_ann", false)
    );
    until("the callback's answer", Duration::from_secs(5), || {
        !r.fake.acks_of(n).is_empty()
    })
    .await;
    let ack = &r.fake.acks_of(n)[0];
    assert!(ack.latency < ACK_DEADLINE);
    let answer = ack.data().expect("a toast in the acknowledgement");
    assert_eq!(answer["toast"]["type"], "info", "{answer}");

    // A button that is not ours gets a warning and goes nowhere.
    let n = r.fake.push_event(&card_action_event(
        "ev-foreign",
        "ou_ann",
        "oc_dm",
        &mid,
        json!({ "approve": "r_1" }),
    ));
    until("the foreign press answered", Duration::from_secs(5), || {
        !r.fake.acks_of(n).is_empty()
    })
    .await;
    let answer = r.fake.acks_of(n)[0].data().expect("a toast");
    assert_eq!(answer["toast"]["type"], "warning");
    assert!(quiet(&mut r.rx, 300).await.is_none());

    // Resolved: the same card, updated in place, with its text and no buttons.
    r.feishu
        .remove_buttons("oc_dm", &mid)
        .await
        .expect("buttons removed");
    let sent = r.fake.sent();
    let patch = sent
        .iter()
        .rfind(|s| s.kind == "patch" && s.message_id == mid)
        .expect("the card was updated");
    assert!(
        button_values(&patch.content).is_empty(),
        "{}",
        patch.content
    );
    let text = patch.content.to_string();
    assert!(
        text.contains("Allow `rm -rf target`?") && text.contains("answered"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_whose_card_feishu_refuses_goes_as_text() {
    let r = rig().await;
    r.fake.fail_next("/open-apis/im/v1/messages", 400, 230099);
    let id = r
        .feishu
        .send_prompt(
            "oc_dm",
            "p7",
            "Pick one:\n1. a\n2. b",
            &["a".into(), "b".into()],
        )
        .await
        .expect("sent all the same");
    assert_eq!(id, None, "no buttons to remove later");
    let sent = r.fake.sent();
    let texts = created(&sent);
    assert_eq!(texts.len(), 1);
    assert_eq!(texts[0].msg_type, "post");
    assert_eq!(texts[0].text(), "Pick one:\n1. a\n2. b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_status_and_files_take_the_right_calls() {
    let r = rig().await;
    r.feishu.send("oc_g", "hello").await.expect("sent");
    let sent = r.fake.sent();
    let hello = created(&sent)[0];
    assert_eq!(
        (
            hello.chat.as_str(),
            hello.receive_id_type.as_str(),
            hello.msg_type.as_str()
        ),
        ("oc_g", "chat_id", "post")
    );
    assert_eq!(
        hello.content,
        json!({ "zh_cn": { "title": "", "content": [[{ "tag": "md", "text": "hello" }]] } })
    );
    assert!(!hello.uuid.is_empty() && hello.uuid.len() <= 50);

    // Longer than one message: split, nothing lost.
    let long = "0123456789\n".repeat(MAX_TEXT_CHARS / 11 + 100);
    r.feishu.send("oc_g", &long).await.expect("sent");
    let sent = r.fake.sent();
    let parts: Vec<String> = created(&sent)[1..].iter().map(|s| s.text()).collect();
    assert!(parts.len() >= 2);
    assert!(parts.iter().all(|p| p.chars().count() <= CARD_TEXT_CHARS));
    assert_eq!(
        parts.concat().replace('\n', ""),
        long.replace('\n', ""),
        "every character sent"
    );

    // Status: a card, then updated in place.
    let id = r
        .feishu
        .status("oc_g", None, "⏳ [s] working…")
        .await
        .expect("a status card");
    assert_eq!(
        r.feishu.status("oc_g", Some(&id), "✓ [s] done in 3s").await,
        Some(id.clone())
    );
    let sent = r.fake.sent();
    let status: Vec<&Sent> = sent.iter().filter(|s| s.message_id == id).collect();
    assert_eq!(status.len(), 2);
    assert_eq!(
        (status[0].kind.as_str(), status[0].msg_type.as_str()),
        ("create", "interactive")
    );
    assert!(status[0].content.to_string().contains("working…"));
    assert_eq!(status[1].kind, "patch");
    assert!(status[1].content.to_string().contains("done in 3s"));

    // A file: uploaded as a stream, sent as a file message, then the summary.
    let before = r.fake.sent().len();
    r.feishu
        .send_file("oc_g", "output.md", "# all of it\n", "the first lines")
        .await
        .expect("sent");
    let uploads = r.fake.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(
        (uploads[0].file_type.as_str(), uploads[0].file_name.as_str()),
        ("stream", "output.md")
    );
    assert_eq!(uploads[0].data, b"# all of it\n");
    let sent = r.fake.sent();
    let after: Vec<&Sent> = sent[before..].iter().collect();
    assert_eq!(after.len(), 2);
    assert_eq!(after[0].msg_type, "file");
    assert_eq!(after[0].content["file_key"], uploads[0].file_key.as_str());
    assert_eq!(after[1].text(), "the first lines");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_go_as_markdown_with_code_blocks_kept_and_as_text_when_refused() {
    let r = rig().await;
    let reply = "Done:\n```rust\nfn main() {}\n```\n- **one** item";
    r.feishu.send("oc_g", reply).await.expect("sent");
    let sent = r.fake.sent();
    let md = created(&sent)[0];
    assert_eq!(md.msg_type, "post");
    assert_eq!(
        md.text(),
        reply,
        "the Markdown unchanged, its code block whole"
    );
    // A mention in a CLI's output does not ping anyone.
    r.feishu
        .send("oc_g", "<at user_id=\"all\"></at> hi")
        .await
        .expect("sent");
    assert!(!r.fake.sent().last().expect("sent").text().contains("<at "));
    // Rich text refused: the same part goes as plain text, once.
    r.fake.fail_next("/open-apis/im/v1/messages", 400, 230001);
    r.feishu
        .send("oc_g", "plain after all")
        .await
        .expect("sent");
    let sent = r.fake.sent();
    let last = sent.last().expect("sent");
    assert_eq!(
        (last.msg_type.as_str(), last.text().as_str()),
        ("text", "plain after all")
    );
    assert_eq!(
        sent.iter()
            .filter(|s| s.text() == "plain after all")
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_are_waited_out_and_the_message_still_goes() {
    let r = rig().await;
    for (status, code) in [(429, 99991400), (400, 230020)] {
        r.fake.fail_next("/open-apis/im/v1/messages", status, code);
        let posts = || {
            r.fake
                .calls()
                .iter()
                .filter(|c| c.method == "POST" && c.path == "/open-apis/im/v1/messages")
                .count()
        };
        let before = posts();
        let t = Instant::now();
        let text = format!("after a {code}");
        r.feishu.send("oc_g", &text).await.expect("sent in the end");
        assert!(
            t.elapsed() >= Duration::from_millis(900),
            "waited {:?}",
            t.elapsed()
        );
        assert_eq!(posts() - before, 2, "sent again after the limit");
        let sent = r.fake.sent();
        let n = sent.iter().filter(|s| s.text() == text).count();
        assert_eq!(n, 1, "delivered once");
    }
    // The status card is best effort: a rate limit costs only that update.
    r.fake.fail_next("/open-apis/im/v1/messages", 429, 99991400);
    assert_eq!(r.feishu.status("oc_g", None, "⏳").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_token_is_renewed_once() {
    let r = rig().await;
    assert_eq!(r.fake.token_calls(), 1);
    r.fake.expire_tokens();
    r.feishu
        .send("oc_g", "with a new token")
        .await
        .expect("sent");
    assert_eq!(r.fake.token_calls(), 2);
    assert_eq!(
        created(&r.fake.sent())
            .iter()
            .filter(|s| s.text() == "with a new token")
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_the_bot_left_is_gone_and_other_failures_are_not() {
    let r = rig().await;
    let mid = r
        .feishu
        .send_prompt("oc_left", "p1", "Continue?", &["Yes".into()])
        .await
        .expect("sent")
        .expect("an id");
    r.fake.remove_bot("oc_left");
    let e = r.feishu.send("oc_left", "hi").await.expect_err("refused");
    let why = crate::platforms::gone(&e).expect("the bot is not in the chat: gone");
    assert!(
        why.contains("230002") && why.contains("not in this group"),
        "{why}"
    );
    let e = r
        .feishu
        .send_prompt("oc_left", "p2", "Again?", &["Yes".into()])
        .await
        .expect_err("refused");
    assert!(crate::platforms::gone(&e).is_some(), "{e:#}");
    let e = r
        .feishu
        .remove_buttons("oc_left", &mid)
        .await
        .expect_err("refused");
    assert!(crate::platforms::gone(&e).is_some(), "{e:#}");

    // Other chats still work; a server error or a message-level refusal is not "gone".
    r.feishu.send("oc_ok", "fine").await.expect("sent");
    r.fake.fail_next("/open-apis/im/v1/messages", 500, 1500);
    let e = r.feishu.send("oc_ok", "x").await.expect_err("500");
    assert!(crate::platforms::gone(&e).is_none(), "{e:#}");
    let e = r
        .feishu
        .remove_buttons("oc_ok", "om_unknown")
        .await
        .expect_err("no such message");
    assert!(crate::platforms::gone(&e).is_none(), "{e:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_or_a_second_gateway_fails_the_start_with_the_reason() {
    let fake = FakeFeishu::start(APP_ID, APP_SECRET);
    let dir = tempfile::tempdir().expect("a lock directory");
    let e = start(
        &config(APP_ID, "wrong", &fake.url()),
        "!!",
        dir.path(),
        &crate::platforms::Receiving::default(),
    )
    .await
    .err()
    .expect("refused");
    let msg = e.to_string();
    assert!(msg.contains("app_secret") && msg.contains(APP_ID), "{msg}");
    let e = start(
        &config("", "", &fake.url()),
        "!!",
        dir.path(),
        &crate::platforms::Receiving::default(),
    )
    .await
    .err()
    .expect("refused");
    assert!(e.to_string().contains("[gateway.feishu]"), "{e}");

    let (feishu, _rx) = start(
        &config(APP_ID, APP_SECRET, &fake.url()),
        "!!",
        dir.path(),
        &crate::platforms::Receiving::default(),
    )
    .await
    .expect("starts");
    assert_eq!(feishu.name(), "feishu");
    assert_eq!(feishu.consumer(), format!("feishu:{APP_ID}"));
    assert!(!feishu.is_local());
    let e = start(
        &config(APP_ID, APP_SECRET, &fake.url()),
        "!!",
        dir.path(),
        &crate::platforms::Receiving::default(),
    )
    .await
    .err()
    .expect("one gateway per app");
    assert!(e.to_string().contains("another clibot-gateway"), "{e}");
}
