//! GitHub Copilot CLI (`copilot`, 1.0). Hooks come from a per-session Copilot home
//! (`COPILOT_HOME`): its entries link to the user's `~/.copilot` (config, trusted folders,
//! session state, permissions) except `hooks/`, which holds clibot's `clibot.json` beside links
//! to the user's own hook files — the user's files are never edited.
//!
//! `userPromptSubmitted` starts a turn; `agentStop` ends it, the reply read from the session's
//! `events.jsonl` (its `transcriptPath`). `permissionRequest` announces a dialog with the tool
//! and its input; it returns at once, so the dialog is drawn and can be answered at the desk
//! too, and answers from clibot go by keys: a digit picks Yes, "Yes, and don't ask again", or the
//! "No, and tell Copilot what to do differently" field, which takes a line of feedback (`No`, or
//! what the person wrote) and Enter. A turn that is cancelled or fails sends no `agentStop`:
//! the screen ends it. `--session-id ID` starts the conversation clibot names, and continues it
//! when it exists.

use std::path::Path;

use serde_json::{Value, json};

use super::{Adapter, HookSignal, Launch, LaunchContext, Running, classify_error};

pub struct Copilot;

/// Hook events clibot listens to.
const COPILOT_HOOKS: &[&str] = &[
    "userPromptSubmitted",
    "agentStop",
    "permissionRequest",
    "errorOccurred",
];

/// The user's Copilot home: `COPILOT_HOME` when the CLI's environment sets it, else
/// `~/.copilot`.
fn user_home(ctx_home: &std::path::Path, env_home: Option<&str>) -> std::path::PathBuf {
    match env_home.filter(|h| !h.is_empty()) {
        Some(h) => std::path::PathBuf::from(h),
        None => ctx_home.join(".copilot"),
    }
}

impl Adapter for Copilot {
    fn running_conversation(&self, r: &Running<'_>) -> Option<String> {
        if let Some(id) = r
            .flag(&["--resume", "--session-id"])
            .or_else(|| r.flag_eq(&["--resume", "--session-id"]))
        {
            return Some(id);
        }
        let base = r.state_dir("COPILOT_HOME", ".copilot")?;
        copilot_conversation(&base.join("session-state"), r.pid)
    }
    fn name(&self) -> &'static str {
        "copilot"
    }

    /// Esc twice, a moment apart (within a second), interrupts a turn; one only arms it ("esc
    /// again to interrupt"), and two that arrive together are one sequence.
    fn cancel_keys(&self) -> &'static [&'static str] {
        &["Escape", "Escape"]
    }

    /// A turn interrupted before any output puts its message back in the input box.
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
        let user = user_home(ctx.home, ctx.env_value("COPILOT_HOME"));
        let home = ctx.files_dir.join("copilot-home");
        let mut hooks = serde_json::Map::new();
        for event in COPILOT_HOOKS {
            hooks.insert(
                event.to_string(),
                json!([{ "type": "command", "bash": format!("{} {event}", ctx.hook_command), "timeoutSec": 30 }]),
            );
        }
        let config = json!({ "version": 1, "hooks": hooks });
        // Conversations are kept in the user's own session state, so that `copilot --resume`
        // outside clibot (and discovery) sees them; it is made when the user has none yet.
        let state = user.join("session-state");
        let mut links = super::link_entries(&user, &home, &["hooks", "session-state"]);
        links.push((home.join("session-state"), state.clone()));
        // The user's own hooks keep running beside clibot's.
        links.extend(super::link_entries(
            &user.join("hooks"),
            &home.join("hooks"),
            &["clibot.json"],
        ));
        let conversation = if ctx.conversation.is_empty() {
            ctx.cli_session_id
        } else {
            ctx.conversation
        };
        Launch {
            // Starts the conversation of that id, or continues it when it exists.
            args: vec![format!("--session-id={conversation}")],
            env: vec![("COPILOT_HOME".into(), home.display().to_string())],
            files: vec![(home.join("hooks/clibot.json"), config.to_string())],
            links,
            dirs: vec![state],
        }
    }

    fn hook(&self, event: &str, payload: &Value) -> HookSignal {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match event {
            "userPromptSubmitted" => HookSignal::TurnStarted,
            "agentStop" => match payload.get("transcriptPath").and_then(Value::as_str) {
                Some(p) => HookSignal::TurnCompletedIn {
                    path: p.into(),
                    stamp: payload
                        .get("timestamp")
                        .and_then(Value::as_i64)
                        .unwrap_or(0),
                    read: super::ReplyReader(copilot_turn_reply),
                },
                None => HookSignal::TurnCompleted {
                    text: String::new(),
                },
            },
            "permissionRequest" => {
                let input = payload.get("toolInput").cloned().unwrap_or(Value::Null);
                let subject = ["command", "file_path", "path", "url"]
                    .iter()
                    .map(|k| s(&input, k))
                    .find(|v| !v.is_empty())
                    .unwrap_or_default();
                let tool = s(payload, "toolName");
                HookSignal::Prompt {
                    kind: "permission".into(),
                    text: match tool.as_str() {
                        "bash" => "Do you want to run this command?".into(),
                        "" => "Permission needed".into(),
                        t => format!("Allow {t}?"),
                    },
                    // The dialog's own options come from the screen.
                    options: Vec::new(),
                    subject,
                    wait: false,
                }
            }
            // Every failed model call, retries included; only a final one ends the turn (read
            // from the screen), so a recoverable one is not an error of the session.
            "errorOccurred"
                if payload.get("recoverable").and_then(Value::as_bool) == Some(false) =>
            {
                let message = payload
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                HookSignal::Error {
                    kind: classify_error(&message).to_string(),
                    message,
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
        copilot_transcript_reply(&session_events(rec, cli)?)
    }

    fn turn_usage(
        &self,
        rec: &crate::model::SessionRecord,
        cli: Option<&crate::cli::CliSpec>,
    ) -> Option<crate::usage::TurnUsage> {
        let text = super::transcript_tail(&session_events(rec, cli)?)?;
        crate::usage::copilot::last_turn(&text)
    }
}

/// The events file of session `rec`: `session-state/<its id>/events.jsonl` in the Copilot home
/// its spec names (`COPILOT_HOME`, see [`super::records_dir`]), else in `~/.copilot`.
fn session_events(
    rec: &crate::model::SessionRecord,
    cli: Option<&crate::cli::CliSpec>,
) -> Option<std::path::PathBuf> {
    let id = super::record_id(&rec.cli_session_id)?;
    let home = super::records_dir(cli, "COPILOT_HOME", ".copilot")?;
    Some(home.join("session-state").join(id).join("events.jsonl"))
}

/// The reply of the turn whose end the `agentStop` call stamped `stamp` reported, once the
/// events file holds that call (a `hook.start` of `agentStop` with that timestamp): what
/// [`copilot_transcript_reply`] reads from the events before it. `None` until then. A stamp of
/// 0 (none in the call) reads the file as it is.
pub fn copilot_turn_reply(path: &std::path::Path, stamp: i64) -> Option<String> {
    if stamp == 0 {
        return copilot_transcript_reply(path);
    }
    let text = read_records(path)?;
    let mut upto = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        at += line.len();
        let Ok(v) = serde_json::from_str::<Value>(line.trim_end()) else {
            continue;
        };
        if v.get("type").and_then(Value::as_str) == Some("hook.start")
            && v.pointer("/data/hookType").and_then(Value::as_str) == Some("agentStop")
            && v.pointer("/data/input/timestamp").and_then(Value::as_i64) == Some(stamp)
        {
            upto = Some(at);
            break;
        }
    }
    Some(reply_in(&text[..upto?]).unwrap_or_default())
}

/// The reply of the last turn in a Copilot session's `events.jsonl`: after the last
/// `user.message`, the last `assistant.message` with text and no tool requests (the last with
/// text at all, when every one asked for a tool).
pub fn copilot_transcript_reply(path: &std::path::Path) -> Option<String> {
    reply_in(&read_records(path)?)
}

/// The largest events file read (a long session's): past it, no reply is read.
const MAX_RECORDS: u64 = 64 << 20;

/// An events file's text: a regular file only (never a device or a pipe a hook named), its
/// last [`MAX_RECORDS`] at most.
fn read_records(path: &std::path::Path) -> Option<String> {
    crate::confine::beneath::read_record_tail(path, MAX_RECORDS).ok()
}

/// [`copilot_transcript_reply`] of the events in `text`.
fn reply_in(text: &str) -> Option<String> {
    let mut reply: Option<String> = None;
    let mut any: Option<String> = None;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match v.get("type").and_then(Value::as_str) {
            Some("user.message") => {
                reply = None;
                any = None;
            }
            Some("assistant.message") => {
                let content = v
                    .pointer("/data/content")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if content.trim().is_empty() {
                    continue;
                }
                let asks = v
                    .pointer("/data/toolRequests")
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty());
                if !asks {
                    reply = Some(content.to_string());
                }
                any = Some(content.to_string());
            }
            _ => {}
        }
    }
    reply.or(any)
}

/// Copilot CLI marks the conversation a process holds open with `inuse.<pid>.lock` in its
/// `session-state/<id>/` (the pid of the native program, which the npm launcher starts as its
/// child): certain, not a guess.
pub fn copilot_conversation(state: &Path, pid: u32) -> Option<String> {
    // The process and its descendants (`tree` lists both).
    let mut pids = crate::procs::tree(pid);
    if !pids.contains(&pid) {
        pids.push(pid);
    }
    std::fs::read_dir(state).ok()?.flatten().find_map(|e| {
        let holds = pids
            .iter()
            .any(|p| e.path().join(format!("inuse.{p}.lock")).exists());
        holds.then(|| e.file_name().to_string_lossy().into_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copilot_says_which_conversation_a_process_holds() {
        let d = tempfile::tempdir().expect("tempdir");
        let state = d.path().join("session-state");
        for (id, pid) in [("aaaa", 41), ("bbbb", 42)] {
            std::fs::create_dir_all(state.join(id)).expect("mkdir");
            std::fs::write(state.join(id).join(format!("inuse.{pid}.lock")), "").expect("write");
        }
        assert_eq!(copilot_conversation(&state, 42).as_deref(), Some("bbbb"));
        assert_eq!(copilot_conversation(&state, 43), None);
    }

    #[test]
    fn observed_payloads() {
        let c = Copilot;
        assert_eq!(
            c.hook(
                "userPromptSubmitted",
                &json!({"sessionId":"s","cwd":"/p","prompt":"Say hi"})
            ),
            HookSignal::TurnStarted
        );
        let perm = json!({"hookName":"permissionRequest","sessionId":"s","cwd":"/p","toolName":"bash","toolInput":{"command":"touch created_by_copilot.txt"},"permissionSuggestions":[]});
        let HookSignal::Prompt {
            kind,
            text,
            subject,
            wait,
            ..
        } = c.hook("permissionRequest", &perm)
        else {
            panic!("prompt expected")
        };
        assert_eq!(
            (kind.as_str(), text.as_str(), subject.as_str(), wait),
            (
                "permission",
                "Do you want to run this command?",
                "touch created_by_copilot.txt",
                false
            )
        );
        let edit = json!({"toolName":"edit","toolInput":{"file_path":"/p/hello.txt","diff":"+hi"}});
        let HookSignal::Prompt { subject, .. } = c.hook("permissionRequest", &edit) else {
            panic!("prompt expected")
        };
        assert_eq!(subject, "/p/hello.txt");
        let retry = json!({"errorContext":"model_call","recoverable":true,"error":{"message":"mock 500 error"}});
        assert_eq!(c.hook("errorOccurred", &retry), HookSignal::Ignore);
        let fatal = json!({"errorContext":"model_call","recoverable":false,"error":{"message":"429 rate limit"}});
        assert!(matches!(
            c.hook("errorOccurred", &fatal),
            HookSignal::Error { kind, .. } if kind == "rate_limit"
        ));
        assert_eq!(c.hook("sessionEnd", &json!({})), HookSignal::Ignore);
    }

    #[test]
    fn the_reply_is_the_last_answer_after_the_last_prompt() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        let ev = |t: &str, data: Value| json!({"type": t, "data": data}).to_string();
        std::fs::write(
            &p,
            [
                ev("user.message", json!({"content":"first"})),
                ev(
                    "assistant.message",
                    json!({"content":"Old.","toolRequests":[]}),
                ),
                ev("user.message", json!({"content":"RUNCMD"})),
                ev(
                    "assistant.message",
                    json!({"content":"Let me do that.","toolRequests":[{"name":"bash"}]}),
                ),
                ev("tool.execution_complete", json!({})),
                ev(
                    "assistant.message",
                    json!({"content":"Command done.\nTwo lines.","toolRequests":[]}),
                ),
                ev("assistant.turn_end", json!({})),
                ev(
                    "hook.start",
                    json!({"hookType":"agentStop","input":{"timestamp":1795780530260_i64}}),
                ),
                ev("user.message", json!({"content":"queued next"})),
                "torn".into(),
            ]
            .join("\n"),
        )
        .expect("write");
        // The turn the stop call ended, though the next prompt already follows it.
        assert_eq!(
            copilot_turn_reply(&p, 1795780530260).as_deref(),
            Some("Command done.\nTwo lines.")
        );
        assert_eq!(
            copilot_turn_reply(&p, 42),
            None,
            "that call is not written yet"
        );
        // Lines ended by CRLF, text in other scripts: never cut inside a character.
        let crlf = dir.path().join("crlf.jsonl");
        let text = std::fs::read_to_string(&p)
            .expect("read")
            .replace('\n', "\r\n");
        std::fs::write(&crlf, text.replace("Old.", "Старый ответ.")).expect("write");
        assert_eq!(
            copilot_turn_reply(&crlf, 1795780530260).as_deref(),
            Some("Command done.\nTwo lines.")
        );
        assert_eq!(
            copilot_turn_reply(std::path::Path::new("/dev/zero"), 0),
            None
        );
        let stop = json!({"transcriptPath": p.display().to_string(), "stopReason": "end_turn", "timestamp": 1795780530260_i64});
        let HookSignal::TurnCompletedIn { path, stamp, read } = Copilot.hook("agentStop", &stop)
        else {
            panic!("a completion read from the events file")
        };
        assert_eq!(
            (read.0)(&path, stamp).as_deref(),
            Some("Command done.\nTwo lines.")
        );
    }

    #[test]
    fn launch_builds_a_private_home_with_clibots_hooks_beside_the_users() {
        let home = tempfile::tempdir().expect("tempdir");
        let user = home.path().join(".copilot");
        std::fs::create_dir_all(user.join("hooks")).expect("mkdir");
        std::fs::write(user.join("config.json"), "{}").expect("write");
        std::fs::write(user.join("hooks/mine.json"), "{}").expect("write");
        let files = home.path().join("state");
        let l = Copilot.launch(&crate::cli::test_ctx(
            "'/x/clibotctl' hook --cli copilot",
            "0cb916db-26aa-40f2-86b5-1ba81b225fd2",
            &files,
            home.path(),
        ));
        let private = files.join("copilot-home");
        assert_eq!(
            l.args,
            ["--session-id=0cb916db-26aa-40f2-86b5-1ba81b225fd2"]
        );
        assert_eq!(
            l.env,
            [("COPILOT_HOME".to_string(), private.display().to_string())]
        );
        let v: Value = serde_json::from_str(&l.files[0].1).expect("json");
        assert_eq!(l.files[0].0, private.join("hooks/clibot.json"));
        assert_eq!(
            v["hooks"]["agentStop"][0]["bash"],
            "'/x/clibotctl' hook --cli copilot agentStop"
        );
        let mut links = l.links.clone();
        links.sort();
        assert_eq!(
            links,
            [
                (private.join("config.json"), user.join("config.json")),
                (
                    private.join("hooks/mine.json"),
                    user.join("hooks/mine.json")
                ),
                (private.join("session-state"), user.join("session-state")),
            ]
        );
        assert_eq!(l.dirs, [user.join("session-state")]);
    }
}
