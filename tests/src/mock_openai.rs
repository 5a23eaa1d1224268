//! The OpenAI Responses API for [`crate::mock_llm::MockLlm`], as Codex CLI 0.169 uses it with a
//! custom model provider (`wire_api = "responses"`, `base_url = "<mock>/v1"`): `POST /v1/responses`
//! with `"stream": true`, answered with server-sent events.
//!
//! What Codex sends and needs, as observed with 0.169.0:
//! - `input` is the whole conversation as items: `message` (`role` `developer`, `user` or
//!   `assistant`, `content` of `input_text`/`output_text` parts), `function_call` and
//!   `function_call_output` (matched by `call_id`). The text the user typed is the last `user`
//!   message; context messages (`<environment_context>`, `<turn_aborted>`, ...) come before it.
//! - The main thread offers tools (`exec_command` runs a shell command: `{"cmd": "..."}`, with
//!   `"sandbox_permissions": "require_escalated"` and a `justification` to ask the user first).
//! - A side thread asks for a session title: no tools, the user's text quoted in its prompt, and
//!   `text.format` a JSON schema (`{"title": string}`) the answer must satisfy.
//! - The stream: `response.created`, per output item `response.output_item.added`, text deltas
//!   (`response.output_text.delta`), `response.output_item.done` with the complete item, then
//!   `response.completed` with usage. Codex takes the items from `output_item.done`.

use std::sync::Mutex;

use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use crate::mock_llm::{
    Block, Body, Completion, State, Taken, UserTurn, chunks, decide_turn, example_of_schema,
    json_response, model_of, sse_frame, stream_response, take_request,
};

/// The model name reported when a request names none.
const DEFAULT_MODEL: &str = "codex-mock";

/// Answers `POST /v1/responses`: streamed when the request says `"stream": true` (as Codex
/// always does), one `response` object otherwise.
pub(crate) async fn handle_responses(state: &Mutex<State>, bytes: &[u8]) -> Response<Body> {
    let body: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("body is not JSON: {e}")),
    };
    let Taken {
        id,
        completion,
        chunk_chars,
    } = take_request(state, &body, "resp_mock_", decide).await;
    let model = model_of(&body, DEFAULT_MODEL);
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        let frames = events(&id, model, &completion, chunk_chars)
            .iter()
            .map(|(event, data)| sse_frame(event, data))
            .collect();
        let mut r = stream_response(frames);
        // The plan's windows, as ChatGPT-plan accounts get them: Codex records them in its
        // rollout (`rate_limits`), the only place clibot learns them.
        let reset = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            + PRIMARY_RESETS_IN_SECS;
        for (k, v) in [
            ("x-codex-primary-used-percent", "42.0".to_string()),
            ("x-codex-primary-window-minutes", "300".to_string()),
            ("x-codex-primary-reset-at", reset.to_string()),
            ("x-codex-secondary-used-percent", "30.0".to_string()),
            ("x-codex-secondary-window-minutes", "10080".to_string()),
            ("x-codex-secondary-reset-at", (reset + 86_400).to_string()),
        ] {
            if let Ok(v) = hyper::header::HeaderValue::from_str(&v) {
                r.headers_mut().insert(k, v);
            }
        }
        r
    } else {
        let output = output_items(&id, &completion);
        json_response(
            StatusCode::OK,
            &response_object(&id, model, "completed", output),
        )
    }
}

/// Picks the reply. A request that demands JSON of a schema (`text.format.type: json_schema`,
/// Codex's title generator) gets a value of that schema; everything else goes through the rules.
fn decide(st: &mut State, body: &Value) -> Completion {
    if let Some(format) = body.get("text").and_then(|t| t.get("format"))
        && format.get("type").and_then(Value::as_str) == Some("json_schema")
    {
        let value = format
            .get("schema")
            .map_or_else(|| json!({}), example_of_schema);
        return Completion::text(&value.to_string());
    }
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    decide_turn(st, &user_turn(body), has_tools, "call_mock_")
}

/// The user's latest turn: the text of the last `user` message (without context parts, which
/// start with a `<tag>`), and the `call_id`s of the tool outputs after it. Once a tool output
/// follows the user's text, that text has been answered: it is no longer offered to the rules,
/// so a repeated request cannot start the same tool call again.
fn user_turn(body: &Value) -> UserTurn {
    let items = body
        .get("input")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let last_user = items.iter().rposition(|i| {
        i.get("type").and_then(Value::as_str).unwrap_or("message") == "message"
            && i.get("role").and_then(Value::as_str) == Some("user")
            && !user_text(i).is_empty()
    });
    let Some(at) = last_user else {
        return UserTurn::default();
    };
    let tool_results: Vec<String> = items[at + 1..]
        .iter()
        .filter(|i| i.get("type").and_then(Value::as_str) == Some("function_call_output"))
        .filter_map(|i| i.get("call_id").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    UserTurn {
        text: if tool_results.is_empty() {
            user_text(&items[at])
        } else {
            String::new()
        },
        tool_results,
    }
}

/// The typed text of a `user` message: its `input_text` parts that are not context blocks.
fn user_text(item: &Value) -> String {
    match item.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("input_text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .filter(|t| !t.trim_start().starts_with('<'))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The output items of a response: an assistant `message` per text, a `function_call` per tool
/// call (its `arguments` a JSON string, as the real API sends them).
fn output_items(id: &str, completion: &Completion) -> Vec<Value> {
    completion
        .blocks
        .iter()
        .enumerate()
        .map(|(index, block)| match block {
            Block::Text(text) => json!({
                "type": "message",
                "id": format!("msg_{id}_{index}"),
                "role": "assistant",
                "status": "completed",
                "content": [{ "type": "output_text", "text": text, "annotations": [] }],
            }),
            Block::ToolUse {
                id: call_id,
                name,
                input,
            } => json!({
                "type": "function_call",
                "id": format!("fc_{id}_{index}"),
                "call_id": call_id,
                "name": name,
                "arguments": input.to_string(),
                "status": "completed",
            }),
        })
        .collect()
}

/// When the primary (5-hour) window the mock reports resets, from each answer.
pub const PRIMARY_RESETS_IN_SECS: u64 = 3600;

/// A `response` object with this status and output.
fn response_object(id: &str, model: &str, status: &str, output: Vec<Value>) -> Value {
    let usage = (status == "completed").then(|| {
        json!({
            "input_tokens": 1200,
            "input_tokens_details": { "cached_tokens": 800 },
            "output_tokens": 5 + 3 * output.len(),
            "output_tokens_details": { "reasoning_tokens": 0 },
            "total_tokens": 1205 + 3 * output.len(),
        })
    });
    json!({
        "id": id,
        "object": "response",
        "model": model,
        "status": status,
        "output": output,
        "usage": usage,
    })
}

/// The streamed answer as `(event name, data)` pairs, in the order the real API sends them.
fn events(
    id: &str,
    model: &str,
    completion: &Completion,
    chunk_chars: usize,
) -> Vec<(&'static str, Value)> {
    let mut events = vec![(
        "response.created",
        json!({ "type": "response.created",
                "response": response_object(id, model, "in_progress", Vec::new()) }),
    )];
    let items = output_items(id, completion);
    for (index, (block, item)) in completion.blocks.iter().zip(&items).enumerate() {
        let item_id = item["id"].clone();
        match block {
            Block::Text(text) => {
                let mut started = item.clone();
                started["status"] = json!("in_progress");
                started["content"] = json!([]);
                events.push((
                    "response.output_item.added",
                    json!({ "type": "response.output_item.added", "output_index": index,
                            "item": started }),
                ));
                events.push((
                    "response.content_part.added",
                    json!({ "type": "response.content_part.added", "item_id": item_id,
                            "output_index": index, "content_index": 0,
                            "part": { "type": "output_text", "text": "", "annotations": [] } }),
                ));
                for piece in chunks(text, chunk_chars) {
                    events.push((
                        "response.output_text.delta",
                        json!({ "type": "response.output_text.delta", "item_id": item_id,
                                "output_index": index, "content_index": 0, "delta": piece }),
                    ));
                }
                events.push((
                    "response.output_text.done",
                    json!({ "type": "response.output_text.done", "item_id": item_id,
                            "output_index": index, "content_index": 0, "text": text }),
                ));
            }
            Block::ToolUse { .. } => {
                let mut started = item.clone();
                started["status"] = json!("in_progress");
                started["arguments"] = json!("");
                events.push((
                    "response.output_item.added",
                    json!({ "type": "response.output_item.added", "output_index": index,
                            "item": started }),
                ));
            }
        }
        events.push((
            "response.output_item.done",
            json!({ "type": "response.output_item.done", "output_index": index, "item": item }),
        ));
    }
    events.push((
        "response.completed",
        json!({ "type": "response.completed",
                "response": response_object(id, model, "completed", items) }),
    ));
    events
}

/// An error in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`).
fn error(status: StatusCode, message: &str) -> Response<Body> {
    json_response(
        status,
        &json!({ "error": { "message": message, "type": "invalid_request_error",
                            "param": null, "code": null } }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock_llm::{CHUNK_CHARS, DEFAULT_REPLY, MockLlm, Rule};

    fn user(text: &str) -> Value {
        json!({ "type": "message", "role": "user",
                "content": [{ "type": "input_text", "text": text }] })
    }

    /// A main-thread request as Codex 0.169 sends it: developer instructions, the environment
    /// context as a user message of its own, then the conversation.
    fn request(conversation: Vec<Value>) -> Value {
        let mut input = vec![
            json!({ "type": "message", "role": "developer",
                    "content": [{ "type": "input_text", "text": "You are a coding agent" }] }),
            user("<environment_context>\n  <cwd>/x</cwd>\n</environment_context>"),
        ];
        input.extend(conversation);
        json!({ "model": "m", "stream": true, "input": input,
                "tools": [{ "type": "function", "name": "exec_command" }] })
    }

    #[test]
    fn rules_tool_calls_and_titles() {
        let mut st = State::with_rules(vec![
            Rule::text("HELLO", "Hi there."),
            Rule::tool("RUN", "exec_command", json!({ "cmd": "true" }), "Done."),
        ]);
        assert_eq!(
            decide(&mut st, &request(vec![user("say HELLO")])),
            Completion::text("Hi there.")
        );
        assert_eq!(
            decide(&mut st, &request(vec![])),
            Completion::text(DEFAULT_REPLY),
            "the environment context is not user text"
        );

        st.counter = 4;
        let ask = vec![user("say HELLO"), user("please RUN it")];
        let call = decide(&mut st, &request(ask.clone()));
        let items = output_items("r", &call);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["type"], "function_call");
        assert_eq!(items[0]["name"], "exec_command");
        assert_eq!(items[0]["arguments"], r#"{"cmd":"true"}"#);
        let call_id = items[0]["call_id"].as_str().expect("call id").to_string();
        assert_eq!(call_id, "call_mock_000004");

        let mut answered = ask;
        answered.push(items[0].clone());
        answered.push(json!({ "type": "function_call_output", "call_id": call_id,
                              "output": "Process exited with code 0" }));
        assert_eq!(
            decide(&mut st, &request(answered.clone())),
            Completion::text("Done.")
        );
        assert_eq!(
            decide(&mut st, &request(answered)),
            Completion::text(DEFAULT_REPLY),
            "an answered tool call is not started again"
        );

        // The title generator: no tools, the user's text quoted, a JSON schema to satisfy.
        let title = json!({
            "model": "m", "stream": true, "tools": [],
            "input": [user("Generate a concise, single-line task title\n\nUser prompt:\nplease RUN it")],
            "text": { "format": { "type": "json_schema", "name": "codex_output_schema",
                "schema": { "type": "object", "properties": { "title": { "type": "string" } },
                            "required": ["title"] } } },
        });
        assert_eq!(
            decide(&mut st, &title),
            Completion::text(r#"{"title":"mock"}"#)
        );
        let mut side = request(vec![user("please RUN it")]);
        side["tools"] = json!([]);
        assert_eq!(decide(&mut st, &side), Completion::text(DEFAULT_REPLY));
    }

    #[test]
    fn a_reply_streams_as_the_api_does() {
        let text = "Hello from the mock model.\nLine two — ünïcode, long enough to be split.";
        let events = events("r1", "m", &Completion::text(text), CHUNK_CHARS);
        let names: Vec<&str> = events.iter().map(|(e, _)| *e).collect();
        assert_eq!(names.first(), Some(&"response.created"));
        assert_eq!(
            &names[names.len() - 3..],
            &[
                "response.output_text.done",
                "response.output_item.done",
                "response.completed"
            ]
        );
        for (name, data) in &events {
            assert_eq!(data["type"], *name, "event name matches data.type");
        }
        let joined: String = events
            .iter()
            .filter(|(e, _)| *e == "response.output_text.delta")
            .map(|(_, d)| d["delta"].as_str().expect("delta").to_string())
            .collect();
        assert_eq!(joined, text);
        let (_, done) = &events[events.len() - 2];
        assert_eq!(done["item"]["content"][0]["text"], text);
        let (_, completed) = &events[events.len() - 1];
        assert_eq!(completed["response"]["status"], "completed");
        assert_eq!(completed["response"]["usage"]["total_tokens"], 1208);
    }

    #[test]
    fn serves_responses_over_http() {
        let mock = MockLlm::start(vec![Rule::text("ping", "pong")]);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let addr = mock.url().trim_start_matches("http://").to_string();
        let raw = |body: &str| {
            let request = format!(
                "POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer k\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let addr = addr.clone();
            runtime.block_on(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
                s.write_all(request.as_bytes()).await.expect("write");
                let mut out = Vec::new();
                s.read_to_end(&mut out).await.expect("read");
                String::from_utf8(out).expect("utf8")
            })
        };
        let body = r#"{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"ping"}]}]}"#;
        let streamed = raw(body);
        assert!(
            streamed.contains("content-type: text/event-stream"),
            "{streamed}"
        );
        assert!(streamed.contains("event: response.completed"), "{streamed}");
        assert!(streamed.contains(r#""delta":"pong""#), "{streamed}");

        let plain = raw(&body.replace("true", "false"));
        let json_part = plain.split("\r\n\r\n").nth(1).expect("body");
        let v: Value = serde_json::from_str(json_part).expect("JSON body");
        assert_eq!(v["output"][0]["content"][0]["text"], "pong");
        assert!(raw("not json").starts_with("HTTP/1.1 400"));
        assert_eq!(mock.requests().len(), 2);
    }
}
