//! `clibotctl patterns test FILE [--cli X] [--json]`: a captured screen read by a CLI's pattern
//! pack exactly as the daemon reads panes — the screens of the corpus in `tests/fixtures`, a
//! CLI of the config's own pack, the generic pack, stdin — and the errors a user can make.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use clibot_tests::Harness;
use clibot_tests::asker::ASKER;
use serde_json::Value;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
        .display()
        .to_string()
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn captured_screens_are_read_as_the_daemon_reads_panes() {
    let mut h = Harness::with_config(ASKER);
    h.start_daemon();

    // A real Claude Code permission dialog from the corpus: a permission prompt with its
    // options and the command it is about.
    let v = json(&h.ctl_ok(&[
        "patterns",
        "test",
        &fixture("screens/claude_bash_perm.txt"),
        "--cli",
        "claude",
        "--json",
    ]));
    assert_eq!(v["pack"], "claude");
    assert_eq!(v["prompt"]["kind"], "permission", "{v:#}");
    assert!(
        v["prompt"]["options"]
            .as_array()
            .is_some_and(|o| o.len() >= 2),
        "{v:#}"
    );
    assert!(
        v["prompt"]["subject"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{v:#}"
    );
    // Its idle screen: no prompt, idle and settled.
    let v = json(&h.ctl_ok(&[
        "patterns",
        "test",
        &fixture("claude_idle.txt"),
        "--cli",
        "claude",
        "--json",
    ]));
    assert!(v["prompt"].is_null(), "{v:#}");
    assert_eq!(
        (v["idle"].as_bool(), v["settled"].as_bool()),
        (Some(true), Some(true))
    );
    // The same as text.
    let text = h.ctl_ok(&[
        "patterns",
        "test",
        &fixture("screens/claude_bash_perm.txt"),
        "--cli",
        "claude",
    ]);
    assert!(text.contains("prompt:      permission"), "{text}");
    assert!(text.contains("options:     1. "), "{text}");

    // A CLI of the config's own: its pack reads a screen from stdin.
    let mut child = h
        .ctl_command(&["patterns", "test", "-", "--cli", "asker", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("clibotctl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"$ ask 'rm -r build'\nRun: rm -r build [y/n] ")
        .expect("write the screen");
    let out = child.wait_with_output().expect("clibotctl");
    let v = json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        (
            v["prompt"]["kind"].as_str(),
            v["prompt"]["subject"].as_str()
        ),
        (Some("permission"), Some("rm -r build")),
        "{v:#}"
    );

    // No --cli: the generic pack (a shell's question, a password prompt).
    let file = h.work.join("screen.txt");
    std::fs::write(&file, "$ make clean\nRemove 3 files? (y/n) ").expect("write");
    let v = json(&h.ctl_ok(&["patterns", "test", &file.display().to_string(), "--json"]));
    assert_eq!(
        (v["pack"].as_str(), v["prompt"]["kind"].as_str()),
        (Some("generic"), Some("confirm"))
    );
    std::fs::write(&file, "$ sudo make install\n[sudo] password for dev: ").expect("write");
    let v = json(&h.ctl_ok(&["patterns", "test", &file.display().to_string(), "--json"]));
    assert_eq!(v["prompt"]["kind"], "secret", "{v:#}");

    // Mistakes say what to do.
    let e = h.ctl_err(&[
        "patterns",
        "test",
        &file.display().to_string(),
        "--cli",
        "nope",
    ]);
    assert!(
        e.contains("no CLI named \"nope\"") && e.contains("clibotctl status"),
        "{e}"
    );
    let e = h.ctl_err(&["patterns", "test", "/no/such/screen.txt"]);
    assert!(
        e.contains("cannot read the screen from /no/such/screen.txt"),
        "{e}"
    );
}
