//! Gemini CLI: hooks from a per-session settings file (`GEMINI_CLI_SYSTEM_SETTINGS_PATH`, so the
//! user's own `~/.gemini/settings.json` is never edited); `AfterAgent` carries the final reply,
//! `Notification` (ToolPermission) announces a confirmation. Gemini cannot take an answer through
//! a hook, so hooks return at once and answers go by keys (a digit picks an option).

use serde_json::{Value, json};

use super::{Adapter, HookSignal, Launch, LaunchContext};

pub struct Gemini;

/// Hook events clibot listens to.
const GEMINI_HOOKS: &[&str] = &["BeforeAgent", "AfterAgent", "Notification"];

impl Adapter for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn completes_by_hook(&self) -> bool {
        true
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> Launch {
        let mut hooks = serde_json::Map::new();
        for event in GEMINI_HOOKS {
            // Gemini's hook timeouts are milliseconds.
            let hook = json!({ "name": format!("clibot-{event}"), "type": "command", "command": ctx.hook_command, "timeout": 10_000 });
            hooks.insert(event.to_string(), json!([{ "matcher": "", "hooks": [hook] }]));
        }
        let settings = json!({ "hooksConfig": { "enabled": true }, "hooks": hooks });
        let path = ctx.files_dir.join("gemini-settings.json");
        Launch {
            args: Vec::new(),
            env: vec![("GEMINI_CLI_SYSTEM_SETTINGS_PATH".into(), path.display().to_string())],
            files: vec![(path, settings.to_string())],
        }
    }

    fn hook(&self, event: &str, payload: &Value) -> HookSignal {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match event {
            "BeforeAgent" => HookSignal::TurnStarted,
            "AfterAgent" => HookSignal::TurnCompleted { text: s(payload, "prompt_response") },
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
                    text: if title.is_empty() { s(payload, "message") } else { title },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observed_payloads() {
        let g = Gemini;
        let after = json!({"hook_event_name":"AfterAgent","prompt":"Gemini line one","prompt_response":"Hello from the mock model.\nThis is line two.","stop_hook_active":false});
        assert_eq!(g.hook("AfterAgent", &after), HookSignal::TurnCompleted { text: "Hello from the mock model.\nThis is line two.".into() });
        let note = json!({"hook_event_name":"Notification","notification_type":"ToolPermission","message":"Tool Confirm Shell Command requires execution",
            "details":{"type":"exec","title":"Confirm Shell Command","command":"touch /home/dev/proj/created_by_gemini.txt","rootCommand":"touch"}});
        let HookSignal::Prompt { kind, text, subject, wait, .. } = g.hook("Notification", &note) else { panic!("prompt expected") };
        assert_eq!((kind.as_str(), text.as_str(), subject.as_str(), wait), ("permission", "Confirm Shell Command", "touch /home/dev/proj/created_by_gemini.txt", false));
        let edit = json!({"notification_type":"ToolPermission","details":{"type":"edit","title":"Confirm Write: hello_gemini.txt","filePath":"/p/hello_gemini.txt"}});
        let HookSignal::Prompt { subject, .. } = g.hook("Notification", &edit) else { panic!("prompt expected") };
        assert_eq!(subject, "/p/hello_gemini.txt");
        assert_eq!(g.hook("PreCompress", &json!({})), HookSignal::Ignore);
    }

    #[test]
    fn launch_writes_private_settings() {
        let dir = std::path::Path::new("/state/s1");
        let l = Gemini.launch(&LaunchContext {
            hook_command: "'/x/clibotctl' hook --cli gemini",
            cli_session_id: "u",
            permission_wait_secs: 600,
            hook_argv: &[],
            files_dir: dir,
        });
        assert_eq!(l.env[0].0, "GEMINI_CLI_SYSTEM_SETTINGS_PATH");
        let v: Value = serde_json::from_str(&l.files[0].1).expect("json");
        assert_eq!(v["hooks"]["AfterAgent"][0]["hooks"][0]["command"], "'/x/clibotctl' hook --cli gemini");
        assert_eq!(v["hooks"]["Notification"][0]["hooks"][0]["timeout"], 10_000);
    }
}
