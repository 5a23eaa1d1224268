//! The real Gemini CLI, offline, in a real tmux server, against the mock Gemini API — driven
//! with plain tmux commands exactly as clibot drives it (no clibotd here). These tests pin down
//! what clibot relies on: the idle and busy screens, the shell confirmation and how a digit
//! answers it, the hook payloads, and how hooks can (not) be configured.
//!
//! Never skipped: without `tests/node` installed they fail and say how to install it. Set
//! `CLIBOT_UPDATE_FIXTURES=1` to rewrite the screen fixtures in `tests/fixtures/`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use clibot_tests::gemini::{self, GeminiHome};
use clibot_tests::mock_llm::{MockLlm, Rule};
use clibot_tests::procs::{alive, process_tree};
use clibot_tests::tmux_driver::TmuxDriver;
use serde_json::{Value, json};

/// The tmux target of the one session each test runs.
const TARGET: &str = "gemini";

/// How long a dialog has been on screen before a key press is sent to it. Unlike Claude Code,
/// Gemini took a `1` sent right after the dialog's first capture (5 tries of 5); the pause is a
/// margin, as clibot would keep one. A key sent *before* the dialog shows goes to the composer
/// (see `slow_notification_hook_holds_back_the_confirmation`).
const DIALOG_SETTLE: Duration = Duration::from_millis(300);

/// Gemini CLI is a large node program and the machines running these tests are small: one
/// instance at a time keeps the timings these tests measure meaningful.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// One running Gemini CLI in its own tmux server, home and work directory.
struct Gemini {
    // Field order is drop order: tmux (and with it Gemini) goes before the mock and the files.
    tmux: TmuxDriver,
    mock: MockLlm,
    home: GeminiHome,
    work: PathBuf,
    /// Where the hooks of [`recording_hooks`] write.
    hooks: PathBuf,
    /// The pane's process: Gemini's launcher (tmux execs the argv directly), which relaunches
    /// the CLI as its child.
    pid: Option<u32>,
    stopped: bool,
    dir: tempfile::TempDir,
    _serial: MutexGuard<'static, ()>,
}

/// What a test starts Gemini with.
struct Setup {
    rules: fn(&Path) -> Vec<Rule>,
    /// `~/.gemini/settings.json` `hooks`, given the directory the hooks write to.
    hooks: Option<fn(&Path) -> Value>,
    /// Extra environment, given the test's root directory.
    env: fn(&Path) -> Vec<(String, String)>,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            rules,
            hooks: Some(recording_hooks),
            env: |_| Vec::new(),
        }
    }
}

impl Gemini {
    /// Starts Gemini (with `setup`) and waits for its idle prompt.
    fn start(setup: Setup) -> Gemini {
        gemini::require_gemini();
        let serial = one_at_a_time();
        let dir = tempfile::Builder::new()
            .prefix("clibot-gemini-")
            .tempdir()
            .expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let work = root.join("work");
        let hooks = root.join("hooks");
        std::fs::create_dir_all(&work).expect("mkdir work");
        std::fs::create_dir_all(&hooks).expect("mkdir hooks");
        let mock = MockLlm::start((setup.rules)(&work));
        let home = GeminiHome::new(&root, &work, &mock.url());
        if let Some(h) = setup.hooks {
            home.set_hooks(h(&hooks));
        }
        let tmux = TmuxDriver {
            socket: root.join("t.sock"),
            target: TARGET,
            unset: gemini::UNSET_ENV,
        };
        let work_str = home.work_dir().display().to_string();
        let mut args: Vec<String> = [
            "new-session",
            "-d",
            "-s",
            TARGET,
            "-x",
            "160",
            "-y",
            "50",
            "-c",
            &work_str,
        ]
        .map(String::from)
        .to_vec();
        let mut env = home.env();
        for (k, v) in (setup.env)(&root) {
            env.retain(|(key, _)| *key != k);
            env.push((k, v));
        }
        for (k, v) in env {
            args.extend(["-e".to_string(), format!("{k}={v}")]);
        }
        args.push("--".into());
        args.extend(home.argv());
        let started = Instant::now();
        tmux.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let pid = tmux
            .run(
                &["display-message", "-p", "-t", TARGET, "#{pane_pid}"],
                None,
            )
            .stdout;
        let pid = String::from_utf8_lossy(&pid).trim().parse().ok();
        let gemini = Gemini {
            tmux,
            mock,
            home,
            work,
            hooks,
            pid,
            stopped: false,
            dir,
            _serial: serial,
        };
        let screen = gemini
            .tmux
            .wait("the idle prompt", Duration::from_secs(60), is_ready);
        eprintln!(
            "gemini: idle prompt {:?} after start:\n{screen}",
            started.elapsed()
        );
        gemini
    }

    /// Presses `key` in a dialog that just appeared.
    fn answer(&self, key: &str) {
        std::thread::sleep(DIALOG_SETTLE);
        self.tmux.ok(&["send-keys", "-t", TARGET, key]);
    }

    /// Waits (up to a minute) until the screen satisfies `pred`; returns that screen and how
    /// long it took.
    fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> (String, Duration) {
        let start = Instant::now();
        let screen = self.tmux.wait(what, Duration::from_secs(60), pred);
        let took = start.elapsed();
        eprintln!("gemini: {what} after {took:?}");
        (screen, took)
    }

    /// Ends Gemini and everything it started; returns the processes that outlived it (none,
    /// unless even SIGKILL failed). Once its shell tool has run, Gemini 0.61 survives the hang-up
    /// that tmux's `kill-server` sends (its launcher ignores SIGHUP, SIGINT and SIGTERM and
    /// the CLI itself keeps running), so the whole process tree of the pane is collected before
    /// the server goes, then sent SIGTERM and, if need be, SIGKILL.
    fn stop(&mut self) -> Vec<u32> {
        if std::mem::replace(&mut self.stopped, true) {
            return Vec::new();
        }
        let tree = self.pid.map(process_tree).unwrap_or_default();
        let _ = self.tmux.run(&["kill-server"], None);
        let deadline = Instant::now() + Duration::from_secs(1);
        while tree.iter().any(|&p| alive(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let after_hup: Vec<u32> = tree.iter().copied().filter(|&p| alive(p)).collect();
        if !after_hup.is_empty() {
            eprintln!("gemini: {after_hup:?} of {tree:?} outlived tmux kill-server");
        }
        for (signal, grace) in [("-TERM", 5), ("-KILL", 5)] {
            let left: Vec<String> = tree
                .iter()
                .filter(|&&p| alive(p))
                .map(u32::to_string)
                .collect();
            if left.is_empty() {
                break;
            }
            let _ = Command::new("kill")
                .arg(signal)
                .args(&left)
                .stderr(Stdio::null())
                .status();
            let sent = Instant::now();
            let deadline = sent + Duration::from_secs(grace);
            while tree.iter().any(|&p| alive(p)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            eprintln!(
                "gemini: kill {signal} {left:?}: {} left after {:?}",
                tree.iter().filter(|&&p| alive(p)).count(),
                sent.elapsed()
            );
        }
        tree.into_iter().filter(|&p| alive(p)).collect()
    }
}

impl Drop for Gemini {
    fn drop(&mut self) {
        let left = self.stop();
        if !left.is_empty() {
            eprintln!("gemini: processes {left:?} survived SIGKILL");
        }
    }
}

/// The composer's placeholder: shown while Gemini waits for input and the composer is empty.
const PLACEHOLDER: &str = "Type your message or @path/to/file";

/// Gemini's composer is ready: the placeholder in the input box and no spinner's cancel hint.
fn is_idle(screen: &str) -> bool {
    screen.contains(PLACEHOLDER) && !is_busy(screen)
}

/// Gemini has started: idle, and the banner is shown. The composer appears about a second
/// before the CLI has finished initializing; the banner (with the rest of the history) is only
/// drawn once it has. A prompt submitted in between is queued (`ℹ Initializing... Prompts will
/// be queued.`) and sent when initialization is done.
fn is_ready(screen: &str) -> bool {
    is_idle(screen)
        && screen.contains(&format!(
            "Gemini CLI v{}",
            clibot_tests::tested_version("gemini")
        ))
}

/// The spinner line: `⠦ <phrase> (esc to cancel, 2s)`.
fn is_busy(screen: &str) -> bool {
    screen.contains("(esc to cancel")
}

fn is_shell_confirmation(s: &str) -> bool {
    s.contains("Allow execution of [Shell]?") && s.lines().any(|l| l.contains("● 1. Allow once"))
}

/// Writes a screen fixture when `CLIBOT_UPDATE_FIXTURES` is set.
fn save_fixture(name: &str, screen: &str) {
    if std::env::var_os("CLIBOT_UPDATE_FIXTURES").is_none() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    std::fs::create_dir_all(path.parent().expect("fixtures dir")).expect("mkdir fixtures");
    std::fs::write(&path, screen).expect("write fixture");
    eprintln!("wrote {}", path.display());
}

/// One command hook for `event` that appends its stdin (one JSON object) to
/// `<dir>/<event>.jsonl`, then runs `then` (shell), with a timeout in milliseconds.
fn hook(dir: &Path, event: &str, then: &str, timeout_ms: u64) -> Value {
    let file = dir.join(format!("{event}.jsonl"));
    json!([{ "matcher": "", "hooks": [{
        "name": format!("clibot-{event}"),
        "type": "command",
        "command": format!("(cat; echo) >> '{}'{then}", file.display()),
        "timeout": timeout_ms,
    }]}])
}

/// Hooks recording the events clibot needs: the prompt taken (BeforeAgent), the turn's final
/// text (AfterAgent) and a confirmation on screen (Notification).
fn recording_hooks(dir: &Path) -> Value {
    json!({
        "BeforeAgent": hook(dir, "BeforeAgent", "", 5000),
        "AfterAgent": hook(dir, "AfterAgent", "", 5000),
        "Notification": hook(dir, "Notification", "", 5000),
    })
}

/// The payloads a hook received so far.
fn hook_payloads(dir: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!("{event}.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("hook stdin is one JSON object"))
        .collect()
}

/// Waits until `event`'s hook has received `n` payloads.
fn wait_hooks(dir: &Path, event: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = hook_payloads(dir, event);
        if got.len() >= n {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{event} hook ran {} times, expected {n}",
            got.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

const REPLY: &str = "Hello from the mock model.\nThis is line two.";
const THEN: &str = "Marker created.";
/// Long enough to be streamed in three pieces of 24 characters.
const LONG_REPLY: &str = "Second reply, streamed in pieces.\nIt has two lines.";

/// What Gemini CLI 0.61 gives AfterAgent as `prompt_response` when the reply `text` was
/// streamed in pieces of `chunk` characters: the whole text, then every piece but the first
/// again, each after a space. (`Turn.getResponseText()` joins the text of every streamed chunk
/// with " ", after `GeminiChat.processStreamResponse` has appended the later pieces to the first
/// chunk's part object in place, while consolidating the reply for the history.)
fn gemini_0_61_prompt_response(text: &str, chunk: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let pieces: Vec<String> = chars.chunks(chunk).map(|c| c.iter().collect()).collect();
    std::iter::once(text.to_string())
        .chain(pieces.into_iter().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The text of the last `gemini` message in a Gemini transcript (`transcript_path`, JSONL):
/// records with an `id` seen before replace the earlier one; `{"$set": …}` records only
/// update metadata.
fn last_transcript_reply(path: &Path) -> Option<String> {
    let raw = std::fs::read_to_string(path).ok()?;
    let mut messages: Vec<Value> = Vec::new();
    for line in raw.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(all) = record.pointer("/$set/messages").and_then(Value::as_array) {
            messages = all.clone();
        } else if record.get("type").is_some() {
            match messages
                .iter_mut()
                .find(|m| m.get("id") == record.get("id"))
            {
                Some(old) => *old = record,
                None => messages.push(record),
            }
        }
    }
    let last = messages.iter().rev().find(|m| m["type"] == "gemini")?;
    match &last["content"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(parts.iter().filter_map(|p| p["text"].as_str()).collect()),
        _ => None,
    }
}

fn marker(work: &Path) -> PathBuf {
    work.join("marker.txt")
}

fn rules(work: &Path) -> Vec<Rule> {
    vec![
        Rule::text("HELLO", REPLY),
        Rule::text("AGAIN", LONG_REPLY),
        Rule::tool(
            "RUNSHELL",
            "run_shell_command",
            json!({
                "command": format!("touch {}", marker(work).display()),
                "description": "Create an empty marker file",
            }),
            THEN,
        ),
    ]
}

/// Gemini showed the reply text and is idle again.
fn replied(s: &str) -> bool {
    s.contains("✦ Hello from the mock model.") && s.contains("  This is line two.") && is_idle(s)
}

fn finished_tool(s: &str) -> bool {
    s.contains(&format!("✦ {THEN}")) && is_idle(s)
}

/// The tool names Gemini CLI declared in a main-loop request.
fn declared_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
        .filter_map(|d| d["name"].as_str().map(String::from))
        .collect()
}

#[test]
fn real_cli_plain_text_reply_shows_and_after_agent_has_it() {
    let mut g = Gemini::start(Setup::default());
    // A slow model, so that the busy screen can be seen; the reply in one streamed piece (see
    // below for several).
    g.mock.set_latency(Duration::from_millis(1500));
    g.mock.set_chunk_chars(usize::MAX);
    let submitted = Instant::now();
    g.tmux.submit("Please say HELLO");
    // Not while the BeforeAgent hook runs (`⠋ Executing Hook: clibot-BeforeAgent (esc to
    // cancel, 0s)`) but while the model thinks.
    let (busy, _) = g.wait("the busy line", |s| {
        is_busy(s) && !s.contains("Executing Hook")
    });
    eprintln!("busy screen:\n{busy}");
    save_fixture("gemini_busy.txt", &busy);
    let (screen, _) = g.wait("the reply", replied);
    eprintln!(
        "idle screen after the reply ({:?} after submitting):\n{screen}",
        submitted.elapsed()
    );
    // Idle already, but a finished hook's name stays on screen for 3 seconds after it started
    // (`  Executing Hook: clibot-AfterAgent`, without spinner or cancel hint).
    eprintln!(
        "hook line on the first idle screen: {}",
        screen.contains("Executing Hook")
    );
    let (screen, _) = g.wait("the hook line to go", |s| {
        replied(s) && !s.contains("Executing Hook")
    });
    save_fixture("gemini_idle.txt", &screen);

    let before = wait_hooks(&g.hooks, "BeforeAgent", 1);
    assert_eq!(before[0]["hook_event_name"], "BeforeAgent");
    assert_eq!(before[0]["prompt"], "Please say HELLO");
    let after = wait_hooks(&g.hooks, "AfterAgent", 1);
    assert_eq!(after[0]["hook_event_name"], "AfterAgent");
    assert_eq!(after[0]["prompt"], "Please say HELLO");
    assert_eq!(after[0]["prompt_response"], REPLY);
    assert_eq!(after[0]["stop_hook_active"], false);
    assert_eq!(after[0]["cwd"], g.home.work_dir().display().to_string());
    assert!(hook_payloads(&g.hooks, "Notification").is_empty());
    let transcript = PathBuf::from(
        after[0]["transcript_path"]
            .as_str()
            .expect("transcript_path"),
    );
    assert_eq!(last_transcript_reply(&transcript).as_deref(), Some(REPLY));

    // A reply streamed in several pieces shows whole, and the transcript has it whole, but
    // AfterAgent's prompt_response repeats the later pieces.
    g.mock.set_latency(Duration::ZERO);
    g.mock.set_chunk_chars(24);
    g.tmux.submit("Once AGAIN please");
    g.wait("the second reply", |s| {
        s.contains("✦ Second reply, streamed in pieces.")
            && s.contains("  It has two lines.")
            && is_idle(s)
    });
    let after = wait_hooks(&g.hooks, "AfterAgent", 2);
    assert_eq!(after[1]["prompt"], "Once AGAIN please");
    assert_eq!(
        after[1]["prompt_response"],
        gemini_0_61_prompt_response(LONG_REPLY, 24),
        "Gemini CLI's AfterAgent text for a reply in pieces"
    );
    assert_eq!(
        after[1]["prompt_response"],
        "Second reply, streamed in pieces.\nIt has two lines. n pieces.\nIt has two lin es."
    );
    assert_eq!(
        last_transcript_reply(&transcript).as_deref(),
        Some(LONG_REPLY)
    );

    // The main request carried the prompt as the last user text and offered the shell tool.
    let requests = g.mock.requests();
    let main = requests
        .iter()
        .find(|r| !declared_tools(r).is_empty())
        .expect("a request offering tools");
    let tools = declared_tools(main);
    eprintln!("declared tools: {tools:?}");
    assert!(tools.iter().any(|t| t == "run_shell_command"), "{tools:?}");
    let last_user = main["contents"]
        .as_array()
        .and_then(|c| c.iter().rev().find(|c| c["role"] == "user"))
        .expect("a user content");
    assert!(
        last_user.to_string().contains("Please say HELLO"),
        "{last_user}"
    );
    eprintln!("mock saw: {:?}", g.mock.paths());
    for event in ["BeforeAgent", "AfterAgent"] {
        let raw =
            std::fs::read_to_string(g.hooks.join(format!("{event}.jsonl"))).expect("hook output");
        eprint!("{event} hook stdin:\n{raw}");
    }
    assert_eq!(g.stop(), Vec::<u32>::new(), "Gemini's processes are gone");
}

#[test]
fn real_cli_shell_tool_asks_and_digit_one_runs_it() {
    let mut g = Gemini::start(Setup::default());
    let marker = marker(&g.work);
    g.tmux.submit("Please RUNSHELL now");
    let (dialog, _) = g.wait("the shell confirmation", is_shell_confirmation);
    eprintln!("shell confirmation:\n{dialog}");
    let command = format!("touch {}", marker.display());
    assert!(dialog.contains(&format!("? Shell  {command}")), "{dialog}");
    // Offered because the folder is trusted.
    assert!(dialog.contains("2. Allow for this session"), "{dialog}");
    assert!(dialog.contains("3. No, suggest changes (esc)"), "{dialog}");
    assert!(!marker.exists(), "nothing runs before the answer");
    save_fixture("gemini_shell_permission.txt", &dialog);

    // The Notification hook has already run when the dialog shows (Gemini waits for it).
    let notes = hook_payloads(&g.hooks, "Notification");
    assert_eq!(notes.len(), 1, "{notes:?}");
    let note = &notes[0];
    assert_eq!(note["hook_event_name"], "Notification");
    assert_eq!(note["notification_type"], "ToolPermission");
    assert_eq!(
        note["message"],
        "Tool Confirm Shell Command requires execution"
    );
    assert_eq!(note["details"]["type"], "exec");
    assert_eq!(note["details"]["title"], "Confirm Shell Command");
    assert_eq!(note["details"]["command"], command.as_str());
    assert_eq!(note["details"]["rootCommand"], "touch");

    // A digit answers at once, without Enter.
    let answered = Instant::now();
    g.answer("1");
    let (screen, _) = g.wait("the closing text", finished_tool);
    eprintln!("after answering 1 ({:?}):\n{screen}", answered.elapsed());
    assert!(marker.exists(), "the approved command ran");
    assert!(!is_shell_confirmation(&screen), "the dialog is gone");
    assert!(screen.contains(&format!("✓  Shell {command}")), "{screen}");

    let after = wait_hooks(&g.hooks, "AfterAgent", 1);
    assert_eq!(after[0]["prompt"], "Please RUNSHELL now");
    assert_eq!(after[0]["prompt_response"], THEN);
    // The tool result went back as a functionResponse carrying the call's id.
    let requests = g.mock.requests();
    let result = requests
        .iter()
        .filter_map(|r| r["contents"].as_array()?.last().cloned())
        .find(|c| c.to_string().contains("functionResponse"))
        .expect("a request with the tool result");
    eprintln!("tool result content: {result}");
    assert_eq!(result["role"], "user");
    assert_eq!(
        result["parts"][0]["functionResponse"]["name"],
        "run_shell_command"
    );
    for event in ["BeforeAgent", "Notification", "AfterAgent"] {
        let raw =
            std::fs::read_to_string(g.hooks.join(format!("{event}.jsonl"))).expect("hook output");
        eprint!("{event} hook stdin:\n{raw}");
    }
    assert_eq!(g.stop(), Vec::<u32>::new(), "Gemini's processes are gone");
}

/// Gemini runs the Notification hooks *before* it shows the confirmation and waits for them:
/// a slow hook holds the dialog back until it ends or its timeout (milliseconds) kills it, and
/// keys pressed meanwhile go to the composer, not to the dialog. clibot's hook must return at
/// once.
#[test]
fn real_cli_slow_notification_hook_holds_back_the_confirmation() {
    fn slow_hooks(dir: &Path) -> Value {
        json!({
            // `exec`, so the timeout's SIGTERM ends the sleep itself; a child left holding the
            // hook's stdout would make Gemini wait for it even after the timeout.
            "Notification": hook(dir, "Notification", "; exec sleep 30", 3000),
            "AfterAgent": hook(dir, "AfterAgent", "", 5000),
        })
    }
    let mut g = Gemini::start(Setup {
        hooks: Some(slow_hooks),
        ..Setup::default()
    });
    let marker = marker(&g.work);
    g.tmux.submit("Please RUNSHELL now");
    wait_hooks(&g.hooks, "Notification", 1);
    let notified = Instant::now();
    // A key sent now does not answer anything: it lands in the composer.
    g.tmux.ok(&["send-keys", "-t", TARGET, "1"]);
    let (waiting, _) = g.wait("the composer to show the key", |s| {
        s.lines().any(|l| l.trim_end() == " > 1")
    });
    eprintln!("while the Notification hook runs:\n{waiting}");
    assert!(!is_shell_confirmation(&waiting), "{waiting}");
    assert!(waiting.contains("clibot-Notification"), "{waiting}");
    assert!(!marker.exists(), "the key did not approve anything");

    let (dialog, _) = g.wait("the shell confirmation", is_shell_confirmation);
    let held = notified.elapsed();
    eprintln!("confirmation {held:?} after the hook started:\n{dialog}");
    // The 3000 ms timeout ended the hook: 3 seconds, not 30 (nor 3000).
    assert!(held >= Duration::from_millis(2500), "{held:?}");
    assert!(held < Duration::from_secs(15), "{held:?}");
    assert!(
        dialog.contains("Hook(s) [clibot-Notification] failed for event Notification"),
        "{dialog}"
    );
    g.answer("1");
    let (screen, _) = g.wait("the closing text", |s| s.contains(&format!("✦ {THEN}")));
    eprintln!("after answering:\n{screen}");
    assert!(marker.exists(), "the approved command ran");
    let after = wait_hooks(&g.hooks, "AfterAgent", 1);
    assert_eq!(after[0]["prompt_response"], THEN);
    // The stray key is still in the composer, to be sent with the next message.
    let (idle, _) = g.wait("the stray key in the idle composer", |s| {
        !is_busy(s) && s.lines().any(|l| l.trim_end() == " > 1")
    });
    assert!(!idle.contains(PLACEHOLDER), "{idle}");
    assert_eq!(g.stop(), Vec::<u32>::new(), "Gemini's processes are gone");
}

/// Whether Gemini would load a system settings file at `path`: it skips one unless the file and
/// every directory above it are owned by root and writable by no one else.
fn is_secure_system_path(path: &Path) -> bool {
    path.ancestors()
        .all(|p| std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0))
}

/// `GEMINI_CLI_SYSTEM_SETTINGS_PATH` points Gemini at another system settings file, whose hooks
/// are added to the user's. But Gemini only reads it from a root-owned path that no one else
/// can write, so an unprivileged program cannot use it to inject hooks per process.
#[test]
fn real_cli_system_settings_path_needs_a_root_owned_location() {
    fn system_file(root: &Path) -> PathBuf {
        root.join("system").join("settings.json")
    }
    let mut g = Gemini::start(Setup {
        hooks: None,
        env: |root| {
            let file = system_file(root);
            let hooks_dir = root.join("hooks");
            std::fs::create_dir_all(file.parent().expect("dir")).expect("mkdir system");
            let settings = json!({ "hooks": {
                "BeforeAgent": hook(&hooks_dir, "BeforeAgent", "", 5000),
                "AfterAgent": hook(&hooks_dir, "AfterAgent", "", 5000),
            }});
            std::fs::write(&file, settings.to_string()).expect("write system settings");
            vec![(
                "GEMINI_CLI_SYSTEM_SETTINGS_PATH".into(),
                file.display().to_string(),
            )]
        },
        ..Setup::default()
    });
    let root = g.dir.path().canonicalize().expect("root");
    let file = system_file(&root);
    let secure = is_secure_system_path(&file);
    eprintln!("{} is secure: {secure}", file.display());
    let warning = format!(
        "Security Warning: Skipping system settings file '{}'",
        file.display()
    );
    let start_screen = if secure {
        g.tmux.capture()
    } else {
        g.wait("the security warning", |s| s.contains(&warning)).0
    };
    eprintln!("start screen:\n{start_screen}");
    g.tmux.submit("Please say HELLO");
    g.wait("the reply", replied);
    if secure {
        // Only when the tests run as root from a root-only directory.
        let after = wait_hooks(&g.hooks, "AfterAgent", 1);
        assert_eq!(after[0]["prompt_response"], REPLY);
    } else {
        std::thread::sleep(Duration::from_secs(1));
        assert!(hook_payloads(&g.hooks, "BeforeAgent").is_empty());
        assert!(hook_payloads(&g.hooks, "AfterAgent").is_empty());
    }
    assert_eq!(g.stop(), Vec::<u32>::new(), "Gemini's processes are gone");
}
