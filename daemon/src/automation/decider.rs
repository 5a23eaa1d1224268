//! The decider: an external program asked about a prompt, with what it needs to judge it on
//! stdin (one JSON object) and its verdict on stdout — an option, words for an open question
//! (only with `[decider] answer_questions`), or "ask a person".

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::DeciderConfig;

/// The longest answer in words typed for the decider.
pub const MAX_TEXT_ANSWER: usize = 500;

/// Why words from the decider are not typed: one line of plain text, not too long.
pub fn text_refusal(text: &str) -> Option<String> {
    if text.chars().any(char::is_control) {
        return Some(
            "the decider's answer holds control characters (a key press, a new line)".into(),
        );
    }
    if text.chars().count() > MAX_TEXT_ANSWER {
        return Some(format!(
            "the decider's answer is over {MAX_TEXT_ANSWER} characters"
        ));
    }
    None
}

/// What the decider is told.
#[derive(Debug, Serialize)]
pub struct DeciderInput<'a> {
    pub session: &'a str,
    pub cli: &'a str,
    pub dir: &'a str,
    pub prompt: DeciderPrompt<'a>,
    pub screen: String,
    pub last_reply: &'a str,
    /// The prompt is an open question (no options) and `[decider] answer_questions` is on: the
    /// decider may answer it in words (`{"text": "…"}`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub free_text: bool,
}

#[derive(Debug, Serialize)]
pub struct DeciderPrompt<'a> {
    pub id: &'a str,
    pub kind: &'a str,
    pub text: &'a str,
    pub options: &'a [String],
    pub subject: &'a str,
}

/// What the decider said.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// An option's number or label, and an optional note.
    Choice { choice: String, note: String },
    /// Leave it to a person, and why.
    Ask { note: String },
    /// Words to type as the answer to an open question.
    Text { text: String, note: String },
}

#[derive(Deserialize)]
struct DeciderOutput {
    #[serde(default)]
    choice: Option<serde_json::Value>,
    #[serde(default)]
    ask: bool,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    note: String,
}

/// Why the decider gave no usable answer (then a person is asked, and the chat told).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DeciderError {
    #[error("the decider could not be started ({0})")]
    Start(String),
    #[error("the decider gave no answer within {0} ms")]
    Timeout(u64),
    #[error("the decider failed (exit status {status}){stderr}")]
    Failed { status: String, stderr: String },
    #[error("the decider's answer is not the expected JSON ({0})")]
    BadOutput(String),
}

/// Reads the decider's stdout.
pub fn parse_verdict(out: &str) -> Result<Verdict, DeciderError> {
    let line = out.trim();
    let o: DeciderOutput = serde_json::from_str(line).map_err(|e| {
        let head: String = line.chars().take(80).collect();
        DeciderError::BadOutput(format!("{e}; it printed {head:?}"))
    })?;
    let note: String = o.note.chars().take(300).collect();
    if o.ask {
        return Ok(Verdict::Ask { note });
    }
    if let Some(text) = o.text.filter(|t| !t.trim().is_empty()) {
        return Ok(Verdict::Text {
            text: text.trim().to_string(),
            note,
        });
    }
    let choice = match o.choice {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => {
            return Err(DeciderError::BadOutput(
                "neither a \"choice\", a \"text\" nor \"ask\": true".into(),
            ));
        }
    };
    Ok(Verdict::Choice { choice, note })
}

/// Runs the decider once: the input on stdin, one JSON object read from stdout. Killed when it
/// takes longer than its time limit.
pub async fn run_decider(
    d: &DeciderConfig,
    input: &DeciderInput<'_>,
) -> Result<Verdict, DeciderError> {
    let body = serde_json::to_vec(input).map_err(|e| DeciderError::Start(e.to_string()))?;
    let mut cmd = tokio::process::Command::new(&d.command[0]);
    // Its own process group: whatever it starts ends with it, on time-out and after it answered.
    cmd.args(&d.command[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| DeciderError::Start(format!("{}: {e}", d.command[0])))?;
    let group = child
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id as i32));
    let end_group = move || {
        if let Some(g) = group {
            let _ = rustix::process::kill_process_group(g, rustix::process::Signal::KILL);
        }
    };
    if let Some(mut s) = child.stdin.take() {
        // A decider that does not read its input still gets to answer.
        tokio::spawn(async move {
            let _ = s.write_all(&body).await;
            let _ = s.shutdown().await;
        });
    }
    let out = read_capped(child.stdout.take());
    let err = read_capped(child.stderr.take());
    let status = match tokio::time::timeout(Duration::from_millis(d.timeout_ms), child.wait()).await
    {
        Ok(s) => s,
        Err(_) => {
            end_group();
            return Err(DeciderError::Timeout(d.timeout_ms));
        }
    };
    // It has exited: what it printed is in the pipes. A child of its own that keeps them open
    // must not hold the answer back: until they end, or a moment at most, then the group goes.
    let grace = Duration::from_millis(300);
    let _ = tokio::join!(
        tokio::time::timeout(grace, out.1),
        tokio::time::timeout(grace, err.1)
    );
    end_group();
    let take = |b: &std::sync::Arc<std::sync::Mutex<Vec<u8>>>| {
        std::mem::take(&mut *b.lock().unwrap_or_else(|e| e.into_inner()))
    };
    let (out, err) = (take(&out.0), take(&err.0));
    let status = status.map_err(|e| DeciderError::Start(e.to_string()))?;
    if !status.success() {
        let e = String::from_utf8_lossy(&err);
        let e = e.trim();
        return Err(DeciderError::Failed {
            status: status
                .code()
                .map_or_else(|| "killed by a signal".into(), |c| c.to_string()),
            stderr: if e.is_empty() {
                String::new()
            } else {
                format!(": {}", e.lines().last().unwrap_or_default())
            },
        });
    }
    parse_verdict(&String::from_utf8_lossy(&out))
}

/// Reads a pipe in a task of its own, into a buffer (at most 64 KiB kept) that can be taken
/// before the pipe ends: a decider's own child may hold it open long after the decider exited.
fn read_capped<R>(
    pipe: Option<R>,
) -> (
    std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    tokio::task::JoinHandle<()>,
)
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let b = buf.clone();
    let task = tokio::spawn(async move {
        let Some(mut p) = pipe else { return };
        let mut chunk = [0u8; 4096];
        loop {
            match p.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let mut b = b.lock().unwrap_or_else(|e| e.into_inner());
                    let room = (64 * 1024usize).saturating_sub(b.len());
                    b.extend_from_slice(&chunk[..n.min(room)]);
                }
            }
        }
    });
    (buf, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_answer_an_open_question_and_odd_words_are_refused() {
        assert_eq!(
            parse_verdict(r#"{"text": " PostgreSQL ", "note": "the README names it"}"#),
            Ok(Verdict::Text {
                text: "PostgreSQL".into(),
                note: "the README names it".into()
            })
        );
        assert!(matches!(
            parse_verdict(r#"{"text": ""}"#),
            Err(DeciderError::BadOutput(_))
        ));
        assert_eq!(text_refusal("PostgreSQL 16"), None);
        assert!(text_refusal("yes\nrm -rf /").is_some());
        assert!(text_refusal("\u{1b}[A").is_some());
        assert!(text_refusal(&"x".repeat(MAX_TEXT_ANSWER + 1)).is_some());
    }
}
