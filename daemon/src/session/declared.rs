//! Sessions declared in the config (`[[sessions]]`): started with the daemon (and on a
//! reload) when `auto_start`, else listed in state `declared` until `clibotctl start NAME` or
//! `!!start NAME`. A tmux session of that name already on clibot's server is adopted, never
//! duplicated: a daemon restarted finds its declared sessions where they run.

use tracing::{info, warn};

use crate::config::DeclaredSession;
use crate::core::{Daemon, ListFilter, SpawnRequest};
use crate::error::CoreError;
use crate::model::{SessionRecord, State};
use crate::tmux::MuxError;

impl Daemon {
    /// All sessions matching `filter`, by name.
    pub fn list(&self, filter: &ListFilter) -> Vec<SessionRecord> {
        let wanted = |r: &SessionRecord| {
            (filter.cli.is_empty() || r.cli == filter.cli)
                && filter.dir.as_ref().is_none_or(|d| r.dir.starts_with(d))
                && filter.state.is_none_or(|s| r.state == s)
        };
        let mut out: Vec<SessionRecord> = self
            .sessions()
            .filter_map(|e| wanted(&e.rec).then(|| e.rec.clone()));
        // Declared in the config and not started: listed, so that `start` is one step.
        out.extend(self.declared_not_started().into_iter().filter(wanted));
        out
    }

    /// The declared sessions that do not exist now, as records in state `declared`.
    pub fn declared_not_started(&self) -> Vec<SessionRecord> {
        let live = self.live();
        // The names in use, from one look at the table (sorted, as it keeps them).
        let sessions = self.sessions().names();
        live.config
            .sessions
            .iter()
            .filter(|d| sessions.binary_search(&d.name).is_err())
            .map(|d| SessionRecord {
                name: d.name.clone(),
                cli: d.cli.clone(),
                dir: crate::paths::expand_home(std::path::Path::new(&d.dir)),
                args: d.args.clone(),
                state: State::Declared,
                ..Default::default()
            })
            .collect()
    }

    /// The declaration of `name`, if the config has one.
    pub fn declaration(&self, name: &str) -> Option<DeclaredSession> {
        self.live()
            .config
            .sessions
            .iter()
            .find(|d| d.name == name)
            .cloned()
    }

    /// Starts every `auto_start` declaration that does not run (at start and after a reload).
    /// A failure is a warning (`clibotctl status`, doctor), not the end of the daemon.
    pub(crate) async fn start_declared_sessions(&self) {
        let auto: Vec<DeclaredSession> = self
            .live()
            .config
            .sessions
            .iter()
            .filter(|d| d.auto_start)
            .cloned()
            .collect();
        for d in auto {
            let running = self.sessions().alive(&d.name);
            if running {
                continue;
            }
            match self.start_declared(&d.name).await {
                Ok(rec) => info!(session = %rec.name, "declared session started (auto_start)"),
                Err(e) => {
                    warn!(session = %d.name, "declared session not started: {e}");
                    self.warn(format!(
                        "the declared session {} (auto_start) could not start: {e}",
                        d.name
                    ));
                }
            }
        }
    }

    /// Starts declared session `name`: an exited one is restarted (resuming its conversation
    /// where the CLI can), a tmux session of that name on clibot's server is adopted, and
    /// otherwise it is spawned as declared. Machine-owned, like a session spawned at the desk.
    pub async fn start_declared(&self, name: &str) -> Result<SessionRecord, CoreError> {
        let d = self
            .declaration(name)
            .ok_or_else(|| CoreError::NotDeclared(name.to_string()))?;
        let existing = self.sessions().state_of(name);
        match existing {
            Some(s) if s.is_exited() => {
                let resume = self.resumes_conversations(&d.cli);
                return self.restart(name, resume).await;
            }
            Some(_) => return Err(CoreError::AlreadyExists(name.to_string())),
            None => {}
        }
        let tmux = match self.mux().list_sessions().await {
            Ok(l) => l,
            Err(MuxError::NoServer(_)) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        if let Some(s) = tmux.iter().find(|s| s.name == d.name) {
            info!(session = %d.name, "a tmux session of the declared name runs: adopting it");
            return self.adopt(&s.id, &d.cli, &d.name).await;
        }
        self.spawn(SpawnRequest {
            name: d.name.clone(),
            cli: d.cli.clone(),
            dir: crate::paths::expand_home(std::path::Path::new(&d.dir))
                .display()
                .to_string(),
            args: d.args.clone(),
            ..Default::default()
        })
        .await
    }
}
