//! Sessions declared in the config (`[[sessions]]`): `auto_start` ones run once the daemon
//! starts and are adopted, never duplicated, after a restart; the others are listed as
//! `declared` until `clibotctl start` or `!!start`; a tmux session of the declared name is
//! adopted; `[daemon] default_session` is where a chat with no binding talks.

use clibot_tests::fake_telegram::{self, texts};
use clibot_tests::{Harness, lines};

const ADMIN: i64 = 100;

fn declared(h: &Harness, default_session: &str) {
    let work = h.work.display().to_string();
    let text = std::fs::read_to_string(&h.config).expect("config");
    let text = text.replacen(
        "[daemon]\n",
        &format!("[daemon]\ndefault_session = \"{default_session}\"\n"),
        1,
    ) + &format!(
        r#"
[access.telegram]
policy = "pairing"
admins = ["{ADMIN}"]

[[sessions]]
name = "api"
cli = "bash"
dir = "{work}"
auto_start = true

[[sessions]]
name = "later"
cli = "bash"
dir = "{work}"

[[sessions]]
name = "spare"
cli = "bash"
dir = "{work}"
"#
    );
    std::fs::write(&h.config, text).expect("write config");
}

/// The `(name, state)` pairs of `clibotctl list --json`, sorted.
fn listed(h: &Harness) -> Vec<(String, String)> {
    let v: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("list --json");
    let mut out: Vec<(String, String)> = v
        .as_array()
        .expect("an array")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or_default().to_string(),
                s["state"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn tmux_sessions(h: &Harness) -> Vec<String> {
    let out = h.tmux(&["list-sessions", "-F", "#{session_name}"]);
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        // clibot's own control-mode client keeps a session of its own.
        .filter(|n| !n.starts_with("clibot+"))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[test]
fn declared_sessions_start_with_the_daemon_and_are_adopted_after_a_restart() {
    let mut h = Harness::new();
    declared(&h, "");
    h.start_daemon();
    // Started before the daemon serves: running at the first look.
    let l = listed(&h);
    assert!(
        l.iter().any(|(n, s)| n == "api" && s != "declared"),
        "{l:?}"
    );
    assert!(l.contains(&("later".into(), "declared".into())), "{l:?}");
    assert!(h.ctl_ok(&["list", "--state", "declared"]).contains("later"));
    h.ctl_ok(&["send", "api", "echo first-$((40+2))"]);
    h.wait_screen("api", "the reply", |t| lines(t).contains(&"first-42"));

    // kill -9 and start again: the same session is managed again, not a second one.
    h.kill_daemon();
    h.start_daemon();
    assert_eq!(tmux_sessions(&h), ["api"]);
    let l = listed(&h);
    assert_eq!(l.iter().filter(|(n, _)| n == "api").count(), 1, "{l:?}");
    h.ctl_ok(&["send", "api", "echo again-$((40+3))"]);
    h.wait_screen("api", "the same shell", |t| {
        let l = lines(t);
        l.contains(&"first-42") && l.contains(&"again-43")
    });

    // A tmux session of a declared name, made by hand on clibot's server, is adopted by
    // `start`, not duplicated.
    let out = h.tmux(&[
        "new-session",
        "-d",
        "-s",
        "later",
        "-c",
        &h.work.display().to_string(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let started = h.ctl_ok(&["start", "later", "--json"]);
    let s: serde_json::Value = serde_json::from_str(&started).expect("json");
    assert_eq!(s["name"], "later");
    assert_eq!(tmux_sessions(&h), ["api", "later"]);
    assert!(
        h.events()
            .iter()
            .any(|e| e["type"] == "adopted" && e["session"] == "later"),
        "adopted, not spawned"
    );
    // Starting it again, or a name nobody declared, says what to do.
    let again = h.ctl_err(&["start", "later"]);
    assert!(again.contains("already exists"), "{again}");
    let unknown = h.ctl_err(&["start", "nope"]);
    assert!(
        unknown.contains("[[sessions]]") && unknown.contains("nope"),
        "{unknown}"
    );
}

#[test]
fn a_chat_with_no_binding_talks_to_the_default_session() {
    let mut h = Harness::new();
    declared(&h, "later");
    h.start_daemon();
    let (tg, mut g) = fake_telegram::with_gateway(&h);
    // Declared, not started: the admin's first message starts it and goes in.
    tg.push_message(ADMIN, ADMIN, "Owner", "echo via-default-$((6*7))");
    h.wait_screen("later", "the message in the default session", |t| {
        lines(t).contains(&"via-default-42")
    });
    tg.wait_sent("the reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("via-default-42"))
    });
    // `!!use` of a declared session that is not started says how to start it.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!use spare");
    tg.wait_sent("use of a declared session", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("declared in the config but not started: !!start spare"))
    });
    // `!!sessions` lists the declared and the running alike; `!!start` answers for a name
    // that is running already.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!start later");
    tg.wait_sent("start refused", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("already exists"))
    });
    let _ = g.kill();
    let _ = g.wait();
}

/// A reload that declares a new `auto_start` session starts it; an invalid declaration changes
/// nothing and says why.
#[test]
fn reload_starts_newly_declared_sessions_and_refuses_bad_ones() {
    let mut h = Harness::new();
    h.start_daemon();
    let work = h.work.display().to_string();
    let base = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        format!("{base}\n[[sessions]]\nname = \"bad\"\ncli = \"no-such-cli\"\n"),
    )
    .expect("write");
    let err = h.ctl_err(&["reload"]);
    assert!(
        err.contains("no-such-cli") && err.contains("nothing was changed"),
        "{err}"
    );
    std::fs::write(
        &h.config,
        format!(
            "{base}\n[[sessions]]\nname = \"fresh\"\ncli = \"bash\"\ndir = \"{work}\"\nauto_start = true\n"
        ),
    )
    .expect("write");
    let out = h.ctl_ok(&["reload"]);
    assert!(out.contains("sessions"), "{out}");
    let l = listed(&h);
    assert!(
        l.iter().any(|(n, s)| n == "fresh" && s != "declared"),
        "{l:?}"
    );
}
