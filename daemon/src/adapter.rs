//! What differs between CLIs, behind one small trait: how to launch one so that its hooks reach
//! the daemon, what its hook payloads mean, and how a decision goes back through a hook.
//! Screens are read by [`crate::detect`] with the CLI's pattern pack; answers by keys come from
//! the prompt itself ([`answer_strokes`]).

use serde_json::{Value, json};

use crate::detect::AnswerStyle;
use crate::keys::Key;
use crate::session::Prompt;

/// What a launch needs to know.
pub struct LaunchContext<'a> {
    /// The shell command a hook runs (`'/path/clibotctl' hook --cli NAME`).
    pub hook_command: &'a str,
    /// The CLI session id clibot chose (a UUID).
    pub cli_session_id: &'a str,
    /// How long a permission hook may wait for a person, in seconds.
    pub permission_wait_secs: u64,
}

/// Extra arguments and environment for a launch.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Launch {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// What a hook call means.
#[derive(Debug, Clone, PartialEq)]
pub enum HookSignal {
    /// The CLI accepted the user's input: a turn started.
    TurnStarted,
    /// A turn ended with this final reply.
    TurnCompleted { text: String },
    /// The CLI asks for permission or asks a question; the hook can carry the answer back.
    Prompt {
        kind: String,
        text: String,
        options: Vec<String>,
        subject: String,
    },
    /// The turn ended with an error.
    Error { kind: String, message: String },
    /// Nothing the daemon acts on.
    Ignore,
}

/// A chosen answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// Option index (0-based).
    Option(usize),
    /// Free text for an open question.
    Text(String),
}

/// One CLI's integration.
pub trait Adapter: Send + Sync {
    /// "generic", "claude", ...
    fn name(&self) -> &'static str;
    /// True when turn completion comes from a hook; otherwise from output going quiet.
    fn completes_by_hook(&self) -> bool {
        false
    }
    /// Arguments and environment that wire the CLI's hooks to the daemon.
    fn launch(&self, _ctx: &LaunchContext<'_>) -> Launch {
        Launch::default()
    }
    /// Interprets a hook call.
    fn hook(&self, _event: &str, _payload: &Value) -> HookSignal {
        HookSignal::Ignore
    }
    /// The hook's output that answers `prompt` with `choice`, when the CLI accepts answers that
    /// way (the hook is then still waiting).
    fn decision(&self, _prompt: &Prompt, _choice: &Choice, _payload: &Value) -> Option<String> {
        None
    }
    /// The final reply of a turn whose completion hook nobody received (the daemon was down),
    /// from the CLI's own records.
    fn recover_reply(
        &self,
        _rec: &crate::session::SessionRecord,
        _cli: Option<&crate::config::CliSpec>,
    ) -> Option<String> {
        None
    }
}

/// Any program: completion by quiescence, prompts by patterns.
pub struct Generic;

impl Adapter for Generic {
    fn name(&self) -> &'static str {
        "generic"
    }
}

/// The adapter for a CLI, by adapter name.
pub fn adapter(name: &str) -> Box<dyn Adapter> {
    match name {
        "claude" => Box::new(Claude),
        _ => Box::new(Generic),
    }
}

/// Known adapter names, for config validation.
pub const ADAPTERS: &[&str] = &["generic", "claude"];

/// Turns the person's answer into a choice: an option number, a word ("yes", "no",
/// "always"), an option's label, or free text where the prompt takes it.
pub fn parse_choice(answer: &str, p: &Prompt) -> Result<Choice, String> {
    let a = answer.trim();
    let n = p.options.len();
    if a.is_empty() {
        return Err("the answer is empty: give an option number or text".into());
    }
    if let Ok(i) = a.parse::<usize>() {
        if (1..=n).contains(&i) {
            return Ok(Choice::Option(i - 1));
        }
        return Err(format!(
            "there is no option {i}: choose 1 to {n} ({})",
            numbered(&p.options)
        ));
    }
    let lower = a.to_lowercase();
    let find = |pred: &dyn Fn(&str) -> bool| p.options.iter().position(|o| pred(&o.to_lowercase()));
    let pick = match lower.as_str() {
        "y" | "yes" | "ok" | "allow" | "approve" => {
            find(&|o| o.starts_with("yes") || o.starts_with("allow") || o == "y")
                .or((n > 0).then_some(0))
        }
        "n" | "no" | "deny" | "reject" => find(&|o| {
            o.starts_with("no") || o.starts_with("reject") || o.starts_with("deny") || o == "n"
        })
        .or(if n > 1 { Some(n - 1) } else { None }),
        "always" | "a" => {
            find(&|o| o.contains("always") || o.contains("don't ask") || o.contains("this session"))
        }
        _ => find(&|o| o == lower),
    };
    if let Some(i) = pick {
        return Ok(Choice::Option(i));
    }
    if p.kind == "question" {
        return Ok(Choice::Text(a.to_string()));
    }
    Err(format!(
        "{a:?} does not answer this prompt: choose 1 to {n} ({})",
        numbered(&p.options)
    ))
}

fn numbered(options: &[String]) -> String {
    options
        .iter()
        .enumerate()
        .map(|(i, o)| format!("{}. {o}", i + 1))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A keystroke or literal text, in the order to deliver.
#[derive(Debug, Clone, PartialEq)]
pub enum Stroke {
    Key(Key),
    Text(String),
}

/// The keys that answer `prompt` with `choice` on screen.
pub fn answer_strokes(p: &Prompt, choice: &Choice) -> Result<Vec<Stroke>, String> {
    let enter = Stroke::Key(Key::Named("Enter".into()));
    Ok(match (p.answer, choice) {
        (AnswerStyle::Digit, Choice::Option(i)) if *i < 9 => {
            vec![Stroke::Key(Key::Char(char::from(b'1' + *i as u8)))]
        }
        (AnswerStyle::Digit, Choice::Option(i)) => {
            // Menus longer than nine: move down from the first option.
            let mut v = vec![Stroke::Key(Key::Named("Home".into()))];
            v.extend((0..*i).map(|_| Stroke::Key(Key::Named("Down".into()))));
            v.push(enter);
            v
        }
        (AnswerStyle::Line, Choice::Option(i)) => {
            vec![
                Stroke::Text(p.options.get(*i).cloned().unwrap_or_default()),
                enter,
            ]
        }
        (AnswerStyle::Line, Choice::Text(t)) => vec![Stroke::Text(t.clone()), enter],
        (AnswerStyle::Enter, _) => vec![enter],
        (AnswerStyle::Arrows, Choice::Option(i)) => {
            let mut v: Vec<Stroke> = (0..*i)
                .map(|_| Stroke::Key(Key::Named("Right".into())))
                .collect();
            v.push(enter);
            v
        }
        (_, Choice::Text(_)) => {
            return Err("this prompt takes an option number, not free text".into());
        }
    })
}

/// Claude Code: hooks injected per session with `--settings` (never the user's own settings
/// files), `--session-id` chosen up front; `Stop` carries the final reply, `PermissionRequest`
/// can answer a dialog (AskUserQuestion included) while it is on screen.
pub struct Claude;

/// Claude Code hook events clibot listens to, and how long each may take (seconds).
const CLAUDE_HOOKS: &[(&str, u64)] = &[
    ("UserPromptSubmit", 10),
    ("Stop", 10),
    ("StopFailure", 10),
    ("Notification", 10),
    ("SessionEnd", 10),
];

impl Adapter for Claude {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn completes_by_hook(&self) -> bool {
        true
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> Launch {
        let entry = |timeout: u64| json!([{ "hooks": [{ "type": "command", "command": ctx.hook_command, "timeout": timeout }] }]);
        let mut hooks = serde_json::Map::new();
        for (event, timeout) in CLAUDE_HOOKS {
            hooks.insert(event.to_string(), entry(*timeout));
        }
        // The permission hook waits for a person; give it a little longer than clibot waits,
        // so that clibot's own timeout (which leaves the dialog on screen) always comes first.
        let mut perm = entry(ctx.permission_wait_secs + 30);
        if let Some(first) = perm.get_mut(0).and_then(Value::as_object_mut) {
            first.insert("matcher".into(), json!("*"));
        }
        hooks.insert("PermissionRequest".into(), perm);
        let settings = json!({ "hooks": hooks });
        Launch {
            args: vec![
                "--session-id".into(),
                ctx.cli_session_id.to_string(),
                "--settings".into(),
                settings.to_string(),
            ],
            env: Vec::new(),
        }
    }

    fn hook(&self, event: &str, payload: &Value) -> HookSignal {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match event {
            "UserPromptSubmit" => HookSignal::TurnStarted,
            "Stop" => {
                let mut text = s(payload, "last_assistant_message");
                if text.is_empty() {
                    text = payload
                        .get("transcript_path")
                        .and_then(Value::as_str)
                        .and_then(|p| claude_transcript_reply(std::path::Path::new(p)))
                        .unwrap_or_default();
                }
                HookSignal::TurnCompleted { text }
            }
            "StopFailure" => {
                let message = [s(payload, "error"), s(payload, "error_details")]
                    .into_iter()
                    .filter(|x| !x.is_empty())
                    .collect::<Vec<_>>()
                    .join(": ");
                HookSignal::Error {
                    kind: classify_error(&message).to_string(),
                    message,
                }
            }
            "PermissionRequest" => {
                let tool = s(payload, "tool_name");
                let input = payload.get("tool_input").cloned().unwrap_or(Value::Null);
                if tool == "AskUserQuestion" {
                    let q = input
                        .get("questions")
                        .and_then(|q| q.get(0))
                        .cloned()
                        .unwrap_or(Value::Null);
                    let options = q
                        .get("options")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().map(|o| s(o, "label")).collect())
                        .unwrap_or_default();
                    return HookSignal::Prompt {
                        kind: "question".into(),
                        text: s(&q, "question"),
                        options,
                        subject: s(&q, "header"),
                    };
                }
                let subject = ["command", "file_path", "url", "path", "pattern"]
                    .iter()
                    .map(|k| s(&input, k))
                    .find(|v| !v.is_empty())
                    .unwrap_or_else(|| {
                        let j = input.to_string();
                        j.chars().take(200).collect()
                    });
                let always = payload
                    .get("permission_suggestions")
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty());
                let mut options = vec!["Yes".to_string()];
                if always {
                    options.push("Yes, and don't ask again".into());
                }
                options.push("No".into());
                HookSignal::Prompt {
                    kind: "permission".into(),
                    text: format!("Claude wants to use {tool}. Do you want to proceed?"),
                    options,
                    subject,
                }
            }
            _ => HookSignal::Ignore,
        }
    }

    fn recover_reply(
        &self,
        rec: &crate::session::SessionRecord,
        cli: Option<&crate::config::CliSpec>,
    ) -> Option<String> {
        if rec.cli_session_id.is_empty() {
            return None;
        }
        // ${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/<cwd with every non-alphanumeric as '-'>/<id>.jsonl
        let env = |k: &str| {
            cli.and_then(|c| c.env.get(k).cloned())
                .or_else(|| std::env::var(k).ok())
        };
        let base = match env("CLAUDE_CONFIG_DIR") {
            Some(d) => std::path::PathBuf::from(d),
            None => std::path::PathBuf::from(env("HOME")?).join(".claude"),
        };
        let enc: String = rec
            .dir
            .display()
            .to_string()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        claude_transcript_reply(
            &base
                .join("projects")
                .join(enc)
                .join(format!("{}.jsonl", rec.cli_session_id)),
        )
    }

    fn decision(&self, prompt: &Prompt, choice: &Choice, payload: &Value) -> Option<String> {
        let input = payload.get("tool_input").cloned().unwrap_or(Value::Null);
        let wrap = |decision: Value| {
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}).to_string()
        };
        if prompt.kind == "question" {
            let question = input
                .get("questions")
                .and_then(|q| q.get(0))
                .and_then(|q| q.get("question"))
                .and_then(Value::as_str)
                .unwrap_or(&prompt.text)
                .to_string();
            let answer = match choice {
                Choice::Option(i) => prompt.options.get(*i).cloned()?,
                Choice::Text(t) => t.clone(),
            };
            let mut updated = input.clone();
            if let Some(obj) = updated.as_object_mut() {
                obj.insert("answers".into(), json!({ question: answer }));
            }
            return Some(wrap(json!({"behavior": "allow", "updatedInput": updated})));
        }
        let label = match choice {
            Choice::Option(i) => prompt.options.get(*i)?.to_lowercase(),
            Choice::Text(_) => return None,
        };
        Some(if label.starts_with("no") || label.starts_with("reject") {
            wrap(json!({"behavior": "deny", "message": "The user declined this from clibot."}))
        } else if label.contains("don't ask") || label.contains("always") {
            let mut d = json!({"behavior": "allow"});
            if let Some(s) = payload.get("permission_suggestions") {
                d["updatedPermissions"] = s.clone();
            }
            wrap(d)
        } else {
            wrap(json!({"behavior": "allow"}))
        })
    }
}

/// Recognises common failure messages.
pub fn classify_error(message: &str) -> &'static str {
    let m = message.to_lowercase();
    if m.contains("rate limit")
        || m.contains("rate_limit")
        || m.contains("429")
        || m.contains("overloaded")
    {
        "rate_limit"
    } else if m.contains("usage limit")
        || m.contains("credit balance")
        || m.contains("limit reached")
    {
        "usage_limit"
    } else if m.contains("auth")
        || m.contains("api key")
        || m.contains("401")
        || m.contains("login")
    {
        "auth"
    } else if m.contains("connection") || m.contains("network") || m.contains("timeout") {
        "network"
    } else {
        "other"
    }
}

/// The last assistant reply in a Claude Code transcript (JSONL): the text blocks of the newest
/// assistant message that is not in a side chain.
pub fn claude_transcript_reply(path: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut last_id: Option<String> = None;
    let mut parts: Vec<String> = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v.get("type").and_then(Value::as_str) != Some("assistant")
            || v.get("isSidechain") == Some(&Value::Bool(true))
        {
            continue;
        }
        let msg = v.get("message").cloned().unwrap_or(Value::Null);
        let texts: Vec<String> = msg
            .get("content")
            .and_then(Value::as_array)
            .map(|c| {
                c.iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if texts.is_empty() {
            continue;
        }
        let id = msg.get("id").and_then(Value::as_str).map(str::to_string);
        if id != last_id {
            parts.clear();
            last_id = id;
        }
        parts.extend(texts);
    }
    (!parts.is_empty()).then(|| parts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(kind: &str, options: &[&str], answer: AnswerStyle) -> Prompt {
        Prompt {
            id: "p1".into(),
            kind: kind.into(),
            text: "?".into(),
            options: options.iter().map(|s| s.to_string()).collect(),
            subject: String::new(),
            source: "screen".into(),
            answer,
        }
    }

    #[test]
    fn choices() {
        let p = prompt(
            "permission",
            &["Yes", "Yes, and always allow access to proj/", "No"],
            AnswerStyle::Digit,
        );
        assert_eq!(parse_choice("1", &p), Ok(Choice::Option(0)));
        assert_eq!(parse_choice("yes", &p), Ok(Choice::Option(0)));
        assert_eq!(parse_choice("no", &p), Ok(Choice::Option(2)));
        assert_eq!(parse_choice("always", &p), Ok(Choice::Option(1)));
        assert!(
            parse_choice("4", &p)
                .expect_err("no option 4")
                .contains("1 to 3")
        );
        assert!(parse_choice("maybe", &p).is_err());
        let q = prompt("question", &["Postgres", "SQLite"], AnswerStyle::Digit);
        assert_eq!(parse_choice("sqlite", &q), Ok(Choice::Option(1)));
        assert_eq!(
            parse_choice("MySQL please", &q),
            Ok(Choice::Text("MySQL please".into()))
        );
        let yn = prompt("confirm", &["y", "n"], AnswerStyle::Line);
        assert_eq!(parse_choice("n", &yn), Ok(Choice::Option(1)));
        assert_eq!(parse_choice("yes", &yn), Ok(Choice::Option(0)));
    }

    #[test]
    fn strokes() {
        let p = prompt("permission", &["Yes", "No"], AnswerStyle::Digit);
        assert_eq!(
            answer_strokes(&p, &Choice::Option(1)),
            Ok(vec![Stroke::Key(Key::Char('2'))])
        );
        let yn = prompt("confirm", &["y", "n"], AnswerStyle::Line);
        assert_eq!(
            answer_strokes(&yn, &Choice::Option(0)),
            Ok(vec![
                Stroke::Text("y".into()),
                Stroke::Key(Key::Named("Enter".into()))
            ])
        );
        let row = prompt(
            "permission",
            &["Allow once", "Allow always", "Reject"],
            AnswerStyle::Arrows,
        );
        assert_eq!(
            answer_strokes(&row, &Choice::Option(2)).expect("ok").len(),
            3
        );
        assert!(answer_strokes(&p, &Choice::Text("x".into())).is_err());
    }

    #[test]
    fn claude_hooks() {
        let c = Claude;
        let stop = json!({"hook_event_name":"Stop","last_assistant_message":"Hello.\nTwo"});
        assert_eq!(
            c.hook("Stop", &stop),
            HookSignal::TurnCompleted {
                text: "Hello.\nTwo".into()
            }
        );
        let perm = json!({"tool_name":"Bash","tool_input":{"command":"touch x"},"permission_suggestions":[{"type":"addDirectories"}]});
        let HookSignal::Prompt {
            kind,
            options,
            subject,
            ..
        } = c.hook("PermissionRequest", &perm)
        else {
            panic!("prompt expected")
        };
        assert_eq!(
            (kind.as_str(), subject.as_str(), options.len()),
            ("permission", "touch x", 3)
        );
        let p = Prompt {
            options,
            ..prompt("permission", &[], AnswerStyle::Digit)
        };
        let allow: Value =
            serde_json::from_str(&c.decision(&p, &Choice::Option(0), &perm).expect("allow"))
                .expect("json");
        assert_eq!(allow["hookSpecificOutput"]["decision"]["behavior"], "allow");
        let always: Value =
            serde_json::from_str(&c.decision(&p, &Choice::Option(1), &perm).expect("always"))
                .expect("json");
        assert_eq!(
            always["hookSpecificOutput"]["decision"]["updatedPermissions"][0]["type"],
            "addDirectories"
        );
        let deny: Value =
            serde_json::from_str(&c.decision(&p, &Choice::Option(2), &perm).expect("deny"))
                .expect("json");
        assert_eq!(deny["hookSpecificOutput"]["decision"]["behavior"], "deny");

        let ask = json!({"tool_name":"AskUserQuestion","tool_input":{"questions":[{"question":"Which database?","header":"Database","options":[{"label":"Postgres"},{"label":"SQLite"}],"multiSelect":false}]}});
        let HookSignal::Prompt {
            kind,
            text,
            options,
            ..
        } = c.hook("PermissionRequest", &ask)
        else {
            panic!("prompt expected")
        };
        assert_eq!(
            (kind.as_str(), text.as_str()),
            ("question", "Which database?")
        );
        let q = Prompt {
            kind,
            text,
            options,
            ..prompt("question", &[], AnswerStyle::Digit)
        };
        let out: Value =
            serde_json::from_str(&c.decision(&q, &Choice::Option(1), &ask).expect("answer"))
                .expect("json");
        assert_eq!(
            out["hookSpecificOutput"]["decision"]["updatedInput"]["answers"]["Which database?"],
            "SQLite"
        );
    }

    #[test]
    fn claude_launch_injects_hooks() {
        let l = Claude.launch(&LaunchContext {
            hook_command: "'/x/clibotctl' hook --cli claude",
            cli_session_id: "u-1",
            permission_wait_secs: 600,
        });
        assert_eq!(&l.args[..2], ["--session-id", "u-1"]);
        let s: Value = serde_json::from_str(&l.args[3]).expect("settings json");
        assert_eq!(
            s["hooks"]["Stop"][0]["hooks"][0]["command"],
            "'/x/clibotctl' hook --cli claude"
        );
        assert_eq!(
            s["hooks"]["PermissionRequest"][0]["hooks"][0]["timeout"],
            630
        );
    }

    #[test]
    fn transcript_fallback() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("t.jsonl");
        std::fs::write(
            &p,
            [
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"old"}]}}"#,
                r#"{"type":"user","message":{"content":"hi"}}"#,
                r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"part one"}]}}"#,
                r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","name":"x"}]}}"#,
                r#"{"type":"assistant","isSidechain":true,"message":{"id":"m3","content":[{"type":"text","text":"side"}]}}"#,
                "torn",
            ]
            .join("\n"),
        )
        .expect("write");
        assert_eq!(claude_transcript_reply(&p).as_deref(), Some("part one"));
    }

    #[test]
    fn errors_are_classified() {
        assert_eq!(
            classify_error("API Error: 429 rate_limit_error"),
            "rate_limit"
        );
        assert_eq!(classify_error("Invalid API key"), "auth");
        assert_eq!(classify_error("Credit balance is too low"), "usage_limit");
        assert_eq!(classify_error("something odd"), "other");
    }
}
