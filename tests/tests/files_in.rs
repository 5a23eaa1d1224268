//! Files in, from the phone: a document or a photo sent to a session's chat is stored in the
//! session's `.clibot/inbox/` and the CLI gets one line naming it, with the caption; what is
//! too large, a voice note, and a file from a stranger are refused; a file name cannot climb
//! out of the inbox, and an inbox a process made into a link elsewhere is refused. Real
//! clibotd and clibot-gateway, fake Telegram (getFile and its downloads), bash in tmux.

use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::fake_telegram::{self, FakeTelegram, texts};

const ADMIN: i64 = 100;
const STRANGER: i64 = 666;

fn said(tg: &FakeTelegram, chat: i64, needle: &str) {
    tg.wait_sent(needle, |s| {
        texts(s, chat).iter().any(|t| t.contains(needle))
    });
}

/// The files in the inbox, with their contents.
fn inbox(h: &Harness) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(h.work.join(".clibot/inbox"))
        .map(|d| {
            d.flatten()
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn files_from_the_phone_reach_the_session_by_path_and_nothing_else_gets_in() {
    let (h, tg, _g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n[gateway]\nmax_file_bytes = 5000\n"
    ));
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new s bash {work}"));
    said(&tg, ADMIN, "started s");

    // A document, with its caption.
    tg.push_file(
        ADMIN,
        ADMIN,
        "document",
        "notes.txt",
        b"hello from the phone\n",
        "read this",
    );
    let ev = h.wait_event("s", "the line", Duration::from_secs(20), |e| {
        e["type"] == "input_sent"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("[file from telegram:100: .clibot/inbox/"))
    });
    let line = ev["text"].as_str().unwrap_or_default().to_string();
    assert!(line.ends_with("-notes.txt] read this"), "{line}");
    let files = inbox(&h);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(line.contains(&files[0].0), "{line} names {}", files[0].0);
    assert_eq!(files[0].1, b"hello from the phone\n");

    // A photo (its largest size), no caption.
    let picture: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    tg.push_file(ADMIN, ADMIN, "photo", "", &picture, "");
    h.wait_event("s", "the photo's line", Duration::from_secs(20), |e| {
        e["type"] == "input_sent"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("-photo.jpg]"))
    });
    assert!(
        inbox(&h)
            .iter()
            .any(|(n, d)| n.ends_with("-photo.jpg") && *d == picture)
    );

    // A name that tries to climb out lands in the inbox all the same.
    tg.push_file(ADMIN, ADMIN, "document", "../../evil.sh", b"echo hi\n", "");
    h.wait_event("s", "the climbing name", Duration::from_secs(20), |e| {
        e["type"] == "input_sent" && e["text"].as_str().is_some_and(|t| t.contains("-evil.sh]"))
    });
    assert!(!h.work.join("../evil.sh").exists());
    assert!(inbox(&h).iter().any(|(n, _)| n.ends_with("-evil.sh")));

    // Refused, each saying why.
    tg.push_file(ADMIN, ADMIN, "document", "big.bin", &[7u8; 6000], "");
    said(&tg, ADMIN, "at most 5000 are passed");
    tg.push_file(ADMIN, ADMIN, "voice", "", b"OggS fake", "");
    said(&tg, ADMIN, "voice notes need [gateway.transcribe]");
    let before = inbox(&h).len();
    tg.push_file(STRANGER, STRANGER, "document", "x.txt", b"intruder\n", "");
    tg.wait_sent("the stranger's answer", |s| !texts(s, STRANGER).is_empty());
    assert_eq!(inbox(&h).len(), before, "a stranger's file was stored");

    // The inbox made a link to elsewhere by a process in the session: refused.
    let elsewhere = h.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    std::fs::remove_dir_all(h.work.join(".clibot/inbox")).expect("rm inbox");
    std::os::unix::fs::symlink(&elsewhere, h.work.join(".clibot/inbox")).expect("symlink");
    tg.push_file(ADMIN, ADMIN, "document", "sneaky.txt", b"where am I\n", "");
    said(&tg, ADMIN, "symbolic link");
    assert_eq!(
        std::fs::read_dir(&elsewhere).expect("dir").count(),
        0,
        "a file was written through the link"
    );
    assert!(h.ctl_ok(&["audit", "--session", "s"]).contains("put"));
}

#[test]
fn on_discord_an_attachment_reaches_the_session_by_path() {
    use clibot_tests::fake_discord;
    const ADMIN: u64 = 1_300_000_000_000_000_100;
    const DM: u64 = 1_400_000_000_000_000_100;
    let (h, dc, _g) =
        fake_discord::started(&format!("\n[access.discord]\nadmins = [\"{ADMIN}\"]\n"));
    let work = h.work.display().to_string();
    dc.push_message(DM, ADMIN, "owner", &format!("!!new d bash {work}"));
    dc.wait_sent("started", |s| {
        s.iter()
            .any(|m| m.channel_id == DM && m.text().contains("started d"))
    });
    let data: Vec<u8> = (0..2000u32).map(|i| (i % 253) as u8).collect();
    dc.push_file(
        DM,
        ADMIN,
        "owner",
        "screenshot.png",
        &data,
        "why does this fail?",
    );
    let ev = h.wait_event("d", "the line", Duration::from_secs(20), |e| {
        e["type"] == "input_sent"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("-screenshot.png] why does this fail?"))
    });
    let line = ev["text"].as_str().unwrap_or_default();
    assert!(
        line.starts_with(&format!("[file from discord:{ADMIN}: .clibot/inbox/")),
        "{line}"
    );
    assert!(
        inbox(&h)
            .iter()
            .any(|(n, d)| n.ends_with("-screenshot.png") && *d == data)
    );
}

#[test]
fn on_feishu_an_image_and_a_file_reach_the_session_by_path() {
    use clibot_tests::fake_feishu::{
        APP_ID, APP_SECRET, FakeFeishu, file_event, gateway, gateway_config, text_event,
    };
    const ADMIN: &str = "ou_admin000000000000000000000000000";
    const CHAT: &str = "oc_admin0000000000000000000000000000";
    let fs = FakeFeishu::start(APP_ID, APP_SECRET);
    let mut h = Harness::with_config(&gateway_config(
        &fs,
        &format!("[access.feishu]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"),
    ));
    h.start_daemon();
    let mut g = gateway(&h, &fs);
    let work = h.work.display().to_string();
    fs.push_event(&text_event(
        "ev1",
        "om_m1",
        CHAT,
        "p2p",
        ADMIN,
        &format!("!!new f bash {work}"),
        &[],
    ));
    fs.wait_sent("started", |s| {
        s.iter().any(|m| m.text().contains("started f"))
    });
    fs.put_resource("om_m2", "img_v3_user1", b"a picture");
    fs.push_event(&file_event("ev2", "om_m2", CHAT, ADMIN, "img_v3_user1", ""));
    h.wait_event("f", "the image's line", Duration::from_secs(20), |e| {
        e["type"] == "input_sent"
            && e["text"].as_str().is_some_and(|t| {
                t.starts_with(&format!("[file from feishu:{ADMIN}: .clibot/inbox/"))
                    && t.ends_with("-image.png]")
            })
    });
    fs.put_resource("om_m3", "file_v2_user2", b"%PDF-1.4 fake");
    fs.push_event(&file_event(
        "ev3",
        "om_m3",
        CHAT,
        ADMIN,
        "file_v2_user2",
        "spec.pdf",
    ));
    h.wait_event("f", "the file's line", Duration::from_secs(20), |e| {
        e["type"] == "input_sent"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.ends_with("-spec.pdf]"))
    });
    let files = inbox(&h);
    assert!(
        files
            .iter()
            .any(|(n, d)| n.ends_with("-image.png") && d == b"a picture")
    );
    assert!(
        files
            .iter()
            .any(|(n, d)| n.ends_with("-spec.pdf") && d == b"%PDF-1.4 fake")
    );
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn a_voice_note_is_transcribed_shown_and_sent_only_when_the_sender_says_so() {
    let (h, tg, _g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n[gateway.transcribe]\ncommand = [\"sh\", \"-c\", \"cat \\\"$1\\\"\", \"sh\"]\n"
    ));
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new v bash {work}"));
    said(&tg, ADMIN, "started v");

    // The "transcriber" reads the recording back: its words are the note's bytes.
    tg.push_file(ADMIN, ADMIN, "voice", "", b"echo from-voice-$((6*7))", "");
    let (message, data) = tg.buttons(ADMIN, "echo from-voice-$((6*7))");
    assert_eq!(data.len(), 2, "Send and Cancel: {data:?}");
    // Nothing is typed before the sender says so.
    std::thread::sleep(Duration::from_millis(800));
    assert!(!h.events().iter().any(|e| e["type"] == "input_sent"
        && e["text"].as_str().is_some_and(|t| t.contains("from-voice"))));
    tg.push_callback(ADMIN, ADMIN, message, &data[0]);
    said(&tg, ADMIN, "sent to v");
    h.wait_screen("v", "the transcribed command ran", |t| {
        t.contains("from-voice-42")
    });
    // A second press of the same button: no longer waiting, nothing typed twice.
    tg.push_callback(ADMIN, ADMIN, message, &data[0]);
    said(&tg, ADMIN, "no longer waiting");

    // Cancel: dropped.
    tg.push_file(ADMIN, ADMIN, "voice", "", b"echo cancelled-$((1+1))", "");
    let (message, data) = tg.buttons(ADMIN, "echo cancelled-$((1+1))");
    tg.push_callback(ADMIN, ADMIN, message, &data[1]);
    said(&tg, ADMIN, "not sent");
    std::thread::sleep(Duration::from_millis(800));
    assert!(!h.events().iter().any(|e| e["type"] == "input_sent"
        && e["text"].as_str().is_some_and(|t| t.contains("cancelled-"))));
}

/// A slow transcription (here 20 s) holds up nothing: another chat's message is answered at
/// once meanwhile, and the transcription still arrives, with its buttons.
#[test]
fn a_slow_transcription_holds_up_no_other_chat() {
    const OTHER: i64 = 300;
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{OTHER}\"]\nadmins = [\"{ADMIN}\"]\n[gateway.transcribe]\ncommand = [\"sh\", \"-c\", \"sleep 20; cat \\\"$1\\\"\", \"sh\"]\n"
    ));
    h.start_daemon();
    let (tg, _g) = fake_telegram::with_gateway(&h);
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new v bash {work}"));
    said(&tg, ADMIN, "started v");
    tg.push_file(ADMIN, ADMIN, "voice", "", b"echo slow-voice", "");
    std::thread::sleep(Duration::from_millis(500));
    let asked = std::time::Instant::now();
    tg.push_message(OTHER, OTHER, "Other", "!!whoami");
    tg.wait_sent("the other chat's answer", |s| !texts(s, OTHER).is_empty());
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "the other chat waited {:?}",
        asked.elapsed()
    );
    let (_, data) = tg.buttons(ADMIN, "echo slow-voice");
    assert_eq!(data.len(), 2, "{data:?}");
}
