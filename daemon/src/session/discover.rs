//! Discovery as the daemon offers it (`clibotctl discover`, `!!discover`): the scan of
//! [`crate::discover`], minus what clibot manages already.

use std::collections::BTreeSet;

use crate::core::Daemon;
use crate::discover::Found;
use crate::locking::lock;

impl Daemon {
    /// The AI CLIs running as this user that clibot does not manage. Changes nothing.
    pub async fn discover(&self) -> Vec<Found> {
        let managed: BTreeSet<u32> = lock(&self.inner.sessions)
            .values()
            .filter(|e| !e.rec.state.is_exited() && e.rec.pid > 0)
            .map(|e| e.rec.pid)
            .collect();
        let tmux = self.inner.settings.config.tmux.binary.clone();
        crate::discover::scan(&tmux, &managed).await
    }
}
