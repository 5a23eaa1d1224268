//! Metrics with the real daemon: what `clibotctl metrics` and `GET /metrics` report matches
//! what the test made the daemon do (two bash sessions, turns, one prompt answered).

use std::time::Duration;

use clibot_tests::{Harness, lines};
use prometheus_parse::{Sample, Scrape, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A harness whose config has these keys in its `[daemon]` section.
fn harness(daemon_keys: &str) -> Harness {
    Harness::with_daemon_keys(daemon_keys)
}

fn turns_of(h: &Harness, name: &str) -> usize {
    h.events()
        .iter()
        .filter(|e| e["type"] == "turn_completed" && e["session"] == name)
        .count()
}

/// Sends `text` to `name` and waits for the turn it starts to complete.
fn turn(h: &Harness, name: &str, text: &str) {
    let before = turns_of(h, name);
    h.ctl_ok(&["send", name, text]);
    h.wait_event(name, "the turn's end", Duration::from_secs(20), |_| {
        turns_of(h, name) > before
    });
}

fn parse(text: &str) -> Scrape {
    // Every line is a comment or a sample `name{labels} value`: nothing the parser would skip.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap_or("");
        assert!(
            value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value),
            "not a sample line: {line:?}\n{text}"
        );
    }
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("the metrics parse")
}

fn matches(s: &Sample, metric: &str, labels: &[(&str, &str)]) -> bool {
    s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
}

/// The sum of the samples of `metric` with these labels (a histogram counts its observations).
fn sum(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| matches(s, metric, labels))
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(buckets) => buckets
                .iter()
                .find(|b| b.less_than.is_infinite())
                .map_or(0.0, |b| b.count),
            Value::Summary(_) => 0.0,
        })
        .sum()
}

/// What this test did, as the metrics must show it.
fn check(text: &str) {
    let m = parse(text);
    let bash = [("cli", "bash")];
    assert_eq!(sum(&m, "clibot_sessions", &bash), 2.0, "{text}");
    assert_eq!(
        sum(&m, "clibot_sessions", &[("cli", "bash"), ("state", "idle")]),
        2.0,
        "{text}"
    );
    // Two plain turns and the one the answered prompt was part of.
    assert!(sum(&m, "clibot_turns_total", &bash) >= 3.0, "{text}");
    assert!(
        sum(&m, "clibot_turn_duration_seconds", &bash) >= 3.0,
        "{text}"
    );
    assert_eq!(
        sum(&m, "clibot_prompts_total", &[("kind", "confirm")]),
        1.0,
        "{text}"
    );
    assert_eq!(
        sum(&m, "clibot_prompts_answered_total", &[("by", "local")]),
        1.0,
        "{text}"
    );
    assert_eq!(sum(&m, "clibot_prompt_wait_seconds", &[]), 1.0, "{text}");
    assert!(sum(&m, "clibot_events_written_total", &[]) > 0.0, "{text}");
    assert_eq!(
        sum(
            &m,
            "clibot_rpc_duration_seconds",
            &[("method", "SpawnSession")]
        ),
        2.0,
        "{text}"
    );
    assert_eq!(
        sum(
            &m,
            "clibot_rpc_duration_seconds",
            &[("method", "AnswerPrompt")]
        ),
        1.0,
        "{text}"
    );
    assert!(
        sum(&m, "clibot_process_resident_memory_bytes", &[]) > 0.0,
        "{text}"
    );
}

/// The families (`# TYPE` lines) of an exposition.
fn families(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("# TYPE ")).collect()
}

/// The address the daemon logged for its metrics endpoint.
fn logged_listen(h: &Harness) -> String {
    let log = h.daemon_log();
    log.lines()
        .find(|l| l.contains("serving the metrics on /metrics"))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("listen=")))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no metrics address in the log:\n{log}"))
}

/// One HTTP/1.1 request; the response's status line, headers and body.
async fn http(addr: &str, request: &str) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the metrics endpoint");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut raw))
        .await
        .expect("the response in time")
        .expect("read");
    let raw = String::from_utf8(raw).expect("UTF-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a header and a body");
    (head.to_string(), body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_sessions_turns_prompts_and_calls() {
    let mut h = harness("metrics_listen = \"127.0.0.1:0\"");
    h.start_daemon();
    h.spawn_bash("a");
    h.spawn_bash("b");
    turn(&h, "a", "echo one");
    turn(&h, "b", "echo two");

    // One prompt, answered with clibotctl.
    let before = turns_of(&h, "a");
    h.ctl_ok(&["send", "a", "read -p 'Go? [y/N] ' g; echo go=$g"]);
    h.wait_event("a", "the prompt", Duration::from_secs(20), |e| {
        e["type"] == "waiting" && e["session"] == "a"
    });
    h.ctl_ok(&["answer", "a", "y"]);
    h.wait_screen("a", "the answer", |s| lines(s).contains(&"go=y"));
    h.wait_event(
        "a",
        "the answered turn's end",
        Duration::from_secs(20),
        |_| turns_of(&h, "a") > before,
    );
    h.wait_list("both idle", |l| {
        l.as_array()
            .is_some_and(|a| a.len() == 2 && a.iter().all(|s| s["state"] == "idle"))
    });

    let text = h.ctl_ok(&["metrics"]);
    check(&text);

    // The same over HTTP, on the port the daemon picked.
    let addr = logged_listen(&h);
    let (head, body) = http(
        &addr,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    check(&body);
    assert_eq!(families(&body), families(&text));

    let (head, _) = http(
        &addr,
        "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");

    // The endpoint stops with the daemon.
    assert!(h.terminate_daemon().success());
    assert!(tokio::net::TcpStream::connect(&addr).await.is_err());
}
