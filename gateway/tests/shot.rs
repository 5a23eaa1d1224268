//! `!!shot` end to end: the real daemon and gateway, a fake Telegram, bash in tmux. The picture
//! the chat gets is a valid PNG whose cells are the renderer's own rasters of the pane's text,
//! in the pane's colours.

use std::time::{Duration, Instant};

use clibot_gateway::shot::{BACKGROUND, FOREGROUND, Renderer, Rgb, palette};
use clibot_tests::Harness;
use clibot_tests::fake_telegram::{self, texts};

const ADMIN: i64 = 100;

/// Decodes a PNG into (width, height, RGB pixels).
fn decode(png: &[u8]) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    assert_eq!(info.color_type, png::ColorType::Rgb);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

/// The coloured line [`COLOURED`] prints.
const COLOURED: &str = r"clear; printf '\033[31mRED\033[0m plain \033[44mBG\033[0m\n'";

/// The PNG is whole cells, one row of which is "RED plain BG" as the renderer draws it: RED in
/// red, "plain" in the default colour, BG on blue.
fn shows_the_coloured_line(png: &[u8]) {
    // To look at it: CLIBOT_TEST_SHOT_DIR=/some/dir.
    if let Ok(dir) = std::env::var("CLIBOT_TEST_SHOT_DIR") {
        let _ = std::fs::write(
            std::path::Path::new(&dir).join(format!("shot-{}.png", std::process::id())),
            png,
        );
    }
    let (w, ht, img) = decode(png);
    let r = Renderer::new();
    assert_eq!(w % r.cell_w, 0, "whole cells: {w}");
    assert_eq!(ht % r.cell_h, 0, "whole cells: {ht}");
    let cell = |row: u32, col: u32| -> Vec<u8> {
        let mut v = Vec::new();
        for y in row * r.cell_h..(row + 1) * r.cell_h {
            let i = ((y * w + col * r.cell_w) * 3) as usize;
            v.extend_from_slice(&img[i..i + (r.cell_w * 3) as usize]);
        }
        v
    };
    let is =
        |row: u32, col: u32, ch: &str, fg: Rgb, bg: Rgb| cell(row, col) == r.raster(ch, fg, bg);
    let (red, blue) = (palette(1), palette(4));
    let found = (0..ht / r.cell_h).find(|&row| {
        is(row, 0, "R", red, BACKGROUND)
            && is(row, 1, "E", red, BACKGROUND)
            && is(row, 2, "D", red, BACKGROUND)
            && is(row, 3, " ", FOREGROUND, BACKGROUND)
            && is(row, 4, "p", FOREGROUND, BACKGROUND)
            && is(row, 8, "n", FOREGROUND, BACKGROUND)
            && is(row, 10, "B", FOREGROUND, blue)
            && is(row, 11, "G", FOREGROUND, blue)
    });
    assert!(
        found.is_some(),
        "no row of the picture shows \"RED plain BG\" in its colours ({w}x{ht})"
    );
}

#[test]
fn shot_sends_a_png_whose_cells_show_the_panes_text_in_its_colours() {
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"
    ));
    h.start_daemon();
    let (tg, _g) = fake_telegram::with_gateway(&h);
    let work = h.work.display().to_string();
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new s bash {work}"));
    tg.wait_sent("started", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("started s"))
    });
    tg.push_message(ADMIN, ADMIN, "Owner", COLOURED);
    h.wait_screen("s", "the coloured line", |t| t.contains("RED plain BG"));
    tg.push_message(ADMIN, ADMIN, "Owner", "!!shot");
    let deadline = Instant::now() + Duration::from_secs(20);
    let photo = loop {
        if let Some(p) = tg.photos().into_iter().next() {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "no picture; sent: {:?}\n{}",
            texts(&tg.sent(), ADMIN),
            h.gateway_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(photo.chat_id, ADMIN);
    assert_eq!(photo.caption.as_deref(), Some("[s]"));
    shows_the_coloured_line(&photo.content);
}

#[test]
fn on_discord_the_picture_is_an_attachment() {
    use clibot_tests::fake_discord;
    const ADMIN: u64 = 1_300_000_000_000_000_100;
    const DM: u64 = 1_400_000_000_000_000_100;
    let mut h = Harness::with_config(&format!("\n[access.discord]\nadmins = [\"{ADMIN}\"]\n"));
    h.start_daemon();
    let (dc, _g) = fake_discord::with_gateway(&h);
    let work = h.work.display().to_string();
    dc.push_message(DM, ADMIN, "owner", &format!("!!new s bash {work}"));
    dc.wait_sent("started", |s| {
        s.iter()
            .any(|m| m.channel_id == DM && m.text().contains("started s"))
    });
    dc.push_message(DM, ADMIN, "owner", COLOURED);
    h.wait_screen("s", "the coloured line", |t| t.contains("RED plain BG"));
    dc.push_message(DM, ADMIN, "owner", "!!shot");
    let sent = dc.wait_sent("the picture", |s| {
        s.iter()
            .any(|m| m.files.iter().any(|(n, _)| n == "screen.png"))
    });
    let png = sent
        .iter()
        .flat_map(|m| m.files.iter())
        .find(|(n, _)| n == "screen.png")
        .map(|(_, b)| b.clone())
        .unwrap_or_default();
    shows_the_coloured_line(&png);
}

#[test]
fn on_feishu_the_picture_is_an_image_message() {
    use clibot_tests::fake_feishu::{
        APP_ID, APP_SECRET, FakeFeishu, gateway, gateway_config, text_event,
    };
    const ADMIN: &str = "ou_admin000000000000000000000000000";
    const CHAT: &str = "oc_admin0000000000000000000000000000";
    let fs = FakeFeishu::start(APP_ID, APP_SECRET);
    let mut h = Harness::with_config(&gateway_config(
        &fs,
        &format!("[access.feishu]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"),
    ));
    h.start_daemon();
    let mut g = gateway(&h, &fs);
    let say = |n: u32, text: &str| {
        fs.push_event(&text_event(
            &format!("ev{n}"),
            &format!("om_m{n}"),
            CHAT,
            "p2p",
            ADMIN,
            text,
            &[],
        ));
    };
    let work = h.work.display().to_string();
    say(1, &format!("!!new s bash {work}"));
    fs.wait_sent("started", |s| {
        s.iter()
            .any(|m| m.chat == CHAT && m.text().contains("started s"))
    });
    say(2, COLOURED);
    h.wait_screen("s", "the coloured line", |t| t.contains("RED plain BG"));
    say(3, "!!shot");
    let sent = fs.wait_sent("the picture", |s| {
        s.iter().any(|m| m.chat == CHAT && m.msg_type == "image")
    });
    let key = sent
        .iter()
        .find(|m| m.msg_type == "image")
        .and_then(|m| m.content["image_key"].as_str().map(str::to_string))
        .unwrap_or_default();
    let png = fs
        .uploads()
        .into_iter()
        .find(|u| u.file_key == key)
        .map(|u| u.data)
        .unwrap_or_default();
    shows_the_coloured_line(&png);
    let _ = g.kill();
    let _ = g.wait();
}
