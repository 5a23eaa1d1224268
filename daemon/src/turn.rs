//! The turn state machine, as a pure type: what a session's turn is doing, and what each thing
//! that happens to it — input submitted, output, a screen read, time passing, a completion —
//! changes and asks the driver to do.
//!
//! No tmux, no clock and no I/O here: the driver (`session/`) reads the pane, the hooks and the
//! time, hands them in as [`Facts`], [`ScreenFacts`] and `now`, and carries out the outcome
//! (typing Enter again, reading the reply, recording a state change). That keeps every rule of
//! the turn testable by table, without a terminal.
//!
//! States: starting → idle → working → (waiting ⇄ working) → idle. A turn ends by the CLI's
//! completion hook, by its API, by quiescence (CLIs without hooks: no output for `quiet` and the
//! pane back at its idle program), by the safety net (a hook-driven CLI that looked idle for
//! `idle_end` and whose hook never came), by an interruption, or — for a turn that outlived a
//! daemon restart — by the screen looking idle again.

use std::time::{Duration, Instant};

use crate::model::State;

/// After Enter, a change is expected within this time; otherwise Enter is pressed once more.
pub const CONFIRM_AFTER: Duration = Duration::from_millis(2_000);
/// A hook announced a prompt; if the screen has not shown it by then, the hook's own
/// description is published.
pub const HOOK_PROMPT_SCREEN_WAIT: Duration = Duration::from_millis(700);
/// The same, for a hook that names no options (Gemini CLI's): such a prompt cannot be answered
/// from a phone, so the dialog is given longer to appear — a loaded machine can take a second or
/// more to draw it after the hook returns.
pub const HOOK_PROMPT_NO_OPTIONS_WAIT: Duration = Duration::from_millis(4_000);
/// A busy frame this soon after a turn completed is a leftover of that turn, not a new one
/// (for CLIs whose turns start from the screen: no start hook).
pub const AFTER_TURN_SETTLE: Duration = Duration::from_millis(2_000);
/// How long a turn that outlived a daemon restart must look idle before it is taken as ended
/// (its completion hook may have fired while no daemon listened). Without a later screen read
/// the safety net ends it after `idle_end`.
pub const RECOVERED_SETTLE: Duration = Duration::from_millis(1_500);
/// A hook-driven CLI whose screen never looks ready (an unknown version) is taken as ready after
/// this long without output. Generous: Gemini CLI can be silent for 10 s while it loads, and text
/// typed before it reads the terminal is lost.
pub const STARTUP_QUIET: Duration = Duration::from_secs(20);

/// The turn's part of a session, kept beside its record.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// When the pane last printed something.
    pub last_output: Instant,
    /// When the current turn's input was submitted (or the turn was seen to start).
    pub started: Option<Instant>,
    /// Absolute pane line where the current turn's output begins (for screen replies).
    pub anchor: Option<i64>,
    /// How many lines the submitted input itself takes on screen.
    pub input_lines: usize,
    /// Enter was pressed; a visible change or a start hook confirms it before this instant.
    pub confirm_by: Option<Instant>,
    /// How many times Enter was pressed again for the current input.
    pub confirm_tries: u8,
    /// A hook announced the current prompt and the screen has not shown it yet.
    pub prompt_pending_since: Option<Instant>,
    /// The turn was already running when this daemon started: its hooks may have fired while
    /// no daemon listened, so the screen decides when it is over.
    pub recovered: bool,
    /// Since when the screen of a working hook-driven CLI has looked idle (the safety net).
    pub idle_since: Option<Instant>,
    /// When the last turn completed.
    pub last_completed: Option<Instant>,
    /// The last turn was ended by the safety net: its completion hook may still come late.
    pub net_closed: bool,
    /// Since when the screen has shown the "interrupted" look without a break.
    pub interrupted_since: Option<Instant>,
    /// When a hook last said the turn runs (it started, it asks).
    pub hook_at: Option<Instant>,
}

/// What the CLI's integration and the config make of turns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Caps {
    /// Its turns end by a completion hook (else by quiescence).
    pub by_hook: bool,
    /// It tells by hook when it takes input, and its hooks reach the daemon.
    pub start_hook: bool,
    /// Its screen shows when it works, which confirms an Enter (Codex).
    pub confirms_by_screen: bool,
    /// It serves an API the daemon follows (OpenCode), and the link has not given up.
    pub awaits_api: bool,
    /// That API is connected now.
    pub api_connected: bool,
    /// It serves an API at all (when the link gave up, quiescence ends its turns).
    pub serves_api: bool,
    /// Quiet time that ends a turn read off the screen.
    pub quiet: Duration,
    /// The safety net's wait.
    pub idle_end: Duration,
    /// No output for this long while working is a stall (reported, never acted on).
    pub stall_after: Duration,
}

/// What the session's record says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Facts {
    pub state: State,
    /// Already reported as stalled this turn.
    pub stalled: bool,
    /// The prompt waiting, if any: whether it names options.
    pub prompt: Option<bool>,
}

/// What one screen read shows, as far as the turn is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ScreenFacts {
    pub busy: bool,
    pub idle: bool,
    pub ready: bool,
    pub settled: bool,
    pub interrupted: bool,
    /// A dialog is on screen (or one is recorded): prompts, not the turn, decide then.
    pub dialog: bool,
    /// The screen shows a dialog, whether or not it counts (an API's dialogs come through it).
    pub prompt_on_screen: bool,
    /// The driver already changed the state for this screen (a dialog came or went).
    pub state_decided: bool,
}

/// What a tick asks the driver to do.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TickOutcome {
    /// Publish the recorded prompt: the dialog the hook announced never showed.
    pub publish_prompt: bool,
    /// Report a stall after this many silent milliseconds.
    pub stalled: Option<u64>,
    /// Press Enter again: nothing confirmed the last one.
    pub retry_enter: bool,
    /// The CLI is ready (it stayed quiet long enough after starting).
    pub ready: bool,
    /// Look at the screen once more and end the turn if it still looks idle (the safety net).
    pub net: bool,
    /// The pane went quiet: end the turn with what it printed from this anchor, unless its
    /// foreground program shows a command still running.
    pub complete_from_screen: Option<(Option<i64>, usize)>,
}

/// What a screen read asks the driver to do.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScreenOutcome {
    pub state_to: Option<(State, &'static str)>,
    /// Type the next queued input.
    pub deliver: bool,
    /// A turn that outlived a daemon restart is over: end it with the transcript's reply.
    pub recovered_turn: bool,
}

impl Turn {
    /// A turn table for a session whose pane was last heard from at `now`.
    pub fn new(now: Instant) -> Turn {
        Turn {
            last_output: now,
            started: None,
            anchor: None,
            input_lines: 0,
            confirm_by: None,
            confirm_tries: 0,
            prompt_pending_since: None,
            recovered: false,
            idle_since: None,
            last_completed: None,
            net_closed: false,
            interrupted_since: None,
            hook_at: None,
        }
    }

    /// Input was typed and submitted at `now`; `by_api`: the CLI's API took it (nothing to
    /// confirm on screen).
    pub fn submitted(
        &mut self,
        now: Instant,
        anchor: Option<i64>,
        input_lines: usize,
        by_api: bool,
    ) {
        self.started = Some(now);
        self.recovered = false;
        self.anchor = anchor;
        self.input_lines = input_lines.max(1);
        self.confirm_by = (!by_api).then_some(now + CONFIRM_AFTER);
        self.confirm_tries = 0;
        self.last_output = now;
    }

    /// The turn ended at `now`, however.
    pub fn completed(&mut self, now: Instant) {
        self.started = None;
        self.idle_since = None;
        self.net_closed = false;
        self.recovered = false;
        self.last_completed = Some(now);
        self.confirm_by = None;
    }

    /// The pane printed something at `now`. Output after Enter confirms the input arrived —
    /// unless the CLI's start hook or its busy screen tells that (`c`): then output may be just
    /// the echo of text that sits unsent in the composer (Gemini CLI ignores an Enter that comes
    /// while it finishes the previous turn).
    pub fn output(&mut self, now: Instant, c: Option<&Caps>) {
        self.last_output = now;
        let confirms_by_output = c.is_none_or(|c| !c.start_hook && !c.confirms_by_screen);
        if confirms_by_output && self.confirm_by.is_some() && self.started.is_some_and(|t| now > t)
        {
            self.confirm_by = None;
        }
    }

    /// The CLI's start hook says it took the input: the turn runs, nothing to confirm, and a
    /// completion the safety net may have closed early is a new turn's.
    pub fn hook_started(&mut self, now: Instant) {
        self.hook_at = Some(now);
        self.confirm_by = None;
        self.net_closed = false;
        self.started.get_or_insert(now);
    }

    /// A completion hook came: whether it is late, for a turn the safety net already ended with
    /// this very reply (`same_reply` while idle). Either way the net's mark is spent.
    pub fn hook_completed_late(&mut self, idle_with_same_reply: bool) -> bool {
        let late = self.net_closed && idle_with_same_reply;
        self.net_closed = false;
        late
    }

    /// The turn failed (the CLI reported an error it does not recover from).
    pub fn failed(&mut self) {
        self.started = None;
    }

    /// A hook announced a prompt at `now`; the screen has yet to show it. The prompt answers
    /// the Enter, so there is nothing left to confirm.
    pub fn prompt_announced(&mut self, now: Instant) {
        self.hook_at = Some(now);
        self.prompt_pending_since = Some(now);
        self.confirm_by = None;
    }

    /// The prompt is on screen (or came through the CLI's API): nothing pending.
    pub fn prompt_shown(&mut self) {
        self.prompt_pending_since = None;
        self.confirm_by = None;
    }

    /// The prompt went away (answered, withdrawn): nothing pending.
    pub fn prompt_resolved(&mut self) {
        self.prompt_pending_since = None;
    }

    /// The safety net looked again and the CLI no longer looks idle: its clock starts over.
    pub fn not_idle(&mut self) {
        self.idle_since = None;
    }

    /// The safety net ended the turn: its completion hook may still come, late.
    pub fn net_ended(&mut self) {
        self.net_closed = true;
    }

    /// The prompt was answered at `now`: the turn goes on, and its output clock restarts.
    pub fn answered(&mut self, now: Instant) {
        self.prompt_pending_since = None;
        self.last_output = now;
        self.started.get_or_insert(now);
    }

    /// Time passed: what it settles.
    pub fn tick(&mut self, f: &Facts, c: &Caps, now: Instant) -> TickOutcome {
        let mut out = TickOutcome::default();
        let silent = now.saturating_duration_since(self.last_output);
        let since = |t: Instant| now.saturating_duration_since(t);
        if f.state == State::Working
            && c.by_hook
            && !c.awaits_api
            && self.idle_since.is_some_and(|t| since(t) >= c.idle_end)
            && self.started.is_none_or(|t| since(t) >= c.idle_end)
        {
            out.net = true;
        }
        let screen_wait = match f.prompt {
            Some(false) => HOOK_PROMPT_NO_OPTIONS_WAIT,
            _ => HOOK_PROMPT_SCREEN_WAIT,
        };
        if let Some(t) = self.prompt_pending_since
            && since(t) > screen_wait
        {
            self.prompt_pending_since = None;
            out.publish_prompt = f.prompt.is_some();
        }
        if let Some(by) = self.confirm_by
            && now > by
        {
            self.confirm_by = None;
            // Confirmed by its start hook or its busy screen, a CLI may be asked a few times;
            // by output, once.
            let tries = if c.start_hook || c.confirms_by_screen {
                3
            } else {
                1
            };
            if self.confirm_tries < tries {
                self.confirm_tries += 1;
                out.retry_enter = true;
                if self.confirm_tries < tries {
                    self.confirm_by = Some(now + CONFIRM_AFTER);
                }
            }
        }
        match f.state {
            // A CLI whose API link gave up falls back to quiescence, like any program.
            State::Working
                if (!c.by_hook || (c.serves_api && !c.awaits_api))
                    && self.started.is_some_and(|t| since(t) >= c.quiet)
                    && silent >= c.quiet =>
            {
                out.complete_from_screen = Some((self.anchor.take(), self.input_lines));
                self.started = None;
            }
            State::Starting if silent >= STARTUP_QUIET && (!c.awaits_api || c.api_connected) => {
                out.ready = true
            }
            _ => {}
        }
        if f.state == State::Working && silent >= c.stall_after && !f.stalled {
            out.stalled = Some(u64::try_from(silent.as_millis()).unwrap_or(u64::MAX));
        }
        out
    }

    /// A quiet pane whose foreground still runs a command (`sleep 6` in a shell) is not done:
    /// the turn is put back, from `now`, with its anchor.
    pub fn still_running(&mut self, now: Instant, anchor: Option<i64>) {
        self.started = Some(now);
        self.anchor = anchor;
    }

    /// A screen read: what it means for the turn (prompts aside: the driver handles dialogs).
    pub fn screen(&mut self, f: &Facts, s: &ScreenFacts, c: &Caps, now: Instant) -> ScreenOutcome {
        let mut out = ScreenOutcome::default();
        // An interrupted look means this turn was interrupted only when it appeared after the
        // turn began and after a hook last said the turn runs: one left on screen by an
        // earlier refusal (it stays there, text typed under it) never ends a later turn — the
        // hook wins over the screen.
        let since = if s.interrupted {
            *self.interrupted_since.get_or_insert(now)
        } else {
            self.interrupted_since = None;
            now
        };
        let fresh_interrupt = s.interrupted
            && self.started.is_none_or(|t| since > t)
            && self.hook_at.is_none_or(|t| since > t);
        // The CLI shows it works on the input: submitted.
        if s.busy && self.confirm_by.is_some() && self.started.is_some() && c.confirms_by_screen {
            self.confirm_by = None;
        }
        // A CLI with an API is ready when the API is: input goes through it, so the TUI need
        // not have settled. Without one, the screen says.
        let ready = if c.awaits_api {
            c.api_connected
        } else {
            (s.idle && s.ready) || !c.by_hook
        };
        if !s.dialog {
            match f.state {
                State::Starting if ready => {
                    out.state_to = Some((State::Idle, "ready"));
                    out.deliver = true;
                }
                State::Working | State::Waiting if fresh_interrupt && c.by_hook => {
                    // Claude Code fires no Stop hook for an interrupted turn.
                    out.state_to = Some((State::Idle, "interrupted"));
                    self.started = None;
                    out.deliver = true;
                }
                // With the CLI's API connected, it says when a turn runs, and with a start hook
                // the hook does: a busy footer that lingers after the turn ended says nothing.
                // Without either, a busy screen is a turn started at the desk, unless it is the
                // frame right after a completion.
                State::Idle | State::Error
                    if s.busy
                        && !c.api_connected
                        && !c.start_hook
                        && self.last_completed.is_none_or(|t| {
                            now.saturating_duration_since(t) >= AFTER_TURN_SETTLE
                        }) =>
                {
                    self.started.get_or_insert(now);
                    self.net_closed = false;
                    out.state_to = Some((State::Working, "busy"));
                }
                // A CLI with an API says itself when the recovered turn ended; its screen may
                // look idle while it thinks. Without one, the idle look must last a moment: a
                // CLI waiting on its model can show an idle frame between two busy ones.
                State::Working
                    if c.by_hook
                        && self.recovered
                        && s.idle
                        && !s.busy
                        && !c.awaits_api
                        && self.idle_since.is_some_and(|t| {
                            now.saturating_duration_since(t) >= RECOVERED_SETTLE
                        }) =>
                {
                    self.recovered = false;
                    out.recovered_turn = true;
                }
                _ => {}
            }
        }
        // The safety net's clock: how long a working hook-driven CLI has looked idle.
        if f.state == State::Working
            && c.by_hook
            && !c.awaits_api
            && out.state_to.is_none()
            && !s.state_decided
            && s.settled
            && !s.prompt_on_screen
            && f.prompt.is_none()
        {
            self.idle_since.get_or_insert(now);
        } else {
            self.idle_since = None;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn caps(by_hook: bool) -> Caps {
        Caps {
            by_hook,
            start_hook: false,
            confirms_by_screen: false,
            awaits_api: false,
            api_connected: false,
            serves_api: false,
            quiet: 300 * MS,
            idle_end: 5_000 * MS,
            stall_after: 600_000 * MS,
        }
    }

    fn facts(state: State) -> Facts {
        Facts {
            state,
            stalled: false,
            prompt: None,
        }
    }

    #[test]
    fn output_confirms_an_enter_only_where_nothing_better_does() {
        let t0 = Instant::now();
        // (start hook, busy screen confirms, output confirms)
        for (start_hook, by_screen, confirms) in [
            (false, false, true),
            (true, false, false),
            (false, true, false),
        ] {
            let mut t = Turn::new(t0);
            t.submitted(t0, None, 1, false);
            let c = Caps {
                start_hook,
                confirms_by_screen: by_screen,
                ..caps(true)
            };
            t.output(t0 + 50 * MS, Some(&c));
            assert_eq!(t.confirm_by.is_none(), confirms, "{start_hook} {by_screen}");
        }
    }

    #[test]
    fn hooks_start_end_and_announce() {
        let t0 = Instant::now();
        let mut t = Turn::new(t0);
        t.submitted(t0, None, 1, false);
        t.hook_started(t0 + MS);
        assert_eq!((t.confirm_by, t.started), (None, Some(t0)));
        t.net_closed = true;
        assert!(
            t.hook_completed_late(true),
            "the net ended it with this reply"
        );
        assert!(!t.hook_completed_late(true), "the mark is spent");
        t.prompt_announced(t0 + 2 * MS);
        assert_eq!(t.prompt_pending_since, Some(t0 + 2 * MS));
        t.answered(t0 + 3 * MS);
        assert_eq!((t.prompt_pending_since, t.last_output), (None, t0 + 3 * MS));
        t.failed();
        assert_eq!(t.started, None);
    }

    #[test]
    fn quiescence_ends_a_hookless_turn_only_after_quiet() {
        let t0 = Instant::now();
        // (ms since input, ms since output, completes)
        let table = [
            (100, 100, false),
            (400, 100, false),
            (400, 300, true),
            (1000, 1000, true),
        ];
        for (since_input, since_output, completes) in table {
            let mut t = Turn::new(t0);
            t.submitted(t0, Some(7), 1, false);
            let now = t0 + since_input * MS;
            t.output(now - since_output * MS, Some(&caps(false)));
            let out = t.tick(&facts(State::Working), &caps(false), now);
            assert_eq!(
                out.complete_from_screen.is_some(),
                completes,
                "{since_input}/{since_output}"
            );
            if completes {
                assert_eq!(out.complete_from_screen, Some((Some(7), 1)));
                assert_eq!(t.started, None);
            }
        }
    }

    #[test]
    fn a_hook_driven_turn_waits_for_its_hook_and_the_net_catches_a_lost_one() {
        let t0 = Instant::now();
        let c = caps(true);
        let mut t = Turn::new(t0);
        t.submitted(t0, None, 1, false);
        let idle = ScreenFacts {
            idle: true,
            ready: true,
            settled: true,
            ..Default::default()
        };
        let f = facts(State::Working);
        assert_eq!(
            t.screen(&f, &idle, &c, t0 + 100 * MS),
            ScreenOutcome::default()
        );
        // Quiet for long, but hook-driven: no quiescence.
        assert_eq!(t.tick(&f, &c, t0 + 2_000 * MS).complete_from_screen, None);
        assert!(!t.tick(&f, &c, t0 + 4_000 * MS).net);
        assert!(t.tick(&f, &c, t0 + 5_200 * MS).net, "the safety net");
        // A dialog stops the net's clock.
        let dialog = ScreenFacts {
            dialog: true,
            prompt_on_screen: true,
            ..idle
        };
        t.screen(&f, &dialog, &c, t0 + 5_300 * MS);
        assert_eq!(t.idle_since, None);
    }

    #[test]
    fn an_unconfirmed_enter_is_pressed_again_once_or_three_times() {
        let t0 = Instant::now();
        for (c, tries) in [
            (caps(false), 1),
            (
                Caps {
                    start_hook: true,
                    ..caps(true)
                },
                3,
            ),
        ] {
            let mut t = Turn::new(t0);
            t.submitted(t0, None, 1, false);
            let mut pressed = 0;
            let mut now = t0;
            for _ in 0..6 {
                now += CONFIRM_AFTER + MS;
                if t.tick(&facts(State::Working), &c, now).retry_enter {
                    pressed += 1;
                }
            }
            assert_eq!(pressed, tries);
        }
        // Input through an API has nothing to confirm.
        let mut t = Turn::new(t0);
        t.submitted(t0, None, 1, true);
        assert!(
            !t.tick(&facts(State::Working), &caps(false), t0 + 3 * CONFIRM_AFTER)
                .retry_enter
        );
    }

    #[test]
    fn an_interrupted_look_older_than_the_turn_or_its_hook_ends_nothing() {
        let t0 = Instant::now();
        let interrupted = ScreenFacts {
            interrupted: true,
            idle: true,
            ready: true,
            settled: true,
            ..Default::default()
        };
        let hooked = Caps {
            start_hook: true,
            ..caps(true)
        };
        // Left on screen by a refusal before this turn was submitted: the turn goes on.
        let mut t = Turn::new(t0);
        t.screen(&facts(State::Idle), &interrupted, &hooked, t0 + 100 * MS);
        t.submitted(t0 + 200 * MS, None, 1, false);
        let out = t.screen(&facts(State::Working), &interrupted, &hooked, t0 + 300 * MS);
        assert_eq!(out.state_to, None);
        t.hook_started(t0 + 400 * MS);
        let out = t.screen(&facts(State::Working), &interrupted, &hooked, t0 + 500 * MS);
        assert_eq!(out.state_to, None, "the hook says it runs");
        // Gone, then shown again after the hook: an interrupt of this turn.
        let busy = ScreenFacts {
            busy: true,
            ..Default::default()
        };
        t.screen(&facts(State::Working), &busy, &hooked, t0 + 600 * MS);
        let out = t.screen(&facts(State::Working), &interrupted, &hooked, t0 + 700 * MS);
        assert_eq!(out.state_to.map(|(s, _)| s), Some(State::Idle));
    }

    #[test]
    fn screens_move_the_state() {
        let t0 = Instant::now();
        let busy = ScreenFacts {
            busy: true,
            ..Default::default()
        };
        let idle = ScreenFacts {
            idle: true,
            ready: true,
            settled: true,
            ..Default::default()
        };
        let interrupted = ScreenFacts {
            interrupted: true,
            ..idle
        };
        let start_hook = Caps {
            start_hook: true,
            ..caps(true)
        };
        // (state, screen, caps, recovered, ms since last completion, expected state, recovered turn)
        type Row = (
            State,
            ScreenFacts,
            Caps,
            bool,
            Option<u32>,
            Option<State>,
            bool,
        );
        let table: [Row; 8] = [
            (
                State::Starting,
                idle,
                caps(true),
                false,
                None,
                Some(State::Idle),
                false,
            ),
            (State::Starting, busy, caps(true), false, None, None, false),
            (
                State::Starting,
                busy,
                caps(false),
                false,
                None,
                Some(State::Idle),
                false,
            ),
            (
                State::Idle,
                busy,
                caps(true),
                false,
                None,
                Some(State::Working),
                false,
            ),
            (State::Idle, busy, caps(true), false, Some(500), None, false),
            (State::Idle, busy, start_hook, false, None, None, false),
            (
                State::Working,
                interrupted,
                caps(true),
                false,
                None,
                Some(State::Idle),
                false,
            ),
            (State::Working, idle, caps(true), true, None, None, true),
        ];
        for (state, s, c, recovered, completed, want, want_recovered) in table {
            let mut t = Turn::new(t0);
            t.recovered = recovered;
            let now = t0 + 10_000 * MS;
            // A recovered turn's screen has looked idle for a while already.
            if recovered {
                t.idle_since = Some(now - RECOVERED_SETTLE);
            }
            t.last_completed = completed.map(|ms| now - ms * MS);
            let out = t.screen(&facts(state), &s, &c, now);
            assert_eq!(out.state_to.map(|(s, _)| s), want, "{state:?} {s:?}");
            assert_eq!(out.recovered_turn, want_recovered, "{state:?} {s:?}");
        }
    }

    #[test]
    fn a_recovered_turn_ends_only_once_its_screen_has_stayed_idle() {
        let t0 = Instant::now();
        let idle = ScreenFacts {
            idle: true,
            ready: true,
            settled: true,
            ..Default::default()
        };
        let mut t = Turn::new(t0);
        t.recovered = true;
        t.started = Some(t0);
        let f = facts(State::Working);
        // The first idle frame starts the clock; it does not end the turn.
        assert!(
            !t.screen(&f, &idle, &caps(true), t0 + 100 * MS)
                .recovered_turn
        );
        assert!(
            !t.screen(&f, &idle, &caps(true), t0 + 900 * MS)
                .recovered_turn
        );
        // A busy frame in between starts it over.
        let busy = ScreenFacts {
            busy: true,
            ..Default::default()
        };
        t.screen(&f, &busy, &caps(true), t0 + 1_000 * MS);
        assert!(
            !t.screen(&f, &idle, &caps(true), t0 + 1_700 * MS)
                .recovered_turn
        );
        assert!(
            t.screen(&f, &idle, &caps(true), t0 + 3_300 * MS)
                .recovered_turn
        );
    }

    #[test]
    fn a_waiting_prompt_the_screen_never_showed_is_published_after_its_wait() {
        let t0 = Instant::now();
        for (options, wait) in [
            (true, HOOK_PROMPT_SCREEN_WAIT),
            (false, HOOK_PROMPT_NO_OPTIONS_WAIT),
        ] {
            let mut t = Turn::new(t0);
            t.prompt_pending_since = Some(t0);
            let f = Facts {
                prompt: Some(options),
                ..facts(State::Waiting)
            };
            assert!(!t.tick(&f, &caps(true), t0 + wait).publish_prompt);
            assert!(t.tick(&f, &caps(true), t0 + wait + MS).publish_prompt);
            assert!(
                !t.tick(&f, &caps(true), t0 + wait + 2 * MS).publish_prompt,
                "once"
            );
        }
    }

    #[test]
    fn a_long_silence_is_a_stall_and_a_quiet_start_is_ready() {
        let t0 = Instant::now();
        let mut t = Turn::new(t0);
        t.submitted(t0, None, 1, true);
        let c = Caps {
            stall_after: 1_000 * MS,
            ..caps(true)
        };
        assert_eq!(
            t.tick(&facts(State::Working), &c, t0 + 1_500 * MS).stalled,
            Some(1_500)
        );
        let stalled = Facts {
            stalled: true,
            ..facts(State::Working)
        };
        assert_eq!(
            t.tick(&stalled, &c, t0 + 3_000 * MS).stalled,
            None,
            "told once"
        );
        let mut t = Turn::new(t0);
        assert!(
            !t.tick(&facts(State::Starting), &c, t0 + STARTUP_QUIET - MS)
                .ready
        );
        assert!(
            t.tick(&facts(State::Starting), &c, t0 + STARTUP_QUIET)
                .ready
        );
    }
}
