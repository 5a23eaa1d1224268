//! Codex CLI: its legacy `notify` program (given per session with `-c notify=[…]`, never by
//! editing `~/.codex/config.toml`) reports each finished turn with the last assistant message;
//! hook payloads (`Stop`, `UserPromptSubmit`, `PermissionRequest`) are understood too, for
//! installations that configure Codex hooks to run `clibotctl hook --cli codex`. Approval
//! dialogs are read off the screen and answered with keys (a digit answers at once: `1` runs the
//! command, `3` declines it, which ends the turn without a notify call: the screen then reads
//! `■ Conversation interrupted`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::running::only_recent;
use super::{Adapter, Choice, HookSignal, Launch, LaunchContext, Running};
use crate::model::Prompt;

pub struct Codex;

impl Adapter for Codex {
    fn running_conversation(&self, r: &Running<'_>) -> Option<String> {
        let root = r.state_dir("CODEX_HOME", ".codex")?.join("sessions");
        let wanted = r.dir.display().to_string();
        let mut files = Vec::new();
        collect_rollouts(&root, 0, &mut files);
        // Only the rollouts of this directory (their first line records it).
        files.retain(|f| {
            crate::confine::beneath::read_record_head(f, 1 << 20)
                .ok()
                .and_then(|t| {
                    t.lines()
                        .next()
                        .map(|l| l.contains(&format!("\"{wanted}\"")))
                })
                .unwrap_or(false)
        });
        let f = only_recent(files, r.since_ms)?;
        let stem = f.file_stem()?.to_string_lossy().into_owned();
        // rollout-<timestamp>-<uuid>: the uuid is the last 36 characters.
        (stem.len() >= 36).then(|| stem[stem.len() - 36..].to_string())
    }
    fn name(&self) -> &'static str {
        "codex"
    }

    /// Esc interrupts Codex's turn (its footer says `esc to interrupt`; Ctrl-C twice quits).
    fn cancel_keys(&self) -> &'static [&'static str] {
        &["Escape"]
    }

    fn completes_by_hook(&self) -> bool {
        true
    }

    fn api_key_vars(&self) -> &'static [&'static str] {
        &["OPENAI_API_KEY", "CODEX_API_KEY"]
    }

    fn conversation_record(
        &self,
        rec: &crate::model::SessionRecord,
        cli: Option<&crate::cli::CliSpec>,
    ) -> Option<(PathBuf, Option<PathBuf>)> {
        let home = super::records_dir(cli, "CODEX_HOME", ".codex")?;
        Some((home, session_rollout(rec, cli)))
    }

    fn turn_usage(
        &self,
        rec: &crate::model::SessionRecord,
        cli: Option<&crate::cli::CliSpec>,
    ) -> Option<crate::usage::TurnUsage> {
        let text = super::transcript_tail(&session_rollout(rec, cli)?)?;
        crate::usage::codex::last_turn(&text, crate::store::now_ms())
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> Launch {
        // `codex resume --last` continues the most recent session in this directory.
        let mut args: Vec<String> = if ctx.resume && !ctx.conversation.is_empty() {
            vec!["resume".into(), ctx.conversation.to_string()]
        } else if ctx.resume {
            vec!["resume".into(), "--last".into()]
        } else {
            Vec::new()
        };
        // Without it Codex 0.169 starts a shared background app-server that outlives the
        // session (a stop leaves it running; a resumed thread is then "open in another app").
        args.push("--no-daemon".into());
        if !ctx.hook_argv.is_empty() {
            // `-c key=value` takes a TOML value: an array of strings.
            let argv = Value::from(ctx.hook_argv.to_vec()).to_string();
            args.extend(["-c".into(), format!("notify={argv}")]);
        }
        Launch {
            args,
            ..Launch::default()
        }
    }

    fn hook(&self, event: &str, payload: &Value) -> HookSignal {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let event = if event.is_empty() {
            s(payload, "type")
        } else {
            event.to_string()
        };
        match event.as_str() {
            // Legacy notify. Codex also reports its internal side threads (the title generator);
            // those are recognisable by their instruction text.
            "agent-turn-complete" => {
                let inputs = payload.get("input-messages").and_then(Value::as_array);
                let internal = inputs.is_some_and(|m| {
                    m.iter().any(|x| {
                        x.as_str()
                            .is_some_and(|t| t.starts_with("Generate a concise"))
                    })
                });
                if internal {
                    return HookSignal::Ignore;
                }
                HookSignal::TurnCompleted {
                    text: s(payload, "last-assistant-message"),
                }
            }
            "Stop" => HookSignal::TurnCompleted {
                text: s(payload, "last_assistant_message"),
            },
            "UserPromptSubmit" => HookSignal::TurnStarted,
            "PermissionRequest" => {
                let input = payload.get("tool_input").cloned().unwrap_or(Value::Null);
                HookSignal::Prompt {
                    kind: "permission".into(),
                    text: format!(
                        "Codex wants to run {}. Do you want to proceed?",
                        s(payload, "tool_name")
                    ),
                    options: vec!["Yes".into(), "No".into()],
                    subject: s(&input, "command"),
                    wait: true,
                }
            }
            _ => HookSignal::Ignore,
        }
    }

    fn answers_through_hooks(&self) -> bool {
        true
    }
    fn decision(&self, prompt: &Prompt, choice: &Choice, _payload: &Value) -> Option<String> {
        let Choice::Option(i) = choice else {
            return None;
        };
        let label = prompt.options.get(*i)?.to_lowercase();
        let decision = if label.starts_with("no") {
            json!({"behavior": "deny", "message": "The user declined this from clibot."})
        } else {
            json!({"behavior": "allow"})
        };
        Some(json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}).to_string())
    }
}

/// The rollout a session writes: the one named by its conversation id when Codex uses clibot's
/// (`rollout-…-<id>.jsonl`), else the newest one of its directory written since its turn began.
fn session_rollout(
    rec: &crate::model::SessionRecord,
    cli: Option<&crate::cli::CliSpec>,
) -> Option<PathBuf> {
    let home = super::records_dir(cli, "CODEX_HOME", ".codex")?;
    let mut files = Vec::new();
    collect_rollouts(&home.join("sessions"), 0, &mut files);
    if !rec.cli_session_id.is_empty()
        && let Some(f) = files.iter().find(|f| {
            f.file_stem()
                .is_some_and(|s| s.to_string_lossy().ends_with(&rec.cli_session_id))
        })
    {
        return Some(f.clone());
    }
    let wanted = format!("\"{}\"", rec.dir.display());
    files.retain(|f| {
        crate::confine::beneath::read_record_head(f, 1 << 20)
            .ok()
            .and_then(|t| t.lines().next().map(|l| l.contains(&wanted)))
            .unwrap_or(false)
    });
    only_recent(files, rec.turn_started_ms)
}

/// Codex's rollout files under `dir` (`YYYY/MM/DD/rollout-*.jsonl`).
fn collect_rollouts(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 3 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_rollouts(&p, depth + 1, out);
        } else if p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("rollout-"))
        {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cli::detect::AnswerStyle;

    #[test]
    fn notify_and_hook_payloads() {
        let c = Codex;
        let done = json!({"type":"agent-turn-complete","thread-id":"01a2","input-messages":["Codex line one"],"last-assistant-message":"Hello from the mock model."});
        assert_eq!(
            c.hook("", &done),
            HookSignal::TurnCompleted {
                text: "Hello from the mock model.".into()
            }
        );
        let title = json!({"type":"agent-turn-complete","input-messages":["Generate a concise, single-line task title for this"],"last-assistant-message":"Title"});
        assert_eq!(c.hook("", &title), HookSignal::Ignore);
        let stop = json!({"hook_event_name":"Stop","last_assistant_message":"Done."});
        assert_eq!(
            c.hook("Stop", &stop),
            HookSignal::TurnCompleted {
                text: "Done.".into()
            }
        );
        let perm = json!({"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"touch /home/dev/outside_codex.txt"}});
        let HookSignal::Prompt {
            subject, options, ..
        } = c.hook("PermissionRequest", &perm)
        else {
            panic!("prompt expected")
        };
        assert_eq!(subject, "touch /home/dev/outside_codex.txt");
        let p = Prompt {
            id: "p".into(),
            kind: "permission".into(),
            text: String::new(),
            options,
            subject,
            source: crate::model::PromptSource::Hook,
            answer: AnswerStyle::Digit,
            ..Default::default()
        };
        let out: Value =
            serde_json::from_str(&c.decision(&p, &Choice::Option(1), &perm).expect("deny"))
                .expect("json");
        assert_eq!(out["hookSpecificOutput"]["decision"]["behavior"], "deny");
    }

    use crate::cli::detect::tests::screen;

    /// Screens of Codex 0.169 (offline, against a mock model): a declined command ends the turn
    /// with `■ Conversation interrupted` and no notify call, so the screen must say the turn is
    /// over — but only while that line is the last thing above the empty composer, not once the
    /// next message is typed or running.
    #[test]
    fn interrupted_counts_only_at_the_bottom() {
        let packs = crate::cli::detect::builtin_packs();
        let pack = crate::cli::detect::Pack::compile(packs.get("codex").expect("codex pack"), None)
            .expect("compiles");
        let a = pack.analyze(&screen("codex_interrupted.txt"));
        assert!(a.interrupted && a.idle && !a.busy, "{a:?}");
        assert!(a.prompt.is_none());
        let a = pack.analyze(&screen("codex_typed_after_interrupt.txt"));
        assert!(!a.interrupted, "a message in the composer: {a:?}");
        let a = pack.analyze(&screen("codex_busy_after_interrupt.txt"));
        assert!(!a.interrupted && a.busy, "the next turn runs: {a:?}");
        let a = pack.analyze(&screen("codex_exec_approval.txt"));
        assert!(!a.interrupted && !a.idle && a.prompt.is_some(), "{a:?}");
    }

    #[test]
    fn launch_sets_notify_per_session() {
        let argv = vec![
            "/x/clibotctl".to_string(),
            "hook".into(),
            "--cli".into(),
            "codex".into(),
        ];
        let l = Codex.launch(&LaunchContext {
            hook_argv: &argv,
            ..crate::cli::test_ctx(
                "",
                "u",
                std::path::Path::new("/tmp"),
                std::path::Path::new("/tmp"),
            )
        });
        assert_eq!(
            l.args,
            [
                "--no-daemon",
                "-c",
                r#"notify=["/x/clibotctl","hook","--cli","codex"]"#
            ]
        );
        let resumed = Codex.launch(&LaunchContext {
            resume: true,
            ..crate::cli::test_ctx(
                "",
                "u",
                std::path::Path::new("/tmp"),
                std::path::Path::new("/tmp"),
            )
        });
        assert_eq!(resumed.args, ["resume", "--last", "--no-daemon"]);
        // A named conversation (`spawn --resume`, `clibotctl resume`) is resumed by its id.
        let named = Codex.launch(&LaunchContext {
            resume: true,
            conversation: "0199-thread",
            ..crate::cli::test_ctx(
                "",
                "u",
                std::path::Path::new("/tmp"),
                std::path::Path::new("/tmp"),
            )
        });
        assert_eq!(named.args, ["resume", "0199-thread", "--no-daemon"]);
    }
}
