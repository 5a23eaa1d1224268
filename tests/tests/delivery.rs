//! Nothing stops the loop or the delivery: a reply larger than a gRPC message, a daemon
//! restarted mid-turn, a restart with queued input, a second window in a session, concurrent
//! restarts against the session cap, state files with absurd numbers. Real clibotd, clibotctl
//! and bash in tmux.

use std::time::Duration;

use clibot_tests::{Harness, lines};
use serde_json::Value;

fn spawn_bash(h: &Harness, name: &str) {
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", name, "--cli", "bash", "--dir", &work]);
    h.wait_screen(name, "the prompt", |s| s.contains("$"));
}

fn wait_event(h: &Harness, name: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    h.wait_event(name, what, Duration::from_secs(60), pred)
}

/// A shell printing ~5.7 MB of three-byte characters: the reply's event carries its head and a
/// blob id, the event stream still flows (no message over 4 MiB), and `clibotctl last` prints
/// it whole through ReadBlob.
#[test]
fn a_reply_over_4_mib_is_kept_whole_and_streams_in_chunks() {
    let mut h = Harness::new();
    let config = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(&h.config, config.replace("height = 40", "height = 40\nhistory_limit = 200000"))
        .expect("config");
    h.start_daemon();
    spawn_bash(&h, "r");
    // 60 000 lines of 32 `€` (96 bytes + newline) ≈ 5.8 MB.
    h.ctl_ok(&[
        "send",
        "r",
        &format!("yes {} | head -n 60000; echo DONE-MARK", "€".repeat(32)),
    ]);
    let done = wait_event(&h, "r", "the long turn's reply", |e| {
        e["type"] == "turn_completed" && e["session"] == "r"
    });
    let text = done["text"].as_str().unwrap_or_default();
    assert!(text.len() <= 256 * 1024, "event text is capped: {}", text.len());
    let blob = done["blob_id"].as_str().unwrap_or_default().to_string();
    assert!(!blob.is_empty(), "a long reply names its blob: {done}");
    let full = done["full_bytes"].as_u64().unwrap_or(0);
    assert!(full > 4 * 1024 * 1024, "the whole reply is over 4 MiB: {full}");
    let last = h.ctl(&["last", "r"]);
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );
    let whole = String::from_utf8(last.stdout).expect("utf8");
    assert!(whole.len() as u64 >= full, "{} < {full}", whole.len());
    assert!(whole.contains("DONE-MARK"), "the end of the reply is there");
    assert_eq!(
        whole.lines().filter(|l| *l == "€".repeat(32)).count(),
        60000,
        "every line arrived"
    );
    // The session takes the next message.
    h.ctl_ok(&["send", "r", "echo after-$((40+2))"]);
    h.wait_screen("r", "the next turn", |s| lines(s).contains(&"after-42"));
}

/// A daemon stopped (TERM, or kill -9) a second into `sleep 4; echo X1` and started again:
/// the running turn is reported once, with its output, when it ends, and the session takes
/// the next message.
fn restart_mid_turn(kill: bool) {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "r");
    // A first turn, so that what the pane runs at rest is known.
    h.ctl_ok(&["send", "r", "echo warm"]);
    wait_event(&h, "r", "the first turn", |e| {
        e["type"] == "turn_completed" && e["text"].as_str().is_some_and(|t| t.contains("warm"))
    });
    h.ctl_ok(&["send", "r", "sleep 4; echo X$((0+1))"]);
    std::thread::sleep(Duration::from_millis(1000));
    if kill {
        h.kill_daemon();
    } else {
        h.terminate_daemon();
    }
    h.start_daemon();
    let done = wait_event(&h, "r", "the turn that outlived the daemon", |e| {
        e["type"] == "turn_completed" && e["text"].as_str().is_some_and(|t| t.contains("X1"))
    });
    let seq = done["seq"].as_u64().unwrap_or(0);
    let turns: Vec<Value> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "turn_completed")
        .collect();
    assert_eq!(
        turns.len(),
        2,
        "the warm-up and the recovered turn, each once, nothing empty: {turns:#?}"
    );
    h.ctl_ok(&["send", "r", "echo after-$((40+2))"]);
    wait_event(&h, "r", "the next turn", |e| {
        e["type"] == "turn_completed"
            && e["seq"].as_u64().unwrap_or(0) > seq
            && e["text"].as_str().is_some_and(|t| t.contains("after-42"))
    });
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(list[0]["state"], "idle", "{list:#}");
}

#[test]
fn a_turn_running_across_a_daemon_term_is_reported_once_when_it_ends() {
    restart_mid_turn(false);
}

#[test]
fn a_turn_running_across_a_daemon_kill_9_is_reported_once_when_it_ends() {
    restart_mid_turn(true);
}
