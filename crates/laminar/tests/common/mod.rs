//! `laminar serve` as a child process, for tests that need a real process to kill.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Serve {
    pub child: Child,
    pub addr: String,
}

/// Starts `laminar serve` on an ephemeral port with `dir` as its data directory, and waits
/// for the line that says where it listens.
pub fn serve(dir: &Path) -> Serve {
    serve_at(dir, "127.0.0.1:0")
}

/// Like [`serve`], listening on `listen` (a restart on the address clients already know).
pub fn serve_at(dir: &Path, listen: &str) -> Serve {
    serve_with(dir, listen, &[])
}

/// Like [`serve_at`], with more arguments for `laminar serve` (a `--config` file).
pub fn serve_with(dir: &Path, listen: &str, extra: &[&str]) -> Serve {
    let mut child = Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args([
            "serve",
            "--listen",
            listen,
            "--metrics-listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir)
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("broker printed its address").unwrap();
        if let Some(rest) = line.split("laminar listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep draining stderr so the broker never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Serve { child, addr }
}

impl Drop for Serve {
    /// A test that fails half-way must not leave its broker running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Serve {
    /// SIGKILL: no flush, no clean-shutdown marker.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM: a clean shutdown, which must exit 0.
    pub fn terminate(mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "clean shutdown exits 0: {status}");
    }
}

/// Runs the `laminar` CLI, which must succeed, and returns its stdout.
pub fn laminar(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "laminar {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The high watermark of `topic` partition 0, as a librdkafka consumer sees it.
pub fn high_watermark(addr: &str, topic: &str) -> i64 {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let c: BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", addr)
        .create()
        .unwrap();
    c.fetch_watermarks(topic, 0, std::time::Duration::from_secs(30))
        .unwrap()
        .1
}

/// `laminar topics create NAME --partitions N` against `addr`.
pub fn create_topic(addr: &str, name: &str, partitions: u32) {
    laminar(&[
        "topics",
        "create",
        name,
        "--partitions",
        &partitions.to_string(),
        "--bootstrap",
        addr,
    ]);
}

pub fn repo_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory of Kafka's jars (clients, tools, Streams, Connect), fetched once per test
/// binary by `bench/kafka/fetch-kafka.sh` (Maven; idempotent) into `KAFKA_LIB` (default
/// /tmp/kafka-lib).
pub fn kafka_lib() -> &'static Path {
    use std::path::PathBuf;
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let lib =
            std::env::var_os("KAFKA_LIB").map_or_else(|| PathBuf::from("/tmp/kafka-lib"), PathBuf::from);
        let out = Command::new("bash")
            .arg(repo_root().join("bench/kafka/fetch-kafka.sh"))
            .env("KAFKA_LIB", &lib)
            .output()
            .expect("run bench/kafka/fetch-kafka.sh");
        assert!(
            out.status.success(),
            "fetching Kafka's jars failed (needs mvn and Maven Central): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        lib
    })
}
