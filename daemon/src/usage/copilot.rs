//! GitHub Copilot CLI's session events (`events.jsonl`): the usage of its last turn.
//!
//! Copilot CLI keeps, for every model call, a `session.usage_record` event (its durable
//! accounting receipt; the live `assistant.usage` event is never written to disk) whose
//! `data.usage` holds `model`, `inputTokens` (the whole prompt: cache reads and writes
//! included, whatever the provider), `outputTokens` (reasoning included), `cacheReadTokens`
//! and `cacheWriteTokens`. A turn is the events after the last `user.message` of the main
//! agent; sub-agents' calls (their events carry an `agentId`) cost too and are counted. It is
//! over when the main agent's last `assistant.message` asks for no tool and the call that
//! wrote it was recorded (a `session.usage_record` after the last `assistant.turn_start`).
//! `session.shutdown`'s totals, written when the CLI exits, are the whole session's: not a
//! turn's.

use serde_json::Value;

use super::{Tokens, TurnUsage, count, json_lines};

/// The usage of the last turn in the events `text`; `None` when no call since the last
/// message of the person was recorded.
pub fn last_turn(text: &str) -> Option<TurnUsage> {
    let events = json_lines(text);
    let kind = |e: &Value| e.get("type").and_then(Value::as_str).map(str::to_string);
    let main = |e: &Value| e.get("agentId").is_none();
    let start = events
        .iter()
        .rposition(|e| kind(e).as_deref() == Some("user.message") && main(e))
        .map_or(0, |i| i + 1);
    let mut usage = TurnUsage::default();
    // The main agent's last answer asked for a tool; its call since its step began was recorded.
    let mut asks = true;
    let mut recorded = false;
    for e in &events[start..] {
        match kind(e).as_deref() {
            Some("session.usage_record") => {
                let Some(u) = e.pointer("/data/usage") else {
                    continue;
                };
                let cache_read = count(u, "cacheReadTokens");
                let cache_write = count(u, "cacheWriteTokens");
                usage.tokens.add(&Tokens {
                    input: count(u, "inputTokens").saturating_sub(cache_read + cache_write),
                    output: count(u, "outputTokens"),
                    cache_read,
                    cache_write,
                });
                usage.calls += 1;
                if let Some(model) = u.get("model").and_then(Value::as_str) {
                    usage.model = model.to_string();
                }
                recorded |= main(e);
            }
            Some("assistant.turn_start") if main(e) => recorded = false,
            Some("assistant.message") if main(e) => {
                asks = e
                    .pointer("/data/toolRequests")
                    .and_then(Value::as_array)
                    .is_some_and(|r| !r.is_empty());
            }
            _ => {}
        }
    }
    if usage.calls == 0 {
        return None;
    }
    usage.complete = !asks && recorded;
    Some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(events: &[Value]) -> String {
        events
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn record(input: u64, output: u64, read: u64, write: u64) -> Value {
        json!({"type": "session.usage_record", "data": {"usage": {"model": "gpt-x",
               "inputTokens": input, "outputTokens": output,
               "cacheReadTokens": read, "cacheWriteTokens": write}}})
    }

    #[test]
    fn the_calls_since_the_person_are_summed_sub_agents_too() {
        let events = [
            json!({"type": "user.message", "data": {"content": "one"}}),
            record(999, 9, 0, 0),
            json!({"type": "user.message", "data": {"content": "two"}}),
            json!({"type": "assistant.turn_start", "data": {}}),
            record(1500, 8, 1000, 100),
            json!({"type": "assistant.message", "data": {"toolRequests": [{"name": "task"}]}}),
            // A sub-agent's prompt and call.
            json!({"type": "user.message", "agentId": "a1", "data": {"content": "look"}}),
            {
                let mut r = record(300, 2, 0, 0);
                r["agentId"] = json!("a1");
                r
            },
            json!({"type": "assistant.turn_end", "data": {}}),
            json!({"type": "assistant.turn_start", "data": {}}),
            record(1600, 5, 1200, 0),
            json!({"type": "assistant.message", "data": {"content": "Done.", "toolRequests": []}}),
            json!({"type": "assistant.turn_end", "data": {}}),
            json!({"type": "session.shutdown", "data": {"modelMetrics": {}}}),
        ];
        let u = last_turn(&lines(&events)).expect("a turn");
        assert_eq!(
            u.tokens,
            Tokens {
                input: 1100,
                output: 15,
                cache_read: 2200,
                cache_write: 100
            }
        );
        assert_eq!((u.calls, u.model.as_str(), u.complete), (3, "gpt-x", true));
        // Waiting for a tool; then a step begun whose call is not recorded yet.
        assert!(!last_turn(&lines(&events[..8])).expect("a turn").complete);
        let mut begun = events[..12].to_vec();
        begun.remove(10);
        assert!(!last_turn(&lines(&begun)).expect("a turn").complete);
        assert_eq!(last_turn(&lines(&events[..3])), None);
    }

    /// A real events file of the pinned Copilot CLI (a shell command allowed, its answer, then
    /// the CLI stopped) against the mock's Anthropic API, which reports 1000 in, 200 cache
    /// writes, 3000 cache reads and 7 out per call: Copilot records 4200 in per call, its cache
    /// included, and its totals at shutdown are not counted again.
    #[test]
    fn golden_events_of_the_pinned_copilot_cli() {
        let text = include_str!("../../../tests/fixtures/usage/copilot-tool-turn.jsonl");
        let u = last_turn(text).expect("a turn");
        assert_eq!(
            (u.calls, u.complete, u.model.as_str()),
            (2, true, "claude-sonnet-4"),
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
