//! Telling the admins that a platform is down: when one platform of this gateway has completed
//! no receive cycle for `[gateway] down_notice_after` (10 min by default; "0": never), its
//! admins cannot hear about it there — so they are told through another platform of the same
//! gateway that works, in that platform's admins' private chats and its default chat (the
//! daemon names them in its answer to the gateway's report). Once per outage, and once more
//! when the platform works again. With no other platform working, the log says it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::ops::health::Health;

/// What to do about one platform now.
#[derive(Debug, PartialEq)]
pub enum Action {
    Nothing,
    /// Down longer than the bound and not told yet.
    TellDown,
    /// Told it was down, and it completes cycles again.
    TellUp,
}

/// Decides for a platform down for `down_for` (since its last completed cycle), with its
/// outage already announced or not.
pub fn decide(down_for: Duration, after: Duration, told: bool) -> Action {
    if after.is_zero() {
        return Action::Nothing;
    }
    match (down_for > after, told) {
        (true, false) => Action::TellDown,
        (false, true) => Action::TellUp,
        _ => Action::Nothing,
    }
}

/// "Telegram" for "telegram": its row's title, else the name capitalised.
pub fn title(platform: &str) -> String {
    if let Some(row) = clibot_proto::platforms::platform(platform) {
        return row.title.to_string();
    }
    let mut c = platform.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// "10m", "1h 5m", "45s".
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        _ => format!("{}h {}m", s / 3600, (s % 3600) / 60),
    }
}

pub fn down_text(platform: &str, down_for: Duration) -> String {
    format!(
        "clibot: {} has not worked for {} — the gateway receives nothing from it and keeps restarting it. Run `clibotctl status` on the machine and read the gateway's log (journalctl --user -u clibot-gateway).",
        title(platform),
        human(down_for)
    )
}

pub fn up_text(platform: &str) -> String {
    format!("clibot: {} works again.", title(platform))
}

/// Watches every platform for as long as the gateway runs.
pub async fn watch(health: Health, after: Duration) {
    if after.is_zero() {
        return;
    }
    let tick = (after / 10).clamp(Duration::from_millis(100), Duration::from_secs(10));
    // Platforms whose outage was announced.
    let mut told: BTreeMap<String, bool> = BTreeMap::new();
    loop {
        tokio::time::sleep(tick).await;
        let now = Instant::now();
        let platforms = health.platforms();
        for (name, _, progress) in &platforms {
            let down_for = progress.down_for(now);
            let was_told = told.get(name).copied().unwrap_or(false);
            let text = match decide(down_for, after, was_told) {
                Action::Nothing => continue,
                Action::TellDown => {
                    eprintln!(
                        "clibot-gateway: {name}: no receive cycle for {}; telling the admins through another platform",
                        human(down_for)
                    );
                    down_text(name, down_for)
                }
                Action::TellUp => up_text(name),
            };
            let sent = tell(&health, &platforms, name, &text).await;
            match (sent, was_told) {
                // Down and told: not again until it recovers.
                (true, false) => {
                    told.insert(name.clone(), true);
                }
                // Recovered: told or not, the outage is over.
                (_, true) => {
                    told.remove(name);
                }
                // Nobody could be told yet: tried again at the next tick.
                (false, false) => {}
            }
        }
    }
}

/// Sends `text` through every other platform that works, to its notice chats; whether it
/// reached at least one chat.
async fn tell(
    health: &Health,
    platforms: &[(String, String, crate::progress::Progress)],
    down: &str,
    text: &str,
) -> bool {
    let now = Instant::now();
    let mut any = false;
    for (name, state, progress) in platforms {
        if name == down || state != "connected" || progress.stalled_for(now).is_some() {
            continue;
        }
        let Some(platform) = health.sender(name) else {
            continue;
        };
        for chat in health.notice_chats(name) {
            match platform.send(&chat, text).await {
                Ok(()) => any = true,
                Err(e) => eprintln!(
                    "clibot-gateway: {name}: cannot tell chat {chat} that {down} is down: {}",
                    clibot_proto::describe(e.as_ref())
                ),
            }
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN: Duration = Duration::from_secs(600);

    #[test]
    fn told_once_per_outage_and_once_when_it_ends() {
        let s = Duration::from_secs;
        assert_eq!(decide(s(30), TEN, false), Action::Nothing);
        assert_eq!(decide(s(601), TEN, false), Action::TellDown);
        // Still down, already told: nothing more.
        assert_eq!(decide(s(3600), TEN, true), Action::Nothing);
        assert_eq!(decide(s(2), TEN, true), Action::TellUp);
        // Off.
        assert_eq!(decide(s(3600), Duration::ZERO, false), Action::Nothing);
    }

    #[test]
    fn the_notices_name_the_platform_and_what_to_do() {
        let t = down_text("telegram", Duration::from_secs(660));
        assert!(t.contains("Telegram") && t.contains("11m") && t.contains("clibotctl status"));
        assert_eq!(up_text("feishu"), "clibot: Feishu works again.");
        assert_eq!(human(Duration::from_secs(3720)), "1h 2m");
    }
}
