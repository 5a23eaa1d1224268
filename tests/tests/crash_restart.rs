//! `restart = "on-failure"`: a CLI that fails is started again with backoff, each restart told,
//! until it has failed `restart_max` times in `restart_window`; a clean exit is left alone.

use std::time::Duration;

use clibot_tests::Harness;
use serde_json::Value;

fn notices(h: &Harness) -> Vec<Value> {
    h.events()
        .into_iter()
        .filter(|e| e["type"] == "notice" && e["kind"] == "restart")
        .collect()
}

#[test]
fn a_failing_cli_is_started_again_with_backoff_until_it_fails_too_often() {
    let h = Harness::with_config("");
    // A CLI that fails (status 3) on `boom` and quits cleanly on `bye`.
    h.add_cli(
        "flaky",
        &[
            "bash".to_string(),
            "-c".to_string(),
            "echo ready; while read -r line; do case $line in boom) exit 3;; bye) exit 0;; esac; echo \"got $line\"; done".to_string(),
        ],
        &[],
        "restart = \"on-failure\"\nrestart_max = 2\nrestart_window = \"10m\"",
    );
    let mut h = h;
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "f", "--cli", "flaky", "--dir", &work]);
    h.wait_screen("f", "started", |t| t.contains("ready"));

    for attempt in 1..=2 {
        h.ctl_ok(&["send", "f", "boom"]);
        h.wait_event("f", "the restart notice", Duration::from_secs(30), |e| {
            e["type"] == "notice"
                && e["kind"] == "restart"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(&format!("restart {attempt} of 2")))
        });
        h.wait_list("running again", |l| {
            l[0]["state"] == "idle" || l[0]["state"] == "working"
        });
        h.wait_screen("f", "started again", |t| t.contains("ready"));
    }
    assert!(
        notices(&h)[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("status 3")),
        "{:#?}",
        notices(&h)
    );
    // A third failure within the window: not started again, and told so.
    h.ctl_ok(&["send", "f", "boom"]);
    h.wait_event("f", "the give-up notice", Duration::from_secs(30), |e| {
        e["type"] == "notice"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("not started again"))
    });
    std::thread::sleep(Duration::from_secs(3));
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(list[0]["state"], "exited", "{list:#}");

    // A clean exit is not a failure.
    h.ctl_ok(&["restart", "f"]);
    h.wait_screen("f", "started by hand", |t| t.contains("ready"));
    let before = notices(&h).len();
    h.ctl_ok(&["send", "f", "bye"]);
    h.wait_list("exited cleanly", |l| l[0]["state"] == "exited");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(notices(&h).len(), before, "{:#?}", notices(&h));
}

/// A CLI that crashes leaves no process behind: a child that ignores SIGHUP (`nohup`) is ended
/// with it, so restarts do not pile them up; so is one left by a CLI that had crashed before a
/// `stop --force`.
#[test]
fn a_crashed_cli_leaves_no_sighup_ignoring_child() {
    let mut h = Harness::new();
    h.start_daemon();
    let work = h.work.display().to_string();
    for name in ["crash", "stopped"] {
        h.ctl_ok(&["spawn", name, "--cli", "bash", "--dir", &work]);
        h.wait_screen(name, "the prompt", |s| s.contains('$'));
        let pidfile = h.work.join(format!("{name}.pid"));
        h.ctl_ok(&[
            "send",
            name,
            &format!(
                "nohup sleep 1000 >/dev/null 2>&1 & echo $! > {}",
                pidfile.display()
            ),
        ]);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(&pidfile).map_or(true, |s| s.trim().is_empty()) {
            assert!(std::time::Instant::now() < deadline, "no pid file");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let pid = |name: &str| -> String {
        std::fs::read_to_string(h.work.join(format!("{name}.pid")))
            .expect("pid")
            .trim()
            .to_string()
    };
    let running = |p: &str| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
    };
    let (a, b) = (pid("crash"), pid("stopped"));
    assert!(running(&a) && running(&b));
    h.ctl_ok(&["send", "crash", "exit 3"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while running(&a) {
        assert!(
            std::time::Instant::now() < deadline,
            "the crashed CLI's nohup child still runs\n{}",
            h.daemon_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    h.ctl_ok(&["stop", "stopped", "--force"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while running(&b) {
        assert!(
            std::time::Instant::now() < deadline,
            "stop --force left the nohup child"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
