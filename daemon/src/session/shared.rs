//! What the session's files share: prompts as records and their signatures, the table entry of a
//! running session, a reply read off the screen.

use std::time::Duration;

use crate::error::CoreError;
use crate::model::Prompt;

/// Quiet time after output before the screen is read.
pub(crate) const DEBOUNCE: Duration = Duration::from_millis(20);
/// A screen read happens at the latest this long after the first unread output, even while
/// output continues (a spinner never goes quiet).
pub(crate) const MAX_DEBOUNCE: Duration = Duration::from_millis(120);
/// The slow tick.
pub(crate) const TICK: Duration = Duration::from_millis(250);
/// How long an answer waits for the CLI's API link to come back before it goes by keys.
pub(crate) const API_ANSWER_WAIT: Duration = Duration::from_secs(15);
/// Longer single lines than this are pasted (a tmux command line holds about 16 KiB).
pub(crate) const TYPE_MAX: usize = 2_048;

pub(crate) use crate::prompt::signature;

/// Lines of the pane since the turn began, without the echoed input and the prompt that
/// follows the output (generic CLIs: "what the pane printed since the input").
pub(crate) fn reply_from_screen(captured: &str, input_lines: usize) -> String {
    let mut lines: Vec<&str> = captured.lines().map(str::trim_end).collect();
    let prompt_prefix = lines.first().map(|l| l.to_string()).unwrap_or_default();
    let skip = input_lines.max(1).min(lines.len());
    lines.drain(..skip);
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    // The shell (or REPL) prompt that came back at the end is not part of the reply.
    if let Some(last) = lines.last() {
        let p = last.trim();
        if !p.is_empty() && prompt_prefix.starts_with(p) && p.len() <= 40 {
            lines.pop();
        }
    }
    lines.join("\n")
}

/// A prompt read off the screen.
pub(crate) fn new_prompt(sp: &crate::cli::detect::ScreenPrompt) -> Prompt {
    Prompt {
        id: crate::ids::new_id(),
        subject_kind: sp
            .subject_kind
            .or_else(|| crate::automation::subject::infer(&sp.text, &sp.subject)),
        subject_partial: sp.subject_partial,
        kind: sp.kind.clone(),
        text: sp.text.clone(),
        options: sp.options.clone(),
        subject: sp.subject.clone(),
        source: crate::model::PromptSource::Screen,
        answer: sp.answer,
        context: sp.context.clone(),
        ..Default::default()
    }
}

/// The most JSON values (objects, arrays and their members) one hook payload may hold. A
/// CLI's payloads are small trees with long strings (a file's content is one string); a
/// payload of millions of tiny values would cost the daemon many times its size to parse.
const MAX_PAYLOAD_VALUES: usize = 200_000;

/// Refuses a hook payload with more than [`MAX_PAYLOAD_VALUES`] values, counted on its text
/// (commas and openings outside strings) before anything is parsed.
pub(crate) fn check_payload_shape(payload: &str) -> Result<(), CoreError> {
    let (mut in_str, mut escaped, mut n) = (false, false, 0usize);
    for b in payload.bytes() {
        if in_str {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' | b',' => {
                n += 1;
                if n > MAX_PAYLOAD_VALUES {
                    return Err(CoreError::HookPayload(format!(
                        "the hook payload holds more than {MAX_PAYLOAD_VALUES} JSON values: refused"
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screen_reply_drops_echo_and_prompt() {
        let c = "$ ls -1\na.txt\nb.txt\n$ \n\n";
        assert_eq!(reply_from_screen(c, 1), "a.txt\nb.txt");
        let c = "$ echo one\n> echo two\none\ntwo\n$\n";
        assert_eq!(reply_from_screen(c, 2), "one\ntwo");
        assert_eq!(reply_from_screen(">>> 1+1\n2\n>>>\n", 1), "2");
    }

    #[test]
    fn payloads_of_countless_tiny_values_are_refused_before_parsing() {
        let big_string = format!(
            "{{\"tool_input\":{{\"content\":\"{}\"}}}}",
            "a,b,[{".repeat(500_000)
        );
        assert!(
            check_payload_shape(&big_string).is_ok(),
            "commas in a string are text"
        );
        let many = format!("[{}1]", "1,".repeat(MAX_PAYLOAD_VALUES + 1));
        assert!(check_payload_shape(&many).is_err());
        let escaped = r#"{"a":"quote \" then , , ,"}"#;
        assert!(check_payload_shape(escaped).is_ok());
    }
}
