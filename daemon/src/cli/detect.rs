//! Reading a screen: is the CLI busy, idle, interrupted, showing an error, or waiting on a
//! prompt — and if so, what it asks and which options it offers.
//!
//! The knowledge is data (`patterns.toml`, extended from the config); this module only compiles
//! and applies it. It sees plain text from `capture-pane -J`, never escape sequences.

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;

pub use crate::model::AnswerStyle;

/// The built-in packs.
const BUILTIN: &str = include_str!("patterns.toml");

/// One prompt rule as written in TOML.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptRuleConfig {
    pub kind: String,
    pub pattern: String,
    #[serde(default)]
    pub options: Vec<String>,
    #[serde(default)]
    pub answer: AnswerStyle,
    #[serde(default)]
    pub subject: Option<String>,
    /// What the subject is ("command", "path", "url"); unset: read from the dialog's words.
    #[serde(default)]
    pub subject_kind: Option<String>,
}

/// One error rule as written in TOML.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorRuleConfig {
    pub kind: String,
    pub pattern: String,
}

/// A pack as written in TOML (built in, or `[cli.NAME.patterns]`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackConfig {
    pub check_lines: Option<usize>,
    /// The CLI versions the pack was made for (`">=2.1, <3"`): a session whose CLI is outside
    /// says so once ([`crate::cli::version`]).
    #[serde(default)]
    pub versions: Option<String>,
    #[serde(default)]
    pub busy: Vec<String>,
    #[serde(default)]
    pub idle: Vec<String>,
    #[serde(default)]
    pub interrupted: Vec<String>,
    /// Seen anywhere on the screen once the CLI has finished starting (some draw their input
    /// box before they accept input). Empty: idle means ready.
    #[serde(default)]
    pub ready: Vec<String>,
    /// The CLI runs in a mode where its tool calls are not asked (Claude Code's auto mode):
    /// no permission prompt reaches a chat, which its chats are told once.
    #[serde(default)]
    pub unasked: Vec<String>,
    /// Where the CLI names the mode it runs in (a `mode` capture group: Claude Code's footer,
    /// `⏵⏵ auto mode on`). A mode not in `known_modes` is new — a new version's default,
    /// perhaps, which may ask nothing — and is told.
    #[serde(default)]
    pub modes: Vec<String>,
    #[serde(default)]
    pub known_modes: Vec<String>,
    #[serde(default)]
    pub prompts: Vec<PromptRuleConfig>,
    #[serde(default)]
    pub errors: Vec<ErrorRuleConfig>,
}

#[derive(Debug, Clone)]
struct PromptRule {
    kind: crate::model::PromptKind,
    pattern: Regex,
    options: Vec<String>,
    answer: AnswerStyle,
    subject: Option<Regex>,
    subject_kind: Option<crate::model::SubjectKind>,
}

/// A compiled pack.
#[derive(Debug, Clone)]
pub struct Pack {
    check_lines: usize,
    versions: Option<crate::cli::version::Range>,
    busy: Vec<Regex>,
    idle: Vec<Regex>,
    interrupted: Vec<Regex>,
    ready: Vec<Regex>,
    unasked: Vec<Regex>,
    modes: Vec<Regex>,
    known_modes: Vec<String>,
    prompts: Vec<PromptRule>,
    errors: Vec<(String, Regex)>,
}

/// A prompt read off the screen.
#[derive(Debug, Clone, PartialEq)]
pub struct ScreenPrompt {
    pub kind: crate::model::PromptKind,
    pub text: String,
    pub options: Vec<String>,
    pub subject: String,
    /// The subject may go on past the line it was read from (a command drawn over several
    /// lines): then what was read is not all of it, and nothing answers it automatically.
    pub subject_partial: bool,
    /// What the subject is, when the pattern says.
    pub subject_kind: Option<crate::model::SubjectKind>,
    pub answer: AnswerStyle,
    /// The lines just above the question that explain it, inside the dialog ("This will
    /// modify 3 files"); empty when there are none (see [`context_above`]).
    pub context: String,
}

/// What a screen shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Analysis {
    pub prompt: Option<ScreenPrompt>,
    pub busy: bool,
    pub idle: bool,
    /// The CLI finished starting (see `ready` patterns).
    pub ready: bool,
    pub interrupted: bool,
    /// Nothing on screen says the CLI works: its idle look shows (or, for a pack that knows
    /// no idle look, no busy sign does) and no busy sign is there.
    pub settled: bool,
    /// (kind, the line that matched)
    pub error: Option<(String, String)>,
    /// The words that say the CLI runs its tools without asking (its mode), if shown.
    pub unasked: Option<String>,
    /// A mode the CLI names that its pack does not know (see `modes`), if shown.
    pub new_mode: Option<String>,
}

/// The longest mode name kept (what a screen shows is anyone's to draw).
const MAX_MODE_CHARS: usize = 40;

fn compile(p: &str, what: &str) -> Result<Regex, String> {
    Regex::new(p).map_err(|e| format!("{what}: invalid regex {p:?}: {e}"))
}

fn compile_all(ps: &[String], what: &str) -> Result<Vec<Regex>, String> {
    ps.iter().map(|p| compile(p, what)).collect()
}

/// How many non-blank lines at the bottom of the screen are read for errors, at least.
const ERROR_LINES: usize = 6;

/// The built-in packs, by name ("generic", "claude", "codex", "gemini", "opencode").
pub fn builtin_packs() -> BTreeMap<String, PackConfig> {
    // The embedded file is part of the binary and covered by tests; an error here is a build bug.
    toml::from_str(BUILTIN).unwrap_or_default()
}

impl Pack {
    /// The CLI versions the pack was made for, when it says.
    pub fn versions(&self) -> Option<&crate::cli::version::Range> {
        self.versions.as_ref()
    }

    /// The pack can tell a busy screen (a spinner, "esc to interrupt") from an idle one.
    pub fn shows_busy(&self) -> bool {
        !self.busy.is_empty()
    }

    /// Compiles `base` with `extra` merged in: extra prompts and errors are tried first, extra
    /// busy/idle patterns are added, and extra `check_lines` wins.
    pub fn compile(base: &PackConfig, extra: Option<&PackConfig>) -> Result<Pack, String> {
        let empty = PackConfig::default();
        let extra = extra.unwrap_or(&empty);
        let join = |a: &[String], b: &[String]| b.iter().chain(a).cloned().collect::<Vec<_>>();
        let prompts = extra
            .prompts
            .iter()
            .chain(&base.prompts)
            .map(|r| {
                let subject_kind = match &r.subject_kind {
                    None => None,
                    Some(k) => Some(crate::model::SubjectKind::parse(k).ok_or_else(|| {
                        format!("subject_kind {k:?}: write \"command\", \"path\" or \"url\"")
                    })?),
                };
                Ok(PromptRule {
                    subject_kind,
                    kind: r.kind.as_str().into(),
                    pattern: compile(&r.pattern, "prompt pattern")?,
                    options: r.options.clone(),
                    answer: r.answer,
                    subject: r
                        .subject
                        .as_deref()
                        .map(|s| compile(s, "subject pattern"))
                        .transpose()?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let errors = extra
            .errors
            .iter()
            .chain(&base.errors)
            .map(|r| Ok((r.kind.clone(), compile(&r.pattern, "error pattern")?)))
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Pack {
            check_lines: extra.check_lines.or(base.check_lines).unwrap_or(20).max(1),
            versions: extra
                .versions
                .as_deref()
                .or(base.versions.as_deref())
                .map(crate::cli::version::Range::parse)
                .transpose()?,
            busy: compile_all(&join(&base.busy, &extra.busy), "busy pattern")?,
            idle: compile_all(&join(&base.idle, &extra.idle), "idle pattern")?,
            interrupted: compile_all(
                &join(&base.interrupted, &extra.interrupted),
                "interrupted pattern",
            )?,
            ready: compile_all(&join(&base.ready, &extra.ready), "ready pattern")?,
            unasked: compile_all(&join(&base.unasked, &extra.unasked), "unasked pattern")?,
            modes: compile_all(&join(&base.modes, &extra.modes), "modes pattern")?,
            known_modes: join(&base.known_modes, &extra.known_modes)
                .iter()
                .map(|m| m.to_lowercase())
                .collect(),
            prompts,
            errors,
        })
    }

    /// Reads a screen.
    pub fn analyze(&self, screen: &str) -> Analysis {
        let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
        let end = lines
            .iter()
            .rposition(|l| !l.trim().is_empty())
            .map_or(0, |i| i + 1);
        let lines = &lines[..end];
        // The last `check_lines` non-blank lines, with the blank lines between them kept.
        let mut start = end;
        let mut seen = 0;
        while start > 0 && seen < self.check_lines {
            start -= 1;
            if !lines[start].trim().is_empty() {
                seen += 1;
            }
        }
        let tail = lines[start..].join("\n");
        // Errors are looked for a little further up: a program's message (a usage limit and
        // its reset) is seldom its last line, which is its prompt again.
        let mut err_start = start;
        while err_start > 0 && seen < self.check_lines.max(ERROR_LINES) {
            err_start -= 1;
            if !lines[err_start].trim().is_empty() {
                seen += 1;
            }
        }
        let err_tail = lines[err_start..].join("\n");
        let mut a = Analysis {
            busy: self.busy.iter().any(|r| r.is_match(&tail)),
            idle: self.idle.iter().any(|r| r.is_match(&tail)),
            interrupted: self.interrupted.iter().any(|r| r.is_match(&tail)),
            ready: self.ready.is_empty() || self.ready.iter().any(|r| r.is_match(screen)),
            unasked: self
                .unasked
                .iter()
                .find_map(|r| r.find(&tail))
                .map(|m| m.as_str().to_string()),
            new_mode: self
                .modes
                .iter()
                .find_map(|r| r.captures(&tail)?.name("mode"))
                .map(|m| {
                    m.as_str()
                        .trim()
                        .chars()
                        .take(MAX_MODE_CHARS)
                        .collect::<String>()
                })
                .filter(|m| !m.is_empty() && !self.known_modes.contains(&m.to_lowercase())),
            ..Default::default()
        };
        a.settled = !a.busy && (a.idle || self.idle.is_empty());
        for (kind, r) in &self.errors {
            let tail = &err_tail;
            if let Some(m) = r.find(tail) {
                let line = tail[..m.start()].rfind('\n').map_or(0, |i| i + 1);
                let mut line_end = tail[m.end()..]
                    .find('\n')
                    .map_or(tail.len(), |i| m.end() + i);
                // A usage limit's reset time may be wrapped onto the next line.
                let told = |t: &str| {
                    crate::usage::limits::reset_of(t, 0, &jiff::tz::TimeZone::UTC).is_some()
                };
                if kind == "usage_limit" && line_end < tail.len() && !told(&tail[line..line_end]) {
                    line_end = tail[line_end + 1..]
                        .find('\n')
                        .map_or(tail.len(), |i| line_end + 1 + i);
                }
                let text = tail[line..line_end]
                    .lines()
                    .map(clean_line)
                    .collect::<Vec<_>>()
                    .join(" ");
                a.error = Some((kind.clone(), text.trim().to_string()));
                break;
            }
        }
        for rule in &self.prompts {
            let Some(caps) = rule.pattern.captures(&tail) else {
                continue;
            };
            let Some(m) = caps.get(0) else { continue };
            // The question is the `q` group when the rule names one, else the line where the
            // match starts. Options are the numbered lines from there on (or, for a line-
            // oriented menu, the numbered lines above it).
            // A leading `\s*` may have matched blank lines before the question.
            let mstart = m.start() + (m.as_str().len() - m.as_str().trim_start().len());
            let line_start = tail[..mstart].rfind('\n').map_or(0, |i| i + 1);
            let line_end = tail[mstart..].find('\n').map_or(tail.len(), |i| mstart + i);
            let text = match caps.name("q") {
                Some(q) => clean_line(q.as_str()).to_string(),
                None => clean_line(&tail[line_start..line_end]).to_string(),
            };
            let from_match: Vec<&str> = tail[line_start..].lines().collect();
            let options = if rule.kind == crate::model::PromptKind::Secret {
                // A password prompt takes text; numbers above it are something else.
                Vec::new()
            } else if !rule.options.is_empty() {
                rule.options.clone()
            } else if rule.answer == AnswerStyle::Down {
                // Below the question's own line (a pattern may start matching above it).
                let after = caps.name("q").map_or(line_end, |q| {
                    tail[q.end()..]
                        .find('\n')
                        .map_or(tail.len(), |i| q.end() + i)
                });
                let below: Vec<&str> = tail[after..].lines().collect();
                menu_options(&below)
            } else {
                let below = numbered_options(&from_match);
                // Only a line-oriented menu ("Select an option [1-3]:") lists its options
                // above the question. A dialog whose options are not drawn yet has none:
                // a numbered list above it (Gemini's start-up tips) is something else.
                if below.is_empty() && rule.answer == AnswerStyle::Line {
                    let mut above: Vec<&str> = lines[start.saturating_sub(20)..start].to_vec();
                    above.extend(tail[..line_start].lines());
                    let listed = numbered_options(&above);
                    // "Select an option [1-3]:" with nothing listed: the range is the options.
                    if listed.is_empty() {
                        range_options(&text)
                    } else {
                        listed
                    }
                } else {
                    below
                }
            };
            let subject_match = rule
                .subject
                .as_ref()
                .and_then(|r| r.captures(&tail))
                .and_then(|c| c.get(1));
            let subject = subject_match
                .map(|s| clean_line(s.as_str()).to_string())
                .unwrap_or_default();
            let subject_partial =
                subject_match.is_some_and(|s| goes_on(&tail, s.end(), line_start));
            // The context is above the question's own line (a pattern may start matching on a
            // line above it).
            let question_line = caps.name("q").map_or(line_start, |q| {
                tail[..q.start()].rfind('\n').map_or(0, |i| i + 1)
            });
            // What explains a dialog may sit above the lines checked for prompts (a shell's
            // question is checked on its own line): it is read from the whole screen. Its block
            // must start below a blank line or a border; the screen's top counts as one only
            // when the checked lines reach it (else the block may run on into the history).
            let mut above = lines[..start].join("\n");
            if start > 0 {
                above.push('\n');
            }
            above.push_str(&tail[..question_line]);
            let context = context_above(&above, &subject, start == 0);
            a.prompt = Some(ScreenPrompt {
                kind: rule.kind.clone(),
                text,
                options,
                subject,
                subject_partial,
                subject_kind: rule.subject_kind,
                answer: rule.answer,
                context,
            });
            break;
        }
        a
    }
}

/// Lines of context at most, and characters.
const CONTEXT_LINES: usize = 5;
const CONTEXT_CHARS: usize = 500;

/// What starts a line of the conversation rather than of a dialog: the CLIs' marks for what
/// was typed (`❯`, `›`, `>`), for the model's words and tool calls (`●`, `•`, `✦`, `⏺`, `⎿`),
/// and for a turn's status (`✻`, `▣`, `→`).
const CONVERSATION_MARKS: &[char] = &['❯', '›', '>', '●', '•', '◦', '✦', '⏺', '⎿', '✻', '▣', '→'];

/// Whether a line is drawn only with box-drawing characters: a border, a rule.
fn is_border(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty()
        && t.chars()
            .all(|c| ('\u{2500}'..='\u{257F}').contains(&c) || c.is_whitespace())
}

/// The dialog's own lines just above its question (`above` is the screen's checked tail up to
/// the question's line), which explain it: a warning such as "This will modify 3 files", a
/// title. They are the lines right above it (one blank line between them and the question
/// is allowed) up to a blank line or a border (the dialog's top), with borders stripped, at
/// most `CONTEXT_LINES` lines and `CONTEXT_CHARS` characters; `at_top` says that `above`
/// starts at the top of the screen, which bounds them too. The line naming `subject` is left
/// out (it is shown as the subject). Lines that run on into the conversation — into a line the
/// CLI marks as typed input, the model's words or a turn's status, into the top of what was
/// checked, or past the line limit — are not the dialog's: then there is none.
pub fn context_above(above: &str, subject: &str, at_top: bool) -> String {
    let lines: Vec<&str> = above.lines().collect();
    let mut i = lines.len();
    // One blank line may separate the question from what explains it.
    if i > 0 && clean_line(lines[i - 1]).is_empty() {
        i -= 1;
    }
    let mut picked: Vec<&str> = Vec::new();
    loop {
        if i == 0 {
            if at_top {
                break;
            }
            // The top of what was checked: where this block starts is not known.
            return String::new();
        }
        let line = clean_line(lines[i - 1]);
        if line.is_empty() || is_border(line) {
            break;
        }
        if line.starts_with(CONVERSATION_MARKS) || picked.len() == CONTEXT_LINES {
            return String::new();
        }
        picked.push(line);
        i -= 1;
    }
    picked.reverse();
    let text = picked
        .into_iter()
        .filter(|l| subject.is_empty() || !l.contains(subject))
        .collect::<Vec<_>>()
        .join("\n");
    if text.chars().count() > CONTEXT_CHARS {
        let mut cut: String = text.chars().take(CONTEXT_CHARS - 1).collect();
        cut.push('…');
        return cut;
    }
    text
}

/// Whether the text read as a subject up to `end` may go on: the line after it is neither
/// blank, nor the question (which starts at `question`), nor one of the dialog's options.
fn goes_on(tail: &str, end: usize, question: usize) -> bool {
    let line_start = tail[..end].rfind('\n').map_or(0, |i| i + 1);
    if line_start == question {
        return false; // read from the question's own line
    }
    let Some(nl) = tail[end..].find('\n').map(|i| end + i) else {
        return false; // the last line
    };
    let next_start = nl + 1;
    if next_start == question {
        return false;
    }
    let next = clean_line(tail[next_start..].lines().next().unwrap_or(""));
    !next.is_empty() && numbered_options(&[next]).is_empty()
}

/// Strips box-drawing borders and the focus markers TUIs draw around a line.
fn clean_line(l: &str) -> &str {
    l.trim_matches(|c: char| c.is_whitespace() || matches!(c, '│' | '┃' | '║'))
}

/// The choices a question names as a range, `[1-3]` → 1, 2, 3 (at most 20 of them): what a
/// line-oriented menu asks when its options are not listed on screen.
fn range_options(question: &str) -> Vec<String> {
    let Some(open) = question.rfind('[') else {
        return Vec::new();
    };
    let Some(close) = question[open..].find(']') else {
        return Vec::new();
    };
    let inside = &question[open + 1..open + close];
    let Some((a, b)) = inside.split_once('-') else {
        return Vec::new();
    };
    match (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
        (Ok(a), Ok(b)) if a <= b && b - a < 20 => (a..=b).map(|n| n.to_string()).collect(),
        _ => Vec::new(),
    }
}

/// The options of a vertical menu without numbers: the lines below the question up to its
/// key hints (`↑/↓ select`), the cursor `❯` taken off; a field label ending in `:` is not one.
fn menu_options(lines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for l in lines {
        let l = clean_line(l);
        if l.contains("↑/↓") || l.starts_with('─') {
            break;
        }
        let label = l.trim_start_matches(['❯', '›', '>']).trim();
        if label.is_empty() || label.ends_with(':') {
            continue;
        }
        out.push(label.to_string());
    }
    if out.len() > 20 { Vec::new() } else { out }
}

/// The options of a numbered menu ("❯ 1. Yes", "  2) No"), in order, numbered from 1 without
/// gaps; description lines between them are skipped.
fn numbered_options(lines: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in lines {
        let l = clean_line(l);
        let l = l
            .trim_start_matches(['❯', '›', '>', '●', '◉', '○', '*'])
            .trim_start();
        let digits: String = l.chars().take_while(char::is_ascii_digit).collect();
        let Ok(n) = digits.parse::<usize>() else {
            continue;
        };
        let rest = &l[digits.len()..];
        let Some(label) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) else {
            continue;
        };
        if n == out.len() + 1 {
            out.push(label.trim().to_string());
        } else if n == 1 {
            // A new menu starts: the earlier numbers belonged to something else.
            out = vec![label.trim().to_string()];
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_copilot_reply_that_asks_is_no_dialog() {
        let screen = " ❯ please help\n ● I can do that.\n   Do you want to run this command?\n   1. Yes\n   2. No\n /home/dev/proj\n────────\n❯\n────────\n ← open sidebar · Interactive · / commands · ? help";
        let a = pack("copilot").analyze(screen);
        assert!(a.prompt.is_none(), "{a:?}");
        assert!(a.idle && a.settled, "{a:?}");
    }

    #[test]
    fn a_range_in_the_question_is_its_options() {
        assert_eq!(range_options("Select an option [1-3]:"), ["1", "2", "3"]);
        assert_eq!(range_options("Pick [2 - 4]"), ["2", "3", "4"]);
        assert!(
            range_options("Select [1-500]").is_empty(),
            "too many to offer"
        );
        assert!(range_options("Select [3-1]").is_empty());
        assert!(range_options("no range here").is_empty());
        let p = pack("generic")
            .analyze("$ x\nSelect an option [1-3]: ")
            .prompt
            .expect("a prompt");
        assert_eq!(p.options, ["1", "2", "3"]);
        // A shell's question is checked on its own line; what explains it above is read too.
        let p = pack("generic")
            .analyze("$ clean\n\n| file | size |\n| a.txt | 1 |\nDelete them? [y/n] ")
            .prompt
            .expect("a prompt");
        assert_eq!(p.context, "| file | size |\n| a.txt | 1 |");
    }

    #[test]
    fn password_prompts_are_secret() {
        let p = pack("generic");
        for line in [
            "[sudo] password for dev: ",
            "Password:",
            "dev@build-box's password: ",
            "Enter passphrase for key '/home/dev/.ssh/id_ed25519': ",
            "Enter PEM pass phrase:",
            "Password for 'https://dev@github.com': ",
            "New password:",
            "Retype new password:",
            "Enter your API token: ",
            "token:",
            "Vault password: ",
            "Bitwarden master password: ",
            "MySQL password: ",
            "Password (again): ",
            "Enter passphrase (empty for no passphrase): ",
            "AWS Secret Access Key [None]: ",
            "Enter PIN for 'PIV Card Holder pin (PIV_II)': ",
            "Enter PIN: ",
            "GitHub token: ",
            "Enter the OTP: ",
            "Paste your access token: ",
            "Private key passphrase: ",
            "Enter MFA code for arn:aws:iam::123456789012:mfa/dev: ",
            "Enter verification code: ",
            "2FA code: ",
        ] {
            let screen = format!("$ some command\n1. listed\n2. lines\n{line}");
            let got = p
                .analyze(&screen)
                .prompt
                .unwrap_or_else(|| panic!("{line:?}"));
            assert_eq!(got.kind, "secret", "{line:?}");
            assert!(got.options.is_empty(), "{line:?}: {:?}", got.options);
            assert_eq!(got.text, line.trim(), "{line:?}");
        }
        for line in [
            "$ echo password",
            "Username for 'https://github.com': ",
            "the password: was changed",
            "Select an option [1-3]:",
            "AWS Access Key ID [None]: ",
            "Default region name [None]: ",
            "Username: ",
            "Enter your name: ",
            "Token count: 512",
            "Processed 5 tokens: done",
        ] {
            let got = p.analyze(&format!("x\n{line}")).prompt;
            assert!(
                got.as_ref().is_none_or(|g| g.kind != "secret"),
                "{line:?}: {got:?}"
            );
        }
    }

    fn pack(name: &str) -> Pack {
        let packs = builtin_packs();
        Pack::compile(packs.get(name).expect("pack exists"), None).expect("compiles")
    }

    /// A screen fixture from tests/fixtures/screens (shared with the adapters' tests).
    pub(crate) fn screen(file: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/screens")
            .join(file);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn builtin_packs_all_compile() {
        let packs = builtin_packs();
        for name in ["generic", "claude", "codex", "gemini", "opencode"] {
            Pack::compile(packs.get(name).expect(name), None).expect(name);
        }
    }

    #[test]
    fn claude_bash_permission() {
        let a = pack("claude").analyze(&screen("claude_bash_perm.txt"));
        let p = a.prompt.expect("prompt");
        assert_eq!(p.kind, "permission");
        assert_eq!(p.text, "Do you want to proceed?");
        assert_eq!(
            p.options,
            [
                "Yes",
                "Yes, and always allow access to proj/ from this project",
                "No"
            ]
        );
        assert_eq!(p.subject, "touch /home/dev/proj/created_by_bash.txt");
        assert!(!a.busy);
        // The current layout (saved by the real-CLI test): a tip and a description under
        // "Bash command", the command between dashed rules. The subject is the command, never
        // the tip: rules and the guard judge it.
        let real = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/claude_bash_permission.txt"),
        )
        .expect("the saved screen");
        let p = pack("claude").analyze(&real).prompt.expect("prompt");
        assert!(
            p.subject.starts_with("touch ") && p.subject.ends_with("/marker.txt"),
            "{}",
            p.subject
        );
        let edit = "x\n Edit file\n hello.txt\n╌╌╌╌╌╌\n 1 + hi\n╌╌╌╌╌╌\n Do you want to make this edit to hello.txt?\n ❯ 1. Yes\n   2. No\n";
        let p = pack("claude").analyze(edit).prompt.expect("prompt");
        assert_eq!(p.subject, "hello.txt");
    }

    #[test]
    fn claude_write_permission_and_question() {
        let p = pack("claude")
            .analyze(&screen("claude_write_perm.txt"))
            .prompt
            .expect("prompt");
        assert_eq!(p.kind, "permission");
        assert!(p.text.starts_with("Do you want to create"), "{}", p.text);
        assert_eq!(p.options.len(), 3);
        let p = pack("claude")
            .analyze(&screen("claude_askq.txt"))
            .prompt
            .expect("prompt");
        assert_eq!(p.kind, "question");
        assert_eq!(p.text, "Which database should we use?");
        assert_eq!(
            p.options,
            ["Postgres", "SQLite", "Type something.", "Chat about this"]
        );
    }

    #[test]
    fn claude_trust() {
        let p = pack("claude")
            .analyze(&screen("claude_trust.txt"))
            .prompt
            .expect("prompt");
        assert_eq!(p.kind, "trust");
        assert_eq!(p.options, ["Yes, I trust this folder", "No, exit"]);
    }

    #[test]
    fn opencode_start_screen_is_idle_and_ready() {
        let a = pack("opencode").analyze(&screen("opencode_start.txt"));
        assert!(a.idle && a.ready && !a.busy && a.prompt.is_none(), "{a:?}");
    }

    #[test]
    fn other_clis() {
        let p = pack("codex")
            .analyze(&screen("codex_exec_approval.txt"))
            .prompt
            .expect("codex");
        assert_eq!(p.kind, "permission");
        assert_eq!(p.subject, "touch /home/dev/outside_codex.txt");
        assert_eq!(p.options.len(), 3);
        assert!(p.options[0].starts_with("Yes, proceed"), "{:?}", p.options);
        let p = pack("gemini")
            .analyze(&screen("gemini_shell_perm.txt"))
            .prompt
            .expect("gemini");
        assert_eq!(p.text, "Allow execution of [Shell]?");
        assert_eq!(
            p.options,
            [
                "Allow once",
                "Allow for this session",
                "No, suggest changes (esc)"
            ]
        );
        assert_eq!(p.subject, "touch /home/dev/proj/created_by_gemini.txt");
        let p = pack("opencode")
            .analyze(&screen("opencode_bash_perm.txt"))
            .prompt
            .expect("opencode");
        assert_eq!(p.answer, AnswerStyle::Arrows);
        assert_eq!(p.subject, "touch /home/dev/proj/created_by_opencode.txt");
    }

    #[test]
    fn generic_prompts_only_on_the_last_line() {
        let g = pack("generic");
        let p = g
            .analyze("$ ./install.sh\nOverwrite config? [y/N] ")
            .prompt
            .expect("y/N");
        assert_eq!(
            (p.kind.as_str(), p.options.clone(), p.answer),
            (
                "confirm",
                vec!["y".to_string(), "n".into()],
                AnswerStyle::Line
            )
        );
        assert_eq!(p.text, "Overwrite config? [y/N]");
        assert!(
            g.analyze("Overwrite config? [y/N]\n$ ").prompt.is_none(),
            "an old prompt above the shell prompt is not waiting"
        );
        assert!(g.analyze("Proceed (y/n) ").prompt.is_some());
        assert!(g.analyze("Really delete? (yes/no) ").prompt.is_some());
        assert!(g.analyze("Press Enter to continue...").prompt.is_some());
        assert!(g.analyze("Confirm?").prompt.is_some());
        let p = g
            .analyze("1) apple\n2) pear\n3) plum\nSelect an option [1-3]: ")
            .prompt
            .expect("select");
        assert_eq!(p.options, ["apple", "pear", "plum"]);
    }

    #[test]
    fn user_patterns_come_first() {
        let extra: PackConfig =
            toml::from_str("prompts = [{ kind = \"deploy\", pattern = 'Deploy to prod\\?', options = [\"go\", \"stop\"], answer = \"line\" }]\n")
                .expect("toml");
        let base = builtin_packs().remove("generic").expect("generic");
        let p = Pack::compile(&base, Some(&extra)).expect("compiles");
        assert_eq!(
            p.analyze("Deploy to prod?").prompt.expect("prompt").kind,
            "deploy"
        );
        let bad: PackConfig =
            toml::from_str("prompts = [{ kind = \"x\", pattern = '(' }]\n").expect("toml");
        assert!(
            Pack::compile(&base, Some(&bad))
                .expect_err("bad regex")
                .contains("invalid regex")
        );
    }

    #[test]
    fn a_dialog_drawn_without_its_options_does_not_take_a_list_above_it() {
        // The question is drawn, its options not yet (a loaded machine); Gemini's start-up tips
        // are a numbered list above it.
        let s = "Tips for getting started:\n1. Create GEMINI.md files to customize your interactions\n2. /help for more information\n\n╭──────────────╮\n│ ?  Shell touch x │\n│ Allow execution of [Shell]? │\n╰──────────────╯\n";
        let a = pack("gemini").analyze(s);
        let p = a.prompt.expect("the question is seen");
        assert_eq!(p.text, "Allow execution of [Shell]?");
        assert!(p.options.is_empty(), "{:?}", p.options);
    }

    #[test]
    fn busy_idle_errors() {
        let c = pack("claude");
        let a = c.analyze("✻ Crunching…\n  esc to interrupt · ← for agents");
        assert!(a.busy && !a.idle);
        let a = c.analyze("❯ \n  ? for shortcuts · ← for agents");
        assert!(a.idle && !a.busy);
        let a = c.analyze("  ⎿  API Error: 429 rate_limit_error\n❯ \n? for shortcuts");
        assert_eq!(a.error.map(|e| e.0), Some("rate_limit".to_string()));
        // Interrupted while the line is the last thing above the composer; not once the
        // next message was typed under it.
        assert!(c.analyze(&screen("claude_interrupted.txt")).interrupted);
        assert!(
            !c.analyze(&screen("claude_interrupted_then_working.txt"))
                .interrupted
        );
        // Auto mode's footer is idle too, and says that nothing is asked.
        let a = c.analyze("❯ \n  ⏵⏵ auto mode on (shift+tab to cycle)");
        assert!(a.idle && a.unasked.as_deref() == Some("auto mode on"));
        assert!(
            c.analyze("❯ \n  ⏸ manual mode on · ? for shortcuts")
                .unasked
                .is_none()
        );
        // A mode the pack does not know is named, and its footer still means ready.
        for known in [
            "⏵⏵ auto mode on (shift+tab to cycle)",
            "⏸ plan mode on (shift+tab to cycle)",
            "⏵⏵ accept edits on (shift+tab to cycle)",
            "⏸ manual mode on · ? for shortcuts",
        ] {
            assert_eq!(
                c.analyze(&format!("❯ \n  {known}")).new_mode,
                None,
                "{known}"
            );
        }
        let a = c.analyze("❯ \n  ⏵⏵ autopilot mode on (shift+tab to cycle)");
        assert_eq!(a.new_mode.as_deref(), Some("autopilot mode"));
        assert!(a.idle, "an unknown mode's footer is ready too");
        let long = format!("❯ \n  ⏵⏵ {} on (shift+tab to cycle)", "x".repeat(300));
        assert_eq!(
            c.analyze(&long).new_mode.map(|m| m.chars().count()),
            Some(MAX_MODE_CHARS),
            "a drawn footer cannot make a long name"
        );
    }

    #[test]
    fn gemini_enter_to_proceed_is_a_prompt_answered_by_enter() {
        // Gemini CLI 0.61.0 (the pinned one) draws no such dialog yet: the fixture is drawn
        // as its dialogs are (a rounded box, a bold title, the message, the footer
        // `DialogFooter` writes: "ACTION · Esc to cancel").
        let a = pack("gemini").analyze(&screen("gemini_enter_to_proceed.txt"));
        let p = a.prompt.expect("a prompt");
        assert_eq!(p.kind, "continue");
        assert_eq!(p.text, "Enter to proceed");
        assert_eq!(p.options, ["proceed"]);
        assert_eq!(p.answer, AnswerStyle::Enter);
        assert_eq!(
            p.context,
            "Confirmation Required\nThis will modify 3 files in /home/dev/proj: settings.json, .env, GEMINI.md"
        );
        let g = pack("gemini");
        for shown in [
            "│ Press Enter to proceed. │",
            "  Enter to proceed",
            "│ press enter to proceed (Esc to cancel)   │",
        ] {
            let p = g.analyze(shown).prompt.unwrap_or_else(|| panic!("{shown}"));
            assert_eq!(
                (p.kind.as_str(), p.answer),
                ("continue", AnswerStyle::Enter)
            );
        }
        for prose in [
            "✦ Press Enter to proceed with the installation when you are ready.",
            "✦ You can press Enter to proceed.",
        ] {
            assert!(g.analyze(prose).prompt.is_none(), "{prose}");
        }
        // The permission dialogs are still read as before.
        let p = g
            .analyze(&screen("gemini_shell_perm.txt"))
            .prompt
            .expect("permission");
        assert_eq!(p.kind, "permission");
    }

    #[test]
    fn the_real_screens_give_the_lines_that_explain_their_dialog_or_none() {
        let cases = [
            (
                "claude",
                "claude_bash_perm.txt",
                "Create an empty marker file",
            ),
            (
                "claude",
                "claude_no_feedback.txt",
                "Bash command\nCreate an empty marker file",
            ),
            ("claude", "claude_askq.txt", "☐ Database"),
            ("claude", "claude_trust.txt", "/home/dev/proj"),
            (
                "claude",
                "claude_apikey.txt",
                "ANTHROPIC_API_KEY: sk-ant-...t-api03-mockmockmock",
            ),
            // A diff box right above the question is not an explanation.
            ("claude", "claude_write_perm.txt", ""),
            // Codex draws its dialog straight under the conversation: nothing above is its.
            ("codex", "codex_exec_approval.txt", ""),
            ("codex", "codex_patch_approval.txt", ""),
            // A dialog alone on the screen: all of it above the options.
            (
                "codex",
                "codex_trust.txt",
                "Folder access\n/home/dev/gitproj\nTrust this folder?",
            ),
            ("gemini", "gemini_shell_perm.txt", ""),
            ("gemini", "gemini_write_perm.txt", ""),
            ("opencode", "opencode_bash_perm.txt", ""),
            ("opencode", "opencode_write_perm.txt", ""),
        ];
        for (cli, file, want) in cases {
            let p = pack(cli)
                .analyze(&screen(file))
                .prompt
                .unwrap_or_else(|| panic!("{file}: a prompt"));
            if want.is_empty() {
                assert_eq!(p.context, "", "{file}");
            } else {
                assert!(p.context.starts_with(want), "{file}: {:?}", p.context);
            }
            // Never the banner, the user's words or the model's reply.
            for never in [
                "Tips for getting started",
                "Please ",
                "Hello from the mock model",
                "bullet",
                "I will",
            ] {
                assert!(!p.context.contains(never), "{file}: {:?}", p.context);
            }
            assert!(p.context.lines().count() <= CONTEXT_LINES, "{file}");
            assert!(p.context.chars().count() <= CONTEXT_CHARS, "{file}");
        }
    }

    #[test]
    fn context_stops_at_a_blank_line_or_a_border_and_is_never_the_conversation() {
        let c = |above: &str, subject: &str| context_above(above, subject, false);
        assert_eq!(
            c(
                "reply\n\n╭────╮\n│ Title │\n│ Modifies 3 files │\n│      │\n",
                ""
            ),
            "Title\nModifies 3 files"
        );
        assert_eq!(c("x\n\nWarning: big\n", ""), "Warning: big");
        // A table printed above a line-oriented question.
        assert_eq!(
            c("$ printf x\n\n| file | size |\n| a.txt | 1 |\n", "rm a.txt"),
            "| file | size |\n| a.txt | 1 |"
        );
        // Two blank lines: what is above is something else.
        assert_eq!(c("x\n\nWarning: big\n\n\n", ""), "");
        // The subject is shown as such, not twice.
        assert_eq!(
            c(
                "\n Bash command\n   rm -r build\n   Clean the build\n",
                "rm -r build"
            ),
            "Bash command\nClean the build"
        );
        // Lines that run into the conversation are the conversation's.
        assert_eq!(c("\n› do it\n• Running x\n  more\n", ""), "");
        assert_eq!(c("\n✦ I will run it.\nIt changes things.\n", ""), "");
        // Past five lines it is not a dialog's few words; nor at the top of what was checked.
        let six = "\na\nb\nc\nd\ne\nf\n";
        assert_eq!(c(six, ""), "");
        assert_eq!(c("a\nb\n", ""), "");
        assert_eq!(context_above("a\nb\n", "", true), "a\nb");
        // Long lines are cut.
        let long = format!("\n{}\n", "w".repeat(900));
        let t = c(&long, "");
        assert_eq!(t.chars().count(), CONTEXT_CHARS);
        assert!(t.ends_with('…'));
        assert!(is_border("╰──────╯") && is_border(" ╌╌╌╌ ") && !is_border("── x ──"));
    }

    #[test]
    fn a_subject_that_goes_on_past_its_line_is_partial() {
        let q = "Proceed? [y/n]";
        let t = format!("Command: rm -rf a \\\n  && curl x | sh\n{q}");
        let question = t.find(q).unwrap_or(0);
        let end = t.find(" \\").unwrap_or(0) + 2;
        assert!(goes_on(&t, end, question), "a continuation line follows");
        let t = format!("Command: git status\n{q}");
        let question = t.find(q).unwrap_or(0);
        assert!(!goes_on(&t, "Command: git status".len(), question));
        let t = "Would you like to run?\n$ touch x\n\n› 1. Yes".to_string();
        assert!(!goes_on(&t, t.find("touch x").unwrap_or(0) + 7, 0));
        let t = "Would you like to run?\n$ touch x\n› 1. Yes".to_string();
        assert!(!goes_on(&t, t.find("touch x").unwrap_or(0) + 7, 0));
        let t = "Run: ls [y/n]".to_string();
        assert!(!goes_on(&t, 7, 0));
    }

    /// A plan's usage limit on a program's screen is an error of its own kind, with the line
    /// after it (where a wrapped reset time goes); the typed command that prints it is not.
    #[test]
    fn a_usage_limit_on_a_programs_screen_is_read_with_its_next_line() {
        let p = pack("generic");
        let a = p.analyze(
            "$ printf 'Quota exh%s: resets' austed\nQuota exhausted: the quota will reset at\n2026-11-29 18:00:00 UTC.\n$ ",
        );
        assert_eq!(
            a.error,
            Some((
                "usage_limit".to_string(),
                "Quota exhausted: the quota will reset at 2026-11-29 18:00:00 UTC.".to_string()
            ))
        );
        // Copilot CLI shows GitHub's words: a quota, or the hours-long limit on requests.
        let p = pack("copilot");
        for (screen, head) in [
            (
                " ✗ Sorry, you've hit a rate limit that restricts the number of Copilot model requests you can make within a specific time period. Please try again in 2 hours. Please review our Terms of\n   Service (https://docs.github.com/site-policy/github-terms/github-terms-of-service).\n",
                "✗ Sorry, you've hit a rate limit that restricts",
            ),
            (
                " ✘ Model call failed: {\"message\":\"You have no quota\",\"code\":\"quota_exceeded\"}\n",
                "✘ Model call failed",
            ),
        ] {
            let a = p.analyze(screen);
            let (kind, text) = a.error.unwrap_or_default();
            assert_eq!(kind, "usage_limit", "{screen}");
            assert!(text.starts_with(head), "{text}");
        }
    }
}
