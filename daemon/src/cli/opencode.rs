//! OpenCode. Its TUI serves an HTTP API (`--port`), and that is the robust path: the daemon
//! follows the server's event stream (`GET /event`: `session.status`, `session.idle`,
//! `permission.asked`, `question.asked`, their replies, `session.error`), reads the final reply
//! from `GET /session/{id}/message`, and answers prompts with `POST /permission/{id}/reply` and
//! `/question/{id}/reply` — race-free, and independent of which button has focus (OpenCode
//! ignores digit keys in its dialogs). Input still goes by keys, so the TUI shows it like typed
//! text. The server takes basic auth with the session's hook token as password: another local
//! user cannot drive the CLI through the port. The live connection is
//! `session::opencode_link`; this module only translates.

use serde_json::{Value, json};

use super::{Adapter, Choice, Launch, LaunchContext};
use crate::cli::detect::AnswerStyle;
use crate::model::Prompt;

pub struct OpenCode;

/// The basic-auth user OpenCode's server expects (`OPENCODE_SERVER_USERNAME`, default).
pub const API_USER: &str = "opencode";

/// The choices of a permission dialog, in the dialog's order.
pub const PERMISSION_OPTIONS: [&str; 3] = ["Allow once", "Allow always", "Reject"];

impl Adapter for OpenCode {
    fn api_key_vars(&self) -> &'static [&'static str] {
        &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"]
    }
    fn name(&self) -> &'static str {
        "opencode"
    }

    fn completes_by_hook(&self) -> bool {
        true
    }

    fn serves_api(&self) -> bool {
        true
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> Launch {
        // A restart continues OpenCode's session that the link saw last (its id replaces
        // clibot's placeholder), else the project's most recent one.
        let mut args: Vec<String> = match (ctx.resume, ctx.cli_session_id) {
            (true, id) if id.starts_with("ses_") => vec!["--session".into(), id.into()],
            (true, _) => vec!["--continue".into()],
            (false, _) => Vec::new(),
        };
        if ctx.api_port == 0 {
            return Launch {
                args,
                ..Launch::default()
            };
        }
        args.extend([
            "--port".into(),
            ctx.api_port.to_string(),
            "--hostname".into(),
            "127.0.0.1".into(),
        ]);
        Launch {
            args,
            env: vec![
                ("OPENCODE_SERVER_USERNAME".into(), API_USER.into()),
                ("OPENCODE_SERVER_PASSWORD".into(), ctx.api_secret.into()),
            ],
            ..Launch::default()
        }
    }

    /// The request that answers `prompt`: `{"path": …, "body": …}` for the server.
    fn answers_through_hooks(&self) -> bool {
        true
    }
    fn decision(&self, prompt: &Prompt, choice: &Choice, payload: &Value) -> Option<String> {
        let request = payload.get("id").and_then(Value::as_str)?;
        let out = if prompt.kind == crate::model::PromptKind::Question {
            let answer = match choice {
                Choice::Option(i) => prompt.options.get(*i)?.clone(),
                Choice::Text(t) => t.clone(),
            };
            // One list of labels per question; the prompt shows the first question's choices.
            let count = payload
                .get("questions")
                .and_then(Value::as_array)
                .map_or(1, |q| q.len().max(1));
            let mut answers = vec![json!([answer])];
            answers.extend((1..count).map(|_| json!([])));
            json!({ "path": format!("/question/{request}/reply"), "body": { "answers": answers } })
        } else {
            let reply = match choice {
                Choice::Option(0) => "once",
                Choice::Option(1) => "always",
                Choice::Option(2) => "reject",
                _ => return None,
            };
            json!({ "path": format!("/permission/{request}/reply"), "body": { "reply": reply } })
        };
        Some(out.to_string())
    }
}

/// What one event from OpenCode's server means.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiEvent {
    /// A session started working.
    Busy {
        session: String,
    },
    /// A session finished its turn.
    Idle {
        session: String,
    },
    /// A session's parent (sub-agents run in child sessions), when the event says.
    Info {
        session: String,
        parent: Option<String>,
    },
    /// A permission or question waits; `payload` is the request as the server sent it.
    Asked(ApiPrompt),
    /// A request was answered (by anyone: the TUI, or clibot).
    Replied {
        request: String,
    },
    /// A turn failed.
    Error {
        session: String,
        kind: String,
        message: String,
    },
    Ignore,
}

/// A request for the user, as clibot shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiPrompt {
    pub request: String,
    pub session: String,
    pub kind: String,
    pub text: String,
    pub options: Vec<String>,
    pub subject: String,
    /// How the prompt is answered by keys, should the API be unreachable.
    pub answer: AnswerStyle,
    pub payload: Value,
}

fn s(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

/// Translates one event (`{"type": …, "properties": …}`).
pub fn interpret(ev: &Value) -> ApiEvent {
    let props = ev.get("properties").cloned().unwrap_or(Value::Null);
    let session = s(&props, "sessionID");
    match ev.get("type").and_then(Value::as_str).unwrap_or("") {
        "session.status" => match props.pointer("/status/type").and_then(Value::as_str) {
            Some("busy") => ApiEvent::Busy { session },
            _ => ApiEvent::Ignore,
        },
        "session.idle" => ApiEvent::Idle { session },
        "session.created" | "session.updated" => {
            let info = props.get("info").cloned().unwrap_or(Value::Null);
            let id = s(&info, "id");
            if id.is_empty() {
                return ApiEvent::Ignore;
            }
            ApiEvent::Info {
                session: id,
                parent: info
                    .get("parentID")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            }
        }
        "permission.asked" => permission_prompt(&props).map_or(ApiEvent::Ignore, ApiEvent::Asked),
        "question.asked" => question_prompt(&props).map_or(ApiEvent::Ignore, ApiEvent::Asked),
        "permission.replied" | "question.replied" | "question.rejected" => {
            let request = s(&props, "requestID");
            if request.is_empty() {
                ApiEvent::Ignore
            } else {
                ApiEvent::Replied { request }
            }
        }
        "session.error" => {
            let error = props.get("error").cloned().unwrap_or(Value::Null);
            let name = s(&error, "name");
            // The user interrupted the turn (Esc): not a failure; `session.idle` ends it.
            if name == "MessageAbortedError" {
                return ApiEvent::Ignore;
            }
            let mut message = error
                .pointer("/data/message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if message.is_empty() {
                message = if name.is_empty() {
                    "OpenCode reported an error".into()
                } else {
                    name.clone()
                };
            }
            let kind = if name == "ProviderAuthError" {
                "auth".to_string()
            } else {
                super::classify_error(&message).to_string()
            };
            ApiEvent::Error {
                session,
                kind,
                message,
            }
        }
        _ => ApiEvent::Ignore,
    }
}

/// A permission request (`permission.asked`, or an entry of `GET /permission`).
pub fn permission_prompt(req: &Value) -> Option<ApiPrompt> {
    let request = s(req, "id");
    if request.is_empty() {
        return None;
    }
    let permission = s(req, "permission");
    let meta = req.get("metadata").cloned().unwrap_or(Value::Null);
    let patterns: Vec<String> = req
        .get("patterns")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let text = match permission.as_str() {
        "bash" => "Run this shell command?".to_string(),
        "edit" | "write" | "patch" => "Apply this change?".to_string(),
        "read" => "Read this file?".to_string(),
        "external_directory" => "Allow access outside the project?".to_string(),
        "webfetch" => "Fetch this URL?".to_string(),
        "" => "Allow this?".to_string(),
        other => format!("Allow {other}?"),
    };
    let subject = ["command", "filepath", "filePath", "url"]
        .iter()
        .map(|k| s(&meta, k))
        .find(|v| !v.is_empty())
        .unwrap_or_else(|| patterns.join(", "));
    Some(ApiPrompt {
        request,
        session: s(req, "sessionID"),
        kind: "permission".into(),
        text,
        options: PERMISSION_OPTIONS.iter().map(|o| o.to_string()).collect(),
        subject,
        answer: AnswerStyle::Arrows,
        payload: req.clone(),
    })
}

/// A question (`question.asked`, or an entry of `GET /question`). The first question's
/// choices are offered; free text answers too, as in the TUI ("Type your own answer").
pub fn question_prompt(req: &Value) -> Option<ApiPrompt> {
    let request = s(req, "id");
    let questions = req.get("questions").and_then(Value::as_array)?;
    let first = questions.first()?;
    if request.is_empty() {
        return None;
    }
    let text = questions
        .iter()
        .map(|q| s(q, "question"))
        .filter(|q| !q.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    let options = first
        .get("options")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|o| s(o, "label"))
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default();
    Some(ApiPrompt {
        request,
        session: s(req, "sessionID"),
        kind: "question".into(),
        text,
        options,
        subject: s(first, "header"),
        answer: AnswerStyle::Digit,
        payload: req.clone(),
    })
}

/// The final reply of the last turn in `GET /session/{id}/message` (an array of
/// `{info, parts}`): the text of the last assistant message that has text, after the last user
/// message. A turn with tool calls has several assistant messages; the last one speaks last.
pub fn last_reply(messages: &Value) -> Option<String> {
    let list = messages.as_array()?;
    let turn_start = list
        .iter()
        .rposition(|m| m.pointer("/info/role").and_then(Value::as_str) == Some("user"))
        .map_or(0, |i| i + 1);
    list[turn_start..].iter().rev().find_map(|m| {
        let text = m
            .get("parts")
            .and_then(Value::as_array)?
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter(|p| !p.get("synthetic").and_then(Value::as_bool).unwrap_or(false))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("");
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_string())
    })
}

/// Whether a `session.idle` read now ends the turn that asked `asked` (the text clibot sent,
/// or its head): the conversation's latest question is that one, and something answers it.
/// False for an idle read late from an older turn — a cancelled one's, read after the next
/// message was sent — when the conversation does not have this turn's question yet, or has
/// no answer after it yet: the turn's own idle comes later. An empty `asked` (a turn begun at
/// the desk) takes any question.
pub fn idle_ends(messages: &Value, asked: &str) -> bool {
    let Some(list) = messages.as_array() else {
        return false;
    };
    let Some(q) = list
        .iter()
        .rposition(|m| m.pointer("/info/role").and_then(Value::as_str) == Some("user"))
    else {
        return false;
    };
    let answered = list[q + 1..]
        .iter()
        .any(|m| m.pointer("/info/role").and_then(Value::as_str) == Some("assistant"));
    let flat = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let question = flat(
        &list[q]
            .get("parts")
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default(),
    );
    let asked = flat(asked);
    let same = asked.is_empty()
        || question.is_empty()
        || question.starts_with(&asked)
        || asked.starts_with(&question);
    answered && same
}

/// Whether the conversation's last message is an answer still being written (no
/// `time.completed`): an idle read then may be an older turn's, read late (a cancelled turn's
/// idle, after the next message went in and OpenCode began answering it).
pub fn answer_running(messages: &Value) -> bool {
    messages
        .as_array()
        .and_then(|l| l.last())
        .and_then(|m| m.get("info"))
        .is_some_and(|info| {
            info.get("role").and_then(Value::as_str) == Some("assistant")
                && info.pointer("/time/completed").is_none_or(Value::is_null)
        })
}

/// The reply of a turn that is over: the last message is the assistant's, finished, and
/// begun at or after `since_ms` (Unix milliseconds). `None` while the turn may still run, or
/// when the last turn is older.
pub fn finished_turn_reply(messages: &Value, since_ms: i64) -> Option<String> {
    let last = messages.as_array()?.last()?;
    let info = last.get("info")?;
    let finished = info.get("role").and_then(Value::as_str) == Some("assistant")
        && info
            .pointer("/time/completed")
            .is_some_and(|t| !t.is_null())
        && info
            .pointer("/time/created")
            .and_then(Value::as_i64)
            .is_some_and(|t| t >= since_ms);
    finished.then(|| last_reply(messages).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_prompt;

    /// Events as OpenCode 1.18.33 sent them (`../shared/research/hooks/opencode_events.log`).
    const PERMISSION: &str = r#"{"id":"evt_1","type":"permission.asked","properties":{"id":"per_201e6939b001w26Mjc3xyEkOPZ","sessionID":"ses_dfe1","permission":"bash","patterns":["touch /home/dev/proj/created_by_opencode.txt"],"metadata":{"command":"touch /home/dev/proj/created_by_opencode.txt"},"always":["touch *"],"tool":{"messageID":"msg_1","callID":"call_86b96f9f85"}}}"#;
    const QUESTION: &str = r#"{"id":"evt_2","type":"question.asked","properties":{"id":"que_201e74874001dWj3maWy4i7KK2","sessionID":"ses_dfe1","questions":[{"question":"Which database should we use?","header":"Database","options":[{"label":"Postgres","description":"Relational, robust"},{"label":"SQLite","description":"Embedded, simple"}]}],"tool":{"messageID":"msg_2","callID":"call_348b6c37a5"}}}"#;

    fn ev(text: &str) -> Value {
        serde_json::from_str(text).expect("json")
    }

    #[test]
    fn events_translate() {
        let ApiEvent::Asked(p) = interpret(&ev(PERMISSION)) else {
            panic!("a permission prompt")
        };
        assert_eq!(
            (p.kind.as_str(), p.text.as_str(), p.subject.as_str()),
            (
                "permission",
                "Run this shell command?",
                "touch /home/dev/proj/created_by_opencode.txt"
            )
        );
        assert_eq!(p.options, ["Allow once", "Allow always", "Reject"]);
        assert_eq!(p.request, "per_201e6939b001w26Mjc3xyEkOPZ");
        let ApiEvent::Asked(q) = interpret(&ev(QUESTION)) else {
            panic!("a question")
        };
        assert_eq!(q.kind, "question");
        assert_eq!(q.text, "Which database should we use?");
        assert_eq!(q.options, ["Postgres", "SQLite"]);
        assert_eq!(q.subject, "Database");
        assert_eq!(
            interpret(&ev(
                r#"{"type":"session.idle","properties":{"sessionID":"ses_a"}}"#
            )),
            ApiEvent::Idle {
                session: "ses_a".into()
            }
        );
        assert_eq!(
            interpret(&ev(
                r#"{"type":"session.status","properties":{"sessionID":"ses_a","status":{"type":"busy"}}}"#
            )),
            ApiEvent::Busy {
                session: "ses_a".into()
            }
        );
        assert_eq!(
            interpret(&ev(
                r#"{"type":"session.status","properties":{"sessionID":"ses_a","status":{"type":"idle"}}}"#
            )),
            ApiEvent::Ignore
        );
        assert_eq!(
            interpret(&ev(
                r#"{"type":"permission.replied","properties":{"sessionID":"ses_a","requestID":"per_1","reply":"reject"}}"#
            )),
            ApiEvent::Replied {
                request: "per_1".into()
            }
        );
        assert_eq!(
            interpret(&ev(
                r#"{"type":"session.created","properties":{"info":{"id":"ses_c","parentID":"ses_a"}}}"#
            )),
            ApiEvent::Info {
                session: "ses_c".into(),
                parent: Some("ses_a".into())
            }
        );
        let err = interpret(&ev(
            r#"{"type":"session.error","properties":{"sessionID":"ses_a","error":{"name":"APIError","data":{"message":"Rate limit exceeded (429)"}}}}"#,
        ));
        assert_eq!(
            err,
            ApiEvent::Error {
                session: "ses_a".into(),
                kind: "rate_limit".into(),
                message: "Rate limit exceeded (429)".into()
            }
        );
        assert_eq!(
            interpret(&ev(
                r#"{"type":"session.error","properties":{"sessionID":"ses_a","error":{"name":"MessageAbortedError","data":{}}}}"#
            )),
            ApiEvent::Ignore
        );
        // Bad input from the server is ignored, never a panic.
        for bad in [
            "{}",
            "[]",
            "null",
            r#"{"type":"permission.asked"}"#,
            r#"{"type":"question.asked","properties":{"questions":[]}}"#,
        ] {
            assert_eq!(interpret(&ev(bad)), ApiEvent::Ignore, "{bad}");
        }
    }

    #[test]
    fn decisions_are_the_server_requests() {
        let ApiEvent::Asked(p) = interpret(&ev(PERMISSION)) else {
            panic!("a permission prompt")
        };
        let prompt = test_prompt("permission", &PERMISSION_OPTIONS, AnswerStyle::Arrows);
        let out = |c: Choice| -> Value {
            serde_json::from_str(
                &OpenCode
                    .decision(&prompt, &c, &p.payload)
                    .expect("decision"),
            )
            .expect("json")
        };
        assert_eq!(
            out(Choice::Option(0)),
            json!({"path": "/permission/per_201e6939b001w26Mjc3xyEkOPZ/reply", "body": {"reply": "once"}})
        );
        assert_eq!(out(Choice::Option(1))["body"]["reply"], "always");
        assert_eq!(out(Choice::Option(2))["body"]["reply"], "reject");
        assert_eq!(
            OpenCode.decision(&prompt, &Choice::Text("x".into()), &p.payload),
            None
        );

        let ApiEvent::Asked(q) = interpret(&ev(QUESTION)) else {
            panic!("a question")
        };
        let mut prompt = test_prompt("question", &["Postgres", "SQLite"], AnswerStyle::Digit);
        prompt.options = q.options.clone();
        let out = |c: Choice| -> Value {
            serde_json::from_str(
                &OpenCode
                    .decision(&prompt, &c, &q.payload)
                    .expect("decision"),
            )
            .expect("json")
        };
        assert_eq!(
            out(Choice::Option(1)),
            json!({"path": "/question/que_201e74874001dWj3maWy4i7KK2/reply", "body": {"answers": [["SQLite"]]}})
        );
        assert_eq!(
            out(Choice::Text("MySQL".into()))["body"]["answers"],
            json!([["MySQL"]])
        );
    }

    #[test]
    fn the_reply_is_the_last_assistant_text_of_the_turn() {
        let m = |role: &str, parts: Value| json!({"info": {"role": role}, "parts": parts});
        let messages = json!([
            m(
                "user",
                json!([{"type": "text", "text": "please say hello"}])
            ),
            m(
                "assistant",
                json!([{"type": "text", "text": "Hello from the mock model."}])
            ),
            m(
                "user",
                json!([{"type": "text", "text": "please make marker"}])
            ),
            m(
                "assistant",
                json!([{"type": "step-start"}, {"type": "text", "text": "I will run it."}, {"type": "tool"}])
            ),
            m(
                "assistant",
                json!([{"type": "step-start"}, {"type": "text", "text": "Marker "}, {"type": "text", "text": "created."}, {"type": "step-finish"}])
            ),
        ]);
        assert_eq!(last_reply(&messages).as_deref(), Some("Marker created."));
        // A turn that ended without text (rejected tool) has no reply; never the previous one.
        let rejected = json!([
            m("user", json!([{"type": "text", "text": "a"}])),
            m("assistant", json!([{"type": "text", "text": "old"}])),
            m("user", json!([{"type": "text", "text": "b"}])),
            m("assistant", json!([{"type": "tool"}])),
        ]);
        assert_eq!(last_reply(&rejected), None);
        assert_eq!(last_reply(&json!({"not": "a list"})), None);
    }

    #[test]
    fn a_turn_is_over_only_when_its_last_message_finished_after_it_began() {
        let msg = |role: &str, created: i64, completed: Option<i64>, text: &str| {
            json!({"info": {"role": role, "time": {"created": created, "completed": completed}},
                   "parts": [{"type": "text", "text": text}]})
        };
        let done = json!([
            msg("user", 100, None, "q"),
            msg("assistant", 110, Some(120), "a")
        ]);
        assert_eq!(finished_turn_reply(&done, 100).as_deref(), Some("a"));
        // Older than the turn clibot saw begin: the previous turn's reply.
        assert_eq!(finished_turn_reply(&done, 111), None);
        let running = json!([msg("user", 100, None, "q"), msg("assistant", 110, None, "")]);
        assert_eq!(finished_turn_reply(&running, 0), None);
        let asked = json!([msg("user", 100, None, "q")]);
        assert_eq!(finished_turn_reply(&asked, 0), None);
        assert_eq!(finished_turn_reply(&json!([]), 0), None);
    }

    /// An idle read after the next message was sent belongs to the turn before (cancelled):
    /// it ends the next turn only once the conversation has that turn's question and an
    /// answer to it.
    #[test]
    fn an_idle_ends_only_the_turn_whose_question_is_answered() {
        let msg = |role: &str, text: &str| json!({"info": {"role": role}, "parts": [{"type": "text", "text": text}]});
        let asked = "please say hello after the cancel";
        // The cancelled turn's answer is last; the next question is not in yet.
        let before = json!([
            msg("user", "please answer the slow question"),
            msg("assistant", "")
        ]);
        assert!(!idle_ends(&before, asked));
        // The next question is in, with no answer yet.
        let mut waiting = before.as_array().cloned().unwrap_or_default();
        waiting.push(msg("user", asked));
        assert!(!idle_ends(&json!(waiting), asked));
        // Answered: the idle is this turn's.
        waiting.push(msg("assistant", "Hello after the cancel."));
        assert!(idle_ends(&json!(waiting), asked));
        // Whitespace and a long message's head do not matter; a turn begun at the desk
        // takes any question.
        assert!(idle_ends(&json!(waiting), "please  say hello"));
        assert!(idle_ends(&json!(waiting), ""));
        assert!(!idle_ends(&json!([]), asked));
    }

    /// The next turn's answer has begun but is not finished: a late idle (the cancelled
    /// turn's) must not end it with an empty reply.
    #[test]
    fn an_answer_without_a_completed_time_is_still_running() {
        let msg = |role: &str, completed: Value| {
            json!({"info": {"role": role, "time": {"created": 1, "completed": completed}},
                   "parts": []})
        };
        assert!(answer_running(&json!([
            msg("user", Value::Null),
            msg("assistant", Value::Null)
        ])));
        assert!(answer_running(
            &json!([msg("user", Value::Null), {"info": {"role": "assistant"}}])
        ));
        assert!(!answer_running(&json!([
            msg("user", Value::Null),
            msg("assistant", json!(5))
        ])));
        assert!(!answer_running(&json!([msg("user", Value::Null)])));
        assert!(!answer_running(&json!([])));
    }
}
