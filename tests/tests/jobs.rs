//! Jobs with the real clibotd, clibotctl and bash in tmux: a job types into a session and its
//! run ends with the turn; a daemon down across a due time misses it once or runs it once, as
//! configured, and never twice; a gate skips a run or adds what it found; a run whose last one
//! still runs is skipped; every mistake in a job is refused naming its field.

use std::time::Duration;

use clibot_tests::{Harness, lines};
use serde_json::Value;

fn wait_event(h: &Harness, name: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    h.wait_event(name, what, Duration::from_secs(30), pred)
}

fn job(h: &Harness, name: &str) -> Value {
    let v: Value =
        serde_json::from_str(&h.ctl_ok(&["jobs", "show", name, "--json"])).expect("json");
    v
}

/// A local time `secs` from now, as `at` takes it, in UTC.
fn at_in(secs: u64) -> String {
    let t = std::time::SystemTime::now() + Duration::from_secs(secs);
    let s = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let [y, m, d, hh, mm, ss] = clibot_proto::utc((s * 1000) as i64);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}")
}

#[test]
fn a_job_types_into_a_shell_and_its_run_ends_with_the_turn() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("s");
    let added = h.ctl_ok(&[
        "jobs",
        "add",
        "answer",
        "--session",
        "s",
        "--prompt",
        "echo job-$((6*7))",
        "--after",
        "1s",
    ]);
    assert!(added.contains("job answer added"), "{added}");
    let started = wait_event(&h, "s", "the job's run", |e| e["type"] == "job_started");
    assert_eq!(
        (
            started["job"].as_str(),
            started["run"].as_u64(),
            started["trigger"].as_str()
        ),
        (Some("answer"), Some(1), Some("schedule"))
    );
    h.wait_screen("s", "the job's command ran", |s| {
        lines(s).contains(&"job-42")
    });
    let done = wait_event(&h, "s", "the run's end", |e| e["type"] == "job_finished");
    assert_eq!(done["outcome"], "done", "{done}");
    let j = job(&h, "answer");
    assert_eq!(j["runs"], 1, "{j:#}");
    assert_eq!(j["last"]["outcome"], "done", "{j:#}");
    assert!(
        j["running"].is_null() && j["next_due_ms"].is_null(),
        "a one-off is done: {j:#}"
    );
    // A person runs it again by hand; the audit log says it was a job.
    let out = h.ctl_ok(&["jobs", "run", "answer", "--json"]);
    let run: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        (run["run"].as_u64(), run["session"].as_str()),
        (Some(2), Some("s"))
    );
    wait_event(&h, "s", "the second run's end", |e| {
        e["type"] == "job_finished" && e["run"] == 2
    });
    let audit = std::fs::read_to_string(h.state_dir.join("audit.jsonl")).unwrap_or_default();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"job run\"") && l.contains("job:answer")),
        "{audit}"
    );
    let metrics = h.ctl_ok(&["metrics"]);
    assert!(
        metrics.contains("clibot_jobs_runs_total{job=\"answer\",outcome=\"done\"} 2"),
        "{metrics}"
    );
}

#[test]
fn a_daemon_down_across_the_due_time_tells_one_miss_or_runs_once() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("s");
    let at = at_in(5);
    for (name, missed, text) in [
        ("skips", "skip", "echo ran-skip"),
        ("catches", "run_once", "echo ran-$((2+3))"),
    ] {
        h.ctl_ok(&[
            "jobs",
            "add",
            name,
            "--session",
            "s",
            "--prompt",
            text,
            "--at",
            &at,
            "--tz",
            "UTC",
            "--missed",
            missed,
        ]);
    }
    h.kill_daemon();
    // Down across the due time: the wall clock must pass it.
    std::thread::sleep(Duration::from_secs(7));
    h.start_daemon();
    let missed = wait_event(&h, "s", "the skipped job's miss", |e| {
        e["type"] == "job_missed" && e["job"] == "skips"
    });
    assert_eq!(
        (missed["count"].as_u64(), missed["ran"].as_bool()),
        (Some(1), Some(false))
    );
    let caught = wait_event(&h, "s", "the other job's miss", |e| {
        e["type"] == "job_missed" && e["job"] == "catches"
    });
    assert_eq!(caught["ran"], true);
    wait_event(&h, "s", "its one run's end", |e| {
        e["type"] == "job_finished" && e["job"] == "catches"
    });
    h.wait_screen("s", "the late run", |s| lines(s).contains(&"ran-5"));
    // Restarted again: nothing runs twice.
    h.kill_daemon();
    h.start_daemon();
    h.ctl_ok(&["send", "s", "echo marker-$((1+1))"]);
    h.wait_screen("s", "a later marker", |s| lines(s).contains(&"marker-2"));
    let started: Vec<Value> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "job_started")
        .collect();
    assert_eq!(started.len(), 1, "{started:#?}");
    assert_eq!(started[0]["trigger"], "late");
    let screen = h.ctl_ok(&["screen", "s", "--lines", "200"]);
    assert!(!lines(&screen).contains(&"ran-skip"), "{screen}");
    assert_eq!(job(&h, "skips")["missed"], 1);
}

#[test]
fn a_gate_skips_a_run_or_adds_what_it_found() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("s");
    h.ctl_ok(&[
        "jobs",
        "add",
        "gated",
        "--session",
        "s",
        "--prompt",
        "echo gate-said:",
        "--every",
        "1h",
        "--gate",
        "sh",
        "--gate",
        "-c",
        "--gate",
        "test -f go || exit 1; cat go",
    ]);
    // The person who ran it is told the gate skipped it, not that it started.
    let said = h.ctl_ok(&["jobs", "run", "gated"]);
    assert!(said.contains("run 1 skipped by its gate"), "{said}");
    let skipped = wait_event(&h, "s", "the gate's no", |e| e["type"] == "job_finished");
    assert_eq!(skipped["outcome"], "gate_skipped", "{skipped}");
    std::fs::write(h.work.join("go"), "found-$((4*4))\n").expect("write");
    h.ctl_ok(&["jobs", "run", "gated"]);
    let started = wait_event(&h, "s", "the gated run", |e| e["type"] == "job_started");
    assert!(
        started["prompt"]
            .as_str()
            .is_some_and(|p| p.contains("found-$((4*4))")),
        "{started}"
    );
    wait_event(&h, "s", "its end", |e| {
        e["type"] == "job_finished" && e["run"] == 2
    });
    // A gate that fails fails the run, and says why.
    h.ctl_ok(&[
        "jobs",
        "add",
        "broken",
        "--session",
        "s",
        "--prompt",
        "echo no",
        "--every",
        "1h",
        "--gate",
        "sh",
        "--gate",
        "-c",
        "--gate",
        "echo no token >&2; exit 4",
    ]);
    h.ctl(&["jobs", "run", "broken"]);
    let failed = wait_event(&h, "s", "the failed gate", |e| {
        e["type"] == "job_finished" && e["job"] == "broken"
    });
    assert_eq!(failed["outcome"], "failed");
    assert!(
        failed["detail"]
            .as_str()
            .is_some_and(|d| d.contains("status 4: no token")),
        "{failed}"
    );
}

#[test]
fn a_run_whose_last_run_still_runs_is_skipped() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("s");
    h.ctl_ok(&[
        "jobs",
        "add",
        "slow",
        "--session",
        "s",
        "--prompt",
        "sleep 3; echo slow-done",
        "--every",
        "1h",
    ]);
    h.ctl_ok(&["jobs", "run", "slow"]);
    let out = h.ctl(&["jobs", "run", "slow"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("still runs (run 1)"), "{err}");
    let skipped = wait_event(&h, "s", "the skip", |e| e["type"] == "job_skipped");
    assert!(
        skipped["reason"]
            .as_str()
            .is_some_and(|r| r.contains("overlap")),
        "{skipped}"
    );
    wait_event(&h, "s", "the first run's end", |e| {
        e["type"] == "job_finished"
    });
    assert_eq!(job(&h, "slow")["skipped"], 1);
}

#[test]
fn mistakes_in_a_job_are_refused_naming_the_field() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("s");
    let add = |extra: &[&str]| -> String {
        let mut args = vec!["jobs", "add", "j", "--prompt", "hi"];
        args.extend_from_slice(extra);
        let out = h.ctl(&args);
        assert!(!out.status.success(), "{extra:?} was taken");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    for (extra, says) in [
        (&["--session", "s", "--cron", "0 9 * *"][..], "cron: "),
        (
            &["--session", "s", "--cron", "0 9 * * *", "--tz", "Mars/Base"][..],
            "tz: ",
        ),
        (
            &["--session", "s", "--at", "2020-01-01T09:00"][..],
            "at: 2020-01-01T09:00 is in the past",
        ),
        (
            &["--session", "nope", "--every", "1h"][..],
            "session: no session named \"nope\"",
        ),
        (
            &[
                "--session",
                "s",
                "--every",
                "1h",
                "--gate",
                "/nonexistent/gate",
            ][..],
            "gate: ",
        ),
        (&["--session", "s", "--every", "5s"][..], "every: "),
        (&["--session", "s"][..], "say when"),
    ] {
        let err = add(extra);
        assert!(err.contains(says), "{extra:?}: {err}");
    }
    assert!(h.ctl_ok(&["jobs", "list"]).contains("no jobs"));
}

/// `when_idle`: a session's turn that ends with nothing queued starts the job in another
/// session; a job's own turn starts no `when_idle` job, its own or another's (no loop, no
/// chain).
#[test]
fn an_idle_session_starts_its_jobs_and_a_job_never_loops_on_its_own_turn() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("s");
    h.spawn_bash("t");
    h.ctl_ok(&[
        "jobs",
        "add",
        "follow",
        "--session",
        "t",
        "--prompt",
        "echo followed-$((2*5))",
        "--when-idle",
        "s",
    ]);
    h.ctl_ok(&[
        "jobs",
        "add",
        "self",
        "--session",
        "s",
        "--prompt",
        "echo self-ran",
        "--when-idle",
        "s",
    ]);
    h.ctl_ok(&["send", "s", "echo person-$((1+1))"]);
    h.wait_screen("t", "the follow-up in t", |s| {
        lines(s).contains(&"followed-10")
    });
    wait_event(&h, "s", "the self job's end", |e| {
        e["type"] == "job_finished" && e["job"] == "self"
    });
    // A marker after the self job's turn: by then a loop would have started it again.
    h.ctl_ok(&["send", "t", "echo marker-$((3+3))"]);
    h.wait_screen("t", "the marker", |s| lines(s).contains(&"marker-6"));
    let runs = |job: &str| {
        h.events()
            .iter()
            .filter(|e| e["type"] == "job_started" && e["job"] == job)
            .count()
    };
    assert_eq!(runs("self"), 1, "{:#?}", h.events());
    assert_eq!(runs("follow"), 1, "only the person's turn in s started it");
    assert_eq!(job(&h, "follow")["last"]["trigger"], "idle");
}

/// `[[jobs]]` in the config: there at start, changed and removed by a reload; one added by
/// hand is kept whatever the config says, and the config's cannot be removed by hand.
#[test]
fn config_jobs_follow_the_file() {
    let mut h = Harness::with_config(
        r#"
[[jobs]]
name = "daily"
session = "s"
prompt = "echo daily"
cron = "0 9 * * *"
tz = "Europe/Berlin"
"#,
    );
    h.start_daemon();
    let j = job(&h, "daily");
    assert_eq!(
        (j["origin"].as_str(), j["tz"].as_str()),
        (Some("config"), Some("Europe/Berlin"))
    );
    assert!(j["next_due_ms"].as_i64().is_some_and(|t| t > 0), "{j:#}");
    let out = h.ctl(&["jobs", "remove", "daily"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("defined in the config"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&h.config).expect("config");
    let text = text.replace("cron = \"0 9 * * *\"", "every = \"2h\"");
    std::fs::write(
        &h.config,
        text.replace("name = \"daily\"", "name = \"often\""),
    )
    .expect("write");
    h.ctl_ok(&["reload"]);
    let list: Value = serde_json::from_str(&h.ctl_ok(&["jobs", "list", "--json"])).expect("json");
    let names: Vec<&str> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|j| j["name"].as_str())
        .collect();
    assert_eq!(names, ["often"], "{list:#}");
    // A mistake in the file is said by the reload, and the rest stands.
    let text = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(&h.config, text.replace("every = \"2h\"", "every = \"2x\"")).expect("write");
    let out = h.ctl(&["reload"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[[jobs]] \"often\": every: "), "{err}");
}

/// A goal keeps a generic CLI going until a file appears: the check runs at once and after each
/// turn; each failed check is a round the session is told of; the passing check ends it. A goal
/// also stops when it is turned off.
#[test]
fn a_goal_keeps_a_session_working_until_its_check_passes() {
    let mut h = Harness::with_config(
        r#"
[cli.worker]
argv = ["bash", "--norc", "--noprofile", "-c", "n=0; printf 'ready> '; while IFS= read -r line; do n=$((n+1)); echo \"worked round $n\"; if [ $n -ge 2 ]; then touch done.txt; fi; printf 'ready> '; done"]
submit_delay_ms = 50
quiet_ms = 300
"#,
    );
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "w", "--cli", "worker", "--dir", &work]);
    h.wait_screen("w", "the worker's prompt", |s| s.contains("ready>"));
    let out = h.ctl_ok(&[
        "goal",
        "w",
        "--until",
        "test -f done.txt",
        "--max-turns",
        "5",
    ]);
    assert!(
        out.contains("w works until `test -f done.txt` succeeds"),
        "{out}"
    );
    let ended = wait_event(&h, "w", "the goal's end", |e| e["type"] == "goal_ended");
    assert_eq!(
        (ended["reason"].as_str(), ended["rounds"].as_u64()),
        (Some("reached"), Some(2)),
        "{ended}"
    );
    assert!(h.work.join("done.txt").exists());
    let rounds: Vec<Value> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "goal_round")
        .collect();
    assert_eq!(rounds.len(), 2, "{rounds:#?}");
    assert_eq!(rounds[0]["exit_code"], 1);
    let typed: Vec<Value> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "input_sent")
        .collect();
    assert!(
        typed[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("`test -f done.txt` exited with status 1")),
        "{typed:#?}"
    );
    let shown = h.ctl_ok(&["goal", "w"]);
    assert!(shown.contains("w has no goal"), "{shown}");

    // Off: a goal that can never pass ends when turned off, and nothing more is typed.
    std::fs::remove_file(h.work.join("done.txt")).expect("rm");
    h.ctl_ok(&["goal", "w", "--until", "test -f never.txt"]);
    wait_event(&h, "w", "its first round", |e| {
        e["type"] == "goal_round" && e["until"] == "test -f never.txt"
    });
    h.ctl_ok(&["goal", "w", "--off"]);
    let off = wait_event(&h, "w", "the goal off", |e| {
        e["type"] == "goal_ended" && e["until"] == "test -f never.txt"
    });
    assert_eq!(off["reason"], "off");
}

#[test]
fn an_every_job_types_into_a_shell_on_its_own_rhythm() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("s");
    let added = h.ctl_ok(&[
        "jobs",
        "add",
        "tick",
        "--session",
        "s",
        "--prompt",
        "echo tick-$((7*6))",
        "--every",
        "1m",
        "--json",
    ]);
    let added: Value = serde_json::from_str(&added).expect("json");
    let first_due = added["next_due_ms"].as_i64().unwrap_or_default();
    // A minute from when it was added, by the clock, not by a person.
    let started = h.wait_event("s", "the first tick", Duration::from_secs(120), |e| {
        e["type"] == "job_started"
    });
    assert_eq!(started["trigger"], "schedule", "{started}");
    let at = started["time_ms"].as_i64().unwrap_or_default();
    assert!(
        at >= first_due && at - first_due < 5_000,
        "started at {at}, due at {first_due}"
    );
    h.wait_screen("s", "the tick ran", |s| lines(s).contains(&"tick-42"));
    wait_event(&h, "s", "the tick's end", |e| e["type"] == "job_finished");
    let j = job(&h, "tick");
    assert_eq!(
        j["next_due_ms"].as_i64(),
        Some(first_due + 60_000),
        "the next tick keeps the rhythm: {j:#}"
    );
}
