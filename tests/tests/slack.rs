//! Slack over Socket Mode, against a fake Slack on 127.0.0.1 (its Web API and its websocket):
//! a DM drives a session; what users type arrives as typed and what CLIs print can mention
//! nobody; every envelope is acknowledged within 3 s; prompts are Block Kit buttons answered
//! once; a refresh opens the next connection before the old one closes; a drop, a 429 and a
//! gateway killed with -9 lose nothing and deliver nothing twice; files go both ways, and the
//! bot token never goes to a host an event names. Real clibotd and clibot-gateway, bash in tmux.

use std::process::Child;
use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::fake_slack::{self, BOT_TOKEN, FakeSlack, Sent, TEAM};
use serde_json::{Value, json};

const ADMIN: &str = "U0ADMIN";
const DM: &str = "D0ADMIN";
const STRANGER: &str = "U0STRANGE";
const STRANGER_DM: &str = "D0STRANGE";

struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn setup(more: &str) -> (FakeSlack, Harness, Gateway) {
    let fs = FakeSlack::start();
    let mut h = Harness::with_config(&fake_slack::gateway_config(
        &fs,
        &format!("{more}\n[access.slack]\npolicy = \"pairing\"\nadmins = [\"{TEAM}:{ADMIN}\"]\n"),
    ));
    h.start_daemon();
    let g = Gateway(fake_slack::gateway(&h, &fs));
    (fs, h, g)
}

/// Waits until a message to `channel` shows `needle`; returns what was sent.
fn said(fs: &FakeSlack, channel: &str, needle: &str) -> Vec<Sent> {
    fs.wait_sent(needle, |s| {
        s.iter()
            .any(|m| m.channel == channel && m.shown().contains(needle))
    })
}

/// The newest message to `channel` showing `needle` with buttons.
fn prompt(fs: &FakeSlack, channel: &str, needle: &str) -> Sent {
    let sent = fs.wait_sent(needle, |s| {
        s.iter()
            .any(|m| m.channel == channel && m.shown().contains(needle) && !m.buttons().is_empty())
    });
    sent.into_iter()
        .rev()
        .find(|m| m.channel == channel && m.shown().contains(needle) && !m.buttons().is_empty())
        .expect("the prompt")
}

fn start_session(fs: &FakeSlack, h: &Harness, name: &str) {
    let work = h.work.display().to_string();
    fs.push_message(DM, ADMIN, &format!("!!new {name} bash {work}"));
    said(fs, DM, &format!("started {name}"));
}

/// How many lines of the session's screen are exactly `line`.
fn lines_on_screen(h: &Harness, session: &str, line: &str) -> usize {
    let screen = h.ctl_ok(&["screen", session]);
    screen.lines().filter(|l| l.trim() == line).count()
}

/// Every push was acknowledged, none late, none unknown.
fn all_acknowledged_in_time(fs: &FakeSlack, pushes: &[usize]) {
    for n in pushes {
        assert!(
            fs.wait_until(Duration::from_secs(10), |f| !f.acks_of(*n).is_empty()),
            "push {n} acknowledged"
        );
    }
    assert!(fs.late_acks().is_empty(), "late: {:?}", fs.late_acks());
    assert!(fs.unknown_acks().is_empty(), "{:?}", fs.unknown_acks());
}

#[test]
fn a_dm_drives_a_session_and_text_goes_both_ways_as_written() {
    let (fs, h, _g) = setup("");
    start_session(&fs, &h, "s");
    let (a, _) = fs.push_message(DM, ADMIN, "echo sl-$((6*7))");
    said(&fs, DM, "sl-42");

    // Slack sends `>` as `&gt;`: the CLI gets what the user typed.
    let (b, _) = fs.push_message(
        DM,
        ADMIN,
        "echo typed-$((2*3)) &gt; out.txt &amp;&amp; echo wrote",
    );
    said(&fs, DM, "wrote");
    assert_eq!(
        std::fs::read_to_string(h.work.join("out.txt"))
            .unwrap_or_default()
            .trim(),
        "typed-6"
    );

    // What a CLI prints cannot mention the channel or a user.
    let (c, _) = fs.push_message(DM, ADMIN, "echo 'ping &lt;!channel&gt; &lt;@U0ADMIN&gt; x'");
    said(&fs, DM, "ping <!channel> <@U0ADMIN> x");
    assert!(
        fs.sent()
            .iter()
            .all(|m| !m.text.contains("<!channel>") && !m.text.contains("<@U0ADMIN>")),
        "escaped in what was posted"
    );
    all_acknowledged_in_time(&fs, &[a, b, c]);

    // A 429 is waited out: the reply comes late, not never.
    fs.fail_next("chat.postMessage", 429, "ratelimited", Some(1));
    fs.push_message(DM, ADMIN, "echo after-429-$((1+1))");
    said(&fs, DM, "after-429-2");

    // A long reply is split under Slack's limits, or sent as a file: nothing lost.
    fs.push_message(
        DM,
        ADMIN,
        "for i in $(seq 1 900); do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done",
    );
    assert!(
        fs.wait_until(Duration::from_secs(30), |f| {
            f.sent()
                .iter()
                .any(|m| m.channel == DM && m.shown().contains("line-900-"))
                || f.uploads()
                    .iter()
                    .any(|u| String::from_utf8_lossy(&u.data).contains("line-900-"))
        }),
        "the end of a long reply arrived"
    );
    assert!(
        fs.sent().iter().all(|m| m.text.chars().count() <= 4_000),
        "every message under Slack's advised 4,000 characters"
    );

    // A stranger gets a pairing code in their DM and nothing reaches the session.
    fs.push_message(STRANGER_DM, STRANGER, "echo stranger-was-here");
    fs.wait_sent("the stranger's answer", |s| {
        s.iter().any(|m| m.channel == STRANGER_DM)
    });
    assert!(!h.ctl_ok(&["screen", "s"]).contains("stranger-was-here"));
}

#[test]
fn a_prompt_is_answered_by_its_button_once() {
    let (fs, h, _g) = setup("");
    start_session(&fs, &h, "p");
    fs.push_message(
        DM,
        ADMIN,
        "read -p 'First? [y/N] ' a; read -p 'Second? [y/N] ' b; echo got=$a,$b",
    );
    let first = prompt(&fs, DM, "First?");
    let waiting = h
        .events()
        .into_iter()
        .rfind(|e| e["type"] == "waiting")
        .expect("waiting event");
    let id = waiting["prompt_id"].as_str().expect("prompt id");
    assert_eq!(
        first.buttons()[0].1,
        format!("a:{id}:1"),
        "each button names its prompt"
    );
    fs.press(DM, ADMIN, &first.ts, "1.");
    let second = prompt(&fs, DM, "Second?");
    // The first prompt's button again, from a phone that still shows it: refused.
    fs.press_shown(ADMIN, &first, "1.");
    said(&fs, DM, "no longer waiting");
    fs.press(DM, ADMIN, &second.ts, "2.");
    said(&fs, DM, "got=y,n");
    // Both prompts lost their buttons and kept their text.
    for p in [&first, &second] {
        assert!(
            fs.wait_until(Duration::from_secs(10), |f| f
                .message(DM, &p.ts)
                .is_some_and(
                    |m| m.buttons().is_empty() && m.shown().contains("answered")
                )),
            "buttons removed from {}",
            p.ts
        );
    }
    assert!(fs.late_acks().is_empty(), "{:?}", fs.late_acks());
}

/// A message event as Slack pushes it, with a ts of our own, so that the same event can be
/// pushed again as Slack's retry would.
fn message_event(event_id: &str, ts: &str, text: &str) -> Value {
    json!({
        "token": "fake", "team_id": TEAM, "api_app_id": fake_slack::APP_ID,
        "type": "event_callback", "event_id": event_id, "event_time": 1_700_000_000,
        "event": {
            "type": "message", "channel": DM, "channel_type": "im", "user": ADMIN,
            "team": TEAM, "text": text, "ts": ts, "event_ts": ts,
        },
    })
}

#[test]
fn refreshes_drops_and_a_killed_gateway_lose_nothing_and_repeat_nothing() {
    let (fs, mut h, mut g) = setup("");
    start_session(&fs, &h, "r");

    // Slack asks for a refresh: the next connection is opened before the old one goes, and
    // what arrives meanwhile is taken once.
    fs.refresh(Duration::from_secs(3));
    fs.push_message(DM, ADMIN, "echo r-$((5*5))x");
    assert!(
        fs.wait_until(Duration::from_secs(10), |f| f.connections().1 >= 2),
        "the next connection opened while the old one was still up; log:\n{}",
        h.gateway_log()
    );
    said(&fs, DM, "r-25x");
    assert!(
        fs.wait_until(Duration::from_secs(15), |f| f.connections().1 == 1),
        "the old connection went: {:?}; log:\n{}",
        fs.connections(),
        h.gateway_log()
    );

    // A dropped socket: reconnected, nothing lost.
    fs.drop_connections();
    fs.push_message(DM, ADMIN, "echo d-$((4*4))x");
    said(&fs, DM, "d-16x");

    // An event handled, then pushed again (Slack's retry): not typed twice.
    let once = message_event("EvOnce1", "1800000000.000001", "echo o-$((7*7))x");
    fs.push_event(once.clone());
    said(&fs, DM, "o-49x");

    // kill -9: a message sent meanwhile arrives once the gateway is back, and the retry of
    // the event handled before the kill is still not typed again.
    let _ = g.0.kill();
    let _ = g.0.wait();
    fs.push_message(DM, ADMIN, "echo k-$((3*3))x");
    fs.push_event(once);
    g = Gateway(fake_slack::gateway(&h, &fs));
    said(&fs, DM, "k-9x");
    fs.push_message(DM, ADMIN, "echo last-$((2*2))x");
    said(&fs, DM, "last-4x");
    for line in ["r-25x", "d-16x", "o-49x", "k-9x", "last-4x"] {
        assert_eq!(lines_on_screen(&h, "r", line), 1, "{line} ran once");
    }
    assert!(fs.late_acks().is_empty(), "{:?}", fs.late_acks());
    drop(g);
    h.kill_daemon();
}

#[test]
fn files_go_both_ways_and_the_token_stays_with_slack() {
    let (fs, h, _g) = setup("");
    start_session(&fs, &h, "f");
    fs.push_file(
        DM,
        ADMIN,
        "what is this?",
        "notes.txt",
        b"hello notes",
        "text/plain",
    );
    h.wait_event("f", "the file's line", Duration::from_secs(20), |e| {
        e["type"] == "input_sent"
            && e["text"].as_str().is_some_and(|t| {
                t.starts_with(&format!("[file from slack:{TEAM}:{ADMIN}: .clibot/inbox/"))
                    && t.ends_with("-notes.txt] what is this?")
            })
    });
    let inbox: Vec<Vec<u8>> = std::fs::read_dir(h.work.join(".clibot/inbox"))
        .expect("inbox")
        .flatten()
        .map(|e| std::fs::read(e.path()).unwrap_or_default())
        .collect();
    assert!(inbox.iter().any(|d| d == b"hello notes"), "{inbox:?}");
    let downloads = fs.file_downloads();
    assert!(
        !downloads.is_empty()
            && downloads
                .iter()
                .all(|(_, auth)| auth == &format!("Bearer {BOT_TOKEN}")),
        "{downloads:?}"
    );

    // An event naming a file elsewhere (forged, or a link in a message) never gets the token.
    let trap = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    trap.set_nonblocking(true).expect("non-blocking");
    let url = format!("http://{}/steal.txt", trap.local_addr().expect("addr"));
    let mut forged = message_event("EvForged", "1800000000.000002", "look");
    forged["event"]["subtype"] = json!("file_share");
    forged["event"]["files"] = json!([{
        "id": "F0FORGED", "name": "steal.txt", "mimetype": "text/plain", "size": 5,
        "url_private": url, "url_private_download": url,
    }]);
    fs.push_event(forged);
    fs.push_message(DM, ADMIN, "echo after-forged-$((1+2))");
    said(&fs, DM, "after-forged-3");
    assert!(
        trap.accept().is_err(),
        "nothing connected to the forged URL"
    );

    // Out: a screenshot and a long reply as files.
    fs.push_message(DM, ADMIN, "!!shot");
    assert!(
        fs.wait_until(Duration::from_secs(20), |f| f
            .uploads()
            .iter()
            .any(|u| u.channel == DM && u.data.starts_with(b"\x89PNG"))),
        "a PNG was shared; log:\n{}",
        h.gateway_log()
    );
}

#[test]
fn a_voice_clip_is_transcribed_and_typed_only_when_the_sender_says_so() {
    let (fs, h, _g) =
        setup("\n[gateway.transcribe]\ncommand = [\"sh\", \"-c\", \"cat \\\"$1\\\"\", \"sh\"]\n");
    start_session(&fs, &h, "v");
    // The "transcriber" reads the recording back: its words are the clip's bytes.
    fs.push_file(
        DM,
        ADMIN,
        "",
        "audio_message.webm",
        b"echo from-voice-$((6*7))",
        "audio/webm",
    );
    let card = prompt(&fs, DM, "echo from-voice-$((6*7))");
    assert_eq!(card.buttons().len(), 2, "Send and Cancel");
    fs.press(DM, ADMIN, &card.ts, "Send");
    said(&fs, DM, "sent to v");
    h.wait_screen("v", "the transcribed command ran", |t| {
        t.contains("from-voice-42")
    });
}

/// `clibot-gateway status`, `clibot-gateway config` and `clibotctl doctor` know Slack: it is
/// shown connected, its tokens are masked, its API is checked.
#[test]
fn status_config_and_doctor_know_slack() {
    let (fs, h, _g) = setup("");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(clibot_tests::bin("clibot-gateway"))
            .args(args)
            .arg("--socket")
            .arg(&h.socket)
            .env("CLIBOT_CONFIG", &h.config)
            .env("TEST_SLACK_APP_TOKEN", fake_slack::APP_TOKEN)
            .env("TEST_SLACK_BOT_TOKEN", BOT_TOKEN)
            .output()
            .expect("clibot-gateway");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        fs.wait_until(Duration::from_secs(30), |_| run(&["status"])
            .lines()
            .any(|l| l.starts_with("slack") && l.contains("connected"))),
        "{}",
        run(&["status"])
    );
    let config = run(&["config"]);
    assert!(config.contains("[gateway.slack]"), "{config}");
    for secret in [fake_slack::APP_TOKEN, BOT_TOKEN] {
        assert!(!config.contains(&secret[4..secret.len() - 4]), "{config}");
    }
    let doctor = h
        .ctl_command(&["doctor"])
        .env("TEST_SLACK_APP_TOKEN", fake_slack::APP_TOKEN)
        .env("TEST_SLACK_BOT_TOKEN", BOT_TOKEN)
        .output()
        .expect("doctor");
    let text = String::from_utf8_lossy(&doctor.stdout);
    let reach = text
        .lines()
        .find(|l| l.contains("gateway slack api"))
        .unwrap_or_else(|| panic!("doctor checks Slack's API: {text}"));
    assert!(
        !reach.contains("FAIL") && !reach.contains("fail"),
        "{reach}"
    );
}
