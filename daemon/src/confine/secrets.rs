//! Secrets the daemon guards: the one list of secret paths (shared by the allowed-roots check,
//! the jail and the guard), and the random tokens it hands to sessions.
//!
//! Why one list: a path that is secret for one check and not for another is a hole; the jail
//! hides exactly what the roots check refuses.

use std::path::{Path, PathBuf};

/// Below the home directory: where keys, cloud credentials and passwords live.
const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".config/gcloud",
    ".kube",
    ".netrc",
    ".pgpass",
    ".docker/config.json",
    ".git-credentials",
];

/// Every secret path for this user: the fixed ones below `home`, plus clibot's own config
/// (the XDG directory, and the config file in use wherever it is) and state directory (which
/// hold tokens, the access list and the audit log).
pub fn secret_paths(home: &Path, config: &[PathBuf], state_dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = HOME_SECRETS.iter().map(|s| home.join(s)).collect();
    out.extend(config.iter().cloned());
    out.push(state_dir.to_path_buf());
    out
}

/// clibot's config: its XDG directory, and the config file in use when it lies elsewhere.
pub fn config_paths(config_file: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = directories::BaseDirs::new()
        .map(|b| b.config_dir().join("clibot"))
        .into_iter()
        .collect();
    if let Some(f) = config_file
        && !out.iter().any(|d| f.starts_with(d))
    {
        out.push(f.to_path_buf());
    }
    out
}

/// The secret path `dir` lies in (or is), if any; `lifted` are paths configured exactly (an
/// `allowed_roots` entry naming a secret path lifts that one path, nothing else). Paths are
/// compared both as given and canonicalised, so a symlink does not hide a secret.
pub fn secret_containing(dir: &Path, secrets: &[PathBuf], lifted: &[PathBuf]) -> Option<PathBuf> {
    secrets
        .iter()
        .filter(|s| !lifted.iter().any(|l| l == *s))
        .find(|s| {
            dir.starts_with(s)
                || s.canonicalize()
                    .is_ok_and(|c| dir.starts_with(&c) && !lifted.contains(&c))
        })
        .cloned()
}

/// The secret paths of a daemon reading `config_file` and keeping its state in `state_dir`.
pub fn for_daemon(config_file: Option<&Path>, state_dir: &Path) -> Vec<PathBuf> {
    let home = crate::paths::expand_home(Path::new("~"));
    let config = config_paths(config_file);
    secret_paths(&home, &config, state_dir)
}

/// The secret paths the `allowed_roots` name exactly (each both as written and
/// canonicalised): these, and only these, sessions may start in.
pub fn lifted(allowed_roots: &[PathBuf]) -> Vec<PathBuf> {
    allowed_roots
        .iter()
        .map(|r| crate::paths::expand_home(r))
        .flat_map(|r| {
            let c = r.canonicalize().ok();
            std::iter::once(r).chain(c)
        })
        .collect()
}

/// What stands in for a secret of the daemon's own in text it sends out.
pub const REDACTED: &str = "[redacted]";

/// `text` with every one of `secrets` replaced (secrets shorter than 16 characters are not
/// looked for: they could be ordinary words).
pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 16) {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), REDACTED);
        }
    }
    out
}

/// Whether an event carries text a secret could stand in (what [`scrub_event`] looks at).
pub fn carries_text(kind: &crate::store::events::EventKind) -> bool {
    use crate::store::events::EventKind as K;
    matches!(
        kind,
        K::TurnCompleted { .. }
            | K::InputSent { .. }
            | K::InputQueued { .. }
            | K::Exited { .. }
            | K::Error { .. }
            | K::Notice { .. }
            | K::Waiting { .. }
            | K::Stalled { .. }
    )
}

/// An event with the daemon's own secrets scrubbed from every text it carries.
pub fn scrub_event(
    kind: crate::store::events::EventKind,
    secrets: &[String],
) -> crate::store::events::EventKind {
    use crate::store::events::EventKind as K;
    let s = |t: String| scrub(&t, secrets);
    match kind {
        K::TurnCompleted {
            text,
            source,
            blob_id,
            full_bytes,
        } => K::TurnCompleted {
            text: s(text),
            source,
            blob_id,
            full_bytes,
        },
        K::InputSent {
            text,
            submitted,
            blob_id,
            full_bytes,
        } => K::InputSent {
            text: s(text),
            submitted,
            blob_id,
            full_bytes,
        },
        K::InputQueued { text, position } => K::InputQueued {
            text: s(text),
            position,
        },
        K::Exited {
            status,
            reason,
            output,
        } => K::Exited {
            status,
            reason: s(reason),
            output: s(output),
        },
        K::Error { message, kind } => K::Error {
            message: s(message),
            kind,
        },
        K::Notice { text, kind } => K::Notice {
            text: s(text),
            kind,
        },
        K::Stalled {
            silent_ms,
            working_ms,
            screen,
        } => K::Stalled {
            silent_ms,
            working_ms,
            screen: s(screen),
        },
        K::Waiting { mut prompt } => {
            prompt.text = s(prompt.text);
            prompt.subject = s(prompt.subject);
            prompt.warning = s(prompt.warning);
            prompt.options = prompt.options.into_iter().map(s).collect();
            K::Waiting { prompt }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{new_token, token_eq};

    #[test]
    fn tokens_are_128_bits_and_differ() {
        let a = new_token().expect("token");
        let b = new_token().expect("token");
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn own_secrets_are_scrubbed_from_event_texts() {
        let tok = new_token().expect("token");
        let secrets = vec![tok.clone(), "short".to_string()];
        let k = crate::store::events::EventKind::TurnCompleted {
            text: format!("CLIBOT_HOOK_TOKEN={tok}\nshort stays"),
            source: crate::model::TurnEnd::Screen,
            blob_id: String::new(),
            full_bytes: 0,
        };
        match scrub_event(k, &secrets) {
            crate::store::events::EventKind::TurnCompleted { text, .. } => {
                assert_eq!(text, "CLIBOT_HOOK_TOKEN=[redacted]\nshort stays");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn token_comparison() {
        assert!(token_eq("abcd", "abcd"));
        assert!(!token_eq("abcd", "abce"));
        assert!(!token_eq("abcd", "abc"));
        assert!(!token_eq("", ""));
    }

    #[test]
    fn secret_dirs_are_found_unless_lifted_exactly() {
        let home = Path::new("/home/u");
        let s = secret_paths(
            home,
            &[PathBuf::from("/home/u/.config/clibot")],
            Path::new("/st"),
        );
        assert!(secret_containing(Path::new("/home/u/.ssh"), &s, &[]).is_some());
        assert!(secret_containing(Path::new("/home/u/.ssh/keys"), &s, &[]).is_some());
        assert!(secret_containing(Path::new("/home/u/.config/clibot"), &s, &[]).is_some());
        assert!(secret_containing(Path::new("/st/sessions"), &s, &[]).is_some());
        assert!(secret_containing(Path::new("/home/u/src"), &s, &[]).is_none());
        assert!(secret_containing(Path::new("/home/u/.sshx"), &s, &[]).is_none());
        let lifted = [PathBuf::from("/home/u/.ssh")];
        assert!(secret_containing(Path::new("/home/u/.ssh"), &s, &lifted).is_none());
        assert!(secret_containing(Path::new("/home/u/.aws"), &s, &lifted).is_some());
    }
}
