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
        err.contains("nor on PATH") && err.contains("./install.sh"),
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

/// A gateway that cannot reach Telegram's API says so, naming the URL and the cause (a closed
/// port: refused; a `.invalid` host: DNS; https to a plain-HTTP server: TLS), instead of blaming
/// the token.
#[test]
fn an_unreachable_telegram_is_not_a_rejected_token() {
    let mut h = Harness::new();
    h.start_daemon();
    // A plain-HTTP server for the TLS case: it answers anything, but not in TLS.
    let plain = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let plain_port = plain.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for s in plain.incoming().flatten() {
            use std::io::Write;
            let mut s = s;
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    for (url, cause) in [
        (format!("http://127.0.0.1:{closed}"), "refused"),
        ("http://no-such-host.invalid".to_string(), "DNS"),
        (format!("https://127.0.0.1:{plain_port}"), "TLS"),
    ] {
        let _ = std::fs::remove_file(h.dir.path().join("gateway.log"));
        let mut g = h.gateway(
            &["--telegram", "--telegram-api-url", &url],
            &[("TELEGRAM_TOKEN", "123:abc")],
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut log = String::new();
        while std::time::Instant::now() < deadline {
            log = h.gateway_log();
            if log.contains("cannot reach Telegram") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = g.kill();
        let _ = g.wait();
        assert!(
            log.contains(&format!("cannot reach Telegram at {url}")),
            "{url}: {log}"
        );
        assert!(log.contains(cause), "{url}: want {cause}: {log}");
        assert!(!log.contains("did not accept the bot token"), "{log}");
    }
}

/// `./install.sh --prefix DIR --no-start` (tmux present) installs the three binaries, their
/// completions and manual pages, and runs again over its own install.
#[test]
fn install_sh_installs_binaries_completions_and_man_pages_and_runs_twice() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_path_buf();
    let prefix = tempfile::tempdir().expect("tempdir");
    for run in 1..=2 {
        let out = Command::new(root.join("install.sh"))
            .args(["--prefix", &prefix.path().display().to_string()])
            .args(["--no-start", "--profile", "dev"])
            .current_dir(&root)
            .output()
            .expect("run install.sh");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "run {run}: {said}");
        assert!(said.contains("not started (--no-start)"), "{said}");
    }
    let p = prefix.path();
    for b in ["clibotd", "clibotctl", "clibot-gateway"] {
        let out = Command::new(p.join("bin").join(b))
            .arg("--version")
            .output()
            .expect("installed binary runs");
        assert!(out.status.success(), "{b} --version");
    }
    for f in [
        "share/bash-completion/completions/clibotctl",
        "share/zsh/site-functions/_clibotctl",
        "share/fish/vendor_completions.d/clibotctl.fish",
        "share/man/man1/clibotctl.1",
        "share/man/man1/clibotctl-spawn.1",
        "share/man/man1/clibotd.1",
        "share/man/man1/clibot-gateway.1",
    ] {
        let len = std::fs::metadata(p.join(f)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{f} installed");
    }
}

/// A daemon started on a fresh machine (a tmux server with no session yet) starts clean: no
/// warning about listing sessions.
#[test]
fn a_first_start_has_no_warnings() {
    let mut h = Harness::new();
    h.start_daemon();
    let status: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["status", "--json"])).expect("status --json");
    let warnings = status["warnings"].as_array().cloned().unwrap_or_default();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

/// Every command that prints speaks JSON with --json, one object a call, snake_case keys.
#[test]
fn commands_that_print_speak_json() {
    let mut h = Harness::new();
    h.start_daemon();
    let work = h.work.display().to_string();
    let j = |args: &[&str]| -> serde_json::Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = h.ctl_ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
    };
    let s = j(&["spawn", "s", "--cli", "bash", "--dir", &work]);
    assert_eq!(s["name"], "s", "{s}");
    h.wait_screen("s", "the prompt", |t| t.contains('$'));
    let sent = j(&["send", "s", "echo json-$((6*7))"]);
    assert!(
        sent["seq"].as_u64().is_some() && sent["queued"].is_boolean(),
        "{sent}"
    );
    h.wait_event("s", "the turn", std::time::Duration::from_secs(30), |e| {
        e["type"] == "turn_completed" && e["text"].as_str().is_some_and(|t| t.contains("json-42"))
    });
    let last = j(&["last", "s"]);
    assert!(
        last["text"].as_str().is_some_and(|t| t.contains("json-42")),
        "{last}"
    );
    let screen = j(&["screen", "s"]);
    assert!(
        screen["text"]
            .as_str()
            .is_some_and(|t| t.contains("json-42")),
        "{screen}"
    );
    let keys = j(&["keys", "s", "Enter"]);
    assert!(keys["seq"].as_u64().is_some(), "{keys}");
    let restarted = j(&["restart", "s"]);
    assert_eq!(restarted["name"], "s", "{restarted}");
    let stopped = j(&["stop", "s", "--force"]);
    assert_eq!(stopped["session"], "s", "{stopped}");
    assert!(stopped["forced"].is_boolean(), "{stopped}");
}

/// `clibotctl logs` prints the end of the daemon's log file, and follows it with -f, with no
/// daemon running.
#[test]
fn logs_prints_and_follows_the_daemons_log_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("clibotd.log");
    let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&log, text).expect("write log");
    let state = dir.path().display().to_string();
    let socket = dir.path().join("none.sock").display().to_string();
    let out = Command::new(bin("clibotctl"))
        .args([
            "--socket",
            &socket,
            "logs",
            "-n",
            "3",
            "--state-dir",
            &state,
        ])
        .output()
        .expect("run logs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "line 98\nline 99\nline 100\n"
    );
    let mut child = Command::new(bin("clibotctl"))
        .args([
            "--socket",
            &socket,
            "logs",
            "-f",
            "-n",
            "1",
            "--state-dir",
            &state,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run logs -f");
    std::thread::sleep(std::time::Duration::from_millis(500));
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("open");
        f.write_all(b"appended later\n").expect("append");
    }
    std::thread::sleep(std::time::Duration::from_millis(800));
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with("line 100\n") && said.contains("appended later"),
        "{said}"
    );
}

/// Piped output has no colour escapes (colour is for terminals only, and never with NO_COLOR).
#[test]
fn piped_output_is_plain() {
    let mut h = Harness::new();
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "s", "--cli", "bash", "--dir", &work]);
    for args in [&["list"][..], &["doctor"][..], &["--help"][..]] {
        let out = h.ctl(args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains('\u{1b}'), "{args:?}: {text:?}");
    }
}

/// A stop that takes more than a second says what it waits for, at a terminal (a pty from
/// `script`), and not when piped.
#[test]
fn a_slow_stop_says_it_is_waiting() {
    let mut h = Harness::new();
    h.add_cli(
        "stubborn",
        &[
            "bash".to_string(),
            "-c".to_string(),
            "trap '' INT TERM; while true; do sleep 1; done".to_string(),
        ],
        &[],
        "",
    );
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "s", "--cli", "stubborn", "--dir", &work]);
    let cmd = h.ctl_command(&["stop", "s"]);
    let program = cmd.get_program().to_string_lossy().into_owned();
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let line = std::iter::once(program)
        .chain(args)
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    // The same command, its output on a terminal.
    let out = cmd
        .get_envs()
        .fold(Command::new("script"), |mut c, (k, v)| {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
            c
        })
        .args(["-qec", &line, "/dev/null"])
        .output()
        .expect("run script");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("waiting for the CLI to quit"), "{said}");
    assert!(said.contains("stopped s"), "{said}");
}

/// The console gateway with no daemon and its input ended says so and exits, instead of
/// holding the message for ever.
#[test]
fn the_console_ends_with_its_input_when_no_daemon_answers() {
    use std::io::Write;
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("none.sock").display().to_string();
    std::fs::write(dir.path().join("none.toml"), "").expect("an empty config");
    let mut child = Command::new(bin("clibot-gateway"))
        .args(["--console", "--socket", &socket])
        .env("CLIBOT_CONFIG", dir.path().join("none.toml"))
        .env("CLIBOT_NO_AUTOSTART", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the console gateway");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(b"hello\n");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while child.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let ended = child.try_wait().ok().flatten().is_some();
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(ended, "still running: {said}");
    assert!(
        said.contains("the input ended while clibotd was not running"),
        "{said}"
    );
}

/// The console gateway starts a daemon when none runs, as clibotctl does, and works with it.
#[test]
fn the_console_starts_a_daemon_like_clibotctl() {
    use std::io::{BufRead, BufReader, Write};
    let h = Harness::new();
    let mut child = Command::new(bin("clibot-gateway"))
        .args(["--console", "--socket"])
        .arg(&h.socket)
        .env("CLIBOT_STATE_DIR", &h.state_dir)
        .env("CLIBOT_TMUX_SOCKET", &h.tmux_socket)
        .env("CLIBOT_CONFIG", &h.config)
        .env_remove("CLIBOT_NO_AUTOSTART")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the console gateway");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let work = h.work.display().to_string();
    writeln!(stdin, "!!new c bash {work}").expect("write");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = Vec::new();
    while std::time::Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(std::time::Duration::from_millis(100)) {
            let done = l.contains("started c (bash)");
            seen.push(l);
            if done {
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    // The daemon the console started outlives it, as one clibotctl starts would: end it.
    let _ = h.ctl(&["stop", "c", "--force"]);
    let _ = Command::new("pkill")
        .args(["-f", &format!("clibotd.*{}", h.socket.display())])
        .status();
    assert!(
        seen.iter().any(|l| l.contains("started c (bash)")),
        "{seen:#?}"
    );
}

/// `Select an option [1-3]:` with no options listed is answerable: the range is the options,
/// and `answer 2` types 2.
#[test]
fn a_range_prompt_is_answered_by_number() {
    let mut h = Harness::new();
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "s", "--cli", "bash", "--dir", &work]);
    h.wait_screen("s", "the prompt", |t| t.contains('$'));
    h.ctl_ok(&[
        "send",
        "s",
        "read -p 'Select an option [1-3]: ' x; echo picked=$x",
    ]);
    let waiting = h.wait_event(
        "s",
        "the select prompt",
        std::time::Duration::from_secs(30),
        |e| e["type"] == "waiting",
    );
    assert_eq!(
        waiting["options"],
        serde_json::json!(["1", "2", "3"]),
        "{waiting}"
    );
    h.ctl_ok(&["answer", "s", "2"]);
    h.wait_screen("s", "the answer typed", |t| {
        clibot_tests::lines(t).contains(&"picked=2")
    });
}

/// Running `install.sh` again where a daemon it started runs (no systemd units here): that
/// daemon is stopped gracefully and the next clibotctl call starts the new binary, which takes
/// the session up again — the session's shell is the same process throughout.
#[test]
fn install_sh_run_again_restarts_the_daemon_it_started_and_keeps_the_sessions() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_path_buf();
    let home = tempfile::tempdir().expect("tempdir");
    let h = home.path();
    let prefix = h.join("prefix");
    let bin = prefix.join("bin");
    let runtime = h.join("run");
    std::fs::create_dir_all(&runtime).expect("runtime dir");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    let env = |c: &mut Command| {
        for (k, _) in std::env::vars() {
            if k.starts_with("CLIBOT_") || k.starts_with("XDG_") || k == "TMUX" {
                c.env_remove(&k);
            }
        }
        c.env("HOME", h)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("XDG_CONFIG_HOME", h.join("config"))
            .env("XDG_STATE_HOME", h.join("state"))
            .env("XDG_DATA_HOME", h.join("data"))
            .env("TMUX_TMPDIR", &runtime)
            .env(
                "CARGO_HOME",
                std::env::var_os("CARGO_HOME").unwrap_or_else(|| {
                    std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                        .join(".cargo")
                        .into_os_string()
                }),
            )
            .env(
                "RUSTUP_HOME",
                std::env::var_os("RUSTUP_HOME").unwrap_or_else(|| {
                    std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                        .join(".rustup")
                        .into_os_string()
                }),
            );
    };
    let install = || {
        let mut c = Command::new(root.join("install.sh"));
        c.args(["--prefix", &prefix.display().to_string()])
            .args(["--no-systemd", "--profile", "dev"])
            .current_dir(&root);
        env(&mut c);
        let out = c.output().expect("run install.sh");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{said}");
        said
    };
    let ctl = |args: &[&str]| {
        let mut c = Command::new(bin.join("clibotctl"));
        c.args(args);
        env(&mut c);
        let out = c.output().expect("clibotctl");
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let pid = |json: &str| -> u64 {
        serde_json::from_str::<serde_json::Value>(json).expect("json")["pid"]
            .as_u64()
            .unwrap_or(0)
    };
    /// Whatever happens, no daemon or tmux server of this test outlives it.
    struct Cleanup(std::path::PathBuf, std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = Command::new("pkill")
                .args(["-f", &self.0.join("clibotd").display().to_string()])
                .status();
            let _ = Command::new("tmux")
                .args(["-L", "clibot", "kill-server"])
                .env("TMUX_TMPDIR", &self.1)
                .env("XDG_RUNTIME_DIR", &self.1)
                .status();
        }
    }
    let _cleanup = Cleanup(bin.clone(), runtime.clone());
    install();
    let first = pid(&ctl(&["status", "--json"]));
    assert!(first > 0);
    let dir = h.display().to_string();
    ctl(&["spawn", "kept", "--cli", "shell", "--dir", &dir]);
    let shell = |list: &str| {
        serde_json::from_str::<serde_json::Value>(list).expect("json")[0]["pid"]
            .as_u64()
            .unwrap_or(0)
    };
    let shell_pid = shell(&ctl(&["list", "--json"]));
    let said = install();
    let second = pid(&ctl(&["status", "--json"]));
    let list = ctl(&["list", "--json"]);
    assert!(said.contains("restarting the running clibotd"), "{said}");
    assert_ne!(first, second, "a new daemon runs: {said}");
    assert_eq!(
        shell(&list),
        shell_pid,
        "the same shell, taken up again: {list}"
    );
}
