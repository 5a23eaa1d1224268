use super::*;

const T0: i64 = 1_795_000_000_000;
const MIN: i64 = 60_000;

fn every(name: &str, every: &str) -> JobSpec {
    JobSpec {
        name: name.into(),
        session: "s".into(),
        prompt: "go on".into(),
        every: every.into(),
        tz: "UTC".into(),
        ..Default::default()
    }
}

fn table(dir: &Path, now_ms: i64) -> Jobs {
    let (jobs, warning) = Jobs::open(dir, now_ms);
    assert_eq!(warning, None);
    jobs
}

/// Due once on time; a restart right after finds it moved on (never run twice); a daemon
/// down across five due times tells one miss of five, and runs once with `run_once`.
#[test]
fn a_due_run_is_taken_once_and_a_long_absence_is_one_miss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jobs = table(dir.path(), T0);
    jobs.add(every("j", "30m"), "local", Origin::Added, T0, false)
        .expect("added");
    assert_eq!(jobs.next_wake(), Some(T0 + 30 * MIN));
    assert_eq!(jobs.take_due(T0 + 29 * MIN), []);
    let due = jobs.take_due(T0 + 30 * MIN + 500);
    assert_eq!(due.len(), 1);
    assert_eq!(
        (due[0].run, due[0].trigger, due[0].missed),
        (true, Trigger::Schedule, 0)
    );
    // The daemon is killed now, and started again: the run is not due again.
    drop(jobs);
    let jobs = table(dir.path(), T0 + 31 * MIN);
    assert_eq!(jobs.take_due(T0 + 31 * MIN), []);
    assert_eq!(jobs.next_wake(), Some(T0 + 60 * MIN));
    // Down from 0:59 to 3:10: due at 1:00, 1:30, ... 3:00 — five times, one miss.
    drop(jobs);
    let jobs = table(dir.path(), T0 + 190 * MIN);
    let due = jobs.take_due(T0 + 190 * MIN);
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(
        (due[0].run, due[0].trigger, due[0].missed),
        (false, Trigger::Late, 5)
    );
    assert_eq!(
        jobs.next_wake(),
        Some(T0 + 210 * MIN),
        "the rhythm goes on, no catch-up"
    );
    assert_eq!(jobs.get("j").map(|j| j.missed), Some(5));

    let mut late = every("k", "30m");
    late.missed = Missed::RunOnce;
    jobs.add(late, "local", Origin::Added, T0, false)
        .expect("added");
    let due = jobs.take_due(T0 + 300 * MIN);
    let k = due.iter().find(|d| d.name == "k").expect("k due");
    assert_eq!((k.run, k.trigger, k.missed), (true, Trigger::Late, 10));
    assert!(jobs.take_due(T0 + 301 * MIN).is_empty());
}

/// Down for a moment across a due time: missed, however little late the daemon is back.
#[test]
fn a_due_time_while_no_daemon_ran_is_missed_however_short_the_gap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jobs = table(dir.path(), T0);
    jobs.add(every("j", "30m"), "local", Origin::Added, T0, false)
        .expect("added");
    drop(jobs);
    let jobs = table(dir.path(), T0 + 30 * MIN + 5_000);
    let due = jobs.take_due(T0 + 30 * MIN + 5_000);
    assert_eq!(
        (due[0].run, due[0].trigger, due[0].missed),
        (false, Trigger::Late, 1)
    );
}

#[test]
fn overlap_daily_limits_and_failures_pause() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jobs = table(dir.path(), T0);
    let mut spec = every("j", "1h");
    spec.max_runs_per_day = 2;
    jobs.add(spec, "local", Origin::Added, T0, false)
        .expect("added");
    let r1 = jobs.begin("j", Trigger::Schedule, T0).expect("first run");
    assert_eq!(r1.run, 1);
    assert_eq!(
        jobs.begin("j", Trigger::Schedule, T0 + MIN).map(|s| s.run),
        Err(NoRun::StillRunning("j".into(), 1))
    );
    let ended = jobs.finish("j", 1, Outcome::Failed, "exit 2", T0 + 2 * MIN);
    assert_eq!(ended.map(|e| e.paused_now), Some(false));
    // A stale end (another run's) changes nothing.
    assert_eq!(jobs.finish("j", 1, Outcome::Done, "", T0 + 3 * MIN), None);
    jobs.begin("j", Trigger::Schedule, T0 + 4 * MIN)
        .expect("second run");
    jobs.finish("j", 2, Outcome::Failed, "exit 2", T0 + 5 * MIN);
    assert_eq!(
        jobs.begin("j", Trigger::Schedule, T0 + 6 * MIN)
            .map(|s| s.run),
        Err(NoRun::DailyLimit("j".into(), 2))
    );
    // A person may still run it by hand; its third failure in a row pauses it.
    jobs.begin("j", Trigger::Manual, T0 + 7 * MIN)
        .expect("by hand");
    let ended = jobs.finish("j", 3, Outcome::Failed, "exit 2", T0 + 8 * MIN);
    assert_eq!(
        ended.map(|e| (e.paused_now, e.failures_in_row)),
        Some((true, 3))
    );
    let j = jobs.get("j").expect("job");
    assert!(j.paused && j.paused_why.contains("3 failed runs"), "{j:?}");
    assert_eq!(jobs.next_wake(), None, "a paused job is not due");
    let j = jobs
        .set_paused("j", false, "", T0 + 9 * MIN)
        .expect("resumed");
    assert_eq!((j.paused, j.failures_in_row), (false, 0));
}

#[test]
fn config_jobs_follow_the_config_and_keep_their_rhythm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jobs = table(dir.path(), T0);
    assert!(
        jobs.sync_config(&[every("a", "1h"), every("b", "1h")], T0)
            .is_empty()
    );
    jobs.take_due(T0 + 60 * MIN);
    // Reloaded unchanged: the next time stays.
    assert!(
        jobs.sync_config(&[every("a", "1h")], T0 + 61 * MIN)
            .is_empty()
    );
    assert_eq!(jobs.get("a").map(|j| j.next_due_ms), Some(T0 + 120 * MIN));
    assert_eq!(jobs.get("b"), None, "gone from the config, gone");
    // A job added by hand is never replaced by the config's.
    jobs.add(every("c", "2h"), "telegram:1", Origin::Added, T0, false)
        .expect("added");
    let problems = jobs.sync_config(&[every("a", "1h"), every("c", "1h")], T0);
    assert!(problems[0].contains("added by telegram:1"), "{problems:?}");
    assert_eq!(
        jobs.add(every("a", "3h"), "local", Origin::Added, T0, true)
            .map(|_| ()),
        Err("name: job \"a\" is defined in the config; change it there".into())
    );
}

#[test]
fn an_unreadable_file_is_set_aside_and_said() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("jobs.json"), "{ not json").expect("write");
    let (jobs, warning) = Jobs::open(dir.path(), T0);
    assert!(warning.is_some_and(|w| w.contains("cannot be read")));
    assert!(jobs.list().is_empty());
}
