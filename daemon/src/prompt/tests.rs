//! The prompt machine's rules, one row each: what the session had, what the screen shows,
//! what it has after and what the caller is told to do.

use super::*;
use crate::model::AnswerStyle;

fn dialog(text: &str, options: &[&str], subject: &str) -> ScreenPrompt {
    ScreenPrompt {
        kind: PromptKind::Permission,
        text: text.into(),
        options: options.iter().map(|o| o.to_string()).collect(),
        subject: subject.into(),
        subject_partial: false,
        subject_kind: None,
        answer: AnswerStyle::Digit,
        context: String::new(),
    }
}

/// A new prompt as the daemon makes one, with a fixed id.
fn fresh(sp: &ScreenPrompt) -> Prompt {
    Prompt {
        id: "new".into(),
        kind: sp.kind.clone(),
        text: sp.text.clone(),
        options: sp.options.clone(),
        subject: sp.subject.clone(),
        source: PromptSource::Screen,
        answer: sp.answer,
        ..Default::default()
    }
}

fn prompt(id: &str, source: PromptSource, text: &str, options: &[&str], since_ms: i64) -> Prompt {
    Prompt {
        id: id.into(),
        kind: PromptKind::Permission,
        text: text.into(),
        options: options.iter().map(|o| o.to_string()).collect(),
        source,
        since_ms,
        ..Default::default()
    }
}

fn seen<'a>(dialog: Option<&'a ScreenPrompt>, now: Instant) -> Seen<'a> {
    Seen {
        dialog,
        pending: false,
        api: false,
        keys_by: None,
        desk_at: None,
        now,
    }
}

fn published(actions: &[Action]) -> Vec<(&str, bool)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Publish { prompt, shown } => Some((prompt.id.as_str(), *shown)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_new_dialog_is_published_and_the_session_waits() {
    let now = Instant::now();
    let sp = dialog("Run ls?", &["Yes", "No"], "ls");
    let mut d = Dialog::default();
    let out = on_screen(&mut d, &seen(Some(&sp), now), &fresh);
    assert_eq!(published(&out), [("new", true)]);
    assert!(out.contains(&Action::State(State::Waiting, "the CLI asks")));
    assert_eq!(d.current.as_ref().map(|p| p.id.as_str()), Some("new"));
}

#[test]
fn the_dialog_a_hook_announced_takes_the_screens_words_and_keeps_its_id() {
    let now = Instant::now();
    let sp = dialog("Do you want to run ls -la?", &["Yes", "No"], "ls -la");
    let cur = prompt("hook1", PromptSource::Hook, "Bash", &[], 1);
    let mut d = Dialog {
        current: Some(cur),
        answered: None,
    };
    let mut s = seen(Some(&sp), now);
    s.pending = true;
    let out = on_screen(&mut d, &s, &fresh);
    assert_eq!(published(&out), [("hook1", true)]);
    let p = d.current.expect("still waiting");
    assert_eq!(p.text, "Do you want to run ls -la?");
    assert_eq!(p.options, ["Yes", "No"]);
    assert_eq!(p.subject, "ls -la");
    assert!(!out.iter().any(|a| matches!(a, Action::State(..))));
}

#[test]
fn a_hook_and_a_dialog_that_disagree_on_the_subject_are_answered_by_nobody_automatic() {
    let now = Instant::now();
    let sp = dialog("Run?", &["Yes", "No"], "rm -rf /");
    let mut cur = prompt("hook1", PromptSource::Hook, "Bash", &[], 1);
    cur.subject = "ls".into();
    let mut d = Dialog {
        current: Some(cur),
        answered: None,
    };
    let mut s = seen(Some(&sp), now);
    s.pending = true;
    on_screen(&mut d, &s, &fresh);
    let p = d.current.expect("waiting");
    assert_eq!(p.subject, "rm -rf /", "the dialog is what keys act on");
    assert!(p.subject_partial, "so nothing automatic answers it");
}

#[test]
fn a_half_drawn_dialog_is_waited_for_and_late_options_republish() {
    let now = Instant::now();
    let cur = prompt("hook1", PromptSource::Hook, "Bash", &[], 1);
    // Question drawn, options not yet: nothing happens.
    let half = dialog("Run ls?", &[], "ls");
    let mut d = Dialog {
        current: Some(cur.clone()),
        answered: None,
    };
    let mut s = seen(Some(&half), now);
    s.pending = true;
    assert!(on_screen(&mut d, &s, &fresh).is_empty());
    // Published from the hook alone already (not pending), then the options appear.
    let whole = dialog("Run ls?", &["Yes", "No"], "ls");
    let out = on_screen(&mut d, &seen(Some(&whole), now), &fresh);
    assert_eq!(published(&out), [("hook1", true)]);
    assert_eq!(d.current.map(|p| p.options.len()), Some(2));
}

#[test]
fn another_dialog_replacing_a_screen_prompt_resolves_it_at_the_terminal() {
    let now = Instant::now();
    let cur = prompt("old", PromptSource::Screen, "Run ls?", &["Yes", "No"], 1);
    let next = dialog("Run rm?", &["Yes", "No"], "rm");
    let mut d = Dialog {
        current: Some(cur),
        answered: None,
    };
    let out = on_screen(&mut d, &seen(Some(&next), now), &fresh);
    assert_eq!(
        out[0],
        Action::Resolved {
            id: "old".into(),
            by: "terminal",
            actor: String::new()
        }
    );
    assert_eq!(published(&out), [("new", false)]);
    // The same dialog again is nothing new.
    let again = dialog("Run rm?", &["Yes", "No"], "rm");
    assert!(on_screen(&mut d, &seen(Some(&again), now), &fresh).is_empty());
}

#[test]
fn the_answered_dialog_still_drawn_is_not_a_new_prompt_and_is_looked_at_again() {
    let now = Instant::now();
    let sp = dialog("Run ls?", &["Yes", "No"], "ls");
    let sig = signature(sp.kind.as_str(), &sp.text, &sp.subject);
    let mut d = Dialog {
        current: None,
        answered: Some((Some(sig), now, false)),
    };
    let out = on_screen(
        &mut d,
        &seen(Some(&sp), now + Duration::from_millis(500)),
        &fresh,
    );
    assert_eq!(out, [Action::LookAgainIn(Duration::from_millis(1500 + 20))]);
    assert!(d.current.is_none());
    // Scheduled once.
    let out = on_screen(
        &mut d,
        &seen(Some(&sp), now + Duration::from_millis(900)),
        &fresh,
    );
    assert!(out.is_empty());
    // Still there after the lingering: a prompt.
    let out = on_screen(&mut d, &seen(Some(&sp), now + ANSWERED_LINGER), &fresh);
    assert_eq!(published(&out), [("new", true)]);
    assert!(d.answered.is_none());
}

#[test]
fn another_dialog_right_after_an_answer_by_keys_is_new() {
    let now = Instant::now();
    let answered = dialog("Run ls?", &["Yes", "No"], "ls");
    let sig = signature(answered.kind.as_str(), &answered.text, &answered.subject);
    let next = dialog("Run rm?", &["Yes", "No"], "rm");
    let mut d = Dialog {
        current: None,
        answered: Some((Some(sig), now, false)),
    };
    let out = on_screen(&mut d, &seen(Some(&next), now), &fresh);
    assert_eq!(published(&out), [("new", true)]);
    // Answered through a hook: any dialog lingers (its words differ from the screen's).
    let mut d = Dialog {
        current: None,
        answered: Some((None, now, false)),
    };
    let out = on_screen(&mut d, &seen(Some(&next), now), &fresh);
    assert!(published(&out).is_empty());
}

#[test]
fn a_dialog_gone_from_the_screen_says_who_answered_it() {
    let now = Instant::now();
    let cur = || prompt("p", PromptSource::Screen, "Run ls?", &["Yes", "No"], 10_000);
    let by = |keys: Option<&(i64, String)>, desk: Option<i64>| {
        let mut d = Dialog {
            current: Some(cur()),
            answered: None,
        };
        let mut s = seen(None, now);
        s.keys_by = keys;
        s.desk_at = desk;
        let out = on_screen(&mut d, &s, &fresh);
        assert!(d.current.is_none());
        out
    };
    let keys = (10_500, "telegram:1".to_string());
    assert_eq!(
        by(Some(&keys), None),
        [
            Action::Resolved {
                id: "p".into(),
                by: "clibot",
                actor: "telegram:1".into()
            },
            Action::State(State::Working, "answered by keys")
        ]
    );
    // Keys pressed before it was shown did not answer it; a client active at the desk did.
    let old_keys = (9_000, "telegram:1".to_string());
    assert!(matches!(
        by(Some(&old_keys), Some(10))[0],
        Action::Resolved { by: "terminal", .. }
    ));
    assert!(matches!(
        by(None, None)[1],
        Action::State(State::Working, "the dialog closed")
    ));
}

#[test]
fn with_a_hook_or_the_api_in_charge_a_dialog_gone_from_the_screen_changes_nothing() {
    let now = Instant::now();
    for (pending, api) in [(true, false), (false, true)] {
        let mut d = Dialog {
            current: Some(prompt("p", PromptSource::Hook, "Bash", &[], 1)),
            answered: None,
        };
        let mut s = seen(None, now);
        s.pending = pending;
        s.api = api;
        assert!(on_screen(&mut d, &s, &fresh).is_empty());
        assert!(d.current.is_some());
    }
}

#[test]
fn a_screen_without_dialogs_ends_the_lingering() {
    let now = Instant::now();
    let mut d = Dialog {
        current: None,
        answered: Some((None, now, false)),
    };
    assert!(on_screen(&mut d, &seen(None, now), &fresh).is_empty());
    assert!(d.answered.is_none());
}
