//! What the tests that try the owner boundary as an attacker share: a chat user's calls forged
//! from outside every session, and scripts run inside a session with their results read back.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::Harness;

/// The forging client: calls the daemon as any chat user (a binary of this crate, which cargo
/// builds with its integration tests).
pub fn forge() -> PathBuf {
    crate::bin("clibot-forge")
}

/// Runs the forging client from the test (outside every session) as Telegram user `user`;
/// whether it succeeded, and what it printed.
pub fn as_user(h: &Harness, user: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(forge())
        .arg(&h.socket)
        .args(["telegram", user])
        .args(args)
        .output()
        .expect("run clibot-forge");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Types `script` into session `name` (as the machine's user) and waits for it to write
/// `done` into its directory `dir`; returns the text of `out` there.
pub fn run_in(h: &Harness, name: &str, dir: &Path, script: &str) -> String {
    let _ = std::fs::remove_file(dir.join("done"));
    h.ctl_ok(&["send", name, &format!("{script}; touch done")]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.join("done").exists() {
        assert!(
            Instant::now() < deadline,
            "the script did not finish in {name}; screen:\n{}\nlog:\n{}",
            String::from_utf8_lossy(&h.ctl(&["screen", name]).stdout),
            h.daemon_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::read_to_string(dir.join("out")).unwrap_or_default()
}

/// The value a script printed as `KEY=value`.
pub fn rc(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} in {out}"))
        .to_string()
}
