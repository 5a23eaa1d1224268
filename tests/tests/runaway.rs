//! Turns that will not end: a stall is told with the real times and the screen's last lines, a
//! turn past `turn_timeout` gets a notice with the screen and then its `on_turn_timeout`
//! (here: cancelled), and a CLI's own `turn_timeout` overrides the daemon's.

use std::time::Duration;

use clibot_tests::Harness;

#[test]
fn a_runaway_turn_is_told_with_its_screen_and_cancelled_and_a_stall_says_what_it_shows() {
    let mut h = Harness::with_config("");
    h.add_cli(
        "patient",
        &[
            "bash".to_string(),
            "--norc".to_string(),
            "--noprofile".to_string(),
        ],
        &[("PS1".to_string(), "$ ".to_string())],
        "stall_after_ms = 1000\nturn_timeout = \"3s\"\non_turn_timeout = \"cancel\"",
    );
    let mut text = std::fs::read_to_string(&h.config).expect("config");
    text.push_str("turn_timeout = \"0\"\n");
    std::fs::write(&h.config, text).expect("config");
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "sh", "--cli", "bash", "--dir", &work]);
    h.wait_screen("sh", "the shell", |t| t.contains('$'));
    h.ctl_ok(&["send", "sh", "echo runaway-start; sleep 600"]);

    let stalled = h.wait_event("sh", "the stall", Duration::from_secs(30), |e| {
        e["type"] == "stalled"
    });
    assert!(
        stalled["working_ms"].as_u64().is_some_and(|w| w > 0),
        "{stalled}"
    );
    assert!(
        stalled["screen"]
            .as_str()
            .is_some_and(|s| s.contains("runaway-start")),
        "the screen's last lines: {stalled}"
    );
    let notice = h.wait_event("sh", "the timeout notice", Duration::from_secs(30), |e| {
        e["type"] == "notice" && e["kind"] == "turn_timeout"
    });
    let text = notice["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("working") && text.contains("runaway-start") && text.contains("!!cancel"),
        "{text}"
    );
    let cancelled = h.wait_event("sh", "the cancel", Duration::from_secs(30), |e| {
        e["type"] == "turn_cancelled"
    });
    assert_eq!(cancelled["by"], "turn_timeout");
    h.wait_list("idle again", |l| l[0]["state"] == "idle");
    assert_eq!(
        h.events()
            .iter()
            .filter(|e| e["kind"] == "turn_timeout")
            .count(),
        1,
        "told once per turn"
    );

    // A CLI whose own turn_timeout is "0" is never timed out.
    h.ctl_ok(&["spawn", "p", "--cli", "patient", "--dir", &work]);
    h.wait_screen("p", "the shell", |t| t.contains('$'));
    h.ctl_ok(&["send", "p", "sleep 8"]);
    h.wait_event("p", "its stall", Duration::from_secs(30), |e| {
        e["type"] == "stalled" && e["session"] == "p"
    });
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        !h.events().iter().any(|e| e["session"] == "p"
            && (e["kind"] == "turn_timeout" || e["type"] == "turn_cancelled")),
        "no timeout for a CLI with turn_timeout = \"0\""
    );
}
