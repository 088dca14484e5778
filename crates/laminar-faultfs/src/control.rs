//! The control socket: one command per line, one answer per line (`ok ...` or `err ...`).
//!
//! ```text
//! delay OP GLOB MS [MAX_MS]   delay OP (read, write, fsync, create, fallocate, rename, unlink,
//!                              truncate, all) on matching paths
//! fail OP GLOB ERRNO          fail OP on matching paths with ENOSPC, EIO or EDQUOT
//! clear                       remove every delay and failure
//! powercut [torn]             drop unsynced writes (lazy mode); torn keeps a random prefix
//! sync                        sync(2): every unsynced page to the disk, every name durable
//! stats                       a JSON object of counters
//! ```

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::fs::Shared;
use crate::rules::{parse_errno, Op};

fn number(s: Option<&&str>, what: &str) -> Result<u64, String> {
    s.ok_or(format!("missing {what}"))?
        .parse()
        .map_err(|e| format!("bad {what}: {e}"))
}

/// Carries out one command line; the answer without its `ok `/`err ` prefix.
pub fn execute(shared: &Shared, line: &str) -> Result<String, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["delay", op, glob, rest @ ..] => {
            let op = Op::parse(op)?;
            let min = number(rest.first(), "milliseconds")?;
            let max = if rest.len() > 1 {
                number(rest.get(1), "max milliseconds")?
            } else {
                min
            };
            shared.rules.write().unwrap().delay(op, glob, min, max)?;
            Ok(String::new())
        }
        ["fail", op, glob, errno] => {
            let op = Op::parse(op)?;
            shared
                .rules
                .write()
                .unwrap()
                .fail(op, glob, parse_errno(errno)?)?;
            Ok(String::new())
        }
        ["clear"] => {
            shared.rules.write().unwrap().clear();
            Ok(String::new())
        }
        ["powercut", rest @ ..] => {
            if !shared.lazy() {
                return Err("a power cut needs the mount's --lazy mode".into());
            }
            let torn = match rest {
                [] => false,
                ["torn"] => true,
                _ => return Err("powercut takes nothing or `torn`".into()),
            };
            let cut = shared.power_cut(torn).map_err(|e| format!("power cut: {e}"))?;
            Ok(serde_json::json!({
                "files": cut.files,
                "bytes_dropped": cut.bytes_dropped,
                "bytes_kept": cut.bytes_kept,
                "names_undone": cut.names_undone,
            })
            .to_string())
        }
        ["sync"] => {
            let bytes = shared.sync_all().map_err(|e| format!("sync: {e}"))?;
            Ok(serde_json::json!({ "bytes_synced": bytes }).to_string())
        }
        ["stats"] => {
            let s = &shared.stats;
            Ok(serde_json::json!({
                "delayed": s.delayed.load(Ordering::Relaxed),
                "delaying_now": s.delaying_now.load(Ordering::Relaxed),
                "failed": s.failed.load(Ordering::Relaxed),
                "power_cuts": s.power_cuts.load(Ordering::Relaxed),
                "unsynced_bytes": shared.unsynced_bytes(),
            })
            .to_string())
        }
        _ => Err(format!("unknown command {line:?}")),
    }
}

/// Serves the control socket until the process exits.
pub fn serve(listener: UnixListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let shared = shared.clone();
        std::thread::spawn(move || {
            let mut out = match conn.try_clone() {
                Ok(c) => c,
                Err(_) => return,
            };
            for line in BufReader::new(conn).lines() {
                let Ok(line) = line else { return };
                let answer = match execute(&shared, &line) {
                    Ok(s) if s.is_empty() => "ok\n".to_string(),
                    Ok(s) => format!("ok {s}\n"),
                    Err(e) => format!("err {e}\n"),
                };
                if out.write_all(answer.as_bytes()).is_err() {
                    return;
                }
            }
        });
    }
}

/// Sends one command to a mounted faultfs; the text after `ok`, or the error it gave.
pub fn command(socket: &Path, line: &str) -> anyhow::Result<String> {
    let mut s = UnixStream::connect(socket)
        .map_err(|e| anyhow::anyhow!("faultfs control socket {}: {e}", socket.display()))?;
    s.write_all(format!("{}\n", line.trim()).as_bytes())?;
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer)?;
    let answer = answer.trim_end();
    match answer.strip_prefix("ok") {
        Some(rest) => Ok(rest.trim().to_string()),
        None => anyhow::bail!("faultfs {line:?}: {answer}"),
    }
}
