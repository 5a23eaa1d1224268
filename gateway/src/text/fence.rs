//! Markdown code fences (```` ``` ```` and `~~~`), found the CommonMark way.
//!
//! Both the chunker (which must keep fences balanced in every message) and the Telegram
//! renderer (which turns fences into `<pre>`) need the same answer to "is this line a
//! fence?", so the rule lives here once. It follows CommonMark where that matters for CLI
//! output: at most three spaces of indentation, a run of at least three backticks or tildes,
//! a backtick fence's info string may not contain a backtick (so ```` ```inline``` ```` on
//! one line is not a fence), and a closing fence uses the same character, at least as many
//! of them, and nothing but whitespace after them. An unclosed fence runs to the end of the
//! text, as in CommonMark.

use std::ops::Range;

/// The opening line of a fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fence<'a> {
    /// `` ` `` or `~`.
    pub ch: char,
    /// How many of `ch` opened the fence (≥ 3); the closer needs at least as many.
    pub len: usize,
    /// The info string, trimmed (`rust`, `diff`, `python title="x"`, or empty).
    pub info: &'a str,
}

impl<'a> Fence<'a> {
    /// The shortest line that closes this fence (`ch` repeated `len` times).
    pub fn marker(&self) -> String {
        std::iter::repeat_n(self.ch, self.len).collect()
    }

    /// The first word of the info string if it is a plausible language name, for
    /// `class="language-…"`. Anything else (quotes, `{`, very long words) is dropped rather
    /// than escaped: a wrong language only loses highlighting, a bad attribute loses the
    /// whole message.
    pub fn language(&self) -> Option<&'a str> {
        let word = self.info.split_whitespace().next()?;
        let ok = word.len() <= 32
            && word.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'#' | b'.' | b'-')
            });
        ok.then_some(word)
    }
}

/// Strips one trailing `\r` so CRLF text is judged like LF text.
fn strip_cr(line: &str) -> &str {
    line.strip_suffix('\r').unwrap_or(line)
}

/// Splits off up to three leading spaces; `None` when the line is indented further (an
/// indented code block in CommonMark, never a fence).
fn unindent(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches(' ');
    (line.len() - rest.len() <= 3).then_some(rest)
}

/// The fence `line` opens, if it is an opening fence line. `line` has no trailing `\n`.
pub(crate) fn opening(line: &str) -> Option<Fence<'_>> {
    let rest = unindent(strip_cr(line))?;
    let ch = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let after = rest.trim_start_matches(ch);
    let len = rest.len() - after.len();
    if len < 3 {
        return None;
    }
    let info = after.trim();
    if ch == '`' && info.contains('`') {
        return None;
    }
    Some(Fence { ch, len, info })
}

/// Whether `line` (no trailing `\n`) closes `fence`.
pub(crate) fn closes(line: &str, fence: &Fence<'_>) -> bool {
    let Some(rest) = unindent(strip_cr(line)) else {
        return false;
    };
    let after = rest.trim_start_matches(fence.ch);
    rest.len() - after.len() >= fence.len && after.trim().is_empty()
}

/// One fenced block, as byte offsets into the text it was found in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Region {
    /// The opening line, without its `\n`.
    pub open: Range<usize>,
    /// The closing line without its `\n`; an empty range at the end of the text when the
    /// fence is never closed.
    pub close: Range<usize>,
    /// Whether a closing line exists.
    pub closed: bool,
    /// The closing marker (e.g. ```` ``` ````).
    pub marker: String,
}

/// Lines of `text` with the byte offset each starts at; the `\n` is not part of the line.
pub(crate) fn lines_with_offsets(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |raw| {
        let start = offset;
        offset += raw.len();
        (start, raw.strip_suffix('\n').unwrap_or(raw))
    })
}

/// Every fenced block in `text`, in order.
pub(crate) fn regions(text: &str) -> Vec<Region> {
    let mut out = Vec::new();
    let mut open: Option<(Fence<'_>, Range<usize>)> = None;
    for (start, line) in lines_with_offsets(text) {
        let span = start..start + line.len();
        match &open {
            Some((fence, open_span)) => {
                if closes(line, fence) {
                    out.push(Region {
                        open: open_span.clone(),
                        close: span,
                        closed: true,
                        marker: fence.marker(),
                    });
                    open = None;
                }
            }
            None => open = opening(line).map(|f| (f, span)),
        }
    }
    if let Some((fence, open_span)) = open {
        out.push(Region {
            open: open_span,
            close: text.len()..text.len(),
            closed: false,
            marker: fence.marker(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openings() {
        let f = opening("```rust").expect("fence");
        assert_eq!((f.ch, f.len, f.info), ('`', 3, "rust"));
        assert_eq!(f.language(), Some("rust"));
        let f = opening("   ~~~~ python title=\"x\"").expect("fence");
        assert_eq!((f.ch, f.len, f.language()), ('~', 4, Some("python")));
        assert_eq!(opening("```\r").map(|f| f.info), Some(""));
        assert!(
            opening("    ```").is_none(),
            "four spaces is an indented code block"
        );
        assert!(opening("``").is_none());
        assert!(opening("```inline``` text").is_none());
        assert!(opening("text ```").is_none());
        assert_eq!(opening("```{bad\"lang}").and_then(|f| f.language()), None);
    }

    #[test]
    fn closers() {
        let f = opening("````").expect("fence");
        assert!(closes("````", &f));
        assert!(closes("  `````  ", &f));
        assert!(!closes("```", &f), "shorter run does not close");
        assert!(!closes("```` x", &f), "no info string on a closer");
        assert!(!closes("~~~~", &f), "other character");
    }

    #[test]
    fn finds_regions() {
        let text = "a\n```sh\nls\n```\nb\n~~~\nopen";
        let r = regions(text);
        assert_eq!(r.len(), 2);
        assert_eq!(&text[r[0].open.clone()], "```sh");
        assert_eq!(&text[r[0].close.clone()], "```");
        assert!(r[0].closed);
        assert!(!r[1].closed);
        assert_eq!(r[1].close, text.len()..text.len());
        assert_eq!(r[1].marker, "~~~");
    }

    #[test]
    fn backticks_inside_tilde_fence_are_content() {
        let r = regions("~~~\n```\n~~~\n");
        assert_eq!(r.len(), 1);
        assert!(r[0].closed);
    }
}
