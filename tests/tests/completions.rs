//! Shell completion offers the names only the running daemon knows: `clibotctl send <TAB>`
//! the sessions, `--cli <TAB>` the CLIs it can start; with no daemon, nothing, at once. Real
//! clibotd and clibotctl; the generated scripts run by a real bash, zsh and fish.

use std::process::Command;
use std::time::{Duration, Instant};

use clibot_tests::Harness;

/// What bash's completion offers for `words` (the last one being completed).
fn complete(h: &Harness, script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{}'; COMP_POINT=${{#COMP_LINE}}; _clibotctl_names clibotctl \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words.join(" ")
    );
    run_shell(h, "bash", &["--norc", "--noprofile", "-c", &program])
}

/// Runs `shell` with `args`, the built binaries first on its PATH and the harness's daemon as
/// clibotctl's; the lines it printed.
fn run_shell(h: &Harness, shell: &str, args: &[&str]) -> Vec<String> {
    let bin_dir = clibot_tests::bin("clibotctl")
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(shell)
        .args(args)
        .env("PATH", path)
        .env("CLIBOT_SOCKET", &h.socket)
        .env("CLIBOT_NO_AUTOSTART", "1")
        .output()
        .unwrap_or_else(|e| panic!("{shell}: {e}"));
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

/// What the zsh script's names function offers for `words` (the last one being completed):
/// zsh's own `compadd` and `compdef` stand in by printing what they are given, and clap's
/// part (`_arguments`) prints `CLAP` when the names are not for these words.
fn complete_zsh(h: &Harness, script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "compdef() {{ :; }}; compadd() {{ [[ $1 == -- ]] && shift; print -l -- \"$@\"; }}; _arguments() {{ print CLAP; }}; source '{}'; words=({}); CURRENT={}; _clibotctl_names",
        script.display(),
        quoted.join(" "),
        words.len()
    );
    run_shell(h, "zsh", &["-f", "-c", &program])
}

/// What fish's own completion offers for the command line `line` (names only).
fn complete_fish(h: &Harness, script: &std::path::Path, line: &str) -> Vec<String> {
    let program = format!("source '{}'; complete -C '{line}'", script.display());
    run_shell(h, "fish", &["--no-config", "-c", &program])
        .into_iter()
        .map(|l| l.split('\t').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn zsh_and_fish_complete_session_and_cli_names_too() {
    let mut h = Harness::new();
    let zsh = h.dir.path().join("_clibotctl");
    std::fs::write(&zsh, h.ctl_ok(&["completions", "zsh"])).expect("zsh script");
    let fish = h.dir.path().join("clibotctl.fish");
    std::fs::write(&fish, h.ctl_ok(&["completions", "fish"])).expect("fish script");
    assert!(complete_zsh(&h, &zsh, &["clibotctl", "send", ""]).is_empty());
    h.start_daemon();
    let work = h.work.display().to_string();
    for name in ["alpha", "beta"] {
        h.ctl_ok(&["spawn", name, "--cli", "bash", "--dir", &work]);
    }
    assert_eq!(
        complete_zsh(&h, &zsh, &["clibotctl", "send", "a"]),
        ["alpha", "beta"],
        "zsh filters the names itself"
    );
    assert_eq!(
        complete_zsh(&h, &zsh, &["clibotctl", "events", "--session", ""]),
        ["alpha", "beta"]
    );
    let clis = complete_zsh(&h, &zsh, &["clibotctl", "spawn", "x", "--cli", ""]);
    assert!(clis.contains(&"bash".to_string()), "{clis:?}");
    assert_eq!(
        complete_zsh(&h, &zsh, &["clibotctl", "spawn", "al"]),
        ["CLAP"],
        "a new session's name is clap's"
    );
    assert_eq!(complete_fish(&h, &fish, "clibotctl send al"), ["alpha"]);
    let clis = complete_fish(&h, &fish, "clibotctl spawn x --cli ba");
    assert!(clis.contains(&"bash".to_string()), "{clis:?}");
}

#[test]
fn the_gateway_completes_its_flags_and_subcommands() {
    let h = Harness::new();
    let script = h.dir.path().join("clibot-gateway.bash");
    let out = Command::new(clibot_tests::bin("clibot-gateway"))
        .args(["completions", "bash"])
        .output()
        .expect("clibot-gateway completions");
    assert!(out.status.success(), "{out:?}");
    std::fs::write(&script, &out.stdout).expect("script");
    let program = format!(
        "source '{}'; COMP_WORDS=(clibot-gateway --tel); COMP_CWORD=1; COMP_LINE='clibot-gateway --tel'; COMP_POINT=${{#COMP_LINE}}; _clibot__gateway clibot-gateway --tel clibot-gateway; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let mut offered = run_shell(&h, "bash", &["--norc", "--noprofile", "-c", &program]);
    offered.sort();
    assert_eq!(
        offered,
        ["--telegram", "--telegram-api-url", "--telegram-token"]
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = Command::new(clibot_tests::bin("clibot-gateway"))
            .args(["completions", shell])
            .output()
            .expect("clibot-gateway completions");
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("--telegram"),
            "{shell}: {out:?}"
        );
    }
}
