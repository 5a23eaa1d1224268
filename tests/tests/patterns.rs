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
    std::fs::write(&file, "x".repeat(2 << 20)).expect("write");
    let e = h.ctl_err(&["patterns", "test", &file.display().to_string()]);
    assert!(e.contains("over 1 MiB"), "{e}");
    let e = h.ctl_err(&["patterns", "test", "/no/such/screen.txt"]);
    assert!(
        e.contains("cannot read the screen from /no/such/screen.txt"),
        "{e}"
    );
}

/// The screen corpus: every captured pane in `tests/fixtures/screens`, read by its CLI's pack,
/// against `expected.toml` — the prompt's kind, its number of options and subject, busy, idle.
#[test]
fn the_screen_corpus_reads_as_expected() {
    let mut h = Harness::with_config("");
    h.start_daemon();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/screens");
    let table: toml::Table = std::fs::read_to_string(dir.join("expected.toml"))
        .expect("expected.toml")
        .parse()
        .expect("expected.toml is TOML");
    let screens = table["screen"].as_array().expect("[[screen]] entries");
    let packs: toml::Table = include_str!("../../daemon/src/cli/patterns.toml")
        .parse()
        .expect("patterns.toml");
    // Every captured screen has its expectation.
    let listed: Vec<&str> = screens.iter().filter_map(|s| s["file"].as_str()).collect();
    for f in std::fs::read_dir(&dir).expect("screens") {
        let name = f.expect("entry").file_name().to_string_lossy().into_owned();
        if name.ends_with(".txt") {
            assert!(
                listed.contains(&name.as_str()),
                "{name} has no entry in expected.toml"
            );
        }
    }
    let mut wrong = Vec::new();
    for s in screens {
        let (file, cli) = (
            s["file"].as_str().expect("file"),
            s["cli"].as_str().expect("cli"),
        );
        let path = dir.join(file).display().to_string();
        let v = json(&h.ctl_ok(&["patterns", "test", &path, "--cli", cli, "--json"]));
        let got_kind = v["prompt"]["kind"].as_str().unwrap_or("none");
        let mut check = |what: &str, got: String, want: String| {
            if got != want {
                wrong.push(format!("{file}: {what} {got:?}, expected {want:?}"));
            }
        };
        check(
            "prompt",
            got_kind.into(),
            s.get("prompt")
                .and_then(toml::Value::as_str)
                .unwrap_or("none")
                .into(),
        );
        if let Some(n) = s.get("options").and_then(toml::Value::as_integer) {
            let got = v["prompt"]["options"].as_array().map_or(0, Vec::len);
            check("options", got.to_string(), n.to_string());
        }
        if let Some(subject) = s.get("subject").and_then(toml::Value::as_str) {
            let got = v["prompt"]["subject"].as_str().unwrap_or_default();
            check("subject", got.into(), subject.into());
        }
        for flag in ["busy", "idle", "interrupted"] {
            let want = s.get(flag).and_then(toml::Value::as_bool).unwrap_or(false);
            check(flag, v[flag].to_string(), want.to_string());
        }
        check(
            "error",
            v["error"]["kind"].as_str().unwrap_or("none").into(),
            s.get("error")
                .and_then(toml::Value::as_str)
                .unwrap_or("none")
                .into(),
        );
        // Each screen belongs to a version its CLI's pack was made for (a program read by the
        // generic pack has none).
        let Some(version) = s.get("version").and_then(toml::Value::as_str) else {
            if packs.get(cli).is_some() {
                wrong.push(format!(
                    "{file}: {cli} has a pack: say the version it was captured with"
                ));
            }
            continue;
        };
        let range = packs
            .get(cli)
            .and_then(|p| p.get("versions"))
            .and_then(toml::Value::as_str)
            .unwrap_or("");
        let fit = clibot_proto::versions::Range::parse(range).map(|r| r.fit(version));
        if fit != Ok(clibot_proto::versions::Fit::Inside) {
            wrong.push(format!(
                "{file}: captured with {cli} {version:?}, outside its pack's versions {range:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
