//! Claude Code's transcript (JSONL): the usage of its last turn.
//!
//! Claude Code writes one `assistant` line per content block, each carrying the message's
//! `usage` as known when the block was written: a message of three blocks is three lines with
//! the same `message.id` and an `output_tokens` that grows (the stream's start says 1, its end
//! the real count). Counting lines over-counts by the number of blocks, and counting the first
//! line under-counts output, so: one entry per `message.id`, the line with the largest
//! `output_tokens` kept. A turn starts at the last line a person typed (a `user` line that is
//! not a tool's result); sub-agents' messages (`isSidechain`) cost too and are counted.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Tokens, TurnUsage, count, json_lines};

/// Whether `line` is a person's message (not a tool's result fed back).
fn typed_by_a_person(line: &Value) -> bool {
    if line.get("type").and_then(Value::as_str) != Some("user")
        || line.get("isMeta") == Some(&Value::Bool(true))
    {
        return false;
    }
    match line.pointer("/message/content") {
        Some(Value::String(_)) => true,
        Some(Value::Array(blocks)) => blocks
            .iter()
            .any(|b| b.get("type").and_then(Value::as_str) != Some("tool_result")),
        _ => false,
    }
}

/// The usage of the transcript's last turn; `None` when it holds no assistant message since.
pub fn last_turn(text: &str) -> Option<TurnUsage> {
    let lines = json_lines(text);
    let start = lines
        .iter()
        .rposition(typed_by_a_person)
        .map_or(0, |i| i + 1);
    // message id -> (output tokens, its tokens, model), in the order first seen.
    let mut by_id: BTreeMap<String, (u64, Tokens, String)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    // The last message's reason to stop: anything but a tool call ends the turn.
    let mut stop = None;
    for (i, line) in lines[start..].iter().enumerate() {
        if line.get("type").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let Some(msg) = line.get("message") else {
            continue;
        };
        let model = msg.get("model").and_then(Value::as_str).unwrap_or("");
        // Claude Code's own stand-in replies (an API error shown as a message) cost nothing.
        if model == "<synthetic>" {
            continue;
        }
        let Some(u) = msg.get("usage") else { continue };
        stop = msg
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        let id = msg
            .get("id")
            .and_then(Value::as_str)
            .map_or_else(|| format!("line-{i}"), str::to_string);
        let tokens = Tokens {
            input: count(u, "input_tokens"),
            output: count(u, "output_tokens"),
            cache_read: count(u, "cache_read_input_tokens"),
            cache_write: count(u, "cache_creation_input_tokens"),
        };
        match by_id.get_mut(&id) {
            Some(seen) if seen.0 >= tokens.output => {}
            Some(seen) => *seen = (tokens.output, tokens, model.to_string()),
            None => {
                order.push(id.clone());
                by_id.insert(id, (tokens.output, tokens, model.to_string()));
            }
        }
    }
    if by_id.is_empty() {
        return None;
    }
    let mut usage = TurnUsage {
        complete: stop.is_some_and(|s| s != "tool_use"),
        ..Default::default()
    };
    for id in &order {
        if let Some((_, t, model)) = by_id.get(id) {
            usage.tokens.add(t);
            usage.calls += 1;
            usage.model = model.clone();
        }
    }
    Some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_counted_once_with_its_final_output_and_the_turn_starts_at_the_person() {
        let line = |t: &str, id: &str, out: u64| {
            format!(
                r#"{{"type":"{t}","message":{{"id":"{id}","model":"claude-x","usage":{{"input_tokens":10,"cache_creation_input_tokens":2,"cache_read_input_tokens":30,"output_tokens":{out}}},"content":[]}}}}"#
            )
        };
        let text = [
            r#"{"type":"user","message":{"content":"first question"}}"#.to_string(),
            line("assistant", "m0", 99),
            r#"{"type":"user","message":{"content":"second question"}}"#.to_string(),
            line("assistant", "m1", 1),
            line("assistant", "m1", 7),
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"ok"}]}}"#
                .to_string(),
            line("assistant", "m2", 1),
            line("assistant", "m2", 10),
            line("assistant", "m2", 10),
            "not json".to_string(),
        ]
        .join("\n");
        let u = last_turn(&text).expect("a turn");
        assert_eq!(
            u.tokens,
            Tokens {
                input: 20,
                output: 17,
                cache_read: 60,
                cache_write: 4
            }
        );
        assert_eq!((u.calls, u.model.as_str()), (2, "claude-x"));
        assert_eq!(
            last_turn(r#"{"type":"user","message":{"content":"hi"}}"#),
            None
        );
    }

    /// A real transcript of the pinned Claude Code (a question, a tool call approved, the
    /// final answer) against the mock, whose usage is input 1000, cache writes 200, cache
    /// reads 3000 and output 4 + 3 per block: two API calls (one block each) made the turn.
    #[test]
    fn golden_transcript_of_the_pinned_claude_code() {
        let text = include_str!("../../../tests/fixtures/usage/claude-tool-turn.jsonl");
        let u = last_turn(text).expect("a turn");
        assert_eq!(u.calls, 2, "{u:?}");
        assert!(u.complete);
        // Read while Claude Code had written only its tool call: not complete.
        let cut = &text[..text.find(r#""stop_reason":"end_turn""#).expect("end")];
        let cut = &cut[..cut.rfind('\n').expect("a line")];
        let early = last_turn(cut).expect("a turn");
        assert_eq!((early.calls, early.complete), (1, false));
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
