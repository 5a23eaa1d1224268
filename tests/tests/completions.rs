//! Shell completion offers the names only the running daemon knows: `clibotctl send <TAB>`
//! the sessions, `--cli <TAB>` the CLIs it can start; with no daemon, nothing, at once. Real
//! clibotd and clibotctl, the generated bash script run by a real bash.

use std::process::Command;
use std::time::{Duration, Instant};

use clibot_tests::Harness;

/// What bash's completion offers for `words` (the last one being completed).
fn complete(h: &Harness, script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let bin_dir = clibot_tests::bin("clibotctl")
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{}'; COMP_POINT=${{#COMP_LINE}}; _clibotctl_names clibotctl \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words.join(" ")
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .env("PATH", path)
        .env("CLIBOT_SOCKET", &h.socket)
        .env("CLIBOT_NO_AUTOSTART", "1")
        .output()
        .expect("bash");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn completion_offers_session_and_cli_names_from_the_daemon() {
    let mut h = Harness::new();
    let script = h.dir.path().join("clibotctl.bash");
    std::fs::write(&script, h.ctl_ok(&["completions", "bash"])).expect("script");
    // No daemon: nothing, and at once (no autostart, no hang).
    let t = Instant::now();
    assert!(complete(&h, &script, &["clibotctl", "send", ""]).is_empty());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    h.start_daemon();
    let work = h.work.display().to_string();
    for name in ["alpha", "albatross", "beta"] {
        h.ctl_ok(&["spawn", name, "--cli", "bash", "--dir", &work]);
    }
    assert_eq!(
        complete(&h, &script, &["clibotctl", "send", "al"]),
        ["albatross", "alpha"]
    );
    assert_eq!(
        complete(&h, &script, &["clibotctl", "screen", "b"]),
        ["beta"]
    );
    assert_eq!(
        complete(&h, &script, &["clibotctl", "events", "--session", "be"]),
        ["beta"]
    );
    let clis = complete(&h, &script, &["clibotctl", "spawn", "x", "--cli", ""]);
    assert!(clis.contains(&"bash".to_string()), "{clis:?}");
    assert!(clis.contains(&"claude".to_string()), "{clis:?}");
    // A new session's name is not completed from the existing ones; subcommands still are.
    assert!(complete(&h, &script, &["clibotctl", "spawn", "al"]).is_empty());
    let subs = complete(&h, &script, &["clibotctl", "scr"]);
    assert_eq!(subs, ["screen"]);
}
