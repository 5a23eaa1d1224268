//! What a newcomer meets first: messages that say what to do.

use std::process::Command;

use clibot_tests::{Harness, bin};

/// Autostart with no clibotd next to clibotctl nor on PATH says where it looked and what to do,
/// not only "No such file or directory".
#[test]
fn autostart_without_a_daemon_binary_says_where_it_looked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctl = dir.path().join("clibotctl");
    std::fs::copy(bin("clibotctl"), &ctl).expect("copy clibotctl");
    let out = Command::new(&ctl)
        .args([
            "--socket",
            &dir.path().join("s.sock").display().to_string(),
            "list",
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.path())
        .output()
        .expect("run clibotctl");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("none was found to start"), "{err}");
    assert!(
        err.contains("nor on PATH") && err.contains("cargo install --path daemon"),
        "{err}"
    );
    assert_eq!(err.matches("No such file").count(), 0, "{err}");
}

/// `stop --timeout 0` is the default timeout, as documented; `show` prints ages; a shell's
/// restart says nothing of conversations.
#[test]
fn stop_timeout_0_is_the_default_and_show_speaks_plainly() {
    let mut h = Harness::new();
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "s", "--cli", "bash", "--dir", &work]);
    let shown = h.ctl_ok(&["show", "s"]);
    assert!(shown.contains(" ago"), "{shown}");
    assert!(!shown.contains("_ms") && !shown.contains("null"), "{shown}");
    // A shell keeps no conversation: its restart does not claim to resume one.
    let out = h.ctl_ok(&["restart", "s"]);
    assert_eq!(out.trim(), "restarted s (bash)", "{out}");
    let out = h.ctl_ok(&["stop", "s", "--timeout", "0"]);
    assert!(out.starts_with("stopped s"), "{out}");
}
