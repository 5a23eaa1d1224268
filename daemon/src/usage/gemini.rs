//! Gemini CLI's chat file: the usage of its last turn.
//!
//! Gemini CLI records each of its answers as a `gemini` message and, once the API's answer
//! ends, that message's `tokens` (`input`: the prompt, cached part included; `cached`;
//! `output`; `thoughts`, billed as output; `tool`; `total`). A turn is the messages after the
//! last `user` message a person wrote (a tool's result goes back as a `user` message too, of
//! `functionResponse` parts); it is over when its last message is an answer with tokens that
//! asked for no tool.

use serde_json::Value;

use super::{Tokens, TurnUsage, count};

/// The usage of the last turn of the replayed `messages`; `None` when no answer since the
/// last user message carries tokens.
pub fn last_turn(messages: &[Value]) -> Option<TurnUsage> {
    let kind = |m: &Value| m.get("type").and_then(Value::as_str).map(str::to_string);
    let tool_result = |m: &Value| {
        m.get("content")
            .and_then(Value::as_array)
            .is_some_and(|parts| {
                !parts.is_empty() && parts.iter().all(|p| p.get("functionResponse").is_some())
            })
    };
    let start = messages
        .iter()
        .rposition(|m| kind(m).as_deref() == Some("user") && !tool_result(m))
        .map_or(0, |i| i + 1);
    let answers: Vec<&Value> = messages[start..]
        .iter()
        .filter(|m| kind(m).as_deref() == Some("gemini"))
        .collect();
    let mut usage = TurnUsage::default();
    for m in &answers {
        let Some(t) = m.get("tokens") else { continue };
        let cached = count(t, "cached");
        usage.tokens.add(&Tokens {
            input: count(t, "input").saturating_sub(cached),
            output: count(t, "output") + count(t, "thoughts"),
            cache_read: cached,
            cache_write: 0,
        });
        usage.calls += 1;
        if let Some(model) = m.get("model").and_then(Value::as_str) {
            usage.model = model.to_string();
        }
    }
    if usage.calls == 0 {
        return None;
    }
    usage.complete = messages[start..].last().is_some_and(|m| {
        kind(m).as_deref() == Some("gemini")
            && m.get("tokens").is_some()
            && m.get("toolCalls")
                .and_then(Value::as_array)
                .is_none_or(|c| c.is_empty())
    });
    Some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_answers_since_the_person_are_summed_thoughts_as_output() {
        let m = vec![
            json!({"type": "user", "content": "one"}),
            json!({"type": "gemini", "tokens": {"input": 99, "output": 9}}),
            json!({"type": "user", "content": "two"}),
            json!({"type": "gemini", "model": "gemini-x", "toolCalls": [{"id": "t"}],
                   "tokens": {"input": 100, "cached": 40, "output": 5, "thoughts": 2}}),
            json!({"type": "gemini", "model": "gemini-x",
                   "tokens": {"input": 150, "cached": 60, "output": 7, "thoughts": 0}}),
        ];
        let u = last_turn(&m).expect("a turn");
        assert_eq!(
            u.tokens,
            Tokens {
                input: 150,
                output: 14,
                cache_read: 100,
                cache_write: 0
            }
        );
        assert_eq!(
            (u.calls, u.model.as_str(), u.complete),
            (2, "gemini-x", true)
        );
        let waiting = &m[..4];
        assert!(!last_turn(waiting).expect("a turn").complete);
        assert_eq!(last_turn(&m[..3]), None);
    }

    /// A real chat file of the pinned Gemini CLI (a shell command allowed, its answer)
    /// against the mock, which reports 1500 in of which 500 cached, 6 out and 2 of thoughts
    /// per answer: the tool's result, written back as a `user` message, splits no turn.
    #[test]
    fn golden_chat_of_the_pinned_gemini_cli() {
        let text = include_str!("../../../tests/fixtures/usage/gemini-tool-turn.jsonl");
        let u = last_turn(&crate::cli::gemini_messages(text)).expect("a turn");
        assert_eq!((u.calls, u.complete), (2, true), "{u:?}");
        assert_eq!(
            u.tokens,
            Tokens {
                input: 2000,
                output: 16,
                cache_read: 1000,
                cache_write: 0
            }
        );
    }
}
