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
