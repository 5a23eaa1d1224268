//! What became of each automatic answer, kept in `automation.json` in the state directory so
//! that it outlives the daemon: per rule and for the decider, how many prompts it answered
//! (approved or denied) and left to a person, when it last fired, and what followed each
//! answer — the turn completed, it errored (an error, or the CLI ended), the user undid it (an
//! interrupt key or a stop within [`UNDO_WINDOW_MS`] of the answer), or nothing yet.
//!
//! Small and bounded: one row per rule (by its description, so that a reordered config keeps
//! its history; at most [`MAX_ROWS`]), the answers still waiting for their outcome (at most
//! [`MAX_PENDING`]), and the latest [`RECENT`] answers with theirs. The file is replaced
//! atomically at each change (answers are rare next to events). It stores what it is told: the
//! daemon decides what an event means for an answer.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::store::json_file::JsonFile;

/// An interrupt or a stop this soon after an answer undoes it.
pub const UNDO_WINDOW_MS: i64 = 60_000;
/// Rows kept: past this, the one that fired longest ago goes (never the decider's).
pub const MAX_ROWS: usize = 256;
/// Answers waiting for their outcome; past this the oldest is no longer followed (it stays
/// counted as pending).
pub const MAX_PENDING: usize = 1024;
/// The latest answers kept with their outcome.
pub const RECENT: usize = 50;

/// The decider's row key.
pub const DECIDER: &str = "decider";

/// What followed an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Nothing yet (or the session ended later than the undo window without either).
    Pending,
    /// The turn the answer belonged to completed.
    Completed,
    /// An error came next, or the CLI ended.
    Errored,
    /// The user interrupted the CLI or stopped the session within the undo window.
    Undone,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pending => "pending",
            Outcome::Completed => "completed",
            Outcome::Errored => "errored",
            Outcome::Undone => "undone",
        }
    }
}

/// One rule's (or the decider's) tally.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Row {
    /// [`DECIDER`], or `rule: ` and the rule's description.
    pub key: String,
    /// The rule's number when it last fired (0 for the decider).
    pub index: u32,
    /// The rule's description ("allow when cli=claude kind=permission|confirm command=git
    /// status"); empty for the decider.
    pub about: String,
    pub answers: u64,
    pub approved: u64,
    pub denied: u64,
    pub completed: u64,
    pub errored: u64,
    pub undone: u64,
    pub left_to_person: u64,
    /// When it last answered or left a prompt to a person (ms since the epoch).
    pub last_fired_ms: i64,
}

impl Row {
    /// Answers with no outcome yet.
    pub fn pending(&self) -> u64 {
        self.answers
            .saturating_sub(self.completed)
            .saturating_sub(self.errored)
            .saturating_sub(self.undone)
    }

    fn count(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Pending => {}
            Outcome::Completed => self.completed += 1,
            Outcome::Errored => self.errored += 1,
            Outcome::Undone => self.undone += 1,
        }
    }
}

/// One automatic answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Answer {
    pub prompt_id: String,
    pub session: String,
    /// The row it counts in.
    pub key: String,
    /// "rule 2" or "decider".
    pub by: String,
    /// What the prompt was about (the command, the file, the question's first line).
    pub subject: String,
    /// A yes (false: a no).
    pub approved: bool,
    /// The option chosen.
    pub answer: String,
    pub at_ms: i64,
    pub outcome: Option<Outcome>,
    /// When the outcome was known.
    pub outcome_ms: i64,
    /// What came (the error, how the CLI ended, the keys).
    pub detail: String,
}

impl Answer {
    pub fn outcome(&self) -> Outcome {
        self.outcome.unwrap_or(Outcome::Pending)
    }
}

/// What the file holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Book {
    pub version: u32,
    /// Since when answers are counted (the file's creation).
    pub since_ms: i64,
    pub rows: Vec<Row>,
    /// Answers waiting for their outcome, oldest first.
    pub pending: Vec<Answer>,
    /// The latest answers, oldest first, with their outcome once known.
    pub recent: Vec<Answer>,
}

impl Book {
    pub fn new(now_ms: i64) -> Book {
        Book {
            version: 1,
            since_ms: now_ms,
            ..Default::default()
        }
    }

    fn row(&mut self, key: &str, index: u32, about: &str) -> &mut Row {
        let i = match self.rows.iter().position(|r| r.key == key) {
            Some(i) => i,
            None => {
                if self.rows.len() >= MAX_ROWS
                    && let Some(oldest) = self
                        .rows
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| r.key != DECIDER)
                        .min_by_key(|(_, r)| r.last_fired_ms)
                        .map(|(i, _)| i)
                {
                    self.rows.remove(oldest);
                }
                self.rows.push(Row {
                    key: key.to_string(),
                    ..Default::default()
                });
                self.rows.len() - 1
            }
        };
        let r = &mut self.rows[i];
        r.index = index;
        r.about = about.to_string();
        r
    }

    /// An answer was given, by the rule numbered `index` described as `about` (0 and "" for
    /// the decider).
    pub fn answered(&mut self, a: Answer, index: u32, about: &str) {
        let r = self.row(&a.key, index, about);
        r.answers += 1;
        if a.approved {
            r.approved += 1;
        } else {
            r.denied += 1;
        }
        r.last_fired_ms = r.last_fired_ms.max(a.at_ms);
        if self.pending.len() >= MAX_PENDING {
            self.pending.remove(0);
        }
        self.pending.push(a.clone());
        if self.recent.len() >= RECENT {
            self.recent.remove(0);
        }
        self.recent.push(a);
    }

    /// A prompt went to a person although this rule (or the decider) looked at it.
    pub fn left_to_person(&mut self, key: &str, index: u32, about: &str, now_ms: i64) {
        let r = self.row(key, index, about);
        r.left_to_person += 1;
        r.last_fired_ms = r.last_fired_ms.max(now_ms);
    }

    /// Whether answers in `session` wait for their outcome.
    pub fn has_pending(&self, session: &str) -> bool {
        self.pending.iter().any(|a| a.session == session)
    }

    /// `outcome` for the answers in `session` that wait for one: all of them, or for
    /// [`Outcome::Undone`] those given within the undo window before `now_ms`. Returns how
    /// many were settled.
    pub fn settle(&mut self, session: &str, outcome: Outcome, detail: &str, now_ms: i64) -> usize {
        self.settle_where(
            |a| {
                a.session == session
                    && (outcome != Outcome::Undone || now_ms - a.at_ms <= UNDO_WINDOW_MS)
            },
            outcome,
            detail,
            now_ms,
        )
    }

    fn settle_where(
        &mut self,
        applies: impl Fn(&Answer) -> bool,
        outcome: Outcome,
        detail: &str,
        now_ms: i64,
    ) -> usize {
        let (done, keep): (Vec<Answer>, Vec<Answer>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|a| applies(a));
        self.pending = keep;
        for a in &done {
            if let Some(r) = self.rows.iter_mut().find(|r| r.key == a.key) {
                r.count(outcome);
            }
            if let Some(x) = self.recent.iter_mut().find(|x| x.prompt_id == a.prompt_id) {
                x.outcome = Some(outcome);
                x.outcome_ms = now_ms;
                x.detail = detail.chars().take(200).collect();
            }
        }
        done.len()
    }

    /// No longer follows the answers waiting in `session` (it went away): they stay pending.
    pub fn forget(&mut self, session: &str) -> usize {
        let before = self.pending.len();
        self.pending.retain(|a| a.session != session);
        before - self.pending.len()
    }

    /// Drops what cannot be used (a hand-edited or damaged file) and keeps the bounds.
    fn tidy(&mut self) {
        self.rows.retain(|r| !r.key.is_empty());
        let cut = |v: &mut Vec<Answer>, max: usize| {
            v.retain(|a| !a.prompt_id.is_empty() && !a.key.is_empty());
            let extra = v.len().saturating_sub(max);
            v.drain(..extra);
        };
        cut(&mut self.pending, MAX_PENDING);
        cut(&mut self.recent, RECENT);
        self.rows.truncate(MAX_ROWS);
    }
}

/// What an automatic answer is, told before it is given: its `prompt_resolved` event then
/// counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    pub key: String,
    pub index: u32,
    pub about: String,
    pub by: String,
    pub subject: String,
    pub approved: bool,
    pub answer: String,
}

/// An answer announced and not given yet: what it is, and the first outcome that came
/// meanwhile (the CLI can print its error before the answer's own event is written).
struct Announced {
    session: String,
    expected: Expected,
    first: Option<(Outcome, String)>,
}

struct State {
    book: Book,
    announced: HashMap<String, Announced>,
}

/// The book and its file.
pub struct Outcomes {
    file: JsonFile,
    state: Mutex<State>,
}

impl Outcomes {
    /// Reads `automation.json` in `state_dir`; a file that is not what it should be is set
    /// aside (`automation.json.corrupt-<ms>`) and counting starts again, said in the warning.
    pub fn open(state_dir: &Path, now_ms: i64) -> (Outcomes, Option<String>) {
        let (book, file, warning): (Option<Book>, _, _) = JsonFile::open(
            state_dir,
            "automation.json",
            "the automation outcomes",
            "counting starts again",
        );
        let book = match book {
            Some(mut b) => {
                b.tidy();
                b
            }
            None => Book::new(now_ms),
        };
        (
            Outcomes {
                file,
                state: Mutex::new(State {
                    book,
                    announced: HashMap::new(),
                }),
            },
            warning,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, book: &Book) {
        self.file.save(book);
    }

    /// An automatic answer to prompt `prompt_id` of `session` is about to be given.
    pub fn expect(&self, session: &str, prompt_id: &str, expected: Expected) {
        let mut st = self.lock();
        if st.announced.len() >= MAX_PENDING {
            st.announced.clear();
        }
        st.announced.insert(
            prompt_id.to_string(),
            Announced {
                session: session.to_string(),
                expected,
                first: None,
            },
        );
    }

    /// The answer to `prompt_id` was not given after all.
    pub fn unexpect(&self, prompt_id: &str) {
        self.lock().announced.remove(prompt_id);
    }

    /// Prompt `prompt_id` of `session` was resolved by `by`: counted when it is the automatic
    /// answer announced for it (and settled at once when its outcome came first).
    pub fn resolved(&self, session: &str, prompt_id: &str, by: &str, now_ms: i64) {
        let mut st = self.lock();
        let Some(a) = st.announced.remove(prompt_id) else {
            return;
        };
        if a.expected.by != by {
            return;
        }
        let e = a.expected;
        st.book.answered(
            Answer {
                prompt_id: prompt_id.to_string(),
                session: session.to_string(),
                key: e.key,
                by: e.by,
                subject: e.subject,
                approved: e.approved,
                answer: e.answer,
                at_ms: now_ms,
                ..Default::default()
            },
            e.index,
            &e.about,
        );
        if let Some((outcome, detail)) = a.first {
            st.book
                .settle_where(|x| x.prompt_id == prompt_id, outcome, &detail, now_ms);
        }
        self.save(&st.book);
    }

    /// A prompt went to a person although rule `index` (or the decider) looked at it.
    pub fn left_to_person(&self, key: &str, index: u32, about: &str, now_ms: i64) {
        let mut st = self.lock();
        st.book.left_to_person(key, index, about, now_ms);
        self.save(&st.book);
    }

    /// Whether answers in `session` wait for their outcome, given or announced (cheap: asked
    /// for every event).
    pub fn has_pending(&self, session: &str) -> bool {
        let st = self.lock();
        st.book.has_pending(session) || st.announced.values().any(|a| a.session == session)
    }

    /// See [`Book::settle`]; saved when something changed. An answer announced and not yet
    /// given keeps the first outcome for when it is.
    pub fn settle(&self, session: &str, outcome: Outcome, detail: &str, now_ms: i64) {
        let mut st = self.lock();
        for a in st.announced.values_mut() {
            if a.session == session && a.first.is_none() {
                a.first = Some((outcome, detail.to_string()));
            }
        }
        if st.book.settle(session, outcome, detail, now_ms) > 0 {
            self.save(&st.book);
        }
    }

    /// See [`Book::forget`].
    pub fn forget(&self, session: &str) {
        let mut st = self.lock();
        if st.book.forget(session) > 0 {
            self.save(&st.book);
        }
    }

    /// The book as it stands.
    pub fn book(&self) -> Book {
        self.lock().book.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(key: &str, by: &str, approved: bool) -> Expected {
        Expected {
            key: key.into(),
            index: 1,
            about: "allow when cli=asker".into(),
            by: by.into(),
            subject: "git status".into(),
            approved,
            answer: if approved { "y" } else { "n" }.into(),
        }
    }

    fn row<'a>(b: &'a Book, key: &str) -> &'a Row {
        b.rows.iter().find(|r| r.key == key).expect("row")
    }

    #[test]
    fn each_answer_gets_the_first_outcome_that_follows_it() {
        let d = tempfile::tempdir().expect("tempdir");
        let (o, w) = Outcomes::open(d.path(), 1_000);
        assert_eq!(w, None);
        // Completed: two answers in one turn, both settled by its completion.
        o.expect("s1", "p1", expected("rule: a", "rule 1", true));
        o.resolved("s1", "p1", "rule 1", 10_000);
        o.expect("s1", "p2", expected("rule: a", "rule 1", false));
        o.resolved("s1", "p2", "rule 1", 11_000);
        assert!(o.has_pending("s1"));
        o.settle("s1", Outcome::Completed, "", 12_000);
        assert!(!o.has_pending("s1"));
        // A later error is not theirs.
        o.settle("s1", Outcome::Errored, "usage_limit", 13_000);
        // Undone within the window; an interrupt later than that undoes nothing.
        o.expect("s2", "p3", expected("rule: b", "rule 2", true));
        o.resolved("s2", "p3", "rule 2", 20_000);
        o.settle("s2", Outcome::Undone, "C-c", 20_000 + UNDO_WINDOW_MS);
        o.expect("s2", "p4", expected("rule: b", "rule 2", true));
        o.resolved("s2", "p4", "rule 2", 100_000);
        o.settle("s2", Outcome::Undone, "Escape", 100_001 + UNDO_WINDOW_MS);
        assert!(o.has_pending("s2"));
        o.settle("s2", Outcome::Errored, "the CLI exited", 200_000);
        // The decider; and an answer resolved by someone else is not counted.
        o.expect("s3", "p5", expected(DECIDER, "decider", true));
        o.resolved("s3", "p5", "decider", 30_000);
        o.expect("s3", "p6", expected(DECIDER, "decider", true));
        o.resolved("s3", "p6", "clibot", 31_000);
        o.left_to_person(DECIDER, 0, "", 32_000);
        let b = o.book();
        let a = row(&b, "rule: a");
        assert_eq!(
            (
                a.answers,
                a.approved,
                a.denied,
                a.completed,
                a.errored,
                a.undone,
                a.pending()
            ),
            (2, 1, 1, 2, 0, 0, 0)
        );
        let r = row(&b, "rule: b");
        assert_eq!(
            (
                r.answers,
                r.completed,
                r.errored,
                r.undone,
                r.pending(),
                r.last_fired_ms
            ),
            (2, 0, 1, 1, 0, 100_000)
        );
        let dec = row(&b, DECIDER);
        assert_eq!(
            (
                dec.answers,
                dec.left_to_person,
                dec.pending(),
                dec.last_fired_ms
            ),
            (1, 1, 1, 32_000)
        );
        let outcomes: Vec<(&str, Outcome, &str)> = b
            .recent
            .iter()
            .map(|a| (a.prompt_id.as_str(), a.outcome(), a.detail.as_str()))
            .collect();
        assert_eq!(
            outcomes,
            vec![
                ("p1", Outcome::Completed, ""),
                ("p2", Outcome::Completed, ""),
                ("p3", Outcome::Undone, "C-c"),
                ("p4", Outcome::Errored, "the CLI exited"),
                ("p5", Outcome::Pending, ""),
            ]
        );
        // It outlives the daemon: read again, the pending answer is still followed.
        drop(o);
        let (o, w) = Outcomes::open(d.path(), 99_999);
        assert_eq!(w, None);
        assert_eq!(o.book().since_ms, 1_000);
        assert!(o.has_pending("s3"));
        o.settle("s3", Outcome::Completed, "", 40_000);
        assert_eq!(row(&o.book(), DECIDER).completed, 1);
        // A session gone: its answers are no longer followed, and stay pending.
        o.expect("s4", "p7", expected("rule: a", "rule 1", true));
        o.resolved("s4", "p7", "rule 1", 50_000);
        o.forget("s4");
        o.settle("s4", Outcome::Completed, "", 50_001);
        assert_eq!(row(&o.book(), "rule: a").pending(), 1);
        let mode = std::fs::metadata(d.path().join("automation.json"))
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
            .expect("file");
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn an_outcome_before_the_answers_own_event_is_kept_for_it() {
        let d = tempfile::tempdir().expect("tempdir");
        let (o, _) = Outcomes::open(d.path(), 0);
        o.expect("s", "p1", expected("rule: a", "rule 1", true));
        assert!(o.has_pending("s"));
        // The CLI printed its error while the answer was still being checked on screen.
        o.settle("s", Outcome::Errored, "network: refused", 10);
        o.settle("s", Outcome::Completed, "", 11);
        o.resolved("s", "p1", "rule 1", 12);
        let b = o.book();
        assert_eq!(
            (row(&b, "rule: a").errored, row(&b, "rule: a").pending()),
            (1, 0)
        );
        assert_eq!(b.recent[0].outcome(), Outcome::Errored);
        assert_eq!(b.recent[0].detail, "network: refused");
        assert!(!o.has_pending("s"));
        // An announced answer that was not given counts nothing.
        o.expect("s", "p2", expected("rule: a", "rule 1", true));
        o.settle("s", Outcome::Undone, "C-c", 20);
        o.unexpect("p2");
        o.resolved("s", "p2", "rule 1", 21);
        assert_eq!(row(&o.book(), "rule: a").answers, 1);
        assert!(!o.has_pending("s"));
    }

    #[test]
    fn it_stays_small() {
        let mut b = Book::new(0);
        for i in 0..(MAX_ROWS + 10) {
            b.left_to_person(&format!("rule: {i}"), i as u32 + 1, "", i as i64 + 1);
        }
        b.left_to_person(DECIDER, 0, "", 0);
        for i in 0..(MAX_PENDING + 5) {
            b.answered(
                Answer {
                    prompt_id: format!("p{i}"),
                    session: "s".into(),
                    key: DECIDER.into(),
                    by: "decider".into(),
                    approved: true,
                    at_ms: 1,
                    ..Default::default()
                },
                0,
                "",
            );
        }
        assert_eq!(b.rows.len(), MAX_ROWS);
        assert!(b.rows.iter().any(|r| r.key == DECIDER), "the decider stays");
        assert!(
            !b.rows.iter().any(|r| r.key == "rule: 0"),
            "the oldest rule went"
        );
        assert_eq!(b.pending.len(), MAX_PENDING);
        assert_eq!(b.recent.len(), RECENT);
        assert_eq!(b.pending[0].prompt_id, "p5");
        assert_eq!(row(&b, DECIDER).answers, MAX_PENDING as u64 + 5);
    }

    #[test]
    fn a_damaged_file_is_set_aside_and_counting_starts_again() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(d.path().join("automation.json"), "{not json").expect("write");
        let (o, w) = Outcomes::open(d.path(), 5);
        let w = w.expect("a warning");
        assert!(
            w.contains("cannot be read") && w.contains("corrupt-"),
            "{w}"
        );
        assert_eq!(o.book(), Book::new(5));
        let names: Vec<String> = std::fs::read_dir(d.path())
            .expect("ls")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names
                .iter()
                .any(|n| n.starts_with("automation.json.corrupt-")),
            "{names:?}"
        );
        // Entries that cannot be used are dropped.
        std::fs::write(
            d.path().join("automation.json"),
            r#"{"version": 1, "since_ms": 3, "rows": [{"key": ""}, {"key": "decider", "answers": 2}],
                "pending": [{"prompt_id": "", "key": "decider"}], "recent": []}"#,
        )
        .expect("write");
        let (o, w) = Outcomes::open(d.path(), 5);
        assert_eq!(w, None);
        let b = o.book();
        assert_eq!((b.rows.len(), b.pending.len(), b.since_ms), (1, 0, 3));
    }
}
