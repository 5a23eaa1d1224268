//! Splitting outgoing text into chat messages that each fit a platform's length limit.
//!
//! # Measuring length the platform's way
//!
//! Each platform counts a different unit, and counting the wrong one is how bots lose
//! messages (a 400 on send) or waste space:
//!
//! * **Telegram** counts **UTF-16 code units** of the text *after entity parsing*, at most
//!   4096 per message ([`TELEGRAM_MAX_UTF16`]). Entity offsets are documented in UTF-16
//!   code units, and OpenClaw chunks with JavaScript string length, which is UTF-16. An
//!   emoji outside the BMP (`😀`) therefore costs 2. "After entity parsing" means markup
//!   is free and `&lt;` costs 1: use [`crate::telegram_html::render_chunks`] for HTML, which
//!   measures the rendered text; this module measures the text it is given.
//! * **Discord** counts **Unicode scalar values** (code points), at most 2000 per message
//!   ([`DISCORD_MAX_CHARS`]). The API is Python 3 and uses `len(str)`, so `😀` costs 1 and
//!   a family emoji joined with ZWJs costs one per code point (a Discord staff answer in
//!   discord/discord-api-docs#1315; the research doc only says "2000 characters"). Discord
//!   clients also collapse tall messages, so [`ChunkOptions::discord`] caps chunks at
//!   [`DISCORD_SOFT_MAX_LINES`] lines as OpenClaw does.
//! * [`Measure::Utf8Bytes`] is there for byte-limited transports (Feishu caps a text
//!   message body at 150 KB).
//!
//! # Where chunks break
//!
//! A chunk never ends inside a `char`, and the chunker avoids ending inside the small
//! grapheme clusters that are cheap to recognise: a base character and its combining
//! marks, variation selectors and emoji skin-tone modifiers, ZWJ emoji sequences, flag
//! pairs (regional indicators) and CRLF. Among the break points that fit, it prefers (in
//! order) a paragraph break (a blank line, or the line break just before an opening fence
//! or just after a closing one), a line break, a space or a break after CJK punctuation;
//! a break is only taken early when it keeps at least half of the possible chunk, so one
//! stray blank line does not produce a near-empty message. Only when there is no such
//! break does it cut a long line or word. The separator it breaks at (the newlines or
//! spaces) is dropped, because the message boundary already shows it.
//!
//! # Code fences
//!
//! A chunk that ends inside a fenced code block gets a closing fence appended, and the next
//! chunk starts by re-opening it with the same opening line (so ```` ```rust ```` keeps its
//! highlighting). The added lines are budgeted before splitting, so a chunk with them
//! still fits the limit (two production bugs in OpenClaw's Discord chunker came from not
//! doing that). If the opening line is longer than a quarter of the limit, the reopening
//! uses the bare marker instead. If a split would land right before the closing fence
//! line, that line is not repeated as an empty block in the next chunk. Fences that the
//! input itself never closes are left unclosed in the last chunk, as given. Fences whose
//! marker is longer than eight characters are treated as plain text.
//!
//! Chunks that would contain nothing but whitespace are skipped (Telegram rejects empty
//! messages); an empty or whitespace-only input yields no chunks.

use serde::{Deserialize, Serialize};

use crate::text::fence::{self, Region};

/// Telegram's per-message limit, in UTF-16 code units of the rendered text.
pub const TELEGRAM_MAX_UTF16: usize = 4096;
/// Discord's per-message `content` limit, in Unicode scalar values.
pub const DISCORD_MAX_CHARS: usize = 2000;
/// Lines per Discord message before clients start collapsing it (OpenClaw's default).
pub const DISCORD_SOFT_MAX_LINES: usize = 17;
/// The smallest limit honoured; smaller limits are raised to this. It leaves room for a
/// reopened fence, a closing fence and some content in every chunk.
pub const MIN_LIMIT: usize = 32;
/// The smallest line cap honoured (a reopened fence, one line of content, a closing fence).
pub const MIN_LINES: usize = 3;
/// Fences with longer markers are not balanced (treated as text).
const MAX_BALANCED_MARKER: usize = 8;

/// How a platform counts message length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// UTF-16 code units (Telegram; what JavaScript's `length` returns).
    Utf16,
    /// Unicode scalar values, i.e. Rust `char`s (Discord; Python's `len`).
    Chars,
    /// UTF-8 bytes.
    Utf8Bytes,
}

impl Measure {
    /// The length of one `char`.
    pub fn of_char(self, c: char) -> usize {
        match self {
            Measure::Utf16 => c.len_utf16(),
            Measure::Chars => 1,
            Measure::Utf8Bytes => c.len_utf8(),
        }
    }

    /// The length of `s`.
    pub fn of(self, s: &str) -> usize {
        match self {
            Measure::Utf16 => s.encode_utf16().count(),
            Measure::Chars => s.chars().count(),
            Measure::Utf8Bytes => s.len(),
        }
    }
}

/// A platform's message limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChunkOptions {
    /// Largest message, in `measure` units; values below [`MIN_LIMIT`] are raised to it.
    pub limit: usize,
    /// How the platform counts.
    pub measure: Measure,
    /// Most lines per message (a soft, readability limit); `None` for no cap. Values below
    /// [`MIN_LINES`] are raised to it.
    #[serde(default)]
    pub max_lines: Option<usize>,
}

impl ChunkOptions {
    /// A limit in `measure` units, without a line cap.
    pub const fn new(limit: usize, measure: Measure) -> Self {
        ChunkOptions {
            limit,
            measure,
            max_lines: None,
        }
    }

    /// Telegram as plain text: 4096 UTF-16 code units, no line cap. For HTML parse mode use
    /// [`crate::telegram_html::render_chunks`], which measures the rendered text instead.
    pub const fn telegram() -> Self {
        ChunkOptions::new(TELEGRAM_MAX_UTF16, Measure::Utf16)
    }

    /// Discord: 2000 code points and the soft 17-line cap.
    pub const fn discord() -> Self {
        ChunkOptions::new(DISCORD_MAX_CHARS, Measure::Chars)
            .with_max_lines(Some(DISCORD_SOFT_MAX_LINES))
    }

    /// The same limits with another line cap.
    pub const fn with_max_lines(mut self, max_lines: Option<usize>) -> Self {
        self.max_lines = max_lines;
        self
    }

    pub(crate) fn effective_limit(&self) -> usize {
        self.limit.max(MIN_LIMIT)
    }

    pub(crate) fn effective_lines(&self) -> usize {
        self.max_lines.map_or(usize::MAX, |l| l.max(MIN_LINES))
    }
}

/// Splits `text` into messages that each fit `opts`. See the module docs for where it
/// breaks and how fences are kept balanced.
pub fn chunk(text: &str, opts: &ChunkOptions) -> Vec<String> {
    chunks(text, opts).collect()
}

/// The lazy form of [`chunk`]: work is done per message, so asking for the first few
/// chunks of a huge text is cheap.
pub fn chunks<'a>(text: &'a str, opts: &ChunkOptions) -> Chunks<'a> {
    let limit = opts.effective_limit();
    let measure = opts.measure;
    let regions: Vec<Region> = fence::regions(text)
        .into_iter()
        .filter(|r| r.marker.len() <= MAX_BALANCED_MARKER)
        .collect();
    let mut strong = Vec::with_capacity(regions.len() * 2);
    for r in &regions {
        // The newline before an opening fence line, and the one after a closing line.
        if r.open.start > 0 {
            strong.push(r.open.start - 1);
        }
        if r.closed && text.as_bytes().get(r.close.end) == Some(&b'\n') {
            strong.push(r.close.end);
        }
    }
    let reserve = regions
        .iter()
        .map(|r| 1 + measure.of(&r.marker))
        .max()
        .unwrap_or(0);
    Chunks {
        text,
        pos: 0,
        limit,
        lines: opts.effective_lines(),
        measure,
        regions,
        strong,
        reserve,
        reopen: None,
    }
}

/// Iterator returned by [`chunks`].
#[derive(Debug, Clone)]
pub struct Chunks<'a> {
    text: &'a str,
    pos: usize,
    limit: usize,
    lines: usize,
    measure: Measure,
    regions: Vec<Region>,
    /// Sorted byte offsets of newlines that count as paragraph breaks (fence edges).
    strong: Vec<usize>,
    /// The most a closing fence line (`"\n" + marker`) can cost.
    reserve: usize,
    /// Index of the region the next chunk must reopen.
    reopen: Option<usize>,
}

impl Chunks<'_> {
    /// The region whose body a chunk ending at `end` leaves open.
    fn inside(&self, end: usize) -> Option<usize> {
        let i = self.regions.partition_point(|r| r.open.end <= end);
        let idx = i.checked_sub(1)?;
        (end < self.regions[idx].close.start).then_some(idx)
    }

    /// Whether a chunk may end at `end`: not inside a fence line, and not right after an
    /// opening fence line (that would leave an empty code block behind).
    fn allowed(&self, end: usize) -> bool {
        let i = self.regions.partition_point(|r| r.open.start < end);
        let Some(idx) = i.checked_sub(1) else {
            return true;
        };
        let r = &self.regions[idx];
        let in_open = end <= r.open.end;
        let in_close = r.close.start < end && end < r.close.end;
        !(in_open || in_close)
    }

    /// The text that reopens region `idx` at the start of a chunk.
    fn reopen_prefix(&self, idx: usize) -> String {
        let r = &self.regions[idx];
        let line = self.text.get(r.open.clone()).unwrap_or_default();
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = if self.measure.of(line) + 1 > self.limit / 4 {
            r.marker.as_str()
        } else {
            line
        };
        format!("{line}\n")
    }
}

impl Iterator for Chunks<'_> {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let text = self.text;
        while self.pos < text.len() {
            let start = self.pos;
            let prefix = self
                .reopen
                .map(|idx| self.reopen_prefix(idx))
                .unwrap_or_default();
            let units = self.limit.saturating_sub(self.measure.of(&prefix));
            let lines = self
                .lines
                .saturating_sub(usize::from(!prefix.is_empty()))
                .max(1);
            let strong = |b: usize| self.strong.binary_search(&b).is_ok();
            let allowed = |b: usize| self.allowed(b);
            let first = find_split(
                text,
                start,
                Budget { units, lines },
                self.measure,
                &strong,
                &allowed,
            );
            let (end, next, open) = match first {
                Split::Rest => (text.len(), text.len(), None),
                Split::At { end, next } if self.inside(end).is_none() => (end, next, None),
                Split::At { .. } => {
                    // The chunk would end inside a fence: split again with room for the
                    // closing line, which costs a line and `reserve` units.
                    let budget = Budget {
                        units: units.saturating_sub(self.reserve),
                        lines: lines.saturating_sub(1).max(1),
                    };
                    match find_split(text, start, budget, self.measure, &strong, &allowed) {
                        Split::Rest => (text.len(), text.len(), None),
                        Split::At { end, next } => (end, next, self.inside(end)),
                    }
                }
            };
            let body = text.get(start..end).unwrap_or_default();
            let mut out =
                String::with_capacity(prefix.len() + body.len() + 1 + MAX_BALANCED_MARKER);
            out.push_str(&prefix);
            out.push_str(body);
            self.pos = next;
            self.reopen = None;
            if let Some(idx) = open {
                let r = &self.regions[idx];
                out.push('\n');
                out.push_str(&r.marker);
                if next >= r.close.start {
                    // The original closing line comes next; it is already closed here.
                    let after = r.close.end;
                    self.pos = if text.as_bytes().get(after) == Some(&b'\n') {
                        after + 1
                    } else {
                        after
                    };
                } else {
                    self.reopen = Some(idx);
                }
            }
            if body.trim().is_empty() {
                continue;
            }
            return Some(out);
        }
        None
    }
}

/// Whether `text` needs more than `max_messages` messages under `opts`, in which case it
/// should be sent as a file with a [`file_summary`] instead (ten continuation messages earn
/// flood waits and bury the conversation). Stops chunking after `max_messages + 1` chunks.
pub fn should_send_as_file(text: &str, opts: &ChunkOptions, max_messages: usize) -> bool {
    chunks(text, opts).nth(max_messages).is_some()
}

/// A short message to send alongside `text` as an attachment: its first `head_lines`
/// lines, then `… (N lines, M bytes) — full text attached`.
///
/// The result fits `opts` (the head is cut shorter if needed, with fences balanced), as
/// long as the limit can hold the footer line itself (about 60 units). N counts lines as
/// [`str::lines`] does and M is the UTF-8 size of `text`, i.e. the size of the attachment.
pub fn file_summary(text: &str, head_lines: usize, opts: &ChunkOptions) -> String {
    let footer = format!(
        "… ({} lines, {} bytes) — full text attached",
        text.lines().count(),
        text.len()
    );
    let measure = opts.measure;
    let head_end = fence::lines_with_offsets(text)
        .take(head_lines)
        .last()
        .map_or(0, |(start, line)| start + line.len());
    let head = text.get(..head_end).unwrap_or_default().trim_end();
    // Room for "\n" + footer and for a closing fence line.
    let reserve = 1 + measure.of(&footer) + 1 + MAX_BALANCED_MARKER;
    let lines = opts.effective_lines().saturating_sub(2);
    let Some(units) = opts.effective_limit().checked_sub(reserve) else {
        return footer;
    };
    if head.is_empty() || units < MIN_LIMIT || lines == 0 {
        return footer;
    }
    let head_opts = ChunkOptions::new(units, measure).with_max_lines(Some(lines));
    let mut it = chunks(head, &head_opts);
    let Some(mut first) = it.next() else {
        return footer;
    };
    if it.pos >= head.len() && it.reopen.is_none() {
        // The whole head fit: close a fence the head cut off (the chunker closes the ones
        // it splits itself).
        if let Some(r) = fence::regions(&first).last().filter(|r| !r.closed) {
            first.push('\n');
            first.push_str(&r.marker);
        }
    }
    format!("{first}\n{footer}")
}

/// A file name for `text` sent as an attachment: `output.diff` for patches, `output.md`
/// when it contains fences, `output.txt` otherwise. Never `.html`, which Telegram previews
/// badly.
pub fn attachment_name(text: &str) -> &'static str {
    let head: Vec<&str> = text.lines().take(200).collect();
    let is_diff = head.iter().any(|l| l.starts_with("diff --git "))
        || (head.iter().any(|l| l.starts_with("--- "))
            && head.iter().any(|l| l.starts_with("+++ "))
            && head.iter().any(|l| l.starts_with("@@ ")));
    if is_diff {
        "output.diff"
    } else if head.iter().any(|l| fence::opening(l).is_some()) {
        "output.md"
    } else {
        "output.txt"
    }
}

// ---------------------------------------------------------------------------------------
// The split-point search, shared with the Telegram renderer.

/// What a chunk may use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// Length units.
    pub units: usize,
    /// Lines (≥ 1).
    pub lines: usize,
}

/// Where to end the chunk that starts at some position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Split {
    /// Everything left fits.
    Rest,
    /// End the chunk at byte `end`; the next chunk starts at `next` (after the dropped
    /// separator). `pos < end <= next`.
    At { end: usize, next: usize },
}

#[derive(Debug, Clone, Copy)]
struct Candidate {
    end: usize,
    next: usize,
    /// Measure of the chunk if it ends here.
    used: usize,
}

const PARA: usize = 0;
const LINE: usize = 1;
const WORD: usize = 2;

/// Chooses where the chunk starting at byte `pos` of `text` ends, for a chunk of at most
/// `budget`. `strong(b)` marks extra paragraph-level breaks (a newline at `b`);
/// `allowed(b)` vetoes ends. Guarantees progress: the chunk is never empty, even if the
/// budget cannot hold a single character.
pub(crate) fn find_split(
    text: &str,
    pos: usize,
    budget: Budget,
    measure: Measure,
    strong: &dyn Fn(usize) -> bool,
    allowed: &dyn Fn(usize) -> bool,
) -> Split {
    let Some(rest) = text.get(pos..) else {
        return Split::Rest;
    };
    let lines = budget.lines.max(1);
    let bytes = text.as_bytes();

    // The window: the longest prefix of `rest` that fits, and the best break of each kind
    // in it (the latest one wins). A break at the first character that does not fit is a
    // candidate too: the text up to it fits exactly.
    let mut used = 0usize;
    let mut newlines = 0usize;
    let mut best: [Option<Candidate>; 3] = [None; 3];
    let mut prev: Option<char> = None;
    let mut end = None;
    for (i, c) in rest.char_indices() {
        let p = pos + i;
        if p > pos && allowed(p) {
            if prev.is_some_and(is_cjk_break) && is_cluster_boundary(text, p) {
                best[WORD] = Some(Candidate {
                    end: p,
                    next: p,
                    used,
                });
            }
            match c {
                '\n' if prev != Some('\n') => {
                    let run = bytes[p..].iter().take_while(|&&b| b == b'\n').count();
                    let cand = Candidate {
                        end: p,
                        next: p + run,
                        used,
                    };
                    if run >= 2 || strong(p) {
                        best[PARA] = Some(cand);
                    }
                    best[LINE] = Some(cand);
                }
                ' ' | '\t' if !matches!(prev, Some(' ' | '\t')) => {
                    let run = bytes[p..]
                        .iter()
                        .take_while(|&&b| b == b' ' || b == b'\t')
                        .count();
                    best[WORD] = Some(Candidate {
                        end: p,
                        next: p + run,
                        used,
                    });
                }
                _ => {}
            }
        }
        let m = measure.of_char(c);
        if used + m > budget.units || (c == '\n' && newlines + 1 >= lines) {
            end = Some(p);
            break;
        }
        used += m;
        if c == '\n' {
            newlines += 1;
        }
        prev = Some(c);
    }
    let Some(end) = end else {
        return Split::Rest;
    };

    let at = |c: Candidate| Split::At {
        end: c.end,
        next: c.next,
    };
    for level in [PARA, LINE, WORD] {
        if let Some(c) = best[level].filter(|c| c.used * 2 >= used) {
            return at(c);
        }
    }
    if let Some(c) = best[LINE] {
        return at(c);
    }
    if let Some(c) = best[WORD].filter(|c| c.used * 4 >= used) {
        return at(c);
    }

    // Hard split: the last cluster boundary that fits, looking back a little.
    let back = || {
        std::iter::once(end)
            .chain(
                text.get(pos..end)
                    .unwrap_or_default()
                    .char_indices()
                    .rev()
                    .map(|(i, _)| pos + i),
            )
            .filter(|&b| b > pos)
            .take(32)
    };
    let hard = back()
        .find(|&b| is_cluster_boundary(text, b) && allowed(b))
        .or_else(|| back().find(|&b| is_cluster_boundary(text, b)))
        .or_else(|| back().next());
    let b = hard.unwrap_or_else(|| {
        // Not even one character fits: take one anyway rather than loop forever.
        pos + rest.chars().next().map_or(0, char::len_utf8)
    });
    Split::At { end: b, next: b }
}

/// CJK punctuation after which a line may break without a space.
fn is_cjk_break(c: char) -> bool {
    matches!(
        c,
        '。' | '，' | '、' | '！' | '？' | '；' | '：' | '」' | '』' | '）' | '】' | '…'
    )
}

/// Characters that attach to the one before them: combining marks, variation selectors,
/// ZWJ/ZWNJ, emoji modifiers, tag characters. Not the full Unicode grapheme rules, only
/// the cases that show up in CLI and chat output and are cheap to test.
fn is_extend(c: char) -> bool {
    matches!(
        c as u32,
        0x0300..=0x036F
            | 0x0483..=0x0489
            | 0x0591..=0x05BD
            | 0x0610..=0x061A
            | 0x064B..=0x065F
            | 0x0900..=0x0903
            | 0x093A..=0x094F
            | 0x0E31
            | 0x0E34..=0x0E3A
            | 0x0E47..=0x0E4E
            | 0x1AB0..=0x1AFF
            | 0x1DC0..=0x1DFF
            | 0x200C..=0x200D
            | 0x20D0..=0x20FF
            | 0x302A..=0x302F
            | 0x3099..=0x309A
            | 0xFE00..=0xFE0F
            | 0xFE20..=0xFE2F
            | 0x1F3FB..=0x1F3FF
            | 0xE0020..=0xE007F
            | 0xE0100..=0xE01EF
    )
}

fn is_regional_indicator(c: char) -> bool {
    matches!(c as u32, 0x1F1E6..=0x1F1FF)
}

/// Whether byte `b` of `text` is a char boundary that does not cut one of the clusters
/// [`is_extend`] describes, a ZWJ sequence, a flag or CRLF.
pub(crate) fn is_cluster_boundary(text: &str, b: usize) -> bool {
    let (Some(before), Some(after)) = (text.get(..b), text.get(b..)) else {
        return false;
    };
    let (Some(prev), Some(next)) = (before.chars().next_back(), after.chars().next()) else {
        return true;
    };
    if is_extend(next) || prev == '\u{200D}' || (prev == '\r' && next == '\n') {
        return false;
    }
    if is_regional_indicator(prev) && is_regional_indicator(next) {
        let run = before
            .chars()
            .rev()
            .take_while(|&c| is_regional_indicator(c))
            .count();
        return run % 2 == 0;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(limit: usize, measure: Measure) -> ChunkOptions {
        ChunkOptions::new(limit, measure)
    }

    /// Every chunk fits and every fence in it is closed.
    fn check(chunks: &[String], o: &ChunkOptions) {
        for c in chunks {
            let m = o.measure.of(c);
            assert!(
                m <= o.effective_limit(),
                "chunk of {m} > {}: {c:?}",
                o.limit
            );
            let lines = c.split('\n').count();
            assert!(lines <= o.effective_lines(), "{lines} lines: {c:?}");
            assert!(!c.trim().is_empty(), "blank chunk");
        }
    }

    fn non_ws(s: &str) -> String {
        s.chars().filter(|c| !c.is_whitespace()).collect()
    }

    #[test]
    fn measures() {
        let s = "a😀é漢";
        assert_eq!(Measure::Utf16.of(s), 5);
        assert_eq!(Measure::Chars.of(s), 4);
        assert_eq!(Measure::Utf8Bytes.of(s), 1 + 4 + 2 + 3);
        for c in s.chars() {
            assert_eq!(
                Measure::Utf16.of_char(c),
                Measure::Utf16.of(c.encode_utf8(&mut [0; 4]))
            );
        }
    }

    #[test]
    fn empty_and_blank_input_give_no_chunks() {
        let o = ChunkOptions::telegram();
        assert!(chunk("", &o).is_empty());
        assert!(chunk(" \n\n \t\n", &o).is_empty());
        assert!(!should_send_as_file("", &o, 0));
    }

    #[test]
    fn short_text_is_one_unchanged_chunk() {
        let text = "hello\n\nworld  \n";
        assert_eq!(
            chunk(text, &ChunkOptions::discord()),
            vec![text.to_string()]
        );
    }

    #[test]
    fn exactly_at_limit() {
        let o = opts(40, Measure::Chars);
        let text = "x".repeat(40);
        assert_eq!(chunk(&text, &o), vec![text.clone()]);
        let text = "x".repeat(41);
        let c = chunk(&text, &o);
        assert_eq!(c, vec!["x".repeat(40), "x".to_string()]);
    }

    #[test]
    fn exactly_at_limit_with_separator_after() {
        let o = opts(40, Measure::Chars);
        let text = format!("{}\n{}", "a".repeat(40), "b".repeat(5));
        assert_eq!(chunk(&text, &o), vec!["a".repeat(40), "b".repeat(5)]);
    }

    #[test]
    fn emoji_at_the_boundary_counts_two_utf16_units() {
        let o = opts(32, Measure::Utf16);
        let text = format!("{}😀", "a".repeat(31));
        assert_eq!(chunk(&text, &o), vec!["a".repeat(31), "😀".to_string()]);
        // As code points it fits.
        assert_eq!(chunk(&text, &opts(32, Measure::Chars)).len(), 1);
    }

    #[test]
    fn cjk_is_never_cut_inside_a_char() {
        let o = opts(32, Measure::Utf8Bytes);
        let text = "漢字".repeat(50);
        let c = chunk(&text, &o);
        check(&c, &o);
        assert!(c.iter().all(|s| s.len() == 30 || s.len() % 3 == 0));
        assert_eq!(c.concat(), text);
    }

    #[test]
    fn cjk_prefers_breaking_after_punctuation() {
        let o = opts(32, Measure::Chars);
        let text = format!("{}。{}", "漢".repeat(20), "字".repeat(20));
        let c = chunk(&text, &o);
        assert_eq!(c[0], format!("{}。", "漢".repeat(20)));
        assert_eq!(c.concat(), text);
    }

    #[test]
    fn zwj_family_and_flags_stay_whole() {
        let family = "👨\u{200D}👩\u{200D}👧"; // 8 UTF-16 units
        let o = opts(32, Measure::Utf16);
        let text = format!("{}{family}", "x".repeat(29));
        let c = chunk(&text, &o);
        assert_eq!(c, vec!["x".repeat(29), family.to_string()]);

        let flags = "🇩🇪🇫🇷"; // two flags, 8 units
        let text = format!("{}{flags}", "x".repeat(28));
        let c = chunk(&text, &o);
        assert_eq!(c, vec![format!("{}🇩🇪", "x".repeat(28)), "🇫🇷".to_string()]);
        // Room for one and a half flags: the half is not taken.
        let text = format!("{}{flags}", "x".repeat(26));
        let c = chunk(&text, &o);
        assert_eq!(c, vec![format!("{}🇩🇪", "x".repeat(26)), "🇫🇷".to_string()]);
        let text = format!("{}{flags}", "x".repeat(30));
        let c = chunk(&text, &o);
        assert_eq!(c, vec!["x".repeat(30), flags.to_string()]);
    }

    #[test]
    fn combining_marks_stay_with_their_base() {
        let o = opts(32, Measure::Chars);
        let text = format!("{}e\u{0301}", "x".repeat(31));
        let c = chunk(&text, &o);
        assert_eq!(c, vec!["x".repeat(31), "e\u{0301}".to_string()]);
        let skin = "👍🏽";
        let text = format!("{}{skin}", "x".repeat(31));
        assert_eq!(chunk(&text, &o)[1], skin);
    }

    #[test]
    fn prefers_paragraph_then_line_then_word() {
        let o = opts(60, Measure::Chars);
        let para = "aaaa aaaa aaaa aaaa aaaa aaaa aaaa\n\nbbbb bbbb\ncccc cccc cccc cccc dddd";
        let c = chunk(para, &o);
        assert_eq!(c[0], "aaaa aaaa aaaa aaaa aaaa aaaa aaaa");
        // A paragraph break before the half-way mark loses to a later line break.
        let early = "aaaa aaaa aaaa aaaa aaaa\n\nbbbb bbbb bbbb\ncccc cccc cccc cccc dddd";
        assert_eq!(
            chunk(early, &o)[0],
            "aaaa aaaa aaaa aaaa aaaa\n\nbbbb bbbb bbbb"
        );
        let line = "aaaa aaaa aaaa aaaa aaaa aaaa aaaa\nbbbb bbbb bbbb bbbb cccc cccc";
        assert_eq!(chunk(line, &o)[0], "aaaa aaaa aaaa aaaa aaaa aaaa aaaa");
        let words = "word ".repeat(30);
        let c = chunk(&words, &o);
        check(&c, &o);
        assert!(
            c.iter()
                .all(|s| !s.starts_with(' ') && s.split(' ').all(|w| w == "word" || w.is_empty()))
        );
    }

    #[test]
    fn an_early_paragraph_break_does_not_make_a_tiny_chunk() {
        let o = opts(100, Measure::Chars);
        let text = format!("hi\n\n{}", "word ".repeat(40));
        let c = chunk(&text, &o);
        assert!(c[0].len() > 50, "{:?}", c[0]);
    }

    #[test]
    fn long_word_is_hard_split() {
        let o = opts(32, Measure::Chars);
        let text = "x".repeat(100);
        let c = chunk(&text, &o);
        assert_eq!(c.len(), 4);
        assert_eq!(c.concat(), text);
    }

    #[test]
    fn tiny_limits_are_raised() {
        let c = chunk(&"y".repeat(100), &opts(1, Measure::Utf16));
        assert!(
            c.iter()
                .all(|s| s.len() == MIN_LIMIT || s.len() == 100 % MIN_LIMIT)
        );
    }

    #[test]
    fn fences_are_closed_and_reopened_with_their_info_string() {
        let o = opts(80, Measure::Chars);
        let body: String = (0..30).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("Here:\n\n```rust\n{body}```\nDone.");
        let c = chunk(&text, &o);
        check(&c, &o);
        assert!(c.len() > 3);
        for (i, s) in c.iter().enumerate() {
            let regions = fence::regions(s);
            assert!(
                regions.iter().all(|r| r.closed),
                "chunk {i} unbalanced: {s:?}"
            );
            if i > 0 && s.contains("let x") {
                assert!(s.starts_with("```rust\n"), "chunk {i}: {s:?}");
            }
        }
        // No empty code blocks anywhere.
        assert!(c.iter().all(|s| !s.contains("```rust\n```")));
        assert!(c.last().is_some_and(|s| s.ends_with("Done.")));
        // Every code line survives.
        let all = c.concat();
        for i in 0..30 {
            assert!(all.contains(&format!("let x{i} = {i};")), "lost line {i}");
        }
    }

    #[test]
    fn split_before_the_closing_fence_does_not_leave_an_empty_block() {
        // The code block ends exactly where the budget runs out.
        let o = opts(40, Measure::Chars);
        let text = format!("```\n{}\n```\nafter", "c".repeat(30));
        let c = chunk(&text, &o);
        check(&c, &o);
        assert_eq!(
            c,
            vec![format!("```\n{}\n```", "c".repeat(30)), "after".to_string()]
        );
    }

    #[test]
    fn prefers_breaking_before_a_fence() {
        let o = opts(120, Measure::Chars);
        let text = format!(
            "{}\n```sh\nls -la\nmore\n```\n{}",
            "intro words ".repeat(5).trim_end(),
            "tail ".repeat(20)
        );
        let c = chunk(&text, &o);
        check(&c, &o);
        assert!(c[0].ends_with("```"), "{c:?}");
        assert!(c[0].contains("```sh"));
    }

    #[test]
    fn long_opening_line_reopens_with_the_bare_marker() {
        let o = opts(60, Measure::Chars);
        let info = "python title=\"a-very-long-title-that-eats-the-budget\"";
        let body = "print(1)\n".repeat(20);
        let text = format!("```{info}\n{body}```");
        let c = chunk(&text, &o);
        check(&c, &o);
        assert!(c[1].starts_with("```\n"), "{:?}", c[1]);
    }

    #[test]
    fn tilde_and_long_backtick_fences_close_with_their_own_marker() {
        let o = opts(40, Measure::Chars);
        let text = format!("~~~~\n{}~~~~", "line of text\n".repeat(10));
        let c = chunk(&text, &o);
        check(&c, &o);
        assert!(c[0].ends_with("\n~~~~"));
        assert!(c[1].starts_with("~~~~\n"));
    }

    #[test]
    fn unclosed_input_fence_stays_unclosed_at_the_end() {
        let o = opts(40, Measure::Chars);
        let text = format!("```\n{}", "line of code\n".repeat(8));
        let c = chunk(&text, &o);
        check(&c, &o);
        for s in &c[..c.len() - 1] {
            assert!(fence::regions(s).iter().all(|r| r.closed));
        }
        assert!(c.last().is_some_and(|s| s.starts_with("```\n")));
    }

    #[test]
    fn inline_triple_backticks_are_not_fences() {
        let o = opts(40, Measure::Chars);
        let text = "use ```x``` here ".repeat(10);
        let c = chunk(&text, &o);
        check(&c, &o);
        assert_eq!(non_ws(&c.concat()), non_ws(&text));
    }

    #[test]
    fn discord_line_cap() {
        let o = ChunkOptions::discord();
        let text: String = (0..40).map(|i| format!("line {i}\n")).collect();
        let c = chunk(&text, &o);
        check(&c, &o);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].lines().count(), 17);
    }

    #[test]
    fn line_cap_counts_the_fence_lines() {
        let o = ChunkOptions::discord();
        let text = format!("```\n{}```", "x\n".repeat(40));
        let c = chunk(&text, &o);
        check(&c, &o);
        assert!(c.iter().all(|s| fence::regions(s).iter().all(|r| r.closed)));
    }

    /// A tiny deterministic generator, so the property tests need no extra crate.
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

    fn random_text(rng: &mut Lcg, with_fences: bool) -> String {
        const PIECES: &[&str] = &[
            "word",
            "longerword",
            " ",
            " ",
            " ",
            "\n",
            "\n\n",
            "😀",
            "漢字",
            "。",
            "e\u{0301}",
            "👨\u{200D}👩\u{200D}👧",
            "🇩🇪",
            "&lt;",
            "<b>",
            "\t",
            "x",
        ];
        let mut s = String::new();
        let n = rng.next(400);
        for _ in 0..n {
            if with_fences && rng.next(40) == 0 {
                s.push_str(["\n```rust\n", "\n```\n", "\n~~~\n"][rng.next(3)]);
            } else if rng.next(60) == 0 {
                s.push_str(&"z".repeat(rng.next(120)));
            } else {
                s.push_str(PIECES[rng.next(PIECES.len())]);
            }
        }
        s
    }

    #[test]
    fn property_fits_and_keeps_all_content() {
        let mut rng = Lcg(7);
        for round in 0..400 {
            let text = random_text(&mut rng, false);
            let measure = [Measure::Utf16, Measure::Chars, Measure::Utf8Bytes][round % 3];
            let o = opts(32 + rng.next(200), measure)
                .with_max_lines([None, Some(3), Some(17)][rng.next(3)]);
            let c = chunk(&text, &o);
            check(&c, &o);
            assert_eq!(
                non_ws(&c.concat()),
                non_ws(&text),
                "round {round}: {text:?}"
            );
        }
    }

    #[test]
    fn property_fences_balanced_in_every_chunk() {
        let mut rng = Lcg(11);
        for round in 0..400 {
            let text = random_text(&mut rng, true);
            let o = opts(32 + rng.next(150), Measure::Utf16)
                .with_max_lines([None, Some(5)][rng.next(2)]);
            let c = chunk(&text, &o);
            check(&c, &o);
            let input_unclosed = fence::regions(&text).iter().any(|r| !r.closed);
            for (i, s) in c.iter().enumerate() {
                let last = i + 1 == c.len();
                if !(last && input_unclosed) {
                    assert!(
                        fence::regions(s).iter().all(|r| r.closed),
                        "round {round} chunk {i}: {s:?}\nall: {c:?}\ninput: {text:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn lazy_iteration_matches_collect() {
        let text = "para\n\n".repeat(500);
        let o = opts(100, Measure::Chars);
        assert_eq!(
            chunks(&text, &o).take(3).collect::<Vec<_>>(),
            chunk(&text, &o)[..3]
        );
    }

    #[test]
    fn send_as_file_threshold() {
        let o = opts(100, Measure::Chars);
        let text = "x".repeat(250); // 3 chunks
        assert!(!should_send_as_file(&text, &o, 3));
        assert!(should_send_as_file(&text, &o, 2));
        assert!(!should_send_as_file("short", &o, 1));
        assert!(should_send_as_file("short", &o, 0));
    }

    #[test]
    fn summary_has_head_and_footer() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let s = file_summary(&text, 3, &ChunkOptions::telegram());
        assert_eq!(
            s,
            format!(
                "line 1\nline 2\nline 3\n… (100 lines, {} bytes) — full text attached",
                text.len()
            )
        );
    }

    #[test]
    fn summary_fits_and_balances_fences() {
        let text = format!(
            "```diff\n{}```\n",
            "+ added a long line of code here\n".repeat(200)
        );
        let o = ChunkOptions::discord();
        let s = file_summary(&text, 5, &o);
        assert!(o.measure.of(&s) <= o.limit);
        assert!(s.starts_with("```diff\n+ added"));
        assert!(fence::regions(&s).iter().all(|r| r.closed), "{s}");
        let footer = format!("… (202 lines, {} bytes) — full text attached", text.len());
        assert!(s.ends_with(&footer), "{s}");

        let small = opts(120, Measure::Chars);
        let s = file_summary(&text, 50, &small);
        assert!(small.measure.of(&s) <= 120, "{s}");
        assert!(fence::regions(&s).iter().all(|r| r.closed), "{s}");
    }

    #[test]
    fn summary_of_empty_text_is_the_footer() {
        let s = file_summary("", 10, &ChunkOptions::telegram());
        assert_eq!(s, "… (0 lines, 0 bytes) — full text attached");
    }

    #[test]
    fn attachment_names() {
        assert_eq!(
            attachment_name("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n"),
            "output.diff"
        );
        assert_eq!(
            attachment_name("text\n```rust\nfn main(){}\n```\n"),
            "output.md"
        );
        assert_eq!(attachment_name("plain log line\n"), "output.txt");
    }

    #[test]
    fn options_round_trip_through_json() {
        let o = ChunkOptions::discord();
        let json = serde_json::to_string(&o).expect("serialize");
        assert_eq!(json, r#"{"limit":2000,"measure":"chars","max_lines":17}"#);
        let back: ChunkOptions =
            serde_json::from_str(r#"{"limit":4096,"measure":"utf16"}"#).expect("parse");
        assert_eq!(back, ChunkOptions::telegram());
    }
}
