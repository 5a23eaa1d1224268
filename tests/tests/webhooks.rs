//! Webhooks that start jobs, with the real clibotd and clibotctl and bash in tmux, over real
//! HTTP on 127.0.0.1 and a Unix socket: a delivery signed as GitHub signs runs the job with
//! the payload's chosen fields, escaped; a bad signature, a stale signed time, a replay (also
//! after the daemon restarts) and a job that takes no webhooks run nothing; a payload that
//! does not match is ignored; and each refusal is in the audit log.

use std::io::{Read, Write};
use std::time::Duration;

use clibot_tests::{Harness, lines};
use serde_json::Value;

const SECRET: &str = "a-long-enough-webhook-secret-for-tests";

/// GitHub's `X-Hub-Signature-256` of `body` (or of `TIMESTAMP.BODY` with a signed time).
fn sign(secret: &str, ts: Option<&str>, body: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let msg = match ts {
        Some(t) => format!("{t}.{body}"),
        None => body.to_string(),
    };
    let tag = ring::hmac::sign(&key, msg.as_bytes());
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// One HTTP/1.1 request over `stream`; the status and the body.
fn request(
    mut stream: impl Read + Write,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> (u16, String) {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).expect("write");
    let mut out = String::new();
    stream.read_to_string(&mut out).expect("read");
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let text = out.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, text)
}

enum At {
    Tcp(u16),
    Unix(std::path::PathBuf),
}

fn post(
    at: &At,
    job: &str,
    id: &str,
    body: &str,
    signature: String,
    ts: Option<String>,
) -> (u16, String) {
    let mut headers = vec![
        ("X-Hub-Signature-256", signature),
        ("X-GitHub-Delivery", id.to_string()),
        ("X-GitHub-Event", "workflow_run".to_string()),
    ];
    if let Some(t) = ts {
        headers.push(("X-Clibot-Timestamp", t));
    }
    let path = format!("/hooks/{job}");
    match at {
        At::Tcp(port) => {
            let s = std::net::TcpStream::connect(("127.0.0.1", *port)).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(30)))
                .expect("timeout");
            request(s, &path, &headers, body)
        }
        At::Unix(p) => {
            let s = std::os::unix::net::UnixStream::connect(p).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(30)))
                .expect("timeout");
            request(s, &path, &headers, body)
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn started(h: &Harness) -> Vec<Value> {
    h.events()
        .into_iter()
        .filter(|e| e["type"] == "job_started")
        .collect()
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[test]
fn a_signed_delivery_runs_its_job_once_and_a_bad_stale_or_replayed_one_runs_nothing() {
    let port = free_port();
    let mut h = Harness::with_config(&format!(
        r#"
[triggers]
listen = "127.0.0.1:{port}"

[[jobs]]
name = "ci"
session = "s"
prompt = "echo ci-failed"
[jobs.webhook]
secret = "${{HOOK_SECRET}}"
fields = ["workflow_run.name", "workflow_run.html_url"]
match = {{ "workflow_run.conclusion" = "failure" }}
"#
    ));
    h.start_daemon_env(&[], &[("HOOK_SECRET", SECRET)]);
    h.spawn_bash("s");
    let at = At::Tcp(port);
    // A run's payload: a name that tries to break out of its line stays one escaped line.
    let body = r#"{"workflow_run":{"conclusion":"failure","name":"CI\n\"quoted\"","html_url":"https://github.com/o/r/actions/runs/1"},"token":"never-typed"}"#;
    let (status, text) = post(&at, "ci", "d-1", body, sign(SECRET, None, body), None);
    assert_eq!(status, 202, "{text}");
    assert!(text.contains("run 1 started in s"), "{text}");
    let ev = h.wait_event("s", "the webhook's run", Duration::from_secs(30), |e| {
        e["type"] == "job_started"
    });
    assert_eq!(ev["trigger"], "webhook", "{ev}");
    let prompt = ev["prompt"].as_str().unwrap_or_default();
    assert!(
        prompt.starts_with("echo ci-failed\n\nWebhook workflow_run (delivery d-1): {")
            && prompt.contains(r#""workflow_run.name":"CI\n\"quoted\"""#)
            && prompt.contains("https://github.com/o/r/actions/runs/1")
            && !prompt.contains("never-typed"),
        "{prompt}"
    );
    h.wait_screen("s", "the job's command ran", |s| {
        lines(s).contains(&"ci-failed")
    });
    h.wait_event("s", "the run's end", Duration::from_secs(30), |e| {
        e["type"] == "job_finished"
    });

    // Replayed, wrongly signed, signed with another secret, stale, for a job that takes no
    // webhooks: each refused, nothing runs.
    let (status, text) = post(&at, "ci", "d-1", body, sign(SECRET, None, body), None);
    assert_eq!(status, 409, "replay: {text}");
    let tampered = body.replace("failure\"", "failure\",\"x\":1");
    let (status, text) = post(&at, "ci", "d-2", &tampered, sign(SECRET, None, body), None);
    assert_eq!(status, 401, "tampered: {text}");
    let (status, _) = post(
        &at,
        "ci",
        "d-3",
        body,
        sign("another-secret-entirely!", None, body),
        None,
    );
    assert_eq!(status, 401);
    let old = (now_s() - 3600).to_string();
    let (status, text) = post(
        &at,
        "ci",
        "d-4",
        body,
        sign(SECRET, Some(&old), body),
        Some(old),
    );
    assert_eq!(status, 401, "stale: {text}");
    assert!(text.contains("window"), "{text}");
    let (status, text) = post(&at, "nope", "d-5", body, sign(SECRET, None, body), None);
    assert_eq!(
        status, 401,
        "unknown job answered as a bad signature: {text}"
    );
    // A fresh signed time passes; a payload that does not match is answered and ignored.
    let fresh = now_s().to_string();
    let ok = r#"{"workflow_run":{"conclusion":"success"}}"#;
    let (status, text) = post(
        &at,
        "ci",
        "d-6",
        ok,
        sign(SECRET, Some(&fresh), ok),
        Some(fresh),
    );
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("ignored: workflow_run.conclusion is \"success\""),
        "{text}"
    );
    assert_eq!(started(&h).len(), 1, "nothing else ran");

    // The delivery ids outlive the daemon: the first delivery replayed to a new daemon runs
    // nothing either.
    h.kill_daemon();
    h.start_daemon_env(&[], &[("HOOK_SECRET", SECRET)]);
    let (status, text) = post(&at, "ci", "d-1", body, sign(SECRET, None, body), None);
    assert_eq!(status, 409, "replay after a restart: {text}");
    assert_eq!(started(&h).len(), 1, "nothing else ran");

    let audit = std::fs::read_to_string(h.state_dir.join("audit.jsonl")).unwrap_or_default();
    let refused: Vec<&str> = audit
        .lines()
        .filter(|l| l.contains("webhook ci") && l.contains("refused"))
        .collect();
    // (Two refusals alike within a minute are folded into one line: a flood of bad
    // signatures cannot fill the audit log.)
    for why in ["signature does not match", "window", "already taken"] {
        assert!(refused.iter().any(|l| l.contains(why)), "{why}: {audit}");
    }
    // The secret is never shown.
    let shown = h.ctl_ok(&["jobs", "show", "ci", "--json"]);
    assert!(!shown.contains(SECRET), "{shown}");
    let v: Value = serde_json::from_str(&shown).expect("json");
    assert_eq!(v["webhook"]["secret_set"], true, "{v:#}");
}

#[test]
fn a_webhook_job_added_by_clibotctl_takes_its_printed_secret_over_a_unix_socket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("hooks.sock");
    let mut h = Harness::with_config(&format!(
        "[triggers]\nlisten = \"unix:{}\"\nmax_body = 1024\n",
        sock.display()
    ));
    h.start_daemon();
    h.spawn_bash("s");
    let mode = std::fs::metadata(&sock).map(|m| {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & 0o777
    });
    assert_eq!(mode.ok(), Some(0o600), "the socket is this user's only");
    let out = h.ctl_ok(&[
        "jobs",
        "add",
        "deploy",
        "--session",
        "s",
        "--prompt",
        "echo deploy-$((40+2))",
        "--webhook",
        "--webhook-field",
        "ref",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).expect("json");
    let secret = v["webhook_secret"].as_str().unwrap_or_default().to_string();
    assert_eq!(secret.len(), 64, "{v:#}");
    let body = r#"{"ref":"refs/heads/main"}"#;
    let at = At::Unix(sock.clone());
    let (status, text) = post(&at, "deploy", "x-1", body, sign(&secret, None, body), None);
    assert_eq!(status, 202, "{text}");
    h.wait_screen("s", "the job's command ran", |s| {
        lines(s).contains(&"deploy-42")
    });
    // A body over [triggers] max_body is refused before anything reads it.
    let big = format!(r#"{{"ref":"{}"}}"#, "x".repeat(2048));
    let (status, text) = post(&at, "deploy", "x-2", &big, sign(&secret, None, &big), None);
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("max_body"), "{text}");
    // Without a delivery id a signed delivery is refused: a replay could not be told apart.
    let mut no_id = std::os::unix::net::UnixStream::connect(&sock).expect("connect");
    no_id
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let (status, text) = request(
        &mut no_id,
        "/hooks/deploy",
        &[("X-Hub-Signature-256", sign(&secret, None, body))],
        body,
    );
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("delivery id"), "{text}");
    // Bad flags are caught before anything is added.
    let err = h.ctl_err(&[
        "jobs",
        "add",
        "bad",
        "--session",
        "s",
        "--prompt",
        "x",
        "--webhook",
        "--webhook-match",
        "no-equals-sign",
    ]);
    assert!(err.contains("PATH=VALUE"), "{err}");
    let err = h.ctl_err(&[
        "jobs",
        "add",
        "bad",
        "--session",
        "s",
        "--prompt",
        "x",
        "--webhook",
        "--webhook-secret-env",
        "CLIBOT_TEST_UNSET_VAR",
    ]);
    assert!(err.contains("CLIBOT_TEST_UNSET_VAR"), "{err}");
}
