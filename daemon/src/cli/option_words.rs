//! What an option of a prompt says by its words: yes this once, a wider yes, no — in the
//! languages the pattern packs read. An option is never chosen by its place in the list: in
//! `1) deploy to staging 2) deploy to production 3) wipe the database` neither the first nor the
//! last option means yes or no, so "no" (typed by a person, chosen by the decider, or a timeout's
//! deny) finds none there, and the prompt goes on waiting for a choice by number.

pub(crate) fn label(o: &str) -> String {
    o.trim()
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == ')' || c == '❯')
        .trim()
        .to_lowercase()
}

/// Whether an option's label answers more than this one prompt ("Yes, and don't ask again",
/// "Allow always", "Yes, for this session").
pub fn widens(option: &str) -> bool {
    let l = label(option);
    WIDER.iter().any(|w| l.contains(w))
}

const WIDER: &[&str] = &[
    "always",
    "don't ask",
    "do not ask",
    "session",
    "all ",
    "every",
    "remember",
];

/// The option that means "yes, this once": the first whose label says yes/allow and not
/// "always"/"for this session"; for a prompt whose labels say neither, the first option.
pub fn allow_option(options: &[String]) -> Option<usize> {
    let labels: Vec<String> = options.iter().map(|o| label(o)).collect();
    if let Some(i) = labels
        .iter()
        .position(|l| says_yes(l) && !WIDER.iter().any(|w| l.contains(w)))
    {
        return Some(i);
    }
    if labels.iter().any(|l| says_yes(l) || says_no(l)) {
        // There are yes/no labels, but no "once": a wider yes is not what a rule allows.
        return None;
    }
    (!options.is_empty()).then_some(0)
}

/// Whether an option's label says yes ("Yes", "y", "Allow", "Proceed", "OK", ...).
fn says_yes(l: &str) -> bool {
    const YES: &[&str] = &[
        "yes", "y", "allow", "approve", "proceed", "ok", "accept", "continue", "ja", "oui", "sí",
        "si", "sim", "да",
    ];
    const YES_UNSPACED: &[&str] = &["是", "确认", "允许", "はい", "예"];
    YES.iter()
        .any(|y| l == *y || l.starts_with(&format!("{y} ")) || l.starts_with(&format!("{y},")))
        || YES_UNSPACED.iter().any(|y| l.starts_with(y))
}

/// Whether an option's label says no ("No", "n", "Reject", "Deny", "Cancel", ...).
pub fn is_no(option: &str) -> bool {
    says_no(&label(option))
}

/// Whether an option's label says no, in the languages the packs read: its first word, or
/// for languages written without spaces its first characters.
fn says_no(l: &str) -> bool {
    const NO: &[&str] = &[
        "no",
        "n",
        "reject",
        "deny",
        "cancel",
        "decline",
        "abort",
        "nein",
        "non",
        "não",
        "nao",
        "нет",
        "отмена",
    ];
    const NO_UNSPACED: &[&str] = &[
        "否",
        "不",
        "拒绝",
        "取消",
        "いいえ",
        "拒否",
        "キャンセル",
        "아니요",
    ];
    NO.iter()
        .any(|y| l == *y || l.starts_with(&format!("{y} ")) || l.starts_with(&format!("{y},")))
        || NO_UNSPACED.iter().any(|y| l.starts_with(y))
}

/// The option that means "no": the first whose label says so by its words. Never one chosen by
/// its place: in `1) deploy to staging 2) deploy to production 3) wipe the database` the last
/// option is no refusal, so such a prompt has none (a timeout leaves it waiting, a deny rule
/// asks a person).
pub fn deny_option(options: &[String]) -> Option<usize> {
    options.iter().map(|o| label(o)).position(|l| says_no(&l))
}

/// The option a plain "yes" means: the first whose label says yes this once; failing that, the
/// first plain yes (a wider one only when it is all there is). `None` when no label says yes.
pub fn yes_option(options: &[String]) -> Option<usize> {
    let labels: Vec<String> = options.iter().map(|o| label(o)).collect();
    labels
        .iter()
        .position(|l| says_yes(l) && !WIDER.iter().any(|w| l.contains(w)))
        .or_else(|| labels.iter().position(|l| says_yes(l)))
}
