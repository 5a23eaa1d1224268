//! One tmux control client that follows the output of every watched session.
//!
//! Why one: a control client per session made every structural change on the tmux server
//! (a new session, a killed one) cost O(sessions) — tmux notifies and re-checks each client —
//! so the 300th spawn took three times as long as the first, and 500 sessions meant 500 tmux
//! client processes. tmux sends a control client the output of the panes of its own session
//! only, so clibot links every watched window into one session of its own, [`MONITOR`], and
//! follows that session with one read-only control client. A linked window is the same
//! window: a person attached to the CLI's session sees and types into it as before.
//!
//! The same client also carries clibot's own queries (screen reads, listings, links): a tmux
//! client process per query costs a fork and exec, and the server a connection handshake whose
//! every step polls all its panes — 5–7 ms each at 500 sessions. A line on the control
//! connection is answered in well under a millisecond. Only commands whose every argument
//! clibot made itself (ids, flags, formats) go this way, each argument in single quotes; text
//! from a person (typed input, paths, environment values) never passes through tmux's command
//! parser: those commands run as their own client with an argv.
//!
//! The cost of linking: killing a session no longer ends a window that is also linked into
//! the monitor. clibot kills the windows it knows of when it kills a session, and when tmux
//! reports a window unlinked (a person ran `tmux kill-session`), the monitor kills every window
//! that is left linked to the monitor alone, so the CLI ends as it would have.

use std::collections::{HashMap, HashSet, VecDeque};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use tmux_interface::TmuxCommand;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, oneshot};

use super::{MuxError, SEP, Tmux, WatchEvent};

/// The session that holds a link to every watched window. Not a valid clibot session name
/// (`+`), so it never collides with one.
pub const MONITOR: &str = "clibot+watch";

/// The window option that marks the monitor's own placeholder window.
const HOME_MARK: &str = "@clibot_monitor";

/// Which session a pane's output belongs to, and where to signal it.
#[derive(Debug, Default)]
pub(super) struct Routes {
    /// A control client is attached to the monitor session.
    live: bool,
    /// Counts control clients, so that one that ended does not clear its successor's state.
    generation: u64,
    /// Pane id (`%7`) → session id (`$3`).
    by_pane: HashMap<String, String>,
    /// Session id → its route.
    sessions: HashMap<String, Route>,
    /// The attached control client's connection, for queries.
    conn: Option<Arc<Conn>>,
    /// Counts completed links, so a sweep leaves alone routes linked after its listing.
    link_seq: u64,
}

/// An answer to one query line: the block's text, or tmux's error.
type Answer = oneshot::Sender<Result<String, String>>;

/// One control connection. Each has its own queue of owed answers, so a connection that ended
/// can never shift the answers of the next one.
#[derive(Debug)]
struct Conn {
    stdin: tokio::sync::Mutex<tokio::process::ChildStdin>,
    /// Owed answers in the order their lines were written; `None` once the connection ended
    /// (then nothing more is queued, and what was owed is dropped: those queries fail).
    pending: std::sync::Mutex<Option<VecDeque<Answer>>>,
    /// Ends the connection: its reader stops, kills the client and cleans up.
    abort: tokio_util::sync::CancellationToken,
}

/// How a query on the control connection went.
enum Sent {
    /// Not written (the connection is down): it may run as a client of its own.
    No,
    Answered(Result<String, String>),
    /// Written, but the connection ended (or hung) before answering: it may have run, so it
    /// is not run again.
    Lost,
}

#[derive(Debug)]
struct Route {
    tx: mpsc::Sender<WatchEvent>,
    /// The session's windows (`@4`) when it was watched.
    windows: Vec<String>,
    panes: Vec<String>,
    /// When its windows were linked into the monitor (`link_seq`; 0: not yet): a sweep must
    /// not end a route before that.
    linked_at: u64,
}

/// A window as `list-panes`/`list-windows` report it for the monitor's purposes.
struct PaneRow {
    window: String,
    pane: String,
    /// The names of the sessions the window is linked into.
    in_monitor: bool,
}

impl Routes {
    /// Forgets a session's route and its panes; dropping the route closes its watcher's channel.
    fn remove(&mut self, session: &str) -> Option<Route> {
        let route = self.sessions.remove(session)?;
        for p in &route.panes {
            self.by_pane.remove(p);
        }
        Some(route)
    }
}

/// One command per window: `name -t PREFIX@id` (for the monitor's own links, `=clibot+watch:`).
fn per_window(name: &'static str, prefix: &str, windows: &[String]) -> Vec<TmuxCommand<'static>> {
    windows
        .iter()
        .map(|w| {
            let mut c = TmuxCommand::new();
            c.name(name);
            c.push_option("-t", format!("{prefix}{w}"));
            c
        })
        .collect()
}

fn mark_linked(routes: &std::sync::Mutex<Routes>, target: &str) {
    let mut r = lock(routes);
    r.link_seq += 1;
    let seq = r.link_seq;
    if let Some(route) = r.sessions.get_mut(target) {
        route.linked_at = seq;
    }
}

fn lock<T>(r: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    r.lock().unwrap_or_else(|p| p.into_inner())
}

fn parse_panes(out: &str) -> Vec<PaneRow> {
    out.lines()
        .filter_map(|l| {
            let mut f = l.split(SEP);
            let (window, pane, linked) = (f.next()?, f.next()?, f.next()?);
            (window.starts_with('@') && pane.starts_with('%')).then(|| PaneRow {
                window: window.to_string(),
                pane: pane.to_string(),
                in_monitor: linked.split(',').any(|s| s == MONITOR),
            })
        })
        .collect()
}

/// The subscription that reports a pane whose process ended (tmux keeps it, dead, by
/// `remain-on-exit`): tmux evaluates it about once a second for every pane of the monitor
/// session and reports a change, so an exit is pushed without listing the sessions.
const DEAD_SUBSCRIPTION: &str = "clibot_dead:%*:#{pane_dead}";

/// `%subscription-changed clibot_dead $0 @1 1 %1 : 1` → `%1` (a pane that died).
fn died_pane(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(b"%subscription-changed clibot_dead ")?;
    let text = std::str::from_utf8(rest).ok()?;
    let (fields, value) = text.split_once(" : ")?;
    if value.trim() != "1" {
        return None;
    }
    fields.split(' ').find(|f| f.starts_with('%'))
}

/// `%output %7 …` → `%7`.
fn output_pane(line: &[u8]) -> Option<&str> {
    let rest = line
        .strip_prefix(b"%output ")
        .or_else(|| line.strip_prefix(b"%extended-output "))?;
    let end = rest.iter().position(|b| *b == b' ').unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end]).ok()
}

fn exact(session: &str) -> String {
    format!("={session}")
}

/// How long a query may take before the control connection is given up on and reconnected.
/// Generous: tmux answers in well under a millisecond, but a machine loaded to its limit can
/// stall any process for seconds, and a reconnect makes every watcher look at its session again.
const QUERY_TIMEOUT: Duration = Duration::from_secs(20);

/// One control-mode line per command (tmux answers each command with a block of its own), or
/// `None` when an argument could change how tmux parses the line (a quote, a line break, a
/// NUL): such commands run as their own client.
fn control_lines(commands: &[TmuxCommand<'_>]) -> Option<Vec<String>> {
    commands
        .iter()
        .map(|c| {
            let mut line = String::new();
            for (j, a) in c.to_vec().iter().enumerate() {
                if a.contains(['\'', '\n', '\r', '\0']) {
                    return None;
                }
                if j > 0 {
                    line.push(' ');
                }
                // Inside single quotes tmux takes everything literally: no `$VAR`, no `~`, no
                // `;`, no `#` comment, no `NAME=value` assignment.
                line.push('\'');
                line.push_str(a);
                line.push('\'');
            }
            line.push('\n');
            (line.len() > 1).then_some(line)
        })
        .collect::<Option<Vec<_>>>()
        .filter(|lines| !lines.is_empty())
}

/// Writes `lines` on `conn` and collects their answers, within [`QUERY_TIMEOUT`] in all. A
/// connection that does not take or answer a query in that time is ended (and reconnected by
/// the watchers).
async fn control_query(conn: &Conn, lines: &[String]) -> Sent {
    use tokio::io::AsyncWriteExt;
    let deadline = tokio::time::Instant::from_std(Instant::now() + QUERY_TIMEOUT);
    let hung = || {
        tracing::warn!(
            "tmux's control connection did not answer within {QUERY_TIMEOUT:?}; reconnecting"
        );
        conn.abort.cancel();
    };
    let Ok(mut w) = tokio::time::timeout_at(deadline, conn.stdin.lock()).await else {
        hung();
        return Sent::No;
    };
    let mut answers = Vec::with_capacity(lines.len());
    {
        // Queued under the writer's lock, so the queue's order is the lines' order.
        let mut pending = lock(&conn.pending);
        let Some(queue) = pending.as_mut() else {
            return Sent::No;
        };
        for _ in lines {
            let (tx, rx) = oneshot::channel();
            queue.push_back(tx);
            answers.push(rx);
        }
    }
    match tokio::time::timeout_at(deadline, w.write_all(lines.concat().as_bytes())).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => {
            conn.abort.cancel();
            return Sent::Lost;
        }
        Err(_) => {
            hung();
            return Sent::Lost;
        }
    }
    drop(w);
    let mut out = String::new();
    for rx in answers {
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(Ok(text))) => out.push_str(&text),
            Ok(Ok(Err(stderr))) => return Sent::Answered(Err(stderr)),
            Ok(Err(_)) => return Sent::Lost,
            Err(_) => {
                hung();
                return Sent::Lost;
            }
        }
    }
    Sent::Answered(Ok(out))
}

/// The `time number` of a `%begin`/`%end`/`%error` line, and whether this client sent the
/// command (flags 1).
fn block_key(rest: &[u8]) -> (Vec<u8>, bool) {
    let mut parts = rest.splitn(3, |b| *b == b' ');
    let (t, n) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let ours = parts.next().is_some_and(|f| f.first() == Some(&b'1'));
    ([t, b" ", n].concat(), ours)
}

impl Tmux {
    /// [`Tmux::query`] for commands that carry a secret: on the control connection only, never
    /// as a client process of their own (whose command line any local user can read).
    pub(super) async fn query_private(
        &self,
        commands: Vec<TmuxCommand<'_>>,
    ) -> Result<String, MuxError> {
        let conn = lock(&self.routes).conn.clone();
        let failed = |stderr: &str| MuxError::Failed {
            command: "set-environment".into(),
            stderr: stderr.into(),
        };
        let (Some(lines), Some(conn)) = (control_lines(&commands), conn) else {
            return Err(failed("tmux's control connection is not up"));
        };
        match control_query(&conn, &lines).await {
            Sent::Answered(Ok(out)) => Ok(out),
            Sent::Answered(Err(stderr)) => Err(failed(stderr.trim())),
            Sent::No | Sent::Lost => Err(failed("tmux's control connection did not answer")),
        }
    }

    /// Runs `commands` on the control connection when it is up and their arguments allow;
    /// otherwise as a client of their own. Commands that were written but not answered (the
    /// connection ended or hung) fail rather than run twice.
    pub(super) async fn query(&self, commands: Vec<TmuxCommand<'_>>) -> Result<String, MuxError> {
        let conn = lock(&self.routes).conn.clone();
        if let Some(lines) = control_lines(&commands)
            && let Some(conn) = conn
        {
            let label = || {
                commands
                    .iter()
                    .filter_map(|c| c.to_vec().first().map(|a| a.to_string()))
                    .collect::<Vec<_>>()
                    .join(" ; ")
            };
            match control_query(&conn, &lines).await {
                Sent::No => {}
                Sent::Answered(Ok(out)) => return Ok(out),
                Sent::Answered(Err(stderr)) => {
                    return Err(super::classify(
                        &label(),
                        stderr.trim().to_string(),
                        &self.socket,
                    ));
                }
                Sent::Lost => {
                    return Err(MuxError::Failed {
                        command: label(),
                        stderr: "tmux's control connection ended before answering; clibot \
                                 reconnects by itself"
                            .into(),
                    });
                }
            }
        }
        self.run(commands, None).await
    }

    /// Starts following `target`'s panes; the receiver closes when the session ends (or the
    /// monitor's client does: then the watcher looks at the session and watches again).
    pub(super) async fn monitor_watch(
        &self,
        target: &str,
    ) -> Result<mpsc::Receiver<WatchEvent>, MuxError> {
        self.ensure_monitor().await?;
        let rows = self.session_panes(target).await?;
        if rows.is_empty() {
            return Err(MuxError::NoSuchTarget(format!("no panes in {target}")));
        }
        let mut windows: Vec<String> = rows.iter().map(|r| r.window.clone()).collect();
        windows.dedup();
        let to_link: Vec<String> = {
            let mut seen = HashSet::new();
            rows.iter()
                .filter(|r| !r.in_monitor && seen.insert(r.window.clone()))
                .map(|r| r.window.clone())
                .collect()
        };
        // Capacity 1 and try_send: a burst of output is one signal; the reader never waits.
        let (tx, rx) = mpsc::channel(1);
        let panes: Vec<String> = rows.iter().map(|r| r.pane.clone()).collect();
        {
            // The route exists before the link, so no output after the link is missed.
            let mut r = lock(&self.routes);
            r.remove(target);
            if !r.live {
                // The control client ended meanwhile: the closed channel sends the watcher
                // round again.
                return Ok(rx);
            }
            for p in &panes {
                r.by_pane.insert(p.clone(), target.to_string());
            }
            r.sessions.insert(
                target.to_string(),
                Route {
                    tx,
                    windows: windows.clone(),
                    panes,
                    linked_at: 0,
                },
            );
        }
        if to_link.is_empty() {
            mark_linked(&self.routes, target);
        } else {
            let cmds = to_link
                .iter()
                .map(|w| {
                    let mut c = TmuxCommand::new();
                    c.name("link-window");
                    c.push_flag("-d");
                    c.push_option("-s", w.clone());
                    c.push_option("-t", format!("{}:", exact(MONITOR)));
                    c
                })
                .collect();
            if let Err(e) = self.query(cmds).await {
                self.unroute(target);
                return Err(e);
            }
            mark_linked(&self.routes, target);
        }
        Ok(rx)
    }

    /// Takes `target`'s windows out of the monitor session (they stay in their own): a released
    /// session is no longer clibot's to follow, and `tmux ls` should not list it twice.
    pub(super) async fn monitor_unwatch(&self, target: &str) -> Result<(), MuxError> {
        let windows = {
            lock(&self.routes)
                .remove(target)
                .map(|old| old.windows)
                .unwrap_or_default()
        };
        let windows = if windows.is_empty() {
            let mut w: Vec<String> = self
                .session_panes(target)
                .await?
                .into_iter()
                .filter(|r| r.in_monitor)
                .map(|r| r.window)
                .collect();
            w.dedup();
            w
        } else {
            windows
        };
        if windows.is_empty() {
            return Ok(());
        }
        // Not `-k`: a window linked to the monitor alone is not unlinked (tmux refuses).
        let prefix = format!("{}:", exact(MONITOR));
        self.query(per_window("unlink-window", &prefix, &windows))
            .await
            .map(|_| ())
    }

    /// Ends the monitor on this server: its session goes (the placeholder, and the links: a
    /// window also in a session of its own stays there) and with it the control client. For
    /// another server of the user's, once clibot follows nothing on it: the monitor session
    /// would keep that server alive after the user's last session ended.
    pub(super) async fn monitor_close(&self) {
        {
            let mut r = lock(&self.routes);
            r.sessions.clear();
            r.by_pane.clear();
        }
        let _turn = self.structure.lock().await;
        let mut kill = TmuxCommand::new();
        kill.name("kill-session");
        kill.push_option("-t", exact(MONITOR));
        let mut client = self.client();
        client.arg("-N");
        if let Err(e) = self.run_on(client, vec![kill], None).await {
            tracing::debug!("the monitor session was not closed: {e}");
        }
    }

    /// Every pane of session `target`, with its window and whether that is linked here.
    async fn session_panes(&self, target: &str) -> Result<Vec<PaneRow>, MuxError> {
        let mut list = TmuxCommand::new();
        list.name("list-panes");
        list.push_flag("-s");
        list.push_option("-t", target.to_string());
        list.push_option(
            "-F",
            "#{window_id}\t#{pane_id}\t#{window_linked_sessions_list}",
        );
        Ok(parse_panes(&self.query(vec![list]).await?))
    }

    /// Kills windows by id, as far as they still exist.
    pub(super) async fn kill_windows(&self, windows: &[String]) {
        if !windows.is_empty() {
            // A window that went meanwhile fails alone on the control connection (as its own
            // client, tmux stops at it); the monitor's sweep takes any left.
            let _ = self.query(per_window("kill-window", "", windows)).await;
        }
    }

    /// The windows clibot knows `target` to have, for [`Tmux::kill_session`].
    pub(super) fn known_windows(&self, target: &str) -> Vec<String> {
        lock(&self.routes)
            .sessions
            .get(target)
            .map(|r| r.windows.clone())
            .unwrap_or_default()
    }

    fn unroute(&self, target: &str) {
        lock(&self.routes).remove(target);
    }

    /// Creates the monitor session when it is missing and attaches the control client.
    async fn ensure_monitor(&self) -> Result<(), MuxError> {
        if lock(&self.routes).live {
            return Ok(());
        }
        // tmux 3.3a can crash when a session is created or killed while a control client is
        // still attaching: attaching takes its turn with spawns and kills.
        let turn = self.structure.clone().lock_owned().await;
        if lock(&self.routes).live {
            return Ok(());
        }
        // The placeholder window runs `true` and stays as a dead pane (no process), so the
        // session outlives every CLI window and the client stays attached.
        let mut new = TmuxCommand::new();
        new.name("new-session");
        new.push_flag("-d");
        new.push_option("-s", MONITOR);
        new.push_option("-n", "clibot-watch");
        new.push_option("-x", "80");
        new.push_option("-y", "24");
        new.push_param("--");
        new.push_param("true");
        let mut remain = TmuxCommand::new();
        remain.name("set-option");
        remain.push_flag("-w");
        remain.push_param("remain-on-exit");
        remain.push_param("on");
        let mut mark = TmuxCommand::new();
        mark.name("set-option");
        mark.push_flag("-w");
        mark.push_param(HOME_MARK);
        mark.push_param("1");
        // -N: this never starts a tmux server. One started here would be the daemon's child
        // (under systemd, in clibotd's cgroup, and killed with it); servers are started only
        // where clibot means to, before a spawn.
        let mut client = self.client();
        client.arg("-N");
        match self.run_on(client, vec![new, remain, mark], None).await {
            Ok(_) | Err(MuxError::DuplicateSession(_)) => {}
            Err(e) => return Err(e),
        }
        // A control client left by an earlier daemon that was killed (kill -9 leaves it
        // attached, adopted by init) would keep the session's windows and run nothing anyone
        // reads: every client of the monitor session is ended before this daemon's attaches.
        // Ours is not among them (it is attached only below). No client: tmux says so; fine.
        let mut stale = TmuxCommand::new();
        stale.name("detach-client");
        stale.push_option("-s", exact(MONITOR));
        let mut client = self.client();
        client.arg("-N");
        if self.run_on(client, vec![stale], None).await.is_ok() {
            tracing::info!("ended a control client a previous clibotd left attached");
        }

        let mut cmd = self.client();
        // Not read-only: it runs clibot's queries (links and kills among them); nothing but
        // clibotd writes to its stdin. It never sets a size (no `refresh-client -C`), and tmux
        // leaves a control client that never set one out of window sizing, so it resizes no
        // window. Not `ignore-size`: tmux 3.3a checks every other client for each window then,
        // and can crash in that code.
        cmd.args(["-C", "attach-session", "-t", &exact(MONITOR)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|source| MuxError::Spawn {
            binary: self.binary.clone(),
            source,
        })?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(MuxError::Failed {
                command: "attach-session -C".into(),
                stderr: "no pipes to the control client".into(),
            });
        };
        // Keeping stdin open keeps the control client attached; queries are written to it.
        let conn = Arc::new(Conn {
            stdin: tokio::sync::Mutex::new(stdin),
            pending: std::sync::Mutex::new(Some(VecDeque::new())),
            abort: tokio_util::sync::CancellationToken::new(),
        });
        let generation = {
            let mut r = lock(&self.routes);
            r.generation += 1;
            r.generation
        };
        let (attached_tx, attached_rx) = tokio::sync::oneshot::channel::<()>();
        let (sweep_tx, sweep_rx) = mpsc::channel::<()>(1);
        let sweep_tx_first = sweep_tx.clone();
        tokio::spawn(self.clone().sweeper(sweep_rx));
        tokio::spawn(self.clone().read_control(
            child,
            stdout,
            conn.clone(),
            generation,
            attached_tx,
            sweep_tx,
        ));
        // Until tmux says the client is attached (or gave up), nothing else may restructure.
        // The reader publishes the connection before it says so.
        let ok = matches!(
            tokio::time::timeout(Duration::from_secs(2), attached_rx).await,
            Ok(Ok(()))
        );
        drop(turn);
        if !ok {
            conn.abort.cancel();
            return Err(MuxError::Failed {
                command: "attach-session -C".into(),
                stderr: format!("the control client did not attach to {MONITOR}"),
            });
        }
        // Sessions killed by hand while no daemon watched left their windows here.
        let _ = sweep_tx_first.try_send(());
        let mut sub = TmuxCommand::new();
        sub.name("refresh-client");
        sub.push_option("-B", DEAD_SUBSCRIPTION);
        if let Err(e) = self.query(vec![sub]).await {
            tracing::warn!("cannot subscribe to pane exits ({e}); the periodic check finds them");
        }
        Ok(())
    }

    /// Reads the control client's output until it ends (or `conn` is aborted): answers to
    /// queries, pane output for the watchers, exits, unlinked windows for the sweep.
    async fn read_control(
        self,
        mut child: tokio::process::Child,
        stdout: tokio::process::ChildStdout,
        conn: Arc<Conn>,
        generation: u64,
        attached_tx: oneshot::Sender<()>,
        sweep_tx: mpsc::Sender<()>,
    ) {
        let mut lines = tokio::io::BufReader::new(stdout).split(b'\n');
        let mut attached = Some(attached_tx);
        // The command output block being read: its `time number`, whether it answers one of
        // clibot's queries, and its lines. Notifications never come inside a block.
        let mut block: Option<(Vec<u8>, bool, Vec<u8>)> = None;
        loop {
            let l = tokio::select! {
                l = lines.next_segment() => match l {
                    Ok(Some(l)) => l,
                    Ok(None) | Err(_) => break,
                },
                _ = conn.abort.cancelled() => break,
            };
            if let Some((key, ours, body)) = block.as_mut() {
                let end = l
                    .strip_prefix(b"%end ")
                    .map(|r| (r, true))
                    .or_else(|| l.strip_prefix(b"%error ").map(|r| (r, false)));
                match end {
                    Some((rest, ok)) if block_key(rest).0 == *key => {
                        if *ours {
                            let text = String::from_utf8_lossy(body).into_owned();
                            let answer = lock(&conn.pending).as_mut().and_then(VecDeque::pop_front);
                            if let Some(answer) = answer {
                                let _ = answer.send(if ok { Ok(text) } else { Err(text) });
                            }
                        }
                        block = None;
                    }
                    _ => {
                        body.extend_from_slice(&l);
                        body.push(b'\n');
                    }
                }
                continue;
            }
            if let Some(rest) = l.strip_prefix(b"%begin ") {
                let (key, ours) = block_key(rest);
                block = Some((key, ours, Vec::new()));
            } else if let Some(pane) = output_pane(&l) {
                let mut r = lock(&self.routes);
                let Some(session) = r.by_pane.get(pane).cloned() else {
                    continue;
                };
                let closed = r.sessions.get(&session).is_some_and(|route| {
                    matches!(
                        route.tx.try_send(WatchEvent::Output),
                        Err(mpsc::error::TrySendError::Closed(_))
                    )
                });
                // The watcher is gone (the session was stopped or released).
                if closed {
                    r.remove(&session);
                }
            } else if let Some(pane) = died_pane(&l) {
                // The watcher looks at the session and finds its CLI exited.
                let mut r = lock(&self.routes);
                if let Some(session) = r.by_pane.get(pane).cloned()
                    && let Some(route) = r.remove(&session)
                {
                    let tx = route.tx;
                    tokio::spawn(async move {
                        let _ = tx.send(WatchEvent::Closed).await;
                    });
                }
            } else if l.starts_with(b"%window-close ") || l.starts_with(b"%unlinked-window-close ")
            {
                let _ = sweep_tx.try_send(());
            } else if l.starts_with(b"%exit") {
                break;
            } else if l.starts_with(b"%session-changed")
                && let Some(a) = attached.take()
            {
                // Published here, before anyone hears of the attach, and cleared below by this
                // same task: the two cannot come in the wrong order.
                {
                    let mut r = lock(&self.routes);
                    if r.generation == generation {
                        r.live = true;
                        r.conn = Some(conn.clone());
                    }
                }
                let _ = a.send(());
            }
        }
        // What was owed fails; nothing more is queued here.
        *lock(&conn.pending) = None;
        // Every watcher sees its channel close, looks at its session, and watches again.
        {
            let mut r = lock(&self.routes);
            if r.generation == generation {
                r.live = false;
                r.conn = None;
                r.sessions.clear();
                r.by_pane.clear();
            }
        }
        let _ = child.kill().await;
    }

    /// Runs a sweep after tmux reports windows unlinked; a burst of reports is one sweep.
    async fn sweeper(self, mut rx: mpsc::Receiver<()>) {
        while rx.recv().await.is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
            while rx.try_recv().is_ok() {}
            self.sweep().await;
        }
    }

    /// Kills the windows left linked to the monitor alone (their session was killed by hand)
    /// and closes the routes of sessions none of whose windows remain.
    async fn sweep(&self) {
        let mut list = TmuxCommand::new();
        list.name("list-windows");
        list.push_option("-t", exact(MONITOR));
        list.push_option(
            "-F",
            format!("#{{window_id}}\t#{{{HOME_MARK}}}\t#{{window_linked_sessions_list}}"),
        );
        // Routes linked after this point may not show in the listing yet.
        let seq = lock(&self.routes).link_seq;
        let Ok(out) = self.query(vec![list]).await else {
            // The monitor is gone: its client's end closes every route.
            return;
        };
        let (alive, orphans) = sweep_rows(&out);
        self.kill_windows(&orphans).await;
        let mut r = lock(&self.routes);
        let gone: Vec<String> = r
            .sessions
            .iter()
            .filter(|(_, route)| {
                route.linked_at != 0
                    && route.linked_at <= seq
                    && !route.windows.iter().any(|w| alive.contains(w))
            })
            .map(|(s, _)| s.clone())
            .collect();
        for s in gone {
            r.remove(&s);
        }
    }
}

/// The monitor's windows from `list-windows`: those still in a session of their own, and the
/// orphans, linked to the monitor alone (twice, even) and not its placeholder.
fn sweep_rows(out: &str) -> (HashSet<String>, Vec<String>) {
    let mut alive = HashSet::new();
    let mut orphans = Vec::new();
    for l in out.lines() {
        let mut f = l.splitn(3, SEP);
        let (Some(window), Some(mark), Some(linked)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if !window.starts_with('@') {
            continue;
        }
        if mark != "1" && linked.split(',').all(|s| s == MONITOR) {
            if !orphans.iter().any(|o| o == window) {
                orphans.push(window.to_string());
            }
        } else {
            alive.insert(window.to_string());
        }
    }
    (alive, orphans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pane_rows() {
        let rows = parse_panes(
            "@1\t%1\tapi,clibot+watch\n@1\t%4\tapi,clibot+watch\n@2\t%2\tweb\nbad\n@3\t%3\tclibot+watcher\n",
        );
        assert_eq!(rows.len(), 4);
        assert!(rows[0].in_monitor && rows[1].in_monitor);
        assert!(!rows[2].in_monitor);
        assert!(!rows[3].in_monitor, "only the exact name counts");
    }

    #[test]
    fn control_lines_quote_every_argument_and_refuse_what_could_escape() {
        let mut d = TmuxCommand::new();
        d.name("display-message");
        d.push_flag("-p");
        d.push_option("-t", "$3");
        d.push_param("#{pane_current_command} ~ ; x");
        let mut k = TmuxCommand::new();
        k.name("kill-window");
        k.push_option("-t", "@4");
        // One line per command: tmux answers each with a block of its own.
        assert_eq!(
            control_lines(&[d, k]),
            Some(vec![
                "'display-message' '-p' '-t' '$3' '#{pane_current_command} ~ ; x'\n".to_string(),
                "'kill-window' '-t' '@4'\n".to_string(),
            ])
        );
        for bad in ["it's", "a\nb", "a\rb", "a\0b"] {
            let mut c = TmuxCommand::new();
            c.name("display-message");
            c.push_param(bad);
            assert_eq!(control_lines(&[c]), None, "{bad:?}");
        }
        // An empty line would detach the client.
        assert_eq!(control_lines(&[]), None);
    }

    #[test]
    fn sweep_rows_find_orphans_also_when_linked_twice() {
        let (alive, orphans) = sweep_rows(
            "@0\t1\tclibot+watch\n@1\t\tapi,clibot+watch\n@2\t\tclibot+watch\n@3\t\tclibot+watch,clibot+watch\nbad\n",
        );
        assert_eq!(orphans, vec!["@2".to_string(), "@3".to_string()]);
        assert!(alive.contains("@0") && alive.contains("@1"));
    }

    #[test]
    fn block_lines() {
        assert_eq!(
            block_key(b"1795569399 271 1"),
            (b"1795569399 271".to_vec(), true)
        );
        assert_eq!(
            block_key(b"1795569399 264 0"),
            (b"1795569399 264".to_vec(), false)
        );
        assert_eq!(block_key(b"garbage"), (b"garbage ".to_vec(), false));
    }

    #[test]
    fn died_panes() {
        assert_eq!(
            died_pane(b"%subscription-changed clibot_dead $0 @1 1 %1 : 1"),
            Some("%1")
        );
        assert_eq!(
            died_pane(b"%subscription-changed clibot_dead $0 @1 1 %1 : 0"),
            None
        );
        assert_eq!(
            died_pane(b"%subscription-changed other $0 @1 1 %1 : 1"),
            None
        );
        assert_eq!(
            died_pane(b"%subscription-changed clibot_dead garbage"),
            None
        );
    }

    #[test]
    fn output_lines() {
        assert_eq!(output_pane(b"%output %12 hello world"), Some("%12"));
        assert_eq!(output_pane(b"%extended-output %3 0 : x"), Some("%3"));
        assert_eq!(output_pane(b"%output %5"), Some("%5"));
        assert_eq!(output_pane(b"%window-close @1"), None);
    }
}
