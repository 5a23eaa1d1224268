//! A screen-read turn's reply when tmux has trimmed the pane's scrollback.
//!
//! A CLI whose reply is read off its pane (a shell, a REPL, any program) has its turn located
//! by where its input was typed: an absolute line, scrollback size plus cursor row. tmux keeps
//! `history-limit` lines; past it, it drops the oldest tenth, every line moves up, and that
//! number points below the turn's start — a 2,000-row turn in a full pane came back empty.
//!
//! So the start is found again: once the scrollback is near its limit (only then can lines
//! have gone), the input's echo is looked for at or above where it was typed, nearest first,
//! and the reply begins there. When the echo itself went (the turn printed more than tmux
//! keeps), the reply says so and is what the turn printed, from a copy of the pane's output
//! that `pipe-pane` kept outside tmux for this turn (`STATE/turns/ID.out`, at most
//! [`TURN_READS`] reads of 4 KiB): long, it reaches the chats as a file.

use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::core::Daemon;

use super::shared::reply_from_screen;

/// Reads (of at most 4 KiB each) of a turn's output kept outside tmux: at most 64 MiB.
pub const TURN_READS: usize = 16 * 1024;

/// Where session `id`'s running turn's output is copied.
pub(crate) fn path(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("turns").join(format!("{id}.out"))
}

/// The shell command `pipe-pane` runs to copy the turn's output to `file` (`dd` writes each
/// read as it comes, so the file is whole once the pipe is closed).
fn pipe_command(file: &Path) -> String {
    let quoted = file.display().to_string().replace('\'', r"'\''");
    format!("exec dd bs=4096 count={TURN_READS} status=none of='{quoted}'")
}

/// The first words of the input as its echo shows them on the line where it was typed.
fn echo_key(input: &str) -> Option<String> {
    let first = input.lines().next()?.trim();
    let key: String = first.chars().take(24).collect();
    (key.chars().count() >= 3).then_some(key)
}

/// Where the turn's input line is now in `lines` (the whole scrollback, oldest first), looked
/// for at `typed_at` (its index before any trimming) and above, nearest first.
fn find_echo(lines: &[&str], typed_at: usize, key: &str) -> Option<usize> {
    let from = typed_at.min(lines.len().checked_sub(1)?);
    (0..=from).rev().find(|i| lines[*i].contains(key))
}

impl Daemon {
    /// Starts copying the turn's output outside tmux, for a CLI whose reply is read off its
    /// screen. A failure costs only the copy (the reply is read off the screen as before).
    pub(crate) async fn copy_turn_output(&self, name: &str, id: &str, target: &str) {
        let file = path(&self.settings().state_dir, id);
        if let Err(e) = super::early::prepare(&file) {
            warn!("cannot prepare {}: {e}", file.display());
            return;
        }
        if let Err(e) = self
            .mux_of(name)
            .pipe_output(target, Some(&pipe_command(&file)))
            .await
        {
            warn!("cannot copy the turn's output: {e}");
        }
    }

    /// The reply of a turn read off the screen, from `anchor` (the absolute line its input
    /// was typed on; `None`: unknown) with `input_lines` lines of input.
    pub(crate) async fn screen_reply(
        &self,
        name: &str,
        target: &str,
        anchor: Option<i64>,
        input_lines: usize,
    ) -> String {
        let (id, input) = self
            .sessions()
            .get(name, |e| (e.rec.id.clone(), e.rec.last_input.clone()))
            .unwrap_or_default();
        // The copy is read only when the screen lost the turn's start (rarely): a turn's end
        // costs no read of it otherwise.
        let copy = self.end_turn_copy(name, &id, target).await;
        let reply = self
            .reply_off_screen(name, target, anchor, input_lines, &input, copy.as_deref())
            .await;
        if let Some(f) = copy {
            let _ = std::fs::remove_file(f);
        }
        reply
    }

    /// [`Daemon::screen_reply`], the copy of the turn's output at `copy` (if one was made).
    async fn reply_off_screen(
        &self,
        name: &str,
        target: &str,
        anchor: Option<i64>,
        input_lines: usize,
        input: &str,
        copy: Option<&Path>,
    ) -> String {
        let mux = self.mux_of(name);
        let (Some(a), Ok((hist, _))) = (anchor, mux.cursor(target).await) else {
            return mux
                .capture(target, None, false)
                .await
                .map(|c| reply_from_screen(&c, input_lines))
                .unwrap_or_default();
        };
        let limit = i64::from(self.settings().config.tmux.history_limit);
        // tmux trims to nine tenths of the limit: below that, no line has gone.
        if hist < limit - limit / 10 - 1 || a < 0 {
            return mux
                .capture(target, Some(a - hist), false)
                .await
                .map(|c| reply_from_screen(&c, input_lines))
                .unwrap_or_default();
        }
        let Ok(all) = mux.capture(target, Some(-hist), false).await else {
            return String::new();
        };
        let lines: Vec<&str> = all.lines().collect();
        let typed_at = usize::try_from(a).unwrap_or(usize::MAX);
        if let Some(key) = echo_key(input)
            && let Some(at) = find_echo(&lines, typed_at, &key)
        {
            if at != typed_at {
                info!(
                    trimmed = typed_at - at.min(typed_at),
                    "tmux trimmed the scrollback during the turn; its start was found again"
                );
            }
            return reply_from_screen(&lines[at..].join("\n"), input_lines);
        }
        info!("the turn printed more than tmux keeps: its reply comes from the copy of its output");
        let copied = copy.and_then(read_copy);
        let (body, whole) = match copied.filter(|c| !c.trim().is_empty()) {
            Some(c) => {
                // The copy begins after the prompt was drawn, so the prompt that came back at
                // its end is known by the screen's last line, not by its first.
                let mut body = reply_from_screen(&c, input_lines);
                let prompt = lines.iter().rev().map(|l| l.trim()).find(|l| !l.is_empty());
                if let Some(p) = prompt
                    && let Some(cut) = body.rfind('\n')
                    && body[cut + 1..].trim() == p
                {
                    body.truncate(cut);
                }
                (body, true)
            }
            None => (reply_from_screen(&all, 0), false),
        };
        let note = if whole {
            format!(
                "[this turn printed more than the {limit} lines tmux keeps for a pane ([tmux] history_limit); its whole output follows, from a copy kept outside tmux]"
            )
        } else {
            format!(
                "[this turn printed more than the {limit} lines tmux keeps for a pane ([tmux] history_limit): its beginning was lost; what remains follows. Raise history_limit to keep more]"
            )
        };
        format!("{note}\n{body}")
    }

    /// Stops copying the turn's output; where the copy is, when one was made.
    pub(crate) async fn end_turn_copy(
        &self,
        name: &str,
        id: &str,
        target: &str,
    ) -> Option<PathBuf> {
        let file = path(&self.settings().state_dir, id);
        if !file.exists() {
            return None;
        }
        let _ = self.mux_of(name).pipe_output(target, None).await;
        Some(file)
    }
}

/// The copy of a turn's output, terminal escapes taken out.
fn read_copy(file: &Path) -> Option<String> {
    let raw = crate::store::off_worker(|| std::fs::read(file).ok())?;
    Some(super::early::plain(&String::from_utf8_lossy(&raw)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_echo_is_found_at_or_above_where_it_was_typed() {
        let lines = ["out 1", "$ seq 1 5000", "1", "2", "$ seq 1 5000", "1"];
        let key = echo_key("seq 1 5000").expect("a key");
        // Not trimmed: where it was typed.
        assert_eq!(find_echo(&lines, 4, &key), Some(4));
        // Lines went: the nearest above.
        assert_eq!(find_echo(&lines, 5, &key), Some(4));
        // Typed below what is there now: looked for from the end.
        assert_eq!(find_echo(&lines, 99, &key), Some(4));
        assert_eq!(find_echo(&lines, 0, &key), None);
        assert_eq!(find_echo(&[], 3, &key), None);
        assert!(echo_key("  ").is_none());
        assert!(echo_key("ab").is_none());
    }

    #[test]
    fn the_pipe_command_quotes_its_file() {
        let c = pipe_command(Path::new("/tmp/it's/x.out"));
        assert!(c.ends_with(r"of='/tmp/it'\''s/x.out'"), "{c}");
        assert!(c.contains(&format!("count={TURN_READS}")));
    }
}
