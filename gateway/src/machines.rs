//! One gateway over several daemons (`[[gateway.machines]]`): one poller per bot, and a
//! connection to each machine's daemon — its socket here, or `ssh HOST clibotctl dial-stdio`.
//! Each daemon stays the owner of its sessions, bindings, cursors and access rules; the gateway
//! only routes: a chat message goes to the machine whose session the chat is bound to, a
//! command naming `MACHINE/NAME` to that machine, a list (`!!sessions`, `!!pending`) to all.
//! A chat is bound on at most one machine: binding it on one unbinds it on the others. A
//! machine that goes away is told once to the chats bound to its sessions, and again when it is
//! back; the others go on.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clibot_proto::{Target, v1};
use tokio::sync::mpsc;

use clibot_gateway::command::CommandParser;

use crate::inbound::claim::Claims;
use crate::inbound::router::Router;
use crate::inbound::verified::Verified;
use crate::ops::health::PlatformHealth;
use crate::outbound::egress::Egress;
use crate::platforms::labelled::Labelled;
use crate::platforms::{Inbound, Platform};

/// A daemon the gateway serves.
#[derive(Debug, Clone)]
pub struct Machine {
    pub name: String,
    pub target: Target,
    /// Pairing codes are issued here, and unbound chats talk here.
    pub home: bool,
}

/// The machines of `[[gateway.machines]]`; with none, the one daemon at `socket`. Each names
/// exactly one way to its daemon; names are unique words (they lead session names:
/// `MACHINE/NAME`); at most one is `home`.
pub fn from_config(
    list: &[crate::config::MachineConfig],
    socket: &std::path::Path,
    control_dir: &std::path::Path,
) -> Result<Vec<Machine>, String> {
    if list.is_empty() {
        return Ok(vec![Machine {
            name: "local".into(),
            target: Target::Socket(socket.to_path_buf()),
            home: true,
        }]);
    }
    let mut out: Vec<Machine> = Vec::new();
    for m in list {
        let name = m.checked_name()?;
        if out.iter().any(|o| o.name == name) {
            return Err(format!("[[gateway.machines]] name {name:?} is used twice"));
        }
        let target = m.target(Some(control_dir))?;
        out.push(Machine {
            name: name.to_string(),
            target,
            home: m.home,
        });
    }
    if out.iter().filter(|m| m.home).count() > 1 {
        return Err("[[gateway.machines]]: at most one machine is home = true".into());
    }
    Ok(out)
}

/// Whether a machine answers, as the watcher last saw it.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    pub down_since_ms: Option<i64>,
}

/// One machine as the dispatcher uses it.
pub struct Member {
    pub machine: Machine,
    pub router: Router,
    pub reach: Arc<Mutex<Reach>>,
    client: Option<clibot_proto::Client>,
}

impl Member {
    pub fn new(machine: Machine, router: Router, reach: Arc<Mutex<Reach>>) -> Member {
        Member {
            machine,
            router,
            reach,
            client: None,
        }
    }

    async fn client(&mut self) -> Result<&mut clibot_proto::Client, String> {
        ensure(&mut self.client, &self.machine.target).await
    }
}

/// The connection to `target`, made when there is none.
async fn ensure<'a>(
    client: &'a mut Option<clibot_proto::Client>,
    target: &Target,
) -> Result<&'a mut clibot_proto::Client, String> {
    if client.is_none() {
        let c = tokio::time::timeout(Duration::from_secs(20), clibot_proto::connect_to(target))
            .await
            .map_err(|_| "no answer in 20 s".to_string())?
            .map_err(|e| e.to_string())?;
        *client = Some(c);
    }
    client.as_mut().ok_or_else(|| "no connection".into())
}

/// Where a message goes.
#[derive(Debug, PartialEq)]
enum Pick {
    /// To this machine, with this text (its `MACHINE/` taken off the session's name).
    One(usize, String),
    /// To every machine (a list), each answering for itself.
    All,
    /// To the machine the chat is bound on (else the home machine).
    Bound,
    /// To the home machine.
    Home,
}

/// Commands whose first argument names a session (or, for `adopt`, a found CLI).
const NAMED: &[&str] = &[
    "use", "new", "start", "stop", "restart", "cancel", "share", "adopt",
];
/// Commands that list what each machine has (each machine's answer is led by its name).
const LISTS: &[&str] = &["sessions", "pending", "discover", "rules", "usage"];
/// Commands that change the chat's binding: afterwards, other machines let go of the chat.
const BINDS: &[&str] = &["use", "new", "start", "adopt", "ask"];

fn pick(names: &[&str], prefix: &str, text: &str) -> Pick {
    let Some(rest) = text.trim_start().strip_prefix(prefix) else {
        return Pick::Bound;
    };
    let mut words = rest.split_whitespace();
    let cmd = words.next().unwrap_or_default().to_ascii_lowercase();
    if LISTS.contains(&cmd.as_str()) {
        return Pick::All;
    }
    // `!!budget` lists each machine's budgets; `!!budget lift NAME` acts where the chat is.
    if cmd == "budget" && words.clone().next().is_none() {
        return Pick::All;
    }
    if matches!(cmd.as_str(), "help" | "whoami" | "pair") {
        return Pick::Home;
    }
    if NAMED.contains(&cmd.as_str())
        && let Some(arg) = words.next()
        && let Some((m, name)) = arg.split_once('/')
        && let Some(i) = names.iter().position(|x| *x == m)
        && !name.is_empty()
    {
        // The same text with `MACHINE/` taken off that one argument.
        let at = text.find(arg).unwrap_or(0);
        let rewritten = format!("{}{name}{}", &text[..at], &text[at + arg.len()..]);
        return Pick::One(i, rewritten);
    }
    Pick::Bound
}

/// The home machine: the one marked `home`, else the first.
fn home(members: &[Member]) -> usize {
    members.iter().position(|m| m.machine.home).unwrap_or(0)
}

/// Routes each message to its machine, in order (see the module's doc). A machine that cannot
/// be reached gets the message refused with a reply (the others are not held up by it).
pub async fn route(
    members: &mut [Member],
    mut inbound: mpsc::Receiver<Inbound>,
    health: &PlatformHealth,
    prefix: &str,
) {
    while let Some(mut msg) = inbound.recv().await {
        health.heard();
        let mut handling = health.progress().handling();
        let ack = msg.ack.take();
        let h = home(members);
        let names: Vec<&str> = members.iter().map(|m| m.machine.name.as_str()).collect();
        let picked = pick(&names, prefix, &msg.text);
        let targets: Vec<usize> = match &picked {
            Pick::One(i, text) => {
                msg.text = text.clone();
                vec![*i]
            }
            Pick::All => (0..members.len()).collect(),
            Pick::Home => vec![h],
            // A button answers the prompt it belongs to, on the machine that shows it, wherever
            // the chat is bound now (`!!pending` lists every machine's).
            Pick::Bound => {
                let shows = match msg.prompt.as_deref() {
                    Some(id) => prompt_on(members, id).await,
                    None => None,
                };
                let at = match shows {
                    Some(i) => Some(i),
                    None => bound_on(members, &msg).await,
                };
                vec![at.unwrap_or(h)]
            }
        };
        for &i in &targets {
            handling.renew();
            deliver(&mut members[i], &msg).await;
        }
        // Bound here now: the chat lets go of its sessions on the other machines.
        let cmd = msg
            .text
            .trim_start()
            .strip_prefix(prefix)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if BINDS.contains(&cmd.as_str())
            && let [keep] = targets[..]
            && has_binding(&mut members[keep], &msg).await
        {
            unbind_others(members, keep, &msg).await;
        }
        if let Some(ack) = ack {
            let _ = ack.send(());
        }
    }
}

/// Hands a message to one machine's router; a machine that cannot be reached is said to be.
async fn deliver(m: &mut Member, msg: &Inbound) {
    let down = "this machine cannot be reached right now; try again when it is back (!!sessions shows which machines answer)";
    if m.reach_down() {
        let _ = m.router.platform.send(&msg.chat, down).await;
        return;
    }
    for _ in 0..2 {
        let Member {
            machine,
            router,
            client,
            ..
        } = &mut *m;
        let c = match ensure(client, &machine.target).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "clibot-gateway: machine {} ({}): {e}",
                    machine.name,
                    machine.target.describe()
                );
                let _ = router.platform.send(&msg.chat, down).await;
                return;
            }
        };
        match router.handle(c, msg).await {
            Ok(()) => return,
            Err(e) => {
                eprintln!(
                    "clibot-gateway: machine {}: lost its daemon ({e}); connecting again",
                    machine.name
                );
                *client = None;
            }
        }
    }
}

/// The machine where the message's chat is bound, if any (asked of each, in order; binding
/// on one unbinds the others, so there is at most one).
async fn bound_on(members: &mut [Member], msg: &Inbound) -> Option<usize> {
    for (i, m) in members.iter_mut().enumerate() {
        if !m.reach_down() && has_binding(m, msg).await {
            return Some(i);
        }
    }
    None
}

/// The machine one of whose sessions shows prompt `id`, if any.
async fn prompt_on(members: &mut [Member], id: &str) -> Option<usize> {
    for (i, m) in members.iter_mut().enumerate() {
        if m.reach_down() {
            continue;
        }
        let Ok(c) = m.client().await else { continue };
        match c.list_sessions(v1::ListSessionsRequest::default()).await {
            Ok(r) => {
                let shows = r
                    .into_inner()
                    .sessions
                    .iter()
                    .any(|s| s.prompt.as_ref().is_some_and(|p| p.id == id));
                if shows {
                    return Some(i);
                }
            }
            Err(_) => m.client = None,
        }
    }
    None
}

/// Whether the message's chat is bound to a session on this machine.
async fn has_binding(m: &mut Member, msg: &Inbound) -> bool {
    let platform = m.router.platform.name().to_string();
    let Ok(c) = m.client().await else {
        return false;
    };
    let req = v1::ListBindingsRequest {
        platform,
        chat: msg.chat.clone(),
        session: String::new(),
        seq: 0,
    };
    match c.list_bindings(req).await {
        Ok(r) => r
            .into_inner()
            .bindings
            .iter()
            .any(|b| !b.session.is_empty()),
        Err(_) => {
            m.client = None;
            false
        }
    }
}

/// Unbinds the message's chat on `m`, as its sender (the daemon decides whether they may).
async fn unbind_on(m: &mut Member, msg: &Inbound) -> Result<(), String> {
    let platform = m.router.platform.name().to_string();
    let c = m.client().await.map_err(|e| e.to_string())?;
    let mut req = tonic::Request::new(v1::SetBindingRequest {
        platform: platform.clone(),
        chat: msg.chat.clone(),
        session: String::new(),
        group: msg.group,
        from_seq: 0,
    });
    for (k, v) in [
        ("clibot-platform", platform.as_str()),
        ("clibot-user", msg.user.as_str()),
        ("clibot-chat", msg.chat.as_str()),
    ] {
        if let Ok(v) = v.parse() {
            req.metadata_mut().insert(k, v);
        }
    }
    c.set_binding(req)
        .await
        .map(|_| ())
        .map_err(|e| e.message().to_string())
}

/// Unbinds the message's chat on every machine but `keep`, as its sender. A chat is bound on
/// one machine at a time: when a machine refuses to let go (the sender may not unbind it
/// there: an admin bound a group to a session of theirs), the new binding on `keep` is undone
/// and the chat is told, so that it stays bound where it was — on that machine only.
async fn unbind_others(members: &mut [Member], keep: usize, msg: &Inbound) {
    let mut refused = None;
    for (i, m) in members.iter_mut().enumerate() {
        if i == keep || m.reach_down() || !has_binding(m, msg).await {
            continue;
        }
        if let Err(why) = unbind_on(m, msg).await {
            eprintln!(
                "clibot-gateway: machine {} kept chat {} bound: {why}",
                m.machine.name, msg.chat
            );
            refused = Some((m.machine.name.clone(), why));
            break;
        }
    }
    let Some((machine, why)) = refused else {
        return;
    };
    let m = &mut members[keep];
    if let Err(e) = unbind_on(m, msg).await {
        eprintln!(
            "clibot-gateway: cannot undo chat {}'s binding on {}: {e}",
            msg.chat, m.machine.name
        );
    }
    let said = format!(
        "this chat stays with its session on {machine}: {why} (a chat talks to one machine at a time)"
    );
    let _ = m.router.platform.send(&msg.chat, &said).await;
}

impl Member {
    fn reach_down(&self) -> bool {
        self.reach
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .down_since_ms
            .is_some()
    }
}

/// How often the watcher looks, and after how many failed looks in a row a machine is down.
const LOOK_EVERY: Duration = Duration::from_secs(5);
const DOWN_AFTER: u32 = 2;

/// Watches one machine: keeps the chats bound to its sessions, and tells them once when the
/// machine cannot be reached (and once when it is back).
pub async fn watch(
    machine: Machine,
    platform: Arc<dyn Platform>,
    reach: Arc<Mutex<Reach>>,
    health: PlatformHealth,
) {
    let mut client: Option<clibot_proto::Client> = None;
    let mut chats: HashSet<String> = HashSet::new();
    let mut failures = 0u32;
    loop {
        let looked = async {
            let c = ensure(&mut client, &machine.target).await?;
            let req = v1::ListBindingsRequest {
                platform: platform.name().into(),
                ..Default::default()
            };
            let r = c.list_bindings(req).await.map_err(|e| e.to_string())?;
            Ok::<Vec<v1::Binding>, String>(r.into_inner().bindings)
        }
        .await;
        match looked {
            Ok(bindings) => {
                failures = 0;
                chats = bindings
                    .into_iter()
                    .filter(|b| !b.broken && !b.session.is_empty())
                    .map(|b| b.chat)
                    .collect();
                let was_down = reach
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .down_since_ms
                    .take()
                    .is_some();
                if was_down {
                    eprintln!(
                        "clibot-gateway: machine {} is reachable again",
                        machine.name
                    );
                    for chat in &chats {
                        let _ = platform
                            .send(chat, "✓ this machine is reachable again; what its sessions said meanwhile follows")
                            .await;
                    }
                }
            }
            Err(e) => {
                client = None;
                failures += 1;
                let newly = {
                    let mut r = reach.lock().unwrap_or_else(|p| p.into_inner());
                    if failures >= DOWN_AFTER && r.down_since_ms.is_none() {
                        r.down_since_ms = Some(crate::ops::health::now_ms());
                        true
                    } else {
                        false
                    }
                };
                if newly {
                    eprintln!(
                        "clibot-gateway: machine {} ({}) cannot be reached: {e}",
                        machine.name,
                        machine.target.describe()
                    );
                    for chat in &chats {
                        let _ = platform
                            .send(chat, "⚠ this machine cannot be reached; its sessions go on, and what they say comes here when it is back")
                            .await;
                    }
                }
            }
        }
        let down = reach
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .down_since_ms
            .unwrap_or(0);
        health.machine(&machine.name, down);
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

/// The home machine's daemon: where pairing codes come from, and where the platform's own
/// records (Discord's handled messages) are kept.
pub fn home_target(machines: &[Machine]) -> Target {
    machines
        .iter()
        .find(|m| m.home)
        .or(machines.first())
        .map(|m| m.target.clone())
        .unwrap_or_else(|| Target::Socket(clibot_proto::default_socket_path()))
}

/// Tasks that end with the connection they serve (also when the caller drops it: a stalled
/// receive loop is abandoned mid-way).
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Relays and routes one platform connection until its messages end: a relay per machine (what
/// each machine's sessions say labelled `[MACHINE]` when there are several), a router per
/// machine, and with several machines the dispatcher and a watcher per machine.
pub async fn serve_connection(
    platform: Arc<dyn Platform>,
    machines: &[Machine],
    health: &PlatformHealth,
    default_chat: Option<String>,
    parser: &CommandParser,
    (verified, claims): (Arc<Verified>, Arc<Claims>),
    inbound: mpsc::Receiver<Inbound>,
) {
    let several = machines.len() > 1;
    let mut tasks = Tasks(Vec::new());
    let mut members = Vec::new();
    for m in machines {
        let p: Arc<dyn Platform> = if several {
            Arc::new(Labelled::new(platform.clone(), &m.name))
        } else {
            platform.clone()
        };
        tasks.0.push(tokio::spawn(crate::outbound::relay::run(
            p.clone(),
            m.target.clone(),
            health.clone(),
            default_chat.clone(),
        )));
        // Boards show the home machine's sessions (where `!!board` is asked).
        if (!several || m.home) && !p.is_local() {
            tasks.0.push(tokio::spawn(crate::outbound::board::keep(
                p.clone(),
                m.target.clone(),
            )));
        }
        // Replies to chat messages go through a queue per chat: handling the next message
        // never waits for a slow (rate-limited) chat.
        let router = Router {
            platform: Arc::new(Egress::new(p.clone(), parser.prefix())),
            parser: parser.clone(),
            verified: verified.clone(),
            claims: claims.clone(),
            issues_codes: !several || m.home,
            choosing: Arc::default(),
        };
        let reach: Arc<Mutex<Reach>> = Arc::default();
        if several {
            tasks.0.push(tokio::spawn(watch(
                m.clone(),
                p.clone(),
                reach.clone(),
                health.clone(),
            )));
        }
        members.push(Member::new(m.clone(), router, reach));
    }
    if several {
        route(&mut members, inbound, health, parser.prefix()).await;
    } else if let Some(one) = members.first() {
        route_one(&one.router, inbound, &one.machine.target, health).await;
    }
}

/// Hands each message to the router, in order. While the daemon is away: keeps the message and
/// tries again with backoff, telling the chat once — only a chat where this process saw the
/// daemon accept the sender (anyone else hears nothing), and never where the socket is (that
/// goes to the log). The platform's acknowledgement (Telegram's update offset) fires only once
/// the message was handled.
async fn route_one(
    router: &Router,
    mut inbound: mpsc::Receiver<Inbound>,
    socket: &Target,
    health: &PlatformHealth,
) {
    let mut client: Option<clibot_proto::Client> = None;
    while let Some(mut msg) = inbound.recv().await {
        health.heard();
        // A message handled for longer than the bound stalls the platform (see progress.rs).
        let mut handling = health.progress().handling();
        let ack = msg.ack.take();
        let mut waited = Duration::from_millis(200);
        let mut told = false;
        loop {
            if client.is_none() {
                match clibot_proto::connect_to(socket).await {
                    Ok(c) => client = Some(c),
                    Err(e) => {
                        if !told {
                            eprintln!(
                                "clibot-gateway: {}: {e}; holding a message from chat {} until clibotd is back",
                                health.name(),
                                msg.chat
                            );
                            if router.platform.is_local()
                                || router.verified.contains(&msg.chat, &msg.user)
                            {
                                let _ = router
                                    .platform
                                    .send(&msg.chat, crate::inbound::verified::DAEMON_DOWN)
                                    .await;
                            }
                            told = true;
                        }
                        // The console's input ended and no daemon answers: nobody is left to
                        // wait for, so say so and end instead of holding on for ever.
                        if router.platform.is_local() && inbound.is_closed() {
                            eprintln!(
                                "clibot-gateway: {}: the input ended while clibotd was not running; what was typed was not sent",
                                health.name()
                            );
                            return;
                        }
                        // Waiting for clibotd is no stall of the platform: it is known and said.
                        health.progress().cycle();
                        handling.renew();
                        tokio::time::sleep(waited).await;
                        waited = (waited * 2).min(Duration::from_secs(5));
                        continue;
                    }
                }
            }
            let Some(c) = client.as_mut() else { continue };
            match router.handle(c, &msg).await {
                Ok(()) => break,
                Err(e) => {
                    eprintln!(
                        "clibot-gateway: {}: lost the daemon ({e}); reconnecting",
                        health.name()
                    );
                    client = None;
                }
            }
        }
        if let Some(ack) = ack {
            let _ = ack.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_naming_a_machine_go_there_lists_go_everywhere_the_rest_where_the_chat_is_bound() {
        let names = ["laptop", "box"];
        let p = |t: &str| pick(&names, "!!", t);
        assert_eq!(p("!!use box/api"), Pick::One(1, "!!use api".into()));
        assert_eq!(
            p("!!new box/api claude ~/src/box/api"),
            Pick::One(1, "!!new api claude ~/src/box/api".into())
        );
        assert_eq!(p("!!stop laptop/web"), Pick::One(0, "!!stop web".into()));
        // Not a machine, or no name after it: the chat's own machine decides.
        assert_eq!(p("!!use other/api"), Pick::Bound);
        assert_eq!(p("!!use box/"), Pick::Bound);
        assert_eq!(p("!!use api"), Pick::Bound);
        assert_eq!(p("echo box/api"), Pick::Bound);
        assert_eq!(p("!!sessions"), Pick::All);
        assert_eq!(p("!!pending"), Pick::All);
        assert_eq!(p("!!usage 7d"), Pick::All);
        assert_eq!(p("!!budget"), Pick::All);
        assert_eq!(p("!!budget lift daily"), Pick::Bound);
        assert_eq!(p("!!help"), Pick::Home);
        assert_eq!(p("!!status"), Pick::Bound);
    }

    #[test]
    fn machines_come_from_the_config_with_exactly_one_way_each() {
        use crate::config::MachineConfig;
        let dir = std::path::Path::new("/run/c");
        let sock = std::path::Path::new("/run/c/clibotd.sock");
        let one = from_config(&[], sock, dir).expect("the local daemon");
        assert_eq!(
            (one.len(), one[0].home, &one[0].target),
            (1, true, &Target::Socket(sock.into()))
        );
        let m = |name: &str, socket: Option<&str>, ssh: Option<&str>| MachineConfig {
            name: name.into(),
            socket: socket.map(String::from),
            ssh: ssh.map(String::from),
            ..Default::default()
        };
        let two = from_config(
            &[m("a", Some("/s"), None), m("b", None, Some("me@b"))],
            sock,
            dir,
        )
        .expect("two machines");
        assert!(matches!(&two[1].target, Target::Command { label, .. } if label == "ssh://me@b"));
        for bad in [
            vec![m("a", Some("/s"), Some("me@b"))],
            vec![m("a", None, None)],
            vec![m("a/b", Some("/s"), None)],
            vec![m("a", Some("/s"), None), m("a", Some("/t"), None)],
            vec![m("a", None, Some("-oProxyCommand=x"))],
        ] {
            assert!(from_config(&bad, sock, dir).is_err(), "{bad:?}");
        }
    }
}
