//! `job add NAME key=value … prompt=TEXT`: a job written in a chat, one line on a phone or one
//! field per line.
//!
//! Why `key=value` and not free words: a job runs while nobody watches, so what was meant must
//! be what is read — `every=30m` cannot be mistaken for part of the prompt. `prompt=` comes
//! last and takes the rest of the message, newlines included, so a prompt needs no quoting.
//! Values with spaces (a cron line, a gate) are quoted: `cron="0 9 * * 1-5"`.

/// The fields a chat may set, as the daemon's job spec names them (`idle` is `when_idle`).
pub const KEYS: [&str; 16] = [
    "session",
    "cli",
    "dir",
    "cron",
    "tz",
    "every",
    "at",
    "after",
    "when_idle",
    "gate",
    "overlap",
    "missed",
    "max_runs_per_day",
    "quiet",
    "pause_after_failures",
    "prompt",
];

/// The fields of `text` (what follows `job add NAME`), in order; `prompt` last.
pub fn fields(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let key_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let key = rest[..key_end].to_ascii_lowercase();
        let key = if key == "idle" {
            "when_idle".to_string()
        } else {
            key
        };
        if !KEYS.contains(&key.as_str()) {
            let word: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
            return Err(format!(
                "{word:?} is no job field: write key=value with a key among {}, prompt=TEXT last",
                KEYS.join(", ")
            ));
        }
        let after = rest[key_end..].trim_start_matches([' ', '\t']);
        let Some(value) = after.strip_prefix('=') else {
            if key == "quiet" {
                out.push((key, "true".into()));
                rest = after;
                continue;
            }
            return Err(format!("{key}: write {key}=VALUE"));
        };
        let value = value.trim_start_matches([' ', '\t']);
        if key == "prompt" {
            let prompt = value.trim();
            if prompt.is_empty() {
                return Err("prompt: write what is typed after prompt=".into());
            }
            out.push((key, prompt.to_string()));
            return Ok(out);
        }
        let (v, tail) = one_value(value).map_err(|e| format!("{key}: {e}"))?;
        // `every= prompt=…`: the next field is no value.
        let quoted = value.starts_with(['"', '\'']);
        if !quoted && v.split_once('=').is_some_and(|(k, _)| KEYS.contains(&k)) {
            return Err(format!("{key}: a value is missing after ="));
        }
        if out.iter().any(|(k, _)| *k == key) {
            return Err(format!("{key}: given twice"));
        }
        out.push((key, v));
        rest = tail;
    }
    Err("prompt: a job needs prompt=TEXT, last: what is typed into the session".into())
}

/// One value: quoted ("…" or '…') or up to the next whitespace; and what follows it.
fn one_value(s: &str) -> Result<(String, &str), String> {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q) {
            let end = inner
                .find(q)
                .ok_or_else(|| format!("a value opened with {q} is not closed"))?;
            return Ok((inner[..end].to_string(), &inner[end + 1..]));
        }
    }
    let end = s.find(char::is_whitespace).unwrap_or(s.len());
    if end == 0 {
        return Err("a value is missing after =".into());
    }
    Ok((s[..end].to_string(), &s[end..]))
}

/// The words of a gate, split at whitespace; a quoted part ('…' or "…") is one word.
pub fn words(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            (None, c) => {
                cur.push(c);
                started = true;
            }
        }
    }
    if quote.is_some() {
        return Err("gate: a quote is not closed".into());
    }
    if started {
        out.push(cur);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn one_line_or_one_field_per_line_the_prompt_last_and_whole() {
        assert_eq!(
            fields("session=api every=30m prompt=Run the tests; then say: done"),
            Ok(kv(&[
                ("session", "api"),
                ("every", "30m"),
                ("prompt", "Run the tests; then say: done")
            ]))
        );
        assert_eq!(
            fields(
                "\nsession = api\ncron = \"0 9 * * 1-5\"\ntz=Europe/Berlin\nquiet\nprompt = line one\nline two=2\n"
            ),
            Ok(kv(&[
                ("session", "api"),
                ("cron", "0 9 * * 1-5"),
                ("tz", "Europe/Berlin"),
                ("quiet", "true"),
                ("prompt", "line one\nline two=2")
            ]))
        );
        assert_eq!(
            fields("idle=api gate='sh -c \"test -f go\"' prompt=x"),
            Ok(kv(&[
                ("when_idle", "api"),
                ("gate", "sh -c \"test -f go\""),
                ("prompt", "x")
            ]))
        );
        assert_eq!(
            words("sh -c \"test -f go\""),
            Ok(vec!["sh".into(), "-c".into(), "test -f go".into()])
        );
        assert_eq!(
            words("a '' b"),
            Ok(vec!["a".into(), String::new(), "b".into()])
        );
    }

    #[test]
    fn mistakes_name_the_field() {
        for (text, says) in [
            ("session=api every=30m", "prompt"),
            ("sesion=api prompt=x", "no job field"),
            ("session api prompt=x", "session=VALUE"),
            ("cron=\"0 9 * * prompt=x", "not closed"),
            ("every= prompt=x", "every"),
            ("every=1h every=2h prompt=x", "twice"),
            ("session=a prompt=   ", "prompt"),
            ("webhook=x prompt=y", "no job field"),
        ] {
            let e = fields(text).expect_err(text);
            assert!(e.contains(says), "{text}: {e}");
        }
        assert!(words("sh -c 'x").is_err());
    }
}
