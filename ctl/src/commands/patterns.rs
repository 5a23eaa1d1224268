//! `clibotctl patterns test`: a captured screen read by a CLI's pattern pack, so that a user
//! who sees clibot miss a dialog (a CLI redrew it) can fix the pack and check the fix.

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use clibot_proto::{Client, v1};

pub async fn test(
    c: &mut Client,
    file: &Path,
    cli: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let screen = if file == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the screen from stdin")?;
        s
    } else {
        std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the screen from {}", file.display()))?
    };
    let r = c
        .test_patterns(v1::TestPatternsRequest {
            screen,
            cli: cli.unwrap_or_default(),
        })
        .await?
        .into_inner();
    if json {
        let prompt = r.prompt.as_ref().map(|p| {
            serde_json::json!({
                "kind": p.kind_name(), "text": p.text, "options": p.options, "subject": p.subject,
                "subject_kind": p.subject_kind().name(), "context": p.context, "warning": p.warning,
            })
        });
        let v = serde_json::json!({
            "pack": r.pack, "prompt": prompt, "busy": r.busy, "idle": r.idle, "ready": r.ready,
            "interrupted": r.interrupted, "settled": r.settled,
            "error": (!r.error_kind.is_empty()).then(|| serde_json::json!({
                "kind": r.error_kind, "line": r.error_line,
            })),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let yes = |b: bool| if b { "yes" } else { "no" };
    println!("pack:        {}", r.pack);
    match &r.prompt {
        Some(p) => {
            println!("prompt:      {} — {}", p.kind_name(), p.text);
            if p.options.is_empty() {
                println!("options:     none (answered with text)");
            } else {
                let opts: Vec<String> = p
                    .options
                    .iter()
                    .enumerate()
                    .map(|(i, o)| format!("{}. {o}", i + 1))
                    .collect();
                println!("options:     {}", opts.join("  "));
            }
            if !p.subject.is_empty() {
                println!("subject:     {} ({})", p.subject, p.subject_kind().name());
            }
            if !p.context.is_empty() {
                println!("context:     {}", p.context.replace('\n', " / "));
            }
        }
        None => println!("prompt:      none"),
    }
    println!(
        "busy: {}  idle: {}  ready: {}  interrupted: {}  settled: {}",
        yes(r.busy),
        yes(r.idle),
        yes(r.ready),
        yes(r.interrupted),
        yes(r.settled)
    );
    if !r.error_kind.is_empty() {
        println!("error:       {} — {}", r.error_kind, r.error_line);
    }
    Ok(())
}
