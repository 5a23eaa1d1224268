//! Core tests against an in-memory multiplexer: the logic without tmux.

use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;

use super::*;
use crate::config::Config;
use crate::keys::Key;
use crate::locking::lock;
use crate::tmux::{MuxError, MuxSession, NewSession, SessionMeta, WatchEvent};

#[derive(Default)]
struct FakeState {
    sessions: Vec<MuxSession>,
    next: u32,
    log: Vec<String>,
    /// C-c ends the session's process.
    quit_on_ctrl_c: bool,
    /// send_text sleeps this long for sessions whose name starts with "slow".
    slow_ms: u64,
    /// What capture returns, when set.
    screen: Option<String>,
    watchers: Vec<tokio::sync::mpsc::Sender<WatchEvent>>,
    /// Each session's environment (as given with `-e`), by tmux id.
    env: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
    /// The server's global environment.
    global_env: std::collections::BTreeMap<String, String>,
}

#[derive(Default)]
struct FakeMux(Mutex<FakeState>);

impl FakeMux {
    fn st(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.0.lock().expect("fake lock")
    }
    fn log(&self) -> Vec<String> {
        self.st().log.clone()
    }
    fn name_of(&self, target: &str) -> String {
        self.st()
            .sessions
            .iter()
            .find(|s| s.id == target)
            .map(|s| s.name.clone())
            .unwrap_or_default()
    }
}

#[async_trait]
impl Mux for FakeMux {
    async fn ensure_server(&self, _: u32) -> Result<(), MuxError> {
        Ok(())
    }
    async fn version(&self) -> Result<String, MuxError> {
        Ok("tmux fake".into())
    }
    async fn new_session(&self, spec: &NewSession<'_>) -> Result<MuxSession, MuxError> {
        let mut st = self.st();
        st.next += 1;
        let s = MuxSession {
            id: format!("${}", st.next),
            name: spec.name.to_string(),
            pane: String::new(),
            pid: 1000 + st.next,
            dead: false,
            dead_status: None,
            path: spec.dir.display().to_string(),
            meta: spec.meta.clone(),
        };
        st.log
            .push(format!("new {} {}", spec.name, spec.argv.join(" ")));
        let env = spec.env.iter().cloned().collect();
        st.env.insert(s.id.clone(), env);
        st.sessions.push(s.clone());
        Ok(s)
    }
    async fn list_sessions(&self) -> Result<Vec<MuxSession>, MuxError> {
        Ok(self.st().sessions.clone())
    }
    async fn set_private_env(&self, target: &str, key: &str, value: &str) -> Result<(), MuxError> {
        self.st()
            .env
            .entry(target.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
        Ok(())
    }
    async fn set_meta(&self, target: &str, meta: Option<&SessionMeta>) -> Result<(), MuxError> {
        let mut st = self.st();
        let s = st
            .sessions
            .iter_mut()
            .find(|s| s.id == target)
            .ok_or(MuxError::NoSuchTarget(target.into()))?;
        s.meta = meta.cloned().unwrap_or_default();
        Ok(())
    }
    async fn send_text(&self, target: &str, text: &str) -> Result<(), MuxError> {
        let name = self.name_of(target);
        let slow = self.st().slow_ms;
        if name.starts_with("slow") && slow > 0 {
            tokio::time::sleep(Duration::from_millis(slow)).await;
        }
        self.st().log.push(format!("text {name} {text}"));
        Ok(())
    }
    async fn paste(&self, target: &str, _buffer: &str, text: &str) -> Result<(), MuxError> {
        let name = self.name_of(target);
        self.st().log.push(format!("paste {name} {text}"));
        Ok(())
    }
    async fn type_hidden(&self, target: &str, _buffer: &str, text: &str) -> Result<(), MuxError> {
        let name = self.name_of(target);
        self.st().log.push(format!("hidden {name} {text}"));
        Ok(())
    }
    async fn send_keys(&self, target: &str, keys: &[Key]) -> Result<(), MuxError> {
        let name = self.name_of(target);
        let mut st = self.st();
        let quit = st.quit_on_ctrl_c && keys.iter().any(|k| k.to_string() == "C-c");
        st.log.push(format!(
            "keys {name} {}",
            keys.iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ));
        if quit && let Some(s) = st.sessions.iter_mut().find(|s| s.id == target) {
            s.dead = true;
            s.dead_status = Some(130);
        }
        Ok(())
    }
    async fn capture(
        &self,
        _target: &str,
        _start: Option<i64>,
        _escapes: bool,
    ) -> Result<String, MuxError> {
        Ok(self
            .st()
            .screen
            .clone()
            .unwrap_or_else(|| "a\nb   \nc\n\n\n".into()))
    }
    async fn foreground(&self, _target: &str) -> Result<String, MuxError> {
        Ok("bash".into())
    }
    async fn cursor(&self, _target: &str) -> Result<(i64, i64), MuxError> {
        Ok((0, 0))
    }
    async fn environment(
        &self,
        target: Option<&str>,
    ) -> Result<std::collections::BTreeMap<String, String>, MuxError> {
        let st = self.st();
        Ok(match target {
            Some(t) => st.env.get(t).cloned().unwrap_or_default(),
            None => st.global_env.clone(),
        })
    }
    async fn watch(
        &self,
        _target: &str,
    ) -> Result<tokio::sync::mpsc::Receiver<WatchEvent>, MuxError> {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        self.st().watchers.push(tx);
        Ok(rx)
    }
    async fn kill_session(&self, target: &str) -> Result<(), MuxError> {
        let mut st = self.st();
        let before = st.sessions.len();
        st.sessions.retain(|s| s.id != target);
        if st.sessions.len() == before {
            return Err(MuxError::NoSuchTarget(target.into()));
        }
        Ok(())
    }
    fn attach_command(&self, target: &str) -> Vec<String> {
        vec!["tmux".into(), "attach".into(), "-t".into(), target.into()]
    }
    fn server_args(&self) -> Vec<String> {
        vec!["-L".into(), "fake".into()]
    }
}

struct Env {
    dir: tempfile::TempDir,
    mux: Arc<FakeMux>,
}

impl Env {
    fn new() -> Env {
        let env = Env {
            dir: tempfile::tempdir().expect("tempdir"),
            mux: Arc::new(FakeMux::default()),
        };
        // The configured CLIs' programs, as stand-ins on the PATH the fake tmux server gives.
        let bin = env.dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        for p in ["claude", "codex", "gemini", "opencode"] {
            let f = bin.join(p);
            std::fs::write(&f, "#!/bin/sh\n").expect("write");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        env.mux.st().global_env.insert("PATH".into(), path);
        env
    }
    fn work(&self) -> PathBuf {
        let w = self.dir.path().join("work");
        std::fs::create_dir_all(&w).expect("mkdir");
        w.canonicalize().expect("canonical")
    }
    fn settings(&self) -> Settings {
        let mut config = Config::default();
        config.daemon.allowed_roots = vec![self.work()];
        config.daemon.stop_timeout_ms = 300;
        Settings {
            config,
            config_file: None,
            state_dir: self.dir.path().join("state"),
            data_dir: self.dir.path().join("data"),
            socket: self.dir.path().join("d.sock"),
        }
    }
    async fn daemon(&self) -> Daemon {
        Daemon::start(self.settings(), self.mux.clone())
            .await
            .expect("daemon starts")
    }
    fn spawn_req(&self, name: &str) -> SpawnRequest {
        SpawnRequest {
            name: name.into(),
            cli: "shell".into(),
            dir: self.work().display().to_string(),
            ..Default::default()
        }
    }
}

async fn wait_for(pred: impl Fn() -> bool) {
    for _ in 0..200 {
        if pred() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached in 2 s");
}

fn kinds(d: &Daemon, session: &str) -> Vec<String> {
    d.events()
        .read_after(0, 10_000)
        .events
        .into_iter()
        .filter(|e| e.session == session)
        .map(|e| {
            serde_json::to_value(&e.kind)
                .ok()
                .and_then(|v| v["type"].as_str().map(String::from))
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn tmux_versions() {
    assert!(old_tmux_warning("tmux 3.1c").is_some());
    assert!(old_tmux_warning("tmux 2.9").is_some());
    assert!(old_tmux_warning("tmux 3.2").is_none());
    assert!(old_tmux_warning("tmux 3.3a").is_none());
    assert!(old_tmux_warning("tmux next-3.6").is_none());
    assert!(old_tmux_warning("tmux 10.0").is_none());
}

#[tokio::test]
async fn spawn_rejects_bad_input_and_keeps_others_untouched() {
    let env = Env::new();
    let d = env.daemon().await;
    d.spawn(env.spawn_req("ok")).await.expect("spawn ok");

    let e = d
        .spawn(env.spawn_req("bad name"))
        .await
        .expect_err("bad name");
    assert!(matches!(e, CoreError::InvalidName(_)), "{e}");
    let e = d
        .spawn(SpawnRequest {
            cli: "nope".into(),
            ..env.spawn_req("x")
        })
        .await
        .expect_err("unknown cli");
    assert!(
        matches!(e, CoreError::UnknownCli { .. }) && e.to_string().contains("shell"),
        "{e}"
    );
    let missing = env.work().join("missing");
    let e = d
        .spawn(SpawnRequest {
            dir: missing.display().to_string(),
            ..env.spawn_req("x")
        })
        .await
        .expect_err("missing dir");
    assert!(matches!(e, CoreError::DirNotFound(_)), "{e}");
    let e = d
        .spawn(SpawnRequest {
            dir: "/".into(),
            ..env.spawn_req("x")
        })
        .await
        .expect_err("outside roots");
    assert!(matches!(e, CoreError::DirNotAllowed { .. }), "{e}");
    // A symlink inside the root that points outside it is still outside.
    let link = env.work().join("escape");
    std::os::unix::fs::symlink("/", &link).expect("symlink");
    let e = d
        .spawn(SpawnRequest {
            dir: link.display().to_string(),
            ..env.spawn_req("x")
        })
        .await
        .expect_err("symlink escape");
    assert!(matches!(e, CoreError::DirNotAllowed { .. }), "{e}");
    let e = d.spawn(env.spawn_req("ok")).await.expect_err("duplicate");
    assert!(matches!(e, CoreError::AlreadyExists(_)), "{e}");
    let mut bad_env = env.spawn_req("x");
    bad_env.env.insert("1BAD".into(), "v".into());
    assert!(matches!(
        d.spawn(bad_env).await,
        Err(CoreError::BadSpawn(_))
    ));

    assert_eq!(d.list(&ListFilter::default()).len(), 1);
    assert_eq!(d.get("ok").expect("ok").state, State::Idle);
    let news = env
        .mux
        .log()
        .iter()
        .filter(|l| l.starts_with("new"))
        .count();
    assert_eq!(news, 1, "rejected spawns never reach tmux");
}

#[tokio::test]
async fn input_paste_keys_and_capture() {
    let env = Env::new();
    let d = env.daemon().await;
    d.spawn(env.spawn_req("s")).await.expect("spawn");
    let (s1, queued) = d.send_input("s", "hello;", true).await.expect("send");
    assert!(!queued);
    assert_eq!(d.get("s").expect("s").state, State::Working);
    // A turn runs: the next input waits behind it, in order, and survives in the registry.
    let (s2, queued) = d
        .send_input("s", "one\r\ntwo\n", true)
        .await
        .expect("send multi");
    assert!(queued && s2 > s1);
    assert_eq!(d.get("s").expect("s").queue, vec!["one\ntwo".to_string()]);
    d.complete_turn("s", "done".into(), crate::model::TurnEnd::Screen);
    wait_for(|| {
        env.mux
            .log()
            .iter()
            .filter(|l| *l == "keys s Enter")
            .count()
            == 2
    })
    .await;
    assert_eq!(d.last_reply("s").expect("reply").text, "done");
    d.send_keys("s", &["esc".into(), "y".into()])
        .await
        .expect("keys");
    let log = env.mux.log();
    let tail: Vec<&str> = log.iter().skip(1).map(String::as_str).collect();
    assert_eq!(
        tail,
        [
            "text s hello;",
            "keys s Enter",
            "paste s one\ntwo",
            "keys s Enter",
            "keys s Escape y"
        ]
    );
    assert_eq!(d.capture("s", 2, false).await.expect("capture"), "b\nc\n");
    assert_eq!(
        d.capture("s", 0, false).await.expect("capture"),
        "a\nb\nc\n"
    );

    assert!(matches!(
        d.send_input("s", &"x".repeat(70_000), true).await,
        Err(CoreError::TextTooLong { .. })
    ));
    assert!(matches!(
        d.send_input("s", "a\0b", true).await,
        Err(CoreError::Input(_))
    ));
    assert!(matches!(
        d.send_input("s", "", false).await,
        Err(CoreError::Input(_))
    ));
    assert!(matches!(
        d.send_keys("s", &["Hyper-Q".into()]).await,
        Err(CoreError::UnknownKey(_))
    ));
    assert!(matches!(
        d.send_input("nope", "x", true).await,
        Err(CoreError::NoSuchSession(_))
    ));
    assert_eq!(
        kinds(&d, "s"),
        [
            "spawned",
            "state_changed",
            "input_sent",
            "state_changed",
            "input_queued",
            "turn_completed",
            "state_changed",
            "input_sent",
            "state_changed",
            "keys_sent"
        ]
    );
}

#[tokio::test]
async fn input_to_one_session_keeps_order_and_others_run_in_parallel() {
    let env = Env::new();
    env.mux.st().slow_ms = 300;
    let d = env.daemon().await;
    d.spawn(env.spawn_req("slow")).await.expect("spawn");
    d.spawn(env.spawn_req("fast")).await.expect("spawn");
    let mut tasks = Vec::new();
    for i in 0..5 {
        let d = d.clone();
        tasks.push(tokio::spawn(async move {
            d.send_input("slow", &format!("m{i}"), false).await
        }));
        tokio::task::yield_now().await;
    }
    let started = Instant::now();
    d.send_input("fast", "quick", false)
        .await
        .expect("fast send");
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "the fast session did not wait behind the slow one"
    );
    for t in tasks {
        t.await.expect("join").expect("send");
    }
    let slow: Vec<String> = env
        .mux
        .log()
        .into_iter()
        .filter(|l| l.starts_with("text slow"))
        .collect();
    assert_eq!(
        slow,
        (0..5)
            .map(|i| format!("text slow m{i}"))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn stop_graceful_then_forced() {
    let env = Env::new();
    let d = env.daemon().await;
    d.spawn(env.spawn_req("a")).await.expect("spawn");
    d.spawn(env.spawn_req("b")).await.expect("spawn");
    // The fake ignores the quit: the stop kills it after the timeout.
    let out = d
        .stop("a", false, Some(Duration::from_millis(100)))
        .await
        .expect("stop");
    assert!(out.forced);
    env.mux.st().quit_on_ctrl_c = true;
    let out = d.stop("b", false, None).await.expect("stop");
    assert_eq!(
        out,
        StopOutcome {
            forced: false,
            exit_status: Some(130)
        }
    );
    assert!(d.list(&ListFilter::default()).is_empty());
    assert!(
        env.mux.st().sessions.is_empty(),
        "both tmux sessions are gone"
    );
    assert_eq!(
        kinds(&d, "b"),
        ["spawned", "state_changed", "exited", "stopped"]
    );
    assert!(matches!(
        d.stop("b", true, None).await,
        Err(CoreError::NoSuchSession(_))
    ));
    // The name is free again.
    d.spawn(env.spawn_req("b")).await.expect("respawn");
}

#[tokio::test]
async fn restart_readopts_live_sessions_and_reports_vanished_ones() {
    let env = Env::new();
    let (id_a, id_b) = {
        let d = env.daemon().await;
        let a = d.spawn(env.spawn_req("a")).await.expect("spawn");
        let b = d.spawn(env.spawn_req("b")).await.expect("spawn");
        d.send_input("a", "hi", true).await.expect("send");
        (a.id, b.id)
    };
    let last = {
        // The daemon "dies" (no shutdown); b's tmux session disappears meanwhile.
        env.mux.st().sessions.retain(|s| s.name != "b");
        let d = env.daemon().await;
        let a = d.get("a").expect("a survives");
        assert_eq!(a.id, id_a);
        // Its turn was running when the daemon died: it still is, to be reported when it ends.
        assert_eq!(a.state, State::Working);
        let b = d.get("b").expect("b is still listed");
        assert_eq!((b.id.as_str(), b.state), (id_b.as_str(), State::Exited));
        assert_eq!(
            kinds(&d, "b"),
            ["spawned", "state_changed", "state_changed", "exited"]
        );
        let started = d
            .events()
            .read_after(0, 1000)
            .events
            .into_iter()
            .filter(|e| matches!(e.kind, EventKind::DaemonStarted { .. }))
            .count();
        assert_eq!(started, 2);
        d.events().last_seq()
    };
    // Lose the registry entirely: a is recovered from its tmux options.
    std::fs::remove_file(env.dir.path().join("state/sessions.json")).expect("rm registry");
    let d = env.daemon().await;
    let a = d.get("a").expect("recovered");
    assert_eq!(a.id, id_a);
    assert!(
        d.status()
            .await
            .warnings
            .iter()
            .any(|w| w.contains("recovered from tmux"))
    );
    assert!(d.events().last_seq() > last, "numbering continues");
}

#[tokio::test]
async fn safety_net_marks_exited_sessions() {
    let env = Env::new();
    let d = env.daemon().await;
    d.spawn(env.spawn_req("a")).await.expect("spawn");
    {
        let mut st = env.mux.st();
        st.sessions[0].dead = true;
        st.sessions[0].dead_status = Some(3);
    }
    d.check_sessions().await;
    let a = d.get("a").expect("a");
    assert_eq!((a.state, a.exit_status), (State::Exited, Some(3)));
    assert!(matches!(
        d.send_input("a", "x", true).await,
        Err(CoreError::Exited(_))
    ));
    // Checking again reports nothing new.
    d.check_sessions().await;
    assert_eq!(kinds(&d, "a").iter().filter(|k| *k == "exited").count(), 1);
}

#[tokio::test]
async fn adopt_and_release() {
    let env = Env::new();
    env.mux.st().sessions.push(MuxSession {
        id: "$9".into(),
        name: "manual".into(),
        pid: 9,
        path: "/tmp".into(),
        ..Default::default()
    });
    let d = env.daemon().await;
    assert!(
        d.list(&ListFilter::default()).is_empty(),
        "foreign sessions are not taken over at start"
    );
    assert!(matches!(
        d.adopt("nope", "shell", "").await,
        Err(CoreError::NoSuchTmuxSession(..))
    ));
    assert!(matches!(
        d.adopt("manual", "nope", "").await,
        Err(CoreError::UnknownCli { .. })
    ));
    let rec = d.adopt("manual", "shell", "").await.expect("adopt");
    assert!(rec.adopted);
    assert_eq!(env.mux.st().sessions[0].meta.name, "manual");
    assert!(matches!(
        d.adopt("manual", "shell", "other").await,
        Err(CoreError::AlreadyManaged(..))
    ));
    d.send_input("manual", "ls", true)
        .await
        .expect("input to adopted");
    d.release("manual").await.expect("release");
    assert!(d.get("manual").is_err());
    assert_eq!(
        env.mux.st().sessions.len(),
        1,
        "released session keeps running"
    );
    assert!(
        env.mux.st().sessions[0].meta.id.is_empty(),
        "clibot's marks are removed"
    );
}

impl Env {
    /// The panes now show fixture `name` (tests/fixtures/screens/), and say they printed.
    fn show_screen(&self, name: &str) {
        let path = format!(
            "{}/../tests/fixtures/screens/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        self.mux.st().screen = Some(std::fs::read_to_string(path).expect("fixture"));
        let watchers = self.mux.st().watchers.clone();
        for w in watchers {
            let _ = w.try_send(WatchEvent::Output);
        }
    }
}

/// A daemon with a Gemini CLI session `g`, and what its hooks present (session id, token).
async fn gemini_session(env: &Env) -> (Daemon, String, String) {
    let d = env.daemon().await;
    d.spawn(SpawnRequest {
        cli: "gemini".into(),
        ..env.spawn_req("g")
    })
    .await
    .expect("spawn gemini");
    let (id, token) = d
        .inner
        .sessions
        .get("g", |e| (e.rec.id.clone(), e.rec.hook_token.clone()))
        .expect("session");
    (d, id, token)
}

/// The Waiting events of a session, as JSON.
fn waiting_events(d: &Daemon, session: &str) -> Vec<serde_json::Value> {
    d.events()
        .read_after(0, 10_000)
        .events
        .into_iter()
        .filter(|e| e.session == session)
        .filter_map(|e| serde_json::to_value(&e.kind).ok())
        .filter(|v| v["type"] == "waiting")
        .collect()
}

#[tokio::test]
async fn a_hook_prompt_without_options_waits_for_the_dialog_then_takes_its_choices() {
    let env = Env::new();
    let (d, id, token) = gemini_session(&env).await;
    let note = r#"{"hook_event_name":"Notification","notification_type":"ToolPermission",
        "message":"Tool Confirm Shell Command requires execution",
        "details":{"type":"exec","title":"Confirm Shell Command","command":"touch x","rootCommand":"touch"}}"#;
    d.hook(&id, &token, "Notification", note)
        .await
        .expect("hook accepted");
    assert_eq!(d.get("g").expect("g").state, State::Waiting);
    // Past the usual wait for a dialog, but this hook named no options: nothing published yet,
    // since a prompt without choices could not be answered from a chat.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(waiting_events(&d, "g").is_empty());

    env.show_screen("gemini_shell_perm.txt");
    wait_for(|| !waiting_events(&d, "g").is_empty()).await;
    let w = waiting_events(&d, "g").remove(0);
    let p = &w["prompt"];
    assert_eq!(p["text"], "Allow execution of [Shell]?");
    assert_eq!(
        p["options"],
        serde_json::json!([
            "Allow once",
            "Allow for this session",
            "No, suggest changes (esc)"
        ])
    );
    // The hook named another command than the dialog shows: the dialog's is what keys act on,
    // and a prompt whose two accounts disagree is left to a person.
    assert_eq!(p["subject"], "touch /home/dev/proj/created_by_gemini.txt");
    assert_eq!(p["subject_partial"], true);
}

#[tokio::test]
async fn a_hook_prompt_published_before_its_dialog_is_published_again_with_the_choices() {
    let env = Env::new();
    let (d, id, token) = gemini_session(&env).await;
    let note = r#"{"hook_event_name":"Notification","notification_type":"ToolPermission",
        "details":{"title":"Confirm Shell Command","command":"touch x"}}"#;
    d.hook(&id, &token, "Notification", note)
        .await
        .expect("hook accepted");
    // No dialog for a long time: the hook's own words go out, so the chat learns of the prompt.
    tokio::time::sleep(Duration::from_millis(4_600)).await;
    let first = waiting_events(&d, "g");
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["prompt"]["text"], "Confirm Shell Command");
    assert_eq!(first[0]["prompt"]["options"], serde_json::json!([]));

    env.show_screen("gemini_shell_perm.txt");
    wait_for(|| waiting_events(&d, "g").len() == 2).await;
    let second = waiting_events(&d, "g").remove(1);
    assert_eq!(
        second["prompt"]["id"], first[0]["prompt"]["id"],
        "the same prompt"
    );
    assert_eq!(second["prompt"]["text"], "Allow execution of [Shell]?");
    assert_eq!(second["prompt"]["options"][0], "Allow once");
    // Only once: the screen staying as it is adds nothing.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(waiting_events(&d, "g").len(), 2);
}

#[tokio::test]
async fn restart_keeps_the_session_and_resumes_the_conversation() {
    let env = Env::new();
    let d = env.daemon().await;
    env.mux.st().quit_on_ctrl_c = true;
    let mut req = SpawnRequest {
        cli: "claude".into(),
        args: vec!["--model".into(), "m".into()],
        ..env.spawn_req("cc")
    };
    req.env.insert("PROJECT_FLAG".into(), "1".into());
    let before = d.spawn(req).await.expect("spawn");
    let restarted = d.restart("cc", true).await.expect("restart");
    assert_eq!(restarted.id, before.id, "the same session");
    assert_ne!(restarted.tmux_id, before.tmux_id, "a new tmux session");
    assert_ne!(restarted.hook_token, before.hook_token, "a new hook secret");
    assert_eq!(
        restarted.env.get("PROJECT_FLAG").map(String::as_str),
        Some("1")
    );
    assert_eq!(restarted.state, State::Starting);
    let news: Vec<String> = env
        .mux
        .log()
        .into_iter()
        .filter(|l| l.starts_with("new "))
        .collect();
    assert_eq!(news.len(), 2, "{news:?}");
    // Claude Code continues the conversation clibot started under its session id.
    let resumed = format!("--resume {}", before.cli_session_id);
    assert!(
        news[1].contains(&resumed) && news[1].ends_with("--model m"),
        "{news:?}"
    );
    assert!(!news[1].contains("--session-id"), "{news:?}");
    assert_eq!(
        env.mux.st().sessions.len(),
        1,
        "the old tmux session is gone"
    );
    let k = kinds(&d, "cc");
    assert!(k.ends_with(&["exited".into(), "spawned".into()]), "{k:?}");

    // A fresh restart starts a new conversation.
    let fresh = d.restart("cc", false).await.expect("restart fresh");
    assert_ne!(fresh.cli_session_id, before.cli_session_id);
    let last = env
        .mux
        .log()
        .into_iter()
        .rfind(|l| l.starts_with("new "))
        .unwrap_or_default();
    assert!(
        last.contains(&format!("--session-id {}", fresh.cli_session_id)),
        "{last}"
    );

    assert!(matches!(
        d.restart("nope", true).await,
        Err(CoreError::NoSuchSession(_))
    ));
}

/// The state a session is in.
fn state(d: &Daemon, name: &str) -> State {
    d.get(name).expect("session").state
}

/// Gemini session `g`, started and idle (its screen drawn), with the safety net's idle time
/// set to `idle_turn_end_ms`.
async fn idle_gemini(env: &Env, idle_turn_end_ms: u64) -> (Daemon, String, String) {
    let mut settings = env.settings();
    settings.config.daemon.idle_turn_end_ms = idle_turn_end_ms;
    let d = Daemon::start(settings, env.mux.clone())
        .await
        .expect("daemon starts");
    d.spawn(SpawnRequest {
        cli: "gemini".into(),
        ..env.spawn_req("g")
    })
    .await
    .expect("spawn gemini");
    env.show_screen("../gemini_idle.txt");
    wait_for(|| state(&d, "g") == State::Idle).await;
    let (id, token) = d
        .inner
        .sessions
        .get("g", |e| (e.rec.id.clone(), e.rec.hook_token.clone()))
        .expect("session");
    (d, id, token)
}

fn texts_typed(env: &Env) -> Vec<String> {
    env.mux
        .log()
        .into_iter()
        .filter(|l| l.starts_with("text ") || l.starts_with("paste "))
        .collect()
}

#[tokio::test]
async fn a_busy_frame_after_the_completion_hook_starts_no_turn() {
    let env = Env::new();
    let (d, id, token) = idle_gemini(&env, 60_000).await;
    d.send_input("g", "one", true).await.expect("send");
    assert_eq!(state(&d, "g"), State::Working);
    env.show_screen("../gemini_busy.txt");
    d.hook(
        &id,
        &token,
        "AfterAgent",
        r#"{"prompt_response":"reply one"}"#,
    )
    .await
    .expect("hook");
    assert_eq!(state(&d, "g"), State::Idle);
    // A frame drawn before the turn ended arrives after the hook: a leftover, not a turn.
    env.show_screen("../gemini_busy.txt");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(state(&d, "g"), State::Idle, "{:?}", kinds(&d, "g"));
    // So the next message is typed at once, not queued behind a turn that never ends.
    let (_, queued) = d.send_input("g", "two", true).await.expect("send");
    assert!(!queued);
    assert_eq!(texts_typed(&env), ["text g one", "text g two"]);
    // A turn started at the desk is told by the start hook.
    d.hook(
        &id,
        &token,
        "AfterAgent",
        r#"{"prompt_response":"reply two"}"#,
    )
    .await
    .expect("hook");
    d.hook(&id, &token, "BeforeAgent", "{}")
        .await
        .expect("hook");
    assert_eq!(state(&d, "g"), State::Working);
}

#[tokio::test]
async fn a_turn_whose_completion_hook_never_comes_ends_when_the_screen_stays_idle() {
    let env = Env::new();
    let (d, id, token) = idle_gemini(&env, 400).await;
    d.send_input("g", "one", true).await.expect("send");
    let (_, queued) = d.send_input("g", "two", true).await.expect("send");
    assert!(queued);
    env.show_screen("../gemini_busy.txt");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(state(&d, "g"), State::Working, "busy: the turn runs");
    // The CLI is done but no hook comes: the idle screen ends the turn and the queue moves.
    env.show_screen("../gemini_idle.txt");
    wait_for(|| texts_typed(&env).len() == 2).await;
    let completed: Vec<serde_json::Value> = d
        .events()
        .read_after(0, 10_000)
        .events
        .into_iter()
        .filter_map(|e| serde_json::to_value(&e.kind).ok())
        .filter(|v| v["type"] == "turn_completed")
        .collect();
    assert_eq!(completed.len(), 1, "{completed:?}");
    assert_eq!(completed[0]["source"], "idle");
    assert_eq!(texts_typed(&env), ["text g one", "text g two"]);
    // The late hook of that first turn is not a turn of its own beyond its reply; the second
    // turn still completes by its own hook.
    d.hook(&id, &token, "AfterAgent", r#"{"prompt_response":"late"}"#)
        .await
        .expect("hook");
    assert_eq!(state(&d, "g"), State::Idle);
}

#[tokio::test]
async fn text_is_typed_literally_long_lines_are_pasted_and_control_characters_refused() {
    let env = Env::new();
    let d = env.daemon().await;
    d.spawn(env.spawn_req("s")).await.expect("spawn");
    let long = "a".repeat(20_000);
    d.send_input("s", &long, true).await.expect("long line");
    assert!(
        env.mux
            .log()
            .iter()
            .any(|l| l == &format!("paste s {long}")),
        "a 20 kB line goes through a paste buffer, not a command line"
    );
    for bad in ["\u{4}", "ls\u{1b}[A", "a\u{7f}b", "x\u{9b}y"] {
        match d.send_input("s", bad, true).await {
            Err(CoreError::Input(m)) => {
                assert!(m.contains("control character") && m.contains("keys"), "{m}")
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    d.send_input("s", "tab\there\nnext line\r\n", true)
        .await
        .expect("tab and newlines are text");
}

#[tokio::test]
async fn spawning_a_missing_program_is_refused_and_leaves_nothing() {
    let env = Env::new();
    let mut settings = env.settings();
    let ghost: crate::cli::CliOverride =
        toml::from_str(r#"argv = ["no-such-cli-anywhere", "--flag"]"#).expect("cli config");
    settings.config.cli_overrides.insert("ghost".into(), ghost);
    let d = Daemon::start(settings, env.mux.clone())
        .await
        .expect("daemon starts");
    let err = d
        .spawn(SpawnRequest {
            cli: "ghost".into(),
            ..env.spawn_req("fix")
        })
        .await
        .expect_err("refused");
    let msg = err.to_string();
    assert!(matches!(err, CoreError::ProgramNotFound { .. }), "{msg}");
    assert!(
        msg.contains("\"no-such-cli-anywhere\"")
            && msg.contains("[cli.ghost] argv")
            && msg.contains(&env.dir.path().join("bin").display().to_string()),
        "{msg}"
    );
    assert!(d.list(&ListFilter::default()).is_empty());
    assert!(!env.mux.log().iter().any(|l| l.starts_with("new ")));
    // The name is free.
    d.spawn(env.spawn_req("fix")).await.expect("spawn shell");
}

#[tokio::test]
async fn sessions_recovered_from_tmux_keep_their_hooks() {
    let env = Env::new();
    let (id, token) = {
        let (_d, id, token) = gemini_session(&env).await;
        (id, token)
    };
    // The registry is lost: the session comes back from tmux, token included.
    std::fs::write(env.dir.path().join("state/sessions.json"), "{garbage").expect("corrupt");
    let d = env.daemon().await;
    assert_eq!(d.get("g").expect("recovered").id, id);
    d.hook(&id, &token, "BeforeAgent", "{}")
        .await
        .expect("the recovered session's hook is accepted");
    assert_eq!(state(&d, "g"), State::Working);
    d.hook(&id, &token, "AfterAgent", r#"{"prompt_response":"ok"}"#)
        .await
        .expect("hook");
    assert_eq!(d.last_reply("g").expect("reply").text, "ok");
    // A session whose tmux environment has no token is followed by its screen, and said so.
    let other = env.mux.st().sessions[0].id.clone();
    env.mux
        .st()
        .env
        .get_mut(&other)
        .expect("env")
        .remove("CLIBOT_HOOK_TOKEN");
    std::fs::remove_file(env.dir.path().join("state/sessions.json")).expect("rm");
    let d = env.daemon().await;
    assert!(matches!(
        d.hook(&id, &token, "BeforeAgent", "{}").await,
        Err(CoreError::HookDenied)
    ));
    assert!(
        d.status()
            .await
            .warnings
            .iter()
            .any(|w| w.contains("no hook token")),
        "{:?}",
        d.status().await.warnings
    );
}

#[tokio::test]
async fn state_files_are_private_and_an_open_state_dir_is_tightened() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let state = env.dir.path().join("state");
    std::fs::create_dir_all(&state).expect("mkdir");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let d = env.daemon().await;
    d.spawn(env.spawn_req("s")).await.expect("spawn");
    d.send_input_once("s", "hi", true, "telegram:1:1", "telegram:1")
        .await
        .expect("send");
    let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700);
    for f in ["sessions.json", "events.jsonl", "inputs.json"] {
        assert_eq!(mode(&state.join(f)), 0o600, "{f}");
    }
}

#[tokio::test]
async fn an_enter_that_a_start_hook_does_not_confirm_is_pressed_again() {
    let env = Env::new();
    let (d, id, token) = idle_gemini(&env, 60_000).await;
    d.send_input("g", "one", true).await.expect("send");
    // The pane echoes the text, but no BeforeAgent hook comes: the Enter was ignored.
    env.show_screen("../gemini_idle.txt");
    let enters = || {
        env.mux
            .log()
            .iter()
            .filter(|l| l.as_str() == "keys g Enter")
            .count()
    };
    for _ in 0..60 {
        if enters() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(enters(), 2, "Enter pressed once more: {:?}", env.mux.log());
    // Once the hook says the CLI took the prompt, nothing more is pressed.
    d.hook(&id, &token, "BeforeAgent", "{}")
        .await
        .expect("hook");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(enters(), 2);
}

#[tokio::test]
async fn numbering_continues_above_every_cursor_when_the_log_lost_its_tail() {
    let env = Env::new();
    let cursor = {
        let d = env.daemon().await;
        for i in 0..5 {
            d.event(
                "",
                "",
                EventKind::Stalled {
                    silent_ms: i,
                    working_ms: 0,
                    screen: String::new(),
                },
            );
        }
        let last = d.events().last_seq();
        d.chats().bind("telegram", "c1", "api", false, 0, "local");
        let ack = crate::chat::chats::ChatAck {
            seq: last,
            ..Default::default()
        };
        assert_eq!(d.chats().ack_chat("telegram", "c1", &ack), Some(last));
        d.persist();
        last
    };
    // A power loss: the log keeps only its first line, and the registry is gone too.
    let state = env.dir.path().join("state");
    let log = std::fs::read_to_string(state.join("events.jsonl")).expect("read log");
    let first = log.lines().next().expect("a first line").to_string() + "\n";
    std::fs::write(state.join("events.jsonl"), first).expect("truncate");
    std::fs::remove_file(state.join("sessions.json")).expect("rm registry");
    let d = env.daemon().await;
    let started = d
        .events()
        .read_after(0, 100)
        .events
        .into_iter()
        .rfind(|e| matches!(e.kind, EventKind::DaemonStarted { .. }))
        .expect("a daemon_started event");
    assert!(
        started.seq > cursor,
        "seq {} must be above the chat's cursor {cursor}",
        started.seq
    );
}

#[tokio::test]
async fn the_events_after_an_automatic_answer_settle_its_outcome() {
    use crate::store::outcomes::{Expected, Outcome};
    let env = Env::new();
    let d = env.daemon().await;
    let answer = |session: &str, prompt: &str, resolver: &str| {
        d.inner.outcomes.expect(
            session,
            prompt,
            Expected {
                key: "rule: allow".into(),
                index: 1,
                about: "allow".into(),
                by: "rule 1".into(),
                subject: "git status".into(),
                approved: true,
                answer: "y".into(),
            },
        );
        d.event(
            session,
            "",
            EventKind::PromptResolved {
                prompt_id: prompt.into(),
                by: resolver.into(),
                answer: "y".into(),
                actor: resolver.into(),
                note: String::new(),
            },
        );
    };
    let exited = |reason: &str| EventKind::Exited {
        status: Some(0),
        reason: reason.into(),
        output: String::new(),
    };
    let keys = |k: &[&str]| EventKind::KeysSent {
        keys: k.iter().map(|s| s.to_string()).collect(),
    };
    answer("s1", "p1", "rule 1");
    d.event(
        "s1",
        "",
        EventKind::TurnCompleted {
            text: "done".into(),
            source: crate::model::TurnEnd::Screen,
            blob_id: String::new(),
            full_bytes: 0,
        },
    );
    answer("s2", "p2", "rule 1");
    d.event("s2", "", keys(&["Escape"]));
    answer("s3", "p3", "rule 1");
    d.event("s3", "", keys(&["Enter", "y"]));
    d.event("s3", "", exited("stopped"));
    answer("s4", "p4", "rule 1");
    d.event("s4", "", exited("the CLI exited"));
    answer("s5", "p5", "rule 1");
    d.event("s5", "", exited("idle for 2s"));
    answer("s6", "p6", "rule 1");
    d.event(
        "s6",
        "",
        EventKind::Error {
            message: "Error: usage limit".into(),
            kind: "usage_limit".into(),
        },
    );
    // Answered by someone else before the rule: not the rule's answer.
    answer("s7", "p7", "terminal");
    let book = d.inner.outcomes.book();
    let got: Vec<(&str, Outcome, &str)> = book
        .recent
        .iter()
        .map(|a| (a.session.as_str(), a.outcome(), a.detail.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("s1", Outcome::Completed, ""),
            ("s2", Outcome::Undone, "Escape"),
            ("s3", Outcome::Undone, "stopped"),
            ("s4", Outcome::Errored, "the CLI exited"),
            ("s5", Outcome::Pending, ""),
            ("s6", Outcome::Errored, "usage_limit: Error: usage limit"),
        ]
    );
    let row = &book.rows[0];
    assert_eq!(
        (
            row.answers,
            row.completed,
            row.undone,
            row.errored,
            row.pending()
        ),
        (6, 1, 2, 2, 1)
    );
    // The idle session's answer is no longer followed: its next turn is not its outcome.
    assert!(!d.inner.outcomes.has_pending("s5"));
    // The file holds it.
    let (again, w) = crate::store::outcomes::Outcomes::open(&env.dir.path().join("state"), 0);
    assert_eq!(w, None);
    assert_eq!(again.book(), book);
}

/// A subscriber that writes down what it is shown, and amends notices with its name.
struct Tap {
    name: &'static str,
    seen: Arc<Mutex<Vec<String>>>,
}

impl bus::Subscriber for Tap {
    fn name(&self) -> &'static str {
        self.name
    }
    fn amend(&self, _: &Daemon, session: &str, kind: &mut EventKind) -> Option<bus::FollowUp> {
        let EventKind::Notice { text, .. } = kind else {
            return None;
        };
        text.push_str(&format!(" +{}", self.name));
        lock(&self.seen).push(format!("{} amends {session}", self.name));
        let (name, seen) = (self.name, self.seen.clone());
        Some(Box::new(move |_: &Daemon, ev: &Event| {
            lock(&seen).push(format!("{name} follows up {}", ev.seq))
        }))
    }
    fn on_event(&self, _: &Daemon, ev: &Event) {
        let text = match &ev.kind {
            EventKind::Notice { text, .. } => text.clone(),
            k => format!("{k:?}").chars().take(12).collect(),
        };
        lock(&self.seen).push(format!("{} sees {} {text}", self.name, ev.seq));
    }
}

#[tokio::test]
async fn recording_an_event_publishes_it_to_each_subscriber_in_order() {
    let env = Env::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let tap = |name| -> Arc<dyn bus::Subscriber> {
        Arc::new(Tap {
            name,
            seen: seen.clone(),
        })
    };
    let (d, _) = Daemon::open(
        env.settings(),
        env.mux.clone(),
        bus::Bus::new(vec![tap("a"), tap("b")]),
    )
    .await
    .expect("opens");
    assert_eq!(d.inner.bus.names(), ["a", "b"]);
    let seq = d.event(
        "s",
        "",
        EventKind::Notice {
            kind: "test".into(),
            text: "hello".into(),
        },
    );
    // Both amend before it is written; each then sees the event as written, followed at once
    // by its own follow-up; a kind nobody amends has no follow-up.
    let other = d.event("", "", EventKind::Released);
    assert_eq!(
        *lock(&seen),
        [
            "a amends s".to_string(),
            "b amends s".into(),
            format!("a sees {seq} hello +a +b"),
            format!("a follows up {seq}"),
            format!("b sees {seq} hello +a +b"),
            format!("b follows up {seq}"),
            format!("a sees {other} Released"),
            format!("b sees {other} Released"),
        ]
    );
    let logged = d.events().read_after(seq - 1, 1).events;
    assert!(
        matches!(&logged[0].kind, EventKind::Notice { text, .. } if text == "hello +a +b"),
        "{logged:?}"
    );
}

#[tokio::test]
async fn the_started_daemon_has_every_part_on_the_bus() {
    let env = Env::new();
    let d = env.daemon().await;
    assert_eq!(
        d.inner.bus.names(),
        [
            "metrics",
            "outcomes of automatic answers",
            "automatic answers",
            "delegation",
            "jobs",
            "worktree summary"
        ]
    );
}

#[tokio::test]
async fn a_shutdown_lets_background_work_finish_and_waits_no_longer_than_its_drain() {
    let env = Env::new();
    let d = env.daemon().await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    d.in_background(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    d.shutdown().await;
    assert!(
        done.load(std::sync::atomic::Ordering::SeqCst),
        "the shutdown returned before the work it was to wait for had finished"
    );

    // Work that would take an hour is waited for ten seconds, then left to the runtime.
    let d = env.daemon().await;
    tokio::time::pause();
    d.in_background(async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    let began = tokio::time::Instant::now();
    d.shutdown().await;
    let waited = began.elapsed();
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_secs(60),
        "{waited:?}"
    );
}
