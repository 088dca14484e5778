//! The process's own log. Lines go through a bounded queue drained by one thread, so that a
//! slow log disk (or a blocked stderr pipe) can never stall a socket thread (seed 002): when
//! the queue is full the line is dropped and counted.

use std::sync::atomic::{AtomicU64, Ordering};
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

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Queues one line: `seconds.millis LEVEL message`. Use the `info!` and `warn!` macros.
pub fn log(level: &str, message: std::fmt::Arguments<'_>) {
    let ms = now_ms();
    let line = format!("{}.{:03} {level} {message}", ms / 1000, ms % 1000);
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
