//! Routing a new task (`!!ask TEXT`, `clibotctl route TEXT`): the CLI is chosen by the first
//! matching `[[routes]]` entry, else by the decider among the configured CLIs; then a session
//! of that CLI starts for the asker and the text is typed into it (queued until it is ready).

use tracing::info;

use crate::automation::routing::{Choice, session_name};
use crate::automation::{DeciderInput, DeciderPrompt, Verdict, run_decider};
use crate::core::{Daemon, SpawnRequest};
use crate::error::CoreError;
use crate::model::SessionRecord;

/// A task to route.
#[derive(Debug, Clone, Default)]
pub struct RouteTask {
    pub text: String,
    /// Where the session starts; empty: the CLI's default directory.
    pub dir: String,
    /// The session's name; empty: `CLI-N`.
    pub name: String,
    /// The chat user it is for ("PLATFORM:USER"); empty on the machine.
    pub owner: String,
    /// Only choose; start nothing.
    pub dry_run: bool,
}

/// Where a task went.
#[derive(Debug, Clone)]
pub struct Routed {
    pub choice: Choice,
    /// The session started for it (none on a dry run).
    pub session: Option<SessionRecord>,
}

impl Daemon {
    /// Chooses the CLI for `text` among those `owner` may start.
    pub async fn choose_cli(
        &self,
        text: &str,
        dir: &str,
        owner: &str,
    ) -> Result<Choice, CoreError> {
        let live = self.live();
        let allowed = |cli: &str| self.check_cli_allowed(owner, cli).is_ok();
        if let Some(c) = live.routes.pick(text, &allowed) {
            return Ok(c);
        }
        let Some(decider) = live.config.decider.clone() else {
            return Err(CoreError::Routing(if live.routes.is_empty() {
                "no [[routes]] are configured and no [decider] is set, so clibot cannot choose a CLI for this: add a route (match = REGEX, cli = NAME) or name the CLI yourself (!!new NAME CLI)".into()
            } else {
                "no [[routes]] entry matches this task and no [decider] is set: add a route for it, or name the CLI yourself (!!new NAME CLI)".into()
            }));
        };
        // The decider picks among the CLIs the asker may start, as it picks a prompt's option.
        let options: Vec<String> = live.clis.keys().filter(|c| allowed(c)).cloned().collect();
        if options.is_empty() {
            return Err(CoreError::Routing("there is no CLI you may start".into()));
        }
        let input = DeciderInput {
            session: "",
            cli: "",
            dir,
            prompt: DeciderPrompt {
                id: "route",
                kind: "route",
                text,
                options: &options,
                subject: text,
            },
            screen: String::new(),
            last_reply: "",
            free_text: false,
        };
        let verdict = run_decider(&decider, &input).await.map_err(|e| {
            CoreError::Routing(format!(
                "no [[routes]] entry matches and the decider could not choose: {e}"
            ))
        })?;
        match verdict {
            Verdict::Choice { choice, note } => {
                let pick = match choice.trim().parse::<usize>() {
                    Ok(n) if (1..=options.len()).contains(&n) => Some(options[n - 1].clone()),
                    _ => options
                        .iter()
                        .find(|o| o.eq_ignore_ascii_case(choice.trim()))
                        .cloned(),
                };
                let cli = pick.ok_or_else(|| {
                    CoreError::Routing(format!(
                        "the decider chose {choice:?}, which is not one of the CLIs you may start ({})",
                        options.join(", ")
                    ))
                })?;
                Ok(Choice {
                    cli,
                    by: "decider".into(),
                    why: if note.is_empty() {
                        "the decider chose it".into()
                    } else {
                        note
                    },
                })
            }
            Verdict::Text { text, .. } => Err(CoreError::Routing(format!(
                "the decider answered in words ({text:?}) instead of choosing a CLI: name the CLI yourself (!!new NAME CLI)"
            ))),
            Verdict::Ask { note } => Err(CoreError::Routing(format!(
                "the decider left the choice to you{}: name the CLI yourself (!!new NAME CLI)",
                if note.is_empty() {
                    String::new()
                } else {
                    format!(" ({note})")
                }
            ))),
        }
    }

    /// Chooses the CLI for a task, starts a session of it for the asker and types the text in.
    pub async fn route_task(&self, task: RouteTask) -> Result<Routed, CoreError> {
        if task.text.trim().is_empty() {
            return Err(CoreError::Routing(
                "say what the task is: !!ask TEXT".into(),
            ));
        }
        let choice = self.choose_cli(&task.text, &task.dir, &task.owner).await?;
        info!(cli = %choice.cli, by = %choice.by, "task routed");
        if task.dry_run {
            return Ok(Routed {
                choice,
                session: None,
            });
        }
        let name = if task.name.is_empty() {
            // The names in use, from one look at the table (sorted, as it keeps them).
            let sessions = self.sessions().names();
            let declared = self.live().config.sessions.clone();
            session_name(&choice.cli, &|n| {
                sessions.iter().any(|s| s == n) || declared.iter().any(|d| d.name == n)
            })
        } else {
            task.name.clone()
        };
        let rec = self
            .spawn(SpawnRequest {
                name: name.clone(),
                cli: choice.cli.clone(),
                dir: task.dir.clone(),
                owner: task.owner.clone(),
                ..Default::default()
            })
            .await?;
        // Queued while the CLI starts, typed once it is ready.
        self.send_input(&name, &task.text, true).await?;
        Ok(Routed {
            choice,
            session: Some(rec),
        })
    }
}
