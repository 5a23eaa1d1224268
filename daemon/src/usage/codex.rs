//! Codex's rollout (JSONL): the usage of its last turn, and the plan's windows.
//!
//! Codex records `token_count` events with the running total of the conversation
//! (`info.total_token_usage`) and the plan's windows as its API's answers told them
//! (`rate_limits.primary` / `.secondary`: percent used, window length, reset time). A turn's
//! usage is the total at its last `token_count` less the total before the turn began (the
//! turn's `task_started`, or an older version's `user_message`): a difference of totals
//! cannot count an event written twice.
//! Codex's `input_tokens` include the cached ones; here `input` is the rest.

use serde_json::Value;

use super::{PlanWindow, Tokens, TurnUsage, count, json_lines, window_name};

fn payload_type(line: &Value) -> Option<&str> {
    line.pointer("/payload/type").and_then(Value::as_str)
}

fn totals(u: &Value) -> Tokens {
    let cached = count(u, "cached_input_tokens");
    Tokens {
        input: count(u, "input_tokens").saturating_sub(cached),
        output: count(u, "output_tokens"),
        cache_read: cached,
        cache_write: count(u, "cache_write_input_tokens"),
    }
}

fn minus(a: Tokens, b: Tokens) -> Tokens {
    Tokens {
        input: a.input.saturating_sub(b.input),
        output: a.output.saturating_sub(b.output),
        cache_read: a.cache_read.saturating_sub(b.cache_read),
        cache_write: a.cache_write.saturating_sub(b.cache_write),
    }
}

fn window(w: &Value, now_ms: i64) -> Option<PlanWindow> {
    let used = w.get("used_percent").and_then(Value::as_f64)?;
    let minutes = count(w, "window_minutes");
    let resets_at_ms = match (
        w.get("resets_at").and_then(Value::as_i64),
        w.get("resets_in_seconds").and_then(Value::as_i64),
    ) {
        (Some(at), _) => at.saturating_mul(1000),
        (None, Some(secs)) => now_ms.saturating_add(secs.saturating_mul(1000)),
        _ => 0,
    };
    Some(PlanWindow {
        name: window_name(minutes),
        used_percent: used,
        resets_at_ms,
    })
}

/// The usage of the rollout's last turn (`now_ms` places a window's "resets in N s"); `None`
/// when no `token_count` follows the last message a person sent.
pub fn last_turn(text: &str, now_ms: i64) -> Option<TurnUsage> {
    let lines = json_lines(text);
    // A turn begins with `task_started` and its `turn_context` (older versions: the person's
    // `user_message`).
    let start = lines
        .iter()
        .rposition(|l| {
            matches!(payload_type(l), Some("user_message" | "task_started"))
                || l.get("type").and_then(Value::as_str) == Some("turn_context")
        })
        .unwrap_or(0);
    let counted = |l: &&Value| {
        payload_type(l) == Some("token_count")
            && l.pointer("/payload/info/total_token_usage").is_some()
    };
    let before = lines[..start]
        .iter()
        .rev()
        .find(counted)
        .and_then(|l| l.pointer("/payload/info/total_token_usage"))
        .map(totals)
        .unwrap_or_default();
    let in_turn: Vec<&Value> = lines[start..].iter().filter(counted).collect();
    let last = in_turn.last()?;
    let total = last
        .pointer("/payload/info/total_token_usage")
        .map(totals)
        .unwrap_or_default();
    let model = lines
        .iter()
        .rev()
        .find(|l| l.get("type").and_then(Value::as_str) == Some("turn_context"))
        .and_then(|l| l.pointer("/payload/model"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    // The windows as the turn's last answer told them.
    let windows = lines[start..]
        .iter()
        .rev()
        .filter(|l| payload_type(l) == Some("token_count"))
        .find_map(|l| l.pointer("/payload/rate_limits").filter(|r| !r.is_null()))
        .map(|r| {
            ["primary", "secondary"]
                .iter()
                .filter_map(|k| r.get(*k).and_then(|w| window(w, now_ms)))
                .collect()
        })
        .unwrap_or_default();
    // Distinct totals are distinct API calls (an event written twice repeats its total).
    let mut calls = 0u32;
    let mut prev: Option<&Value> = None;
    for l in &in_turn {
        let t = l.pointer("/payload/info/total_token_usage");
        if t != prev {
            calls += 1;
            prev = t;
        }
    }
    let complete = lines[start..]
        .iter()
        .any(|l| payload_type(l) == Some("task_complete"));
    Some(TurnUsage {
        tokens: minus(total, before),
        model,
        calls,
        windows,
        complete,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_count(input: u64, cached: u64, output: u64) -> String {
        format!(
            r#"{{"type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"cached_input_tokens":{cached},"output_tokens":{output}}}}},"rate_limits":{{"primary":{{"used_percent":42.0,"window_minutes":300,"resets_at":1800000000}},"secondary":{{"used_percent":30.5,"window_minutes":10080,"resets_in_seconds":60}}}}}}}}"#
        )
    }

    #[test]
    fn a_turn_is_the_difference_of_totals_and_an_event_written_twice_counts_once() {
        let text = [
            r#"{"type":"turn_context","payload":{"model":"gpt-x"}}"#.to_string(),
            r#"{"type":"event_msg","payload":{"type":"user_message","message":"one"}}"#.into(),
            token_count(100, 40, 5),
            r#"{"type":"event_msg","payload":{"type":"user_message","message":"two"}}"#.into(),
            token_count(250, 100, 9),
            token_count(250, 100, 9),
            token_count(400, 150, 20),
        ]
        .join("\n");
        let u = last_turn(&text, 1000).expect("a turn");
        assert_eq!(
            u.tokens,
            Tokens {
                input: 190,
                output: 15,
                cache_read: 110,
                cache_write: 0
            }
        );
        assert_eq!((u.calls, u.model.as_str()), (2, "gpt-x"));
        assert_eq!(
            u.windows,
            vec![
                PlanWindow {
                    name: "5h".into(),
                    used_percent: 42.0,
                    resets_at_ms: 1_800_000_000_000
                },
                PlanWindow {
                    name: "7d".into(),
                    used_percent: 30.5,
                    resets_at_ms: 61_000
                },
            ]
        );
        let none = r#"{"type":"event_msg","payload":{"type":"user_message","message":"x"}}"#;
        assert_eq!(last_turn(none, 0), None);
    }

    /// A real rollout of the pinned Codex (a command approved, its answer; then a second
    /// message) against the mock, which reports input 1200 of which 800 cached, output 5 and
    /// 3 per output item, and a plan at 42 % of 5 h and 30 % of 7 d.
    #[test]
    fn golden_rollout_of_the_pinned_codex() {
        let text = include_str!("../../../tests/fixtures/usage/codex-two-turns.jsonl");
        let u = last_turn(text, 0).expect("a turn");
        assert_eq!(u.calls, 1, "{u:?}");
        assert!(u.complete);
        assert_eq!(
            u.tokens,
            Tokens {
                input: 400,
                output: 8,
                cache_read: 800,
                cache_write: 0
            }
        );
        let names: Vec<(&str, f64)> = u
            .windows
            .iter()
            .map(|w| (w.name.as_str(), w.used_percent))
            .collect();
        assert_eq!(names, [("5h", 42.0), ("7d", 30.0)]);
        assert!(u.windows.iter().all(|w| w.resets_at_ms > 0));
    }
}
