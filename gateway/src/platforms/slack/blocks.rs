//! What the gateway posts to Slack: text as `mrkdwn` with Slack's three escapes (so nothing a
//! CLI prints can mention `@channel` or a user, or forge a link), Markdown's bold and headings
//! turned into Slack's, and prompts as Block Kit: the prompt's text in a `plain_text` section
//! and one button per option carrying `a:<prompt id>:<n>` ([`crate::platforms::shown`]).
//!
//! Slack's limits, checked by its API (`invalid_blocks`, `msg_too_long`): a section's text at
//! most 3,000 characters, 50 blocks, 25 elements per actions block, a button's label at most 75
//! characters and its value 2,000; a message's `text` is cut at 40,000.

use serde_json::{Value, json};

/// The longest text of one message the gateway sends, in characters, before escaping (Slack
/// advises keeping messages under 4,000; each escape at most quintuples a character, which
/// stays under the 40,000 hard limit).
pub const MAX_TEXT_CHARS: usize = 3_500;
/// A section block's text, at most.
pub const SECTION_CHARS: usize = 3_000;
/// A button label, at most.
const LABEL_CHARS: usize = 75;
/// Buttons in one actions block, at most.
const ACTIONS_PER_BLOCK: usize = 25;
/// Buttons on one prompt, at most (two actions blocks; more are unusable on a phone anyway, and
/// the text lists every option for a typed number).
pub const MAX_BUTTONS: usize = 50;

/// Slack's escapes: `&`, `<` and `>` are control characters in message text.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Markdown as Slack's `mrkdwn` shows it, escaped: `**bold**` → `*bold*`, `# Heading` →
/// `*Heading*`; code spans and fenced blocks are left as they are (Slack reads both).
pub fn mrkdwn(markdown: &str) -> String {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in markdown.split('\n') {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push(escape(line));
            continue;
        }
        if fenced {
            out.push(escape(line));
            continue;
        }
        let heading = line
            .strip_prefix('#')
            .map(|l| l.trim_start_matches('#'))
            .filter(|l| l.starts_with(' ') && !l.trim().is_empty());
        let line = match heading {
            Some(h) => format!("*{}*", h.trim().replace("**", "")),
            None => bold(line),
        };
        out.push(escape(&line));
    }
    out.join("\n")
}

/// `**x**` → `*x*` outside code spans.
fn bold(line: &str) -> String {
    line.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 0 {
                part.replace("**", "*")
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

fn section(text: &str) -> Value {
    let text: String = text.chars().take(SECTION_CHARS).collect();
    // An empty text is refused: a space shows nothing.
    let text = if text.trim().is_empty() {
        " ".to_string()
    } else {
        text
    };
    json!({ "type": "section", "text": { "type": "plain_text", "text": text, "emoji": false } })
}

/// A prompt: its text, then one button per option. `body` is plain text (not escaped: a
/// `plain_text` section shows it as it is).
pub fn prompt(body: &str, prompt_id: &str, options: &[String]) -> Value {
    let mut blocks = vec![section(body)];
    let buttons: Vec<Value> = options
        .iter()
        .enumerate()
        .take(MAX_BUTTONS)
        .map(|(i, o)| {
            let label: String = format!("{}. {o}", i + 1)
                .chars()
                .take(LABEL_CHARS)
                .collect();
            let data = crate::platforms::shown::button_data(prompt_id, i + 1);
            json!({
                "type": "button",
                "action_id": data,
                "text": { "type": "plain_text", "text": label, "emoji": false },
                "value": data,
            })
        })
        .collect();
    for (n, row) in buttons.chunks(ACTIONS_PER_BLOCK).enumerate() {
        blocks.push(
            json!({ "type": "actions", "block_id": format!("p{n}:{prompt_id}"), "elements": row }),
        );
    }
    Value::Array(blocks)
}

/// A prompt once resolved: its text without buttons (or, when this process did not send it,
/// only the line saying it was answered).
pub fn answered(body: Option<&str>) -> Value {
    let mut blocks = Vec::new();
    if let Some(b) = body {
        blocks.push(section(b));
    }
    blocks.push(json!({
        "type": "context",
        "elements": [{ "type": "plain_text", "text": "✓ answered", "emoji": false }],
    }));
    Value::Array(blocks)
}

/// The prompt and option a pressed button's value carries.
pub fn pressed(action: &Value) -> Option<(String, String)> {
    action["value"]
        .as_str()
        .and_then(crate::platforms::shown::parse_button)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_and_links_from_a_cli_are_defused() {
        let t = mrkdwn("ping <!channel> and <@U123> or <https://evil|click> & co");
        assert!(!t.contains('<') && !t.contains('>'), "{t}");
        assert!(
            t.contains("&lt;!channel&gt;") && t.contains("&amp; co"),
            "{t}"
        );
    }

    #[test]
    fn markdown_bold_and_headings_become_slacks_outside_code() {
        assert_eq!(
            mrkdwn("# Title\nsome **bold** `**kept**`"),
            "*Title*\nsome *bold* `**kept**`"
        );
        assert_eq!(
            mrkdwn("```\n# not a heading **x**\n```"),
            "```\n# not a heading **x**\n```"
        );
        assert_eq!(mrkdwn("#hashtag"), "#hashtag");
    }

    #[test]
    fn a_prompt_fits_slacks_block_limits() {
        let long = "x".repeat(200);
        let options: Vec<String> = (0..60).map(|i| format!("{long}{i}")).collect();
        let blocks = prompt(&"y".repeat(5000), "p1", &options);
        let blocks = blocks.as_array().expect("blocks");
        assert!(blocks.len() <= 50);
        assert!(
            blocks[0]["text"]["text"]
                .as_str()
                .expect("text")
                .chars()
                .count()
                <= SECTION_CHARS
        );
        let mut ids = std::collections::HashSet::new();
        let mut n = 0;
        for b in &blocks[1..] {
            let row = b["elements"].as_array().expect("buttons");
            assert!(row.len() <= 25);
            for button in row {
                n += 1;
                let label = button["text"]["text"].as_str().expect("label");
                assert!(label.chars().count() <= 75);
                assert!(ids.insert(button["action_id"].as_str().expect("id").to_string()));
            }
        }
        assert_eq!(n, MAX_BUTTONS);
        assert_eq!(
            pressed(&blocks[1]["elements"][1]),
            Some(("p1".into(), "2".into()))
        );
        assert_eq!(pressed(&json!({ "value": "junk" })), None);
    }
}
