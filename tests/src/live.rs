//! Testing with a user's timing: events read the moment the daemon writes them (so the next
//! message can go the instant a reply lands, as a phone sends it), and a loaded machine.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Harness;

/// `clibotctl events --follow --json`, read line by line on a thread.
pub struct EventStream {
    child: Child,
    rx: mpsc::Receiver<Value>,
    /// Every event received so far, for failure messages.
    seen: Vec<Value>,
}

impl EventStream {
    /// Follows the events after sequence number `since`.
    pub fn start(h: &Harness, since: u64) -> EventStream {
        let since = since.to_string();
        let mut child = h
            .ctl_command(&["events", "--follow", "--json", "--since", &since])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run clibotctl events --follow");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        EventStream {
            child,
            rx,
            seen: Vec::new(),
        }
    }

    /// The next event matching `pred`, as soon as it is written; `None` after `within`.
    pub fn try_next(&mut self, within: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self.rx.recv_timeout(left).ok()?;
            self.seen.push(v.clone());
            if pred(&v) {
                return Some(v);
            }
        }
    }

    /// [`EventStream::try_next`] that panics on a time-out, with the events seen and `h`'s
    /// session `session` screen and daemon log.
    pub fn next_in(
        &mut self,
        h: &Harness,
        session: &str,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        if let Some(v) = self.try_next(within, pred) {
            return v;
        }
        let screen = String::from_utf8_lossy(&h.ctl(&["screen", session]).stdout).into_owned();
        let log: String = h
            .daemon_log()
            .lines()
            .filter(|l| !l.contains("DEBUG") && !l.contains("TRACE"))
            .collect::<Vec<_>>()
            .join("\n");
        panic!(
            "timed out after {within:?} waiting for {what}; events seen:\n{}\nscreen:\n{screen}\nlog:\n{log}",
            self.seen
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    }

    /// Everything received so far.
    pub fn seen(&self) -> &[Value] {
        &self.seen
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One busy loop per core for as long as it lives: the machine a CI job or a laptop on battery
/// is, where a TUI draws its frames late.
pub struct CpuLoad(Vec<Child>);

impl CpuLoad {
    pub fn start() -> CpuLoad {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        CpuLoad(
            (0..cores)
                .filter_map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .spawn()
                        .ok()
                })
                .collect(),
        )
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The newest event's sequence number.
pub fn last_seq(h: &Harness) -> u64 {
    h.events()
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .max()
        .unwrap_or(0)
}

/// The scenario that wedged Claude Code and Gemini CLI: `n` messages to `session`, each sent
/// the instant the previous reply lands; with `desk`, a message typed at the terminal (by
/// tmux keys into the pane) after the second reply, before the next chat message. The mock's
/// rules must answer `please answer N` with `reply number N` (see [`numbered_rules`]) and
/// `typed at the desk` with `desk reply`. Asserts n replies in order (plus the desk's), each
/// exactly once, no message typed twice, and the session idle at the end.
pub fn rapid_turns(h: &Harness, session: &str, n: usize, desk: bool, within: Duration) {
    let since = last_seq(h);
    let mut ev = EventStream::start(h, since);
    let completed = |e: &Value| e["session"] == session && e["type"] == "turn_completed";
    for i in 1..=n {
        h.ctl_ok(&["send", session, &format!("please answer {i}")]);
        let done = ev.next_in(h, session, &format!("reply {i}"), within, completed);
        assert_eq!(
            done["text"].as_str().map(str::trim),
            Some(format!("reply number {i}").as_str()),
            "turn {i}: {done}"
        );
        if desk && i == 2 {
            let text = ["send-keys", "-t", session, "-l", "typed at the desk"];
            assert!(h.tmux(&text).status.success());
            // The person looks at what they typed before pressing Enter.
            std::thread::sleep(Duration::from_millis(300));
            assert!(
                h.tmux(&["send-keys", "-t", session, "Enter"])
                    .status
                    .success()
            );
            let done = ev.next_in(h, session, "the desk's reply", within, completed);
            assert_eq!(done["text"].as_str().map(str::trim), Some("desk reply"));
        }
    }
    // Settled: idle, nothing queued, and nothing more came (no duplicate turn, no phantom one).
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let events: Vec<Value> = h
        .events()
        .into_iter()
        .filter(|e| e["seq"].as_u64() > Some(since) && e["session"] == session)
        .collect();
    let count = |t: &str| events.iter().filter(|e| e["type"] == t).count();
    let turns = n + usize::from(desk);
    assert_eq!(count("turn_completed"), turns, "{events:#?}");
    assert_eq!(
        count("input_sent"),
        n,
        "each message typed once: {events:#?}"
    );
    assert_eq!(count("error"), 0, "{events:#?}");
    let list = h.ctl_ok(&["list", "--json"]);
    let state = serde_json::from_str::<Value>(&list)
        .ok()
        .and_then(|v| {
            v.as_array()?
                .iter()
                .find(|s| s["name"] == session)
                .map(|s| s["state"].clone())
        })
        .unwrap_or(Value::Null);
    assert_eq!(state, "idle", "{list}");
}

/// The rules [`rapid_turns`] expects, for the mock model.
pub fn numbered_rules(n: usize) -> Vec<crate::mock_llm::Rule> {
    let mut rules: Vec<_> = (1..=n)
        .map(|i| {
            crate::mock_llm::Rule::text(format!("please answer {i}"), format!("reply number {i}"))
        })
        .collect();
    rules.push(crate::mock_llm::Rule::text(
        "typed at the desk",
        "desk reply",
    ));
    rules
}

/// A daemon stopped mid-turn — by TERM, or by kill -9 when `kill` — and started again while
/// the model (slowed by `mock`'s latency) is still answering: the turn is reported exactly
/// once, with `reply`, when it ends, and the session then answers `next` with `next_reply`.
/// `unset` is what the daemon's environment must not inherit (a surrounding CLI's variables).
#[allow(clippy::too_many_arguments)]
pub fn restart_mid_turn(
    h: &mut Harness,
    mock: &crate::mock_llm::MockLlm,
    session: &str,
    (ask, reply): (&str, &str),
    (next, next_reply): (&str, &str),
    kill: bool,
    unset: &[&str],
    within: Duration,
) {
    let since = last_seq(h);
    mock.set_latency(Duration::from_secs(5));
    h.ctl_ok(&["send", session, ask]);
    std::thread::sleep(Duration::from_millis(1500));
    if kill {
        h.kill_daemon();
    } else {
        h.terminate_daemon();
    }
    h.start_daemon_without(unset);
    mock.set_latency(Duration::ZERO);
    let after = |e: &Value| e["seq"].as_u64().is_some_and(|s| s > since) && e["session"] == session;
    let done = h.wait_event(session, "the turn that outlived the daemon", within, |e| {
        after(e) && e["type"] == "turn_completed"
    });
    assert_eq!(done["text"], reply, "{done:#}");
    // Give a duplicate the time to show up.
    std::thread::sleep(Duration::from_secs(2));
    let turns: Vec<Value> = h
        .events()
        .into_iter()
        .filter(|e| after(e) && e["type"] == "turn_completed")
        .collect();
    assert_eq!(turns.len(), 1, "reported once: {turns:#?}");
    let seq = done["seq"].as_u64().unwrap_or(0);
    h.ctl_ok(&["send", session, next]);
    let done = h.wait_event(session, "the next turn", within, |e| {
        e["seq"].as_u64().is_some_and(|s| s > seq)
            && e["session"] == session
            && e["type"] == "turn_completed"
    });
    assert_eq!(done["text"], next_reply, "{done:#}");
}

/// The rules [`killed_mid_turn`] needs from the mock.
pub fn restart_rules() -> Vec<crate::mock_llm::Rule> {
    vec![
        crate::mock_llm::Rule::text("slow question", "The slow answer."),
        crate::mock_llm::Rule::text("next question", "The next answer."),
    ]
}

/// [`restart_mid_turn`] by `kill -9`, with the questions [`restart_rules`] answers.
pub fn killed_mid_turn(
    h: &mut Harness,
    mock: &crate::mock_llm::MockLlm,
    session: &str,
    unset: &[&str],
) {
    restart_mid_turn(
        h,
        mock,
        session,
        ("please answer the slow question", "The slow answer."),
        ("please answer the next question", "The next answer."),
        true,
        unset,
        Duration::from_secs(60),
    );
}

/// The rules [`cancel_long_turn`] needs from the mock: a slow question, and the next one.
pub fn cancel_rules() -> Vec<crate::mock_llm::Rule> {
    // The next message may share a user turn with the cancelled one (an interrupted turn
    // leaves no answer between them): its rule is looked at first.
    vec![
        crate::mock_llm::Rule::text("after the cancel", "Hello after the cancel."),
        crate::mock_llm::Rule::text("slow question", "Too late."),
    ]
}

/// A turn whose model answer takes a minute is cancelled while it runs (`how`: what the
/// cancel reports, e.g. "keys Escape" or "api"): `turn_cancelled` follows, the slow answer
/// never becomes a reply, and the next message gets its own. The mock needs [`cancel_rules`].
pub fn cancel_long_turn(h: &Harness, name: &str, mock: &crate::mock_llm::MockLlm, how: &str) {
    mock.set_latency(Duration::from_secs(60));
    h.ctl_ok(&["send", name, "please answer the slow question"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !mock
        .requests()
        .iter()
        .any(|r| r.to_string().contains("slow question"))
    {
        assert!(
            Instant::now() < deadline,
            "the question never reached the model"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    h.wait_list("working", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == name && s["state"] == "working")
        })
    });
    let out = h.ctl_ok(&["cancel", name]);
    assert!(out.contains(how), "{out}");
    let ev = h.wait_event(name, "the cancel", Duration::from_secs(30), |e| {
        e["type"] == "turn_cancelled"
    });
    assert_eq!(ev["how"], how, "{ev}");
    mock.set_latency(Duration::ZERO);
    let seq = last_seq(h);
    h.ctl_ok(&["send", name, "please say hello after the cancel"]);
    let done = h.wait_event(name, "the next reply", Duration::from_secs(60), |e| {
        e["seq"].as_u64().is_some_and(|s| s > seq) && e["type"] == "turn_completed"
    });
    assert!(
        done["text"]
            .as_str()
            .is_some_and(|t| t.contains("Hello after the cancel.")),
        "{done}"
    );
    assert!(
        !h.events()
            .iter()
            .any(|e| e["type"] == "turn_completed" && e["text"] == "Too late."),
        "the cancelled answer became a reply"
    );
}

/// Every model request that carries `text`, as JSON text. Some CLIs also ask for a title
/// with the new message alone: the turn's request is the one among them that carries the
/// conversation.
pub fn requests_with(mock: &crate::mock_llm::MockLlm, text: &str) -> Vec<String> {
    mock.requests()
        .iter()
        .map(Value::to_string)
        .filter(|r| r.contains(text))
        .collect()
}

/// The rules [`hibernate_and_wake`] needs from the mock.
pub fn wake_rules() -> Vec<crate::mock_llm::Rule> {
    vec![
        crate::mock_llm::Rule::text("say again", "Again, after the wake."),
        crate::mock_llm::Rule::text("say hello", "Hello from the mock model."),
    ]
}

/// Session `name`, running CLI `cli`, answers a first message; its CLI's `idle_stop_after` is
/// then made short (the config edited and reloaded), so it hibernates; `send` (a chat message,
/// or `clibotctl send`) wakes it: the chats are told "waking" once, the CLI is started again
/// resuming its conversation, and the message gets its reply with the earlier exchange in the
/// model's view. The mock needs [`wake_rules`].
pub fn hibernate_and_wake(
    h: &Harness,
    name: &str,
    cli: &str,
    mock: &crate::mock_llm::MockLlm,
    send: impl Fn(&str),
) {
    let within = Duration::from_secs(90);
    let seq = last_seq(h);
    h.ctl_ok(&["send", name, "please say hello"]);
    let first = h.wait_event(name, "the first reply", within, |e| {
        e["seq"].as_u64().is_some_and(|s| s > seq) && e["type"] == "turn_completed"
    });
    assert!(
        first["text"]
            .as_str()
            .is_some_and(|t| t.contains("Hello from the mock model.")),
        "{first}"
    );
    let table = format!("[cli.{cli}]\n");
    let text = std::fs::read_to_string(&h.config).expect("config");
    assert!(text.contains(&table), "no {table} in the config");
    let text = text.replacen(&table, &format!("{table}idle_stop_after = \"3s\"\n"), 1);
    std::fs::write(&h.config, text).expect("config");
    h.ctl_ok(&["reload"]);
    let slept = h.wait_event(name, "hibernated", within, |e| e["type"] == "hibernated");
    assert_eq!(slept["resumes"], true, "{slept}");
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--state", "hibernated", "--json"]))
        .expect("list --json");
    assert!(
        list.as_array()
            .is_some_and(|a| a.iter().any(|s| s["name"] == name)),
        "{list:#}"
    );
    // Not hibernated again right after the wake while the test looks.
    let text = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        text.replacen("idle_stop_after = \"3s\"\n", "", 1),
    )
    .expect("config");
    h.ctl_ok(&["reload"]);

    let mark = last_seq(h);
    send("please say again");
    let done = h.wait_event(name, "the reply after the wake", within, |e| {
        e["seq"].as_u64().is_some_and(|s| s > mark) && e["type"] == "turn_completed"
    });
    assert!(
        done["text"]
            .as_str()
            .is_some_and(|t| t.contains("Again, after the wake.")),
        "{done}\nevents: {:#?}\nscreen:\n{}\ndaemon log:\n{}",
        h.events(),
        String::from_utf8_lossy(&h.ctl(&["screen", name]).stdout),
        h.daemon_log()
    );
    let after: Vec<Value> = h
        .events()
        .into_iter()
        .filter(|e| e["seq"].as_u64().is_some_and(|s| s > mark) && e["session"] == name)
        .collect();
    let waking = after.iter().filter(|e| e["kind"] == "waking").count();
    assert_eq!(waking, 1, "told once: {after:#?}");
    assert!(
        after
            .iter()
            .any(|e| e["type"] == "woken" && e["resumed"] == true),
        "{after:#?}"
    );
    let typed = after
        .iter()
        .filter(|e| e["type"] == "input_sent" && e["submitted"] == true)
        .count();
    assert_eq!(typed, 1, "the message typed once: {after:#?}");
    let asked = requests_with(mock, "please say again");
    assert!(
        asked
            .iter()
            .any(|r| r.contains("please say hello") && r.contains("Hello from the mock model.")),
        "the model saw the conversation from before the hibernation: {asked:#?}"
    );
}

/// A CLI started by hand in a tmux server that is not clibot's (`argv` with `env`, in the
/// harness's work directory), where the person asks `please say hello` and gets `hello_reply`
/// (`idle` tells its idle screen): `discover` finds it once, as the CLI the user started (not a
/// launcher's child), with the version of its package and the conversation it holds; `resume`
/// continues that conversation in the managed session `session`, and the model's request for
/// the next message carries the exchange held at the desk. The mock needs a rule answering
/// `please say again` with `Again.`.
#[allow(clippy::too_many_arguments)]
pub fn discovered_and_resumed(
    h: &Harness,
    mock: &crate::mock_llm::MockLlm,
    cli: &str,
    (argv, env): (&[String], &[(String, String)]),
    unset: &'static [&'static str],
    idle: impl Fn(&str) -> bool,
    hello_reply: &str,
    session: &str,
) {
    let desk = crate::tmux_driver::TmuxDriver {
        socket: h.dir.path().join("desk.sock"),
        target: "desk",
        unset,
    };
    let w = h.work.display().to_string();
    desk.start(&w, env, argv);
    let within = Duration::from_secs(60);
    desk.wait("the idle prompt", within, &idle);
    desk.submit("please say hello");
    desk.wait("the reply", within, |s| s.contains(hello_reply) && idle(s));

    let all: Value = serde_json::from_str(&h.ctl_ok(&["discover", "--json"])).expect("json");
    // Other tests' CLIs run on this machine too: this one is the CLI in this work dir.
    let mine: Vec<Value> = all
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|f| f["cli"] == cli && f["dir"] == w.as_str())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(mine.len(), 1, "once, as the CLI the user started: {all:#}");
    let found = &mine[0];
    assert_eq!(found["where"]["kind"], "tmux", "{found}");
    assert_eq!(
        found["version"],
        crate::tested_version(cli).as_str(),
        "{found}"
    );
    let conversation = found["conversation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no conversation: {found}"))
        .to_string();
    let id = found["id"].as_str().expect("id").to_string();
    let out = h.ctl_ok(&["resume", &id, "--name", session, "--quit"]);
    assert!(out.contains(&conversation), "{out}");
    h.wait_event(session, "the resumed session to be ready", within, |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    h.ctl_ok(&["send", session, "please say again"]);
    let done = h.wait_event(
        session,
        "the reply in the resumed conversation",
        within,
        |e| e["type"] == "turn_completed",
    );
    assert_eq!(done["text"], "Again.", "{done}");
    let asked = requests_with(mock, "please say again");
    assert!(
        asked
            .iter()
            .any(|r| r.contains("please say hello") && r.contains(hello_reply)),
        "the model saw the exchange held at the desk: {asked:#?}"
    );
}

/// Asserts a `turn_usage` event's counts: `[input, output, cache_read, cache_write, calls]`.
pub fn assert_usage(u: &serde_json::Value, want: [u64; 5]) {
    let got = ["input", "output", "cache_read", "cache_write", "calls"].map(|k| u[k].as_u64());
    assert_eq!(
        got,
        want.map(Some),
        "[input, output, cache_read, cache_write, calls]: {u}"
    );
}
