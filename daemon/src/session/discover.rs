//! Discovery as the daemon offers it (`clibotctl discover`, `!!discover`): the scan of
//! [`crate::discover`], minus what clibot manages already.

use std::collections::{BTreeMap, BTreeSet};

use crate::core::Daemon;
use crate::discover::Found;

impl Daemon {
    /// The AI CLIs running as this user that clibot does not manage. Changes nothing. One
    /// that reports through the global hooks is listed too (it is watched, not managed: it can
    /// still be adopted or resumed), with the session it reports as.
    pub async fn discover(&self) -> Vec<Found> {
        // From one look at the table: each live session's process, and whether clibot only
        // watches it.
        let live = self.sessions().filter_map(|e| {
            (!e.rec.state.is_exited() && e.rec.pid > 0)
                .then(|| (e.rec.pid, e.rec.unmanaged, e.rec.name.clone()))
        });
        let (managed, watched): (BTreeSet<u32>, BTreeMap<u32, String>) = (
            live.iter()
                .filter(|(_, unmanaged, _)| !unmanaged)
                .map(|(pid, _, _)| *pid)
                .collect(),
            live.into_iter()
                .filter(|(_, unmanaged, _)| *unmanaged)
                .map(|(pid, _, name)| (pid, name))
                .collect(),
        );
        let tmux = self.settings().config.tmux.binary.clone();
        let mut found = crate::discover::scan(&tmux, &managed).await;
        for f in &mut found {
            if let Some(name) = watched.get(&f.pid) {
                f.watched = name.clone();
            }
        }
        found
    }
}
