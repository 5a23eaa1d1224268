//! A session's last reply, whole (its blob when long), and the blobs that expire with the log.

use crate::core::*;
use crate::error::CoreError;

/// A session's last reply, as `clibotctl last` shows it.
#[derive(Debug, Clone, Default)]
pub struct LastReply {
    pub text: String,
    pub seq: u64,
    pub blob_id: String,
    pub full_bytes: u64,
}

impl Daemon {
    /// The last completed turn's reply (its head when long, with the blob holding it whole).
    pub fn last_reply(&self, name: &str) -> Result<LastReply, CoreError> {
        self.sessions()
            .get(name, |e| LastReply {
                text: e.rec.last_reply.clone().unwrap_or_default(),
                seq: e.rec.last_reply_seq,
                blob_id: e.rec.last_reply_blob.clone(),
                full_bytes: e.rec.last_reply_bytes,
            })
            .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))
    }

    /// The final reply of `rec`'s turn from its CLI's own records, when no hook gave it — read
    /// where the CLI keeps them (see [`Daemon::records_cli`]). Off the async workers.
    pub(crate) async fn recovered_reply(
        &self,
        rec: &crate::model::SessionRecord,
    ) -> Option<String> {
        let (adapter, _) = self.kind_of(&rec.cli)?;
        let cli = self.records_cli(rec);
        let rec = rec.clone();
        tokio::task::spawn_blocking(move || adapter.recover_reply(&rec, cli.as_ref()))
            .await
            .ok()
            .flatten()
    }

    /// `rec`'s CLI spec with the environment its records are found by: what the session was
    /// started with over the CLI's configuration, and for a jailed session its own home (the
    /// home it sees is that one), never the user's.
    pub(crate) fn records_cli(
        &self,
        rec: &crate::model::SessionRecord,
    ) -> Option<crate::cli::CliSpec> {
        let mut cli = self.cli(&rec.cli).ok().map(|c| (*c).clone());
        // What the session was started with wins over the CLI's configuration, as at spawn;
        // and where its launch placed files of its own.
        if let Some(c) = cli.as_mut() {
            c.env
                .extend(rec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
            let files = self.settings().state_dir.join("sessions").join(&rec.id);
            c.env.insert(
                crate::cli::SESSION_FILES.into(),
                files.display().to_string(),
            );
        }
        if !rec.jail_home.is_empty() {
            let own = (self.settings().state_dir.join("jails"))
                .join(&rec.id)
                .join("home");
            let home = std::path::PathBuf::from(&rec.jail_home);
            let c = cli.as_mut()?;
            // Every setting that names a place in the home the jail shows names the same
            // place in its own home; the home itself is that one.
            for v in c.env.values_mut() {
                if let Ok(rest) = std::path::Path::new(v.as_str()).strip_prefix(&home) {
                    *v = own.join(rest).display().to_string();
                }
            }
            c.env.insert("HOME".into(), own.display().to_string());
            // The CLIs' own homes: in the jail's home, never one of the machine's (a setting
            // of the daemon's environment, or one elsewhere, is not the jail's).
            for (var, rel) in [
                ("CLAUDE_CONFIG_DIR", ".claude"),
                ("COPILOT_HOME", ".copilot"),
                ("QWEN_HOME", ".qwen"),
                ("CODEX_HOME", ".codex"),
            ] {
                let inside = c
                    .env
                    .get(var)
                    .is_some_and(|v| std::path::Path::new(v).starts_with(&own));
                if !inside {
                    c.env
                        .insert(var.into(), own.join(rel).display().to_string());
                }
            }
        }
        cli
    }

    /// Removes blobs no retained event names, keeping every session's last reply.
    pub(crate) fn expire_blobs(&self) {
        let pinned: std::collections::HashSet<String> = self
            .sessions()
            .filter_map(|e| {
                (!e.rec.last_reply_blob.is_empty()).then(|| e.rec.last_reply_blob.clone())
            })
            .into_iter()
            .collect();
        let events = &self.events();
        if let Some(oldest) = events.oldest_time_ms() {
            events.blobs().expire(oldest, &pinned);
        }
    }
}
