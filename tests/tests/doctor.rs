//! `clibotctl doctor` and `clibotctl audit` against the real daemon and tmux.

use clibot_proto::v1;
use clibot_tests::Harness;
use serde_json::Value;

/// Runs `doctor --json`: its exit code and checks by name.
fn doctor(h: &Harness) -> (Option<i32>, Value) {
    let out = h.ctl(&["doctor", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed no JSON ({e}):\n{}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

fn status_of<'a>(v: &'a Value, name: &str) -> &'a str {
    v["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .and_then(|c| c["status"].as_str())
        .unwrap_or_else(|| panic!("no check {name:?} in {v:#}"))
}

fn find<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name:?} in {v:#}"))
}

#[test]
fn doctor_on_a_healthy_setup_passes() {
    let mut h = Harness::new();
    h.start_daemon();
    let (code, v) = doctor(&h);
    for name in ["tmux", "daemon", "socket", "state dir", "cli bash", "hooks"] {
        assert_eq!(status_of(&v, name), "ok", "{name}: {v:#}");
    }
    // Nothing set up for chat or systemd here: reported, but not failures.
    assert_eq!(status_of(&v, "gateway"), "warn", "{v:#}");
    assert_ne!(status_of(&v, "systemd"), "fail", "{v:#}");
    assert!(
        v["checks"]
            .as_array()
            .is_some_and(|cs| cs.iter().all(|c| c["status"] != "fail")),
        "{v:#}"
    );
    assert_eq!(v["ok"], true, "{v:#}");
    assert_eq!(code, Some(0), "{v:#}");
    assert!(
        find(&v, "cli bash")["detail"]
            .as_str()
            .is_some_and(|d| d.contains("bash") && d.contains("version")),
        "{v:#}"
    );

    // The text form says the same, one line per check.
    let text = h.ctl_ok(&["doctor"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("ok") && l.contains("hooks")),
        "{text}"
    );
    assert!(text.contains("0 failed"), "{text}");
}

#[test]
fn doctor_fails_on_a_missing_cli_program() {
    let mut h = Harness::with_config("\n[cli.ghost]\nargv = [\"definitely-not-installed-xyz\"]\n");
    h.start_daemon();
    let (code, v) = doctor(&h);
    let ghost = find(&v, "cli ghost");
    assert_eq!(ghost["status"], "fail", "{v:#}");
    assert!(
        ghost["detail"]
            .as_str()
            .is_some_and(|d| d.contains("definitely-not-installed-xyz")),
        "{v:#}"
    );
    assert!(
        ghost["fix"]
            .as_str()
            .is_some_and(|f| f.contains("[cli.ghost]")),
        "{v:#}"
    );
    assert_eq!(status_of(&v, "cli bash"), "ok", "{v:#}");
    assert_eq!(v["ok"], false);
    assert_eq!(code, Some(1));

    let out = h.ctl(&["doctor"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL") && l.contains("definitely-not-installed-xyz")),
        "{text}"
    );
}

#[test]
fn doctor_fails_on_a_socket_open_to_others() {
    use std::os::unix::fs::PermissionsExt;
    let mut h = Harness::new();
    h.start_daemon();
    std::fs::set_permissions(&h.socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let (code, v) = doctor(&h);
    let sock = find(&v, "socket");
    assert_eq!(sock["status"], "fail", "{v:#}");
    assert!(
        sock["detail"].as_str().is_some_and(|d| d.contains("0666")),
        "{v:#}"
    );
    assert!(
        sock["fix"]
            .as_str()
            .is_some_and(|f| f.contains("chmod 600") && f.contains(&h.socket.display().to_string())),
        "{v:#}"
    );
    assert_eq!(code, Some(1), "{v:#}");
}

#[test]
fn doctor_without_a_daemon_says_how_to_start_it() {
    let h = Harness::new();
    let (code, v) = doctor(&h);
    let d = find(&v, "daemon");
    assert_eq!(d["status"], "fail", "{v:#}");
    assert!(
        d["fix"].as_str().is_some_and(|f| f.contains("clibotd")),
        "{v:#}"
    );
    assert_eq!(code, Some(1));
    // It did not start one.
    assert!(!h.socket.exists());
}

#[test]
fn doctor_reports_unknown_gateway_keys() {
    let mut h = Harness::with_config("\n[gateway.telegram]\ntoken = \"t\"\ntokn = \"x\"\n");
    h.start_daemon();
    let (code, v) = doctor(&h);
    let g = find(&v, "gateway config");
    assert_eq!(g["status"], "fail", "{v:#}");
    assert!(
        g["detail"]
            .as_str()
            .is_some_and(|d| d.contains("gateway.telegram.tokn") && !d.contains(".token")),
        "{v:#}"
    );
    assert_eq!(code, Some(1));
}

fn lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_lists_and_filters_the_log() {
    let mut h = Harness::new();
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "aud", "--cli", "bash", "--dir", &work]);
    h.ctl_ok(&["spawn", "other", "--cli", "bash", "--dir", &work]);
    h.ctl_ok(&["send", "aud", "echo hi"]);
    // A chat user nobody paired: refused, and audited as such.
    let mut c = h.client().await;
    let mut req = tonic::Request::new(v1::SendInputRequest {
        session: "aud".into(),
        text: "echo from-chat".into(),
        submit: true,
        ..Default::default()
    });
    req.metadata_mut()
        .insert("clibot-platform", "telegram".parse().expect("ascii"));
    req.metadata_mut()
        .insert("clibot-user", "777".parse().expect("ascii"));
    req.metadata_mut()
        .insert("clibot-chat", "c1".parse().expect("ascii"));
    let err = c.send_input(req).await.expect_err("unpaired user refused");
    assert_eq!(err.code(), tonic::Code::PermissionDenied);

    let recs = lines(&h.ctl_ok(&["audit", "--session", "aud", "--json"]));
    let summary: Vec<(String, String, String)> = recs
        .iter()
        .map(|r| {
            (
                r["actor"].as_str().unwrap_or("").to_string(),
                r["action"].as_str().unwrap_or("").to_string(),
                r["outcome"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("local".into(), "spawn".into(), "accepted".into()),
            ("local".into(), "send".into(), "accepted".into()),
            ("777".into(), "send".into(), "refused".into()),
        ],
        "{recs:#?}"
    );
    assert!(recs.iter().all(|r| r["session"] == "aud"), "{recs:#?}");

    let by_user = lines(&h.ctl_ok(&["audit", "--user", "777", "--json"]));
    assert_eq!(by_user.len(), 1, "{by_user:#?}");
    assert_eq!(by_user[0]["platform"], "telegram");
    assert_eq!(by_user[0]["chat"], "c1");
    assert_eq!(
        lines(&h.ctl_ok(&["audit", "--user", "telegram:777", "--json"])).len(),
        1
    );

    // The text form, the last-N and since filters, and an explicit state directory.
    let text = h.ctl_ok(&["audit", "--session", "aud"]);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.lines()
            .last()
            .is_some_and(|l| l.contains("telegram:777 in c1") && l.contains("refused")),
        "{text}"
    );
    let last = lines(&h.ctl_ok(&["audit", "-n", "1", "--json"]));
    assert_eq!(last.len(), 1);
    assert_eq!(last[0]["actor"], "777");
    assert!(
        h.ctl_ok(&["audit", "--since", "1", "--json"])
            .lines()
            .count()
            >= 4
    );
    let future = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
        + 3_600_000)
        .to_string();
    assert_eq!(h.ctl_ok(&["audit", "--since", &future]), "");
    let state = h.state_dir.display().to_string();
    h.kill_daemon();
    let offline = lines(&h.ctl_ok(&["audit", "--state-dir", &state, "--session", "aud", "--json"]));
    assert_eq!(offline, recs);
}

#[test]
fn audit_reads_rotated_files_oldest_first() {
    let h = Harness::new();
    std::fs::create_dir_all(&h.state_dir).expect("mkdir");
    let rec = |t: i64, extra: &str| {
        format!(
            "{{\"time_ms\":{t},\"actor\":\"5\",\"platform\":\"discord\",\"session\":\"s\",\"action\":\"send\",\"outcome\":\"refused\",\"detail\":\"not paired\"{extra}}}\n"
        )
    };
    std::fs::write(h.state_dir.join("audit.jsonl.2"), rec(1_000, "")).expect("write");
    std::fs::write(
        h.state_dir.join("audit.jsonl.1"),
        rec(70_000, ",\"repeated\":4,\"since_ms\":2000"),
    )
    .expect("write");
    std::fs::write(h.state_dir.join("audit.jsonl"), rec(80_000, "")).expect("write");
    let state = h.state_dir.display().to_string();
    let times: Vec<i64> = lines(&h.ctl_ok(&["audit", "--state-dir", &state, "--json"]))
        .iter()
        .filter_map(|r| r["time_ms"].as_i64())
        .collect();
    assert_eq!(times, [1_000, 70_000, 80_000]);
    let text = h.ctl_ok(&["audit", "--state-dir", &state]);
    let folded = text.lines().nth(1).unwrap_or("");
    assert!(
        folded.contains("×4 since 1970-01-01 00:00:02") && folded.contains("discord:5"),
        "{text}"
    );
}

/// doctor reads the config file on disk, not only what the running daemon started with: a
/// root that is not a directory (a typo) and a `[cli.X]` whose program is missing, both added
/// after the daemon started, are failures.
#[test]
fn doctor_checks_the_config_on_disk_not_the_running_daemons() {
    let mut h = Harness::new();
    h.start_daemon();
    let text = std::fs::read_to_string(&h.config).expect("config");
    let work = h.work.display().to_string();
    let text = text.replacen(
        &format!("allowed_roots = [\"{work}\"]"),
        "allowed_roots = [\"/no/such/root-typo\"]",
        1,
    ) + "\n[cli.ghost]\nargv = [\"no-such-program-for-doctor\"]\n";
    std::fs::write(&h.config, text).expect("config");
    let (code, v) = doctor(&h);
    assert_eq!(code, Some(1), "{v:#}");
    assert_eq!(status_of(&v, "allowed roots"), "fail", "{v:#}");
    assert!(
        find(&v, "allowed roots")["detail"]
            .as_str()
            .is_some_and(|d| d.contains("/no/such/root-typo")),
        "{v:#}"
    );
    assert_eq!(status_of(&v, "cli ghost"), "fail", "{v:#}");
}

/// A plain-HTTP server on 127.0.0.1 that answers every connection with a 404.
fn plain_http() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            use std::io::{Read, Write};
            let mut s = s;
            // As an HTTP server does: the request first (here, a TLS hello), then an answer.
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
        }
    });
    port
}

/// doctor tells, from the config file alone, a platform API that cannot be reached: a port
/// where nothing listens (refused), a name that does not resolve (DNS), https to a server that
/// speaks no TLS; one that answers is ok.
#[test]
fn doctor_says_why_a_platform_api_cannot_be_reached() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let plain = plain_http();
    let mut h = Harness::with_config(&format!(
        "\n[gateway.telegram]\ntoken = \"t\"\napi_url = \"http://127.0.0.1:{closed}\"\n\
         [gateway.discord]\ntoken = \"d\"\napi_url = \"http://no-such-host.invalid\"\n\
         [gateway.feishu]\napp_id = \"a\"\napp_secret = \"s\"\napi_url = \"https://127.0.0.1:{plain}\"\n"
    ));
    h.start_daemon();
    let (code, v) = doctor(&h);
    assert_eq!(code, Some(1), "{v:#}");
    let detail = |n: &str| find(&v, n)["detail"].as_str().unwrap_or("").to_string();
    assert_eq!(status_of(&v, "gateway telegram api"), "fail", "{v:#}");
    assert!(detail("gateway telegram api").contains("refused"), "{v:#}");
    assert_eq!(status_of(&v, "gateway discord api"), "fail", "{v:#}");
    assert!(detail("gateway discord api").contains("DNS"), "{v:#}");
    assert_eq!(status_of(&v, "gateway feishu api"), "fail", "{v:#}");
    assert!(detail("gateway feishu api").contains("TLS"), "{v:#}");

    let plain = plain_http();
    let mut h = Harness::with_config(&format!(
        "\n[gateway.telegram]\ntoken = \"t\"\napi_url = \"http://127.0.0.1:{plain}\"\n"
    ));
    h.start_daemon();
    let (_, v) = doctor(&h);
    assert_eq!(status_of(&v, "gateway telegram api"), "ok", "{v:#}");
}

/// A file the daemon would refuse at its next start fails doctor — daemon running or not —
/// naming the key; a misspelled section is a warning that names what was meant.
#[test]
fn doctor_fails_on_a_config_the_daemon_would_refuse_running_or_not() {
    let fails = |v: &Value| -> Vec<String> {
        v["checks"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .filter(|c| c["status"] == "fail" || c["status"] == "warn")
                    .map(|c| c["detail"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut h = Harness::new();
    h.start_daemon();
    let good = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        format!(
            "{good}\n[acess.telegram]\nadmins = [\"1\"]\n[access.discord]\npairing_ttl = \"0\"\n"
        ),
    )
    .expect("config");
    for running in [true, false] {
        if !running {
            h.terminate_daemon();
        }
        let (code, v) = doctor(&h);
        assert_eq!(code, Some(1), "running: {running}: {v:#}");
        let said = fails(&v).join("\n");
        assert!(said.contains("pairing_ttl"), "running: {running}: {said}");
        assert!(
            said.contains("[acess]") && said.contains("did you mean [access]"),
            "{said}"
        );
    }
}

/// `reload` of a file whose access section was misspelled keeps the admins, says why, and
/// names the section that was probably meant.
#[test]
fn reload_refuses_to_drop_every_admin_of_a_platform_unsaid() {
    let mut h = Harness::with_config("\n[access.telegram]\nadmins = [\"100\"]\n");
    h.start_daemon();
    let good = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        good.replace("[access.telegram]", "[acess.telegram]"),
    )
    .expect("config");
    let e = h.ctl_err(&["reload"]);
    assert!(e.contains("drop every admin of telegram"), "{e}");
    assert!(e.contains("did you mean [access]"), "{e}");
    // Meant: an explicit empty list is taken.
    std::fs::write(&h.config, good.replace("admins = [\"100\"]", "admins = []")).expect("config");
    h.ctl_ok(&["reload"]);
}

/// A token Telegram refuses is not "still connecting": doctor fails on it whatever the
/// gateway is doing at that instant (waiting to retry, or trying again), saying to replace it.
#[test]
fn doctor_fails_on_a_refused_bot_token_while_the_gateway_retries() {
    use clibot_tests::fake_telegram::{FakeTelegram, TEST_TOKEN};
    let mut h = Harness::new();
    h.start_daemon();
    let tg = FakeTelegram::start(TEST_TOKEN);
    let mut g = h.gateway(
        &["--telegram", "--telegram-api-url", &tg.url()],
        &[(
            "TELEGRAM_TOKEN",
            "987654321:AAWrongTokenForClibotTestsOnly_0123456",
        )],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = Vec::new();
    // Across the retries (1 s, 2 s, 4 s…) each look says the token, never "wait".
    // Four looks after the first one that is not the true "still connecting" of a gateway
    // whose first try has not ended (a loaded machine may make that take a while).
    let connecting =
        |c: &Value| c["status"] == "warn" && c.to_string().contains("still connecting");
    while std::time::Instant::now() < deadline
        && seen.iter().skip_while(|c| connecting(c)).count() < 4
    {
        let (_, v) = doctor(&h);
        if let Some(c) = v["checks"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == "gateway telegram"))
        {
            seen.push(c.clone());
        }
        std::thread::sleep(std::time::Duration::from_millis(700));
    }
    let _ = g.kill();
    let _ = g.wait();
    // Before its first try has failed the gateway is truly still connecting; from then on,
    // every look says the token.
    let first = seen
        .iter()
        .position(|c| !connecting(c))
        .unwrap_or(seen.len());
    let seen = &seen[first..];
    assert!(seen.len() >= 3, "the gateway reported: {seen:#?}");
    for c in seen {
        assert_eq!(c["status"], "fail", "{c:#}");
        let text = c.to_string();
        assert!(
            text.contains("token") && !text.contains("wait a few seconds"),
            "{c:#}"
        );
    }
}

/// `status` names the config file in use, when it was read, and says when the file on disk
/// changed since (the daemon runs on what it read); `reload` reads it again.
#[test]
fn status_says_when_the_config_changed_on_disk_since_it_was_read() {
    let mut h = Harness::new();
    h.start_daemon();
    let out = h.ctl_ok(&["status"]);
    let line = out
        .lines()
        .find(|l| l.starts_with("config:"))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.contains(&h.config.display().to_string()) && line.contains("read "),
        "{out}"
    );
    assert!(!line.contains("changed on disk"), "{out}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let text = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(&h.config, text + "\n# edited\n").expect("config");
    let out = h.ctl_ok(&["status"]);
    assert!(out.contains("changed on disk since"), "{out}");
    h.ctl_ok(&["reload"]);
    let out = h.ctl_ok(&["status"]);
    assert!(!out.contains("changed on disk since"), "{out}");
}

/// The RPC table's "who" column: what only the machine's user may call is refused to a chat
/// user — an admin too — with the row's words, before its handler runs; the refusals of the
/// rows that say so are audited. The machine's user is let through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_only_the_machines_user_may_call_is_refused_to_a_chat_admin_and_audited() {
    let mut h = Harness::with_config("\n[access.telegram]\nadmins = [\"777\"]\n");
    h.start_daemon();
    let mut c = h.client().await;
    fn from_chat<T>(msg: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(msg);
        let md = req.metadata_mut();
        md.insert("clibot-platform", "telegram".parse().expect("ascii"));
        md.insert("clibot-user", "777".parse().expect("ascii"));
        md.insert("clibot-chat", "c1".parse().expect("ascii"));
        req
    }
    let refused = |r: Result<(), tonic::Status>, words: &str| {
        let e = r.expect_err("refused to a chat user");
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
        assert_eq!(e.message(), words);
    };
    refused(
        c.reload(from_chat(v1::ReloadRequest::default()))
            .await
            .map(drop),
        "only the machine's user may reload the config",
    );
    refused(
        c.set_default_chat(from_chat(v1::SetDefaultChatRequest {
            platform: "telegram".into(),
            chat: "c1".into(),
        }))
        .await
        .map(drop),
        "only the machine's user (the gateway) names the default chat",
    );
    refused(
        c.get_metrics(from_chat(v1::GetMetricsRequest::default()))
            .await
            .map(drop),
        "the metrics are for the local user only",
    );
    refused(
        c.automation_report(from_chat(v1::AutomationReportRequest::default()))
            .await
            .map(drop),
        "the automation report is for the local user only",
    );
    refused(
        c.check_jail(from_chat(v1::CheckJailRequest::default()))
            .await
            .map(drop),
        "the jail check is for the local user only (clibotctl doctor)",
    );
    refused(
        c.test_patterns(from_chat(v1::TestPatternsRequest::default()))
            .await
            .map(drop),
        "patterns are tested on the machine: clibotctl patterns test FILE",
    );
    // The machine's user is let through.
    c.get_metrics(v1::GetMetricsRequest::default())
        .await
        .expect("the machine's user reads the metrics");
    h.ctl_ok(&["reload"]);

    let recs = lines(&h.ctl_ok(&["audit", "--user", "telegram:777", "--json"]));
    let summary: Vec<(String, String)> = recs
        .iter()
        .map(|r| {
            (
                r["action"].as_str().unwrap_or("").to_string(),
                r["outcome"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("reload".to_string(), "refused".to_string()),
            ("default_chat".into(), "refused".into()),
        ],
        "{recs:#?}"
    );
}
