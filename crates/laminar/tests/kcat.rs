//! kcat (librdkafka's command-line client) against `laminar serve`: -L, -P and -C, as the
//! README's quickstart runs them. kcat comes from Debian's package; .ci/run installs it.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

#[test]
fn kcat_lists_produces_and_consumes() {
    assert!(
        Command::new("kcat").arg("-V").output().is_ok(),
        "kcat is not installed: apt-get install kcat (.ci/run does this)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let addr = broker.addr.clone();

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

    broker.terminate();
}

/// Two balanced kcat consumers (`kcat -G`) share a topic's partitions.
#[test]
fn two_kcat_group_consumers_share_partitions() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    let addr = broker.addr.clone();
    let out = Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args([
            "topics",
            "create",
            "shared",
            "--partitions",
            "4",
            "--bootstrap",
            &addr,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Each consumer prints the partitions it was assigned (-d cgrp logs the assignment);
    // simpler and sturdier: each prints what it consumes, with the partition.
    let spawn = || {
        Command::new("kcat")
            .args([
                "-b",
                &addr,
                "-u",
                "-G",
                "kgroup",
                "shared",
                "-f",
                "%p %s\n",
                "-X",
                "session.timeout.ms=6000",
                // A member that joined but has not yet looked up where to start would
                // otherwise start at the end, past what the test produces.
                "-X",
                "auto.offset.reset=earliest",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut a = spawn();
    let mut b = spawn();
    // Each consumer's lines, as they come.
    let lines = std::sync::Arc::new(std::sync::Mutex::new([Vec::new(), Vec::new()]));
    let readers: Vec<_> = [&mut a, &mut b]
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let out = c.stdout.take().unwrap();
            let lines = lines.clone();
            std::thread::spawn(move || {
                use std::io::BufRead;
                for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                    lines.lock().unwrap()[i].push(l);
                }
            })
        })
        .collect();
    // The group settles on two members sharing the four partitions before anything is
    // produced, so that no partition moves (and is read twice) after it was read.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = Command::new(env!("CARGO_BIN_EXE_laminar"))
            .args(["groups", "describe", "kgroup", "--bootstrap", &addr])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let members: Vec<&str> = text.lines().filter(|l| l.contains(" member ")).collect();
        let assigned = text.matches("shared-").count();
        if text.contains("state Stable")
            && members.len() == 2
            && members.iter().all(|m| m.contains("shared-"))
            && assigned == 4
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the group settles on two members: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    for p in 0..4 {
        let mut prod = Command::new("kcat")
            .args(["-b", &addr, "-P", "-t", "shared", "-p", &p.to_string()])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        prod.stdin
            .take()
            .unwrap()
            .write_all(format!("m{p}\n").as_bytes())
            .unwrap();
        assert!(prod.wait().unwrap().success());
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while lines.lock().unwrap().iter().map(Vec::len).sum::<usize>() < 4
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for c in [&mut a, &mut b] {
        // SAFETY: signalling our own children; kcat leaves the group on SIGTERM.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    }
    for c in [&mut a, &mut b] {
        c.wait().unwrap();
    }
    for r in readers {
        r.join().unwrap();
    }
    let [got_a, got_b] = lines.lock().unwrap().clone();
    assert!(
        !got_a.is_empty() && !got_b.is_empty(),
        "both consumed: {got_a:?} {got_b:?}"
    );
    let mut all: Vec<String> = got_a.iter().chain(&got_b).cloned().collect();
    all.sort();
    assert_eq!(
        all,
        vec!["0 m0", "1 m1", "2 m2", "3 m3"],
        "each message once: {got_a:?} {got_b:?}"
    );
    broker.terminate();
}
