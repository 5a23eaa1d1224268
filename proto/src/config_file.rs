//! The config file that clibotd and clibot-gateway share: where it is by default, and the
//! `${NAME}` substitution both apply to it, so the two read it by the same rules.

use std::path::PathBuf;

/// `$XDG_CONFIG_HOME/clibot/config.toml` (by default `~/.config/clibot/config.toml`); `None`
/// when there is no home directory.
pub fn default_config_path() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "clibot").map(|d| d.config_dir().join("config.toml"))
}

/// A `${NAME}` whose variable is not set: an error, never an empty string (an empty token
/// would only fail later, far from its cause).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "`{key}` refers to ${{{var}}}, but the environment variable {var} is not set; export it or remove the reference"
)]
pub struct MissingEnv {
    /// The key holding the reference, dotted (`gateway.telegram.token`).
    pub key: String,
    pub var: String,
}

/// Replaces `${NAME}` in every string of `table` with the environment variable `NAME`;
/// `$${` stays a literal `${`.
pub fn substitute_env(table: &mut toml::Table) -> Result<(), MissingEnv> {
    substitute_table(table, &mut String::new())
}

fn substitute_table(table: &mut toml::Table, key_path: &mut String) -> Result<(), MissingEnv> {
    for (k, v) in table.iter_mut() {
        let len = key_path.len();
        if !key_path.is_empty() {
            key_path.push('.');
        }
        key_path.push_str(k);
        substitute_value(v, key_path)?;
        key_path.truncate(len);
    }
    Ok(())
}

fn substitute_value(value: &mut toml::Value, key_path: &mut String) -> Result<(), MissingEnv> {
    match value {
        toml::Value::String(s) => *s = expand_env(s, key_path)?,
        toml::Value::Array(items) => {
            for item in items {
                substitute_value(item, key_path)?;
            }
        }
        toml::Value::Table(t) => substitute_table(t, key_path)?,
        _ => {}
    }
    Ok(())
}

fn expand_env(s: &str, key: &str) -> Result<String, MissingEnv> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{')
            && let Some(end) = tail.find('}')
        {
            let var = &tail[..end];
            match std::env::var(var) {
                Ok(v) => out.push_str(&v),
                Err(_) => {
                    return Err(MissingEnv {
                        key: key.to_string(),
                        var: var.to_string(),
                    });
                }
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_replaced_escapes_kept_and_unset_ones_refused() {
        let mut t: toml::Table = toml::from_str(
            "[a]\nx = [\"${PATH}\", \"$${LIT}\", \"a$b\", \"${\"]\n[b.c]\ny = \"${CLIBOT_SURELY_UNSET_VAR}\"\n",
        )
        .expect("toml");
        let e = substitute_env(&mut t).expect_err("unset");
        assert_eq!(
            e,
            MissingEnv {
                key: "b.c.y".into(),
                var: "CLIBOT_SURELY_UNSET_VAR".into()
            }
        );
        let mut t: toml::Table =
            toml::from_str("x = [\"${PATH}\", \"$${LIT}\", \"a$b\", \"${\"]\n").expect("toml");
        substitute_env(&mut t).expect("substitutes");
        let path = std::env::var("PATH").unwrap_or_default();
        assert_eq!(
            t["x"],
            toml::Value::Array(vec![
                path.into(),
                "${LIT}".into(),
                "a$b".into(),
                "${".into()
            ])
        );
    }
}
