//! The owner boundary, tried as an attacker with an ordinary (non-admin) chat account would:
//! from inside their own session they reach nothing they were not given.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use clibot_tests::attack::{as_user, forge, rc, run_in};
use clibot_tests::{Harness, bin};

const ADMIN: &str = "100";
const ANN: &str = "200";

/// Ann's access: allowed, not an admin, working below the work directory's `members`.
fn access(extra: &str) -> String {
    format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nallow = [\"{ANN}\"]\nadmins = [\"{ADMIN}\"]\nmember_roots = [\"@WORK@/members\"]\n{extra}\n"
    )
}

fn harness(sandbox: &str) -> Harness {
    let mut h = Harness::with_config(&access(&format!("clis = [\"*\"]\n{sandbox}")));
    h.start_daemon();
    h
}

fn mkdir(h: &Harness, name: &str) -> PathBuf {
    let d = h.work.join(name);
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}

/// The admin's session `adm` (started on the machine) and Ann's session `ann_name` (started
/// from her chat), both bash, each in its own directory; returns the two directories.
fn two_sessions(h: &Harness, ann_name: &str) -> (PathBuf, PathBuf) {
    let adm_dir = mkdir(h, "adm");
    let d = adm_dir.to_str().expect("utf-8");
    h.ctl_ok(&["spawn", "adm", "--cli", "bash", "--dir", d]);
    let ann_dir = mkdir(h, &format!("members/{ann_name}"));
    let d = ann_dir.to_str().expect("utf-8");
    let (ok, out) = as_user(h, ANN, &["spawn", ann_name, "bash", d]);
    assert!(ok, "Ann may start a session: {out}\n{}", h.daemon_log());
    h.wait_list("Ann's session idle", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == ann_name && s["state"] == "idle")
        })
    });
    (adm_dir, ann_dir)
}

#[test]
fn a_non_admins_jailed_session_reaches_neither_clibot_nor_tmux_nor_other_sessions() {
    let h = harness("");
    let (adm_dir, ann_dir) = two_sessions(&h, "ann");
    std::fs::write(adm_dir.join("secret.txt"), "the admin's file").expect("write");
    let ctl = bin("clibotctl");
    let ctl = ctl.display();
    let forge = forge();
    let forge = forge.display();
    let main = h.socket.display();
    let tmux = h.tmux_socket.display();
    let state = h.state_dir.display();
    let adm = adm_dir.display();
    let script = format!(
        "export CLIBOT_NO_AUTOSTART=1; \
         {{ {ctl} list; echo rc_env=$?; \
            {ctl} --socket {main} screen adm; echo rc_main=$?; \
            {forge} {main} telegram {ADMIN} list; echo rc_forge=$?; \
            tmux -S {tmux} send-keys -t adm 'echo pwned > {adm}/pwned' Enter; echo rc_tmux=$?; \
            cat {adm}/secret.txt; echo rc_read=$?; \
            cat {state}/sessions.json {state}/audit.jsonl; echo rc_state=$?; \
            touch $HOME/planted-by-jail; echo rc_home=$?; \
            echo evil >> $HOME/.profile; echo rc_rc=$?; \
            ps ax | wc -l; \
         }} > out 2>&1"
    );
    let out = run_in(&h, "ann", &ann_dir, &script);
    let rc = |k: &str| rc(&out, k);
    assert_ne!(
        rc("rc_env"),
        "0",
        "clibotctl through the session's own socket: {out}"
    );
    assert!(
        out.contains("serves only its session's hook calls"),
        "{out}"
    );
    assert_ne!(
        rc("rc_main"),
        "0",
        "the daemon's socket is not there: {out}"
    );
    assert_ne!(rc("rc_forge"), "0", "{out}");
    assert_ne!(rc("rc_tmux"), "0", "tmux's socket is not there: {out}");
    assert_ne!(
        rc("rc_read"),
        "0",
        "another session's directory is hidden: {out}"
    );
    assert!(!out.contains("the admin's file"), "{out}");
    // The jail's home is the session's own: what it writes there never reaches the user's.
    let home = std::env::var_os("HOME").map(PathBuf::from).expect("HOME");
    assert!(!home.join("planted-by-jail").exists(), "{out}");
    // Its rc files are its own home's: the user's are not even there.
    let profile = std::fs::read_to_string(home.join(".profile")).unwrap_or_default();
    assert!(!profile.contains("evil"), "{out}");
    assert_ne!(rc("rc_state"), "0", "the state dir is hidden: {out}");
    assert!(!out.contains("hook_token"), "{out}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !adm_dir.join("pwned").exists(),
        "nothing reached the admin's session"
    );
    // Its own directory is writable (the script's `out` is there), and it still works.
    assert!(ann_dir.join("out").exists());
}

#[test]
fn from_inside_an_unjailed_session_a_caller_has_only_its_owners_rights() {
    let h = harness("sandbox = \"off\"");
    let (_, bob_dir) = two_sessions(&h, "bob");
    let ctl = bin("clibotctl");
    let ctl = ctl.display();
    let forge = forge();
    let forge = forge.display();
    let main = h.socket.display();
    // The pairing code an approval would need: issued to a stranger.
    let _ = as_user(&h, "999", &["list"]);
    let script = format!(
        "export CLIBOT_NO_AUTOSTART=1; \
         {{ {ctl} --socket {main} screen adm; echo rc_screen=$?; \
            {ctl} --socket {main} list; echo rc_list=$?; \
            {forge} {main} telegram {ADMIN} list; echo rc_forge=$?; \
            {forge} {main} local local screen adm; echo rc_local=$?; \
            {forge} {main} telegram {ADMIN} approve ABCDEFGH; echo rc_approve=$?; \
            setsid -f sh -c '{forge} {main} telegram {ADMIN} screen adm > escaped 2>&1; echo rc=$? >> escaped'; \
            sleep 1; \
         }} > out 2>&1"
    );
    let out = run_in(&h, "bob", &bob_dir, &script);
    let rc = |k: &str| rc(&out, k);
    assert_ne!(
        rc("rc_screen"),
        "0",
        "the admin's screen is not Ann's to read: {out}"
    );
    assert_eq!(rc("rc_list"), "0", "{out}");
    assert_eq!(rc("rc_forge"), "0", "{out}");
    let forged_list = out
        .lines()
        .skip_while(|l| !l.starts_with("rc_list"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        !forged_list.contains("adm"),
        "claiming to be the admin shows only Ann's sessions: {out}"
    );
    assert_ne!(rc("rc_local"), "0", "{out}");
    assert_ne!(
        rc("rc_approve"),
        "0",
        "pairings are not approved from a session: {out}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let escaped = loop {
        let e = std::fs::read_to_string(bob_dir.join("escaped")).unwrap_or_default();
        if e.contains("rc=") || Instant::now() > deadline {
            break e;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        escaped.contains("rc=3"),
        "a setsid'd double fork is still Ann: {escaped}"
    );
    let audit = std::fs::read_to_string(h.state_dir.join("audit.jsonl")).expect("audit");
    assert!(
        audit.lines().any(|l| l.contains("\"via\":\"session:bob\"")
            && l.contains(&format!("\"actor\":\"{ANN}\""))),
        "the audit names the real actor and the session: {audit}"
    );
}

#[test]
fn no_token_ever_stands_on_a_command_line() {
    let mut h = Harness::new();
    h.start_daemon();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let scanner = {
        let (stop, seen) = (stop.clone(), seen.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(dir) = std::fs::read_dir("/proc") {
                    for e in dir.flatten() {
                        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
                            let c = String::from_utf8_lossy(&c).replace('\0', " ");
                            if c.contains("tmux") || c.contains("clibot") || c.contains("bash") {
                                seen.lock().expect("lock").insert(c);
                            }
                        }
                    }
                }
            }
        })
    };
    for i in 0..6 {
        let d = mkdir(&h, &format!("s{i}"));
        h.ctl_ok(&[
            "spawn",
            &format!("s{i}"),
            "--cli",
            "bash",
            "--dir",
            d.to_str().expect("utf-8"),
        ]);
    }
    h.ctl_ok(&["restart", "s0"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = scanner.join();
    let registry: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(h.state_dir.join("sessions.json")).expect("registry"),
    )
    .expect("json");
    let tokens: Vec<String> = registry["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["hook_token"].as_str().map(str::to_string))
        .collect();
    assert_eq!(tokens.len(), 6);
    for t in &tokens {
        assert_eq!(t.len(), 32, "128 bits: {t}");
    }
    let seen = seen.lock().expect("lock");
    assert!(
        seen.iter().any(|c| c.contains("--launch")),
        "the scan saw the spawns: {seen:?}"
    );
    for c in seen.iter() {
        for t in &tokens {
            assert!(!c.contains(t.as_str()), "a token on a command line: {c}");
        }
    }
    // The launch files are gone once read.
    let launch = h.state_dir.join("launch");
    let left = std::fs::read_dir(&launch).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "launch files are removed by the launcher");
}

#[test]
fn secret_directories_are_never_session_directories() {
    let mut h = Harness::new();
    // A home and a state directory inside the only allowed root: nothing but the secret paths
    // keeps a session out of them (without that list, each spawn below would start).
    let home = h.work.join("home");
    for d in [".ssh", ".aws", ".config/gcloud", "src"] {
        std::fs::create_dir_all(home.join(d)).expect("dirs");
    }
    h.state_dir = h.work.join("state");
    let home_s = home.to_str().expect("utf-8").to_string();
    h.start_daemon_env(&[], &[("HOME", &home_s)]);
    let link = h.work.join("innocent");
    std::os::unix::fs::symlink(home.join(".ssh"), &link).expect("link");
    let state_link = h.work.join("also-innocent");
    std::os::unix::fs::symlink(&h.state_dir, &state_link).expect("link");
    std::fs::create_dir_all(h.state_dir.join("launch")).expect("dir");
    for dir in [
        home.join(".ssh"),
        home.join(".aws"),
        home.join(".config/gcloud"),
        link,
        h.state_dir.clone(),
        h.state_dir.join("launch"),
        state_link,
    ] {
        let e = h.ctl_err(&[
            "spawn",
            "x",
            "--cli",
            "bash",
            "--dir",
            dir.to_str().expect("utf-8"),
        ]);
        assert!(e.contains("holds secrets"), "{}: {e}", dir.display());
    }
    // An ordinary directory of the same home starts.
    h.ctl_ok(&[
        "spawn",
        "x",
        "--cli",
        "bash",
        "--dir",
        &format!("{home_s}/src"),
    ]);
}

#[test]
fn real_cli_a_non_admins_claude_code_runs_jailed_and_its_hooks_still_report() {
    use clibot_tests::claude::{ClaudeHome, UNSET_ENV};
    use clibot_tests::mock_llm::{MockLlm, Rule};
    assert!(clibot_tests::claude::claude_available());
    let mut h = Harness::with_config(&access(""));
    let work = mkdir(&h, "members/ann");
    let reply = "Jailed, and still answering.";
    let mock = MockLlm::start(vec![Rule::text("hello", reply)]);
    let claude = ClaudeHome::new(&h.dir.path().join("claude"), &work, &mock.url());
    h.add_cli("claude", &claude.argv(), &claude.env(), "");
    h.start_daemon_without(UNSET_ENV);
    let w = work.to_str().expect("utf-8");
    // By default a non-admin starts only the AI CLIs, not plain programs.
    let (ok, out) = as_user(&h, ANN, &["spawn", "sh1", "bash", w]);
    assert!(!ok && out.contains("you may start only: claude"), "{out}");
    let (ok, out) = as_user(&h, ANN, &["spawn", "cc", "claude", w]);
    assert!(ok, "{out}");
    h.wait_event("cc", "Claude Code ready", Duration::from_secs(60), |e| {
        e["session"] == "cc" && e["type"] == "state_changed" && e["to"] == "idle"
    });
    h.ctl_ok(&["send", "cc", "hello there"]);
    let done = h.wait_event("cc", "the reply", Duration::from_secs(60), |e| {
        e["type"] == "turn_completed"
    });
    assert_eq!(
        done["text"], reply,
        "the Stop hook came through the session's own socket"
    );
    assert_eq!(done["source"], "hook");
    // What the jailed CLI wrote stayed in the session's own home: its transcript is there,
    // not in the home the test gave it.
    let own = h.state_dir.join("jails");
    let found = Command::new("find")
        .arg(&own)
        .args(["-name", "*.jsonl"])
        .output()
        .expect("find");
    assert!(
        String::from_utf8_lossy(&found.stdout).contains(".claude/projects"),
        "the transcript is in the session's own home"
    );
    let given = Command::new("find")
        .arg(claude.home())
        .args(["-name", "*.jsonl"])
        .output()
        .expect("find");
    assert!(String::from_utf8_lossy(&given.stdout).trim().is_empty());
}

/// A non-admin's Copilot CLI runs jailed: its per-session home's links point into the jail's
/// own home, where it keeps its conversation, and its reply still comes through its hooks.
#[test]
fn real_cli_a_non_admins_copilot_runs_jailed_and_its_reply_comes_through() {
    use clibot_tests::copilot::{CopilotHome, UNSET_ENV, require_copilot};
    use clibot_tests::mock_llm::{MockLlm, Rule};
    require_copilot();
    let mut h = Harness::with_config(&access(""));
    let work = mkdir(&h, "members/ann");
    let reply = "Jailed, and still answering.";
    let mock = MockLlm::start(vec![Rule::text("hello", reply)]);
    let copilot = CopilotHome::new(&h.dir.path().join("copilot"), &work, &mock.url());
    h.add_cli("copilot", &copilot.argv(), &copilot.env(), "");
    h.start_daemon_without(UNSET_ENV);
    let (ok, out) = as_user(
        &h,
        ANN,
        &["spawn", "cp", "copilot", work.to_str().expect("utf-8")],
    );
    assert!(ok, "{out}");
    h.wait_event("cp", "Copilot ready", Duration::from_secs(60), |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    h.ctl_ok(&["send", "cp", "hello there"]);
    let done = h.wait_event("cp", "the reply", Duration::from_secs(60), |e| {
        e["type"] == "turn_completed"
    });
    assert_eq!(
        done["text"], reply,
        "read from the jail's own session state"
    );
    assert!(
        !copilot.copilot_dir().join("session-state").exists()
            || std::fs::read_dir(copilot.copilot_dir().join("session-state"))
                .map(|d| d
                    .flatten()
                    .all(|e| e.file_name().to_string_lossy().starts_with('.')))
                .unwrap_or(true),
        "nothing written into the home the test gave it"
    );
}

/// A non-admin's Qwen Code runs jailed, with the Node.js it needs, and answers.
#[test]
fn real_cli_a_non_admins_qwen_runs_jailed_and_its_reply_comes_through() {
    use clibot_tests::mock_llm::{MockLlm, Rule};
    use clibot_tests::qwen::{QwenHome, UNSET_ENV, require_qwen};
    require_qwen();
    let mut h = Harness::with_config(&access(""));
    let work = mkdir(&h, "members/ann");
    let reply = "Jailed, and still answering.";
    let mock = MockLlm::start(vec![Rule::text("hello", reply)]);
    let qwen = QwenHome::new(&h.dir.path().join("qwen"), &mock.url());
    h.add_cli("qwen", &qwen.argv(), &qwen.env(), "");
    h.start_daemon_without(UNSET_ENV);
    let (ok, out) = as_user(
        &h,
        ANN,
        &["spawn", "qw", "qwen", work.to_str().expect("utf-8")],
    );
    assert!(ok, "{out}");
    h.wait_event("qw", "Qwen Code ready", Duration::from_secs(60), |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    h.ctl_ok(&["send", "qw", "hello there"]);
    let done = h.wait_event("qw", "the reply", Duration::from_secs(60), |e| {
        e["type"] == "turn_completed"
    });
    assert_eq!(done["text"], reply);
    assert_eq!(done["source"], "hook");
}

/// From inside a jailed session, a forged completion hook names another file as its
/// transcript (the admin's session's records, a device): the daemon reads none of them for it.
#[test]
fn a_jailed_session_cannot_have_the_daemon_read_a_file_for_it() {
    let h = Harness::with_config(&format!(
        "{}\n\
         [cli.cpshell]\nadapter = \"copilot\"\nargv = [\"sh\", \"-c\", \"PS1='$ ' exec bash --norc --noprofile\", \"sh\"]\nquiet_ms = 300\n",
        access("clis = [\"*\"]")
    ));
    let mut h = h;
    h.start_daemon();
    let adm_dir = mkdir(&h, "adm");
    let records = adm_dir.join("events.jsonl");
    std::fs::write(
        &records,
        "{\"type\":\"user.message\",\"data\":{\"content\":\"hi\"}}\n{\"type\":\"assistant.message\",\"data\":{\"content\":\"THE ADMIN'S SECRET\",\"toolRequests\":[]}}\n",
    )
    .expect("write");
    let ann_dir = mkdir(&h, "members/ann");
    let (ok, out) = as_user(
        &h,
        ANN,
        &["spawn", "ann", "cpshell", ann_dir.to_str().expect("utf-8")],
    );
    assert!(ok, "{out}\n{}", h.daemon_log());
    h.wait_screen("ann", "the shell", |s| s.contains('$'));
    let ctl = bin("clibotctl");
    let ctl = ctl.display();
    let records = records.display();
    let script = format!(
        "for p in {records} /dev/zero /proc/self/environ; do \
           printf '{{\"transcriptPath\":\"%s\",\"timestamp\":0}}' \"$p\" | {ctl} hook --cli cpshell agentStop; \
         done; echo sent > out"
    );
    let out = run_in(&h, "ann", &ann_dir, &script);
    assert!(out.contains("sent"), "{out}");
    // The daemon gave up on each (they are not the session's records) within its wait.
    std::thread::sleep(Duration::from_secs(7));
    let said: Vec<String> = h
        .events()
        .into_iter()
        .filter(|e| e["session"] == "ann" && e["type"] == "turn_completed")
        .map(|e| e["text"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        said.len(),
        3,
        "each forged hook reached the daemon: {said:?}"
    );
    assert!(
        said.iter().all(|t| t.is_empty()),
        "nothing read for the jailed session: {said:?}"
    );
    assert!(h.daemon_pid().is_some(), "the daemon lives on");
}
