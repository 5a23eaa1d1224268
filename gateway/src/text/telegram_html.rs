//! CLI output to Telegram's HTML parse mode, split into messages that each fit.
//!
//! Why HTML and not MarkdownV2: MarkdownV2 needs `\`-escapes for 18 characters outside
//! entities, and terminal and LLM output break that constantly (400 "can't parse
//! entities"). HTML needs only `&`, `<` and `>` escaped, which is easy to get right.
//!
//! What is recognised, and nothing more (so shell output is not mangled):
//!
//! * fenced code blocks (```` ``` ```` or `~~~`, CommonMark rules) become
//!   `<pre><code class="language-x">…</code></pre>`, or `<pre>…</pre>` without a usable
//!   language; an unclosed fence runs to the end of the text;
//! * inline code (a backtick run closed by a run of the same length on the same line)
//!   becomes `<code>…</code>`;
//! * `**bold**` on one line becomes `<b>…</b>`. To spare globs like `src/**/*.rs` and
//!   `2 ** 8`, the opening `**` must start the line or follow whitespace or an opening
//!   bracket or quote and be followed by a non-space; the closing `**` must follow a
//!   non-space and not be followed by a letter or digit. Code inside bold is rendered as
//!   `</b><code>…</code><b>`, never nested, because Telegram does not allow `code` inside
//!   other entities.
//!
//! Everything else is text, escaped. Unmatched markers stay as literal characters.
//!
//! # Chunking
//!
//! The text is parsed first into the visible text plus styled ranges, and chunked on the
//! visible text: that is exactly what Telegram counts ("1-4096 characters after entity
//! parsing", in UTF-16 code units), so `&lt;` counts 1 and tags count 0, and a chunk can
//! never end inside an entity or a tag. Each chunk is then rendered on its own, so every
//! tag opened in a chunk is closed in it and a code block cut by a chunk boundary
//! continues as a new `<pre>` (with the same language) in the next one. Break preferences
//! are those of [`crate::chunk`] (paragraph, line, word; never inside a character or a
//! small grapheme cluster), with the edges of code blocks counting as paragraph breaks.
//!
//! # When Telegram still says no
//!
//! Send the chunk's [`TelegramChunk::plain`] text without `parse_mode`, once (a parse error
//! is not worth retrying). It is exactly the visible text of the HTML chunk, so it fits
//! too. [`strip_html`] does the same for HTML from elsewhere.

use std::ops::Range;

use crate::text::chunk::{self, Budget, MIN_LIMIT, Measure, Split};
use crate::text::fence;

pub use crate::text::chunk::TELEGRAM_MAX_UTF16;

/// One message: the HTML to send with `parse_mode: "HTML"`, and the same text without
/// markup for the fallback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelegramChunk {
    /// Valid Telegram HTML; its visible text is at most the limit in UTF-16 code units.
    pub html: String,
    /// The visible text of `html`, to send as plain text if Telegram rejects the HTML.
    pub plain: String,
}

/// Renders `text` to Telegram HTML chunks whose rendered text is at most `limit` UTF-16
/// code units each (use [`TELEGRAM_MAX_UTF16`]; limits below [`chunk::MIN_LIMIT`] are
/// raised to it). Empty or blank input gives no chunks.
pub fn render_chunks(text: &str, limit: usize) -> Vec<String> {
    render_chunks_with_plain(text, limit)
        .into_iter()
        .map(|c| c.html)
        .collect()
}

/// [`render_chunks`], with the plain-text fallback of each chunk.
///
/// If the markup would render to nothing visible (e.g. the input is only an empty code
/// block), the input is sent as escaped text instead, so the user sees what was there.
pub fn render_chunks_with_plain(text: &str, limit: usize) -> Vec<TelegramChunk> {
    let mut doc = parse(text);
    if doc.text.trim().is_empty() && !text.trim().is_empty() {
        doc = Doc::default();
        doc.push(text, Style::Plain);
    }
    let limit = limit.max(MIN_LIMIT);
    let mut strong = Vec::new();
    for seg in doc.segs.iter().filter(|s| matches!(s.style, Style::Pre(_))) {
        if seg.range.start > 0 && doc.text.as_bytes().get(seg.range.start - 1) == Some(&b'\n') {
            strong.push(seg.range.start - 1);
        }
        if doc.text.as_bytes().get(seg.range.end) == Some(&b'\n') {
            strong.push(seg.range.end);
        }
    }
    let is_strong = |b: usize| strong.binary_search(&b).is_ok();
    let budget = Budget {
        units: limit,
        lines: usize::MAX,
    };
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < doc.text.len() {
        let (end, next) =
            match chunk::find_split(&doc.text, pos, budget, Measure::Utf16, &is_strong, &|_| {
                true
            }) {
                Split::Rest => (doc.text.len(), doc.text.len()),
                Split::At { end, next } => (end, next),
            };
        let plain = doc.text.get(pos..end).unwrap_or_default();
        if !plain.trim().is_empty() {
            out.push(TelegramChunk {
                html: doc.render(pos..end),
                plain: plain.to_string(),
            });
        }
        pos = next;
    }
    out
}

/// Renders all of `text` as one HTML string, without a length limit (for previews and
/// short texts you know fit).
pub fn to_html(text: &str) -> String {
    let doc = parse(text);
    doc.render(0..doc.text.len())
}

/// The visible text `text` renders to: markup removed, nothing escaped.
pub fn to_plain(text: &str) -> String {
    parse(text).text
}

/// Escapes text for Telegram HTML: `&`, `<`, `>` (all Telegram requires outside tags).
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(&mut out, text);
    out
}

fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
}

/// The visible text of Telegram HTML: tags removed, `&lt; &gt; &amp; &quot;` and numeric
/// entities decoded. A `<` with no `>` after it, or an unknown entity, is kept as is.
pub fn strip_html(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(i) = rest.find(['<', '&']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with('<') {
            match tail.find('>') {
                Some(j) => rest = &tail[j + 1..],
                None => {
                    out.push_str(tail);
                    rest = "";
                }
            }
        } else {
            match decode_entity(tail) {
                Some((c, len)) => {
                    out.push(c);
                    rest = &tail[len..];
                }
                None => {
                    out.push('&');
                    rest = &tail[1..];
                }
            }
        }
    }
    out.push_str(rest);
    out
}

/// Decodes the entity at the start of `s` (which starts with `&`): the character and the
/// entity's length in bytes.
fn decode_entity(s: &str) -> Option<(char, usize)> {
    let semi = s.get(..12).unwrap_or(s).find(';')?;
    let name = &s[1..semi];
    let c = match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse().ok()?,
            };
            char::from_u32(code)?
        }
    };
    Some((c, semi + 1))
}

// ---------------------------------------------------------------------------------------
// Parsing into visible text + styles.

#[derive(Debug, Clone, PartialEq, Eq)]
enum Style {
    Plain,
    Bold,
    Code,
    /// A code block, with its language.
    Pre(Option<String>),
}

impl Style {
    fn open(&self) -> String {
        match self {
            Style::Plain => String::new(),
            Style::Bold => "<b>".into(),
            Style::Code => "<code>".into(),
            Style::Pre(Some(lang)) => format!("<pre><code class=\"language-{lang}\">"),
            Style::Pre(None) => "<pre>".into(),
        }
    }

    fn close(&self) -> &'static str {
        match self {
            Style::Plain => "",
            Style::Bold => "</b>",
            Style::Code => "</code>",
            Style::Pre(Some(_)) => "</code></pre>",
            Style::Pre(None) => "</pre>",
        }
    }
}

/// A styled byte range of [`Doc::text`].
#[derive(Debug, Clone)]
struct Segment {
    range: Range<usize>,
    style: Style,
}

/// The visible text and the styles covering it, in order, without gaps or overlaps.
#[derive(Debug, Clone, Default)]
struct Doc {
    text: String,
    segs: Vec<Segment>,
}

impl Doc {
    fn push(&mut self, s: &str, style: Style) {
        if s.is_empty() {
            return;
        }
        let start = self.text.len();
        self.text.push_str(s);
        let end = self.text.len();
        match self.segs.last_mut() {
            // Code blocks stay separate even when adjacent: each is its own `<pre>`.
            Some(last) if last.style == style && !matches!(style, Style::Pre(_)) => {
                last.range.end = end;
            }
            _ => self.segs.push(Segment {
                range: start..end,
                style,
            }),
        }
    }

    /// HTML for the visible bytes `range`, with every tag closed inside it.
    fn render(&self, range: Range<usize>) -> String {
        let mut out = String::with_capacity(range.len() + range.len() / 8 + 16);
        let first = self.segs.partition_point(|s| s.range.end <= range.start);
        for seg in &self.segs[first..] {
            if seg.range.start >= range.end {
                break;
            }
            let clip = seg.range.start.max(range.start)..seg.range.end.min(range.end);
            let Some(text) = self.text.get(clip) else {
                continue;
            };
            if text.is_empty() {
                continue;
            }
            out.push_str(&seg.style.open());
            escape_into(&mut out, text);
            out.push_str(seg.style.close());
        }
        out
    }
}

fn parse(text: &str) -> Doc {
    let mut doc = Doc::default();
    let mut open: Option<(fence::Fence<'_>, String)> = None;
    for raw in text.split_inclusive('\n') {
        let (line, newline) = match raw.strip_suffix('\n') {
            Some(l) => (l, true),
            None => (raw, false),
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some((f, body)) = &mut open {
            if fence::closes(line, f) {
                let lang = f.language().map(str::to_owned);
                doc.push(body.strip_suffix('\n').unwrap_or(body), Style::Pre(lang));
                open = None;
                if newline {
                    doc.push("\n", Style::Plain);
                }
            } else {
                body.push_str(line);
                if newline {
                    body.push('\n');
                }
            }
        } else if let Some(f) = fence::opening(line) {
            // The opening line and its newline are markup.
            open = Some((f, String::new()));
        } else {
            inline(&mut doc, line);
            if newline {
                doc.push("\n", Style::Plain);
            }
        }
    }
    if let Some((f, body)) = open {
        let lang = f.language().map(str::to_owned);
        doc.push(body.strip_suffix('\n').unwrap_or(&body), Style::Pre(lang));
    }
    doc
}

/// The length of the run of `b` starting at byte `i`.
fn run_len(s: &[u8], i: usize, b: u8) -> usize {
    s.get(i..)
        .map_or(0, |t| t.iter().take_while(|&&c| c == b).count())
}

/// For a backtick run of length `n` at byte `i`: the end of the code content (where the
/// closing run starts), if a run of exactly `n` backticks follows on the line.
fn code_close(line: &str, i: usize, n: usize) -> Option<usize> {
    let b = line.as_bytes();
    let mut j = i + n;
    while j < b.len() {
        if b[j] == b'`' {
            let m = run_len(b, j, b'`');
            if m == n {
                return Some(j);
            }
            j += m;
        } else {
            j += 1;
        }
    }
    None
}

/// CommonMark: one leading and one trailing space are stripped from a code span when
/// both are present and the content is not all spaces (so `` ` `x` ` `` shows `` `x` ``).
fn code_content(s: &str) -> &str {
    if s.len() >= 2 && s.starts_with(' ') && s.ends_with(' ') && !s.trim().is_empty() {
        &s[1..s.len() - 1]
    } else {
        s
    }
}

fn can_open_bold(line: &str, i: usize) -> bool {
    let before_ok = line[..i]
        .chars()
        .next_back()
        .is_none_or(|c| c.is_whitespace() || matches!(c, '(' | '[' | '{' | '"' | '\''));
    let after_ok = line[i + 2..]
        .chars()
        .next()
        .is_some_and(|c| !c.is_whitespace() && c != '*');
    before_ok && after_ok
}

/// The start of the `**` closing a bold run whose content starts at byte `from`, skipping
/// code spans (a `**` inside `` `…` `` is code, not markup).
fn bold_close(line: &str, from: usize) -> Option<usize> {
    let b = line.as_bytes();
    let mut j = from;
    while j < b.len() {
        match b[j] {
            b'`' => {
                let n = run_len(b, j, b'`');
                j = code_close(line, j, n).map_or(j + n, |end| end + n);
            }
            b'*' if b.get(j + 1) == Some(&b'*') && j > from => {
                let before = line[..j].chars().next_back();
                let after = line[j + 2..].chars().next();
                if before.is_some_and(|c| !c.is_whitespace())
                    && after.is_none_or(|c| !c.is_alphanumeric())
                {
                    return Some(j);
                }
                j += 2;
            }
            _ => j += 1,
        }
    }
    None
}

/// Pushes `s` with its code spans as [`Style::Code`] and the rest as `base`.
fn code_spans(doc: &mut Doc, s: &str, base: Style) {
    let b = s.as_bytes();
    let (mut i, mut start) = (0, 0);
    while i < b.len() {
        if b[i] == b'`' {
            let n = run_len(b, i, b'`');
            if let Some(end) = code_close(s, i, n) {
                doc.push(&s[start..i], base.clone());
                doc.push(code_content(&s[i + n..end]), Style::Code);
                i = end + n;
                start = i;
                continue;
            }
            i += n;
        } else {
            i += 1;
        }
    }
    doc.push(&s[start..], base);
}

/// One line outside code blocks. Only ASCII bytes (`` ` `` and `*`) are ever sliced at, so
/// every slice is on a char boundary.
fn inline(doc: &mut Doc, line: &str) {
    let b = line.as_bytes();
    let (mut i, mut start) = (0, 0);
    while i < b.len() {
        match b[i] {
            b'`' => {
                let n = run_len(b, i, b'`');
                i = code_close(line, i, n).map_or(i + n, |end| end + n);
            }
            b'*' if b.get(i + 1) == Some(&b'*') && can_open_bold(line, i) => {
                match bold_close(line, i + 2) {
                    Some(end) => {
                        code_spans(doc, &line[start..i], Style::Plain);
                        code_spans(doc, &line[i + 2..end], Style::Bold);
                        i = end + 2;
                        start = i;
                    }
                    None => i += 2,
                }
            }
            _ => i += 1,
        }
    }
    code_spans(doc, &line[start..], Style::Plain);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16(s: &str) -> usize {
        s.encode_utf16().count()
    }

    /// Checks that `html` is what Telegram accepts from us: only our tags, properly
    /// nested and all closed, no stray `<`/`>`, and only the four named entities.
    fn assert_valid(html: &str) {
        let mut stack: Vec<&str> = Vec::new();
        let mut rest = html;
        while let Some(i) = rest.find(['<', '>', '&']) {
            let tail = &rest[i..];
            match tail.as_bytes()[0] {
                b'>' => panic!("stray > in {html:?}"),
                b'&' => {
                    let ok = ["&lt;", "&gt;", "&amp;", "&quot;"]
                        .iter()
                        .any(|e| tail.starts_with(e));
                    assert!(ok, "bad entity in {html:?}");
                    rest = &tail[1..];
                }
                _ => {
                    let j = tail.find('>').expect("unterminated tag");
                    let tag = &tail[1..j];
                    if let Some(name) = tag.strip_prefix('/') {
                        assert_eq!(stack.pop(), Some(name), "misnested in {html:?}");
                    } else {
                        let name = tag.split(' ').next().unwrap_or_default();
                        assert!(["b", "code", "pre"].contains(&name), "tag {tag:?}");
                        if name == "code" && tag.contains(' ') {
                            assert_eq!(stack.last(), Some(&"pre"), "class only on pre>code");
                        }
                        if name == "code" || name == "pre" {
                            assert!(
                                !stack.iter().any(|t| *t == "b" || *t == "code"),
                                "code nested in {stack:?}: {html:?}"
                            );
                        }
                        stack.push(name);
                    }
                    rest = &tail[j + 1..];
                }
            }
        }
        assert!(stack.is_empty(), "unclosed {stack:?} in {html:?}");
    }

    #[test]
    fn escapes_only_what_is_needed() {
        assert_eq!(
            to_html("a < b && c > d \"q\" 'x'"),
            "a &lt; b &amp;&amp; c &gt; d \"q\" 'x'"
        );
        assert_eq!(
            to_html("<script>alert(1)</script>"),
            "&lt;script&gt;alert(1)&lt;/script&gt;"
        );
        assert_eq!(to_html("&amp; stays literal"), "&amp;amp; stays literal");
    }

    #[test]
    fn fences_become_pre() {
        assert_eq!(
            to_html("Run:\n```rust\nfn main() { a < b }\n```\ndone"),
            "Run:\n<pre><code class=\"language-rust\">fn main() { a &lt; b }</code></pre>\ndone"
        );
        assert_eq!(to_html("```\nplain\n```"), "<pre>plain</pre>");
        assert_eq!(to_html("~~~ {weird}\nx\n~~~"), "<pre>x</pre>");
        // Markup inside code is text.
        assert_eq!(to_html("```\n**x** `y`\n```"), "<pre>**x** `y`</pre>");
    }

    #[test]
    fn unclosed_fence_runs_to_the_end() {
        assert_eq!(
            to_html("a\n```sh\nls\nmore"),
            "a\n<pre><code class=\"language-sh\">ls\nmore</code></pre>"
        );
    }

    #[test]
    fn inline_code() {
        assert_eq!(
            to_html("use `Vec<u8>` here"),
            "use <code>Vec&lt;u8&gt;</code> here"
        );
        assert_eq!(to_html("``a ` b``"), "<code>a ` b</code>");
        assert_eq!(to_html("`` `x` ``"), "<code>`x`</code>");
        assert_eq!(to_html("a `open"), "a `open");
        assert_eq!(to_html("`**not bold**`"), "<code>**not bold**</code>");
    }

    #[test]
    fn bold() {
        assert_eq!(to_html("**bold** text"), "<b>bold</b> text");
        assert_eq!(to_html("say **a & b**."), "say <b>a &amp; b</b>.");
        assert_eq!(to_html("(**x**)"), "(<b>x</b>)");
        assert_eq!(to_html("**x `y` z**"), "<b>x </b><code>y</code><b> z</b>");
        assert_eq!(to_html("**`y`**"), "<code>y</code>");
    }

    #[test]
    fn things_that_are_not_bold() {
        for s in [
            "2 ** 8 ** 2",
            "src/**/*.rs and tests/**/*.rs",
            "**/*.rs and **/*.md",
            "**open",
            "** spaced **",
            "a**b**c",
            "**",
            "****",
        ] {
            assert_eq!(to_html(s), escape_html(s), "{s:?}");
        }
    }

    #[test]
    fn nested_and_unbalanced_markup_stays_valid() {
        for s in [
            "**a **b** c**",
            "**a `b** c` d**",
            "`a **b` c**",
            "***x***",
            "**x** **y",
            "``` not a fence ``` **z**",
            "a\n```\n**b**\n",
            "<b>**x**</b> &nbsp;",
        ] {
            let html = to_html(s);
            assert_valid(&html);
            assert_eq!(strip_html(&html), to_plain(s), "{s:?}");
        }
        assert_eq!(to_html("**a **b** c**"), "<b>a **b</b> c**");
        // Raw tags in the input are text, and `**` right after `>` does not open bold.
        assert_eq!(to_html("<b>**x**</b>"), "&lt;b&gt;**x**&lt;/b&gt;");
    }

    #[test]
    fn bold_does_not_cross_lines() {
        assert_eq!(to_html("**a\nb**"), "**a\nb**");
    }

    #[test]
    fn plain_text_strips_markup() {
        let md = "**Title**\n```py\nx < 1\n```\nuse `a`";
        assert_eq!(to_plain(md), "Title\nx < 1\nuse a");
        assert_eq!(strip_html(&to_html(md)), to_plain(md));
    }

    #[test]
    fn strip_html_decodes() {
        assert_eq!(
            strip_html("<b>a &lt;&amp;&gt; &quot;&#65;&#x1F600;</b>"),
            "a <&> \"A😀"
        );
        assert_eq!(strip_html("a < b & c &bogus; &"), "a < b & c &bogus; &");
    }

    #[test]
    fn empty_input() {
        assert!(render_chunks("", 4096).is_empty());
        assert!(render_chunks("  \n\n", 4096).is_empty());
    }

    #[test]
    fn markup_that_renders_to_nothing_falls_back_to_the_text() {
        assert_eq!(
            render_chunks("```\n```", 4096),
            vec!["```\n```".to_string()]
        );
        assert_eq!(
            render_chunks("```\n\n\n```", 4096),
            vec!["```\n\n\n```".to_string()]
        );
    }

    #[test]
    fn entities_count_one_after_parsing() {
        let text = "<".repeat(5000);
        let c = render_chunks_with_plain(&text, TELEGRAM_MAX_UTF16);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].plain.len(), 4096);
        assert_eq!(c[0].html, "&lt;".repeat(4096));
        assert_eq!(c[1].plain.len(), 904);
    }

    #[test]
    fn exactly_at_limit_is_one_chunk() {
        let text = format!("**{}**", "x".repeat(4096));
        let c = render_chunks(&text, TELEGRAM_MAX_UTF16);
        assert_eq!(c, vec![format!("<b>{}</b>", "x".repeat(4096))]);
        let text = format!("**{}**", "x".repeat(4097));
        assert_eq!(render_chunks(&text, TELEGRAM_MAX_UTF16).len(), 2);
    }

    #[test]
    fn emoji_count_two() {
        let text = "😀".repeat(3000);
        let c = render_chunks_with_plain(&text, TELEGRAM_MAX_UTF16);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].plain.chars().count(), 2048);
        assert_eq!(utf16(&c[0].plain), 4096);
    }

    #[test]
    fn code_block_spanning_chunks_is_reopened_with_its_language() {
        let body: String = (0..400)
            .map(|i| format!("println!(\"{i} < {}\");\n", i + 1))
            .collect();
        let text = format!("Intro **here**.\n\n```rust\n{body}```\nOutro `x`.");
        let c = render_chunks_with_plain(&text, 1000);
        assert!(c.len() > 5);
        for (i, ch) in c.iter().enumerate() {
            assert_valid(&ch.html);
            assert!(utf16(&ch.plain) <= 1000);
            assert_eq!(strip_html(&ch.html), ch.plain);
            if i > 0 && i + 1 < c.len() {
                assert!(
                    ch.html.starts_with("<pre><code class=\"language-rust\">"),
                    "{i}: {}",
                    ch.html
                );
                assert!(ch.html.ends_with("</code></pre>"));
            }
        }
        // The intro ends the first chunk's text before the block (a fence edge is a
        // paragraph break), and all code lines survive.
        let all: String = c
            .iter()
            .map(|c| c.plain.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        for i in 0..400 {
            assert!(all.contains(&format!("println!(\"{i} < {}\");", i + 1)));
        }
        assert!(
            c.last()
                .is_some_and(|ch| ch.html.ends_with("Outro <code>x</code>."))
        );
    }

    #[test]
    fn bold_spanning_a_chunk_boundary_is_closed_and_reopened() {
        let text = format!("**{}**", "word ".repeat(30).trim_end());
        let c = render_chunks(&text, 64);
        assert!(c.len() >= 3);
        for h in &c {
            assert_valid(h);
            assert!(h.starts_with("<b>") && h.ends_with("</b>"), "{h}");
        }
    }

    /// Same tiny generator as the chunker tests.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n
        }
    }

    #[test]
    fn property_every_chunk_is_valid_and_fits() {
        const PIECES: &[&str] = &[
            "word",
            " ",
            " ",
            "\n",
            "\n\n",
            "**",
            "`",
            "``",
            "<",
            ">",
            "&",
            "&amp;",
            "😀",
            "漢字",
            "e\u{0301}",
            "\n```rust\n",
            "\n```\n",
            "\n~~~\n",
            "(",
            "*",
            "\"",
            "🇩🇪",
        ];
        let mut rng = Lcg(3);
        for round in 0..500 {
            let mut text = String::new();
            for _ in 0..rng.next(300) {
                if rng.next(50) == 0 {
                    text.push_str(&"y".repeat(rng.next(100)));
                } else {
                    text.push_str(PIECES[rng.next(PIECES.len())]);
                }
            }
            let limit = 32 + rng.next(200);
            let chunks = render_chunks_with_plain(&text, limit);
            for ch in &chunks {
                assert_valid(&ch.html);
                assert!(utf16(&ch.plain) <= limit, "round {round}: {ch:?}");
                assert_eq!(strip_html(&ch.html), ch.plain, "round {round}");
                assert!(!ch.plain.trim().is_empty());
            }
            // Nothing visible is lost (separators aside).
            let visible: String = chunks
                .iter()
                .flat_map(|c| c.plain.chars())
                .filter(|c| !c.is_whitespace())
                .collect();
            let expected: String = to_plain(&text)
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            if !expected.is_empty() {
                assert_eq!(visible, expected, "round {round}: {text:?}");
            }
        }
    }
}
