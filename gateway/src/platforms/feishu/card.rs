//! Interactive cards (card JSON 2.0): a prompt with one button per option, the same prompt
//! answered (no buttons left), and the status line of a running turn. Every card is shared
//! (`update_multi`), which Feishu requires of a card that is later updated in place (PATCH).
//!
//! Text goes in `plain_text` elements, so that nothing in a CLI's output is read as card
//! Markdown. A button's callback value is `{"d": "<button data>"}` ([`crate::platforms::shown`]).

use serde_json::{Value, json};

/// The longest button label, in characters.
const LABEL_CHARS: usize = 60;

/// Feishu renders at most 200 elements per card; far fewer buttons are already unusable.
pub const MAX_BUTTONS: usize = 50;

fn text(content: &str) -> Value {
    json!({ "tag": "div", "text": { "tag": "plain_text", "content": content } })
}

fn note(content: &str) -> Value {
    json!({
        "tag": "div",
        "text": { "tag": "plain_text", "content": content, "text_color": "grey", "text_size": "notation" },
    })
}

fn card(elements: Vec<Value>) -> Value {
    json!({
        "schema": "2.0",
        "config": { "update_multi": true },
        "body": { "elements": elements },
    })
}

/// A prompt: its text, then one button per option carrying `a:<prompt id>:<n>`.
pub fn prompt(body: &str, prompt_id: &str, options: &[String]) -> Value {
    let mut elements = vec![text(body)];
    for (i, o) in options.iter().enumerate().take(MAX_BUTTONS) {
        let label: String = format!("{}. {o}", i + 1)
            .chars()
            .take(LABEL_CHARS)
            .collect();
        elements.push(json!({
            "tag": "button",
            "text": { "tag": "plain_text", "content": label },
            "type": if i == 0 { "primary" } else { "default" },
            "width": "fill",
            "behaviors": [{
                "type": "callback",
                "value": { "d": crate::platforms::shown::button_data(prompt_id, i + 1) },
            }],
        }));
    }
    card(elements)
}

/// A prompt once resolved: the same text without buttons (or, when this process did not send
/// it and so does not know the text, a line saying it was answered).
pub fn answered(body: Option<&str>) -> Value {
    let mut elements = Vec::new();
    if let Some(b) = body {
        elements.push(text(b));
    }
    elements.push(note("✓ answered"));
    card(elements)
}

/// The status of a running turn, edited in place.
pub fn status(body: &str) -> Value {
    card(vec![text(body)])
}

/// The button data a pressed button carries in its callback value.
pub fn button_data(value: &Value) -> Option<&str> {
    match value {
        Value::Object(m) => m.get("d")?.as_str(),
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// A rich-text (`post`) message holding `md` as Markdown — code blocks, lists, emphasis and
/// links show as such — for replies, which CLIs write in Markdown.
pub fn post(md: &str) -> Value {
    json!({ "zh_cn": { "title": "", "content": [[{ "tag": "md", "text": md }]] } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_card_has_one_button_per_option_with_its_data() {
        let options = vec!["Yes".to_string(), "No, and tell Claude why".to_string()];
        let c = prompt("Run `rm -rf target`?", "p1", &options);
        assert_eq!(c["schema"], "2.0");
        assert_eq!(c["config"]["update_multi"], true);
        let elements = c["body"]["elements"].as_array().expect("elements");
        assert_eq!(elements.len(), 3);
        assert_eq!(elements[0]["text"]["tag"], "plain_text");
        assert_eq!(elements[0]["text"]["content"], "Run `rm -rf target`?");
        for (i, b) in elements[1..].iter().enumerate() {
            assert_eq!(b["tag"], "button");
            let value = &b["behaviors"][0]["value"];
            assert_eq!(b["behaviors"][0]["type"], "callback");
            let data = button_data(value).expect("data");
            assert_eq!(
                crate::platforms::shown::parse_button(data),
                Some(("p1".to_string(), (i + 1).to_string()))
            );
        }
        assert_eq!(elements[2]["text"]["content"], "2. No, and tell Claude why");
    }

    #[test]
    fn labels_are_cut_and_buttons_capped() {
        let options: Vec<String> = (0..80)
            .map(|i| format!("{i} {}", "x".repeat(100)))
            .collect();
        let c = prompt("pick", "p", &options);
        let elements = c["body"]["elements"].as_array().expect("elements");
        assert_eq!(elements.len(), 1 + MAX_BUTTONS);
        let label = elements[1]["text"]["content"].as_str().expect("label");
        assert_eq!(label.chars().count(), LABEL_CHARS);
    }

    #[test]
    fn an_answered_card_keeps_the_text_and_loses_the_buttons() {
        let c = answered(Some("Proceed?"));
        assert_eq!(c["config"]["update_multi"], true);
        let s = c.to_string();
        assert!(s.contains("Proceed?") && s.contains("answered"), "{s}");
        assert!(!s.contains("button"), "{s}");
        assert!(answered(None).to_string().contains("answered"));
        assert_eq!(
            status("⏳ working")["body"]["elements"][0]["text"]["content"],
            "⏳ working"
        );
    }

    #[test]
    fn button_data_is_read_from_an_object_or_a_string() {
        assert_eq!(button_data(&json!({ "d": "a:p:1" })), Some("a:p:1"));
        assert_eq!(button_data(&json!("a:p:2")), Some("a:p:2"));
        assert_eq!(button_data(&json!({ "x": 1 })), None);
        assert_eq!(button_data(&json!(3)), None);
    }
}
