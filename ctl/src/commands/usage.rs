//! `usage`: what the turns cost, from the ledger the daemon keeps (docs/USAGE.md).

use clibot_proto::Client;
use clibot_proto::usage_words::{money, tokens, windows};
use clibot_proto::v1;
use serde_json::json;

use super::output::{now_ms, print_json};

/// `--since`: a span back from now ("7d") or a local date ("2026-11-01", from its midnight UTC).
fn since_ms(since: Option<&str>) -> anyhow::Result<i64> {
    let s = since.unwrap_or("7d").trim();
    if let Ok(d) = clibot_proto::duration::parse_duration(s) {
        return Ok(now_ms() - d.as_millis().min(i64::MAX as u128) as i64);
    }
    let parts: Vec<i64> = s.split('-').filter_map(|p| p.parse().ok()).collect();
    if let [y, m, d] = parts[..]
        && (1970..=9999).contains(&y)
        && (1..=12).contains(&m)
        && (1..=31).contains(&d)
    {
        // Days since the epoch (proleptic Gregorian), then milliseconds.
        let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * m + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return Ok((era * 146_097 + doe - 719_468) * 86_400_000);
    }
    anyhow::bail!("--since {s:?}: give a span back from now (7d, 24h) or a date (2026-11-01)")
}

/// `usage [--by K] [--since D] [--session S] [--json|--csv]`.
pub async fn show(
    c: &mut Client,
    by: &str,
    since: Option<&str>,
    session: Option<String>,
    (json_out, csv): (bool, bool),
) -> anyhow::Result<()> {
    let r = c
        .get_usage(v1::GetUsageRequest {
            by: by.to_string(),
            since_ms: since_ms(since)?,
            session: session.unwrap_or_default(),
        })
        .await?
        .into_inner();
    print(by, &r, (json_out, csv), &[])
}

/// `usage --by machine`: each daemon of `[[gateway.machines]]` asked in turn (only this
/// machine's when none is listed), its turns summed into one row per machine. One that does not
/// answer is named (in `unreachable` with `--json`) and makes the command fail after the rest
/// is printed: a total that silently left a machine out would mislead.
pub async fn by_machine(
    socket: &std::path::Path,
    since: Option<&str>,
    session: Option<String>,
    (json_out, csv): (bool, bool),
) -> anyhow::Result<()> {
    let machines = crate::connect::configured_machines()?;
    let mut targets: Vec<(String, anyhow::Result<clibot_proto::Target>)> = Vec::new();
    if machines.is_empty() {
        targets.push((
            "local".into(),
            Ok(clibot_proto::Target::Socket(socket.to_path_buf())),
        ));
    }
    for m in &machines {
        let name = m.checked_name().map_err(anyhow::Error::msg)?.to_string();
        targets.push((name, m.target(None).map_err(anyhow::Error::msg)));
    }
    let req = v1::GetUsageRequest {
        by: "session".into(),
        since_ms: since_ms(since)?,
        session: session.unwrap_or_default(),
    };
    let mut all = v1::GetUsageResponse::default();
    let mut unreachable: Vec<(String, String)> = Vec::new();
    for (name, target) in targets {
        let asked = async {
            let target = target?;
            let mut c = tokio::time::timeout(
                std::time::Duration::from_secs(20),
                clibot_proto::connect_to(&target),
            )
            .await
            .map_err(|_| anyhow::anyhow!("no answer in 20 s"))??;
            Ok::<_, anyhow::Error>(c.get_usage(req.clone()).await?.into_inner())
        };
        match asked.await {
            Ok(r) => {
                let mut row = v1::UsageRow {
                    key: name.clone(),
                    ..Default::default()
                };
                for x in &r.rows {
                    row.turns += x.turns;
                    row.calls += x.calls;
                    row.input += x.input;
                    row.output += x.output;
                    row.cache_read += x.cache_read;
                    row.cache_write += x.cache_write;
                    row.usd += x.usd;
                    row.priced += x.priced;
                }
                if row.turns > 0 {
                    all.rows.push(row);
                }
                all.windows.extend(r.windows.into_iter().map(|mut w| {
                    w.cli = format!("{name}/{}", w.cli);
                    w
                }));
            }
            Err(e) => unreachable.push((name, format!("{e:#}"))),
        }
    }
    all.rows
        .sort_by_key(|r| std::cmp::Reverse((r.output, r.input)));
    print("machine", &all, (json_out, csv), &unreachable)?;
    if unreachable.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = unreachable
        .iter()
        .map(|(n, e)| format!("{n} ({e})"))
        .collect();
    anyhow::bail!(
        "not counted: {} did not answer; the totals above leave it out",
        names.join(", ")
    )
}

/// Prints a usage view: a table, `--json` or `--csv`; `unreachable` names the machines left out.
fn print(
    by: &str,
    r: &v1::GetUsageResponse,
    (json_out, csv): (bool, bool),
    unreachable: &[(String, String)],
) -> anyhow::Result<()> {
    if json_out {
        let mut v = json!({
            "by": by,
            "rows": r.rows.iter().map(|x| json!({
                "key": x.key, "turns": x.turns, "calls": x.calls, "input": x.input,
                "output": x.output, "cache_read": x.cache_read, "cache_write": x.cache_write,
                "usd": (x.priced > 0).then_some(x.usd), "priced_turns": x.priced,
            })).collect::<Vec<_>>(),
            "windows": r.windows.iter().map(|w| json!({
                "cli": w.cli, "at_ms": w.at_ms,
                "windows": w.windows.iter().map(|x| json!({
                    "name": x.name, "used_percent": x.used_percent, "resets_at_ms": x.resets_at_ms,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        if by == "machine" {
            v["unreachable"] = unreachable
                .iter()
                .map(|(m, e)| json!({"machine": m, "error": e}))
                .collect();
        }
        return print_json(&v);
    }
    if csv {
        println!("{by},turns,calls,input,output,cache_read,cache_write,usd");
        for x in &r.rows {
            let key = if x.key.contains([',', '"', '\n']) {
                format!("\"{}\"", x.key.replace('"', "\"\""))
            } else {
                x.key.clone()
            };
            // Empty when no turn of the row has a price (not a zero: nothing was estimated).
            let usd = if x.priced > 0 {
                format!("{:.4}", x.usd)
            } else {
                String::new()
            };
            println!(
                "{key},{},{},{},{},{},{},{usd}",
                x.turns, x.calls, x.input, x.output, x.cache_read, x.cache_write
            );
        }
        return Ok(());
    }
    if r.rows.is_empty() {
        println!(
            "no turns counted in that time (a CLI that keeps no records of its usage is not counted)"
        );
    } else {
        let priced = r.rows.iter().any(|x| x.priced > 0);
        println!(
            "{:<24} {:>6} {:>8} {:>8} {:>11} {:>12}{}",
            by.to_uppercase(),
            "TURNS",
            "INPUT",
            "OUTPUT",
            "CACHE READ",
            "CACHE WRITE",
            if priced { "  COST (LIST PRICE)" } else { "" }
        );
        for x in &r.rows {
            let cost = match x.priced {
                0 if priced => "  -".to_string(),
                0 => String::new(),
                n if n < x.turns => format!("  {} ({n} of {} turns)", money(x.usd), x.turns),
                _ => format!("  {}", money(x.usd)),
            };
            println!(
                "{:<24} {:>6} {:>8} {:>8} {:>11} {:>12}{cost}",
                x.key,
                x.turns,
                tokens(x.input),
                tokens(x.output),
                tokens(x.cache_read),
                tokens(x.cache_write)
            );
        }
    }
    for w in &r.windows {
        if w.windows.is_empty() {
            println!("{}: its records tell no plan window", w.cli);
        } else {
            println!("{}: {}", w.cli, windows(&w.windows, now_ms()));
        }
    }
    Ok(())
}

/// `budgets [--json]`.
pub async fn budgets(c: &mut Client, json_out: bool) -> anyhow::Result<()> {
    let r = c
        .list_budgets(v1::ListBudgetsRequest {})
        .await?
        .into_inner();
    if json_out {
        return print_json(&json!(
            r.budgets
                .iter()
                .map(|b| json!({
                    "name": b.name, "scope": b.scope, "per": b.per, "used": b.used,
                    "percent": b.percent, "action": b.action, "in_force": b.in_force,
                    "warned": b.warned, "lifted_by": b.lifted_by, "period": b.period,
                }))
                .collect::<Vec<_>>()
        ));
    }
    if r.budgets.is_empty() {
        println!("no budgets: add [[budgets]] to the config (docs/USAGE.md)");
    }
    for b in &r.budgets {
        let state = if b.in_force {
            format!("IN FORCE ({}): clibotctl budget lift {}", b.action, b.name)
        } else if !b.lifted_by.is_empty() {
            format!("lifted by {}", b.lifted_by)
        } else if b.warned {
            "warned".into()
        } else {
            "ok".into()
        };
        println!(
            "{}: {} — {} per {} ({:.0} %), at 100 % {}; {state}",
            b.name, b.scope, b.used, b.per, b.percent, b.action
        );
    }
    Ok(())
}

/// `budget lift NAME`.
pub async fn lift(c: &mut Client, name: String) -> anyhow::Result<()> {
    c.lift_budget(v1::LiftBudgetRequest { name: name.clone() })
        .await?;
    println!("budget {name} lifted for the rest of its period; held input goes now");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_a_span_or_a_date() {
        assert_eq!(since_ms(Some("2026-11-01")).ok(), Some(1_793_491_200_000));
        assert_eq!(since_ms(Some("1970-01-02")).ok(), Some(86_400_000));
        let week = since_ms(None).expect("default");
        assert!((now_ms() - week - 7 * 86_400_000).abs() < 5_000);
        assert!(since_ms(Some("last tuesday")).is_err());
    }
}
