//! The sizes one request may have. Each is far above what a person or a script needs, and far
//! below what would make tmux's command line fail (the kernel's argument limit) or the daemon
//! hold megabytes per call; past one the call is refused as invalid, naming the limit, instead
//! of failing later in tmux with a message that blames the installation.

use crate::error::CoreError;

/// Keys one `SendKeys` call may press.
pub const MAX_KEYS: usize = 1_000;
/// Arguments one spawn may give its CLI, and their total bytes.
pub const MAX_ARGS: usize = 256;
pub const MAX_ARGS_BYTES: usize = 64 * 1024;
/// Environment variables one spawn may set, and their total bytes (names and values).
pub const MAX_ENV: usize = 256;
pub const MAX_ENV_BYTES: usize = 64 * 1024;

fn too_many(what: &str, n: usize, max: usize) -> CoreError {
    CoreError::TooMuchInOneCall(format!(
        "{n} {what} given; at most {max} are taken in one call"
    ))
}

fn too_long(what: &str, n: usize, max: usize) -> CoreError {
    CoreError::TooMuchInOneCall(format!(
        "the {what} add up to {n} bytes; at most {max} are taken in one call"
    ))
}

/// Refuses more keys than one call may press.
pub fn check_keys(keys: &[String]) -> Result<(), CoreError> {
    if keys.len() > MAX_KEYS {
        return Err(too_many("keys", keys.len(), MAX_KEYS));
    }
    Ok(())
}

/// Refuses a spawn whose arguments or environment are too large.
pub fn check_spawn<'a>(
    args: &[String],
    env: impl ExactSizeIterator<Item = (&'a String, &'a String)>,
) -> Result<(), CoreError> {
    if args.len() > MAX_ARGS {
        return Err(too_many("arguments", args.len(), MAX_ARGS));
    }
    let bytes: usize = args.iter().map(String::len).sum();
    if bytes > MAX_ARGS_BYTES {
        return Err(too_long("arguments", bytes, MAX_ARGS_BYTES));
    }
    let n = env.len();
    if n > MAX_ENV {
        return Err(too_many("environment variables", n, MAX_ENV));
    }
    let bytes: usize = env.map(|(k, v)| k.len() + v.len() + 1).sum();
    if bytes > MAX_ENV_BYTES {
        return Err(too_long("environment variables", bytes, MAX_ENV_BYTES));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_name_themselves() {
        let keys = vec!["a".to_string(); MAX_KEYS + 1];
        let e = check_keys(&keys).expect_err("too many").to_string();
        assert!(e.contains("1001 keys") && e.contains("at most 1000"), "{e}");
        let args = vec!["x".repeat(1024); 100];
        let env = std::collections::BTreeMap::<String, String>::new();
        let e = check_spawn(&args, env.iter())
            .expect_err("too long")
            .to_string();
        assert!(e.contains("at most 65536"), "{e}");
        let env: std::collections::BTreeMap<String, String> =
            (0..300).map(|i| (format!("V{i}"), "1".into())).collect();
        let e = check_spawn(&[], env.iter())
            .expect_err("too many")
            .to_string();
        assert!(e.contains("300 environment variables"), "{e}");
        assert!(check_spawn(&["--flag".into()], std::iter::empty()).is_ok());
    }
}
