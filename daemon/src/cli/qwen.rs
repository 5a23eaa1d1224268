//! Qwen Code (`qwen`, 0.24; Node.js 22 or newer). Hooks come from a per-session Qwen home
//! (`QWEN_HOME`): its `settings.json` is the user's own with clibot's hooks added, and its other
//! entries link to the user's `~/.qwen` (conversations under `projects/`, trusted folders), so
//! the user's files are never edited.
//!
//! Claude Code's hook names: `UserPromptSubmit` starts a turn (not the empty one it sends when a
//! turn goes on after a tool), `Stop` ends it with `last_assistant_message`, `StopFailure` is an
//! API error. A turn refused at a dialog or cancelled sends no `Stop`: the `Notification` that
//! says it waits for input (`idle_prompt`) ends it. `PermissionRequest` announces a dialog and
//! returns at once, so it is drawn and can be answered at the desk; answers go by keys (a digit
//! picks an option). `--session-id ID` names the conversation, `--resume ID` continues it.

use std::path::Path;

use serde_json::{Value, json};

use super::{Adapter, HookSignal, Launch, LaunchContext, Running, classify_error};

pub struct Qwen;

/// Hook events clibot listens to.
const QWEN_HOOKS: &[&str] = &[
    "UserPromptSubmit",
    "Stop",
    "StopFailure",
    "Notification",
    "PermissionRequest",
];

/// The user's Qwen home: `QWEN_HOME` when the CLI's environment sets it, else `~/.qwen`.
fn user_home(ctx: &LaunchContext<'_>) -> std::path::PathBuf {
    match ctx.env_value("QWEN_HOME").filter(|h| !h.is_empty()) {
        Some(h) => std::path::PathBuf::from(h),
        None => ctx.home.join(".qwen"),
    }
}

impl Adapter for Qwen {
    fn running_conversation(&self, r: &Running<'_>) -> Option<String> {
        if let Some(id) = r.flag(&["--resume", "-r", "--session-id"]) {
            return Some(id);
        }
        let base = r.state_dir("QWEN_HOME", ".qwen")?;
        qwen_conversation(&base, r.dir, r.pid)
    }
    fn api_key_vars(&self) -> &'static [&'static str] {
        &["OPENAI_API_KEY", "DASHSCOPE_API_KEY"]
    }
    fn name(&self) -> &'static str {
        "qwen"
    }

    /// Esc cancels a running turn, but only with an empty input box (C-u empties it); Ctrl-C
    /// would also arm quitting, and the cancel presses its keys again while the screen says
    /// the CLI works.
    fn cancel_keys(&self) -> &'static [&'static str] {
        &["C-u", "Escape"]
    }

    /// A cancelled turn puts its message back in the input box.
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
        let user = user_home(ctx);
        let mut settings = super::read_settings(&user.join("settings.json"));
        super::add_hooks(&mut settings, QWEN_HOOKS, |_| {
            // Seconds; every one returns at once.
            let hook = json!({ "type": "command", "command": ctx.hook_command, "timeout": 30 });
            json!({ "matcher": "*", "hooks": [hook] })
        });
        let home = ctx.files_dir.join("qwen-home");
        // Conversations stay in the user's own `projects/` (where `qwen --resume` and discovery
        // find them); it is made when the user has none yet.
        let projects = user.join("projects");
        let mut links = super::link_entries(&user, &home, &["settings.json", "projects"]);
        links.push((home.join("projects"), projects.clone()));
        let id = if ctx.conversation.is_empty() {
            ctx.cli_session_id
        } else {
            ctx.conversation
        };
        Launch {
            args: if ctx.resume {
                vec!["--resume".into(), id.to_string()]
            } else {
                vec!["--session-id".into(), id.to_string()]
            },
            env: vec![("QWEN_HOME".into(), home.display().to_string())],
            files: vec![(home.join("settings.json"), settings.to_string())],
            links,
            dirs: vec![projects],
        }
    }

    fn hook(&self, event: &str, payload: &Value) -> HookSignal {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match event {
            // Sent again, empty, when a turn goes on after a tool: not a new turn.
            "UserPromptSubmit" if s(payload, "prompt").is_empty() => HookSignal::Ignore,
            "UserPromptSubmit" => HookSignal::TurnStarted,
            "Stop" => HookSignal::TurnCompleted {
                text: s(payload, "last_assistant_message"),
            },
            "StopFailure" => {
                let message = [s(payload, "error"), s(payload, "error_details")]
                    .into_iter()
                    .filter(|x| !x.is_empty())
                    .collect::<Vec<_>>()
                    .join(": ");
                let kind = match s(payload, "error").as_str() {
                    "authentication_failed" => "auth",
                    "rate_limit" | "rate_limited" => "rate_limit",
                    _ => classify_error(&message),
                };
                HookSignal::Error {
                    kind: kind.to_string(),
                    message,
                }
            }
            "Notification" if s(payload, "notification_type") == "idle_prompt" => HookSignal::Idle,
            "PermissionRequest" => {
                let input = payload.get("tool_input").cloned().unwrap_or(Value::Null);
                let subject = ["command", "file_path", "path", "absolute_path", "url"]
                    .iter()
                    .map(|k| s(&input, k))
                    .find(|v| !v.is_empty())
                    .unwrap_or_default();
                HookSignal::Prompt {
                    kind: "permission".into(),
                    text: format!("Allow {}?", s(payload, "tool_name")),
                    // The dialog's own options come from the screen.
                    options: Vec::new(),
                    subject,
                    wait: false,
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
        qwen_transcript_reply(&session_chat(rec, cli)?)
    }

    fn turn_usage(
        &self,
        rec: &crate::model::SessionRecord,
        cli: Option<&crate::cli::CliSpec>,
    ) -> Option<crate::usage::TurnUsage> {
        let text = super::transcript_tail(&session_chat(rec, cli)?)?;
        crate::usage::qwen::last_turn(&text)
    }
}

/// The conversation file of session `rec`: `<its id>.jsonl` in its directory's chats, in the
/// Qwen home its spec names (`QWEN_HOME`, see [`super::records_dir`]), else in `~/.qwen`.
fn session_chat(
    rec: &crate::model::SessionRecord,
    cli: Option<&crate::cli::CliSpec>,
) -> Option<std::path::PathBuf> {
    let id = super::record_id(&rec.cli_session_id)?;
    let home = super::records_dir(cli, "QWEN_HOME", ".qwen")?;
    Some(qwen_chats(&home, &rec.dir).join(format!("{id}.jsonl")))
}

/// Where Qwen Code (in its home `base`) keeps the conversations of directory `dir`:
/// `projects/<the directory, every character not a letter or digit made "-">/chats`.
pub fn qwen_chats(base: &std::path::Path, dir: &std::path::Path) -> std::path::PathBuf {
    let project: String = dir
        .display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    base.join("projects").join(project).join("chats")
}

/// The last reply in a Qwen Code conversation file: the text parts (not thoughts) of the last
/// `assistant` record that has any.
pub fn qwen_transcript_reply(path: &std::path::Path) -> Option<String> {
    let text = super::transcript_tail(path)?;
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("type").and_then(Value::as_str) == Some("assistant"))
        .filter_map(|v| {
            let parts = v.pointer("/message/parts")?.as_array()?.clone();
            let text: String = parts
                .iter()
                .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!text.trim().is_empty()).then_some(text)
        })
        .next()
}

/// Qwen Code writes `<id>.runtime.json` (with the process's `pid`: the one it relaunches itself
/// as, below the one started) beside each conversation ([`crate::cli::qwen_chats`]): certain,
/// not a guess.
pub fn qwen_conversation(base: &Path, dir: &Path, pid: u32) -> Option<String> {
    let mut pids = crate::procs::tree(pid);
    if !pids.contains(&pid) {
        pids.push(pid);
    }
    std::fs::read_dir(crate::cli::qwen_chats(base, dir))
        .ok()?
        .flatten()
        .find_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".runtime.json")?;
            let v: serde_json::Value = serde_json::from_str(
                &crate::confine::beneath::read_record(&e.path(), 1 << 20).ok()?,
            )
            .ok()?;
            let held = v["pid"]
                .as_u64()
                .is_some_and(|p| pids.iter().any(|&x| u64::from(x) == p));
            held.then(|| id.to_string())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen_says_which_conversation_a_process_holds() {
        let d = tempfile::tempdir().expect("tempdir");
        let chats = d.path().join("q/projects/-home-dev-my-proj/chats");
        std::fs::create_dir_all(&chats).expect("mkdir");
        std::fs::write(
            chats.join("1111.runtime.json"),
            r#"{"pid": 7, "session_id": "1111"}"#,
        )
        .expect("write");
        std::fs::write(chats.join("2222.runtime.json"), r#"{"pid": 8}"#).expect("write");
        let base = d.path().join("q");
        assert_eq!(
            qwen_conversation(&base, Path::new("/home/dev/my.proj"), 8).as_deref(),
            Some("2222")
        );
        assert_eq!(
            qwen_conversation(&base, Path::new("/home/dev/my.proj"), 9),
            None
        );
    }

    #[test]
    fn observed_payloads() {
        let q = Qwen;
        let typed = json!({"hook_event_name":"UserPromptSubmit","prompt":"Say hello please","submitted_prompt":"Say hello please"});
        assert_eq!(q.hook("UserPromptSubmit", &typed), HookSignal::TurnStarted);
        let again = json!({"hook_event_name":"UserPromptSubmit","prompt":""});
        assert_eq!(q.hook("UserPromptSubmit", &again), HookSignal::Ignore);
        let stop = json!({"stop_hook_active":false,"last_assistant_message":"Hello from the mock model.\nTwo."});
        assert_eq!(
            q.hook("Stop", &stop),
            HookSignal::TurnCompleted {
                text: "Hello from the mock model.\nTwo.".into()
            }
        );
        let failed = json!({"error":"authentication_failed","error_details":"401 Incorrect API key provided"});
        assert!(matches!(
            q.hook("StopFailure", &failed),
            HookSignal::Error { kind, .. } if kind == "auth"
        ));
        let idle = json!({"message":"Qwen Code is waiting for your input","notification_type":"idle_prompt","title":"Waiting for input"});
        assert_eq!(q.hook("Notification", &idle), HookSignal::Idle);
        let asks = json!({"notification_type":"permission_prompt"});
        assert_eq!(q.hook("Notification", &asks), HookSignal::Ignore);
        let perm = json!({"tool_name":"run_shell_command","tool_input":{"command":"touch created_by_qwen.txt","description":"Create a file","is_background":false}});
        let HookSignal::Prompt {
            kind,
            subject,
            wait,
            ..
        } = q.hook("PermissionRequest", &perm)
        else {
            panic!("prompt expected")
        };
        assert_eq!(
            (kind.as_str(), subject.as_str(), wait),
            ("permission", "touch created_by_qwen.txt", false)
        );
    }

    #[test]
    fn the_transcripts_last_reply() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("c.jsonl");
        let rec =
            |t: &str, parts: Value| json!({"type": t, "message": {"parts": parts}}).to_string();
        std::fs::write(
            &p,
            [
                rec("user", json!([{"text":"RUNCMD"}])),
                rec("assistant", json!([{"text":"Let me."},{"functionCall":{"name":"run_shell_command"}}])),
                rec("tool_result", json!([{"functionResponse":{}}])),
                rec("assistant", json!([{"text":"thinking","thought":true},{"text":"Command done.\n"},{"text":"Bye."}])),
                rec("system", json!([])),
            ]
            .join("\n"),
        )
        .expect("write");
        assert_eq!(
            qwen_transcript_reply(&p).as_deref(),
            Some("Command done.\nBye.")
        );
    }

    #[test]
    fn launch_builds_a_private_home_from_the_users() {
        let home = tempfile::tempdir().expect("tempdir");
        let user = home.path().join(".qwen");
        std::fs::create_dir_all(&user).expect("mkdir");
        std::fs::write(
            user.join("settings.json"),
            r#"{"model":{"name":"m"},"hooks":{"Stop":[{"matcher":"*","hooks":[{"type":"command","command":"mine"}]}]}}"#,
        )
        .expect("write");
        std::fs::write(user.join("trustedFolders.json"), "{}").expect("write");
        let files = home.path().join("state");
        let mut ctx = crate::cli::test_ctx(
            "'/x/clibotctl' hook --cli qwen",
            "11111111-2222-4333-8444-555555555555",
            &files,
            home.path(),
        );
        let l = Qwen.launch(&ctx);
        let private = files.join("qwen-home");
        assert_eq!(
            l.args,
            ["--session-id", "11111111-2222-4333-8444-555555555555"]
        );
        assert_eq!(
            l.env,
            [("QWEN_HOME".to_string(), private.display().to_string())]
        );
        let v: Value = serde_json::from_str(&l.files[0].1).expect("json");
        assert_eq!(v["model"]["name"], "m", "the user's settings are kept");
        assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "mine");
        assert_eq!(
            v["hooks"]["Stop"][1]["hooks"][0]["command"],
            "'/x/clibotctl' hook --cli qwen"
        );
        let mut links = l.links.clone();
        links.sort();
        assert_eq!(
            links,
            [
                (private.join("projects"), user.join("projects")),
                (
                    private.join("trustedFolders.json"),
                    user.join("trustedFolders.json")
                ),
            ]
        );
        assert_eq!(l.dirs, [user.join("projects")]);
        ctx.resume = true;
        assert_eq!(
            Qwen.launch(&ctx).args,
            ["--resume", "11111111-2222-4333-8444-555555555555"]
        );
    }
}
