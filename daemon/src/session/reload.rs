//! Re-reading the config while sessions run: what applies at once, what needs a restart.

use crate::config::Config;
use crate::core::Daemon;
use crate::core::live::*;
use crate::error::CoreError;

impl Daemon {
    /// Re-reads the config file the daemon started with (or the default one). An invalid file
    /// changes nothing, and the error says why.
    pub fn reload_from_file(&self) -> Result<ReloadReport, CoreError> {
        let path = self
            .settings()
            .config_file
            .clone()
            .or_else(clibot_proto::default_config_path);
        let config = match &path {
            Some(p) => Config::load(p, false)
                .map_err(|e| CoreError::Config(format!("{e}; nothing was changed")))?
                .unwrap_or_default(),
            None => Config::default(),
        };
        let unknown = path
            .as_deref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|t| crate::config::unknown_sections(&t))
            .unwrap_or_default();
        // A platform whose admins would all go because its section is gone (misspelled, cut
        // out) is not reloaded: nobody would be told, and the admins would find out by being
        // refused. An explicit `admins = []` is taken as meant.
        let old = self.live();
        for (platform, a) in &old.config.access {
            if !a.admins.is_empty() && !config.access.contains_key(platform) {
                let mut why = format!(
                    "the file has no [access.{platform}] any more, which would drop every admin of {platform} ({}): nothing was changed; to mean it, keep the section with `admins = []`",
                    a.admins.join(", ")
                );
                if !unknown.is_empty() {
                    why.push_str(&format!("; {}", unknown.join("; ")));
                }
                return Err(CoreError::Config(why));
            }
        }
        let mut report = self.reload(config)?;
        for w in unknown {
            tracing::warn!("{w}");
            report.warnings.push(w);
        }
        Ok(report)
    }

    /// [`Daemon::reload_from_file`], then starts the `auto_start` sessions it declares that do
    /// not run (`clibotctl reload`, SIGHUP).
    pub async fn reload_and_start(&self) -> Result<ReloadReport, CoreError> {
        let d = self.clone();
        let r = tokio::task::spawn_blocking(move || d.reload_from_file())
            .await
            .map_err(|e| CoreError::Config(format!("the reload failed: {e}")))??;
        self.start_declared_sessions().await;
        Ok(r)
    }

    /// Applies `config`'s reloadable sections at once (an allowlist removal stops delivery to
    /// that user's chats now); says which changed sections need a restart.
    pub fn reload(&self, config: Config) -> Result<ReloadReport, CoreError> {
        let (live, warnings) = Live::build(&config, self.secret_paths())?;
        let old = self.live();
        let (reloaded, needs_restart) = changed(&old.config, &config);
        self.access().set_config(config.access.clone());
        self.set_live(live);
        for w in warnings {
            self.warn(w);
        }
        self.enforce_binders();
        self.pause_jobs_of_lost_owners();
        let jobs = self
            .jobs()
            .sync_config(&config.jobs, crate::store::now_ms());
        for w in &jobs {
            tracing::warn!("{w}");
        }
        tracing::info!(?reloaded, ?needs_restart, "config reloaded");
        Ok(ReloadReport {
            reloaded,
            needs_restart,
            warnings: jobs,
        })
    }
}
