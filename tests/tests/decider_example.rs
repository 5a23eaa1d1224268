//! The example decider shipped in `examples/decider/` (Python, standard library only), tested
//! by its own unittest suite against a local mock of the Anthropic and OpenAI-compatible APIs;
//! run from here so that the one test command covers it. It is also run once through the
//! real daemon's decider path: clibotd's input goes in, its output is a valid answer.

use std::path::PathBuf;
use std::process::Command;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("examples")
        .join("decider")
}

#[test]
fn the_example_deciders_own_tests_pass() {
    let out = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s"])
        .arg(examples())
        .args(["-p", "test_*.py"])
        .output()
        .expect("python3 runs (the suite needs python3: .ci/run installs it)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the decider's tests failed:\n{err}");
    // unittest reports on stderr: "Ran N tests ... OK".
    let ran: usize = err
        .lines()
        .find_map(|l| l.strip_prefix("Ran ")?.split(' ').next()?.parse().ok())
        .unwrap_or(0);
    assert!(ran >= 10, "only {ran} tests ran:\n{err}");
}

#[test]
fn without_a_key_the_example_decider_leaves_the_prompt_to_a_person() {
    let input = serde_json::json!({
        "session": "api", "cli": "claude", "dir": "/tmp/p",
        "prompt": {"id": "1", "kind": "permission", "text": "Do you want to proceed?",
                   "options": ["Yes", "No"], "subject": "git status"},
        "screen": "", "last_reply": ""
    });
    let mut child = Command::new("python3")
        .arg(examples().join("decide.py"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(input.to_string().as_bytes())
            .expect("write");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(v["ask"], true, "{v}");
    assert!(
        v["note"].as_str().is_some_and(|n| n.contains("API key")),
        "{v}"
    );
}

/// `[cli.quiz]`: bash whose lines ending in `?` after a `Which`/`What` are open questions.
const QUIZ: &str = r#"
[cli.quiz]
argv = ["bash", "--norc", "--noprofile"]
env = { PS1 = "$ ", HISTFILE = "/dev/null" }
submit_delay_ms = 50
quiet_ms = 300

[cli.quiz.patterns]
prompts = [
  { kind = "question", pattern = '(?m)^(?:Which|What) [^\n]*\?\s*$', answer = "line" },
]
"#;

/// With `[decider] answer_questions = true`, an open question goes to the example decider
/// (here against a mock model), whose words are typed as the answer and said in the event log;
/// a question the model leaves is left to a person, saying so. Real clibotd and tmux.
#[test]
fn the_example_decider_answers_an_open_question_in_words_or_leaves_it() {
    use clibot_tests::mock_llm::{MockLlm, Rule};
    use std::time::Duration;
    // The second question's request shows the first on its screen too: its rule comes first.
    let llm = MockLlm::start(vec![
        Rule::text(
            "What colour should the logo be?",
            r#"{"decision": "ask", "reason": "the user never said"}"#,
        ),
        Rule::text(
            "Which database should I use?",
            r#"{"answer": "PostgreSQL", "reason": "the README names it"}"#,
        ),
    ]);
    let decide = examples().join("decide.py");
    let mut h = clibot_tests::Harness::with_config(&format!(
        "{QUIZ}\n[decider]\ncommand = [\"python3\", {:?}]\ntimeout_ms = 15000\nanswer_questions = true\n",
        decide.display().to_string()
    ));
    h.start_daemon_env(
        &["OPENAI_API_KEY"],
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("ANTHROPIC_BASE_URL", &llm.url()),
        ],
    );
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "q", "--cli", "quiz", "--dir", &work]);
    h.wait_screen("q", "the shell", |s| s.contains('$'));
    h.ctl_ok(&[
        "send",
        "q",
        "read -r -p 'Which database should I use? ' db; echo \"chose: $db\"",
    ]);
    let r = h.wait_event("q", "the decider's words", Duration::from_secs(30), |e| {
        e["type"] == "prompt_resolved" && e["by"] == "decider"
    });
    assert_eq!(r["answer"], "PostgreSQL", "{r}");
    assert!(
        r["note"]
            .as_str()
            .is_some_and(|n| n.contains("answered by the decider: \"PostgreSQL\"")),
        "{r}"
    );
    h.wait_screen("q", "the words typed", |s| s.contains("chose: PostgreSQL"));

    h.ctl_ok(&[
        "send",
        "q",
        "read -r -p 'What colour should the logo be? ' c; echo \"colour: $c\"",
    ]);
    h.wait_event(
        "q",
        "the prompt left to a person",
        Duration::from_secs(30),
        |e| {
            e["text"].as_str().is_some_and(|t| {
                t.contains("the decider leaves this one to you: the user never said")
            })
        },
    );
    let screen = h.ctl_ok(&["screen", "q"]);
    assert!(
        !screen.lines().any(|l| l.starts_with("colour:")),
        "nothing typed: {screen}"
    );
}
