//! The pane as a picture: `!!shot`, and a prompt whose dialog holds a diff or a table (which a
//! phone reads better drawn, in the pane's colours, than as wrapped text).

use clibot_proto::v1;

use crate::platforms::Platform;

/// Draws `screen` (the pane with its escape sequences) as a PNG, its secrets redacted before
/// it is drawn.
pub async fn draw(platform: &dyn Platform, screen: &str) -> Result<Vec<u8>, String> {
    let redacted = platform.redact(screen).into_owned();
    let rendered = tokio::task::spawn_blocking(move || {
        let r = clibot_gateway::shot::Renderer::new();
        let (w, h, rgb) = r.render(&redacted);
        clibot_gateway::shot::png(w, h, &rgb)
    })
    .await;
    match rendered {
        Ok(Ok(png)) => Ok(png),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether a prompt's dialog shows a diff (lines added and removed, a hunk header) or a
/// table (rows of cells between bars): then its picture goes with it.
pub fn worth_a_picture(p: &v1::Prompt) -> bool {
    let text = format!("{}\n{}", p.context, p.text);
    let lines = || text.lines().map(str::trim_start);
    // `+ new` / `- old`, optionally after a line number as Claude Code's edit dialog shows.
    let changed = lines()
        .filter(|l| {
            let l = l
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start();
            (l.starts_with("+ ") || l.starts_with("- ") || l == "+" || l == "-")
                && !l.starts_with("---")
        })
        .count();
    let hunk = lines().any(|l| l.starts_with("@@ "));
    let rows = lines()
        .filter(|l| {
            let bars = l.matches(['│', '|', '┃']).count();
            bars >= 3
        })
        .count();
    hunk || changed >= 2 || rows >= 2
}

/// Sends the pane of a prompt's session as a picture before the prompt itself, when the
/// prompt is fresh (a prompt replayed long after it was shown would show a screen that moved
/// on). Best effort: the prompt goes either way.
pub async fn before_prompt(
    platform: &std::sync::Arc<dyn Platform>,
    client: Option<&mut clibot_proto::Client>,
    chat: &str,
    ev: &v1::Event,
) {
    let age_ms = crate::ops::health::now_ms().saturating_sub(ev.time_ms);
    let Some(c) = client.filter(|_| age_ms <= 60_000) else {
        return;
    };
    let req = v1::CaptureRequest {
        session: ev.session.clone(),
        escapes: true,
        ..Default::default()
    };
    let screen = match c.capture(req).await {
        Ok(r) => r.into_inner().text,
        Err(e) => {
            eprintln!(
                "clibot-gateway: no picture of {}'s dialog: {}",
                ev.session,
                e.message()
            );
            return;
        }
    };
    let sent = match draw(platform.as_ref(), &screen).await {
        Ok(png) => {
            let caption = format!("[{}] the dialog", ev.session);
            platform
                .send_image(chat, "dialog.png", &png, &caption)
                .await
                .map_err(|e| e.to_string())
        }
        Err(e) => Err(e),
    };
    if let Err(e) = sent {
        eprintln!(
            "clibot-gateway: no picture of {}'s dialog in {chat}: {e}",
            ev.session
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(context: &str, text: &str) -> v1::Prompt {
        v1::Prompt {
            context: context.into(),
            text: text.into(),
            ..Default::default()
        }
    }

    #[test]
    fn diffs_and_tables_are_worth_a_picture_and_plain_questions_are_not() {
        assert!(worth_a_picture(&prompt(
            "src/main.rs\n 12 - let a = 1;\n 12 + let a = 2;",
            "Do you want to make this edit?"
        )));
        assert!(worth_a_picture(&prompt(
            "@@ -1,3 +1,4 @@\n fn main",
            "Apply?"
        )));
        assert!(worth_a_picture(&prompt(
            "│ name │ size │\n│ a    │ 1    │\n│ b    │ 2    │",
            "Delete these?"
        )));
        assert!(!worth_a_picture(&prompt("", "Do you want to proceed?")));
        assert!(!worth_a_picture(&prompt(
            "- install the package\nthen build",
            "Run npm install?"
        )));
        assert!(!worth_a_picture(&prompt("--- a/x\n+++ b/x", "?")));
    }
}
