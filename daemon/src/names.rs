//! Session and CLI names: the one rule every entry point checks.

/// Longest name accepted.
pub const MAX_NAME_LEN: usize = 64;

/// `[A-Za-z0-9_-]{1,64}`: safe as a tmux session name, a file name and a chat command argument.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Names clibot gives sessions itself: `u-CLI-PID` (a number last), the CLIs started outside clibot that report
/// through its global hooks. Nobody may take one, or a terminal's CLI would take over a session
/// someone named so (and its chats).
pub fn is_reserved(name: &str) -> bool {
    name.strip_prefix("u-")
        .and_then(|rest| rest.rsplit_once('-'))
        .is_some_and(|(cli, pid)| {
            !cli.is_empty() && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
        })
}

/// `[A-Za-z_][A-Za-z0-9_]*`: an environment variable name.
pub fn is_valid_env_key(key: &str) -> bool {
    let mut bytes = key.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_valid_name("api"));
        assert!(is_valid_name("A_b-9"));
        assert!(is_valid_name(&"x".repeat(64)));
        assert!(!is_valid_name(&"x".repeat(65)));
        for bad in ["", "a b", "a.b", "a:b", "$1", "ä", "a/b", "a;b"] {
            assert!(!is_valid_name(bad), "{bad:?} must be refused");
        }
    }

    #[test]
    fn env_keys() {
        assert!(is_valid_env_key("FOO_1"));
        assert!(is_valid_env_key("_x"));
        assert!(!is_valid_env_key("1X"));
        assert!(!is_valid_env_key("A=B"));
        assert!(!is_valid_env_key(""));
    }

    #[test]
    fn only_the_names_of_outside_clis_are_reserved() {
        assert!(is_reserved("u-claude-4242"));
        assert!(is_reserved("u-copilot-1"));
        assert!(!is_reserved("u-ghost"), "a delegation's u-NAME");
        assert!(!is_reserved("u-claude-x"));
        assert!(!is_reserved("user-1"));
    }
}
