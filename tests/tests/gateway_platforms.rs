//! One `clibot-gateway` process, no platform flag: it serves every platform of the config file
//! (here a fake Telegram and a fake Discord at once), each on its own connection; one failing
//! never stops the other; its state shows in `clibot-gateway status` and `clibotctl status`.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use clibot_tests::fake_discord::FakeDiscord;
use clibot_tests::fake_telegram::FakeTelegram;
use clibot_tests::{Harness, bin};

const TG_TOKEN: &str = "123456789:AAFakeTokenForClibotTestsOnly_0123456789";
const DC_TOKEN: &str = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.FakeToken.ForClibotTestsOnly0123456789";
const TG_ADMIN: i64 = 100;
const DC_ADMIN: u64 = 1_300_000_000_000_000_100;
const DC_DM: u64 = 1_400_000_000_000_000_100;

/// The gateway with no platform flag and no token in its environment: all from the config.
fn gateway(h: &Harness) -> Child {
    h.gateway(
        &[],
        &[("TEST_TG_TOKEN", TG_TOKEN), ("TEST_DC_TOKEN", DC_TOKEN)],
    )
}

fn gateway_status(h: &Harness) -> (bool, String) {
    let out = Command::new(bin("clibot-gateway"))
        .arg("status")
        .arg("--socket")
        .arg(&h.socket)
        .output()
        .expect("clibot-gateway status");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn config(tg: &FakeTelegram, dc_url: &str) -> String {
    format!(
        "\n[gateway.telegram]\ntoken = \"${{TEST_TG_TOKEN}}\"\napi_url = \"{}\"\n\
         [gateway.discord]\ntoken = \"${{TEST_DC_TOKEN}}\"\napi_url = \"{dc_url}\"\n\
         [access.telegram]\nadmins = [\"{TG_ADMIN}\"]\n[access.discord]\nadmins = [\"{DC_ADMIN}\"]\n",
        tg.url()
    )
}

#[test]
fn one_gateway_serves_telegram_and_discord_from_one_config() {
    let tg = FakeTelegram::start(TG_TOKEN);
    let dc = FakeDiscord::start(DC_TOKEN);
    let mut h = Harness::with_config(&config(&tg, &dc.url()));
    h.start_daemon();
    let mut g = gateway(&h);
    assert!(
        tg.wait_polling(Duration::from_secs(30)),
        "Telegram is polled"
    );
    assert!(
        dc.wait_ready(Duration::from_secs(30)),
        "Discord is connected"
    );
    let work = h.work.display().to_string();
    tg.push_message(TG_ADMIN, TG_ADMIN, "Owner", &format!("!!new t bash {work}"));
    tg.wait_sent("started on Telegram", |s| {
        s.iter()
            .any(|m| m.chat_id == TG_ADMIN && m.text.contains("started t"))
    });
    dc.push_message(DC_DM, DC_ADMIN, "owner", &format!("!!new d bash {work}"));
    dc.wait_sent("started on Discord", |s| {
        s.iter()
            .any(|m| m.channel_id == DC_DM && m.text().contains("started d"))
    });
    tg.push_message(TG_ADMIN, TG_ADMIN, "Owner", "echo tg-$((6*7))");
    dc.push_message(DC_DM, DC_ADMIN, "owner", "echo dc-$((6*7))");
    tg.wait_sent("the Telegram reply", |s| {
        s.iter()
            .any(|m| m.chat_id == TG_ADMIN && m.text.contains("tg-42"))
    });
    dc.wait_sent("the Discord reply", |s| {
        s.iter()
            .any(|m| m.channel_id == DC_DM && m.text().contains("dc-42"))
    });
    wait_until("both platforms reported connected", || {
        let (ok, out) = gateway_status(&h);
        ok && out.contains("telegram") && out.contains("discord")
    });
    // Each platform's deliveries are counted, in the report and in the daemon's metrics.
    wait_until("deliveries reported", || {
        let v: serde_json::Value =
            serde_json::from_str(&h.ctl_ok(&["status", "--json"])).unwrap_or_default();
        v["gateways"].as_array().is_some_and(|g| {
            g.iter()
                .filter(|p| p["deliveries"].as_u64().unwrap_or(0) >= 1)
                .count()
                == 2
        })
    });
    let metrics = h.ctl_ok(&["metrics"]);
    assert!(
        metrics.contains("clibot_gateway_deliveries{platform=\"telegram\"}"),
        "{metrics}"
    );
    let ctl = h.ctl_ok(&["status"]);
    assert!(
        ctl.contains("gateway:    telegram") && ctl.contains("gateway:    discord"),
        "{ctl}"
    );
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn one_platform_failing_never_stops_the_other() {
    let tg = FakeTelegram::start(TG_TOKEN);
    // Nothing listens here: Discord cannot connect at all.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead_url = format!("http://{}", dead.local_addr().expect("addr"));
    drop(dead);
    let mut h = Harness::with_config(&config(&tg, &dead_url));
    h.start_daemon();
    let mut g = gateway(&h);
    assert!(
        tg.wait_polling(Duration::from_secs(30)),
        "Telegram is polled"
    );
    let work = h.work.display().to_string();
    tg.push_message(TG_ADMIN, TG_ADMIN, "Owner", &format!("!!new t bash {work}"));
    tg.push_message(TG_ADMIN, TG_ADMIN, "Owner", "echo still-$((6*7))");
    tg.wait_sent("Telegram works", |s| {
        s.iter()
            .any(|m| m.chat_id == TG_ADMIN && m.text.contains("still-42"))
    });
    wait_until("the failure is reported", || {
        let (ok, out) = gateway_status(&h);
        !ok && out.contains("discord")
            && out.contains("retrying")
            && out
                .lines()
                .any(|l| l.starts_with("telegram") && l.contains("connected"))
    });
    let log = h.gateway_log();
    assert!(
        log.contains("discord") && log.contains("retrying in"),
        "{log}"
    );
    let _ = g.kill();
    let _ = g.wait();
}

#[test]
fn with_nothing_configured_it_says_which_keys_to_add() {
    let h = Harness::new();
    // The gateway with this config file: its exit code and what it said.
    let run = |config: &std::path::Path| {
        let out = Command::new(bin("clibot-gateway"))
            .arg("--socket")
            .arg(&h.socket)
            .env("CLIBOT_CONFIG", config)
            .env_remove("TELEGRAM_TOKEN")
            .env_remove("DISCORD_TOKEN")
            .output()
            .expect("run");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&h.config);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("[gateway.telegram] token") && err.contains("--console"),
        "{err}"
    );
    // An unknown key, and an unset variable, are errors that name them.
    let text = std::fs::read_to_string(&h.config).expect("config");
    for (extra, named) in [
        ("tokn = \"x\"", "tokn"),
        (
            "token = \"${CLIBOT_SURELY_UNSET_TG}\"",
            "CLIBOT_SURELY_UNSET_TG",
        ),
    ] {
        std::fs::write(&h.config, format!("{text}\n[gateway.telegram]\n{extra}\n")).expect("w");
        let (code, err) = run(&h.config);
        assert!(code == Some(2) && err.contains(named), "{err}");
    }
    // XDG_CONFIG_HOME is where the config is looked for by default.
    let xdg = h.dir.path().join("xdg");
    std::fs::create_dir_all(xdg.join("clibot")).expect("mkdir");
    std::fs::write(
        xdg.join("clibot/config.toml"),
        "[gateway.discord]\nbogus = 1\n",
    )
    .expect("w");
    let out = Command::new(bin("clibot-gateway"))
        .arg("--socket")
        .arg(&h.socket)
        .env_remove("CLIBOT_CONFIG")
        .env("XDG_CONFIG_HOME", &xdg)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(2)
            && err.contains("bogus")
            && err.contains(&xdg.display().to_string()),
        "{err}"
    );
}

/// Telegram stops answering for longer than `[gateway] down_notice_after`: the admin hears it
/// on Discord, once, and once more when Telegram works again.
#[test]
fn a_platform_down_too_long_is_told_to_the_admins_through_another() {
    let tg = FakeTelegram::start(TG_TOKEN);
    let dc = FakeDiscord::start(DC_TOKEN);
    let mut h = Harness::with_config(&format!(
        "\n[gateway]\nstall_after = \"2s\"\ndown_notice_after = \"4s\"\n{}",
        config(&tg, &dc.url())
    ));
    h.start_daemon();
    let mut g = gateway(&h);
    assert!(
        tg.wait_polling(Duration::from_secs(30)),
        "Telegram is polled"
    );
    assert!(
        dc.wait_ready(Duration::from_secs(30)),
        "Discord is connected"
    );
    // The admin's private chat on Discord is where the admin is told.
    dc.push_message(DC_DM, DC_ADMIN, "owner", "!!whoami");
    dc.wait_sent("whoami on Discord", |s| {
        s.iter().any(|m| m.channel_id == DC_DM)
    });
    for _ in 0..200 {
        tg.stall_next("getUpdates", Duration::from_secs(120));
    }
    let down = |s: &[clibot_tests::fake_discord::SentMessage]| {
        s.iter()
            .filter(|m| m.channel_id == DC_DM && m.text().contains("Telegram has not worked for"))
            .count()
    };
    dc.wait_sent("the down notice on Discord", |s| down(s) >= 1);
    tg.clear_stalls();
    let sent = dc.wait_sent("the recovery on Discord", |s| {
        s.iter()
            .any(|m| m.channel_id == DC_DM && m.text().contains("Telegram works again"))
    });
    assert_eq!(down(&sent), 1, "told once per outage");
    // And Telegram works: a message there is answered.
    tg.push_message(TG_ADMIN, TG_ADMIN, "Owner", "!!whoami");
    tg.wait_sent("Telegram answers again", |s| {
        s.iter().any(|m| m.chat_id == TG_ADMIN)
    });
    let _ = g.kill();
    let _ = g.wait();
}
