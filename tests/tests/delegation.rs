//! End to end with the real daemon: delegation chains per failure class. A usage limit follows
//! `[delegation.chains.usage_limit]`, whose first CLI cannot start (its program does not
//! exist), so the work lands in the next one, and the notice and the event say why; a CLI that
//! exits in the middle of its turn (a crash) follows `[delegation.chains.crash]`; the metrics
//! count each hand-on with its reason and time it.

use std::time::{Duration, Instant};

use clibot_tests::{Harness, lines};
use serde_json::Value;

/// `first` takes a line and reports a usage limit, or exits (status 3) when the line says
/// "crash"; `second` and `third` echo each line they get; `ghost`'s program does not exist.
fn clis(h: &Harness) -> String {
    let script = |name: &str, body: &str| {
        let path = h.dir.path().join(format!("{name}.sh"));
        std::fs::write(
            &path,
            format!(
                r#"echo "{name} ready"
while IFS= read -r -p "{name}> " line; do
  echo "{name} got: $line"
{body}
done
"#
            ),
        )
        .expect("script");
        path.display().to_string()
    };
    let first = script(
        "first",
        r#"  if [[ "$line" == *crash* ]]; then exit 3; fi
  echo "Error: You've hit your usage limit. Try again later.""#,
    );
    let cli = |name: &str, argv: &str| {
        format!(
            r#"
[cli.{name}]
argv = {argv}
submit_delay_ms = 50
quiet_ms = 300

[cli.{name}.patterns]
check_lines = 3
errors = [{{ kind = "usage_limit", pattern = '(?i)usage limit' }}]
"#
        )
    };
    let bash = |path: &str| format!("[\"bash\", \"--norc\", \"--noprofile\", {path:?}]");
    [
        cli("first", &bash(&first)),
        cli("second", &bash(&script("second", ""))),
        cli("third", &bash(&script("third", ""))),
        cli("ghost", "[\"/nonexistent/ghost-cli\"]"),
    ]
    .concat()
}

/// The first line of the metrics that starts with `prefix`, waiting up to 10 s for it.
fn metric(h: &Harness, prefix: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = h.ctl_ok(&["metrics"]);
        if let Some(l) = text.lines().find(|l| l.starts_with(prefix)) {
            return l.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no metric {prefix} in:\n{text}\nlog:\n{}",
            h.daemon_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn delegated(h: &Harness, from: &str) -> Value {
    h.wait_event(from, "the hand-on", Duration::from_secs(20), |e| {
        e["type"] == "delegated" && e["session"] == from
    })
}

#[test]
fn each_failure_class_follows_its_own_chain_past_a_cli_that_cannot_start() {
    let h = Harness::with_config("");
    let mut text = std::fs::read_to_string(&h.config).expect("config");
    text.push_str(&clis(&h));
    // Were the usage limit to take the flat chain, it would land in `third`.
    text.push_str(
        r#"
[delegation]
on = ["usage_limit", "rate_limit"]
to = ["third"]
max_attempts = 1

[delegation.chains.usage_limit]
to = ["ghost", "second"]
max_attempts = 1

[delegation.chains.crash]
to = ["third"]
"#,
    );
    std::fs::write(&h.config, text).expect("config");
    let mut h = h;
    h.start_daemon();
    let work = h.work.display().to_string();
    for name in ["u", "c"] {
        h.ctl_ok(&[
            "spawn",
            name,
            "--cli",
            "first",
            "--dir",
            &work,
            "--delegate",
        ]);
        h.wait_screen(name, "first is ready", |s| s.contains("first>"));
    }
    let rules = h.ctl_ok(&["rules"]);
    for line in [
        "delegation: on rate_limit → third (at most 1 hop(s); sessions spawned with --delegate)",
        "delegation: on usage_limit → ghost, second (at most 1 hop(s);",
        "delegation: on crash → third (at most 1 hop(s);",
    ] {
        assert!(rules.contains(line), "{line:?} not in:\n{rules}");
    }

    // A usage limit: `ghost` cannot start, so the work lands in `second`.
    h.ctl_ok(&["send", "u", "build the parser"]);
    h.wait_screen("u-second", "the request typed there", |s| {
        lines(s).contains(&"second got: build the parser")
    });
    let hop = delegated(&h, "u");
    assert_eq!(hop["to_session"], "u-second", "{hop:#}");
    assert_eq!(hop["to_cli"], "second");
    assert_eq!(hop["reason"], "usage_limit");
    let skipped = hop["skipped"].as_array().cloned().unwrap_or_default();
    assert_eq!(skipped.len(), 1, "{hop:#}");
    assert_eq!(
        skipped[0],
        "ghost could not start (its program \"/nonexistent/ghost-cli\" was not found)"
    );
    let notice = h.wait_event("u-second", "the notice", Duration::from_secs(5), |e| {
        e["type"] == "notice" && e["session"] == "u-second"
    });
    assert_eq!(
        notice["text"],
        "first hit its usage limit; ghost could not start (its program \"/nonexistent/ghost-cli\" was not found); continuing in u-second (second)"
    );
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let names: Vec<&str> = list
        .as_array()
        .map(|a| a.iter().filter_map(|s| s["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(!names.iter().any(|n| n.contains("ghost")), "{names:?}");

    // A crash (the CLI exits mid-turn) follows its own chain, to `third`.
    h.ctl_ok(&["send", "c", "crash now"]);
    let screen = h.wait_screen("c-third", "the request typed there", |s| {
        lines(s).contains(&"third got: crash now")
    });
    assert!(
        screen.contains("which stopped: first exited in the middle of its turn — it exited with status 3 mid-turn"),
        "{screen}"
    );
    let hop = delegated(&h, "c");
    assert_eq!(
        (hop["to_session"].as_str(), hop["reason"].as_str()),
        (Some("c-third"), Some("crash")),
        "{hop:#}"
    );
    assert_eq!(hop["skipped"], serde_json::json!([]));
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let c = list
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "c"))
        .cloned()
        .expect("c stays");
    assert_eq!(
        (c["state"].as_str(), c["delegated_to"].as_str()),
        (Some("exited"), Some("c-third"))
    );

    // The metrics: each hand-on with where from, where to and why, and how long it took.
    assert_eq!(
        metric(
            &h,
            "clibot_delegations_total{from=\"first\",to=\"second\",reason=\"usage_limit\"}"
        )
        .rsplit(' ')
        .next(),
        Some("1")
    );
    assert_eq!(
        metric(
            &h,
            "clibot_delegations_total{from=\"first\",to=\"third\",reason=\"crash\"}"
        )
        .rsplit(' ')
        .next(),
        Some("1")
    );
    for to in ["second", "third"] {
        let count = metric(
            &h,
            &format!("clibot_delegation_seconds_count{{to=\"{to}\"}}"),
        );
        assert!(count.ends_with(" 1"), "{count}");
        let sum: f64 = metric(&h, &format!("clibot_delegation_seconds_sum{{to=\"{to}\"}}"))
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a number");
        assert!(sum > 0.0 && sum < 30.0, "{to}: {sum}");
    }

    // By hand, naming the CLI that cannot start: refused with why, and the session stays free
    // to hand its work on later.
    let err = h.ctl_err(&["delegate", "u-second", "ghost"]);
    assert!(
        err.contains("could not start ghost to continue: cannot start ghost: the program \"/nonexistent/ghost-cli\" was not found"),
        "{err}"
    );
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let us = list
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "u-second"))
        .cloned()
        .expect("u-second");
    assert_eq!(
        us["delegated_to"], "",
        "a failed hand-on releases the session: {us:#}"
    );
}
