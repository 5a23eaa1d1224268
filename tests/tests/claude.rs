//! End to end with the real Claude Code (pinned in tests/node) driven by clibotd, offline,
//! against the mock model API: turn completion with the exact reply (Stop hook), permission
//! prompts with their options, answered through the waiting hook, by keys, or at the terminal.

use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::claude::{ClaudeHome, UNSET_ENV};
use clibot_tests::live::last_seq;
use clibot_tests::mock_llm::{MockLlm, Rule};
use serde_json::{Value, json};

struct Setup {
    h: Harness,
    mock: MockLlm,
    work: std::path::PathBuf,
}

/// A daemon whose `claude` CLI is the pinned Claude Code in a seeded private HOME, talking to
/// a mock with the rules `rules(work_dir)` gives; `daemon_extra` goes into `[daemon]`. The
/// session `cc` is spawned in the work directory.
fn setup(rules: impl Fn(&std::path::Path) -> Vec<Rule>, daemon_extra: &str) -> Setup {
    setup_with(rules, daemon_extra, "")
}

/// [`setup`] with `extra` appended to the config file.
fn setup_with(
    rules: impl Fn(&std::path::Path) -> Vec<Rule>,
    daemon_extra: &str,
    extra: &str,
) -> Setup {
    assert!(clibot_tests::claude::claude_available());
    let mut h = Harness::with_config("");
    let work = h.work.clone();
    let mock = MockLlm::start(rules(&work));
    let claude = ClaudeHome::new(&h.dir.path().join("claude"), &work, &mock.url());
    h.add_cli("claude", &claude.argv(), &claude.env(), daemon_extra);
    let mut text = std::fs::read_to_string(&h.config).expect("config");
    text.push_str(extra);
    std::fs::write(&h.config, text).expect("config");
    // The tmux server the daemon starts must not inherit a surrounding Claude Code's variables.
    h.start_daemon_without(UNSET_ENV);
    let w = work.display().to_string();
    h.ctl_ok(&["spawn", "cc", "--cli", "claude", "--dir", &w]);
    Setup { h, mock, work }
}

fn wait_event(h: &Harness, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    h.wait_event("cc", what, Duration::from_secs(60), pred)
}

fn wait_idle(h: &Harness) {
    wait_event(h, "the session to be ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
}

#[test]
fn real_cli_a_plain_reply_arrives_as_turn_completed_with_the_exact_text() {
    let reply = "Hello from the mock model.\nThis is line two.\n\n- bullet one\n- bullet two";
    let s = setup(|_| vec![Rule::text("say hello", reply)], "");
    wait_idle(&s.h);
    s.h.ctl_ok(&["send", "cc", "please say hello"]);
    let done = wait_event(&s.h, "turn_completed", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], reply);
    assert_eq!(done["source"], "hook");
    assert_eq!(s.h.ctl_ok(&["last", "cc"]), format!("{reply}\n"));
    // The order a user sees: input sent, working, then the reply.
    let kinds: Vec<String> =
        s.h.events()
            .iter()
            .filter(|e| e["session"] == "cc")
            .map(|e| match e["type"].as_str() {
                Some("state_changed") => format!("→{}", e["to"].as_str().unwrap_or("")),
                other => other.unwrap_or("").to_string(),
            })
            .collect();
    let sent = kinds
        .iter()
        .position(|k| k == "input_sent")
        .expect("input_sent");
    let working = kinds
        .iter()
        .skip(sent)
        .position(|k| k == "→working")
        .expect("working")
        + sent;
    let completed = kinds
        .iter()
        .position(|k| k == "turn_completed")
        .expect("completed");
    assert!(sent < working && working < completed, "{kinds:?}");
}

fn touch_rule(work: &std::path::Path, trigger: &str, file: &str) -> Rule {
    let cmd = format!("touch {}", work.join(file).display());
    Rule::tool(
        trigger,
        "Bash",
        json!({"command": cmd, "description": "Create a marker file"}),
        "All done: the marker exists.",
    )
}

#[test]
fn real_cli_a_tool_call_waits_with_its_options_and_yes_runs_it() {
    let s = setup(|w| vec![touch_rule(w, "make marker", "marker.txt")], "");
    wait_idle(&s.h);
    s.h.ctl_ok(&["send", "cc", "please make marker"]);
    let w = wait_event(&s.h, "waiting", |e| e["type"] == "waiting");
    assert_eq!(w["kind"], "permission");
    let subject = format!("touch {}", s.work.join("marker.txt").display());
    assert_eq!(w["subject"], subject.as_str());
    let options: Vec<String> = serde_json::from_value(w["options"].clone()).expect("options");
    assert!(
        options.len() >= 3 && options[0] == "Yes" && options.last().is_some_and(|o| o == "No"),
        "{options:?}"
    );
    assert_eq!(w["text"], "Do you want to proceed?");
    let id = w["prompt_id"].as_str().expect("id").to_string();
    s.h.ctl_ok(&["answer", "cc", "1", "--prompt", &id]);
    let done = wait_event(&s.h, "final reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "All done: the marker exists.");
    assert!(s.work.join("marker.txt").exists(), "the tool ran");
    let resolved = wait_event(&s.h, "resolved", |e| e["type"] == "prompt_resolved");
    assert_eq!(
        (resolved["by"].as_str(), resolved["answer"].as_str()),
        (Some("clibot"), Some("Yes"))
    );
    let err = s.h.ctl_err(&["answer", "cc", "1", "--prompt", &id]);
    assert!(err.contains("already resolved"), "{err}");
    no_phantom_prompt(&s.h);
    // What the turn cost, from Claude Code's transcript: two API calls (the tool call, the
    // answer), each 1000 in, 200 cache writes, 3000 cache reads and 7 out (the mock's).
    let u = wait_event(&s.h, "the turn's usage", |e| {
        e["type"] == "turn_usage" && e["turn_seq"] == done["seq"]
    });
    clibot_tests::live::assert_usage(&u, [2000, 14, 6000, 400, 2]);
    let v: Value =
        serde_json::from_str(&s.h.ctl_ok(&["usage", "--by", "cli", "--json"])).expect("json");
    assert_eq!(v["rows"][0]["key"], "claude", "{v:#}");
    assert_eq!(v["rows"][0]["output"], 14, "{v:#}");
    assert_eq!(
        v["windows"][0]["windows"],
        json!([]),
        "Claude Code's transcript tells no plan window: {v:#}"
    );
    let metrics = s.h.ctl_ok(&["metrics"]);
    assert!(
        metrics.contains("clibot_tokens_total{cli=\"claude\",kind=\"cache_read\"} 6000"),
        "{metrics}"
    );
}

/// A switch of account profile (`restart --profile work`, what the usage limit's **Switch to
/// work** does): the profile names another config directory (another account's login); the
/// conversation's transcript is carried there, Claude Code resumes it, and the next request
/// to the model holds the earlier exchange.
#[test]
fn real_cli_a_profile_switch_carries_the_conversation_to_the_other_account() {
    assert!(clibot_tests::claude::claude_available());
    let mut h = Harness::with_config("");
    let work = h.work.clone();
    let mock = MockLlm::start(vec![
        Rule::text("first question", "First answer."),
        Rule::text("second question", "Second answer."),
    ]);
    let claude = ClaudeHome::new(&h.dir.path().join("claude"), &work, &mock.url());
    // The other account: its own config directory, set up as a logged-in one is.
    let other = claude.home().join(".claude-work");
    std::fs::create_dir_all(&other).expect("mkdir");
    std::fs::copy(
        claude.home().join(".claude.json"),
        other.join(".claude.json"),
    )
    .expect("copy");
    h.add_cli("claude", &claude.argv(), &claude.env(), "");
    let mut text = std::fs::read_to_string(&h.config).expect("config");
    text.push_str(&format!(
        "\n[cli.claude.profiles.work]\nenv = {{ CLAUDE_CONFIG_DIR = \"{}\" }}\n",
        other.display()
    ));
    std::fs::write(&h.config, text).expect("config");
    h.start_daemon_without(UNSET_ENV);
    let w = work.display().to_string();
    h.ctl_ok(&["spawn", "cc", "--cli", "claude", "--dir", &w]);
    wait_idle(&h);
    h.ctl_ok(&["send", "cc", "the first question"]);
    let done = wait_event(&h, "the first answer", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "First answer.");
    let seq = last_seq(&h);
    let out = h.ctl_ok(&["restart", "cc", "--profile", "work"]);
    assert!(
        out.contains("restarted cc (claude) with profile work"),
        "{out}"
    );
    let told = wait_event(&h, "the switch told", |e| {
        e["seq"].as_u64().is_some_and(|n| n > seq)
            && e["type"] == "notice"
            && e["kind"] == "profile"
    });
    assert!(
        told["text"]
            .as_str()
            .is_some_and(|t| t.contains("its conversation resumed")),
        "{told}"
    );
    let show: Value = serde_json::from_str(&h.ctl_ok(&["show", "cc", "--json"])).expect("json");
    assert_eq!(show["profile"], "work", "{show:#}");
    let id = show["conversation_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let carried = std::fs::read_dir(other.join("projects"))
        .expect("the other account's projects")
        .filter_map(Result::ok)
        .any(|d| d.path().join(format!("{id}.jsonl")).is_file());
    assert!(
        carried,
        "the transcript {id}.jsonl is in the other account's home"
    );
    wait_event(&h, "ready again", |e| {
        e["seq"].as_u64().is_some_and(|n| n > seq)
            && e["type"] == "state_changed"
            && e["to"] == "idle"
    });
    h.ctl_ok(&["send", "cc", "the second question"]);
    let done = wait_event(&h, "the second answer", |e| {
        e["type"] == "turn_completed" && e["text"] == "Second answer."
    });
    assert_eq!(done["text"], "Second answer.");
    let asked = clibot_tests::live::requests_with(&mock, "the second question");
    assert!(
        asked
            .iter()
            .any(|r| r.contains("the first question") && r.contains("First answer.")),
        "the resumed conversation holds the first exchange: {asked:?}"
    );
}

/// A budget over Claude Code's turns (2000 tokens a day, told at half): the first turn
/// (1000 in, 200 cache writes, 7 out: the mock's) warns once, the second spends it, and a
/// third message waits in the queue, told why, until the machine's user lifts the budget;
/// then it is typed and answered. The turns are priced (an API key is set for the CLI, and
/// `[usage.prices]` prices its model).
#[test]
fn real_cli_a_budget_warns_then_holds_input_until_it_is_lifted() {
    let s = setup_with(
        |_| {
            vec![
                Rule::text("first", "First answer."),
                Rule::text("second", "Second answer."),
                Rule::text("third", "Third answer."),
            ]
        },
        "",
        // The pinned version's default model is newer than the release's price table: priced
        // by an override (a model nobody priced gets no money figure, never a guess).
        "\n[usage.prices.\"claude-opus-5\"]\ninput = 5.0\noutput = 25.0\n\n[[budgets]]\nname = \"daily\"\ncli = \"claude\"\ntokens = 2000\nwarn_at = 50\naction = \"hold\"\n",
    );
    wait_idle(&s.h);
    let notices = |h: &Harness| -> Vec<String> {
        h.events()
            .iter()
            .filter(|e| e["type"] == "notice" && e["kind"] == "budget")
            .filter_map(|e| e["text"].as_str().map(str::to_string))
            .collect()
    };
    s.h.ctl_ok(&["send", "cc", "the first question"]);
    let warned = wait_event(&s.h, "the warning", |e| {
        e["type"] == "notice" && e["kind"] == "budget"
    });
    let text = warned["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("budget daily: 60 % used") && text.contains("1.2k of 2.0k tokens today"),
        "{warned}"
    );
    let u = wait_event(&s.h, "the first turn's usage", |e| {
        e["type"] == "turn_usage"
    });
    assert!(u["usd"].as_f64().is_some_and(|d| d > 0.0), "priced: {u}");
    let seq = last_seq(&s.h);
    s.h.ctl_ok(&["send", "cc", "the second question"]);
    let spent = wait_event(&s.h, "the budget spent", |e| {
        e["seq"].as_u64().is_some_and(|n| n > seq) && e["type"] == "notice" && e["kind"] == "budget"
    });
    assert!(
        spent["text"].as_str().is_some_and(
            |t| t.contains("budget daily is spent") && t.contains("!!budget lift daily")
        ),
        "{spent}"
    );
    assert_eq!(notices(&s.h).len(), 2, "the warning is told once");
    let v: Value = serde_json::from_str(&s.h.ctl_ok(&["budgets", "--json"])).expect("json");
    assert_eq!(
        (&v[0]["name"], &v[0]["in_force"], &v[0]["action"]),
        (&json!("daily"), &json!(true), &json!("hold")),
        "{v:#}"
    );
    // Held: queued, told why, not typed.
    let seq = last_seq(&s.h);
    let out = s.h.ctl_ok(&["send", "cc", "the third question", "--json"]);
    assert!(
        out.contains("\"queued\": true") || out.contains("\"queued\":true"),
        "{out}"
    );
    wait_event(&s.h, "the hold told", |e| {
        e["seq"].as_u64().is_some_and(|n| n > seq)
            && e["type"] == "notice"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("this message waits"))
    });
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !s.h.events()
            .iter()
            .any(|e| e["seq"].as_u64().is_some_and(|n| n > seq)
                && (e["type"] == "input_sent" || e["type"] == "turn_started")),
        "held input was typed"
    );
    assert!(
        clibot_tests::live::requests_with(&s.mock, "the third question").is_empty(),
        "held input reached the model"
    );
    s.h.ctl_ok(&["budget", "lift", "daily"]);
    let done = wait_event(&s.h, "the held message answered", |e| {
        e["seq"].as_u64().is_some_and(|n| n > seq) && e["type"] == "turn_completed"
    });
    assert_eq!(done["text"], "Third answer.");
    let err = s.h.ctl_err(&["budget", "lift", "daily"]);
    assert!(
        err.contains("no budget named \"daily\" is in force"),
        "{err}"
    );
    let v: Value = serde_json::from_str(&s.h.ctl_ok(&["budgets", "--json"])).expect("json");
    assert_eq!(v[0]["lifted_by"], "local", "{v:#}");
    let usage: Value =
        serde_json::from_str(&s.h.ctl_ok(&["usage", "--by", "cli", "--json"])).expect("json");
    assert!(
        usage["rows"][0]["usd"].as_f64().is_some_and(|d| d > 0.0),
        "{usage:#}"
    );
    let csv = s.h.ctl_ok(&["usage", "--by", "cli", "--csv"]);
    assert!(
        csv.starts_with("cli,turns,calls,input,output,cache_read,cache_write,usd\nclaude,"),
        "{csv}"
    );
}

/// With a subscription (an OAuth token, no API key) Claude Code reads its plan's windows from
/// the API's headers and tells them only to a status-line command: clibot's reports them, and
/// the turn's usage carries them (the mock's 42 % of 5 h and 30 % of 7 d, with their resets).
/// No money is estimated for a plan.
#[test]
fn real_cli_a_subscription_tells_its_plan_windows_through_the_status_line() {
    assert!(clibot_tests::claude::claude_available());
    let mut h = Harness::with_config("");
    let work = h.work.clone();
    let mock = MockLlm::start(vec![Rule::text("say hello", "Hello.")]);
    let claude = ClaudeHome::new(&h.dir.path().join("claude"), &work, &mock.url());
    let mut env: Vec<(String, String)> = claude
        .env()
        .into_iter()
        .filter(|(k, _)| k != "ANTHROPIC_API_KEY")
        .collect();
    env.push(("CLAUDE_CODE_OAUTH_TOKEN".into(), "sk-ant-oat01-mock".into()));
    h.add_cli("claude", &claude.argv(), &env, "");
    h.start_daemon_without(UNSET_ENV);
    let w = work.display().to_string();
    h.ctl_ok(&["spawn", "cc", "--cli", "claude", "--dir", &w]);
    wait_idle(&h);
    h.ctl_ok(&["send", "cc", "please say hello"]);
    let done = wait_event(&h, "the reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "Hello.");
    let u = wait_event(&h, "the turn's usage", |e| {
        e["type"] == "turn_usage" && e["turn_seq"] == done["seq"]
    });
    let windows: Vec<(String, f64)> = u["windows"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|w| {
                    (
                        w["name"].as_str().unwrap_or_default().to_string(),
                        w["used_percent"].as_f64().unwrap_or(-1.0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        windows,
        vec![("5h".to_string(), 42.0), ("7d".to_string(), 30.0)],
        "{u}"
    );
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let reset = u["windows"][0]["resets_at_ms"].as_i64().unwrap_or(0);
    assert!(
        (reset - now_ms - 3_600_000).abs() < 120_000,
        "the 5h window resets in an hour: {u}"
    );
    assert!(u["usd"].is_null(), "no money for a plan: {u}");
    let metrics = h.ctl_ok(&["metrics"]);
    assert!(
        metrics.contains("clibot_plan_window_used_ratio{cli=\"claude\",window=\"5h\"} 0.42"),
        "{metrics}"
    );
}

/// A prompt answered through its hook is resolved by that answer: the dialog Claude Code is
/// still closing on screen is not a second prompt, and nobody "answered at the terminal".
fn no_phantom_prompt(h: &Harness) {
    std::thread::sleep(Duration::from_millis(500));
    let events = h.events();
    let waiting = events.iter().filter(|e| e["type"] == "waiting").count();
    let resolved: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "prompt_resolved")
        .collect();
    assert_eq!(waiting, 1, "one prompt, published once: {events:#?}");
    assert_eq!(resolved.len(), 1, "{resolved:#?}");
    assert_ne!(resolved[0]["by"], "terminal", "{resolved:#?}");
}

/// A session whose mock makes `marker` with a touch (an allow rule approves it) on "make marker"
/// and removes `build` with `rm -rf` (the guard keeps it for a person) on "clean up".
fn rule_and_guard(marker: &str) -> Setup {
    setup_with(
        |w| {
            vec![
                touch_rule(w, "make marker", marker),
                Rule::tool(
                    "clean up",
                    "Bash",
                    json!({"command": format!("rm -rf {}", w.join("build").display()), "description": "Remove the build"}),
                    "Cleaned.",
                ),
            ]
        },
        "",
        "\n[[rules]]\ncli = \"claude\"\ncommand = [\"touch *\", \"rm *\"]\naction = \"allow\"\n",
    )
}

#[test]
fn real_cli_an_allow_rule_approves_a_bash_command_and_the_guard_still_asks_for_a_dangerous_one() {
    let s = rule_and_guard("ruled.txt");
    std::fs::create_dir_all(s.work.join("build")).expect("mkdir");
    wait_idle(&s.h);
    s.h.ctl_ok(&["send", "cc", "please make marker"]);
    let done = wait_event(&s.h, "final reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "All done: the marker exists.");
    assert!(
        s.work.join("ruled.txt").exists(),
        "the rule approved the tool"
    );
    let r = wait_event(&s.h, "resolved", |e| e["type"] == "prompt_resolved");
    assert_eq!(
        (r["by"].as_str(), r["answer"].as_str()),
        (Some("rule 1"), Some("Yes"))
    );
    let subject = format!("touch {}", s.work.join("ruled.txt").display());
    assert_eq!(
        r["note"],
        format!("auto-approved by rule 1: {subject}").as_str()
    );
    let w = wait_event(&s.h, "the ruled prompt", |e| e["type"] == "waiting");
    assert_eq!(w["auto"], "rule 1");
    assert_eq!(w["subject_kind"], "command");
    no_phantom_prompt(&s.h);

    // rm -rf matches the rule, but the guard keeps it for a person.
    let since = last_seq(&s.h);
    s.h.ctl_ok(&["send", "cc", "please clean up"]);
    let w = wait_event(&s.h, "the guarded prompt", |e| {
        e["type"] == "waiting" && e["seq"].as_u64() > Some(since)
    });
    assert_eq!(w["warning"], "a recursive forced delete (rm -rf)");
    assert_eq!(w["auto"], "");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        s.work.join("build").exists(),
        "nothing ran without a person"
    );
    let list: Value = serde_json::from_str(&s.h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(
        list[0]["state"], "waiting",
        "still waiting for a person: {list:#}"
    );
    s.h.ctl_ok(&["answer", "cc", "no"]);
    wait_event(&s.h, "the turn ends", |e| {
        e["type"] == "turn_completed" && e["seq"].as_u64() > Some(since)
    });
    assert!(s.work.join("build").exists(), "refused");
}

#[test]
fn real_cli_answering_no_is_handled() {
    let s = setup(|w| vec![touch_rule(w, "make marker", "refused.txt")], "");
    wait_idle(&s.h);
    s.h.ctl_ok(&["send", "cc", "please make marker"]);
    wait_event(&s.h, "waiting", |e| e["type"] == "waiting");
    s.h.ctl_ok(&["answer", "cc", "no"]);
    // Denied through the hook: the model is told, the turn ends normally.
    let done = wait_event(&s.h, "turn ends", |e| e["type"] == "turn_completed");
    assert!(done["text"].is_string());
    assert!(!s.work.join("refused.txt").exists(), "the tool did not run");
    let resolved = wait_event(&s.h, "resolved", |e| e["type"] == "prompt_resolved");
    assert_eq!(resolved["answer"], "No");
}

#[test]
fn real_cli_answering_at_the_terminal_resolves_the_prompt() {
    let s = setup(|w| vec![touch_rule(w, "make marker", "desk.txt")], "");
    wait_idle(&s.h);
    s.h.ctl_ok(&["send", "cc", "please make marker"]);
    let w = wait_event(&s.h, "waiting", |e| e["type"] == "waiting");
    // The person at the desk reads the dialog, then presses 1 in the real terminal.
    std::thread::sleep(Duration::from_millis(1000));
    let mut desk = clibot_tests::desk::Desk::attach(&s.h, "cc");
    desk.type_text("1");
    let resolved = wait_event(&s.h, "resolved at the terminal", |e| {
        e["type"] == "prompt_resolved"
    });
    assert_eq!(
        (resolved["by"].as_str(), resolved["prompt_id"].as_str()),
        (Some("terminal"), w["prompt_id"].as_str())
    );
    wait_event(&s.h, "final reply", |e| e["type"] == "turn_completed");
    assert!(s.work.join("desk.txt").exists());
    let err = s.h.ctl_err(&["answer", "cc", "1"]);
    assert!(err.contains("not waiting"), "{err}");
}

#[test]
fn real_cli_when_the_hook_stops_waiting_the_answer_goes_by_keys() {
    // The permission hook gives up after 1 s and leaves the dialog to keys.
    let s = setup(
        |w| vec![touch_rule(w, "make marker", "keys.txt")],
        "permission_wait_ms = 1000",
    );
    wait_idle(&s.h);
    s.h.ctl_ok(&["send", "cc", "please make marker"]);
    wait_event(&s.h, "waiting", |e| e["type"] == "waiting");
    std::thread::sleep(Duration::from_millis(2500));
    s.h.ctl_ok(&["answer", "cc", "yes"]);
    wait_event(&s.h, "final reply", |e| e["type"] == "turn_completed");
    assert!(
        s.work.join("keys.txt").exists(),
        "the tool ran after a keystroke answer"
    );
}

/// The newest model request that carries `text` (Claude Code also sends requests of its own,
/// such as titles).
fn latest_request_with(mock: &MockLlm, text: &str) -> String {
    mock.requests()
        .iter()
        .map(Value::to_string)
        .rfind(|r| r.contains(text))
        .unwrap_or_default()
}

#[test]
fn real_cli_a_restart_resumes_the_conversation_and_fresh_starts_a_new_one() {
    let s = setup(
        |_| {
            vec![
                Rule::text("say hello", "Hello from the mock model."),
                Rule::text("say again", "Again."),
            ]
        },
        "",
    );
    wait_idle(&s.h);
    s.h.ctl_ok(&["send", "cc", "please say hello"]);
    wait_event(&s.h, "first reply", |e| e["type"] == "turn_completed");
    // Scripts see the conversation the session continues.
    let list: serde_json::Value =
        serde_json::from_str(&s.h.ctl_ok(&["list", "--json"])).expect("json");
    let conversation = list[0]["conversation_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!conversation.is_empty(), "{list}");
    assert!(s.h.ctl_ok(&["show", "cc"]).contains(&conversation));

    // The CLI is ended and started again in a new tmux session, continuing its conversation.
    let mark = last_seq(&s.h);
    let out = s.h.ctl_ok(&["restart", "cc"]);
    assert!(out.contains("resuming"), "{out}");
    wait_event(&s.h, "ready again", |e| {
        e["seq"].as_u64() > Some(mark) && e["type"] == "state_changed" && e["to"] == "idle"
    });
    s.h.ctl_ok(&["send", "cc", "please say again"]);
    let done = wait_event(&s.h, "reply after the restart", |e| {
        e["seq"].as_u64() > Some(mark) && e["type"] == "turn_completed"
    });
    assert_eq!(done["text"], "Again.");
    let last = latest_request_with(&s.mock, "please say again");
    assert!(
        last.contains("please say hello") && last.contains("Hello from the mock model."),
        "the model saw the earlier exchange: {last}"
    );

    // --fresh: a new conversation, without the earlier exchange.
    let mark = last_seq(&s.h);
    s.h.ctl_ok(&["restart", "cc", "--fresh"]);
    wait_event(&s.h, "ready after a fresh restart", |e| {
        e["seq"].as_u64() > Some(mark) && e["type"] == "state_changed" && e["to"] == "idle"
    });
    s.h.ctl_ok(&["send", "cc", "please say again"]);
    wait_event(&s.h, "reply in the new conversation", |e| {
        e["seq"].as_u64() > Some(mark) && e["type"] == "turn_completed"
    });
    let last = latest_request_with(&s.mock, "please say again");
    assert!(!last.contains("please say hello"), "{last}");
}

/// Five messages, each sent the instant the previous reply lands (as a phone does), with a
/// message typed at the desk in between: five replies and the desk's, each once, and the
/// session idle at the end. Claude Code used to wedge here after its first reply.
#[test]
fn real_cli_messages_sent_the_instant_each_reply_lands_all_get_replies() {
    let s = setup(|_| clibot_tests::live::numbered_rules(5), "");
    wait_idle(&s.h);
    clibot_tests::live::rapid_turns(&s.h, "cc", 5, true, Duration::from_secs(60));
}

/// The same on a loaded machine: a busy loop on every core, so the TUI draws late.
#[test]
fn real_cli_messages_sent_the_instant_each_reply_lands_all_get_replies_under_load() {
    let s = setup(|_| clibot_tests::live::numbered_rules(5), "");
    wait_idle(&s.h);
    let _load = clibot_tests::live::CpuLoad::start();
    clibot_tests::live::rapid_turns(&s.h, "cc", 5, true, Duration::from_secs(120));
}

/// The registry is lost (a corrupt sessions.json and its previous version) while the daemon is
/// down: the session is recovered from tmux with its hook token, so Claude Code's hooks are
/// accepted and its turns still complete by the Stop hook with the exact reply.
#[test]
fn real_cli_a_session_recovered_after_a_lost_registry_keeps_its_hooks() {
    let mut s = setup(|_| clibot_tests::live::numbered_rules(2), "");
    wait_idle(&s.h);
    s.h.ctl_ok(&["send", "cc", "please answer 1"]);
    wait_event(&s.h, "first reply", |e| e["type"] == "turn_completed");
    s.h.kill_daemon();
    // Its previous version too: nothing is left but tmux.
    for f in ["sessions.json", "sessions.json.prev"] {
        std::fs::write(s.h.state_dir.join(f), "{ not json").expect("corrupt");
    }
    s.h.start_daemon_without(UNSET_ENV);
    let status = s.h.ctl_ok(&["status"]);
    assert!(status.contains("recovered from tmux"), "{status}");
    assert!(!status.contains("no hook token"), "{status}");
    let mark = last_seq(&s.h);
    s.h.ctl_ok(&["send", "cc", "please answer 2"]);
    let done = wait_event(&s.h, "the reply after recovery", |e| {
        e["seq"].as_u64() > Some(mark) && e["type"] == "turn_completed"
    });
    assert_eq!(done["text"], "reply number 2");
    assert_eq!(done["source"], "hook", "the Stop hook was accepted");
}

/// The daemon stopped (TERM / kill -9) while Claude Code's model is still answering: its Stop
/// hook may find no daemon, yet the turn is reported once when it ends, and the next runs.
fn real_cli_restart_mid_turn(kill: bool) {
    let mut s = setup(
        |_| {
            vec![
                Rule::text("first question", "First answer."),
                Rule::text("second question", "Second answer."),
            ]
        },
        "",
    );
    wait_idle(&s.h);
    clibot_tests::live::restart_mid_turn(
        &mut s.h,
        &s.mock,
        "cc",
        ("the first question", "First answer."),
        ("the second question", "Second answer."),
        kill,
        UNSET_ENV,
        Duration::from_secs(60),
    );
}

#[test]
fn real_cli_a_turn_across_a_daemon_term_is_reported_once() {
    real_cli_restart_mid_turn(false);
}

#[test]
fn real_cli_a_turn_across_a_daemon_kill_9_is_reported_once() {
    real_cli_restart_mid_turn(true);
}

/// Claude Code started by hand in a tmux server that is not clibot's: `discover` finds it (its
/// version from the package, its pane, its conversation from its transcript), and `resume`
/// continues that conversation in a managed session — the model sees the earlier exchange —
/// while the original is asked to quit.
#[test]
fn real_cli_a_claude_started_outside_clibot_is_discovered_and_resumed_with_its_history() {
    assert!(clibot_tests::claude::claude_available());
    let mut h = Harness::with_config("");
    let work = h.work.clone();
    let mock = MockLlm::start(vec![
        Rule::text("say hello", "Hello from the mock model."),
        Rule::text("say again", "Again."),
    ]);
    let claude = ClaudeHome::new(&h.dir.path().join("claude"), &work, &mock.url());
    h.add_cli("claude", &claude.argv(), &claude.env(), "");
    h.start_daemon_without(UNSET_ENV);

    // Its own tmux server, killed when the driver goes.
    let desk = clibot_tests::tmux_driver::TmuxDriver {
        socket: h.dir.path().join("desk.sock"),
        target: "desk",
        unset: UNSET_ENV,
    };
    let w = work.display().to_string();
    desk.start(&w, &claude.env(), &claude.argv());
    let idle = |s: &str| s.contains("? for shortcuts") && !s.contains("esc to interrupt");
    desk.wait("the idle prompt", Duration::from_secs(60), idle);
    desk.submit("please say hello");
    desk.wait("the reply", Duration::from_secs(60), |s| {
        s.contains("Hello from the mock model.") && idle(s)
    });

    let found: Value = serde_json::from_str(&h.ctl_ok(&["discover", "--json"])).expect("json");
    let found = found
        .as_array()
        // Other tests' CLIs run on this machine too: this one is the CLI in this work dir.
        .and_then(|a| {
            a.iter()
                .find(|f| f["cli"] == "claude" && f["dir"] == w.as_str())
                .cloned()
        })
        .unwrap_or_else(|| panic!("claude not discovered: {found:#}"));
    assert_eq!(
        found["version"],
        clibot_tests::tested_version("claude").as_str(),
        "{found}"
    );
    assert_eq!(found["where"]["kind"], "tmux", "{found}");
    assert_eq!(
        found["where"]["server"],
        desk.socket.display().to_string().as_str()
    );
    assert_eq!(found["dir"], w.as_str());
    let conversation = found["conversation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no conversation: {found}"))
        .to_string();
    assert_eq!(found["actions"], json!(["adopt", "resume"]));
    let pid = found["pid"].as_u64().expect("pid");

    let id = found["id"].as_str().expect("id").to_string();
    let out = h.ctl_ok(&["resume", &id, "--name", "cc", "--quit"]);
    assert!(out.contains(&conversation), "{out}");
    wait_idle(&h);
    h.ctl_ok(&["send", "cc", "please say again"]);
    let done = wait_event(&h, "the reply in the resumed conversation", |e| {
        e["type"] == "turn_completed"
    });
    assert_eq!(done["text"], "Again.");
    let last = latest_request_with(&mock, "please say again");
    assert!(
        last.contains("please say hello") && last.contains("Hello from the mock model."),
        "the model saw the exchange held at the desk: {last}"
    );
    // The original was asked to quit.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    {
        assert!(
            std::time::Instant::now() < deadline,
            "claude {pid} still runs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn real_cli_cancel_interrupts_a_long_turn_and_the_next_one_runs() {
    let s = setup(|_| clibot_tests::live::cancel_rules(), "");
    wait_idle(&s.h);
    clibot_tests::live::cancel_long_turn(&s.h, "cc", &s.mock, "keys Escape");
}

/// An idle Claude Code hibernates; a message from the phone wakes it: the chat is told
/// "waking cc…" once, Claude Code resumes its conversation and the message gets its reply.
#[test]
fn real_cli_a_hibernated_session_is_woken_by_a_chat_message_and_keeps_its_history() {
    use clibot_tests::fake_telegram::{self, texts};
    const ADMIN: i64 = 100;
    let s = setup_with(
        |_| clibot_tests::live::wake_rules(),
        "",
        &format!("\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"),
    );
    wait_idle(&s.h);
    let (tg, _g) = fake_telegram::with_gateway(&s.h);
    tg.push_message(ADMIN, ADMIN, "Admin", "!!use cc");
    tg.wait_sent("bound", |m| {
        texts(m, ADMIN)
            .iter()
            .any(|t| t.contains("now talks to cc"))
    });
    clibot_tests::live::hibernate_and_wake(&s.h, "cc", "claude", &s.mock, |text| {
        tg.push_message(ADMIN, ADMIN, "Admin", text);
    });
    let sent = tg.wait_sent("the reply in the chat", |m| {
        texts(m, ADMIN)
            .iter()
            .any(|t| t.contains("Again, after the wake."))
    });
    let all = texts(&sent, ADMIN);
    assert!(all.iter().any(|t| t.contains("💤")), "{all:#?}");
    assert_eq!(
        all.iter().filter(|t| t.contains("waking cc")).count(),
        1,
        "{all:#?}"
    );
}

/// A photo sent from the phone reaches Claude Code as a path in its session's directory, with
/// the caption: the model sees the line naming it.
#[test]
fn real_cli_a_photo_from_the_phone_reaches_claude_by_path() {
    use clibot_tests::fake_telegram::{self, texts};
    const ADMIN: i64 = 100;
    let s = setup_with(
        |_| vec![Rule::text("what is in this picture", "A picture of bytes.")],
        "",
        &format!("\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"),
    );
    wait_idle(&s.h);
    let (tg, _g) = fake_telegram::with_gateway(&s.h);
    tg.push_message(ADMIN, ADMIN, "Admin", "!!use cc");
    tg.wait_sent("bound", |m| {
        texts(m, ADMIN)
            .iter()
            .any(|t| t.contains("now talks to cc"))
    });
    // A tiny PNG.
    let png: Vec<u8> = [
        &b"\x89PNG\r\n\x1a\n"[..],
        &[0, 0, 0, 13],
        b"IHDR",
        &[
            0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0, 0x90, 0x77, 0x53, 0xde,
        ],
    ]
    .concat();
    tg.push_file(ADMIN, ADMIN, "photo", "", &png, "what is in this picture?");
    let done = wait_event(&s.h, "the reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "A picture of bytes.");
    let asked = latest_request_with(&s.mock, "what is in this picture?");
    assert!(
        asked.contains("[file from telegram:100: .clibot/inbox/") && asked.contains("-photo.jpg]"),
        "the model saw the file's path: {asked}"
    );
    let stored: Vec<_> = std::fs::read_dir(s.work.join(".clibot/inbox"))
        .expect("inbox")
        .flatten()
        .collect();
    assert_eq!(stored.len(), 1);
    assert_eq!(std::fs::read(stored[0].path()).expect("read"), png);
    tg.wait_sent("the reply in the chat", |m| {
        texts(m, ADMIN)
            .iter()
            .any(|t| t.contains("A picture of bytes."))
    });
}

/// A dialog refused at the desk leaves `⎿ Interrupted · What should Claude do instead?` on
/// screen; each later turn's dialog, and a phone message sent 50–300 ms after the request that
/// raised it, must not meet: the message waits for the turn, the dialog is published as a
/// prompt (listed by `pending`) and is answered by nobody but a person.
#[test]
fn real_cli_after_a_refusal_at_the_desk_a_message_never_answers_the_next_dialog() {
    let gaps = [50u64, 150, 300];
    let s = setup(
        |w| {
            let mut rules = vec![touch_rule(w, "make first", "first.txt")];
            for (i, _) in gaps.iter().enumerate() {
                rules.push(touch_rule(
                    w,
                    &format!("make round{i}"),
                    &format!("round{i}.txt"),
                ));
                rules.push(Rule::text(
                    format!("what about round{i}"),
                    format!("Round {i} is fine."),
                ));
            }
            rules
        },
        "",
    );
    wait_idle(&s.h);
    s.h.ctl_ok(&["send", "cc", "please make first"]);
    wait_event(&s.h, "the first dialog", |e| e["type"] == "waiting");
    // Refused at the desk: "No" (the last option).
    std::thread::sleep(Duration::from_millis(800));
    let mut desk = clibot_tests::desk::Desk::attach(&s.h, "cc");
    desk.type_text("4");
    s.h.wait_screen("cc", "the refusal on screen", |t| t.contains("Interrupted"));
    std::thread::sleep(Duration::from_millis(1500));
    for (i, gap) in gaps.iter().enumerate() {
        let since = last_seq(&s.h);
        // The second message goes while the first is still being typed, as two chats (or a
        // phone and a script) would send them.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                s.h.ctl_ok(&["send", "cc", &format!("please make round{i}")])
            });
            std::thread::sleep(Duration::from_millis(*gap));
            s.h.ctl_ok(&["send", "cc", &format!("what about round{i}")]);
        });
        let w =
            s.h.wait_event("cc", "the round's dialog", Duration::from_secs(60), |e| {
                e["type"] == "waiting" && e["seq"].as_u64().is_some_and(|q| q > since)
            });
        assert!(
            w["subject"]
                .as_str()
                .is_some_and(|t| t.contains(&format!("round{i}.txt"))),
            "{w}"
        );
        // Nobody answers for a while: nothing runs, the message waits, the prompt is pending.
        std::thread::sleep(Duration::from_secs(3));
        assert!(
            !s.work.join(format!("round{i}.txt")).exists(),
            "the command ran unapproved (gap {gap} ms)"
        );
        let pending = s.h.ctl_ok(&["pending"]);
        let events = s.h.events();
        assert!(
            pending.contains("cc"),
            "gap {gap} ms: {pending}\n{}\n{:#?}",
            String::from_utf8_lossy(&s.h.ctl(&["screen", "cc"]).stdout),
            events
                .iter()
                .filter(|e| e["seq"].as_u64() > Some(since))
                .collect::<Vec<_>>()
        );
        let after = |e: &&Value| e["seq"].as_u64().is_some_and(|q| q > since);
        assert!(
            !events
                .iter()
                .filter(after)
                .any(|e| e["type"] == "prompt_resolved"),
            "gap {gap} ms: nobody answered: {events:#?}"
        );
        assert!(
            !events
                .iter()
                .filter(after)
                .any(|e| e["type"] == "input_sent"
                    && e["text"] == format!("what about round{i}").as_str()),
            "gap {gap} ms: the message was typed into the turn"
        );
        assert!(
            !events
                .iter()
                .filter(after)
                .any(|e| e["type"] == "state_changed" && e["reason"] == "interrupted"),
            "gap {gap} ms: the turn flapped to idle on the old refusal"
        );
        // A person answers; the turn ends; then the message is typed and answered.
        s.h.ctl_ok(&["answer", "cc", "1"]);
        s.h.wait_event("cc", "the message's reply", Duration::from_secs(60), |e| {
            e["type"] == "turn_completed" && e["text"] == format!("Round {i} is fine.").as_str()
        });
        assert!(s.work.join(format!("round{i}.txt")).exists());
    }
    assert!(!s.work.join("first.txt").exists());
}

/// Claude Code's own default, auto mode, asks nothing: a session started so is ready as soon
/// as its footer shows (not after a long wait for a footer it never draws), and its chats are
/// told once that no permission prompt will reach them.
#[test]
fn real_cli_a_session_in_auto_mode_is_ready_and_says_that_it_asks_nothing() {
    assert!(clibot_tests::claude::claude_available());
    let mut h = Harness::with_config("");
    let work = h.work.clone();
    let mock = MockLlm::start(vec![Rule::text("hello", "hi")]);
    let claude = ClaudeHome::new(&h.dir.path().join("claude"), &work, &mock.url());
    let argv = vec![clibot_tests::claude::claude_bin().display().to_string()];
    h.add_cli("claude", &argv, &claude.env(), "");
    h.start_daemon_without(UNSET_ENV);
    let started = std::time::Instant::now();
    h.ctl_ok(&[
        "spawn",
        "cc",
        "--cli",
        "claude",
        "--dir",
        &work.display().to_string(),
    ]);
    wait_idle(&h);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "ready after {:?}",
        started.elapsed()
    );
    let told = wait_event(&h, "the mode notice", |e| {
        e["type"] == "notice" && e["kind"] == "mode"
    });
    assert!(
        told["text"]
            .as_str()
            .is_some_and(|t| t.contains("auto mode on")),
        "{told}"
    );
    h.ctl_ok(&["send", "cc", "hello"]);
    let done = wait_event(&h, "the reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "hi");
    let notices = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "notice" && e["kind"] == "mode")
        .count();
    assert_eq!(notices, 1, "told once");
}

/// A job drives the real Claude Code while nobody watches: its tool prompt is answered by a
/// rule and the run ends done; a second job's dangerous command waits for a person (the guard),
/// the run stays open until then, and the job says so.
#[test]
fn real_cli_a_jobs_prompt_is_answered_by_a_rule_and_a_guarded_one_waits_for_a_person() {
    let s = rule_and_guard("by-job.txt");
    std::fs::create_dir_all(s.work.join("build")).expect("mkdir");
    wait_idle(&s.h);
    s.h.ctl_ok(&[
        "jobs",
        "add",
        "marker",
        "--session",
        "cc",
        "--prompt",
        "please make marker",
        "--after",
        "1s",
    ]);
    let done = wait_event(&s.h, "the job's end", |e| e["type"] == "job_finished");
    assert_eq!(done["outcome"], "done", "{done}");
    assert!(
        s.work.join("by-job.txt").exists(),
        "the rule approved the job's tool"
    );
    let r = wait_event(&s.h, "resolved", |e| e["type"] == "prompt_resolved");
    assert_eq!(r["by"], "rule 1");

    s.h.ctl_ok(&[
        "jobs",
        "add",
        "clean",
        "--session",
        "cc",
        "--prompt",
        "please clean up",
        "--every",
        "1h",
    ]);
    let since = last_seq(&s.h);
    s.h.ctl_ok(&["jobs", "run", "clean"]);
    let w = wait_event(&s.h, "the guarded prompt", |e| {
        e["type"] == "waiting" && e["seq"].as_u64() > Some(since)
    });
    assert_eq!(w["warning"], "a recursive forced delete (rm -rf)");
    assert_eq!(w["auto"], "");
    let j: Value =
        serde_json::from_str(&s.h.ctl_ok(&["jobs", "show", "clean", "--json"])).expect("json");
    assert_eq!(
        j["running"]["run"], 1,
        "the run waits with its prompt: {j:#}"
    );
    assert!(
        s.work.join("build").exists(),
        "nothing ran without a person"
    );
    s.h.ctl_ok(&["answer", "cc", "no"]);
    let end = wait_event(&s.h, "the guarded job's end", |e| {
        e["type"] == "job_finished" && e["job"] == "clean"
    });
    assert_eq!(end["outcome"], "done", "{end}");
    assert!(s.work.join("build").exists(), "refused by the person");
}
