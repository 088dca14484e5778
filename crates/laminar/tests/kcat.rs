//! kcat (librdkafka's command-line client) against `laminar serve`: -L, -P and -C, as the
//! README's quickstart runs them. kcat comes from Debian's package; .ci/run installs it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn kcat_lists_produces_and_consumes() {
    assert!(
        Command::new("kcat").arg("-V").output().is_ok(),
        "kcat is not installed: apt-get install kcat (.ci/run does this)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let mut broker = Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(tmp.path().join("data"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(broker.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().unwrap().unwrap();
        if let Some(rest) = line.split("laminar listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});

    let mut p = Command::new("kcat")
        .args(["-b", &addr, "-P", "-t", "quickstart", "-K:"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin
        .take()
        .unwrap()
        .write_all(b"k1:hello\nk2:laminar\nk3:world\n")
        .unwrap();
    assert!(p.wait().unwrap().success());

    let out = Command::new("kcat")
        .args([
            "-b",
            &addr,
            "-C",
            "-t",
            "quickstart",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%k=%s@%o\n",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "k1=hello@0\nk2=laminar@1\nk3=world@2\n"
    );

    let out = Command::new("kcat").args(["-b", &addr, "-L"]).output().unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        listing.contains("topic \"quickstart\" with 1 partitions"),
        "{listing}"
    );

    // SAFETY: signalling our own child; SIGTERM is a clean shutdown.
    unsafe { libc::kill(broker.id() as i32, libc::SIGTERM) };
    assert!(broker.wait().unwrap().success());
}
