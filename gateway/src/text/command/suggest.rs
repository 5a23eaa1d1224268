//! "Did you mean": the command a mistyped word most likely meant.

use super::CommandName;

/// A command close to `word`: one it starts, one that starts with it, or one within edit
/// distance 2.
pub(super) fn suggest(word: &str) -> Option<CommandName> {
    let w = word.to_ascii_lowercase();
    if w.is_empty() {
        return None;
    }
    CommandName::ALL
        .into_iter()
        .find(|c| c.as_str().starts_with(&w) || (w.len() > 3 && w.starts_with(c.as_str())))
        .or_else(|| {
            CommandName::ALL
                .into_iter()
                .map(|c| (edit_distance(&w, c.as_str()), c))
                .filter(|(d, _)| *d <= 2)
                .min_by_key(|(d, _)| *d)
                .map(|(_, c)| c)
        })
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
