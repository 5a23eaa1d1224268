//! End to end: the real clibot-gateway (console platform) in front of the real clibotd: a chat
//! message runs in a CLI and the reply comes back; a prompt is answered from the chat; killing
//! the gateway mid-turn loses nothing and repeats nothing; a missing daemon is reported;
//! `clibot-gateway config` prints the effective config without a trace of a secret.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use clibot_tests::{Harness, bin};

struct Gateway {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Gateway {
    fn start(h: &Harness) -> Gateway {
        let mut child = Command::new(bin("clibot-gateway"))
            .args(["--console", "--socket"])
            .arg(&h.socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start clibot-gateway");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Gateway {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    fn say(&mut self, text: &str) {
        writeln!(self.stdin, "{text}").expect("write to the gateway");
        self.stdin.flush().expect("flush");
    }

    /// Waits for an output line containing `needle`.
    fn expect(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        if let Some(l) = self.seen.iter().find(|l| l.contains(needle)) {
            return l.clone();
        }
        while Instant::now() < deadline {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(100)) {
                self.seen.push(l.clone());
                if l.contains(needle) {
                    return l;
                }
            }
        }
        panic!(
            "the gateway never said {needle:?}; it said:\n{}",
            self.seen.join("\n")
        );
    }

    /// Everything said within `d`.
    fn drain(&mut self, d: Duration) -> Vec<String> {
        let deadline = Instant::now() + d;
        while Instant::now() < deadline {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(50)) {
                self.seen.push(l);
            }
        }
        self.seen.clone()
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_chat_message_runs_in_the_cli_and_the_reply_comes_back() {
    let mut h = Harness::new();
    h.start_daemon();
    let mut g = Gateway::start(&h);
    let work = h.work.display().to_string();
    g.say(&format!("!!new g bash {work}"));
    g.expect("started g (bash)");
    g.say("echo first-$((1+1))");
    g.expect("[g] first-2");
    // The console's transcript has both sides: what was typed and what came back.
    let t = h.ctl_ok(&["transcript", "console:console", "--json"]);
    assert!(
        t.lines()
            .any(|l| l.contains("\"in\"") && l.contains("echo first-$((1+1))")),
        "{t}"
    );
    // A prompt arrives with its options; a bare number answers it.
    g.say("read -p 'Deploy now? [y/N] ' a; echo deploy=$a");
    g.expect("[g] Deploy now? [y/N]");
    g.expect("1. y");
    g.say("1");
    g.expect("deploy=y");
    // Commands are for the gateway; anything else goes to the CLI untouched.
    g.say("!!sessions");
    g.expect("▶ g (bash)");
    g.say("!!nonsense");
    g.expect("unknown command !!nonsense");
    // Secrets do not leave the machine.
    g.say("echo key=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789");
    let line = g.expect("[g] key=");
    assert!(
        !line.contains("abcdefghijklmnopqrstuvwxyz0123456789") && line.contains("redacted"),
        "{line}"
    );
    g.kill();
}

#[test]
fn killing_the_gateway_mid_turn_loses_nothing_and_repeats_nothing() {
    let mut h = Harness::new();
    h.start_daemon();
    let mut g = Gateway::start(&h);
    let work = h.work.display().to_string();
    g.say(&format!("!!new k bash {work}"));
    g.expect("started k");
    g.say("echo early-$((2+2))");
    g.expect("[k] early-4");
    // Quiet while `sleep` runs in the foreground: still one turn.
    g.say("sleep 2; echo late-$((3*3))");
    std::thread::sleep(Duration::from_millis(500));
    g.kill();
    // The turn finishes while no gateway runs.
    std::thread::sleep(Duration::from_secs(3));
    let mut g = Gateway::start(&h);
    g.expect("[k] late-9");
    let said = g.drain(Duration::from_secs(2));
    assert_eq!(
        said.iter().filter(|l| l.contains("late-9")).count(),
        1,
        "exactly once: {said:?}"
    );
    assert!(
        !said.iter().any(|l| l.contains("early-4")),
        "nothing already delivered comes again: {said:?}"
    );

    // With the daemon away the gateway says so, and recovers when it is back.
    h.kill_daemon();
    g.say("echo after-$((5+5))");
    g.expect("daemon is not reachable");
    h.start_daemon();
    g.expect("[k] after-10");
    g.kill();
}

/// A chat is told what to do in chat commands, the machine's user in `clibotctl` ones: the
/// same refusal (a session that exited, a session that does not exist) worded for each.
#[test]
fn a_chat_is_told_chat_commands_and_clibotctl_its_own() {
    let mut h = Harness::new();
    h.start_daemon();
    let mut g = Gateway::start(&h);
    let work = h.work.display().to_string();
    g.say(&format!("!!new x bash {work}"));
    g.expect("started x (bash)");
    g.say("exit 3");
    g.expect("[x] the CLI exited (status 3)");
    g.say("echo are you there");
    let told = g.expect("has exited");
    assert!(
        told.contains("!!restart x") && told.contains("!!stop x") && !told.contains("clibotctl"),
        "{told}"
    );
    g.say("!!use nothere");
    let told = g.expect("no session named");
    assert!(
        told.contains("!!sessions") && !told.contains("clibotctl"),
        "{told}"
    );
    let err = h.ctl_err(&["send", "x", "hello"]);
    assert!(
        err.contains("`clibotctl restart x`") && !err.contains("!!"),
        "{err}"
    );
    let err = h.ctl_err(&["send", "nothere", "hello"]);
    assert!(err.contains("`clibotctl list`"), "{err}");
    // A restart from the chat brings it back.
    g.say("!!restart x");
    g.expect("restarted x");
    g.kill();
}

/// `clibot-gateway config` prints what the gateway would use — the file's `[gateway]` sections
/// with defaults, `${VARIABLES}`, flags and the environment applied — and no secret, whether
/// it was written in the file, came from a variable or from the environment.
#[test]
fn the_effective_config_is_printed_with_every_secret_masked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    let telegram = "7391846250:AAF3kq9ZtPmW2xRvB8nLcY4dJ6hUe1sGo0T";
    let feishu_secret = "Qx7pL2mZ9rT4vW8yB3nC6kD1fG5hJ0sA";
    let discord = "MTE5ODc2NTQzMjEwOTg3NjU0.GhXy9Z.kP3mQ7rS2tU8vW4xY6zA1bC5dE0fG9hI";
    std::fs::write(
        &config,
        "[daemon]\nmax_sessions = 4\n\n\
         [gateway.telegram]\ntoken = \"${CLIBOT_TEST_TELEGRAM}\"\n\n\
         [gateway.feishu]\napp_id = \"cli_a1b2c3\"\n\
         app_secret = \"Qx7pL2mZ9rT4vW8yB3nC6kD1fG5hJ0sA\"\n\
         api_url = \"https://open.larksuite.com\"\n\n\
         [access.telegram]\nadmins = [\"1\"]\n",
    )
    .expect("write config");
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = Command::new(bin("clibot-gateway"));
        cmd.arg("--config")
            .arg(&config)
            .args(args)
            .arg("config")
            .env_remove("TELEGRAM_TOKEN")
            .env_remove("DISCORD_TOKEN")
            .env_remove("CLIBOT_TEST_TELEGRAM");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run clibot-gateway config")
    };
    let out = run(
        &[
            ("CLIBOT_TEST_TELEGRAM", telegram),
            ("DISCORD_TOKEN", discord),
        ],
        &["--prefix", "%%"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // No trace of any secret: not whole, not any 6 characters of it in a row.
    for secret in [telegram, feishu_secret, discord] {
        let chars: Vec<char> = secret.chars().collect();
        for piece in chars.windows(6) {
            let piece: String = piece.iter().collect();
            assert!(
                !stdout.contains(&piece) && !stderr.contains(&piece),
                "{piece:?} of a secret was printed:\n{stdout}\n{stderr}"
            );
        }
    }
    // The settings that are not secret, defaults included, are there, each under its section.
    let section = |name: &str| -> String {
        stdout
            .split(&format!("[gateway.{name}]\n"))
            .nth(1)
            .unwrap_or_else(|| panic!("no [gateway.{name}]:\n{stdout}"))
            .split("\n\n")
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let t = section("telegram");
    assert!(t.contains("api_url = \"https://api.telegram.org\""), "{t}");
    assert!(t.contains("token = \"73…0T (46 chars)\""), "{t}");
    assert!(
        section("discord").contains("api_url = \"https://discord.com\""),
        "{stdout}"
    );
    let f = section("feishu");
    assert!(f.contains("app_id = \"cli_a1b2c3\""), "{f}");
    assert!(
        f.contains("api_url = \"https://open.larksuite.com\""),
        "{f}"
    );
    assert!(f.contains("app_secret = \"Qx…sA (32 chars)\""), "{f}");
    assert!(
        !stdout.contains("[daemon]")
            && !stdout.contains("[access")
            && !stdout.contains("max_sessions"),
        "only the gateway's sections: {stdout}"
    );
    assert!(stdout.contains(&config.display().to_string()), "{stdout}");
    assert!(stdout.contains("%%"), "the prefix: {stdout}");
    assert!(
        stdout.contains("[gateway.discord] token: from --discord-token or DISCORD_TOKEN"),
        "{stdout}"
    );
    // A variable the file names but the environment lacks: refused, and named.
    let out = run(&[], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("CLIBOT_TEST_TELEGRAM"), "{stderr}");
}

/// A `--console` trial that ended leaves nothing failing in `doctor`: its last report is
/// dropped once it would read as a stopped gateway.
#[test]
fn a_console_trial_that_ended_leaves_doctor_clean() {
    let mut h = Harness::new();
    h.start_daemon();
    let mut g = Gateway::start(&h);
    g.say("!!help");
    g.expect("Gateway commands start with");
    let doctor = |h: &Harness| -> serde_json::Value {
        let out = h.ctl(&["doctor", "--json"]);
        serde_json::from_slice(&out.stdout).expect("doctor --json")
    };
    let shown = |v: &serde_json::Value| {
        v["checks"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["name"] == "gateway console"))
    };
    // The gateway reports a platform as soon as it appears; the reply to `!!help` may still
    // come first, so the report is awaited (a few round trips at most) before the kill.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !shown(&doctor(&h)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    g.kill();
    // While it may still run, it is shown, and nothing fails; past the silence limit (30 s)
    // it is dropped (`rpc::tests` checks that on the daemon's paused clock).
    let v = doctor(&h);
    assert!(shown(&v), "{v:#}");
    let checks = v["checks"].as_array().cloned().unwrap_or_default();
    assert!(!checks.iter().any(|c| c["status"] == "fail"), "{v:#}");
}
