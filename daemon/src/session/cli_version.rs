//! A CLI outside the versions its pattern pack was made for says so, once per CLI and version:
//! in the chats of the session that found it, and in `clibotctl doctor` (the daemon's
//! warnings). What to do about it is said with it: capture the screen that was missed, try it
//! with `clibotctl patterns test`, add patterns to `[cli.NAME.patterns]`.

use tracing::warn;

use crate::cli::version::Fit;
use crate::core::*;
use crate::model::SessionRecord;
use crate::store::events::EventKind;

/// How long after its start a session says its CLI is outside its patterns' versions.
const TELL_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

impl Daemon {
    /// Compares the session's CLI version with its pack's range; says so when it is outside,
    /// the first time this daemon sees that CLI at that version.
    pub(crate) fn check_cli_version(&self, rec: &SessionRecord) {
        let Some((_, pack)) = self.kind_of(&rec.cli) else {
            return;
        };
        let Some(range) = pack.versions() else {
            return;
        };
        let how = match range.fit(&rec.cli_version) {
            Fit::Newer => "newer than",
            Fit::Older => "older than",
            Fit::Inside | Fit::Unknown => return,
        };
        let (cli, version) = (&rec.cli, &rec.cli_version);
        let head = format!(
            "{cli} {version} is {how} the versions clibot's screen patterns for it were made for ({}): a dialog it draws differently may not reach you",
            range.text
        );
        let kept = format!(
            "{head}. If a prompt goes unseen, save its screen (`clibotctl screen NAME > screen.txt`), try it with `clibotctl patterns test screen.txt --cli {cli}` and add patterns under [cli.{cli}.patterns]"
        );
        if !self.keep_warning(&kept, &head, 1) {
            return;
        }
        warn!(cli = %cli, version = %version, range = %range.text, "a CLI outside its pattern pack's versions");
        let text = format!(
            "⚠ {head}. If a prompt goes unseen, !!screen shows it; at the machine `clibotctl screen {} > screen.txt` and `clibotctl patterns test screen.txt --cli {cli}` check a fix ([cli.{cli}.patterns]).",
            rec.name
        );
        // Told a moment after the start, so that a chat that binds the session as it starts
        // it (`!!new`) is told too.
        let (d, name) = (self.clone(), rec.name.clone());
        self.in_background(async move {
            tokio::time::sleep(TELL_AFTER).await;
            let id = d.sessions().id_of(&name);
            if let Some(id) = id {
                d.event(
                    &name,
                    &id,
                    EventKind::Notice {
                        text,
                        kind: "version".into(),
                    },
                );
            }
        });
    }
}
