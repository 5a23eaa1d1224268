//! Every step of a turn survives the daemon being killed right after it, with `SIGKILL` (no
//! shutdown code runs) and with `SIGTERM` (what `systemctl restart` sends). The test follows
//! the daemon's event log file and stops the daemon the moment a step's event is written, then
//! starts a new one — at each step of turns with five messages queued behind them, of a prompt
//! and its answer, of a cancel and of a wake. What counts is the CLI's end: each message
//! reaches bash once (each appends one line to a file), and each turn, answer and cancel is
//! reported exactly once. Real clibotd, clibotctl and bash in tmux.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clibot_tests::Harness;
use serde_json::Value;

#[derive(Clone, Copy, Debug)]
enum Sig {
    Kill,
    Term,
}

/// New lines of the daemon's `events.jsonl`, read as they are written.
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl Tail {
    /// From the file's end now: only what is written after.
    fn from_end(h: &Harness) -> Tail {
        let path = h.state_dir.join("events.jsonl");
        let offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        Tail {
            path,
            offset,
            partial: Vec::new(),
        }
    }

    fn skip_to_end(&mut self) {
        self.offset = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        self.partial.clear();
    }

    fn next(&mut self) -> Vec<Value> {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            // Compacted: start again from its beginning.
            self.offset = 0;
            self.partial.clear();
        }
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut buf = Vec::new();
        let _ = f.read_to_end(&mut buf);
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let mut out = Vec::new();
        while let Some(i) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=i).collect();
            if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                out.push(v);
            }
        }
        out
    }
}

fn stop(h: &mut Harness, sig: Sig) {
    match sig {
        Sig::Kill => h.kill_daemon(),
        Sig::Term => {
            h.terminate_daemon();
        }
    }
}

/// A step's name: the event's type, and for a state change where it went.
fn step(e: &Value) -> String {
    match e["type"].as_str().unwrap_or("") {
        "state_changed" => format!("state_changed:{}", e["to"].as_str().unwrap_or("")),
        t => t.to_string(),
    }
}

/// A bash session, idle.
fn spawn_bash(h: &Harness, name: &str) {
    h.spawn_bash(name);
    h.wait_list("idle", |l| l[0]["state"] == "idle");
}

fn file_lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The events of session `name` of `kind`, from the log as the daemon serves it.
fn count(h: &Harness, name: &str, kind: &str) -> usize {
    h.events()
        .iter()
        .filter(|e| e["session"] == name && e["type"] == kind)
        .count()
}

/// Follows the log from `tail` and stops and restarts the daemon at the steps of session `name`
/// in `schedule`: at the first event of any step not yet stopped at in this round, until each
/// was, then again for the next round (the events the stopped daemon wrote after the one
/// stopped at are passed over); until `done`. Returns the steps it stopped at.
fn kill_at_each_step(
    h: &mut Harness,
    mut tail: Tail,
    sig: Sig,
    name: &str,
    schedule: &[&str],
    rounds: usize,
    done: impl Fn(&Harness) -> bool,
) -> Vec<String> {
    let mut steps = Vec::new();
    let mut round: Vec<&str> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    'outer: loop {
        assert!(
            Instant::now() < deadline,
            "not done after stopping the daemon at {steps:?}\nscreen:\n{}\nevents:\n{:#?}\nlog:\n{}",
            String::from_utf8_lossy(&h.ctl(&["screen", name]).stdout),
            h.events(),
            h.daemon_log()
        );
        // Asked before the log is read: an event written while `done` looks is still seen.
        let finished = done(h);
        for e in tail.next() {
            let st = step(&e);
            let Some(at) = schedule
                .iter()
                .find(|s| **s == st && !round.contains(s))
                .filter(|_| e["session"] == name && steps.len() < schedule.len() * rounds)
            else {
                continue;
            };
            stop(h, sig);
            round.push(at);
            if round.len() == schedule.len() {
                round.clear();
            }
            steps.push(st);
            // What the stopped daemon wrote after the step is not a step of the next one.
            tail.skip_to_end();
            h.start_daemon();
            continue 'outer;
        }
        if finished {
            return steps;
        }
        std::thread::sleep(Duration::from_millis(3));
    }
}

fn turns_with_queued_messages(sig: Sig) {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "k");
    let got = h.work.join("got");
    let msg = |i: u32| format!("sleep 0.5; echo m{i} >> {}", got.display());
    h.ctl_ok(&["send", "k", &msg(1)]);
    h.wait_list("working", |l| l[0]["state"] == "working");
    let tail = Tail::from_end(&h);
    for i in 2..=6 {
        h.ctl_ok(&["send", "k", &msg(i)]);
    }
    let queued = h.ctl_ok(&["queue", "k"]);
    assert!(
        queued.contains("echo m6"),
        "queued behind the turn: {queued}"
    );
    let steps = kill_at_each_step(
        &mut h,
        tail,
        sig,
        "k",
        &[
            "input_sent",
            "state_changed:working",
            "turn_completed",
            "state_changed:idle",
        ],
        3,
        |_| file_lines(&got).len() >= 6,
    );
    for s in [
        "input_sent",
        "state_changed:working",
        "turn_completed",
        "state_changed:idle",
    ] {
        assert!(
            steps.iter().any(|x| x == s),
            "stopped at {s} once at least: {steps:?}"
        );
    }
    h.wait_list("idle with nothing queued", |l| l[0]["state"] == "idle");
    let queue = h.ctl_ok(&["queue", "k"]);
    assert!(!queue.contains("echo m"), "nothing left queued: {queue}");
    // Settled: nothing more is typed or reported.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        file_lines(&got),
        ["m1", "m2", "m3", "m4", "m5", "m6"],
        "each message typed once, in order (stopped at {steps:?})"
    );
    assert_eq!(
        count(&h, "k", "turn_completed"),
        6,
        "each turn reported once (stopped at {steps:?}): {:#?}",
        h.events()
    );
}

#[test]
fn turns_with_queued_messages_survive_sigkill_at_every_step() {
    turns_with_queued_messages(Sig::Kill);
}

#[test]
fn turns_with_queued_messages_survive_sigterm_at_every_step() {
    turns_with_queued_messages(Sig::Term);
}

/// A prompt keeps its id and clock across a restart (an old button still answers it), and an
/// answer recorded just before the daemon stopped is not given twice.
fn prompt_and_answer(sig: Sig) {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "p");
    let got = h.work.join("got");
    let mut tail = Tail::from_end(&h);
    h.ctl_ok(&[
        "send",
        "p",
        &format!(
            "read -p 'Deploy now? [y/N] ' a; echo ans=$a >> {}",
            got.display()
        ),
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let prompt = loop {
        assert!(Instant::now() < deadline, "no prompt: {}", h.daemon_log());
        if let Some(e) = tail
            .next()
            .into_iter()
            .find(|e| e["session"] == "p" && e["type"] == "waiting")
        {
            stop(&mut h, sig);
            break e["prompt"].clone();
        }
        std::thread::sleep(Duration::from_millis(3));
    };
    h.start_daemon();
    let pending: Value =
        serde_json::from_str(&h.ctl_ok(&["pending", "--json"])).expect("pending --json");
    let listed = pending
        .as_array()
        .and_then(|a| a.iter().find(|p| p["session"] == "p"))
        .cloned()
        .unwrap_or(Value::Null);
    let id = prompt["id"].as_str().expect("a prompt id");
    assert_eq!(
        listed["prompt_id"].as_str(),
        Some(id),
        "the same prompt after the restart: {pending:#}"
    );
    assert_eq!(
        listed["waiting_since_ms"], prompt["since_ms"],
        "its clock kept: {pending:#} {prompt:#}"
    );
    // Answered by its old id; the daemon is stopped the moment the answer is recorded.
    let steps = {
        let tail = Tail::from_end(&h);
        let answer = h.ctl_command(&["answer", "p", "y", "--prompt", id]).spawn();
        let steps = kill_at_each_step(
            &mut h,
            tail,
            sig,
            "p",
            &["prompt_resolved"],
            1,
            // The keys go first, then the answer's event: both are waited for.
            |h| !file_lines(&got).is_empty() && count(h, "p", "prompt_resolved") > 0,
        );
        let _ = answer.map(|mut c| c.wait());
        steps
    };
    assert_eq!(
        steps,
        ["prompt_resolved"],
        "stopped at the answer: {:#?}",
        h.events()
    );
    h.wait_list("idle", |l| l[0]["state"] == "idle");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(file_lines(&got), ["ans=y"], "answered once");
    assert_eq!(count(&h, "p", "prompt_resolved"), 1, "{:#?}", h.events());
    assert_eq!(count(&h, "p", "turn_completed"), 1, "{:#?}", h.events());
}

#[test]
fn a_prompt_and_its_answer_survive_sigkill() {
    prompt_and_answer(Sig::Kill);
}

#[test]
fn a_prompt_and_its_answer_survive_sigterm() {
    prompt_and_answer(Sig::Term);
}

/// A cancel recorded just before the daemon stopped stays a cancel: the next daemon does not
/// report the interrupted turn as completed, and types what comes next.
fn cancel(sig: Sig) {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "c");
    let got = h.work.join("got");
    h.ctl_ok(&[
        "send",
        "c",
        &format!("sleep 30; echo late >> {}", got.display()),
    ]);
    h.wait_list("working", |l| l[0]["state"] == "working");
    let queued = format!("echo next >> {}", got.display());
    h.ctl_ok(&["send", "c", &queued]);
    let tail = Tail::from_end(&h);
    let canceller = h.ctl_command(&["cancel", "c"]).spawn();
    let steps = kill_at_each_step(
        &mut h,
        tail,
        sig,
        "c",
        &["turn_cancelled", "input_sent"],
        1,
        |_| !file_lines(&got).is_empty(),
    );
    let _ = canceller.map(|mut c| c.wait());
    assert!(
        steps.first().is_some_and(|s| s == "turn_cancelled"),
        "{steps:?}"
    );
    h.wait_list("idle", |l| l[0]["state"] == "idle");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(file_lines(&got), ["next"], "the queued message typed once");
    let events = h.events();
    let cancelled = events
        .iter()
        .filter(|e| e["session"] == "c" && e["type"] == "turn_cancelled")
        .count();
    assert_eq!(cancelled, 1, "{events:#?}");
    // The cancelled turn is not also completed; the queued message's turn is.
    assert_eq!(count(&h, "c", "turn_completed"), 1, "{events:#?}");
}

#[test]
fn a_cancel_survives_sigkill() {
    cancel(Sig::Kill);
}

#[test]
fn a_cancel_survives_sigterm() {
    cancel(Sig::Term);
}

/// A wake stopped half way is finished by the next daemon: the CLI runs once and the message
/// that woke it is typed once.
fn wake(sig: Sig) {
    let mut h = Harness::with_daemon_keys("idle_stop_after = \"2s\"");
    h.start_daemon();
    spawn_bash(&h, "w");
    h.wait_list("hibernated", |l| l[0]["state"] == "hibernated");
    let got = h.work.join("got");
    let tail = Tail::from_end(&h);
    h.ctl_ok(&["send", "w", &format!("echo woke >> {}", got.display())]);
    let steps = kill_at_each_step(
        &mut h,
        tail,
        sig,
        "w",
        &["notice", "spawned", "woken", "input_sent"],
        1,
        |_| !file_lines(&got).is_empty(),
    );
    assert!(
        steps.first().is_some_and(|s| s == "notice"),
        "stopped while waking: {steps:?}"
    );
    h.wait_list("idle", |l| l[0]["state"] == "idle");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        file_lines(&got),
        ["woke"],
        "typed once (stopped at {steps:?})"
    );
    let panes = h.tmux(&["list-panes", "-a", "-F", "#{pane_dead} #{session_name}"]);
    let panes = String::from_utf8_lossy(&panes.stdout).into_owned();
    let live = panes.lines().filter(|l| *l == "0 w").count();
    assert_eq!(live, 1, "one CLI runs (stopped at {steps:?}): {panes}");
}

#[test]
fn a_wake_survives_sigkill() {
    wake(Sig::Kill);
}

#[test]
fn a_wake_survives_sigterm() {
    wake(Sig::Term);
}
