//! Moving a session to another account profile of its CLI (`restart --profile P`, the
//! **Switch to P** button under a usage limit): the CLI is started again with that profile's
//! environment and goes on with the same conversation where its records can be carried to the
//! other account's home (Claude Code's transcript, Codex's rollout); elsewhere it starts a new
//! conversation and is handed the work as a delegation would hand it.

use tracing::{info, warn};

use crate::cli::{CliSpec, Profile};
use crate::core::Daemon;
use crate::error::CoreError;
use crate::model::SessionRecord;

/// The largest conversation record carried to another account's home.
const MAX_RECORD: u64 = 256 << 20;

/// Profile `name` of `cli`, or an error that lists the ones it has.
pub(crate) fn profile_of<'a>(cli: &'a CliSpec, name: &str) -> Result<&'a Profile, CoreError> {
    cli.profiles.get(name).ok_or_else(|| {
        let known: Vec<&str> = cli.profiles.keys().map(String::as_str).collect();
        CoreError::BadSpawn(format!(
            "profile: {} has no profile {name:?} ({}); [cli.{}.profiles.NAME] env = {{ … }} defines one",
            cli.name,
            if known.is_empty() {
                "it has none".to_string()
            } else {
                format!("it has {}", known.join(", "))
            },
            cli.name
        ))
    })
}

/// A profile's value of a variable as a session gets it (`~/` is the home directory).
pub(crate) fn profile_value(v: &str) -> String {
    crate::paths::expand_home(std::path::Path::new(v))
        .display()
        .to_string()
}

/// `env` with profile `from`'s settings taken out (those it still holds as the profile set
/// them: one the user set differently is theirs) and profile `to`'s put in (what the user set
/// still wins, as at spawn).
fn switched_env(
    env: &std::collections::BTreeMap<String, String>,
    from: Option<&Profile>,
    to: &Profile,
) -> std::collections::BTreeMap<String, String> {
    let mut env = env.clone();
    for (k, v) in from.map(|p| &p.env).into_iter().flatten() {
        if env.get(k) == Some(&profile_value(v)) {
            env.remove(k);
        }
    }
    for (k, v) in &to.env {
        env.entry(k.clone()).or_insert_with(|| profile_value(v));
    }
    env
}

impl Daemon {
    /// The CLI's profiles session `name` could switch to: every one but its own (none for a
    /// member's session, which may not use profiles).
    pub fn other_profiles(&self, name: &str) -> Vec<String> {
        let Ok(rec) = self.get(name) else {
            return Vec::new();
        };
        if self.non_admin(&rec.owner).is_some() {
            return Vec::new();
        }
        let Ok(cli) = self.cli(&rec.cli) else {
            return Vec::new();
        };
        cli.profiles
            .keys()
            .filter(|p| **p != rec.profile)
            .cloned()
            .collect()
    }

    /// Starts session `name` again with account profile `profile` of its CLI: the same
    /// conversation where it can be carried over, else a new one handed the work (with
    /// `fresh`: a new one, handed nothing). Admins' and the machine's sessions only (a profile
    /// names an account's credentials).
    pub async fn switch_profile(
        &self,
        name: &str,
        profile: &str,
        fresh: bool,
    ) -> Result<SessionRecord, CoreError> {
        let rec = self.get(name)?;
        if self.non_admin(&rec.owner).is_some() {
            return Err(CoreError::BadSpawn(
                "profile: only admins and the machine's user run sessions with an account profile"
                    .into(),
            ));
        }
        let cli = self.cli(&rec.cli)?.clone();
        let to = profile_of(&cli, profile)?;
        if rec.profile == profile {
            return Err(CoreError::BadSpawn(format!(
                "profile: {name} already runs with profile {profile}"
            )));
        }
        let env = switched_env(&rec.env, cli.profiles.get(&rec.profile), to);
        let carried = if fresh {
            Err("a new conversation was asked for".to_string())
        } else {
            self.carry_conversation(&rec, &env).await
        };
        if let Err(why) = &carried {
            info!(session = %name, "the conversation is not carried to profile {profile}: {why}");
        }
        self.sessions().update(name, |e| {
            e.rec.env = env;
            e.rec.profile = profile.to_string();
        });
        self.persist();
        let resume = carried.is_ok() && self.resumes_conversations(&rec.cli);
        let started = self.restart(name, resume).await?;
        let from = if rec.profile.is_empty() {
            "its default account".to_string()
        } else {
            format!("profile {}", rec.profile)
        };
        match &carried {
            Ok(()) => self.notice(
                name,
                "profile",
                &format!(
                    "{name} runs with profile {profile} now (from {from}), its conversation resumed"
                ),
            ),
            // Asked for, or a CLI with no conversation (a shell): nothing to hand on.
            Err(_) if fresh || !self.resumes_conversations(&rec.cli) => self.notice(
                name,
                "profile",
                &format!("{name} runs with profile {profile} now (from {from}), started anew"),
            ),
            Err(why) => {
                self.notice(
                    name,
                    "profile",
                    &format!("{name} runs with profile {profile} now (from {from}) in a new conversation ({why}); it is handed the last request"),
                );
                if let Err(e) = self.type_handoff(name, &rec, "usage_limit", "").await {
                    warn!(session = %name, "the handoff could not be typed: {e}");
                }
            }
        }
        Ok(started)
    }

    /// Copies the file that holds `rec`'s conversation from its CLI's home under the current
    /// environment to the same place in the home `env` names; why not, when it cannot.
    async fn carry_conversation(
        &self,
        rec: &SessionRecord,
        env: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), String> {
        let (adapter, _) = self
            .kind_of(&rec.cli)
            .ok_or_else(|| format!("{} is not a known CLI", rec.cli))?;
        if !adapter.resumes_conversations() {
            return Err(format!("{} resumes no conversation", rec.cli));
        }
        let old_cli = self.records_cli(rec);
        let mut new_rec = rec.clone();
        new_rec.env = env.clone();
        let new_cli = self.records_cli(&new_rec);
        let (rec, a) = (rec.clone(), adapter.clone());
        let (old, new) = tokio::task::spawn_blocking(move || {
            (
                a.conversation_record(&rec, old_cli.as_ref()),
                a.conversation_record(&new_rec, new_cli.as_ref()),
            )
        })
        .await
        .map_err(|e| e.to_string())?;
        let unknown = || "clibot does not know where its conversation is kept".to_string();
        let (old_home, file) = old.ok_or_else(unknown)?;
        let (new_home, _) = new.ok_or_else(unknown)?;
        if old_home == new_home {
            // The same home (the profile changes a key, not where records are): nothing to carry.
            return Ok(());
        }
        let file = file.ok_or_else(|| "its conversation has no file yet".to_string())?;
        let rel = file
            .strip_prefix(&old_home)
            .map_err(|_| "its conversation is kept outside its CLI's home".to_string())?
            .to_path_buf();
        tokio::task::spawn_blocking(move || copy_record(&old_home, &rel, &new_home))
            .await
            .map_err(|e| e.to_string())?
    }
}

/// Copies `rel` from `from` to the same place in `to`, following no link (a session may have
/// planted one in either home); a file already there is kept (the conversation went on there).
fn copy_record(
    from: &std::path::Path,
    rel: &std::path::Path,
    to: &std::path::Path,
) -> Result<(), String> {
    use crate::confine::beneath::Dir;
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    let src = Dir::open(from).map_err(|e| e.to_string())?;
    let dest = Dir::open(to).map_err(|e| e.to_string())?;
    if dest.exists(rel) {
        return Ok(());
    }
    if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        dest.create_dir_all(parent, 0o700)
            .map_err(|e| e.to_string())?;
    }
    src.copy_to(rel, &dest, rel, MAX_RECORD, 0o600)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(pairs: &[(&str, &str)]) -> Profile {
        Profile {
            env: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_switch_takes_out_the_old_profiles_settings_and_keeps_the_users_own() {
        let work = profile(&[("CLAUDE_CONFIG_DIR", "/w"), ("X", "1")]);
        let home = profile(&[("CLAUDE_CONFIG_DIR", "/h")]);
        let env: std::collections::BTreeMap<String, String> = [
            ("CLAUDE_CONFIG_DIR", "/w"),
            ("X", "changed by the user"),
            ("KEEP", "k"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let out = switched_env(&env, Some(&work), &home);
        assert_eq!(out.get("CLAUDE_CONFIG_DIR").map(String::as_str), Some("/h"));
        assert_eq!(
            out.get("X").map(String::as_str),
            Some("changed by the user")
        );
        assert_eq!(out.get("KEEP").map(String::as_str), Some("k"));
    }

    #[test]
    fn a_record_is_copied_to_the_same_place_and_a_planted_link_is_not_followed() {
        let t = tempfile::tempdir().expect("tempdir");
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::create_dir_all(a.join("projects/p")).expect("mkdir");
        std::fs::write(a.join("projects/p/id.jsonl"), "line\n").expect("write");
        let rel = std::path::Path::new("projects/p/id.jsonl");
        copy_record(&a, rel, &b).expect("copied");
        assert_eq!(
            std::fs::read_to_string(b.join(rel)).expect("read"),
            "line\n"
        );
        // A link where the record is read is refused, not followed.
        let secret = t.path().join("secret");
        std::fs::write(&secret, "key").expect("write");
        std::fs::create_dir_all(a.join("projects/q")).expect("mkdir");
        std::os::unix::fs::symlink(&secret, a.join("projects/q/id.jsonl")).expect("link");
        let c = t.path().join("c");
        assert!(copy_record(&a, std::path::Path::new("projects/q/id.jsonl"), &c).is_err());
        assert!(!c.join("projects/q/id.jsonl").exists());
    }
}
