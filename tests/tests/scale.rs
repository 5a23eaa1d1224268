//! Five hundred sessions on one daemon (cheap shells): a prompt in the newest one is still
//! seen and answered, input reaches a session in the middle, a session whose shell exits among
//! them is found exited, one whose CLI stops after a short idle time is reaped (only that one),
//! and after a `kill -9` of the daemon every session is adopted again and
//! still followed. Speed at this scale is measured by `clibot-bench --sessions`, not here; this
//! checks that nothing breaks.

use std::time::Duration;

use clibot_proto::v1;
use clibot_tests::Harness;

const SESSIONS: usize = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_in_the_last_of_five_hundred_sessions_is_seen_and_answered() {
    // One CLI whose sessions are stopped after three idle seconds (the others: the default 12 h).
    let mut h = Harness::with_config(
        r#"
[cli.sleepy]
argv = ["bash", "--norc", "--noprofile"]
env = { PS1 = "$ ", HISTFILE = "/dev/null" }
stop_text = "exit"
quiet_ms = 300
idle_stop_after = "3s"
"#,
    );
    let config = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        config.replacen(
            "[daemon]\n",
            &format!("[daemon]\nmax_sessions = {}\n", SESSIONS + 5),
            1,
        ),
    )
    .expect("config");
    h.start_daemon();
    let work = h.work.display().to_string();
    let mut c = h.client().await;
    for i in 0..SESSIONS {
        c.spawn_session(v1::SpawnSessionRequest {
            name: format!("s{i}"),
            cli: "bash".into(),
            dir: work.clone(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("spawn s{i}: {e}"));
    }
    // The reaped one is the newest of all, SESSIONS + 1.
    c.spawn_session(v1::SpawnSessionRequest {
        name: "sleepy".into(),
        cli: "sleepy".into(),
        dir: work.clone(),
        ..Default::default()
    })
    .await
    .expect("spawn sleepy");
    let last = format!("s{}", SESSIONS - 1);
    let all_idle = |l: &serde_json::Value| {
        l.as_array().is_some_and(|a| {
            a.len() == SESSIONS + 1
                && a.iter()
                    .filter(|s| s["name"] != "sleepy")
                    .all(|s| s["state"] == "idle")
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let l: serde_json::Value =
            serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
        if all_idle(&l) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not all {SESSIONS} sessions became idle: {:?}",
            l.as_array().map(|a| a
                .iter()
                .filter(|s| s["state"] != "idle" && s["name"] != "sleepy")
                .map(|s| s["name"].clone())
                .collect::<Vec<_>>())
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The newest session asks; the question is seen and answered.
    h.ctl_ok(&[
        "send",
        &last,
        "read -p 'Deploy the last one? [y/N] ' a; echo got=$a",
    ]);
    let w = h.wait_event(&last, "the prompt", Duration::from_secs(20), |e| {
        e["type"] == "waiting" && e["session"] == last.as_str()
    });
    assert!(
        w["text"]
            .as_str()
            .is_some_and(|t| t.contains("Deploy the last one?")),
        "{w:#}"
    );
    h.ctl_ok(&["answer", &last, "y"]);
    h.wait_screen(&last, "the answer", |s| s.contains("got=y"));

    // Input to one in the middle, and one whose shell exits is found exited.
    h.ctl_ok(&["send", "s120", "echo middle-$((40+2))"]);
    h.wait_screen("s120", "the middle one's output", |s| {
        s.contains("middle-42")
    });
    h.ctl_ok(&["send", "s7", "exit 3"]);
    let l = h.wait_list("s7 exited", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == "s7" && s["state"] == "exited")
        })
    });
    let exited: Vec<_> = l
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| s["state"] == "exited" && s["name"] != "sleepy")
                .map(|s| s["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(exited, vec![serde_json::json!("s7")], "only s7 exited");

    // The idle one is reaped (hibernated); the other 499 (idle for as long, under the
    // default) are not.
    let l = h.wait_list("sleepy stopped as idle", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == "sleepy" && s["state"] == "hibernated")
        })
    });
    let reaped: Vec<_> = l
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| s["state"] == "exited" || s["state"] == "hibernated")
                .map(|s| (s["name"].clone(), s["exit_reason"].clone()))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        reaped.contains(&(
            serde_json::json!("sleepy"),
            serde_json::json!("idle for 3s")
        )),
        "{reaped:?}"
    );
    assert_eq!(
        reaped.len(),
        2,
        "only s7 exited and sleepy hibernated: {reaped:?}"
    );
    let s7 = h.ctl_ok(&["show", "s7", "--json"]);
    assert!(
        s7.contains("\"exit_status\": 3") || s7.contains("\"exit_status\":3"),
        "{s7}"
    );

    // The daemon killed -9 and started again: all of them are back, and one in the middle
    // is still followed (its question is seen and answered).
    h.kill_daemon();
    h.start_daemon();
    let l = h.wait_list("every session but s7 and sleepy re-adopted and idle", |l| {
        l.as_array().is_some_and(|a| {
            a.len() == SESSIONS + 1
                && a.iter().all(|s| {
                    s["state"]
                        == if s["name"] == "s7" {
                            "exited"
                        } else if s["name"] == "sleepy" {
                            "hibernated"
                        } else {
                            "idle"
                        }
                })
        })
    });
    assert_eq!(l.as_array().map(Vec::len), Some(SESSIONS + 1));
    h.ctl_ok(&[
        "send",
        "s250",
        "read -p 'Still there? [y/N] ' a; echo got=$a",
    ]);
    h.wait_event(
        "s250",
        "the prompt after the restart",
        Duration::from_secs(20),
        |e| e["type"] == "waiting" && e["session"] == "s250",
    );
    h.ctl_ok(&["answer", "s250", "y"]);
    h.wait_screen("s250", "the answer after the restart", |s| {
        s.contains("got=y")
    });
}
