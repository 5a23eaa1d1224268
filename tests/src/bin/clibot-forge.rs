//! A client that claims a chat identity it does not have: run from inside a session by the
//! owner-boundary tests, as an attacker would. `clibot-forge SOCKET PLATFORM USER ACTION [ARG]`
//! with ACTION `list` (prints the session names it is shown), `screen NAME`, `approve CODE`
//! or `spawn NAME CLI DIR [PROFILE]`; exits 0 when the daemon did what was asked, 3 when it refused.

use clibot_proto::v1;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match rt.block_on(run(&args)) {
        Ok(out) => {
            println!("{out}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            println!("refused: {e}");
            std::process::ExitCode::from(3)
        }
    }
}

fn claim<T>(msg: T, platform: &str, user: &str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    for (k, v) in [
        ("clibot-platform", platform),
        ("clibot-user", user),
        ("clibot-chat", user),
    ] {
        if let Ok(v) = v.parse() {
            req.metadata_mut().insert(k, v);
        }
    }
    req
}

async fn run(args: &[String]) -> Result<String, String> {
    let [socket, platform, user, action, rest @ ..] = args else {
        return Err("usage: clibot-forge SOCKET PLATFORM USER ACTION [ARG]".into());
    };
    let mut c = clibot_proto::connect(std::path::Path::new(socket))
        .await
        .map_err(|e| e.to_string())?;
    let arg = |i: usize| rest.get(i).cloned().unwrap_or_default();
    match action.as_str() {
        "list" => {
            let r = c
                .list_sessions(claim(v1::ListSessionsRequest::default(), platform, user))
                .await
                .map_err(|s| s.message().to_string())?;
            Ok(r.into_inner()
                .sessions
                .iter()
                .map(|s| s.name.clone())
                .collect::<Vec<_>>()
                .join(","))
        }
        "screen" => {
            let req = v1::CaptureRequest {
                session: arg(0),
                ..Default::default()
            };
            let r = c
                .capture(claim(req, platform, user))
                .await
                .map_err(|s| s.message().to_string())?;
            Ok(r.into_inner().text)
        }
        "approve" => {
            let req = v1::ApprovePairingRequest { code: arg(0) };
            c.approve_pairing(claim(req, platform, user))
                .await
                .map_err(|s| s.message().to_string())?;
            Ok("approved".into())
        }
        "spawn" => {
            let req = v1::SpawnSessionRequest {
                name: arg(0),
                cli: arg(1),
                dir: arg(2),
                profile: arg(3),
                ..Default::default()
            };
            let r = c
                .spawn_session(claim(req, platform, user))
                .await
                .map_err(|s| s.message().to_string())?;
            Ok(format!("spawned {}", r.into_inner().name))
        }
        other => Err(format!("unknown action {other}")),
    }
}
