//! Claude Code: hooks per session, the final reply from `Stop`, and permission decisions
//! (AskUserQuestion included) carried back through a waiting `PermissionRequest` hook.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::running::only_recent;
use super::{Adapter, Choice, HookSignal, Launch, LaunchContext, Running, classify_error};
use crate::model::Prompt;

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

/// The event clibot's status-line command reports (its stdin is Claude Code's status JSON).
const STATUS_LINE: &str = "StatusLine";

/// The plan's windows in Claude Code's status JSON (`rate_limits.five_hour` / `seven_day`:
/// `used_percentage` 0–100, `resets_at` in seconds); none with an API key.
pub fn status_windows(payload: &Value) -> Vec<crate::usage::PlanWindow> {
    let Some(limits) = payload.get("rate_limits") else {
        return Vec::new();
    };
    [("five_hour", "5h"), ("seven_day", "7d")]
        .into_iter()
        .filter_map(|(key, name)| {
            let w = limits.get(key)?;
            Some(crate::usage::PlanWindow {
                name: name.into(),
                used_percent: w.get("used_percentage").and_then(Value::as_f64)?,
                resets_at_ms: w
                    .get("resets_at")
                    .and_then(Value::as_i64)
                    .map_or(0, |s| s.saturating_mul(1000)),
            })
        })
        .collect()
}

impl Adapter for Claude {
    fn running_conversation(&self, r: &Running<'_>) -> Option<String> {
        if let Some(id) = r.flag(&["--resume", "-r", "--session-id"]) {
            return Some(id);
        }
        let config = r.state_dir("CLAUDE_CONFIG_DIR", ".claude")?;
        let files = std::fs::read_dir(claude_project_dir(&config, r.dir))
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        let f = only_recent(files, r.since_ms)?;
        Some(f.file_stem()?.to_string_lossy().into_owned())
    }
    fn name(&self) -> &'static str {
        "claude"
    }

    /// Esc interrupts Claude Code's turn (Ctrl-C at rest would ask it to quit).
    fn cancel_keys(&self) -> &'static [&'static str] {
        &["Escape"]
    }

    /// It puts the interrupted message back in its prompt: cleared, so that the next message
    /// is not appended to it.
    fn after_cancel_keys(&self) -> &'static [&'static str] {
        &["C-u"]
    }

    fn completes_by_hook(&self) -> bool {
        true
    }

    fn signals_turn_start(&self) -> bool {
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
        let mut settings = json!({ "hooks": hooks });
        // The plan's windows reach only a status-line command (Claude Code writes them nowhere
        // else): clibot's reports them and shows nothing — unless the user has a status line
        // of their own, which is kept (and the windows are then not known).
        let config = match ctx.env_value("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
            Some(d) => std::path::PathBuf::from(d),
            None => ctx.home.join(".claude"),
        };
        let own = super::read_settings(&config.join("settings.json"))
            .get("statusLine")
            .is_some();
        if !own && let Some(s) = settings.as_object_mut() {
            s.insert(
                "statusLine".into(),
                json!({ "type": "command", "command": format!("{} {STATUS_LINE}", ctx.hook_command) }),
            );
        }
        // A restart continues the conversation clibot started under this id.
        let session = if ctx.resume {
            "--resume"
        } else {
            "--session-id"
        };
        Launch {
            args: vec![
                session.into(),
                ctx.cli_session_id.to_string(),
                "--settings".into(),
                settings.to_string(),
            ],
            ..Launch::default()
        }
    }

    fn hook(&self, event: &str, payload: &Value) -> HookSignal {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match event {
            "UserPromptSubmit" => HookSignal::TurnStarted,
            STATUS_LINE => HookSignal::PlanWindows(status_windows(payload)),
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
                // Its words (`last_assistant_message`: "You've hit your 5-hour limit · resets
                // 6:58pm (Europe/Paris)") tell a plan's limit from a rate limit, and when it resets.
                let message = [
                    s(payload, "error"),
                    s(payload, "error_details"),
                    s(payload, "last_assistant_message"),
                ]
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
                        wait: true,
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
                    wait: true,
                }
            }
            _ => HookSignal::Ignore,
        }
    }

    fn recover_reply(
        &self,
        rec: &crate::model::SessionRecord,
        cli: Option<&crate::cli::CliSpec>,
    ) -> Option<String> {
        claude_transcript_reply(&transcript_path(rec, cli)?)
    }

    fn api_key_vars(&self) -> &'static [&'static str] {
        &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"]
    }

    fn conversation_record(
        &self,
        rec: &crate::model::SessionRecord,
        cli: Option<&crate::cli::CliSpec>,
    ) -> Option<(PathBuf, Option<PathBuf>)> {
        let home = super::records_dir(cli, "CLAUDE_CONFIG_DIR", ".claude")?;
        Some((home, transcript_path(rec, cli)))
    }

    fn turn_usage(
        &self,
        rec: &crate::model::SessionRecord,
        cli: Option<&crate::cli::CliSpec>,
    ) -> Option<crate::usage::TurnUsage> {
        let text = super::transcript_tail(&transcript_path(rec, cli)?)?;
        crate::usage::claude::last_turn(&text)
    }

    fn answers_through_hooks(&self) -> bool {
        true
    }
    fn decision(&self, prompt: &Prompt, choice: &Choice, payload: &Value) -> Option<String> {
        let input = payload.get("tool_input").cloned().unwrap_or(Value::Null);
        let wrap = |decision: Value| {
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}).to_string()
        };
        if prompt.kind == crate::model::PromptKind::Question {
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

/// A session's transcript: `${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/<cwd with every
/// non-alphanumeric as '-'>/<id>.jsonl`.
fn transcript_path(
    rec: &crate::model::SessionRecord,
    cli: Option<&crate::cli::CliSpec>,
) -> Option<PathBuf> {
    if rec.cli_session_id.is_empty() {
        return None;
    }
    let base = super::records_dir(cli, "CLAUDE_CONFIG_DIR", ".claude")?;
    Some(claude_project_dir(&base, &rec.dir).join(format!("{}.jsonl", rec.cli_session_id)))
}

/// The last assistant reply in a Claude Code transcript (JSONL): the text blocks of the newest
/// assistant message that is not in a side chain.
pub fn claude_transcript_reply(path: &std::path::Path) -> Option<String> {
    let text = super::transcript_tail(path)?;
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

/// Claude Code keeps a project's transcripts in `~/.claude/projects/<dir, every character
/// that is not a letter or digit made "-">/<session id>.jsonl`.
pub fn claude_project_dir(config: &Path, dir: &Path) -> PathBuf {
    let name: String = dir
        .display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    config.join("projects").join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_names_a_project_after_its_directory() {
        assert_eq!(
            claude_project_dir(Path::new("/h/.claude"), Path::new("/home/dev/my.proj")),
            Path::new("/h/.claude/projects/-home-dev-my-proj")
        );
    }
    use crate::cli::detect::AnswerStyle;
    use crate::cli::test_prompt;

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
            ..test_prompt("permission", &[], AnswerStyle::Digit)
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
            kind: kind.into(),
            text,
            options,
            ..test_prompt("question", &[], AnswerStyle::Digit)
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
        let l = Claude.launch(&crate::cli::test_ctx(
            "'/x/clibotctl' hook --cli claude",
            "u-1",
            std::path::Path::new("/tmp"),
            std::path::Path::new("/tmp"),
        ));
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
}
