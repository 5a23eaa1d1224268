//! `clibotctl audit`: reads the daemon's audit log (`audit.jsonl` and its rotated files
//! `audit.jsonl.1`, `audit.jsonl.2`, …, oldest first) from the state directory and filters it.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use serde_json::Value;

/// What to keep.
pub struct Filter {
    pub session: Option<String>,
    /// A chat user's id, or PLATFORM:USER, or "local".
    pub user: Option<String>,
    /// Records at or after this time (Unix ms).
    pub since_ms: Option<i64>,
    /// Only the last N.
    pub last: Option<usize>,
}

/// `1700000000000` (Unix ms) or a duration back from now: `90s`, `15m`, `2h`, `3d`, `500ms`.
pub fn parse_since(s: &str, now_ms: i64) -> Result<i64, String> {
    let s = s.trim();
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()) {
        return s
            .parse()
            .map_err(|_| format!("{s:?} is too large a time in ms"));
    }
    let back = clibot_proto::duration::parse_duration(s)
        .map_err(|e| format!("{e}; or give a time in Unix ms"))?;
    i64::try_from(back.as_millis())
        .map(|d| now_ms.saturating_sub(d))
        .map_err(|_| format!("{s:?} is too long"))
}

/// The log files, oldest first.
pub fn files(state_dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(state_dir)
        .with_context(|| format!("cannot read the state directory {}", state_dir.display()))?;
    let mut rotated: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let n: u32 = name.to_str()?.strip_prefix("audit.jsonl.")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    rotated.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut out: Vec<PathBuf> = rotated.into_iter().map(|(_, p)| p).collect();
    let current = state_dir.join("audit.jsonl");
    if current.exists() {
        out.push(current);
    }
    Ok(out)
}

fn field<'a>(r: &'a Value, k: &str) -> &'a str {
    r.get(k).and_then(Value::as_str).unwrap_or("")
}

fn keep(r: &Value, f: &Filter) -> bool {
    if let Some(s) = &f.session
        && field(r, "session") != s
    {
        return false;
    }
    if let Some(u) = &f.user {
        let actor = field(r, "actor");
        let qualified = format!("{}:{actor}", field(r, "platform"));
        if actor != u && &qualified != u {
            return false;
        }
    }
    if let Some(since) = f.since_ms
        && r.get("time_ms").and_then(Value::as_i64).unwrap_or(0) < since
    {
        return false;
    }
    true
}

/// The matching records, oldest first; lines that are not JSON objects are counted, not kept.
pub fn read(state_dir: &Path, f: &Filter) -> anyhow::Result<(Vec<Value>, usize)> {
    let mut out = Vec::new();
    let mut bad = 0;
    for path in files(state_dir)? {
        let text = match std::fs::read(&path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            // Rotated away between listing and reading.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(anyhow!("cannot read {}: {e}", path.display())),
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Value>(line) {
                Ok(v) if v.is_object() => {
                    if keep(&v, f) {
                        out.push(v);
                    }
                }
                _ => bad += 1,
            }
        }
    }
    if let Some(n) = f.last
        && out.len() > n
    {
        out.drain(..out.len() - n);
    }
    Ok((out, bad))
}

/// UTC "YYYY-MM-DD HH:MM:SS".
pub fn datetime(ms: i64) -> String {
    let [y, m, d, hh, mm, ss] = clibot_proto::utc(ms);
    format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02}:{ss:02}")
}

/// One record as a line: time, who (platform:actor, chat), session, action, outcome, detail.
pub fn line(r: &Value) -> String {
    let time = r.get("time_ms").and_then(Value::as_i64).unwrap_or(0);
    let platform = field(r, "platform");
    let actor = field(r, "actor");
    let who = if platform == actor || platform.is_empty() {
        actor.to_string()
    } else {
        format!("{platform}:{actor}")
    };
    let mut s = format!("{} UTC  {who}", datetime(time));
    let chat = field(r, "chat");
    if !chat.is_empty() {
        s.push_str(&format!(" in {chat}"));
    }
    let session = field(r, "session");
    s.push_str(&format!(
        "  {}  {}  {}",
        if session.is_empty() { "-" } else { session },
        field(r, "action"),
        field(r, "outcome")
    ));
    let detail = field(r, "detail");
    if !detail.is_empty() {
        s.push_str(&format!(": {detail}"));
    }
    let repeated = r.get("repeated").and_then(Value::as_u64).unwrap_or(0);
    if repeated > 0 {
        let since = r.get("since_ms").and_then(Value::as_i64).unwrap_or(time);
        s.push_str(&format!("  ×{repeated} since {}", datetime(since)));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since() {
        assert_eq!(parse_since("1700000000000", 0), Ok(1_700_000_000_000));
        assert_eq!(parse_since("15m", 1_000_000), Ok(100_000));
        assert_eq!(parse_since("2h", 10_000_000), Ok(2_800_000));
        assert_eq!(parse_since("500ms", 1000), Ok(500));
        assert!(parse_since("5 weeks", 0).is_err());
        assert!(parse_since("", 0).is_err());
        assert!(parse_since("m", 0).is_err());
    }

    #[test]
    fn dates() {
        assert_eq!(datetime(0), "1970-01-01 00:00:00");
        assert_eq!(datetime(1_700_000_000_000), "2023-11-14 22:13:20");
        assert_eq!(datetime(951_782_400_000), "2000-02-29 00:00:00");
    }

    #[test]
    fn rotated_files_oldest_first_and_filters() {
        let dir = std::env::temp_dir().join(format!("clibot-audit-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let rec = |t: i64, s: &str, a: &str| {
            format!(
                "{{\"time_ms\":{t},\"actor\":\"{a}\",\"platform\":\"telegram\",\"session\":\"{s}\",\"action\":\"send\",\"outcome\":\"refused\"}}\n"
            )
        };
        std::fs::write(dir.join("audit.jsonl.2"), rec(1, "x", "7")).expect("write");
        std::fs::write(dir.join("audit.jsonl.10"), rec(0, "x", "7")).expect("write");
        std::fs::write(dir.join("audit.jsonl.1"), rec(2, "y", "8") + "not json\n").expect("write");
        std::fs::write(dir.join("audit.jsonl"), rec(3, "x", "8")).expect("write");
        let all = Filter {
            session: None,
            user: None,
            since_ms: None,
            last: None,
        };
        let (v, bad) = read(&dir, &all).expect("read");
        let times: Vec<i64> = v.iter().filter_map(|r| r["time_ms"].as_i64()).collect();
        assert_eq!(times, [0, 1, 2, 3]);
        assert_eq!(bad, 1);
        let f = Filter {
            session: Some("x".into()),
            user: Some("telegram:8".into()),
            since_ms: None,
            last: None,
        };
        let (v, _) = read(&dir, &f).expect("read");
        assert_eq!(v.len(), 1);
        assert_eq!(v[0]["time_ms"], 3);
        let f = Filter {
            session: None,
            user: None,
            since_ms: Some(1),
            last: Some(2),
        };
        let (v, _) = read(&dir, &f).expect("read");
        let times: Vec<i64> = v.iter().filter_map(|r| r["time_ms"].as_i64()).collect();
        assert_eq!(times, [2, 3]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
