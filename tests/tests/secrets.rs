//! Passwords typed from a chat: a prompt that asks for one is a `secret` prompt; the answer is
//! typed into the pane and kept nowhere — not in the event log, the transcripts, the audit log,
//! the daemon's or the gateway's logs — and the chat message that carried it is deleted.

use std::path::Path;
use std::process::Command;

use clibot_tests::fake_telegram::{self, texts};
use clibot_tests::{Harness, lines};

const ADMIN: i64 = 100;

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(p);
            } else if meta.is_file()
                && let Ok(bytes) = std::fs::read(&p)
                && bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
            {
                found.push(p.display().to_string());
            }
        }
    }
    found
}

/// The `cksum` of `text`, computed here so the script the session runs never holds the text.
fn cksum(text: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", "printf %s \"$PW\" | cksum"])
        .env("PW", text)
        .output()
        .expect("cksum");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_password_typed_from_chat_reaches_the_program_and_is_kept_nowhere() {
    let (h, tg, mut g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"
    ));
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new pw bash {work}"));
    tg.wait_sent("started", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("started pw"))
    });

    // Digits and "yes" would answer an ordinary prompt's options: here they are the secret.
    let password = "1 Tr0ub4dor&3 'horse' $HOME";
    let sum = cksum(password);
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        "read -rs -p '[sudo] password for dev: ' pw; echo; echo \"sum=$(printf %s \"$pw\" | cksum)\"",
    );
    tg.wait_sent("the password prompt", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("🔒") && t.contains("[sudo] password for dev:"))
    });
    let waiting = h
        .events()
        .into_iter()
        .rfind(|e| e["type"] == "waiting")
        .expect("waiting event");
    assert_eq!(waiting["kind"], "secret", "{waiting}");

    tg.push_message(ADMIN, ADMIN, "Owner", password);
    tg.wait_sent("the secret's receipt", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("typed it") && t.contains("your message was deleted"))
    });
    h.wait_screen("pw", "the program got the password", |t| {
        lines(t).contains(&format!("sum={sum}").as_str())
    });
    // The chat message that carried it is gone from the chat.
    assert!(
        tg.calls_of("deletemessage").len() == 1,
        "{:?}",
        tg.calls_of("deletemessage")
    );
    assert!(
        !tg.messages(ADMIN)
            .iter()
            .any(|m| m["text"].as_str().is_some_and(|t| t.contains(password))),
        "the chat still shows the password"
    );

    // The same from the machine: `clibotctl send` to a session that waits on a password.
    h.ctl_ok(&[
        "send",
        "pw",
        "read -rs -p 'Enter passphrase for key /home/dev/.ssh/id_ed25519: ' pp; echo; echo \"pp=$(printf %s \"$pp\" | cksum)\"",
    ]);
    h.wait_event(
        "pw",
        "the passphrase prompt",
        std::time::Duration::from_secs(30),
        |e| {
            e["type"] == "waiting"
                && e["kind"] == "secret"
                && e["text"].as_str().is_some_and(|t| t.contains("passphrase"))
        },
    );
    let passphrase = "correct horse battery staple";
    h.ctl_ok(&["send", "pw", passphrase]);
    let psum = cksum(passphrase);
    h.wait_screen("pw", "the passphrase typed", |t| {
        lines(t).contains(&format!("pp={psum}").as_str())
    });

    // `!!answer SECRET` is the same: typed, kept nowhere, the message deleted.
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        "read -rs -p 'Password: ' p3; echo; echo p3=${#p3}",
    );
    tg.wait_sent("the third prompt", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("🔒") && t.contains("Password:"))
    });
    let answered = "s3cr3t-Answer";
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!answer {answered}"));
    h.wait_screen("pw", "the answer typed", |t| lines(t).contains(&"p3=13"));
    tg.wait_sent("the second receipt", |s| {
        texts(s, ADMIN)
            .iter()
            .filter(|t| t.contains("your message was deleted"))
            .count()
            == 2
    });

    // Nothing on disk holds either: the state directory (event log, registry, queue files,
    // transcripts, audit log), the daemon's and the gateway's logs, the config.
    let _ = g.kill();
    let _ = g.wait();
    for secret in [password, passphrase, answered] {
        let found = files_containing(h.dir.path(), secret);
        assert!(found.is_empty(), "{secret:?} found in {found:?}");
    }
    // What is kept instead: its length.
    let kept = files_containing(h.dir.path(), "[secret, 27 chars]");
    assert!(
        kept.iter().any(|f| f.contains("transcript")) && !kept.is_empty(),
        "{kept:?}"
    );
    let resolved: Vec<_> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "prompt_resolved")
        .collect();
    assert!(
        resolved.iter().any(|e| e["answer"] == "[secret, 28 chars]"),
        "{resolved:?}"
    );
}

/// A password prompt drawn by text alone — printed by a program that reads with echo on, as a
/// session shared with someone else could draw to phish the owner — gets no 🔒 answer: the
/// terminal would show it (and so the chat, the log and whoever shares the session). Only a
/// terminal that reads a line hidden, as `read -s`, `sudo` or `ssh` do, is typed into.
#[test]
fn a_secret_is_typed_only_where_the_terminal_hides_it() {
    let mut h = Harness::new();
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "ph", "--cli", "bash", "--dir", &work]);
    h.ctl_ok(&[
        "send",
        "ph",
        "printf '[sudo] password for root: '; cat > stolen",
    ]);
    let waiting = h.wait_event(
        "ph",
        "the look-alike prompt",
        std::time::Duration::from_secs(30),
        |e| e["type"] == "waiting" && e["kind"] == "secret",
    );
    assert!(
        waiting["text"]
            .as_str()
            .is_some_and(|t| t.contains("[sudo] password for root:")),
        "{waiting}"
    );
    let secret = "hunter2-never-typed";
    let e = h.ctl_err(&["send", "ph", secret]);
    assert!(e.contains("would show what you type"), "{e}");
    // Nothing reached the program; the prompt still waits.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let screen = String::from_utf8_lossy(&h.ctl(&["screen", "ph"]).stdout).into_owned();
    assert!(!screen.contains(secret), "{screen}");
    assert!(files_containing(h.dir.path(), secret).is_empty());
    let list = h.ctl_ok(&["list", "--json"]);
    assert!(list.contains("\"waiting\""), "{list}");

    // A program that reads hidden is answered, as before.
    h.ctl_ok(&["keys", "ph", "C-c"]);
    h.wait_list("the look-alike gone", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == "ph" && s["state"] != "waiting")
        })
    });
    h.ctl_ok(&[
        "send",
        "ph",
        "read -rs -p '[sudo] password for root: ' pw; echo; echo n=${#pw}",
    ]);
    h.wait_event(
        "ph",
        "the real prompt",
        std::time::Duration::from_secs(30),
        |e| {
            e["type"] == "waiting"
                && e["kind"] == "secret"
                && e["seq"].as_u64() > waiting["seq"].as_u64()
        },
    );
    h.ctl_ok(&["send", "ph", secret]);
    h.wait_screen("ph", "the password read", |t| lines(t).contains(&"n=19"));
}
