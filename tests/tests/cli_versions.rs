//! The CLIs' versions: the installed test CLIs are the ones `tests/cli-versions.toml` names (the
//! file `.ci/run` installs from and `doctor` embeds), and a session whose CLI is outside the
//! versions its pattern pack was made for says so once — in its events (so its chats), in
//! `doctor` — with its version in `list`, `show`, the `spawned` event and the metrics.

use std::os::unix::fs::PermissionsExt;

use clibot_tests::{Harness, tested_entry};
use serde_json::Value;

fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `tests/node/package.json` pins exactly the CLIs of `tests/cli-versions.toml` at its versions
/// (and nothing else), `tests/node-runtime/package.json` the Node.js they need; what npm
/// installed under them is those versions.
#[test]
fn the_pinned_packages_are_the_ones_the_versions_file_names() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let table: toml::Table =
        toml::from_str(include_str!("../cli-versions.toml")).expect("tests/cli-versions.toml");
    let mut clis = serde_json::Map::new();
    let mut runtimes = serde_json::Map::new();
    for cli in table.keys() {
        clis.insert(
            tested_entry(cli, "package"),
            Value::String(tested_entry(cli, "version")),
        );
        let mut node = tested_entry(cli, "node_package");
        if std::env::consts::ARCH == "aarch64" {
            // `.ci/run` installs the arm64 package there.
            node = node.replace("-x64", "-arm64");
        }
        if !node.is_empty() {
            runtimes.insert(node, Value::String(tested_entry(cli, "node_version")));
        }
    }
    for cli in ["claude", "codex", "gemini", "opencode", "copilot", "qwen"] {
        assert!(
            !tested_entry(cli, "version").is_empty(),
            "{cli} has a tested version"
        );
    }
    for (dir, want) in [("node", &clis), ("node-runtime", &runtimes)] {
        let pkg = read_json(&root.join(dir).join("package.json"));
        assert_eq!(
            pkg["dependencies"].as_object(),
            Some(want),
            "tests/{dir}/package.json must pin what tests/cli-versions.toml names: run .ci/run"
        );
        for (name, version) in want {
            let installed = read_json(
                &root
                    .join(dir)
                    .join("node_modules")
                    .join(name)
                    .join("package.json"),
            );
            assert_eq!(
                &installed["version"], version,
                "{name} installed under tests/{dir}: run .ci/run"
            );
        }
    }
}

/// A stand-in CLI in an npm-like package of version `version`: a plain shell.
fn fake_cli(h: &Harness, version: &str) -> String {
    let pkg = h.dir.path().join("node_modules/fake-cli");
    std::fs::create_dir_all(pkg.join("bin")).expect("mkdir");
    std::fs::write(
        pkg.join("package.json"),
        format!(r#"{{"name":"fake-cli","version":"{version}"}}"#),
    )
    .expect("write");
    let bin = pkg.join("bin/fake");
    std::fs::write(&bin, "#!/bin/sh\nPS1='$ ' exec sh\n").expect("write");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    bin.display().to_string()
}

#[test]
fn a_cli_newer_than_its_packs_versions_says_so_once_with_what_to_do() {
    let mut h = Harness::new();
    let bin = fake_cli(&h, "2.3.0");
    let text = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        text + &format!(
            "\n[cli.fake]\nargv = [\"{bin}\"]\nquiet_ms = 300\n[cli.fake.patterns]\nversions = \">=1.4, <2\"\n\n[cli.fits]\nargv = [\"{bin}\"]\n[cli.fits.patterns]\nversions = \">=2, <3\"\n"
        ),
    )
    .expect("write config");
    h.start_daemon();
    let work = h.work.display().to_string();
    for (name, cli) in [("a", "fake"), ("b", "fake"), ("c", "fits")] {
        h.ctl_ok(&["spawn", name, "--cli", cli, "--dir", &work]);
    }
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let versions: Vec<(&str, &str)> = list
        .as_array()
        .expect("array")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or(""),
                s["cli_version"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    assert_eq!(
        versions,
        [("a", "2.3.0"), ("b", "2.3.0"), ("c", "2.3.0")],
        "{list}"
    );
    assert!(
        h.ctl_ok(&["show", "a"]).contains("fake 2.3.0"),
        "show names the version"
    );
    h.wait_event(
        "a",
        "the version notice",
        std::time::Duration::from_secs(20),
        |e| e["type"] == "notice" && e["kind"] == "version",
    );
    // Time for a second one to show up, were it (wrongly) told again.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let events = h.events();
    let spawned: Vec<&Value> = events.iter().filter(|e| e["type"] == "spawned").collect();
    assert!(
        spawned.iter().all(|e| e["cli_version"] == "2.3.0"),
        "{spawned:?}"
    );
    // Once: the first session of that CLI at that version says so, not the next, and a CLI
    // inside its range says nothing.
    let notices: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "notice" && e["kind"] == "version")
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0]["session"], "a", "{notices:?}");
    let said = notices[0]["text"].as_str().unwrap_or_default();
    assert!(
        said.contains("fake 2.3.0 is newer than")
            && said.contains(">=1.4, <2")
            && said.contains("patterns test")
            && said.contains("[cli.fake.patterns]"),
        "{said}"
    );
    let doctor = h.ctl(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&doctor.stdout).expect("doctor json");
    let warned: Vec<&Value> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| {
            c["detail"]
                .as_str()
                .is_some_and(|d| d.contains("fake 2.3.0 is newer than"))
        })
        .collect();
    assert_eq!(warned.len(), 1, "{report}");
    assert_eq!(warned[0]["status"], "warn", "{report}");
    let metrics = h.ctl_ok(&["metrics"]);
    assert!(
        metrics.contains("clibot_cli_sessions{cli=\"fake\",version=\"2.3.0\"} 2"),
        "{metrics}"
    );
}

/// A chat that starts a session whose CLI is newer than its pack's range reads the warning.
#[test]
fn a_chat_starting_a_cli_newer_than_its_pack_reads_the_warning() {
    let mut h =
        Harness::with_config("\n[access.telegram]\npolicy = \"allowlist\"\nadmins = [\"100\"]\n");
    let bin = fake_cli(&h, "3.1.0");
    let text = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        text + &format!(
            "\n[cli.fake]\nargv = [\"{bin}\"]\nquiet_ms = 300\n[cli.fake.patterns]\nversions = \">=2, <3\"\n"
        ),
    )
    .expect("write config");
    h.start_daemon();
    let (tg, mut g) = clibot_tests::fake_telegram::with_gateway(&h);
    let work = h.work.display().to_string();
    tg.push_message(100, 100, "Owner", &format!("!!new v fake {work}"));
    tg.wait_sent("the warning in the chat", |s| {
        clibot_tests::fake_telegram::texts(s, 100)
            .iter()
            .any(|t| t.contains("fake 3.1.0 is newer than") && t.contains("patterns test"))
    });
    let _ = g.kill();
    let _ = g.wait();
}

/// A CLI that names a mode its pack does not know (a new version's default, perhaps, which
/// may ask nothing) says so once — the mode and the version in its chats and in `doctor` —
/// while the modes the pack knows say nothing; its footer still means ready.
#[test]
fn a_mode_the_pack_does_not_know_is_named_with_the_version() {
    let mut h = Harness::new();
    let bin = fake_cli(&h, "2.4.0");
    let text = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        text + &format!(
            "\n[cli.modal]\nargv = [\"{bin}\"]\nquiet_ms = 300\n[cli.modal.patterns]\nmodes = ['⏵⏵ (?P<mode>[^\\n(]+?) on']\nknown_modes = [\"auto mode\"]\n"
        ),
    )
    .expect("write config");
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "m", "--cli", "modal", "--dir", &work]);
    h.wait_list("idle", |l| l[0]["state"] == "idle");
    h.ctl_ok(&["send", "m", "echo '⏵⏵ auto mode on (shift+tab to cycle)'"]);
    h.wait_event(
        "m",
        "the known mode shown",
        std::time::Duration::from_secs(20),
        |e| {
            e["type"] == "turn_completed"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("auto mode on"))
        },
    );
    h.ctl_ok(&["send", "m", "echo '⏵⏵ turbo mode on (shift+tab to cycle)'"]);
    let told = h.wait_event(
        "m",
        "the new mode named",
        std::time::Duration::from_secs(20),
        |e| e["type"] == "notice" && e["kind"] == "mode",
    );
    let said = told["text"].as_str().unwrap_or_default();
    assert!(
        said.contains("modal 2.4.0") && said.contains("\"turbo mode on\""),
        "{said}"
    );
    h.ctl_ok(&["send", "m", "echo '⏵⏵ turbo mode on (shift+tab to cycle)'"]);
    h.wait_event(
        "m",
        "the second turn",
        std::time::Duration::from_secs(20),
        |e| {
            e["type"] == "turn_completed"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.matches("turbo").count() >= 1)
                && e["seq"].as_u64() > told["seq"].as_u64()
        },
    );
    let notices = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "notice" && e["kind"] == "mode")
        .count();
    assert_eq!(notices, 1, "told once, not for the known mode");
    let doctor = h.ctl(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&doctor.stdout).expect("doctor json");
    assert!(
        report["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .any(|c| {
                c["detail"].as_str().is_some_and(|d| {
                    d.contains("modal 2.4.0 runs in a mode clibot does not know")
                        && d.contains("turbo mode on")
                })
            }),
        "{report}"
    );
}
