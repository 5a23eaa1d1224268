//! Files out of a session, as a phone gets them and as an attacker would try: `!!get PATH`
//! sends a file from the session's directory unchanged (binary too); a path outside it, a
//! symlink out of it, a secret file, a git-ignored file and a text holding a secret are refused
//! with what to do; `--force` lifts the last two for admins only. Files the CLI writes into
//! `.clibot/outbox/` reach the chat and move to `.clibot/sent/`. Real clibotd and
//! clibot-gateway, fake Telegram, bash in tmux.

use std::time::{Duration, Instant};

use clibot_tests::fake_telegram::{self, FakeTelegram, texts};

const ADMIN: i64 = 100;
const ANN: i64 = 200;
/// What the redactor takes for a secret (a GitHub token's shape).
const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

fn said(tg: &FakeTelegram, chat: i64, needle: &str) {
    tg.wait_sent(needle, |s| {
        texts(s, chat).iter().any(|t| t.contains(needle))
    });
}

/// The content of the first document named `name` sent to `chat` (waits up to 20 s).
fn document(tg: &FakeTelegram, chat: i64, name: &str) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(d) = tg
            .documents()
            .into_iter()
            .find(|d| d.chat_id == chat && d.filename == name)
        {
            return d.content;
        }
        assert!(
            Instant::now() < deadline,
            "no document {name}; said: {:#?}",
            texts(&tg.sent(), chat)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn get_sends_files_from_the_session_directory_and_refuses_the_rest() {
    let (h, tg, _g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"*\"]\nsandbox = \"off\"\n"
    ));
    let work = h.work.clone();
    let proj = work.join("proj");
    std::fs::create_dir_all(proj.join("build")).expect("mkdir");
    let binary: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    std::fs::write(proj.join("data.bin"), &binary).expect("write");
    std::fs::write(proj.join("notes with space.txt"), "hello notes\n").expect("write");
    std::fs::write(proj.join("build/out.txt"), "generated\n").expect("write");
    std::fs::write(proj.join(".env"), "API_KEY=x\n").expect("write");
    std::fs::write(proj.join("config.txt"), format!("token = {TOKEN}\n")).expect("write");
    std::fs::write(work.join("outside.txt"), "not yours\n").expect("write");
    std::os::unix::fs::symlink(work.join("outside.txt"), proj.join("link.txt")).expect("symlink");
    clibot_tests::git(&proj, &["init", "-q"]);
    std::fs::write(proj.join(".gitignore"), "build/\n").expect("write");

    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        &format!("!!new p bash {}", proj.display()),
    );
    said(&tg, ADMIN, "started p");

    // Unchanged, binary or not, a name with spaces included.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!get data.bin");
    assert_eq!(document(&tg, ADMIN, "data.bin"), binary);
    tg.push_message(ADMIN, ADMIN, "Owner", "!!get notes with space.txt");
    assert_eq!(
        document(&tg, ADMIN, "notes with space.txt"),
        b"hello notes\n"
    );

    // Refused, each saying why.
    for (ask, why) in [
        ("!!get ../outside.txt", "outside p's directory"),
        ("!!get link.txt", "outside p's directory"),
        (
            &format!("!!get {}", work.join("outside.txt").display()) as &str,
            "outside p's directory",
        ),
        ("!!get .env", "never sent"),
        ("!!get nothing-here.txt", "there is no nothing-here.txt"),
        ("!!get build/out.txt", "ignored by git"),
        ("!!get config.txt", "looks like a secret"),
    ] {
        tg.push_message(ADMIN, ADMIN, "Owner", ask);
        said(&tg, ADMIN, why);
    }
    // An admin lifts the last two with --force, and gets them unchanged.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!get --force build/out.txt");
    assert_eq!(document(&tg, ADMIN, "out.txt"), b"generated\n");
    tg.push_message(ADMIN, ADMIN, "Owner", "!!get --force config.txt");
    assert_eq!(
        document(&tg, ADMIN, "config.txt"),
        format!("token = {TOKEN}\n").into_bytes()
    );
    // --force never reaches outside.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!get --force ../outside.txt");
    said(&tg, ADMIN, "only files in it are sent");
    let documents = tg.documents();
    assert!(
        !documents.iter().any(|d| d.content == b"not yours\n"),
        "a file outside the directory was sent"
    );

    // A non-admin: not in the admin's session's directory, but their own session's files
    // (in their workspace), and no --force.
    tg.push_message(
        ANN,
        ANN,
        "Ann",
        &format!("!!new mine bash {}", proj.display()),
    );
    said(&tg, ANN, "not in your workspace");
    let ws = h.data_dir().join("members/telegram-200");
    std::fs::create_dir_all(ws.join("build")).expect("workspace");
    std::fs::write(ws.join("notes with space.txt"), "her notes\n").expect("write");
    std::fs::write(ws.join("build/out.txt"), "built\n").expect("write");
    tg.push_message(ANN, ANN, "Ann", "!!new mine bash");
    said(&tg, ANN, "started mine");
    tg.push_message(ANN, ANN, "Ann", "!!get --force build/out.txt");
    said(&tg, ANN, "only admins");
    tg.push_message(ANN, ANN, "Ann", "!!get notes with space.txt");
    assert_eq!(document(&tg, ANN, "notes with space.txt"), b"her notes\n");
    // And nobody else's session.
    tg.push_message(ANN, ANN, "Ann", "!!use p");
    said(&tg, ANN, "no session named \"p\" that you may use");
    assert!(
        !tg.documents()
            .iter()
            .any(|d| d.chat_id == ANN && d.filename == "data.bin")
    );
    assert!(h.ctl_ok(&["audit", "--session", "p"]).contains("get"));
}

#[test]
fn files_the_cli_puts_in_its_outbox_reach_the_chat_and_move_to_sent() {
    let (h, tg, _g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"
    ));
    let work = h.work.clone();
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        &format!("!!new o bash {}", work.display()),
    );
    said(&tg, ADMIN, "started o");
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        "mkdir -p .clibot/outbox && printf 'the report\\n' > .clibot/outbox/report.txt",
    );
    assert_eq!(document(&tg, ADMIN, "report.txt"), b"the report\n");
    let ev = h.wait_event("o", "the file_sent event", Duration::from_secs(10), |e| {
        e["type"] == "file_sent"
    });
    assert_eq!(ev["name"], "report.txt");
    let moved = work.join(ev["path"].as_str().expect("path"));
    assert!(moved.starts_with(work.join(".clibot/sent")), "{moved:?}");
    assert_eq!(std::fs::read(&moved).expect("moved"), b"the report\n");
    assert!(!work.join(".clibot/outbox/report.txt").exists());

    // A text holding a secret goes redacted, and says so.
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        &format!("printf 'key {TOKEN}\\n' > .clibot/outbox/keys.txt"),
    );
    let sent = document(&tg, ADMIN, "keys.txt");
    let text = String::from_utf8_lossy(&sent);
    assert!(!text.contains(TOKEN), "{text}");
    let captions: Vec<String> = tg
        .documents()
        .iter()
        .filter(|d| d.filename == "keys.txt")
        .filter_map(|d| d.caption.clone())
        .collect();
    assert!(
        captions.iter().any(|c| c.contains("redacted")),
        "{captions:?}"
    );
}
