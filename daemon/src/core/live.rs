//! What the daemon re-reads without a restart (`clibotctl reload`, SIGHUP): access, rules,
//! guard, decider, delegation, allowed roots and the CLIs. Everything else in the config takes
//! a restart, and the report says which sections changed that way.
//!
//! Why a swap of one `Arc`: each reader takes the current set once and uses it to the end of
//! what it does, so no operation ever sees half an old and half a new config.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::entry::CliKind;
use crate::cli::CliSpec;
use crate::cli::detect::{Pack, builtin_packs};
use crate::config::Config;
use crate::error::CoreError;
use crate::paths::expand_home;

/// The parts of the config that a reload replaces.
pub(crate) struct Live {
    /// The config as last loaded (what a reload compares against).
    pub(crate) config: Config,
    pub(crate) clis: BTreeMap<String, Arc<CliSpec>>,
    pub(crate) kinds: BTreeMap<String, CliKind>,
    pub(crate) roots: Vec<PathBuf>,
    pub(crate) lifted_secrets: Vec<PathBuf>,
    pub(crate) automation: Arc<crate::automation::Automation>,
    /// `[[routes]]`, compiled: which CLI a new task goes to.
    pub(crate) routes: Arc<crate::automation::routing::Routes>,
    /// When the config was read (Unix ms): `status` says so, and whether the file changed since.
    pub(crate) read_ms: i64,
}

impl Live {
    /// Builds the live set from `config`; warnings for what was replaced by defaults.
    pub(crate) fn build(
        config: &Config,
        secrets: &[PathBuf],
    ) -> Result<(Live, Vec<String>), CoreError> {
        let mut warnings = Vec::new();
        let roots = config
            .daemon
            .allowed_roots
            .iter()
            .filter_map(|r| expand_home(r).canonicalize().ok())
            .collect::<Vec<_>>();
        if roots.is_empty() {
            warnings.push(
                "none of [daemon] allowed_roots exists: no session can be spawned".to_string(),
            );
        }
        let clis = config.clis();
        let packs = builtin_packs();
        let mut kinds = BTreeMap::new();
        for (name, spec) in &clis {
            let pack_name = if spec.pattern_pack == "generic" && packs.contains_key(&spec.adapter) {
                spec.adapter.clone()
            } else {
                spec.pattern_pack.clone()
            };
            let base = packs.get(&pack_name).cloned().unwrap_or_default();
            let pack = match Pack::compile(&base, spec.patterns.as_ref()) {
                Ok(p) => p,
                Err(e) => {
                    warnings.push(format!(
                        "[cli.{name}] patterns: {e}; using the built-in ones"
                    ));
                    Pack::compile(&base, None).map_err(CoreError::Config)?
                }
            };
            kinds.insert(
                name.clone(),
                CliKind {
                    adapter: Arc::from(crate::cli::adapter(&spec.adapter)),
                    pack: Arc::new(pack),
                },
            );
        }
        let automation = crate::automation::Automation::new(
            &config.rules,
            &config.guard,
            config.decider.as_ref(),
        )
        .map_err(CoreError::Config)?
        .with_secrets(secrets.to_vec());
        warnings.extend(automation.warnings.iter().cloned());
        let lifted_secrets = crate::confine::secrets::lifted(&config.daemon.allowed_roots);
        let routes = crate::automation::routing::Routes::compile(&config.routes, &clis)
            .map_err(CoreError::Config)?;
        Ok((
            Live {
                config: config.clone(),
                clis: clis.into_iter().map(|(k, v)| (k, Arc::new(v))).collect(),
                kinds,
                roots,
                lifted_secrets,
                automation: Arc::new(automation),
                routes: Arc::new(routes),
                read_ms: crate::store::now_ms(),
            },
            warnings,
        ))
    }
}

/// What a reload did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReloadReport {
    /// Sections that changed and now apply.
    pub reloaded: Vec<String>,
    /// Sections that changed and apply only after a restart of the daemon.
    pub needs_restart: Vec<String>,
    /// What in the file was not taken, and why.
    pub warnings: Vec<String>,
}

/// The sections of two configs that differ, as `[daemon] allowed_roots`-style names.
pub(crate) fn changed(old: &Config, new: &Config) -> (Vec<String>, Vec<String>) {
    let diff =
        |a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| format!("{a:?}") != format!("{b:?}");
    let mut reloaded = Vec::new();
    let mut restart = Vec::new();
    if diff(&old.access, &new.access) {
        reloaded.push("access".to_string());
    }
    if diff(&old.rules, &new.rules) {
        reloaded.push("rules".into());
    }
    if diff(&old.guard, &new.guard) {
        reloaded.push("guard".into());
    }
    if diff(&old.decider, &new.decider) {
        reloaded.push("decider".into());
    }
    if diff(&old.delegation, &new.delegation) {
        reloaded.push("delegation".into());
    }
    if diff(&old.daemon.allowed_roots, &new.daemon.allowed_roots) {
        reloaded.push("daemon.allowed_roots".into());
    }
    if diff(&old.cli_overrides, &new.cli_overrides) {
        reloaded.push("cli".into());
    }
    if diff(&old.usage, &new.usage) {
        reloaded.push("usage".into());
    }
    if diff(&old.routes, &new.routes) {
        reloaded.push("routes".into());
    }
    // Compared as values: a webhook's secret is masked in its Debug form.
    if old.jobs != new.jobs {
        reloaded.push("jobs".into());
    }
    if diff(&old.sessions, &new.sessions) {
        reloaded.push("sessions".into());
    }
    if old.daemon.default_session != new.daemon.default_session {
        reloaded.push("daemon.default_session".into());
    }
    let mut od = old.daemon.clone();
    od.allowed_roots = new.daemon.allowed_roots.clone();
    od.default_session = new.daemon.default_session.clone();
    if diff(&od, &new.daemon) {
        restart.push("daemon".into());
    }
    if diff(&old.tmux, &new.tmux) {
        restart.push("tmux".into());
    }
    if diff(&old.triggers, &new.triggers) {
        restart.push("triggers".into());
    }
    (reloaded, restart)
}
