//! The OpenAI Chat Completions API for [`crate::mock_llm::MockLlm`], as OpenAI-compatible CLIs
//! use it (Qwen Code with `OPENAI_BASE_URL`): `POST /v1/chat/completions`, streamed as
//! server-sent `data:` chunks ending with `data: [DONE]` when the request says
//! `"stream": true`, one `chat.completion` object otherwise; `GET /v1/models`.
//!
//! The conversation is `messages` (`system`, `user`, `assistant` with `tool_calls`, `tool`
//! with `tool_call_id`); the text the user typed is the last `user` message, and once `tool`
//! results follow it, that text has been answered. Tools are offered as
//! `{"type": "function", "function": {"name", "parameters"}}`. A request that asks for JSON
//! (`response_format` of type `json_object`/`json_schema`, as side requests do) gets a value
//! of the schema, never a rule's reply.

use std::sync::Mutex;

use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use crate::mock_llm::{
    Block, Body, Completion, State, Taken, UserTurn, chunks, decide_turn, example_of_schema,
    json_response, model_of, stream_response, take_request,
};

/// The model name reported when a request names none.
const DEFAULT_MODEL: &str = "chat-mock";

/// Answers `POST /v1/chat/completions`.
pub(crate) async fn handle_chat(state: &Mutex<State>, bytes: &[u8]) -> Response<Body> {
    let body: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("body is not JSON: {e}")),
    };
    let Taken {
        id,
        completion,
        chunk_chars,
    } = take_request(state, &body, "chatcmpl-mock", decide).await;
    let model = model_of(&body, DEFAULT_MODEL);
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        let frames = stream_chunks(&id, model, &completion, chunk_chars)
            .iter()
            .map(|c| format!("data: {c}\n\n"))
            .chain(std::iter::once("data: [DONE]\n\n".to_string()))
            .collect();
        stream_response(frames)
    } else {
        json_response(StatusCode::OK, &completion_object(&id, model, &completion))
    }
}

/// `GET /v1/models`: the one model the mock pretends to be.
pub(crate) fn models() -> Response<Body> {
    json_response(
        StatusCode::OK,
        &json!({ "object": "list", "data": [{ "id": DEFAULT_MODEL, "object": "model", "owned_by": "mock" }] }),
    )
}

/// Picks the reply: JSON for a request that demands it, else the rules.
fn decide(st: &mut State, body: &Value) -> Completion {
    if let Some(format) = body.get("response_format") {
        let value = format
            .pointer("/json_schema/schema")
            .map_or_else(|| json!({}), example_of_schema);
        return Completion::text(&value.to_string());
    }
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    decide_turn(st, &user_turn(body), has_tools, "call_mock_")
}

/// The user's latest turn: the last `user` message's text, and the ids of the tool results
/// after it (then the text is answered, and not offered to the rules again).
fn user_turn(body: &Value) -> UserTurn {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let Some(at) = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("user"))
    else {
        return UserTurn::default();
    };
    let tool_results: Vec<String> = messages[at + 1..]
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .filter_map(|m| m.get("tool_call_id").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    UserTurn {
        text: if tool_results.is_empty() {
            content_text(&messages[at])
        } else {
            String::new()
        },
        tool_results,
    }
}

/// A message's text: a string, or its `text` parts joined.
fn content_text(m: &Value) -> String {
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn usage() -> Value {
    json!({ "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15 })
}

/// The whole answer as one `chat.completion`.
fn completion_object(id: &str, model: &str, completion: &Completion) -> Value {
    let text: String = completion
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.as_str()),
            Block::ToolUse { .. } => None,
        })
        .collect();
    let calls: Vec<Value> = completion
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, name, input } => Some(json!({
                "id": id, "type": "function",
                "function": { "name": name, "arguments": input.to_string() },
            })),
            Block::Text(_) => None,
        })
        .collect();
    let mut message = json!({ "role": "assistant", "content": text });
    let finish = if calls.is_empty() {
        "stop"
    } else {
        message["tool_calls"] = Value::Array(calls);
        "tool_calls"
    };
    json!({
        "id": id, "object": "chat.completion", "created": 1_700_000_000, "model": model,
        "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
        "usage": usage(),
    })
}

/// The streamed answer: the role, the text in pieces, each tool call (its arguments in
/// pieces), the finish reason, then the usage.
fn stream_chunks(id: &str, model: &str, completion: &Completion, chunk_chars: usize) -> Vec<Value> {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        })
    };
    let mut out = vec![chunk(
        json!({ "role": "assistant", "content": "" }),
        Value::Null,
    )];
    let mut calls = 0;
    for block in &completion.blocks {
        match block {
            Block::Text(text) => {
                for piece in chunks(text, chunk_chars) {
                    out.push(chunk(json!({ "content": piece }), Value::Null));
                }
            }
            Block::ToolUse {
                id: call_id,
                name,
                input,
            } => {
                out.push(chunk(
                    json!({ "tool_calls": [{ "index": calls, "id": call_id, "type": "function",
                                             "function": { "name": name, "arguments": "" } }] }),
                    Value::Null,
                ));
                for piece in chunks(&input.to_string(), chunk_chars) {
                    out.push(chunk(
                        json!({ "tool_calls": [{ "index": calls, "function": { "arguments": piece } }] }),
                        Value::Null,
                    ));
                }
                calls += 1;
            }
        }
    }
    let finish = if calls > 0 { "tool_calls" } else { "stop" };
    out.push(chunk(json!({}), json!(finish)));
    out.push(json!({
        "id": id, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model,
        "choices": [], "usage": usage(),
    }));
    out
}

/// An error in OpenAI's shape.
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
    use crate::mock_llm::{DEFAULT_REPLY, Rule};

    fn request(messages: Vec<Value>) -> Value {
        let mut all = vec![json!({ "role": "system", "content": "You are a coding agent" })];
        all.extend(messages);
        json!({ "model": "m", "stream": true, "messages": all,
                "tools": [{ "type": "function", "function": { "name": "run_shell_command" } }] })
    }

    #[test]
    fn rules_tool_calls_and_json_requests() {
        let mut st = State::with_rules(vec![
            Rule::text("HELLO", "Hi there."),
            Rule::tool(
                "RUN",
                "run_shell_command",
                json!({ "command": "true" }),
                "Done.",
            ),
        ]);
        let hello = json!({ "role": "user", "content": [{ "type": "text", "text": "say HELLO" }] });
        assert_eq!(
            decide(&mut st, &request(vec![hello.clone()])),
            Completion::text("Hi there.")
        );
        let ask = vec![hello, json!({ "role": "user", "content": "please RUN it" })];
        let call = decide(&mut st, &request(ask.clone()));
        let obj = completion_object("c", "m", &call);
        let tc = &obj["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(tc["function"]["name"], "run_shell_command");
        assert_eq!(tc["function"]["arguments"], r#"{"command":"true"}"#);
        assert_eq!(obj["choices"][0]["finish_reason"], "tool_calls");
        let mut answered = ask;
        answered.push(obj["choices"][0]["message"].clone());
        answered.push(json!({ "role": "tool", "tool_call_id": tc["id"], "content": "ok" }));
        assert_eq!(
            decide(&mut st, &request(answered.clone())),
            Completion::text("Done.")
        );
        assert_eq!(
            decide(&mut st, &request(answered)),
            Completion::text(DEFAULT_REPLY),
            "an answered tool call is not started again"
        );
        let mut side = request(vec![json!({ "role": "user", "content": "please RUN it" })]);
        side["response_format"] = json!({ "type": "json_schema", "json_schema": { "schema": {
            "type": "object", "properties": { "next_speaker": { "type": "string" } } } } });
        assert_eq!(
            decide(&mut st, &side),
            Completion::text(r#"{"next_speaker":"mock"}"#)
        );
    }

    #[test]
    fn a_streamed_answer_reassembles() {
        let completion = Completion {
            blocks: vec![
                Block::Text("Hello there, a long enough text to be cut.".into()),
                Block::ToolUse {
                    id: "call_1".into(),
                    name: "write_file".into(),
                    input: json!({ "file_path": "/x/hello.txt", "content": "hi" }),
                },
            ],
        };
        let chunks = stream_chunks("c", "m", &completion, 8);
        let text: String = chunks
            .iter()
            .filter_map(|c| c.pointer("/choices/0/delta/content")?.as_str())
            .collect();
        assert_eq!(text, "Hello there, a long enough text to be cut.");
        let args: String = chunks
            .iter()
            .filter_map(|c| {
                c.pointer("/choices/0/delta/tool_calls/0/function/arguments")?
                    .as_str()
            })
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&args).expect("arguments"),
            json!({ "file_path": "/x/hello.txt", "content": "hi" })
        );
        let last = &chunks[chunks.len() - 2];
        assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(chunks[chunks.len() - 1]["usage"]["total_tokens"], 15);
    }
}
