//! Qwen Code's conversation file (JSONL): the usage of its last turn.
//!
//! Qwen Code writes each answer of the model as an `assistant` record whose `usageMetadata`
//! is the API's usage as Qwen Code reads it, whatever the provider: `promptTokenCount` (the
//! whole prompt, cached part included), `cachedContentTokenCount`, `candidatesTokenCount`,
//! `thoughtsTokenCount` and `totalTokenCount`. What is output differs by provider (an OpenAI
//! API's completion tokens hold its reasoning, Gemini's candidates do not), so output is what
//! the total adds to the prompt, as Qwen Code counts it itself; candidates and thoughts when
//! the total is missing. A turn is the records after the last message a person typed (a `user`
//! record with no `subtype`: notifications and messages sent during a turn have one); a tool's
//! result is a `tool_result` record. It is over when its last record that is not `system`
//! bookkeeping is an answer with usage that calls no function.
//!
//! Not in these figures: prompt-cache writes (an Anthropic provider's are inside the prompt
//! count, as input), and sub-agents' calls, whose answers Qwen Code does not record here.

use serde_json::Value;

use super::{Tokens, TurnUsage, count, json_lines};

/// Whether `record` is a message a person typed.
fn typed_by_a_person(record: &Value) -> bool {
    record.get("type").and_then(Value::as_str) == Some("user") && record.get("subtype").is_none()
}

/// Whether `record` is an answer that calls a function (a tool).
fn calls_a_tool(record: &Value) -> bool {
    record
        .pointer("/message/parts")
        .and_then(Value::as_array)
        .is_some_and(|parts| parts.iter().any(|p| p.get("functionCall").is_some()))
}

/// The usage of the conversation's last turn; `None` when no answer since the last message a
/// person typed carries usage.
pub fn last_turn(text: &str) -> Option<TurnUsage> {
    let records = json_lines(text);
    let start = records
        .iter()
        .rposition(typed_by_a_person)
        .map_or(0, |i| i + 1);
    let turn = &records[start..];
    let kind = |r: &Value| r.get("type").and_then(Value::as_str).map(str::to_string);
    let mut usage = TurnUsage::default();
    for r in turn {
        if kind(r).as_deref() != Some("assistant") {
            continue;
        }
        let Some(u) = r.get("usageMetadata") else {
            continue;
        };
        let prompt = count(u, "promptTokenCount");
        let cached = count(u, "cachedContentTokenCount");
        let output = match u.get("totalTokenCount").and_then(Value::as_u64) {
            Some(total) if u.get("promptTokenCount").is_some() && total >= prompt => total - prompt,
            _ => count(u, "candidatesTokenCount") + count(u, "thoughtsTokenCount"),
        };
        usage.tokens.add(&Tokens {
            input: prompt.saturating_sub(cached),
            output,
            cache_read: cached,
            cache_write: 0,
        });
        usage.calls += 1;
        if let Some(model) = r.get("model").and_then(Value::as_str) {
            usage.model = model.to_string();
        }
    }
    if usage.calls == 0 {
        return None;
    }
    usage.complete = turn
        .iter()
        .rfind(|r| kind(r).as_deref() != Some("system"))
        .is_some_and(|r| {
            kind(r).as_deref() == Some("assistant")
                && r.get("usageMetadata").is_some()
                && !calls_a_tool(r)
        });
    Some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(records: &[Value]) -> String {
        records
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn answer(parts: Value, usage: Value) -> Value {
        json!({"type": "assistant", "model": "qwen-x", "message": {"role": "model", "parts": parts},
               "usageMetadata": usage})
    }

    #[test]
    fn the_answers_since_the_person_are_summed_output_as_the_total_adds() {
        let call = json!([{"functionCall": {"name": "run_shell_command"}}]);
        let records = [
            json!({"type": "user", "message": {"parts": [{"text": "one"}]}}),
            answer(json!([{"text": "old"}]), json!({"promptTokenCount": 99})),
            json!({"type": "user", "message": {"parts": [{"text": "two"}]}}),
            // An OpenAI API: the completion holds the reasoning.
            answer(
                call,
                json!({"promptTokenCount": 100, "cachedContentTokenCount": 40,
                       "candidatesTokenCount": 9, "thoughtsTokenCount": 4, "totalTokenCount": 109}),
            ),
            json!({"type": "system", "subtype": "ui_telemetry"}),
            json!({"type": "tool_result", "message": {"parts": [{"functionResponse": {}}]}}),
            json!({"type": "user", "subtype": "mid_turn_user_message", "message": {"parts": []}}),
            // Gemini's API: thoughts besides the candidates; then no total at all.
            answer(
                json!([{"text": "done"}]),
                json!({"promptTokenCount": 150, "cachedContentTokenCount": 60,
                       "candidatesTokenCount": 5, "thoughtsTokenCount": 2}),
            ),
            json!({"type": "system", "subtype": "turn_result"}),
        ];
        let u = last_turn(&lines(&records)).expect("a turn");
        assert_eq!(
            u.tokens,
            Tokens {
                input: 150,
                output: 16,
                cache_read: 100,
                cache_write: 0
            }
        );
        assert_eq!((u.calls, u.model.as_str(), u.complete), (2, "qwen-x", true));
        let waiting = lines(&records[..6]);
        assert!(!last_turn(&waiting).expect("a turn").complete);
        assert_eq!(last_turn(&lines(&records[..3])), None);
        assert_eq!(last_turn("torn"), None);
    }

    /// A real conversation of the pinned Qwen Code (a shell command allowed, its answer)
    /// against the mock's Chat Completions API, which reports 10 prompt and 5 completion
    /// tokens per answer, none cached: the tool's result splits no turn.
    #[test]
    fn golden_conversation_of_the_pinned_qwen_code() {
        let text = include_str!("../../../tests/fixtures/usage/qwen-tool-turn.jsonl");
        let u = last_turn(text).expect("a turn");
        assert_eq!(
            (u.calls, u.complete, u.model.as_str()),
            (2, true, "mock-model"),
            "{u:?}"
        );
        assert_eq!(
            u.tokens,
            Tokens {
                input: 20,
                output: 10,
                cache_read: 0,
                cache_write: 0
            }
        );
    }
}
