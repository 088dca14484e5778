//! The process's own log. Lines go through a bounded queue drained by one thread, so that a
//! slow log disk (or a blocked stderr pipe) can never stall a socket thread (seed 002): when
//! the queue is full the line is dropped and counted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::OnceLock;

/// Lines that may wait for the writer thread.
pub const LOG_QUEUE_LINES_MAX: usize = 10_000;

static SENDER: OnceLock<SyncSender<String>> = OnceLock::new();
pub static DROPPED_LINES: AtomicU64 = AtomicU64::new(0);

fn sender() -> &'static SyncSender<String> {
    SENDER.get_or_init(|| {
        let (tx, rx) = sync_channel::<String>(LOG_QUEUE_LINES_MAX);
        std::thread::Builder::new()
            .name("laminar-log".into())
            .spawn(move || {
                use std::io::Write;
                let mut reported = 0;
                for line in rx {
                    // Locked per line, never held while waiting: a panic message or a
                    // test's own output must be able to reach stderr too.
                    let mut err = std::io::stderr().lock();
                    let dropped = DROPPED_LINES.load(Ordering::Relaxed);
                    if dropped > reported {
                        let _ = writeln!(
                            err,
                            "[log] {} lines dropped: the log queue was full",
                            dropped - reported
                        );
                        reported = dropped;
                    }
                    let _ = writeln!(err, "{line}");
                }
            })
            .expect("spawn log thread");
        tx
    })
}

/// How lines are written: for a person (the default) or for a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `2026-11-29T07:01:02.123Z WARN message`: RFC 3339, UTC, milliseconds.
    Text,
    /// One JSON object a line: `{"time":"2026-11-29T07:01:02.123Z","level":"WARN","message":"..."}`.
    Json,
}

static JSON: AtomicBool = AtomicBool::new(false);

/// Sets the format of every line queued from now on.
pub fn set_format(format: LogFormat) {
    JSON.store(format == LogFormat::Json, Ordering::Relaxed);
}

/// `at` as RFC 3339 in UTC with milliseconds, as Kafka's users read dates.
pub fn rfc3339_ms(at: std::time::SystemTime) -> String {
    let t = time::OffsetDateTime::from(at);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

/// One line in `format`, without its newline.
fn line(
    format: LogFormat,
    at: std::time::SystemTime,
    level: &str,
    message: std::fmt::Arguments<'_>,
) -> String {
    let time = rfc3339_ms(at);
    match format {
        LogFormat::Text => format!("{time} {level} {message}"),
        // Written in this order (time first, as a person scanning the file wants it);
        // the message escaped by serde_json.
        LogFormat::Json => format!(
            r#"{{"time":"{time}","level":"{level}","message":{}}}"#,
            serde_json::Value::String(message.to_string())
        ),
    }
}

/// Queues one line: `time LEVEL message` (or its JSON). Use the `info!` and `warn!` macros.
pub fn log(level: &str, message: std::fmt::Arguments<'_>) {
    let format = if JSON.load(Ordering::Relaxed) {
        LogFormat::Json
    } else {
        LogFormat::Text
    };
    let line = line(format, std::time::SystemTime::now(), level, message);
    if let Err(TrySendError::Full(_)) = sender().try_send(line) {
        DROPPED_LINES.fetch_add(1, Ordering::Relaxed);
    }
}

#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::log("INFO", format_args!($($arg)*)) };
}

#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log::log("WARN", format_args!($($arg)*)) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn lines_carry_rfc3339_utc_milliseconds_and_json_escapes_the_message() {
        // 2026-11-29T07:01:02.345Z
        let at = UNIX_EPOCH + Duration::from_millis(1_795_935_662_345);
        assert_eq!(rfc3339_ms(at), "2026-11-29T07:01:02.345Z");
        assert_eq!(
            line(LogFormat::Text, at, "WARN", format_args!("a {}", 1)),
            "2026-11-29T07:01:02.345Z WARN a 1"
        );
        let json = line(LogFormat::Json, at, "INFO", format_args!("say \"hi\"\n"));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["time"], "2026-11-29T07:01:02.345Z");
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["message"], "say \"hi\"\n");
        assert!(!json.contains('\n'), "one line: {json}");
    }
}
