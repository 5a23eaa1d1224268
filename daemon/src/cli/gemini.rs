//! Gemini CLI. Hooks come from a per-session Gemini home (`GEMINI_CLI_HOME`): a directory whose
//! `.gemini/settings.json` is the user's own settings with clibot's hooks added, and whose other
//! entries link to the user's `~/.gemini` (login, trusted folders, history), so the user's files
//! are never edited. (`GEMINI_CLI_SYSTEM_SETTINGS_PATH` would be simpler, but Gemini only reads
//! it from a root-owned directory.) `AfterAgent` ends a turn; its reply is read from the
//! transcript, because `prompt_response` repeats parts of a reply that was streamed in pieces
//! (Gemini CLI 0.61). `Notification` (ToolPermission) announces a confirmation. Gemini waits for
//! hooks before it shows the dialog and cannot take an answer from one, so hooks return at once
//! and answers go by keys (a digit picks an option).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::running::only_recent;
use super::{Adapter, HookSignal, Launch, LaunchContext, Running};

pub struct Gemini;

/// Hook events clibot listens to.
const GEMINI_HOOKS: &[&str] = &["BeforeAgent", "AfterAgent", "Notification"];

impl Adapter for Gemini {
    fn running_conversation(&self, r: &Running<'_>) -> Option<String> {
        if let Some(id) = r.flag(&["--resume", "-r"]).filter(|v| v.len() == 36) {
            return Some(id);
        }
        let base = r
            .env("GEMINI_CLI_HOME")
            .map(PathBuf::from)
            .or(r.home())?
            .join(".gemini");
        gemini_conversation(&base, r.dir, r.since_ms)
    }
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn api_key_vars(&self) -> &'static [&'static str] {
        &["GEMINI_API_KEY", "GOOGLE_API_KEY"]
    }

    fn turn_usage(
        &self,
        rec: &crate::model::SessionRecord,
        cli: Option<&crate::cli::CliSpec>,
    ) -> Option<crate::usage::TurnUsage> {
        let path = session_chat(rec, cli)?;
        let text = crate::confine::beneath::read_record(&path, crate::confine::beneath::RECORD_MAX)
            .ok()?;
        crate::usage::gemini::last_turn(&gemini_messages(&text))
    }

    /// Esc cancels Gemini CLI's request (`esc to cancel`; Ctrl-C twice quits).
    fn cancel_keys(&self) -> &'static [&'static str] {
        &["Escape"]
    }

    fn completes_by_hook(&self) -> bool {
        true
    }

    fn signals_turn_start(&self) -> bool {
        true
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> Launch {
        let user_dir = ctx.home.join(".gemini");
        let mut settings = super::read_settings(&user_dir.join("settings.json"));
        super::add_hooks(&mut settings, GEMINI_HOOKS, |event| {
            // Gemini's hook timeouts are milliseconds.
            let hook = json!({ "name": format!("clibot-{event}"), "type": "command", "command": ctx.hook_command, "timeout": 10_000 });
            json!({ "matcher": "", "hooks": [hook] })
        });
        settings["hooksConfig"] = json!({ "enabled": true });
        let home = ctx.files_dir.join("gemini-home");
        let dir = home.join(".gemini");
        let links = super::link_entries(&user_dir, &dir, &["settings.json"]);
        Launch {
            // The most recent conversation in this directory.
            args: if ctx.resume && !ctx.conversation.is_empty() {
                vec!["--resume".into(), ctx.conversation.to_string()]
            } else if ctx.resume {
                vec!["--resume".into(), "latest".into()]
            } else {
                Vec::new()
            },
            env: vec![("GEMINI_CLI_HOME".into(), home.display().to_string())],
            files: vec![(dir.join("settings.json"), settings.to_string())],
            links,
            dirs: Vec::new(),
        }
    }

    fn hook(&self, event: &str, payload: &Value) -> HookSignal {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match event {
            "BeforeAgent" => HookSignal::TurnStarted,
            "AfterAgent" => {
                let from_transcript = payload
                    .get("transcript_path")
                    .and_then(Value::as_str)
                    .and_then(|p| gemini_transcript_reply(std::path::Path::new(p)));
                HookSignal::TurnCompleted {
                    text: from_transcript.unwrap_or_else(|| s(payload, "prompt_response")),
                }
            }
            "Notification" if s(payload, "notification_type") == "ToolPermission" => {
                let details = payload.get("details").cloned().unwrap_or(Value::Null);
                let subject = ["command", "filePath", "fileName", "url"]
                    .iter()
                    .map(|k| s(&details, k))
                    .find(|v| !v.is_empty())
                    .unwrap_or_default();
                let title = s(&details, "title");
                HookSignal::Prompt {
                    kind: "permission".into(),
                    text: if title.is_empty() {
                        s(payload, "message")
                    } else {
                        title
                    },
                    // The dialog's own options (they vary with folder trust) come from the screen.
                    options: Vec::new(),
                    subject,
                    wait: false,
                }
            }
            _ => HookSignal::Ignore,
        }
    }
}

/// The messages of a Gemini CLI chat file (JSONL), records replayed as Gemini does: a record
/// with an id replaces the earlier one with that id, `{"$set": {"messages": [...]}}` replaces
/// the whole history.
pub fn gemini_messages(text: &str) -> Vec<Value> {
    let mut messages: Vec<Value> = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(all) = v.pointer("/$set/messages").and_then(Value::as_array) {
            messages = all.clone();
            continue;
        }
        if v.get("type").is_none() {
            continue;
        }
        match v.get("id").and_then(Value::as_str) {
            Some(id) => match messages
                .iter_mut()
                .find(|m| m.get("id").and_then(Value::as_str) == Some(id))
            {
                Some(m) => *m = v,
                None => messages.push(v),
            },
            None => messages.push(v),
        }
    }
    messages
}

/// The last reply in a Gemini CLI chat file: the newest `gemini` message with text.
pub fn gemini_transcript_reply(path: &std::path::Path) -> Option<String> {
    let text =
        crate::confine::beneath::read_record(path, crate::confine::beneath::RECORD_MAX).ok()?;
    let messages = gemini_messages(&text);
    let content_text = |m: &Value| -> String {
        match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        }
    };
    messages
        .iter()
        .rev()
        .filter(|m| m.get("type").and_then(Value::as_str) == Some("gemini"))
        .map(content_text)
        .find(|t| !t.trim().is_empty())
}

/// The chat file a session writes: in its project's chats, the one whose `sessionId` is the
/// session's conversation when known, else the one written since its turn began.
fn session_chat(
    rec: &crate::model::SessionRecord,
    cli: Option<&crate::cli::CliSpec>,
) -> Option<PathBuf> {
    // The per-session home clibot launched it with (see `launch`), else its own.
    let own = cli
        .and_then(|c| c.env.get(crate::cli::SESSION_FILES))
        .map(|f| PathBuf::from(f).join("gemini-home"))
        .filter(|h| h.is_dir());
    let base = match own {
        Some(h) => h,
        None => super::records_dir(cli, "GEMINI_CLI_HOME", "")?,
    }
    .join(".gemini");
    let files = project_chats(&base, &rec.dir)?;
    let head = |f: &PathBuf| -> Option<String> {
        let first =
            crate::confine::beneath::read_record_head(f, crate::confine::beneath::RECORD_MAX)
                .ok()?;
        let meta: Value = serde_json::from_str(first.lines().next()?).ok()?;
        meta["sessionId"].as_str().map(str::to_string)
    };
    if !rec.cli_session_id.is_empty()
        && let Some(f) = files
            .iter()
            .find(|f| head(f).as_deref() == Some(&rec.cli_session_id))
    {
        return Some(f.clone());
    }
    only_recent(files, rec.turn_started_ms)
}

/// The chat files of the project `dir` under `base` (`~/.gemini`).
fn project_chats(base: &Path, dir: &Path) -> Option<Vec<PathBuf>> {
    let projects: serde_json::Value = serde_json::from_str(
        &crate::confine::beneath::read_record(&base.join("projects.json"), 4 << 20).ok()?,
    )
    .ok()?;
    let short = projects["projects"][dir.display().to_string()].as_str()?;
    if short.is_empty() || short.contains('/') || short.contains("..") {
        return None;
    }
    let chats = base.join("tmp").join(short).join("chats");
    Some(
        std::fs::read_dir(chats)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("session-"))
            })
            .collect(),
    )
}

/// Gemini CLI keeps a project's chats in `~/.gemini/tmp/<short name>/chats/session-*.jsonl`,
/// the short name from `~/.gemini/projects.json`; a chat's first line holds its `sessionId`
/// (what `gemini --resume` takes).
pub fn gemini_conversation(base: &Path, dir: &Path, since_ms: i64) -> Option<String> {
    let f = only_recent(project_chats(base, dir)?, since_ms)?;
    let first =
        crate::confine::beneath::read_record_head(&f, crate::confine::beneath::RECORD_MAX).ok()?;
    let meta: serde_json::Value = serde_json::from_str(first.lines().next()?).ok()?;
    meta["sessionId"].as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemini_names_its_chats_by_the_project_short_name() {
        let base = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            base.path().join("projects.json"),
            r#"{"projects": {"/home/dev/proj": "proj"}}"#,
        )
        .expect("projects");
        let chats = base.path().join("tmp/proj/chats");
        std::fs::create_dir_all(&chats).expect("mkdir");
        std::fs::write(
            chats.join("session-2026-11-27T02-40-4d66b8e3.jsonl"),
            "{\"sessionId\":\"4d66b8e3-8157-42e8-9f75-66415186022e\",\"kind\":\"main\"}\n",
        )
        .expect("chat");
        assert_eq!(
            gemini_conversation(base.path(), Path::new("/home/dev/proj"), 0),
            Some("4d66b8e3-8157-42e8-9f75-66415186022e".into())
        );
        assert_eq!(
            gemini_conversation(base.path(), Path::new("/elsewhere"), 0),
            None
        );
    }

    #[test]
    fn observed_payloads() {
        let g = Gemini;
        let after = json!({"hook_event_name":"AfterAgent","prompt":"Gemini line one","prompt_response":"Hello from the mock model.\nThis is line two.","stop_hook_active":false});
        assert_eq!(
            g.hook("AfterAgent", &after),
            HookSignal::TurnCompleted {
                text: "Hello from the mock model.\nThis is line two.".into()
            }
        );
        let note = json!({"hook_event_name":"Notification","notification_type":"ToolPermission","message":"Tool Confirm Shell Command requires execution",
            "details":{"type":"exec","title":"Confirm Shell Command","command":"touch /home/dev/proj/created_by_gemini.txt","rootCommand":"touch"}});
        let HookSignal::Prompt {
            kind,
            text,
            subject,
            wait,
            ..
        } = g.hook("Notification", &note)
        else {
            panic!("prompt expected")
        };
        assert_eq!(
            (kind.as_str(), text.as_str(), subject.as_str(), wait),
            (
                "permission",
                "Confirm Shell Command",
                "touch /home/dev/proj/created_by_gemini.txt",
                false
            )
        );
        let edit = json!({"notification_type":"ToolPermission","details":{"type":"edit","title":"Confirm Write: hello_gemini.txt","filePath":"/p/hello_gemini.txt"}});
        let HookSignal::Prompt { subject, .. } = g.hook("Notification", &edit) else {
            panic!("prompt expected")
        };
        assert_eq!(subject, "/p/hello_gemini.txt");
        assert_eq!(g.hook("PreCompress", &json!({})), HookSignal::Ignore);
    }

    #[test]
    fn launch_builds_a_private_home_from_the_users() {
        let home = tempfile::tempdir().expect("tempdir");
        let user = home.path().join(".gemini");
        std::fs::create_dir_all(&user).expect("mkdir");
        std::fs::write(user.join("settings.json"), r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"hooks":{"AfterAgent":[{"matcher":"","hooks":[{"type":"command","command":"mine"}]}]}}"#).expect("write");
        std::fs::write(user.join("trustedFolders.json"), "{}").expect("write");
        let files = home.path().join("state");
        let l = Gemini.launch(&crate::cli::test_ctx(
            "'/x/clibotctl' hook --cli gemini",
            "u",
            &files,
            home.path(),
        ));
        assert_eq!(
            l.env,
            vec![(
                "GEMINI_CLI_HOME".to_string(),
                files.join("gemini-home").display().to_string()
            )]
        );
        let v: Value = serde_json::from_str(&l.files[0].1).expect("json");
        assert_eq!(
            v["security"]["auth"]["selectedType"], "gemini-api-key",
            "the user's settings are kept"
        );
        assert_eq!(
            v["hooks"]["AfterAgent"][0]["hooks"][0]["command"], "mine",
            "the user's hooks run first"
        );
        assert_eq!(
            v["hooks"]["AfterAgent"][1]["hooks"][0]["command"],
            "'/x/clibotctl' hook --cli gemini"
        );
        assert_eq!(v["hooks"]["Notification"][0]["hooks"][0]["timeout"], 10_000);
        assert_eq!(
            l.links,
            vec![(
                files.join("gemini-home/.gemini/trustedFolders.json"),
                user.join("trustedFolders.json")
            )]
        );
    }

    #[test]
    fn transcript_replay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("s.jsonl");
        std::fs::write(
            &p,
            [
                r#"{"sessionId":"x","kind":"main"}"#,
                r#"{"id":"1","type":"user","content":"hi"}"#,
                r#"{"id":"2","type":"gemini","content":"draft"}"#,
                r#"{"id":"2","type":"gemini","content":"Final reply.\nTwo lines."}"#,
                r#"{"id":"3","type":"info","content":"note"}"#,
                "torn",
            ]
            .join("\n"),
        )
        .expect("write");
        assert_eq!(
            gemini_transcript_reply(&p).as_deref(),
            Some("Final reply.\nTwo lines.")
        );
        let after = serde_json::json!({"transcript_path": p.display().to_string(), "prompt_response": "Final reply. reply."});
        assert_eq!(
            Gemini.hook("AfterAgent", &after),
            HookSignal::TurnCompleted {
                text: "Final reply.\nTwo lines.".into()
            }
        );
    }
}
