//! End to end, a gateway that cannot stall unseen: Telegram's receive loop stops completing
//! cycles — a handler hangs on a call to the Bot API while it holds the batch (so the next long
//! poll is not sent), or `getUpdates` itself stops answering — and with `[gateway] stall_after`
//! the gateway restarts the loop: a message sent meanwhile is answered, `clibotctl status`
//! shows the restart and the last completed cycle, and the metric
//! `clibot_gateway_last_progress_seconds` is exported. Real clibot-gateway and clibotd, fake
//! Telegram.

use std::process::Child;
use std::time::{Duration, Instant};

use clibot_tests::Harness;
use clibot_tests::fake_telegram::{self, FakeTelegram, texts};

const ADMIN: i64 = 100;

/// Kills the gateway however the test ends.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn setup() -> (Harness, FakeTelegram, Gateway) {
    let (h, tg, g) = fake_telegram::started(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n\
         [gateway]\nstall_after = \"3s\"\ndown_notice_after = \"0\"\n"
    ));
    let g = Gateway(g);
    whoami(&tg, 1);
    (h, tg, g)
}

/// Sends `!!whoami` and waits for the `n`th answer.
fn whoami(tg: &FakeTelegram, n: usize) {
    tg.push_message(ADMIN, ADMIN, "Owner", "!!whoami");
    tg.wait_sent("an answer to !!whoami", |s| {
        texts(s, ADMIN)
            .iter()
            .filter(|t| t.contains(&format!("in chat {ADMIN}")))
            .count()
            >= n
    });
}

/// Telegram's row of `clibotctl status --json`, once it satisfies `pred` (reports come every
/// few seconds); panics with the last one after 30 s.
fn telegram_status(h: &Harness, pred: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = h.ctl_ok(&["status", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("status --json is JSON");
        let row = v["gateways"]
            .as_array()
            .and_then(|g| g.iter().find(|g| g["platform"] == "telegram"))
            .cloned()
            .unwrap_or_default();
        if pred(&row) {
            return row;
        }
        assert!(Instant::now() < deadline, "status never matched: {v:#}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn restarts(row: &serde_json::Value) -> u64 {
    row["restarts"].as_u64().unwrap_or(0)
}

/// A button press whose handling hangs (`answerCallbackQuery` does not answer) holds the batch,
/// and with it the next `getUpdates`: the loop completes no cycle, the gateway restarts it
/// within the bound, and a message sent meanwhile is answered.
#[test]
fn a_hanging_handler_does_not_hold_telegram_for_good() {
    let (h, tg, _g) = setup();
    let before = telegram_status(&h, |r| r["last_progress_ms"].as_i64().unwrap_or(0) > 0);
    assert_eq!(restarts(&before), 0, "{before:#}");
    assert_eq!(before["stalled"], false, "{before:#}");
    assert_eq!(before["stall_after_ms"], 3000, "{before:#}");

    tg.stall_next("answerCallbackQuery", Duration::from_secs(120));
    tg.push_callback(ADMIN, ADMIN, 1, "not a prompt's button");
    let t0 = Instant::now();
    whoami(&tg, 2);
    // Generous: the bound is 3 s; a loaded machine may take much longer to reconnect.
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert!(
        h.gateway_log().contains("restarting it"),
        "{}",
        h.gateway_log()
    );

    let after = telegram_status(&h, |r| restarts(r) >= 1 && r["stalled"] == false);
    assert!(
        after["last_restart_ms"].as_i64().unwrap_or(0) > 0,
        "{after:#}"
    );
    assert!(
        after["last_progress_ms"].as_i64().unwrap_or(0)
            >= before["last_progress_ms"].as_i64().unwrap_or(0),
        "{after:#}"
    );
    let text = h.ctl_ok(&["status"]);
    assert!(text.contains("restarted"), "{text}");

    // The metric: seconds since the last cycle, a small number for a platform that works.
    let metrics = h.ctl_ok(&["metrics"]);
    let seconds = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("clibot_gateway_last_progress_seconds{platform=\"telegram\"} ")
        })
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no last-progress metric in\n{metrics}"));
    assert!((0.0..30.0).contains(&seconds), "{seconds}");
    assert!(
        metrics.lines().any(
            |l| l.starts_with("clibot_gateway_restarts{platform=\"telegram\"} ")
                && !l.ends_with(" 0")
        ),
        "{metrics}"
    );
}

/// `getUpdates` stops answering (the long poll hangs past its timeout): restarted the same
/// way, and the message waiting at Telegram is answered.
#[test]
fn a_long_poll_that_never_returns_is_restarted() {
    let (h, tg, _g) = setup();
    tg.stall_next("getUpdates", Duration::from_secs(120));
    // The poll after the one that is out now hangs; give it the time to be sent.
    std::thread::sleep(Duration::from_secs(2));
    let t0 = Instant::now();
    whoami(&tg, 2);
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    // The gateway reports at once when the platform is connected again (still marked stalled
    // until its first cycle), and again within seconds: the loop is no longer stalled then.
    let row = telegram_status(&h, |r| {
        restarts(r) >= 1 && r["state"] == "connected" && r["stalled"] == false
    });
    assert!(row["last_progress_ms"].as_i64().unwrap_or(0) > 0, "{row:#}");
    let doctor = h.ctl(&["doctor"]);
    let out = String::from_utf8_lossy(&doctor.stdout);
    assert!(out.contains("restarted"), "{out}");
}
