//! Starting the daemon: the stores opened (by the core), the parts that follow events put on
//! the bus, the sessions the last daemon left re-adopted, and what was under way taken up.

use std::sync::Arc;
use std::time::Instant;

use crate::config::Settings;
use crate::core::Daemon;
use crate::core::bus::{Bus, Subscriber};
use crate::error::CoreError;
use crate::model::State;
use crate::store::events::{Event, EventKind};
use crate::tmux::Mux;

/// The parts that follow events, in the order each event reaches them: one row per part. The
/// metrics count first; the outcomes of earlier automatic answers settle before a new one
/// starts; a delegation comes last.
fn subscribers() -> Vec<Arc<dyn Subscriber>> {
    vec![
        Arc::new(CountEvents),
        Arc::new(super::outcomes::AutomaticOutcomes),
        Arc::new(super::auto_answer::AutomaticAnswers),
        Arc::new(super::delegation::Delegation),
        Arc::new(super::jobs::JobWatch),
        Arc::new(super::worktree_summary::WorktreeSummary::default()),
    ]
}

/// The metrics, on the bus: events written, turns and prompts open, answers and their times.
struct CountEvents;

impl Subscriber for CountEvents {
    fn name(&self) -> &'static str {
        "metrics"
    }

    fn on_event(&self, daemon: &Daemon, event: &Event) {
        daemon.metrics().on_event(&event.session, &event.kind);
    }
}

impl Daemon {
    /// Opens the state directory, re-adopts the sessions that are still alive in tmux and marks
    /// the others exited.
    pub async fn start(settings: Settings, mux: Arc<dyn Mux>) -> Result<Daemon, CoreError> {
        let bus = Bus::new(subscribers());
        tracing::info!(parts = ?bus.names(), "the parts that follow events");
        let (daemon, registry) = Daemon::open(settings, mux, bus).await?;
        let readopted = daemon.reconcile_at_start(registry).await;
        // Declared sessions with auto_start that do not run (a first start, a reboot that
        // ended tmux) are started before clients are served.
        daemon.start_declared_sessions().await;
        daemon.event(
            "",
            "",
            EventKind::DaemonStarted {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                readopted,
            },
        );
        daemon.persist();
        // A prompt that was being answered automatically when the last daemon stopped: its
        // answer may never have been given. It is looked at again (the rules and the decider
        // run anew; what they leave goes to the chats), never left waiting unseen.
        let unfinished: Vec<(String, String, crate::model::Prompt)> =
            daemon.sessions().filter_map(|e| {
                let p = e.rec.prompt.clone().filter(|p| !p.auto.is_empty())?;
                Some((e.rec.name.clone(), e.rec.id.clone(), p))
            });
        for (name, id, p) in unfinished {
            daemon.event(&name, &id, EventKind::Waiting { prompt: p });
        }
        // Every session is prepared, and named for its watcher, in one sweep.
        let names: Vec<String> = daemon.sessions().filter_map_mut(|e| {
            if !e.rec.idle_program.is_empty() {
                e.rt.idle_foreground = Some(e.rec.idle_program.clone());
            }
            if e.rec.state == State::Working {
                // The turn ran on while no daemon watched: time and the screen finish it, its
                // output read from where it began.
                e.rt.turn.started = Some(Instant::now());
                e.rt.turn.recovered = true;
                e.rt.turn.anchor = e.rec.turn_anchor;
                e.rt.turn.input_lines = (e.rec.turn_input_lines as usize).max(1);
                if e.rt.idle_foreground.is_none() {
                    // Learned by no daemon yet: the CLI's own program is the best guess, and
                    // far better than whatever command the pane runs now.
                    e.rt.idle_foreground = daemon
                        .live()
                        .clis
                        .get(&e.rec.cli)
                        .and_then(|c| c.program_name());
                }
            }
            Some(e.rec.name.clone())
        });
        for n in names {
            daemon.start_watcher(&n);
        }
        daemon.take_up_at_start();
        // The config's jobs, as the file says now (one it dropped is gone; one it changed
        // starts its rhythm anew).
        let jobs = daemon.live().config.jobs.clone();
        for w in daemon.jobs().sync_config(&jobs, crate::store::now_ms()) {
            daemon.warn(w);
        }
        Ok(daemon)
    }
}
