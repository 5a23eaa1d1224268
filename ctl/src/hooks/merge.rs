//! Adding clibot's hook entries to a settings file's text and taking them out again, keeping
//! everything else: the user's own hooks, other settings, key order and layout. Pure functions
//! on strings; errors are phrases that follow the file's name ("is not valid JSON (...)").

use super::clis::{Cli, is_clibot_command};
use super::doc::{self, Json, Style};

/// The text with clibot's hooks for `cli` merged in, or None when they are already there as
/// they would be written.
pub fn install(text: Option<&str>, cli: Cli, command: &str) -> Result<Option<String>, String> {
    let before = match text {
        Some(t) => root(t)?,
        None => Json::Object(Vec::new()),
    };
    let mut after = before.clone();
    let hooks = after
        .member_or("hooks", Json::Object(Vec::new()))
        .filter(|h| matches!(h, Json::Object(_)))
        .ok_or("has a \"hooks\" that is not an object")?;
    // Entries of an event clibot no longer hooks (an older install) go.
    if let Json::Object(events) = hooks {
        let mut emptied = Vec::new();
        for (name, list) in events.iter_mut() {
            if !cli.events().iter().any(|e| e.name == name)
                && let Json::Array(list) = list
                && strip(list)
                && list.is_empty()
            {
                emptied.push(name.clone());
            }
        }
        events.retain(|(name, _)| !emptied.contains(name));
    }
    for event in cli.events() {
        let expected = cli.entry(event, command);
        let list = hooks
            .member_or(event.name, Json::Array(Vec::new()))
            .and_then(|l| match l {
                Json::Array(a) => Some(a),
                _ => None,
            })
            .ok_or_else(|| format!("has a \"hooks\".\"{}\" that is not a list", event.name))?;
        let ours: Vec<&Json> = list.iter().filter(|e| has_clibot_hook(e)).collect();
        if ours.len() == 1 && ours[0] == &expected {
            continue;
        }
        strip(list);
        list.push(expected);
    }
    if cli == Cli::Copilot {
        // Copilot CLI reads a hooks file with its format's version.
        after.member_or("version", Json::num(1));
    }
    if cli == Cli::Gemini {
        let config = after
            .member_or("hooksConfig", Json::Object(Vec::new()))
            .filter(|c| matches!(c, Json::Object(_)))
            .ok_or("has a \"hooksConfig\" that is not an object")?;
        config.member_or("enabled", Json::Scalar(true.into()));
    }
    if after == before {
        return Ok(None);
    }
    Ok(Some(doc::render(&after, &Style::of(text))))
}

/// The text with clibot's hook entries taken out, or None when it holds none. `original` is the
/// file as it was before install when a backup says so (`Some(None)`: there was no file): an
/// event list, `hooks` object or Gemini's `hooksConfig.enabled` that it did not have and that
/// only clibot's entries filled goes too. Without a backup, a list emptied here goes.
pub fn uninstall(
    text: &str,
    cli: Cli,
    original: Option<Option<&str>>,
) -> Result<Option<String>, String> {
    let before = root(text)?;
    let original = match original {
        Some(Some(t)) => Some(doc::parse(t).unwrap_or(Json::Object(Vec::new()))),
        Some(None) => Some(Json::Object(Vec::new())),
        None => None,
    };
    let had = |path: &[&str]| {
        let mut at = original.as_ref();
        for key in path {
            at = at.and_then(|j| j.get(key));
        }
        at.is_some()
    };
    let mut after = before.clone();
    let mut removed_any = false;
    if let Some(Json::Object(events)) = after.get_mut("hooks") {
        let mut emptied = Vec::new();
        for (name, list) in events.iter_mut() {
            if let Json::Array(list) = list
                && strip(list)
            {
                removed_any = true;
                if list.is_empty() && !had(&["hooks", name]) {
                    emptied.push(name.clone());
                }
            }
        }
        events.retain(|(name, _)| !emptied.contains(name));
    }
    if !removed_any {
        return Ok(None);
    }
    if after.get("hooks").is_some_and(Json::is_empty_container) && !had(&["hooks"]) {
        after.remove("hooks");
        if cli == Cli::Copilot && !had(&["version"]) {
            after.remove("version");
        }
    }
    if cli == Cli::Gemini && original.is_some() && !had(&["hooksConfig", "enabled"]) {
        if let Some(config) = after.get_mut("hooksConfig")
            && config.get("enabled") == Some(&Json::Scalar(true.into()))
        {
            config.remove("enabled");
        }
        if after
            .get("hooksConfig")
            .is_some_and(Json::is_empty_container)
            && !had(&["hooksConfig"])
        {
            after.remove("hooksConfig");
        }
    }
    Ok(Some(doc::render(&after, &Style::of(Some(text)))))
}

/// The events that hold one of clibot's hooks, in file order.
pub fn installed_events(text: &str) -> Result<Vec<String>, String> {
    let doc = root(text)?;
    let Some(Json::Object(events)) = doc.get("hooks") else {
        return Ok(Vec::new());
    };
    Ok(events
        .iter()
        .filter(|(_, list)| matches!(list, Json::Array(a) if a.iter().any(has_clibot_hook)))
        .map(|(name, _)| name.clone())
        .collect())
}

/// Gemini CLI runs no hooks when the user turned them off (`hooksConfig.enabled: false`).
pub fn hooks_disabled(text: &str) -> bool {
    root(text).is_ok_and(|d| {
        d.get("hooksConfig").and_then(|c| c.get("enabled")) == Some(&Json::Scalar(false.into()))
    })
}

/// The file's top level, which must be an object.
fn root(text: &str) -> Result<Json, String> {
    match doc::parse(text)? {
        d @ Json::Object(_) => Ok(d),
        _ => Err("is not a JSON object".into()),
    }
}

/// Whether an event's entry holds one of clibot's hooks (nested in its `hooks`, or, in Copilot
/// CLI's flat shape, the entry itself).
fn has_clibot_hook(entry: &Json) -> bool {
    is_clibot_hook(entry)
        || matches!(entry.get("hooks"), Some(Json::Array(hooks)) if hooks.iter().any(is_clibot_hook))
}

fn is_clibot_hook(hook: &Json) -> bool {
    ["command", "bash"].iter().any(|k| {
        hook.get(k)
            .and_then(Json::as_str)
            .is_some_and(is_clibot_command)
    })
}

/// Takes clibot's hooks out of an event's list: from each entry, and the entry itself when
/// nothing else is left in it. Whether anything was taken.
fn strip(list: &mut Vec<Json>) -> bool {
    let mut removed = false;
    list.retain_mut(|entry| {
        if is_clibot_hook(entry) {
            removed = true;
            return false;
        }
        let Some(Json::Array(hooks)) = entry.get_mut("hooks") else {
            return true;
        };
        let n = hooks.len();
        hooks.retain(|h| !is_clibot_hook(h));
        if hooks.len() == n {
            return true;
        }
        removed = true;
        !hooks.is_empty()
    });
    removed
}

#[cfg(test)]
mod tests;
