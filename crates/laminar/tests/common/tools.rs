//! Kafka's own command-line tools (their main classes, on the jars `kafka_lib` fetched),
//! run as child processes.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::kafka_lib;

/// How long a tool may run.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Tools {
    pub bootstrap: String,
    pub log4j: PathBuf,
}

pub struct Ran {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Tools {
    pub fn new(bootstrap: &str, dir: &Path) -> Tools {
        // The tools log through log4j2; warnings and errors go to stderr, nothing to stdout.
        let log4j = dir.join("tools-log4j2.properties");
        std::fs::write(
            &log4j,
            "rootLogger.level=WARN\nrootLogger.appenderRef.err.ref=ERR\nappender.err.type=Console\n\
             appender.err.name=ERR\nappender.err.target=SYSTEM_ERR\nappender.err.layout.type=PatternLayout\n\
             appender.err.layout.pattern=%p %c: %m%n\n",
        )
        .unwrap();
        Tools {
            bootstrap: bootstrap.to_string(),
            log4j,
        }
    }

    /// Runs `class` with `args` and `--bootstrap-server`, and returns what it printed.
    pub fn run(&self, class: &str, args: &[&str]) -> Ran {
        let mut all = vec![class];
        all.extend_from_slice(args);
        // After the arguments: `kafka-cluster` wants its subcommand first.
        all.extend_from_slice(&["--bootstrap-server", &self.bootstrap]);
        self.java(&all)
    }

    /// Runs `java ARGS` with Kafka's jars on the class path (a class and its arguments, or a
    /// single-file program: Java 11+ compiles and runs a `.java` file by itself).
    pub fn java(&self, args: &[&str]) -> Ran {
        let what = args.first().copied().unwrap_or_default();
        let mut child = Command::new("java")
            .arg("-Xmx256m")
            .arg(format!("-Dlog4j2.configurationFile={}", self.log4j.display()))
            .arg("-cp")
            .arg(format!("{}/*", kafka_lib().display()))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("java {what}: {e} (is Java installed?)"));
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            out.read_to_string(&mut s).unwrap();
            s
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            err.read_to_string(&mut s).unwrap();
            s
        });
        let deadline = Instant::now() + TOOL_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("java {args:?} did not finish in {TOOL_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Ran {
            ok: status.success(),
            stdout: reader.join().unwrap(),
            stderr: err_reader.join().unwrap(),
        }
    }

    /// Like [`Tools::run`], for a run that must succeed; returns its stdout.
    pub fn ok(&self, class: &str, args: &[&str]) -> String {
        let r = self.run(class, args);
        assert!(r.ok, "{class} {args:?} failed:\n{}\n{}", r.stdout, r.stderr);
        r.stdout
    }

    /// Like [`Tools::ok`] with `--bootstrap-server` before the arguments, where a tool
    /// (`kafka-transactions`) wants it before its subcommand.
    pub fn ok_bootstrap_first(&self, class: &str, args: &[&str]) -> String {
        let mut all = vec![class, "--bootstrap-server", &self.bootstrap];
        all.extend_from_slice(args);
        let r = self.java(&all);
        assert!(r.ok, "{class} {args:?} failed:\n{}\n{}", r.stdout, r.stderr);
        r.stdout
    }

    /// Topics `t` and `u`, and an ACL that lets alice write `t`, made with Kafka's tools.
    pub fn t_writable_by_alice(&self) {
        for t in ["t", "u"] {
            self.ok(
                "org.apache.kafka.tools.TopicCommand",
                &["--create", "--topic", t, "--partitions", "1"],
            );
        }
        let mut add = vec!["--add"];
        add.extend_from_slice(&ALICE_WRITES_T);
        self.ok("org.apache.kafka.tools.AclCommand", &add);
    }
}

/// The ACL that lets alice write topic `t`, in kafka-acls's (and `laminar acls`'s) flags.
pub const ALICE_WRITES_T: [&str; 6] = [
    "--allow-principal",
    "User:alice",
    "--operation",
    "Write",
    "--topic",
    "t",
];
