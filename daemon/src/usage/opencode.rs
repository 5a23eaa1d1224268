//! OpenCode's messages, as its API lists them (`GET /session/{id}/message`): the usage of the
//! last turn.
//!
//! Each assistant message's `info` holds `modelID`, `cost` (dollars, by OpenCode's own price
//! table) and `tokens`: `input` (the prompt without its cached part), `output` (without the
//! reasoning), `reasoning` (billed as output) and `cache: {read, write}`. A message is one
//! step of the model or more: each step ends with a `step-finish` part carrying that step's
//! `tokens`, so a message is counted by its steps, one call each (by its `info` when it has
//! none). A turn is the assistant messages after the last `user` message; it is over when the
//! last message is an assistant one with `time.completed`. No file is read: the messages come
//! from the link to OpenCode's server ([`crate::session`]'s `opencode_link`), which hands the
//! figures over with the turn's end.

use serde_json::Value;

use super::{Tokens, TurnUsage, count};

/// The figures of an OpenCode `tokens` object.
fn tokens_of(t: &Value) -> Tokens {
    let cache = t.get("cache").unwrap_or(&Value::Null);
    Tokens {
        input: count(t, "input"),
        output: count(t, "output") + count(t, "reasoning"),
        cache_read: count(cache, "read"),
        cache_write: count(cache, "write"),
    }
}

/// The usage of the last turn of `messages` (the API's list); `None` when no assistant
/// message follows the last user message.
pub fn last_turn(messages: &Value) -> Option<TurnUsage> {
    let list = messages.as_array()?;
    let role = |m: &Value| {
        m.pointer("/info/role")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let start = list
        .iter()
        .rposition(|m| role(m).as_deref() == Some("user"))
        .map_or(0, |i| i + 1);
    let answers: Vec<&Value> = list[start..]
        .iter()
        .filter(|m| role(m).as_deref() == Some("assistant"))
        .collect();
    if answers.is_empty() {
        return None;
    }
    let mut usage = TurnUsage::default();
    for m in &answers {
        let steps: Vec<&Value> = m
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("step-finish"))
            .filter_map(|p| p.get("tokens"))
            .collect();
        if steps.is_empty() {
            if let Some(t) = m.pointer("/info/tokens") {
                usage.tokens.add(&tokens_of(t));
                usage.calls += 1;
            }
        } else {
            for t in &steps {
                usage.tokens.add(&tokens_of(t));
            }
            usage.calls += u32::try_from(steps.len()).unwrap_or(u32::MAX);
        }
        if let Some(model) = m.pointer("/info/modelID").and_then(Value::as_str) {
            usage.model = model.to_string();
        }
    }
    usage.complete = list.last().is_some_and(|m| {
        role(m).as_deref() == Some("assistant")
            && m.pointer("/info/time/completed")
                .is_some_and(|t| !t.is_null())
    });
    Some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tokens(input: u64, output: u64, reasoning: u64, read: u64, write: u64) -> Value {
        json!({"input": input, "output": output, "reasoning": reasoning,
               "cache": {"read": read, "write": write}})
    }

    #[test]
    fn the_steps_since_the_user_are_summed_reasoning_as_output() {
        let step = |t: Value| json!({"type": "step-finish", "tokens": t});
        let mut messages = json!([
            {"info": {"role": "user"}, "parts": [{"type": "text", "text": "one"}]},
            {"info": {"role": "assistant", "modelID": "old", "tokens": tokens(9, 9, 0, 0, 0)}, "parts": []},
            {"info": {"role": "user"}, "parts": [{"type": "text", "text": "two"}]},
            // Two steps in one message: counted by its steps, not by its info.
            {"info": {"role": "assistant", "modelID": "m-1", "tokens": tokens(1, 1, 0, 0, 0),
                      "time": {"created": 1, "completed": 2}},
             "parts": [step(tokens(100, 5, 2, 300, 20)), {"type": "tool"},
                       step(tokens(110, 6, 0, 320, 0))]},
            // No step parts (an older OpenCode): by its info.
            {"info": {"role": "assistant", "modelID": "m-2", "tokens": tokens(120, 7, 1, 0, 0),
                      "time": {"created": 3, "completed": 4}},
             "parts": [{"type": "text", "text": "done"}]}
        ]);
        let u = last_turn(&messages).expect("a turn");
        assert_eq!(
            u.tokens,
            Tokens {
                input: 330,
                output: 21,
                cache_read: 620,
                cache_write: 20
            }
        );
        assert_eq!((u.calls, u.model.as_str(), u.complete), (3, "m-2", true));
        messages[4]["info"]["time"] = json!({"created": 3});
        assert!(!last_turn(&messages).expect("a turn").complete);
        let asked = json!([messages[0], messages[1], messages[2]]);
        assert_eq!(last_turn(&asked), None);
        assert_eq!(last_turn(&json!({"error": "x"})), None);
    }

    /// A real message list of the pinned OpenCode (a shell command allowed, its answer)
    /// against the mock's Anthropic API, which reports 1000 in, 200 cache writes, 3000 cache
    /// reads and 7 out per call.
    #[test]
    fn golden_messages_of_the_pinned_opencode() {
        let text = include_str!("../../../tests/fixtures/usage/opencode-tool-turn.json");
        let messages: Value = serde_json::from_str(text).expect("the fixture is JSON");
        let u = last_turn(&messages).expect("a turn");
        assert_eq!(
            (u.calls, u.complete, u.model.as_str()),
            (2, true, "mock-model"),
            "{u:?}"
        );
        assert_eq!(
            u.tokens,
            Tokens {
                input: 2000,
                output: 14,
                cache_read: 6000,
                cache_write: 400
            }
        );
    }
}
