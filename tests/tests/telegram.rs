//! End to end: a fake Telegram Bot API on 127.0.0.1 → the real clibot-gateway (teloxide, long
//! polling) → the real clibotd → bash in tmux → the reply back in the fake chat. Pairing keeps an
//! unknown user out; a prompt is answered by a button press; a 429 delays but does not lose the
//! reply; killing the gateway mid-turn delivers the reply once (a repeat it cannot rule out is announced).

use std::process::{Child, Command};
use std::time::Duration;

use clibot_tests::fake_telegram::{self, FakeTelegram, Sent, gateway, retry_after_body, texts};
use clibot_tests::{Harness, bin, lines};

const TOKEN: &str = fake_telegram::TEST_TOKEN;
const ADMIN: i64 = 100;
const STRANGER: i64 = 555;

/// The callback data of the `i`-th button of an inline keyboard.
fn button(markup: &serde_json::Value, i: usize) -> String {
    markup["inline_keyboard"][i][0]["callback_data"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The newest message in `chat` that contains `text` and has buttons.
fn prompt_message(tg: &FakeTelegram, chat: i64, text: &str) -> Sent {
    tg.wait_sent(text, |s| {
        s.iter()
            .any(|m| m.chat_id == chat && m.text.contains(text) && m.reply_markup.is_some())
    })
    .into_iter()
    .rev()
    .find(|m| m.chat_id == chat && m.text.contains(text) && m.reply_markup.is_some())
    .expect("prompt message")
}

fn setup() -> (Harness, FakeTelegram, Child) {
    fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"
    ))
}

#[test]
fn a_telegram_message_runs_in_the_cli_and_the_reply_comes_back() {
    let (h, tg, mut g) = setup();
    let work = h.work.display().to_string();

    // An unknown user gets a pairing code, and nothing of theirs runs.
    tg.push_message(STRANGER, STRANGER, "Eve", "echo should-not-run");
    let code = fake_telegram::pairing_code(&tg, STRANGER);

    // The admin starts a session and talks to it.
    new_session(&tg, "t", &work);
    tg.push_message(ADMIN, ADMIN, "Owner", "echo tg-$((6*7))");
    tg.wait_sent("the reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("tg-42"))
    });
    assert!(
        !h.events().iter().any(|e| e["text"]
            .as_str()
            .is_some_and(|t| t.contains("should-not-run"))),
        "the stranger's text never reached a CLI"
    );

    // Approved on the machine, the stranger may act — on sessions that are theirs or shared
    // with them: the admin's session is neither, until the admin shares it.
    assert!(
        h.ctl_ok(&["pairing", "approve", &code])
            .contains(&format!("telegram user {STRANGER}"))
    );
    // The phone is told, in the chat its code was given in.
    tg.wait_sent("the approval told", |s| {
        texts(s, STRANGER)
            .iter()
            .any(|t| t.contains("approved you"))
    });
    tg.push_message(STRANGER, STRANGER, "Eve", "!!use t");
    tg.wait_sent("not theirs", |s| {
        texts(s, STRANGER)
            .iter()
            .any(|t| t.contains("that you may use"))
    });
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!share t {STRANGER}"));
    tg.wait_sent("shared", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("may now use t"))
    });
    tg.push_message(STRANGER, STRANGER, "Eve", "!!use t");
    tg.wait_sent("use", |s| {
        texts(s, STRANGER)
            .iter()
            .any(|t| t.contains("now talks to t"))
    });

    // A prompt comes with buttons; pressing one answers it.
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        "read -p 'Ship it? [y/N] ' a; echo ship=$a",
    );
    let sent = tg.wait_sent("the prompt", |s| {
        s.iter()
            .any(|m| m.chat_id == ADMIN && m.text.contains("Ship it?") && m.reply_markup.is_some())
    });
    let prompt = sent
        .iter()
        .rev()
        .find(|m| m.chat_id == ADMIN && m.text.contains("Ship it?"))
        .expect("prompt")
        .clone();
    let markup = prompt.reply_markup.clone().expect("buttons");
    let data = button(&markup, 0);
    let waiting = h
        .events()
        .into_iter()
        .rfind(|e| e["type"] == "waiting")
        .expect("waiting event");
    assert_eq!(
        data,
        format!("a:{}:1", waiting["prompt_id"].as_str().expect("id")),
        "each button carries its prompt's id"
    );
    tg.push_callback(ADMIN, ADMIN, prompt.message_id, &data);
    tg.wait_sent("the answer's effect", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("ship=y"))
    });

    // Flood control delays the reply but does not lose it.
    tg.fail_next("sendmessage", 429, retry_after_body(1));
    tg.push_message(ADMIN, ADMIN, "Owner", "echo after-flood-$((1+1))");
    tg.wait_sent("the reply after a 429", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("after-flood-2"))
    });

    // The update offset only moved forward.
    let offsets = tg.offsets();
    assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "{offsets:?}");
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn killing_the_gateway_mid_turn_delivers_the_reply_exactly_once() {
    let (h, tg, mut g) = setup();
    let work = h.work.display().to_string();
    new_session(&tg, "k", &work);
    tg.push_message(ADMIN, ADMIN, "Owner", "sleep 2; echo late-$((3*3))");
    std::thread::sleep(Duration::from_millis(700));
    let _ = g.kill();
    let _ = g.wait();
    std::thread::sleep(Duration::from_secs(3));
    let mut g = gateway(&h, &tg);
    tg.wait_sent("the late reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("late-9"))
    });
    std::thread::sleep(Duration::from_secs(2));
    let n = texts(&tg.sent(), ADMIN)
        .iter()
        .filter(|t| t.contains("late-9"))
        .count();
    assert_eq!(n, 1, "exactly once: {:#?}", texts(&tg.sent(), ADMIN));
    let started = texts(&tg.sent(), ADMIN)
        .iter()
        .filter(|t| t.contains("started k"))
        .count();
    assert_eq!(started, 1, "nothing already delivered comes again");
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn typing_while_working_long_output_as_a_file_and_one_poller_per_token() {
    let (h, tg, mut g) = setup();
    let work = h.work.display().to_string();
    new_session(&tg, "f", &work);

    // A typing indicator while the turn runs.
    tg.push_message(ADMIN, ADMIN, "Owner", "sleep 1; echo slow-done");
    tg.wait_sent("the slow reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("slow-done"))
    });
    let typing = tg.calls_of("sendchataction");
    assert!(
        typing
            .iter()
            .any(|c| c["action"] == "typing" && c["chat_id"] == ADMIN),
        "{typing:?}"
    );
    // A status message said it was working, and was edited in place when the turn ended.
    let sent = tg.wait_sent("the status edited to done", |s| {
        s.iter().any(|m| {
            m.method == "editmessagetext" && m.chat_id == ADMIN && m.text.contains("[f] done in")
        })
    });
    let edited = sent
        .iter()
        .find(|m| m.method == "editmessagetext" && m.text.contains("[f] done in"))
        .expect("edit");
    assert!(
        sent.iter().any(|m| m.method == "sendmessage"
            && m.message_id == edited.message_id
            && m.text.contains("working")),
        "the edit replaced the working message"
    );

    // Output longer than a few messages arrives as a file with a short summary.
    tg.push_message(ADMIN, ADMIN, "Owner", "seq 1 4000");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while tg.documents().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let docs = tg.documents();
    assert_eq!(docs.len(), 1, "one file");
    let content = String::from_utf8_lossy(&docs[0].content);
    assert!(
        content.contains("\n4000"),
        "the whole output is in the file"
    );
    assert!(
        docs[0]
            .caption
            .as_deref()
            .is_some_and(|c| c.contains("full text attached")),
        "{:?}",
        docs[0].caption
    );

    // A second gateway for the same bot on this machine refuses to start.
    let out = Command::new(bin("clibot-gateway"))
        .args(["--telegram", "--telegram-api-url", &tg.url(), "--socket"])
        .arg(&h.socket)
        .env("TELEGRAM_TOKEN", TOKEN)
        .env("CLIBOT_CONFIG", &h.config)
        .output()
        .expect("run a second gateway");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already polling this bot"), "{err}");
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn control_characters_from_a_chat_are_refused_with_a_clear_reply() {
    let (h, tg, mut g) = setup();
    let work = h.work.display().to_string();
    new_session(&tg, "c", &work);
    // Ctrl-D as text would end the shell: it is refused, not typed.
    tg.push_message(ADMIN, ADMIN, "Owner", "\u{4}");
    tg.wait_sent("the refusal", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("control character U+0004"))
    });
    tg.push_message(ADMIN, ADMIN, "Owner", "echo still-$((20+1))");
    tg.wait_sent("the shell still answers", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("still-21"))
    });
    assert!(
        !h.events().iter().any(|e| e["type"] == "exited"),
        "the shell did not end"
    );
    let _ = g.kill();
    let _ = g.wait();
}

/// A small deterministic pseudo-random sequence (xorshift), seeded from the clock and printed,
/// so a failing run can be replayed with CLIBOT_CHAOS_SEED.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed = std::env::var("CLIBOT_CHAOS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            })
            | 1;
        eprintln!("chaos seed: CLIBOT_CHAOS_SEED={seed}");
        Rng(seed)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Twenty turns from a chat; during each, the gateway is killed -9 at a random moment (before
/// the message is handed over, while it is typed, while the reply is sent) and started again.
/// Every message is typed exactly once and every reply arrives once (or, when the kill fell
/// between Telegram taking it and the gateway hearing so, again with a notice that it may be a
/// repeat).
#[test]
fn chaos_twenty_turns_with_the_gateway_killed_at_random_moments() {
    const TURNS: u64 = 20;
    let (h, tg, mut g) = setup();
    let work = h.work.display().to_string();
    new_session(&tg, "z", &work);
    let mut rng = Rng::new();
    for i in 1..=TURNS {
        let reply = format!("chaos-{i}-{}", i * 3);
        tg.push_message(ADMIN, ADMIN, "Owner", &format!("echo chaos-{i}-$(({i}*3))"));
        std::thread::sleep(Duration::from_millis(rng.below(1500)));
        let _ = g.kill();
        let _ = g.wait();
        g = gateway(&h, &tg);
        tg.wait_sent(&format!("reply {i}"), |s| {
            texts(s, ADMIN).iter().any(|t| t.contains(&reply))
        });
    }
    // Let anything delivered twice show up.
    std::thread::sleep(Duration::from_secs(2));
    let sent = texts(&tg.sent(), ADMIN);
    let events = h.events();
    for i in 1..=TURNS {
        let reply = format!("chaos-{i}-{}", i * 3);
        // Once, or — killed between Telegram taking it and the gateway hearing so, which no
        // gateway can tell apart from a send that never arrived — again, announced as a
        // possible repeat just before.
        let copies: Vec<usize> = (0..sent.len())
            .filter(|&k| sent[k].contains(&reply))
            .collect();
        let announced = copies.len() == 2 && sent[copies[1] - 1].contains("may be a repeat");
        assert!(
            copies.len() == 1 || announced,
            "reply {i} delivered once, or again announced: {sent:#?}"
        );
        let command = format!("echo chaos-{i}-$(({i}*3))");
        let typed = events
            .iter()
            .filter(|e| e["type"] == "input_sent" && e["text"] == command.as_str())
            .count();
        assert_eq!(typed, 1, "message {i} typed once");
    }
    let _ = g.kill();
    let _ = g.wait();
}

/// An old button must never answer a newer prompt: pressed after its prompt was answered, while
/// another prompt of the same session waits, it is refused and changes nothing.
#[test]
fn a_stale_button_never_answers_a_newer_prompt() {
    let (h, tg, mut g) = setup();
    let work = h.work.display().to_string();
    new_session(&tg, "p", &work);
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        "read -p 'First? [y/N] ' a; read -p 'Second? [y/N] ' b; echo got=$a,$b",
    );
    let first = prompt_message(&tg, ADMIN, "First?");
    let yes_first = button(first.reply_markup.as_ref().expect("buttons"), 0);
    tg.push_callback(ADMIN, ADMIN, first.message_id, &yes_first);
    let second = prompt_message(&tg, ADMIN, "Second?");
    // The first prompt's "yes" again (a double tap, a late delivery): refused.
    tg.push_callback(ADMIN, ADMIN, first.message_id, &yes_first);
    tg.wait_sent("the refusal", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("no longer waiting"))
    });
    // The second prompt's own button answers it.
    let no_second = button(second.reply_markup.as_ref().expect("buttons"), 1);
    assert_ne!(no_second, yes_first);
    tg.push_callback(ADMIN, ADMIN, second.message_id, &no_second);
    tg.wait_sent("the answers' effect", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("got=y,n"))
    });
    // Each answered prompt lost its buttons, and the chat was told who answered and how.
    let sent = tg.wait_sent("both prompts' buttons removed", |s| {
        [first.message_id, second.message_id].iter().all(|id| {
            s.iter()
                .any(|m| m.method == "editmessagereplymarkup" && m.message_id == *id)
        })
    });
    let told: Vec<_> = texts(&sent, ADMIN)
        .into_iter()
        .filter(|t| t.contains(&format!("answered by telegram:{ADMIN}")))
        .collect();
    assert_eq!(told.len(), 2, "{told:?}");
    let answers: Vec<_> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "prompt_resolved")
        .map(|e| e["answer"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(answers.len(), 2, "two prompts, two answers: {answers:?}");
    let _ = g.kill();
    let _ = g.wait();
}

/// A dialog's lines above its question (its title, what it will do) come with the prompt, above
/// the question in the message that carries the buttons; `clibotctl show` has them too.
#[test]
fn a_prompt_shows_the_lines_that_explain_it_above_its_question() {
    // Six lines checked: the prompt's own line and the few above it.
    let (h, tg, mut g) = fake_telegram::started(&format!(
        "\n[cli.bash.patterns]\ncheck_lines = 6\n\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"
    ));
    let work = h.work.display().to_string();
    new_session(&tg, "c", &work);
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        "clear; printf '\\nConfirmation Required\\nThis will modify 3 files\\n\\n'; read -p 'Proceed? [y/N] ' a; echo go=$a",
    );
    let prompt = prompt_message(&tg, ADMIN, "Proceed?");
    assert!(
        prompt
            .text
            .contains("Confirmation Required\nThis will modify 3 files\nProceed? [y/N]"),
        "{}",
        prompt.text
    );
    let show = h.ctl_ok(&["show", "c"]);
    assert!(
        show.contains(
            "context         Confirmation Required\n                This will modify 3 files"
        ),
        "{show}"
    );
    let data = button(prompt.reply_markup.as_ref().expect("buttons"), 0);
    tg.push_callback(ADMIN, ADMIN, prompt.message_id, &data);
    tg.wait_sent("the answer's effect", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("go=y"))
    });
    let _ = g.kill();
    let _ = g.wait();
}

/// The admin starts a bash session `name` from their private chat, and it is confirmed.
fn new_session(tg: &FakeTelegram, name: &str, work: &str) {
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new {name} bash {work}"));
    tg.wait_sent("started", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains(&format!("started {name}")))
    });
}

/// Starts daemon and gateway with this `[access.telegram]` body.
fn setup_with(access: &str) -> (Harness, FakeTelegram, Child) {
    fake_telegram::started(&format!("\n[access.telegram]\n{access}\n"))
}

/// How many calls the bot made for `chat` so far.
fn calls_for(tg: &FakeTelegram, chat: i64) -> usize {
    tg.calls()
        .iter()
        .filter(|(_, p)| {
            p["chat_id"].as_i64() == Some(chat) || p["chat_id"].as_str() == Some(&chat.to_string())
        })
        .count()
}

#[test]
fn a_kicked_group_is_suspended_while_the_owners_private_chat_keeps_working() {
    const GROUP: i64 = -1_002_001;
    let (h, tg, mut g) = setup_with(&format!(
        "policy = \"pairing\"\nadmins = [\"{ADMIN}\"]\ngroups = [\"{GROUP}\"]"
    ));
    let work = h.work.display().to_string();
    new_session(&tg, "p", &work);
    tg.push_message(GROUP, ADMIN, "Owner", "!!use p");
    tg.wait_sent("the group bound", |s| {
        texts(s, GROUP).iter().any(|t| t.contains("now talks to p"))
    });
    tg.push_message(ADMIN, ADMIN, "Owner", "echo one-$((1+1))");
    tg.wait_sent("the reply in both chats", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("one-2"))
            && texts(s, GROUP).iter().any(|t| t.contains("one-2"))
    });

    // The bot is removed from the group: every send there answers 403 from now on.
    tg.kick(GROUP);
    let before = calls_for(&tg, GROUP);
    for i in 0..3 {
        tg.push_message(ADMIN, ADMIN, "Owner", &format!("echo turn{i}-$((40+2))"));
        tg.wait_sent("the private chat's reply", |s| {
            texts(s, ADMIN)
                .iter()
                .any(|t| t.contains(&format!("turn{i}-42")))
        });
    }
    let sent = tg.wait_sent("the notice about the group", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("stopped delivering to another telegram chat"))
    });
    assert!(
        !texts(&sent, ADMIN)
            .iter()
            .any(|t| t.contains("stopped delivering") && t.contains(&GROUP.to_string())),
        "the notice does not name the chat"
    );
    for i in 0..3 {
        let n = texts(&sent, ADMIN)
            .iter()
            .filter(|t| t.contains(&format!("turn{i}-42")))
            .count();
        assert_eq!(n, 1, "turn {i} reached the private chat once");
    }
    assert_eq!(
        texts(&sent, ADMIN)
            .iter()
            .filter(|t| t.contains("stopped delivering"))
            .count(),
        1,
        "the owner is told once"
    );
    std::thread::sleep(Duration::from_secs(2));
    let tried = calls_for(&tg, GROUP) - before;
    assert!(
        tried <= 6,
        "the dead group was tried {tried} times over three turns: it must be suspended, not retried"
    );
    let chats = h.ctl_ok(&["chats"]);
    assert!(
        chats.contains(&GROUP.to_string()) && chats.contains("SUSPENDED"),
        "{chats}"
    );
    assert!(
        h.events().iter().any(|e| e["type"] == "chat_suspended"
            && e["chat"].as_str().and_then(|c| c.parse().ok()) == Some(GROUP)),
        "a chat_suspended event"
    );

    // The bot is added back and someone writes there: the group works again, from now on.
    tg.unkick(GROUP);
    tg.push_message(GROUP, ADMIN, "Owner", "echo back-$((3+4))");
    tg.wait_sent("the group's own reply", |s| {
        texts(s, GROUP).iter().any(|t| t.contains("back-7"))
    });
    let sent = tg.sent();
    assert!(
        !texts(&sent, GROUP).iter().any(|t| t.contains("turn1-42")),
        "what the group missed while suspended is not dumped on it"
    );
    assert!(!h.ctl_ok(&["chats"]).contains("SUSPENDED"));
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn a_group_that_is_not_enabled_runs_nothing_and_hears_nothing() {
    const GROUP: i64 = -1_003_001;
    let (h, tg, mut g) = setup();
    let work = h.work.display().to_string();
    new_session(&tg, "p", &work);
    // Even the admin cannot use a group that the config does not name.
    tg.push_message(GROUP, ADMIN, "Owner", "!!use p");
    tg.wait_sent("the one line", |s| {
        texts(s, GROUP).iter().any(|t| t.contains("not enabled"))
    });
    tg.push_message(GROUP, ADMIN, "Owner", "echo leak-$((1+1))");
    tg.push_message(GROUP, STRANGER, "Eve", "hello");
    tg.push_message(GROUP, ADMIN, "Owner", "!!new q bash /");
    // The private chat still works, and what it runs never reaches the group.
    tg.push_message(ADMIN, ADMIN, "Owner", "echo fine-$((2+2))");
    tg.wait_sent("the private reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("fine-4"))
    });
    // Updates are handled in order: the group's were handled before that reply.
    std::thread::sleep(Duration::from_secs(1));
    let sent = tg.sent();
    let group = texts(&sent, GROUP);
    assert_eq!(group.len(), 1, "one line, then silence: {group:?}");
    assert!(
        !h.events()
            .iter()
            .any(|e| e["type"] == "input_sent"
                && e["text"].as_str().is_some_and(|t| t.contains("leak"))),
        "nothing from the group ran"
    );
    assert!(!h.ctl_ok(&["list"]).contains(" q "), "no session q");
    assert!(!h.ctl_ok(&["chats"]).contains(&GROUP.to_string()));
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn a_user_cannot_see_or_use_another_users_session_until_it_is_shared() {
    const ANN: i64 = 200;
    const BOB: i64 = 300;
    let (h, tg, mut g) = setup_with(&format!(
        "policy = \"allowlist\"\nallow = [\"{ANN}\", \"{BOB}\"]\nadmins = [\"{ADMIN}\"]\nclis = [\"*\"]"
    ));
    tg.push_message(ANN, ANN, "Ann", "!!new mine bash");
    tg.wait_sent("Ann's session", |s| {
        texts(s, ANN).iter().any(|t| t.contains("started mine"))
    });
    tg.push_message(BOB, BOB, "Bob", "!!use mine");
    tg.wait_sent("Bob refused", |s| {
        texts(s, BOB)
            .iter()
            .any(|t| t.contains("no session named \"mine\" that you may use"))
    });
    tg.push_message(BOB, BOB, "Bob", "!!sessions");
    tg.push_message(BOB, BOB, "Bob", "echo bob-$((1+1))");
    let sent = tg.wait_sent("Bob's hints", |s| {
        texts(s, BOB)
            .iter()
            .filter(|t| t.contains("no sessions yet"))
            .count()
            >= 2
    });
    assert!(
        !texts(&sent, BOB).iter().any(|t| t.contains("mine (bash)")),
        "Bob does not even see it"
    );
    assert!(!h.events().iter().any(
        |e| e["type"] == "input_sent" && e["text"].as_str().is_some_and(|t| t.contains("bob-"))
    ));
    // Ann shares it; now Bob may use it.
    tg.push_message(ANN, ANN, "Ann", &format!("!!share mine {BOB}"));
    tg.wait_sent("shared", |s| {
        texts(s, ANN)
            .iter()
            .any(|t| t.contains(&format!("telegram:{BOB} may now use mine")))
    });
    tg.push_message(BOB, BOB, "Bob", "!!use mine");
    tg.push_message(BOB, BOB, "Bob", "echo shared-$((1+1))");
    tg.wait_sent("Bob's reply", |s| {
        texts(s, BOB).iter().any(|t| t.contains("shared-2"))
    });
    // Refusals are on record; the owner (or the machine) can take the share back.
    let audit = std::fs::read_to_string(h.state_dir.join("audit.jsonl")).expect("audit log");
    assert!(
        audit
            .lines()
            .any(|l| l.contains(&BOB.to_string()) && l.contains("refused") && l.contains("mine")),
        "{audit}"
    );
    let out = h.ctl_ok(&["share", "mine", &format!("telegram:{BOB}"), "--revoke"]);
    assert!(out.contains("shared with nobody"), "{out}");
    tg.push_message(BOB, BOB, "Bob", "echo again-$((1+1))");
    tg.wait_sent("Bob shut out again", |s| {
        texts(s, BOB)
            .iter()
            .filter(|t| t.contains("no sessions yet"))
            .count()
            >= 3
    });
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn a_reply_in_several_messages_resumes_at_the_part_that_failed() {
    let (h, tg, mut g) = setup();
    let work = h.work.display().to_string();
    new_session(&tg, "m", &work);
    // About 6.9 kB: two messages. The second fails once with a passing error.
    tg.fail_when(
        "sendmessage",
        "\n1400\n",
        502,
        clibot_tests::fake_telegram::error_body(502, "Bad Gateway"),
    );
    tg.push_message(ADMIN, ADMIN, "Owner", "seq 1 1500");
    let sent = tg.wait_sent("the whole reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("\n1500"))
    });
    drop(sent);
    std::thread::sleep(Duration::from_secs(1));
    let sent = tg.sent();
    let count = |needle: &str| {
        texts(&sent, ADMIN)
            .iter()
            .filter(|t| t.contains(needle))
            .count()
    };
    assert_eq!(count("\n500\n"), 1, "the first part went out once");
    assert_eq!(
        count("\n1400\n"),
        1,
        "the second part went out once, after the retry"
    );
    let tried = tg
        .calls_of("sendmessage")
        .iter()
        .filter(|c| c["text"].as_str().is_some_and(|t| t.contains("\n1400\n")))
        .count();
    assert_eq!(tried, 2, "one failure, one retry");
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn a_chat_is_told_when_the_log_lost_events_it_never_got() {
    let mut h = Harness::with_config(&format!("\n[access.telegram]\nadmins = [\"{ADMIN}\"]\n"));
    let config = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        config.replace(
            "stop_timeout_ms = 2000",
            "stop_timeout_ms = 2000\nevent_retention = 20",
        ),
    )
    .expect("config");
    h.start_daemon();
    let (tg, mut g) = fake_telegram::with_gateway(&h);
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new r bash {work}"));
    tg.push_message(ADMIN, ADMIN, "Owner", "echo first-$((1+1))");
    tg.wait_sent("the first reply", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("first-2"))
    });
    let _ = g.kill();
    let _ = g.wait();
    // While no gateway runs, far more happens than the log keeps.
    for i in 0..12 {
        h.ctl_ok(&["send", "r", &format!("echo gone-{i}")]);
        h.wait_screen("r", "the echo", |s| {
            lines(s).contains(&format!("gone-{i}").as_str())
        });
    }
    let mut g = gateway(&h, &tg);
    tg.wait_sent("the notice", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("were removed from the log before this chat got them"))
    });
    // And delivery goes on after the gap.
    tg.push_message(ADMIN, ADMIN, "Owner", "echo after-$((2+2))");
    tg.wait_sent("a reply after the gap", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("after-4"))
    });
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn a_quiet_chat_keeps_up_with_the_log_while_another_chat_is_busy() {
    const OTHER: i64 = 101;
    let (h, tg, mut g) = setup_with(&format!("admins = [\"{ADMIN}\", \"{OTHER}\"]"));
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new quiet bash {work}"));
    tg.push_message(OTHER, OTHER, "Other", &format!("!!new busy bash {work}"));
    tg.wait_sent("both started", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("started quiet"))
            && texts(s, OTHER).iter().any(|t| t.contains("started busy"))
    });
    let cursor = |chat: i64| -> u64 {
        let rows: serde_json::Value =
            serde_json::from_str(&h.ctl_ok(&["chats", "--json"])).expect("json");
        rows.as_array()
            .into_iter()
            .flatten()
            .find(|r| r["chat"].as_str().and_then(|c| c.parse().ok()) == Some(chat))
            .and_then(|r| r["delivered_through"].as_u64())
            .unwrap_or(0)
    };
    let quiet_before = cursor(ADMIN);
    // Past the relay's sync interval, the busy chat's next turn moves the quiet chat up too:
    // otherwise it would lag behind the log's retention and be told of "lost" events.
    std::thread::sleep(Duration::from_secs(11));
    tg.push_message(OTHER, OTHER, "Other", "echo busy-$((1+1))");
    tg.wait_sent("the busy reply", |s| {
        texts(s, OTHER).iter().any(|t| t.contains("busy-2"))
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while cursor(ADMIN) <= quiet_before {
        assert!(
            std::time::Instant::now() < deadline,
            "the quiet chat's cursor stayed at {quiet_before}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        !texts(&tg.sent(), ADMIN)
            .iter()
            .any(|t| t.contains("busy-2")),
        "and nothing of the other session reached it"
    );
    let _ = g.kill();
    let _ = g.wait();
}

/// In a group bound to the admin's session, a member who owns a session of their own takes the
/// group over neither by writing there nor by pressing the buttons of the admin's prompt: both
/// are refused, and the group stays bound, the prompt waiting.
#[test]
fn a_member_cannot_take_over_a_group_bound_to_the_admins_session() {
    const GROUP: i64 = -1_004_001;
    const MEMBER: i64 = 400;
    let (h, tg, mut g) = setup_with(&format!(
        "policy = \"allowlist\"\nallow = [\"{MEMBER}\"]\nclis = [\"bash\"]\nadmins = [\"{ADMIN}\"]\ngroups = [\"{GROUP}\"]"
    ));
    let work = h.work.display().to_string();
    new_session(&tg, "p", &work);
    tg.push_message(GROUP, ADMIN, "Owner", "!!use p");
    tg.wait_sent("the group bound", |s| {
        texts(s, GROUP).iter().any(|t| t.contains("now talks to p"))
    });
    tg.push_message(MEMBER, MEMBER, "Mel", "!!new mine bash");
    tg.wait_sent("the member's own session", |s| {
        texts(s, MEMBER).iter().any(|t| t.contains("started mine"))
    });
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        "read -p 'Deploy? [y/N] ' a; echo deploy=$a",
    );
    let prompt = prompt_message(&tg, GROUP, "Deploy?");
    let yes = button(prompt.reply_markup.as_ref().expect("buttons"), 0);

    tg.push_message(GROUP, MEMBER, "Mel", "echo takeover-$((1+1))");
    tg.push_callback(GROUP, MEMBER, prompt.message_id, &yes);
    tg.push_message(GROUP, MEMBER, "Mel", "!!screen");
    let sent = tg.wait_sent("three refusals", |s| {
        texts(s, GROUP)
            .iter()
            .filter(|t| t.contains("bound to a session you may not use"))
            .count()
            >= 3
    });
    assert!(
        !texts(&sent, GROUP).iter().any(|t| t.contains("mine")),
        "the group was not moved to the member's session"
    );
    // Nor by asking for it: only an admin or the bound session's owner rebinds a group.
    tg.push_message(GROUP, MEMBER, "Mel", "!!use mine");
    tg.wait_sent("the rebinding refused", |s| {
        texts(s, GROUP)
            .iter()
            .any(|t| t.contains("only an admin or the session's owner may bind this group"))
    });
    let chats = h.ctl_ok(&["chats"]);
    assert!(
        chats
            .lines()
            .any(|l| l.contains(&format!("telegram:{GROUP} ")) && l.contains("→ p ")),
        "{chats}"
    );
    let events = h.events();
    assert!(
        !events.iter().any(|e| e["type"] == "input_sent"
            && e["text"].as_str().is_some_and(|t| t.contains("takeover"))),
        "nothing of the member's reached the admin's session"
    );
    assert!(
        !events.iter().any(|e| e["type"] == "prompt_resolved"),
        "the member's press answered nothing"
    );
    // The admin's own press still answers it, in the same group.
    tg.push_callback(GROUP, ADMIN, prompt.message_id, &yes);
    tg.wait_sent("the answer's effect", |s| {
        texts(s, GROUP).iter().any(|t| t.contains("deploy=y"))
    });
    let _ = g.kill();
    let _ = g.wait();
}

/// With the daemon down the gateway cannot check anyone: a stranger and an unlisted group hear
/// nothing at all; a chat where the daemon accepted the sender before is told, without a path.
#[test]
fn with_the_daemon_down_only_a_chat_verified_before_is_answered_and_never_with_a_path() {
    const GROUP: i64 = -1_005_001;
    let (mut h, tg, mut g) = setup();
    tg.push_message(ADMIN, ADMIN, "Owner", "!!whoami");
    tg.wait_sent("the admin accepted", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("user 100"))
    });
    let held = |h: &Harness, chat: i64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !h
            .gateway_log()
            .contains(&format!("holding a message from chat {chat} "))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the gateway never held the message of {chat}: {}",
                h.gateway_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Past the moment a reply would have been sent.
        std::thread::sleep(Duration::from_millis(500));
    };

    // A stranger in a direct chat: silence while the daemon is down, a pairing code once it is back.
    h.kill_daemon();
    tg.push_message(STRANGER, STRANGER, "Eve", "hello?");
    held(&h, STRANGER);
    assert!(
        texts(&tg.sent(), STRANGER).is_empty(),
        "the stranger heard something"
    );
    h.start_daemon();
    tg.wait_sent("the stranger's code", |s| {
        texts(s, STRANGER)
            .iter()
            .any(|t| t.contains("pairing code"))
    });

    // Even the admin, in a group the daemon never accepted them in: silence.
    h.kill_daemon();
    tg.push_message(GROUP, ADMIN, "Owner", "!!whoami");
    held(&h, GROUP);
    assert!(
        texts(&tg.sent(), GROUP).is_empty(),
        "the group heard something"
    );
    h.start_daemon();
    tg.wait_sent("the group's one line", |s| {
        texts(s, GROUP).iter().any(|t| t.contains("not enabled"))
    });

    // The admin's own chat, accepted before: told, with no path, and handled once it is back.
    h.kill_daemon();
    tg.push_message(ADMIN, ADMIN, "Owner", "!!whoami");
    let sent = tg.wait_sent("the notice", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("daemon is not reachable"))
    });
    let socket = h.socket.display().to_string();
    for t in texts(&sent, ADMIN) {
        assert!(!t.contains(&socket) && !t.contains(".sock"), "{t}");
    }
    for chat in [STRANGER, GROUP] {
        for t in texts(&sent, chat) {
            assert!(!t.contains("not reachable") && !t.contains(&socket), "{t}");
        }
    }
    assert!(h.gateway_log().contains(&socket), "the log has the path");
    h.start_daemon();
    tg.wait_sent("the admin's answer", |s| {
        texts(s, ADMIN)
            .iter()
            .filter(|t| t.contains("user 100"))
            .count()
            >= 2
    });
    let _ = g.kill();
    let _ = g.wait();
}

/// `Select an option [1-3]:` with nothing listed is answered from the chat: the range is its
/// buttons, and a typed `2` types 2.
#[test]
fn a_range_prompt_is_answered_from_the_chat() {
    let (h, tg, mut g) = setup();
    let work = h.work.display().to_string();
    new_session(&tg, "sel", &work);
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        "read -p 'Select an option [1-3]: ' x; echo picked=$x",
    );
    let prompt = prompt_message(&tg, ADMIN, "Select an option [1-3]");
    let markup = prompt.reply_markup.clone().expect("buttons");
    let labels: Vec<String> = markup["inline_keyboard"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row[0]["text"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(labels.len(), 3, "{markup}");
    tg.push_message(ADMIN, ADMIN, "Owner", "2");
    h.wait_screen("sel", "the answer typed", |t| {
        lines(t).contains(&"picked=2")
    });
    let _ = g.kill();
    let _ = g.wait();
}
